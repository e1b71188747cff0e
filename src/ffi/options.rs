//! Options from Lisp: the limits of a write and the agent-loop options, read
//! by key.

use super::cache::{read_cached, LastRead};
use super::errors::invalid;
use super::input::{count_arg, is, symbol_name, to_input};
use super::symbols::*;
use crate::session::{LoopOptions, Options};
use crate::validate::{quote, Input, InvalidInput, Limits, ToolStyle};
use emacs::{Env, Result, Value};

/// The limits of a write, from the Lisp options `efrit-todo-max-items' and
/// `efrit-todo-max-content-length'.
pub(super) fn limits(env: &Env, max_items: Value, max_content_chars: Value) -> Result<Limits> {
    Ok(Limits {
        max_items: count_arg(env, max_items, "max-items")?,
        max_content_chars: count_arg(env, max_content_chars, "max-content")?,
        ..Limits::default()
    })
}

/// The options of a write: its limits, and how long a list the result
/// shows whole (`efrit-todo-full-list-threshold').
pub(super) fn options(
    env: &Env,
    max_items: Value,
    max_content_chars: Value,
    full_list_up_to: Value,
) -> Result<Options> {
    Ok(Options {
        limits: limits(env, max_items, max_content_chars)?,
        full_list_up_to: count_arg(env, full_list_up_to, "full-up-to")?,
    })
}

/// Reads the loop options plist the Lisp side builds from its defcustoms
/// (`efrit-todo--loop-option-keys' names the keys).  A key left out keeps
/// its default; an unknown key or a value of the wrong type is the
/// caller's mistake, named.
pub(super) fn loop_options(env: &Env, plist: Value) -> Result<LoopOptions> {
    // Only a plist not seen before is checked and read.
    read_cached(&LOOP_OPTIONS, env, plist, || read_loop_options(env, plist))
}

thread_local! {
    /// The options plist read last.  `efrit-todo--loop-options' hands the
    /// same plist back while no option changes, and never alters one it
    /// made, so a plist seen before need not be read again: that is some
    /// fifty module calls saved on every tool call.
    static LOOP_OPTIONS: LastRead<LoopOptions> = const { LastRead::new() };
}

/// Where each key of the options plist goes.
fn set_option(options: &mut LoopOptions, key: &str, value: OptionValue) -> Option<()> {
    let limits = &mut options.breaker;
    let guide = &mut options.guide;
    match key {
        ":without-progress" => limits.without_progress = value.count()?,
        ":same-tool" => limits.same_tool = value.count()?,
        ":identical" => limits.identical = value.count()?,
        ":error-warn" => limits.error_warn = value.count()?,
        ":error-trip" => limits.error_trip = value.count()?,
        ":oscillation" => limits.oscillation = value.count()?,
        ":churn" => limits.churn = value.count()?,
        ":hard-cap" => limits.hard_cap = value.count()?,
        ":max-continuations" => guide.max_continuations = value.count()?,
        ":reminder-after" => guide.reminder_after = value.count()?,
        ":reminders" => guide.reminders = value.flag(),
        ":auto-complete" => options.auto_complete = value.flag(),
        ":max-result-chars" => options.max_result_chars = value.count()? as usize,
        ":tool-style" => options.set_style(value.style()?),
        _ => return None,
    }
    Some(())
}

/// An option's value: a count (a natural number; a negative one counts as
/// 0, as the defcustoms' :type allows only naturals anyway), a flag, or a
/// tool style (a name; nil is the default).
enum OptionValue {
    Number(i64),
    Style(Option<ToolStyle>),
    Other { non_nil: bool },
}

impl OptionValue {
    fn count(&self) -> Option<u32> {
        match self {
            OptionValue::Number(n) => Some(u32::try_from((*n).max(0)).unwrap_or(u32::MAX)),
            OptionValue::Style(_) | OptionValue::Other { .. } => None,
        }
    }

    fn flag(&self) -> bool {
        match self {
            OptionValue::Number(_) | OptionValue::Style(_) => true,
            OptionValue::Other { non_nil } => *non_nil,
        }
    }

    fn style(&self) -> Option<ToolStyle> {
        match self {
            OptionValue::Style(style) => *style,
            _ => None,
        }
    }
}

/// The name a tool style VALUE gives: a symbol's or a string's, None for
/// nil (the default style), and a description of anything else.
fn style_name(env: &Env, value: Value) -> Result<Option<String>> {
    if value.is_not_nil() {
        Ok(Some(match to_input(env, value, 0)? {
            Input::Str(name) => name,
            Input::Unsupported(_) => symbol_name(value)?,
            other => other.describe(),
        }))
    } else {
        Ok(None)
    }
}

fn read_loop_options(env: &Env, plist: Value) -> Result<LoopOptions> {
    let mut options = LoopOptions::default();
    let mut cell = plist;
    let mut pairs = 0;
    while cell.is_not_nil() {
        pairs += 1;
        if pairs > 64 || !is(env, env.type_of(cell)?, ty_cons) {
            return invalid(env, InvalidInput::new("options", "expected a plist"));
        }
        let key = cell.car()?;
        let rest = cell.cdr()?;
        if !is(env, env.type_of(rest)?, ty_cons) {
            return invalid(env, InvalidInput::new("options", "expected a plist"));
        }
        let value = rest.car()?;
        cell = rest.cdr()?;
        let name = if is(env, env.type_of(key)?, ty_symbol) {
            symbol_name(key)?
        } else {
            String::new()
        };
        let read = if is(env, env.type_of(value)?, ty_integer) {
            OptionValue::Number(value.into_rust()?)
        } else if name == ":tool-style" {
            // Only this key's value is a name: the others are never read
            // as one, which would cost a module call each.
            let style = style_name(env, value)?;
            match style.as_deref().map(ToolStyle::parse) {
                None => OptionValue::Style(Some(ToolStyle::Todo)),
                Some(Some(style)) => OptionValue::Style(Some(style)),
                Some(None) => {
                    let got = style.unwrap_or_default();
                    return invalid(
                        env,
                        InvalidInput::new(
                            "options.tool-style",
                            format!("expected todo, tasks or both, got {}", quote(&got)),
                        ),
                    );
                }
            }
        } else {
            OptionValue::Other {
                non_nil: value.is_not_nil(),
            }
        };
        if set_option(&mut options, &name, read).is_none() {
            let field = format!("options.{}", name.trim_start_matches(':'));
            let problem = if name.starts_with(':') {
                "unknown option, or a value of the wrong type (a count must be an integer)"
            } else {
                "expected a keyword"
            };
            return invalid(env, InvalidInput::new(&field, problem));
        }
    }
    Ok(options)
}

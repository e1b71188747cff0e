//! The Emacs side of the module: the only code that touches the emacs
//! crate.  It reads Lisp values into the plain types of the pure modules,
//! calls them, and turns what they return into Lisp values or errors.
//!
//! Lisp calls the defuns as `efrit-todo--module-NAME', through
//! lisp/efrit-todo.el, never directly.  By file:
//! - list: todo_write, the list, user edits, Efrit's compatible calls;
//! - agent: the breaker around tool calls, turns, pauses, stops, the report;
//! - storage: history, undo, saves and restore;
//! - shared: lists shared with other Emacsen, changed under the lock;
//! - team: sub-agents start and end, and the agent a call is made for;
//! - efrit_struct: `structs', the list in the shape of Efrit's item struct;
//! - input: `table-entry', the callback that walks hash tables;
//! - here: `version' and `panic-for-test'.
//!
//! The rest is plumbing: input and output convert values, options reads
//! option plists by key, cache remembers objects read last, errors turns
//! validation errors, storage failures and panics into the Lisp errors
//! (which Lisp defines), symbols interns the symbols once.

mod agent;
mod cache;
mod efrit_struct;
mod errors;
mod input;
mod list;
mod options;
mod output;
mod raw;
mod shared;
mod storage;
mod symbols;
mod team;

use emacs::{defun, Env, IntoLisp, Result, Value};

use errors::guarded;
use input::{ABSENT, KNOWN_KEYS, KNOWN_KEY_REFS, USUAL_COUNT};

emacs::plugin_is_GPL_compatible!();

#[emacs::module(
    name = "efrit-todo-module",
    defun_prefix = "efrit-todo--module",
    separator = "-",
    mod_in_name = false
)]
fn init(env: &Env) -> Result<()> {
    // A panic is reported to Lisp as an error with its message; the default
    // hook would also print a backtrace over the terminal Emacs may be
    // running in.
    std::panic::set_hook(Box::new(|_| {}));
    let keys = KNOWN_KEYS
        .iter()
        .map(|key| Ok((*key, key.into_lisp(env)?.make_global_ref())))
        .collect::<Result<Vec<_>>>()?;
    let _ = KNOWN_KEY_REFS.set(keys);
    let absent = env
        .call("make-symbol", ("efrit-todo-absent",))?
        .make_global_ref();
    let _ = ABSENT.set(absent);
    let _ = USUAL_COUNT.set(3.into_lisp(env)?.make_global_ref());
    raw::init(env);
    register_optional(env)?;
    Ok(())
}

/// The defuns with trailing optional arguments, which `#[defun]` cannot
/// declare: registered by hand with their range of arities.
fn register_optional(env: &Env) -> Result<()> {
    use emacs::func::Manage;
    let functions = [
        (
            "write",
            emacs::lambda!(env, list::write_call, 7..10, "The todo_write tool for SESSION.\n\n(fn SESSION INPUT MAX-ITEMS MAX-CONTENT FULL-UP-TO AUTO-COMPLETE KNOWN-TOOLS &optional MAX-DESCRIPTION MAX-BLOCKERS MIRROR)")?,
        ),
        (
            "task-tool",
            emacs::lambda!(env, list::task_tool_call, 3..8, "The Task tool TOOL for SESSION with INPUT.\n\n(fn SESSION TOOL INPUT &optional MAX-ITEMS MAX-CONTENT FULL-UP-TO MAX-DESCRIPTION MAX-BLOCKERS)")?,
        ),
        (
            "tool-schemas",
            emacs::lambda!(env, list::tool_schemas_call, 0..1, "The tool schemas of STYLE.\n\n(fn &optional STYLE)")?,
        ),
        (
            "prompt-guidance",
            emacs::lambda!(env, list::prompt_guidance_call, 2..3, "The system prompt's part for SESSION.\n\n(fn SESSION FULL-UP-TO &optional STYLE)")?,
        ),
        (
            "analyze-request",
            emacs::lambda!(env, agent::analyze_request_call, 1..2, "Whether TEXT looks like several steps, and the suggestion for STYLE.\n\n(fn TEXT &optional STYLE)")?,
        ),
        (
            "user-edit",
            emacs::lambda!(env, list::user_edit_call, 6..7, "One edit by the user.\n\n(fn SESSION OP ID ARG MAX-ITEMS MAX-CONTENT &optional MAX-BLOCKERS)")?,
        ),
    ];
    for (name, function) in functions {
        env.fset(&format!("efrit-todo--module-{name}"), function)?;
    }
    Ok(())
}

/// The version of this module; the Lisp side refuses a module that differs.
#[defun]
fn version() -> Result<String> {
    Ok(env!("CARGO_PKG_VERSION").to_string())
}

/// Panics on purpose, so the tests can prove a panic becomes a Lisp error.
#[defun]
fn panic_for_test<'e>(env: &'e Env, message: Value<'e>) -> Result<()> {
    guarded(env, || {
        let message = input::text_arg(env, message, "message")?;
        panic!("{message}")
    })
}

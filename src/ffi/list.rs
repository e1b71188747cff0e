//! Defuns on todo lists: todo_write, the list, user edits and the Efrit-
//! compatible calls.

use super::cache::{session_name, with_existing};
use super::efrit_struct::refresh_after_write;
use super::errors::{checked, guarded, valid};
use super::input::{count_arg, recycle, text_arg, to_input, todo_write_input, tool_input};
use super::options::{limits, options};
use super::output::{item_plist, item_plist_in, items_list, json_to_lisp, lisp_text};
use super::raw::{Handle, Raw};
use super::symbols::*;
use super::team::acting_agent;
use crate::model::Status;
use crate::session::{registry, ExternalItem, Session, UserEdit};
use crate::validate::{
    self, checked_text, non_blank, parse_status, Input, InvalidInput, Limits, ToolStyle,
};
use emacs::{defun, CallEnv, Env, IntoLisp, Result, Value};

/// A todo_write's input, with the direct calls that read it when they
/// can be made (see raw.rs).
struct WriteInput<'e> {
    value: Value<'e>,
    direct: Option<(Raw<'e>, Handle<'e>)>,
}

impl<'e> WriteInput<'e> {
    fn read(self, env: &'e Env) -> Result<Input> {
        if let Some((raw, handle)) = &self.direct {
            if let Some(input) = todo_write_input(raw, *handle)? {
                return Ok(input);
            }
        }
        valid(env, tool_input(env, self.value)?)
    }
}

/// The todo_write tool for SESSION: validate INPUT, reconcile, return the
/// result text.
#[allow(clippy::too_many_arguments)]
fn write<'e>(
    env: &'e Env,
    session: Value<'e>,
    input: WriteInput<'e>,
    max_items: Value<'e>,
    max_content: Value<'e>,
    full_up_to: Value<'e>,
    auto_complete: Value<'e>,
    known_tools: Value<'e>,
    max_description: Option<Value<'e>>,
    max_blockers: Option<Value<'e>>,
    mirror: Option<Value<'e>>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let input = input.read(env)?;
        let mut options = options(env, max_items, max_content, full_up_to)?;
        graph_limits(env, &mut options.limits, max_description, max_blockers)?;
        let known_tools = match to_input(env, known_tools, 0)? {
            Input::Array(names) => names
                .into_iter()
                .filter_map(|n| if let Input::Str(s) = n { Some(s) } else { None })
                .collect(),
            _ => Vec::new(),
        };
        let agent = acting_agent(env)?;
        let text = registry()
            .session(&session)
            .write_as_agent(agent.as_deref(), |s| {
                s.write(&input, &options, auto_complete.is_not_nil(), known_tools)
                    .map(|outcome| outcome.text)
            });
        recycle(input);
        let text = valid(env, text)?;
        // MIRROR is Efrit's structs of this list (`efrit-todo--current-todos'),
        // brought up to date here when they can be; otherwise the Lisp side
        // is told to read them afresh.
        if let Some(old) = mirror.filter(Value::is_not_nil) {
            if !refresh_after_write(env, &session, old)? {
                env.call(fn_set, (var_mirror_session, ()))?;
            }
        }
        lisp_text(env, &text)
    })
}

/// The limits of the task graph, when the caller gives them (nil keeps
/// the defaults).
fn graph_limits(
    env: &Env,
    limits: &mut crate::validate::Limits,
    max_description: Option<Value>,
    max_blockers: Option<Value>,
) -> Result<()> {
    if let Some(value) = max_description.filter(|v| v.is_not_nil()) {
        limits.max_description_chars = count_arg(env, value, "max-description")?;
    }
    if let Some(value) = max_blockers.filter(|v| v.is_not_nil()) {
        limits.max_blockers = count_arg(env, value, "max-blockers")?;
    }
    Ok(())
}

/// One of the Task tools (TaskCreate, TaskUpdate, TaskGet, TaskList) for
/// SESSION with INPUT (as for todo_write; nil for TaskList): returns the
/// result text.  The limits are those of `write'.
#[allow(clippy::too_many_arguments)]
fn task_tool<'e>(
    env: &'e Env,
    session: Value<'e>,
    tool: Value<'e>,
    input: Value<'e>,
    max_items: Option<Value<'e>>,
    max_content: Option<Value<'e>>,
    full_up_to: Option<Value<'e>>,
    max_description: Option<Value<'e>>,
    max_blockers: Option<Value<'e>>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let tool = text_arg(env, tool, "tool")?;
        let input = if input.is_not_nil() {
            valid(env, tool_input(env, input)?)?
        } else {
            Input::Null
        };
        let mut options = crate::session::Options::default();
        if let Some(value) = max_items.filter(|v| v.is_not_nil()) {
            options.limits.max_items = count_arg(env, value, "max-items")?;
        }
        if let Some(value) = max_content.filter(|v| v.is_not_nil()) {
            options.limits.max_content_chars = count_arg(env, value, "max-content")?;
        }
        if let Some(value) = full_up_to.filter(|v| v.is_not_nil()) {
            options.full_list_up_to = count_arg(env, value, "full-up-to")?;
        }
        graph_limits(env, &mut options.limits, max_description, max_blockers)?;
        let agent = acting_agent(env)?;
        let text = registry()
            .session(&session)
            .write_as_agent(agent.as_deref(), |s| s.task_tool(&tool, &input, &options));
        lisp_text(env, &valid(env, text)?)
    })
}

/// The tool style STYLE names: "todo", "tasks" or "both" (a string or a
/// symbol); nil is "todo".
pub(super) fn style_arg(env: &Env, style: Option<Value>) -> Result<ToolStyle> {
    let Some(style) = style.filter(|v| v.is_not_nil()) else {
        return Ok(ToolStyle::Todo);
    };
    let name = match to_input(env, style, 0)? {
        Input::Str(name) => name,
        Input::Unsupported(_) => super::input::symbol_name(style)?,
        other => other.describe(),
    };
    valid(
        env,
        ToolStyle::parse(&name).ok_or_else(|| {
            InvalidInput::new(
                "style",
                format!(
                    "expected todo, tasks or both, got {}",
                    validate::quote(&name)
                ),
            )
        }),
    )
}

/// The items of SESSION, each as a plist; nil for an unknown session.
#[defun]
fn items<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            items_list(env, s.map(|s| s.items.as_slice()).unwrap_or_default())
        })
    })
}

/// The counts of SESSION by status, as (:total :pending :in-progress
/// :completed :cancelled).
#[defun]
fn counts<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            let c = s.map(Session::counts).unwrap_or_default();
            env.list([
                kw_total.bind(env),
                (c.total as i64).into_lisp(env)?,
                kw_pending.bind(env),
                (c.pending as i64).into_lisp(env)?,
                kw_in_progress.bind(env),
                (c.in_progress as i64).into_lisp(env)?,
                kw_completed.bind(env),
                (c.completed as i64).into_lisp(env)?,
                kw_cancelled.bind(env),
                (c.cancelled as i64).into_lisp(env)?,
            ])
        })
    })
}

/// The item of SESSION in progress as a plist, or nil.
#[defun]
fn current<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            match s.and_then(|s| {
                Some((
                    s,
                    s.items
                        .iter()
                        .position(|i| i.status == Status::InProgress)?,
                ))
            }) {
                Some((s, n)) => item_plist_in(env, &s.items, n),
                None => ().into_lisp(env),
            }
        })
    })
}

/// The item of SESSION with ID as a plist, or nil.
#[defun]
fn find<'e>(env: &'e Env, session: Value<'e>, id: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let id = text_arg(env, id, "id")?;
        with_existing(env, session, |env, s| {
            match s.and_then(|s| Some((s, s.items.iter().position(|i| i.id == id)?))) {
                Some((s, n)) => item_plist_in(env, &s.items, n),
                None => ().into_lisp(env),
            }
        })
    })
}

/// Forgets SESSION but for the ids it issued and its history, where the
/// reset is recorded and can be undone.
#[defun]
fn reset<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    guarded(env, || {
        let session = session_name(env, session)?;
        // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
        // arms a breaker, and the next `before_tool' clears what is stale.
        registry().reset(&session);
        Ok(())
    })
}

/// The names of the sessions this Emacs holds.
#[defun]
fn sessions(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let names = registry().names();
        let values = names
            .iter()
            .map(|n| n.as_str().into_lisp(env))
            .collect::<Result<Vec<_>>>()?;
        env.list(&values)
    })
}

/// The JSON schemas of the tools of STYLE ("todo": todo_write and
/// todo_pause; "tasks": the Task tools and todo_pause; "both"), as Lisp data.
fn tool_schemas<'e>(env: &'e Env, style: Option<Value<'e>>) -> Result<Value<'e>> {
    guarded(env, || {
        let style = style_arg(env, style)?;
        let schemas = validate::style_schemas(style)
            .iter()
            .map(|s| json_to_lisp(env, s))
            .collect::<Result<Vec<_>>>()?;
        env.list(&schemas)
    })
}

/// The system prompt's part for SESSION: the same text on every call, the
/// list as it stood at the first one.
fn prompt_guidance<'e>(
    env: &'e Env,
    session: Value<'e>,
    full_up_to: Value<'e>,
    style: Option<Value<'e>>,
) -> Result<String> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let full_up_to = count_arg(env, full_up_to, "full-up-to")?;
        let style = style_arg(env, style)?;
        let agent = acting_agent(env)?;
        let guidance = registry()
            .session(&session)
            .as_agent(agent.as_deref(), |s| {
                s.prompt_guidance_for(full_up_to, style).to_string()
            });
        valid(env, guidance)
    })
}

/// One edit by the user.  OP is status, status-unblocked (dropping first
/// the dependencies that hold the item back), edit, add, move,
/// clear-finished, block or unblock; ARG is the status, the new content,
/// the offset or the blocker's id.  Returns the note the
/// model will read ("" when nothing changed).
#[allow(clippy::too_many_arguments)]
fn user_edit<'e>(
    env: &'e Env,
    session: Value<'e>,
    op: Value<'e>,
    id: Value<'e>,
    arg: Value<'e>,
    max_items: Value<'e>,
    max_content: Value<'e>,
    max_blockers: Option<Value<'e>>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let op = text_arg(env, op, "op")?;
        let session = session_name(env, session)?;
        let mut limits = limits(env, max_items, max_content)?;
        graph_limits(env, &mut limits, None, max_blockers)?;
        let arg = to_input(env, arg, 0)?;
        let id = match to_input(env, id, 0)? {
            Input::Null => Err(InvalidInput::new("id", "is required")),
            Input::Str(id) => Ok(id),
            other => Err(InvalidInput::new(
                "id",
                format!("expected a string, got {}", other.describe()),
            )),
        };
        let id = || id.clone();
        let text = |path: &str| checked_text(&arg, path, limits.max_content_chars);
        let edit = match op.as_str() {
            "status" => id().and_then(|id| {
                Ok(UserEdit::SetStatus {
                    id,
                    status: parse_status(&arg, "status")?,
                })
            }),
            "status-unblocked" => id().and_then(|id| {
                Ok(UserEdit::SetStatusUnblocked {
                    id,
                    status: parse_status(&arg, "status")?,
                })
            }),
            "edit" => id().and_then(|id| {
                Ok(UserEdit::EditContent {
                    id,
                    content: text("content")?,
                })
            }),
            "add" => text("content").map(|content| UserEdit::Add { content }),
            "move" => id().and_then(|id| match arg {
                Input::Int(offset) => Ok(UserEdit::Move { id, offset }),
                ref other => Err(InvalidInput::new(
                    "offset",
                    format!("expected an integer, got {}", other.describe()),
                )),
            }),
            "clear-finished" => Ok(UserEdit::ClearFinished),
            "clear" => Ok(UserEdit::Clear),
            "block" | "unblock" => id().and_then(|id| {
                let blocker = validate::id_value(&arg, || "blocker".to_string())?;
                Ok(if op == "block" {
                    UserEdit::Block { id, blocker }
                } else {
                    UserEdit::Unblock { id, blocker }
                })
            }),
            other => Err(InvalidInput::new(
                "op",
                format!("unknown edit {}", validate::quote(other)),
            )),
        };
        let note = edit.and_then(|edit| registry().session(&session).user_edit(edit, &limits));
        checked(env, note)
    })
}

/// Efrit's `efrit-todo-add`: append a pending item, return its plist.
#[defun]
fn add<'e>(
    env: &'e Env,
    session: Value<'e>,
    content: Value<'e>,
    priority: Value<'e>,
    max_items: Value<'e>,
    max_content: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let priority = if priority.is_not_nil() {
            Some(text_arg(env, priority, "priority")?)
        } else {
            None
        };
        let limits = limits(env, max_items, max_content)?;
        let content = match to_input(env, content, 0)? {
            Input::Null => Err(InvalidInput::new("content", "is required")),
            input => checked_text(&input, "content", limits.max_content_chars)
                .and_then(|t| non_blank(t, "content")),
        };
        let added = content
            .and_then(|content| registry().session(&session).add(content, priority, &limits));
        item_plist(env, &valid(env, added)?)
    })
}

/// Sets the status (a wire or Lisp spelling) of item ID; nil when absent.
#[defun]
fn set_status<'e>(
    env: &'e Env,
    session: Value<'e>,
    id: Value<'e>,
    status: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let id = text_arg(env, id, "id")?;
        let status = valid(
            env,
            parse_status(&Input::Str(text_arg(env, status, "status")?), "status"),
        )?;
        match registry().session(&session).set_status(&id, status) {
            Some(item) => item_plist(env, &item),
            None => ().into_lisp(env),
        }
    })
}

fn external_item(
    input: &Input,
    index: usize,
    limits: &Limits,
) -> std::result::Result<ExternalItem, InvalidInput> {
    let path = |field: &str| format!("todos[{index}].{field}");
    let text = |field: &str| -> std::result::Result<Option<String>, InvalidInput> {
        match input.get(field) {
            None | Some(Input::Null) => Ok(None),
            Some(value) => checked_text(value, &path(field), limits.max_content_chars).map(Some),
        }
    };
    let time = |field: &str| match input.get(field) {
        Some(Input::Float(x)) => Some(*x),
        Some(Input::Int(n)) => Some(*n as f64),
        _ => None,
    };
    let content = non_blank(text("content")?.unwrap_or_default(), &path("content"))?;
    let status = match input.get("status") {
        Some(value) => parse_status(value, &path("status"))?,
        None => Status::Pending,
    };
    Ok(ExternalItem {
        id: text("id")?,
        content,
        status,
        priority: text("priority")?,
        created: time("created"),
        completed: time("completed"),
    })
}

/// Efrit's `efrit-todo-set-all`: ITEMS is a list of plists
/// (:id :content :status :priority :created :completed).
#[defun]
fn set_all<'e>(
    env: &'e Env,
    session: Value<'e>,
    items: Value<'e>,
    max_items: Value<'e>,
    max_content: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let limits = limits(env, max_items, max_content)?;
        let parsed = match to_input(env, items, 0)? {
            Input::Null => Ok(vec![]),
            Input::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| external_item(item, i, &limits))
                .collect(),
            other => Err(InvalidInput::new(
                "todos",
                format!("expected a list of items, got {}", other.describe()),
            )),
        };
        let result = parsed.and_then(|items| registry().session(&session).set_all(items, &limits));
        checked(env, result.map(|()| true))
    })
}

/// The number of the last change to SESSION's list: it moves exactly when
/// the list changes.
#[defun]
fn change_seq<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            (s.map_or(0, |s| s.history.last_seq()) as i64).into_lisp(env)
        })
    })
}

/// How many items SESSION's list holds: a fixnum, nothing to collect,
/// for callers that run on every change.
#[defun]
fn item_count<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            (s.map_or(0, |s| s.items.len()) as i64).into_lisp(env)
        })
    })
}

/// A new id for SESSION, for Efrit's `efrit-todo-add'.
#[defun]
fn allocate_id<'e>(env: &'e Env, session: Value<'e>) -> Result<String> {
    guarded(env, || {
        let session = session_name(env, session)?;
        Ok(registry().session(&session).allocate_id())
    })
}

/// The number of the last id SESSION issued.
#[defun]
fn id_counter<'e>(env: &'e Env, session: Value<'e>) -> Result<i64> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let issued = registry()
            .get(&session)
            .map(|s| s.ids.issued())
            .unwrap_or(0);
        Ok(i64::try_from(issued).unwrap_or(i64::MAX))
    })
}

/// Raises the id counter to N; it never goes down, so ids are never reused.
#[defun]
fn raise_counter<'e>(env: &'e Env, session: Value<'e>, n: Value<'e>) -> Result<i64> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let n = valid(
            env,
            match to_input(env, n, 0)? {
                Input::Int(n) if n >= 0 => Ok(n),
                other => Err(InvalidInput::new(
                    "counter",
                    format!("expected a natural number, got {}", other.describe()),
                )),
            },
        )?;
        let mut registry = registry();
        let ids = &mut registry.session(&session).ids;
        ids.raise_to(u64::try_from(n).unwrap_or(0));
        Ok(i64::try_from(ids.issued()).unwrap_or(i64::MAX))
    })
}

/// Empties the list of SESSION, for Efrit's `efrit-todo-clear'; ids
/// already issued stay retired.
#[defun]
fn clear<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    guarded(env, || {
        let session = session_name(env, session)?;
        registry().session(&session).clear();
        Ok(())
    })
}

/// Argument N of the call, None when the caller left it out: the defuns
/// below take trailing optional arguments, which `#[defun]` cannot declare.
pub(super) fn optional<'e>(env: &'e CallEnv, n: usize) -> Option<Value<'e>> {
    (n < env.raw_args().len()).then(|| env.get_arg(n))
}

pub(super) fn write_call(env: &CallEnv) -> Result<Value<'_>> {
    let a = |n| env.get_arg(n);
    write(
        env,
        a(0),
        WriteInput {
            value: a(1),
            direct: Raw::of(env, 1),
        },
        a(2),
        a(3),
        a(4),
        a(5),
        a(6),
        optional(env, 7),
        optional(env, 8),
        optional(env, 9),
    )
}

pub(super) fn task_tool_call(env: &CallEnv) -> Result<Value<'_>> {
    let o = |n| optional(env, n);
    task_tool(
        env,
        env.get_arg(0),
        env.get_arg(1),
        env.get_arg(2),
        o(3),
        o(4),
        o(5),
        o(6),
        o(7),
    )
}

pub(super) fn tool_schemas_call(env: &CallEnv) -> Result<Value<'_>> {
    tool_schemas(env, optional(env, 0))
}

pub(super) fn prompt_guidance_call(env: &CallEnv) -> Result<String> {
    prompt_guidance(env, env.get_arg(0), env.get_arg(1), optional(env, 2))
}

pub(super) fn user_edit_call(env: &CallEnv) -> Result<Value<'_>> {
    let a = |n| env.get_arg(n);
    user_edit(env, a(0), a(1), a(2), a(3), a(4), a(5), optional(env, 6))
}

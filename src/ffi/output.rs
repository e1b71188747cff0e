//! Making Lisp values: items, plists, keywords and text handed back to Lisp.

use super::symbols::*;
use crate::graph;
use crate::model::{Item, Status};
use crate::session::Stop;
use emacs::{Env, IntoLisp, Result, Value};
use serde_json::Value as Json;

/// TEXT as a Lisp string: ASCII as a unibyte string, which Emacs makes in
/// one allocation (a multibyte one takes two), and which is `equal' to the
/// multibyte string of the same characters.
pub(super) fn lisp_text<'e>(env: &'e Env, text: &str) -> Result<Value<'e>> {
    if text.is_ascii() {
        text.as_bytes().into_lisp(env)
    } else {
        text.into_lisp(env)
    }
}

pub(super) fn time_value(env: &Env, at: Option<f64>) -> Result<Value<'_>> {
    at.into_lisp(env)
}

pub(super) fn status_symbol(env: &Env, status: Status) -> Value<'_> {
    match status {
        Status::Pending => st_pending.bind(env),
        Status::InProgress => st_in_progress.bind(env),
        Status::Completed => st_completed.bind(env),
        Status::Cancelled => st_cancelled.bind(env),
    }
}

/// ITEM as an `efrit-todo-list' plist.  Its priority stays out: only
/// Efrit's struct has a slot for it (see efrit_struct.rs), and nothing
/// in efrit-todo reads or sets it.
pub(super) fn item_plist<'e>(env: &'e Env, item: &Item) -> Result<Value<'e>> {
    let open: Vec<&str> = Vec::new();
    item_plist_with(
        env,
        item,
        &open,
        item.status == Status::Pending && item.blocked_by.is_empty(),
    )
}

/// ITEMS[N] as an `efrit-todo-list' plist, its open blockers and whether
/// it is ready read from the whole list.
pub(super) fn item_plist_in<'e>(env: &'e Env, items: &[Item], n: usize) -> Result<Value<'e>> {
    let index = graph::index_of(items);
    let open: Vec<&str> = graph::open_blockers(items, &index, n)
        .into_iter()
        .map(|b| b.id.as_str())
        .collect();
    item_plist_with(env, &items[n], &open, graph::ready(items)[n])
}

fn item_plist_with<'e>(
    env: &'e Env,
    item: &Item,
    open_blockers: &[&str],
    ready: bool,
) -> Result<Value<'e>> {
    let blocked_by = open_blockers
        .iter()
        .map(|id| id.into_lisp(env))
        .collect::<Result<Vec<_>>>()?;
    env.list(&[
        kw_id.bind(env),
        item.id.as_str().into_lisp(env)?,
        kw_content.bind(env),
        item.content.as_str().into_lisp(env)?,
        kw_active_form.bind(env),
        item.active_form.as_str().into_lisp(env)?,
        kw_status.bind(env),
        status_symbol(env, item.status),
        kw_parent.bind(env),
        item.parent.as_deref().into_lisp(env)?,
        kw_created.bind(env),
        item.created.into_lisp(env)?,
        kw_started.bind(env),
        time_value(env, item.started)?,
        kw_completed.bind(env),
        time_value(env, item.completed)?,
        kw_description.bind(env),
        item.description.as_deref().into_lisp(env)?,
        kw_blocked_by.bind(env),
        env.list(&blocked_by)?,
        kw_owner.bind(env),
        item.owner.as_deref().into_lisp(env)?,
        kw_ready.bind(env),
        ready.into_lisp(env)?,
    ])
}

/// ITEMS as plists.  Open blockers and readiness come from one pass over
/// the edges (see `graph`), not one per item.
pub(super) fn items_list<'e>(env: &'e Env, items: &[Item]) -> Result<Value<'e>> {
    let index = graph::index_of(items);
    let ready = graph::ready(items);
    let plists = items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            let open: Vec<&str> = if item.blocked_by.is_empty() {
                Vec::new()
            } else {
                graph::open_blockers(items, &index, n)
                    .into_iter()
                    .map(|b| b.id.as_str())
                    .collect()
            };
            item_plist_with(env, item, &open, ready[n])
        })
        .collect::<Result<Vec<_>>>()?;
    env.list(&plists)
}

/// Converts JSON (tool schemas) into Efrit's shape: objects as alists with
/// string keys, arrays as vectors.
pub(super) fn json_to_lisp<'e>(env: &'e Env, json: &Json) -> Result<Value<'e>> {
    match json {
        Json::Null => ().into_lisp(env),
        Json::Bool(true) => Ok(lisp_t.bind(env)),
        Json::Bool(false) => Ok(kw_json_false.bind(env)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => i.into_lisp(env),
            None => n.as_f64().unwrap_or(0.0).into_lisp(env),
        },
        Json::String(s) => s.as_str().into_lisp(env),
        Json::Array(items) => {
            let values = items
                .iter()
                .map(|v| json_to_lisp(env, v))
                .collect::<Result<Vec<_>>>()?;
            env.vector(&values)
        }
        Json::Object(map) => {
            let pairs = map
                .iter()
                .map(|(k, v)| env.cons(k.as_str(), json_to_lisp(env, v)?))
                .collect::<Result<Vec<_>>>()?;
            env.list(&pairs)
        }
    }
}

/// STOP as a plist (:reason :time :running).
pub(super) fn stop_plist<'e>(env: &'e Env, stop: &Stop) -> Result<Value<'e>> {
    env.list([
        kw_reason.bind(env),
        stop.reason.as_str().into_lisp(env)?,
        kw_time.bind(env),
        stop.at.into_lisp(env)?,
        keyword(env, "running")?,
        stop.running.as_deref().into_lisp(env)?,
    ])
}

pub(super) fn strings<'e>(env: &'e Env, texts: &[String]) -> Result<Value<'e>> {
    let values = texts
        .iter()
        .map(|t| t.as_str().into_lisp(env))
        .collect::<Result<Vec<_>>>()?;
    env.list(&values)
}

pub(super) fn keyword<'e>(env: &'e Env, name: &str) -> Result<Value<'e>> {
    env.intern(&format!(":{name}"))
}

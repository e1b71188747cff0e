//! Defuns of agent teams: sub-agents start and end, the running ones, and
//! which agent a call is made for (`efrit-todo-agent').

use super::cache::{session_name, with_existing};
use super::errors::{guarded, valid};
use super::input::{string_arg, text_arg};
use super::output::item_plist_in;
use super::symbols::*;
use crate::session::{check_agent_name, registry};
use emacs::{defun, Env, IntoLisp, Result, Value};

/// The agent the current call is made for: the value of
/// `efrit-todo-agent', None when it is nil (the session's own agent).
pub(super) fn acting_agent(env: &Env) -> Result<Option<String>> {
    let value: Value = env.call(fn_symbol_value, (var_agent.bind(env),))?;
    if value.is_not_nil() {
        let name = string_arg(env, value, "efrit-todo-agent")?
            .and_then(|name| check_agent_name(&name, "efrit-todo-agent").map(|()| name));
        Ok(Some(valid(env, name)?))
    } else {
        Ok(None)
    }
}

/// Starts a sub-agent of type TYPE in SESSION, a peer when PEER is
/// non-nil; returns its name: TYPE, or TYPE-2, TYPE-3... while one of
/// that name is running.
#[defun]
fn agent_start<'e>(
    env: &'e Env,
    session: Value<'e>,
    kind: Value<'e>,
    peer: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let kind = text_arg(env, kind, "type")?;
        let mut registry = registry();
        let session = registry.session(&session);
        let name = if peer.is_not_nil() {
            session.peer_start(&kind)
        } else {
            session.agent_start(&kind)
        };
        valid(env, name)?.into_lisp(env)
    })
}

/// Ends sub-agent NAME of SESSION: the text for the lead naming its tasks
/// that were in progress and are pending again, or nil.
#[defun]
fn agent_end<'e>(env: &'e Env, session: Value<'e>, name: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let name = text_arg(env, name, "name")?;
        let mut registry = registry();
        let text = match registry.get(&session) {
            Some(_) => registry.session(&session).agent_end(&name),
            None => None,
        };
        text.into_lisp(env)
    })
}

/// The running sub-agents of SESSION, oldest first, as (:name :type
/// :current ITEM-PLIST-or-nil).
#[defun]
fn agents<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            let Some(s) = s else {
                return ().into_lisp(env);
            };
            let plists = s
                .running_agents()
                .into_iter()
                .map(|agent| {
                    let current = match agent.current {
                        Some(n) => item_plist_in(env, &s.items, n)?,
                        None => ().into_lisp(env)?,
                    };
                    env.list([
                        kw_name.bind(env),
                        agent.name.into_lisp(env)?,
                        kw_type.bind(env),
                        agent.kind.into_lisp(env)?,
                        kw_current.bind(env),
                        current,
                    ])
                })
                .collect::<Result<Vec<_>>>()?;
            env.list(&plists)
        })
    })
}

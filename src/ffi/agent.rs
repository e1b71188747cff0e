//! Defuns of the agent loop: the breaker around tool calls, turns, pauses,
//! stops, completion and the report.

use super::cache::{session_name, with_existing};
use super::errors::{checked, guarded, valid};
use super::input::{
    call_input, duration_arg, result_text, string_arg, text_arg, tool_name, ResultText,
};
use super::list::{optional, style_arg};
use super::options::loop_options;
use super::output::{lisp_text, stop_plist};
use super::symbols::*;
use super::team::acting_agent;
use crate::guide;
use crate::session::{registry, Session};
use crate::validate::{checked_text, Input};
use emacs::{defun, CallEnv, Env, IntoLisp, Result, Value};

/// Before TOOL runs in SESSION with INPUT: nil to go ahead, or the text of
/// the refusal to send back instead of running it.  OPTIONS is the loop
/// options plist.  INPUT is read only when the breaker could refuse.
#[defun]
fn before_tool<'e>(
    env: &'e Env,
    session: Value<'e>,
    tool: Value<'e>,
    input: Value<'e>,
    options: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let options = loop_options(env, options)?;
        let tool = valid(env, tool_name(env, tool)?)?;
        let agent = acting_agent(env)?;
        // The input is read only when the breaker may refuse: rarely.
        let armed = registry()
            .get(&session)
            .is_some_and(|s| s.breaker_armed_for(agent.as_deref(), &options.breaker));
        let input = if armed {
            call_input(env, input)?
        } else {
            Input::Null
        };
        let (refusal, any_armed) = {
            let mut registry = registry();
            let refusal = registry.session(&session).as_agent(agent.as_deref(), |s| {
                s.before_tool(&tool, || input, &options.breaker)
            });
            (refusal, registry.any_armed(&options.breaker))
        };
        note_breakers(env, any_armed)?;
        valid(env, refusal)?.into_lisp(env)
    })
}

/// After TOOL ran in SESSION with INPUT and gave RESULT (ERROR non-nil when
/// it failed, DURATION seconds or nil): records the call, feeds the
/// breaker, and returns the text to send the model: RESULT itself in the
/// common case, else RESULT with the notes that concern it.
// The arity is the Lisp function's: one argument per thing the adapter knows.
#[allow(clippy::too_many_arguments)]
#[defun]
fn after_tool<'e>(
    env: &'e Env,
    session: Value<'e>,
    tool: Value<'e>,
    input: Value<'e>,
    result: Value<'e>,
    error: Value<'e>,
    duration: Value<'e>,
    options: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let options = loop_options(env, options)?;
        let tool = tool_name(env, tool)?;
        let duration = duration_arg(env, duration)?;
        let (tool, duration) = valid(env, tool.and_then(|tool| Ok((tool, duration?))))?;
        let input = call_input(env, input)?;
        let agent = acting_agent(env)?;
        let ResultText { text, own } = result_text(env, result)?;
        // The ledger takes the text over; a text printed from a result that is
        // not a string is needed again to send back, so it is copied first.
        let printed = if own { None } else { text.clone() };
        let (returned, tripped) = {
            let mut registry = registry();
            let session = registry.session(&session);
            valid(
                env,
                session.as_agent(agent.as_deref(), |s| {
                    let returned =
                        s.after_tool(&tool, input, text, error.is_not_nil(), duration, &options);
                    (returned, s.breaker_armed(&options.breaker))
                }),
            )?
        };
        if tripped {
            note_breakers(env, true)?;
        }
        match (returned, printed) {
            (Some(text), _) => lisp_text(env, &text),
            (None, Some(printed)) => lisp_text(env, &printed),
            // Usually the result goes back untouched: hand back the same string
            // rather than make a copy for the garbage collector to find.
            (None, None) => Ok(result),
        }
    })
}

/// At the end of a model turn in SESSION (HAD-TOOL-CALLS non-nil when the
/// turn called tools): the continuation or reminder to send, or nil.
#[defun]
fn turn_end<'e>(
    env: &'e Env,
    session: Value<'e>,
    had_tool_calls: Value<'e>,
    options: Value<'e>,
) -> Result<Option<String>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let options = loop_options(env, options)?;
        let agent = acting_agent(env)?;
        let ended = registry()
            .session(&session)
            .as_agent(agent.as_deref(), |s| {
                s.turn_end(had_tool_calls.is_not_nil(), &options.guide)
            });
        valid(env, ended)
    })
}

/// todo_pause in SESSION: records REASON, the model's question for the
/// user; returns the tool result.
#[defun]
fn pause<'e>(env: &'e Env, session: Value<'e>, reason: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let agent = acting_agent(env)?;
        let paused = string_arg(env, reason, "reason")?.and_then(|reason| {
            registry()
                .session(&session)
                .as_agent(agent.as_deref(), |s| s.guide.pause(&reason))?
        });
        checked(env, paused)
    })
}

/// The reason SESSION's model gave with todo_pause, or nil.
#[defun]
fn pause_reason<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            s.and_then(|s| s.guide.pause_reason()).into_lisp(env)
        })
    })
}

/// SESSION's open items on one line, at most ten named: "t2 [in_progress]
/// Fix it; t3 [pending] Test it", or "" with none.
#[defun]
fn open_items<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            lisp_text(
                env,
                &s.map(|s| guide::open_items(&s.items)).unwrap_or_default(),
            )
        })
    })
}

/// session_complete in SESSION with MESSAGE (nil for none): whether the
/// completion is allowed, the report for the user and the line for the
/// model, as (:allowed BOOL :text REPORT :model-text LINE).
#[defun]
fn complete<'e>(
    env: &'e Env,
    session: Value<'e>,
    message: Value<'e>,
    options: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let options = loop_options(env, options)?;
        let message = if message.is_not_nil() {
            string_arg(env, message, "message")?
                .and_then(|text| checked_text(&Input::Str(text), "message", usize::MAX))
        } else {
            Ok(String::new())
        };
        let message = valid(env, message)?;
        let agent = acting_agent(env)?;
        let completion = registry()
            .session(&session)
            .as_agent(agent.as_deref(), |s| s.complete(&message, &options));
        let completion = valid(env, completion)?;
        env.list([
            kw_allowed.bind(env),
            completion.allowed.into_lisp(env)?,
            kw_text.bind(env),
            completion.text.into_lisp(env)?,
            kw_model_text.bind(env),
            completion.model_text.into_lisp(env)?,
        ])
    })
}

/// The report of SESSION: each item with what its tool calls gave.
#[defun]
fn report<'e>(env: &'e Env, session: Value<'e>, options: Value<'e>) -> Result<String> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let options = loop_options(env, options)?;
        let agent = acting_agent(env)?;
        let mut registry = registry();
        Ok(match (registry.get(&session), agent) {
            // A peer's report holds its own calls.
            (Some(_), Some(agent)) => {
                let report = registry
                    .session(&session)
                    .as_agent(Some(&agent), |s| s.report(None, &options));
                valid(env, report)?
            }
            (Some(s), None) => s.report(None, &options),
            (None, _) => Session::default().report(None, &options),
        })
    })
}

/// The tool calls of SESSION, oldest first, each as (:tool :input :result
/// :error :todo :time :duration).
#[defun]
fn ledger<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            let entries = s.map(Session::entries).unwrap_or_default();
            let plists = entries
                .iter()
                .map(|e| {
                    env.list(&[
                        kw_tool.bind(env),
                        e.tool.as_str().into_lisp(env)?,
                        kw_input.bind(env),
                        e.input.summary().as_ref().into_lisp(env)?,
                        kw_result.bind(env),
                        e.result.as_str().into_lisp(env)?,
                        kw_error.bind(env),
                        e.error.into_lisp(env)?,
                        kw_todo.bind(env),
                        e.todo.as_deref().into_lisp(env)?,
                        kw_time.bind(env),
                        e.time.into_lisp(env)?,
                        kw_duration.bind(env),
                        e.duration.into_lisp(env)?,
                        kw_agent.bind(env),
                        e.agent.as_deref().into_lisp(env)?,
                    ])
                })
                .collect::<Result<Vec<_>>>()?;
            env.list(&plists)
        })
    })
}

/// The breaker of SESSION as (:tripped :reason :calls :since-progress
/// :same-tool :identical :errors :churn).
#[defun]
fn breaker<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let agent = acting_agent(env)?;
        with_existing(env, session, |env, s| {
            let state = match s {
                Some(s) => valid(env, s.breaker_of(agent.as_deref()))?,
                None => Default::default(),
            };
            let n = |v: u32| i64::from(v).into_lisp(env);
            env.list(&[
                kw_tripped.bind(env),
                state.tripped.into_lisp(env)?,
                kw_reason.bind(env),
                state.reason.as_deref().into_lisp(env)?,
                kw_calls.bind(env),
                n(state.calls)?,
                kw_since_progress.bind(env),
                n(state.since_progress)?,
                kw_same_tool.bind(env),
                n(state.same_tool)?,
                kw_identical.bind(env),
                n(state.identical)?,
                kw_errors.bind(env),
                n(state.errors)?,
                kw_churn.bind(env),
                n(state.churn)?,
            ])
        })
    })
}

/// Resets the breaker of SESSION: counts, patterns and the trip.
#[defun]
fn breaker_reset<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    guarded(env, || {
        let session = session_name(env, session)?;
        // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
        // arms a breaker, and the next `before_tool' clears what is stale.
        registry().session(&session).breaker.reset();
        Ok(())
    })
}

/// Starts a new turn of SESSION: fresh breaker, ledger and guide, same list.
#[defun]
fn begin_turn<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    guarded(env, || {
        let session = session_name(env, session)?;
        // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
        // arms a breaker, and the next `before_tool' clears what is stale.
        registry().session(&session).begin_turn();
        Ok(())
    })
}

/// SESSION's command stopped for REASON: kept as a stop when items are
/// open (returns t), else nothing happens (nil).
#[defun]
fn stop<'e>(env: &'e Env, session: Value<'e>, reason: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let stopped = string_arg(env, reason, "reason")?
            .and_then(|reason| registry().session(&session).stop(&reason));
        checked(env, stopped)
    })
}

/// A new command takes stopped SESSION over.
#[defun]
fn resume<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    guarded(env, || {
        let session = session_name(env, session)?;
        // `efrit-todo--breaker-tripped' is left as it is: undoing a trip never
        // arms a breaker, and the next `before_tool' clears what is stale.
        registry().session(&session).resume();
        Ok(())
    })
}

/// How SESSION stopped with items open, as a plist, or nil.
#[defun]
fn stopped<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            match s.and_then(|s| s.stopped.as_ref()) {
                Some(stop) => stop_plist(env, stop),
                None => ().into_lisp(env),
            }
        })
    })
}

/// Forgets that SESSION stopped; t when it had.
#[defun]
fn forget_stop<'e>(env: &'e Env, session: Value<'e>) -> Result<bool> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let mut registry = registry();
        Ok(registry.get(&session).is_some() && registry.session(&session).forget_stop())
    })
}

/// ((SESSION . STOP-PLIST) ...) of the sessions that stopped with items
/// open, the latest stop first.
#[defun]
fn unfinished(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let registry = registry();
        let stopped = registry
            .all_unfinished()
            .into_iter()
            .map(|(name, stop)| env.cons(name.into_lisp(env)?, stop_plist(env, stop)?))
            .collect::<Result<Vec<_>>>()?;
        env.list(&stopped)
    })
}

/// Sets `efrit-todo--breaker-tripped', which must be non-nil whenever some
/// session's breaker may refuse a call (tripped, or a count rule at its
/// limit): while it is nil, `efrit-todo-before-tool' lets a call run
/// without asking the module.  Breakers arm only in `after_tool'; the
/// variable is cleared by `before_tool', which knows the limits.
fn note_breakers(env: &Env, any_armed: bool) -> Result<()> {
    env.call(fn_set, (var_breaker_tripped.bind(env), any_armed))?;
    Ok(())
}

/// Whether TEXT, a user's request, looks like several steps: (:complex
/// BOOL :score N :steps N :suggestion TEXT).  The suggestion names the
/// planning tools of STYLE (see `style_arg`).
fn analyze_request<'e>(
    env: &'e Env,
    text: Value<'e>,
    style: Option<Value<'e>>,
) -> Result<Value<'e>> {
    guarded(env, || {
        let text = text_arg(env, text, "text")?;
        let style = style_arg(env, style)?;
        let analysis = guide::analyze_request(&text, style);
        env.list([
            kw_complex.bind(env),
            analysis.complex.into_lisp(env)?,
            kw_score.bind(env),
            analysis.score.into_lisp(env)?,
            kw_steps.bind(env),
            (analysis.steps as i64).into_lisp(env)?,
            kw_suggestion.bind(env),
            analysis.suggestion.into_lisp(env)?,
        ])
    })
}

pub(super) fn analyze_request_call(env: &CallEnv) -> Result<Value<'_>> {
    analyze_request(env, env.get_arg(0), optional(env, 1))
}

//! Defuns of history, undo and persistence: saves, flushes and restore.

use super::cache::{read_cached_text, session_name, with_existing, LastRead};
use super::errors::{guarded, storage_failure};
use super::input::{count_arg, seconds_arg, text_arg};
use super::options::limits;
use super::output::{keyword, lisp_text, strings};
use super::symbols::*;
use crate::session::registry;
use crate::store;
use crate::validate::Limits;
use emacs::{defun, Env, IntoLisp, Result, Value};

/// The changes of SESSION's list, oldest first, as plists.
#[defun]
fn history<'e>(env: &'e Env, session: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        with_existing(env, session, |env, s| {
            let Some(s) = s else { return ().into_lisp(env) };
            let plists = s
                .history
                .changes()
                .map(|change| {
                    let mut plist = vec![
                        keyword(env, "seq")?,
                        i64::try_from(change.seq)
                            .unwrap_or(i64::MAX)
                            .into_lisp(env)?,
                        keyword(env, "actor")?,
                        env.intern(change.actor.name())?,
                        keyword(env, "kind")?,
                        env.intern(change.kind.name())?,
                        kw_time.bind(env),
                        change.time.into_lisp(env)?,
                        keyword(env, "summary")?,
                        change.summary.as_str().into_lisp(env)?,
                    ];
                    for (name, ids) in change.ids.groups() {
                        plist.push(keyword(env, name)?);
                        plist.push(strings(env, ids)?);
                    }
                    plist.extend([
                        keyword(env, "moved")?,
                        change.ids.moved.into_lisp(env)?,
                        keyword(env, "undone")?,
                        change.undone.into_lisp(env)?,
                        keyword(env, "undoes")?,
                        change
                            .undoes
                            .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
                            .into_lisp(env)?,
                        keyword(env, "undoable")?,
                        change.undo.is_some().into_lisp(env)?,
                    ]);
                    env.list(&plist)
                })
                .collect::<Result<Vec<_>>>()?;
            env.list(&plists)
        })
    })
}

/// Undoes the newest change of SESSION's list; the note for the model, or
/// nil when there is nothing to undo.
#[defun]
fn undo(env: &Env, session: Value) -> Result<Option<String>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        Ok(registry().session(&session).undo())
    })
}

/// FAILURES as strings and WARNINGS as (warning TEXT) lists, in one list:
/// what the store has to say to the user.
fn store_news<'e>(env: &'e Env, failures: &[String], warnings: &[String]) -> Result<Value<'e>> {
    let warning = env.intern("warning")?;
    let mut news = failures
        .iter()
        .map(|f| lisp_text(env, f))
        .collect::<Result<Vec<_>>>()?;
    for text in warnings {
        news.push(env.list((warning, lisp_text(env, text)?))?);
    }
    env.list(&news)
}

/// Marks SESSION to be saved into DIR off the caller's path; returns the
/// failures of earlier background saves, and their warnings as (warning
/// TEXT).
#[defun]
fn store_schedule<'e>(env: &'e Env, session: Value<'e>, dir: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let dir = read_cached_text(
            &LAST_DIR,
            env,
            dir,
            || Ok(text_arg(env, dir, "dir")?.into()),
        )?;
        let failures = store::schedule(&session, std::path::Path::new(&*dir));
        let warnings = store::take_warnings();
        if failures.is_empty() && warnings.is_empty() {
            return ().into_lisp(env);
        }
        store_news(env, &failures, &warnings)
    })
}

thread_local! {
    /// The directory string read last: the Lisp side passes the same
    /// expanded directory on every change.
    static LAST_DIR: LastRead<std::rc::Rc<str>> = const { LastRead::new() };
}

/// Writes every pending save now, waiting at most `store::FLUSH_WAIT`;
/// returns the saves that have not landed and the failures not reported yet.
#[defun]
fn store_flush(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        store_news(env, &store::flush(), &store::take_warnings())
    })
}

/// Asks the writer thread to write every pending save and retry every
/// failed one; returns the ticket that `store-flush-wait` waits for.
#[defun]
fn store_flush_begin(env: &Env) -> Result<i64> {
    guarded(env, || {
        Ok(i64::try_from(store::flush_begin()).unwrap_or(i64::MAX))
    })
}

/// Waits up to SECONDS (a float) for the flush TICKET; t once it is done.
/// Lisp waits in short slices, so that C-g stops the waiting.
#[defun]
fn store_flush_wait<'e>(env: &'e Env, ticket: Value<'e>, wait: Value<'e>) -> Result<bool> {
    guarded(env, || {
        Ok(store::flush_wait(
            count_arg(env, ticket, "ticket")? as u64,
            seconds_arg(env, wait, "wait")?,
        ))
    })
}

/// The saves that have not landed after the flush TICKET, the failures
/// not reported yet, and, when the flush is not done after WAITED seconds,
/// that it gave up; then the warnings of saves as (warning TEXT).
#[defun]
fn store_flush_end<'e>(env: &'e Env, ticket: Value<'e>, waited: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let failures = store::flush_end(
            count_arg(env, ticket, "ticket")? as u64,
            seconds_arg(env, waited, "waited")?,
        );
        store_news(env, &failures, &store::take_warnings())
    })
}

/// Saves SESSION into DIR now; the file name, or nil for an unknown session.
#[defun]
fn store_save<'e>(env: &'e Env, session: Value<'e>, dir: Value<'e>) -> Result<Value<'e>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let dir = text_arg(env, dir, "dir")?;
        match store::save_now(&session, std::path::Path::new(&dir)) {
            Ok(file) => file
                .map(|f| f.to_string_lossy().into_owned())
                .into_lisp(env),
            Err(e) => storage_failure(
                env,
                format!("could not save session {:?} in {dir}: {e}", &*session),
            ),
        }
    })
}

/// The state file of SESSION in DIR.
#[defun]
fn store_file<'e>(env: &'e Env, session: Value<'e>, dir: Value<'e>) -> Result<String> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let dir = text_arg(env, dir, "dir")?;
        Ok(store::file_path(std::path::Path::new(&dir), &session)
            .to_string_lossy()
            .into_owned())
    })
}

/// Reads the sessions saved in DIR into the registry, within the limits
/// todo_write keeps (MAX-ITEMS, MAX-CONTENT).  With ONLY-OPEN, only
/// sessions with unfinished items; a session here whose list is not empty is
/// replaced only with FORCE.  Returns (:restored NAMES :kept NAMES
/// :moved ((FILE AS REASON) ...) :skipped ((FILE REASON) ...)
/// :warnings ((FILE TEXT) ...)).
#[defun]
fn store_restore_within<'e>(
    env: &'e Env,
    dir: Value<'e>,
    only_open: Value<'e>,
    force: Value<'e>,
    max_items: Value<'e>,
    max_content: Value<'e>,
) -> Result<Value<'e>> {
    guarded(env, || {
        restore(
            env,
            text_arg(env, dir, "dir")?,
            only_open,
            force,
            &limits(env, max_items, max_content)?,
        )
    })
}

pub(super) fn restore<'e>(
    env: &'e Env,
    dir: String,
    only_open: Value<'e>,
    force: Value<'e>,
    limits: &Limits,
) -> Result<Value<'e>> {
    let dir_path = std::path::Path::new(&dir);
    let mut report = match store::load_dir(dir_path, only_open.is_not_nil(), limits) {
        Ok(report) => report,
        Err(e) => return storage_failure(env, format!("could not read {dir}: {e}")),
    };
    let store::Restored { restored, kept } =
        store::install(dir_path, &mut report, force.is_not_nil());
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let moved = report
        .moved_aside
        .iter()
        .map(|(from, to, why)| env.list((path(from), path(to), why.as_str())))
        .collect::<Result<Vec<_>>>()?;
    let skipped = report
        .skipped
        .iter()
        .map(|(file, why)| env.list((path(file), why.as_str())))
        .collect::<Result<Vec<_>>>()?;
    let warnings = report
        .warnings
        .iter()
        .map(|(file, text)| env.list((path(file), text.as_str())))
        .collect::<Result<Vec<_>>>()?;
    env.list([
        keyword(env, "restored")?,
        strings(env, &restored)?,
        keyword(env, "kept")?,
        strings(env, &kept)?,
        keyword(env, "moved")?,
        env.list(&moved)?,
        keyword(env, "skipped")?,
        env.list(&skipped)?,
        keyword(env, "warnings")?,
        env.list(&warnings)?,
    ])
}

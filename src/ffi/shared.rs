//! Defuns of shared lists: which lists are shared, and a change of one
//! made on its newest save and saved before the call returns.

use std::io;
use std::path::Path;
use std::time::Duration;

use super::cache::session_name;
use super::errors::{guarded, invalid, storage_failure};
use super::input::{seconds_arg, text_arg};
use super::options::limits;
use super::output::{lisp_text, strings};
use crate::store;
use emacs::{defun, Env, Result, Value};

/// Runs F, a step on the file of the shared list SESSION in DIR, with
/// WAIT seconds for the lock (none when it is held already); a failure of
/// the disk is `efrit-todo-storage-error'.
fn on_shared_file<'e, T>(
    env: &'e Env,
    session: Value<'e>,
    dir: Value<'e>,
    wait: Option<Value<'e>>,
    f: impl FnOnce(&str, &Path, Duration) -> io::Result<T>,
) -> Result<T> {
    guarded(env, || {
        let session = session_name(env, session)?;
        let dir = text_arg(env, dir, "dir")?;
        let wait = match wait {
            Some(wait) => seconds_arg(env, wait, "wait")?,
            None => Duration::ZERO,
        };
        match f(&session, Path::new(&dir), wait) {
            Ok(value) => Ok(value),
            Err(e) => storage_failure(env, e.to_string()),
        }
    })
}

/// Makes SESSION a shared list, its file read within MAX-ITEMS and
/// MAX-CONTENT.
#[defun]
fn shared_share<'e>(
    env: &'e Env,
    session: Value<'e>,
    max_items: Value<'e>,
    max_content: Value<'e>,
) -> Result<()> {
    guarded(env, || {
        let session = session_name(env, session)?;
        store::share(&session, limits(env, max_items, max_content)?);
        Ok(())
    })
}

/// Makes SESSION an unshared session again.
#[defun]
fn shared_unshare<'e>(env: &'e Env, session: Value<'e>) -> Result<()> {
    guarded(env, || {
        store::unshare(&session_name(env, session)?);
        Ok(())
    })
}

/// The names of the shared lists of this Emacs.
#[defun]
fn shared_lists(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let mut names = store::shared_lists();
        names.sort();
        strings(env, &names)
    })
}

/// Takes DIR's lock for a change of the shared list SESSION, waiting at
/// most WAIT seconds, and takes in a newer save of it: t, or nil when
/// another process still holds the lock.  Lisp waits in short slices, so
/// that C-g stops the waiting.
#[defun]
fn shared_begin<'e>(
    env: &'e Env,
    session: Value<'e>,
    dir: Value<'e>,
    wait: Value<'e>,
) -> Result<bool> {
    on_shared_file(env, session, dir, Some(wait), store::shared_begin)
}

/// Saves the shared list SESSION into DIR when it changed since
/// `shared-begin', and lets the lock go.
#[defun]
fn shared_end<'e>(env: &'e Env, session: Value<'e>, dir: Value<'e>) -> Result<()> {
    on_shared_file(env, session, dir, None, |session, dir, _| {
        store::shared_end(session, dir)
    })
}

/// Takes in another Emacs's newer save of the shared list SESSION from
/// DIR, for a call that reads it; t when the list was replaced.  Waits at
/// most WAIT seconds for the lock, and leaves the list as it is after that.
#[defun]
fn shared_refresh<'e>(
    env: &'e Env,
    session: Value<'e>,
    dir: Value<'e>,
    wait: Value<'e>,
) -> Result<bool> {
    on_shared_file(env, session, dir, Some(wait), store::shared_refresh)
}

/// Saves the shared list SESSION into DIR when no file holds it there and
/// it holds something, as an exiting Emacs does; t when that is done (or
/// nothing was to do), nil when another process still held the lock
/// after WAIT seconds.
#[defun]
fn shared_save_if_missing<'e>(
    env: &'e Env,
    session: Value<'e>,
    dir: Value<'e>,
    wait: Value<'e>,
) -> Result<bool> {
    on_shared_file(env, session, dir, Some(wait), store::shared_save_if_missing)
}

/// What the store's saves must tell the user and have not yet, as
/// (warning TEXT) lists: a damaged shared file moved aside, this Emacs's
/// own list kept beside when a saved shared list took its place.
#[defun]
fn shared_news(env: &Env) -> Result<Value<'_>> {
    guarded(env, || {
        let warning = env.intern("warning")?;
        let news = store::take_warnings()
            .iter()
            .map(|text| env.list((warning, lisp_text(env, text)?)))
            .collect::<Result<Vec<_>>>()?;
        env.list(&news)
    })
}

/// Undoes this Emacs's newest change of the shared list SESSION, only
/// what it did; the note for the model, or nil when there is none.  A
/// later change of another agent to the same items refuses it, with
/// `efrit-todo-invalid-input' saying so.
#[defun]
fn shared_undo<'e>(env: &'e Env, session: Value<'e>) -> Result<Option<String>> {
    guarded(env, || {
        let session = session_name(env, session)?;
        match store::shared_undo(&session) {
            Ok(note) => Ok(note),
            Err(why) => invalid(env, crate::validate::InvalidInput::new("undo", why)),
        }
    })
}

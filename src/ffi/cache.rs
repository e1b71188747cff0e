//! Caches keyed by Lisp object identity, so that the same session name or
//! options object is not read twice.

use super::errors::valid;
use super::input::{string_arg, STRING_BUFFER};
use crate::session::{check_session_name, registry, Session};
use emacs::{Env, Result, Value};

/// SESSION as the module reads it: a string naming the session.
/// Shared rather than a String, because the one read last is handed out
/// again on every call of that session.
pub(super) fn session_name(env: &Env, name: Value) -> Result<std::rc::Rc<str>> {
    read_cached_text(&LAST_SESSION, env, name, || {
        let text = valid(
            env,
            string_arg(env, name, "session")?
                .and_then(|text| check_session_name(&text).map(|()| text)),
        )?;
        Ok(text.into())
    })
}

/// VALUE as READ reads it, unless it is the object CACHE read last.
pub(super) fn read_cached<T: Clone>(
    cache: &'static std::thread::LocalKey<LastRead<T>>,
    env: &Env,
    value: Value,
    read: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if let Some(known) = cache.with(|last| last.get(value)) {
        return Ok(known);
    }
    let read = read()?;
    cache.with(|last| last.remember(env, value, read.clone()))?;
    Ok(read)
}

/// The string VALUE as READ reads it, unless it is the string CACHE read
/// last and still holds the same text.  A string can be changed in place
/// (`aset', `fillarray') and stay `eq' to itself, so identity alone would
/// hand out what it held before: a session name altered after use would
/// send writes to the old session.  Comparing the text costs one copy into
/// a kept buffer, no allocation and no checking.
pub(super) fn read_cached_text(
    cache: &'static std::thread::LocalKey<LastRead<std::rc::Rc<str>>>,
    env: &Env,
    value: Value,
    read: impl FnOnce() -> Result<std::rc::Rc<str>>,
) -> Result<std::rc::Rc<str>> {
    if let Some(known) = cache.with(|last| last.get(value)) {
        let unchanged = STRING_BUFFER.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            value
                .copy_string_contents(&mut buffer[..])
                .is_ok_and(|text| text == known.as_bytes())
        });
        if unchanged {
            return Ok(known);
        }
    }
    let read = read()?;
    cache.with(|last| last.remember(env, value, read.clone()))?;
    Ok(read)
}

/// The last Lisp object read in some place, and what it read as, so that
/// the same object (`eq') need not be read again.  Only for objects nobody
/// alters in place.
pub(super) struct LastRead<T>(std::cell::RefCell<Option<(emacs::GlobalRef, T)>>);

impl<T: Clone> LastRead<T> {
    pub(super) const fn new() -> Self {
        LastRead(std::cell::RefCell::new(None))
    }

    /// What VALUE read as, if it is the object read last.
    pub(super) fn get(&self, value: Value) -> Option<T> {
        match &*self.0.borrow() {
            Some((seen, read)) if *seen == value => Some(read.clone()),
            _ => None,
        }
    }

    /// Remembers that VALUE read as READ, letting go of the previous object.
    fn remember(&self, env: &Env, value: Value, read: T) -> Result<()> {
        let previous = self.0.borrow_mut().replace((value.make_global_ref(), read));
        match previous {
            Some((seen, _)) => seen.free(env),
            None => Ok(()),
        }
    }
}

thread_local! {
    /// The session string read last.  Efrit passes the same string object
    /// on every call of a session (its session id), so an `eq' test
    /// replaces reading and checking it again.
    static LAST_SESSION: LastRead<std::rc::Rc<str>> = const { LastRead::new() };
}

/// F called with the session named NAME, or None when there is none: for
/// the calls that only read a list and must not create a session.
pub(super) fn with_existing<'e, F>(env: &'e Env, name: Value<'e>, f: F) -> Result<Value<'e>>
where
    F: FnOnce(&'e Env, Option<&Session>) -> Result<Value<'e>>,
{
    let name = session_name(env, name)?;
    let registry = registry();
    f(env, registry.get(&name))
}

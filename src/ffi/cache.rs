//! Caches keyed by Lisp object identity, so that the same session name or
//! options object is not read twice.

use super::errors::valid;
use super::input::{string_arg, STRING_BUFFER};
use crate::session::{check_session_name, registry, Session};
use emacs::{Env, Result, Value};

/// SESSION as the module reads it: a string naming the session.
/// Shared rather than a String, because the one read last is handed out
/// again on every call of that session.
///
/// The names read last are kept by their text, not by the Lisp object:
/// a caller may name the session with a new string on every call (a
/// gptel chat, `format'), and keeping the object would make a global
/// reference, a Lisp allocation, each time the object changes.  Reading
/// the text costs one copy into a kept buffer.
pub(super) fn session_name(env: &Env, name: Value) -> Result<std::rc::Rc<str>> {
    let known = STRING_BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        // A session name is a string all but always (the Lisp side checks),
        // so reading it as one at once costs no failed call.
        let text = name.copy_string_contents(&mut buffer[..]).ok()?;
        RECENT_SESSIONS.with(|recent| {
            recent
                .borrow()
                .iter()
                .find(|known| known.as_bytes() == text)
                .cloned()
        })
    });
    if let Some(known) = known {
        return Ok(known);
    }
    let text: std::rc::Rc<str> = valid(
        env,
        string_arg(env, name, "session")?.and_then(|text| check_session_name(&text).map(|()| text)),
    )?
    .into();
    RECENT_SESSIONS.with(|recent| {
        let mut recent = recent.borrow_mut();
        if recent.len() == RECENT_SESSION_COUNT {
            recent.remove(0);
        }
        recent.push(text.clone());
    });
    Ok(text)
}

/// How many session names `session_name' remembers: the sessions a few
/// buffers or commands alternate between.
const RECENT_SESSION_COUNT: usize = 4;

thread_local! {
    /// The session names read last, checked, newest last.
    static RECENT_SESSIONS: std::cell::RefCell<Vec<std::rc::Rc<str>>> =
        const { std::cell::RefCell::new(Vec::new()) };
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

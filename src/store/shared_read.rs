//! Shared lists: the lists this Emacs shares with every Emacs using its
//! state directory, and a shared list's file read back when another Emacs
//! saved it since this one last wrote or read it.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Mutex;

use once_cell::sync::Lazy;

use crate::session::registry;
use crate::validate::Limits;

use super::atomic::{file_id, FileId};
use super::conflict::{self, adopt, Seen};
use super::encode::encode;
use super::file_kind::{not_regular, special_kind};
use super::lock::lock;
use super::names::file_path;
use super::record::LoadError;
use super::restore::read_state_file;

/// The shared lists of this Emacs, each with the limits its file is read
/// within (those of the call that last changed or read it).
static SHARED: Lazy<Mutex<HashMap<String, Limits>>> = Lazy::new(Mutex::default);

/// Makes SESSION a shared list, its file read within LIMITS.
pub fn share(session: &str, limits: Limits) {
    lock(&SHARED).insert(session.to_string(), limits);
}

/// Makes SESSION an unshared session again.
pub fn unshare(session: &str) {
    lock(&SHARED).remove(session);
}

/// The limits SESSION's file is read within, when it is a shared list.
pub fn shared_limits(session: &str) -> Option<Limits> {
    lock(&SHARED).get(session).copied()
}

/// The names of the shared lists, in no order.
pub fn shared_lists() -> Vec<String> {
    lock(&SHARED).keys().cloned().collect()
}

/// What a look at a shared list's file found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Look {
    /// Nothing saved, or the save this Emacs knows.
    Unchanged,
    /// A file this Emacs has not read, identified by ID.
    Changed(FileId),
}

/// Looks at SESSION's file in DIR without reading it: the cheap check a
/// reading call makes before anything else.  A file that is not a
/// regular file is an error naming what is there.
pub(super) fn look(session: &str, dir: &Path) -> io::Result<Look> {
    let target = file_path(dir, session);
    let meta = match fs::symlink_metadata(&target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Look::Unchanged),
        Err(e) => return Err(e),
    };
    if let Some(kind) = special_kind(meta.file_type()) {
        return Err(not_regular(&target, kind));
    }
    let id = file_id(&meta);
    Ok(match conflict::known(&target) {
        Some((_, Some(known))) if known == id => Look::Unchanged,
        _ => Look::Changed(id),
    })
}

/// Takes a newer save of the shared list SESSION from its file in DIR into
/// the registry; the caller holds the directory's lock.  Returns the
/// warnings for the user, and whether the list was replaced.
///
/// Only a file this Emacs has not seen is read.  A save older than the one
/// this Emacs knows (a copy put back) is not taken: the next save replaces
/// it.  A damaged file is moved aside as FILE.corrupt, as any save does,
/// and this Emacs's list goes on.  A file that is not a regular file, is
/// over the limits, of a newer layout or of another list is an error, and
/// nothing changes.  When this Emacs meets the file for the first time
/// while it holds a list of that name of its own, its own is kept beside
/// as FILE.conflict: the saved list is the shared one.
pub fn take_newer_save(session: &str, dir: &Path) -> io::Result<(bool, Vec<String>)> {
    let limits = shared_limits(session).unwrap_or_default();
    take_newer_save_within(session, dir, &limits)
}

/// Puts SESSION's list back as its file in DIR holds it, whatever this
/// Emacs knew of the file: a change whose save failed is taken back.
/// The caller holds the directory's lock.
pub fn take_back(session: &str, dir: &Path) -> io::Result<(bool, Vec<String>)> {
    let limits = shared_limits(session).unwrap_or_default();
    take_within(session, dir, &limits, true)
}

fn take_newer_save_within(
    session: &str,
    dir: &Path,
    limits: &Limits,
) -> io::Result<(bool, Vec<String>)> {
    if look(session, dir)? == Look::Unchanged {
        return Ok((false, Vec::new()));
    }
    take_within(session, dir, limits, false)
}

/// Reads SESSION's file in DIR within LIMITS and takes its list when it is
/// newer than the one this Emacs knows, or always when TAKING_BACK.
fn take_within(
    session: &str,
    dir: &Path,
    limits: &Limits,
    taking_back: bool,
) -> io::Result<(bool, Vec<String>)> {
    let target = file_path(dir, session);
    let known = conflict::known(&target);
    let mut id = None;
    let mut warnings = Vec::new();
    let decoded = match read_state_file(&target, limits, &mut id, false) {
        Ok(decoded) => decoded,
        Err(LoadError::Corrupt(why)) => {
            let kept = conflict::move_aside(&target)?;
            warnings.push(format!(
                "shared list {session:?}: {} could not be read ({why}); it was moved aside as {} and this Emacs's list is saved in its place",
                target.display(),
                kept.display()
            ));
            return Ok((false, warnings));
        }
        Err(LoadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            return Ok((false, warnings))
        }
        Err(e) => {
            return Err(io::Error::other(format!(
                "shared list {session:?}: {}: {e}",
                target.display()
            )))
        }
    };
    let Some(id) = id else {
        return Ok((false, warnings));
    };
    if decoded.name != session {
        return Err(io::Error::other(format!(
            "shared list {session:?}: {} holds the list {:?}; left alone",
            target.display(),
            decoded.name
        )));
    }
    let newer = taking_back || known.is_none_or(|(generation, _)| decoded.generation > generation);
    if newer {
        let mut registry = registry();
        let live = registry.session(session);
        if known.is_none()
            && !taking_back
            && !live.items.is_empty()
            && live.items != decoded.session.items
        {
            let kept = conflict::write_aside(&target, &encode(session, live), "conflict")?;
            warnings.push(format!(
                "shared list {session:?}: this Emacs's own list of that name was kept as {}, and the saved shared list taken in its place",
                kept.display()
            ));
        }
        live.take_saved_list(decoded.session);
        warnings.extend(
            decoded
                .warnings
                .into_iter()
                .map(|w| format!("shared list {session:?}: {}: {w}", target.display())),
        );
    }
    let generation = known.map_or(decoded.generation, |(g, _)| g.max(decoded.generation));
    adopt(
        dir,
        &Seen {
            name: session.to_string(),
            file: target,
            generation,
            id,
        },
    );
    Ok((newer, warnings))
}

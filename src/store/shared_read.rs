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

/// Makes SESSION a shared list, its file read within LIMITS.  The list
/// is one of this Emacs's sessions from then on, empty or not, so that
/// what shows the sessions shows it.
pub fn share(session: &str, limits: Limits) {
    lock(&SHARED).insert(session.to_string(), limits);
    registry().session(session);
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

/// The changes this Emacs made to each shared list and saved, newest
/// last: what undo may take back.
static OWN: Lazy<Mutex<HashMap<String, Vec<u64>>>> = Lazy::new(Mutex::default);

/// As many of this Emacs's changes of a list as history keeps undoable.
const MAX_OWN: usize = 200;

/// Records CHANGES, made by this Emacs to SESSION and saved, as its own.
pub(super) fn note_own(session: &str, changes: Vec<u64>) {
    if changes.is_empty() {
        return;
    }
    let mut own = lock(&OWN);
    let seqs = own.entry(session.to_string()).or_default();
    seqs.extend(changes);
    if seqs.len() > MAX_OWN {
        seqs.drain(..seqs.len() - MAX_OWN);
    }
}

/// The changes of SESSION this Emacs made, oldest first.
pub(super) fn own_changes(session: &str) -> Vec<u64> {
    lock(&OWN).get(session).cloned().unwrap_or_default()
}

/// What taking in a shared list's file did.
#[derive(Debug, Default)]
pub struct Taken {
    /// This Emacs's list was replaced by the file's.
    pub replaced: bool,
    /// The file was damaged and moved aside: no file holds the list now,
    /// and this Emacs's list must be saved in its place while the caller
    /// holds the lock.
    pub moved_aside: bool,
    /// What the user must know.
    pub warnings: Vec<String>,
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
/// Only a file this Emacs has not seen is read.  A damaged file is moved
/// aside as FILE.corrupt, as any save does, and this Emacs's list goes on
/// (`Taken::moved_aside`: the caller saves it there).  A save this Emacs
/// has not seen whose generation is not above the one it knows replaced
/// the file it knew (a fresh Emacs saved after the file was lost, a copy
/// was put back): it is taken in like a newer save, and this Emacs's own
/// list, when it holds other items, is kept beside as FILE.conflict.  A file that is not a regular file, is
/// over the limits, of a newer layout or of another list is an error, and
/// nothing changes.  When this Emacs meets the file for the first time
/// while it holds a list of that name of its own, its own is kept beside
/// as FILE.conflict: the saved list is the shared one.
pub fn take_newer_save(session: &str, dir: &Path) -> io::Result<Taken> {
    let limits = shared_limits(session).unwrap_or_default();
    take_newer_save_within(session, dir, &limits)
}

/// Puts SESSION's list back as its file in DIR holds it, whatever this
/// Emacs knew of the file: a change whose save failed is taken back.
/// The caller holds the directory's lock.
pub fn take_back(session: &str, dir: &Path) -> io::Result<Taken> {
    let limits = shared_limits(session).unwrap_or_default();
    take_within(session, dir, &limits, true)
}

fn take_newer_save_within(session: &str, dir: &Path, limits: &Limits) -> io::Result<Taken> {
    if look(session, dir)? == Look::Unchanged {
        return Ok(Taken::default());
    }
    take_within(session, dir, limits, false)
}

/// Reads SESSION's file in DIR within LIMITS and takes its list when it is
/// newer than the one this Emacs knows, or always when TAKING_BACK.
fn take_within(session: &str, dir: &Path, limits: &Limits, taking_back: bool) -> io::Result<Taken> {
    let target = file_path(dir, session);
    let known = conflict::known(&target);
    let mut id = None;
    let mut taken = Taken::default();
    let decoded = match read_state_file(&target, limits, &mut id, false) {
        Ok(decoded) => decoded,
        Err(LoadError::Corrupt(why)) => {
            let kept = conflict::move_aside(&target)?;
            taken.warnings.push(format!(
                "shared list {session:?}: {} could not be read ({why}); it was moved aside as {} and this Emacs's list is saved in its place",
                target.display(),
                kept.display()
            ));
            taken.moved_aside = true;
            return Ok(taken);
        }
        Err(LoadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(taken),
        Err(e) => {
            return Err(io::Error::other(format!(
                "shared list {session:?}: {}: {e}",
                target.display()
            )))
        }
    };
    let Some(id) = id else {
        return Ok(taken);
    };
    if decoded.name != session {
        return Err(io::Error::other(format!(
            "shared list {session:?}: {} holds the list {:?}; left alone",
            target.display(),
            decoded.name
        )));
    }
    // Every save of the list that this Emacs has not seen is taken in:
    // a newer one goes on from this Emacs's list; one that is not newer
    // replaced the file this Emacs knew, and saving over it would lose it.
    let replacing = known.is_some_and(|(generation, _)| decoded.generation <= generation);
    let mut registry = registry();
    let live = registry.session(session);
    if !taking_back && !live.items.is_empty() && live.items != decoded.session.items {
        if known.is_none() {
            let kept = conflict::write_aside(&target, &encode(session, live), "conflict")?;
            taken.warnings.push(format!(
                "shared list {session:?}: this Emacs's own list of that name was kept as {}, and the saved shared list taken in its place",
                kept.display()
            ));
        } else if replacing {
            let kept = conflict::write_aside(&target, &encode(session, live), "conflict")?;
            taken.warnings.push(format!(
                "shared list {session:?}: {} was replaced by a save this Emacs had not seen, of generation {} where it knew {} (another Emacs saved its own list there, or a copy was put back); that save is the shared list now, and this Emacs's list was kept as {}",
                target.display(),
                decoded.generation,
                known.map_or(0, |(generation, _)| generation),
                kept.display()
            ));
        }
    }
    if replacing && live.history != decoded.session.history {
        // The changes this Emacs made are not in that list's history.
        lock(&OWN).remove(session);
    }
    live.take_saved_list(decoded.session);
    drop(registry);
    taken.replaced = true;
    taken.warnings.extend(
        decoded
            .warnings
            .into_iter()
            .map(|w| format!("shared list {session:?}: {}: {w}", target.display())),
    );
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
    Ok(taken)
}

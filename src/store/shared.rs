//! Changes of a shared list: each is made on the newest save of the list
//! and saved before the call returns, under the state directory's lock,
//! so that every Emacs sharing the directory sees every change and no id
//! is issued twice.
//!
//! `begin` takes the lock (waiting at most the time it is given, so that
//! the Lisp side can wait in slices that C-g stops) and takes in a newer
//! save; the caller then changes the session; `end` saves the list when
//! it changed and lets the lock go.  `refresh` is for calls that only
//! read: a look at the file's identity, and a read only when it changed.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use once_cell::sync::Lazy;

use crate::session::{registry, ListMark};

use super::atomic::{replace_file, Replaced};
use super::conflict;
use super::directory::ensure_dir;
use super::encode::encode_into;
use super::lock::{lock, lock_dir_within, DirLock};
use super::names::{file_name, file_path};
use super::record::LedgerSummary;
use super::shared_read::{
    look, note_own, own_changes, shared_limits, take_back, take_newer_save, Look, Taken,
};
use super::writer::{finish_later, push_warning};

/// The lock of a directory this Emacs holds between `begin` and `end`,
/// and where each shared list changed under it stood at `begin`.
struct Held {
    _lock: DirLock,
    marks: Vec<(String, ListMark)>,
}

static HELD: Lazy<Mutex<HashMap<PathBuf, Held>>> = Lazy::new(Mutex::default);

/// Undo on the shared list SESSION: takes back this Emacs's newest change
/// only (see `Session::undo_own`); the caller has begun a change.
/// Ok(None) when this Emacs has no change left to undo; Err with the
/// reason when a later change of another agent touched its items.
pub fn undo_own(session: &str) -> Result<Option<String>, String> {
    registry().session(session).undo_own(&own_changes(session))
}

fn mark_of(session: &str) -> ListMark {
    registry().session(session).list_mark()
}

fn report(warnings: Vec<String>) {
    for warning in warnings {
        push_warning(warning);
    }
}

/// Reports what taking in SESSION's file in DIR did, and when its damaged
/// file was moved aside, saves this Emacs's list in its place at once:
/// the caller holds the lock.  Another Emacs then reads the list from the
/// file, and the file is not left missing until this one next changes it.
fn settle_taken(session: &str, dir: &Path, taken: Taken) {
    report(taken.warnings);
    if taken.moved_aside {
        match save_shared(session, dir) {
            Ok(replaced) => finish_later(dir, replaced),
            Err(e) => push_warning(format!(
                "shared list {session:?}: could not save this Emacs's list in {}: {e}; it is saved with its next change, or as this Emacs exits",
                dir.display()
            )),
        }
    }
}

/// Begins a change of the shared list SESSION saved in DIR: takes DIR's
/// lock, waiting at most WAIT, and takes in a newer save of the list.
/// Ok(false) when another process still holds the lock; an error when
/// the list's file cannot be taken in (then the lock is let go and
/// nothing changed).  Calls may nest: the lock is let go by the last `end`.
pub fn begin(session: &str, dir: &Path, wait: Duration) -> io::Result<bool> {
    let mut held = lock(&HELD);
    if !held.contains_key(dir) {
        ensure_dir(dir)?;
        let Some(dir_lock) = lock_dir_within(dir, wait)? else {
            return Ok(false);
        };
        held.insert(
            dir.to_path_buf(),
            Held {
                _lock: dir_lock,
                marks: Vec::new(),
            },
        );
    }
    let taken = take_newer_save(session, dir);
    let Some(entry) = held.get_mut(dir) else {
        return Ok(false);
    };
    match taken {
        Ok(taken) => {
            settle_taken(session, dir, taken);
            entry.marks.push((session.to_string(), mark_of(session)));
            Ok(true)
        }
        Err(e) => {
            if entry.marks.is_empty() {
                held.remove(dir);
            }
            Err(e)
        }
    }
}

/// Ends the change of SESSION begun by `begin`: saves the list into DIR
/// when it changed since, and lets the lock go unless an outer change
/// still holds it.  When the save fails, the list is put back as the file
/// holds it, so that the change is not made at all, and the error says so.
pub fn end(session: &str, dir: &Path) -> io::Result<()> {
    let mut held = lock(&HELD);
    let Some(entry) = held.get_mut(dir) else {
        return Ok(());
    };
    let Some(at) = entry.marks.iter().rposition(|(name, _)| name == session) else {
        return Ok(());
    };
    let (_, mark) = entry.marks.remove(at);
    let last = entry.marks.is_empty();
    let outcome = if mark_of(session) == mark {
        Ok(())
    } else {
        match save_shared(session, dir) {
            Ok(replaced) => {
                finish_later(dir, replaced);
                note_own(session, registry().session(session).changes_since(mark));
                Ok(())
            }
            Err(e) => {
                forget_unsaved(session, dir);
                Err(io::Error::other(format!(
                    "could not save the shared list {session:?} in {}, so the change was taken back: {e}",
                    dir.display()
                )))
            }
        }
    };
    if last {
        held.remove(dir);
    }
    outcome
}

/// Puts SESSION's list back as its file in DIR holds it, after a save of
/// a change failed.  Nothing when there is no file to go back to.
fn forget_unsaved(session: &str, dir: &Path) {
    if let Ok(taken) = take_back(session, dir) {
        report(taken.warnings);
    }
}

/// Saves SESSION into DIR; the caller holds the lock and has taken in the
/// newest save, so the file is this Emacs's to replace.
fn save_shared(session: &str, dir: &Path) -> io::Result<Replaced> {
    let target = file_path(dir, session);
    let plan = conflict::plan(session, &target)?;
    let mut bytes = Vec::new();
    {
        let registry = registry();
        let Some(state) = registry.get(session) else {
            return Err(io::Error::other("the list is gone"));
        };
        encode_into(
            &mut bytes,
            session,
            state,
            &LedgerSummary::of(state.entries()),
            plan.generation,
        );
    }
    if let Some(warning) = plan.keep_aside(session, &target)? {
        push_warning(warning);
    }
    let replaced = replace_file(dir, &file_name(session), &bytes)?;
    conflict::saved(target, plan.generation, replaced.id);
    Ok(replaced)
}

/// Brings the shared list SESSION up to its file in DIR, for a call that
/// reads it: a look at the file, and only when another Emacs saved it
/// since, a read under the lock (waiting at most WAIT; when the lock is
/// not free by then, the list stays as it was).  True when the list was
/// replaced.
pub fn refresh(session: &str, dir: &Path, wait: Duration) -> io::Result<bool> {
    if shared_limits(session).is_none() || look(session, dir)? == Look::Unchanged {
        return Ok(false);
    }
    if lock(&HELD).contains_key(dir) {
        // Within a change, which took the newest save in already.
        return Ok(false);
    }
    let Some(_lock) = lock_dir_within(dir, wait)? else {
        return Ok(false);
    };
    let taken = take_newer_save(session, dir)?;
    let replaced = taken.replaced;
    settle_taken(session, dir, taken);
    Ok(replaced)
}

/// Saves the shared list SESSION into DIR when no file holds it there
/// (the file was deleted, or a save after a damaged file was moved aside
/// failed) and the list holds something: what an exiting Emacs does for
/// its shared lists, as it saves every other list still waiting.  A newer
/// save another Emacs made meanwhile is taken in instead.  Waits at most
/// WAIT for the lock: Ok(false) when another process still holds it.
pub fn save_if_missing(session: &str, dir: &Path, wait: Duration) -> io::Result<bool> {
    if shared_limits(session).is_none() || !dir.is_dir() {
        return Ok(true);
    }
    if lock(&HELD).contains_key(dir) {
        // Within a change, which saves the list as it ends.
        return Ok(true);
    }
    let Some(_lock) = lock_dir_within(dir, wait)? else {
        return Ok(false);
    };
    let taken = take_newer_save(session, dir)?;
    settle_taken(session, dir, taken);
    let holds_something = registry().get(session).is_some_and(|state| {
        !state.items.is_empty() || !state.retired.is_empty() || state.history.last_seq() > 0
    });
    match std::fs::symlink_metadata(file_path(dir, session)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound && holds_something => {
            let replaced = save_shared(session, dir)?;
            finish_later(dir, replaced);
        }
        _ => {}
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::Instant;

    use crate::session::Session;
    use crate::store::encode::encode;
    use crate::store::shared_read::{share, unshare};
    use crate::store::test_support::{json_of, temp_dir, texts_of_each};
    use crate::store::{save_now, take_warnings, write_atomic, LOCK_FILE};
    use crate::validate::Limits;
    use serde_json::json;

    const WAIT: Duration = Duration::from_secs(5);

    /// One "Emacs": its sessions are the process's registry, so a second
    /// Emacs is simulated by writing its saves to the file directly.
    fn add(session: &str, dir: &Path, content: &str) -> String {
        assert!(begin(session, dir, WAIT).unwrap());
        let id = registry()
            .session(session)
            .add(content.into(), None, &Limits::default())
            .map(|item| item.id);
        end(session, dir).unwrap();
        id.unwrap()
    }

    fn contents(session: &str) -> Vec<String> {
        registry()
            .get(session)
            .map(|s| s.items.iter().map(|i| i.content.clone()).collect())
            .unwrap_or_default()
    }

    /// Another Emacs's save of the file: the list in it with one more item.
    fn saved_elsewhere(dir: &Path, session: &str, content: &str, id: &str) {
        let file = file_path(dir, session);
        let mut json = json_of(&file);
        let generation = json["generation"].as_u64().unwrap();
        json["generation"] = json!(generation + 1);
        let mut item = json["items"][0].clone();
        item["id"] = json!(id);
        item["content"] = json!(content);
        json["items"].as_array_mut().unwrap().push(item);
        let n: u64 = id[1..].parse().unwrap();
        json["id_counter"] = json!(n);
        write_atomic(
            dir,
            &file_name(session),
            &serde_json::to_vec(&json).unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn a_change_is_made_on_the_newest_save_and_saved_before_it_returns() {
        let dir = temp_dir("shared");
        let name = format!("shared test {}", std::process::id());
        share(&name, Limits::default());
        assert_eq!(add(&name, &dir, "mine"), "t1");
        let file = file_path(&dir, &name);
        assert_eq!(json_of(&file)["items"][0]["content"], "mine");
        // Another Emacs adds t2; this one's next change sees it and issues t3.
        saved_elsewhere(&dir, &name, "theirs", "t2");
        assert_eq!(add(&name, &dir, "mine again"), "t3");
        assert_eq!(contents(&name), ["mine", "theirs", "mine again"]);
        let saved = json_of(&file);
        assert_eq!(saved["items"].as_array().unwrap().len(), 3);
        assert_eq!(saved["generation"], 3);
        // No conflict copy for a shared list.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("conflict"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
        // A reading call sees the other Emacs's save too.
        saved_elsewhere(&dir, &name, "theirs again", "t4");
        assert!(refresh(&name, &dir, WAIT).unwrap());
        assert_eq!(contents(&name).len(), 4);
        assert!(
            !refresh(&name, &dir, WAIT).unwrap(),
            "an unchanged file is not read again"
        );
        // The writer thread's save of a shared list takes the newer save in
        // rather than setting it aside.
        saved_elsewhere(&dir, &name, "before a background save", "t5");
        save_now(&name, &dir).unwrap();
        assert_eq!(contents(&name).len(), 5);
        assert!(!take_warnings()
            .iter()
            .any(|w| w.contains(&name) && w.contains("conflict")));
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_change_that_changes_nothing_writes_nothing() {
        let dir = temp_dir("shared-read");
        let name = format!("shared reading {}", std::process::id());
        share(&name, Limits::default());
        add(&name, &dir, "one");
        let before = fs::symlink_metadata(file_path(&dir, &name)).unwrap();
        assert!(begin(&name, &dir, WAIT).unwrap());
        let _ = registry().session(&name).counts();
        end(&name, &dir).unwrap();
        let after = fs::symlink_metadata(file_path(&dir, &name)).unwrap();
        assert_eq!(
            crate::store::atomic::file_id(&before),
            crate::store::atomic::file_id(&after)
        );
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_held_lock_is_waited_for_a_bounded_time_and_changes_nothing() {
        let dir = temp_dir("shared-held");
        let name = format!("shared held {}", std::process::id());
        share(&name, Limits::default());
        add(&name, &dir, "one");
        // Another process's lock: a second descriptor conflicts like one.
        let other = crate::store::lock::lock_dir(&dir).unwrap();
        let started = Instant::now();
        assert!(!begin(&name, &dir, Duration::from_millis(100)).unwrap());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!lock(&HELD).contains_key(dir.as_path()));
        drop(other);
        assert!(begin(&name, &dir, WAIT).unwrap());
        end(&name, &dir).unwrap();
        assert!(dir.join(LOCK_FILE).exists());
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_or_special_file_is_treated_as_any_save_treats_it() {
        let dir = temp_dir("shared-damaged");
        let name = format!("shared damaged {}", std::process::id());
        share(&name, Limits::default());
        add(&name, &dir, "one");
        let file = file_path(&dir, &name);
        write_atomic(&dir, &file_name(&name), b"{ not json").unwrap();
        assert_eq!(add(&name, &dir, "two"), "t2");
        assert!(dir.join(format!("{}.corrupt", file_name(&name))).exists());
        assert_eq!(json_of(&file)["items"].as_array().unwrap().len(), 2);
        // Its warning goes to `take_warnings`, which tests running alongside
        // drain too: the Lisp suite checks that it is shown.
        #[cfg(unix)]
        {
            fs::remove_file(&file).unwrap();
            std::os::unix::fs::symlink(dir.join("elsewhere"), &file).unwrap();
            let error = begin(&name, &dir, WAIT).unwrap_err().to_string();
            assert!(error.contains("symbolic link"), "{error}");
            assert!(
                !lock(&HELD).contains_key(dir.as_path()),
                "the lock was let go"
            );
            assert!(refresh(&name, &dir, WAIT).is_err());
        }
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_file_a_look_finds_is_replaced_by_this_emacs_list_at_once() {
        let dir = temp_dir("shared-damaged-look");
        let name = format!("shared damaged look {}", std::process::id());
        share(&name, Limits::default());
        add(&name, &dir, "one");
        add(&name, &dir, "two");
        let file = file_path(&dir, &name);
        let generation = json_of(&file)["generation"].as_u64().unwrap();
        // A reading call's look moves it aside and saves this list there,
        // under the lock it holds: nothing is left without a file.
        write_atomic(&dir, &file_name(&name), b"garbage{{{").unwrap();
        refresh(&name, &dir, WAIT).unwrap();
        assert!(dir.join(format!("{}.corrupt", file_name(&name))).exists());
        let saved = json_of(&file);
        assert_eq!(saved["items"].as_array().unwrap().len(), 2);
        assert!(saved["generation"].as_u64().unwrap() > generation);
        // So does a change that changes nothing.
        write_atomic(&dir, &file_name(&name), b"garbage again").unwrap();
        assert!(begin(&name, &dir, WAIT).unwrap());
        end(&name, &dir).unwrap();
        assert!(dir.join(format!("{}.1.corrupt", file_name(&name))).exists());
        assert_eq!(json_of(&file)["items"].as_array().unwrap().len(), 2);
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_save_that_replaced_the_file_with_a_lower_generation_is_not_overwritten() {
        let dir = temp_dir("shared-replaced");
        let name = format!("shared replaced {}", std::process::id());
        share(&name, Limits::default());
        for content in ["one", "two", "three"] {
            add(&name, &dir, content);
        }
        // The file was lost, and a fresh Emacs, which never saw it, saved
        // its own list in its place: generation 1, its first id t1 again.
        let mut fresh = Session::default();
        fresh.add("fresh".into(), None, &Limits::default()).unwrap();
        let mut json: serde_json::Value = serde_json::from_slice(&encode(&name, &fresh)).unwrap();
        json["generation"] = json!(1);
        let theirs = serde_json::to_vec(&json).unwrap();
        write_atomic(&dir, &file_name(&name), &theirs).unwrap();
        assert_eq!(add(&name, &dir, "after"), "t4", "no id is issued twice");
        let file = file_path(&dir, &name);
        let saved = json_of(&file);
        assert_eq!(
            texts_of_each(&saved, "items", "content"),
            ["fresh", "after"]
        );
        assert!(saved["generation"].as_u64().unwrap() > 3);
        assert!(saved["id_counter"].as_u64().unwrap() >= 4);
        let kept = dir.join(format!("{}.conflict", file_name(&name)));
        assert_eq!(
            texts_of_each(&json_of(&kept), "items", "content"),
            ["one", "two", "three"]
        );
        // The same save put back under a new identity (a copy, a touch)
        // holds nothing new: no copy is kept for it.
        let same = fs::read(&file).unwrap();
        fs::remove_file(&file).unwrap();
        write_atomic(&dir, &file_name(&name), &same).unwrap();
        assert_eq!(add(&name, &dir, "later"), "t5");
        assert!(!dir
            .join(format!("{}.1.conflict", file_name(&name)))
            .exists());
        assert_eq!(contents(&name), ["fresh", "after", "later"]);
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_shared_list_whose_file_is_gone_is_saved_again_when_asked() {
        let dir = temp_dir("shared-missing");
        let name = format!("shared missing {}", std::process::id());
        share(&name, Limits::default());
        // Nothing in it, nothing to save: no file appears.
        assert!(save_if_missing(&name, &dir, WAIT).unwrap());
        add(&name, &dir, "one");
        let file = file_path(&dir, &name);
        fs::remove_file(&file).unwrap();
        assert!(save_if_missing(&name, &dir, WAIT).unwrap());
        assert_eq!(json_of(&file)["items"][0]["content"], "one");
        // A file that is there is left alone.
        let before = fs::symlink_metadata(&file).unwrap();
        assert!(save_if_missing(&name, &dir, WAIT).unwrap());
        let after = fs::symlink_metadata(&file).unwrap();
        assert_eq!(
            crate::store::atomic::file_id(&before),
            crate::store::atomic::file_id(&after)
        );
        // Another process's lock: not saved, and said so.
        fs::remove_file(&file).unwrap();
        let other = crate::store::lock::lock_dir(&dir).unwrap();
        assert!(!save_if_missing(&name, &dir, Duration::from_millis(50)).unwrap());
        drop(other);
        assert!(!file.exists());
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_shared_list_exists_from_the_moment_it_is_shared() {
        let name = format!("shared empty {}", std::process::id());
        share(&name, Limits::default());
        assert!(registry().names().contains(&name));
        unshare(&name);
    }

    #[test]
    fn first_contact_keeps_this_emacs_own_list_beside() {
        let dir = temp_dir("shared-first");
        let name = format!("shared first {}", std::process::id());
        let mut theirs = Session::default();
        theirs
            .add("theirs".into(), None, &Limits::default())
            .unwrap();
        let mut json: serde_json::Value = serde_json::from_slice(&encode(&name, &theirs)).unwrap();
        json["generation"] = json!(1);
        write_atomic(&dir, &file_name(&name), &serde_json::to_vec(&json).unwrap()).unwrap();
        registry()
            .session(&name)
            .add("mine".into(), None, &Limits::default())
            .unwrap();
        share(&name, Limits::default());
        assert!(refresh(&name, &dir, WAIT).unwrap());
        assert_eq!(contents(&name), ["theirs"]);
        let kept = dir.join(format!("{}.conflict", file_name(&name)));
        assert_eq!(json_of(&kept)["items"][0]["content"], "mine");
        unshare(&name);
        let _ = fs::remove_dir_all(&dir);
    }
}

//! A state directory read back: every state file within the limits
//! todo_write keeps, damaged files moved aside, files that cannot be read
//! left alone and said why, and the newest save of each session chosen by
//! its generation, never by a file's name or time.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::history::{MAX_CHANGES, MAX_UNDO_ITEMS};
use crate::session::Session;
use crate::validate::Limits;

use super::atomic::{file_id, is_stale_temp, FileId};
use super::conflict::{move_aside_unchanged, Seen};
use super::directory::{check_dir, explained};
use super::file_kind::{not_regular, open_regular, special_kind};
use super::names::{file_name, EXTENSION};
use super::record::{decode_as, Decoded, LoadError, MAX_STORED_RETIRED};

/// A session read back from a file.
#[derive(Debug)]
pub struct Loaded {
    pub name: String,
    pub session: Session,
    pub file: PathBuf,
}

/// What reading a directory found.
#[derive(Debug, Default)]
pub struct DirReport {
    pub loaded: Vec<Loaded>,
    /// Damaged files: where each was, where it went, what was wrong.
    pub moved_aside: Vec<(PathBuf, PathBuf, String)>,
    /// Files left where they are, and why (newer layout, over the limits,
    /// not a regular file, unreadable).
    pub skipped: Vec<(PathBuf, String)>,
    /// Parts of loaded files that were dropped or cut, and why.
    pub warnings: Vec<(PathBuf, String)>,
    /// The newest save of every session found, loaded or not (a finished
    /// one, with ONLY_OPEN): for `adopt`.
    pub seen: Vec<Seen>,
}

/// The largest file a list within LIMITS can make: every item, retired
/// item and earlier value kept for undo at its longest, at four bytes a
/// character, and the history's ids and summaries.  A bigger file is
/// refused before it is read, so that reading one costs bounded time.
pub fn max_file_bytes(limits: &Limits) -> u64 {
    let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let item = wide(limits.max_content_chars)
        .saturating_mul(8)
        .saturating_add(512);
    let items = wide(limits.max_items)
        .saturating_mul(2)
        .saturating_add(wide(MAX_STORED_RETIRED + MAX_UNDO_ITEMS));
    let history = wide(MAX_CHANGES).saturating_mul(
        wide(limits.max_items)
            .saturating_mul(16)
            .saturating_add(4096),
    );
    (1u64 << 20)
        .saturating_add(items.saturating_mul(item))
        .saturating_add(history)
}

/// Reads one state file within the default limits.
pub fn load_file(file: &Path) -> Result<(String, Session), LoadError> {
    load_file_within(file, &Limits::default()).map(|decoded| (decoded.name, decoded.session))
}

/// Reads one state file within LIMITS; only a regular file, never
/// following a symlink, and not one bigger than `max_file_bytes`.
pub fn load_file_within(file: &Path, limits: &Limits) -> Result<Decoded, LoadError> {
    let mut id = None;
    read_state_file(file, limits, &mut id, true)
}

/// `load_file_within`, and the identity of the file read in ID.  A save
/// this Emacs restores (RESTORING) has no sub-agent running any more;
/// another Emacs's save of a shared list may.
pub(super) fn read_state_file(
    file: &Path,
    limits: &Limits,
    id: &mut Option<FileId>,
    restoring: bool,
) -> Result<Decoded, LoadError> {
    let opened = open_regular(file)?;
    let meta = opened.metadata()?;
    *id = Some(file_id(&meta));
    let size = meta.len();
    let bound = max_file_bytes(limits);
    if size > bound {
        return Err(LoadError::Refused(format!(
            "{size} bytes, more than a list within efrit-todo-max-items ({}) and efrit-todo-max-content-length ({}) can take ({bound} bytes); not read",
            limits.max_items, limits.max_content_chars
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // At most one byte more than the size seen, should the file grow.
    io::Read::read_to_end(&mut io::Read::take(opened, size + 1), &mut bytes)?;
    decode_as(&bytes, limits, restoring)
}

/// Reads every state file in DIR within LIMITS.  With ONLY_OPEN, sessions
/// without unfinished items are left on disk.  Damaged files are moved
/// aside, files over the limits left alone; nothing here panics or gives
/// up on the other files.
pub fn load_dir(dir: &Path, only_open: bool, limits: &Limits) -> io::Result<DirReport> {
    let mut report = DirReport::default();
    match fs::metadata(dir) {
        Ok(meta) => check_dir(dir, &meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(explained(dir, e)),
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(e),
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut found = Vec::new();
    for file in files {
        if is_stale_temp(&file) {
            let _ = fs::remove_file(&file);
            continue;
        }
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || file.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
            continue;
        }
        // Named like a state file but not one: never opened, and said so.
        match fs::symlink_metadata(&file).map(|meta| special_kind(meta.file_type())) {
            Ok(None) => {}
            Ok(Some(kind)) => {
                report
                    .skipped
                    .push((file.clone(), not_regular(&file, kind).to_string()));
                continue;
            }
            Err(_) => continue,
        }
        let mut id = None;
        match read_state_file(&file, limits, &mut id, true) {
            Ok(decoded) => {
                if let Some(id) = id {
                    found.push((file, decoded, id));
                }
            }
            Err(LoadError::Corrupt(why)) => match move_aside_unchanged(&file, id) {
                Ok(to) => report.moved_aside.push((file, to, why)),
                Err(e) => report
                    .skipped
                    .push((file, format!("{why}; not moved aside: {e}"))),
            },
            Err(other) => report.skipped.push((file, other.to_string())),
        }
    }
    // Copies of a session's file (a backup, a file renamed by hand) hold
    // the same session: its newest save wins, by generation, never by file
    // name or time; at equal generations its own file does.
    let mut order: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, Vec<(PathBuf, Decoded, FileId)>> = HashMap::new();
    for found in found {
        if !by_name.contains_key(&found.1.name) {
            order.push(found.1.name.clone());
        }
        by_name.entry(found.1.name.clone()).or_default().push(found);
    }
    for name in order {
        let Some(mut copies) = by_name.remove(&name) else {
            continue;
        };
        let own = file_name(&name);
        let rank = |(file, decoded, _): &(PathBuf, Decoded, FileId)| {
            (
                decoded.generation,
                file.file_name().is_some_and(|f| f.to_string_lossy() == own),
            )
        };
        let newest = (0..copies.len())
            .max_by_key(|&i| rank(&copies[i]))
            .unwrap_or(0);
        let (file, decoded, id) = copies.swap_remove(newest);
        for (copy, older, _) in copies {
            let age = if older.generation < decoded.generation {
                "an older copy"
            } else {
                "a copy"
            };
            report.skipped.push((
                copy,
                format!(
                    "it holds {age} of session {name:?} (generation {}); the newest save of it, generation {}, is {}",
                    older.generation,
                    decoded.generation,
                    file.display()
                ),
            ));
        }
        report.seen.push(Seen {
            name: name.clone(),
            file: file.clone(),
            generation: decoded.generation,
            id,
        });
        if !only_open || decoded.session.counts().open() > 0 {
            report
                .warnings
                .extend(decoded.warnings.into_iter().map(|w| (file.clone(), w)));
            report.loaded.push(Loaded {
                name,
                session: decoded.session,
                file,
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::time::{Duration, SystemTime};

    use crate::session::registry;
    use crate::store::directory::ensure_dir;
    use crate::store::encode::encode;
    use crate::store::test_support::{busy_session, failures_of, json_of, temp_dir};
    use crate::store::{flush, save_now, write_atomic};

    #[test]
    fn a_file_over_the_size_bound_is_refused_before_it_is_read() {
        let limits = Limits {
            max_items: 5,
            max_content_chars: 20,
            ..Limits::default()
        };
        let dir = temp_dir("huge");
        ensure_dir(&dir).unwrap();
        let path = dir.join("huge.json");
        // Garbage a parser would chew on: refused by its size alone.
        fs::write(&path, "[".repeat(max_file_bytes(&limits) as usize + 1)).unwrap();
        match load_file_within(&path, &limits) {
            Err(e @ LoadError::Refused(_)) => assert!(e.to_string().contains("bytes"), "{e}"),
            other => panic!("{other:?}"),
        }
        // Left where it is, not moved aside: it may be fine under other limits.
        let report = load_dir(&dir, false, &limits).unwrap();
        assert!(
            report.moved_aside.is_empty() && report.skipped.len() == 1,
            "{report:?}"
        );
        assert!(path.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_load_moves_damaged_files_aside_and_reads_the_rest() {
        let dir = temp_dir("load");
        let s = busy_session();
        write_atomic(&dir, &file_name("good"), &encode("good", &s)).unwrap();
        write_atomic(
            &dir,
            &file_name("done"),
            &encode("done", &Session::default()),
        )
        .unwrap();
        write_atomic(&dir, "bad.json", b"{\"schema_version\": 2, \"sess").unwrap();
        fs::write(dir.join("bad.json.corrupt"), b"older damage").unwrap();
        write_atomic(
            &dir,
            "newer.json",
            br#"{"schema_version": 9, "session": "n", "items": []}"#,
        )
        .unwrap();
        fs::write(dir.join("notes.txt"), b"not mine").unwrap();
        let report = load_dir(&dir, true, &Limits::default()).unwrap();
        let names: Vec<_> = report.loaded.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        assert_eq!(report.moved_aside.len(), 1);
        assert_eq!(report.moved_aside[0].1, dir.join("bad.json.1.corrupt"));
        assert_eq!(
            fs::read(dir.join("bad.json.corrupt")).unwrap(),
            b"older damage"
        );
        assert_eq!(report.skipped.len(), 1);
        assert!(dir.join("newer.json").exists());
        registry()
            .session("newer")
            .add("x".into(), None, &Limits::default())
            .unwrap();
        assert!(save_now("newer", &dir)
            .unwrap_err()
            .to_string()
            .contains("newer efrit-todo"));
        assert_eq!(
            load_dir(&dir, false, &Limits::default())
                .unwrap()
                .loaded
                .len(),
            2
        );
        assert!(load_dir(&dir.join("missing"), false, &Limits::default())
            .unwrap()
            .loaded
            .is_empty());
        // The refused save stays pending: let it land before the directory goes.
        fs::remove_file(dir.join("newer.json")).unwrap();
        assert!(failures_of("\"newer\"", flush()).is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    /// Sets the modification time of PATH SECONDS from now.
    fn touch(path: &Path, seconds: i64) {
        let now = SystemTime::now();
        let when = if seconds >= 0 {
            now + Duration::from_secs(seconds.unsigned_abs())
        } else {
            now - Duration::from_secs(seconds.unsigned_abs())
        };
        OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn the_newest_write_of_a_session_wins_over_its_copies_whatever_their_names_and_times() {
        let dir = temp_dir("copies");
        let name = format!("copies test {}", std::process::id());
        registry()
            .session(&name)
            .add("first".into(), None, &Limits::default())
            .unwrap();
        let file = save_now(&name, &dir).unwrap().unwrap();
        let first = fs::read(&file).unwrap();
        assert_eq!(json_of(&file)["generation"], 1);
        registry()
            .session(&name)
            .add("second".into(), None, &Limits::default())
            .unwrap();
        save_now(&name, &dir).unwrap();
        let second = fs::read(&file).unwrap();
        assert_eq!(
            json_of(&file)["generation"],
            2,
            "every save counts one generation up"
        );
        // A user's backups of the older save: one sorted before the file,
        // one after, both with a newer time.
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let backups = [
            dir.join(format!("{stem}-backup.json")),
            dir.join("zz copy.json"),
        ];
        for backup in &backups {
            fs::write(backup, &first).unwrap();
            touch(backup, 3600);
        }
        let report = load_dir(&dir, false, &Limits::default()).unwrap();
        let mine: Vec<&Loaded> = report.loaded.iter().filter(|l| l.name == name).collect();
        assert_eq!(mine.len(), 1, "one list per session, not one per copy");
        assert_eq!(mine[0].file, file);
        assert_eq!(mine[0].session.items.len(), 2);
        for backup in &backups {
            let why = report
                .skipped
                .iter()
                .find(|(f, _)| f == backup)
                .map(|(_, why)| why.as_str())
                .unwrap_or("");
            assert!(
                why.contains("older copy") && why.contains(&file.display().to_string()),
                "{backup:?}: {why}"
            );
        }
        // The session's own file put back to the older save: the newest
        // write, wherever it is, still wins.
        fs::write(&file, &first).unwrap();
        fs::write(&backups[1], &second).unwrap();
        touch(&backups[1], -3600);
        let report = load_dir(&dir, false, &Limits::default()).unwrap();
        let mine: Vec<&Loaded> = report.loaded.iter().filter(|l| l.name == name).collect();
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].file, backups[1]);
        assert_eq!(mine[0].session.items.len(), 2);
        assert!(
            report
                .skipped
                .iter()
                .any(|(f, why)| *f == file && why.contains("older copy")),
            "{:?}",
            report.skipped
        );
        let _ = fs::remove_dir_all(&dir);
    }
}

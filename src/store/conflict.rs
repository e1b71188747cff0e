//! Saves of other Emacsen: which save of each state file this process has
//! seen, what a save finds where it writes, and files kept aside (a save
//! this process had not seen, as a conflict copy; a damaged file) rather
//! than overwritten.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use once_cell::sync::Lazy;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::atomic::{file_id, FileId};
use super::directory::sync_dir;
use super::file_kind::{not_regular, open_regular, special_kind};
use super::lock::{lock, lock_dir};
use super::names::file_path;
use super::record::{VersionOnly, SCHEMA_VERSION};

/// The newest save of a session in a directory.
#[derive(Debug, Clone)]
pub struct Seen {
    pub name: String,
    pub file: PathBuf,
    pub generation: u64,
    pub id: FileId,
}

/// The first free name among FILE.WHY, FILE.1.WHY, FILE.2.WHY...
fn aside_name(file: &Path, why: &str) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut candidate = file.with_file_name(format!("{name}.{why}"));
    let mut n = 1;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = file.with_file_name(format!("{name}.{n}.{why}"));
        n += 1;
    }
    candidate
}

/// Moves FILE aside as FILE.WHY (`corrupt`, `conflict`), so that it is
/// kept for inspection and no load or save meets it again.
fn move_aside_as(file: &Path, why: &str) -> io::Result<PathBuf> {
    let target = aside_name(file, why);
    fs::rename(file, &target)?;
    if let Some(dir) = file.parent() {
        let _ = sync_dir(dir);
    }
    Ok(target)
}

/// Moves a damaged file aside as FILE.corrupt.
pub fn move_aside(file: &Path) -> io::Result<PathBuf> {
    move_aside_as(file, "corrupt")
}

/// Moves the damaged FILE aside, unless it changed since it was read as
/// ID: another Emacs may have saved over it meanwhile.
pub(super) fn move_aside_unchanged(file: &Path, id: Option<FileId>) -> io::Result<PathBuf> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let _lock = lock_dir(dir)?;
    let now = fs::symlink_metadata(file).map(|meta| file_id(&meta)).ok();
    if id.is_none() || now != id {
        return Err(io::Error::other(
            "it changed while it was read, so it is left for the next restore",
        ));
    }
    move_aside(file)
}

/// The newest save of each state file this process knows: the one it
/// wrote last, or read and took its list from.  A file found otherwise
/// holds a save this process has not seen, another Emacs's.
#[derive(Debug, Clone, Copy)]
struct Known {
    generation: u64,
    /// None when it was read from another file (a copy that won).
    id: Option<FileId>,
}

static KNOWN: Lazy<Mutex<HashMap<PathBuf, Known>>> = Lazy::new(Mutex::default);

/// Records that this process's list of SEEN's session, saved in DIR,
/// goes on from SEEN: saving it over that save is no conflict.
pub fn adopt(dir: &Path, seen: &Seen) {
    let target = file_path(dir, &seen.name);
    let id = (seen.file == target).then_some(seen.id);
    lock(&KNOWN).insert(
        target,
        Known {
            generation: seen.generation,
            id,
        },
    );
}

/// The newest save of TARGET this process knows: its generation, and the
/// identity of the file when this process wrote or read it there.
pub(super) fn known(target: &Path) -> Option<(u64, Option<FileId>)> {
    lock(&KNOWN).get(target).map(|k| (k.generation, k.id))
}

/// Keeps BYTES beside TARGET as a new TARGET.WHY file, written atomically:
/// a list of this Emacs that a shared file's list replaces.
pub(super) fn write_aside(target: &Path, bytes: &[u8], why: &str) -> io::Result<PathBuf> {
    let aside = aside_name(target, why);
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = aside
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    super::atomic::write_atomic(dir, &name, bytes)
}

/// What a save finds at its state file's path.
enum OnDisk {
    Absent,
    /// This process's newest save of it, unchanged.
    Known,
    /// A save of SESSION of GENERATION, not the known one.
    Other {
        session: String,
        generation: u64,
    },
    /// Something that does not read as a state file.
    Damaged(String),
}

/// The start of a state file, enough to tell whose save it is.
#[derive(Deserialize)]
struct Header<'a> {
    schema_version: u64,
    session: String,
    #[serde(default, borrow)]
    generation: Option<&'a RawValue>,
}

/// Looks at TARGET before a save replaces it; KNOWN is this process's
/// newest save of it.  Only a file that changed since is read.
fn examine(target: &Path, known: Option<Known>) -> io::Result<OnDisk> {
    let meta = match fs::symlink_metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OnDisk::Absent),
        Err(e) => return Err(e),
    };
    if let Some(kind) = special_kind(meta.file_type()) {
        return Err(not_regular(target, kind));
    }
    if known.and_then(|k| k.id) == Some(file_id(&meta)) {
        return Ok(OnDisk::Known);
    }
    let opened = open_regular(target)?;
    // Read whole, whatever its size: it is kept, not parsed into a list.
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(opened, MAX_EXAMINED_BYTES), &mut bytes)?;
    match serde_json::from_slice::<Header>(&bytes) {
        Ok(header) if header.schema_version > SCHEMA_VERSION => {
            Err(newer_file(header.schema_version))
        }
        Ok(header) => {
            let generation = header
                .generation
                .and_then(|g| serde_json::from_str(g.get()).ok())
                .unwrap_or(0);
            Ok(OnDisk::Other {
                session: header.session,
                generation,
            })
        }
        Err(e) => match serde_json::from_slice::<VersionOnly>(&bytes) {
            Ok(VersionOnly { schema_version }) if schema_version > SCHEMA_VERSION => {
                Err(newer_file(schema_version))
            }
            _ if bytes.len() as u64 >= MAX_EXAMINED_BYTES => Ok(OnDisk::Other {
                session: String::new(),
                generation: 0,
            }),
            _ => Ok(OnDisk::Damaged(e.to_string())),
        },
    }
}

/// A file bigger than this found where a save goes is kept as a conflict
/// without being read to its end.
const MAX_EXAMINED_BYTES: u64 = 256 * 1024 * 1024;

fn newer_file(version: u64) -> io::Error {
    io::Error::other(format!(
        "its file was written by a newer efrit-todo (schema version {version}); not overwriting it"
    ))
}

/// What a save must do before it replaces its file: the generation it
/// writes, and the file found there to keep aside first, if any (as
/// `corrupt` or `conflict`, and what to say of it).
pub(super) struct Plan {
    pub(super) generation: u64,
    aside: Option<(&'static str, String)>,
}

/// Looks at TARGET before a save of SESSION replaces it; the caller holds
/// the directory's lock.
///
/// A save never replaces a save of the file it has not seen: one written
/// by another Emacs since this one last wrote or read the file, or one of a
/// session this one never read (two Emacsen that started a session of the
/// same name).  That file is kept beside as FILE.conflict, with a warning,
/// and this save gets a generation above it.
pub(super) fn plan(session: &str, target: &Path) -> io::Result<Plan> {
    let known = lock(&KNOWN).get(target).copied();
    let seen = known.map_or(0, |k| k.generation);
    let (generation, aside) = match examine(target, known)? {
        OnDisk::Absent | OnDisk::Known => (seen, None),
        OnDisk::Damaged(why) => (seen, Some(("corrupt", why))),
        // The same session, no newer than what this process has: an older
        // copy put back, or a touch.  Nothing to keep.
        OnDisk::Other {
            session: name,
            generation,
        } if name == session && known.is_some_and(|k| generation <= k.generation) => (seen, None),
        OnDisk::Other { generation, .. } => (
            seen.max(generation),
            Some(("conflict", generation.to_string())),
        ),
    };
    Ok(Plan {
        generation: generation.saturating_add(1),
        aside,
    })
}

impl Plan {
    /// Keeps the file at TARGET aside when the plan says so, and returns
    /// the warning that tells the user where it went.
    pub(super) fn keep_aside(&self, session: &str, target: &Path) -> io::Result<Option<String>> {
        let Some((kind, what)) = &self.aside else {
            return Ok(None);
        };
        let kept = move_aside_as(target, kind)?;
        let warning = if *kind == "conflict" {
            format!(
                "session {session:?}: {} held a save this Emacs had not seen (generation {what}, by another Emacs or an earlier one); it was kept as {} and this Emacs's list saved in its place",
                target.display(),
                kept.display()
            )
        } else {
            format!(
                "session {session:?}: {} could not be read ({what}); it was moved aside as {} and this Emacs's list saved in its place",
                target.display(),
                kept.display()
            )
        };
        Ok(Some(warning))
    }
}

/// Records that TARGET now holds this process's save of GENERATION, which
/// is ID: the newest save of it this process knows.
pub(super) fn saved(target: PathBuf, generation: u64, id: FileId) {
    lock(&KNOWN).insert(
        target,
        Known {
            generation,
            id: Some(id),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{registry, Session};
    use crate::store::encode::encode;
    use crate::store::test_support::{json_of, temp_dir, write};
    use crate::store::{file_name, save_now, take_warnings, write_atomic};
    use crate::validate::Limits;
    use serde_json::{json, Value as Json};

    fn contents(json: &Json) -> Vec<&str> {
        json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_save_never_overwrites_a_save_it_has_not_seen_without_keeping_it() {
        let dir = temp_dir("conflict");
        let name = format!("conflict test {}", std::process::id());
        registry()
            .session(&name)
            .add("mine".into(), None, &Limits::default())
            .unwrap();
        let file = save_now(&name, &dir).unwrap().unwrap();
        // Saving again over its own save is no conflict.
        save_now(&name, &dir).unwrap();
        assert!(take_warnings().iter().all(|w| !w.contains(&name)));
        assert_eq!(json_of(&file)["generation"], 2);
        // Another Emacs read that save and saved twice since, its own list:
        // generation 4, written by a rename as every save is.
        let mut theirs = json_of(&file);
        theirs["generation"] = json!(4);
        theirs["items"][0]["content"] = json!("theirs");
        let theirs = serde_json::to_vec(&theirs).unwrap();
        write_atomic(&dir, &file_name(&name), &theirs).unwrap();
        registry()
            .session(&name)
            .add("mine too".into(), None, &Limits::default())
            .unwrap();
        save_now(&name, &dir).unwrap();
        // Theirs is kept beside, byte for byte; ours is the session's file,
        // newer than theirs; and the user is told.
        let kept = dir.join(format!("{}.conflict", file_name(&name)));
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        assert_eq!(
            text(fs::read(&kept).unwrap_or_default()),
            text(theirs),
            "the other save was not kept"
        );
        assert_eq!(contents(&json_of(&file)), ["mine", "mine too"]);
        assert_eq!(json_of(&file)["generation"], 5);
        let warnings = take_warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&name) && w.contains(&kept.display().to_string())),
            "{warnings:?}"
        );
        // Since then ours is the newest: no conflict.
        save_now(&name, &dir).unwrap();
        assert!(!dir
            .join(format!("{}.1.conflict", file_name(&name)))
            .exists());
        // An older save of the same session put back by hand is no
        // newer save: it is replaced.
        let older = fs::read(&file).unwrap();
        save_now(&name, &dir).unwrap();
        write_atomic(&dir, &file_name(&name), &older).unwrap();
        save_now(&name, &dir).unwrap();
        assert!(!dir
            .join(format!("{}.1.conflict", file_name(&name)))
            .exists());
        assert!(take_warnings().iter().all(|w| !w.contains(&name)));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn two_processes_starting_the_same_session_name_keep_both_lists() {
        // Efrit names sessions by the second: two Emacsen starting a command
        // in the same second share a name.  This one never read the other's file.
        let dir = temp_dir("collision");
        let name = format!("efrit-do-20250101120000 {}", std::process::id());
        let mut other = Session::default();
        write(
            &mut other,
            json!([{"content": "The other command", "status": "in_progress"}]),
        );
        let mut theirs: Json = serde_json::from_slice(&encode(&name, &other)).unwrap();
        theirs["generation"] = json!(1);
        let theirs = serde_json::to_vec(&theirs).unwrap();
        write_atomic(&dir, &file_name(&name), &theirs).unwrap();
        registry()
            .session(&name)
            .add("This command".into(), None, &Limits::default())
            .unwrap();
        let file = save_now(&name, &dir).unwrap().unwrap();
        let kept = fs::read(dir.join(format!("{}.conflict", file_name(&name)))).unwrap_or_default();
        assert_eq!(
            String::from_utf8(kept).unwrap(),
            String::from_utf8(theirs).unwrap(),
            "the other list was not kept"
        );
        assert_eq!(contents(&json_of(&file)), ["This command"]);
        assert!(take_warnings().iter().any(|w| w.contains(&name)));
        let _ = fs::remove_dir_all(&dir);
    }
}

//! Atomic writes: a temporary file in the same directory, written in one
//! call and synced, then renamed over the old file, so that a state file
//! always holds either its old or its new content.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use once_cell::sync::Lazy;

use super::directory::{ensure_dir, sync_dir};
use super::file_kind::{not_regular, open_regular, special_kind};

/// Temporary files older than this are leftovers of a crashed write.
const STALE_TEMP: Duration = Duration::from_secs(600);

fn create_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    // create_new never follows a symlink: one at PATH fails the call.
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A pause in the middle of every write, from the environment variable
/// EFRIT_TODO_TEST_WRITE_PAUSE_MS: the crash test kills a child Emacs while
/// a file is half written, which a real write is too quick to allow.
static TEST_WRITE_PAUSE: Lazy<Option<Duration>> = Lazy::new(|| {
    std::env::var("EFRIT_TODO_TEST_WRITE_PAUSE_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
});

/// What tells one version of a file from another without reading it:
/// a rename puts a new inode in place, a write in place changes the size
/// or the modification time.  Only ever compared for equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

pub(super) fn file_id(meta: &fs::Metadata) -> FileId {
    #[cfg(unix)]
    let (device, inode) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (device, inode) = (0, 0);
    FileId {
        device,
        inode,
        len: meta.len(),
        modified: meta.modified().ok(),
    }
}

/// A file put in place by `replace_file`, before its directory is synced.
#[derive(Debug)]
pub struct Replaced {
    pub path: PathBuf,
    /// The new file's identity, as it now is at PATH.
    pub id: FileId,
    /// The file it replaced, still open.  The last close of a replaced file
    /// frees its blocks, which costs as much as the rename itself (measured
    /// ~110 us for 32 KB on ext4); holding it lets the writer thread pay
    /// that instead of the save.
    pub(super) replaced: Option<File>,
}

/// Puts BYTES in DIR/FILE so that the file always holds either its old or
/// its new content: a temporary file in the same directory, written in one
/// call and synced, then renamed over FILE.  The rename is made durable by
/// syncing DIR, which is the caller's to do (see `write_atomic`).
pub fn replace_file(dir: &Path, file: &str, bytes: &[u8]) -> io::Result<Replaced> {
    ensure_dir(dir)?;
    let target = dir.join(file);
    // Only a regular file is replaced: a FIFO, a directory or a symlink
    // someone put there stays, and the save fails saying why.
    match fs::symlink_metadata(&target) {
        Ok(meta) => {
            if let Some(kind) = special_kind(meta.file_type()) {
                return Err(not_regular(&target, kind));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let temp = dir.join(format!(
        ".{file}.{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut out = create_private(&temp)?;
        match *TEST_WRITE_PAUSE {
            None => out.write_all(bytes)?,
            Some(pause) => {
                let half = bytes.len() / 2;
                out.write_all(&bytes[..half])?;
                out.flush()?;
                std::thread::sleep(pause);
                out.write_all(&bytes[half..])?;
            }
        }
        // fdatasync, not fsync: it writes the data and every piece of
        // metadata needed to read it back (size, block map), skipping only
        // the times.  For a file created and filled here that is all that
        // matters before the rename, and it saves a journal write of the
        // inode's times (measured 396 against 503 us).
        out.sync_data()?;
        // A rename keeps the inode, the size and the modification time.
        let id = file_id(&out.metadata()?);
        drop(out);
        // Unix only: elsewhere an open file cannot be renamed over.
        // Never blocking: the target may have become a FIFO since the check.
        #[cfg(unix)]
        let replaced = open_regular(&target).ok();
        #[cfg(not(unix))]
        let replaced = None;
        fs::rename(&temp, &target)?;
        Ok((replaced, id))
    })();
    match written {
        Ok((replaced, id)) => Ok(Replaced {
            path: target,
            id,
            replaced,
        }),
        Err(e) => {
            let _ = fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// Writes BYTES as DIR/FILE atomically and durably: `replace_file`, then an
/// fsync of DIR so that the rename survives a power cut too.
pub fn write_atomic(dir: &Path, file: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    let Replaced { path, replaced, .. } = replace_file(dir, file, bytes)?;
    drop(replaced);
    sync_dir(dir)?;
    Ok(path)
}

pub(super) fn is_stale_temp(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with('.')
        && name.ends_with(".tmp")
        && fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > STALE_TEMP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::temp_dir;

    #[test]
    fn writes_are_atomic_private_and_replace_the_old_file() {
        let dir = temp_dir("atomic").join("nested");
        let path = write_atomic(&dir, "s.json", b"first").unwrap();
        write_atomic(&dir, "s.json", b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
            assert_eq!(
                fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.json"]);
        let _ = fs::remove_dir_all(dir.parent().unwrap());
    }
}

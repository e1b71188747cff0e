//! Only regular files are read or replaced: a FIFO, a device or a
//! symbolic link where a state file goes is named in an error, never
//! opened in a way that blocks or follows it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

/// What kind of file TYPE is, when it is not a regular file.
pub(super) fn special_kind(file_type: fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    if file_type.is_symlink() {
        return Some("a symbolic link");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return Some("a device");
        }
    }
    Some("not a plain file")
}

pub(super) fn not_regular(path: &Path, kind: &str) -> io::Error {
    io::Error::other(format!(
        "{} is not a regular file ({kind}); efrit-todo reads and replaces only regular files, so it leaves it alone",
        path.display()
    ))
}

/// Opens PATH for reading without ever blocking or following a symlink:
/// a FIFO, a device or a symlink at PATH is an error naming what it is,
/// never a read that waits for a writer.
pub(super) fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW,
    );
    let file = match options.open(path) {
        Ok(file) => file,
        // O_NOFOLLOW fails on a symlink with ELOOP.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular(path, "a symbolic link"))
        }
        Err(e) => return Err(e),
    };
    match special_kind(file.metadata()?.file_type()) {
        Some(kind) => Err(not_regular(path, kind)),
        None => Ok(file),
    }
}

#[cfg(test)]
mod tests {
    use std::fs::{self, OpenOptions};
    use std::path::Path;
    use std::time::Duration;

    use crate::session::registry;
    use crate::store::directory::ensure_dir;
    use crate::store::test_support::{failures_of, temp_dir};
    use crate::store::{file_path, flush, load_dir, load_file, save_now, schedule};
    use crate::validate::Limits;

    #[cfg(unix)]
    fn make_fifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        assert_eq!(
            unsafe { libc::mkfifo(name.as_ptr(), 0o600) },
            0,
            "mkfifo {}",
            path.display()
        );
    }

    /// Runs F on a thread of its own and returns its value, or None when it
    /// has not returned after SECONDS (it is left running).
    fn within<T: Send + 'static>(
        seconds: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(seconds)).ok()
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_symlink_at_a_state_file_is_never_opened_for_writing() {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let dir = temp_dir("fifo");
        ensure_dir(&dir).unwrap();
        let name = format!("fifo test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Limits::default())
            .unwrap();
        let target = file_path(&dir, &name);
        make_fifo(&target);
        let (n, d) = (name.clone(), dir.clone());
        let saved = within(5, move || save_now(&n, &d).map_err(|e| e.to_string()));
        let Some(saved) = saved else {
            // Let the stuck save go, so that the other tests can go on.
            let _ = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&target);
            panic!("a save blocked on the FIFO at {}", target.display());
        };
        let error = saved.unwrap_err();
        assert!(
            error.contains("not a regular file") && error.contains("FIFO"),
            "{error}"
        );
        assert!(
            fs::symlink_metadata(&target).unwrap().file_type().is_fifo(),
            "the FIFO was replaced"
        );
        // Scheduled and flushed, the same, and the flush comes back.
        assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        let errors = within(5, flush).expect("a flush blocked on a FIFO");
        assert!(failures_of(&name, errors)
            .iter()
            .any(|e| e.contains("FIFO")));
        // Reading the directory skips it, and says so.
        let report = within(5, {
            let dir = dir.clone();
            move || load_dir(&dir, false, &Limits::default()).unwrap()
        })
        .expect("a restore blocked on a FIFO");
        assert!(
            report
                .skipped
                .iter()
                .any(|(file, why)| *file == target && why.contains("FIFO")),
            "{:?}",
            report.skipped
        );
        // A symlink is not followed: the file it points to stays as it was.
        fs::remove_file(&target).unwrap();
        let outside = temp_dir("fifo-outside");
        fs::write(&outside, b"not yours").unwrap();
        std::os::unix::fs::symlink(&outside, &target).unwrap();
        let error = save_now(&name, &dir).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(fs::read(&outside).unwrap(), b"not yours");
        assert!(fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink());
        let report = load_dir(&dir, false, &Limits::default()).unwrap();
        assert!(
            report
                .skipped
                .iter()
                .any(|(file, why)| *file == target && why.contains("symbolic link")),
            "{:?}",
            report.skipped
        );
        // Gone, the save lands.
        fs::remove_file(&target).unwrap();
        assert!(failures_of(&name, flush()).is_empty());
        assert!(load_file(&target).is_ok());
        let _ = fs::remove_file(&outside);
        let _ = fs::remove_dir_all(&dir);
    }
}

//! Locks: the lock file that keeps apart the saves of every Emacs sharing
//! a state directory, and this process's own mutexes, taken even after a
//! panic poisoned them.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::file_kind::{not_regular, special_kind};

/// The lock file of a state directory: saves of every Emacs sharing the
/// directory hold it from looking at a state file until theirs replaces it.
pub const LOCK_FILE: &str = ".efrit-todo.lock";

/// How long a save waits for another Emacs's save to let go of the lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The lock of a state directory, held until dropped.
pub(super) struct DirLock(#[allow(dead_code)] Option<File>);

/// Takes the lock of DIR, waiting at most `LOCK_WAIT`.  On a file system
/// without locks the save goes on unlocked: the generation check still
/// catches all but a save landing in the same instant.
pub(super) fn lock_dir(dir: &Path) -> io::Result<DirLock> {
    match lock_dir_within(dir, LOCK_WAIT)? {
        Some(lock) => Ok(lock),
        None => Err(io::Error::other(format!(
            "another process has held {} for more than {} s",
            dir.join(LOCK_FILE).display(),
            LOCK_WAIT.as_secs()
        ))),
    }
}

/// Takes the lock of DIR, waiting at most WAIT; None when another process
/// (or another descriptor of this one) still holds it then.  A lock whose
/// holder died is free: the kernel lets go of a dead process's locks.
pub(super) fn lock_dir_within(dir: &Path, wait: Duration) -> io::Result<Option<DirLock>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK_FILE);
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        let file = match options.open(&path) {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(not_regular(&path, "a symbolic link"))
            }
            Err(e) => return Err(e),
        };
        if let Some(kind) = special_kind(file.metadata()?.file_type()) {
            return Err(not_regular(&path, kind));
        }
        let deadline = Instant::now() + wait;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Some(DirLock(Some(file))));
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
                Some(libc::ENOLCK) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                    return Ok(Some(DirLock(None)))
                }
                _ => return Err(error),
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (dir, wait);
        Ok(Some(DirLock(None)))
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use crate::store::directory::ensure_dir;
    use crate::store::test_support::temp_dir;

    #[test]
    fn a_second_save_waits_for_the_lock_and_gives_up_after_a_bounded_time() {
        let dir = temp_dir("lock");
        ensure_dir(&dir).unwrap();
        let held = lock_dir(&dir).unwrap();
        let started = Instant::now();
        let error = match lock_dir(&dir) {
            Ok(_) => panic!("the lock was taken twice"),
            Err(e) => e.to_string(),
        };
        assert!(started.elapsed() >= LOCK_WAIT, "{:?}", started.elapsed());
        assert!(
            error.contains(LOCK_FILE) && error.contains("held"),
            "{error}"
        );
        // Let go meanwhile, it is taken without waiting out the limit.
        let started = Instant::now();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
        });
        let again = lock_dir(&dir);
        assert!(again.is_ok(), "{:?}", again.err());
        assert!(started.elapsed() < LOCK_WAIT);
        releaser.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_lock_file_is_not_followed() {
        let dir = temp_dir("lock-link");
        ensure_dir(&dir).unwrap();
        let elsewhere = dir.join("elsewhere");
        std::os::unix::fs::symlink(&elsewhere, dir.join(LOCK_FILE)).unwrap();
        let error = lock_dir(&dir).map(|_| ()).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert!(!elsewhere.exists(), "the link was followed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_poisoned_mutex_is_still_taken() {
        let mutex = Arc::new(Mutex::new(7));
        let poisoner = Arc::clone(&mutex);
        let panicked = std::thread::spawn(move || {
            let _guard = poisoner.lock().unwrap();
            panic!("poisoning the mutex on purpose");
        })
        .join();
        assert!(panicked.is_err() && mutex.is_poisoned());
        assert_eq!(*lock(&mutex), 7);
    }
}

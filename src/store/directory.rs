//! The state directory: made private when it is missing, refused when
//! someone else could plant files in it, said plainly when a file stands
//! where it should be, and synced after a rename.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::file_kind::special_kind;

/// Creates DIR (mode 0700, its missing parents too) when it does not
/// exist, and checks that it is a directory only its user can write.
pub(super) fn ensure_dir(dir: &Path) -> io::Result<()> {
    match fs::metadata(dir) {
        Ok(meta) => return check_dir(dir, &meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(explained(dir, e)),
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Ok(()) => check_dir(dir, &fs::metadata(dir)?),
        Err(e) => Err(explained(dir, e)),
    }
}

/// ERROR, met making or reading DIR, said plainly when a file stands where
/// the directory or one of its parents should be ("File exists" alone
/// says nothing about which).
pub(super) fn explained(dir: &Path, error: io::Error) -> io::Error {
    let why = not_a_directory(dir);
    if why.kind() == io::ErrorKind::Other {
        why
    } else {
        error
    }
}

/// Why DIR cannot be a directory: the first of it and its parents that
/// exists and is not one (a file where the state directory should be).
fn not_a_directory(dir: &Path) -> io::Error {
    let dir: PathBuf = dir.components().collect();
    let culprit = dir.ancestors().find_map(|path| {
        let meta = fs::metadata(path).ok()?;
        let kind = if meta.is_dir() {
            return None;
        } else if meta.is_file() {
            "a file"
        } else {
            special_kind(meta.file_type())?
        };
        Some((path.to_path_buf(), kind))
    });
    match culprit {
        Some((path, kind)) if path == dir => io::Error::other(format!(
            "{} is {kind}, not a directory; set efrit-todo-state-directory to a directory",
            path.display()
        )),
        Some((path, kind)) => io::Error::other(format!(
            "{} is {kind}, not a directory, so the state directory {} cannot be made; set efrit-todo-state-directory to a directory",
            path.display(),
            dir.display()
        )),
        None => io::Error::new(io::ErrorKind::NotFound, format!("the state directory {} cannot be made", dir.display())),
    }
}

/// Refuses a state directory someone else could plant files in: its files
/// become text the model reads.  It must be a directory owned by this
/// process's user and writable by nobody else (group and others).
pub(super) fn check_dir(dir: &Path, meta: &fs::Metadata) -> io::Result<()> {
    if !meta.is_dir() {
        return Err(not_a_directory(dir));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let dir: PathBuf = dir.components().collect();
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        let why = if meta.uid() != me {
            format!("is owned by user {}, not by you (user {me})", meta.uid())
        } else if meta.mode() & 0o002 != 0 {
            format!("is writable by others (mode {:o})", meta.mode() & 0o7777)
        } else if meta.mode() & 0o020 != 0 {
            format!("is writable by its group (mode {:o})", meta.mode() & 0o7777)
        } else {
            return Ok(());
        };
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the state directory {} {why}; its files become text the model reads, so efrit-todo neither reads nor writes there: make it yours alone (chmod go-w) or set efrit-todo-state-directory to a directory of your own",
                dir.display()
            ),
        ));
    }
    #[allow(unreachable_code)]
    Ok(())
}

/// Makes a rename in DIR durable.  Not every platform can open a directory.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let mut options = OpenOptions::new();
        options.read(true);
        // Whatever DIR has become since, opening it never blocks.
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut options,
            libc::O_NONBLOCK | libc::O_DIRECTORY,
        );
        options.open(dir)?.sync_all()?;
    }
    let _ = dir;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::registry;
    use crate::store::test_support::{failures_of, temp_dir};
    use crate::store::{file_path, flush, load_dir, save_now};
    use crate::validate::Limits;

    #[cfg(unix)]
    #[test]
    fn a_state_directory_others_can_write_or_do_not_own_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("shared");
        ensure_dir(&dir).unwrap();
        let name = format!("shared dir test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Limits::default())
            .unwrap();
        let refused = |mode: u32, what: &str| {
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
            let error = save_now(&name, &dir).map(|_| ()).unwrap_err().to_string();
            assert!(
                error.contains(what) && error.contains("efrit-todo-state-directory"),
                "{mode:o}: {error}"
            );
            let error = load_dir(&dir, false, &Limits::default())
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(error.contains(what), "{mode:o}: {error}");
            assert!(!file_path(&dir, &name).exists());
        };
        refused(0o777, "writable by others");
        refused(0o775, "writable by its group");
        refused(0o1777, "writable by others");
        // SAFETY: plain calls with a valid path.
        if unsafe { libc::geteuid() } == 0 {
            use std::os::unix::ffi::OsStrExt;
            let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
            assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
            refused(0o700, "owned by user 65534");
            assert_eq!(unsafe { libc::chown(path.as_ptr(), 0, 0) }, 0);
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        assert!(save_now(&name, &dir).is_ok());
        assert!(failures_of(&name, flush()).is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_directory_that_is_a_file_says_so() {
        let file = temp_dir("a-file");
        fs::write(&file, b"not a directory").unwrap();
        let name = format!("file dir test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Limits::default())
            .unwrap();
        let error = save_now(&name, &file).map(|_| ()).unwrap_err().to_string();
        assert!(
            error.contains(&format!("{} is a file, not a directory", file.display())),
            "{error}"
        );
        let error = save_now(&name, &file.join("sub"))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("{} is a file, not a directory", file.display())),
            "{error}"
        );
        // Let the pending save land, then clean up.
        fs::remove_file(&file).unwrap();
        assert!(failures_of(&name, flush()).is_empty());
        let _ = fs::remove_dir_all(&file);
    }
}

//! Persistence: one JSON file per session, written atomically, read back
//! with older layouts upgraded and damaged files moved aside.
//!
//! Saving never runs on the caller's path: `schedule` only marks a session
//! dirty and a writer thread, 20 ms later, writes the newest state of each
//! dirty session (latest state wins, so a burst of changes costs one write).  `flush`
//! writes everything pending before it returns, for `kill-emacs-hook`,
//! `efrit-todo-save` and tests.  The last step of a save, syncing the
//! directory and freeing the replaced file, is the thread's too (`settle`).
//!
//! One file per job, each using only those before it in this list
//! (tests/architecture.rs checks that they form no cycle):
//!
//! - `names`: the file name of a session;
//! - `record`: the file layout, and reading it back: older layouts
//!   upgraded, the limits todo_write keeps, bad parts dropped;
//! - `encode`: writing that layout straight from a session;
//! - `file_kind`: only regular files are read or replaced, never a FIFO
//!   or a symbolic link;
//! - `directory`: the state directory, made private, checked and synced;
//! - `atomic`: a file replaced atomically through a synced temporary file;
//! - `lock`: the directory's lock between Emacsen, and poison-proof mutexes;
//! - `conflict`: saves of other Emacsen kept aside as conflict copies,
//!   damaged files moved aside;
//! - `restore`: a state directory read back within the limits, the newest
//!   save of each session winning;
//! - `install`: restored sessions put into the registry, live ones kept;
//! - `retry`: a failed save kept pending and retried with backoff;
//! - `shared_read`: the lists shared with other Emacsen, and a shared
//!   list's file taken in when another Emacs saved it;
//! - `queue`: what the writer thread has to do and has to report;
//! - `writer`: the writer thread, a save, `schedule`, `flush`, `save_now`;
//! - `shared`: a change of a shared list, made on its newest save and
//!   saved before the call returns, under the directory's lock.

mod atomic;
mod conflict;
mod directory;
mod encode;
mod file_kind;
mod holder;
mod install;
mod lock;
mod names;
mod queue;
mod record;
mod restore;
mod retry;
mod shared;
mod shared_read;
mod writer;

pub use atomic::{replace_file, write_atomic, FileId, Replaced};
pub use conflict::{adopt, move_aside, Seen};
pub use encode::encode;
pub use holder::forget_dead_peers;
pub use install::{install, Restored};
pub use lock::LOCK_FILE;
pub use names::{file_name, file_path, EXTENSION};
pub use record::{decode, decode_within, Decoded, LoadError, MAX_STORED_RETIRED, SCHEMA_VERSION};
pub use restore::{load_dir, load_file, load_file_within, max_file_bytes, DirReport, Loaded};
pub use shared::{
    begin as shared_begin, end as shared_end, refresh as shared_refresh,
    save_if_missing as shared_save_if_missing, undo_own as shared_undo,
};
pub use shared_read::{share, shared_limits, shared_lists, unshare};
pub use writer::{
    flush, flush_begin, flush_end, flush_wait, flush_within, save_now, schedule, take_warnings,
    FLUSH_WAIT,
};

// Last: tests/architecture.rs reads what comes before as production code.
#[cfg(test)]
mod test_support;

//! The writer thread: saves scheduled on the caller's path are written
//! here, 20 ms later, the newest state of each dirty session; `flush`
//! waits a bounded time for everything pending; `save_now` saves at once.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use once_cell::sync::Lazy;

use crate::session::registry;

use super::atomic::{replace_file, Replaced};
use super::conflict;
use super::directory::{ensure_dir, sync_dir};
use super::encode::encode_into;
use super::lock::{lock, lock_dir};
use super::names::file_name;
use super::queue::{Outcome, Queue};
use super::record::LedgerSummary;
use super::shared_read::{shared_limits, take_newer_save};

/// What saves reuse from one to the next; it lives under `Writer::writing`.
#[derive(Default)]
struct Scratch {
    /// Every file is encoded here and written from here in one call.
    buffer: Vec<u8>,
    /// Each session's ledger summary as of its last save, brought up to
    /// date at the next one rather than counted again.
    ledgers: HashMap<String, LedgerSummary>,
}

/// A buffer grown past this by a huge list is given back after its save.
const MAX_KEPT_BUFFER: usize = 4 * 1024 * 1024;

struct Writer {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Signalled when the thread has done a flush.
    flushed: Condvar,
    /// Held for the whole of a save, snapshot included: saves of a session
    /// land in the order their snapshots were taken, so the file never goes
    /// back to an older state.
    writing: Mutex<Scratch>,
    /// Held while directories are synced, so that a flush returns only
    /// after a sync the thread has begun.
    settling: Mutex<()>,
}

static WRITER: Lazy<Writer> = Lazy::new(|| Writer {
    queue: Mutex::new(Queue::default()),
    wake: Condvar::new(),
    flushed: Condvar::new(),
    writing: Mutex::new(Scratch::default()),
    settling: Mutex::new(()),
});

/// Saves SESSION into DIR now; the caller holds `writing`, which SCRATCH
/// comes from.  Ok(None) when the session does not exist.
///
/// A save never replaces a save of the file it has not seen: that file is
/// kept beside first, with a warning (see `conflict::plan`).  The
/// directory's lock keeps the saves of all Emacsen apart from looking to
/// replacing.
fn save_locked(scratch: &mut Scratch, session: &str, dir: &Path) -> io::Result<Option<Replaced>> {
    let file = file_name(session);
    let target = dir.join(&file);
    ensure_dir(dir)?;
    let _lock = lock_dir(dir)?;
    if shared_limits(session).is_some() {
        // A shared list is never kept aside: another Emacs's newer save
        // is taken in first, and this one goes on from it.
        let taken = take_newer_save(session, dir)?;
        lock(&WRITER.queue).warnings.extend(taken.warnings);
    }
    let plan = conflict::plan(session, &target)?;
    let generation = plan.generation;
    scratch.buffer.clear();
    {
        // The file is encoded under the registry's lock, straight from the
        // session: one pass over it, no copy (a copy took as long as the
        // encoding), and the ledger summary only counts the calls since the
        // last save.  Lisp calls wait for that, never for the disk.
        let registry = registry();
        let Some(state) = registry.get(session) else {
            scratch.ledgers.remove(session);
            return Ok(None);
        };
        let ledger = scratch.ledgers.entry(session.to_string()).or_default();
        ledger.catch_up(state.entries());
        encode_into(&mut scratch.buffer, session, state, ledger, generation);
    }
    if let Some(warning) = plan.keep_aside(session, &target)? {
        lock(&WRITER.queue).warnings.push(warning);
    }
    let replaced = replace_file(dir, &file, &scratch.buffer);
    if scratch.buffer.capacity() > MAX_KEPT_BUFFER {
        scratch.buffer = Vec::new();
    }
    let replaced = replaced?;
    conflict::saved(target, generation, replaced.id);
    Ok(Some(replaced))
}

/// Adds WARNING to those `take_warnings` reports.
pub(super) fn push_warning(warning: String) {
    lock(&WRITER.queue).warnings.push(warning);
}

/// Leaves the end of a save made outside the writer (syncing DIR, closing
/// the file REPLACED took the place of) to the writer thread.
pub(super) fn finish_later(dir: &Path, replaced: Replaced) {
    let mut queue = lock(&WRITER.queue);
    queue.unsynced.insert(dir.to_path_buf());
    queue.replaced.extend(replaced.replaced);
    if ensure_thread(&mut queue) {
        WRITER.wake.notify_one();
    } else {
        drop(queue);
        settle();
    }
}

/// The warnings of saves not reported yet: a save of another Emacs kept
/// beside as a conflict, a damaged file moved aside.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut lock(&WRITER.queue).warnings)
}

fn describe_failure(session: &str, dir: &Path, error: &io::Error) -> String {
    format!(
        "could not save session {session:?} in {}: {error}",
        dir.display()
    )
}

/// Saves every session of BATCH and leaves the syncing of their
/// directories, one sync per directory, to `settle`.  Returns how each went.
fn write_batch(scratch: &mut Scratch, batch: HashMap<String, PathBuf>) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut done = Vec::new();
    for (session, dir) in batch {
        let failure = match save_locked(scratch, &session, &dir) {
            Ok(Some(replaced)) => {
                done.push((dir.clone(), replaced));
                None
            }
            Ok(None) => None,
            Err(e) => Some(describe_failure(&session, &dir, &e)),
        };
        outcomes.push(Outcome {
            session,
            dir,
            failure,
        });
    }
    if !done.is_empty() {
        let mut queue = lock(&WRITER.queue);
        for (dir, replaced) in done {
            queue.unsynced.insert(dir);
            queue.replaced.extend(replaced.replaced);
        }
    }
    outcomes
}

/// Finishes the saves made so far: closes the files they replaced and syncs
/// each directory a rename happened in, so that the renames survive a power
/// cut.  Until then a crash of the machine (not of Emacs) can bring back
/// the previous complete file, never a partial one, because every file was
/// synced before its rename.  Failures go to the queue's errors.
fn settle() {
    let _settling = lock(&WRITER.settling);
    let (dirs, replaced) = {
        let mut queue = lock(&WRITER.queue);
        (
            std::mem::take(&mut queue.unsynced),
            std::mem::take(&mut queue.replaced),
        )
    };
    drop(replaced);
    let failures: Vec<String> = dirs
        .into_iter()
        .filter_map(|dir| match sync_dir(&dir) {
            // A directory removed since holds no rename to keep.
            Err(e) if e.kind() != io::ErrorKind::NotFound => Some(format!(
                "could not sync {}, so the last save may not survive a power cut: {e}",
                dir.display()
            )),
            _ => None,
        })
        .collect();
    if !failures.is_empty() {
        lock(&WRITER.queue).record_failures(failures);
    }
}

/// How long the writer lets changes gather after the first one.  An agent
/// changes its list seconds apart, so this costs nothing there, while a
/// burst of changes becomes one write instead of one per fsync.
const COALESCE: Duration = Duration::from_millis(20);

/// Waits until the queue holds work: a save, a sync, or a failed save
/// whose retry is due.
fn wait_for_work() {
    let mut queue = lock(&WRITER.queue);
    loop {
        if !queue.idle() {
            return;
        }
        match queue.next_retry() {
            None => queue = WRITER.wake.wait(queue).unwrap_or_else(|p| p.into_inner()),
            Some(due) => {
                let now = Instant::now();
                if due <= now {
                    return;
                }
                queue = WRITER
                    .wake
                    .wait_timeout(queue, due - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
}

fn writer_loop() {
    loop {
        wait_for_work();
        {
            // Changes gather for a moment, unless a flush waits.
            let queue = lock(&WRITER.queue);
            drop(
                WRITER
                    .wake
                    .wait_timeout_while(queue, COALESCE, |q| q.flushes_asked == q.flushes_done),
            );
        }
        let serving = {
            let mut scratch = lock(&WRITER.writing);
            let (batch, serving) = {
                let mut queue = lock(&WRITER.queue);
                let serving = queue.flushes_asked;
                // A flush tries every failed save again, not only those due.
                let flushing = serving > queue.flushes_done;
                let batch = queue.take_batch(flushing);
                queue.in_hand = batch.keys().cloned().collect();
                (batch, serving)
            };
            let outcomes = write_batch(&mut scratch, batch);
            let mut queue = lock(&WRITER.queue);
            record_outcomes(&mut queue, outcomes);
            queue.in_hand.clear();
            serving
        };
        // Outside `writing`: a save made meanwhile need not wait for it.
        settle();
        let mut queue = lock(&WRITER.queue);
        queue.flushes_done = queue.flushes_done.max(serving);
        WRITER.flushed.notify_all();
    }
}

/// Starts the writer thread unless it runs; false when it cannot be started.
fn ensure_thread(queue: &mut Queue) -> bool {
    if !queue.thread_started {
        queue.thread_started = std::thread::Builder::new()
            .name("efrit-todo-store".into())
            .spawn(writer_loop)
            .is_ok();
    }
    queue.thread_started
}

/// Records in QUEUE how the saves of a batch went (`Queue::record_outcomes`).
/// When one failed, the writer thread is woken to time its retry.
fn record_outcomes(queue: &mut Queue, outcomes: Vec<Outcome>) {
    if outcomes.iter().any(|o| o.failure.is_some()) && ensure_thread(queue) {
        WRITER.wake.notify_one();
    }
    queue.record_outcomes(outcomes);
}

/// Marks SESSION to be saved into DIR by the writer thread, and returns the
/// failures of earlier background saves (once each).  Never touches the
/// disk itself unless the thread cannot be started.
pub fn schedule(session: &str, dir: &Path) -> Vec<String> {
    let mut queue = lock(&WRITER.queue);
    // This runs on every change, so a busy session is scheduled once per
    // save, and the thread is woken (a system call) only from idle: until
    // it is idle again it takes whatever is pending without waiting.
    let was_idle = queue.idle();
    if queue
        .pending
        .get(session)
        .is_none_or(|pending| pending != dir)
    {
        queue.pending.insert(session.to_string(), dir.to_path_buf());
    }
    if !ensure_thread(&mut queue) {
        drop(queue);
        return flush();
    }
    if was_idle {
        WRITER.wake.notify_one();
    }
    queue.news()
}

/// How long `flush` waits for the writer thread by default.
pub const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// Asks the writer thread to write every pending save, including one it
/// has begun, to try every failed save again and to sync the directories
/// of every save so far.  Returns the flush's ticket for `flush_wait` and
/// `flush_end`.  Without a thread it does all that itself, at once.
pub fn flush_begin() -> u64 {
    let mut queue = lock(&WRITER.queue);
    if !ensure_thread(&mut queue) {
        drop(queue);
        let mut scratch = lock(&WRITER.writing);
        let batch = lock(&WRITER.queue).take_batch(true);
        let outcomes = write_batch(&mut scratch, batch);
        record_outcomes(&mut lock(&WRITER.queue), outcomes);
        drop(scratch);
        settle();
        return 0;
    }
    queue.flushes_asked += 1;
    WRITER.wake.notify_one();
    queue.flushes_asked
}

/// Waits up to LIMIT for the flush TICKET; true once it is done.
pub fn flush_wait(ticket: u64, limit: Duration) -> bool {
    let queue = lock(&WRITER.queue);
    let (queue, _) = WRITER
        .flushed
        .wait_timeout_while(queue, limit, |q| q.flushes_done < ticket)
        .unwrap_or_else(|p| p.into_inner());
    queue.flushes_done >= ticket
}

/// What the flush TICKET leaves to say: the saves that have still not
/// landed (every time, until they do), the other failures not reported
/// yet, and, when the flush is not done (its waiting ran out after
/// WAITED), that it gave up and what stays pending.
pub fn flush_end(ticket: u64, waited: Duration) -> Vec<String> {
    let mut queue = lock(&WRITER.queue);
    let done = queue.flushes_done >= ticket;
    let unsaved = if done {
        String::new()
    } else {
        queue
            .unsaved()
            .iter()
            .map(|name| format!("{name:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut truth = queue.truth();
    if !done {
        truth.push(format!(
            "gave up waiting for the writer after {:.1} s, with the disk not answering; {} stay pending and are written when it does",
            waited.as_secs_f64(),
            if unsaved.is_empty() { "the saves under way".to_string() } else { format!("the saves of {unsaved}") }
        ));
    }
    truth
}

/// A whole flush, waiting at most LIMIT: `flush_begin`, `flush_wait`, `flush_end`.
pub fn flush_within(limit: Duration) -> Vec<String> {
    let ticket = flush_begin();
    flush_wait(ticket, limit);
    flush_end(ticket, limit)
}

/// A flush that waits at most `FLUSH_WAIT`.
pub fn flush() -> Vec<String> {
    flush_within(FLUSH_WAIT)
}

/// Saves SESSION into DIR now, waiting for any save under way.  The file
/// is complete and synced on return; its directory is synced by the writer
/// thread moments later, or by the next `flush`.
pub fn save_now(session: &str, dir: &Path) -> io::Result<Option<PathBuf>> {
    let saved = {
        let mut scratch = lock(&WRITER.writing);
        lock(&WRITER.queue).pending.remove(session);
        let saved = save_locked(&mut scratch, session, dir);
        // A failed save stays pending like a scheduled one; it is the
        // caller's error, so it counts as reported.
        let failure = saved
            .as_ref()
            .err()
            .map(|e| describe_failure(session, dir, e));
        let reported = failure.is_some();
        let mut queue = lock(&WRITER.queue);
        record_outcomes(
            &mut queue,
            vec![Outcome {
                session: session.to_string(),
                dir: dir.to_path_buf(),
                failure,
            }],
        );
        if reported {
            queue.failed.mark_reported(session);
        }
        saved?
    };
    let Some(Replaced { path, replaced, .. }) = saved else {
        return Ok(None);
    };
    let mut queue = lock(&WRITER.queue);
    queue.unsynced.insert(dir.to_path_buf());
    queue.replaced.extend(replaced);
    if ensure_thread(&mut queue) {
        WRITER.wake.notify_one();
    } else {
        drop(queue);
        settle();
    }
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::session::registry;
    use crate::store::test_support::{failures_of, temp_dir, write};
    use crate::store::{file_path, load_file, LOCK_FILE};
    use crate::validate::Input;
    use crate::validate::Limits;
    use serde_json::{json, Value as Json};

    #[test]
    fn scheduled_saves_land_after_a_flush() {
        let dir = temp_dir("writer");
        let name = format!("writer test {}", std::process::id());
        for n in 0..20 {
            let todos: Vec<Json> = (0..=n)
                .map(|i| json!({"content": format!("step {i}"), "status": "pending"}))
                .collect();
            write(registry().session(&name), Json::Array(todos));
            assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        }
        assert!(failures_of(&name, flush()).is_empty());
        let (loaded, s) = load_file(&file_path(&dir, &name)).unwrap();
        assert_eq!(loaded, name);
        assert_eq!(s.items.len(), 20);
        assert_eq!(save_now("no such session", &dir).unwrap(), None);
        let _ = fs::remove_dir_all(&dir);
    }

    fn saved_ledger(dir: &Path, name: &str) -> Json {
        let json: Json = serde_json::from_slice(&fs::read(file_path(dir, name)).unwrap()).unwrap();
        json["ledger"].clone()
    }

    #[test]
    fn the_writer_takes_saves_scheduled_while_it_is_busy_without_a_flush() {
        // Only a schedule made while the writer is idle wakes it; those made
        // while it is busy must still be written without anyone waiting.
        let dir = temp_dir("busy");
        let names: Vec<String> = (0..3)
            .map(|n| format!("busy test {} {n}", std::process::id()))
            .collect();
        let landed = |name: &String, round: usize| {
            load_file(&file_path(&dir, name)).is_ok_and(|(_, s)| {
                s.items
                    .iter()
                    .any(|i| i.content == format!("round {round}"))
            })
        };
        let wait_for = |round: usize, names: &[String]| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !names.iter().all(|name| landed(name, round)) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "saves of round {round} never landed"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        for round in 0..2 {
            for name in &names {
                let todos = vec![json!({"content": format!("round {round}"), "status": "pending"})];
                write(registry().session(name), Json::Array(todos));
                assert!(failures_of(name, schedule(name, &dir)).is_empty());
                assert!(failures_of(name, schedule(name, &dir)).is_empty());
            }
            wait_for(round, &names);
            // Long enough for the writer to be waiting again, idle.
            std::thread::sleep(COALESCE * 5);
        }
        let errors = flush();
        assert!(names
            .iter()
            .all(|name| failures_of(name, errors.clone()).is_empty()));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_ledger_summary_counts_every_call_once_across_saves_and_resets() {
        let dir = temp_dir("ledger");
        let name = format!("ledger test {}", std::process::id());
        let call = |tool: &str, result: Option<&str>, error: bool| {
            registry().session(&name).after_tool(
                tool,
                Input::Str("x".into()),
                result.map(String::from),
                error,
                None,
                &Default::default(),
            );
        };
        call("eval", Some("1"), false);
        call("shell", None, true);
        save_now(&name, &dir).unwrap();
        for n in 0..5 {
            call(if n % 2 == 0 { "eval" } else { "grep" }, Some("ok"), n == 3);
        }
        save_now(&name, &dir).unwrap();
        let expected = |name: &str| {
            serde_json::to_value(LedgerSummary::of(registry().get(name).unwrap().entries()))
                .unwrap()
        };
        let ledger = saved_ledger(&dir, &name);
        assert_eq!(ledger, expected(&name));
        assert_eq!(ledger["calls"], 7);
        assert_eq!(ledger["errors"], 2);
        assert_eq!(ledger["tools"], json!({"eval": 4, "grep": 2, "shell": 1}));
        // A cleared ledger, even one that grows past the old count again,
        // is counted afresh rather than added to the old summary.
        registry().reset(&name);
        for _ in 0..9 {
            call("read", Some("text"), false);
        }
        schedule(&name, &dir);
        // Other tests run alongside and share the writer: only this one's failures count.
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let ledger = saved_ledger(&dir, &name);
        assert_eq!(ledger, expected(&name));
        assert_eq!(ledger["tools"], json!({"read": 9}));
        registry().reset(&name);
        save_now(&name, &dir).unwrap();
        assert_eq!(saved_ledger(&dir, &name)["calls"], 0);
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_save_replaces_the_file_and_a_flush_finishes_it() {
        let dir = temp_dir("replace");
        let name = format!("replace test {}", std::process::id());
        registry()
            .session(&name)
            .add("first".into(), None, &Limits::default())
            .unwrap();
        let path = save_now(&name, &dir).unwrap().unwrap();
        registry()
            .session(&name)
            .add("second".into(), None, &Limits::default())
            .unwrap();
        assert_eq!(save_now(&name, &dir).unwrap(), Some(path.clone()));
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let (_, back) = load_file(&path).unwrap();
        assert_eq!(back.items.len(), 2);
        // No temporary file left: the state file and the directory's lock.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != LOCK_FILE)
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_flush_waits_a_bounded_time_for_a_stuck_writer_and_says_so() {
        let dir = temp_dir("stuck");
        let name = format!("stuck test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Limits::default())
            .unwrap();
        // A writer stuck in a save: it holds `writing` for three seconds.
        let stuck = lock(&WRITER.writing);
        assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        let started = std::time::Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(flush_within(Duration::from_millis(200)));
        });
        let errors = rx.recv_timeout(Duration::from_secs(3));
        drop(stuck);
        let errors = errors.expect("the flush waited for the stuck writer");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            errors
                .iter()
                .any(|e| e.contains("gave up") && e.contains(&name)),
            "{errors:?}"
        );
        // The save was not dropped: it lands once the writer is free.
        assert!(failures_of(&name, flush()).is_empty());
        assert!(load_file(&file_path(&dir, &name)).is_ok());
        let _ = fs::remove_dir_all(&dir);
    }
}

//! The writer's queue: the saves waiting for the writer thread, the ends
//! of saves it still has to finish, the flushes asked of it, and the
//! failures and warnings the Lisp side has not collected yet.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::time::Instant;

use super::retry::Retries;

/// Failures kept until the Lisp side collects them.
const MAX_ERRORS: usize = 20;

#[derive(Default)]
pub(super) struct Queue {
    /// Dirty sessions and the directory each goes to.
    pub(super) pending: HashMap<String, PathBuf>,
    /// Saves that failed: still pending, retried with backoff until one
    /// lands, and reported by every flush until then.
    pub(super) failed: Retries,
    /// Directories holding renames not synced yet, and the files those
    /// renames replaced: the end of each save, which the writer thread
    /// finishes off the saving call's path (see `settle`).
    pub(super) unsynced: HashSet<PathBuf>,
    pub(super) replaced: Vec<File>,
    /// Failures of background writes, for the Lisp side to report.
    errors: Vec<String>,
    /// What saves did that the user must know (a conflict kept beside), not
    /// reported yet.
    pub(super) warnings: Vec<String>,
    pub(super) thread_started: bool,
    /// Flushes asked of the writer thread, and the newest it has done: a
    /// flush waits for the thread (a bounded time) rather than touching
    /// the disk itself, so that no file operation can hang Emacs.
    pub(super) flushes_asked: u64,
    pub(super) flushes_done: u64,
    /// The sessions of the batch the thread is writing, to name them when
    /// a flush gives up waiting.
    pub(super) in_hand: Vec<String>,
}

impl Queue {
    pub(super) fn idle(&self) -> bool {
        self.pending.is_empty()
            && self.unsynced.is_empty()
            && self.replaced.is_empty()
            && self.flushes_asked == self.flushes_done
    }

    /// The sessions whose saves have not landed, sorted.
    pub(super) fn unsaved(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .pending
            .keys()
            .chain(self.failed.sessions())
            .chain(&self.in_hand)
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    pub(super) fn record_failures(&mut self, failures: Vec<String>) {
        self.errors.extend(failures);
        let excess = self.errors.len().saturating_sub(MAX_ERRORS);
        self.errors.drain(..excess);
    }

    /// When the next failed save is due for a retry.
    pub(super) fn next_retry(&self) -> Option<Instant> {
        self.failed.next_due()
    }

    /// Takes the pending saves, and the failed ones that are due (all of
    /// them with EVERY_FAILED).  A failed save stays in `failed` until one
    /// of its attempts lands.
    pub(super) fn take_batch(&mut self, every_failed: bool) -> HashMap<String, PathBuf> {
        let mut batch = std::mem::take(&mut self.pending);
        self.failed.add_due(&mut batch, every_failed);
        batch
    }

    /// Records how the saves of a batch went: a landed save is no longer
    /// failed, a failed one is retried later, sooner after its first
    /// failure than after its tenth.  Waking the writer thread to time
    /// the retries is the caller's (see `writer::record_outcomes`).
    pub(super) fn record_outcomes(&mut self, outcomes: Vec<Outcome>) {
        let now = Instant::now();
        for Outcome {
            session,
            dir,
            failure,
        } in outcomes
        {
            match failure {
                None => self.failed.landed(&session),
                Some(message) => self.failed.failed(session, dir, message, now),
            }
        }
    }

    /// Failures not reported yet, each once: for `schedule`.
    pub(super) fn news(&mut self) -> Vec<String> {
        let mut news = std::mem::take(&mut self.errors);
        self.failed.report_new(&mut news);
        news
    }

    /// Every save that has not landed, and the failures not reported yet:
    /// for `flush`, which must tell the truth every time.
    pub(super) fn truth(&mut self) -> Vec<String> {
        let mut truth = std::mem::take(&mut self.errors);
        self.failed.report_all(&mut truth);
        truth
    }
}

/// How one save of a batch went: None when it landed (or the session is gone).
pub(super) struct Outcome {
    pub(super) session: String,
    pub(super) dir: PathBuf,
    pub(super) failure: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(session: &str, failure: Option<&str>) -> Outcome {
        Outcome {
            session: session.into(),
            dir: PathBuf::from("/nowhere"),
            failure: failure.map(String::from),
        }
    }

    #[test]
    fn a_failed_save_stays_unsaved_until_it_lands() {
        let mut queue = Queue::default();
        assert!(queue.idle());
        queue.pending.insert("b".into(), PathBuf::from("/nowhere"));
        assert!(!queue.idle());
        let batch = queue.take_batch(false);
        assert_eq!(batch.len(), 1);
        assert!(queue.idle() && queue.unsaved().is_empty());
        queue.record_outcomes(vec![outcome("b", Some("disk full")), outcome("a", None)]);
        assert_eq!(queue.unsaved(), ["b"]);
        assert!(queue.next_retry().is_some());
        // Not due yet, but a flush takes it all the same.
        assert!(queue.take_batch(false).is_empty());
        assert_eq!(queue.take_batch(true).len(), 1);
        assert_eq!(queue.news().len(), 1);
        assert!(queue.news().is_empty(), "news is told once");
        assert_eq!(queue.truth().len(), 1);
        assert_eq!(queue.truth().len(), 1, "the truth is told every time");
        queue.record_outcomes(vec![outcome("b", None)]);
        assert!(queue.unsaved().is_empty() && queue.truth().is_empty());
    }

    #[test]
    fn only_the_newest_failures_are_kept_for_the_lisp_side() {
        let mut queue = Queue::default();
        queue.record_failures(
            (0..MAX_ERRORS + 5)
                .map(|n| format!("failure {n}"))
                .collect(),
        );
        let news = queue.news();
        assert_eq!(news.len(), MAX_ERRORS);
        assert_eq!(news[0], "failure 5");
        assert!(queue.news().is_empty());
    }
}

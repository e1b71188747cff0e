//! Retries: a save that failed stays pending, is retried with backoff
//! until one attempt lands, is reported once in the background and by
//! every flush until then.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A failed save is retried after this, then twice as long each time, up
/// to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// A save that failed and waits for its retry.
struct Failed {
    dir: PathBuf,
    message: String,
    attempts: u32,
    retry_at: Instant,
    reported: bool,
}

impl Failed {
    fn describe(&self) -> String {
        let tries = if self.attempts == 1 {
            "once".to_string()
        } else {
            format!("{} times", self.attempts)
        };
        format!(
            "{}; the save stays pending and is retried (tried {tries})",
            self.message
        )
    }
}

/// How long a save that failed ATTEMPTS times waits before its next try.
fn backoff(attempts: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1 << (attempts - 1).min(16))
        .min(RETRY_MAX)
}

/// The saves that failed, by session: still pending, retried with backoff
/// until one lands, and reported by every flush until then.
#[derive(Default)]
pub(super) struct Retries(HashMap<String, Failed>);

impl Retries {
    /// The sessions whose saves failed.
    pub(super) fn sessions(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    /// When the next failed save is due for a retry.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.0.values().map(|f| f.retry_at).min()
    }

    /// Adds to BATCH the failed saves that are due (all of them with
    /// EVERY_FAILED).  A failed save stays here until one of its attempts
    /// lands.
    pub(super) fn add_due(&self, batch: &mut HashMap<String, PathBuf>, every_failed: bool) {
        let now = Instant::now();
        for (session, failed) in &self.0 {
            if every_failed || failed.retry_at <= now {
                batch
                    .entry(session.clone())
                    .or_insert_with(|| failed.dir.clone());
            }
        }
    }

    /// SESSION's save landed: it is no longer failed.
    pub(super) fn landed(&mut self, session: &str) {
        self.0.remove(session);
    }

    /// SESSION's save into DIR failed at NOW with MESSAGE: it is retried
    /// later, sooner after its first failure than after its tenth.
    pub(super) fn failed(&mut self, session: String, dir: PathBuf, message: String, now: Instant) {
        let attempts = self.0.get(&session).map_or(0, |f| f.attempts) + 1;
        // Said once in the background; the same failure again is not news.
        let reported = self
            .0
            .get(&session)
            .is_some_and(|f| f.reported && f.message == message);
        self.0.insert(
            session,
            Failed {
                dir,
                message,
                attempts,
                retry_at: now + backoff(attempts),
                reported,
            },
        );
    }

    /// Counts SESSION's failure as reported: its caller was told.
    pub(super) fn mark_reported(&mut self, session: &str) {
        if let Some(failed) = self.0.get_mut(session) {
            failed.reported = true;
        }
    }

    /// Adds to OUT the failures not reported yet, each once.
    pub(super) fn report_new(&mut self, out: &mut Vec<String>) {
        for failed in self.0.values_mut().filter(|f| !f.reported) {
            failed.reported = true;
            out.push(failed.describe());
        }
    }

    /// Adds to OUT every failure, reported or not, sorted.
    pub(super) fn report_all(&mut self, out: &mut Vec<String>) {
        let mut failed: Vec<&mut Failed> = self.0.values_mut().collect();
        failed.sort_by(|a, b| a.message.cmp(&b.message));
        for failed in failed {
            failed.reported = true;
            out.push(failed.describe());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::session::registry;
    use crate::store::directory::ensure_dir;
    use crate::store::test_support::{failures_of, temp_dir};
    use crate::store::{file_path, flush, load_file, save_now, schedule};
    use crate::validate::Limits;

    #[test]
    fn a_failed_save_waits_twice_as_long_each_time_up_to_a_minute() {
        let waits: Vec<u64> = (1..=10).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]
        );
        assert_eq!(backoff(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn a_failure_is_news_once_and_the_truth_every_time_until_it_lands() {
        let mut retries = Retries::default();
        let now = Instant::now();
        let dir = PathBuf::from("/nowhere");
        retries.failed("a".into(), dir.clone(), "disk full".into(), now);
        let mut news = Vec::new();
        retries.report_new(&mut news);
        assert_eq!(
            news,
            ["disk full; the save stays pending and is retried (tried once)"]
        );
        let mut again = Vec::new();
        retries.report_new(&mut again);
        assert!(again.is_empty(), "{again:?}");
        // The same failure again is not news; a different one is.
        retries.failed("a".into(), dir.clone(), "disk full".into(), now);
        retries.report_new(&mut again);
        assert!(again.is_empty(), "{again:?}");
        retries.failed("a".into(), dir.clone(), "read-only".into(), now);
        retries.report_new(&mut again);
        assert_eq!(
            again,
            ["read-only; the save stays pending and is retried (tried 3 times)"]
        );
        // Not due before its backoff, due after it, and every one on demand.
        let mut batch = HashMap::new();
        retries.add_due(&mut batch, false);
        assert!(batch.is_empty());
        assert_eq!(retries.next_due(), Some(now + backoff(3)));
        retries.add_due(&mut batch, true);
        assert_eq!(batch.get("a"), Some(&dir));
        for _ in 0..2 {
            let mut truth = Vec::new();
            retries.report_all(&mut truth);
            assert_eq!(truth.len(), 1);
        }
        retries.landed("a");
        let mut truth = Vec::new();
        retries.report_all(&mut truth);
        assert!(truth.is_empty() && retries.next_due().is_none());
    }

    #[test]
    fn failures_of_background_saves_are_reported() {
        let blocker = temp_dir("blocked");
        fs::write(&blocker, b"a file where the directory should be").unwrap();
        let name = format!("failing {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Limits::default())
            .unwrap();
        schedule(&name, &blocker.join("sub"));
        let errors = flush();
        assert!(errors.iter().any(|e| e.contains(&name)), "{errors:?}");
        // The save stays pending: let it land somewhere harmless.
        let _ = fs::remove_file(&blocker);
        schedule(&name, &blocker);
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let _ = fs::remove_dir_all(&blocker);
    }

    #[test]
    fn a_failed_save_stays_pending_is_retried_and_every_flush_says_so() {
        let dir = temp_dir("retry");
        let name = format!("retry test {}", std::process::id());
        registry()
            .session(&name)
            .add("Must not be lost".into(), None, &Limits::default())
            .unwrap();
        // A directory where the state file goes: the rename fails.
        let target = file_path(&dir, &name);
        ensure_dir(&dir).unwrap();
        fs::create_dir_all(target.join("in the way")).unwrap();
        assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        assert_eq!(failures_of(&name, flush()).len(), 1);
        // Reported once in the background, but not forgotten: a flush
        // tries again and tells the truth every time.
        assert_eq!(
            failures_of(&name, flush()).len(),
            1,
            "a second flush forgot the failed save"
        );
        assert_eq!(failures_of(&name, flush()).len(), 1);
        // Once the obstacle is gone the writer retries on its own, no
        // flush and no new change needed.
        fs::remove_dir_all(&target).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while load_file(&target).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the failed save was never retried"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            load_file(&target).unwrap().1.items[0].content,
            "Must not be lost"
        );
        assert!(failures_of(&name, flush()).is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_save_now_stays_pending_too() {
        let dir = temp_dir("retry-now");
        let name = format!("retry now test {}", std::process::id());
        registry()
            .session(&name)
            .add("Keep".into(), None, &Limits::default())
            .unwrap();
        let target = file_path(&dir, &name);
        ensure_dir(&dir).unwrap();
        fs::create_dir_all(target.join("in the way")).unwrap();
        assert!(save_now(&name, &dir).is_err());
        assert_eq!(
            failures_of(&name, flush()).len(),
            1,
            "a failed save_now was forgotten"
        );
        fs::remove_dir_all(&target).unwrap();
        assert!(failures_of(&name, flush()).is_empty());
        assert_eq!(load_file(&target).unwrap().1.items[0].content, "Keep");
        let _ = fs::remove_dir_all(&dir);
    }
}

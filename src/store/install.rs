//! Restored sessions put into the registry: a live list is kept unless the
//! restore is forced, and each save read back becomes this Emacs's to save
//! over.

use std::path::Path;

use rustc_hash::FxHashSet;

use crate::session::registry;

use super::conflict::adopt;
use super::restore::DirReport;

/// Which sessions a restore brought back and which it left alone.
#[derive(Debug, Default, PartialEq)]
pub struct Restored {
    pub restored: Vec<String>,
    pub kept: Vec<String>,
}

/// Installs the sessions `load_dir' read from DIR into the registry,
/// taking them out of REPORT.  A session here whose list is not empty is
/// kept, and the saved one skipped, unless FORCE.  Sessions brought back
/// keep the ids this Emacs issued since the save.  A save of a session read
/// back, or of one not wanted back (finished) with no list of that name
/// here, becomes this Emacs's to save over; a live list kept instead does
/// not.
pub fn install(dir: &Path, report: &mut DirReport, force: bool) -> Restored {
    let mut outcome = Restored::default();
    let mut registry = registry();
    for seen in &report.seen {
        if registry.get(&seen.name).is_none() {
            adopt(dir, seen);
        }
    }
    for loaded in std::mem::take(&mut report.loaded) {
        let live = registry
            .get(&loaded.name)
            .is_some_and(|s| !s.items.is_empty());
        if live && !force {
            outcome.kept.push(loaded.name);
        } else {
            let mut session = loaded.session;
            if let Some(issued) = registry.get(&loaded.name).map(|s| s.ids.issued()) {
                session.ids.raise_to(issued);
            }
            registry.install(&loaded.name, session);
            outcome.restored.push(loaded.name);
        }
    }
    let installed: FxHashSet<&str> = outcome.restored.iter().map(String::as_str).collect();
    for seen in report
        .seen
        .iter()
        .filter(|seen| installed.contains(seen.name.as_str()))
    {
        adopt(dir, seen);
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    use crate::session::Session;
    use crate::store::encode::encode;
    use crate::store::test_support::{temp_dir, write};
    use crate::store::{file_name, load_dir, save_now, take_warnings, write_atomic};
    use crate::validate::Limits;
    use serde_json::json;

    /// Saves a session named NAME holding CONTENT in DIR, as another
    /// Emacs would have.
    fn saved_elsewhere(dir: &Path, name: &str, content: &str) {
        let mut session = Session::default();
        write(
            &mut session,
            json!([{"content": content, "status": "in_progress"}]),
        );
        write_atomic(dir, &file_name(name), &encode(name, &session)).unwrap();
    }

    fn contents(name: &str) -> Vec<String> {
        registry()
            .get(name)
            .map(|s| s.items.iter().map(|i| i.content.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn a_live_list_is_kept_unless_forced_and_a_restored_one_is_saved_over() {
        let dir = temp_dir("install");
        let pid = std::process::id();
        let (live, absent) = (
            format!("install live {pid}"),
            format!("install absent {pid}"),
        );
        saved_elsewhere(&dir, &live, "saved");
        saved_elsewhere(&dir, &absent, "saved too");
        registry()
            .session(&live)
            .add("mine".into(), None, &Limits::default())
            .unwrap();
        let mut report = load_dir(&dir, false, &Limits::default()).unwrap();
        let outcome = install(&dir, &mut report, false);
        assert!(outcome.kept.contains(&live), "{outcome:?}");
        assert!(outcome.restored.contains(&absent), "{outcome:?}");
        assert!(report.loaded.is_empty(), "installed sessions are taken out");
        assert_eq!(contents(&live), ["mine"]);
        assert_eq!(contents(&absent), ["saved too"]);
        // The restored session's file is now this Emacs's to save over; the
        // kept live list's is not, and saving it keeps the other beside.
        save_now(&absent, &dir).unwrap();
        save_now(&live, &dir).unwrap();
        let conflict = |name: &str| dir.join(format!("{}.conflict", file_name(name)));
        assert!(!conflict(&absent).exists());
        assert!(conflict(&live).exists());
        let warnings = take_warnings();
        assert!(warnings.iter().any(|w| w.contains(&live)), "{warnings:?}");
        assert!(
            !warnings.iter().any(|w| w.contains(&absent)),
            "{warnings:?}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_forced_restore_replaces_the_live_list_and_keeps_the_ids_issued_since() {
        let dir = temp_dir("install-force");
        let name = format!("install forced {}", std::process::id());
        saved_elsewhere(&dir, &name, "saved");
        for content in ["a", "b", "c"] {
            registry()
                .session(&name)
                .add(content.into(), None, &Limits::default())
                .unwrap();
        }
        let mut report = load_dir(&dir, false, &Limits::default()).unwrap();
        let outcome = install(&dir, &mut report, true);
        assert!(
            outcome.restored.contains(&name) && outcome.kept.is_empty(),
            "{outcome:?}"
        );
        assert_eq!(contents(&name), ["saved"]);
        // t1 to t3 were issued here since the save: none of them again.
        let next = registry()
            .session(&name)
            .add("next".into(), None, &Limits::default())
            .unwrap()
            .id;
        assert_eq!(next, "t4");
        let _ = fs::remove_dir_all(&dir);
    }
}

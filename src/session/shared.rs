//! A shared list's session taking in another Emacs's newer save: the list
//! is the shared part, what each Emacs's agents did is its own.

use super::Session;

/// What tells whether a shared list changed between two moments: a change
/// of the list moves the history's number, and an id handed out without
/// a change (Efrit's `efrit-todo--generate-id`) moves the counter.  Both
/// must reach the file before the lock is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListMark {
    history_seq: u64,
    issued: u64,
}

impl Session {
    /// Where the list stands now, to compare with a later mark.
    pub fn list_mark(&self) -> ListMark {
        ListMark {
            history_seq: self.history.last_seq(),
            issued: self.ids.issued(),
        }
    }

    /// Takes the list of SAVED, a newer save of this shared list, in place
    /// of this one's: its items, retired items, history and creation time,
    /// and its id counter, raised to every id this session handed out, so
    /// that no id is issued twice.  The breaker, ledger, guide, turn state,
    /// the prompt, the stop and the user's notes stay this session's: they
    /// belong to the agents of this Emacs, not to the list.
    pub fn take_saved_list(&mut self, saved: Session) {
        let issued = self.ids.issued();
        self.items = saved.items;
        self.retired = saved.retired;
        self.ids = saved.ids;
        self.ids.raise_to(issued);
        self.history = saved.history;
        self.created = saved.created;
        self.writes = self.writes.max(saved.writes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Options;
    use crate::validate::{Input, Limits};
    use serde_json::json;

    fn write(s: &mut Session, todos: serde_json::Value) {
        s.write(
            &Input::from_json(&json!({ "todos": todos })),
            &Options::default(),
            false,
            vec![],
        )
        .unwrap();
    }

    #[test]
    fn the_saved_list_replaces_the_list_and_the_agents_state_stays() {
        let mut mine = Session::default();
        write(
            &mut mine,
            json!([{"content": "Mine", "status": "in_progress"}]),
        );
        mine.after_tool(
            "eval",
            Input::Str("1".into()),
            Some("1".into()),
            false,
            None,
            &Default::default(),
        );
        // This Emacs handed out t1..t3; the other Emacs's save only t1, t2.
        mine.allocate_id();
        mine.allocate_id();
        let mut theirs = Session::default();
        write(
            &mut theirs,
            json!([{"content": "Theirs", "status": "pending"}, {"content": "Also", "status": "pending"}]),
        );
        let ledger = mine.entries().len();
        mine.take_saved_list(theirs.clone());
        assert_eq!(mine.items, theirs.items);
        assert_eq!(mine.history, theirs.history);
        assert_eq!(mine.entries().len(), ledger, "the ledger is this Emacs's");
        assert_eq!(
            mine.ids.issued(),
            3,
            "an id handed out here is never issued again"
        );
        let next = mine.add("Next".into(), None, &Limits::default()).unwrap();
        assert_eq!(next.id, "t4");
    }

    #[test]
    fn the_mark_moves_with_a_change_or_an_id_and_not_with_a_tool_call() {
        let mut s = Session::default();
        let start = s.list_mark();
        s.after_tool(
            "eval",
            Input::Str("1".into()),
            Some("1".into()),
            false,
            None,
            &Default::default(),
        );
        assert_eq!(s.list_mark(), start);
        s.allocate_id();
        let after_id = s.list_mark();
        assert_ne!(after_id, start);
        write(&mut s, json!([{"content": "A", "status": "pending"}]));
        assert_ne!(s.list_mark(), after_id);
    }
}

//! A shared list's session taking in another Emacs's newer save: the list
//! is the shared part, what each Emacs's agents did is its own.

use rustc_hash::FxHashSet;

use crate::history::{Change, UndoData};

use super::Session;

/// The ids a change touched: those its record names and those whose
/// earlier values its undo data keeps (an edit of a description or of
/// blockers is named only there).
fn touched(change: &Change) -> FxHashSet<&str> {
    let mut ids: FxHashSet<&str> = change
        .ids
        .groups()
        .into_iter()
        .flat_map(|(_, ids)| ids.iter().map(String::as_str))
        .collect();
    if let Some(undo) = &change.undo {
        ids.extend(undo.added.iter().map(String::as_str));
        ids.extend(undo.before.iter().map(|item| item.id.as_str()));
    }
    ids
}

/// Takes back only what UNDO's change did to the items it touched, leaving
/// every other item as later changes made it: the items it added are
/// retired, the ones it altered or removed get their earlier values back
/// (a removed one where it stood, after the item it followed).
fn undo_items(undo: &UndoData, session: &mut Session) {
    for id in &undo.added {
        if let Some(at) = session.items.iter().position(|item| &item.id == id) {
            let item = session.items.remove(at);
            session.retired.insert(item.id.clone(), item);
        }
    }
    for earlier in &undo.before {
        if let Some(item) = session.items.iter_mut().find(|item| item.id == earlier.id) {
            *item = earlier.clone();
            continue;
        }
        session.retired.remove(&earlier.id);
        let follows = undo.order.as_ref().and_then(|order| {
            let at = order.iter().position(|id| *id == earlier.id)?;
            order[..at]
                .iter()
                .rev()
                .find_map(|id| session.items.iter().position(|item| &item.id == id))
        });
        let at = follows.map_or(session.items.len(), |at| at + 1);
        session.items.insert(at, earlier.clone());
    }
    for item in &undo.retired_before {
        session.retired.insert(item.id.clone(), item.clone());
    }
}

/// What tells whether a shared list changed between two moments: a change
/// of the list moves the history's number, an id handed out without a
/// change (Efrit's `efrit-todo--generate-id`) moves the counter, and an
/// agent that starts or ends moves the agents' count.  All must reach
/// the file before the lock is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListMark {
    history_seq: u64,
    issued: u64,
    agents: u64,
}

impl Session {
    /// Where the list stands now, to compare with a later mark.
    pub fn list_mark(&self) -> ListMark {
        ListMark {
            history_seq: self.history.last_seq(),
            issued: self.ids.issued(),
            agents: self.agents.starts_and_ends(),
        }
    }

    /// The numbers of the changes made since MARK, oldest first.
    pub fn changes_since(&self, mark: ListMark) -> Vec<u64> {
        self.history
            .changes()
            .map(|change| change.seq)
            .filter(|&seq| seq > mark.history_seq)
            .collect()
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
        // Items another Emacs's agents own stay theirs here too, and the
        // names of the agents they run are taken.
        self.agents.learn_known(saved.agents.known());
        self.agents.set_elsewhere(saved.agents.elsewhere().to_vec());
        self.writes = self.writes.max(saved.writes);
    }
}

impl Session {
    /// Undo on a shared list: takes back the newest change among OWN (the
    /// changes this Emacs made) that is not taken back yet, and only what
    /// it did, so that what other agents did since stays.  Refused, with
    /// the reason, when a later change touched one of its items.  Returns
    /// the note for the model, or Ok(None) when there is nothing to undo.
    pub fn undo_own(&mut self, own: &[u64]) -> Result<Option<String>, String> {
        let Some(target) = self
            .history
            .changes()
            .filter(|change| own.contains(&change.seq) && change.undoable())
            .last()
        else {
            return Ok(None);
        };
        let Some(undo) = target.undo.clone() else {
            return Ok(None);
        };
        let (seq, actor, kind, summary) = (
            target.seq,
            target.actor,
            target.kind,
            target.summary.clone(),
        );
        let mine = touched(target);
        // A later change already taken back, and the undo that took it
        // back, left its items as they were before it: they stand in the
        // way of nothing.
        let cancelled_out =
            |change: &Change| change.undone || change.undoes.is_some_and(|undone| undone > seq);
        if let Some((later, ids)) = self
            .history
            .changes()
            .filter(|change| change.seq > seq && !cancelled_out(change))
            .find_map(|change| {
                let mut common: Vec<&str> = touched(change).intersection(&mine).copied().collect();
                common.sort_unstable();
                (!common.is_empty()).then(|| (change, common.join(", ")))
            })
        {
            return Err(format!(
                "change {seq} ({summary}) cannot be undone: {ids} changed since in change {} ({}, by another agent); undo that first or edit the item",
                later.seq, later.summary
            ));
        }
        let before = self.items.clone();
        undo_items(&undo, self);
        Ok(Some(self.record_undo(
            (seq, actor, kind, &summary),
            &before,
            "its items are as they were before it",
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Options, UserEdit};
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

    #[test]
    fn undo_own_takes_back_this_emacs_change_only_and_refuses_over_a_later_one() {
        let limits = Limits::default();
        let mut s = Session::default();
        s.add("Theirs first".into(), None, &limits).unwrap();
        s.add("Mine".into(), None, &limits).unwrap();
        let mine = s.history.last_seq();
        s.add("Theirs later".into(), None, &limits).unwrap();
        // Another agent's change came last; undo takes back mine only.
        let note = s.undo_own(&[mine]).unwrap().unwrap();
        assert!(note.contains(&format!("change {mine}")), "{note}");
        let contents: Vec<&str> = s.items.iter().map(|i| i.content.as_str()).collect();
        assert_eq!(contents, ["Theirs first", "Theirs later"]);
        assert!(s.retired.contains_key("t2"));
        assert_eq!(s.undo_own(&[mine]).unwrap(), None, "taken back once");
        // Mine renames t1; another agent then completes it: refused.
        write(
            &mut s,
            json!([{"id": "t1", "content": "Renamed by me", "status": "pending"},
                   {"id": "t3", "content": "Theirs later", "status": "pending"}]),
        );
        let renamed = s.history.last_seq();
        write(
            &mut s,
            json!([{"id": "t1", "content": "Renamed by me", "status": "completed"},
                   {"id": "t3", "content": "Theirs later", "status": "pending"}]),
        );
        let items = s.items.clone();
        let why = s.undo_own(&[mine, renamed]).unwrap_err();
        assert!(
            why.contains("t1") && why.contains(&format!("change {renamed}")),
            "{why}"
        );
        assert_eq!(s.items, items, "a refused undo changes nothing");
    }

    #[test]
    fn undo_own_goes_further_back_past_a_change_already_taken_back() {
        let limits = Limits::default();
        let mut s = Session::default();
        s.add("Mine".into(), None, &limits).unwrap();
        let added = s.history.last_seq();
        s.user_edit(
            UserEdit::EditContent {
                id: "t1".into(),
                content: "Mine, reworded".into(),
            },
            &limits,
        )
        .unwrap();
        let reworded = s.history.last_seq();
        let mut own = vec![added, reworded];
        s.undo_own(&own).unwrap().unwrap();
        own.push(s.history.last_seq());
        assert_eq!(s.items[0].content, "Mine");
        // The rewording is taken back: nothing stands between the addition
        // and the undo, which goes on to it as an unshared list's does.
        let note = s.undo_own(&own).unwrap().unwrap();
        assert!(note.contains(&format!("change {added}")), "{note}");
        assert!(s.items.is_empty(), "{:?}", s.items);
        assert!(s.retired.contains_key("t1"));
    }

    #[test]
    fn undo_own_puts_a_removed_item_back_where_it_stood() {
        let limits = Limits::default();
        let mut s = Session::default();
        write(
            &mut s,
            json!([{"content": "A", "status": "pending"}, {"content": "B", "status": "pending"},
                   {"content": "C", "status": "pending"}]),
        );
        s.task_tool(
            "TaskUpdate",
            &Input::from_json(&json!({"taskId": "t2", "status": "deleted"})),
            &Options::default(),
        )
        .unwrap();
        let mine = s.history.last_seq();
        s.add("D".into(), None, &limits).unwrap();
        s.undo_own(&[mine]).unwrap().unwrap();
        let ids: Vec<&str> = s.items.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["t1", "t2", "t3", "t4"]);
    }
}

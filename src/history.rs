//! Every change of a session's list: who made it, when, what it changed,
//! and what it takes to undo it.
//!
//! An undo record holds only what the change destroyed (the earlier values
//! of the items it touched and, when it moved or removed items, the earlier
//! order), so keeping hundreds of changes costs little even for long lists.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::model::{Item, Status, Timestamp};

/// Changes kept per session; older ones are forgotten.
pub const MAX_CHANGES: usize = 200;

/// How many of the newest changes can be undone.  Older changes stay in the
/// history for the record but lose their undo data.
pub const MAX_UNDOABLE: usize = 50;

/// Most earlier item values the undo data of a session may hold in all:
/// a model that rewrites a long list every time would otherwise make the
/// history, and every save, grow by the whole list per write.
pub const MAX_UNDO_ITEMS: usize = 5000;

/// What kind of operation made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The model's todo_write.
    Write,
    /// A tool named by the running item succeeded (`efrit-todo-auto-complete`).
    AutoComplete,
    Status,
    Edit,
    Add,
    Move,
    ClearFinished,
    SetAll,
    Clear,
    Reset,
    Undo,
    /// A TaskUpdate deleted an item.
    Delete,
    /// The session stopped with items open: a mark in the history, not a
    /// change of the list, so there is nothing to undo.
    Stop,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 13] = [
        ChangeKind::Write,
        ChangeKind::AutoComplete,
        ChangeKind::Status,
        ChangeKind::Edit,
        ChangeKind::Add,
        ChangeKind::Move,
        ChangeKind::ClearFinished,
        ChangeKind::SetAll,
        ChangeKind::Clear,
        ChangeKind::Reset,
        ChangeKind::Undo,
        ChangeKind::Stop,
        ChangeKind::Delete,
    ];

    /// The name in files and in Lisp (as a symbol).
    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Write => "write",
            ChangeKind::AutoComplete => "auto-complete",
            ChangeKind::Status => "status",
            ChangeKind::Edit => "edit",
            ChangeKind::Add => "add",
            ChangeKind::Move => "move",
            ChangeKind::ClearFinished => "clear-finished",
            ChangeKind::SetAll => "set-all",
            ChangeKind::Clear => "clear",
            ChangeKind::Reset => "reset",
            ChangeKind::Undo => "undo",
            ChangeKind::Stop => "stop",
            ChangeKind::Delete => "delete",
        }
    }

    pub fn parse(name: &str) -> Option<ChangeKind> {
        ChangeKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// Who changed a list.  The model learns about the user's changes at its
/// next tool result; the history keeps both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Model,
    User,
}

impl Actor {
    pub fn name(self) -> &'static str {
        match self {
            Actor::Model => "model",
            Actor::User => "user",
        }
    }

    pub fn parse(name: &str) -> Option<Actor> {
        match name {
            "model" => Some(Actor::Model),
            "user" => Some(Actor::User),
            _ => None,
        }
    }
}

/// The ids a change touched, by what happened to them: the diff reconcile
/// produces, with dropped and removed items named by id.  Saved as it is in
/// the state file, empty groups left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChangedIds {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub started: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub completed: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cancelled: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reopened: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paused: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reworded: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restored: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub demoted: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Items put under another parent, or to the top level.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reparented: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub moved: bool,
}

impl ChangedIds {
    /// What changed from BEFORE to AFTER, for changes that reconcile did not
    /// describe (user edits, Efrit's compatibility calls, undo).
    pub fn between(before: &[Item], after: &[Item]) -> ChangedIds {
        let old: FxHashMap<&str, &Item> = before.iter().map(|i| (i.id.as_str(), i)).collect();
        let new_ids: FxHashSet<&str> = after.iter().map(|i| i.id.as_str()).collect();
        let mut changed = ChangedIds::default();
        for item in after {
            let Some(was) = old.get(item.id.as_str()) else {
                changed.added.push(item.id.clone());
                continue;
            };
            if was.content != item.content {
                changed.reworded.push(item.id.clone());
            }
            if was.parent != item.parent {
                changed.reparented.push(item.id.clone());
            }
            use Status::*;
            let bucket = match (was.status, item.status) {
                (a, b) if a == b => None,
                (_, Completed) => Some(&mut changed.completed),
                (_, Cancelled) => Some(&mut changed.cancelled),
                (Completed | Cancelled, _) => Some(&mut changed.reopened),
                (Pending, InProgress) => Some(&mut changed.started),
                (InProgress, Pending) => Some(&mut changed.paused),
                _ => None,
            };
            if let Some(bucket) = bucket {
                bucket.push(item.id.clone());
            }
        }
        for item in before.iter().filter(|i| !new_ids.contains(i.id.as_str())) {
            let bucket = if item.status.is_open() {
                &mut changed.dropped
            } else {
                &mut changed.removed
            };
            bucket.push(item.id.clone());
        }
        changed.moved = reordered(before, after);
        changed
    }

    /// The named groups in a fixed order, for summaries and Lisp plists.
    pub fn groups(&self) -> [(&'static str, &[String]); 12] {
        [
            ("added", &self.added),
            ("started", &self.started),
            ("completed", &self.completed),
            ("cancelled", &self.cancelled),
            ("reopened", &self.reopened),
            ("paused", &self.paused),
            ("reworded", &self.reworded),
            ("restored", &self.restored),
            ("demoted", &self.demoted),
            ("dropped", &self.dropped),
            ("removed", &self.removed),
            ("reparented", &self.reparented),
        ]
    }

    /// "added t4; completed t2, t3; reordered", or "no item changed".
    pub fn summary(&self) -> String {
        // Room for a usual summary at once: it is made on every change.
        let mut out = String::with_capacity(64);
        for (name, ids) in self.groups() {
            if ids.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str(name);
            for (n, id) in ids.iter().enumerate() {
                out.push_str(if n == 0 { " " } else { ", " });
                out.push_str(id);
            }
        }
        if self.moved {
            if !out.is_empty() {
                out.push_str("; ");
            }
            out.push_str("reordered");
        }
        if out.is_empty() {
            out.push_str("no item changed");
        }
        out
    }
}

/// Whether the items in both lists stand in a different order in AFTER.
pub fn reordered(before: &[Item], after: &[Item]) -> bool {
    let old_ids: FxHashSet<&str> = before.iter().map(|i| i.id.as_str()).collect();
    let new_ids: FxHashSet<&str> = after.iter().map(|i| i.id.as_str()).collect();
    let kept_old = before
        .iter()
        .map(|i| i.id.as_str())
        .filter(|id| new_ids.contains(id));
    let kept_new = after
        .iter()
        .map(|i| i.id.as_str())
        .filter(|id| old_ids.contains(id));
    !kept_old.eq(kept_new)
}

/// What undoing a change needs: the list as it was, stored sparingly.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UndoData {
    /// The earlier order of ids, when the change moved or removed items;
    /// None when the earlier order is the current one minus `added`.
    pub order: Option<Vec<String>>,
    /// Ids the change brought into the list; undoing retires them.
    pub added: Vec<String>,
    /// Earlier values of the items the change altered or removed.
    pub before: Vec<Item>,
    /// Earlier values of retired items the change brought back.
    pub retired_before: Vec<Item>,
}

impl UndoData {
    /// Earlier item values this data holds, the measure of `MAX_UNDO_ITEMS`.
    fn held_items(&self) -> usize {
        self.before.len() + self.retired_before.len()
    }

    /// The data to go back from AFTER to BEFORE.  None when nothing changed.
    pub fn between(
        before: Vec<Item>,
        after: &[Item],
        retired_before: Vec<Item>,
    ) -> Option<UndoData> {
        if before.as_slice() == after {
            return None;
        }
        let old_ids: FxHashSet<&str> = before.iter().map(|i| i.id.as_str()).collect();
        let added: Vec<String> = after
            .iter()
            .filter(|i| !old_ids.contains(i.id.as_str()))
            .map(|i| i.id.clone())
            .collect();
        let survivors: Vec<&str> = after
            .iter()
            .map(|i| i.id.as_str())
            .filter(|id| old_ids.contains(id))
            .collect();
        let order = if survivors.len() == before.len()
            && survivors.iter().zip(&before).all(|(a, b)| *a == b.id)
        {
            None
        } else {
            Some(before.iter().map(|i| i.id.clone()).collect())
        };
        let current: FxHashMap<&str, &Item> = after.iter().map(|i| (i.id.as_str(), i)).collect();
        let before = before
            .into_iter()
            .filter(|i| current.get(i.id.as_str()) != Some(&i))
            .collect();
        Some(UndoData {
            order,
            added,
            before,
            retired_before,
        })
    }

    /// Puts ITEMS and RETIRED back as they were before the change.  Ids are
    /// never lost: whatever leaves the list goes to RETIRED.  An id the data
    /// names but the session no longer has (it cannot happen through this
    /// module) is skipped rather than invented.
    pub fn apply(&self, items: &mut Vec<Item>, retired: &mut FxHashMap<String, Item>) {
        let after = std::mem::take(items);
        let order: Vec<String> = match &self.order {
            Some(order) => order.clone(),
            None => {
                let added: FxHashSet<&str> = self.added.iter().map(String::as_str).collect();
                after
                    .iter()
                    .map(|i| i.id.clone())
                    .filter(|id| !added.contains(id.as_str()))
                    .collect()
            }
        };
        let mut current: FxHashMap<String, Item> =
            after.into_iter().map(|i| (i.id.clone(), i)).collect();
        let earlier: FxHashMap<&str, &Item> =
            self.before.iter().map(|i| (i.id.as_str(), i)).collect();
        for id in &order {
            let now = current.remove(id);
            let gone = if now.is_none() {
                retired.remove(id)
            } else {
                None
            };
            if let Some(item) = earlier
                .get(id.as_str())
                .map(|i| (*i).clone())
                .or(now)
                .or(gone)
            {
                items.push(item);
            }
        }
        retired.extend(current);
        for item in &self.retired_before {
            retired.insert(item.id.clone(), item.clone());
        }
    }
}

/// One change of a list.  `History::push` numbers it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// 1, 2, ... within the session; never reused, even across resets.
    pub seq: u64,
    pub actor: Actor,
    pub kind: ChangeKind,
    pub time: Timestamp,
    /// One line for people: the user's note, or what the ids say.
    pub summary: String,
    pub ids: ChangedIds,
    /// Set once `undo` took this change back.
    pub undone: bool,
    /// For an undo, the change it took back.
    pub undoes: Option<u64>,
    /// None for undos, for changes too old to undo, and for files that did
    /// not keep it.
    pub undo: Option<UndoData>,
}

#[derive(Debug, Clone, Default)]
pub struct History {
    changes: VecDeque<Change>,
    last_seq: u64,
    /// Kept in step with `changes` so that `push` need not walk them.
    undoable: Undoable,
}

/// Two histories are equal when their changes are: the bookkeeping follows
/// from those.
impl PartialEq for History {
    fn eq(&self, other: &History) -> bool {
        self.changes == other.changes && self.last_seq == other.last_seq
    }
}

/// The changes that hold undo data: how many, how many items their data
/// holds in all, and an index into the changes before which none does.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Undoable {
    changes: usize,
    items: usize,
    from: usize,
}

impl Undoable {
    fn of(changes: &VecDeque<Change>) -> Undoable {
        let mut undoable = Undoable::default();
        for undo in changes.iter().filter_map(|c| c.undo.as_ref()) {
            undoable.add(undo);
        }
        undoable
    }

    fn add(&mut self, undo: &UndoData) {
        self.changes += 1;
        self.items += undo.held_items();
    }

    fn remove(&mut self, undo: &UndoData) {
        self.changes -= 1;
        self.items -= undo.held_items();
    }

    /// Whether the oldest undo data must go.  The newest change stays
    /// undoable whatever its size.
    fn over_limits(&self) -> bool {
        self.changes > 1 && (self.changes > MAX_UNDOABLE || self.items > MAX_UNDO_ITEMS)
    }
}

impl Change {
    pub fn new(
        actor: Actor,
        kind: ChangeKind,
        time: Timestamp,
        summary: String,
        ids: ChangedIds,
    ) -> Change {
        Change {
            seq: 0,
            actor,
            kind,
            time,
            summary,
            ids,
            undone: false,
            undoes: None,
            undo: None,
        }
    }

    /// Whether undo may still take this change back: it is no undo or
    /// stop, and was not taken back already.
    pub fn undoable(&self) -> bool {
        !matches!(self.kind, ChangeKind::Undo | ChangeKind::Stop) && !self.undone
    }
}

impl History {
    /// A history read back from a file.  LAST_SEQ is raised to the newest
    /// change, so sequence numbers are never reused.
    pub fn from_parts(changes: Vec<Change>, last_seq: u64) -> History {
        let newest = changes.iter().map(|c| c.seq).max().unwrap_or(0);
        let changes = changes.into();
        History {
            undoable: Undoable::of(&changes),
            changes,
            last_seq: last_seq.max(newest),
        }
    }

    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter()
    }

    pub fn len(&self) -> usize {
        self.changes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Appends CHANGE, numbering it, and returns its number.
    pub fn push(&mut self, mut change: Change) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        change.seq = seq;
        if let Some(undo) = &change.undo {
            self.undoable.add(undo);
        }
        self.changes.push_back(change);
        while self.changes.len() > MAX_CHANGES {
            if let Some(undo) = self.changes.pop_front().and_then(|old| old.undo) {
                self.undoable.remove(&undo);
            }
            self.undoable.from = self.undoable.from.saturating_sub(1);
        }
        // Counted from the newest change back, the changes holding undo data
        // and the items they hold only grow, so the ones over the limits are
        // always the oldest: drop those until the rest fit.
        while self.undoable.over_limits() {
            let Some(index) =
                (self.undoable.from..self.changes.len()).find(|&i| self.changes[i].undo.is_some())
            else {
                break;
            };
            if let Some(undo) = self.changes[index].undo.take() {
                self.undoable.remove(&undo);
            }
            self.undoable.from = index + 1;
        }
        debug_assert_eq!((self.undoable.changes, self.undoable.items), {
            let fresh = Undoable::of(&self.changes);
            (fresh.changes, fresh.items)
        });
        seq
    }

    /// The change `undo` would take back: the newest one that is not an undo
    /// and was not undone already.  Undone changes and the undos that took
    /// them back cancel out exactly, so its undo data fits the current list.
    pub fn undo_target(&self) -> Option<&Change> {
        self.changes
            .iter()
            .rev()
            .find(|c| c.undoable())
            .filter(|c| c.undo.is_some())
    }

    pub fn mark_undone(&mut self, seq: u64) {
        if let Some(change) = self.changes.iter_mut().find(|c| c.seq == seq) {
            change.undone = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Actor;
    use crate::session::{Options, Session, UserEdit};
    use crate::validate::{Input, Limits};
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::HashSet;

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
    fn changes_record_who_when_and_what() {
        let mut s = Session::default();
        write(
            &mut s,
            json!([{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]),
        );
        write(
            &mut s,
            json!([{"id": "t1", "content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]),
        );
        s.user_edit(
            UserEdit::SetStatus {
                id: "t1".into(),
                status: Status::Completed,
            },
            &Limits::default(),
        )
        .unwrap();
        let changes: Vec<&Change> = s.history.changes().collect();
        assert_eq!(
            changes.len(),
            2,
            "a write that changes nothing is not a change"
        );
        assert_eq!(
            (changes[0].seq, changes[0].actor, changes[0].kind),
            (1, Actor::Model, ChangeKind::Write)
        );
        assert_eq!(changes[0].ids.added, ["t1", "t2"]);
        assert_eq!(
            (changes[1].actor, changes[1].kind),
            (Actor::User, ChangeKind::Status)
        );
        assert_eq!(changes[1].ids.completed, ["t1"]);
        assert_eq!(changes[1].summary, "the user marked t1 completed");
        assert!(changes[1].time >= changes[0].time);
    }

    #[test]
    fn undo_goes_back_one_change_at_a_time_and_never_reuses_ids() {
        let mut s = Session::default();
        write(
            &mut s,
            json!([{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]),
        );
        let first = s.items.clone();
        write(
            &mut s,
            json!([{"id": "t2", "content": "b", "status": "in_progress"}, {"content": "c", "status": "pending"}]),
        );
        let second = s.items.clone();
        s.user_edit(
            UserEdit::Move {
                id: "t3".into(),
                offset: -1,
            },
            &Limits::default(),
        )
        .unwrap();
        assert!(s.undo().unwrap().contains("change 3 (move by the user"));
        assert_eq!(s.items, second);
        assert!(s.undo().unwrap().contains("change 2 (write by the model"));
        assert_eq!(s.items, first);
        assert!(s.retired.contains_key("t3"));
        assert!(s
            .user_notes
            .last()
            .unwrap()
            .starts_with("the user undid change 2"));
        write(&mut s, json!([{"content": "d", "status": "pending"}]));
        assert_eq!(s.items[0].id, "t4");
        s.undo();
        assert_eq!(s.items, first);
        s.undo();
        assert!(s.items.is_empty());
        assert_eq!(s.undo(), None);
        let kinds: Vec<_> = s
            .history
            .changes()
            .map(|c| (c.kind, c.undone, c.undoes))
            .collect();
        assert_eq!(kinds.last(), Some(&(ChangeKind::Undo, false, Some(1))));
    }

    #[test]
    fn only_the_newest_changes_keep_undo_data() {
        let mut s = Session::default();
        for n in 0..(MAX_CHANGES + 10) {
            write(
                &mut s,
                json!([{"content": format!("step {n}"), "status": "pending"}]),
            );
        }
        assert_eq!(s.history.len(), MAX_CHANGES);
        assert_eq!(
            s.history.changes().filter(|c| c.undo.is_some()).count(),
            MAX_UNDOABLE
        );
        for _ in 0..MAX_UNDOABLE {
            assert!(s.undo().is_some());
        }
        assert_eq!(s.undo(), None);
        assert_eq!(
            s.history.last_seq(),
            (MAX_CHANGES + 10 + MAX_UNDOABLE) as u64
        );
    }

    /// `push` as first written: a walk over every change from the newest.
    fn push_by_walking(changes: &mut VecDeque<Change>, change: Change) {
        changes.push_back(change);
        while changes.len() > MAX_CHANGES {
            changes.pop_front();
        }
        let (mut kept, mut items) = (0, 0);
        for change in changes.iter_mut().rev() {
            let Some(undo) = &change.undo else { continue };
            kept += 1;
            items += undo.before.len() + undo.retired_before.len();
            if kept > 1 && (kept > MAX_UNDOABLE || items > MAX_UNDO_ITEMS) {
                change.undo = None;
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn push_keeps_the_undo_data_walking_would_keep(
            sizes in prop::collection::vec(prop_oneof![3 => Just(None), 6 => (0usize..40).prop_map(Some), 1 => (0usize..2000).prop_map(Some)], 1..300),
            loaded in 0usize..3,
        ) {
            let item = Item::new("t1".into(), "c".into(), None, Status::Pending, 0.0);
            let change = |size: Option<usize>| Change {
                undo: size.map(|n| UndoData { before: vec![item.clone(); n], ..UndoData::default() }),
                ..Change::new(Actor::Model, ChangeKind::Write, 0.0, String::new(), ChangedIds::default())
            };
            // Some histories start from a file, which may hold more undo data than the limits allow.
            let start: Vec<Change> = (0..loaded * 60).map(|n| Change { seq: n as u64 + 1, ..change(Some(n % 7 * 40)) }).collect();
            let mut history = History::from_parts(start.clone(), start.len() as u64);
            let mut walked: VecDeque<Change> = start.into();
            for size in sizes {
                let seq = history.push(change(size));
                push_by_walking(&mut walked, Change { seq, ..change(size) });
                let kept = |c: &Change| (c.seq, c.undo.as_ref().map(|u| u.before.len()));
                prop_assert!(history.changes().map(kept).eq(walked.iter().map(kept)));
            }
            prop_assert!(history.changes().eq(walked.iter()));
        }
    }

    #[test]
    fn undo_data_of_long_rewrites_is_bounded() {
        let mut s = Session::default();
        for n in 0..20 {
            let todos: Vec<_> = (0..1000)
                .map(|i| json!({"content": format!("write {n} item {i}"), "status": "pending"}))
                .collect();
            write(&mut s, serde_json::Value::Array(todos));
        }
        let held: usize = s
            .history
            .changes()
            .filter_map(|c| c.undo.as_ref())
            .map(|u| u.before.len())
            .sum();
        assert!(held <= MAX_UNDO_ITEMS, "{held}");
        assert!(s.undo().is_some());
        assert!(s.items[0].content.starts_with("write 18 "));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(Vec<(u8, u8)>),
        Status(u8, u8),
        Move(u8, i8),
        Add,
        ClearFinished,
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            prop::collection::vec((0u8..12, 0u8..4), 0..6).prop_map(Op::Write),
            (0u8..12, 0u8..4).prop_map(|(i, s)| Op::Status(i, s)),
            (0u8..12, -3i8..3).prop_map(|(i, o)| Op::Move(i, o)),
            Just(Op::Add),
            Just(Op::ClearFinished),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn undo_retraces_every_change(ops in prop::collection::vec(arb_op(), 1..12)) {
            let mut s = Session::default();
            let options = Options::default();
            let mut states = vec![s.items.clone()];
            for op in ops {
                let before = s.history.last_seq();
                let id = |s: &Session, i: u8| s.items.get(usize::from(i) % s.items.len().max(1)).map(|it| it.id.clone());
                let _ = match op {
                    Op::Write(list) => {
                        // Contents drawn from a small set, with and without ids, so
                        // writes match, reword, drop and restore items.
                        let todos: Vec<_> = list.iter().map(|(c, st)| {
                            let mut item = json!({"content": format!("item {}", c % 6), "status": Status::ALL[usize::from(*st)].wire_name()});
                            if c % 2 == 1 { item["id"] = json!(format!("t{}", c)); }
                            item
                        }).collect();
                        s.write(&Input::from_json(&json!({"todos": todos})), &options, false, vec![]).map(|_| String::new())
                    }
                    Op::Status(i, st) => match id(&s, i) {
                        Some(id) => s.user_edit(UserEdit::SetStatus { id, status: Status::ALL[usize::from(st)] }, &options.limits),
                        None => Ok(String::new()),
                    },
                    Op::Move(i, offset) => match id(&s, i) {
                        Some(id) => s.user_edit(UserEdit::Move { id, offset: i64::from(offset) }, &options.limits),
                        None => Ok(String::new()),
                    },
                    Op::Add => s.user_edit(UserEdit::Add { content: "added".into() }, &options.limits),
                    Op::ClearFinished => s.user_edit(UserEdit::ClearFinished, &options.limits),
                };
                if s.history.last_seq() != before {
                    states.push(s.items.clone());
                }
            }
            let issued = s.ids.issued();
            states.pop();
            while let Some(expected) = states.pop() {
                prop_assert!(s.undo().is_some());
                prop_assert_eq!(&s.items, &expected);
                let listed: HashSet<&str> = s.items.iter().map(|i| i.id.as_str()).collect();
                prop_assert!(s.retired.keys().all(|id| !listed.contains(id.as_str())));
            }
            prop_assert_eq!(s.undo(), None);
            prop_assert_eq!(s.ids.issued(), issued);
        }
    }
}

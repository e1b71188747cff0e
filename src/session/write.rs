//! The write path of a session: todo_write (a whole list or a merge),
//! Efrit's list API (add, set-status, set-all, clear), the user's edits
//! and undo.  Every operation validates first and commits last, so a
//! failed call leaves the session exactly as it was.

use rustc_hash::FxHashMap;

use crate::graph;
use crate::history::{Actor, Change, ChangeKind, ChangedIds, UndoData};
use crate::model::{now, Item, Status};
use crate::reconcile::{apply_by_runner, match_items, update, Diff, Matching};
use crate::render;
use crate::tree::{self, Node};
use crate::validate::{
    checked_text, non_blank, parse_request, quote, Input, InvalidInput, Limits, MergeItem,
    ProposedItem, WriteRequest,
};

use super::{
    with_todo_paths, with_whole_list_paths, ExternalItem, Options, Paths, Session, UserEdit,
    WriteEffect, WriteOutcome,
};

/// The list before a merged write, item by item of the list after it:
/// ADDED flags the items the write brought in, EARLIER holds the earlier
/// values of the items it altered, by their index in the list before.
fn before_of_each<'a>(added: &[bool], earlier: &'a [(usize, Item)]) -> Vec<graph::Before<'a>> {
    let mut earlier = earlier.iter().peekable();
    let mut was_at = 0;
    added
        .iter()
        .map(|new| {
            if *new {
                return graph::Before::Added;
            }
            let before = match earlier.next_if(|(index, _)| *index == was_at) {
                Some((_, item)) => graph::Before::Was(item),
                None => graph::Before::Same,
            };
            was_at += 1;
            before
        })
        .collect()
}

impl Session {
    /// Takes back the newest change of the list that was not taken back yet,
    /// whoever made it; the undo is itself a change, made by the user.
    /// Returns the note for the model, or None when there is nothing to undo.
    pub fn undo(&mut self) -> Option<String> {
        let target = self.history.undo_target()?;
        let (seq, actor, kind, summary) = (
            target.seq,
            target.actor,
            target.kind,
            target.summary.clone(),
        );
        let undo = target.undo.clone()?;
        let before = self.items.clone();
        undo.apply(&mut self.items, &mut self.retired);
        Some(self.record_undo(
            (seq, actor, kind, &summary),
            &before,
            "the list is as it was before it",
        ))
    }

    /// Ends the undo of a change, given as (SEQ, ACTOR, KIND, SUMMARY), once
    /// its items are put back: repairs the list, records the undo as the
    /// user's change and returns the note for the model.  BEFORE is the
    /// list before the undo; RESULT says what the undo left.
    pub(super) fn record_undo(
        &mut self,
        (seq, actor, kind, summary): (u64, Actor, ChangeKind, &str),
        before: &[Item],
        result: &str,
    ) -> String {
        tree::repair(&mut self.items, &[]);
        graph::repair(&mut self.items);
        let ids = ChangedIds::between(before, &self.items);
        let note = format!(
            "the user undid change {seq} ({} by the {}: {summary}); {result}",
            kind.name(),
            actor.name()
        );
        self.history.mark_undone(seq);
        self.history.push(Change {
            undoes: Some(seq),
            ..Change::new(Actor::User, ChangeKind::Undo, now(), note.clone(), ids)
        });
        self.changed(Actor::User, Some(note.clone()));
        note
    }

    /// The todo_write tool.  With AUTO_COMPLETE, items naming one of the
    /// tools (KNOWN_TOOLS or any already called) are marked in the result.
    pub fn write(
        &mut self,
        input: &Input,
        options: &Options,
        auto_complete: bool,
        known_tools: Vec<String>,
    ) -> Result<WriteOutcome, InvalidInput> {
        // A merge leaves the session's index fresh for the result.
        let mut merged = false;
        let (diff, show_list) = match parse_request(input, &options.limits)? {
            WriteRequest::Replace(proposed) => self.replace_covered(&proposed, options)?,
            WriteRequest::Merge(changes) => {
                merged = true;
                let diff = with_todo_paths(
                    |i, blocker| {
                        changes[i]
                            .blocked_by
                            .as_ref()
                            .and_then(|ids| ids.iter().position(|id| id == blocker))
                    },
                    options.limits.max_blockers,
                    |paths| self.merge(&changes, &options.limits, paths),
                )?;
                (diff, false)
            }
        };
        self.known_tools = known_tools;
        // Taken out while the result borrows the session's tool names.
        let mut index = std::mem::take(&mut self.index);
        let auto_tools = if auto_complete {
            self.tool_names(None)
        } else {
            Vec::new()
        };
        let text = Self::with_index(&self.items, &mut index, merged, |items, find| {
            render::write_result_by(
                items,
                &diff,
                show_list,
                options.full_list_up_to,
                &auto_tools,
                Some(find),
            )
        });
        self.index = index;
        self.writes += 1;
        self.changed(Actor::Model, None);
        let completed_any = !diff.completed.is_empty();
        if completed_any {
            self.guide.note_progress();
        }
        self.last_write = Some(WriteEffect {
            completed_any,
            changed_nothing: diff.is_empty(),
        });
        Ok(WriteOutcome { text, diff })
    }

    /// A write of the whole list.  Returns what changed, and whether the
    /// result should show the list: when items came or went or moved, the
    /// model's picture of the list may differ from this one.
    pub(super) fn replace(
        &mut self,
        proposed: &[ProposedItem],
        options: &Options,
    ) -> Result<(Diff, bool), InvalidInput> {
        // Retired items an id brings back, as they were, for undo.
        let retired_before: Vec<Item> = if self.retired.is_empty() {
            Vec::new()
        } else {
            proposed
                .iter()
                .filter_map(|p| p.id.and_then(|id| self.retired.get(id)))
                .cloned()
                .collect()
        };
        // Matching is the only step that can fail; from here on the write
        // commits, and the previous list is taken over rather than copied.
        let matching = match_items(&self.items, &self.retired, proposed)?;
        let new_ids = self.new_ids(proposed, &matching);
        self.check_replace_tree(proposed, &matching, &new_ids)?;
        self.check_replace_graph(proposed, &matching, &new_ids, &options.limits)?;
        self.check_replace_ancestry(proposed, &matching, &new_ids, &options.limits)?;
        let waiting = graph::waiting(&self.items);
        let previous = std::mem::take(&mut self.items);
        let agents = &self.agents;
        let reconciled = apply_by_runner(
            matching,
            previous,
            &mut self.retired,
            &mut self.ids,
            proposed,
            now(),
            &|owner| agents.runner(owner),
        );
        self.items = reconciled.items;
        let mut diff = reconciled.diff;
        diff.now_ready = graph::became_ready(&waiting, &self.items)
            .into_iter()
            .map(str::to_string)
            .collect();
        if let Some(mut undo) = reconciled.undo {
            undo.retired_before = retired_before;
            let ids = diff.changed_ids();
            let summary = ids.summary();
            self.history.push(Change {
                undo: Some(undo),
                ..Change::new(Actor::Model, ChangeKind::Write, now(), summary, ids)
            });
        }
        let show_list = diff.moved
            || !diff.added.is_empty()
            || !diff.restored.is_empty()
            || !diff.dropped.is_empty();
        Ok((diff, show_list))
    }

    /// A merged write: items named by id change only the fields they carry,
    /// items without an id are added at the end, the rest stay as they are.
    /// An item this write sets in_progress wins over one already running.
    pub(super) fn merge(
        &mut self,
        changes: &[MergeItem],
        limits: &Limits,
        paths: &Paths,
    ) -> Result<Diff, InvalidInput> {
        enum Target {
            Listed(usize),
            Retired,
            New,
        }
        self.index.refresh(&self.items);
        let mut targets = Vec::with_capacity(changes.len());
        for (i, change) in changes.iter().enumerate() {
            targets.push(match change.id {
                None => Target::New,
                Some(id) => match self.index.get(id) {
                    Some(at) => Target::Listed(at),
                    None if self.retired.contains_key(id) => Target::Retired,
                    None => {
                        return Err(InvalidInput::new(
                            format!("todos[{i}].id"),
                            format!("unknown id {}: use an id from an earlier todo_write result, or omit id to add an item", quote(id)),
                        ))
                    }
                },
            });
        }
        let growth = targets
            .iter()
            .filter(|t| !matches!(t, Target::Listed(_)))
            .count();
        if self.items.len() + growth > limits.max_items {
            return Err(InvalidInput::new(
                "todos",
                format!(
                    "would make the list {} items long; the limit is {}",
                    self.items.len() + growth,
                    limits.max_items
                ),
            ));
        }
        let listed: Vec<Option<usize>> = targets
            .iter()
            .map(|target| {
                if let Target::Listed(at) = target {
                    Some(*at)
                } else {
                    None
                }
            })
            .collect();
        // A retired item a merge brings back keeps its parent when that is
        // in the list by the end of the merge.
        let restoring: Vec<&str> = changes
            .iter()
            .zip(&listed)
            .filter(|(_, at)| at.is_none())
            .filter_map(|(change, _)| change.id)
            .collect();
        self.check_owners(changes, &listed)?;
        self.check_merge_tree(changes, &listed, &restoring)?;
        self.check_merge_graph(changes, &listed, paths)?;
        self.check_merge_ancestry(changes, &listed, paths)?;
        // Checked: from here on the write commits.  Of the list as it was,
        // undo and the ready check need only the items the write alters:
        // each one's earlier value is kept, not a copy of the list.
        let listed_before = self.items.len();
        let mut touched = vec![false; listed_before];
        // (index in the list as it was, earlier value)
        let mut earlier: Vec<(usize, Item)> = Vec::new();
        // For each item of the list, whether this write brought it in.
        let mut added = vec![false; listed_before];
        let mut subtasks: Vec<Item> = Vec::new();
        let mut retired_before = Vec::new();
        let mut diff = Diff::default();
        let mut running: Option<String> = None;
        let at = now();
        for (change, target) in changes.iter().zip(targets) {
            let index = match target {
                Target::Listed(at) => at,
                Target::Retired => {
                    let id = change.id.unwrap_or_default();
                    let Some(mut item) = self.retired.remove(id) else {
                        continue;
                    };
                    retired_before.push(item.clone());
                    diff.restored.push(item.id.clone());
                    // The items listed before this write are still the
                    // first ones: the write only adds after them so far.
                    let listed = &self.items[..listed_before];
                    let will_be_listed = |id: &str| {
                        listed.iter().any(|item| item.id == id) || restoring.contains(&id)
                    };
                    if !item.parent.as_deref().is_some_and(will_be_listed) {
                        item.parent = None;
                    }
                    if change.blocked_by.is_none() {
                        item.blocked_by.retain(|id| will_be_listed(id));
                    }
                    self.items.push(item);
                    added.push(true);
                    self.items.len() - 1
                }
                Target::New => {
                    let status = change.status.unwrap_or(Status::Pending);
                    let content = change.content.unwrap_or_default().to_string();
                    let mut item = Item::new(
                        self.ids.issue(),
                        content,
                        change.active_form.map(str::to_string),
                        status,
                        at,
                    );
                    diff.added.push(item.id.clone());
                    if status == Status::InProgress && running.is_none() {
                        running = Some(item.id.clone());
                    }
                    item.parent = change.parent.flatten().map(str::to_string);
                    item.description = change.description.flatten().map(str::to_string);
                    item.owner = match change.owner {
                        Some(owner) => owner.map(str::to_string),
                        None => self.agents.new_owner(),
                    };
                    item.blocked_by = change.blocked_by.clone().unwrap_or_default();
                    if item.parent.is_some() {
                        // Placed under its parent once every change is made.
                        subtasks.push(item);
                    } else {
                        self.items.push(item);
                        added.push(true);
                    }
                    continue;
                }
            };
            let item = &mut self.items[index];
            let status = change.status.unwrap_or(item.status);
            // What the change leaves out keeps its value: the wanted item
            // borrows from a copy, since `update` changes the item itself.
            // The copy is the item's earlier value too.
            let kept = item.clone();
            let blocked_by = change
                .blocked_by
                .clone()
                .unwrap_or_else(|| kept.blocked_by.clone());
            let content = change.content.unwrap_or(&kept.content);
            let parent = change.parent.unwrap_or(kept.parent.as_deref());
            let description = change.description.unwrap_or(kept.description.as_deref());
            let owner = self.agents.claim(
                change.owner.unwrap_or(kept.owner.as_deref()),
                kept.status,
                status,
            );
            let wanted = ProposedItem {
                id: change.id,
                content,
                active_form: change.active_form,
                status,
                parent,
                description,
                blocked_by,
                owner,
            };
            update(item, &wanted, status, at, &mut diff, false);
            if status == Status::InProgress && running.is_none() {
                running = Some(item.id.clone());
            }
            if index < listed_before && !touched[index] {
                touched[index] = true;
                earlier.push((index, kept));
            }
        }
        let inserts = !subtasks.is_empty();
        for item in subtasks {
            let parent = self
                .items
                .iter()
                .position(|i| Some(i.id.as_str()) == item.parent.as_deref());
            let end = parent.map_or(self.items.len(), |parent| {
                tree::subtree_end(&self.items, parent)
            });
            self.items.insert(end, item);
            added.insert(end, true);
        }
        if let Some(running) = running {
            // One running item per agent: the one this write started
            // demotes only the items of the same agent.
            let runner = self
                .items
                .iter()
                .find(|i| i.id == running)
                .and_then(|i| self.agents.runner(i.owner.as_deref()))
                .map(str::to_string);
            let agents = &self.agents;
            let mut was_at = 0;
            for (item, new) in self.items.iter_mut().zip(&added) {
                let index = (!new).then_some(was_at);
                was_at += usize::from(!new);
                if item.status != Status::InProgress
                    || item.id == running
                    || agents.runner(item.owner.as_deref()) != runner.as_deref()
                {
                    continue;
                }
                if let Some(index) = index.filter(|&index| !touched[index]) {
                    touched[index] = true;
                    earlier.push((index, item.clone()));
                }
                item.set_status(Status::Pending, at);
                diff.started.retain(|id| *id != item.id);
                diff.demoted.push(item.id.clone());
            }
        }
        // The index was the list's at the start; the ids kept their
        // places unless a subtask went in among them.  So the index leaves
        // a merge fresh, for the result too.
        if inserts {
            self.index.refresh(&self.items);
        } else {
            self.index.follow_append(&self.items);
        }
        earlier.sort_by_key(|(index, _)| *index);
        // An item becomes ready only when a blocker finishes, an edge or
        // an item goes, or an item moves away from a blocked parent.
        if !(diff.completed.is_empty()
            && diff.cancelled.is_empty()
            && diff.edited.is_empty()
            && diff.reparented.is_empty())
        {
            let before = before_of_each(&added, &earlier);
            diff.now_ready = graph::newly_ready_after_change(&self.items, &before, &self.index)
                .into_iter()
                .map(str::to_string)
                .collect();
        }
        if !diff.is_empty() {
            let ids = diff.changed_ids();
            // The earlier values of the items that did change, in list
            // order, as `UndoData::between` keeps them; the order of the
            // items listed before stays, so none is needed.
            let mut changed_before = Vec::new();
            let mut earlier = earlier.into_iter().peekable();
            let mut was_at = 0;
            for (item, new) in self.items.iter().zip(&added) {
                if *new {
                    continue;
                }
                if let Some((_, was)) = earlier.next_if(|(index, _)| *index == was_at) {
                    if was != *item {
                        changed_before.push(was);
                    }
                }
                was_at += 1;
            }
            let added_ids: Vec<String> = self
                .items
                .iter()
                .zip(&added)
                .filter(|(_, new)| **new)
                .map(|(item, _)| item.id.clone())
                .collect();
            if !changed_before.is_empty() || !added_ids.is_empty() {
                let summary = ids.summary();
                self.history.push(Change {
                    undo: Some(UndoData {
                        order: None,
                        added: added_ids,
                        before: changed_before,
                        retired_before,
                    }),
                    ..Change::new(Actor::Model, ChangeKind::Write, now(), summary, ids)
                });
            }
        }
        Ok(diff)
    }

    /// Calls F with the list and a lookup of ids through the session's
    /// kept index, brought up to date at the first lookup only: a result
    /// that names no blocker does not compare the list's ids.
    /// FRESH says INDEX is ITEMS' already, as a merge leaves it.
    pub(super) fn with_index<R>(
        items: &[Item],
        index: &mut graph::IdIndex,
        fresh: bool,
        f: impl FnOnce(&[Item], render::Find) -> R,
    ) -> R {
        let index = std::cell::RefCell::new(index);
        let fresh = std::cell::Cell::new(fresh);
        let find = |id: &str| {
            if !fresh.replace(true) {
                index.borrow_mut().refresh(items);
            }
            index.borrow().get(id)
        };
        f(items, &find)
    }

    /// The dependency checks of a merged write (see `graph::check`), on
    /// the list as it would be: LISTED gives for each change the index of
    /// the listed item it changes.  A write that gives no blockers and
    /// starts or completes no item that has some needs none.
    fn check_merge_graph(
        &self,
        changes: &[MergeItem],
        listed: &[Option<usize>],
        paths: &Paths,
    ) -> Result<(), InvalidInput> {
        let needs = changes.iter().zip(listed).any(|(change, at)| {
            change
                .blocked_by
                .as_ref()
                .is_some_and(|ids| !ids.is_empty())
                || (matches!(change.status, Some(Status::InProgress | Status::Completed))
                    && at.is_some_and(|at| !self.items[at].blocked_by.is_empty()))
                || (at.is_none()
                    && change
                        .id
                        .and_then(|id| self.retired.get(id))
                        .is_some_and(|item| !item.blocked_by.is_empty()))
        });
        if !needs {
            return Ok(());
        }
        let mut named: Vec<Option<usize>> = vec![None; self.items.len()];
        for (i, at) in listed.iter().enumerate() {
            if let Some(at) = at {
                named[*at] = Some(i);
            }
        }
        let mut nodes: Vec<graph::Node> = self
            .items
            .iter()
            .zip(&named)
            .map(|(item, at)| {
                let change = at.map(|i| &changes[i]);
                let given = change.and_then(|c| c.blocked_by.as_deref());
                graph::Node {
                    id: Some(&item.id),
                    status: change.and_then(|c| c.status).unwrap_or(item.status),
                    was: Some(item.status),
                    blocked_by: given.unwrap_or(&item.blocked_by),
                    edges_given: given.is_some(),
                    earlier_blocked_by: &item.blocked_by,
                }
            })
            .collect();
        let mut change_of = named;
        for (i, (change, at)) in changes.iter().zip(listed).enumerate() {
            if at.is_some() {
                continue;
            }
            let retired = change.id.and_then(|id| self.retired.get(id));
            let given = change.blocked_by.as_deref();
            nodes.push(graph::Node {
                id: change.id,
                status: change
                    .status
                    .or(retired.map(|item| item.status))
                    .unwrap_or(Status::Pending),
                was: retired.map(|item| item.status),
                blocked_by: given
                    .or(retired.map(|item| item.blocked_by.as_slice()))
                    .unwrap_or_default(),
                // A retired item's own edges that name a gone item are
                // dropped as it comes back; the others are sound.
                edges_given: given.is_some(),
                earlier_blocked_by: &[],
            });
            change_of.push(Some(i));
        }
        // The first nodes are the list's items, in order: their ids are
        // looked up through the list's index, the few others one by one.
        let listed = self.items.len();
        let find = |id: &str| {
            self.index.get(id).filter(|&n| n < listed).or_else(|| {
                nodes[listed..]
                    .iter()
                    .position(|node| node.id == Some(id))
                    .map(|k| listed + k)
            })
        };
        let all_listed = nodes.len() == listed;
        graph::check_by(&nodes, paths.max_blockers, &find, all_listed)
            .map_err(|problem| Session::graph_error(problem, &nodes, paths, &change_of))
    }

    /// Whether ID names an item of the list or a retired one.
    fn knows(&self, id: &str) -> bool {
        self.items.iter().any(|item| item.id == id) || self.retired.contains_key(id)
    }

    /// The ids the items a whole-list write adds will be given, the next
    /// ones in list order (None for the items it keeps or brings back),
    /// so that a first plan can name its own steps as parents and blockers.
    fn new_ids(&self, proposed: &[ProposedItem], matching: &Matching) -> Vec<Option<String>> {
        let mut next = self.ids.issued();
        proposed
            .iter()
            .enumerate()
            .map(|(i, wanted)| {
                let known = matching.continued(i).is_some()
                    || wanted.id.is_some_and(|id| self.retired.contains_key(id));
                (!known && wanted.id.is_none()).then(|| {
                    next = next.saturating_add(1);
                    format!("t{next}")
                })
            })
            .collect()
    }

    /// The subtask checks of a whole-list write (see `tree::check`), on
    /// the list MATCHING says it makes, NEW_IDS naming the items it adds.
    /// A list without parents needs none.
    fn check_replace_tree(
        &self,
        proposed: &[ProposedItem],
        matching: &Matching,
        new_ids: &[Option<String>],
    ) -> Result<(), InvalidInput> {
        if proposed.iter().all(|p| p.parent.is_none()) {
            return Ok(());
        }
        let nodes: Vec<Node> = proposed
            .iter()
            .enumerate()
            .map(|(i, wanted)| {
                let was = matching.continued(i).and_then(|j| self.items.get(j));
                Node {
                    id: was
                        .map(|item| item.id.as_str())
                        .or(wanted.id)
                        .or(new_ids[i].as_deref()),
                    parent: wanted.parent,
                    status: wanted.status,
                    at: Some(i),
                    placed: true,
                    was: was.map(|item| (item.status, item.parent.as_deref())),
                }
            })
            .collect();
        tree::check(&nodes, &self.items, |id| self.knows(id))
    }

    /// The dependency checks of a whole-list write (see `graph::check`) on
    /// the list MATCHING says it makes.  Each item's blockers are the ones
    /// it carries (none when it carries none).  An item the write adds is
    /// checked under the id it will be given, the next ones in list order,
    /// so that a first plan can say which of its own steps wait for which.
    fn check_replace_graph(
        &self,
        proposed: &[ProposedItem],
        matching: &Matching,
        new_ids: &[Option<String>],
        limits: &Limits,
    ) -> Result<(), InvalidInput> {
        let starting_blocked = |i: usize, wanted: &ProposedItem| {
            matches!(wanted.status, Status::InProgress | Status::Completed)
                && matching
                    .continued(i)
                    .and_then(|j| self.items.get(j))
                    .is_some_and(|item| !item.blocked_by.is_empty())
        };
        if proposed
            .iter()
            .enumerate()
            .all(|(i, p)| p.blocked_by.is_empty() && !starting_blocked(i, p))
        {
            return Ok(());
        }
        let was_of = |i: usize, wanted: &ProposedItem| {
            matching
                .continued(i)
                .and_then(|j| self.items.get(j))
                .or_else(|| wanted.id.and_then(|id| self.retired.get(id)))
        };
        let nodes: Vec<graph::Node> = proposed
            .iter()
            .enumerate()
            .map(|(i, wanted)| {
                let was = was_of(i, wanted);
                graph::Node {
                    id: was
                        .map(|item| item.id.as_str())
                        .or(wanted.id)
                        .or(new_ids[i].as_deref()),
                    status: wanted.status,
                    was: was.map(|item| item.status),
                    blocked_by: &wanted.blocked_by,
                    edges_given: true,
                    earlier_blocked_by: &[],
                }
            })
            .collect();
        with_whole_list_paths(proposed, limits.max_blockers, |paths, change_of| {
            graph::check(&nodes, limits.max_blockers)
                .map_err(|problem| Session::graph_error(problem, &nodes, paths, change_of))
        })
    }

    /// The subtask checks of a merged write: LISTED gives for each change
    /// the index of the listed item it changes; the others bring back a
    /// retired item (with an id, in RESTORING) or add one.
    fn check_merge_tree(
        &self,
        changes: &[MergeItem],
        listed: &[Option<usize>],
        restoring: &[&str],
    ) -> Result<(), InvalidInput> {
        if changes.iter().all(|c| c.parent.is_none()) && !tree::any_parent(&self.items) {
            return Ok(());
        }
        let mut named: Vec<Option<usize>> = vec![None; self.items.len()];
        for (i, at) in listed.iter().enumerate() {
            if let Some(at) = at {
                named[*at] = Some(i);
            }
        }
        let will_be_listed =
            |id: &str| self.items.iter().any(|item| item.id == id) || restoring.contains(&id);
        let mut nodes: Vec<Node> = self
            .items
            .iter()
            .zip(&named)
            .map(|(item, at)| {
                let change = at.map(|i| &changes[i]);
                Node {
                    id: Some(&item.id),
                    parent: change
                        .and_then(|c| c.parent)
                        .unwrap_or(item.parent.as_deref()),
                    status: change.and_then(|c| c.status).unwrap_or(item.status),
                    at: *at,
                    placed: change.is_some_and(|c| c.parent.is_some()),
                    was: Some((item.status, item.parent.as_deref())),
                }
            })
            .collect();
        for (i, (change, at)) in changes.iter().zip(listed).enumerate() {
            if at.is_some() {
                continue;
            }
            let retired = change.id.and_then(|id| self.retired.get(id));
            let kept = retired
                .and_then(|item| item.parent.as_deref())
                .filter(|p| will_be_listed(p));
            let parent = match change.parent {
                Some(parent) => parent,
                None => kept,
            };
            nodes.push(Node {
                id: change.id,
                parent,
                status: change
                    .status
                    .or(retired.map(|item| item.status))
                    .unwrap_or(Status::Pending),
                at: Some(i),
                placed: parent.is_some(),
                was: None,
            });
        }
        tree::check(&nodes, &self.items, |id| self.knows(id))
    }

    /// Appends one pending item (Efrit's `efrit-todo-add`).
    pub fn add(
        &mut self,
        content: String,
        priority: Option<String>,
        limits: &Limits,
    ) -> Result<Item, InvalidInput> {
        let before = self.items.clone();
        let item = self.push_item(content, priority, limits)?;
        self.record(
            Actor::Model,
            ChangeKind::Add,
            before,
            Vec::new(),
            None,
            None,
        );
        Ok(item)
    }

    fn push_item(
        &mut self,
        content: String,
        priority: Option<String>,
        limits: &Limits,
    ) -> Result<Item, InvalidInput> {
        if self.items.len() >= limits.max_items {
            return Err(InvalidInput::new(
                "todos",
                format!(
                    "already has {} items; the limit is {}",
                    self.items.len(),
                    limits.max_items
                ),
            ));
        }
        let mut item = Item::new(self.ids.issue(), content, None, Status::Pending, now());
        item.priority = priority;
        self.items.push(item.clone());
        Ok(item)
    }

    /// Changes one item's status; None when no item has that id.
    pub fn set_status(&mut self, id: &str, status: Status) -> Option<Item> {
        let index = self.items.iter().position(|i| i.id == id)?;
        let before = self.items.clone();
        self.items[index].set_status(status, now());
        let item = self.items[index].clone();
        self.record(
            Actor::Model,
            ChangeKind::Status,
            before,
            Vec::new(),
            None,
            None,
        );
        Some(item)
    }

    /// Replaces the list with items built elsewhere (Efrit's `efrit-todo-set-all`).
    pub fn set_all(
        &mut self,
        external: Vec<ExternalItem>,
        limits: &Limits,
    ) -> Result<(), InvalidInput> {
        if external.len() > limits.max_items {
            return Err(InvalidInput::new(
                "todos",
                format!(
                    "has {} items; the limit is {}",
                    external.len(),
                    limits.max_items
                ),
            ));
        }
        let mut ids = self.ids.clone();
        for item in &external {
            if let Some(id) = &item.id {
                ids.observe(id);
            }
        }
        let at = now();
        // Efrit's API has no parents, blockers, descriptions or owners: an
        // item it hands back keeps its own.
        let kept: FxHashMap<&str, &Item> = self
            .items
            .iter()
            .map(|item| (item.id.as_str(), item))
            .collect();
        let mut items: Vec<Item> = external
            .into_iter()
            .map(|e| {
                let id = e.id.unwrap_or_else(|| ids.issue());
                let created = e.created.unwrap_or(at);
                let mut item = Item::new(id, e.content, None, e.status, created);
                if e.status == Status::Completed {
                    item.completed = e.completed.or(Some(at));
                }
                item.priority = e.priority;
                if let Some(was) = kept.get(item.id.as_str()) {
                    item.parent = was.parent.clone();
                    item.description = was.description.clone();
                    item.blocked_by = was.blocked_by.clone();
                    item.owner = was.owner.clone();
                }
                item
            })
            .collect();
        tree::repair(&mut items, &[]);
        graph::repair(&mut items);
        self.ids = ids;
        let before = std::mem::replace(&mut self.items, items);
        self.record(
            Actor::Model,
            ChangeKind::SetAll,
            before,
            Vec::new(),
            None,
            None,
        );
        Ok(())
    }

    /// Applies one edit by the user and returns how the model will be told.
    pub fn user_edit(&mut self, edit: UserEdit, limits: &Limits) -> Result<String, InvalidInput> {
        let position = |items: &[Item], id: &str| {
            items.iter().position(|i| i.id == id).ok_or_else(|| {
                InvalidInput::new("id", format!("no item {} in this list", quote(id)))
            })
        };
        let at = now();
        let before = self.items.clone();
        let kind = match &edit {
            UserEdit::SetStatus { .. } | UserEdit::SetStatusUnblocked { .. } => ChangeKind::Status,
            UserEdit::EditContent { .. } => ChangeKind::Edit,
            UserEdit::Add { .. } => ChangeKind::Add,
            UserEdit::Move { .. } => ChangeKind::Move,
            UserEdit::ClearFinished => ChangeKind::ClearFinished,
            UserEdit::Clear => ChangeKind::Reset,
            UserEdit::Block { .. } | UserEdit::Unblock { .. } => ChangeKind::Edit,
        };
        let unblock = matches!(edit, UserEdit::SetStatusUnblocked { .. });
        let note = match edit {
            UserEdit::SetStatus { id, status } | UserEdit::SetStatusUnblocked { id, status } => {
                let index = position(&self.items, &id)?;
                self.check_user_status(index, status)?;
                let dropped = if unblock {
                    self.drop_waits(index, status)
                } else {
                    Vec::new()
                };
                let mut after = self.items.clone();
                if status == Status::InProgress {
                    for other in after.iter_mut().filter(|i| i.status == Status::InProgress) {
                        other.status = Status::Pending;
                    }
                }
                after[index].status = status;
                if let Err(error) = self.check_user_graph(&after, index, limits) {
                    self.items = before;
                    return Err(error);
                }
                if status == Status::InProgress {
                    // One running item per agent: the one the user picked.
                    let agents = &self.agents;
                    let runner = agents
                        .runner(self.items[index].owner.as_deref())
                        .map(str::to_string);
                    for other in self.items.iter_mut().filter(|i| {
                        i.status == Status::InProgress
                            && agents.runner(i.owner.as_deref()) == runner.as_deref()
                    }) {
                        other.set_status(Status::Pending, at);
                    }
                }
                self.items[index].set_status(status, at);
                if status == Status::Completed {
                    self.guide.note_progress();
                }
                if dropped.is_empty() {
                    format!("the user marked {id} {}", status.wire_name())
                } else {
                    format!(
                        "the user removed {} and marked {id} {}",
                        super::ancestry::dropped_text(&dropped),
                        status.wire_name()
                    )
                }
            }
            UserEdit::EditContent { id, content } => {
                let index = position(&self.items, &id)?;
                let content =
                    checked_text(&Input::Str(content), "content", limits.max_content_chars)
                        .and_then(|t| non_blank(t, "content"))?;
                let item = &mut self.items[index];
                if item.active_form == item.content {
                    item.active_form = content.clone();
                }
                item.content = content;
                format!("the user reworded {id} to {}", quote(&item.content))
            }
            UserEdit::Add { content } => {
                let content =
                    checked_text(&Input::Str(content), "content", limits.max_content_chars)
                        .and_then(|t| non_blank(t, "content"))?;
                let item = self.push_item(content, None, limits)?;
                format!("the user added {} {}", item.id, quote(&item.content))
            }
            UserEdit::Move { id, offset } => {
                let from = position(&self.items, &id)?;
                let last = self.items.len() as i64 - 1;
                let to = (from as i64).saturating_add(offset).clamp(0, last) as usize;
                let item = self.items.remove(from);
                self.items.insert(to, item);
                format!("the user moved {id} to position {}", to + 1)
            }
            UserEdit::ClearFinished => {
                let (finished, open): (Vec<Item>, Vec<Item>) = std::mem::take(&mut self.items)
                    .into_iter()
                    .partition(|i| !i.status.is_open());
                self.items = open;
                let ids: Vec<String> = finished.iter().map(|i| i.id.clone()).collect();
                // Subtasks of a removed item move up to its place.
                let moved_up = tree::repair(&mut self.items, &finished);
                for item in finished {
                    // A finished item blocks nothing; its id leaves the
                    // blocker lists with it, so none names a gone item.
                    graph::strip(&mut self.items, &item.id);
                    self.retired.insert(item.id.clone(), item);
                }
                if ids.is_empty() {
                    return Ok(String::new());
                }
                let one = ids.len() == 1;
                let mut note = format!(
                    "the user removed the finished {} {} from the list",
                    if one { "item" } else { "items" },
                    ids.join(", ")
                );
                if !moved_up.is_empty() {
                    note.push_str(&format!(
                        " ({} unfinished {} {} moved up a level)",
                        if one { "its" } else { "their" },
                        if moved_up.len() == 1 {
                            "subtask"
                        } else {
                            "subtasks"
                        },
                        moved_up.join(", ")
                    ));
                }
                note
            }
            UserEdit::Clear => {
                let cleared = std::mem::take(&mut self.items);
                let mut note = String::from("the user cleared the list, removing ");
                crate::model::push_ids(&mut note, cleared.iter().map(|i| i.id.as_str()));
                for item in cleared {
                    self.retired.insert(item.id.clone(), item);
                }
                note
            }
            UserEdit::Block { id, blocker } => {
                let index = position(&self.items, &id)?;
                let blocker = crate::validate::normalise_id(&blocker);
                position(&self.items, &blocker)
                    .map_err(|e| InvalidInput::new("blocker", e.message))?;
                let mut blocked_by = self.items[index].blocked_by.clone();
                if !blocked_by.contains(&blocker) {
                    blocked_by.push(blocker.clone());
                }
                let mut after = self.items.clone();
                after[index].blocked_by = blocked_by.clone();
                self.check_user_graph(&after, index, limits)?;
                self.items[index].blocked_by = blocked_by;
                format!("the user made {id} wait for {blocker}")
            }
            UserEdit::Unblock { id, blocker } => {
                let index = position(&self.items, &id)?;
                let blocker = crate::validate::normalise_id(&blocker);
                self.items[index].blocked_by.retain(|b| *b != blocker);
                format!("the user removed the dependency of {id} on {blocker}")
            }
        };
        if self.items == before {
            // Nothing to record, and nothing the model needs to hear.
            return Ok(String::new());
        }
        self.record(
            Actor::User,
            kind,
            before,
            Vec::new(),
            None,
            Some(note.clone()),
        );
        self.changed(Actor::User, Some(note.clone()));
        Ok(note)
    }

    /// The subtask rules for the user's status edits, as for the model's:
    /// no item completed while a subtask of it is unfinished, no subtask of
    /// a completed item reopened.
    fn check_user_status(&self, index: usize, status: Status) -> Result<(), InvalidInput> {
        let item = &self.items[index];
        if status == Status::Completed && item.status != Status::Completed {
            let open = tree::open_subtasks(&self.items, index);
            if !open.is_empty() {
                return Err(InvalidInput::new(
                    "status",
                    tree::completion_refusal(&item.id, &open),
                ));
            }
        }
        if status.is_open() && !item.status.is_open() {
            if let Some(parent) = tree::completed_ancestor(&self.items, index) {
                return Err(InvalidInput::new(
                    "status",
                    format!(
                        "{} is a subtask of {parent}, which is completed; reopen {parent} first",
                        item.id
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Empties the list; ids already issued stay retired.
    pub fn clear(&mut self) {
        let before = self.items.clone();
        for item in self.items.drain(..) {
            self.retired.insert(item.id.clone(), item);
        }
        self.record(
            Actor::Model,
            ChangeKind::Clear,
            before,
            Vec::new(),
            None,
            None,
        );
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;
    use crate::history::UndoData;
    use serde_json::{json, Value as Json};

    #[derive(Debug, Clone)]
    enum Op {
        /// A merged write of these changes.
        Merge(Vec<Json>),
        /// TaskUpdate deleted: the item is retired, a merge may bring it back.
        Delete(u8),
        Undo,
    }

    fn arb_change() -> impl proptest::strategy::Strategy<Value = Json> {
        use proptest::prelude::*;
        let id = |n: u8| format!("t{}", n + 1);
        let status = prop::sample::select(vec!["pending", "in_progress", "completed", "cancelled"]);
        let ids = prop::collection::vec(0u8..8, 0..3)
            .prop_map(move |v| v.into_iter().map(id).collect::<Vec<_>>());
        (
            prop::option::weighted(0.8, 0u8..8),
            prop::option::of(status),
            prop::option::weighted(0.4, ids),
            prop::option::weighted(0.2, prop::option::of(0u8..8)),
            prop::option::weighted(0.2, "[a-c]{1,2}"),
        )
            .prop_map(move |(target, status, blocked_by, parent, content)| {
                let mut change = json!({});
                match target {
                    Some(n) => change["id"] = json!(id(n)),
                    None => change["content"] = json!(content.clone().unwrap_or("new".into())),
                }
                if let Some(status) = status {
                    change["status"] = json!(status);
                }
                if let Some(blocked_by) = blocked_by {
                    change["blocked_by"] = json!(blocked_by);
                }
                if let Some(parent) = parent {
                    change["parent"] = parent.map_or(Json::Null, |p| json!(id(p)));
                }
                if let (Some(content), Some(_)) = (content, target) {
                    change["content"] = json!(content);
                }
                change
            })
    }

    fn arb_op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            8 => prop::collection::vec(arb_change(), 1..4).prop_map(Op::Merge),
            1 => (0u8..8).prop_map(Op::Delete),
            1 => Just(Op::Undo),
        ]
    }

    proptest::proptest! {
        /// A merge keeps only the earlier values of the items it alters,
        /// not a copy of the list: what it records for undo, and the items
        /// it says became ready, are what the two whole lists give.
        #[test]
        fn a_merge_records_what_the_whole_lists_give(ops in proptest::collection::vec(arb_op(), 1..30)) {
            let mut s = Session::started_now();
            for op in ops {
                match op {
                    Op::Delete(n) => {
                        let _ = s.delete(&format!("t{}", n + 1));
                    }
                    Op::Undo => {
                        let _ = s.undo();
                    }
                    Op::Merge(changes) => {
                        let before = s.items.clone();
                        let retired = s.retired.clone();
                        let recorded = s.history.len();
                        let input = Input::from_json(&json!({"merge": true, "todos": changes}));
                        let Ok(outcome) = s.write(&input, &Options::default(), false, vec![]) else {
                            proptest::prop_assert_eq!(&s.items, &before, "a failed merge changes nothing");
                            continue;
                        };
                        let diff = &outcome.diff;
                        let frees = !(diff.completed.is_empty()
                            && diff.cancelled.is_empty()
                            && diff.edited.is_empty()
                            && diff.reparented.is_empty());
                        let ready: Vec<&str> = if frees {
                            graph::newly_ready(&before, &s.items)
                        } else {
                            Vec::new()
                        };
                        proptest::prop_assert_eq!(&diff.now_ready, &ready);
                        let retired_before: Vec<Item> = diff
                            .restored
                            .iter()
                            .filter_map(|id| retired.get(id).cloned())
                            .collect();
                        let undo = UndoData::between(before.clone(), &s.items, retired_before);
                        if diff.is_empty() || undo.is_none() {
                            proptest::prop_assert_eq!(s.history.len(), recorded);
                        } else {
                            let last = s.history.changes().last().and_then(|c| c.undo.clone());
                            proptest::prop_assert_eq!(last, undo);
                            // And undo brings the list back.
                            s.undo();
                            proptest::prop_assert_eq!(&s.items, &before);
                        }
                    }
                }
            }
        }
    }
}

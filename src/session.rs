//! The registry of sessions and the operations that change a session's list.
//! Every operation validates first and commits last, so a failed call leaves
//! the session exactly as it was.

use std::sync::{Mutex, MutexGuard};

use once_cell::sync::Lazy;
use rustc_hash::FxHashMap;

use crate::breaker::{fingerprint, Breaker, BreakerLimits, Call, Verdict};
use crate::guide::{named_tool, open_items, Guide, GuideOptions};
use crate::history::{Actor, Change, ChangeKind, ChangedIds, History, UndoData};
use crate::ledger::{has_output, report, Completion, CompletionGuard, Entry, Ledger};
use crate::model::{now, Counts, IdCounter, Item, Status, Timestamp, MAX_NAMED};
use crate::reconcile::{apply, match_items, update, Diff, Matching};
use crate::render;
use crate::tree::{self, Node};
use crate::validate::{
    checked_text, non_blank, parse_request, quote, Input, InvalidInput, Limits, MergeItem,
    ProposedItem, WriteRequest,
};

/// Options the Lisp side passes on every call, so customizations take effect
/// without a separate configuration step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub limits: Limits,
    /// Lists longer than this have their unchanged finished items summarised.
    pub full_list_up_to: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            limits: Limits::default(),
            full_list_up_to: 30,
        }
    }
}

/// Options of the agent loop, passed on every call like `Options`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoopOptions {
    pub breaker: BreakerLimits,
    pub guide: GuideOptions,
    pub auto_complete: bool,
    pub max_result_chars: usize,
}

/// What the last todo_write did, for the breaker to see when the adapter
/// reports that call through `after_tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct WriteEffect {
    completed_any: bool,
    changed_nothing: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Session {
    pub items: Vec<Item>,
    /// Items that left the list, by id, so an id keeps its meaning.
    pub retired: FxHashMap<String, Item>,
    pub ids: IdCounter,
    pub created: Timestamp,
    pub writes: u64,
    pub breaker: Breaker,
    pub ledger: Ledger,
    pub guide: Guide,
    completion: CompletionGuard,
    last_write: Option<WriteEffect>,
    /// Tool names the adapter knows, for auto-completion before they run.
    known_tools: Vec<String>,
    /// The user's edits since the model last wrote the list, phrased for the
    /// model ("the user marked t3 cancelled").
    pub user_notes: Vec<String>,
    /// Every change of the list, for `efrit-todo-history` and undo.
    pub history: History,
    /// The system prompt's part, fixed at its first request: a prompt that
    /// changed between requests would void the prompt cache each time.
    prompt: Option<String>,
    /// How the session stopped with items open, until work goes on.
    pub stopped: Option<Stop>,
    /// The stop this session was resumed from, for its next prompt.
    resumed_from: Option<Stop>,
}

/// A session that stopped with items open: why, when, and what was running.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub reason: String,
    pub at: Timestamp,
    pub running: Option<String>,
}

/// Most characters of a stop reason kept: it goes into a prompt.
pub const MAX_STOP_REASON_CHARS: usize = 300;

fn in_progress(items: &[Item]) -> Option<&Item> {
    items.iter().find(|i| i.status == Status::InProgress)
}

/// An item handed in whole through Efrit's compatibility API.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalItem {
    pub id: Option<String>,
    pub content: String,
    pub status: Status,
    pub priority: Option<String>,
    pub created: Option<Timestamp>,
    pub completed: Option<Timestamp>,
}

/// A change the user makes by hand, in the `*efrit-todos*` buffer.  Each goes
/// through the same checks as the model's writes.
#[derive(Debug, Clone, PartialEq)]
pub enum UserEdit {
    SetStatus {
        id: String,
        status: Status,
    },
    EditContent {
        id: String,
        content: String,
    },
    Add {
        content: String,
    },
    /// Moves an item OFFSET places, clamped to the ends of the list.
    Move {
        id: String,
        offset: i64,
    },
    /// Removes completed and cancelled items (their ids stay retired).
    ClearFinished,
}

pub struct WriteOutcome {
    pub text: String,
    pub diff: Diff,
}

impl Session {
    fn started_now() -> Session {
        Session {
            created: now(),
            ..Session::default()
        }
    }

    pub fn counts(&self) -> Counts {
        Counts::of(&self.items)
    }

    pub fn current(&self) -> Option<&Item> {
        in_progress(&self.items)
    }

    pub fn find(&self, id: &str) -> Option<&Item> {
        self.items.iter().find(|i| i.id == id)
    }

    /// Adds the change from BEFORE to the current list to the history.
    /// IDS default to what the two lists differ in.  Nothing is recorded
    /// when the list did not change.
    fn record(
        &mut self,
        actor: Actor,
        kind: ChangeKind,
        before: Vec<Item>,
        retired_before: Vec<Item>,
        ids: Option<ChangedIds>,
        summary: Option<String>,
    ) {
        let ids = ids.unwrap_or_else(|| ChangedIds::between(&before, &self.items));
        if let Some(undo) = UndoData::between(before, &self.items, retired_before) {
            let summary = summary.unwrap_or_else(|| ids.summary());
            self.history.push(Change {
                undo: Some(undo),
                ..Change::new(actor, kind, now(), summary, ids)
            });
        }
    }

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
        tree::repair(&mut self.items, &[]);
        let ids = ChangedIds::between(&before, &self.items);
        let note = format!(
            "the user undid change {seq} ({} by the {}: {summary}); the list is as it was before it",
            kind.name(),
            actor.name()
        );
        self.history.mark_undone(seq);
        self.history.push(Change {
            undoes: Some(seq),
            ..Change::new(Actor::User, ChangeKind::Undo, now(), note.clone(), ids)
        });
        self.changed(Actor::User, Some(note.clone()));
        Some(note)
    }

    /// Tools whose success may complete an item: the ones the adapter named
    /// and the ones already called, plus EXTRA.
    fn tool_names<'a>(&'a self, extra: Option<&'a str>) -> Vec<&'a str> {
        let mut names: Vec<&str> = self.known_tools.iter().map(String::as_str).collect();
        names.extend(self.ledger.tools());
        names.extend(extra);
        names.sort_unstable();
        names.dedup();
        names
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
        let (diff, show_list) = match parse_request(input, &options.limits)? {
            WriteRequest::Replace(proposed) => self.replace(&proposed)?,
            WriteRequest::Merge(changes) => (self.merge(&changes, &options.limits)?, false),
        };
        self.known_tools = known_tools;
        let auto_tools = if auto_complete {
            self.tool_names(None)
        } else {
            Vec::new()
        };
        let text = render::write_result(
            &self.items,
            &diff,
            show_list,
            options.full_list_up_to,
            &auto_tools,
        );
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
    fn replace(&mut self, proposed: &[ProposedItem]) -> Result<(Diff, bool), InvalidInput> {
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
        self.check_replace_tree(proposed, &matching)?;
        let previous = std::mem::take(&mut self.items);
        let reconciled = apply(
            matching,
            previous,
            &mut self.retired,
            &mut self.ids,
            proposed,
            now(),
        );
        self.items = reconciled.items;
        let diff = reconciled.diff;
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
    fn merge(&mut self, changes: &[MergeItem], limits: &Limits) -> Result<Diff, InvalidInput> {
        enum Target {
            Listed(usize),
            Retired,
            New,
        }
        let mut targets = Vec::with_capacity(changes.len());
        for (i, change) in changes.iter().enumerate() {
            targets.push(match change.id {
                None => Target::New,
                Some(id) => match self.items.iter().position(|item| item.id == id) {
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
        self.check_merge_tree(changes, &listed, &restoring)?;
        // Checked: from here on the write commits.
        let before = self.items.clone();
        let will_be_listed =
            |id: &str| before.iter().any(|item| item.id == id) || restoring.contains(&id);
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
                    if !item.parent.as_deref().is_some_and(will_be_listed) {
                        item.parent = None;
                    }
                    self.items.push(item);
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
                    if item.parent.is_some() {
                        // Placed under its parent once every change is made.
                        subtasks.push(item);
                    } else {
                        self.items.push(item);
                    }
                    continue;
                }
            };
            let item = &mut self.items[index];
            let status = change.status.unwrap_or(item.status);
            let kept_content;
            let content = match change.content {
                Some(content) => content,
                None => {
                    kept_content = item.content.clone();
                    &kept_content
                }
            };
            let kept_parent;
            let parent = match change.parent {
                Some(parent) => parent,
                None => {
                    kept_parent = item.parent.clone();
                    kept_parent.as_deref()
                }
            };
            let wanted = ProposedItem {
                id: change.id,
                content,
                active_form: change.active_form,
                status,
                parent,
            };
            update(item, &wanted, status, at, &mut diff, false);
            if status == Status::InProgress && running.is_none() {
                running = Some(item.id.clone());
            }
        }
        for item in subtasks {
            let parent = self
                .items
                .iter()
                .position(|i| Some(i.id.as_str()) == item.parent.as_deref());
            let end = parent.map_or(self.items.len(), |parent| {
                tree::subtree_end(&self.items, parent)
            });
            self.items.insert(end, item);
        }
        if let Some(running) = running {
            for item in self
                .items
                .iter_mut()
                .filter(|i| i.status == Status::InProgress && i.id != running)
            {
                item.set_status(Status::Pending, at);
                diff.started.retain(|id| *id != item.id);
                diff.demoted.push(item.id.clone());
            }
        }
        if !diff.is_empty() {
            let ids = diff.changed_ids();
            self.record(
                Actor::Model,
                ChangeKind::Write,
                before,
                retired_before,
                Some(ids),
                None,
            );
        }
        Ok(diff)
    }

    /// Whether ID names an item of the list or a retired one.
    fn knows(&self, id: &str) -> bool {
        self.items.iter().any(|item| item.id == id) || self.retired.contains_key(id)
    }

    /// The subtask checks of a whole-list write (see `tree::check`), on
    /// the list MATCHING says it makes.  A list without parents needs none.
    fn check_replace_tree(
        &self,
        proposed: &[ProposedItem],
        matching: &Matching,
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
                    id: was.map(|item| item.id.as_str()).or(wanted.id),
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

    /// Completes the running item when its content names TOOL, which just
    /// succeeded, and starts the next pending one.  Returns the notice.
    fn auto_complete(&mut self, tool: &str) -> Option<String> {
        let running = self
            .items
            .iter()
            .position(|i| i.status == Status::InProgress)?;
        if named_tool(&self.items[running].content, &self.tool_names(Some(tool))) != Some(tool) {
            return None;
        }
        // A parent waits for its subtasks, whatever succeeded.
        if !tree::open_subtasks(&self.items, running).is_empty() {
            return None;
        }
        let before = self.items.clone();
        let at = now();
        self.items[running].set_status(Status::Completed, at);
        let mut notice = format!(
            "[efrit-todo] {} completed automatically: {tool} succeeded while it was in progress.",
            self.items[running].id
        );
        if let Some(next) = self.items.iter_mut().find(|i| i.status == Status::Pending) {
            next.set_status(Status::InProgress, at);
            notice.push_str(&format!(" {} is now in_progress.", next.id));
        }
        self.record(
            Actor::Model,
            ChangeKind::AutoComplete,
            before,
            Vec::new(),
            None,
            None,
        );
        Some(notice)
    }

    /// The breaker's answer before TOOL runs with INPUT: None to go ahead,
    /// or the refusal.  INPUT is looked at only when a refusal is possible.
    pub fn before_tool(
        &mut self,
        tool: &str,
        input: impl FnOnce() -> Input,
        limits: &BreakerLimits,
    ) -> Option<String> {
        if !self.breaker.armed(limits) {
            return None;
        }
        let fingerprint = fingerprint(tool, &input());
        self.breaker.check(tool, fingerprint, limits)
    }

    /// Whether a call could be refused in this session now.
    pub fn breaker_armed(&self, limits: &BreakerLimits) -> bool {
        self.breaker.armed(limits)
    }

    /// Records a finished call.  Returns the text to send back to the model
    /// when it is not RESULT as given (no output named, or notices
    /// appended), and None when RESULT goes back as it is: the usual case,
    /// which then costs no copy of the result.
    pub fn after_tool(
        &mut self,
        tool: &str,
        input: Input,
        result: Option<String>,
        flagged_error: bool,
        duration: Option<f64>,
        options: &LoopOptions,
    ) -> Option<String> {
        // The ledger takes the input over, so its fingerprint is taken first.
        let fingerprint = fingerprint(tool, &input);
        let running = in_progress(&self.items).map(|i| i.id.as_str());
        let as_given = has_output(result.as_deref());
        let entry =
            self.ledger
                .record(tool, input, result, flagged_error, running, now(), duration);
        let error = entry.error;
        // Error texts feed the breaker's repeated-error rule; they are rare,
        // so only they are copied out of the ledger.
        let error_text = error.then(|| entry.result.clone());
        let mut notices = Vec::new();
        let (mut progress, mut changed_nothing) = (false, false);
        if tool == "todo_write" {
            if let Some(effect) = self.last_write.take() {
                progress = effect.completed_any;
                changed_nothing = effect.changed_nothing;
            }
        }
        if options.auto_complete && !error {
            if let Some(notice) = self.auto_complete(tool) {
                progress = true;
                self.guide.note_progress();
                notices.push(notice);
            }
        }
        let call = Call {
            tool,
            fingerprint,
            error: error_text.as_deref(),
            progress,
            unchanged_write: changed_nothing,
        };
        match self.breaker.record(&call, &options.breaker) {
            Verdict::Go => {}
            Verdict::Warn(text) | Verdict::Trip(text) => notices.push(text),
        }
        if !error {
            if let Some(reminder) =
                self.guide
                    .after_call(tool, true, in_progress(&self.items), &options.guide)
            {
                notices.push(reminder);
            }
        }
        if !self.user_notes.is_empty() {
            notices.push(self.take_user_notes());
        }
        if as_given && notices.is_empty() {
            return None;
        }
        // Only here, with something to add, is the recorded result copied.
        let mut text = self
            .ledger
            .entries()
            .last()
            .map_or_else(String::new, |entry| entry.result.clone());
        for notice in notices {
            text.push_str("\n\n");
            text.push_str(&notice);
        }
        Some(text)
    }

    /// The aggregated report: every tool result, the list, the message last.
    pub fn report(&self, message: Option<&str>, options: &LoopOptions) -> String {
        report(
            self.ledger.entries(),
            &self.items,
            message,
            self.guide.pause_reason(),
            options.max_result_chars,
        )
    }

    /// The session_complete guard.
    pub fn complete(&mut self, message: &str, options: &LoopOptions) -> Completion {
        self.completion.complete(
            self.ledger.entries(),
            &self.items,
            message,
            self.guide.pause_reason(),
            options.max_result_chars,
        )
    }

    pub fn entries(&self) -> &[Entry] {
        self.ledger.entries()
    }

    /// Appends one pending item (Efrit's `efrit-todo-add`).
    pub fn add(
        &mut self,
        content: String,
        priority: Option<String>,
        options: &Options,
    ) -> Result<Item, InvalidInput> {
        let before = self.items.clone();
        let item = self.push_item(content, priority, options)?;
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
        options: &Options,
    ) -> Result<Item, InvalidInput> {
        if self.items.len() >= options.limits.max_items {
            return Err(InvalidInput::new(
                "todos",
                format!(
                    "already has {} items; the limit is {}",
                    self.items.len(),
                    options.limits.max_items
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
        options: &Options,
    ) -> Result<(), InvalidInput> {
        if external.len() > options.limits.max_items {
            return Err(InvalidInput::new(
                "todos",
                format!(
                    "has {} items; the limit is {}",
                    external.len(),
                    options.limits.max_items
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
        // Efrit's API has no parents: an item it hands back keeps its own.
        let parents: FxHashMap<&str, &str> = self
            .items
            .iter()
            .filter_map(|item| item.parent.as_deref().map(|p| (item.id.as_str(), p)))
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
                item.parent = parents.get(item.id.as_str()).map(|p| p.to_string());
                item
            })
            .collect();
        tree::repair(&mut items, &[]);
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
    pub fn user_edit(&mut self, edit: UserEdit, options: &Options) -> Result<String, InvalidInput> {
        let position = |items: &[Item], id: &str| {
            items.iter().position(|i| i.id == id).ok_or_else(|| {
                InvalidInput::new("id", format!("no item {} in this list", quote(id)))
            })
        };
        let at = now();
        let before = self.items.clone();
        let kind = match &edit {
            UserEdit::SetStatus { .. } => ChangeKind::Status,
            UserEdit::EditContent { .. } => ChangeKind::Edit,
            UserEdit::Add { .. } => ChangeKind::Add,
            UserEdit::Move { .. } => ChangeKind::Move,
            UserEdit::ClearFinished => ChangeKind::ClearFinished,
        };
        let note = match edit {
            UserEdit::SetStatus { id, status } => {
                let index = position(&self.items, &id)?;
                self.check_user_status(index, status)?;
                if status == Status::InProgress {
                    // One running item: the one the user picked.
                    for other in self
                        .items
                        .iter_mut()
                        .filter(|i| i.status == Status::InProgress)
                    {
                        other.set_status(Status::Pending, at);
                    }
                }
                self.items[index].set_status(status, at);
                if status == Status::Completed {
                    self.guide.note_progress();
                }
                format!("the user marked {id} {}", status.wire_name())
            }
            UserEdit::EditContent { id, content } => {
                let index = position(&self.items, &id)?;
                let content = checked_text(
                    &Input::Str(content),
                    "content",
                    options.limits.max_content_chars,
                )
                .and_then(|t| non_blank(t, "content"))?;
                let item = &mut self.items[index];
                if item.active_form == item.content {
                    item.active_form = content.clone();
                }
                item.content = content;
                format!("the user reworded {id} to {}", quote(&item.content))
            }
            UserEdit::Add { content } => {
                let content = checked_text(
                    &Input::Str(content),
                    "content",
                    options.limits.max_content_chars,
                )
                .and_then(|t| non_blank(t, "content"))?;
                let item = self.push_item(content, None, options)?;
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
                    self.retired.insert(item.id.clone(), item);
                }
                if ids.is_empty() {
                    return Ok(String::new());
                }
                let mut note = format!(
                    "the user removed the finished items {} from the list",
                    ids.join(", ")
                );
                if !moved_up.is_empty() {
                    note.push_str(&format!(
                        " (their unfinished subtasks {} moved up a level)",
                        moved_up.join(", ")
                    ));
                }
                note
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

    /// Every change of the list passes here once it is committed.  The
    /// user's edits wait for the next tool result, which tells the model.
    fn changed(&mut self, actor: Actor, user_note: Option<String>) {
        if actor == Actor::User {
            self.user_notes.extend(user_note);
        }
    }

    /// The user's edits since the model was last told, as one notice for a
    /// tool result; they are then forgotten.  The newest MAX_NAMED are named.
    pub fn take_user_notes(&mut self) -> String {
        let notes = std::mem::take(&mut self.user_notes);
        let skipped = notes.len().saturating_sub(MAX_NAMED);
        let mut text = String::from("[efrit-todo] The user changed the list: ");
        if skipped > 0 {
            text.push_str(&format!("{skipped} earlier edits; "));
        }
        text.push_str(&notes[skipped..].join("; "));
        text.push('.');
        text
    }

    /// The system prompt's part for this session: the guidance and the list
    /// as it stood at the first call, the same text on every later call.
    /// After a resume it first says why the previous command stopped.
    pub fn prompt_guidance(&mut self, full_up_to: usize) -> &str {
        let (items, resumed) = (&self.items, &self.resumed_from);
        self.prompt.get_or_insert_with(|| match resumed {
            Some(stop) => {
                render::resume_guidance(items, &stop.reason, stop.running.as_deref(), full_up_to)
            }
            None => render::prompt_guidance(items, full_up_to),
        })
    }

    /// The session's command stopped for REASON.  With items open, the stop
    /// is kept (until `resume` or `forget_stop`), marked in the history and
    /// the ledger, and true returned; without, nothing happens.
    pub fn stop(&mut self, reason: &str) -> Result<bool, InvalidInput> {
        let reason = checked_text(
            &Input::Str(reason.trim().to_string()),
            "reason",
            MAX_STOP_REASON_CHARS,
        )
        .and_then(|t| non_blank(t, "reason"))?;
        if !self.items.iter().any(|i| i.status.is_open()) {
            self.stopped = None;
            return Ok(false);
        }
        let running = self.current().map(|i| i.id.clone());
        let at = now();
        let mut summary = String::from("stopped");
        if let Some(id) = &running {
            summary.push_str(" while ");
            summary.push_str(id);
            summary.push_str(" was in progress");
        }
        summary.push_str(": ");
        summary.push_str(&reason);
        let text = format!(
            "[efrit-todo] The session {summary}. Left open: {}",
            open_items(&self.items)
        );
        self.ledger.record(
            "session_stopped",
            Input::Null,
            Some(text),
            false,
            running.as_deref(),
            at,
            None,
        );
        self.history.push(Change::new(
            Actor::Model,
            ChangeKind::Stop,
            at,
            summary,
            ChangedIds::default(),
        ));
        self.stopped = Some(Stop {
            reason,
            at,
            running,
        });
        Ok(true)
    }

    /// A new command takes this stopped session over: its list, ids,
    /// history and ledger stay; breaker, guide and the completion guard
    /// start afresh, and the next prompt says why the last command stopped.
    pub fn resume(&mut self) {
        self.resumed_from = self.stopped.take();
        self.breaker = Breaker::default();
        self.guide = Guide::default();
        self.completion = CompletionGuard::default();
        self.last_write = None;
        self.prompt = None;
    }

    /// The user chose not to go on with this stopped list: it stays, but no
    /// command will take it over.
    pub fn forget_stop(&mut self) -> bool {
        self.stopped.take().is_some()
    }

    /// A new turn of a conversation that keeps its list (Efrit's REPL):
    /// breaker, ledger, guide and completion start over, the list and ids stay.
    pub fn begin_turn(&mut self) {
        self.breaker = Breaker::default();
        self.ledger = Ledger::default();
        self.guide = Guide::default();
        self.completion = CompletionGuard::default();
        self.last_write = None;
    }

    /// Reserves a fresh id without adding an item.
    pub fn allocate_id(&mut self) -> String {
        self.ids.issue()
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

#[derive(Debug, Default)]
pub struct Registry {
    /// In creation order, so listings are stable.
    sessions: Vec<(String, Session)>,
    /// Where each session is in `sessions`.  Looked up twice on every tool
    /// call, hence FxHash and no copy of the name to look it up.
    index: FxHashMap<String, usize>,
}

impl Registry {
    pub fn get(&self, name: &str) -> Option<&Session> {
        self.index.get(name).map(|&at| &self.sessions[at].1)
    }

    pub fn session(&mut self, name: &str) -> &mut Session {
        let at = match self.index.get(name) {
            Some(&at) => at,
            None => self.add(name, Session::started_now()),
        };
        &mut self.sessions[at].1
    }

    fn add(&mut self, name: &str, session: Session) -> usize {
        let at = self.sessions.len();
        self.sessions.push((name.to_string(), session));
        self.index.insert(name.to_string(), at);
        at
    }

    /// The session that stopped last with items still open, and its stop.
    pub fn unfinished(&self) -> Option<(&str, &Stop)> {
        self.all_unfinished().into_iter().next()
    }

    /// Every session that stopped with items open, the latest stop first;
    /// of two stopped at the same instant, the one made later.
    pub fn all_unfinished(&self) -> Vec<(&str, &Stop)> {
        let mut stopped: Vec<(&str, &Stop)> = self
            .sessions
            .iter()
            .rev()
            .filter_map(|(name, session)| {
                let stop = session.stopped.as_ref()?;
                session
                    .items
                    .iter()
                    .any(|i| i.status.is_open())
                    .then_some((name.as_str(), stop))
            })
            .collect();
        stopped.sort_by(|a, b| b.1.at.total_cmp(&a.1.at));
        stopped
    }

    /// Whether a call could be refused in some session now.
    pub fn any_armed(&self, limits: &BreakerLimits) -> bool {
        self.sessions
            .iter()
            .any(|(_, session)| session.breaker.armed(limits))
    }

    pub fn names(&self) -> Vec<String> {
        self.sessions.iter().map(|(name, _)| name.clone()).collect()
    }

    /// Forgets everything about a session except the ids it issued and its
    /// history, where the reset is recorded (and can be undone).
    pub fn reset(&mut self, name: &str) {
        if let Some(&at) = self.index.get(name) {
            let session = &mut self.sessions[at].1;
            let ids = session.ids.clone();
            let history = std::mem::take(&mut session.history);
            let before = std::mem::take(&mut session.items);
            *session = Session {
                ids,
                history,
                ..Session::started_now()
            };
            session.record(
                Actor::User,
                ChangeKind::Reset,
                before,
                Vec::new(),
                None,
                None,
            );
        }
    }

    /// Puts a session read back from disk in place of NAME.
    pub fn install(&mut self, name: &str, session: Session) {
        match self.index.get(name) {
            Some(&at) => self.sessions[at].1 = session,
            None => {
                self.add(name, session);
            }
        }
    }
}

static REGISTRY: Lazy<Mutex<Registry>> = Lazy::new(|| Mutex::new(Registry::default()));

/// The process-wide registry.  A panic while it was held (caught and turned
/// into a Lisp error) must not make every later call fail, so poisoning is
/// ignored: operations commit only after they can no longer fail.
pub fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A session name from a caller: non-empty, printable.
pub fn check_session_name(name: &str) -> Result<(), InvalidInput> {
    if name.trim().is_empty() || name.contains('\0') || name.chars().count() > 200 {
        Err(InvalidInput::new(
            "session",
            "expected a non-empty name of at most 200 characters without NUL",
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: serde_json::Value) -> Input {
        Input::from_json(&v)
    }

    /// A todo_write of V with the default options.
    fn write_json(s: &mut Session, v: serde_json::Value) -> Result<WriteOutcome, InvalidInput> {
        s.write(&input(v), &Options::default(), false, vec![])
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let mut s = Session::started_now();
        let options = Options::default();
        write_json(
            &mut s,
            json!({"todos": [{"content": "a", "status": "in_progress"}]}),
        )
        .unwrap();
        write_json(
            &mut s,
            json!({"todos": [{"content": "b", "status": "in_progress"}]}),
        )
        .unwrap();
        let before = (s.items.clone(), s.ids.clone(), s.writes, s.retired.clone());
        let bad = json!({"todos": [{"content": "new", "status": "pending"}, {"content": "b", "status": "done"}]});
        assert!(s.write(&input(bad), &options, false, vec![]).is_err());
        let unknown = json!({"todos": [{"content": "new", "status": "pending"}, {"id": "t77", "content": "b", "status": "pending"}]});
        assert!(s.write(&input(unknown), &options, false, vec![]).is_err());
        assert_eq!(
            (s.items.clone(), s.ids.clone(), s.writes, s.retired.clone()),
            before
        );
    }

    #[test]
    fn reset_keeps_ids_retired() {
        let mut r = Registry::default();
        let options = Options::default();
        write_json(
            r.session("a"),
            json!({"todos": [{"content": "x", "status": "pending"}]}),
        )
        .unwrap();
        r.reset("a");
        assert!(r.get("a").unwrap().items.is_empty());
        let out = r
            .session("a")
            .write(
                &input(json!({"todos": [{"content": "x", "status": "pending"}]})),
                &options,
                false,
                vec![],
            )
            .unwrap();
        assert!(out.text.contains("t2 [pending] x"));
        assert_eq!(r.names(), ["a"]);
    }

    #[test]
    fn sessions_are_independent() {
        let mut r = Registry::default();
        write_json(
            r.session("a"),
            json!({"todos": [{"content": "x", "status": "pending"}]}),
        )
        .unwrap();
        write_json(
            r.session("b"),
            json!({"todos": [{"content": "y", "status": "pending"}]}),
        )
        .unwrap();
        assert_eq!(r.get("b").unwrap().items[0].id, "t1");
        assert_eq!(r.names(), ["a", "b"]);
    }

    #[test]
    fn set_all_adopts_ids_and_never_reissues_them() {
        let mut s = Session::started_now();
        let options = Options::default();
        let ext = |id: &str| ExternalItem {
            id: Some(id.into()),
            content: "c".into(),
            status: Status::Completed,
            priority: Some("high".into()),
            created: None,
            completed: None,
        };
        s.set_all(vec![ext("t5"), ext("todo-1")], &options).unwrap();
        assert!(s.items[0].completed.is_some());
        assert_eq!(s.add("next".into(), None, &options).unwrap().id, "t6");
    }

    #[test]
    fn add_respects_the_item_limit() {
        let mut s = Session::started_now();
        let options = Options {
            limits: Limits {
                max_items: 1,
                max_content_chars: 10,
            },
            ..Options::default()
        };
        s.add("one".into(), None, &options).unwrap();
        assert_eq!(
            s.add("two".into(), None, &options).unwrap_err().path,
            "todos"
        );
    }

    fn edit_session() -> Session {
        let mut s = Session::started_now();
        let todos = json!({"todos": [
            {"content": "a", "status": "in_progress"},
            {"content": "b", "status": "pending"},
            {"content": "c", "status": "completed"}]});
        s.write(&input(todos), &Options::default(), false, vec![])
            .unwrap();
        s
    }

    #[test]
    fn user_edits_are_noted_for_the_model_until_it_writes_again() {
        let mut s = edit_session();
        let options = Options::default();
        let note = s
            .user_edit(
                UserEdit::SetStatus {
                    id: "t2".into(),
                    status: Status::InProgress,
                },
                &options,
            )
            .unwrap();
        assert_eq!(note, "the user marked t2 in_progress");
        assert_eq!(s.current().map(|i| i.id.as_str()), Some("t2"));
        assert_eq!(s.find("t1").unwrap().status, Status::Pending);
        s.user_edit(
            UserEdit::EditContent {
                id: "t1".into(),
                content: "A better".into(),
            },
            &options,
        )
        .unwrap();
        assert_eq!(s.find("t1").unwrap().active_form, "A better");
        s.user_edit(
            UserEdit::Move {
                id: "t3".into(),
                offset: -10,
            },
            &options,
        )
        .unwrap();
        assert_eq!(s.items[0].id, "t3");
        s.user_edit(
            UserEdit::Add {
                content: "d".into(),
            },
            &options,
        )
        .unwrap();
        assert_eq!(s.items.last().unwrap().id, "t4");
        assert!(s
            .user_edit(UserEdit::ClearFinished, &options)
            .unwrap()
            .contains("t3"));
        assert_eq!(s.items.len(), 3);
        assert_eq!(s.user_notes.len(), 5);
        let todos = json!({"todos": [{"id": "t1", "content": "A better", "status": "pending"}]});
        s.write(&input(todos), &options, false, vec![]).unwrap();
        assert_eq!(
            s.user_notes.len(),
            5,
            "a write alone does not tell the model"
        );
        let told = s.after_tool(
            "todo_write",
            Input::Null,
            Some("ok".into()),
            false,
            None,
            &LoopOptions::default(),
        );
        let told = told.unwrap_or_default();
        assert!(
            told.starts_with(
                "ok\n\n[efrit-todo] The user changed the list: the user marked t2 in_progress; "
            ),
            "{told}"
        );
        assert!(s.user_notes.is_empty());
        assert_eq!(
            s.after_tool(
                "eval_sexp",
                Input::Null,
                Some("1".into()),
                false,
                None,
                &LoopOptions::default()
            ),
            None
        );
    }

    fn plan(n: usize) -> Session {
        let mut s = Session::started_now();
        let todos: Vec<serde_json::Value> = (0..n)
            .map(|k| json!({"content": format!("Step {k}"), "status": if k == 0 { "in_progress" } else { "pending" }}))
            .collect();
        s.write(
            &input(json!({ "todos": todos })),
            &Options::default(),
            false,
            vec![],
        )
        .unwrap();
        s
    }

    fn merge(s: &mut Session, todos: serde_json::Value) -> Result<String, InvalidInput> {
        s.write(
            &input(json!({"merge": true, "todos": todos})),
            &Options::default(),
            false,
            vec![],
        )
        .map(|o| o.text)
    }

    fn statuses(s: &Session) -> Vec<(&str, Status)> {
        s.items.iter().map(|i| (i.id.as_str(), i.status)).collect()
    }

    #[test]
    fn a_merge_changes_only_what_it_names() {
        let mut s = plan(4);
        let text = merge(
            &mut s,
            json!([{"id": "t1", "status": "completed"}, {"id": "t2", "status": "in_progress"}]),
        )
        .unwrap();
        use Status::*;
        assert_eq!(
            statuses(&s),
            vec![
                ("t1", Completed),
                ("t2", InProgress),
                ("t3", Pending),
                ("t4", Pending)
            ]
        );
        assert!(
            text.ends_with("\nt1 completed: Step 0\nt2 in_progress: Step 1"),
            "{text}"
        );
        assert!(
            !text.contains("t3"),
            "unchanged items are not repeated: {text}"
        );
        merge(
            &mut s,
            json!([{"id": "t3", "content": "Step three, reworded"}, {"content": "Step 5"}]),
        )
        .unwrap();
        assert_eq!(s.find("t3").unwrap().content, "Step three, reworded");
        assert_eq!(s.find("t3").unwrap().status, Pending);
        assert_eq!(
            s.items
                .last()
                .map(|i| (i.id.as_str(), i.status, i.content.as_str())),
            Some(("t5", Pending, "Step 5"))
        );
        assert_eq!(s.items.len(), 5);
    }

    #[test]
    fn the_item_a_merge_starts_wins_over_the_running_one() {
        let mut s = plan(3);
        let text = merge(&mut s, json!([{"id": "t3", "status": "in_progress"}])).unwrap();
        assert_eq!(s.current().map(|i| i.id.as_str()), Some("t3"));
        assert_eq!(s.find("t1").unwrap().status, Status::Pending);
        assert!(
            text.contains("t3 stays in progress, t1 set back to pending"),
            "{text}"
        );
        // Two started in one merge: the first one named runs.
        merge(
            &mut s,
            json!([{"id": "t2", "status": "in_progress"}, {"id": "t1", "status": "in_progress"}]),
        )
        .unwrap();
        assert_eq!(s.current().map(|i| i.id.as_str()), Some("t2"));
        assert_eq!(
            s.items
                .iter()
                .filter(|i| i.status == Status::InProgress)
                .count(),
            1
        );
    }

    #[test]
    fn a_bad_merge_changes_nothing() {
        let mut s = plan(3);
        let before = (s.items.clone(), s.ids.clone(), s.history.len(), s.writes);
        let unknown = merge(
            &mut s,
            json!([{"id": "t1", "status": "completed"}, {"id": "t9", "status": "completed"}]),
        );
        assert_eq!(unknown.unwrap_err().to_string(), "todos[1].id: unknown id \"t9\": use an id from an earlier todo_write result, or omit id to add an item");
        let limits = Options {
            limits: Limits {
                max_items: 3,
                max_content_chars: 100,
            },
            ..Options::default()
        };
        let full = s.write(
            &input(json!({"merge": true, "todos": [{"content": "one more"}]})),
            &limits,
            false,
            vec![],
        );
        assert_eq!(full.err().map(|e| e.path), Some("todos".to_string()));
        assert_eq!(
            (s.items.clone(), s.ids.clone(), s.history.len(), s.writes),
            before
        );
    }

    #[test]
    fn a_merge_can_bring_back_a_retired_item_and_be_undone() {
        let mut s = plan(2);
        s.write(
            &input(json!({"todos": [{"id": "t1", "content": "Step 0", "status": "in_progress"}]})),
            &Options::default(),
            false,
            vec![],
        )
        .unwrap();
        assert!(s.find("t2").is_none());
        merge(&mut s, json!([{"id": "t2", "status": "pending"}])).unwrap();
        assert_eq!(s.find("t2").map(|i| i.content.as_str()), Some("Step 1"));
        merge(&mut s, json!([{"id": "t1", "status": "completed"}])).unwrap();
        assert_eq!(s.find("t1").unwrap().status, Status::Completed);
        assert!(s.undo().is_some());
        assert_eq!(s.find("t1").unwrap().status, Status::InProgress);
        assert!(s.undo().is_some());
        assert!(
            s.find("t2").is_none(),
            "undoing the restore retires t2 again"
        );
    }

    #[test]
    fn a_merge_that_changes_nothing_counts_as_an_unchanged_write() {
        let mut s = plan(2);
        let history = s.history.len();
        let text = merge(&mut s, json!([{"id": "t1", "status": "in_progress"}])).unwrap();
        assert!(text.contains("No change"), "{text}");
        assert_eq!(s.history.len(), history);
        assert_eq!(s.last_write.map(|w| w.changed_nothing), Some(true));
    }

    #[test]
    fn the_prompt_part_is_fixed_at_its_first_call() {
        let mut s = plan(2);
        let first = s.prompt_guidance(30).to_string();
        assert!(first.contains("t1 [in_progress] Step 0"), "{first}");
        merge(
            &mut s,
            json!([{"id": "t1", "status": "completed"}, {"id": "t2", "status": "in_progress"}]),
        )
        .unwrap();
        assert_eq!(s.prompt_guidance(30), first);
    }

    #[test]
    fn an_edit_that_changes_nothing_tells_nobody() {
        let mut s = edit_session();
        let history = s.history.len();
        let note = s.user_edit(
            UserEdit::SetStatus {
                id: "t3".into(),
                status: Status::Completed,
            },
            &Options::default(),
        );
        assert_eq!(note.unwrap(), "");
        assert!(s.user_notes.is_empty());
        assert_eq!(s.history.len(), history);
    }

    #[test]
    fn a_new_active_form_alone_is_a_change() {
        let mut s = plan(2);
        let text = merge(
            &mut s,
            json!([{"id": "t1", "activeForm": "Doing step zero"}]),
        )
        .unwrap();
        assert!(text.contains("t1 in_progress: Doing step zero"), "{text}");
        assert!(s.undo().is_some());
        assert_eq!(s.find("t1").unwrap().active_form, "Step 0");
    }

    #[test]
    fn a_stop_with_items_open_is_kept_until_a_resume() {
        let mut s = plan(3);
        merge(
            &mut s,
            json!([{"id": "t1", "status": "completed"}, {"id": "t2", "status": "in_progress"}]),
        )
        .unwrap();
        let prompt_before = s.prompt_guidance(30).to_string();
        assert!(s.stop("interrupted by the user").unwrap());
        let stop = s.stopped.clone().unwrap();
        assert_eq!(
            (stop.reason.as_str(), stop.running.as_deref()),
            ("interrupted by the user", Some("t2"))
        );
        let last = s.history.changes().last().unwrap();
        assert_eq!(
            (last.kind, last.summary.as_str()),
            (
                ChangeKind::Stop,
                "stopped while t2 was in progress: interrupted by the user"
            )
        );
        let entry = s.entries().last().unwrap();
        assert_eq!(entry.tool, "session_stopped");
        assert!(
            entry
                .result
                .contains("Left open: t2 [in_progress] Step 1; t3 [pending] Step 2"),
            "{}",
            entry.result
        );
        // The mark is no change of the list: the write before it can be undone.
        assert!(s.undo().unwrap().contains("write by the model"));
        assert!(s.stopped.is_some());
        s.resume();
        assert!(s.stopped.is_none());
        let prompt = s.prompt_guidance(30).to_string();
        assert_ne!(prompt, prompt_before);
        assert!(
            prompt.starts_with(
                "THE PREVIOUS COMMAND STOPPED while t2 was in progress (interrupted by the user)"
            ),
            "{prompt}"
        );
        assert_eq!(
            s.prompt_guidance(30),
            prompt,
            "fixed again for the new command"
        );
        assert_eq!(s.entries().len(), 1, "the ledger is kept");
    }

    #[test]
    fn a_stop_with_nothing_open_is_no_stop() {
        let mut s = plan(1);
        merge(&mut s, json!([{"id": "t1", "status": "completed"}])).unwrap();
        assert!(!s.stop("end_turn").unwrap());
        assert!(s.stopped.is_none());
        assert_eq!(s.stop("  ").unwrap_err().path, "reason");
    }

    #[test]
    fn the_registry_finds_the_newest_unfinished_session() {
        let mut registry = Registry::default();
        assert!(registry.unfinished().is_none());
        *registry.session("old") = plan(2);
        registry.session("old").stop("api-error").unwrap();
        *registry.session("new") = plan(2);
        registry.session("new").stop("interrupted").unwrap();
        registry.session("done").stop("interrupted").unwrap();
        assert_eq!(registry.unfinished().map(|(name, _)| name), Some("new"));
        let names: Vec<&str> = registry
            .all_unfinished()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["new", "old"]);
        assert!(registry.session("new").forget_stop());
        assert_eq!(
            registry
                .unfinished()
                .map(|(name, stop)| (name, stop.reason.as_str())),
            Some(("old", "api-error"))
        );
    }

    #[test]
    fn bad_user_edits_change_nothing() {
        let mut s = edit_session();
        let before = (s.items.clone(), s.user_notes.clone(), s.ids.clone());
        let options = Options::default();
        let unknown = s.user_edit(
            UserEdit::SetStatus {
                id: "t9".into(),
                status: Status::Completed,
            },
            &options,
        );
        assert_eq!(unknown.unwrap_err().path, "id");
        let blank = s.user_edit(
            UserEdit::EditContent {
                id: "t1".into(),
                content: "  ".into(),
            },
            &options,
        );
        assert_eq!(blank.unwrap_err().path, "content");
        assert_eq!(
            s.user_edit(
                UserEdit::Add {
                    content: String::new()
                },
                &options
            )
            .unwrap_err()
            .path,
            "content"
        );
        assert_eq!(
            (s.items.clone(), s.user_notes.clone(), s.ids.clone()),
            before
        );
    }

    #[test]
    fn after_tool_returns_text_only_when_it_is_not_the_result_as_given() {
        let mut s = edit_session();
        let options = LoopOptions {
            guide: GuideOptions {
                reminders: false,
                ..GuideOptions::default()
            },
            ..LoopOptions::default()
        };
        let mut call = |n: i64, result: Option<&str>| {
            s.after_tool(
                "eval_sexp",
                Input::Int(n),
                result.map(String::from),
                false,
                None,
                &options,
            )
        };
        assert_eq!(call(1, Some("42")), None);
        assert_eq!(
            call(2, None).as_deref(),
            Some("eval_sexp returned no output")
        );
        assert_eq!(
            call(3, Some(" \n")).as_deref(),
            Some("eval_sexp returned no output")
        );
        assert_eq!(call(3, Some("42")), None);
        // A third identical call in a row brings the breaker's warning.
        let reply = call(3, Some("42")).unwrap_or_default();
        assert!(reply.starts_with("42\n\nWarning: "), "{reply}");
        assert_eq!(s.entries().last().map(|e| e.result.as_str()), Some("42"));
    }

    #[test]
    fn a_new_turn_keeps_the_list_and_forgets_the_calls() {
        let mut s = edit_session();
        let options = LoopOptions::default();
        s.after_tool(
            "eval_sexp",
            Input::Str("(+ 1 1)".into()),
            Some("42".into()),
            false,
            None,
            &options,
        );
        s.begin_turn();
        assert!(s.entries().is_empty());
        assert_eq!(s.items.len(), 3);
        assert_eq!(
            s.add("next".into(), None, &Options::default()).unwrap().id,
            "t4"
        );
    }
}

#[cfg(test)]
mod subtask_tests {
    use super::*;
    use serde_json::{json, Value as Json};

    fn write(s: &mut Session, todos: Json) -> Result<String, InvalidInput> {
        s.write(
            &Input::from_json(&json!({ "todos": todos })),
            &Options::default(),
            false,
            vec![],
        )
        .map(|o| o.text)
    }

    fn merge(s: &mut Session, todos: Json) -> Result<String, InvalidInput> {
        s.write(
            &Input::from_json(&json!({"merge": true, "todos": todos})),
            &Options::default(),
            false,
            vec![],
        )
        .map(|o| o.text)
    }

    /// t1 "Ship it" in progress with subtasks t4 "Build" and t5 "Test",
    /// then t2 "Write docs" and t3 "Tag" pending.
    fn shipping() -> Session {
        let mut s = Session::started_now();
        write(
            &mut s,
            json!([
            {"content": "Ship it", "status": "in_progress"},
            {"content": "Write docs", "status": "pending"},
            {"content": "Tag", "status": "pending"}]),
        )
        .unwrap();
        merge(
            &mut s,
            json!([{"content": "Build", "parent": "t1"}, {"content": "Test", "parent": "t1"}]),
        )
        .unwrap();
        s
    }

    fn parents(s: &Session) -> Vec<(&str, Option<&str>)> {
        s.items
            .iter()
            .map(|i| (i.id.as_str(), i.parent.as_deref()))
            .collect()
    }

    /// Everything a refused write must leave as it was.
    fn state(s: &Session) -> (Vec<Item>, u64, usize, u64, usize) {
        (
            s.items.clone(),
            s.ids.issued(),
            s.history.len(),
            s.writes,
            s.retired.len(),
        )
    }

    #[test]
    fn merged_subtasks_go_under_their_parent_and_show_as_a_tree() {
        let mut s = Session::started_now();
        write(
            &mut s,
            json!([
            {"content": "Ship it", "status": "in_progress"},
            {"content": "Write docs", "status": "pending"},
            {"content": "Tag", "status": "pending"}]),
        )
        .unwrap();
        let text = merge(
            &mut s,
            json!([{"content": "Build", "parent": "t1"}, {"content": "Test", "parent": "t1"}]),
        )
        .unwrap();
        assert_eq!(
            text,
            "[TODO list updated: 0/5 done]\nt4 pending: Build (under t1)\nt5 pending: Test (under t1)\nNext: work on t1; mark it completed when it is done."
        );
        assert_eq!(
            parents(&s),
            [
                ("t1", None),
                ("t4", Some("t1")),
                ("t5", Some("t1")),
                ("t2", None),
                ("t3", None)
            ]
        );
        // A subtask of a subtask goes after its parent's own subtasks.
        merge(&mut s, json!([{"content": "Lint", "parent": "t4"}])).unwrap();
        assert_eq!(
            s.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
            ["t1", "t4", "t6", "t5", "t2", "t3"]
        );
        assert_eq!(
            s.prompt_guidance(30),
            format!(
                "TODO LIST when this session started (0/6 done, 1 in progress, 5 pending):\n  t1 [in_progress] Ship it\n    t4 [pending] Build\n      t6 [pending] Lint\n    t5 [pending] Test\n  t2 [pending] Write docs\n  t3 [pending] Tag\nNext: work on t1; mark it completed when it is done.\n{}",
                render::GUIDANCE
            )
        );
    }

    #[test]
    fn a_whole_list_gives_every_parent_and_shows_a_child_away_from_its_parent() {
        let mut s = shipping();
        // Sent in another order, t5 no longer stands under t1.
        let text = write(
            &mut s,
            json!([
            {"id": "t1", "content": "Ship it", "status": "in_progress"},
            {"id": "t4", "content": "Build", "status": "pending", "parent": "t1"},
            {"id": "t2", "content": "Write docs", "status": "pending"},
            {"id": "t5", "content": "Test", "status": "pending", "parent": "t1"},
            {"id": "t3", "content": "Tag", "status": "pending", "parent": ""},
            {"content": "Announce", "status": "pending", "parent": "t2"}]),
        )
        .unwrap();
        assert_eq!(
            text,
            "[TODO list updated: 0/6 done]\nReordered: the items keep their ids, in this order:\n  t1 [in_progress] Ship it\n    t4 [pending] Build\n  t2 [pending] Write docs\n    t5 [pending] Test (under t1)\n  t3 [pending] Tag\n    t6 [pending] Announce (under t2)\nNext: work on t1."
        );
        // Without parents, a whole list is a flat list again.
        let text = write(
            &mut s,
            json!([
            {"id": "t1", "content": "Ship it", "status": "in_progress"},
            {"id": "t4", "content": "Build", "status": "pending"},
            {"id": "t2", "content": "Write docs", "status": "pending"},
            {"id": "t5", "content": "Test", "status": "pending"},
            {"id": "t3", "content": "Tag", "status": "pending"},
            {"id": "t6", "content": "Announce", "status": "pending"}]),
        )
        .unwrap();
        assert_eq!(
            text,
            "[TODO list updated: 0/6 done]\nt4 pending: Build (now top-level)\nt5 pending: Test (now top-level)\nt6 pending: Announce (now top-level)\nNext: work on t1; mark it completed when it is done."
        );
        assert!(!tree::any_parent(&s.items));
    }

    #[test]
    fn a_parent_cannot_be_completed_before_its_subtasks() {
        let mut s = shipping();
        let before = state(&s);
        let refused = merge(
            &mut s,
            json!([{"id": "t4", "status": "completed"}, {"id": "t1", "status": "completed"}]),
        );
        assert_eq!(
            refused.unwrap_err().to_string(),
            "todos[1].status: t1 cannot be completed while its subtask t5 is unfinished; complete or cancel it first"
        );
        assert_eq!(state(&s), before);
        let whole = write(
            &mut s,
            json!([
            {"id": "t1", "content": "Ship it", "status": "completed"},
            {"id": "t4", "content": "Build", "status": "pending", "parent": "t1"},
            {"id": "t5", "content": "Test", "status": "in_progress", "parent": "t1"},
            {"id": "t2", "content": "Write docs", "status": "pending"},
            {"id": "t3", "content": "Tag", "status": "pending"}]),
        );
        assert_eq!(
            whole.unwrap_err().to_string(),
            "todos[0].status: t1 cannot be completed while its subtasks t4, t5 are unfinished; complete or cancel them first"
        );
        assert_eq!(state(&s), before);
        // Completing the subtasks one by one: the last one says t1 can close.
        let text = merge(&mut s, json!([{"id": "t4", "status": "completed"}])).unwrap();
        assert!(!text.contains("no unfinished subtasks"), "{text}");
        let text = merge(&mut s, json!([{"id": "t5", "status": "cancelled"}])).unwrap();
        assert_eq!(
            text,
            "[TODO list updated: 1/5 done, 1 cancelled]\nt5 cancelled: Test (under t1)\nt1 (Ship it) has no unfinished subtasks left: mark it completed when it is done.\nNext: work on t1; mark it completed when it is done."
        );
        let text = merge(
            &mut s,
            json!([{"id": "t1", "status": "completed"}, {"id": "t2", "status": "in_progress"}]),
        )
        .unwrap();
        assert!(
            text.starts_with("[TODO list updated: 2/5 done, 1 cancelled]\nt1 completed: Ship it\n"),
            "{text}"
        );
    }

    #[test]
    fn cancelling_a_parent_with_open_subtasks_is_allowed_with_a_warning() {
        let mut s = shipping();
        let text = merge(&mut s, json!([{"id": "t1", "status": "cancelled"}])).unwrap();
        assert!(
            text.contains("\nWarning: t1 was cancelled with unfinished subtasks t4, t5: cancel them too, or finish them.\n"),
            "{text}"
        );
        assert_eq!(s.find("t1").unwrap().status, Status::Cancelled);
    }

    #[test]
    fn no_unfinished_subtask_goes_under_a_completed_item() {
        let mut s = shipping();
        merge(
            &mut s,
            json!([{"id": "t4", "status": "completed"}, {"id": "t5", "status": "completed"}]),
        )
        .unwrap();
        merge(&mut s, json!([{"id": "t1", "status": "completed"}])).unwrap();
        let before = state(&s);
        let added = merge(
            &mut s,
            json!([{"content": "Fix the build", "parent": "t1"}]),
        );
        assert_eq!(
            added.unwrap_err().to_string(),
            "todos[0].parent: t1 is completed and cannot have unfinished subtasks (the new item); reopen t1 (in_progress or pending) in the same write, or choose another parent"
        );
        let reopened = merge(&mut s, json!([{"id": "t4", "status": "pending"}]));
        assert_eq!(
            reopened.unwrap_err().to_string(),
            "todos[0].status: t4 is a subtask of t1, which is completed; reopen t1 (in_progress or pending) in the same write, or leave t4 finished"
        );
        let moved = merge(&mut s, json!([{"id": "t3", "parent": "t1"}]));
        assert!(moved.unwrap_err().to_string().starts_with(
            "todos[0].parent: t1 is completed and cannot have unfinished subtasks (t3)"
        ));
        assert_eq!(state(&s), before);
        // Reopening the parent in the same write is the way.
        merge(&mut s, json!([{"id": "t1", "status": "in_progress"}, {"content": "Fix the build", "parent": "t1"}])).unwrap();
        assert_eq!(s.items[3].parent.as_deref(), Some("t1"));
        assert_eq!(s.items[3].content, "Fix the build");
    }

    #[test]
    fn every_parent_mistake_names_the_field_and_changes_nothing() {
        let mut s = shipping();
        merge(&mut s, json!([{"content": "Lint", "parent": "t4"}])).unwrap();
        // t2 leaves the list for good.
        write(
            &mut s,
            json!([
            {"id": "t1", "content": "Ship it", "status": "in_progress"},
            {"id": "t4", "content": "Build", "status": "pending", "parent": "t1"},
            {"id": "t6", "content": "Lint", "status": "pending", "parent": "t4"},
            {"id": "t5", "content": "Test", "status": "pending", "parent": "t1"},
            {"id": "t3", "content": "Tag", "status": "cancelled"}]),
        )
        .unwrap();
        let before = state(&s);
        let cases: [(Json, bool, &str); 10] = [
            (json!([{"id": "t3", "parent": "t9"}]), true, "todos[0].parent: unknown id \"t9\": a parent must be the id of an item in the list"),
            (json!([{"id": "t3", "status": "pending"}, {"content": "x", "parent": "t2"}]), true,
             "todos[1].parent: \"t2\" is not in the list; a parent must be an item of the list"),
            (json!([{"id": "t3", "parent": "t3"}]), true, "todos[0].parent: t3 cannot be a subtask of itself"),
            (json!([{"id": "t1", "parent": "t6"}]), true, "todos[0].parent: would make a cycle (t1 -> t6 -> t4 -> t1)"),
            (json!([{"id": "t3", "parent": "t6"}]), true, "todos[0].parent: t6 is already 3 levels deep; subtasks go at most 3 levels"),
            (json!([{"content": "Deeper", "parent": "t6"}]), true, "todos[0].parent: t6 is already 3 levels deep; subtasks go at most 3 levels"),
            (json!([{"id": "t4", "parent": "t5"}]), true,
             "todos[0].parent: under t5, t4's subtask t6 would be 4 levels deep; subtasks go at most 3 levels"),
            (json!([{"id": "t3", "parent": 7}]), true, "todos[0].parent: expected a string, got integer 7"),
            (json!([
                {"id": "t1", "content": "Ship it", "status": "in_progress"},
                {"id": "t4", "content": "Build", "status": "pending", "parent": "t1"},
                {"id": "t6", "content": "Lint", "status": "pending", "parent": "t4"},
                {"id": "t5", "content": "Test", "status": "pending", "parent": "t6"}]), false,
             "todos[3].parent: t6 is already 3 levels deep; subtasks go at most 3 levels"),
            (json!([
                {"id": "t4", "content": "Build", "status": "pending", "parent": "t1"},
                {"id": "t5", "content": "Test", "status": "pending"}]), false,
             "todos[0].parent: \"t1\" is not in the list; a parent must be an item of the list"),
        ];
        for (todos, merged, expected) in cases {
            let got = if merged {
                merge(&mut s, todos)
            } else {
                write(&mut s, todos)
            };
            assert_eq!(got.unwrap_err().to_string(), expected);
            assert_eq!(state(&s), before, "after {expected}");
        }
    }

    #[test]
    fn a_merge_moves_an_item_under_another_parent_and_back_and_undo_takes_it_back() {
        let mut s = shipping();
        let text = merge(&mut s, json!([{"id": "t3", "parent": "t2"}])).unwrap();
        assert_eq!(text, "[TODO list updated: 0/5 done]\nt3 pending: Tag (under t2)\nNext: work on t1; mark it completed when it is done.");
        assert_eq!(s.find("t3").unwrap().parent.as_deref(), Some("t2"));
        let change = s.history.changes().last().unwrap();
        assert_eq!(
            (change.ids.reparented.clone(), change.summary.clone()),
            (vec!["t3".to_string()], "reparented t3".to_string())
        );
        // The same parent again changes nothing.
        assert!(merge(&mut s, json!([{"id": "t3", "parent": "t2"}]))
            .unwrap()
            .contains("No change"));
        let text = merge(&mut s, json!([{"id": "t4", "parent": ""}])).unwrap();
        assert_eq!(text, "[TODO list updated: 0/5 done]\nt4 pending: Build (now top-level)\nNext: work on t1; mark it completed when it is done.");
        assert_eq!(
            parents(&s),
            [
                ("t1", None),
                ("t4", None),
                ("t5", Some("t1")),
                ("t2", None),
                ("t3", Some("t2"))
            ]
        );
        assert!(s.undo().is_some());
        assert_eq!(s.find("t4").unwrap().parent.as_deref(), Some("t1"));
        assert!(s.undo().is_some());
        assert_eq!(s.find("t3").unwrap().parent, None);
        assert!(s.undo().is_some(), "the merge that added t4 and t5");
        assert_eq!(parents(&s), [("t1", None), ("t2", None), ("t3", None)]);
    }

    #[test]
    fn a_retired_subtask_comes_back_under_its_parent_when_it_can() {
        let mut s = shipping();
        write(
            &mut s,
            json!([
            {"id": "t1", "content": "Ship it", "status": "in_progress"},
            {"id": "t5", "content": "Test", "status": "pending", "parent": "t1"},
            {"id": "t3", "content": "Tag", "status": "pending"}]),
        )
        .unwrap();
        merge(
            &mut s,
            json!([{"id": "t4", "status": "pending"}, {"id": "t2", "status": "pending"}]),
        )
        .unwrap();
        assert_eq!(s.find("t4").unwrap().parent.as_deref(), Some("t1"));
        assert_eq!(s.find("t2").unwrap().parent, None);
    }

    #[test]
    fn user_edits_keep_the_rules_and_removing_a_parent_moves_its_subtasks_up() {
        let mut s = shipping();
        let options = Options::default();
        let refused = s.user_edit(
            UserEdit::SetStatus {
                id: "t1".into(),
                status: Status::Completed,
            },
            &options,
        );
        assert_eq!(
            refused.unwrap_err().to_string(),
            "status: t1 cannot be completed while its subtasks t4, t5 are unfinished; complete or cancel them first"
        );
        merge(&mut s, json!([{"content": "Lint", "parent": "t4"}])).unwrap();
        s.user_edit(
            UserEdit::SetStatus {
                id: "t4".into(),
                status: Status::Cancelled,
            },
            &options,
        )
        .unwrap();
        let note = s.user_edit(UserEdit::ClearFinished, &options).unwrap();
        assert_eq!(note, "the user removed the finished items t4 from the list (their unfinished subtasks t6 moved up a level)");
        assert_eq!(
            parents(&s),
            [
                ("t1", None),
                ("t6", Some("t1")),
                ("t5", Some("t1")),
                ("t2", None),
                ("t3", None)
            ]
        );
        merge(
            &mut s,
            json!([{"id": "t6", "status": "completed"}, {"id": "t5", "status": "completed"}]),
        )
        .unwrap();
        s.user_edit(
            UserEdit::SetStatus {
                id: "t1".into(),
                status: Status::Completed,
            },
            &options,
        )
        .unwrap();
        let reopen = s.user_edit(
            UserEdit::SetStatus {
                id: "t5".into(),
                status: Status::Pending,
            },
            &options,
        );
        assert_eq!(
            reopen.unwrap_err().to_string(),
            "status: t5 is a subtask of t1, which is completed; reopen t1 first"
        );
    }

    #[test]
    fn auto_completion_waits_for_the_subtasks() {
        let mut s = shipping();
        merge(
            &mut s,
            json!([{"id": "t1", "content": "Ship it with deploy_site"}]),
        )
        .unwrap();
        assert_eq!(s.auto_complete("deploy_site"), None);
        merge(
            &mut s,
            json!([{"id": "t4", "status": "completed"}, {"id": "t5", "status": "completed"}]),
        )
        .unwrap();
        assert!(s.auto_complete("deploy_site").is_some());
        assert_eq!(s.find("t1").unwrap().status, Status::Completed);
    }

    #[test]
    fn efrits_flat_api_keeps_the_parents_it_cannot_see() {
        let mut s = shipping();
        let external: Vec<ExternalItem> = s
            .items
            .iter()
            .map(|i| ExternalItem {
                id: Some(i.id.clone()),
                content: i.content.clone(),
                status: i.status,
                priority: None,
                created: Some(i.created),
                completed: None,
            })
            .collect();
        s.set_all(external.clone(), &Options::default()).unwrap();
        assert_eq!(
            parents(&s),
            [
                ("t1", None),
                ("t4", Some("t1")),
                ("t5", Some("t1")),
                ("t2", None),
                ("t3", None)
            ]
        );
        // Without t1, its subtasks are top-level.
        s.set_all(external[1..].to_vec(), &Options::default())
            .unwrap();
        assert!(!tree::any_parent(&s.items));
    }
}

//! The registry of sessions and the operations that change a session's list.
//! Every operation validates first and commits last, so a failed call leaves
//! the session exactly as it was.
//!
//! `Session`'s operations are split by the path they serve: `write` holds
//! the write path (todo_write, Efrit's list API, the user's edits, undo),
//! `agent_loop` the agent loop's (the breaker and the ledger around each
//! tool call, the prompt's part, stops, turns and the final report).  What
//! both use stays here, with the registry.

mod agent_loop;
mod agents;
mod ancestry;
mod shared;
mod tasks;
mod write;

use std::sync::{Mutex, MutexGuard};

use once_cell::sync::Lazy;
use rustc_hash::FxHashMap;

pub use agents::{
    check_agent_name, AgentView, Agents, PeerLease, MAX_AGENT_NAME_CHARS, MAX_KNOWN_AGENTS,
};

use crate::breaker::{Breaker, BreakerLimits};
use crate::graph;
use crate::guide::{Guide, GuideOptions};
use crate::history::{Actor, Change, ChangeKind, ChangedIds, History, UndoData};
use crate::ledger::{CompletionGuard, Ledger};
use crate::model::{now, Counts, IdCounter, Item, Status, Timestamp};
use crate::reconcile::Diff;
use crate::validate::{InvalidInput, Limits, ToolStyle};

pub use shared::ListMark;

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

impl LoopOptions {
    /// The tools the model is offered are those of STYLE: the texts of the
    /// breaker, the guide and the completion guard name only those.
    pub fn set_style(&mut self, style: ToolStyle) {
        self.breaker.style = style;
        self.guide.style = style;
    }
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
    /// Where each id of `items` stands, kept between writes (see
    /// `graph::IdIndex`); refreshed before use.
    index: graph::IdIndex,
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
    /// The sub-agents working on this list beside the session's own agent.
    pub agents: Agents,
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
    /// Sets ID to STATUS, dropping first the dependencies that hold it
    /// back (its own open blockers and its ancestors'), as one change.
    SetStatusUnblocked {
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
    /// Removes every item (their ids stay retired).
    Clear,
    /// Makes ID wait for BLOCKER.
    Block {
        id: String,
        blocker: String,
    },
    /// ID no longer waits for BLOCKER.
    Unblock {
        id: String,
        blocker: String,
    },
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

    /// Every change of the list passes here once it is committed.  The
    /// user's edits wait for the next tool result, which tells the model.
    fn changed(&mut self, actor: Actor, user_note: Option<String>) {
        if actor == Actor::User {
            self.user_notes.extend(user_note);
        }
    }

    /// The problem `graph::check` found, as an error naming the field.
    fn graph_error(
        problem: graph::Problem,
        nodes: &[graph::Node],
        paths: &Paths,
        change_of: &[Option<usize>],
    ) -> InvalidInput {
        let change = |node: usize| change_of.get(node).copied().flatten().unwrap_or(0);
        let id = |node: usize| nodes[node].id.unwrap_or("the new item").to_string();
        match problem {
            graph::Problem::Unknown { node, blocker } => InvalidInput::new(
                (paths.edge)(change(node), &blocker),
                format!("unknown id {blocker}"),
            ),
            graph::Problem::OnItself { node, blocker } => InvalidInput::new(
                (paths.edge)(change(node), &blocker),
                format!("{} cannot wait for itself", id(node)),
            ),
            graph::Problem::TooMany { node, count } => InvalidInput::new(
                (paths.field)(change(node), "blocked_by"),
                format!(
                    "would make {} wait for {count} items; at most {} may block one item",
                    id(node),
                    paths.max_blockers
                ),
            ),
            graph::Problem::Cycle { node, blocker, ids } => InvalidInput::new(
                (paths.edge)(change(node), &blocker),
                format!(
                    "{blocker} would close a cycle {}",
                    graph::cycle_text(ids.iter().map(String::as_str))
                ),
            ),
            graph::Problem::Blocked { node, blockers } => {
                let named: Vec<String> = blockers
                    .iter()
                    .map(|(id, status)| format!("{id} ({})", status.wire_name()))
                    .collect();
                let ids: Vec<&str> = blockers.iter().map(|(id, _)| id.as_str()).collect();
                let mut list = String::new();
                crate::model::push_ids(&mut list, ids.iter().copied());
                let mut shown = String::new();
                crate::model::push_ids(&mut shown, named.iter().map(String::as_str));
                InvalidInput::new(
                    (paths.field)(change(node), "status"),
                    format!(
                        "{} is blocked by {shown}; finish {list} first, or remove the dependency with {}",
                        id(node),
                        paths.unblock_hint
                    ),
                )
            }
        }
    }

    /// Reserves a fresh id without adding an item.
    pub fn allocate_id(&mut self) -> String {
        self.ids.issue()
    }
}

/// How a write names the fields of its changes in errors: todo_write
/// says `todos[2].blocked_by[0]`, TaskUpdate `addBlockedBy[1]`.
pub(crate) struct Paths<'a> {
    /// The field of change N that names blocker ID.
    pub edge: &'a dyn Fn(usize, &str) -> String,
    /// Field NAME (as todo_write spells it) of change N.
    pub field: &'a dyn Fn(usize, &str) -> String,
    /// How the model removes a dependency with the tool it called.
    pub unblock_hint: &'static str,
    pub max_blockers: usize,
}

/// Runs CHECK with the field paths of todo_write's changes:
/// `todos[i].blocked_by[k]`, K being where change I names the blocker
/// (`BLOCKER_AT`), and `todos[i].NAME`.
pub(crate) fn with_todo_paths<R>(
    blocker_at: impl Fn(usize, &str) -> Option<usize>,
    max_blockers: usize,
    check: impl FnOnce(&Paths) -> R,
) -> R {
    let edge = |i: usize, blocker: &str| {
        let k = blocker_at(i, blocker).unwrap_or(0);
        format!("todos[{i}].blocked_by[{k}]")
    };
    let field = |i: usize, name: &str| format!("todos[{i}].{name}");
    check(&Paths {
        edge: &edge,
        field: &field,
        unblock_hint: "blocked_by",
        max_blockers,
    })
}

/// Runs CHECK with the field paths of a whole todo_write list
/// (`todos[i].blocked_by[k]`) and each node's change, node i being item i.
pub(crate) fn with_whole_list_paths<R>(
    proposed: &[crate::validate::ProposedItem],
    max_blockers: usize,
    check: impl FnOnce(&Paths, &[Option<usize>]) -> R,
) -> R {
    let change_of: Vec<Option<usize>> = (0..proposed.len()).map(Some).collect();
    with_todo_paths(
        |i, blocker| proposed[i].blocked_by.iter().position(|id| id == blocker),
        max_blockers,
        |paths| check(paths, &change_of),
    )
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
            .any(|(_, session)| session.breaker.armed(limits) || session.agents.any_armed(limits))
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
    use crate::validate::Input;
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
        s.set_all(vec![ext("t5"), ext("todo-1")], &options.limits)
            .unwrap();
        assert!(s.items[0].completed.is_some());
        assert_eq!(
            s.add("next".into(), None, &options.limits).unwrap().id,
            "t6"
        );
    }

    #[test]
    fn add_respects_the_item_limit() {
        let mut s = Session::started_now();
        let options = Options {
            limits: Limits {
                max_items: 1,
                max_content_chars: 10,
                ..Limits::default()
            },
            ..Options::default()
        };
        s.add("one".into(), None, &options.limits).unwrap();
        assert_eq!(
            s.add("two".into(), None, &options.limits).unwrap_err().path,
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
    fn clearing_the_list_retires_every_item_and_can_be_undone() {
        let mut s = edit_session();
        let before = s.items.clone();
        let note = s
            .user_edit(UserEdit::Clear, &Options::default().limits)
            .unwrap();
        assert_eq!(note, "the user cleared the list, removing t1, t2, t3");
        assert!(s.items.is_empty());
        assert!(["t1", "t2", "t3"]
            .iter()
            .all(|id| s.retired.contains_key(*id)));
        assert_eq!(s.user_notes.last().map(String::as_str), Some(note.as_str()));
        assert!(s
            .user_edit(UserEdit::Clear, &Options::default().limits)
            .unwrap()
            .is_empty());
        assert!(s.undo().unwrap().contains("reset by the user"));
        assert_eq!(s.items, before);
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
                &options.limits,
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
            &options.limits,
        )
        .unwrap();
        assert_eq!(s.find("t1").unwrap().active_form, "A better");
        s.user_edit(
            UserEdit::Move {
                id: "t3".into(),
                offset: -10,
            },
            &options.limits,
        )
        .unwrap();
        assert_eq!(s.items[0].id, "t3");
        s.user_edit(
            UserEdit::Add {
                content: "d".into(),
            },
            &options.limits,
        )
        .unwrap();
        assert_eq!(s.items.last().unwrap().id, "t4");
        assert!(s
            .user_edit(UserEdit::ClearFinished, &options.limits)
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
                ..Limits::default()
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
            &Limits::default(),
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
            &options.limits,
        );
        assert_eq!(unknown.unwrap_err().path, "id");
        let blank = s.user_edit(
            UserEdit::EditContent {
                id: "t1".into(),
                content: "  ".into(),
            },
            &options.limits,
        );
        assert_eq!(blank.unwrap_err().path, "content");
        assert_eq!(
            s.user_edit(
                UserEdit::Add {
                    content: String::new()
                },
                &options.limits
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
    fn the_loop_texts_follow_the_style_of_the_options() {
        let mut options = LoopOptions::default();
        options.set_style(ToolStyle::Tasks);
        let mut s = Session::started_now();
        let create = json!({"subject": "Look around"});
        s.task_tool(
            "TaskCreate",
            &Input::from_json(&create),
            &Options::default(),
        )
        .unwrap();
        let start = json!({"taskId": "t1", "status": "in_progress"});
        s.task_tool("TaskUpdate", &Input::from_json(&start), &Options::default())
            .unwrap();
        let reminder = (0..4)
            .filter_map(|n| {
                s.after_tool(
                    "read_file",
                    Input::Int(n),
                    Some("text".into()),
                    false,
                    None,
                    &options,
                )
            })
            .last()
            .unwrap_or_default();
        assert!(reminder.contains("[efrit-todo reminder]"), "{reminder}");
        let continuation = s
            .guide
            .turn_end(false, &s.items, &options.guide)
            .unwrap_or_default();
        let refusal = s.complete("done", &options).text;
        for text in [reminder, continuation, refusal] {
            assert!(
                text.contains("TaskUpdate") && !text.contains("todo_write"),
                "{text}"
            );
        }
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
            s.add("next".into(), None, &Limits::default()).unwrap().id,
            "t4"
        );
    }
}

#[cfg(test)]
mod subtask_tests {
    use super::*;
    use crate::validate::Input;
    use crate::{render, tree};
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
    fn removing_finished_items_names_them_in_the_right_number() {
        let options = Options::default();
        let mut s = Session::started_now();
        let todos = json!({"todos": [
            {"content": "a", "status": "completed"},
            {"content": "b", "status": "completed"},
            {"content": "c", "status": "pending"}]});
        s.write(&Input::from_json(&todos), &options, false, vec![])
            .unwrap();
        assert_eq!(
            s.user_edit(UserEdit::ClearFinished, &options.limits)
                .unwrap(),
            "the user removed the finished items t1, t2 from the list"
        );
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
            &options.limits,
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
            &options.limits,
        )
        .unwrap();
        let note = s
            .user_edit(UserEdit::ClearFinished, &options.limits)
            .unwrap();
        assert_eq!(note, "the user removed the finished item t4 from the list (its unfinished subtask t6 moved up a level)");
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
            &options.limits,
        )
        .unwrap();
        let reopen = s.user_edit(
            UserEdit::SetStatus {
                id: "t5".into(),
                status: Status::Pending,
            },
            &options.limits,
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
        s.set_all(external.clone(), &Limits::default()).unwrap();
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
        s.set_all(external[1..].to_vec(), &Limits::default())
            .unwrap();
        assert!(!tree::any_parent(&s.items));
    }
}

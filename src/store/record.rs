//! The file layout, and reading a file back: older layouts upgraded, a
//! list over the limits todo_write keeps refused, a bad part kept only for
//! the record dropped with a warning naming its field.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::breaker::BreakerState;
use crate::history::{Actor, Change, ChangeKind, ChangedIds, History, UndoData, MAX_CHANGES};
use crate::ledger::Entry;
use crate::model::{id_number, Item, Status, Timestamp, MAX_ID_NUMBER};
use crate::session::{
    check_agent_name, check_session_name, PeerLease, Session, Stop, MAX_KNOWN_AGENTS,
    MAX_STOP_REASON_CHARS,
};
use crate::validate::{checked_text, Input, Limits};

use super::holder::{others_running, MAX_HOLDER_CHARS};

/// The layout this code writes.  Version 1 was the first, list-only layout:
/// `session`, `counter` and `todos`.
pub const SCHEMA_VERSION: u64 = 2;

/// Retired items kept in a file, newest first.  Ids beyond them are still
/// never reissued (the counter is saved); only bringing such an item back
/// by its id after a restore is lost.
pub const MAX_STORED_RETIRED: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("not a valid state file: {0}")]
    Corrupt(String),
    #[error("written by a newer efrit-todo (schema version {0}; this one reads versions up to {SCHEMA_VERSION})")]
    Newer(u64),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Refused(String),
}

fn corrupt(message: impl Into<String>) -> LoadError {
    LoadError::Corrupt(message.into())
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct StoredItem {
    id: String,
    content: String,
    #[serde(rename = "activeForm", default)]
    active_form: Option<String>,
    status: String,
    #[serde(default)]
    priority: Option<String>,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(rename = "blockedBy", default)]
    blocked_by: Vec<String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    created: Timestamp,
    #[serde(default)]
    started: Option<Timestamp>,
    #[serde(default)]
    completed: Option<Timestamp>,
}

impl StoredItem {
    fn into_item(self, path: &str) -> Result<Item, LoadError> {
        let status = Status::parse(&self.status)
            .ok_or_else(|| corrupt(format!("{path}.status: unknown status {:?}", self.status)))?;
        if self.id.is_empty() {
            return Err(corrupt(format!("{path}.id: empty")));
        }
        Ok(Item {
            active_form: self.active_form.unwrap_or_else(|| self.content.clone()),
            id: self.id,
            content: self.content,
            status,
            priority: self.priority,
            parent: self.parent,
            description: self.description,
            blocked_by: self.blocked_by,
            owner: self.owner,
            created: self.created,
            started: self.started,
            completed: self.completed,
        })
    }
}

/// How the session stopped with items open, so that a list left by an
/// interrupted command is taken over after a restart too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct StoredStop {
    pub(super) reason: String,
    pub(super) at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) running: Option<String>,
}

/// A running agent of a shared list, as its file records it (see
/// `PeerLease`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct StoredPeer {
    pub(super) name: String,
    pub(super) holder: String,
    pub(super) since: Timestamp,
}

impl StoredStop {
    /// The stop, or None with a reason that a todo_write would refuse: it
    /// is only a mark, so a bad one is dropped rather than the file.
    fn into_stop(self) -> Option<Stop> {
        let reason =
            checked_text(&Input::Str(self.reason), "reason", MAX_STOP_REASON_CHARS).ok()?;
        let running = self
            .running
            .filter(|id| checked_text(&Input::Str(id.clone()), "running", 200).is_ok());
        (!reason.trim().is_empty() && self.at.is_finite()).then_some(Stop {
            reason,
            at: self.at,
            running,
        })
    }
}

/// What the ledger held at the save: counts, not the results themselves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct LedgerSummary {
    calls: usize,
    errors: usize,
    tools: BTreeMap<String, usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<Timestamp>,
}

impl LedgerSummary {
    pub(super) fn of(entries: &[Entry]) -> LedgerSummary {
        let mut summary = LedgerSummary::default();
        summary.count(entries);
        summary
    }

    fn count(&mut self, entries: &[Entry]) {
        for entry in entries {
            match self.tools.get_mut(&entry.tool) {
                Some(count) => *count += 1,
                None => {
                    self.tools.insert(entry.tool.clone(), 1);
                }
            }
            self.errors += usize::from(entry.error);
        }
        self.calls += entries.len();
        self.first = self.first.or(entries.first().map(|e| e.time));
        self.last = entries.last().map(|e| e.time).or(self.last);
    }

    /// Brings a summary made at an earlier save up to ENTRIES.  A ledger
    /// only grows until it is cleared, so only the calls since that save
    /// are counted: a save costs the same at the 100000th call as at the
    /// first.  A ledger that was cleared since is counted afresh.
    pub(super) fn catch_up(&mut self, entries: &[Entry]) {
        let seen = self.calls;
        let same_ledger = seen <= entries.len()
            && (seen == 0
                || (entries[0].time == self.first.unwrap_or(f64::NAN)
                    && entries[seen - 1].time == self.last.unwrap_or(f64::NAN)));
        if same_ledger {
            self.count(&entries[seen..]);
        } else {
            *self = LedgerSummary::of(entries);
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct StoredUndo {
    #[serde(default)]
    order: Option<Vec<String>>,
    #[serde(default)]
    added: Vec<String>,
    #[serde(default)]
    before: Vec<StoredItem>,
    #[serde(default)]
    retired_before: Vec<StoredItem>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct StoredChange {
    seq: u64,
    actor: String,
    kind: String,
    time: Timestamp,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    ids: ChangedIds,
    #[serde(default)]
    undone: bool,
    #[serde(default)]
    undoes: Option<u64>,
    #[serde(default)]
    undo: Option<StoredUndo>,
}

impl StoredChange {
    /// The change, or what is wrong with it (a path and a reason).
    fn into_change(self, path: &str, limits: &Limits) -> Result<Change, String> {
        let actor = Actor::parse(&self.actor)
            .ok_or_else(|| format!("{path}.actor: unknown actor {:?}", self.actor))?;
        let kind = ChangeKind::parse(&self.kind)
            .ok_or_else(|| format!("{path}.kind: unknown kind {:?}", self.kind))?;
        let items = |stored: Vec<StoredItem>, field: &str| {
            let path = format!("{path}.undo.{field}");
            let items = items_of(stored, &path).map_err(|e| match e {
                LoadError::Corrupt(why) => why,
                other => other.to_string(),
            })?;
            for (i, item) in items.iter().enumerate() {
                check_item(item, &format!("{path}[{i}]"), limits)?;
            }
            Ok::<_, String>(items)
        };
        let undo = match self.undo {
            None => None,
            Some(undo) => Some(UndoData {
                order: undo.order,
                added: undo.added,
                before: items(undo.before, "before")?,
                retired_before: items(undo.retired_before, "retired_before")?,
            }),
        };
        Ok(Change {
            seq: self.seq,
            actor,
            kind,
            time: self.time,
            summary: self.summary,
            ids: self.ids,
            undone: self.undone,
            undoes: self.undoes,
            undo,
        })
    }
}

fn items_of(stored: Vec<StoredItem>, path: &str) -> Result<Vec<Item>, LoadError> {
    stored
        .into_iter()
        .enumerate()
        .map(|(i, item)| item.into_item(&format!("{path}[{i}]")))
        .collect()
}

/// The whole file as read.  What the list needs is typed, and a mistake
/// there refuses the file; the parts kept only for the record are taken
/// raw and read one by one, so that a bad one is dropped with a warning
/// and the list kept.  Version 1 called `id_counter` `counter` and `items`
/// `todos`.
#[derive(Deserialize)]
struct StoredState<'a> {
    schema_version: u64,
    session: String,
    #[serde(default, alias = "counter")]
    id_counter: u64,
    #[serde(borrow, alias = "todos")]
    items: &'a RawValue,
    #[serde(default, borrow)]
    generation: Option<&'a RawValue>,
    #[serde(default, borrow)]
    saved_at: Option<&'a RawValue>,
    #[serde(default, borrow)]
    created: Option<&'a RawValue>,
    #[serde(default, borrow)]
    writes: Option<&'a RawValue>,
    #[serde(default, borrow)]
    retired: Option<&'a RawValue>,
    #[serde(default, borrow)]
    user_notes: Option<&'a RawValue>,
    #[serde(default, borrow)]
    breaker: Option<&'a RawValue>,
    #[serde(default, borrow)]
    ledger: Option<&'a RawValue>,
    #[serde(default, borrow)]
    history_seq: Option<&'a RawValue>,
    #[serde(default, borrow)]
    history: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stopped: Option<&'a RawValue>,
    #[serde(default, borrow)]
    agents: Option<&'a RawValue>,
    #[serde(default, borrow)]
    peers: Option<&'a RawValue>,
}

/// Just the version, to tell a newer layout from a damaged file.
#[derive(Deserialize)]
pub(super) struct VersionOnly {
    pub(super) schema_version: u64,
}

/// User notes kept from a file; a session gathers them only between two
/// writes of the model.
const MAX_STORED_NOTES: usize = 1000;

/// ITEM (read at PATH) within LIMITS, as todo_write keeps its texts: no
/// NUL, at most `max_content_chars` characters in every text field.
fn check_item(item: &Item, path: &str, limits: &Limits) -> Result<(), String> {
    let texts = [
        ("id", Some(&item.id)),
        ("content", Some(&item.content)),
        ("activeForm", Some(&item.active_form)),
        ("parent", item.parent.as_ref()),
        ("priority", item.priority.as_ref()),
        ("owner", item.owner.as_ref()),
    ];
    for (field, text) in texts {
        let Some(text) = text else { continue };
        if text.contains('\0') {
            return Err(format!("{path}.{field}: contains a NUL character"));
        }
        let max = limits.max_content_chars;
        if text.len() > max {
            let chars = text.chars().count();
            if chars > max {
                return Err(format!(
                    "{path}.{field}: is {chars} characters long; the limit is {max} (efrit-todo-max-content-length)"
                ));
            }
        }
    }
    if let Some(description) = &item.description {
        if description.contains('\0') {
            return Err(format!("{path}.description: contains a NUL character"));
        }
        let max = limits.max_description_chars;
        if description.len() > max && description.chars().count() > max {
            return Err(format!(
                "{path}.description: is longer than {max} characters (efrit-todo-max-description-length)"
            ));
        }
    }
    if item.blocked_by.len() > limits.max_blockers {
        return Err(format!(
            "{path}.blockedBy: names {} items; the limit is {}",
            item.blocked_by.len(),
            limits.max_blockers
        ));
    }
    match id_number(&item.id) {
        Some(n) if n > MAX_ID_NUMBER => Err(format!(
            "{path}.id: {} is beyond the largest id, t{MAX_ID_NUMBER}",
            item.id
        )),
        _ => Ok(()),
    }
}

/// The path ("breaker.calls", "history[2].undo.before[0]") of the value
/// being read at byte END of TEXT, the JSON of the part PREFIX: where a
/// serde_json error points.  MISSING: the error is a missing field, which
/// points at the end of its object, past the last key read.
fn path_at(text: &str, end: usize, prefix: &str, missing: bool) -> String {
    enum Frame {
        Object(Option<String>),
        Array(usize),
    }
    let bytes = text.as_bytes();
    let end = end.min(bytes.len());
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < end {
        match bytes[i] {
            b'{' => stack.push(Frame::Object(None)),
            b'[' => stack.push(Frame::Array(0)),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Frame::Array(n)) => *n += 1,
                Some(Frame::Object(key)) => *key = None,
                None => {}
            },
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                // A string in an object with no key yet is the next key.
                if let Some(Frame::Object(key @ None)) = stack.last_mut() {
                    let quoted = text.get(start..(i + 1).min(bytes.len())).unwrap_or("\"\"");
                    *key = Some(serde_json::from_str(quoted).unwrap_or_default());
                }
            }
            _ => {}
        }
        i += 1;
    }
    if missing {
        if let Some(Frame::Object(key)) = stack.last_mut() {
            *key = None;
        }
    }
    let mut path = prefix.to_string();
    for frame in stack {
        match frame {
            Frame::Object(Some(key)) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key);
            }
            Frame::Object(None) => {}
            Frame::Array(n) => {
                let _ = write!(path, "[{n}]");
            }
        }
    }
    path
}

/// ERROR, from reading TEXT as the part PREFIX, as "path: what is wrong".
fn located(text: &str, prefix: &str, error: &serde_json::Error) -> String {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(error.line().saturating_sub(1))
        .map(str::len)
        .sum();
    let end = (line_start + error.column()).saturating_sub(1);
    let message = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let message = message.strip_suffix(&position).unwrap_or(&message);
    let path = path_at(text, end, prefix, message.starts_with("missing field"));
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

/// What reading the record-only parts of a file found wrong.
struct Records {
    warnings: Vec<String>,
}

impl Records {
    /// Part NAME read as T; None, with a warning naming the field, when it
    /// does not read (or is absent).
    fn part<T: serde::de::DeserializeOwned>(
        &mut self,
        raw: Option<&RawValue>,
        name: &str,
    ) -> Option<T> {
        let raw = raw?;
        match serde_json::from_str(raw.get()) {
            Ok(value) => Some(value),
            Err(e) => {
                self.drop_part(name, located(raw.get(), name, &e));
                None
            }
        }
    }

    /// Part NAME, a JSON object, read as T, like `part`.  (Serde would take
    /// a list for a struct, field by field.)
    fn object<T: serde::de::DeserializeOwned>(
        &mut self,
        raw: Option<&RawValue>,
        name: &str,
    ) -> Option<T> {
        let raw = raw?;
        if !raw.get().starts_with('{') {
            self.drop_part(
                name,
                format!(
                    "{name}: expected an object, got {}",
                    raw.get().chars().take(40).collect::<String>()
                ),
            );
            return None;
        }
        self.part(Some(raw), name)
    }

    /// Part NAME, a list of at most `MAX_KNOWN_AGENTS` elements (WHAT, in
    /// the warning), each of which CHECK accepts; else none, the whole part
    /// dropped with a warning.
    fn bounded_list<T: serde::de::DeserializeOwned>(
        &mut self,
        raw: Option<&RawValue>,
        name: &str,
        what: &str,
        check: impl Fn(usize, &T) -> Result<(), String>,
    ) -> Vec<T> {
        let Some(list) = self.part::<Vec<T>>(raw, name) else {
            return Vec::new();
        };
        if list.len() > MAX_KNOWN_AGENTS {
            self.drop_part(
                name,
                format!(
                    "{name}: {} {what}, more than the {MAX_KNOWN_AGENTS} kept",
                    list.len()
                ),
            );
            return Vec::new();
        }
        if let Some(why) = list
            .iter()
            .enumerate()
            .find_map(|(i, element)| check(i, element).err())
        {
            self.drop_part(name, why);
            return Vec::new();
        }
        list
    }

    fn drop_part(&mut self, name: &str, why: String) {
        self.warnings.push(format!(
            "{why}; the {name} part was dropped and the list kept"
        ));
    }

    fn note(&mut self, text: String) {
        self.warnings.push(text);
    }
}

/// Reads a list of items from RAW, keeping at most CAP: the rest are
/// only counted, without building them.  Returns the items and how many
/// there were.
fn read_capped_items(
    raw: &RawValue,
    cap: usize,
) -> Result<(Vec<StoredItem>, usize), serde_json::Error> {
    struct Capped(usize);
    impl<'de> serde::de::Visitor<'de> for Capped {
        type Value = (Vec<StoredItem>, usize);
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of items")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while items.len() < self.0 {
                match seq.next_element()? {
                    Some(item) => items.push(item),
                    None => {
                        let n = items.len();
                        return Ok((items, n));
                    }
                }
            }
            let mut n = items.len();
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                n += 1;
            }
            Ok((items, n))
        }
    }
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    let read = serde::Deserializer::deserialize_seq(&mut deserializer, Capped(cap))?;
    deserializer.end()?;
    Ok(read)
}

/// A session read back from a file, and what was dropped on the way.
#[derive(Debug)]
pub struct Decoded {
    pub name: String,
    pub session: Session,
    /// The save's place among the saves of its session: one more than the
    /// save it replaced.  It, not a file time, tells which save is newest.
    pub generation: u64,
    /// Parts of the file dropped or cut, each naming its field path.
    pub warnings: Vec<String>,
}

impl StoredState<'_> {
    fn into_session(self, limits: &Limits, restoring: bool) -> Result<Decoded, LoadError> {
        check_session_name(&self.session).map_err(|e| corrupt(e.to_string()))?;
        if self.id_counter > MAX_ID_NUMBER {
            return Err(LoadError::Refused(format!(
                "id_counter: {} is beyond the largest id counter, {MAX_ID_NUMBER}",
                self.id_counter
            )));
        }
        let (stored, count) = read_capped_items(self.items, limits.max_items)
            .map_err(|e| corrupt(located(self.items.get(), "items", &e)))?;
        if count > limits.max_items {
            return Err(LoadError::Refused(format!(
                "items: has {count} items; the limit is {} (efrit-todo-max-items)",
                limits.max_items
            )));
        }
        let items = items_of(stored, "items")?;
        for (i, item) in items.iter().enumerate() {
            check_item(item, &format!("items[{i}]"), limits).map_err(LoadError::Refused)?;
        }
        // Ids are not checked for uniqueness: Efrit's compatibility calls can
        // put any ids in a list, and such a list must come back as it was.

        let mut records = Records {
            warnings: Vec::new(),
        };
        let generation: u64 = records
            .part(self.generation, "generation")
            .unwrap_or_default();
        let _: Option<Timestamp> = records.part(self.saved_at, "saved_at");
        let created: Timestamp = records.part(self.created, "created").unwrap_or_default();
        let writes: u64 = records.part(self.writes, "writes").unwrap_or_default();
        // The breaker and the ledger are summaries for the record: checked,
        // never restored.
        let _: Option<BreakerState> = records.object(self.breaker, "breaker");
        let _: Option<LedgerSummary> = records.object(self.ledger, "ledger");
        let retired = records
            .part::<Vec<StoredItem>>(self.retired, "retired")
            .and_then(|mut stored| {
                if stored.len() > MAX_STORED_RETIRED {
                    records.note(format!(
                        "retired: {} items, more than the {MAX_STORED_RETIRED} a file keeps; the first {MAX_STORED_RETIRED} were kept",
                        stored.len()
                    ));
                    stored.truncate(MAX_STORED_RETIRED);
                }
                let checked = items_of(stored, "retired").map_err(|e| e.to_string()).and_then(|items| {
                    for (i, item) in items.iter().enumerate() {
                        check_item(item, &format!("retired[{i}]"), limits)?;
                    }
                    Ok(items)
                });
                checked.map_err(|why| records.drop_part("retired", why.trim_start_matches("not a valid state file: ").to_string())).ok()
            })
            .unwrap_or_default();
        let mut user_notes: Vec<String> = records
            .part(self.user_notes, "user_notes")
            .unwrap_or_default();
        if user_notes.len() > MAX_STORED_NOTES {
            records.note(format!(
                "user_notes: {} notes, more than the {MAX_STORED_NOTES} kept; the newest were kept",
                user_notes.len()
            ));
            user_notes.drain(..user_notes.len() - MAX_STORED_NOTES);
        }
        let history_seq: u64 = records
            .part(self.history_seq, "history_seq")
            .unwrap_or_default();
        let history = records
            .part::<Vec<StoredChange>>(self.history, "history")
            .and_then(|mut stored| {
                if stored.len() > MAX_CHANGES {
                    records.note(format!(
                        "history: {} changes, more than the {MAX_CHANGES} kept; the oldest {} were dropped",
                        stored.len(),
                        stored.len() - MAX_CHANGES
                    ));
                    stored.drain(..stored.len() - MAX_CHANGES);
                }
                let changes = stored
                    .into_iter()
                    .enumerate()
                    .map(|(i, change)| change.into_change(&format!("history[{i}]"), limits))
                    .collect::<Result<Vec<_>, String>>();
                changes.map_err(|why| records.drop_part("history", why)).ok()
            })
            .unwrap_or_default();
        let stopped = records
            .object::<StoredStop>(self.stopped, "stopped")
            .and_then(StoredStop::into_stop);
        let agents: Vec<String> =
            records.bounded_list(self.agents, "agents", "names", |i, name: &String| {
                check_agent_name(name, &format!("agents[{i}]")).map_err(|e| e.to_string())
            });
        let peers: Vec<StoredPeer> =
            records.bounded_list(self.peers, "peers", "agents", |i, peer: &StoredPeer| {
                check_agent_name(&peer.name, &format!("peers[{i}].name"))
                    .map_err(|e| e.to_string())?;
                let holder = &peer.holder;
                if holder.is_empty()
                    || holder.chars().count() > MAX_HOLDER_CHARS
                    || holder.chars().any(char::is_control)
                    || !peer.since.is_finite()
                {
                    return Err(format!("peers[{i}]: not an Emacs and a time"));
                }
                Ok(())
            });

        let mut session = Session::default();
        session.ids.raise_to(self.id_counter);
        for item in items.iter().chain(&retired) {
            session.ids.observe(&item.id);
        }
        session.items = items;
        // A parent the list does not hold, a cycle or a fourth level (a
        // damaged or hand-edited file) is dropped; the items stay.
        crate::tree::repair(&mut session.items, &[]);
        // Blockers that name no item, the item itself or close a cycle are
        // bad input from disk like a bad parent: the edge goes, with a
        // warning, the item stays.
        for dropped in crate::graph::repair(&mut session.items) {
            records.warnings.push(format!(
                "items: dropped the dependency of {} on {}: {}",
                dropped.item, dropped.blocker, dropped.why
            ));
        }
        session.retired = retired
            .into_iter()
            .map(|item| (item.id.clone(), item))
            .collect();
        session.created = created;
        session.writes = writes;
        session.user_notes = user_notes;
        session.history = History::from_parts(history, history_seq);
        session.stopped = stopped;
        // No sub-agent runs after a restore: what they had in progress
        // waits for the next one, still theirs.  Another Emacs's save of a
        // shared list is no restore: its agents may be running there.
        for item in session.items.iter_mut().filter(|item| {
            restoring
                && item.status == Status::InProgress
                && item
                    .owner
                    .as_ref()
                    .is_some_and(|owner| agents.contains(owner))
        }) {
            item.set_status(Status::Pending, crate::model::now());
        }
        session.agents.restore_known(agents);
        session
            .agents
            .set_elsewhere(others_running(peers.into_iter().map(|peer| PeerLease {
                name: peer.name,
                holder: peer.holder,
                since: peer.since,
            })));
        Ok(Decoded {
            name: self.session,
            session,
            generation,
            warnings: records.warnings,
        })
    }
}

/// Reads a state file within the default limits: the session's name and
/// its state.
pub fn decode(bytes: &[u8]) -> Result<(String, Session), LoadError> {
    decode_within(bytes, &Limits::default()).map(|decoded| (decoded.name, decoded.session))
}

/// Reads a state file within LIMITS, the limits todo_write keeps: a list
/// over them is refused (`LoadError::Refused`), records over theirs cut.
pub fn decode_within(bytes: &[u8], limits: &Limits) -> Result<Decoded, LoadError> {
    decode_as(bytes, limits, true)
}

/// `decode_within` for a save this Emacs restores (RESTORING), or one it
/// takes in from another Emacs, whose agents may be running.
pub(super) fn decode_as(
    bytes: &[u8],
    limits: &Limits,
    restoring: bool,
) -> Result<Decoded, LoadError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(corrupt("the file is empty"));
    }
    let state: StoredState = match serde_json::from_slice(bytes) {
        Ok(state) => state,
        Err(e) => {
            // A newer layout need not read as this one.
            if let Ok(VersionOnly { schema_version }) = serde_json::from_slice(bytes) {
                if schema_version > SCHEMA_VERSION {
                    return Err(LoadError::Newer(schema_version));
                }
            }
            return Err(corrupt(match std::str::from_utf8(bytes) {
                Ok(text) => located(text, "", &e),
                Err(_) => e.to_string(),
            }));
        }
    };
    if state.schema_version == 0 {
        return Err(corrupt("schema_version: 0 is not a version"));
    }
    if state.schema_version > SCHEMA_VERSION {
        return Err(LoadError::Newer(state.schema_version));
    }
    state.into_session(limits, restoring)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Options;
    use crate::store::encode::encode;
    use crate::store::names::{file_name, MAX_ENCODED};
    use crate::store::test_support::{busy_session, write};
    use proptest::prelude::*;
    use serde_json::{json, Value as Json};

    fn same_state(a: &Session, b: &Session) {
        assert_eq!(a.items, b.items);
        assert_eq!(a.retired, b.retired);
        assert_eq!(a.ids, b.ids);
        assert_eq!(a.user_notes, b.user_notes);
        assert_eq!(a.history, b.history);
        assert_eq!(a.writes, b.writes);
    }

    #[test]
    fn a_session_survives_the_round_trip() {
        let s = busy_session();
        let (name, back) = decode(&encode("work", &s)).unwrap();
        assert_eq!(name, "work");
        same_state(&s, &back);
        let json: Json = serde_json::from_slice(&encode("work", &s)).unwrap();
        assert_eq!(json["schema_version"], SCHEMA_VERSION);
        assert_eq!(json["ledger"]["calls"], 1);
        assert_eq!(json["breaker"]["calls"], 1);
        assert_eq!(json["retired"][0]["id"], "t2");
    }

    #[test]
    fn a_stopped_session_stays_stopped_after_the_round_trip() {
        let mut s = busy_session();
        assert!(s.stop("interrupted by the user").unwrap());
        let (_, back) = decode(&encode("work", &s)).unwrap();
        let stop = back.stopped.as_ref().expect("the stop is kept");
        assert_eq!(stop.reason, "interrupted by the user");
        assert_eq!(stop.running.as_deref(), Some("t3"));
        assert_eq!(Some(stop), s.stopped.as_ref());
        // A stop mark that a todo_write would refuse is dropped, not the file.
        let mut json: Json = serde_json::from_slice(&encode("work", &s)).unwrap();
        json["stopped"]["reason"] = json!("x".repeat(MAX_STOP_REASON_CHARS + 1));
        let (_, back) = decode(&serde_json::to_vec(&json).unwrap()).unwrap();
        assert_eq!(back.stopped, None);
        assert_eq!(back.items, s.items);
    }

    #[test]
    fn undo_works_after_a_restore_and_ids_stay_retired() {
        let s = busy_session();
        let (_, mut back) = decode(&encode("work", &s)).unwrap();
        assert!(back.undo().unwrap().contains("add by the user"));
        assert_eq!(back.items.len(), 2);
        assert_eq!(
            back.add("Next".into(), None, &Limits::default())
                .unwrap()
                .id,
            "t5"
        );
    }

    #[test]
    fn a_list_with_repeated_ids_from_efrit_comes_back() {
        let mut s = Session::default();
        let ext = |id: &str, content: &str| crate::session::ExternalItem {
            id: Some(id.into()),
            content: content.into(),
            status: Status::Pending,
            priority: None,
            created: None,
            completed: None,
        };
        s.set_all(
            vec![ext("todo-1", "a"), ext("todo-1", "b")],
            &Limits::default(),
        )
        .unwrap();
        let (_, back) = decode(&encode("dup", &s)).unwrap();
        assert_eq!(back.items, s.items);
    }

    #[test]
    fn a_first_layout_file_loads() {
        let v1 = json!({"schema_version": 1, "session": "old", "counter": 7,
                        "todos": [{"id": "t7", "content": "Keep me", "status": "in_progress", "created": 1.0}]});
        let (name, s) = decode(v1.to_string().as_bytes()).unwrap();
        assert_eq!(name, "old");
        assert_eq!(s.items[0].active_form, "Keep me");
        assert_eq!(s.items[0].status, Status::InProgress);
        assert!(s.history.is_empty());
        let mut s = s;
        assert_eq!(s.allocate_id(), "t8");
    }

    #[test]
    fn damaged_files_are_refused_with_a_reason() {
        let good = encode("work", &busy_session());
        for cut in [0, 1, good.len() / 2, good.len() - 1] {
            assert!(
                matches!(decode(&good[..cut]), Err(LoadError::Corrupt(_))),
                "cut at {cut}"
            );
        }
        let cases = [
            json!([1, 2]),
            json!({"session": "x", "items": []}),
            json!({"schema_version": "2", "session": "x", "items": []}),
            json!({"schema_version": 2, "session": "", "items": []}),
            json!({"schema_version": 2, "session": "x", "items": [{"id": "t1", "content": "a", "status": "done"}]}),
            json!({"schema_version": 2, "session": "x", "items": [{"id": "", "content": "a", "status": "pending"}]}),
            json!({"schema_version": 2, "session": "x", "items": {}}),
        ];
        for case in cases {
            assert!(
                matches!(
                    decode(case.to_string().as_bytes()),
                    Err(LoadError::Corrupt(_))
                ),
                "{case}"
            );
        }
        let newer = json!({"schema_version": 99, "session": "x", "items": []});
        assert!(matches!(
            decode(newer.to_string().as_bytes()),
            Err(LoadError::Newer(99))
        ));
    }

    /// A file of `busy_session` stopped, as JSON to damage.
    fn busy_file() -> (Session, Json) {
        let mut s = busy_session();
        s.user_notes.push("the user added t4".into());
        assert!(s.stop("interrupted").unwrap());
        let json = serde_json::from_slice(&encode("work", &s)).unwrap();
        (s, json)
    }

    #[test]
    fn a_bad_record_only_field_drops_that_part_and_keeps_the_list() {
        let (s, good) = busy_file();
        assert!(good["history"][0]["undo"].is_object() && good["retired"][0].is_object());
        type Damage = fn(&mut Json);
        let cases: [(Damage, &str); 14] = [
            (|j| j["breaker"]["calls"] = json!(-1), "breaker.calls:"),
            (|j| j["breaker"] = json!([1, 2]), "breaker:"),
            (
                |j| j["ledger"]["tools"]["eval"] = json!("many"),
                "ledger.tools.eval:",
            ),
            (
                |j| j["ledger"]["first"] = json!("yesterday"),
                "ledger.first:",
            ),
            (
                |j| j["history"][1]["kind"] = json!("explode"),
                "history[1].kind:",
            ),
            (|j| j["history"][2]["seq"] = json!(-5), "history[2].seq:"),
            (
                |j| j["history"][0]["undo"]["added"] = json!([7]),
                "history[0].undo.added[0]:",
            ),
            (|j| j["history_seq"] = json!("many"), "history_seq:"),
            (|j| j["stopped"]["at"] = json!("just now"), "stopped.at:"),
            (|j| j["user_notes"] = json!(["fine", 5]), "user_notes[1]:"),
            (
                |j| j["retired"][0]["status"] = json!("gone"),
                "retired[0].status:",
            ),
            (|j| j["saved_at"] = json!("now"), "saved_at:"),
            (|j| j["created"] = json!({}), "created:"),
            (|j| j["writes"] = json!(-3), "writes:"),
        ];
        for (damage, path) in cases {
            let mut json = good.clone();
            damage(&mut json);
            let decoded = decode_within(&serde_json::to_vec(&json).unwrap(), &Limits::default())
                .unwrap_or_else(|e| panic!("{path} lost the whole list: {e}"));
            assert_eq!(decoded.session.items, s.items, "{path}");
            assert_eq!(decoded.session.ids.issued(), s.ids.issued(), "{path}");
            assert_eq!(decoded.warnings.len(), 1, "{path}: {:?}", decoded.warnings);
            assert!(
                decoded.warnings[0].starts_with(path),
                "{path}: {:?}",
                decoded.warnings
            );
            assert!(
                decoded.warnings[0].contains("dropped"),
                "{:?}",
                decoded.warnings
            );
            // The part goes, the rest stays.
            let part = path.split(['.', '[', ':']).next().unwrap();
            match part {
                "history" => assert!(decoded.session.history.is_empty()),
                "retired" => assert!(decoded.session.retired.is_empty()),
                "stopped" => assert!(decoded.session.stopped.is_none()),
                "user_notes" => assert!(decoded.session.user_notes.is_empty()),
                _ => {}
            }
            if part != "history" {
                assert_eq!(decoded.session.history, s.history, "{path}");
            }
            if part != "stopped" {
                assert_eq!(decoded.session.stopped, s.stopped, "{path}");
            }
        }
        // The list itself is not a record: a bad item still refuses the file,
        // naming it.
        let mut json = good.clone();
        json["items"][1]["content"] = json!(5);
        match decode_within(&serde_json::to_vec(&json).unwrap(), &Limits::default()) {
            Err(LoadError::Corrupt(why)) => assert!(why.starts_with("items[1].content:"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_is_read_within_the_limits_todo_write_keeps() {
        let limits = Limits {
            max_items: 5,
            max_content_chars: 20,
            ..Limits::default()
        };
        let item = |n: usize| json!({"id": format!("t{n}"), "content": format!("Item {n}"), "status": "pending", "created": 1.0});
        let file = |items: Vec<Json>| json!({"schema_version": 2, "session": "big", "id_counter": 9, "items": items});
        let refused =
            |json: &Json, what: &str| match decode_within(json.to_string().as_bytes(), &limits) {
                Err(e) => {
                    let why = e.to_string();
                    assert!(matches!(e, LoadError::Refused(_)), "{what}: {why}");
                    assert!(why.contains(what), "{what}: {why}");
                }
                Ok(d) => panic!("{what}: read {} items", d.session.items.len()),
            };
        assert_eq!(
            decode_within(
                file((1..=5).map(item).collect()).to_string().as_bytes(),
                &limits
            )
            .unwrap()
            .session
            .items
            .len(),
            5
        );
        refused(
            &file((1..=6).map(item).collect()),
            "6 items; the limit is 5",
        );
        let mut long = file(vec![item(1), item(2), item(3)]);
        long["items"][2]["content"] = json!("x".repeat(21));
        refused(
            &long,
            "items[2].content: is 21 characters long; the limit is 20",
        );
        let mut long = file(vec![item(1)]);
        long["items"][0]["activeForm"] = json!("é".repeat(21));
        refused(&long, "items[0].activeForm:");
        let mut counter = file(vec![item(1)]);
        counter["id_counter"] = json!(u64::MAX);
        refused(&counter, "id_counter:");
        let mut id = file(vec![item(1)]);
        id["items"][0]["id"] = json!(format!("t{}", u64::MAX));
        refused(&id, "items[0].id:");
        // Records are kept within their bounds: the newest changes, the
        // first retired items; the list stays.
        let mut s = Session::default();
        for n in 0..(MAX_CHANGES + 30) {
            write(
                &mut s,
                json!([{"content": format!("step {n}"), "status": "pending"}]),
            );
        }
        let mut json: Json = serde_json::from_slice(&encode("long", &s)).unwrap();
        let mut history = json["history"].as_array().unwrap().clone();
        let extra: Vec<Json> = history.iter().take(60).cloned().collect();
        history.splice(
            0..0,
            extra.into_iter().map(|mut c| {
                c["seq"] = json!(c["seq"].as_u64().unwrap() - 100);
                c
            }),
        );
        json["history"] = Json::Array(history);
        let decoded =
            decode_within(&serde_json::to_vec(&json).unwrap(), &Limits::default()).unwrap();
        assert_eq!(decoded.session.history.len(), MAX_CHANGES);
        assert_eq!(
            decoded.session.history.changes().last(),
            s.history.changes().last()
        );
        assert!(
            decoded
                .warnings
                .iter()
                .any(|w| w.starts_with("history:") && w.contains("260")),
            "{:?}",
            decoded.warnings
        );
        let retired: Vec<Json> = (0..MAX_STORED_RETIRED + 5).map(|n| item(n + 10)).collect();
        let mut json = file(vec![item(1)]);
        json["retired"] = Json::Array(retired);
        let decoded = decode_within(json.to_string().as_bytes(), &Limits::default()).unwrap();
        assert_eq!(decoded.session.retired.len(), MAX_STORED_RETIRED);
        assert!(
            decoded.warnings.iter().any(|w| w.starts_with("retired:")),
            "{:?}",
            decoded.warnings
        );
        // A retired item over the content limit is dropped with its part.
        let mut json = file(vec![item(1)]);
        json["retired"] = json!([{"id": "t2", "content": "y".repeat(30), "status": "completed"}]);
        let decoded = decode_within(json.to_string().as_bytes(), &limits).unwrap();
        assert!(decoded.session.retired.is_empty());
        assert!(
            decoded
                .warnings
                .iter()
                .any(|w| w.starts_with("retired[0].content:")),
            "{:?}",
            decoded.warnings
        );
    }

    fn arb_status() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["pending", "in_progress", "completed", "cancelled"])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_reachable_state_round_trips(
            writes in prop::collection::vec(prop::collection::vec(("\\PC{1,20}", arb_status()), 0..8), 1..6),
            undos in 0usize..4,
            name in "\\PC{1,40}",
        ) {
            prop_assume!(check_session_name(&name).is_ok());
            let mut s = Session::default();
            for list in writes {
                let todos: Vec<Json> = list.iter().map(|(c, st)| json!({"content": c, "status": st})).collect();
                let input = Input::from_json(&json!({ "todos": todos }));
                let _ = s.write(&input, &Options::default(), false, vec![]);
                // Subtasks too: the second item under the first.
                if let [first, second, ..] = s.items.as_slice() {
                    let todos = json!([{"id": second.id, "parent": first.id}]);
                    let _ = s.write(&Input::from_json(&json!({"merge": true, "todos": todos})), &Options::default(), false, vec![]);
                }
            }
            for _ in 0..undos {
                s.undo();
            }
            let (back_name, back) = decode(&encode(&name, &s)).unwrap();
            prop_assert_eq!(back_name, name.clone());
            prop_assert_eq!(&back.items, &s.items);
            prop_assert_eq!(&back.retired, &s.retired);
            prop_assert_eq!(&back.history, &s.history);
            prop_assert_eq!(back.ids.issued(), s.ids.issued());
            let file = file_name(&name);
            prop_assert!(file.len() <= MAX_ENCODED + 5 && !file.contains('/'));
        }
    }
}

#[cfg(test)]
mod parent_tests {
    use super::*;
    use crate::session::Options;
    use crate::store::encode::encode;
    use crate::validate::Input;
    use serde_json::{json, Value as Json};

    #[test]
    fn parents_are_saved_and_read_back() {
        let mut s = Session::default();
        let write = |s: &mut Session, input: Json| {
            s.write(
                &Input::from_json(&input),
                &Options::default(),
                false,
                vec![],
            )
            .unwrap()
        };
        write(
            &mut s,
            json!({"todos": [{"content": "Ship", "status": "in_progress"}, {"content": "Tag", "status": "pending"}]}),
        );
        write(
            &mut s,
            json!({"merge": true, "todos": [{"content": "Build", "parent": "t1"}, {"id": "t2", "parent": "t1"}]}),
        );
        let bytes = encode("tree", &s);
        let json: Json = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            json["items"][0].get("parent"),
            None,
            "a top-level item has no parent key"
        );
        assert_eq!(json["items"][1]["parent"], "t1");
        let (_, back) = decode(&bytes).unwrap();
        assert_eq!(back.items, s.items);
        assert_eq!(back.history, s.history);
        let mut back = back;
        assert!(back.undo().is_some());
        assert_eq!(
            back.items
                .iter()
                .map(|i| i.parent.as_deref())
                .collect::<Vec<_>>(),
            [None, None]
        );
    }

    #[test]
    fn bad_parents_in_a_file_are_dropped_and_the_items_kept() {
        let item = |id: &str, parent: Option<&str>| {
            let mut item = json!({"id": id, "content": format!("Item {id}"), "status": "pending", "created": 1.0});
            if let Some(parent) = parent {
                item["parent"] = json!(parent);
            }
            item
        };
        let file = json!({"schema_version": 2, "session": "bad", "id_counter": 9, "items": [
            item("t1", None), item("t2", Some("t9")), item("t3", Some("t4")), item("t4", Some("t3")),
            item("t5", Some("t1")), item("t6", Some("t5")), item("t7", Some("t6")), item("t8", Some("t7"))]});
        let (_, s) = decode(file.to_string().as_bytes()).unwrap();
        // t2's parent is unknown, t3 closes a cycle, t7 would be a fourth
        // level: each loses its parent, and t7 keeps its own subtask t8.
        let parents: Vec<(&str, Option<&str>)> = s
            .items
            .iter()
            .map(|i| (i.id.as_str(), i.parent.as_deref()))
            .collect();
        assert_eq!(
            parents,
            [
                ("t1", None),
                ("t2", None),
                ("t3", None),
                ("t4", Some("t3")),
                ("t5", Some("t1")),
                ("t6", Some("t5")),
                ("t7", None),
                ("t8", Some("t7"))
            ]
        );
        // A file of the layout before subtasks reads as top-level items.
        let old = json!({"schema_version": 2, "session": "old", "items": [item("t1", None)]});
        assert_eq!(
            decode(old.to_string().as_bytes()).unwrap().1.items[0].parent,
            None
        );
    }
}

#[cfg(test)]
mod graph_tests {
    use super::*;
    use crate::store::encode::encode;
    use crate::store::test_support::texts_of_each;
    use serde_json::{json, Value as Json};

    #[test]
    fn blockers_owners_and_descriptions_are_saved_and_read_back() {
        let mut s = Session::default();
        let options = crate::session::Options::default();
        let task = |s: &mut Session, tool: &str, v: Json| {
            s.task_tool(tool, &Input::from_json(&v), &options).unwrap();
        };
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Build", "description": "release build"}),
        );
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Test", "blockedBy": ["t1"]}),
        );
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t2", "owner": "tester"}),
        );
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        );
        let bytes = encode("graph", &s);
        let json: Json = serde_json::from_slice(&bytes).unwrap();
        // The full edge list is saved, finished blocker included.
        assert_eq!(json["items"][1]["blockedBy"], json!(["t1"]));
        assert_eq!(json["items"][0].get("blockedBy"), None);
        let (_, back) = decode(&bytes).unwrap();
        assert_eq!(back.items, s.items);
        assert_eq!(back.items[0].description.as_deref(), Some("release build"));
        assert_eq!(back.items[1].owner.as_deref(), Some("tester"));
    }

    #[test]
    fn another_emacs_running_agents_take_their_names() {
        let mut s = Session::default();
        s.peer_start("efrit").unwrap();
        let mut json: Json = serde_json::from_slice(&encode("proj", &s)).unwrap();
        // Read back here, this Emacs's own agents are no one else's.
        let (_, back) = decode(&serde_json::to_vec(&json).unwrap()).unwrap();
        assert!(back.agents.elsewhere().is_empty());
        // As another Emacs's, on this host, alive (this process's parent).
        let host = super::super::holder::this_holder()
            .rsplit_once(':')
            .unwrap()
            .0
            .to_string();
        // SAFETY: getppid has no preconditions.
        let parent = format!("{host}:{}", unsafe { libc::getppid() });
        json["peers"][0]["holder"] = json!(parent);
        let bytes = serde_json::to_vec(&json).unwrap();
        let mut other = decode_as(&bytes, &Limits::default(), false)
            .unwrap()
            .session;
        assert_eq!(other.agents.elsewhere().len(), 1);
        assert_eq!(other.peer_start("efrit").unwrap(), "efrit-2");
        // Saved again, both are recorded; the other Emacs's first.
        let again: Json = serde_json::from_slice(&encode("proj", &other)).unwrap();
        assert_eq!(texts_of_each(&again, "peers", "name"), ["efrit-2", "efrit"]);
        // A bad entry drops the part, with a warning; the list stays.
        json["peers"][0]["holder"] = json!("a\nb");
        let decoded = decode_as(
            &serde_json::to_vec(&json).unwrap(),
            &Limits::default(),
            false,
        )
        .unwrap();
        assert!(decoded.session.agents.elsewhere().is_empty());
        assert!(
            decoded.warnings.iter().any(|w| w.contains("peers")),
            "{:?}",
            decoded.warnings
        );
    }

    #[test]
    fn agents_are_saved_and_their_running_tasks_come_back_pending() {
        let mut s = Session::default();
        let options = crate::session::Options::default();
        let task = |s: &mut Session, agent: Option<&str>, tool: &str, v: Json| {
            let input = Input::from_json(&v);
            s.write_as_agent(agent, |s| s.task_tool(tool, &input, &options))
                .unwrap();
        };
        task(&mut s, None, "TaskCreate", json!({"subject": "Plan"}));
        task(
            &mut s,
            None,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "in_progress"}),
        );
        task(&mut s, None, "TaskCreate", json!({"subject": "Patch"}));
        s.agent_start("executor").unwrap();
        s.agent_start("researcher").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        );
        let bytes = encode("team", &s);
        let json: Json = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["agents"], json!(["executor", "researcher"]));
        let (_, back) = decode(&bytes).unwrap();
        assert_eq!(back.agents.known(), ["executor", "researcher"]);
        assert!(back.running_agents().is_empty());
        assert_eq!(back.items[0].status, Status::InProgress, "the lead's stays");
        assert_eq!(back.items[1].status, Status::Pending);
        assert_eq!(back.items[1].owner.as_deref(), Some("executor"));
        // Another Emacs's save of a shared list: its agents may be running.
        let taken = decode_as(&bytes, &Limits::default(), false).unwrap();
        assert_eq!(taken.session.items[1].status, Status::InProgress);
        assert_eq!(taken.session.items[1].owner.as_deref(), Some("executor"));
        // The running agents are saved with the Emacs that runs them.
        assert_eq!(json["peers"][0]["name"], "executor");
        assert_eq!(
            json["peers"][0]["holder"],
            super::super::holder::this_holder()
        );
        // A file without agents: none known; a bad list is dropped with a
        // warning and the items kept.
        assert!(decode(&encode("solo", &Session::default()))
            .unwrap()
            .1
            .agents
            .is_empty());
        let mut bad = json.clone();
        bad["agents"] = json!(["executor", 7]);
        let decoded = decode_within(bad.to_string().as_bytes(), &Limits::default()).unwrap();
        assert!(decoded.session.agents.is_empty());
        assert!(
            decoded.warnings.iter().any(|w| w.starts_with("agents")),
            "{:?}",
            decoded.warnings
        );
        assert_eq!(decoded.session.items.len(), 2);
    }

    #[test]
    fn a_file_written_before_the_graph_loads_unchanged() {
        // The layout of a save made before items had blockers: no
        // description, blockedBy or owner keys.
        let old = r#"{"schema_version": 2, "session": "old", "id_counter": 2, "items": [
            {"id": "t1", "content": "Build", "activeForm": "Building", "status": "completed", "created": 1.0, "completed": 2.0},
            {"id": "t2", "content": "Test", "activeForm": "Testing", "status": "pending", "created": 1.0}]}"#;
        let decoded = decode_within(old.as_bytes(), &Limits::default()).unwrap();
        assert!(decoded.warnings.is_empty(), "{:?}", decoded.warnings);
        let items = &decoded.session.items;
        assert_eq!(items.len(), 2);
        assert!(items
            .iter()
            .all(|i| i.blocked_by.is_empty() && i.owner.is_none() && i.description.is_none()));
        assert_eq!(
            (items[1].content.as_str(), items[1].active_form.as_str()),
            ("Test", "Testing")
        );
    }

    #[test]
    fn bad_blockers_in_a_file_are_dropped_with_a_warning_and_the_items_kept() {
        let item = |id: &str, blocked_by: &[&str]| json!({"id": id, "content": format!("Item {id}"), "status": "pending", "created": 1.0, "blockedBy": blocked_by});
        let file = json!({"schema_version": 2, "session": "bad", "id_counter": 4, "items": [
            item("t1", &["t9"]), item("t2", &["t3"]), item("t3", &["t2", "t3"]), item("t4", &["t1"])]});
        let decoded = decode_within(file.to_string().as_bytes(), &Limits::default()).unwrap();
        let edges: Vec<(&str, Vec<String>)> = decoded
            .session
            .items
            .iter()
            .map(|i| (i.id.as_str(), i.blocked_by.clone()))
            .collect();
        assert_eq!(edges.len(), 4);
        assert!(edges[0].1.is_empty(), "t9 is no item");
        assert_eq!(edges[3].1, ["t1"]);
        assert_eq!(
            edges[1].1.len() + edges[2].1.len(),
            1,
            "the cycle is cut once: {edges:?}"
        );
        let warnings = decoded.warnings.join("\n");
        assert!(
            warnings.contains("dependency of t1 on t9: no item has that id"),
            "{warnings}"
        );
        assert!(
            warnings.contains("t3 on t3: an item cannot wait for itself"),
            "{warnings}"
        );
        assert!(warnings.contains("it closed a cycle"), "{warnings}");
    }

    #[test]
    fn a_file_where_a_subtask_waits_for_its_parent_loses_that_wait() {
        let item = |id: &str, parent: Option<&str>, blocked_by: &[&str]| json!({"id": id, "content": format!("Item {id}"), "status": "pending", "created": 1.0, "parent": parent, "blockedBy": blocked_by});
        let file = json!({"schema_version": 2, "session": "bad", "id_counter": 3, "items": [
            item("t1", None, &["t2"]), item("t2", Some("t1"), &[]), item("t3", Some("t1"), &["t1"])]});
        let decoded = decode_within(file.to_string().as_bytes(), &Limits::default()).unwrap();
        assert!(decoded
            .session
            .items
            .iter()
            .all(|item| item.blocked_by.is_empty()));
        let warnings = decoded.warnings.join("\n");
        assert!(
            warnings.contains("dependency of t1 on t2: a parent already waits for its subtasks"),
            "{warnings}"
        );
        assert!(
            warnings.contains("dependency of t3 on t1: a subtask cannot wait for its ancestor"),
            "{warnings}"
        );
    }
}

//! Persistence: one JSON file per session, written atomically, read back
//! with older layouts upgraded and damaged files moved aside.
//!
//! Saving never runs on the caller's path: `schedule` only marks a session
//! dirty and a writer thread, 20 ms later, writes the newest state of each
//! dirty session (latest state wins, so a burst of changes costs one write).  `flush`
//! writes everything pending before it returns, for `kill-emacs-hook`,
//! `efrit-todo-save` and tests.  The last step of a save, syncing the
//! directory and freeing the replaced file, is the thread's too (`settle`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use once_cell::sync::Lazy;
use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
#[cfg(test)]
use serde_json::Value as Json;

use crate::breaker::BreakerState;
use crate::history::{
    Actor, Change, ChangeKind, ChangedIds, History, UndoData, MAX_CHANGES, MAX_UNDO_ITEMS,
};
use crate::ledger::Entry;
use crate::model::{id_number, now, Item, Status, Timestamp, MAX_ID_NUMBER};
use crate::session::{check_session_name, registry, Session, Stop, MAX_STOP_REASON_CHARS};
use crate::validate::{checked_text, Input, Limits};

/// The layout this code writes.  Version 1 was the first, list-only layout:
/// `session`, `counter` and `todos`.
pub const SCHEMA_VERSION: u64 = 2;

/// Suffix of state files.
pub const EXTENSION: &str = "json";

/// Retired items kept in a file, newest first.  Ids beyond them are still
/// never reissued (the counter is saved); only bringing such an item back
/// by its id after a restore is lost.
pub const MAX_STORED_RETIRED: usize = 1000;

/// Temporary files older than this are leftovers of a crashed write.
const STALE_TEMP: Duration = Duration::from_secs(600);

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

// ---------------------------------------------------------------------------
// File names

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Encoded names longer than this are cut and end in a hash of the whole
/// name, so that the temporary file's name stays within 255 bytes.
const MAX_ENCODED: usize = 160;

/// The file name for SESSION.  Lowercase ASCII letters, digits and `-` stay;
/// every other byte becomes `%XX` (uppercase hex), so names that differ only
/// in case still differ on case-insensitive file systems, and no name can
/// climb out of the directory or hide as a dot file.
pub fn file_name(session: &str) -> String {
    let mut encoded = String::with_capacity(session.len() + 8);
    for byte in session.bytes() {
        if byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    if encoded.len() > MAX_ENCODED {
        let mut cut = MAX_ENCODED - 20;
        // Never split a %XX escape.
        while encoded.as_bytes()[cut - 1] == b'%' || encoded.as_bytes()[cut - 2] == b'%' {
            cut -= 1;
        }
        encoded.truncate(cut);
        let _ = write!(encoded, "~{:016x}", fnv1a(session));
    }
    encoded.push('.');
    encoded.push_str(EXTENSION);
    encoded
}

pub fn file_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(file_name(session))
}

// ---------------------------------------------------------------------------
// The file layout

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
            created: self.created,
            started: self.started,
            completed: self.completed,
        })
    }
}

/// How the session stopped with items open, so that a list left by an
/// interrupted command is taken over after a restart too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct StoredStop {
    reason: String,
    at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    running: Option<String>,
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
struct LedgerSummary {
    calls: usize,
    errors: usize,
    tools: BTreeMap<String, usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<Timestamp>,
}

impl LedgerSummary {
    fn of(entries: &[Entry]) -> LedgerSummary {
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
    fn catch_up(&mut self, entries: &[Entry]) {
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
}

/// Just the version, to tell a newer layout from a damaged file.
#[derive(Deserialize)]
struct VersionOnly {
    schema_version: u64,
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
    fn into_session(self, limits: &Limits) -> Result<Decoded, LoadError> {
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

        let mut session = Session::default();
        session.ids.raise_to(self.id_counter);
        for item in items.iter().chain(&retired) {
            session.ids.observe(&item.id);
        }
        session.items = items;
        // A parent the list does not hold, a cycle or a fourth level (a
        // damaged or hand-edited file) is dropped; the items stay.
        crate::tree::repair(&mut session.items, &[]);
        session.retired = retired
            .into_iter()
            .map(|item| (item.id.clone(), item))
            .collect();
        session.created = created;
        session.writes = writes;
        session.user_notes = user_notes;
        session.history = History::from_parts(history, history_seq);
        session.stopped = stopped;
        Ok(Decoded {
            name: self.session,
            session,
            generation,
            warnings: records.warnings,
        })
    }
}

// ---------------------------------------------------------------------------
// Encoding: the same layout as the `Stored*` types above, written from
// borrowed data.  A save runs this under the registry's lock, so it must
// cost no more than reading the session once: no clones, no intermediate
// values.  The round-trip tests hold the two sides to one layout.

#[derive(Serialize)]
struct ItemOut<'a> {
    id: &'a str,
    content: &'a str,
    #[serde(rename = "activeForm")]
    active_form: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<&'a str>,
    created: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    started: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed: Option<Timestamp>,
}

impl<'a> ItemOut<'a> {
    fn of(item: &'a Item) -> ItemOut<'a> {
        ItemOut {
            id: &item.id,
            content: &item.content,
            active_form: &item.active_form,
            status: item.status.wire_name(),
            priority: item.priority.as_deref(),
            parent: item.parent.as_deref(),
            created: item.created,
            started: item.started,
            completed: item.completed,
        }
    }
}

/// A sequence of items written as a JSON array without collecting it.
#[derive(Clone)]
struct ItemsOut<I>(I);

impl<'a, I: Iterator<Item = &'a Item> + Clone> ItemsOut<I> {
    fn is_empty(&self) -> bool {
        self.0.clone().next().is_none()
    }
}

impl<'a, I: Iterator<Item = &'a Item> + Clone> Serialize for ItemsOut<I> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.clone().map(ItemOut::of))
    }
}

type SliceItems<'a> = ItemsOut<std::slice::Iter<'a, Item>>;

#[derive(Serialize)]
struct UndoOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    order: Option<&'a [String]>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    added: &'a [String],
    #[serde(skip_serializing_if = "ItemsOut::is_empty")]
    before: SliceItems<'a>,
    #[serde(skip_serializing_if = "ItemsOut::is_empty")]
    retired_before: SliceItems<'a>,
}

#[derive(Serialize)]
struct ChangeOut<'a> {
    seq: u64,
    actor: &'static str,
    kind: &'static str,
    time: Timestamp,
    summary: &'a str,
    ids: &'a ChangedIds,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    undone: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    undoes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    undo: Option<UndoOut<'a>>,
}

impl<'a> ChangeOut<'a> {
    fn of(change: &'a Change) -> ChangeOut<'a> {
        ChangeOut {
            seq: change.seq,
            actor: change.actor.name(),
            kind: change.kind.name(),
            time: change.time,
            summary: &change.summary,
            ids: &change.ids,
            undone: change.undone,
            undoes: change.undoes,
            undo: change.undo.as_ref().map(|undo| UndoOut {
                order: undo.order.as_deref(),
                added: &undo.added,
                before: ItemsOut(undo.before.iter()),
                retired_before: ItemsOut(undo.retired_before.iter()),
            }),
        }
    }
}

/// The newest `MAX_STORED_RETIRED` retired items, in id order so that equal
/// states give equal files.  Only references are gathered.
struct RetiredOut<'a>(Vec<&'a Item>);

impl<'a> RetiredOut<'a> {
    fn of(session: &'a Session) -> RetiredOut<'a> {
        let mut retired: Vec<&Item> = session.retired.values().collect();
        if retired.len() > MAX_STORED_RETIRED {
            retired.select_nth_unstable_by(MAX_STORED_RETIRED, |a, b| {
                b.created
                    .total_cmp(&a.created)
                    .then_with(|| a.id.cmp(&b.id))
            });
            retired.truncate(MAX_STORED_RETIRED);
        }
        retired.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        RetiredOut(retired)
    }
}

impl Serialize for RetiredOut<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|item| ItemOut::of(item)))
    }
}

struct HistoryOut<'a>(&'a History);

impl Serialize for HistoryOut<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.changes().map(ChangeOut::of))
    }
}

#[derive(Serialize)]
struct StateOut<'a> {
    schema_version: u64,
    session: &'a str,
    generation: u64,
    saved_at: Timestamp,
    created: Timestamp,
    id_counter: u64,
    writes: u64,
    items: SliceItems<'a>,
    retired: RetiredOut<'a>,
    user_notes: &'a [String],
    breaker: BreakerState,
    ledger: &'a LedgerSummary,
    history_seq: u64,
    history: HistoryOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<StoredStop>,
}

impl<'a> StateOut<'a> {
    fn of(
        name: &'a str,
        session: &'a Session,
        ledger: &'a LedgerSummary,
        generation: u64,
    ) -> StateOut<'a> {
        let breaker = session.breaker.state();
        StateOut {
            schema_version: SCHEMA_VERSION,
            session: name,
            generation,
            saved_at: now(),
            created: session.created,
            id_counter: session.ids.issued(),
            writes: session.writes,
            items: ItemsOut(session.items.iter()),
            retired: RetiredOut::of(session),
            user_notes: &session.user_notes,
            breaker,
            ledger,
            history_seq: session.history.last_seq(),
            history: HistoryOut(&session.history),
            stopped: session.stopped.as_ref().map(|stop| StoredStop {
                reason: stop.reason.clone(),
                at: stop.at,
                running: stop.running.clone(),
            }),
        }
    }
}

/// The bytes of SESSION's file, as a first save (generation 0).
pub fn encode(name: &str, session: &Session) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_into(
        &mut bytes,
        name,
        session,
        &LedgerSummary::of(session.entries()),
        0,
    );
    bytes
}

/// Appends SESSION's file to BYTES: compact JSON written straight from the
/// session's own data, nothing copied on the way.
fn encode_into(
    bytes: &mut Vec<u8>,
    name: &str,
    session: &Session,
    ledger: &LedgerSummary,
    generation: u64,
) {
    // Serializing strings, numbers and sequences into memory cannot fail.
    let _ = serde_json::to_writer(
        &mut *bytes,
        &StateOut::of(name, session, ledger, generation),
    );
}

/// Reads a state file within the default limits: the session's name and
/// its state.
pub fn decode(bytes: &[u8]) -> Result<(String, Session), LoadError> {
    decode_within(bytes, &Limits::default()).map(|decoded| (decoded.name, decoded.session))
}

/// Reads a state file within LIMITS, the limits todo_write keeps: a list
/// over them is refused (`LoadError::Refused`), records over theirs cut.
pub fn decode_within(bytes: &[u8], limits: &Limits) -> Result<Decoded, LoadError> {
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
    state.into_session(limits)
}

// ---------------------------------------------------------------------------
// Disk

/// Creates DIR (mode 0700, its missing parents too) when it does not
/// exist, and checks that it is a directory only its user can write.
fn ensure_dir(dir: &Path) -> io::Result<()> {
    match fs::metadata(dir) {
        Ok(meta) => return check_dir(dir, &meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(explained(dir, e)),
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Ok(()) => check_dir(dir, &fs::metadata(dir)?),
        Err(e) => Err(explained(dir, e)),
    }
}

/// ERROR, met making or reading DIR, said plainly when a file stands where
/// the directory or one of its parents should be ("File exists" alone
/// says nothing about which).
fn explained(dir: &Path, error: io::Error) -> io::Error {
    let why = not_a_directory(dir);
    if why.kind() == io::ErrorKind::Other {
        why
    } else {
        error
    }
}

/// Why DIR cannot be a directory: the first of it and its parents that
/// exists and is not one (a file where the state directory should be).
fn not_a_directory(dir: &Path) -> io::Error {
    let dir: PathBuf = dir.components().collect();
    let culprit = dir.ancestors().find_map(|path| {
        let meta = fs::metadata(path).ok()?;
        let kind = if meta.is_dir() {
            return None;
        } else if meta.is_file() {
            "a file"
        } else {
            special_kind(meta.file_type())?
        };
        Some((path.to_path_buf(), kind))
    });
    match culprit {
        Some((path, kind)) if path == dir => io::Error::other(format!(
            "{} is {kind}, not a directory; set efrit-todo-state-directory to a directory",
            path.display()
        )),
        Some((path, kind)) => io::Error::other(format!(
            "{} is {kind}, not a directory, so the state directory {} cannot be made; set efrit-todo-state-directory to a directory",
            path.display(),
            dir.display()
        )),
        None => io::Error::new(io::ErrorKind::NotFound, format!("the state directory {} cannot be made", dir.display())),
    }
}

/// Refuses a state directory someone else could plant files in: its files
/// become text the model reads.  It must be a directory owned by this
/// process's user and writable by nobody else (group and others).
fn check_dir(dir: &Path, meta: &fs::Metadata) -> io::Result<()> {
    if !meta.is_dir() {
        return Err(not_a_directory(dir));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let dir: PathBuf = dir.components().collect();
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        let why = if meta.uid() != me {
            format!("is owned by user {}, not by you (user {me})", meta.uid())
        } else if meta.mode() & 0o002 != 0 {
            format!("is writable by others (mode {:o})", meta.mode() & 0o7777)
        } else if meta.mode() & 0o020 != 0 {
            format!("is writable by its group (mode {:o})", meta.mode() & 0o7777)
        } else {
            return Ok(());
        };
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the state directory {} {why}; its files become text the model reads, so efrit-todo neither reads nor writes there: make it yours alone (chmod go-w) or set efrit-todo-state-directory to a directory of your own",
                dir.display()
            ),
        ));
    }
    #[allow(unreachable_code)]
    Ok(())
}

fn create_private(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    // create_new never follows a symlink: one at PATH fails the call.
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// What kind of file TYPE is, when it is not a regular file.
fn special_kind(file_type: fs::FileType) -> Option<&'static str> {
    if file_type.is_file() {
        return None;
    }
    if file_type.is_dir() {
        return Some("a directory");
    }
    if file_type.is_symlink() {
        return Some("a symbolic link");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return Some("a FIFO");
        }
        if file_type.is_socket() {
            return Some("a socket");
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return Some("a device");
        }
    }
    Some("not a plain file")
}

fn not_regular(path: &Path, kind: &str) -> io::Error {
    io::Error::other(format!(
        "{} is not a regular file ({kind}); efrit-todo reads and replaces only regular files, so it leaves it alone",
        path.display()
    ))
}

/// Opens PATH for reading without ever blocking or following a symlink:
/// a FIFO, a device or a symlink at PATH is an error naming what it is,
/// never a read that waits for a writer.
fn open_regular(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW,
    );
    let file = match options.open(path) {
        Ok(file) => file,
        // O_NOFOLLOW fails on a symlink with ELOOP.
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_regular(path, "a symbolic link"))
        }
        Err(e) => return Err(e),
    };
    match special_kind(file.metadata()?.file_type()) {
        Some(kind) => Err(not_regular(path, kind)),
        None => Ok(file),
    }
}

/// The lock file of a state directory: saves of every Emacs sharing the
/// directory hold it from looking at a state file until theirs replaces it.
pub const LOCK_FILE: &str = ".efrit-todo.lock";

/// How long a save waits for another Emacs's save to let go of the lock.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The lock of a state directory, held until dropped.
struct DirLock(#[allow(dead_code)] Option<File>);

/// Takes the lock of DIR, waiting at most `LOCK_WAIT`.  On a file system
/// without locks the save goes on unlocked: the generation check still
/// catches all but a save landing in the same instant.
fn lock_dir(dir: &Path) -> io::Result<DirLock> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK_FILE);
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        let file = match options.open(&path) {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(not_regular(&path, "a symbolic link"))
            }
            Err(e) => return Err(e),
        };
        if let Some(kind) = special_kind(file.metadata()?.file_type()) {
            return Err(not_regular(&path, kind));
        }
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(DirLock(Some(file)));
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => {}
                Some(libc::ENOLCK) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                    return Ok(DirLock(None))
                }
                _ => return Err(error),
            }
            if Instant::now() >= deadline {
                return Err(io::Error::other(format!(
                    "another process has held {} for more than {} s",
                    path.display(),
                    LOCK_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(DirLock(None))
    }
}

/// Makes a rename in DIR durable.  Not every platform can open a directory.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        let mut options = OpenOptions::new();
        options.read(true);
        // Whatever DIR has become since, opening it never blocks.
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut options,
            libc::O_NONBLOCK | libc::O_DIRECTORY,
        );
        options.open(dir)?.sync_all()?;
    }
    let _ = dir;
    Ok(())
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A pause in the middle of every write, from the environment variable
/// EFRIT_TODO_TEST_WRITE_PAUSE_MS: the crash test kills a child Emacs while
/// a file is half written, which a real write is too quick to allow.
static TEST_WRITE_PAUSE: Lazy<Option<Duration>> = Lazy::new(|| {
    std::env::var("EFRIT_TODO_TEST_WRITE_PAUSE_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
});

/// What tells one version of a file from another without reading it:
/// a rename puts a new inode in place, a write in place changes the size
/// or the modification time.  Only ever compared for equality.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<SystemTime>,
}

fn file_id(meta: &fs::Metadata) -> FileId {
    #[cfg(unix)]
    let (device, inode) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (device, inode) = (0, 0);
    FileId {
        device,
        inode,
        len: meta.len(),
        modified: meta.modified().ok(),
    }
}

/// A file put in place by `replace_file`, before its directory is synced.
#[derive(Debug)]
pub struct Replaced {
    pub path: PathBuf,
    /// The new file's identity, as it now is at PATH.
    pub id: FileId,
    /// The file it replaced, still open.  The last close of a replaced file
    /// frees its blocks, which costs as much as the rename itself (measured
    /// ~110 us for 32 KB on ext4); holding it lets the writer thread pay
    /// that instead of the save.
    replaced: Option<File>,
}

/// Puts BYTES in DIR/FILE so that the file always holds either its old or
/// its new content: a temporary file in the same directory, written in one
/// call and synced, then renamed over FILE.  The rename is made durable by
/// syncing DIR, which is the caller's to do (see `write_atomic`).
pub fn replace_file(dir: &Path, file: &str, bytes: &[u8]) -> io::Result<Replaced> {
    ensure_dir(dir)?;
    let target = dir.join(file);
    // Only a regular file is replaced: a FIFO, a directory or a symlink
    // someone put there stays, and the save fails saying why.
    match fs::symlink_metadata(&target) {
        Ok(meta) => {
            if let Some(kind) = special_kind(meta.file_type()) {
                return Err(not_regular(&target, kind));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let temp = dir.join(format!(
        ".{file}.{}-{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut out = create_private(&temp)?;
        match *TEST_WRITE_PAUSE {
            None => out.write_all(bytes)?,
            Some(pause) => {
                let half = bytes.len() / 2;
                out.write_all(&bytes[..half])?;
                out.flush()?;
                std::thread::sleep(pause);
                out.write_all(&bytes[half..])?;
            }
        }
        // fdatasync, not fsync: it writes the data and every piece of
        // metadata needed to read it back (size, block map), skipping only
        // the times.  For a file created and filled here that is all that
        // matters before the rename, and it saves a journal write of the
        // inode's times (measured 396 against 503 us).
        out.sync_data()?;
        // A rename keeps the inode, the size and the modification time.
        let id = file_id(&out.metadata()?);
        drop(out);
        // Unix only: elsewhere an open file cannot be renamed over.
        // Never blocking: the target may have become a FIFO since the check.
        #[cfg(unix)]
        let replaced = open_regular(&target).ok();
        #[cfg(not(unix))]
        let replaced = None;
        fs::rename(&temp, &target)?;
        Ok((replaced, id))
    })();
    match written {
        Ok((replaced, id)) => Ok(Replaced {
            path: target,
            id,
            replaced,
        }),
        Err(e) => {
            let _ = fs::remove_file(&temp);
            Err(e)
        }
    }
}

/// Writes BYTES as DIR/FILE atomically and durably: `replace_file`, then an
/// fsync of DIR so that the rename survives a power cut too.
pub fn write_atomic(dir: &Path, file: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    let Replaced { path, replaced, .. } = replace_file(dir, file, bytes)?;
    drop(replaced);
    sync_dir(dir)?;
    Ok(path)
}

/// A session read back from a file.
#[derive(Debug)]
pub struct Loaded {
    pub name: String,
    pub session: Session,
    pub file: PathBuf,
}

/// What reading a directory found.
#[derive(Debug, Default)]
pub struct DirReport {
    pub loaded: Vec<Loaded>,
    /// Damaged files: where each was, where it went, what was wrong.
    pub moved_aside: Vec<(PathBuf, PathBuf, String)>,
    /// Files left where they are, and why (newer layout, over the limits,
    /// not a regular file, unreadable).
    pub skipped: Vec<(PathBuf, String)>,
    /// Parts of loaded files that were dropped or cut, and why.
    pub warnings: Vec<(PathBuf, String)>,
    /// The newest save of every session found, loaded or not (a finished
    /// one, with ONLY_OPEN): for `adopt`.
    pub seen: Vec<Seen>,
}

/// The newest save of a session in a directory.
#[derive(Debug, Clone)]
pub struct Seen {
    pub name: String,
    pub file: PathBuf,
    pub generation: u64,
    pub id: FileId,
}

/// The first free name among FILE.WHY, FILE.1.WHY, FILE.2.WHY...
fn aside_name(file: &Path, why: &str) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut candidate = file.with_file_name(format!("{name}.{why}"));
    let mut n = 1;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = file.with_file_name(format!("{name}.{n}.{why}"));
        n += 1;
    }
    candidate
}

/// Moves FILE aside as FILE.WHY (`corrupt`, `conflict`), so that it is
/// kept for inspection and no load or save meets it again.
fn move_aside_as(file: &Path, why: &str) -> io::Result<PathBuf> {
    let target = aside_name(file, why);
    fs::rename(file, &target)?;
    if let Some(dir) = file.parent() {
        let _ = sync_dir(dir);
    }
    Ok(target)
}

/// Moves a damaged file aside as FILE.corrupt.
pub fn move_aside(file: &Path) -> io::Result<PathBuf> {
    move_aside_as(file, "corrupt")
}

/// Moves the damaged FILE aside, unless it changed since it was read as
/// ID: another Emacs may have saved over it meanwhile.
fn move_aside_unchanged(file: &Path, id: Option<FileId>) -> io::Result<PathBuf> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let _lock = lock_dir(dir)?;
    let now = fs::symlink_metadata(file).map(|meta| file_id(&meta)).ok();
    if id.is_none() || now != id {
        return Err(io::Error::other(
            "it changed while it was read, so it is left for the next restore",
        ));
    }
    move_aside(file)
}

/// The largest file a list within LIMITS can make: every item, retired
/// item and earlier value kept for undo at its longest, at four bytes a
/// character, and the history's ids and summaries.  A bigger file is
/// refused before it is read, so that reading one costs bounded time.
pub fn max_file_bytes(limits: &Limits) -> u64 {
    let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let item = wide(limits.max_content_chars)
        .saturating_mul(8)
        .saturating_add(512);
    let items = wide(limits.max_items)
        .saturating_mul(2)
        .saturating_add(wide(MAX_STORED_RETIRED + MAX_UNDO_ITEMS));
    let history = wide(MAX_CHANGES).saturating_mul(
        wide(limits.max_items)
            .saturating_mul(16)
            .saturating_add(4096),
    );
    (1u64 << 20)
        .saturating_add(items.saturating_mul(item))
        .saturating_add(history)
}

/// Reads one state file within the default limits.
pub fn load_file(file: &Path) -> Result<(String, Session), LoadError> {
    load_file_within(file, &Limits::default()).map(|decoded| (decoded.name, decoded.session))
}

/// Reads one state file within LIMITS; only a regular file, never
/// following a symlink, and not one bigger than `max_file_bytes`.
pub fn load_file_within(file: &Path, limits: &Limits) -> Result<Decoded, LoadError> {
    let mut id = None;
    read_state_file(file, limits, &mut id)
}

/// `load_file_within`, and the identity of the file read in ID.
fn read_state_file(
    file: &Path,
    limits: &Limits,
    id: &mut Option<FileId>,
) -> Result<Decoded, LoadError> {
    let opened = open_regular(file)?;
    let meta = opened.metadata()?;
    *id = Some(file_id(&meta));
    let size = meta.len();
    let bound = max_file_bytes(limits);
    if size > bound {
        return Err(LoadError::Refused(format!(
            "{size} bytes, more than a list within efrit-todo-max-items ({}) and efrit-todo-max-content-length ({}) can take ({bound} bytes); not read",
            limits.max_items, limits.max_content_chars
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // At most one byte more than the size seen, should the file grow.
    io::Read::read_to_end(&mut io::Read::take(opened, size + 1), &mut bytes)?;
    decode_within(&bytes, limits)
}

fn is_stale_temp(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with('.')
        && name.ends_with(".tmp")
        && fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > STALE_TEMP)
}

/// Reads every state file in DIR within LIMITS.  With ONLY_OPEN, sessions
/// without unfinished items are left on disk.  Damaged files are moved
/// aside, files over the limits left alone; nothing here panics or gives
/// up on the other files.
pub fn load_dir(dir: &Path, only_open: bool, limits: &Limits) -> io::Result<DirReport> {
    let mut report = DirReport::default();
    match fs::metadata(dir) {
        Ok(meta) => check_dir(dir, &meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(explained(dir, e)),
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(report),
        Err(e) => return Err(e),
    };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut found = Vec::new();
    for file in files {
        if is_stale_temp(&file) {
            let _ = fs::remove_file(&file);
            continue;
        }
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with('.') || file.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
            continue;
        }
        // Named like a state file but not one: never opened, and said so.
        match fs::symlink_metadata(&file).map(|meta| special_kind(meta.file_type())) {
            Ok(None) => {}
            Ok(Some(kind)) => {
                report
                    .skipped
                    .push((file.clone(), not_regular(&file, kind).to_string()));
                continue;
            }
            Err(_) => continue,
        }
        let mut id = None;
        match read_state_file(&file, limits, &mut id) {
            Ok(decoded) => {
                if let Some(id) = id {
                    found.push((file, decoded, id));
                }
            }
            Err(LoadError::Corrupt(why)) => match move_aside_unchanged(&file, id) {
                Ok(to) => report.moved_aside.push((file, to, why)),
                Err(e) => report
                    .skipped
                    .push((file, format!("{why}; not moved aside: {e}"))),
            },
            Err(other) => report.skipped.push((file, other.to_string())),
        }
    }
    // Copies of a session's file (a backup, a file renamed by hand) hold
    // the same session: its newest save wins, by generation, never by file
    // name or time; at equal generations its own file does.
    let mut order: Vec<String> = Vec::new();
    let mut by_name: HashMap<String, Vec<(PathBuf, Decoded, FileId)>> = HashMap::new();
    for found in found {
        if !by_name.contains_key(&found.1.name) {
            order.push(found.1.name.clone());
        }
        by_name.entry(found.1.name.clone()).or_default().push(found);
    }
    for name in order {
        let Some(mut copies) = by_name.remove(&name) else {
            continue;
        };
        let own = file_name(&name);
        let rank = |(file, decoded, _): &(PathBuf, Decoded, FileId)| {
            (
                decoded.generation,
                file.file_name().is_some_and(|f| f.to_string_lossy() == own),
            )
        };
        let newest = (0..copies.len())
            .max_by_key(|&i| rank(&copies[i]))
            .unwrap_or(0);
        let (file, decoded, id) = copies.swap_remove(newest);
        for (copy, older, _) in copies {
            let age = if older.generation < decoded.generation {
                "an older copy"
            } else {
                "a copy"
            };
            report.skipped.push((
                copy,
                format!(
                    "it holds {age} of session {name:?} (generation {}); the newest save of it, generation {}, is {}",
                    older.generation,
                    decoded.generation,
                    file.display()
                ),
            ));
        }
        report.seen.push(Seen {
            name: name.clone(),
            file: file.clone(),
            generation: decoded.generation,
            id,
        });
        if !only_open || decoded.session.counts().open() > 0 {
            report
                .warnings
                .extend(decoded.warnings.into_iter().map(|w| (file.clone(), w)));
            report.loaded.push(Loaded {
                name,
                session: decoded.session,
                file,
            });
        }
    }
    Ok(report)
}

/// The newest save of each state file this process knows: the one it
/// wrote last, or read and took its list from.  A file found otherwise
/// holds a save this process has not seen, another Emacs's.
#[derive(Debug, Clone, Copy)]
struct Known {
    generation: u64,
    /// None when it was read from another file (a copy that won).
    id: Option<FileId>,
}

static KNOWN: Lazy<Mutex<HashMap<PathBuf, Known>>> = Lazy::new(Mutex::default);

/// Records that this process's list of SEEN's session, saved in DIR,
/// goes on from SEEN: saving it over that save is no conflict.
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

pub fn adopt(dir: &Path, seen: &Seen) {
    let target = file_path(dir, &seen.name);
    let id = (seen.file == target).then_some(seen.id);
    lock(&KNOWN).insert(
        target,
        Known {
            generation: seen.generation,
            id,
        },
    );
}

/// What a save finds at its state file's path.
enum OnDisk {
    Absent,
    /// This process's newest save of it, unchanged.
    Known,
    /// A save of SESSION of GENERATION, not the known one.
    Other {
        session: String,
        generation: u64,
    },
    /// Something that does not read as a state file.
    Damaged(String),
}

/// The start of a state file, enough to tell whose save it is.
#[derive(Deserialize)]
struct Header<'a> {
    schema_version: u64,
    session: String,
    #[serde(default, borrow)]
    generation: Option<&'a RawValue>,
}

/// Looks at TARGET before a save replaces it; KNOWN is this process's
/// newest save of it.  Only a file that changed since is read.
fn examine(target: &Path, known: Option<Known>) -> io::Result<OnDisk> {
    let meta = match fs::symlink_metadata(target) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OnDisk::Absent),
        Err(e) => return Err(e),
    };
    if let Some(kind) = special_kind(meta.file_type()) {
        return Err(not_regular(target, kind));
    }
    if known.and_then(|k| k.id) == Some(file_id(&meta)) {
        return Ok(OnDisk::Known);
    }
    let opened = open_regular(target)?;
    // Read whole, whatever its size: it is kept, not parsed into a list.
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut io::Read::take(opened, MAX_EXAMINED_BYTES), &mut bytes)?;
    match serde_json::from_slice::<Header>(&bytes) {
        Ok(header) if header.schema_version > SCHEMA_VERSION => {
            Err(newer_file(header.schema_version))
        }
        Ok(header) => {
            let generation = header
                .generation
                .and_then(|g| serde_json::from_str(g.get()).ok())
                .unwrap_or(0);
            Ok(OnDisk::Other {
                session: header.session,
                generation,
            })
        }
        Err(e) => match serde_json::from_slice::<VersionOnly>(&bytes) {
            Ok(VersionOnly { schema_version }) if schema_version > SCHEMA_VERSION => {
                Err(newer_file(schema_version))
            }
            _ if bytes.len() as u64 >= MAX_EXAMINED_BYTES => Ok(OnDisk::Other {
                session: String::new(),
                generation: 0,
            }),
            _ => Ok(OnDisk::Damaged(e.to_string())),
        },
    }
}

/// A file bigger than this found where a save goes is kept as a conflict
/// without being read to its end.
const MAX_EXAMINED_BYTES: u64 = 256 * 1024 * 1024;

fn newer_file(version: u64) -> io::Error {
    io::Error::other(format!(
        "its file was written by a newer efrit-todo (schema version {version}); not overwriting it"
    ))
}

// ---------------------------------------------------------------------------
// The writer

#[derive(Default)]
struct Queue {
    /// Dirty sessions and the directory each goes to.
    pending: HashMap<String, PathBuf>,
    /// Saves that failed: still pending, retried with backoff until one
    /// lands, and reported by every flush until then.
    failed: HashMap<String, Failed>,
    /// Directories holding renames not synced yet, and the files those
    /// renames replaced: the end of each save, which the writer thread
    /// finishes off the saving call's path (see `settle`).
    unsynced: HashSet<PathBuf>,
    replaced: Vec<File>,
    /// Failures of background writes, for the Lisp side to report.
    errors: Vec<String>,
    /// What saves did that the user must know (a conflict kept beside), not
    /// reported yet.
    warnings: Vec<String>,
    thread_started: bool,
    /// Flushes asked of the writer thread, and the newest it has done: a
    /// flush waits for the thread (a bounded time) rather than touching
    /// the disk itself, so that no file operation can hang Emacs.
    flushes_asked: u64,
    flushes_done: u64,
    /// The sessions of the batch the thread is writing, to name them when
    /// a flush gives up waiting.
    in_hand: Vec<String>,
}

impl Queue {
    fn idle(&self) -> bool {
        self.pending.is_empty()
            && self.unsynced.is_empty()
            && self.replaced.is_empty()
            && self.flushes_asked == self.flushes_done
    }

    /// The sessions whose saves have not landed, sorted.
    fn unsaved(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .pending
            .keys()
            .chain(self.failed.keys())
            .chain(&self.in_hand)
            .map(String::as_str)
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    fn record_failures(&mut self, failures: Vec<String>) {
        self.errors.extend(failures);
        let excess = self.errors.len().saturating_sub(MAX_ERRORS);
        self.errors.drain(..excess);
    }

    /// When the next failed save is due for a retry.
    fn next_retry(&self) -> Option<Instant> {
        self.failed.values().map(|f| f.retry_at).min()
    }

    /// Takes the pending saves, and the failed ones that are due (all of
    /// them with EVERY_FAILED).  A failed save stays in `failed` until one
    /// of its attempts lands.
    fn take_batch(&mut self, every_failed: bool) -> HashMap<String, PathBuf> {
        let mut batch = std::mem::take(&mut self.pending);
        let now = Instant::now();
        for (session, failed) in &self.failed {
            if every_failed || failed.retry_at <= now {
                batch
                    .entry(session.clone())
                    .or_insert_with(|| failed.dir.clone());
            }
        }
        batch
    }

    /// Records how the saves of a batch went: a landed save is no longer
    /// failed, a failed one is retried later, sooner after its first
    /// failure than after its tenth.  The writer thread is woken to
    /// time the retries.
    fn record_outcomes(&mut self, outcomes: Vec<Outcome>) {
        let now = Instant::now();
        if outcomes.iter().any(|o| o.failure.is_some()) && ensure_thread(self) {
            WRITER.wake.notify_one();
        }
        for Outcome {
            session,
            dir,
            failure,
        } in outcomes
        {
            let Some(message) = failure else {
                self.failed.remove(&session);
                continue;
            };
            let attempts = self.failed.get(&session).map_or(0, |f| f.attempts) + 1;
            // Said once in the background; the same failure again is not news.
            let reported = self
                .failed
                .get(&session)
                .is_some_and(|f| f.reported && f.message == message);
            let backoff = RETRY_FIRST
                .saturating_mul(1 << (attempts - 1).min(16))
                .min(RETRY_MAX);
            self.failed.insert(
                session,
                Failed {
                    dir,
                    message,
                    attempts,
                    retry_at: now + backoff,
                    reported,
                },
            );
        }
    }

    /// Failures not reported yet, each once: for `schedule`.
    fn news(&mut self) -> Vec<String> {
        let mut news = std::mem::take(&mut self.errors);
        for failed in self.failed.values_mut().filter(|f| !f.reported) {
            failed.reported = true;
            news.push(failed.describe());
        }
        news
    }

    /// Every save that has not landed, and the failures not reported yet:
    /// for `flush`, which must tell the truth every time.
    fn truth(&mut self) -> Vec<String> {
        let mut truth = std::mem::take(&mut self.errors);
        let mut failed: Vec<&mut Failed> = self.failed.values_mut().collect();
        failed.sort_by(|a, b| a.message.cmp(&b.message));
        for failed in failed {
            failed.reported = true;
            truth.push(failed.describe());
        }
        truth
    }
}

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

/// How one save of a batch went: None when it landed (or the session is gone).
struct Outcome {
    session: String,
    dir: PathBuf,
    failure: Option<String>,
}

/// A failed save is retried after this, then twice as long each time, up
/// to `RETRY_MAX`.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Failures kept until the Lisp side collects them.
const MAX_ERRORS: usize = 20;

/// What saves reuse from one to the next; it lives under `Writer::writing`.
#[derive(Default)]
struct Scratch {
    /// Every file is encoded here and written from here in one call.
    buffer: Vec<u8>,
    /// Each session's ledger summary as of its last save, brought up to
    /// date at the next one rather than counted again.
    ledgers: HashMap<String, LedgerSummary>,
}

/// A buffer grown past this by a huge list is given back after its save.
const MAX_KEPT_BUFFER: usize = 4 * 1024 * 1024;

struct Writer {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Signalled when the thread has done a flush.
    flushed: Condvar,
    /// Held for the whole of a save, snapshot included: saves of a session
    /// land in the order their snapshots were taken, so the file never goes
    /// back to an older state.
    writing: Mutex<Scratch>,
    /// Held while directories are synced, so that a flush returns only
    /// after a sync the thread has begun.
    settling: Mutex<()>,
}

static WRITER: Lazy<Writer> = Lazy::new(|| Writer {
    queue: Mutex::new(Queue::default()),
    wake: Condvar::new(),
    flushed: Condvar::new(),
    writing: Mutex::new(Scratch::default()),
    settling: Mutex::new(()),
});

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Saves SESSION into DIR now; the caller holds `writing`, which SCRATCH
/// comes from.  Ok(None) when the session does not exist.
///
/// A save never replaces a save of the file it has not seen: one written
/// by another Emacs since this one last wrote or read the file, or one of a
/// session this one never read (two Emacsen that started a session of the
/// same name).  That file is kept beside as FILE.conflict, with a warning,
/// and this save gets a generation above it.  The directory's lock keeps
/// the saves of all Emacsen apart from looking to replacing.
fn save_locked(scratch: &mut Scratch, session: &str, dir: &Path) -> io::Result<Option<Replaced>> {
    let file = file_name(session);
    let target = dir.join(&file);
    ensure_dir(dir)?;
    let _lock = lock_dir(dir)?;
    let known = lock(&KNOWN).get(&target).copied();
    let seen = known.map_or(0, |k| k.generation);
    let (generation, aside) = match examine(&target, known)? {
        OnDisk::Absent | OnDisk::Known => (seen, None),
        OnDisk::Damaged(why) => (seen, Some(("corrupt", why))),
        // The same session, no newer than what this process has: an older
        // copy put back, or a touch.  Nothing to keep.
        OnDisk::Other {
            session: name,
            generation,
        } if name == session && known.is_some_and(|k| generation <= k.generation) => (seen, None),
        OnDisk::Other { generation, .. } => (
            seen.max(generation),
            Some(("conflict", generation.to_string())),
        ),
    };
    let generation = generation.saturating_add(1);
    scratch.buffer.clear();
    {
        // The file is encoded under the registry's lock, straight from the
        // session: one pass over it, no copy (a copy took as long as the
        // encoding), and the ledger summary only counts the calls since the
        // last save.  Lisp calls wait for that, never for the disk.
        let registry = registry();
        let Some(state) = registry.get(session) else {
            scratch.ledgers.remove(session);
            return Ok(None);
        };
        let ledger = scratch.ledgers.entry(session.to_string()).or_default();
        ledger.catch_up(state.entries());
        encode_into(&mut scratch.buffer, session, state, ledger, generation);
    }
    if let Some((kind, what)) = aside {
        let kept = move_aside_as(&target, kind)?;
        let warning = if kind == "conflict" {
            format!(
                "session {session:?}: {} held a save this Emacs had not seen (generation {what}, by another Emacs or an earlier one); it was kept as {} and this Emacs's list saved in its place",
                target.display(),
                kept.display()
            )
        } else {
            format!(
                "session {session:?}: {} could not be read ({what}); it was moved aside as {} and this Emacs's list saved in its place",
                target.display(),
                kept.display()
            )
        };
        lock(&WRITER.queue).warnings.push(warning);
    }
    let replaced = replace_file(dir, &file, &scratch.buffer);
    if scratch.buffer.capacity() > MAX_KEPT_BUFFER {
        scratch.buffer = Vec::new();
    }
    let replaced = replaced?;
    lock(&KNOWN).insert(
        target,
        Known {
            generation,
            id: Some(replaced.id),
        },
    );
    Ok(Some(replaced))
}

/// The warnings of saves not reported yet: a save of another Emacs kept
/// beside as a conflict, a damaged file moved aside.
pub fn take_warnings() -> Vec<String> {
    std::mem::take(&mut lock(&WRITER.queue).warnings)
}

fn describe_failure(session: &str, dir: &Path, error: &io::Error) -> String {
    format!(
        "could not save session {session:?} in {}: {error}",
        dir.display()
    )
}

/// Saves every session of BATCH and leaves the syncing of their
/// directories, one sync per directory, to `settle`.  Returns how each went.
fn write_batch(scratch: &mut Scratch, batch: HashMap<String, PathBuf>) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut done = Vec::new();
    for (session, dir) in batch {
        let failure = match save_locked(scratch, &session, &dir) {
            Ok(Some(replaced)) => {
                done.push((dir.clone(), replaced));
                None
            }
            Ok(None) => None,
            Err(e) => Some(describe_failure(&session, &dir, &e)),
        };
        outcomes.push(Outcome {
            session,
            dir,
            failure,
        });
    }
    if !done.is_empty() {
        let mut queue = lock(&WRITER.queue);
        for (dir, replaced) in done {
            queue.unsynced.insert(dir);
            queue.replaced.extend(replaced.replaced);
        }
    }
    outcomes
}

/// Finishes the saves made so far: closes the files they replaced and syncs
/// each directory a rename happened in, so that the renames survive a power
/// cut.  Until then a crash of the machine (not of Emacs) can bring back
/// the previous complete file, never a partial one, because every file was
/// synced before its rename.  Failures go to the queue's errors.
fn settle() {
    let _settling = lock(&WRITER.settling);
    let (dirs, replaced) = {
        let mut queue = lock(&WRITER.queue);
        (
            std::mem::take(&mut queue.unsynced),
            std::mem::take(&mut queue.replaced),
        )
    };
    drop(replaced);
    let failures: Vec<String> = dirs
        .into_iter()
        .filter_map(|dir| match sync_dir(&dir) {
            // A directory removed since holds no rename to keep.
            Err(e) if e.kind() != io::ErrorKind::NotFound => Some(format!(
                "could not sync {}, so the last save may not survive a power cut: {e}",
                dir.display()
            )),
            _ => None,
        })
        .collect();
    if !failures.is_empty() {
        lock(&WRITER.queue).record_failures(failures);
    }
}

/// How long the writer lets changes gather after the first one.  An agent
/// changes its list seconds apart, so this costs nothing there, while a
/// burst of changes becomes one write instead of one per fsync.
const COALESCE: Duration = Duration::from_millis(20);

/// Waits until the queue holds work: a save, a sync, or a failed save
/// whose retry is due.
fn wait_for_work() {
    let mut queue = lock(&WRITER.queue);
    loop {
        if !queue.idle() {
            return;
        }
        match queue.next_retry() {
            None => queue = WRITER.wake.wait(queue).unwrap_or_else(|p| p.into_inner()),
            Some(due) => {
                let now = Instant::now();
                if due <= now {
                    return;
                }
                queue = WRITER
                    .wake
                    .wait_timeout(queue, due - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
}

fn writer_loop() {
    loop {
        wait_for_work();
        {
            // Changes gather for a moment, unless a flush waits.
            let queue = lock(&WRITER.queue);
            drop(
                WRITER
                    .wake
                    .wait_timeout_while(queue, COALESCE, |q| q.flushes_asked == q.flushes_done),
            );
        }
        let serving = {
            let mut scratch = lock(&WRITER.writing);
            let (batch, serving) = {
                let mut queue = lock(&WRITER.queue);
                let serving = queue.flushes_asked;
                // A flush tries every failed save again, not only those due.
                let flushing = serving > queue.flushes_done;
                let batch = queue.take_batch(flushing);
                queue.in_hand = batch.keys().cloned().collect();
                (batch, serving)
            };
            let outcomes = write_batch(&mut scratch, batch);
            let mut queue = lock(&WRITER.queue);
            queue.record_outcomes(outcomes);
            queue.in_hand.clear();
            serving
        };
        // Outside `writing`: a save made meanwhile need not wait for it.
        settle();
        let mut queue = lock(&WRITER.queue);
        queue.flushes_done = queue.flushes_done.max(serving);
        WRITER.flushed.notify_all();
    }
}

/// Starts the writer thread unless it runs; false when it cannot be started.
fn ensure_thread(queue: &mut Queue) -> bool {
    if !queue.thread_started {
        queue.thread_started = std::thread::Builder::new()
            .name("efrit-todo-store".into())
            .spawn(writer_loop)
            .is_ok();
    }
    queue.thread_started
}

/// Marks SESSION to be saved into DIR by the writer thread, and returns the
/// failures of earlier background saves (once each).  Never touches the
/// disk itself unless the thread cannot be started.
pub fn schedule(session: &str, dir: &Path) -> Vec<String> {
    let mut queue = lock(&WRITER.queue);
    // This runs on every change, so a busy session is scheduled once per
    // save, and the thread is woken (a system call) only from idle: until
    // it is idle again it takes whatever is pending without waiting.
    let was_idle = queue.idle();
    if queue
        .pending
        .get(session)
        .is_none_or(|pending| pending != dir)
    {
        queue.pending.insert(session.to_string(), dir.to_path_buf());
    }
    if !ensure_thread(&mut queue) {
        drop(queue);
        return flush();
    }
    if was_idle {
        WRITER.wake.notify_one();
    }
    queue.news()
}

/// How long `flush` waits for the writer thread by default.
pub const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// Asks the writer thread to write every pending save, including one it
/// has begun, to try every failed save again and to sync the directories
/// of every save so far.  Returns the flush's ticket for `flush_wait` and
/// `flush_end`.  Without a thread it does all that itself, at once.
pub fn flush_begin() -> u64 {
    let mut queue = lock(&WRITER.queue);
    if !ensure_thread(&mut queue) {
        drop(queue);
        let mut scratch = lock(&WRITER.writing);
        let batch = lock(&WRITER.queue).take_batch(true);
        let outcomes = write_batch(&mut scratch, batch);
        lock(&WRITER.queue).record_outcomes(outcomes);
        drop(scratch);
        settle();
        return 0;
    }
    queue.flushes_asked += 1;
    WRITER.wake.notify_one();
    queue.flushes_asked
}

/// Waits up to LIMIT for the flush TICKET; true once it is done.
pub fn flush_wait(ticket: u64, limit: Duration) -> bool {
    let queue = lock(&WRITER.queue);
    let (queue, _) = WRITER
        .flushed
        .wait_timeout_while(queue, limit, |q| q.flushes_done < ticket)
        .unwrap_or_else(|p| p.into_inner());
    queue.flushes_done >= ticket
}

/// What the flush TICKET leaves to say: the saves that have still not
/// landed (every time, until they do), the other failures not reported
/// yet, and, when the flush is not done (its waiting ran out after
/// WAITED), that it gave up and what stays pending.
pub fn flush_end(ticket: u64, waited: Duration) -> Vec<String> {
    let mut queue = lock(&WRITER.queue);
    let done = queue.flushes_done >= ticket;
    let unsaved = if done {
        String::new()
    } else {
        queue
            .unsaved()
            .iter()
            .map(|name| format!("{name:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut truth = queue.truth();
    if !done {
        truth.push(format!(
            "gave up waiting for the writer after {:.1} s, with the disk not answering; {} stay pending and are written when it does",
            waited.as_secs_f64(),
            if unsaved.is_empty() { "the saves under way".to_string() } else { format!("the saves of {unsaved}") }
        ));
    }
    truth
}

/// A whole flush, waiting at most LIMIT: `flush_begin`, `flush_wait`, `flush_end`.
pub fn flush_within(limit: Duration) -> Vec<String> {
    let ticket = flush_begin();
    flush_wait(ticket, limit);
    flush_end(ticket, limit)
}

/// A flush that waits at most `FLUSH_WAIT`.
pub fn flush() -> Vec<String> {
    flush_within(FLUSH_WAIT)
}

/// Saves SESSION into DIR now, waiting for any save under way.  The file
/// is complete and synced on return; its directory is synced by the writer
/// thread moments later, or by the next `flush`.
pub fn save_now(session: &str, dir: &Path) -> io::Result<Option<PathBuf>> {
    let saved = {
        let mut scratch = lock(&WRITER.writing);
        lock(&WRITER.queue).pending.remove(session);
        let saved = save_locked(&mut scratch, session, dir);
        // A failed save stays pending like a scheduled one; it is the
        // caller's error, so it counts as reported.
        let failure = saved
            .as_ref()
            .err()
            .map(|e| describe_failure(session, dir, e));
        let reported = failure.is_some();
        let mut queue = lock(&WRITER.queue);
        queue.record_outcomes(vec![Outcome {
            session: session.to_string(),
            dir: dir.to_path_buf(),
            failure,
        }]);
        if let Some(failed) = queue.failed.get_mut(session).filter(|_| reported) {
            failed.reported = true;
        }
        saved?
    };
    let Some(Replaced { path, replaced, .. }) = saved else {
        return Ok(None);
    };
    let mut queue = lock(&WRITER.queue);
    queue.unsynced.insert(dir.to_path_buf());
    queue.replaced.extend(replaced);
    if ensure_thread(&mut queue) {
        WRITER.wake.notify_one();
    } else {
        drop(queue);
        settle();
    }
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::MAX_CHANGES;
    use crate::session::{Options, UserEdit};
    use crate::validate::{Input, Limits};
    use proptest::prelude::*;
    use serde_json::json;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "efrit-todo-store-{tag}-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn write(session: &mut Session, todos: Json) {
        session
            .write(
                &Input::from_json(&json!({ "todos": todos })),
                &Options::default(),
                false,
                vec![],
            )
            .unwrap();
    }

    fn busy_session() -> Session {
        let mut s = Session::default();
        write(
            &mut s,
            json!([{"content": "Read", "status": "in_progress"}, {"content": "Fix", "status": "pending"}]),
        );
        write(
            &mut s,
            json!([{"id": "t1", "content": "Read", "status": "completed"}, {"content": "Test", "status": "in_progress"}]),
        );
        s.user_edit(
            UserEdit::Add {
                content: "Ship it".into(),
            },
            &Options::default(),
        )
        .unwrap();
        s.after_tool(
            "eval",
            Input::Str("(+ 1 2)".into()),
            Some("3".into()),
            false,
            None,
            &Default::default(),
        );
        s
    }

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
            back.add("Next".into(), None, &Options::default())
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
            &Options::default(),
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

    #[test]
    fn a_file_over_the_size_bound_is_refused_before_it_is_read() {
        let limits = Limits {
            max_items: 5,
            max_content_chars: 20,
        };
        let dir = temp_dir("huge");
        ensure_dir(&dir).unwrap();
        let path = dir.join("huge.json");
        // Garbage a parser would chew on: refused by its size alone.
        fs::write(&path, "[".repeat(max_file_bytes(&limits) as usize + 1)).unwrap();
        match load_file_within(&path, &limits) {
            Err(e @ LoadError::Refused(_)) => assert!(e.to_string().contains("bytes"), "{e}"),
            other => panic!("{other:?}"),
        }
        // Left where it is, not moved aside: it may be fine under other limits.
        let report = load_dir(&dir, false, &limits).unwrap();
        assert!(
            report.moved_aside.is_empty() && report.skipped.len() == 1,
            "{report:?}"
        );
        assert!(path.exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn only_the_newest_retired_items_are_kept_on_disk() {
        let mut s = Session::default();
        for n in 0..3 {
            let todos: Vec<Json> = (0..600)
                .map(|i| json!({"content": format!("write {n} item {i}"), "status": "pending"}))
                .collect();
            write(&mut s, Json::Array(todos));
        }
        assert_eq!(s.retired.len(), 1200);
        let (_, back) = decode(&encode("big", &s)).unwrap();
        assert_eq!(back.retired.len(), MAX_STORED_RETIRED);
        assert_eq!(back.ids.issued(), 1800);
        assert!(back.retired.contains_key("t1200") && back.items.len() == 600);
    }

    #[test]
    fn file_names_are_safe_distinct_and_bounded() {
        assert_eq!(file_name("default"), "default.json");
        assert_eq!(file_name("../x"), "%2E%2E%2Fx.json");
        assert_ne!(file_name("A"), file_name("a"));
        let long = "é".repeat(200);
        let name = file_name(&long);
        assert!(name.len() <= MAX_ENCODED + 5, "{name}");
        assert_ne!(name, file_name(&"é".repeat(199)));
        for name in ["a b", ".", "..", "con", "x/y\\z", "日本", "%41"] {
            let encoded = file_name(name);
            assert!(
                !encoded.starts_with('.') && !encoded.contains('/') && !encoded.contains('\\'),
                "{encoded}"
            );
        }
        assert_ne!(file_name("%41"), file_name("A"));
    }

    #[test]
    fn writes_are_atomic_private_and_replace_the_old_file() {
        let dir = temp_dir("atomic").join("nested");
        let path = write_atomic(&dir, "s.json", b"first").unwrap();
        write_atomic(&dir, "s.json", b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
            assert_eq!(
                fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.json"]);
        let _ = fs::remove_dir_all(dir.parent().unwrap());
    }

    #[test]
    fn a_directory_load_moves_damaged_files_aside_and_reads_the_rest() {
        let dir = temp_dir("load");
        let s = busy_session();
        write_atomic(&dir, &file_name("good"), &encode("good", &s)).unwrap();
        write_atomic(
            &dir,
            &file_name("done"),
            &encode("done", &Session::default()),
        )
        .unwrap();
        write_atomic(&dir, "bad.json", b"{\"schema_version\": 2, \"sess").unwrap();
        fs::write(dir.join("bad.json.corrupt"), b"older damage").unwrap();
        write_atomic(
            &dir,
            "newer.json",
            br#"{"schema_version": 9, "session": "n", "items": []}"#,
        )
        .unwrap();
        fs::write(dir.join("notes.txt"), b"not mine").unwrap();
        let report = load_dir(&dir, true, &Limits::default()).unwrap();
        let names: Vec<_> = report.loaded.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        assert_eq!(report.moved_aside.len(), 1);
        assert_eq!(report.moved_aside[0].1, dir.join("bad.json.1.corrupt"));
        assert_eq!(
            fs::read(dir.join("bad.json.corrupt")).unwrap(),
            b"older damage"
        );
        assert_eq!(report.skipped.len(), 1);
        assert!(dir.join("newer.json").exists());
        registry()
            .session("newer")
            .add("x".into(), None, &Options::default())
            .unwrap();
        assert!(save_now("newer", &dir)
            .unwrap_err()
            .to_string()
            .contains("newer efrit-todo"));
        assert_eq!(
            load_dir(&dir, false, &Limits::default())
                .unwrap()
                .loaded
                .len(),
            2
        );
        assert!(load_dir(&dir.join("missing"), false, &Limits::default())
            .unwrap()
            .loaded
            .is_empty());
        // The refused save stays pending: let it land before the directory goes.
        fs::remove_file(dir.join("newer.json")).unwrap();
        assert!(failures_of("\"newer\"", flush()).is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn scheduled_saves_land_after_a_flush() {
        let dir = temp_dir("writer");
        let name = format!("writer test {}", std::process::id());
        for n in 0..20 {
            let todos: Vec<Json> = (0..=n)
                .map(|i| json!({"content": format!("step {i}"), "status": "pending"}))
                .collect();
            write(registry().session(&name), Json::Array(todos));
            assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        }
        assert!(failures_of(&name, flush()).is_empty());
        let (loaded, s) = load_file(&file_path(&dir, &name)).unwrap();
        assert_eq!(loaded, name);
        assert_eq!(s.items.len(), 20);
        assert_eq!(save_now("no such session", &dir).unwrap(), None);
        let _ = fs::remove_dir_all(&dir);
    }

    fn saved_ledger(dir: &Path, name: &str) -> Json {
        let json: Json = serde_json::from_slice(&fs::read(file_path(dir, name)).unwrap()).unwrap();
        json["ledger"].clone()
    }

    #[test]
    fn the_writer_takes_saves_scheduled_while_it_is_busy_without_a_flush() {
        // Only a schedule made while the writer is idle wakes it; those made
        // while it is busy must still be written without anyone waiting.
        let dir = temp_dir("busy");
        let names: Vec<String> = (0..3)
            .map(|n| format!("busy test {} {n}", std::process::id()))
            .collect();
        let landed = |name: &String, round: usize| {
            load_file(&file_path(&dir, name)).is_ok_and(|(_, s)| {
                s.items
                    .iter()
                    .any(|i| i.content == format!("round {round}"))
            })
        };
        let wait_for = |round: usize, names: &[String]| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !names.iter().all(|name| landed(name, round)) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "saves of round {round} never landed"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        for round in 0..2 {
            for name in &names {
                let todos = vec![json!({"content": format!("round {round}"), "status": "pending"})];
                write(registry().session(name), Json::Array(todos));
                assert!(failures_of(name, schedule(name, &dir)).is_empty());
                assert!(failures_of(name, schedule(name, &dir)).is_empty());
            }
            wait_for(round, &names);
            // Long enough for the writer to be waiting again, idle.
            std::thread::sleep(COALESCE * 5);
        }
        let errors = flush();
        assert!(names
            .iter()
            .all(|name| failures_of(name, errors.clone()).is_empty()));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_ledger_summary_counts_every_call_once_across_saves_and_resets() {
        let dir = temp_dir("ledger");
        let name = format!("ledger test {}", std::process::id());
        let call = |tool: &str, result: Option<&str>, error: bool| {
            registry().session(&name).after_tool(
                tool,
                Input::Str("x".into()),
                result.map(String::from),
                error,
                None,
                &Default::default(),
            );
        };
        call("eval", Some("1"), false);
        call("shell", None, true);
        save_now(&name, &dir).unwrap();
        for n in 0..5 {
            call(if n % 2 == 0 { "eval" } else { "grep" }, Some("ok"), n == 3);
        }
        save_now(&name, &dir).unwrap();
        let expected = |name: &str| {
            serde_json::to_value(LedgerSummary::of(registry().get(name).unwrap().entries()))
                .unwrap()
        };
        let ledger = saved_ledger(&dir, &name);
        assert_eq!(ledger, expected(&name));
        assert_eq!(ledger["calls"], 7);
        assert_eq!(ledger["errors"], 2);
        assert_eq!(ledger["tools"], json!({"eval": 4, "grep": 2, "shell": 1}));
        // A cleared ledger, even one that grows past the old count again,
        // is counted afresh rather than added to the old summary.
        registry().reset(&name);
        for _ in 0..9 {
            call("read", Some("text"), false);
        }
        schedule(&name, &dir);
        // Other tests run alongside and share the writer: only this one's failures count.
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let ledger = saved_ledger(&dir, &name);
        assert_eq!(ledger, expected(&name));
        assert_eq!(ledger["tools"], json!({"read": 9}));
        registry().reset(&name);
        save_now(&name, &dir).unwrap();
        assert_eq!(saved_ledger(&dir, &name)["calls"], 0);
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_save_replaces_the_file_and_a_flush_finishes_it() {
        let dir = temp_dir("replace");
        let name = format!("replace test {}", std::process::id());
        registry()
            .session(&name)
            .add("first".into(), None, &Options::default())
            .unwrap();
        let path = save_now(&name, &dir).unwrap().unwrap();
        registry()
            .session(&name)
            .add("second".into(), None, &Options::default())
            .unwrap();
        assert_eq!(save_now(&name, &dir).unwrap(), Some(path.clone()));
        assert!(!flush().iter().any(|e| e.contains(&name)));
        let (_, back) = load_file(&path).unwrap();
        assert_eq!(back.items.len(), 2);
        // No temporary file left: the state file and the directory's lock.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != LOCK_FILE)
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = fs::remove_dir_all(&dir);
    }

    fn json_of(path: &Path) -> Json {
        serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
    }

    fn contents(json: &Json) -> Vec<&str> {
        json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"].as_str().unwrap())
            .collect()
    }

    /// Sets the modification time of PATH SECONDS from now.
    fn touch(path: &Path, seconds: i64) {
        let now = SystemTime::now();
        let when = if seconds >= 0 {
            now + Duration::from_secs(seconds.unsigned_abs())
        } else {
            now - Duration::from_secs(seconds.unsigned_abs())
        };
        OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[test]
    fn the_newest_write_of_a_session_wins_over_its_copies_whatever_their_names_and_times() {
        let dir = temp_dir("copies");
        let name = format!("copies test {}", std::process::id());
        registry()
            .session(&name)
            .add("first".into(), None, &Options::default())
            .unwrap();
        let file = save_now(&name, &dir).unwrap().unwrap();
        let first = fs::read(&file).unwrap();
        assert_eq!(json_of(&file)["generation"], 1);
        registry()
            .session(&name)
            .add("second".into(), None, &Options::default())
            .unwrap();
        save_now(&name, &dir).unwrap();
        let second = fs::read(&file).unwrap();
        assert_eq!(
            json_of(&file)["generation"],
            2,
            "every save counts one generation up"
        );
        // A user's backups of the older save: one sorted before the file,
        // one after, both with a newer time.
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let backups = [
            dir.join(format!("{stem}-backup.json")),
            dir.join("zz copy.json"),
        ];
        for backup in &backups {
            fs::write(backup, &first).unwrap();
            touch(backup, 3600);
        }
        let report = load_dir(&dir, false, &Limits::default()).unwrap();
        let mine: Vec<&Loaded> = report.loaded.iter().filter(|l| l.name == name).collect();
        assert_eq!(mine.len(), 1, "one list per session, not one per copy");
        assert_eq!(mine[0].file, file);
        assert_eq!(mine[0].session.items.len(), 2);
        for backup in &backups {
            let why = report
                .skipped
                .iter()
                .find(|(f, _)| f == backup)
                .map(|(_, why)| why.as_str())
                .unwrap_or("");
            assert!(
                why.contains("older copy") && why.contains(&file.display().to_string()),
                "{backup:?}: {why}"
            );
        }
        // The session's own file put back to the older save: the newest
        // write, wherever it is, still wins.
        fs::write(&file, &first).unwrap();
        fs::write(&backups[1], &second).unwrap();
        touch(&backups[1], -3600);
        let report = load_dir(&dir, false, &Limits::default()).unwrap();
        let mine: Vec<&Loaded> = report.loaded.iter().filter(|l| l.name == name).collect();
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].file, backups[1]);
        assert_eq!(mine[0].session.items.len(), 2);
        assert!(
            report
                .skipped
                .iter()
                .any(|(f, why)| *f == file && why.contains("older copy")),
            "{:?}",
            report.skipped
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_save_never_overwrites_a_save_it_has_not_seen_without_keeping_it() {
        let dir = temp_dir("conflict");
        let name = format!("conflict test {}", std::process::id());
        registry()
            .session(&name)
            .add("mine".into(), None, &Options::default())
            .unwrap();
        let file = save_now(&name, &dir).unwrap().unwrap();
        // Saving again over its own save is no conflict.
        save_now(&name, &dir).unwrap();
        assert!(take_warnings().iter().all(|w| !w.contains(&name)));
        assert_eq!(json_of(&file)["generation"], 2);
        // Another Emacs read that save and saved twice since, its own list:
        // generation 4, written by a rename as every save is.
        let mut theirs = json_of(&file);
        theirs["generation"] = json!(4);
        theirs["items"][0]["content"] = json!("theirs");
        let theirs = serde_json::to_vec(&theirs).unwrap();
        write_atomic(&dir, &file_name(&name), &theirs).unwrap();
        registry()
            .session(&name)
            .add("mine too".into(), None, &Options::default())
            .unwrap();
        save_now(&name, &dir).unwrap();
        // Theirs is kept beside, byte for byte; ours is the session's file,
        // newer than theirs; and the user is told.
        let kept = dir.join(format!("{}.conflict", file_name(&name)));
        let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
        assert_eq!(
            text(fs::read(&kept).unwrap_or_default()),
            text(theirs),
            "the other save was not kept"
        );
        assert_eq!(contents(&json_of(&file)), ["mine", "mine too"]);
        assert_eq!(json_of(&file)["generation"], 5);
        let warnings = take_warnings();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&name) && w.contains(&kept.display().to_string())),
            "{warnings:?}"
        );
        // Since then ours is the newest: no conflict.
        save_now(&name, &dir).unwrap();
        assert!(!dir
            .join(format!("{}.1.conflict", file_name(&name)))
            .exists());
        // An older save of the same session put back by hand is no
        // newer save: it is replaced.
        let older = fs::read(&file).unwrap();
        save_now(&name, &dir).unwrap();
        write_atomic(&dir, &file_name(&name), &older).unwrap();
        save_now(&name, &dir).unwrap();
        assert!(!dir
            .join(format!("{}.1.conflict", file_name(&name)))
            .exists());
        assert!(take_warnings().iter().all(|w| !w.contains(&name)));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn two_processes_starting_the_same_session_name_keep_both_lists() {
        // Efrit names sessions by the second: two Emacsen starting a command
        // in the same second share a name.  This one never read the other's file.
        let dir = temp_dir("collision");
        let name = format!("efrit-do-20250101120000 {}", std::process::id());
        let mut other = Session::default();
        write(
            &mut other,
            json!([{"content": "The other command", "status": "in_progress"}]),
        );
        let mut theirs: Json = serde_json::from_slice(&encode(&name, &other)).unwrap();
        theirs["generation"] = json!(1);
        let theirs = serde_json::to_vec(&theirs).unwrap();
        write_atomic(&dir, &file_name(&name), &theirs).unwrap();
        registry()
            .session(&name)
            .add("This command".into(), None, &Options::default())
            .unwrap();
        let file = save_now(&name, &dir).unwrap().unwrap();
        let kept = fs::read(dir.join(format!("{}.conflict", file_name(&name)))).unwrap_or_default();
        assert_eq!(
            String::from_utf8(kept).unwrap(),
            String::from_utf8(theirs).unwrap(),
            "the other list was not kept"
        );
        assert_eq!(contents(&json_of(&file)), ["This command"]);
        assert!(take_warnings().iter().any(|w| w.contains(&name)));
        let _ = fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_state_directory_others_can_write_or_do_not_own_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("shared");
        ensure_dir(&dir).unwrap();
        let name = format!("shared dir test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Options::default())
            .unwrap();
        let refused = |mode: u32, what: &str| {
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
            let error = save_now(&name, &dir).map(|_| ()).unwrap_err().to_string();
            assert!(
                error.contains(what) && error.contains("efrit-todo-state-directory"),
                "{mode:o}: {error}"
            );
            let error = load_dir(&dir, false, &Limits::default())
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(error.contains(what), "{mode:o}: {error}");
            assert!(!file_path(&dir, &name).exists());
        };
        refused(0o777, "writable by others");
        refused(0o775, "writable by its group");
        refused(0o1777, "writable by others");
        // SAFETY: plain calls with a valid path.
        if unsafe { libc::geteuid() } == 0 {
            use std::os::unix::ffi::OsStrExt;
            let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
            assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
            refused(0o700, "owned by user 65534");
            assert_eq!(unsafe { libc::chown(path.as_ptr(), 0, 0) }, 0);
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        assert!(save_now(&name, &dir).is_ok());
        assert!(failures_of(&name, flush()).is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_state_directory_that_is_a_file_says_so() {
        let file = temp_dir("a-file");
        fs::write(&file, b"not a directory").unwrap();
        let name = format!("file dir test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Options::default())
            .unwrap();
        let error = save_now(&name, &file).map(|_| ()).unwrap_err().to_string();
        assert!(
            error.contains(&format!("{} is a file, not a directory", file.display())),
            "{error}"
        );
        let error = save_now(&name, &file.join("sub"))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("{} is a file, not a directory", file.display())),
            "{error}"
        );
        // Let the pending save land, then clean up.
        fs::remove_file(&file).unwrap();
        assert!(failures_of(&name, flush()).is_empty());
        let _ = fs::remove_dir_all(&file);
    }

    #[test]
    fn failures_of_background_saves_are_reported() {
        let blocker = temp_dir("blocked");
        fs::write(&blocker, b"a file where the directory should be").unwrap();
        let name = format!("failing {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Options::default())
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

    /// The failures of FLUSH that name SESSION: other tests share the writer.
    fn failures_of(session: &str, errors: Vec<String>) -> Vec<String> {
        errors.into_iter().filter(|e| e.contains(session)).collect()
    }

    #[test]
    fn a_failed_save_stays_pending_is_retried_and_every_flush_says_so() {
        let dir = temp_dir("retry");
        let name = format!("retry test {}", std::process::id());
        registry()
            .session(&name)
            .add("Must not be lost".into(), None, &Options::default())
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
            .add("Keep".into(), None, &Options::default())
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

    #[cfg(unix)]
    fn make_fifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        assert_eq!(
            unsafe { libc::mkfifo(name.as_ptr(), 0o600) },
            0,
            "mkfifo {}",
            path.display()
        );
    }

    /// Runs F on a thread of its own and returns its value, or None when it
    /// has not returned after SECONDS (it is left running).
    fn within<T: Send + 'static>(
        seconds: u64,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(seconds)).ok()
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_symlink_at_a_state_file_is_never_opened_for_writing() {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let dir = temp_dir("fifo");
        ensure_dir(&dir).unwrap();
        let name = format!("fifo test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Options::default())
            .unwrap();
        let target = file_path(&dir, &name);
        make_fifo(&target);
        let (n, d) = (name.clone(), dir.clone());
        let saved = within(5, move || save_now(&n, &d).map_err(|e| e.to_string()));
        let Some(saved) = saved else {
            // Let the stuck save go, so that the other tests can go on.
            let _ = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&target);
            panic!("a save blocked on the FIFO at {}", target.display());
        };
        let error = saved.unwrap_err();
        assert!(
            error.contains("not a regular file") && error.contains("FIFO"),
            "{error}"
        );
        assert!(
            fs::symlink_metadata(&target).unwrap().file_type().is_fifo(),
            "the FIFO was replaced"
        );
        // Scheduled and flushed, the same, and the flush comes back.
        assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        let errors = within(5, flush).expect("a flush blocked on a FIFO");
        assert!(failures_of(&name, errors)
            .iter()
            .any(|e| e.contains("FIFO")));
        // Reading the directory skips it, and says so.
        let report = within(5, {
            let dir = dir.clone();
            move || load_dir(&dir, false, &Limits::default()).unwrap()
        })
        .expect("a restore blocked on a FIFO");
        assert!(
            report
                .skipped
                .iter()
                .any(|(file, why)| *file == target && why.contains("FIFO")),
            "{:?}",
            report.skipped
        );
        // A symlink is not followed: the file it points to stays as it was.
        fs::remove_file(&target).unwrap();
        let outside = temp_dir("fifo-outside");
        fs::write(&outside, b"not yours").unwrap();
        std::os::unix::fs::symlink(&outside, &target).unwrap();
        let error = save_now(&name, &dir).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(fs::read(&outside).unwrap(), b"not yours");
        assert!(fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink());
        let report = load_dir(&dir, false, &Limits::default()).unwrap();
        assert!(
            report
                .skipped
                .iter()
                .any(|(file, why)| *file == target && why.contains("symbolic link")),
            "{:?}",
            report.skipped
        );
        // Gone, the save lands.
        fs::remove_file(&target).unwrap();
        assert!(failures_of(&name, flush()).is_empty());
        assert!(load_file(&target).is_ok());
        let _ = fs::remove_file(&outside);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_flush_waits_a_bounded_time_for_a_stuck_writer_and_says_so() {
        let dir = temp_dir("stuck");
        let name = format!("stuck test {}", std::process::id());
        registry()
            .session(&name)
            .add("x".into(), None, &Options::default())
            .unwrap();
        // A writer stuck in a save: it holds `writing` for three seconds.
        let stuck = lock(&WRITER.writing);
        assert!(failures_of(&name, schedule(&name, &dir)).is_empty());
        let started = std::time::Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(flush_within(Duration::from_millis(200)));
        });
        let errors = rx.recv_timeout(Duration::from_secs(3));
        drop(stuck);
        let errors = errors.expect("the flush waited for the stuck writer");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            errors
                .iter()
                .any(|e| e.contains("gave up") && e.contains(&name)),
            "{errors:?}"
        );
        // The save was not dropped: it lands once the writer is free.
        assert!(failures_of(&name, flush()).is_empty());
        assert!(load_file(&file_path(&dir, &name)).is_ok());
        let _ = fs::remove_dir_all(&dir);
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
    use crate::validate::Input;
    use serde_json::json;

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

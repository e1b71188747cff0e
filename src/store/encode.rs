//! Writing a file: the layout `record` reads, written straight from
//! borrowed data.  A save runs this under the registry's lock, so it must
//! cost no more than reading the session once: no clones, no intermediate
//! values.  The round-trip tests hold the two sides to one layout.

use serde::Serialize;

use crate::breaker::BreakerState;
use crate::history::{Change, ChangedIds, History};
use crate::model::{now, Item, Timestamp};
use crate::session::Session;

use super::holder::{others_running, this_holder};
use super::record::{LedgerSummary, StoredPeer, StoredStop, MAX_STORED_RETIRED, SCHEMA_VERSION};

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
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(rename = "blockedBy", skip_serializing_if = "<[String]>::is_empty")]
    blocked_by: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
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
            description: item.description.as_deref(),
            blocked_by: &item.blocked_by,
            owner: item.owner.as_deref(),
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
    /// The sub-agents the session has known, whose items stay theirs.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    agents: &'a [String],
    /// The agents running on the list, in this Emacs and others, so
    /// that another Emacs names its own apart.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    peers: Vec<StoredPeer>,
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
            agents: session.agents.known(),
            peers: peers(session),
        }
    }
}

/// The running agents SESSION's file records: this Emacs's, and those of
/// other Emacsen that may still run.
fn peers(session: &Session) -> Vec<StoredPeer> {
    let others = others_running(session.agents.elsewhere().to_vec());
    session
        .agents
        .own_leases(this_holder())
        .chain(others)
        .map(|lease| StoredPeer {
            name: lease.name,
            holder: lease.holder,
            since: lease.since,
        })
        .collect()
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
pub(super) fn encode_into(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::record::decode;
    use crate::store::test_support::write;
    use serde_json::{json, Value as Json};

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
}

//! Todo items, statuses and the per-session list.

use std::time::{SystemTime, UNIX_EPOCH};

/// Where an item stands.  The wire spelling is what the model sends and sees;
/// the Lisp spelling is what Emacs code sees as a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 4] = [
        Status::Pending,
        Status::InProgress,
        Status::Completed,
        Status::Cancelled,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn lisp_name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in-progress",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses a status, forgiving case and `-`/space versus `_` only: a model
    /// that writes "In Progress" meant in_progress, one that writes "done" did not
    /// say which of completed or cancelled it meant.
    pub fn parse(text: &str) -> Option<Status> {
        // The spelling the model is told to use needs no folding.
        if let Some(status) = Status::ALL
            .into_iter()
            .find(|status| status.wire_name() == text)
        {
            return Some(status);
        }
        let canonical = || {
            text.trim().chars().map(|c| match c {
                '-' | ' ' => '_',
                c => c.to_ascii_lowercase(),
            })
        };
        Status::ALL
            .into_iter()
            .find(|status| canonical().eq(status.wire_name().chars()))
    }

    /// Finished items need no more work.
    pub fn is_open(self) -> bool {
        matches!(self, Status::Pending | Status::InProgress)
    }
}

/// Seconds since the Unix epoch, the unit Emacs time functions accept as a float.
pub type Timestamp = f64;

pub fn now() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub id: String,
    pub content: String,
    pub active_form: String,
    pub status: Status,
    /// Only Efrit's compatibility API sets this; todo_write has no priorities.
    pub priority: Option<String>,
    /// The id of the item this one is a step of; None for a top-level
    /// item.  Subtasks go at most `tree::MAX_LEVELS` levels deep.
    pub parent: Option<String>,
    /// Longer text than content: what the model needs to do the step.
    pub description: Option<String>,
    /// Ids of the items this one waits for.  Stored on the waiting item
    /// only: the other direction ("blocks") is derived, so the two can
    /// never disagree.  Finished blockers stay here (reopening one blocks
    /// again); views show only the open ones (see `graph`).
    pub blocked_by: Vec<String>,
    /// Who works on the item: an agent's name.
    pub owner: Option<String>,
    pub created: Timestamp,
    pub started: Option<Timestamp>,
    pub completed: Option<Timestamp>,
}

impl Item {
    pub fn new(
        id: String,
        content: String,
        active_form: Option<String>,
        status: Status,
        at: Timestamp,
    ) -> Item {
        let mut item = Item {
            active_form: active_form.unwrap_or_else(|| content.clone()),
            id,
            content,
            status: Status::Pending,
            priority: None,
            parent: None,
            description: None,
            blocked_by: Vec::new(),
            owner: None,
            created: at,
            started: None,
            completed: None,
        };
        item.set_status(status, at);
        item
    }

    /// Moves the item to STATUS and keeps the timestamps truthful: started is
    /// the first time work began, completed is cleared when an item is reopened.
    pub fn set_status(&mut self, status: Status, at: Timestamp) {
        if status == Status::InProgress && self.started.is_none() {
            self.started = Some(at);
        }
        match status {
            Status::Completed if self.status != Status::Completed => self.completed = Some(at),
            Status::Completed => {}
            _ => self.completed = None,
        }
        self.status = status;
    }
}

/// The ids a session hands out: `t1`, `t2`, ...  The counter only grows, so an
/// id never changes meaning within a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdCounter {
    issued: u64,
}

/// The highest id number the counter follows, and the highest a state file
/// may hold: ids stay exact numbers in Lisp and JSON.  Ids adopted from
/// outside may name any number; following one near `u64::MAX` would make
/// the next id wrap around and reuse t1.  No session issues this many ids.
pub const MAX_ID_NUMBER: u64 = 1 << 53;

impl IdCounter {
    pub fn issue(&mut self) -> String {
        self.issued = self.issued.saturating_add(1);
        format!("t{}", self.issued)
    }

    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Makes sure an id adopted from outside (Efrit's compatibility API) is
    /// never handed out again.
    pub fn observe(&mut self, id: &str) {
        if let Some(n) = id_number(id) {
            self.raise_to(n);
        }
    }

    /// Raises the counter; lowering it would reuse ids, so that is ignored,
    /// and so is a number past `MAX_ID_NUMBER`, which no issued id reaches.
    pub fn raise_to(&mut self, n: u64) {
        if n <= MAX_ID_NUMBER {
            self.issued = self.issued.max(n);
        }
    }
}

/// Whether IDS are all of the form `t<number>` with numbers that keep
/// rising.  The ids a session hands out are, and lists mostly keep them in
/// that order; such ids are distinct (equal ids would give equal numbers),
/// which this shows without a table.
pub fn ids_rise<'a>(ids: impl IntoIterator<Item = &'a str>) -> bool {
    let mut last = None;
    ids.into_iter().all(|id| match id_number(id) {
        Some(n) if last.is_none_or(|last| n > last) => {
            last = Some(n);
            true
        }
        _ => false,
    })
}

/// The number of an id of the form the backend issues, `t12` -> 12.
pub fn id_number(id: &str) -> Option<u64> {
    id.strip_prefix('t')?.parse().ok()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: usize,
    pub pending: usize,
    pub in_progress: usize,
    pub completed: usize,
    pub cancelled: usize,
}

impl Counts {
    pub fn of(items: &[Item]) -> Counts {
        let mut counts = Counts {
            total: items.len(),
            ..Counts::default()
        };
        for item in items {
            match item.status {
                Status::Pending => counts.pending += 1,
                Status::InProgress => counts.in_progress += 1,
                Status::Completed => counts.completed += 1,
                Status::Cancelled => counts.cancelled += 1,
            }
        }
        counts
    }

    pub fn open(&self) -> usize {
        self.pending + self.in_progress
    }
}

/// Most items any text for the model names; the rest are counted.  Every
/// text the model reads stays in the conversation it pays for on each
/// later request, so no text grows with the list.
pub const MAX_NAMED: usize = 10;

/// Longest piece of an item's text quoted back to the model, which wrote
/// it and refers to the item by id.
pub const MAX_QUOTED_CHARS: usize = 80;

/// TEXT cut to MAX_QUOTED_CHARS characters, with "..." when cut.
pub fn push_cut(out: &mut String, text: &str) {
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        None => out.push_str(text),
        Some((end, _)) => {
            out.push_str(&text[..end]);
            out.push_str("...");
        }
    }
}

/// "t4, t5 and 3 more": IDS, at most MAX_NAMED of them named.
pub fn push_ids<'a>(out: &mut String, ids: impl IntoIterator<Item = &'a str>) {
    let mut more = 0usize;
    for (n, id) in ids.into_iter().enumerate() {
        if n >= MAX_NAMED {
            more += 1;
            continue;
        }
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(id);
    }
    if more > 0 {
        out.push_str(" and ");
        out.push_str(&more.to_string());
        out.push_str(" more");
    }
}

/// Names ITEMS as `t3 [pending] Write the docs`, at most MAX_NAMED of them
/// and then "and N more", each between BEFORE and AFTER.
pub fn name_items<'a>(
    out: &mut String,
    items: impl IntoIterator<Item = &'a Item>,
    before: &str,
    after: &str,
) {
    let mut more = 0usize;
    for (n, item) in items.into_iter().enumerate() {
        if n >= MAX_NAMED {
            more += 1;
            continue;
        }
        out.push_str(before);
        out.push_str(&item.id);
        out.push_str(" [");
        out.push_str(item.status.wire_name());
        out.push_str("] ");
        push_cut(out, &item.content);
        out.push_str(after);
    }
    if more > 0 {
        out.push_str(before);
        out.push_str("and ");
        out.push_str(&more.to_string());
        out.push_str(" more");
        out.push_str(after);
    }
}

/// Items t1, t2, ... with contents "Step 0", "Step 1", ... in STATUSES, for
/// the tests of the modules that read lists.
#[cfg(test)]
pub fn sample_items(statuses: &[Status]) -> Vec<Item> {
    let mut ids = IdCounter::default();
    statuses
        .iter()
        .enumerate()
        .map(|(n, s)| Item::new(ids.issue(), format!("Step {n}"), None, *s, 0.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_spelling_is_forgiven_for_case_and_separators_only() {
        assert_eq!(Status::parse("in_progress"), Some(Status::InProgress));
        assert_eq!(Status::parse("In Progress"), Some(Status::InProgress));
        assert_eq!(Status::parse("IN-PROGRESS"), Some(Status::InProgress));
        assert_eq!(Status::parse("Completed"), Some(Status::Completed));
        assert_eq!(Status::parse("done"), None);
        assert_eq!(Status::parse("inprogress"), None);
        assert_eq!(Status::parse("canceled"), None);
        assert_eq!(Status::parse(""), None);
    }

    /// The parse as first written: fold the whole text, then compare.
    fn parse_by_folding(text: &str) -> Option<Status> {
        let canonical: String = text
            .trim()
            .chars()
            .map(|c| match c {
                '-' | ' ' => '_',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        Status::ALL
            .into_iter()
            .find(|status| status.wire_name() == canonical)
    }

    proptest::proptest! {
        #[test]
        fn status_parse_folds_as_before(text in "[ \t_-]{0,2}(?i:(pending|in[ _-]progress|completed|cancelled|done|x))[ \t\u{a0}_-]{0,2}") {
            proptest::prop_assert_eq!(Status::parse(&text), parse_by_folding(&text));
        }
    }

    #[test]
    fn rising_t_ids_are_recognised() {
        assert!(ids_rise(["t1", "t2", "t10"]));
        assert!(ids_rise([]));
        assert!(!ids_rise(["t2", "t1"]));
        assert!(!ids_rise(["t1", "t1"]));
        assert!(!ids_rise(["t1", "x2"]));
        assert!(!ids_rise(["t1", "t"]));
    }

    #[test]
    fn timestamps_follow_status_changes() {
        let mut item = Item::new("t1".into(), "Do it".into(), None, Status::Pending, 1.0);
        assert_eq!(item.active_form, "Do it");
        assert_eq!(item.started, None);
        item.set_status(Status::InProgress, 2.0);
        item.set_status(Status::Completed, 3.0);
        item.set_status(Status::Completed, 4.0);
        assert_eq!((item.started, item.completed), (Some(2.0), Some(3.0)));
        item.set_status(Status::Pending, 5.0);
        assert_eq!((item.started, item.completed), (Some(2.0), None));
    }

    #[test]
    fn naming_items_stops_at_ten_and_counts_the_rest() {
        let items = sample_items(&[Status::Pending; 13]);
        let mut out = String::new();
        name_items(&mut out, &items, "", "; ");
        assert!(
            out.starts_with("t1 [pending] Step 0; t2 [pending] Step 1; "),
            "{out}"
        );
        assert!(out.contains("t10 [pending] Step 9; and 3 more; "), "{out}");
        assert!(!out.contains("t11"), "{out}");
        let mut out = String::new();
        name_items(&mut out, &items[..2], "  ", "\n");
        assert_eq!(out, "  t1 [pending] Step 0\n  t2 [pending] Step 1\n");
    }

    #[test]
    fn quoted_text_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_QUOTED_CHARS + 5);
        let mut out = String::new();
        push_cut(&mut out, &long);
        assert_eq!(out.chars().count(), MAX_QUOTED_CHARS + 3);
        assert!(out.ends_with("é..."));
        out.clear();
        push_cut(&mut out, "short");
        assert_eq!(out, "short");
    }

    #[test]
    fn a_huge_adopted_id_does_not_make_ids_wrap() {
        let mut ids = IdCounter::default();
        ids.observe("t18446744073709551615");
        ids.observe("t9007199254740993");
        assert_eq!(ids.issue(), "t1");
        ids.observe(&format!("t{MAX_ID_NUMBER}"));
        assert_eq!(ids.issue(), format!("t{}", MAX_ID_NUMBER + 1));
    }

    #[test]
    fn ids_are_never_reused() {
        let mut ids = IdCounter::default();
        assert_eq!(ids.issue(), "t1");
        ids.observe("t7");
        ids.observe("todo-99");
        assert_eq!(ids.issue(), "t8");
        ids.raise_to(3);
        assert_eq!(ids.issue(), "t9");
    }
}

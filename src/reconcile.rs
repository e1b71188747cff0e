//! Old list + proposed list -> new list + what changed.
//!
//! The model sends the whole list every time and often forgets ids, rewords
//! items or leaves some out.  Reconciling keeps ids stable across all of that
//! and records every change so the result text can tell the model about it.

use std::collections::{HashMap, HashSet};

use crate::model::{IdCounter, Item, Status, Timestamp};
use crate::validate::{quote, InvalidInput, ProposedItem};

/// Two contents at least this similar (Dice coefficient of character bigrams)
/// are taken to be the same item reworded.
pub const SIMILARITY_THRESHOLD: f64 = 0.7;

/// Similarity is quadratic in the unmatched items; past this many pairs the
/// list is treated as new rather than making a huge write slow.
const MAX_SIMILARITY_PAIRS: usize = 20_000;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    pub added: Vec<String>,
    pub started: Vec<String>,
    pub completed: Vec<String>,
    pub cancelled: Vec<String>,
    pub reopened: Vec<String>,
    /// Items that went from in_progress back to pending by the model's choice.
    pub paused: Vec<String>,
    pub reworded: Vec<String>,
    /// Items brought back by an id from earlier in the session.
    pub restored: Vec<String>,
    /// Extra in_progress items turned back to pending.
    pub demoted: Vec<String>,
    /// Unfinished items missing from the new list: the model must hear of these.
    pub dropped: Vec<Item>,
    /// Finished items missing from the new list: harmless, but still a change.
    pub removed: Vec<Item>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.changed_ids().is_empty() && self.dropped.is_empty() && self.removed.is_empty()
    }

    /// Ids of items in the new list that this write touched.
    pub fn changed_ids(&self) -> HashSet<&str> {
        [
            &self.added,
            &self.started,
            &self.completed,
            &self.cancelled,
            &self.reopened,
            &self.paused,
            &self.reworded,
            &self.restored,
            &self.demoted,
        ]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect()
    }
}

#[derive(Debug, Clone)]
pub struct Reconciled {
    pub items: Vec<Item>,
    pub diff: Diff,
}

/// Lowercase, punctuation and runs of whitespace folded to one space: the
/// differences a model introduces when it retypes an item.
pub fn normalise(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_alphanumeric() { c.to_lowercase().next().unwrap_or(c) } else { ' ' })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn bigrams(text: &str) -> HashMap<(char, char), u32> {
    let chars: Vec<char> = text.chars().collect();
    let mut counts = HashMap::new();
    for pair in chars.windows(2) {
        *counts.entry((pair[0], pair[1])).or_insert(0) += 1;
    }
    counts
}

/// Dice coefficient over character bigrams of the normalised texts, in [0, 1].
pub fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (normalise(a), normalise(b));
    if a == b {
        return 1.0;
    }
    let (ga, gb) = (bigrams(&a), bigrams(&b));
    let total: u32 = ga.values().sum::<u32>() + gb.values().sum::<u32>();
    if total == 0 {
        return 0.0;
    }
    let shared: u32 = ga.iter().map(|(k, n)| (*n).min(*gb.get(k).unwrap_or(&0))).sum();
    f64::from(2 * shared) / f64::from(total)
}

/// Pairs proposed items without ids to unclaimed previous items; returns for
/// each proposed index the previous index it continues, if any.
fn match_by_content(
    previous: &[Item],
    proposed: &[ProposedItem],
    matches: &mut [Option<usize>],
    claimed: &mut [bool],
) {
    let unmatched = |matches: &[Option<usize>]| -> Vec<usize> {
        (0..proposed.len())
            .filter(|&i| matches[i].is_none() && proposed[i].id.is_none())
            .collect()
    };
    // Exact, then normalised: the first unclaimed previous item with that key wins.
    let keys: [fn(&str) -> String; 2] = [str::to_string, normalise];
    for key in keys {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        for (j, item) in previous.iter().enumerate().rev() {
            if !claimed[j] {
                by_key.entry(key(&item.content)).or_default().push(j);
            }
        }
        for i in unmatched(matches) {
            if let Some(j) = by_key.get_mut(&key(&proposed[i].content)).and_then(Vec::pop) {
                matches[i] = Some(j);
                claimed[j] = true;
            }
        }
    }
    let open_new = unmatched(matches);
    let open_old: Vec<usize> = (0..previous.len()).filter(|&j| !claimed[j]).collect();
    if open_new.is_empty() || open_old.is_empty() || open_new.len() * open_old.len() > MAX_SIMILARITY_PAIRS {
        return;
    }
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for &i in &open_new {
        for &j in &open_old {
            let score = similarity(&proposed[i].content, &previous[j].content);
            if score >= SIMILARITY_THRESHOLD {
                pairs.push((score, i, j));
            }
        }
    }
    // Best pairs first; ties keep list order so the result is deterministic.
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    for (_, i, j) in pairs {
        if matches[i].is_none() && !claimed[j] {
            matches[i] = Some(j);
            claimed[j] = true;
        }
    }
}

fn record_transition(diff: &mut Diff, id: &str, from: Status, to: Status) {
    use Status::*;
    let bucket = match (from, to) {
        (a, b) if a == b => return,
        (_, Completed) => &mut diff.completed,
        (_, Cancelled) => &mut diff.cancelled,
        (Completed | Cancelled, _) => &mut diff.reopened,
        (Pending, InProgress) => &mut diff.started,
        (InProgress, Pending) => &mut diff.paused,
        _ => return,
    };
    bucket.push(id.to_string());
}

/// Applies a proposed list to the previous one.  `retired` holds items that
/// left the list earlier in the session, so an id the model remembers can
/// bring its item back; items leaving now are moved there.  Every error is
/// found before `retired` or `ids` change, so a failed call leaves them as
/// they were.
pub fn reconcile(
    previous: &[Item],
    retired: &mut HashMap<String, Item>,
    ids: &mut IdCounter,
    proposed: &[ProposedItem],
    at: Timestamp,
) -> Result<Reconciled, InvalidInput> {
    let position: HashMap<&str, usize> = previous.iter().enumerate().map(|(j, it)| (it.id.as_str(), j)).collect();
    let mut matches: Vec<Option<usize>> = vec![None; proposed.len()];
    let mut claimed = vec![false; previous.len()];
    for (i, item) in proposed.iter().enumerate() {
        if let Some(id) = &item.id {
            match position.get(id.as_str()) {
                Some(&j) => {
                    matches[i] = Some(j);
                    claimed[j] = true;
                }
                None if retired.contains_key(id) => {}
                None => {
                    return Err(InvalidInput::new(
                        format!("todos[{i}].id"),
                        format!(
                            "unknown id {}: use an id from the last todo_write result, or omit id for a new item",
                            quote(id)
                        ),
                    ))
                }
            }
        }
    }
    match_by_content(previous, proposed, &mut matches, &mut claimed);

    let mut diff = Diff::default();
    let mut seen_in_progress = false;
    let mut items = Vec::with_capacity(proposed.len());
    for (i, wanted) in proposed.iter().enumerate() {
        let mut status = wanted.status;
        let demoted = status == Status::InProgress && seen_in_progress;
        if demoted {
            status = Status::Pending;
        }
        seen_in_progress |= status == Status::InProgress;

        let existing = match (matches[i], &wanted.id) {
            (Some(j), _) => Some(previous[j].clone()),
            (None, Some(id)) => retired.remove(id).inspect(|item| diff.restored.push(item.id.clone())),
            (None, None) => None,
        };
        let item = match existing {
            Some(mut item) => {
                if item.content != wanted.content {
                    diff.reworded.push(item.id.clone());
                    // A real rewording makes the old activeForm wrong; a change
                    // of case or punctuation does not.
                    if normalise(&item.content) != normalise(&wanted.content) {
                        item.active_form = wanted.content.clone();
                    }
                    item.content = wanted.content.clone();
                }
                if let Some(form) = &wanted.active_form {
                    item.active_form = form.clone();
                }
                record_transition(&mut diff, &item.id, item.status, status);
                item.set_status(status, at);
                item
            }
            None => {
                let item = Item::new(ids.issue(), wanted.content.clone(), wanted.active_form.clone(), status, at);
                diff.added.push(item.id.clone());
                item
            }
        };
        if demoted {
            diff.demoted.push(item.id.clone());
        }
        items.push(item);
    }
    for (j, item) in previous.iter().enumerate() {
        if !claimed[j] {
            if item.status.is_open() {
                diff.dropped.push(item.clone());
            } else {
                diff.removed.push(item.clone());
            }
            retired.insert(item.id.clone(), item.clone());
        }
    }
    Ok(Reconciled { items, diff })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn proposed(id: Option<&str>, content: &str, status: Status) -> ProposedItem {
        ProposedItem { id: id.map(String::from), content: content.into(), active_form: None, status }
    }

    struct Fixture {
        items: Vec<Item>,
        retired: HashMap<String, Item>,
        ids: IdCounter,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture { items: vec![], retired: HashMap::new(), ids: IdCounter::default() }
        }
        fn write(&mut self, list: &[ProposedItem]) -> Result<Diff, InvalidInput> {
            let r = reconcile(&self.items, &mut self.retired, &mut self.ids, list, 1.0)?;
            self.items = r.items;
            Ok(r.diff)
        }
        fn ids(&self) -> Vec<&str> {
            self.items.iter().map(|i| i.id.as_str()).collect()
        }
    }

    use Status::*;

    #[test]
    fn new_items_get_sequential_ids_and_keep_them() {
        let mut f = Fixture::new();
        let diff = f.write(&[proposed(None, "Read the file", InProgress), proposed(None, "Fix the bug", Pending)]).unwrap();
        assert_eq!(f.ids(), ["t1", "t2"]);
        assert_eq!(diff.added, ["t1", "t2"]);
        let diff = f
            .write(&[proposed(Some("t1"), "Read the file", Completed), proposed(None, "Fix the bug", InProgress)])
            .unwrap();
        assert_eq!(f.ids(), ["t1", "t2"]);
        assert_eq!((diff.completed.clone(), diff.started.clone()), (vec!["t1".to_string()], vec!["t2".to_string()]));
    }

    #[test]
    fn matching_falls_back_from_exact_to_normalised_to_similar() {
        let mut f = Fixture::new();
        f.write(&[
            proposed(None, "Read config.el", Pending),
            proposed(None, "Fix the parser bug", Pending),
            proposed(None, "Write tests for the tokenizer module", Pending),
        ])
        .unwrap();
        let diff = f
            .write(&[
                proposed(None, "write tests for the tokeniser module", Pending),
                proposed(None, "  fix the PARSER bug!", Pending),
                proposed(None, "Read config.el", Pending),
            ])
            .unwrap();
        assert_eq!(f.ids(), ["t3", "t2", "t1"]);
        assert_eq!(diff.reworded, ["t3", "t2"]);
        assert_eq!(f.items[1].active_form, "Fix the parser bug");
        assert_eq!(f.items[0].active_form, "write tests for the tokeniser module");
        assert!(diff.added.is_empty() && diff.dropped.is_empty());
    }

    #[test]
    fn dissimilar_items_are_new_and_the_old_ones_dropped() {
        let mut f = Fixture::new();
        f.write(&[proposed(None, "Update the changelog", Pending)]).unwrap();
        let diff = f.write(&[proposed(None, "Deploy to production", Pending)]).unwrap();
        assert_eq!(f.ids(), ["t2"]);
        assert_eq!(diff.dropped[0].id, "t1");
    }

    #[test]
    fn first_in_progress_wins() {
        let mut f = Fixture::new();
        let diff = f
            .write(&[proposed(None, "a", Pending), proposed(None, "b", InProgress), proposed(None, "c", InProgress)])
            .unwrap();
        assert_eq!(diff.demoted, ["t3"]);
        assert_eq!(f.items[2].status, Pending);
        assert_eq!(f.items[1].status, InProgress);
    }

    #[test]
    fn unknown_ids_are_errors_and_retired_ids_come_back() {
        let mut f = Fixture::new();
        f.write(&[proposed(None, "a", Completed), proposed(None, "b", Pending)]).unwrap();
        let err = f.write(&[proposed(Some("t9"), "a", Pending)]).unwrap_err();
        assert_eq!(err.path, "todos[0].id");
        assert_eq!(f.ids(), ["t1", "t2"]);
        let diff = f.write(&[proposed(Some("t2"), "b", Pending)]).unwrap();
        assert_eq!(diff.removed[0].id, "t1");
        let diff = f.write(&[proposed(Some("t2"), "b", Pending), proposed(Some("t1"), "a", Completed)]).unwrap();
        assert_eq!(diff.restored, ["t1"]);
        assert_eq!(f.ids(), ["t2", "t1"]);
    }

    #[test]
    fn rewriting_the_same_list_changes_nothing() {
        let mut f = Fixture::new();
        let list = [proposed(None, "a", InProgress), proposed(None, "b", Pending)];
        f.write(&list).unwrap();
        assert!(f.write(&list).unwrap().is_empty());
    }

    #[test]
    fn status_transitions_are_classified() {
        let mut f = Fixture::new();
        f.write(&[proposed(None, "a", InProgress), proposed(None, "b", Completed), proposed(None, "c", Pending)]).unwrap();
        let diff = f
            .write(&[proposed(Some("t1"), "a", Pending), proposed(Some("t2"), "b", InProgress), proposed(Some("t3"), "c", Cancelled)])
            .unwrap();
        assert_eq!(diff.paused, ["t1"]);
        assert_eq!(diff.reopened, ["t2"]);
        assert_eq!(diff.cancelled, ["t3"]);
    }

    #[test]
    fn similarity_is_symmetric_and_bounded() {
        assert_eq!(similarity("abc", "abc"), 1.0);
        assert!(similarity("Fix the parser", "Deploy everything") < SIMILARITY_THRESHOLD);
        assert_eq!(similarity("a b", "b a"), similarity("b a", "a b"));
    }

    fn arb_status() -> impl Strategy<Value = Status> {
        prop::sample::select(Status::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn ids_stay_unique_and_never_change_meaning(
            writes in prop::collection::vec(
                prop::collection::vec(("[a-e]{1,3}", arb_status(), any::<bool>()), 0..8), 1..8)
        ) {
            let mut f = Fixture::new();
            let mut ever: HashMap<String, usize> = HashMap::new();
            for (round, write) in writes.iter().enumerate() {
                let list: Vec<ProposedItem> = write
                    .iter()
                    .map(|(content, status, keep_id)| {
                        let id = if *keep_id {
                            f.items.iter().find(|i| &i.content == content).map(|i| i.id.clone())
                        } else { None };
                        ProposedItem { id, content: content.clone(), active_form: None, status: *status }
                    })
                    .collect();
                // Keeping an id for two items with one content would be a duplicate id,
                // which validation rejects before reconcile; skip such rounds.
                let mut seen = HashSet::new();
                if list.iter().filter_map(|p| p.id.clone()).any(|id| !seen.insert(id)) { continue; }
                let diff = f.write(&list).unwrap();
                let ids: HashSet<&str> = f.items.iter().map(|i| i.id.as_str()).collect();
                prop_assert_eq!(ids.len(), f.items.len());
                prop_assert!(f.items.iter().filter(|i| i.status == InProgress).count() <= 1);
                for id in &diff.added {
                    prop_assert!(ever.insert(id.clone(), round).is_none(), "id {} reused", id);
                }
                prop_assert_eq!(f.items.len(), list.len());
            }
        }
    }
}

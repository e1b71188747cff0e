//! Old list + proposed list -> new list + what changed.
//!
//! The model sends the whole list every time and often forgets ids, rewords
//! items or leaves some out.  Reconciling keeps ids stable across all of that
//! and records every change so the result text can tell the model about it.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::history::{reordered, ChangedIds, UndoData};
use crate::model::{ids_rise, IdCounter, Item, Status, Timestamp};
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
    /// Items put under another parent, or to the top level.
    pub reparented: Vec<String>,
    /// Items whose description, owner or blockers changed.
    pub edited: Vec<String>,
    /// Pending items that waited and are ready now: news, not a change.
    pub now_ready: Vec<String>,
    /// The items kept from the previous list stand in another order: a
    /// change even when no item changed, which the model must be shown.
    pub moved: bool,
}

impl Diff {
    /// The ids each kind of change touched, as the history records them.
    pub fn changed_ids(&self) -> ChangedIds {
        let ids = |items: &[Item]| items.iter().map(|i| i.id.clone()).collect();
        ChangedIds {
            added: self.added.clone(),
            started: self.started.clone(),
            completed: self.completed.clone(),
            cancelled: self.cancelled.clone(),
            reopened: self.reopened.clone(),
            paused: self.paused.clone(),
            reworded: {
                let mut ids = self.reworded.clone();
                ids.extend(
                    self.edited
                        .iter()
                        .filter(|id| !self.reworded.contains(id))
                        .cloned(),
                );
                ids
            },
            restored: self.restored.clone(),
            demoted: self.demoted.clone(),
            dropped: ids(&self.dropped),
            removed: ids(&self.removed),
            reparented: self.reparented.clone(),
            moved: self.moved,
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.moved
            && self.touched().all(<[String]>::is_empty)
            && self.dropped.is_empty()
            && self.removed.is_empty()
    }

    /// The groups of ids of items in the new list that this write touched.
    fn touched(&self) -> impl Iterator<Item = &[String]> {
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
            &self.reparented,
            &self.edited,
        ]
        .into_iter()
        .map(Vec::as_slice)
    }

    /// Ids of items in the new list that this write touched.
    pub(crate) fn changed_id_set(&self) -> FxHashSet<&str> {
        self.touched().flatten().map(String::as_str).collect()
    }
}

#[derive(Debug, Clone)]
pub struct Reconciled {
    pub items: Vec<Item>,
    pub diff: Diff,
    /// What undo needs to go back to the previous list, without the retired
    /// items brought back (the caller knows those); None when nothing changed.
    pub undo: Option<UndoData>,
}

/// Lowercase, punctuation and runs of whitespace folded to one space: the
/// differences a model introduces when it retypes an item.
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Only letters, digits and single spaces between words come out, so
    // this is the text mapped to words joined by one space.
    let mut space_pending = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if space_pending && !out.is_empty() {
                out.push(' ');
            }
            space_pending = false;
            out.push(c.to_lowercase().next().unwrap_or(c));
        } else {
            space_pending = true;
        }
    }
    out
}

/// The character bigrams of a normalised text with their counts, sorted, so
/// that two profiles compare in one merge.
struct Profile {
    normalised: String,
    bigrams: Vec<((char, char), u32)>,
    total: u32,
}

impl Profile {
    fn of(text: &str) -> Profile {
        let normalised = normalise(text);
        let chars: Vec<char> = normalised.chars().collect();
        let mut pairs: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
        pairs.sort_unstable();
        let total = pairs.len() as u32;
        let mut bigrams: Vec<((char, char), u32)> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            match bigrams.last_mut() {
                Some((last, n)) if *last == pair => *n += 1,
                _ => bigrams.push((pair, 1)),
            }
        }
        Profile {
            normalised,
            bigrams,
            total,
        }
    }

    /// Dice coefficient over the bigram counts, in [0, 1].
    fn similarity(&self, other: &Profile) -> f64 {
        if self.normalised == other.normalised {
            return 1.0;
        }
        let total = self.total + other.total;
        if total == 0 {
            return 0.0;
        }
        let (mut a, mut b) = (
            self.bigrams.iter().peekable(),
            other.bigrams.iter().peekable(),
        );
        let mut shared = 0;
        while let (Some((ka, na)), Some((kb, nb))) = (a.peek(), b.peek()) {
            match ka.cmp(kb) {
                std::cmp::Ordering::Less => {
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    shared += (*na).min(*nb);
                    a.next();
                    b.next();
                }
            }
        }
        f64::from(2 * shared) / f64::from(total)
    }
}

/// Dice coefficient over character bigrams of the normalised texts, in [0, 1].
pub fn similarity(a: &str, b: &str) -> f64 {
    Profile::of(a).similarity(&Profile::of(b))
}

/// No further previous item with the same key.
const END: usize = usize::MAX;

/// Previous items by a key of their content, each key's items in list order:
/// `first` holds the head of each chain and `next` links the rest, so that
/// no key needs a vector of its own.
struct Chains<K> {
    first: FxHashMap<K, usize>,
    next: Vec<usize>,
}

impl<K: std::hash::Hash + Eq> Chains<K> {
    fn of<'a>(previous: &'a [Item], claimed: &[bool], key: impl Fn(&'a Item) -> K) -> Chains<K> {
        let mut chains = Chains {
            first: FxHashMap::default(),
            next: vec![END; previous.len()],
        };
        chains.first.reserve(previous.len());
        for (j, item) in previous.iter().enumerate().rev() {
            if !claimed[j] {
                if let Some(after) = chains.first.insert(key(item), j) {
                    chains.next[j] = after;
                }
            }
        }
        chains
    }

    /// The first previous item with KEY not taken yet, now taken.
    fn take<Q>(&mut self, key: &Q) -> Option<usize>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        let head = self.first.get_mut(key)?;
        let j = *head;
        if j == END {
            return None;
        }
        *head = self.next[j];
        Some(j)
    }
}

/// Lists up to this long are searched item by item: for them a hash table
/// costs more than it saves.
const SMALL_LIST: usize = 8;

/// Pairs proposed items without ids to unclaimed previous items; returns for
/// each proposed index the previous index it continues, if any.
fn match_by_content(
    previous: &[Item],
    proposed: &[ProposedItem],
    matches: &mut [Option<usize>],
    claimed: &mut [bool],
    small_list: usize,
) {
    let mut open_new: Vec<usize> = (0..proposed.len())
        .filter(|&i| matches[i].is_none() && proposed[i].id.is_none())
        .collect();
    let any_open_old = |claimed: &[bool]| claimed.iter().any(|c| !c);
    if open_new.is_empty() || !any_open_old(claimed) {
        return;
    }
    // Exact, then normalised: the first unclaimed previous item with that key wins.
    let mut agreeing = 0;
    if open_new.len() == proposed.len() {
        // No item has an id, so none is claimed yet.  While the two lists
        // agree item for item, every earlier previous item is claimed, so
        // the first unclaimed one with the content is the one in place.
        while agreeing < proposed.len().min(previous.len())
            && previous[agreeing].content == proposed[agreeing].content
        {
            matches[agreeing] = Some(agreeing);
            claimed[agreeing] = true;
            agreeing += 1;
        }
    }
    let rest = &open_new[agreeing..];
    if rest.is_empty() || !any_open_old(claimed) {
        // Nothing left to match by content.
    } else if previous.len() <= small_list {
        for &i in rest {
            let wanted = proposed[i].content;
            if let Some(j) =
                (0..previous.len()).find(|&j| !claimed[j] && previous[j].content == wanted)
            {
                matches[i] = Some(j);
                claimed[j] = true;
            }
        }
    } else {
        let mut exact = Chains::of(previous, claimed, |item| item.content.as_str());
        for &i in rest {
            if let Some(j) = exact.take(proposed[i].content) {
                matches[i] = Some(j);
                claimed[j] = true;
            }
        }
    }
    open_new.retain(|&i| matches[i].is_none());
    if open_new.is_empty() || !any_open_old(claimed) {
        return;
    }
    let mut normalised = Chains::of(previous, claimed, |item| normalise(&item.content));
    for &i in &open_new {
        if let Some(j) = normalised.take(normalise(proposed[i].content).as_str()) {
            matches[i] = Some(j);
            claimed[j] = true;
        }
    }
    open_new.retain(|&i| matches[i].is_none());
    let open_old: Vec<usize> = (0..previous.len()).filter(|&j| !claimed[j]).collect();
    if open_new.is_empty()
        || open_old.is_empty()
        || open_new.len() * open_old.len() > MAX_SIMILARITY_PAIRS
    {
        return;
    }
    let new_profiles: Vec<Profile> = open_new
        .iter()
        .map(|&i| Profile::of(proposed[i].content))
        .collect();
    let old_profiles: Vec<Profile> = open_old
        .iter()
        .map(|&j| Profile::of(&previous[j].content))
        .collect();
    let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
    for (&i, new) in open_new.iter().zip(&new_profiles) {
        for (&j, old) in open_old.iter().zip(&old_profiles) {
            let score = new.similarity(old);
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

/// Which previous item each proposed item continues.  Finding it is the only
/// step of reconciling that can fail, and it changes nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Matching {
    /// For each proposed item, the index of the previous item it continues.
    matches: Vec<Option<usize>>,
    /// For each previous item, whether a proposed item continues it.
    claimed: Vec<bool>,
    /// No two previous items share an id.
    unique_ids: bool,
}

impl Matching {
    /// The index of the previous item proposed item I continues, if any.
    pub fn continued(&self, i: usize) -> Option<usize> {
        self.matches.get(i).copied().flatten()
    }
}

/// Matches a proposed list to the previous one: by id, then by content
/// (exact, normalised, similar).  Fails on an id that is neither in the list
/// nor retired.
pub fn match_items(
    previous: &[Item],
    retired: &FxHashMap<String, Item>,
    proposed: &[ProposedItem],
) -> Result<Matching, InvalidInput> {
    match_items_with(previous, retired, proposed, SMALL_LIST)
}

/// `match_items`, searching lists up to SMALL_LIST long item by item.
fn match_items_with(
    previous: &[Item],
    retired: &FxHashMap<String, Item>,
    proposed: &[ProposedItem],
    small_list: usize,
) -> Result<Matching, InvalidInput> {
    let mut matches: Vec<Option<usize>> = vec![None; proposed.len()];
    let mut claimed = vec![false; previous.len()];
    let unique_ids = ids_are_unique(previous);
    if proposed.iter().any(|p| p.id.is_some()) {
        let mut position: Option<FxHashMap<&str, usize>> = None;
        // The last item with an id answers for it.  When ids are unique, an
        // item most often stands where it stood, so that place is tried
        // first and the table built only when it is needed.
        let mut find = |i: usize, id: &str| {
            if unique_ids && previous.get(i).is_some_and(|it| it.id == id) {
                return Some(i);
            }
            if previous.len() <= small_list {
                return previous.iter().rposition(|it| it.id == id);
            }
            let position = position.get_or_insert_with(|| {
                let mut position = FxHashMap::default();
                position.reserve(previous.len());
                position.extend(
                    previous
                        .iter()
                        .enumerate()
                        .map(|(j, it)| (it.id.as_str(), j)),
                );
                position
            });
            position.get(id).copied()
        };
        for (i, item) in proposed.iter().enumerate() {
            if let Some(id) = item.id {
                match find(i, id) {
                    Some(j) => {
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
    }
    match_by_content(previous, proposed, &mut matches, &mut claimed, small_list);
    Ok(Matching {
        matches,
        claimed,
        unique_ids,
    })
}

/// Brings ITEM to what WANTED says, noting the changes in DIFF; returns the
/// item as it was when anything about it changed and KEEP_EARLIER is set.
pub(crate) fn update(
    item: &mut Item,
    wanted: &ProposedItem,
    status: Status,
    at: Timestamp,
    diff: &mut Diff,
    keep_earlier: bool,
) -> Option<Item> {
    let mut earlier_content = None;
    let mut earlier_form = None;
    if item.content != wanted.content {
        diff.reworded.push(item.id.clone());
        // A real rewording makes the old activeForm wrong; a change of case
        // or punctuation does not.  A given activeForm wins either way.
        if wanted.active_form.is_none() && normalise(&item.content) != normalise(wanted.content) {
            earlier_form = Some(std::mem::replace(
                &mut item.active_form,
                wanted.content.to_string(),
            ));
        }
        earlier_content = Some(std::mem::replace(
            &mut item.content,
            wanted.content.to_string(),
        ));
    }
    if let Some(form) = wanted.active_form {
        if item.active_form != form {
            // A new activeForm alone is a rewording too: the model must
            // hear that the write did something.
            if earlier_content.is_none() && item.status == status {
                diff.reworded.push(item.id.clone());
            }
            earlier_form = Some(std::mem::replace(&mut item.active_form, form.to_string()));
        }
    }
    let mut earlier_parent = None;
    if item.parent.as_deref() != wanted.parent {
        diff.reparented.push(item.id.clone());
        earlier_parent = Some(std::mem::replace(
            &mut item.parent,
            wanted.parent.map(str::to_string),
        ));
    }
    let mut edited = false;
    let earlier_description = (item.description.as_deref() != wanted.description).then(|| {
        edited = true;
        std::mem::replace(
            &mut item.description,
            wanted.description.map(str::to_string),
        )
    });
    let earlier_owner = (item.owner.as_deref() != wanted.owner).then(|| {
        edited = true;
        std::mem::replace(&mut item.owner, wanted.owner.map(str::to_string))
    });
    let earlier_blocked_by = (item.blocked_by != wanted.blocked_by).then(|| {
        edited = true;
        std::mem::replace(&mut item.blocked_by, wanted.blocked_by.clone())
    });
    if edited {
        diff.edited.push(item.id.clone());
    }
    let (was_status, was_started, was_completed) = (item.status, item.started, item.completed);
    record_transition(diff, &item.id, item.status, status);
    item.set_status(status, at);
    // Compared as `Item`'s equality compares, NaN times included, so that
    // undo data is exactly what comparing whole items would give.
    #[allow(clippy::eq_op)]
    let changed = earlier_content.is_some()
        || earlier_form
            .as_ref()
            .is_some_and(|form| *form != item.active_form)
        || earlier_parent.is_some()
        || edited
        || was_status != item.status
        || was_started != item.started
        || was_completed != item.completed
        || item.created != item.created;
    (changed && keep_earlier).then(|| Item {
        id: item.id.clone(),
        content: earlier_content.unwrap_or_else(|| item.content.clone()),
        active_form: earlier_form.unwrap_or_else(|| item.active_form.clone()),
        status: was_status,
        priority: item.priority.clone(),
        parent: earlier_parent.unwrap_or_else(|| item.parent.clone()),
        description: earlier_description.unwrap_or_else(|| item.description.clone()),
        blocked_by: earlier_blocked_by.unwrap_or_else(|| item.blocked_by.clone()),
        owner: earlier_owner.unwrap_or_else(|| item.owner.clone()),
        created: item.created,
        started: was_started,
        completed: was_completed,
    })
}

fn ids_are_unique(items: &[Item]) -> bool {
    if ids_rise(items.iter().map(|item| item.id.as_str())) {
        return true;
    }
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    seen.reserve(items.len());
    items.iter().all(|item| seen.insert(item.id.as_str()))
}

/// Builds the new list from PREVIOUS (taken over, so that unchanged items
/// are moved rather than copied) as MATCHING, made by `match_items` for
/// these same lists, says.  Items leaving the list go to RETIRED; retired
/// items a proposed id names come back.  Cannot fail.
pub fn apply(
    matching: Matching,
    previous: Vec<Item>,
    retired: &mut FxHashMap<String, Item>,
    ids: &mut IdCounter,
    proposed: &[ProposedItem],
    at: Timestamp,
) -> Reconciled {
    apply_by_runner(matching, previous, retired, ids, proposed, at, &|_| None)
}

/// `apply` with one item in progress per runner: RUNNER says who runs an
/// item with a given owner (None: the session's own agent).
pub fn apply_by_runner<'p>(
    matching: Matching,
    previous: Vec<Item>,
    retired: &mut FxHashMap<String, Item>,
    ids: &mut IdCounter,
    proposed: &[ProposedItem<'p>],
    at: Timestamp,
    runner: &dyn Fn(Option<&'p str>) -> Option<&'p str>,
) -> Reconciled {
    let Matching {
        matches,
        claimed,
        unique_ids,
    } = matching;
    // Undo data below relies on each id naming one item; a list that breaks
    // that (only Efrit's set-all can make one) takes the general way.
    let general = (!unique_ids).then(|| previous.clone());
    let mut moved = false;
    let mut last_kept = None;
    for j in matches.iter().flatten() {
        moved |= last_kept.is_some_and(|last| *j < last);
        last_kept = Some(*j);
    }
    let order = (moved || claimed.contains(&false))
        .then(|| previous.iter().map(|i| i.id.clone()).collect());
    let mut earlier: Vec<(usize, Item)> = Vec::new();
    let mut added: Vec<String> = Vec::new();
    let mut diff = Diff::default();
    // At most one item in progress per runner: the first one.  The
    // session's own agent is the usual runner, kept apart from the list.
    let mut own_running = false;
    let mut running: Vec<&'p str> = Vec::new();
    let mut status_of = |wanted: &ProposedItem<'p>| {
        let key = (wanted.status == Status::InProgress).then(|| runner(wanted.owner));
        let demoted = match key {
            Some(None) => own_running,
            Some(Some(agent)) => running.contains(&agent),
            None => false,
        };
        let status = if demoted {
            Status::Pending
        } else {
            wanted.status
        };
        match key {
            Some(None) => own_running = true,
            Some(Some(agent)) if !demoted => running.push(agent),
            _ => {}
        }
        (status, demoted)
    };

    // The common write: every item kept, in the same order.  It is done
    // in place, as the general way below would do it.
    let same_items =
        previous.len() == proposed.len() && matches.iter().enumerate().all(|(i, j)| *j == Some(i));
    if same_items && general.is_none() {
        let mut items = previous;
        for (i, (item, wanted)) in items.iter_mut().zip(proposed).enumerate() {
            let (status, demoted) = status_of(wanted);
            if let Some(was) = update(item, wanted, status, at, &mut diff, true) {
                earlier.push((i, was));
            }
            if demoted {
                diff.demoted.push(item.id.clone());
            }
        }
        let undo = (!earlier.is_empty()).then(|| UndoData {
            order: None,
            added,
            before: earlier.into_iter().map(|(_, item)| item).collect(),
            retired_before: Vec::new(),
        });
        return Reconciled { items, diff, undo };
    }

    let mut slots: Vec<Option<Item>> = previous.into_iter().map(Some).collect();
    let mut items = Vec::with_capacity(proposed.len());
    for (i, wanted) in proposed.iter().enumerate() {
        let (status, demoted) = status_of(wanted);
        let existing = match (matches.get(i).copied().flatten(), wanted.id) {
            (Some(j), _) => slots
                .get_mut(j)
                .and_then(Option::take)
                .map(|item| (Some(j), item)),
            (None, Some(id)) => retired.remove(id).map(|item| {
                diff.restored.push(item.id.clone());
                (None, item)
            }),
            (None, None) => None,
        };
        let item = match existing {
            Some((j, mut item)) => {
                if let Some(was) = update(&mut item, wanted, status, at, &mut diff, j.is_some()) {
                    earlier.extend(j.map(|j| (j, was)));
                }
                if j.is_none() {
                    added.push(item.id.clone());
                }
                item
            }
            None => {
                let mut item = Item::new(
                    ids.issue(),
                    wanted.content.to_string(),
                    wanted.active_form.map(str::to_string),
                    status,
                    at,
                );
                item.parent = wanted.parent.map(str::to_string);
                item.description = wanted.description.map(str::to_string);
                item.owner = wanted.owner.map(str::to_string);
                item.blocked_by = wanted.blocked_by.clone();
                diff.added.push(item.id.clone());
                added.push(item.id.clone());
                item
            }
        };
        if demoted {
            diff.demoted.push(item.id.clone());
        }
        items.push(item);
    }
    for (j, slot) in slots.into_iter().enumerate() {
        if let Some(item) = slot {
            if item.status.is_open() {
                diff.dropped.push(item.clone());
            } else {
                diff.removed.push(item.clone());
            }
            earlier.push((j, item.clone()));
            retired.insert(item.id.clone(), item);
        }
    }
    let undo = match general {
        Some(before) => {
            diff.moved = reordered(&before, &items);
            UndoData::between(before, &items, Vec::new())
        }
        None => {
            diff.moved = moved;
            let unchanged = earlier.is_empty() && added.is_empty() && order.is_none();
            earlier.sort_unstable_by_key(|(j, _)| *j);
            let before = earlier.into_iter().map(|(_, item)| item).collect();
            (!unchanged).then_some(UndoData {
                order,
                added,
                before,
                retired_before: Vec::new(),
            })
        }
    };
    Reconciled { items, diff, undo }
}

/// Applies a proposed list to the previous one.  `retired` holds items that
/// left the list earlier in the session, so an id the model remembers can
/// bring its item back; items leaving now are moved there.  Every error is
/// found before `retired` or `ids` change, so a failed call leaves them as
/// they were.
pub fn reconcile(
    previous: &[Item],
    retired: &mut FxHashMap<String, Item>,
    ids: &mut IdCounter,
    proposed: &[ProposedItem],
    at: Timestamp,
) -> Result<Reconciled, InvalidInput> {
    let matching = match_items(previous, retired, proposed)?;
    Ok(apply(
        matching,
        previous.to_vec(),
        retired,
        ids,
        proposed,
        at,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn proposed<'a>(id: Option<&'a str>, content: &'a str, status: Status) -> ProposedItem<'a> {
        ProposedItem {
            id,
            content,
            active_form: None,
            status,
            parent: None,
            description: None,
            blocked_by: Vec::new(),
            owner: None,
        }
    }

    struct Fixture {
        items: Vec<Item>,
        retired: FxHashMap<String, Item>,
        ids: IdCounter,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                items: vec![],
                retired: FxHashMap::default(),
                ids: IdCounter::default(),
            }
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
        let diff = f
            .write(&[
                proposed(None, "Read the file", InProgress),
                proposed(None, "Fix the bug", Pending),
            ])
            .unwrap();
        assert_eq!(f.ids(), ["t1", "t2"]);
        assert_eq!(diff.added, ["t1", "t2"]);
        let diff = f
            .write(&[
                proposed(Some("t1"), "Read the file", Completed),
                proposed(None, "Fix the bug", InProgress),
            ])
            .unwrap();
        assert_eq!(f.ids(), ["t1", "t2"]);
        assert_eq!(
            (diff.completed.clone(), diff.started.clone()),
            (vec!["t1".to_string()], vec!["t2".to_string()])
        );
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
        assert_eq!(
            f.items[0].active_form,
            "write tests for the tokeniser module"
        );
        assert!(diff.added.is_empty() && diff.dropped.is_empty());
    }

    #[test]
    fn dissimilar_items_are_new_and_the_old_ones_dropped() {
        let mut f = Fixture::new();
        f.write(&[proposed(None, "Update the changelog", Pending)])
            .unwrap();
        let diff = f
            .write(&[proposed(None, "Deploy to production", Pending)])
            .unwrap();
        assert_eq!(f.ids(), ["t2"]);
        assert_eq!(diff.dropped[0].id, "t1");
    }

    #[test]
    fn first_in_progress_wins() {
        let mut f = Fixture::new();
        let diff = f
            .write(&[
                proposed(None, "a", Pending),
                proposed(None, "b", InProgress),
                proposed(None, "c", InProgress),
            ])
            .unwrap();
        assert_eq!(diff.demoted, ["t3"]);
        assert_eq!(f.items[2].status, Pending);
        assert_eq!(f.items[1].status, InProgress);
    }

    #[test]
    fn unknown_ids_are_errors_and_retired_ids_come_back() {
        let mut f = Fixture::new();
        f.write(&[proposed(None, "a", Completed), proposed(None, "b", Pending)])
            .unwrap();
        let err = f.write(&[proposed(Some("t9"), "a", Pending)]).unwrap_err();
        assert_eq!(err.path, "todos[0].id");
        assert_eq!(f.ids(), ["t1", "t2"]);
        let diff = f.write(&[proposed(Some("t2"), "b", Pending)]).unwrap();
        assert_eq!(diff.removed[0].id, "t1");
        let diff = f
            .write(&[
                proposed(Some("t2"), "b", Pending),
                proposed(Some("t1"), "a", Completed),
            ])
            .unwrap();
        assert_eq!(diff.restored, ["t1"]);
        assert_eq!(f.ids(), ["t2", "t1"]);
    }

    #[test]
    fn rewriting_the_same_list_changes_nothing() {
        let mut f = Fixture::new();
        let list = [
            proposed(None, "a", InProgress),
            proposed(None, "b", Pending),
        ];
        f.write(&list).unwrap();
        assert!(f.write(&list).unwrap().is_empty());
    }

    #[test]
    fn the_same_items_in_reverse_order_are_a_reorder() {
        let mut f = Fixture::new();
        let contents: Vec<String> = (1..=12).map(|n| format!("Step {n}")).collect();
        let forward: Vec<ProposedItem> = contents
            .iter()
            .map(|c| proposed(None, c, Pending))
            .collect();
        let backward: Vec<ProposedItem> = forward.iter().rev().cloned().collect();
        f.write(&forward).unwrap();
        let r = reconcile(&f.items, &mut f.retired, &mut f.ids, &backward, 2.0).unwrap();
        let ids: Vec<&str> = r.items.iter().map(|i| i.id.as_str()).collect();
        let reversed: Vec<String> = (1..=12).rev().map(|n| format!("t{n}")).collect();
        assert_eq!(ids, reversed);
        assert!(!r.diff.is_empty(), "a reorder is a change");
        assert!(r.diff.changed_ids().moved);
        assert!(r.undo.is_some());
    }

    #[test]
    fn status_transitions_are_classified() {
        let mut f = Fixture::new();
        f.write(&[
            proposed(None, "a", InProgress),
            proposed(None, "b", Completed),
            proposed(None, "c", Pending),
        ])
        .unwrap();
        let diff = f
            .write(&[
                proposed(Some("t1"), "a", Pending),
                proposed(Some("t2"), "b", InProgress),
                proposed(Some("t3"), "c", Cancelled),
            ])
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
            let mut ever: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
            for (round, write) in writes.iter().enumerate() {
                let kept_ids: Vec<Option<String>> = write
                    .iter()
                    .map(|(content, _, keep_id)| {
                        keep_id.then(|| f.items.iter().find(|i| &i.content == content).map(|i| i.id.clone())).flatten()
                    })
                    .collect();
                let list: Vec<ProposedItem> = write
                    .iter()
                    .zip(&kept_ids)
                    .map(|((content, status, _), id)| ProposedItem { id: id.as_deref(), content, active_form: None, status: *status, parent: None, description: None, blocked_by: Vec::new(), owner: None, })
                    .collect();
                // Keeping an id for two items with one content would be a duplicate id,
                // which validation rejects before reconcile; skip such rounds.
                let mut seen = HashSet::new();
                if list.iter().filter_map(|p| p.id).any(|id| !seen.insert(id)) { continue; }
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

    /// A deliberately simple reference implementation of the matching, as
    /// it was first written: a table per key and the similarity recomputed
    /// for every pair.  The fast matching must agree with it.
    mod reference {
        use super::super::*;
        use std::collections::HashMap;

        pub fn normalise(text: &str) -> String {
            text.chars()
                .map(|c| {
                    if c.is_alphanumeric() {
                        c.to_lowercase().next().unwrap_or(c)
                    } else {
                        ' '
                    }
                })
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
            let shared: u32 = ga
                .iter()
                .map(|(k, n)| (*n).min(*gb.get(k).unwrap_or(&0)))
                .sum();
            f64::from(2 * shared) / f64::from(total)
        }

        pub fn matches(
            previous: &[Item],
            retired: &FxHashMap<String, Item>,
            proposed: &[ProposedItem],
        ) -> Result<(Vec<Option<usize>>, Vec<bool>), String> {
            let position: HashMap<&str, usize> = previous
                .iter()
                .enumerate()
                .map(|(j, it)| (it.id.as_str(), j))
                .collect();
            let mut matches: Vec<Option<usize>> = vec![None; proposed.len()];
            let mut claimed = vec![false; previous.len()];
            for (i, item) in proposed.iter().enumerate() {
                if let Some(id) = item.id {
                    match position.get(id) {
                        Some(&j) => {
                            matches[i] = Some(j);
                            claimed[j] = true;
                        }
                        None if retired.contains_key(id) => {}
                        None => return Err(format!("todos[{i}].id")),
                    }
                }
            }
            let unmatched = |matches: &[Option<usize>]| -> Vec<usize> {
                (0..proposed.len())
                    .filter(|&i| matches[i].is_none() && proposed[i].id.is_none())
                    .collect()
            };
            let keys: [fn(&str) -> String; 2] = [str::to_string, normalise];
            for key in keys {
                let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
                for (j, item) in previous.iter().enumerate().rev() {
                    if !claimed[j] {
                        by_key.entry(key(&item.content)).or_default().push(j);
                    }
                }
                for i in unmatched(&matches) {
                    if let Some(j) = by_key.get_mut(&key(proposed[i].content)).and_then(Vec::pop) {
                        matches[i] = Some(j);
                        claimed[j] = true;
                    }
                }
            }
            let open_new = unmatched(&matches);
            let open_old: Vec<usize> = (0..previous.len()).filter(|&j| !claimed[j]).collect();
            if open_new.is_empty()
                || open_old.is_empty()
                || open_new.len() * open_old.len() > MAX_SIMILARITY_PAIRS
            {
                return Ok((matches, claimed));
            }
            let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
            for &i in &open_new {
                for &j in &open_old {
                    let score = similarity(proposed[i].content, &previous[j].content);
                    if score >= SIMILARITY_THRESHOLD {
                        pairs.push((score, i, j));
                    }
                }
            }
            pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            for (_, i, j) in pairs {
                if matches[i].is_none() && !claimed[j] {
                    matches[i] = Some(j);
                    claimed[j] = true;
                }
            }
            Ok((matches, claimed))
        }
    }

    const CONTENTS: [&str; 12] = [
        "Fix the parser bug",
        "fix the PARSER bug!",
        "Fix the parser bugs",
        "Write tests for the tokenizer",
        "write tests for the tokeniser",
        "Read config.el",
        "Deploy",
        "a",
        "a",
        "b",
        "  ",
        "İstanbul ünïcode — Ⅻ",
    ];

    /// A previous list (ids t1.. in some order, a few ids repeated or not
    /// of the t form), retired items, and a proposed list naming some ids.
    type Case = (
        Vec<Item>,
        FxHashMap<String, Item>,
        Vec<(Option<String>, &'static str, Status)>,
    );

    fn arb_case() -> impl Strategy<Value = Case> {
        let previous = prop::collection::vec((0..CONTENTS.len(), arb_status(), 0u8..20), 0..14)
            .prop_map(|specs| {
                specs
                    .into_iter()
                    .enumerate()
                    .map(|(n, (c, status, id_kind))| {
                        let id = match id_kind {
                            0 => "t1".to_string(),
                            1 => format!("x{n}"),
                            2 => format!("t{}", 40 - n),
                            _ => format!("t{}", n + 1),
                        };
                        let mut item = Item::new(id, CONTENTS[c].to_string(), None, status, 1.0);
                        // Some items are subtasks already, so that writes move them too.
                        item.parent = (n % 4 == 2).then(|| "t1".to_string());
                        item
                    })
                    .collect::<Vec<_>>()
            });
        (
            previous,
            prop::collection::vec((0u8..30, 0..CONTENTS.len(), arb_status()), 0..14),
        )
            .prop_map(|(previous, wanted)| {
                let mut retired = FxHashMap::default();
                retired.insert(
                    "t90".to_string(),
                    Item::new("t90".into(), "Retired".into(), None, Status::Pending, 0.0),
                );
                let proposed = wanted
                    .into_iter()
                    .enumerate()
                    .map(|(n, (id_kind, c, status))| {
                        let id = match id_kind {
                            0..=5 => previous.get(n).map(|it| it.id.clone()),
                            6..=8 if !previous.is_empty() => {
                                Some(previous[usize::from(id_kind) % previous.len()].id.clone())
                            }
                            9 => Some("t90".to_string()),
                            10 => Some("t77".to_string()),
                            _ => None,
                        };
                        (id, CONTENTS[c], status)
                    })
                    .collect();
                (previous, retired, proposed)
            })
    }

    proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn fast_matching_agrees_with_the_first_one((previous, retired, wanted) in arb_case()) {
                let proposed: Vec<ProposedItem> =
                    wanted.iter().map(|(id, content, status)| ProposedItem { id: id.as_deref(), content, active_form: None, status: *status, parent: None, description: None, blocked_by: Vec::new(), owner: None, }).collect();
                let expected = reference::matches(&previous, &retired, &proposed);
                for small_list in [0, SMALL_LIST, usize::MAX] {
                    let got = match_items_with(&previous, &retired, &proposed, small_list)
                        .map(|m| (m.matches, m.claimed))
                        .map_err(|e| e.path);
                    prop_assert_eq!(&got, &expected, "small_list {}", small_list);
                }
            }

            #[test]
            fn undo_data_from_matching_is_what_comparing_the_lists_gives((previous, retired, wanted) in arb_case()) {
                let proposed: Vec<ProposedItem> = wanted
                    .iter()
                    .enumerate()
                    .map(|(n, (id, content, status))| ProposedItem {
                        id: id.as_deref(),
                        content,
                        active_form: (n % 3 == 0).then_some("Doing it"),
                        status: *status,
                        parent: (n % 4 == 1).then_some("t1"),
    description: None, blocked_by: Vec::new(), owner: None, })
                    .collect();
                // Validation rejects a list that repeats an id before reconcile sees it.
                let mut named = HashSet::new();
                prop_assume!(proposed.iter().filter_map(|p| p.id).all(|id| named.insert(id)));
                let Ok(matching) = match_items(&previous, &retired, &proposed) else { return Ok(()) };
                let (mut retired_fast, mut ids) = (retired.clone(), IdCounter::default());
                ids.raise_to(100);
                let fast = apply(matching, previous.clone(), &mut retired_fast, &mut ids, &proposed, 2.0);
                prop_assert_eq!(fast.undo.clone(), UndoData::between(previous.clone(), &fast.items, Vec::new()));
                prop_assert_eq!(fast.diff.moved, reordered(&previous, &fast.items));
                // A write changes something exactly when it can be undone.
                prop_assert_eq!(fast.diff.is_empty(), fast.undo.is_none());
                // The same write through the copying entry point.
                let (mut retired_copy, mut ids) = (retired.clone(), IdCounter::default());
                ids.raise_to(100);
                let copied = reconcile(&previous, &mut retired_copy, &mut ids, &proposed, 2.0).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&copied.items, &fast.items);
                prop_assert_eq!(&copied.diff, &fast.diff);
                prop_assert_eq!(&retired_copy, &retired_fast);
            }

            #[test]
            fn normalise_and_similarity_agree_with_the_first_ones(a in "(?s).{0,24}", b in "[a-cA-C .!-]{0,12}") {
                prop_assert_eq!(normalise(&a), reference::normalise(&a));
                prop_assert_eq!(normalise(&b), reference::normalise(&b));
                prop_assert_eq!(similarity(&a, &b).to_bits(), reference::similarity(&a, &b).to_bits());
                for (x, y) in CONTENTS.iter().zip(CONTENTS.iter().rev()) {
                    prop_assert_eq!(similarity(x, y).to_bits(), reference::similarity(x, y).to_bits());
                }
            }
        }

    #[test]
    fn ids_are_known_unique_by_rising_numbers_or_by_a_table() {
        let list = |ids: &[&str]| {
            ids.iter()
                .map(|id| Item::new(id.to_string(), "c".into(), None, Status::Pending, 0.0))
                .collect::<Vec<_>>()
        };
        assert!(ids_are_unique(&list(&["t1", "t2", "t10"])));
        assert!(ids_are_unique(&list(&["t2", "t1", "x"])));
        assert!(!ids_are_unique(&list(&["t2", "t1", "t2"])));
        assert!(
            ids_are_unique(&list(&["t1", "t+1"])),
            "distinct strings, equal numbers: the table decides"
        );
        assert!(!ids_are_unique(&list(&["x", "x"])));
    }
}

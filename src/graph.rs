//! The task graph: which items wait for which.  Edges are stored on the
//! waiting item only (`Item::blocked_by`); what an item blocks is derived
//! here, so the two directions can never disagree.  Everything is computed
//! from the edges in one pass, O(items + edges): a list of 1000 items must
//! not be rescanned once per item.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::model::{Item, Status};

/// Where each id stands in ITEMS.
pub fn index_of(items: &[Item]) -> FxHashMap<&str, usize> {
    let mut index = FxHashMap::default();
    index.reserve(items.len());
    for (n, item) in items.iter().enumerate() {
        index.entry(item.id.as_str()).or_insert(n);
    }
    index
}

/// `index_of` for the ids WANTED only: what a text about a few items
/// needs of a long list.
pub fn index_of_some<'a, 'w>(
    items: &'a [Item],
    wanted: impl IntoIterator<Item = &'w str>,
) -> FxHashMap<&'a str, usize> {
    let wanted: FxHashSet<&str> = wanted.into_iter().collect();
    let mut index = FxHashMap::default();
    if wanted.len() <= 4 {
        // A few ids are found by going through the list, without hashing it.
        for id in wanted {
            if let Some(n) = items.iter().position(|item| item.id == id) {
                index.insert(items[n].id.as_str(), n);
            }
        }
        return index;
    }
    for (n, item) in items.iter().enumerate() {
        if wanted.contains(item.id.as_str()) {
            index.entry(item.id.as_str()).or_insert(n);
        }
    }
    index
}

/// Where each id stands in a list, kept from one write to the next, so
/// that a write to a long list does not hash every id again.  It is
/// brought up to date with `refresh`, which compares the ids in order
/// (no hashing): nothing to do when they are the same, the new ones added
/// when items were only added at the end, rebuilt otherwise.  So a list
/// changed by any path is never looked up through a stale index.
#[derive(Debug, Clone, Default)]
pub struct IdIndex {
    ids: Vec<String>,
    at: FxHashMap<String, usize>,
}

impl IdIndex {
    /// Makes the index that of ITEMS.
    pub fn refresh(&mut self, items: &[Item]) {
        let same_start = self.ids.len() <= items.len()
            && self.ids.iter().zip(items).all(|(id, item)| *id == item.id);
        if !same_start {
            self.ids.clear();
            self.at.clear();
        }
        for (n, item) in items.iter().enumerate().skip(self.ids.len()) {
            self.at.entry(item.id.clone()).or_insert(n);
            self.ids.push(item.id.clone());
        }
    }

    /// `refresh` for ITEMS that are the list last given to it with items
    /// changed in place (keeping their ids) or added at its end: the ids
    /// before are not compared again, only the new ones indexed.
    pub fn follow_append(&mut self, items: &[Item]) {
        if self.ids.len() > items.len() {
            self.refresh(items);
            return;
        }
        for (n, item) in items.iter().enumerate().skip(self.ids.len()) {
            self.at.entry(item.id.clone()).or_insert(n);
            self.ids.push(item.id.clone());
        }
    }

    /// Where ID stands in the list last given to `refresh`.
    pub fn get(&self, id: &str) -> Option<usize> {
        self.at.get(id).copied()
    }
}

/// Whether any item of ITEMS waits for another: most lists have no edges,
/// and everything here can then be skipped.
pub fn any_edges(items: &[Item]) -> bool {
    items.iter().any(|item| !item.blocked_by.is_empty())
}

/// The blockers of ITEMS[N] that are still open (pending or in progress),
/// in the order the item names them.  A finished or deleted blocker stops
/// blocking at once, so it is not among them.
pub fn open_blockers<'a>(
    items: &'a [Item],
    index: &FxHashMap<&str, usize>,
    n: usize,
) -> Vec<&'a Item> {
    items[n]
        .blocked_by
        .iter()
        .filter_map(|id| index.get(id.as_str()).map(|&j| &items[j]))
        .filter(|blocker| blocker.status.is_open())
        .collect()
}

/// For each item, whether it is blocked: it has an open blocker, or an
/// ancestor (parent chain) has one.
fn blocked(items: &[Item], index: &FxHashMap<&str, usize>) -> Vec<bool> {
    let own: Vec<bool> = items
        .iter()
        .map(|item| {
            item.blocked_by.iter().any(|id| {
                index
                    .get(id.as_str())
                    .is_some_and(|&j| items[j].status.is_open())
            })
        })
        .collect();
    let parent: Vec<Option<usize>> = items
        .iter()
        .map(|item| item.parent.as_deref().and_then(|p| index.get(p).copied()))
        .collect();
    // Each item's answer is memoised, so a chain is walked once; a chain
    // longer than the list is a cycle of parents (never stored, but a
    // file could hold one) and stops there.
    let mut known: Vec<Option<bool>> = vec![None; items.len()];
    let mut chain = Vec::new();
    for start in 0..items.len() {
        let mut n = start;
        let answer = loop {
            if let Some(known) = known[n] {
                break known;
            }
            if own[n] {
                break true;
            }
            chain.push(n);
            match parent[n] {
                Some(up) if chain.len() <= items.len() => n = up,
                _ => break false,
            }
        };
        for n in chain.drain(..) {
            known[n] = Some(answer);
        }
        if known[start].is_none() {
            known[start] = Some(answer);
        }
    }
    known.into_iter().map(|b| b.unwrap_or(false)).collect()
}

/// The one definition of ready every view uses: pending, no open blocker,
/// and no ancestor with an open blocker.  One flag per item.
pub fn ready(items: &[Item]) -> Vec<bool> {
    if !any_edges(items) {
        return items
            .iter()
            .map(|item| item.status == Status::Pending)
            .collect();
    }
    let index = index_of(items);
    blocked(items, &index)
        .into_iter()
        .zip(items)
        .map(|(blocked, item)| item.status == Status::Pending && !blocked)
        .collect()
}

/// Lookups by id that go through the list one by one at first, and
/// build an index once they have gone through it a few times: a list
/// asked for one or two ids is not hashed whole.
struct LazyIndex<'a> {
    items: &'a [Item],
    scans: std::cell::Cell<usize>,
    index: std::cell::OnceCell<FxHashMap<&'a str, usize>>,
}

impl<'a> LazyIndex<'a> {
    const SCANS: usize = 4;

    fn new(items: &'a [Item]) -> LazyIndex<'a> {
        LazyIndex {
            items,
            scans: std::cell::Cell::new(0),
            index: std::cell::OnceCell::new(),
        }
    }

    fn find(&self, id: &str) -> Option<usize> {
        if self.index.get().is_none() && self.scans.get() < Self::SCANS {
            self.scans.set(self.scans.get() + 1);
            return self.items.iter().position(|item| item.id == id);
        }
        self.index
            .get_or_init(|| index_of(self.items))
            .get(id)
            .copied()
    }
}

/// The index of the first item of ITEMS that is ready (see `ready`),
/// found without working out the readiness of the whole list.
pub fn first_ready(items: &[Item]) -> Option<usize> {
    let lazy = LazyIndex::new(items);
    let find = |id: &str| lazy.find(id);
    let side = Side {
        after: items,
        index: &find,
        before: None,
    };
    items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.status == Status::Pending)
        .find(|(n, item)| {
            (item.blocked_by.is_empty() && item.parent.is_none()) || !side.blocked(*n)
        })
        .map(|(n, _)| n)
}

/// For each item, the indexes of the items that name it as a blocker
/// (what it blocks), open or not, in list order.
pub fn dependents(items: &[Item], index: &FxHashMap<&str, usize>) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); items.len()];
    for (n, item) in items.iter().enumerate() {
        for id in &item.blocked_by {
            if let Some(&j) = index.get(id.as_str()) {
                if !out[j].contains(&n) {
                    out[j].push(n);
                }
            }
        }
    }
    out
}

/// The ids of the items whose ready flag went from false to true between
/// BEFORE and AFTER, among the items AFTER holds that BEFORE held pending.
/// Only those are news: a new item or one just reopened is announced as such.
pub fn newly_ready<'a>(before: &[Item], after: &'a [Item]) -> Vec<&'a str> {
    if !any_edges(before) && !any_edges(after) {
        return Vec::new();
    }
    became_ready(&waiting(before), after)
}

/// The ids of the pending items of ITEMS that are not ready.  Kept
/// before a change in place of a copy of the list: `became_ready` needs
/// nothing else of it.
pub fn waiting(items: &[Item]) -> FxHashSet<String> {
    if !any_edges(items) {
        return FxHashSet::default();
    }
    items
        .iter()
        .zip(ready(items))
        .filter(|(item, ready)| item.status == Status::Pending && !*ready)
        .map(|(item, _)| item.id.clone())
        .collect()
}

/// The items of AFTER that are ready and were WAITING.
pub fn became_ready<'a>(waiting: &FxHashSet<String>, after: &'a [Item]) -> Vec<&'a str> {
    if waiting.is_empty() {
        return Vec::new();
    }
    after
        .iter()
        .zip(ready(after))
        .filter(|(item, ready)| *ready && waiting.contains(item.id.as_str()))
        .map(|(item, _)| item.id.as_str())
        .collect()
}

/// An item of a list after a change, as it was before: what
/// `newly_ready_after_change` needs in place of a copy of the list.
#[derive(Debug, Clone, Copy)]
pub enum Before<'a> {
    /// The change left it as it was.
    Same,
    /// The change altered it; this is its earlier value.
    Was(&'a Item),
    /// The change brought it into the list.
    Added,
}

/// The list on one side of a change, looked up by id through the index
/// of the list after it: AFTER itself, or the list before the change,
/// which BEFORE gives item by item.
struct Side<'s> {
    after: &'s [Item],
    index: &'s dyn Fn(&str) -> Option<usize>,
    before: Option<&'s [Before<'s>]>,
}

impl Side<'_> {
    fn item(&self, n: usize) -> Option<&Item> {
        match self.before.map(|before| before.get(n).copied()) {
            None | Some(None | Some(Before::Same)) => self.after.get(n),
            Some(Some(Before::Was(item))) => Some(item),
            Some(Some(Before::Added)) => None,
        }
    }

    fn find(&self, id: &str) -> Option<usize> {
        let n = (self.index)(id)?;
        self.item(n).map(|_| n)
    }

    /// Whether the item at N is blocked, by the definition of `blocked`:
    /// it or an ancestor has an open blocker.
    fn blocked(&self, n: usize) -> bool {
        let mut at = n;
        for _ in 0..=self.after.len() {
            let Some(item) = self.item(at) else {
                return false;
            };
            let open = item.blocked_by.iter().any(|id| {
                self.find(id)
                    .and_then(|j| self.item(j))
                    .is_some_and(|blocker| blocker.status.is_open())
            });
            if open {
                return true;
            }
            match item.parent.as_deref().and_then(|parent| self.find(parent)) {
                Some(up) => at = up,
                None => return false,
            }
        }
        // A chain longer than the list is a cycle of parents.
        false
    }
}

/// `newly_ready` for a change that removed no item, without the list as
/// it was: BEFORE says, for each item of AFTER, what it was; INDEX is
/// AFTER's.  Only the
/// items the change can have freed are looked at: those it altered, the
/// items that wait for one of them, and the subtasks of all these.  A
/// write that changes one item of a long list does not compute the
/// readiness of the whole list twice.
pub fn newly_ready_after_change<'a>(
    after: &'a [Item],
    before: &[Before],
    index: &IdIndex,
) -> Vec<&'a str> {
    let before_of = |n: usize| before.get(n).copied().unwrap_or(Before::Same);
    let earlier_edges = before
        .iter()
        .any(|b| matches!(b, Before::Was(item) if !item.blocked_by.is_empty()));
    if !earlier_edges && !any_edges(after) {
        return Vec::new();
    }
    let changed: FxHashSet<&str> = after
        .iter()
        .enumerate()
        .filter(|(n, _)| !matches!(before_of(*n), Before::Same))
        .map(|(_, item)| item.id.as_str())
        .collect();
    if changed.is_empty() {
        return Vec::new();
    }
    // An unaltered item waits on an altered one no less than before
    // unless that one stopped being open: only then are its dependents
    // looked for, so an edge change does not scan every item's blockers.
    let freeing: FxHashSet<&str> = after
        .iter()
        .enumerate()
        .filter(|(n, item)| {
            matches!(before_of(*n), Before::Was(was)
                     if was.status.is_open() && !item.status.is_open())
        })
        .map(|(_, item)| item.id.as_str())
        .collect();
    let mut candidate: Vec<bool> = after
        .iter()
        .enumerate()
        .map(|(n, item)| match before_of(n) {
            Before::Added => false,
            Before::Was(_) => true,
            Before::Same => {
                !freeing.is_empty()
                    && item
                        .blocked_by
                        .iter()
                        .any(|id| freeing.contains(id.as_str()))
            }
        })
        .collect();
    // The subtasks, at any depth, of an item whose readiness may change.
    if after.iter().any(|item| item.parent.is_some()) {
        let mut causes: FxHashSet<&str> = changed;
        causes.extend(
            after
                .iter()
                .zip(&candidate)
                .filter(|(_, c)| **c)
                .map(|(item, _)| item.id.as_str()),
        );
        for _ in 0..after.len() {
            let mut grew = false;
            for (n, item) in after.iter().enumerate() {
                if candidate[n] || matches!(before_of(n), Before::Added) {
                    continue;
                }
                if item
                    .parent
                    .as_deref()
                    .is_some_and(|parent| causes.contains(parent))
                {
                    candidate[n] = true;
                    causes.insert(item.id.as_str());
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
    }
    let find = |id: &str| index.get(id);
    let now = Side {
        after,
        index: &find,
        before: None,
    };
    let then = Side {
        after,
        index: &find,
        before: Some(before),
    };
    after
        .iter()
        .enumerate()
        .filter(|(n, item)| {
            candidate[*n]
                && item.status == Status::Pending
                && then
                    .item(*n)
                    .is_some_and(|was| was.status == Status::Pending)
                && then.blocked(*n)
                && !now.blocked(*n)
        })
        .map(|(_, item)| item.id.as_str())
        .collect()
}

/// Whether FROM reaches TO along waits-for edges, in the graph of
/// NODES: only what FROM can reach is visited.
fn reaches(nodes: &[Node], find: &dyn Fn(&str) -> Option<usize>, from: usize, to: usize) -> bool {
    let mut seen = vec![false; nodes.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(n) = stack.pop() {
        if n == to {
            return true;
        }
        for id in nodes[n].blocked_by {
            if let Some(m) = find(id) {
                if !seen[m] {
                    seen[m] = true;
                    stack.push(m);
                }
            }
        }
    }
    false
}

/// Edges given by more nodes than this are checked for cycles over the
/// whole graph (a whole-list write gives every edge); fewer, from each
/// given edge's blocker alone.
const LOCAL_CYCLE_CHECK: usize = 16;

/// Whether the edges NODES give may close a cycle.  A cycle must run
/// through an edge the write gives, since the list's own graph has none
/// (every write is checked, and a file is repaired when read): so a few
/// given edges are checked from their blockers, visiting only what those
/// reach.
///
/// When every node is an item listed before the write (ALL_LISTED), an
/// edge the item had already is skipped: a cycle of edges the list had
/// would have been in the list.  Otherwise an added or restored item may
/// be what turns an old edge into part of a cycle, so every given edge is
/// followed.
fn may_close_cycle(nodes: &[Node], find: &dyn Fn(&str) -> Option<usize>, all_listed: bool) -> bool {
    let given: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.edges_given && !node.blocked_by.is_empty())
        .map(|(n, _)| n)
        .collect();
    if given.len() > LOCAL_CYCLE_CHECK {
        return true;
    }
    given.iter().any(|&n| {
        let node = &nodes[n];
        node.blocked_by
            .iter()
            .filter(|id| !(all_listed && node.earlier_blocked_by.contains(id)))
            .filter_map(|id| find(id))
            .any(|m| reaches(nodes, find, m, n))
    })
}

/// A path of waits-for edges from FROM to TO (both included), over the
/// graph EDGES gives (the indexes each node waits for); None when TO cannot
/// be reached.  Breadth first, so the path named is a shortest one.
pub fn path(edges: &[Vec<usize>], from: usize, to: usize) -> Option<Vec<usize>> {
    let mut came_from: Vec<Option<usize>> = vec![None; edges.len()];
    let mut seen = vec![false; edges.len()];
    let mut queue = std::collections::VecDeque::new();
    seen[from] = true;
    queue.push_back(from);
    while let Some(n) = queue.pop_front() {
        if n == to {
            let mut path = vec![to];
            let mut at = to;
            while let Some(prev) = came_from[at] {
                path.push(prev);
                at = prev;
            }
            path.reverse();
            return Some(path);
        }
        for &next in &edges[n] {
            if !seen[next] {
                seen[next] = true;
                came_from[next] = Some(n);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Some cycle of the graph EDGES gives, as the nodes along it, the first
/// repeated at the end; None when there is none.  Depth first without
/// recursion, O(nodes + edges).
pub fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; edges.len()];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..edges.len() {
        if mark[start] != Mark::New {
            continue;
        }
        mark[start] = Mark::OnPath;
        stack.push((start, 0));
        while let Some(&mut (n, ref mut next)) = stack.last_mut() {
            match edges[n].get(*next) {
                Some(&m) => {
                    *next += 1;
                    match mark[m] {
                        Mark::New => {
                            mark[m] = Mark::OnPath;
                            stack.push((m, 0));
                        }
                        Mark::OnPath => {
                            let from = stack.iter().position(|(k, _)| *k == m).unwrap_or(0);
                            let mut cycle: Vec<usize> =
                                stack[from..].iter().map(|(k, _)| *k).collect();
                            cycle.push(m);
                            return Some(cycle);
                        }
                        Mark::Done => {}
                    }
                }
                None => {
                    mark[n] = Mark::Done;
                    stack.pop();
                }
            }
        }
    }
    None
}

/// The waits-for graph of ITEMS by index: edges naming an id not in the
/// list are left out.
pub fn edges_of(items: &[Item], index: &FxHashMap<&str, usize>) -> Vec<Vec<usize>> {
    items
        .iter()
        .map(|item| {
            item.blocked_by
                .iter()
                .filter_map(|id| index.get(id.as_str()).copied())
                .collect()
        })
        .collect()
}

/// "t2 -> t5 -> t2": a cycle of IDS in the direction work must flow
/// (each blocks the next).
pub fn cycle_text<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    ids.into_iter().collect::<Vec<_>>().join(" -> ")
}

/// Removes ID from every `blocked_by` in ITEMS; returns the ids of the
/// items it was removed from (for the history and undo).
pub fn strip(items: &mut [Item], id: &str) -> Vec<String> {
    let mut from = Vec::new();
    for item in items.iter_mut() {
        let before = item.blocked_by.len();
        item.blocked_by.retain(|b| b != id);
        if item.blocked_by.len() != before {
            from.push(item.id.clone());
        }
    }
    from
}

/// An edge that `repair` dropped: ITEM no longer waits for BLOCKER, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DroppedEdge {
    pub item: String,
    pub blocker: String,
    pub why: &'static str,
}

/// Makes ITEMS a sound graph whatever it held (a file edited by hand, a
/// list Efrit's API set): edges to ids not in the list, to the item
/// itself, repeated, between an item and its ancestor, or closing a
/// cycle are dropped, the items kept.
pub fn repair(items: &mut [Item]) -> Vec<DroppedEdge> {
    let mut dropped = Vec::new();
    if !any_edges(items) {
        return dropped;
    }
    let ids: FxHashSet<String> = items.iter().map(|item| item.id.clone()).collect();
    for item in items.iter_mut() {
        let own = item.id.clone();
        let mut seen: FxHashSet<String> = FxHashSet::default();
        item.blocked_by.retain(|b| {
            let why = if *b == own {
                "an item cannot wait for itself"
            } else if !ids.contains(b) {
                "no item has that id"
            } else if !seen.insert(b.clone()) {
                "named twice"
            } else {
                return true;
            };
            dropped.push(DroppedEdge {
                item: own.clone(),
                blocker: b.clone(),
                why,
            });
            false
        });
    }
    drop_ancestral_waits(items, &mut dropped);
    loop {
        let index = index_of(items);
        let edges = edges_of(items, &index);
        let Some(cycle) = find_cycle(&edges) else {
            break;
        };
        // The cycle runs waits-for: cycle[0] waits for cycle[1].  Its last
        // edge is dropped, which breaks it.
        let (n, m) = (cycle[cycle.len() - 2], cycle[cycle.len() - 1]);
        let blocker = items[m].id.clone();
        items[n].blocked_by.retain(|b| *b != blocker);
        dropped.push(DroppedEdge {
            item: items[n].id.clone(),
            blocker,
            why: "it closed a cycle",
        });
    }
    dropped
}

/// One item as a write would leave it, for `check`: the list's items with
/// the write's changes laid over them, and the items it adds.
#[derive(Debug, Clone)]
pub struct Node<'a> {
    /// None for an item the write adds: nothing can name it yet.
    pub id: Option<&'a str>,
    pub status: Status,
    /// The status before the write; None for an added item.
    pub was: Option<Status>,
    pub blocked_by: &'a [String],
    /// Whether the write gave this item's blockers (then they are checked).
    pub edges_given: bool,
    /// The blockers the item had in the list before the write; empty when
    /// unknown.  When every node is a listed item, an edge among these was
    /// in the list's graph already and cannot close a cycle on its own.
    pub earlier_blocked_by: &'a [String],
}

/// What `check` found wrong, by node index and blocker id.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    /// The blocker names no item of the list.
    Unknown {
        node: usize,
        blocker: String,
    },
    OnItself {
        node: usize,
        blocker: String,
    },
    TooMany {
        node: usize,
        count: usize,
    },
    /// The edge closes a cycle; `ids` runs in the direction work flows,
    /// from the blocker back to it.
    Cycle {
        node: usize,
        blocker: String,
        ids: Vec<String>,
    },
    /// The write starts or completes the item while blockers are open.
    Blocked {
        node: usize,
        blockers: Vec<(String, Status)>,
    },
}

/// Checks the graph NODES make: every given edge names another item of
/// the list, no item waits for more than MAX_BLOCKERS, no cycle, and no
/// item is started or completed while a blocker is open.  O(nodes + edges).
pub fn check(nodes: &[Node], max_blockers: usize) -> Result<(), Problem> {
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    index.reserve(nodes.len());
    for (n, node) in nodes.iter().enumerate() {
        if let Some(id) = node.id {
            index.entry(id).or_insert(n);
        }
    }
    check_by(nodes, max_blockers, &|id| index.get(id).copied(), false)
}

/// `check`, with FIND giving the first node with an id: a write to a
/// long list looks ids up through the list's kept index rather than
/// hashing every node again.  ALL_LISTED says every node is an item
/// listed before the write, whose `earlier_blocked_by` are its edges then.
pub fn check_by(
    nodes: &[Node],
    max_blockers: usize,
    find: &dyn Fn(&str) -> Option<usize>,
    all_listed: bool,
) -> Result<(), Problem> {
    for (n, node) in nodes
        .iter()
        .enumerate()
        .filter(|(_, node)| node.edges_given)
    {
        for blocker in node.blocked_by {
            if node.id == Some(blocker.as_str()) {
                return Err(Problem::OnItself {
                    node: n,
                    blocker: blocker.clone(),
                });
            }
            if find(blocker).is_none() {
                return Err(Problem::Unknown {
                    node: n,
                    blocker: blocker.clone(),
                });
            }
        }
        if node.blocked_by.len() > max_blockers {
            return Err(Problem::TooMany {
                node: n,
                count: node.blocked_by.len(),
            });
        }
    }
    if may_close_cycle(nodes, find, all_listed) {
        let edges: Vec<Vec<usize>> = nodes
            .iter()
            .map(|node| node.blocked_by.iter().filter_map(|id| find(id)).collect())
            .collect();
        if let Some(cycle) = find_cycle(&edges) {
            // The cycle runs waits-for (cycle[k] waits for cycle[k + 1]);
            // it is named at an edge this write gave, the newest of it.
            let k = (0..cycle.len() - 1)
                .find(|&k| nodes[cycle[k]].edges_given)
                .unwrap_or(0);
            let (n, m) = (cycle[k], cycle[k + 1]);
            // From the blocker M along waits-for back to N, reversed: the
            // order work must flow, M first.
            let mut ids: Vec<String> = vec![nodes[m].id.unwrap_or_default().to_string()];
            let back = path(&edges, m, n).unwrap_or_else(|| vec![m, n]);
            ids.extend(
                back.iter()
                    .rev()
                    .map(|&j| nodes[j].id.unwrap_or_default().to_string()),
            );
            return Err(Problem::Cycle {
                node: n,
                blocker: nodes[m].id.unwrap_or_default().to_string(),
                ids,
            });
        }
    }
    for (n, node) in nodes.iter().enumerate() {
        let starts = matches!(node.status, Status::InProgress | Status::Completed)
            && node.was != Some(node.status);
        if !starts || node.blocked_by.is_empty() {
            continue;
        }
        let open: Vec<(String, Status)> = node
            .blocked_by
            .iter()
            .filter_map(|id| find(id).map(|j| (id, nodes[j].status)))
            .filter(|(_, status)| status.is_open())
            .map(|(id, status)| (id.clone(), status))
            .collect();
        if !open.is_empty() {
            return Err(Problem::Blocked {
                node: n,
                blockers: open,
            });
        }
    }
    Ok(())
}

/// One item as a write would leave it, for `check_ancestry`.
#[derive(Debug, Clone, Copy)]
pub struct Placed<'a> {
    /// None for an item the write adds that nothing can name yet.
    pub id: Option<&'a str>,
    pub parent: Option<&'a str>,
    pub status: Status,
    pub blocked_by: &'a [String],
    /// The item before the write; None for an item the write adds.
    pub before: Option<&'a Item>,
}

/// Which part of a write `check_ancestry` refuses.
#[derive(Debug, Clone, PartialEq)]
pub enum Blame {
    /// The item's wait for this blocker.
    Edge(String),
    Status,
    Parent,
}

/// A write that breaks a rule between items and their ancestors: the
/// node blamed, the part of it, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct AncestryProblem {
    pub node: usize,
    pub blame: Blame,
    pub message: String,
}

/// Checks the rules that tie waits to subtasks, on the list NODES make:
/// no item waits for its ancestor (it could never start) or for its
/// subtask (a parent already waits for its subtasks), and no item is
/// started or completed, or kept running, under an ancestor that waits
/// for an open blocker.  Only what this write brings about is refused,
/// so a list that came in otherwise (a file, an older version) can still
/// be written to.  UNBLOCK_HINT says how the writer removes a dependency.
pub fn check_ancestry(nodes: &[Placed], unblock_hint: &str) -> Result<(), AncestryProblem> {
    if !nodes.iter().any(|node| node.parent.is_some())
        || !nodes.iter().any(|node| !node.blocked_by.is_empty())
    {
        return Ok(());
    }
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    index.reserve(nodes.len());
    for (n, node) in nodes.iter().enumerate() {
        if let Some(id) = node.id {
            index.entry(id).or_insert(n);
        }
    }
    let up: Vec<Option<usize>> = nodes
        .iter()
        .map(|node| node.parent.and_then(|p| index.get(p).copied()))
        .collect();
    // The chain above N, nearest first; a cycle of parents (refused
    // elsewhere) stops it.
    let chain = |n: usize| {
        let mut out = Vec::new();
        let mut at = up[n];
        while let Some(a) = at {
            if a == n || out.len() >= nodes.len() {
                break;
            }
            out.push(a);
            at = up[a];
        }
        out
    };
    let name = |n: usize| nodes[n].id.unwrap_or("the new item");
    let moved = |k: usize| {
        nodes[k].before.map_or(nodes[k].parent.is_some(), |item| {
            item.parent.as_deref() != nodes[k].parent
        })
    };
    let edge_new = |n: usize, blocker: &str| {
        nodes[n]
            .before
            .is_none_or(|item| !item.blocked_by.iter().any(|b| b == blocker))
    };
    // The first item from N up to (not including) TOP that the write moved.
    let first_moved = |n: usize, top: usize| {
        std::iter::once(n)
            .chain(chain(n))
            .take_while(|&k| k != top)
            .find(|&k| moved(k))
    };
    let kin = |steps: usize, near: &'static str, far: &'static str| {
        if steps == 0 {
            near
        } else {
            far
        }
    };
    for (n, node) in nodes.iter().enumerate() {
        if node.blocked_by.is_empty() {
            continue;
        }
        let above = chain(n);
        for blocker in node.blocked_by {
            let Some(&m) = index.get(blocker.as_str()) else {
                continue;
            };
            if let Some(steps) = above.iter().position(|&a| a == m) {
                let never = format!(
                    "{blocker} finishes after its subtasks, so {} could never start",
                    name(n)
                );
                if edge_new(n, blocker) {
                    return Err(AncestryProblem {
                        node: n,
                        blame: Blame::Edge(blocker.clone()),
                        message: format!(
                            "{} cannot wait for {blocker}, its {}: {never}",
                            name(n),
                            kin(steps, "parent", "ancestor")
                        ),
                    });
                }
                if let Some(k) = first_moved(n, m) {
                    let message = if k == n && up[n] == Some(m) {
                        format!(
                            "{} cannot go under {blocker}, which it waits for: {never}",
                            name(n)
                        )
                    } else {
                        format!(
                            "{} cannot go under {}: {} would wait for its ancestor {blocker}, and {never}",
                            name(k),
                            up[k].map_or("its parent", name),
                            name(n)
                        )
                    };
                    return Err(AncestryProblem {
                        node: k,
                        blame: Blame::Parent,
                        message,
                    });
                }
            } else if chain(m).contains(&n) {
                if edge_new(n, blocker) {
                    return Err(AncestryProblem {
                        node: n,
                        blame: Blame::Edge(blocker.clone()),
                        message: format!(
                            "{} cannot wait for {blocker}, its subtask: a parent already waits for its subtasks",
                            name(n)
                        ),
                    });
                }
                if let Some(k) = first_moved(m, n) {
                    return Err(AncestryProblem {
                        node: k,
                        blame: Blame::Parent,
                        message: format!(
                            "{} cannot go under {}: {} waits for {blocker}, which would be its subtask, and a parent already waits for its subtasks",
                            name(k),
                            up[k].map_or("its parent", name),
                            name(n)
                        ),
                    });
                }
            }
        }
    }
    for (n, node) in nodes.iter().enumerate() {
        if !matches!(node.status, Status::InProgress | Status::Completed) {
            continue;
        }
        for (steps, a) in chain(n).into_iter().enumerate() {
            let open = nodes[a].blocked_by.iter().find_map(|b| {
                let m = *index.get(b.as_str())?;
                nodes[m].status.is_open().then_some((b, m))
            });
            let Some((blocker, m)) = open else {
                continue;
            };
            let state = nodes[m].status.wire_name();
            let started = node.before.map(|item| item.status) != Some(node.status);
            let problem = if started {
                Some((
                    n,
                    Blame::Status,
                    format!(
                        "{} is blocked by {blocker} ({state}) through its {} {}; finish {blocker} first, or remove the dependency with {unblock_hint}",
                        name(n),
                        kin(steps, "parent", "ancestor"),
                        name(a)
                    ),
                ))
            } else if node.status == Status::Completed {
                None
            } else if edge_new(a, blocker) {
                Some((
                    a,
                    Blame::Edge(blocker.clone()),
                    format!(
                        "{} cannot wait for {blocker} ({state}) while its subtask {} is in progress; set {} pending first",
                        name(a),
                        name(n),
                        name(n)
                    ),
                ))
            } else if nodes[m].before.is_some_and(|item| !item.status.is_open()) {
                Some((
                    m,
                    Blame::Status,
                    format!(
                        "{blocker} cannot be reopened while {} is in progress under {}, which waits for it; set {} pending first",
                        name(n),
                        name(a),
                        name(n)
                    ),
                ))
            } else {
                first_moved(n, a).map(|k| {
                    let message = if k == n && up[n] == Some(a) {
                        format!(
                            "{} is in progress and cannot go under {}, which is blocked by {blocker} ({state})",
                            name(n),
                            name(a)
                        )
                    } else {
                        format!(
                            "{} cannot go under {} while {} is in progress: {} is blocked by {blocker} ({state})",
                            name(k),
                            up[k].map_or("its parent", name),
                            name(n),
                            name(a)
                        )
                    };
                    (k, Blame::Parent, message)
                })
            };
            if let Some((node, blame, message)) = problem {
                return Err(AncestryProblem {
                    node,
                    blame,
                    message,
                });
            }
        }
    }
    Ok(())
}

/// Drops from ITEMS the waits between an item and its ancestors, which
/// no write makes: a subtask waiting for its ancestor, or an item for
/// its subtask.
fn drop_ancestral_waits(items: &mut [Item], dropped: &mut Vec<DroppedEdge>) {
    if !items.iter().any(|item| item.parent.is_some()) {
        return;
    }
    let index = index_of(items);
    let parent: Vec<Option<usize>> = items
        .iter()
        .map(|item| item.parent.as_deref().and_then(|p| index.get(p).copied()))
        .collect();
    let above = |n: usize, a: usize| {
        let mut at = parent[n];
        for _ in 0..items.len() {
            match at {
                Some(k) if k == a => return true,
                Some(k) => at = parent[k],
                None => return false,
            }
        }
        false
    };
    let mut cuts: Vec<(usize, String, &'static str)> = Vec::new();
    for (n, item) in items.iter().enumerate() {
        for blocker in &item.blocked_by {
            let Some(&m) = index.get(blocker.as_str()) else {
                continue;
            };
            if above(n, m) {
                cuts.push((n, blocker.clone(), "a subtask cannot wait for its ancestor"));
            } else if above(m, n) {
                cuts.push((
                    n,
                    blocker.clone(),
                    "a parent already waits for its subtasks",
                ));
            }
        }
    }
    for (n, blocker, why) in cuts {
        items[n].blocked_by.retain(|b| *b != blocker);
        dropped.push(DroppedEdge {
            item: items[n].id.clone(),
            blocker,
            why,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample_items;

    fn with_edges(statuses: &[Status], edges: &[(usize, usize)]) -> Vec<Item> {
        let mut items = sample_items(statuses);
        for &(n, m) in edges {
            let id = items[m].id.clone();
            items[n].blocked_by.push(id);
        }
        items
    }

    #[test]
    fn ready_means_pending_with_no_open_blocker_and_no_blocked_ancestor() {
        use Status::*;
        // t2 waits for t1 (open); t3 waits for t4 (completed); t5 is a
        // subtask of t2; t6 is in progress.
        let mut items = with_edges(
            &[Pending, Pending, Pending, Completed, Pending, InProgress],
            &[(1, 0), (2, 3)],
        );
        items[4].parent = Some("t2".into());
        assert_eq!(ready(&items), [true, false, true, false, false, false]);
        items[0].status = Cancelled;
        assert_eq!(ready(&items), [false, true, true, false, true, false]);
    }

    #[test]
    fn newly_ready_names_only_items_that_waited() {
        use Status::*;
        let before = with_edges(&[InProgress, Pending, Pending], &[(1, 0)]);
        let mut after = before.clone();
        after[0].status = Completed;
        assert_eq!(newly_ready(&before, &after), ["t2"]);
        assert!(newly_ready(&after, &after).is_empty());
    }

    /// A random list, and a change of it: (before, after, what each item
    /// of after was).  Items may wait for any other, parents come earlier.
    fn arb_change(
    ) -> impl proptest::strategy::Strategy<Value = (Vec<Item>, Vec<Item>, Vec<Option<Option<usize>>>)>
    {
        use proptest::prelude::*;
        let status = || {
            prop::sample::select(vec![
                Status::Pending,
                Status::InProgress,
                Status::Completed,
                Status::Cancelled,
            ])
        };
        let item = move || {
            (
                status(),
                prop::collection::vec(0usize..14, 0..3),
                prop::option::weighted(0.3, 0usize..14),
            )
        };
        (
            prop::collection::vec(item(), 1..10),
            prop::collection::vec(prop::option::weighted(0.3, item()), 10),
            prop::collection::vec((0usize..14, item()), 0..3),
        )
            .prop_map(|(list, alter, add)| {
                let total = list.len() + add.len();
                let id = |n: usize| format!("t{}", n % total + 1);
                let make =
                    |n: usize, (status, edges, parent): (Status, Vec<usize>, Option<usize>)| {
                        let mut item = Item::new(id(n), format!("Step {n}"), None, status, 0.0);
                        item.blocked_by = edges
                            .into_iter()
                            .map(id)
                            .filter(|b| *b != item.id)
                            .collect();
                        item.parent = parent.filter(|p| p % total < n).map(id);
                        item
                    };
                let before: Vec<Item> = list
                    .iter()
                    .cloned()
                    .enumerate()
                    .map(|(n, i)| make(n, i))
                    .collect();
                // (item, index before) for each item after.
                let mut after: Vec<(Item, Option<usize>)> = before
                    .iter()
                    .enumerate()
                    .map(|(n, item)| match alter.get(n).cloned().flatten() {
                        Some(fields) => (make(n, fields), Some(n)),
                        None => (item.clone(), Some(n)),
                    })
                    .collect();
                for (k, (at, fields)) in add.into_iter().enumerate() {
                    let n = list.len() + k;
                    let at = at % (after.len() + 1);
                    after.insert(at, (make(n, fields), None));
                }
                let was: Vec<Option<Option<usize>>> = after
                    .iter()
                    .map(|(item, n)| n.map(|n| (before[n] != *item).then_some(n)))
                    .collect();
                (
                    before,
                    after.into_iter().map(|(item, _)| item).collect(),
                    was,
                )
            })
    }

    #[test]
    fn the_kept_index_follows_the_list_whatever_changed() {
        use Status::*;
        let mut items = sample_items(&[Pending; 4]);
        let mut index = IdIndex::default();
        index.refresh(&items);
        assert_eq!(index.get("t3"), Some(2));
        items.extend(sample_items(&[Pending; 6]).into_iter().skip(4));
        index.refresh(&items);
        assert_eq!((index.get("t3"), index.get("t6")), (Some(2), Some(5)));
        items.remove(0);
        index.refresh(&items);
        assert_eq!((index.get("t1"), index.get("t3")), (None, Some(1)));
        items.swap(0, 1);
        index.refresh(&items);
        assert_eq!((index.get("t2"), index.get("t3")), (Some(1), Some(0)));
    }

    proptest::proptest! {
        #[test]
        fn first_ready_is_the_first_of_ready((_before, after, _was) in arb_change()) {
            proptest::prop_assert_eq!(
                first_ready(&after),
                ready(&after).iter().position(|r| *r),
                "{:?}", after
            );
        }

        #[test]
        fn newly_ready_after_a_change_is_newly_ready_of_the_two_lists((before, after, was) in arb_change()) {
            let each: Vec<Before> = was
                .iter()
                .map(|w| match w {
                    None => Before::Added,
                    Some(None) => Before::Same,
                    Some(Some(n)) => Before::Was(&before[*n]),
                })
                .collect();
            let mut index = IdIndex::default();
            index.refresh(&after);
            proptest::prop_assert_eq!(
                newly_ready_after_change(&after, &each, &index),
                newly_ready(&before, &after),
                "before {:?}\nafter {:?}", before, after
            );
        }
    }

    #[test]
    fn cycles_are_found_and_named_along_their_path() {
        let edges = vec![vec![1], vec![2], vec![0], vec![]];
        let cycle = find_cycle(&edges).unwrap();
        assert_eq!(cycle.first(), cycle.last());
        assert_eq!(cycle.len(), 4);
        assert_eq!(find_cycle(&[vec![1], vec![2], vec![]]), None);
        assert_eq!(path(&edges, 1, 0), Some(vec![1, 2, 0]));
        assert_eq!(path(&[vec![1], vec![]], 1, 0), None);
        assert_eq!(cycle_text(["t2", "t5", "t2"]), "t2 -> t5 -> t2");
    }

    #[test]
    fn strip_removes_an_id_everywhere_and_says_where() {
        let mut items = with_edges(&[Status::Pending; 4], &[(1, 0), (2, 0), (2, 1)]);
        assert_eq!(strip(&mut items, "t1"), ["t2", "t3"]);
        assert!(items
            .iter()
            .all(|i| !i.blocked_by.contains(&"t1".to_string())));
        assert_eq!(items[2].blocked_by, ["t2"]);
    }

    #[test]
    fn repair_drops_waits_between_an_item_and_its_ancestors() {
        // t2 is under t1, t3 under t2; t3 waits for t1 (its ancestor), t1
        // for t2 (its subtask), t4 for t3 (sound).
        let mut items = with_edges(&[Status::Pending; 4], &[(2, 0), (0, 1), (3, 2)]);
        items[1].parent = Some("t1".into());
        items[2].parent = Some("t2".into());
        let dropped = repair(&mut items);
        let found: Vec<(&str, &str, &str)> = dropped
            .iter()
            .map(|d| (d.item.as_str(), d.blocker.as_str(), d.why))
            .collect();
        assert_eq!(
            found,
            [
                ("t1", "t2", "a parent already waits for its subtasks"),
                ("t3", "t1", "a subtask cannot wait for its ancestor"),
            ]
        );
        assert_eq!(items[3].blocked_by, ["t3"]);
    }

    #[test]
    fn repair_drops_bad_edges_and_keeps_the_items() {
        let mut items = with_edges(
            &[Status::Pending; 3],
            &[(0, 1), (1, 0), (2, 2), (2, 1), (2, 1)],
        );
        items[2].blocked_by.push("t9".into());
        let dropped = repair(&mut items);
        let whys: Vec<&str> = dropped.iter().map(|d| d.why).collect();
        assert_eq!(
            whys,
            [
                "an item cannot wait for itself",
                "named twice",
                "no item has that id",
                "it closed a cycle"
            ]
        );
        assert_eq!(items.len(), 3);
        let index = index_of(&items);
        assert_eq!(find_cycle(&edges_of(&items, &index)), None);
        assert_eq!(items[2].blocked_by, ["t2"]);
    }
}

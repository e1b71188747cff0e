//! Subtasks: an item may name a parent, an item of the same list, up to
//! `MAX_LEVELS` levels deep.  The checks a write passes before it commits,
//! the lines its result gets about subtasks, how a list is laid out as a
//! tree, and the repair of lists that did not pass these checks (files,
//! Efrit's flat API, removed parents).
//!
//! Lists without a parent anywhere, the usual case, cost one scan.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::model::{push_cut, push_ids, Item, Status, MAX_NAMED};
use crate::validate::{quote, InvalidInput};

/// Levels of a tree: a top-level item is level 1, its subtasks level 2,
/// theirs level 3.
pub const MAX_LEVELS: usize = 3;

/// Whether any item of ITEMS is a subtask.
pub fn any_parent(items: &[Item]) -> bool {
    items.iter().any(|item| item.parent.is_some())
}

/// An item of the list a write would make, as the checks see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Node<'a> {
    /// None for an item the write adds: nothing can name it yet.
    pub id: Option<&'a str>,
    pub parent: Option<&'a str>,
    pub status: Status,
    /// Where the write names it (`todos[at]`), if it does.
    pub at: Option<usize>,
    /// The write gave its parent (a whole list gives every item's).
    pub placed: bool,
    /// Its status and parent before the write; None for an item the
    /// write brings into the list.
    pub was: Option<(Status, Option<&'a str>)>,
}

/// For each node, the index of its parent node; a parent not among them
/// counts as none.  The first node with an id answers for it.
fn links<'a>(nodes: &[Node<'a>]) -> (FxHashMap<&'a str, usize>, Vec<Option<usize>>) {
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    index.reserve(nodes.len());
    for (n, node) in nodes.iter().enumerate() {
        if let Some(id) = node.id {
            index.entry(id).or_insert(n);
        }
    }
    let up = nodes
        .iter()
        .map(|node| node.parent.and_then(|p| index.get(p).copied()))
        .collect();
    (index, up)
}

/// The level of each node (1 for the top level) given UP, the index of
/// each one's parent.  A cycle, which the checks refuse before any list
/// has one, is cut where the walk notices it, so this always ends.
fn levels(up: &[Option<usize>]) -> Vec<usize> {
    let mut level = vec![0usize; up.len()];
    let mut chain = Vec::new();
    for start in 0..up.len() {
        chain.clear();
        let mut base = 0;
        let mut at = Some(start);
        while let Some(n) = at {
            if level[n] != 0 {
                base = level[n];
                break;
            }
            if chain.len() > up.len() {
                break;
            }
            chain.push(n);
            at = up[n];
        }
        for (k, &n) in chain.iter().rev().enumerate() {
            if level[n] == 0 {
                level[n] = base + k + 1;
            }
        }
    }
    level
}

/// Whether A is an ancestor of N by UP (at most LEN steps).
fn is_ancestor(up: &[Option<usize>], a: usize, n: usize) -> bool {
    let mut at = up[n];
    for _ in 0..up.len() {
        match at {
            Some(m) if m == a => return true,
            Some(m) => at = up[m],
            None => return false,
        }
    }
    false
}

/// "its subtask t4 is" or "its subtasks t4, t5 are".
fn subtasks_phrase(ids: &[&str]) -> String {
    let mut out = String::from(if ids.len() == 1 {
        "its subtask "
    } else {
        "its subtasks "
    });
    push_ids(&mut out, ids.iter().copied());
    out.push_str(if ids.len() == 1 { " is" } else { " are" });
    out
}

/// Checks the list a write would make, before it commits: every parent a
/// write gives is an item of that list, no item is its own ancestor, no
/// item is deeper than MAX_LEVELS, no item becomes completed while a
/// subtask of it is unfinished, and no unfinished subtask comes under a
/// completed item.  BEFORE is the list before the write; KNOWN tells the
/// ids the session issued from ids it never did, for the message.  Errors
/// name the field of the write they are about.
pub fn check(
    nodes: &[Node],
    before: &[Item],
    known: impl Fn(&str) -> bool,
) -> Result<(), InvalidInput> {
    let (index, up) = links(nodes);
    let mut named: Vec<usize> = (0..nodes.len())
        .filter(|&n| nodes[n].at.is_some())
        .collect();
    named.sort_by_key(|&n| nodes[n].at);
    let field = |n: usize, name: &str| format!("todos[{}].{name}", nodes[n].at.unwrap_or_default());
    let id = |n: usize| nodes[n].id.unwrap_or("the new item");
    // Each parent given names an item of the list.
    for &n in &named {
        let node = &nodes[n];
        let Some(parent) = node.parent.filter(|_| node.placed) else {
            continue;
        };
        if node.id == Some(parent) {
            return Err(InvalidInput::new(
                field(n, "parent"),
                format!("{parent} cannot be a subtask of itself"),
            ));
        }
        if !index.contains_key(parent) {
            let message = if known(parent) {
                format!(
                    "{} is not in the list; a parent must be an item of the list",
                    quote(parent)
                )
            } else {
                format!(
                    "unknown id {}: a parent must be the id of an item in the list",
                    quote(parent)
                )
            };
            return Err(InvalidInput::new(field(n, "parent"), message));
        }
    }
    // No cycles: walking up from an item never comes back to it.
    for &n in &named {
        if !nodes[n].placed || up[n].is_none() {
            continue;
        }
        let mut path = vec![n];
        let mut at = up[n];
        while let Some(m) = at {
            if m == n {
                return Err(InvalidInput::new(
                    field(n, "parent"),
                    format!("would make a cycle ({})", cycle_text(nodes, &path)),
                ));
            }
            if path.len() > nodes.len() {
                // A cycle above N, not through it: found from one of its items.
                break;
            }
            path.push(m);
            at = up[m];
        }
    }
    // At most MAX_LEVELS levels.
    let level = levels(&up);
    for &n in &named {
        if nodes[n].placed && level[n] > MAX_LEVELS {
            let parent = up[n].map_or("its parent", id);
            return Err(InvalidInput::new(
                field(n, "parent"),
                format!(
                    "{parent} is already {} levels deep; subtasks go at most {MAX_LEVELS} levels",
                    level[n] - 1
                ),
            ));
        }
    }
    // An item moved with its subtasks: blame the move.
    let mut deepest: Option<(usize, usize)> = None;
    for deep in (0..nodes.len()).filter(|&n| level[n] > MAX_LEVELS) {
        let mut at = up[deep];
        while let Some(m) = at {
            if nodes[m].placed && nodes[m].at.is_some() {
                if deepest.is_none_or(|(moved, _)| nodes[m].at < nodes[moved].at) {
                    deepest = Some((m, deep));
                }
                break;
            }
            at = up[m];
        }
    }
    if let Some((moved, deep)) = deepest {
        let parent = up[moved].map_or("its parent", id);
        return Err(InvalidInput::new(
            field(moved, "parent"),
            format!(
                "under {parent}, {}'s subtask {} would be {} levels deep; subtasks go at most {MAX_LEVELS} levels",
                id(moved),
                id(deep),
                level[deep]
            ),
        ));
    }
    check_completion(nodes, &up, &named, before)
}

/// "t3 -> t5 -> t3" for the cycle PATH (child to parent), long ones cut.
fn cycle_text(nodes: &[Node], path: &[usize]) -> String {
    let name = |n: usize| nodes[n].id.unwrap_or("?");
    let mut parts: Vec<&str> = Vec::new();
    if path.len() > 6 {
        parts.extend(path[..3].iter().map(|&n| name(n)));
        parts.push("...");
        parts.extend(path[path.len() - 2..].iter().map(|&n| name(n)));
    } else {
        parts.extend(path.iter().map(|&n| name(n)));
    }
    parts.push(name(path[0]));
    parts.join(" -> ")
}

/// The completion rules of `check`.  NAMED are the nodes the write names,
/// in its order.
fn check_completion(
    nodes: &[Node],
    up: &[Option<usize>],
    named: &[usize],
    before: &[Item],
) -> Result<(), InvalidInput> {
    // For each item with unfinished items under it, those, in list order.
    let mut open_below: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    for (n, node) in nodes.iter().enumerate() {
        if !node.status.is_open() {
            continue;
        }
        let mut at = up[n];
        let mut steps = 0;
        while let Some(a) = at {
            open_below.entry(a).or_default().push(n);
            steps += 1;
            if steps > nodes.len() {
                break;
            }
            at = up[a];
        }
    }
    if open_below.is_empty() {
        return Ok(());
    }
    let field = |n: usize, name: &str| format!("todos[{}].{name}", nodes[n].at.unwrap_or_default());
    let id = |n: usize| nodes[n].id.unwrap_or("the new item");
    // An item this write completes has no unfinished subtasks.
    for &n in named {
        let node = &nodes[n];
        let newly_completed = node.status == Status::Completed
            && node.was.map(|(status, _)| status) != Some(Status::Completed);
        if let Some(open) = open_below.get(&n).filter(|_| newly_completed) {
            let ids: Vec<&str> = open.iter().map(|&d| id(d)).collect();
            return Err(InvalidInput::new(
                field(n, "status"),
                completion_refusal(id(n), &ids),
            ));
        }
    }
    // No unfinished item comes under an item that stays completed, unless
    // it was there before (a list read from a file may hold such pairs).
    let before_parent: FxHashMap<&str, Option<&str>> = before
        .iter()
        .map(|item| (item.id.as_str(), item.parent.as_deref()))
        .collect();
    let was_below = |d: &str, a: &str| {
        let mut at = before_parent.get(d).copied().flatten();
        for _ in 0..=before.len() {
            match at {
                Some(p) if p == a => return true,
                Some(p) => at = before_parent.get(p).copied().flatten(),
                None => return false,
            }
        }
        false
    };
    // The first refusal in the order of the write.
    let mut first: Option<(usize, InvalidInput)> = None;
    for (n, node) in nodes.iter().enumerate() {
        if node.status != Status::Completed
            || node.was.map(|(status, _)| status) != Some(Status::Completed)
        {
            continue;
        }
        let Some(open) = open_below.get(&n) else {
            continue;
        };
        for &d in open {
            let dnode = &nodes[d];
            let was_open_below = dnode.was.is_some_and(|(status, _)| status.is_open())
                && matches!((dnode.id, node.id), (Some(d_id), Some(a_id)) if was_below(d_id, a_id));
            if was_open_below {
                continue;
            }
            // Blame the nearest item on the way up that the write moved,
            // else the subtask the write reopened.
            let mut blamed = None;
            let mut at = Some(d);
            while let Some(m) = at.filter(|&m| m != n) {
                let moved = nodes[m]
                    .was
                    .is_none_or(|(_, parent)| parent != nodes[m].parent);
                if let Some(index) = nodes[m].at.filter(|_| moved) {
                    let message = format!(
                        "{a} is completed and cannot have unfinished subtasks ({d}); reopen {a} (in_progress or pending) in the same write, or choose another parent",
                        a = id(n),
                        d = id(d)
                    );
                    blamed = Some((index, InvalidInput::new(field(m, "parent"), message)));
                    break;
                }
                at = up[m];
            }
            let reopened = dnode.was.is_some_and(|(status, _)| !status.is_open());
            if let Some(index) = dnode.at.filter(|_| blamed.is_none() && reopened) {
                let message = format!(
                    "{d} is a subtask of {a}, which is completed; reopen {a} (in_progress or pending) in the same write, or leave {d} finished",
                    a = id(n),
                    d = id(d)
                );
                blamed = Some((index, InvalidInput::new(field(d, "status"), message)));
            }
            if let Some((index, error)) = blamed {
                if first.as_ref().is_none_or(|(earliest, _)| index < *earliest) {
                    first = Some((index, error));
                }
            }
        }
    }
    match first {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}

/// Why an item cannot be completed: OPEN, the ids of its unfinished subtasks.
pub fn completion_refusal(id: &str, open: &[&str]) -> String {
    let them = if open.len() == 1 { "it" } else { "them" };
    format!(
        "{id} cannot be completed while {} unfinished; complete or cancel {them} first",
        subtasks_phrase(open)
    )
}

/// The ids of the unfinished items under the item at N, in list order.
pub fn open_subtasks(items: &[Item], n: usize) -> Vec<&str> {
    let Some(layout) = Layout::of(items) else {
        return Vec::new();
    };
    (0..items.len())
        .filter(|&d| items[d].status.is_open() && is_ancestor(&layout.up, n, d))
        .map(|d| items[d].id.as_str())
        .collect()
}

/// The nearest completed item above the item at N, if any.
pub fn completed_ancestor(items: &[Item], n: usize) -> Option<&str> {
    let layout = Layout::of(items)?;
    let mut at = layout.up.get(n).copied().flatten();
    for _ in 0..items.len() {
        let a = at?;
        if items[a].status == Status::Completed {
            return Some(&items[a].id);
        }
        at = layout.up[a];
    }
    None
}

/// Where each item of a list stands in its tree, for showing it.
pub struct Layout {
    up: Vec<Option<usize>>,
    level: Vec<usize>,
}

impl Layout {
    /// The layout of ITEMS; None when no item is a subtask.
    pub fn of(items: &[Item]) -> Option<Layout> {
        if !any_parent(items) {
            return None;
        }
        let nodes: Vec<Node> = items.iter().map(node_of).collect();
        let (_, up) = links(&nodes);
        let level = levels(&up);
        Some(Layout { up, level })
    }

    /// 1 for a top-level item.
    pub fn level(&self, n: usize) -> usize {
        self.level.get(n).copied().unwrap_or(1)
    }

    /// Whether item N stands under its parent when PREV is the item shown
    /// before it: right after the parent or after one of its subtasks.
    /// A top-level item always does.
    pub fn in_place(&self, n: usize, prev: Option<usize>) -> bool {
        match (self.up.get(n).copied().flatten(), prev) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(parent), Some(prev)) => prev == parent || is_ancestor(&self.up, parent, prev),
        }
    }
}

/// ITEM as a node of no write.
fn node_of(item: &Item) -> Node<'_> {
    Node {
        id: Some(&item.id),
        parent: item.parent.as_deref(),
        status: item.status,
        at: None,
        placed: false,
        was: None,
    }
}

/// Where a new subtask of the item at PARENT goes: after the parent and the
/// items under it that follow it.
pub fn subtree_end(items: &[Item], parent: usize) -> usize {
    let Some(parent_id) = items.get(parent).map(|item| item.id.as_str()) else {
        return items.len();
    };
    let parent_of: FxHashMap<&str, &str> = items
        .iter()
        .filter_map(|item| item.parent.as_deref().map(|p| (item.id.as_str(), p)))
        .collect();
    let under = |item: &Item| {
        let mut at = item.parent.as_deref();
        for _ in 0..=items.len() {
            match at {
                Some(p) if p == parent_id => return true,
                Some(p) => at = parent_of.get(p).copied(),
                None => return false,
            }
        }
        false
    };
    let mut end = parent + 1;
    while end < items.len() && under(&items[end]) {
        end += 1;
    }
    end
}

/// Makes the parents of ITEMS sound: a parent not in the list gives way
/// to its nearest ancestor among REMOVED (items that just left the list)
/// still in it, or to none; a link that closes a cycle or goes deeper than
/// MAX_LEVELS is cut.  Returns the ids of the items whose parent changed.
pub fn repair(items: &mut [Item], removed: &[Item]) -> Vec<String> {
    let mut changed = Vec::new();
    if !any_parent(items) {
        return changed;
    }
    let present: FxHashSet<String> = items.iter().map(|item| item.id.clone()).collect();
    let removed_parent: FxHashMap<&str, Option<&str>> = removed
        .iter()
        .map(|item| (item.id.as_str(), item.parent.as_deref()))
        .collect();
    for item in items.iter_mut() {
        let Some(parent) = item.parent.as_deref() else {
            continue;
        };
        if present.contains(parent) {
            continue;
        }
        let mut at = removed_parent.get(parent).copied().flatten();
        for _ in 0..=removed.len() {
            match at {
                Some(p) if present.contains(p) => break,
                Some(p) => at = removed_parent.get(p).copied().flatten(),
                None => break,
            }
        }
        let found = at
            .filter(|p| present.contains(*p) && *p != item.id)
            .map(str::to_string);
        item.parent = found;
        changed.push(item.id.clone());
    }
    // Cycles and depth, cut one link at a time (rare: only bad files).
    loop {
        let nodes: Vec<Node> = items.iter().map(node_of).collect();
        let (_, up) = links(&nodes);
        let cut = (0..items.len())
            .find(|&n| up[n].is_some() && is_ancestor(&up, n, n))
            .or_else(|| {
                let level = levels(&up);
                (0..items.len()).find(|&n| {
                    level[n] > MAX_LEVELS && up[n].is_some_and(|p| level[p] <= MAX_LEVELS)
                })
            });
        let Some(n) = cut else { break };
        items[n].parent = None;
        changed.push(items[n].id.clone());
    }
    let mut seen = FxHashSet::default();
    changed.retain(|id| seen.insert(id.clone()));
    changed
}

/// Lines for a write's result about subtasks: items COMPLETED or CANCELLED
/// by the write whose parent now has no unfinished subtasks left, and
/// items CANCELLED with unfinished subtasks.  At most MAX_NAMED of each.
pub fn result_notes(out: &mut String, items: &[Item], completed: &[String], cancelled: &[String]) {
    if completed.is_empty() && cancelled.is_empty() {
        return;
    }
    let Some(layout) = Layout::of(items) else {
        return;
    };
    let index: FxHashMap<&str, usize> = items
        .iter()
        .enumerate()
        .rev()
        .map(|(n, item)| (item.id.as_str(), n))
        .collect();
    let mut has_open = vec![false; items.len()];
    for (n, item) in items.iter().enumerate() {
        if item.status.is_open() {
            let mut at = layout.up[n];
            let mut steps = 0;
            while let Some(a) = at.filter(|_| steps <= items.len()) {
                has_open[a] = true;
                at = layout.up[a];
                steps += 1;
            }
        }
    }
    let mut warned = 0usize;
    for n in cancelled
        .iter()
        .filter_map(|id| index.get(id.as_str()).copied())
    {
        if !has_open[n] {
            continue;
        }
        warned += 1;
        if warned > MAX_NAMED {
            continue;
        }
        let open = (0..items.len())
            .filter(|&d| items[d].status.is_open() && is_ancestor(&layout.up, n, d));
        let open: Vec<&str> = open.map(|d| items[d].id.as_str()).collect();
        let (subtasks, them) = if open.len() == 1 {
            ("an unfinished subtask", "it")
        } else {
            ("unfinished subtasks", "them")
        };
        out.push_str("Warning: ");
        out.push_str(&items[n].id);
        out.push_str(" was cancelled with ");
        out.push_str(subtasks);
        out.push(' ');
        push_ids(out, open.iter().copied());
        out.push_str(": cancel ");
        out.push_str(them);
        out.push_str(" too, or finish ");
        out.push_str(them);
        out.push_str(".\n");
    }
    if warned > MAX_NAMED {
        out.push_str("... and ");
        out.push_str(&(warned - MAX_NAMED).to_string());
        out.push_str(" more items cancelled with unfinished subtasks\n");
    }
    let mut told: FxHashSet<usize> = FxHashSet::default();
    let mut closable = 0usize;
    for n in completed
        .iter()
        .chain(cancelled)
        .filter_map(|id| index.get(id.as_str()).copied())
    {
        // The nearest unfinished item above: it may now be done.
        let mut at = layout.up[n];
        let mut steps = 0;
        while let Some(a) = at.filter(|_| steps <= items.len()) {
            if items[a].status.is_open() {
                if !has_open[a] && told.insert(a) {
                    closable += 1;
                    if closable <= MAX_NAMED {
                        out.push_str(&items[a].id);
                        out.push_str(" (");
                        push_cut(out, &items[a].content);
                        out.push_str(") has no unfinished subtasks left: mark it completed when it is done.\n");
                    }
                }
                break;
            }
            at = layout.up[a];
            steps += 1;
        }
    }
    if closable > MAX_NAMED {
        out.push_str("... and ");
        out.push_str(&(closable - MAX_NAMED).to_string());
        out.push_str(" more items have no unfinished subtasks left\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample_items;
    use Status::*;

    /// ITEMS with parents set: PARENTS[n] is item n's parent id.
    fn tree(statuses: &[Status], parents: &[Option<&str>]) -> Vec<Item> {
        let mut items = sample_items(statuses);
        for (item, parent) in items.iter_mut().zip(parents) {
            item.parent = parent.map(str::to_string);
        }
        items
    }

    /// Nodes for a whole-list write of ITEMS over BEFORE: every item named
    /// in order, every parent given.
    fn whole<'a>(items: &'a [Item], before: &'a [Item]) -> Vec<Node<'a>> {
        items
            .iter()
            .enumerate()
            .map(|(n, item)| Node {
                at: Some(n),
                placed: true,
                was: before
                    .iter()
                    .find(|b| b.id == item.id)
                    .map(|b| (b.status, b.parent.as_deref())),
                ..node_of(item)
            })
            .collect()
    }

    fn error(items: &[Item], before: &[Item]) -> String {
        check(&whole(items, before), before, |id| id == "t8")
            .expect_err("should be refused")
            .to_string()
    }

    #[test]
    fn sound_trees_pass() {
        let items = tree(
            &[Pending, Pending, Pending, Pending],
            &[None, Some("t1"), Some("t2"), Some("t1")],
        );
        assert_eq!(check(&whole(&items, &[]), &[], |_| false), Ok(()));
    }

    #[test]
    fn unknown_and_absent_parents_are_named() {
        let items = tree(&[Pending, Pending, Pending], &[None, None, Some("t9")]);
        assert_eq!(
            error(&items, &[]),
            "todos[2].parent: unknown id \"t9\": a parent must be the id of an item in the list"
        );
        let items = tree(&[Pending, Pending], &[None, Some("t8")]);
        assert_eq!(
            error(&items, &[]),
            "todos[1].parent: \"t8\" is not in the list; a parent must be an item of the list"
        );
        let items = tree(&[Pending, Pending], &[None, Some("t2")]);
        assert_eq!(
            error(&items, &[]),
            "todos[1].parent: t2 cannot be a subtask of itself"
        );
    }

    #[test]
    fn cycles_are_named_with_their_path() {
        let items = tree(
            &[Pending, Pending, Pending],
            &[None, Some("t3"), Some("t2")],
        );
        assert_eq!(
            error(&items, &[]),
            "todos[1].parent: would make a cycle (t2 -> t3 -> t2)"
        );
        let parents: Vec<Option<String>> =
            (1..=9).map(|n| Some(format!("t{}", n % 9 + 1))).collect();
        let parents: Vec<Option<&str>> = parents.iter().map(Option::as_deref).collect();
        let items = tree(&[Pending; 9], &parents);
        assert_eq!(
            error(&items, &[]),
            "todos[0].parent: would make a cycle (t1 -> t2 -> t3 -> ... -> t8 -> t9 -> t1)"
        );
    }

    #[test]
    fn a_fourth_level_is_refused() {
        let items = tree(&[Pending; 4], &[None, Some("t1"), Some("t2"), Some("t3")]);
        assert_eq!(
            error(&items, &[]),
            "todos[3].parent: t3 is already 3 levels deep; subtasks go at most 3 levels"
        );
        // A merge moves t4, whose subtask t5 would go to level 4.
        let items = tree(
            &[Pending; 5],
            &[None, Some("t1"), None, Some("t2"), Some("t4")],
        );
        let mut nodes: Vec<Node> = items.iter().map(node_of).collect();
        nodes[3] = Node {
            at: Some(0),
            placed: true,
            ..nodes[3]
        };
        assert_eq!(
            check(&nodes, &[], |_| true).unwrap_err().to_string(),
            "todos[0].parent: under t2, t4's subtask t5 would be 4 levels deep; subtasks go at most 3 levels"
        );
    }

    #[test]
    fn a_parent_waits_for_its_subtasks() {
        let before = tree(
            &[InProgress, Pending, Pending, Completed],
            &[None, Some("t1"), Some("t2"), Some("t1")],
        );
        let mut items = before.clone();
        items[0].status = Completed;
        assert_eq!(
            error(&items, &before),
            "todos[0].status: t1 cannot be completed while its subtasks t2, t3 are unfinished; complete or cancel them first"
        );
        items[1].status = Cancelled;
        assert_eq!(
            error(&items, &before),
            "todos[0].status: t1 cannot be completed while its subtask t3 is unfinished; complete or cancel it first"
        );
        items[2].status = Completed;
        assert_eq!(check(&whole(&items, &before), &before, |_| false), Ok(()));
    }

    #[test]
    fn no_unfinished_subtask_comes_under_a_completed_item() {
        let before = tree(&[Completed, Completed, Pending], &[None, Some("t1"), None]);
        // t3 moved under completed t1.
        let mut items = before.clone();
        items[2].parent = Some("t1".into());
        assert_eq!(
            error(&items, &before),
            "todos[2].parent: t1 is completed and cannot have unfinished subtasks (t3); reopen t1 (in_progress or pending) in the same write, or choose another parent"
        );
        // t2 reopened under completed t1.
        let mut items = before.clone();
        items[1].status = Pending;
        assert_eq!(
            error(&items, &before),
            "todos[1].status: t2 is a subtask of t1, which is completed; reopen t1 (in_progress or pending) in the same write, or leave t2 finished"
        );
        // Reopening t1 in the same write is fine.
        items[0].status = InProgress;
        assert_eq!(check(&whole(&items, &before), &before, |_| false), Ok(()));
        // A pair that was there before stays allowed.
        let odd = tree(&[Completed, Pending], &[None, Some("t1")]);
        assert_eq!(check(&whole(&odd, &odd), &odd, |_| false), Ok(()));
    }

    #[test]
    fn repair_moves_orphans_up_and_cuts_cycles_and_depth() {
        let removed = tree(&[Completed, Completed], &[None, Some("t1")]);
        let mut items = tree(
            &[Pending, Pending, Pending],
            &[None, Some("t1"), Some("t2")],
        );
        items.remove(0);
        items.remove(0);
        // t3 was under t2, which was under t1: both gone, so t3 is top-level.
        assert_eq!(repair(&mut items, &removed), ["t3"]);
        assert_eq!(items[0].parent, None);
        let removed = tree(&[Pending, Completed], &[None, Some("t1")]);
        let mut items = tree(
            &[Pending, Completed, Pending],
            &[None, Some("t1"), Some("t2")],
        );
        items.remove(1);
        assert_eq!(repair(&mut items, &removed[1..]), ["t3"]);
        assert_eq!(
            items[1].parent.as_deref(),
            Some("t1"),
            "up to the removed item's parent"
        );
        let mut cycle = tree(&[Pending, Pending], &[Some("t2"), Some("t1")]);
        assert_eq!(repair(&mut cycle, &[]), ["t1"]);
        assert_eq!(
            (cycle[0].parent.as_deref(), cycle[1].parent.as_deref()),
            (None, Some("t1"))
        );
        let mut deep = tree(
            &[Pending; 5],
            &[None, Some("t1"), Some("t2"), Some("t3"), Some("t4")],
        );
        assert_eq!(repair(&mut deep, &[]), ["t4"]);
        assert_eq!(deep[3].parent, None);
        assert_eq!(deep[4].parent.as_deref(), Some("t4"));
        let mut flat = sample_items(&[Pending]);
        assert!(repair(&mut flat, &[]).is_empty());
    }

    #[test]
    fn layout_gives_levels_and_whether_an_item_stands_under_its_parent() {
        let items = tree(
            &[Pending; 5],
            &[None, Some("t1"), Some("t2"), Some("t1"), Some("t2")],
        );
        let layout = Layout::of(&items).unwrap();
        assert_eq!(
            (0..5).map(|n| layout.level(n)).collect::<Vec<_>>(),
            [1, 2, 3, 2, 3]
        );
        assert!(layout.in_place(1, Some(0)));
        assert!(layout.in_place(3, Some(2)), "after a subtask of its parent");
        assert!(!layout.in_place(4, Some(3)), "t5 is under t2, not t4");
        assert!(!layout.in_place(1, None));
        assert!(layout.in_place(0, None));
        assert!(Layout::of(&sample_items(&[Pending])).is_none());
    }

    #[test]
    fn a_new_subtask_goes_after_its_parents_subtasks() {
        let items = tree(
            &[Pending; 5],
            &[None, Some("t1"), Some("t2"), None, Some("t4")],
        );
        assert_eq!(subtree_end(&items, 0), 3);
        assert_eq!(subtree_end(&items, 1), 3);
        assert_eq!(subtree_end(&items, 3), 5);
        assert_eq!(subtree_end(&items, 9), 5);
    }

    #[test]
    fn results_say_when_a_parent_can_be_closed_or_was_cancelled_too_early() {
        let items = tree(
            &[InProgress, Completed, Cancelled, Pending],
            &[None, Some("t1"), Some("t1"), None],
        );
        let mut out = String::new();
        result_notes(&mut out, &items, &["t2".into()], &["t3".into()]);
        assert_eq!(
            out,
            "t1 (Step 0) has no unfinished subtasks left: mark it completed when it is done.\n"
        );
        let items = tree(
            &[Cancelled, Pending, Completed],
            &[None, Some("t1"), Some("t1")],
        );
        let mut out = String::new();
        result_notes(&mut out, &items, &["t3".into()], &["t1".into()]);
        assert_eq!(out, "Warning: t1 was cancelled with an unfinished subtask t2: cancel it too, or finish it.\n");
        let mut out = String::new();
        result_notes(&mut out, &sample_items(&[Completed]), &["t1".into()], &[]);
        assert!(out.is_empty());
    }
}

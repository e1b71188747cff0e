//! The rules between waits and subtasks (see `graph::check_ancestry`)
//! for each way a list is written: todo_write whole or merged, the Task
//! tools (merged writes) and the user's edits.

use crate::graph::{self, Blame, Placed};
use crate::model::{Item, Status};
use crate::reconcile::Matching;
use crate::validate::{InvalidInput, Limits, MergeItem, ProposedItem};

use super::{with_whole_list_paths, Paths, Session};

/// How the user removes a dependency, for refusals of the user's edits.
pub(super) const USER_UNBLOCK_HINT: &str = "efrit-todo-user-remove-blocker";

impl Session {
    /// The problem `graph::check_ancestry` found, as an error naming the
    /// field; CHANGE_OF gives the change each node comes from.
    fn ancestry_error(
        problem: graph::AncestryProblem,
        paths: &Paths,
        change_of: &[Option<usize>],
    ) -> InvalidInput {
        let change = change_of.get(problem.node).copied().flatten().unwrap_or(0);
        let path = match &problem.blame {
            Blame::Edge(blocker) => (paths.edge)(change, blocker),
            Blame::Status => (paths.field)(change, "status"),
            Blame::Parent => (paths.field)(change, "parent"),
        };
        InvalidInput::new(path, problem.message)
    }

    /// Whether a write that leaves the list with these parents and waits
    /// could break an ancestor rule: it needs both.
    fn ancestry_matters(&self, parents_given: bool, edges_given: bool) -> bool {
        (parents_given || self.items.iter().any(|item| item.parent.is_some()))
            && (edges_given || graph::any_edges(&self.items))
    }

    /// The ancestor rules for a merged write: LISTED gives for each change
    /// the index of the listed item it changes; the others add an item or
    /// bring back a retired one.
    pub(super) fn check_merge_ancestry(
        &self,
        changes: &[MergeItem],
        listed: &[Option<usize>],
        paths: &Paths,
    ) -> Result<(), InvalidInput> {
        // A retired item brought back comes with its parent and its waits.
        let restores = changes
            .iter()
            .zip(listed)
            .any(|(c, at)| at.is_none() && c.id.is_some());
        let parents_given = restores || changes.iter().any(|c| c.parent.flatten().is_some());
        let edges_given = restores
            || changes
                .iter()
                .any(|c| c.blocked_by.as_ref().is_some_and(|ids| !ids.is_empty()));
        if !self.ancestry_matters(parents_given, edges_given) {
            return Ok(());
        }
        let mut named: Vec<Option<usize>> = vec![None; self.items.len()];
        for (i, at) in listed.iter().enumerate() {
            if let Some(at) = at {
                named[*at] = Some(i);
            }
        }
        let mut nodes: Vec<Placed> = self
            .items
            .iter()
            .zip(&named)
            .map(|(item, at)| {
                let change = at.map(|i| &changes[i]);
                Placed {
                    id: Some(&item.id),
                    parent: change
                        .and_then(|c| c.parent)
                        .unwrap_or(item.parent.as_deref()),
                    status: change.and_then(|c| c.status).unwrap_or(item.status),
                    blocked_by: change
                        .and_then(|c| c.blocked_by.as_deref())
                        .unwrap_or(&item.blocked_by),
                    before: Some(item),
                }
            })
            .collect();
        let mut change_of = named;
        for (i, (change, at)) in changes.iter().zip(listed).enumerate() {
            if at.is_some() {
                continue;
            }
            let retired: Option<&Item> = change.id.and_then(|id| self.retired.get(id));
            nodes.push(Placed {
                id: change.id,
                parent: change
                    .parent
                    .unwrap_or(retired.and_then(|item| item.parent.as_deref())),
                status: change
                    .status
                    .or(retired.map(|item| item.status))
                    .unwrap_or(Status::Pending),
                blocked_by: change
                    .blocked_by
                    .as_deref()
                    .or(retired.map(|item| item.blocked_by.as_slice()))
                    .unwrap_or_default(),
                before: retired,
            });
            change_of.push(Some(i));
        }
        // The item this write starts runs; any other goes back to pending.
        let running = changes
            .iter()
            .position(|c| c.status == Some(Status::InProgress))
            .and_then(|i| change_of.iter().position(|c| *c == Some(i)));
        if let Some(running) = running {
            for (n, node) in nodes.iter_mut().enumerate() {
                if n != running && node.status == Status::InProgress {
                    node.status = Status::Pending;
                }
            }
        }
        graph::check_ancestry(&nodes, paths.unblock_hint)
            .map_err(|problem| Session::ancestry_error(problem, paths, &change_of))
    }

    /// The ancestor rules for a whole-list write, on the list MATCHING
    /// says it makes; NEW_IDS are the ids the items it adds will get.
    pub(super) fn check_replace_ancestry(
        &self,
        proposed: &[ProposedItem],
        matching: &Matching,
        new_ids: &[Option<String>],
        limits: &Limits,
    ) -> Result<(), InvalidInput> {
        let parents_given = proposed.iter().any(|p| p.parent.is_some());
        let edges_given = proposed.iter().any(|p| !p.blocked_by.is_empty());
        if !(parents_given && edges_given) {
            return Ok(());
        }
        let mut running = false;
        let nodes: Vec<Placed> = proposed
            .iter()
            .enumerate()
            .map(|(i, wanted)| {
                let before = matching
                    .continued(i)
                    .and_then(|j| self.items.get(j))
                    .or_else(|| wanted.id.and_then(|id| self.retired.get(id)));
                // The first item in progress stays so; the others go back.
                let status = match wanted.status {
                    Status::InProgress if running => Status::Pending,
                    Status::InProgress => {
                        running = true;
                        Status::InProgress
                    }
                    other => other,
                };
                Placed {
                    id: before
                        .map(|item| item.id.as_str())
                        .or(wanted.id)
                        .or(new_ids.get(i).and_then(Option::as_deref)),
                    parent: wanted.parent,
                    status,
                    blocked_by: &wanted.blocked_by,
                    before,
                }
            })
            .collect();
        with_whole_list_paths(proposed, limits.max_blockers, |paths, change_of| {
            graph::check_ancestry(&nodes, paths.unblock_hint)
                .map_err(|problem| Session::ancestry_error(problem, paths, change_of))
        })
    }

    /// The dependency rules for the user's edit of the list to ITEMS
    /// (the item at INDEX changed; its field names are plain).
    pub(super) fn check_user_graph(
        &self,
        items: &[Item],
        index: usize,
        limits: &Limits,
    ) -> Result<(), InvalidInput> {
        if !graph::any_edges(items) {
            return Ok(());
        }
        let edge = |_: usize, _: &str| "blocker".to_string();
        let field = |_: usize, name: &str| name.to_string();
        let paths = Paths {
            edge: &edge,
            field: &field,
            unblock_hint: USER_UNBLOCK_HINT,
            max_blockers: limits.max_blockers,
        };
        let nodes: Vec<graph::Node> = items
            .iter()
            .zip(&self.items)
            .enumerate()
            .map(|(n, (item, was))| graph::Node {
                id: Some(&item.id),
                status: item.status,
                was: Some(was.status),
                blocked_by: &item.blocked_by,
                edges_given: n == index && item.blocked_by != was.blocked_by,
                earlier_blocked_by: &[],
            })
            .collect();
        let change_of = vec![Some(0); nodes.len()];
        graph::check(&nodes, limits.max_blockers)
            .map_err(|problem| Session::graph_error(problem, &nodes, &paths, &change_of))?;
        let placed: Vec<Placed> = items
            .iter()
            .zip(&self.items)
            .map(|(item, was)| Placed {
                id: Some(&item.id),
                parent: item.parent.as_deref(),
                status: item.status,
                blocked_by: &item.blocked_by,
                before: Some(was),
            })
            .collect();
        graph::check_ancestry(&placed, USER_UNBLOCK_HINT)
            .map_err(|problem| Session::ancestry_error(problem, &paths, &change_of))
    }

    /// Takes away the waits that keep the item at INDEX from STATUS: its
    /// own open blockers and its ancestors'.  Returns what went, as
    /// (waiting id, blocker ids).
    pub(super) fn drop_waits(
        &mut self,
        index: usize,
        status: Status,
    ) -> Vec<(String, Vec<String>)> {
        let mut dropped = Vec::new();
        if !matches!(status, Status::InProgress | Status::Completed)
            || !graph::any_edges(&self.items)
        {
            return dropped;
        }
        let lookup = graph::index_of(&self.items);
        let mut chain = vec![index];
        let mut at = self.items[index].parent.as_deref();
        while let Some(&a) = at.and_then(|p| lookup.get(p)) {
            if chain.contains(&a) {
                break;
            }
            chain.push(a);
            at = self.items[a].parent.as_deref();
        }
        let open: Vec<(usize, Vec<String>)> = chain
            .into_iter()
            .map(|n| {
                let ids: Vec<String> = graph::open_blockers(&self.items, &lookup, n)
                    .into_iter()
                    .map(|b| b.id.clone())
                    .collect();
                (n, ids)
            })
            .filter(|(_, ids)| !ids.is_empty())
            .collect();
        for (n, ids) in open {
            self.items[n].blocked_by.retain(|b| !ids.contains(b));
            dropped.push((self.items[n].id.clone(), ids));
        }
        dropped
    }
}

/// "the dependency of t2 on t1" or "the dependencies of t2 on t1, t3",
/// for each waiting item, joined.
pub(super) fn dropped_text(dropped: &[(String, Vec<String>)]) -> String {
    dropped
        .iter()
        .map(|(id, blockers)| {
            let mut out = String::from(if blockers.len() == 1 {
                "the dependency of "
            } else {
                "the dependencies of "
            });
            out.push_str(id);
            out.push_str(" on ");
            crate::model::push_ids(&mut out, blockers.iter().map(String::as_str));
            out
        })
        .collect::<Vec<_>>()
        .join(", ")
}

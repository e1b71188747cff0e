//! The Task tools over the session's one list: TaskCreate and TaskUpdate
//! become merged writes (one history, one set of checks), deletion strips
//! the item's id from every blocker list, TaskGet and TaskList only read.

use crate::graph;
use crate::history::{Actor, ChangeKind};
use crate::model::{Item, Status};
use crate::render;
use crate::validate::{
    parse_task, quote, Input, InvalidInput, MergeItem, TaskRequest, TaskStatus, TaskUpdate,
};

use super::{Options, Paths, Session, WriteEffect};

/// How TaskUpdate and TaskCreate spell what todo_write calls FIELD.
fn task_field(field: &str) -> &str {
    match field {
        "content" => "subject",
        "blocked_by" => "blockedBy",
        other => other,
    }
}

/// An error a merged write made, with its path in the Task tools' terms:
/// `todos[0].content` is `subject`, another change is the addBlocks or
/// removeBlocks entry it came from.
fn task_path(error: InvalidInput, others: &[String]) -> InvalidInput {
    let path = match error.path.strip_prefix("todos[") {
        Some(rest) => {
            let (n, field) = rest.split_once(']').unwrap_or((rest, ""));
            let field = field.strip_prefix('.').unwrap_or(field);
            match n.parse::<usize>() {
                Ok(0) if field.is_empty() => "input".to_string(),
                Ok(0) => task_field(field).to_string(),
                Ok(n) => others
                    .get(n - 1)
                    .cloned()
                    .unwrap_or_else(|| error.path.clone()),
                Err(_) => error.path.clone(),
            }
        }
        None => error.path.clone(),
    };
    InvalidInput::new(path, error.message)
}

impl Session {
    /// The Task tool TOOL with INPUT.  Returns the result text.
    pub fn task_tool(
        &mut self,
        tool: &str,
        input: &Input,
        options: &Options,
    ) -> Result<String, InvalidInput> {
        let request = parse_task(tool, input, &options.limits)?;
        let text = match request {
            TaskRequest::Get { task_id } => {
                let n = self.task_index(&task_id, "taskId")?;
                return Ok(render::task_get(&self.items, n));
            }
            TaskRequest::List => return Ok(render::task_list(&self.items)),
            TaskRequest::Create {
                subject,
                description,
                active_form,
                blocked_by,
                parent,
            } => {
                let change = MergeItem {
                    id: None,
                    content: Some(subject),
                    active_form,
                    status: None,
                    parent: Some(parent),
                    description: Some(description),
                    blocked_by: Some(blocked_by.clone()),
                    owner: None,
                };
                let edge = |_: usize, blocker: &str| {
                    let k = blocked_by.iter().position(|id| id == blocker).unwrap_or(0);
                    format!("blockedBy[{k}]")
                };
                let field = |_: usize, name: &str| task_field(name).to_string();
                let paths = Paths {
                    edge: &edge,
                    field: &field,
                    unblock_hint: "TaskUpdate removeBlockedBy",
                    max_blockers: options.limits.max_blockers,
                };
                let diff = self
                    .merge(std::slice::from_ref(&change), &options.limits, &paths)
                    .map_err(|e| task_path(e, &[]))?;
                self.note_write(&diff);
                let id = diff.added.first().cloned().unwrap_or_default();
                render::task_created(&self.items, &id)
            }
            TaskRequest::Update(update) => {
                if update.status == Some(TaskStatus::Deleted) {
                    let text = self.delete(&update.task_id)?;
                    self.last_write = Some(WriteEffect {
                        completed_any: false,
                        changed_nothing: false,
                    });
                    text
                } else {
                    self.task_update(&update, options)?
                }
            }
        };
        self.writes += 1;
        Ok(text)
    }

    /// Where the item TASK_ID names stands; an error at PATH when none does.
    fn task_index(&self, task_id: &str, path: &str) -> Result<usize, InvalidInput> {
        if let Some(n) = self.items.iter().position(|item| item.id == task_id) {
            return Ok(n);
        }
        let message = if self.retired.contains_key(task_id) {
            format!("{task_id} is no longer in the list")
        } else {
            format!("unknown id {}", quote(task_id).trim_matches('"'))
        };
        Err(InvalidInput::new(path, message))
    }

    fn note_write(&mut self, diff: &crate::reconcile::Diff) {
        let completed_any = !diff.completed.is_empty();
        if completed_any {
            self.guide.note_progress();
        }
        self.changed(Actor::Model, None);
        self.last_write = Some(WriteEffect {
            completed_any,
            changed_nothing: diff.is_empty(),
        });
    }

    fn task_update(
        &mut self,
        update: &TaskUpdate,
        options: &Options,
    ) -> Result<String, InvalidInput> {
        let n = self.task_index(&update.task_id, "taskId")?;
        let task_id = update.task_id.as_str();
        // Each id named must be in the list; removing an edge that is not
        // there is no error (the model's picture may be stale) but adding
        // one to an unknown id is.
        for (name, ids) in [
            ("addBlockedBy", &update.add_blocked_by),
            ("removeBlockedBy", &update.remove_blocked_by),
            ("addBlocks", &update.add_blocks),
            ("removeBlocks", &update.remove_blocks),
        ] {
            for (k, id) in ids.iter().enumerate() {
                if id == task_id {
                    return Err(InvalidInput::new(
                        format!("{name}[{k}]"),
                        format!("{task_id} cannot wait for itself"),
                    ));
                }
                self.task_index(id, &format!("{name}[{k}]"))?;
            }
        }
        let item = &self.items[n];
        let blocked_by = (!update.add_blocked_by.is_empty()
            || !update.remove_blocked_by.is_empty())
        .then(|| {
            let mut ids: Vec<String> = item
                .blocked_by
                .iter()
                .filter(|id| !update.remove_blocked_by.contains(id))
                .cloned()
                .collect();
            for id in &update.add_blocked_by {
                if !ids.contains(id) {
                    ids.push(id.clone());
                }
            }
            ids
        });
        let mut changes = vec![MergeItem {
            id: Some(task_id),
            content: update.subject,
            active_form: update.active_form,
            status: match update.status {
                Some(TaskStatus::Set(status)) => Some(status),
                _ => None,
            },
            parent: None,
            description: update.description,
            blocked_by,
            owner: update.owner,
        }];
        // The items this one blocks or stops blocking: their lists change.
        let mut others: Vec<String> = Vec::new();
        let mut other_ids: Vec<&str> = Vec::new();
        for (k, id) in update.add_blocks.iter().enumerate() {
            other_ids.push(id);
            others.push(format!("addBlocks[{k}]"));
        }
        for (k, id) in update.remove_blocks.iter().enumerate() {
            other_ids.push(id);
            others.push(format!("removeBlocks[{k}]"));
        }
        let mut lists: Vec<(&str, Vec<String>)> = Vec::new();
        for (j, id) in other_ids.iter().enumerate() {
            let adding = j < update.add_blocks.len();
            let at = match lists.iter().position(|(other, _)| other == id) {
                Some(at) => at,
                None => {
                    let current = self
                        .find(id)
                        .map(|item| item.blocked_by.clone())
                        .unwrap_or_default();
                    lists.push((id, current));
                    lists.len() - 1
                }
            };
            let list = &mut lists[at].1;
            if adding {
                if !list.iter().any(|b| b == task_id) {
                    list.push(task_id.to_string());
                }
            } else {
                list.retain(|b| b != task_id);
            }
        }
        // One change per other item; its path is the first entry naming it.
        let mut other_paths = Vec::new();
        for (id, list) in lists {
            let first = other_ids.iter().position(|o| *o == id).unwrap_or(0);
            other_paths.push(others[first].clone());
            changes.push(MergeItem {
                id: Some(id),
                content: None,
                active_form: None,
                status: None,
                parent: None,
                description: None,
                blocked_by: Some(list),
                owner: None,
            });
        }
        if changes[0].content.is_none()
            && changes[0].active_form.is_none()
            && changes[0].status.is_none()
            && changes[0].description.is_none()
            && changes[0].blocked_by.is_none()
            && changes[0].owner.is_none()
        {
            if changes.len() == 1 {
                return Err(InvalidInput::new(
                    "input",
                    format!("changes nothing for {task_id}; give status, subject, description, activeForm, owner or a dependency"),
                ));
            }
            // Only other items change: change I is other_paths[I].
            changes.remove(0);
            let edge = |i: usize, _: &str| other_paths.get(i).cloned().unwrap_or_default();
            let field = |i: usize, name: &str| {
                other_paths
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| name.to_string())
            };
            let paths = Paths {
                edge: &edge,
                field: &field,
                unblock_hint: "TaskUpdate removeBlocks",
                max_blockers: options.limits.max_blockers,
            };
            let before = self.items.clone();
            let diff = self.merge(&changes, &options.limits, &paths)?;
            self.note_write(&diff);
            return Ok(render::task_updated(&before, &self.items, task_id, &diff));
        }
        let add_blocked_by = &update.add_blocked_by;
        let edge = |i: usize, blocker: &str| {
            if i == 0 {
                match add_blocked_by.iter().position(|id| id == blocker) {
                    Some(k) => format!("addBlockedBy[{k}]"),
                    None => "addBlockedBy".to_string(),
                }
            } else {
                other_paths.get(i - 1).cloned().unwrap_or_default()
            }
        };
        let field = |i: usize, name: &str| {
            if i == 0 {
                task_field(name).to_string()
            } else {
                other_paths.get(i - 1).cloned().unwrap_or_default()
            }
        };
        let paths = Paths {
            edge: &edge,
            field: &field,
            unblock_hint: "TaskUpdate removeBlockedBy",
            max_blockers: options.limits.max_blockers,
        };
        let before = self.items.clone();
        let diff = self
            .merge(&changes, &options.limits, &paths)
            .map_err(|e| task_path(e, &other_paths))?;
        self.note_write(&diff);
        Ok(render::task_updated(&before, &self.items, task_id, &diff))
    }

    /// Removes the item ID: its id leaves every blocker list and stays
    /// retired; the history records it, and undo brings back the item
    /// and its edges.  An item with subtasks is not deleted.
    pub fn delete(&mut self, id: &str) -> Result<String, InvalidInput> {
        let n = self.task_index(id, "taskId")?;
        let subtasks: Vec<&str> = self
            .items
            .iter()
            .filter(|item| item.parent.as_deref() == Some(id))
            .map(|item| item.id.as_str())
            .collect();
        if !subtasks.is_empty() {
            let mut named = String::new();
            crate::model::push_ids(&mut named, subtasks.iter().copied());
            return Err(InvalidInput::new(
                "status",
                format!("{id} has subtasks {named}: delete or move its subtasks first"),
            ));
        }
        let before = self.items.clone();
        let item: Item = self.items.remove(n);
        let stripped = graph::strip(&mut self.items, id);
        let now_ready: Vec<String> = graph::newly_ready(&before, &self.items)
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut summary = format!("deleted {id}");
        if !stripped.is_empty() {
            summary.push_str(" (it no longer blocks ");
            crate::model::push_ids(&mut summary, stripped.iter().map(String::as_str));
            summary.push(')');
        }
        self.retired.insert(item.id.clone(), item);
        self.record(
            Actor::Model,
            ChangeKind::Delete,
            before,
            Vec::new(),
            None,
            Some(summary.clone()),
        );
        self.changed(Actor::Model, None);
        let mut text = format!(
            "[Task list updated: {}]\n",
            render::progress(&self.counts())
        );
        let mut line = summary;
        line.push_str("; its id is not reused.");
        text.push_str(&line);
        render::push_now_ready(&mut text, &now_ready);
        Ok(text)
    }

    /// Whether ITEMS[N] is ready (see `graph::ready`).
    pub fn is_ready(&self, n: usize) -> bool {
        self.items[n].status == Status::Pending && graph::ready(&self.items)[n]
    }
}

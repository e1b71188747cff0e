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
        "id" => "taskId",
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
        // The kept index, checked against the list; the list itself when
        // the index does not know the id.
        let listed = self
            .index
            .get(task_id)
            .filter(|&n| self.items.get(n).is_some_and(|item| item.id == task_id))
            .or_else(|| self.items.iter().position(|item| item.id == task_id));
        if let Some(n) = listed {
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
                blocked_by: Some(list),
                ..MergeItem::default()
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
            let diff = self.merge(&changes, &options.limits, &paths)?;
            self.note_write(&diff);
            return Ok(Self::with_index(
                &self.items,
                &mut self.index,
                true,
                |items, find| render::task_updated_by(items, task_id, &diff, Some(find)),
            ));
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
        // TaskUpdate has no blockedBy: the blockers it adds come in addBlockedBy.
        let field = |i: usize, name: &str| match (i, name) {
            (0, "blocked_by") => "addBlockedBy".to_string(),
            (0, name) => task_field(name).to_string(),
            _ => other_paths.get(i - 1).cloned().unwrap_or_default(),
        };
        let paths = Paths {
            edge: &edge,
            field: &field,
            unblock_hint: "TaskUpdate removeBlockedBy",
            max_blockers: options.limits.max_blockers,
        };
        let diff = self
            .merge(&changes, &options.limits, &paths)
            .map_err(|e| task_path(e, &other_paths))?;
        self.note_write(&diff);
        Ok(Self::with_index(
            &self.items,
            &mut self.index,
            true,
            |items, find| render::task_updated_by(items, task_id, &diff, Some(find)),
        ))
    }

    /// Removes the item ID: its id leaves every blocker list and stays
    /// retired; the history records it, and undo brings back the item
    /// and its edges.  An item with subtasks is not deleted.
    pub fn delete(&mut self, id: &str) -> Result<String, InvalidInput> {
        let n = self.task_index(id, "taskId")?;
        let mut listed = vec![None; 1];
        listed[0] = Some(n);
        let change = MergeItem {
            id: Some(id),
            ..MergeItem::default()
        };
        self.check_owners(std::slice::from_ref(&change), &listed)
            .map_err(|e| task_path(e, &[]))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ChangeKind;
    use crate::session::{LoopOptions, UserEdit};
    use crate::validate::ToolStyle;
    use serde_json::{json, Value as Json};

    fn task(s: &mut Session, tool: &str, v: Json) -> Result<String, InvalidInput> {
        s.task_tool(tool, &Input::from_json(&v), &Options::default())
    }

    fn error(s: &mut Session, tool: &str, v: Json) -> String {
        let before = (
            s.items.clone(),
            s.retired.clone(),
            s.ids.clone(),
            s.history.len(),
        );
        let e = task(s, tool, v).expect_err("an error").to_string();
        let after = (
            s.items.clone(),
            s.retired.clone(),
            s.ids.clone(),
            s.history.len(),
        );
        assert_eq!(before, after, "a failed call changes nothing: {e}");
        e
    }

    fn write(s: &mut Session, v: Json) -> Result<String, InvalidInput> {
        s.write(&Input::from_json(&v), &Options::default(), false, vec![])
            .map(|o| o.text)
    }

    /// t1 Build, t2 Test (blocked by t1), t3 Ship (blocked by t2).
    fn chain() -> Session {
        let mut s = Session::started_now();
        task(&mut s, "TaskCreate", json!({"subject": "Build"})).unwrap();
        let out = task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Test", "blockedBy": ["t1"]}),
        )
        .unwrap();
        assert!(out.contains("Created t2: Test [blocked by t1]"), "{out}");
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Ship", "blockedBy": ["#2"]}),
        )
        .unwrap();
        s
    }

    fn blockers(s: &Session, id: &str) -> Vec<String> {
        s.find(id).unwrap().blocked_by.clone()
    }

    #[test]
    fn a_blocked_task_cannot_start_or_complete_and_finishing_its_blocker_makes_it_ready() {
        let mut s = chain();
        let e = error(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        );
        assert_eq!(
            e,
            "status: t2 is blocked by t1 (pending); finish t1 first, or remove the dependency with TaskUpdate removeBlockedBy"
        );
        let e = error(
            &mut s,
            "TaskUpdate",
            json!({"taskId": 3, "status": "completed"}),
        );
        assert!(
            e.starts_with("status: t3 is blocked by t2 (pending)"),
            "{e}"
        );
        // Cancelling is allowed.
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "in_progress"}),
        )
        .unwrap();
        let out = task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        )
        .unwrap();
        assert!(out.contains("t2 is ready now."), "{out}");
        assert!(!out.contains("t3 is ready"), "{out}");
        assert!(out.contains("Next: set t2 in_progress"), "{out}");
        // The finished blocker stays stored (reopening it blocks again).
        assert_eq!(blockers(&s, "t2"), ["t1"]);
        let out = task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t2", "status": "cancelled"}),
        )
        .unwrap();
        assert!(out.contains("t3 is ready now."), "{out}");
    }

    #[test]
    fn dependency_mistakes_name_the_field() {
        let mut s = chain();
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "addBlockedBy": ["t3"]})
            ),
            "addBlockedBy[0]: t3 would close a cycle t3 -> t1 -> t2 -> t3"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "addBlockedBy": ["t2", "t9"]})
            ),
            "addBlockedBy[1]: unknown id t9"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t9", "status": "completed"})
            ),
            "taskId: unknown id t9"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "addBlockedBy": ["1"]})
            ),
            "addBlockedBy[0]: t1 cannot wait for itself"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t3", "addBlocks": ["t1"]})
            ),
            "addBlocks[0]: t3 would close a cycle t3 -> t1 -> t2 -> t3"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskCreate",
                json!({"subject": "x", "blockedBy": ["t1", "t7"]})
            ),
            "blockedBy[1]: unknown id t7"
        );
        assert_eq!(
            error(&mut s, "TaskCreate", json!({"blockedBy": []})),
            "subject: is required"
        );
        assert_eq!(error(&mut s, "TaskGet", json!({})), "taskId: is required");
        let e = error(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "done"}),
        );
        assert!(
            e.starts_with("status: expected pending, in_progress, completed, cancelled or deleted"),
            "{e}"
        );
        let long = "x".repeat(4001);
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "description": long})
            ),
            "description: is 4001 characters long; the limit is 4000"
        );
        let many: Vec<String> = (0..51).map(|n| format!("t{n}")).collect();
        assert!(error(
            &mut s,
            "TaskCreate",
            json!({"subject": "x", "blockedBy": many})
        )
        .starts_with("blockedBy: names 51 items; at most 50 may block one item"));
    }

    #[test]
    fn dependencies_are_removed_both_ways() {
        let mut s = chain();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t3", "removeBlockedBy": ["t2"], "addBlockedBy": ["t1"]}),
        )
        .unwrap();
        assert_eq!(blockers(&s, "t3"), ["t1"]);
        let out = task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "removeBlocks": ["t2", "t3"]}),
        )
        .unwrap();
        assert!(out.contains("Ready now: t2, t3."), "{out}");
        assert!(blockers(&s, "t2").is_empty() && blockers(&s, "t3").is_empty());
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "addBlocks": ["t2"], "owner": "scout"}),
        )
        .unwrap();
        assert_eq!(blockers(&s, "t2"), ["t1"]);
        assert_eq!(s.find("t1").unwrap().owner.as_deref(), Some("scout"));
    }

    #[test]
    fn get_and_list_show_open_blockers_only() {
        let mut s = chain();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "description": "cargo build --release", "owner": "builder"}),
        )
        .unwrap();
        let get = task(&mut s, "TaskGet", json!({"taskId": "t2"})).unwrap();
        assert_eq!(
            get,
            "t2 [pending] Test\nblocked by: t1 (pending)\nblocks: t3"
        );
        let get = task(&mut s, "TaskGet", json!({"taskId": "#1"})).unwrap();
        assert!(
            get.contains("description: cargo build --release\nowner: builder"),
            "{get}"
        );
        assert!(get.contains("blocks: t2\nready: yes"), "{get}");
        let list = task(&mut s, "TaskList", json!({})).unwrap();
        assert!(list.contains("t1 [pending] Build (builder)\nt2 [pending] Test [blocked by t1]\nt3 [pending] Ship [blocked by t2]\n"), "{list}");
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        )
        .unwrap();
        let list = task(&mut s, "TaskList", Json::Null).unwrap();
        assert!(list.contains("t2 [pending] Test\n"), "{list}");
        let get = task(&mut s, "TaskGet", json!({"taskId": "t2"})).unwrap();
        assert!(!get.contains("blocked by"), "{get}");
    }

    #[test]
    fn a_subtask_of_a_blocked_task_is_not_ready() {
        let mut s = chain();
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Sub", "parent": "t2"}),
        )
        .unwrap();
        assert_eq!(graph::ready(&s.items), [true, false, false, false]);
        let list = task(&mut s, "TaskList", json!({})).unwrap();
        assert!(list.contains("Ready: t1\n"), "{list}");
    }

    #[test]
    fn schemas_and_guidance_follow_the_style() {
        use crate::validate::{style_schemas, ToolStyle};
        let names = |style| -> Vec<String> {
            style_schemas(style)
                .iter()
                .map(|s| s["name"].as_str().unwrap_or_default().to_string())
                .collect()
        };
        assert_eq!(names(ToolStyle::Todo), ["todo_write", "todo_pause"]);
        assert_eq!(
            names(ToolStyle::Tasks),
            [
                "TaskCreate",
                "TaskUpdate",
                "TaskGet",
                "TaskList",
                "todo_pause"
            ]
        );
        assert_eq!(names(ToolStyle::Both).len(), 6);
        let update = &style_schemas(ToolStyle::Tasks)[1]["input_schema"];
        assert_eq!(update["required"], json!(["taskId"]));
        assert_eq!(update["properties"]["addBlockedBy"]["type"], "array");
        assert!(update["properties"]["status"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("deleted")));
        let mut s = chain();
        let first = s.prompt_guidance_for(30, ToolStyle::Tasks).to_string();
        assert!(
            first.contains("TaskCreate") && first.contains("blockedBy"),
            "{first}"
        );
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        )
        .unwrap();
        assert_eq!(
            s.prompt_guidance_for(30, ToolStyle::Tasks),
            first,
            "byte-identical within a session"
        );
    }

    #[test]
    fn a_long_task_list_is_bounded() {
        let mut s = Session::started_now();
        for n in 0..80 {
            task(
                &mut s,
                "TaskCreate",
                json!({"subject": format!("Step {n}")}),
            )
            .unwrap();
        }
        let list = task(&mut s, "TaskList", json!({})).unwrap();
        assert_eq!(
            list.lines().filter(|l| l.starts_with('t')).count(),
            render::MAX_TASK_LINES
        );
        assert!(list.contains("... and 30 more"), "{list}");
        assert!(
            list.contains("Ready: t1, t2, t3, t4, t5, t6, t7, t8, t9, t10 and 70 more"),
            "{list}"
        );
    }

    #[test]
    fn deletion_strips_the_id_retires_it_and_undo_brings_it_back_with_its_edges() {
        let mut s = chain();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t3", "addBlockedBy": ["t1"]}),
        )
        .unwrap();
        let before = s.items.clone();
        let out = task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t2", "status": "deleted"}),
        )
        .unwrap();
        assert!(out.contains("deleted t2 (it no longer blocks t3)"), "{out}");
        assert!(s.find("t2").is_none());
        assert_eq!(blockers(&s, "t3"), ["t1"]);
        assert_eq!(s.history.changes().last().unwrap().kind, ChangeKind::Delete);
        let out = task(&mut s, "TaskCreate", json!({"subject": "New"})).unwrap();
        assert!(out.contains("Created t4"), "ids are not reused: {out}");
        s.undo().unwrap();
        s.undo().unwrap();
        assert_eq!(s.items, before);
        // A task with subtasks is not deleted.
        write(
            &mut s,
            json!({"merge": true, "todos": [{"content": "Sub", "parent": "t1"}]}),
        )
        .unwrap();
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "status": "deleted"})
            ),
            "status: t1 has subtasks t5: delete or move its subtasks first"
        );
    }

    #[test]
    fn list_lines_show_what_items_wait_for() {
        let mut s = Session::started_now();
        let out = write(
            &mut s,
            json!({"todos": [
            {"content": "Write the fix", "status": "in_progress"},
            {"content": "Patch the loop", "status": "pending", "blocked_by": ["t1"]}]}),
        )
        .unwrap();
        assert!(out.contains("  t1 [in_progress] Write the fix\n"), "{out}");
        assert!(
            out.contains("  t2 [pending] Patch the loop [blocked by t1]\n"),
            "{out}"
        );
        for style in ToolStyle::ALL {
            let guidance = render::prompt_guidance_for(&s.items, 30, style);
            assert!(
                guidance.contains("  t2 [pending] Patch the loop [blocked by t1]\n"),
                "{guidance}"
            );
        }
        // A finished blocker blocks nothing: the line says no more.
        write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t1", "status": "completed"}]}),
        )
        .unwrap();
        let guidance = render::prompt_guidance_for(&s.items, 30, ToolStyle::Todo);
        assert!(
            guidance.contains("  t2 [pending] Patch the loop\n"),
            "{guidance}"
        );
    }

    #[test]
    fn a_merge_result_says_what_it_changed_in_blockers_and_owners() {
        let mut s = Session::started_now();
        write(
            &mut s,
            json!({"todos": [
            {"content": "Write the fix", "status": "in_progress"},
            {"content": "Patch the loop", "status": "pending"}]}),
        )
        .unwrap();
        let out = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t2", "blocked_by": ["t1"]}]}),
        )
        .unwrap();
        assert!(
            out.contains("t2 pending: Patch the loop [blocked by t1]"),
            "{out}"
        );
        let out = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t2", "owner": "executor"}]}),
        )
        .unwrap();
        assert!(
            out.contains("t2 pending: Patch the loop (executor) [blocked by t1]"),
            "{out}"
        );
        let out = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t2", "blocked_by": []}]}),
        )
        .unwrap();
        assert!(out.contains("t2 is ready now"), "{out}");
    }

    #[test]
    fn todo_write_takes_blockers_and_a_merge_replaces_them() {
        let mut s = Session::started_now();
        write(
            &mut s,
            json!({"todos": [
            {"content": "Build", "status": "in_progress"},
            {"id": "t9", "content": "Test", "status": "pending"}]}),
        )
        .expect_err("t9 is unknown");
        write(
            &mut s,
            json!({"todos": [
            {"content": "Build", "status": "in_progress"},
            {"content": "Test", "status": "pending"}]}),
        )
        .unwrap();
        let e = write(
            &mut s,
            json!({"todos": [
            {"id": "t1", "content": "Build", "status": "in_progress", "blocked_by": ["t2"]},
            {"id": "t2", "content": "Test", "status": "pending", "blocked_by": ["2"]}]}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "todos[1].blocked_by[0]: t2 cannot wait for itself"
        );
        let e = write(
            &mut s,
            json!({"todos": [
            {"id": "t1", "content": "Build", "status": "in_progress", "blocked_by": ["t2"]},
            {"id": "t2", "content": "Test", "status": "pending", "blocked_by": ["t1"]}]}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "todos[0].blocked_by[0]: t2 would close a cycle t2 -> t1 -> t2"
        );
        write(&mut s, json!({"merge": true, "todos": [{"id": "t2", "blocked_by": ["t1"], "description": "all of them"}]})).unwrap();
        assert_eq!(blockers(&s, "t2"), ["t1"]);
        let e = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t2", "status": "in_progress"}]}),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "todos[0].status: t2 is blocked by t1 (in_progress); finish t1 first, or remove the dependency with blocked_by");
        let out = write(&mut s, json!({"merge": true, "todos": [{"id": "t1", "status": "completed"}, {"id": "t2", "status": "in_progress"}]})).unwrap();
        assert!(out.contains("t2 in_progress"), "{out}");
        write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t2", "blocked_by": []}]}),
        )
        .unwrap();
        assert!(blockers(&s, "t2").is_empty());
        assert_eq!(
            s.find("t2").unwrap().description.as_deref(),
            Some("all of them")
        );
    }

    #[test]
    fn the_user_adds_and_removes_dependencies_and_the_model_hears_of_it() {
        let mut s = chain();
        let limits = crate::validate::Limits::default();
        let edit = |id: &str, blocker: &str| UserEdit::Block {
            id: id.into(),
            blocker: blocker.into(),
        };
        let e = s.user_edit(edit("t1", "t3"), &limits).unwrap_err();
        assert_eq!(
            e.to_string(),
            "blocker: t3 would close a cycle t3 -> t1 -> t2 -> t3"
        );
        assert_eq!(
            s.user_edit(edit("t3", "t1"), &limits).unwrap(),
            "the user made t3 wait for t1"
        );
        let note = s
            .user_edit(
                UserEdit::Unblock {
                    id: "t3".into(),
                    blocker: "t2".into(),
                },
                &limits,
            )
            .unwrap();
        assert_eq!(note, "the user removed the dependency of t3 on t2");
        assert_eq!(blockers(&s, "t3"), ["t1"]);
        assert!(s.take_user_notes().contains("the user made t3 wait for t1"));
    }

    /// t1 Get the keys; t2 Deploy, blocked by t1; t3 Copy the files, a
    /// subtask of t2; t4 Check the copy, a subtask of t3.
    fn blocked_parent() -> Session {
        let mut s = Session::started_now();
        task(&mut s, "TaskCreate", json!({"subject": "Get the keys"})).unwrap();
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Deploy", "blockedBy": ["t1"]}),
        )
        .unwrap();
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Copy the files", "parent": "t2"}),
        )
        .unwrap();
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Check the copy", "parent": "t3"}),
        )
        .unwrap();
        s
    }

    fn user_error(s: &mut Session, edit: UserEdit) -> String {
        let before = (s.items.clone(), s.history.len(), s.user_notes.clone());
        let e = s
            .user_edit(edit, &crate::validate::Limits::default())
            .expect_err("an error")
            .to_string();
        assert_eq!(
            (s.items.clone(), s.history.len(), s.user_notes.clone()),
            before,
            "a refused edit changes nothing: {e}"
        );
        e
    }

    fn user_status(id: &str, status: Status) -> UserEdit {
        UserEdit::SetStatus {
            id: id.into(),
            status,
        }
    }

    #[test]
    fn the_user_cannot_start_or_complete_a_blocked_item() {
        let mut s = chain();
        for status in [Status::InProgress, Status::Completed] {
            assert_eq!(
                user_error(&mut s, user_status("t2", status)),
                "status: t2 is blocked by t1 (pending); finish t1 first, or remove the dependency with efrit-todo-user-remove-blocker"
            );
        }
        let limits = crate::validate::Limits::default();
        s.user_edit(user_status("t3", Status::Cancelled), &limits)
            .unwrap();
        s.user_edit(user_status("t1", Status::Completed), &limits)
            .unwrap();
        assert_eq!(
            s.user_edit(user_status("t2", Status::InProgress), &limits)
                .unwrap(),
            "the user marked t2 in_progress"
        );
    }

    #[test]
    fn the_user_may_drop_what_holds_an_item_back_in_the_same_change() {
        let limits = crate::validate::Limits::default();
        let mut s = chain();
        let changes = s.history.len();
        let note = s
            .user_edit(
                UserEdit::SetStatusUnblocked {
                    id: "t2".into(),
                    status: Status::Completed,
                },
                &limits,
            )
            .unwrap();
        assert_eq!(
            note,
            "the user removed the dependency of t2 on t1 and marked t2 completed"
        );
        assert!(blockers(&s, "t2").is_empty());
        assert_eq!(s.find("t2").unwrap().status, Status::Completed);
        assert_eq!(s.history.len(), changes + 1, "one change, undone at once");
        s.undo().unwrap();
        assert_eq!(blockers(&s, "t2"), ["t1"]);
        // Through an ancestor: the ancestor's dependency goes.
        let mut s = blocked_parent();
        let note = s
            .user_edit(
                UserEdit::SetStatusUnblocked {
                    id: "t4".into(),
                    status: Status::InProgress,
                },
                &limits,
            )
            .unwrap();
        assert_eq!(
            note,
            "the user removed the dependency of t2 on t1 and marked t4 in_progress"
        );
        assert!(blockers(&s, "t2").is_empty());
        // Another rule still holds, and then nothing changes.
        let mut s = blocked_parent();
        let e = user_error(
            &mut s,
            UserEdit::SetStatusUnblocked {
                id: "t3".into(),
                status: Status::Completed,
            },
        );
        assert!(e.contains("unfinished"), "{e}");
    }

    #[test]
    fn a_subtask_cannot_start_while_an_ancestor_waits() {
        let mut s = blocked_parent();
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t3", "status": "in_progress"})
            ),
            "status: t3 is blocked by t1 (pending) through its parent t2; finish t1 first, or remove the dependency with TaskUpdate removeBlockedBy"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t4", "status": "completed"})
            ),
            "status: t4 is blocked by t1 (pending) through its ancestor t2; finish t1 first, or remove the dependency with TaskUpdate removeBlockedBy"
        );
        let e = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t4", "status": "in_progress"}]}),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "todos[0].status: t4 is blocked by t1 (pending) through its ancestor t2; finish t1 first, or remove the dependency with blocked_by");
        let e = write(
            &mut s,
            json!({"merge": true, "todos": [{"content": "Log it", "status": "in_progress", "parent": "t3"}]}),
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "todos[0].status: the new item is blocked by t1 (pending) through its ancestor t2"
            ),
            "{e}"
        );
        assert_eq!(
            user_error(&mut s, user_status("t3", Status::InProgress)),
            "status: t3 is blocked by t1 (pending) through its parent t2; finish t1 first, or remove the dependency with efrit-todo-user-remove-blocker"
        );
        // A whole-list write as well.
        let whole: Vec<Json> = s
            .items
            .iter()
            .map(|item| {
                json!({"id": item.id, "content": item.content,
                       "status": if item.id == "t3" { "in_progress" } else { "pending" },
                       "parent": item.parent, "blocked_by": item.blocked_by})
            })
            .collect();
        let e = write(&mut s, json!({ "todos": whole })).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "todos[2].status: t3 is blocked by t1 (pending) through its parent t2"
            ),
            "{e}"
        );
        // Once t1 is done, t3 can start.
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        )
        .unwrap();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t3", "status": "in_progress"}),
        )
        .unwrap();
    }

    #[test]
    fn a_running_subtask_keeps_its_ancestors_unblocked() {
        let mut s = Session::started_now();
        for subject in ["Get the keys", "Deploy"] {
            task(&mut s, "TaskCreate", json!({"subject": subject})).unwrap();
        }
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Copy the files", "parent": "t2"}),
        )
        .unwrap();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t3", "status": "in_progress"}),
        )
        .unwrap();
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t2", "addBlockedBy": ["t1"]})
            ),
            "addBlockedBy[0]: t2 cannot wait for t1 (pending) while its subtask t3 is in progress; set t3 pending first"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "addBlocks": ["t2"]})
            ),
            "addBlocks[0]: t2 cannot wait for t1 (pending) while its subtask t3 is in progress; set t3 pending first"
        );
        assert_eq!(
            user_error(
                &mut s,
                UserEdit::Block {
                    id: "t2".into(),
                    blocker: "t1".into()
                }
            ),
            "blocker: t2 cannot wait for t1 (pending) while its subtask t3 is in progress; set t3 pending first"
        );
        // A finished blocker may be named; reopening it is what blocks.
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        )
        .unwrap();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t2", "addBlockedBy": ["t1"]}),
        )
        .unwrap();
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t1", "status": "pending"})
            ),
            "status: t1 cannot be reopened while t3 is in progress under t2, which waits for it; set t3 pending first"
        );
        assert_eq!(
            user_error(&mut s, user_status("t1", Status::Pending)),
            "status: t1 cannot be reopened while t3 is in progress under t2, which waits for it; set t3 pending first"
        );
        // Reopened in the same write as the subtask stops: fine.
        write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t3", "status": "pending"}, {"id": "t1", "status": "pending"}]}),
        )
        .unwrap();
        // A running item does not move under a blocked one.
        task(&mut s, "TaskCreate", json!({"subject": "Tidy up"})).unwrap();
        task(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t4", "status": "in_progress"}),
        )
        .unwrap();
        let e = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t4", "parent": "t2"}]}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "todos[0].parent: t4 is in progress and cannot go under t2, which is blocked by t1 (pending)"
        );
    }

    #[test]
    fn no_item_waits_for_its_ancestor_or_its_subtask() {
        let mut s = blocked_parent();
        assert_eq!(
            error(
                &mut s,
                "TaskCreate",
                json!({"subject": "Sub", "parent": "t3", "blockedBy": ["t1", "t2"]})
            ),
            "blockedBy[1]: the new item cannot wait for t2, its ancestor: t2 finishes after its subtasks, so the new item could never start"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t3", "addBlockedBy": ["t2"]})
            ),
            "addBlockedBy[0]: t3 cannot wait for t2, its parent: t2 finishes after its subtasks, so t3 could never start"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t2", "addBlockedBy": ["t4"]})
            ),
            "addBlockedBy[0]: t2 cannot wait for t4, its subtask: a parent already waits for its subtasks"
        );
        assert_eq!(
            error(
                &mut s,
                "TaskUpdate",
                json!({"taskId": "t2", "addBlocks": ["t3"]})
            ),
            "addBlocks[0]: t3 cannot wait for t2, its parent: t2 finishes after its subtasks, so t3 could never start"
        );
        let e = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t4", "blocked_by": ["t3"]}]}),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "todos[0].blocked_by[0]: t4 cannot wait for t3, its parent: t3 finishes after its subtasks, so t4 could never start");
        assert_eq!(
            user_error(
                &mut s,
                UserEdit::Block {
                    id: "t3".into(),
                    blocker: "t4".into()
                }
            ),
            "blocker: t3 cannot wait for t4, its subtask: a parent already waits for its subtasks"
        );
        // Moving an item under one it waits for makes the same wait.
        task(
            &mut s,
            "TaskCreate",
            json!({"subject": "Announce", "blockedBy": ["t2"]}),
        )
        .unwrap();
        let e = write(
            &mut s,
            json!({"merge": true, "todos": [{"id": "t5", "parent": "t2"}]}),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "todos[0].parent: t5 cannot go under t2, which it waits for: t2 finishes after its subtasks, so t5 could never start");
        assert_eq!(blockers(&s, "t5"), ["t2"]);
    }

    #[test]
    fn a_first_plan_may_name_parents_of_its_own_items() {
        let mut s = Session::started_now();
        write(
            &mut s,
            json!({"todos": [
                {"content": "Build", "status": "in_progress"},
                {"content": "Test", "status": "pending"},
                {"content": "Ship", "status": "pending", "blocked_by": ["t2"]},
                {"content": "Tag the release", "status": "pending", "parent": "t3"},
                {"content": "Announce it", "status": "pending", "parent": "t3"}]}),
        )
        .unwrap();
        let parents: Vec<Option<&str>> = s.items.iter().map(|i| i.parent.as_deref()).collect();
        assert_eq!(parents, [None, None, None, Some("t3"), Some("t3")]);
        // The same write names ids in list order: an id further on is no
        // item of it yet.
        let mut s = Session::started_now();
        let e = write(
            &mut s,
            json!({"todos": [
                {"content": "Build", "status": "pending", "parent": "t3"},
                {"content": "Test", "status": "pending"}]}),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("todos[0].parent: unknown id \"t3\""),
            "{e}"
        );
    }

    #[test]
    fn task_update_completing_is_progress_and_a_task_list_loop_is_not() {
        let mut s = chain();
        let options = LoopOptions::default();
        let run = |s: &mut Session, tool: &str, v: Json| {
            let result = if tool.starts_with("Task") {
                task(s, tool, v.clone()).unwrap()
            } else {
                "ok".to_string()
            };
            s.after_tool(
                tool,
                Input::from_json(&v),
                Some(result),
                false,
                None,
                &options,
            );
        };
        run(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "in_progress"}),
        );
        for n in 0..5 {
            run(&mut s, "Bash", json!({"n": n}));
        }
        let since = s.breaker.state().since_progress;
        run(&mut s, "TaskList", json!({}));
        run(&mut s, "TaskGet", json!({"taskId": "t1"}));
        assert_eq!(
            s.breaker.state().since_progress,
            since + 2,
            "reading is no progress"
        );
        run(
            &mut s,
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        );
        assert_eq!(
            s.breaker.state().since_progress,
            0,
            "completing is progress"
        );
    }

    /// Ready as the issue words it, computed the slow way: pending, no
    /// blocker that is open, and no ancestor that has an open blocker.
    fn naive_ready(items: &[Item]) -> Vec<bool> {
        let find = |id: &str| items.iter().find(|i| i.id == id);
        let has_open_blocker = |item: &Item| {
            item.blocked_by.iter().any(|b| {
                find(b)
                    .is_some_and(|b| b.status == Status::Pending || b.status == Status::InProgress)
            })
        };
        items
            .iter()
            .map(|item| {
                if item.status != Status::Pending || has_open_blocker(item) {
                    return false;
                }
                let mut up = item.parent.as_deref().and_then(find);
                let mut steps = 0;
                while let Some(parent) = up {
                    if has_open_blocker(parent) || steps > items.len() {
                        return false;
                    }
                    steps += 1;
                    up = parent.parent.as_deref().and_then(find);
                }
                true
            })
            .collect()
    }

    /// The ids above ITEM in ITEMS, its parent first.
    fn naive_ancestors(items: &[Item], item: &Item) -> Vec<String> {
        let mut out = Vec::new();
        let mut up = item.parent.clone();
        while let Some(id) = up {
            if out.contains(&id) || out.len() > items.len() {
                break;
            }
            up = items
                .iter()
                .find(|i| i.id == id)
                .and_then(|i| i.parent.clone());
            out.push(id);
        }
        out
    }

    /// Whether ITEM waits for an item of ITEMS that is pending or in progress.
    fn naive_open_blocker(items: &[Item], item: &Item) -> bool {
        item.blocked_by.iter().any(|b| {
            items
                .iter()
                .any(|i| i.id == *b && matches!(i.status, Status::Pending | Status::InProgress))
        })
    }

    /// Whether the waits-for edges of ITEMS hold a cycle, by trying every
    /// path from every item (fine for a dozen items).
    fn naive_cycle(items: &[Item]) -> bool {
        fn reaches(items: &[Item], from: &str, to: &str, depth: usize) -> bool {
            depth <= items.len()
                && items.iter().find(|i| i.id == from).is_some_and(|item| {
                    item.blocked_by
                        .iter()
                        .any(|b| b == to || reaches(items, b, to, depth + 1))
                })
        }
        items
            .iter()
            .any(|item| reaches(items, &item.id, &item.id, 0))
    }

    #[derive(Debug, Clone)]
    enum Op {
        Create(Vec<u8>, Option<u8>),
        Status(u8, u8),
        Add(u8, Vec<u8>),
        Remove(u8, Vec<u8>),
        AddBlocks(u8, u8),
        Delete(u8),
        Merge(u8, Vec<u8>),
        Parent(u8, Option<u8>),
        UserStatus(u8, u8),
        UserBlock(u8, u8),
        Undo,
    }

    fn arb_op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let ids = || prop::collection::vec(0u8..8, 0..3);
        prop_oneof![
            4 => (ids(), prop::option::weighted(0.4, 0u8..8)).prop_map(|(b, p)| Op::Create(b, p)),
            2 => (0u8..8, 0u8..5).prop_map(|(n, s)| Op::Status(n, s)),
            2 => (0u8..8, ids()).prop_map(|(n, b)| Op::Add(n, b)),
            1 => (0u8..8, ids()).prop_map(|(n, b)| Op::Remove(n, b)),
            1 => (0u8..8, 0u8..8).prop_map(|(n, m)| Op::AddBlocks(n, m)),
            1 => (0u8..8).prop_map(Op::Delete),
            1 => (0u8..8, ids()).prop_map(|(n, b)| Op::Merge(n, b)),
            1 => (0u8..8, prop::option::weighted(0.7, 0u8..8)).prop_map(|(n, p)| Op::Parent(n, p)),
            2 => (0u8..8, 0u8..4).prop_map(|(n, s)| Op::UserStatus(n, s)),
            1 => (0u8..8, 0u8..8).prop_map(|(n, m)| Op::UserBlock(n, m)),
            1 => Just(Op::Undo),
        ]
    }

    proptest::proptest! {
        // A running subtask under a blocked ancestor takes a few thousand
        // runs to come up when the rules are broken.
        #![proptest_config(proptest::test_runner::Config::with_cases(4000))]
        #[test]
        fn random_edits_keep_the_graph_sound_and_ready_as_defined(ops in proptest::collection::vec(arb_op(), 1..40)) {
            let mut s = Session::started_now();
            let id = |n: &u8| format!("t{}", n + 1);
            let ids = |v: &[u8]| v.iter().map(id).collect::<Vec<_>>();
            for op in &ops {
                let before = (s.items.clone(), s.retired.clone());
                let result = match op {
                    Op::Create(b, p) => {
                        let mut input = json!({"subject": "x", "blockedBy": ids(b)});
                        if let Some(p) = p {
                            input["parent"] = json!(id(p));
                        }
                        task(&mut s, "TaskCreate", input)
                    }
                    Op::Status(n, st) => {
                        let status = ["pending", "in_progress", "completed", "cancelled", "deleted"][*st as usize];
                        task(&mut s, "TaskUpdate", json!({"taskId": id(n), "status": status}))
                    }
                    Op::Add(n, b) => task(&mut s, "TaskUpdate", json!({"taskId": id(n), "addBlockedBy": ids(b)})),
                    Op::Remove(n, b) => task(&mut s, "TaskUpdate", json!({"taskId": id(n), "removeBlockedBy": ids(b)})),
                    Op::AddBlocks(n, m) => task(&mut s, "TaskUpdate", json!({"taskId": id(n), "addBlocks": [id(m)]})),
                    Op::Delete(n) => task(&mut s, "TaskUpdate", json!({"taskId": id(n), "status": "deleted"})),
                    Op::Merge(n, b) => write(&mut s, json!({"merge": true, "todos": [{"id": id(n), "blocked_by": ids(b)}]})),
                    Op::Parent(n, p) => write(&mut s, json!({"merge": true, "todos": [{"id": id(n), "parent": p.as_ref().map(id)}]})),
                    Op::UserStatus(n, st) => {
                        let status = [Status::Pending, Status::InProgress, Status::Completed, Status::Cancelled][*st as usize];
                        s.user_edit(UserEdit::SetStatus { id: id(n), status }, &crate::validate::Limits::default())
                    }
                    Op::UserBlock(n, m) => s.user_edit(UserEdit::Block { id: id(n), blocker: id(m) }, &crate::validate::Limits::default()),
                    Op::Undo => Ok(s.undo().unwrap_or_default()),
                };
                if result.is_err() {
                    proptest::prop_assert_eq!(&(s.items.clone(), s.retired.clone()), &before, "a failed call changes nothing");
                }
                proptest::prop_assert!(!naive_cycle(&s.items), "no cycle is stored: {:?}", s.items);
                for item in &s.items {
                    for b in &item.blocked_by {
                        proptest::prop_assert!(s.items.iter().any(|i| i.id == *b), "{} waits for {b}, which is not in the list", item.id);
                        proptest::prop_assert!(*b != item.id);
                    }
                }
                proptest::prop_assert_eq!(graph::ready(&s.items), naive_ready(&s.items));
                for item in &s.items {
                    let ancestors = naive_ancestors(&s.items, item);
                    for b in &item.blocked_by {
                        proptest::prop_assert!(!ancestors.contains(b), "{} waits for its ancestor {b}: {:?}", item.id, s.items);
                        let blocker = s.items.iter().find(|i| i.id == *b);
                        proptest::prop_assert!(
                            !blocker.is_some_and(|blocker| naive_ancestors(&s.items, blocker).contains(&item.id)),
                            "{} waits for its subtask {b}: {:?}", item.id, s.items
                        );
                    }
                    if item.status == Status::InProgress {
                        for a in &ancestors {
                            let ancestor = s.items.iter().find(|i| i.id == *a);
                            proptest::prop_assert!(
                                !ancestor.is_some_and(|a| naive_open_blocker(&s.items, a)),
                                "{} is in progress under {a}, which is blocked: {:?}", item.id, s.items
                            );
                        }
                    }
                }
            }
        }
    }
}

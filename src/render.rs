//! The text the model reads: todo_write results and system prompt guidance.

use std::collections::HashSet;
use std::fmt::Write;

use crate::guide::named_tool;
use crate::model::{Counts, Item, Status};
use crate::reconcile::Diff;
use crate::validate::quote;

/// "2/5 done, 1 in progress, 2 pending", leaving out what is zero.
pub fn progress(counts: &Counts) -> String {
    let mut parts = vec![format!("{}/{} done", counts.completed, counts.total)];
    for (n, label) in [
        (counts.in_progress, "in progress"),
        (counts.pending, "pending"),
        (counts.cancelled, "cancelled"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {label}"));
        }
    }
    parts.join(", ")
}

fn item_line(out: &mut String, item: &Item, auto_tools: &[&str]) {
    let _ = write!(out, "  {} [{}] {}", item.id, item.status.wire_name(), item.content);
    if let Some(tool) = item.status.is_open().then(|| named_tool(&item.content, auto_tools)).flatten() {
        let _ = write!(out, " (completes when {tool} succeeds)");
    }
    out.push('\n');
}

/// Every item, or for a list longer than `full_up_to`: every changed item,
/// the running one and the next `full_up_to` pending ones, with the rest
/// counted.  A long list would otherwise cost the model thousands of tokens
/// on every write, for items it sent itself and whose ids it was shown when
/// they were added.
fn item_lines(out: &mut String, items: &[Item], changed: &HashSet<&str>, full_up_to: usize, auto_tools: &[&str]) {
    let summarise = items.len() > full_up_to;
    let (mut hidden_completed, mut hidden_cancelled, mut hidden_pending) = (0, 0, 0);
    let mut pending_shown = 0;
    for item in items {
        let unchanged = summarise && !changed.contains(item.id.as_str());
        match item.status {
            Status::Completed if unchanged => hidden_completed += 1,
            Status::Cancelled if unchanged => hidden_cancelled += 1,
            Status::Pending if unchanged && pending_shown == full_up_to => hidden_pending += 1,
            status => {
                pending_shown += usize::from(unchanged && status == Status::Pending);
                item_line(out, item, auto_tools);
            }
        }
    }
    if hidden_completed + hidden_cancelled > 0 {
        let _ = writeln!(
            out,
            "  ... and {} unchanged finished items not shown ({hidden_completed} completed, {hidden_cancelled} cancelled); keep sending them with their ids",
            hidden_completed + hidden_cancelled
        );
    }
    if hidden_pending > 0 {
        let _ = writeln!(
            out,
            "  ... and {hidden_pending} more unchanged pending items not shown; keep sending them with their ids"
        );
    }
}

fn changes_line(diff: &Diff) -> String {
    let mut parts = Vec::new();
    for (label, ids) in [
        ("added", &diff.added),
        ("started", &diff.started),
        ("completed", &diff.completed),
        ("cancelled", &diff.cancelled),
        ("reopened", &diff.reopened),
        ("back to pending", &diff.paused),
        ("reworded", &diff.reworded),
        ("restored", &diff.restored),
    ] {
        if !ids.is_empty() {
            parts.push(format!("{label} {}", ids.join(", ")));
        }
    }
    if !diff.removed.is_empty() {
        let ids: Vec<&str> = diff.removed.iter().map(|i| i.id.as_str()).collect();
        parts.push(format!("removed finished {}", ids.join(", ")));
    }
    if !diff.dropped.is_empty() {
        let ids: Vec<&str> = diff.dropped.iter().map(|i| i.id.as_str()).collect();
        parts.push(format!("dropped {}", ids.join(", ")));
    }
    if parts.is_empty() {
        "none: this list is the same as the previous one".into()
    } else {
        parts.join("; ")
    }
}

fn warnings(items: &[Item], diff: &Diff) -> Vec<String> {
    let mut out = Vec::new();
    if !diff.demoted.is_empty() {
        let kept = items
            .iter()
            .find(|i| i.status == Status::InProgress)
            .map(|i| i.id.as_str())
            .unwrap_or("none");
        out.push(format!(
            "Only one item may be in_progress: {kept} stays in progress, {} set back to pending.",
            diff.demoted.join(", ")
        ));
    }
    for item in &diff.dropped {
        out.push(format!(
            "{} {} (was {}) is missing from this list, so it was dropped. If you meant to abandon it, send it with status cancelled; otherwise send it again with its id.",
            item.id,
            quote(&item.content),
            item.status.wire_name()
        ));
    }
    out
}

/// What to do now, so that the model never has to guess.
pub fn next_step(items: &[Item]) -> String {
    if let Some(item) = items.iter().find(|i| i.status == Status::InProgress) {
        format!(
            "work on {} ({}); mark it completed as soon as it is done and start the next item.",
            item.id, item.active_form
        )
    } else if let Some(item) = items.iter().find(|i| i.status == Status::Pending) {
        format!("set {} to in_progress and start it ({}).", item.id, item.content)
    } else if items.is_empty() {
        "the list is empty; write a plan when the task needs three or more steps.".into()
    } else {
        "every item is finished; give the user the result.".into()
    }
}

/// The todo_write result.  It always starts with `[TODO list updated`.
/// AUTO_TOOLS are the tools whose success completes an item naming them
/// (empty when auto-completion is off); such items are marked.
pub fn write_result(items: &[Item], diff: &Diff, full_up_to: usize, auto_tools: &[&str]) -> String {
    let counts = Counts::of(items);
    let mut out = format!("[TODO list updated: {}]\n", progress(&counts));
    item_lines(&mut out, items, &diff.changed_ids(), full_up_to, auto_tools);
    let _ = writeln!(out, "Changes: {}", changes_line(diff));
    let warnings = warnings(items, diff);
    if !warnings.is_empty() {
        out.push_str("Warnings:\n");
        for warning in warnings {
            let _ = writeln!(out, "- {warning}");
        }
    }
    let _ = write!(
        out,
        "Next: {} Send the full list with these ids on every todo_write.",
        next_step(items)
    );
    out
}

/// The list for the system prompt, so the model sees ids on every request.
pub fn prompt_guidance(items: &[Item], notes: &[String], full_up_to: usize) -> String {
    if items.is_empty() && notes.is_empty() {
        return "TODO LIST: empty. For a request with three or more steps, call todo_write first with the whole plan (first item in_progress); the result gives each item an id.".into();
    }
    let mut out = format!("TODO LIST ({}):\n", progress(&Counts::of(items)));
    item_lines(&mut out, items, &HashSet::new(), full_up_to, &[]);
    for note in notes {
        let _ = writeln!(out, "Note: {note}");
    }
    let _ = write!(
        out,
        "Keep it current with todo_write: send the full list with these ids, one item in_progress, mark items completed as soon as they are done, set cancelled rather than dropping an item. Next: {}",
        next_step(items)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample_items as list;
    use crate::model::IdCounter;
    use crate::reconcile::reconcile;
    use crate::validate::ProposedItem;
    use std::collections::HashMap;


    #[test]
    fn result_lists_every_item_changes_and_next_step() {
        let items = list(&[Status::Completed, Status::InProgress, Status::Pending]);
        let diff = Diff { completed: vec!["t1".into()], started: vec!["t2".into()], ..Diff::default() };
        let text = write_result(&items, &diff, 30, &[]);
        assert!(text.starts_with("[TODO list updated: 1/3 done, 1 in progress, 1 pending]\n"));
        assert!(text.contains("  t1 [completed] Step 0\n  t2 [in_progress] Step 1\n  t3 [pending] Step 2\n"));
        assert!(text.contains("Changes: started t2; completed t1\n"));
        assert!(text.contains("Next: work on t2 (Step 1)"));
        assert!(text.ends_with("Send the full list with these ids on every todo_write."));
    }

    #[test]
    fn dropped_and_demoted_items_are_warned_about() {
        let mut retired = HashMap::new();
        let mut ids = IdCounter::default();
        let p = |c: &str, s| ProposedItem { id: None, content: c.into(), active_form: None, status: s };
        let first = reconcile(&[], &mut retired, &mut ids, &[p("Keep me", Status::Pending), p("Lose me", Status::Pending)], 0.0).unwrap();
        let second = reconcile(&first.items, &mut retired, &mut ids, &[p("Keep me", Status::InProgress), p("Other", Status::InProgress)], 0.0).unwrap();
        let text = write_result(&second.items, &second.diff, 30, &[]);
        assert!(text.contains("t2 \"Lose me\" (was pending) is missing from this list"), "{text}");
        assert!(text.contains("send it with status cancelled"));
        assert!(text.contains("t1 stays in progress, t3 set back to pending"), "{text}");
    }

    #[test]
    fn long_lists_summarise_unchanged_finished_items_at_the_threshold() {
        let mut statuses = vec![Status::Completed; 29];
        statuses.push(Status::Pending);
        let items = list(&statuses);
        assert!(!write_result(&items, &Diff::default(), 30, &[]).contains("not shown"));
        let mut items = items;
        items.push(Item::new("t31".into(), "Last".into(), None, Status::Cancelled, 0.0));
        let diff = Diff { completed: vec!["t2".into()], ..Diff::default() };
        let text = write_result(&items, &diff, 30, &[]);
        assert!(text.contains("... and 29 unchanged finished items not shown (28 completed, 1 cancelled)"), "{text}");
        assert!(text.contains("t2 [completed]") && text.contains("t30 [pending]"));
        assert!(!text.contains("t1 [completed]"));
    }

    #[test]
    fn long_lists_show_only_the_next_pending_items() {
        let mut statuses = vec![Status::Completed, Status::InProgress];
        statuses.extend(vec![Status::Pending; 98]);
        let items = list(&statuses);
        let diff = Diff { completed: vec!["t1".into()], started: vec!["t2".into()], added: vec!["t100".into()], ..Diff::default() };
        let text = write_result(&items, &diff, 30, &[]);
        assert!(text.contains("  t1 [completed] Step 0\n  t2 [in_progress] Step 1\n  t3 [pending] Step 2\n"), "{text}");
        assert!(text.contains("  t32 [pending] Step 31\n  t100 [pending] Step 99\n"), "{text}");
        assert!(!text.contains("t33 [pending]"), "{text}");
        assert!(text.contains("  ... and 67 more unchanged pending items not shown; keep sending them with their ids\n"), "{text}");
        // At the threshold nothing is hidden.
        let items = list(&[Status::Pending; 30]);
        assert!(!write_result(&items, &Diff::default(), 30, &[]).contains("not shown"));
    }

    #[test]
    fn items_that_complete_on_a_tool_are_marked_while_open() {
        let mut items = list(&[Status::InProgress, Status::Completed]);
        items[0].content = "Run the suite with run_tests".into();
        items[1].content = "Check run_tests".into();
        let text = write_result(&items, &Diff::default(), 30, &["run_tests"]);
        assert!(text.contains("t1 [in_progress] Run the suite with run_tests (completes when run_tests succeeds)\n"));
        assert!(text.contains("t2 [completed] Check run_tests\n"));
        assert!(!write_result(&items, &Diff::default(), 30, &[]).contains("completes when"));
    }

    #[test]
    fn next_step_covers_every_state() {
        assert!(next_step(&[]).contains("empty"));
        assert!(next_step(&list(&[Status::Pending])).starts_with("set t1 to in_progress"));
        assert!(next_step(&list(&[Status::Completed, Status::Cancelled])).contains("finished"));
    }

    #[test]
    fn guidance_shows_ids_or_how_to_start() {
        assert!(prompt_guidance(&[], &[], 30).contains("call todo_write first"));
        let text = prompt_guidance(&list(&[Status::InProgress]), &["the user marked t3 cancelled".into()], 30);
        assert!(text.contains("t1 [in_progress] Step 0") && text.contains("Note: the user marked t3 cancelled"));
    }
}

//! The text the model reads: todo_write results and system prompt guidance.

use std::fmt::Write;

use rustc_hash::FxHashSet;

use crate::guide::named_tool;
use crate::model::{Counts, Item, Status};
use crate::reconcile::Diff;
use crate::validate::quote;

/// "2/5 done, 1 in progress, 2 pending", leaving out what is zero.
pub fn progress(counts: &Counts) -> String {
    let mut out = String::new();
    write_progress(&mut out, counts);
    out
}

/// N in decimal, without the formatting machinery (a few of these go into
/// every todo_write result).
fn push_number(out: &mut String, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[start..].iter().map(|&d| char::from(d)));
}

fn write_progress(out: &mut String, counts: &Counts) {
    push_number(out, counts.completed);
    out.push('/');
    push_number(out, counts.total);
    out.push_str(" done");
    for (n, label) in [
        (counts.in_progress, " in progress"),
        (counts.pending, " pending"),
        (counts.cancelled, " cancelled"),
    ] {
        if n > 0 {
            out.push_str(", ");
            push_number(out, n);
            out.push_str(label);
        }
    }
}

fn item_line(out: &mut String, item: &Item, auto_tools: &[&str]) {
    // Pieces pushed one by one: a long list has a thousand of these lines,
    // and the formatting machinery costs more than the copying.
    out.push_str("  ");
    out.push_str(&item.id);
    out.push_str(" [");
    out.push_str(item.status.wire_name());
    out.push_str("] ");
    out.push_str(&item.content);
    if let Some(tool) = item.status.is_open().then(|| named_tool(&item.content, auto_tools)).flatten() {
        out.push_str(" (completes when ");
        out.push_str(tool);
        out.push_str(" succeeds)");
    }
    out.push('\n');
}

/// Every item, or for a list longer than `full_up_to`: every changed item,
/// the running one and the next `full_up_to` pending ones, with the rest
/// counted.  A long list would otherwise cost the model thousands of tokens
/// on every write, for items it sent itself and whose ids it was shown when
/// they were added.  CHANGED is asked for only when the list is that long.
fn item_lines<'a>(
    out: &mut String,
    items: &[Item],
    changed: impl FnOnce() -> FxHashSet<&'a str>,
    full_up_to: usize,
    auto_tools: &[&str],
) {
    if items.len() <= full_up_to {
        for item in items {
            item_line(out, item, auto_tools);
        }
        return;
    }
    let changed = changed();
    let (mut hidden_completed, mut hidden_cancelled, mut hidden_pending) = (0, 0, 0);
    let mut pending_shown = 0;
    for item in items {
        let unchanged = !changed.contains(item.id.as_str());
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

fn joined<'a>(out: &mut String, ids: impl Iterator<Item = &'a str>) {
    for (n, id) in ids.enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(id);
    }
}

fn changes_line(out: &mut String, diff: &Diff) {
    let start = out.len();
    let part = |out: &mut String, label: &str| {
        if out.len() > start {
            out.push_str("; ");
        }
        out.push_str(label);
        out.push(' ');
    };
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
            part(out, label);
            joined(out, ids.iter().map(String::as_str));
        }
    }
    for (label, items) in [("removed finished", &diff.removed), ("dropped", &diff.dropped)] {
        if !items.is_empty() {
            part(out, label);
            joined(out, items.iter().map(|i| i.id.as_str()));
        }
    }
    if out.len() == start {
        out.push_str("none: this list is the same as the previous one");
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
    let mut out = String::new();
    write_next_step(&mut out, items);
    out
}

fn write_next_step(out: &mut String, items: &[Item]) {
    if let Some(item) = items.iter().find(|i| i.status == Status::InProgress) {
        for piece in [
            "work on ",
            &item.id,
            " (",
            &item.active_form,
            "); mark it completed as soon as it is done and start the next item.",
        ] {
            out.push_str(piece);
        }
    } else if let Some(item) = items.iter().find(|i| i.status == Status::Pending) {
        for piece in ["set ", &item.id, " to in_progress and start it (", &item.content, ")."] {
            out.push_str(piece);
        }
    } else if items.is_empty() {
        out.push_str("the list is empty; write a plan when the task needs three or more steps.");
    } else {
        out.push_str("every item is finished; give the user the result.");
    }
}

/// The todo_write result.  It always starts with `[TODO list updated`.
/// AUTO_TOOLS are the tools whose success completes an item naming them
/// (empty when auto-completion is off); such items are marked.
pub fn write_result(items: &[Item], diff: &Diff, full_up_to: usize, auto_tools: &[&str]) -> String {
    let counts = Counts::of(items);
    // Room for the lines a list shows in full, so that the text is not
    // copied while it grows.
    let lines: usize = items.iter().take(2 * full_up_to + 8).map(|i| i.id.len() + i.content.len() + 16).sum();
    let mut out = String::with_capacity(512 + lines);
    out.push_str("[TODO list updated: ");
    write_progress(&mut out, &counts);
    out.push_str("]\n");
    item_lines(&mut out, items, || diff.changed_id_set(), full_up_to, auto_tools);
    out.push_str("Changes: ");
    changes_line(&mut out, diff);
    out.push('\n');
    let warnings = warnings(items, diff);
    if !warnings.is_empty() {
        out.push_str("Warnings:\n");
        for warning in warnings {
            let _ = writeln!(out, "- {warning}");
        }
    }
    out.push_str("Next: ");
    write_next_step(&mut out, items);
    out.push_str(" Send the full list with these ids on every todo_write.");
    out
}

/// The list for the system prompt, so the model sees ids on every request.
pub fn prompt_guidance(items: &[Item], notes: &[String], full_up_to: usize) -> String {
    if items.is_empty() && notes.is_empty() {
        return "TODO LIST: empty. For a request with three or more steps, call todo_write first with the whole plan (first item in_progress); the result gives each item an id.".into();
    }
    let mut out = format!("TODO LIST ({}):\n", progress(&Counts::of(items)));
    item_lines(&mut out, items, FxHashSet::default, full_up_to, &[]);
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
    use rustc_hash::FxHashMap;


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
        let mut retired = FxHashMap::default();
        let mut ids = IdCounter::default();
        let p = |content: &'static str, status| ProposedItem { id: None, content, active_form: None, status };
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
    fn numbers_and_progress_read_as_formatted() {
        for n in [0, 7, 10, 99, 1000, 123_456_789, usize::MAX] {
            let mut out = String::from("x");
            push_number(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
        let counts = Counts { total: 1000, pending: 0, in_progress: 1, completed: 990, cancelled: 9 };
        assert_eq!(progress(&counts), "990/1000 done, 1 in progress, 9 cancelled");
        assert_eq!(progress(&Counts::default()), "0/0 done");
    }

    #[test]
    fn changes_line_joins_every_group_in_order() {
        let mut items = list(&[Status::Pending, Status::Completed]);
        let dropped = items.remove(0);
        let diff = Diff {
            added: vec!["t4".into(), "t5".into()],
            paused: vec!["t6".into()],
            restored: vec!["t7".into()],
            removed: vec![items[0].clone()],
            dropped: vec![dropped],
            ..Diff::default()
        };
        let mut line = String::new();
        changes_line(&mut line, &diff);
        assert_eq!(line, "added t4, t5; back to pending t6; restored t7; removed finished t2; dropped t1");
        line.clear();
        changes_line(&mut line, &Diff::default());
        assert_eq!(line, "none: this list is the same as the previous one");
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

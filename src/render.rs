//! The text the model reads: todo_write results and system prompt guidance.

use std::fmt::Write;

use rustc_hash::FxHashSet;

use crate::graph;
use crate::guide::named_tool;
use crate::model::{
    id_number, name_items, push_cut, push_ids, Counts, Item, Status, MAX_NAMED, MAX_QUOTED_CHARS,
};
use crate::reconcile::Diff;
use crate::tree::{self, Layout};
use crate::validate::ToolStyle;

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

/// An item's line without its end, at LEVEL of its tree, two spaces more
/// per level; AWAY when it does not stand right under its parent, which
/// the line then names.
fn item_line_in_tree(out: &mut String, item: &Item, auto_tools: &[&str], level: usize, away: bool) {
    // Pieces pushed one by one: a long list has a thousand of these lines,
    // and the formatting machinery costs more than the copying.
    for _ in 0..level {
        out.push_str("  ");
    }
    out.push_str(&item.id);
    out.push_str(" [");
    out.push_str(item.status.wire_name());
    out.push_str("] ");
    out.push_str(&item.content);
    if away {
        push_under(out, item);
    }
    push_completes_when(out, item, auto_tools);
}

/// " (completes when run_tests succeeds)" for an open item naming one of
/// AUTO_TOOLS.
fn push_completes_when(out: &mut String, item: &Item, auto_tools: &[&str]) {
    if let Some(tool) = item
        .status
        .is_open()
        .then(|| named_tool(&item.content, auto_tools))
        .flatten()
    {
        out.push_str(" (completes when ");
        out.push_str(tool);
        out.push_str(" succeeds)");
    }
}

/// " (under t3)" for a subtask of t3.
fn push_under(out: &mut String, item: &Item) {
    if let Some(parent) = &item.parent {
        out.push_str(" (under ");
        out.push_str(parent);
        out.push(')');
    }
}

/// The line of the item at N of ITEMS, `t2 [pending] Patch the loop
/// [blocked by t1]`, in the tree of LAYOUT when the list has one; PREV is
/// the item shown before it.
fn tree_item_line(
    out: &mut String,
    items: &[Item],
    n: usize,
    layout: Option<&Layout>,
    prev: Option<usize>,
    auto_tools: &[&str],
    waits: &mut Waits,
) {
    match layout {
        None => item_line_in_tree(out, &items[n], auto_tools, 1, false),
        Some(layout) => item_line_in_tree(
            out,
            &items[n],
            auto_tools,
            layout.level(n),
            !layout.in_place(n, prev),
        ),
    }
    waits.push_blocked_by(out, n);
    out.push('\n');
}

/// What the items of a list wait for, for their lines.  The id index is
/// made the first time a line needs it: most items wait for nothing, and
/// a result that names a few items of a long list should not index it.
struct Waits<'a> {
    items: &'a [Item],
    index: Option<rustc_hash::FxHashMap<&'a str, usize>>,
    find: Option<Find<'a>>,
}

/// Where an id stands in the list shown, from an index the caller keeps.
pub type Find<'f> = &'f dyn Fn(&str) -> Option<usize>;

impl<'a> Waits<'a> {
    fn of(items: &'a [Item], find: Option<Find<'a>>) -> Waits<'a> {
        Waits {
            items,
            index: None,
            find,
        }
    }

    /// " [blocked by t1, t2]" for the open item at N, when it waits for
    /// an open blocker.
    fn push_blocked_by(&mut self, out: &mut String, n: usize) {
        let items = self.items;
        if items[n].blocked_by.is_empty() || !items[n].status.is_open() {
            return;
        }
        if let Some(find) = self.find {
            push_blocked_by_found(out, items, find, n);
            return;
        }
        let index = self.index.get_or_insert_with(|| graph::index_of(items));
        push_blocked_by(out, items, index, n);
    }
}

/// Every item, or for a list longer than `full_up_to`: the running item,
/// up to `full_up_to` changed items and the next `full_up_to` pending ones,
/// with the rest counted.  CHANGED is asked for only when the list is that
/// long.
fn item_lines<'a>(
    out: &mut String,
    items: &[Item],
    changed: impl FnOnce() -> FxHashSet<&'a str>,
    full_up_to: usize,
    auto_tools: &[&str],
    find: Option<Find>,
) {
    let layout = Layout::of(items);
    let layout = layout.as_ref();
    let mut waits = Waits::of(items, find);
    if items.len() <= full_up_to {
        for n in 0..items.len() {
            tree_item_line(
                out,
                items,
                n,
                layout,
                n.checked_sub(1),
                auto_tools,
                &mut waits,
            );
        }
        return;
    }
    let mut prev = None;
    let changed = changed();
    let (mut hidden_completed, mut hidden_cancelled, mut hidden_pending, mut hidden_changed) =
        (0, 0, 0, 0);
    let (mut pending_shown, mut changed_shown) = (0, 0);
    for (n, item) in items.iter().enumerate() {
        let is_changed = changed.contains(item.id.as_str());
        if is_changed && item.status != Status::InProgress {
            if changed_shown == full_up_to {
                hidden_changed += 1;
            } else {
                changed_shown += 1;
                tree_item_line(out, items, n, layout, prev, auto_tools, &mut waits);
                prev = Some(n);
            }
            continue;
        }
        match item.status {
            Status::Completed => hidden_completed += 1,
            Status::Cancelled => hidden_cancelled += 1,
            Status::Pending if pending_shown == full_up_to => hidden_pending += 1,
            status => {
                pending_shown += usize::from(status == Status::Pending);
                tree_item_line(out, items, n, layout, prev, auto_tools, &mut waits);
                prev = Some(n);
            }
        }
    }
    if hidden_changed > 0 {
        let _ = writeln!(
            out,
            "  ... and {hidden_changed} more changed items not shown"
        );
    }
    if hidden_completed + hidden_cancelled > 0 {
        let _ = writeln!(
            out,
            "  ... and {} unchanged finished items not shown ({hidden_completed} completed, {hidden_cancelled} cancelled)",
            hidden_completed + hidden_cancelled
        );
    }
    if hidden_pending > 0 {
        let _ = writeln!(
            out,
            "  ... and {hidden_pending} more pending items not shown"
        );
    }
}

/// When the added items took consecutive ids in the order they stand, one
/// line says so: a model that sent a long plan can then tell every id
/// without each being listed.
fn added_ids_line(out: &mut String, items: &[Item], diff: &Diff) {
    let (Some(first), Some(last)) = (diff.added.first(), diff.added.last()) else {
        return;
    };
    let (Some(low), Some(high)) = (id_number(first), id_number(last)) else {
        return;
    };
    let consecutive = diff
        .added
        .iter()
        .zip(low..)
        .all(|(id, n)| id_number(id) == Some(n));
    let in_order = items
        .iter()
        .filter_map(|i| id_number(&i.id))
        .filter(|n| (low..=high).contains(n))
        .eq(low..=high);
    if diff.added.len() > 1 && consecutive && in_order {
        let _ = writeln!(out, "New ids follow the order you sent: {first} to {last}.");
    }
}

/// The changed items, in list order: `t3 completed: Write the docs`, the
/// running one with its activeForm, an edited one with its owner, and
/// what each waits for.  At most MAX_NAMED.
fn changed_lines(
    out: &mut String,
    items: &[Item],
    diff: &Diff,
    auto_tools: &[&str],
    find: Option<Find>,
) {
    let changed = diff.changed_id_set();
    let mut waits = Waits::of(items, find);
    let mut shown = 0;
    for (n, item) in items.iter().enumerate() {
        if !changed.contains(item.id.as_str()) {
            continue;
        }
        shown += 1;
        if shown > MAX_NAMED {
            continue;
        }
        out.push_str(&item.id);
        out.push(' ');
        out.push_str(item.status.wire_name());
        out.push_str(": ");
        let text = if item.status == Status::InProgress {
            &item.active_form
        } else {
            &item.content
        };
        push_cut(out, text);
        if item.parent.is_some() {
            push_under(out, item);
        } else if diff.reparented.contains(&item.id) {
            out.push_str(" (now top-level)");
        }
        push_completes_when(out, item, auto_tools);
        if let Some(owner) = &item.owner {
            // The owner is news only when this write gave it.
            if diff.edited.contains(&item.id) || diff.added.contains(&item.id) {
                out.push_str(" (");
                push_cut(out, owner);
                out.push(')');
            }
        }
        waits.push_blocked_by(out, n);
        out.push('\n');
    }
    if shown > MAX_NAMED {
        let _ = writeln!(out, "... and {} more changed", shown - MAX_NAMED);
    }
}

fn warnings(out: &mut String, items: &[Item], diff: &Diff) {
    if !diff.removed.is_empty() {
        out.push_str("Removed finished items: ");
        push_ids(out, diff.removed.iter().map(|i| i.id.as_str()));
        out.push('\n');
    }
    if !diff.demoted.is_empty() {
        let kept = items
            .iter()
            .find(|i| i.status == Status::InProgress)
            .map_or("none", |i| i.id.as_str());
        let _ = write!(
            out,
            "Warning: only one item may be in_progress: {kept} stays in progress, "
        );
        push_ids(out, diff.demoted.iter().map(String::as_str));
        out.push_str(" set back to pending.\n");
    }
    if !diff.dropped.is_empty() {
        out.push_str("Warning: unfinished items missing from this list were dropped: ");
        name_items(out, &diff.dropped, "", "; ");
        out.push_str(
            "if you meant to abandon them, set them cancelled; otherwise send them again with their ids, or use merge to change items without resending the list.\n",
        );
    }
    tree::result_notes(out, items, &diff.completed, &diff.cancelled);
}

/// What to do now, in a few words, so that the model never has to guess.
pub fn next_step(items: &[Item]) -> String {
    let mut out = String::new();
    write_next_step(&mut out, items);
    out
}

fn write_next_step(out: &mut String, items: &[Item]) {
    write_next_step_briefly(out, items, false);
}

/// The first pending item that is ready (see `graph::ready`).
fn first_ready(items: &[Item]) -> Option<&Item> {
    graph::first_ready(items).map(|n| &items[n])
}

/// `write_next_step`, in fewer words when BRIEF: the result has just
/// named the running item.
fn write_next_step_briefly(out: &mut String, items: &[Item], brief: bool) {
    if let Some(item) = items.iter().find(|i| i.status == Status::InProgress) {
        out.push_str("work on ");
        out.push_str(&item.id);
        out.push_str(if brief {
            "."
        } else {
            "; mark it completed when it is done."
        });
    } else if let Some(item) = first_ready(items) {
        for piece in ["set ", &item.id, " in_progress and start it ("] {
            out.push_str(piece);
        }
        push_cut(out, &item.content);
        out.push_str(").");
    } else if items.iter().any(|i| i.status == Status::Pending) {
        out.push_str("every pending item waits for a blocker that is not finished; finish or cancel the blockers, or remove the dependencies.");
    } else if items.is_empty() {
        out.push_str("the list is empty; write a plan when the task needs three or more steps.");
    } else {
        out.push_str("every item is finished; give the user the result.");
    }
}

/// The todo_write result.  It always starts with `[TODO list updated`.
/// With SHOW_LIST (items were added, restored or dropped, or the list
/// was reordered: the model's picture of the list may be off) it lists the
/// list with ids; otherwise only the items that changed.  AUTO_TOOLS are
/// the tools whose success completes an item naming them (empty when
/// auto-completion is off); such items are marked.
pub fn write_result(
    items: &[Item],
    diff: &Diff,
    show_list: bool,
    full_up_to: usize,
    auto_tools: &[&str],
) -> String {
    write_result_by(items, diff, show_list, full_up_to, auto_tools, None)
}

/// `write_result`, with FIND giving where a blocker stands in ITEMS: a
/// write to a long list looks its few blockers up through the list's
/// kept index rather than indexing every item.
pub fn write_result_by(
    items: &[Item],
    diff: &Diff,
    show_list: bool,
    full_up_to: usize,
    auto_tools: &[&str],
    find: Option<Find>,
) -> String {
    let counts = Counts::of(items);
    // Room for the lines shown, so that the text is not copied while it grows.
    let shown = if show_list {
        2 * full_up_to + 8
    } else {
        MAX_NAMED
    };
    let lines: usize = items
        .iter()
        .take(shown)
        .map(|i| i.id.len() + i.content.len().min(4 * MAX_QUOTED_CHARS) + 16)
        .sum();
    let mut out = String::with_capacity(256 + lines);
    out.push_str("[TODO list updated: ");
    // "2/5 done" and the cancelled count only: the result names the
    // running item itself, and what is open follows from these.
    write_progress(
        &mut out,
        &Counts {
            in_progress: 0,
            pending: 0,
            ..counts
        },
    );
    out.push_str("]\n");
    if diff.is_empty() {
        out.push_str("No change: the list is as it was.\n");
    } else if show_list {
        if diff.moved {
            // The model sent the items in a new order, most often without
            // ids: this is the list it must now refer to by id.
            out.push_str("Reordered: the items keep their ids, in this order:\n");
        }
        item_lines(
            &mut out,
            items,
            || diff.changed_id_set(),
            full_up_to,
            auto_tools,
            find,
        );
        // Needed only when not every new item was shown with its id.
        if items.len() > full_up_to && diff.added.len() > full_up_to {
            added_ids_line(&mut out, items, diff);
        }
    } else {
        changed_lines(&mut out, items, diff, auto_tools, find);
    }
    warnings(&mut out, items, diff);
    if !diff.now_ready.is_empty() {
        let mut line = String::new();
        push_now_ready(&mut line, &diff.now_ready);
        out.push_str(line.trim_start());
        out.push('\n');
    }
    // A result whose changes start an item needs no next step: that line
    // is it.  A shown list shows the running item, so a few words do.
    let started_line = !show_list
        && items
            .iter()
            .any(|i| i.status == Status::InProgress && diff.started.contains(&i.id));
    if !started_line {
        out.push_str("Next: ");
        write_next_step_briefly(&mut out, items, show_list);
    }
    out.truncate(out.trim_end().len());
    out
}

/// How to keep the list, for the system prompt.  It never mentions the
/// live list, so that it stays the same on every request.
pub const GUIDANCE: &str = "Plan multi-step work with todo_write: for three or more steps, send the whole plan first, first item in_progress; the result gives each item an id. Then record each change by id with merge, sending only what changed: {\"merge\": true, \"todos\": [{\"id\": \"t1\", \"status\": \"completed\"}, {\"id\": \"t2\", \"status\": \"in_progress\"}]}. Keep one item in_progress, mark items completed as soon as they are done, set cancelled rather than leaving items out, and call todo_pause with the reason if you must stop with items open. The current state of the list reaches you in tool results.";

/// How to keep the list with the Task tools, for the system prompt.
pub const TASKS_GUIDANCE: &str = "Plan multi-step work with the Task tools: for three or more steps, create each task with TaskCreate (the result gives its id), naming in blockedBy the tasks it must wait for. Work on one task at a time: TaskUpdate it to in_progress when you start (only a task whose blockers are finished can start), to completed as soon as it is done; results say which tasks became ready. Change dependencies with addBlockedBy/removeBlockedBy, remove a task with status deleted, and use TaskGet for a task's details and TaskList only when you lost track. Call todo_pause with the reason if you must stop with tasks open. The current state of the list reaches you in tool results.";

/// How to keep the list when both tool families are offered.
pub const BOTH_GUIDANCE: &str = "Plan multi-step work either with todo_write (the whole plan at once, then changes by id with merge) or with the Task tools (TaskCreate, TaskUpdate, TaskGet, TaskList); both work on the same list with the same ids. Items may wait for others (blocked_by in todo_write, blockedBy/addBlockedBy in the Task tools); only an item whose blockers are finished can start. Keep one item in_progress, mark items completed as soon as they are done, set cancelled rather than leaving items out, and call todo_pause with the reason if you must stop with items open. The current state of the list reaches you in tool results.";

/// The guidance text for STYLE.
pub fn guidance(style: ToolStyle) -> &'static str {
    match style {
        ToolStyle::Todo => GUIDANCE,
        ToolStyle::Tasks => TASKS_GUIDANCE,
        ToolStyle::Both => BOTH_GUIDANCE,
    }
}

/// The system prompt's part: GUIDANCE, after the list as it stands now,
/// when it has items.  Callers take it once per session and reuse it, so
/// that the prompt is the same on every request and stays cached.
pub fn prompt_guidance(items: &[Item], full_up_to: usize) -> String {
    prompt_guidance_for(items, full_up_to, ToolStyle::Todo)
}

/// `prompt_guidance` for the tools of STYLE.
pub fn prompt_guidance_for(items: &[Item], full_up_to: usize, style: ToolStyle) -> String {
    let guidance = guidance(style);
    if items.is_empty() {
        return format!("TODO LIST: empty when this session started.\n{guidance}");
    }
    let mut out = format!(
        "TODO LIST when this session started ({}):\n",
        progress(&Counts::of(items))
    );
    item_lines(&mut out, items, FxHashSet::default, full_up_to, &[], None);
    let _ = write!(out, "Next: ");
    write_next_step(&mut out, items);
    out.push('\n');
    out.push_str(guidance);
    out
}

/// The system prompt's part for a command that takes over a list the
/// previous command left open: why it stopped, the open items with their
/// ids, how to go on, then GUIDANCE.
pub fn resume_guidance(
    items: &[Item],
    reason: &str,
    running: Option<&str>,
    full_up_to: usize,
) -> String {
    resume_guidance_for(items, reason, running, full_up_to, ToolStyle::Todo)
}

/// `resume_guidance` for the tools of STYLE.
pub fn resume_guidance_for(
    items: &[Item],
    reason: &str,
    running: Option<&str>,
    full_up_to: usize,
    style: ToolStyle,
) -> String {
    let mut out = String::from("THE PREVIOUS COMMAND STOPPED");
    if let Some(id) = running {
        let _ = write!(out, " while {id} was in progress");
    }
    out.push_str(" (");
    push_cut(&mut out, reason);
    let _ = writeln!(
        out,
        "). Its todo list carries over with the same ids ({}):",
        progress(&Counts::of(items))
    );
    let open: Vec<Item> = items
        .iter()
        .filter(|i| i.status.is_open())
        .cloned()
        .collect();
    item_lines(&mut out, &open, FxHashSet::default, full_up_to, &[], None);
    let finished = items.len() - open.len();
    if finished > 0 {
        let _ = writeln!(out, "  ({finished} finished items not shown)");
    }
    out.push_str(match style {
        ToolStyle::Tasks => "Go on from there: update tasks by id with TaskUpdate; set cancelled or deleted the tasks no longer wanted.\n",
        _ => "Go on from there: update items by id with merge; set cancelled the items no longer wanted; or, if the user now wants something else, send a whole new list without merge (open items you leave out are reported as dropped).\n",
    });
    out.push_str(guidance(style));
    out
}

/// "t5 is ready now." or "Ready now: t5, t6.": items a change unblocked.
pub fn push_now_ready(out: &mut String, ids: &[String]) {
    match ids {
        [] => {}
        [id] => {
            out.push('\n');
            out.push_str(id);
            out.push_str(" is ready now.");
        }
        ids => {
            out.push_str("\nReady now: ");
            push_ids(out, ids.iter().map(String::as_str));
            out.push('.');
        }
    }
}

/// " [blocked by t1, t2]" for the open blockers of ITEMS[N], nothing when
/// none is open.
/// `push_blocked_by`, looking the blockers up with FIND.
fn push_blocked_by_found(out: &mut String, items: &[Item], find: Find, n: usize) {
    let mut open = items[n]
        .blocked_by
        .iter()
        .filter_map(|id| find(id).and_then(|j| items.get(j)))
        .filter(|blocker| blocker.status.is_open())
        .map(|blocker| blocker.id.as_str())
        .peekable();
    if open.peek().is_some() {
        out.push_str(" [blocked by ");
        push_ids(out, open);
        out.push(']');
    }
}

fn push_blocked_by(
    out: &mut String,
    items: &[Item],
    index: &rustc_hash::FxHashMap<&str, usize>,
    n: usize,
) {
    let open = graph::open_blockers(items, index, n);
    if !open.is_empty() {
        out.push_str(" [blocked by ");
        push_ids(out, open.iter().map(|item| item.id.as_str()));
        out.push(']');
    }
}

/// Most lines a TaskList shows; the rest are counted, like every text.
pub const MAX_TASK_LINES: usize = 50;

/// TaskList: one line per item, `t3 [pending] subject (owner) [blocked by
/// t1]`, at most MAX_TASK_LINES of them, open items first when it must cut.
pub fn task_list(items: &[Item]) -> String {
    let counts = Counts::of(items);
    let mut out = String::from("[Tasks: ");
    write_progress(&mut out, &counts);
    out.push_str("]\n");
    if items.is_empty() {
        out.push_str("No tasks. Create them with TaskCreate.");
        return out;
    }
    let index = graph::index_of(items);
    let ready = graph::ready(items);
    // A long list shows its open items first: they are what is left to do.
    let order: Vec<usize> = if items.len() > MAX_TASK_LINES {
        (0..items.len())
            .filter(|&n| items[n].status.is_open())
            .chain((0..items.len()).filter(|&n| !items[n].status.is_open()))
            .collect()
    } else {
        (0..items.len()).collect()
    };
    for &n in order.iter().take(MAX_TASK_LINES) {
        let item = &items[n];
        out.push_str(&item.id);
        out.push_str(" [");
        out.push_str(item.status.wire_name());
        out.push_str("] ");
        push_cut(&mut out, &item.content);
        if let Some(owner) = &item.owner {
            out.push_str(" (");
            push_cut(&mut out, owner);
            out.push(')');
        }
        if let Some(parent) = &item.parent {
            out.push_str(" (under ");
            out.push_str(parent);
            out.push(')');
        }
        push_blocked_by(&mut out, items, &index, n);
        out.push('\n');
    }
    if items.len() > MAX_TASK_LINES {
        let _ = writeln!(out, "... and {} more", items.len() - MAX_TASK_LINES);
    }
    let ready_ids: Vec<&str> = items
        .iter()
        .zip(&ready)
        .filter(|(_, r)| **r)
        .map(|(item, _)| item.id.as_str())
        .collect();
    if !ready_ids.is_empty() {
        out.push_str("Ready: ");
        push_ids(&mut out, ready_ids);
        out.push('\n');
    }
    out.push_str("Next: ");
    write_next_step_briefly(&mut out, items, true);
    out
}

/// TaskGet: ITEMS[N] in full.
pub fn task_get(items: &[Item], n: usize) -> String {
    let item = &items[n];
    let index = graph::index_of(items);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} [{}] {}",
        item.id,
        item.status.wire_name(),
        item.content
    );
    if item.active_form != item.content {
        let _ = writeln!(out, "activeForm: {}", item.active_form);
    }
    if let Some(description) = &item.description {
        let _ = writeln!(out, "description: {description}");
    }
    if let Some(owner) = &item.owner {
        let _ = writeln!(out, "owner: {owner}");
    }
    if let Some(parent) = &item.parent {
        let _ = writeln!(out, "parent: {parent}");
    }
    let open = graph::open_blockers(items, &index, n);
    if !open.is_empty() {
        out.push_str("blocked by: ");
        let named: Vec<String> = open
            .iter()
            .map(|b| format!("{} ({})", b.id, b.status.wire_name()))
            .collect();
        push_ids(&mut out, named.iter().map(String::as_str));
        out.push('\n');
    }
    let dependents = graph::dependents(items, &index);
    let blocks: Vec<&str> = dependents[n]
        .iter()
        .filter(|&&j| items[j].status.is_open())
        .map(|&j| items[j].id.as_str())
        .collect();
    if !blocks.is_empty() {
        out.push_str("blocks: ");
        push_ids(&mut out, blocks);
        out.push('\n');
    }
    if graph::ready(items)[n] {
        out.push_str("ready: yes\n");
    }
    out.truncate(out.trim_end().len());
    out
}

/// TaskCreate's result: the new id, what it waits for, whether it is ready.
pub fn task_created(items: &[Item], id: &str) -> String {
    let mut out = String::from("[Task list updated: ");
    write_progress(&mut out, &Counts::of(items));
    out.push_str("]\nCreated ");
    out.push_str(id);
    if let Some(n) = items.iter().position(|item| item.id == id) {
        out.push_str(": ");
        push_cut(&mut out, &items[n].content);
        if let Some(parent) = &items[n].parent {
            out.push_str(" (under ");
            out.push_str(parent);
            out.push(')');
        }
        let index = graph::index_of(items);
        push_blocked_by(&mut out, items, &index, n);
    }
    out.push('.');
    out
}

/// TaskUpdate's result: what changed for TASK_ID and the items it touched,
/// and which became ready.
pub fn task_updated(items: &[Item], task_id: &str, diff: &Diff) -> String {
    task_updated_by(items, task_id, diff, None)
}

/// `task_updated`, with FIND giving where a blocker stands in ITEMS (see
/// `write_result_by`).
pub fn task_updated_by(items: &[Item], task_id: &str, diff: &Diff, find: Option<Find>) -> String {
    let mut out = String::from("[Task list updated: ");
    write_progress(&mut out, &Counts::of(items));
    out.push_str("]\n");
    if diff.is_empty() {
        out.push_str("No change: ");
        out.push_str(task_id);
        out.push_str(" is as it was.");
        return out;
    }
    let changed = diff.changed_id_set();
    // The changed items in list order: through FIND when there is one (a
    // TaskUpdate changes an item or two of what may be a long list), else
    // by looking at every item.
    let positions: Vec<usize> = match find {
        Some(find) => {
            let mut positions: Vec<usize> = changed
                .iter()
                .filter_map(|id| {
                    find(id).filter(|&n| items.get(n).is_some_and(|item| item.id == *id))
                })
                .collect();
            positions.sort_unstable();
            positions.dedup();
            positions
        }
        None => items
            .iter()
            .enumerate()
            .filter(|(_, item)| changed.contains(item.id.as_str()))
            .map(|(n, _)| n)
            .collect(),
    };
    // Only the blockers of the items shown are looked up.
    let index = if find.is_some() {
        Default::default()
    } else {
        graph::index_of_some(
            items,
            positions
                .iter()
                .flat_map(|&n| items[n].blocked_by.iter().map(String::as_str)),
        )
    };
    let mut shown = 0;
    for &n in &positions {
        let item = &items[n];
        shown += 1;
        if shown > MAX_NAMED {
            continue;
        }
        out.push_str(&item.id);
        out.push(' ');
        out.push_str(item.status.wire_name());
        out.push_str(": ");
        push_cut(
            &mut out,
            if item.status == Status::InProgress {
                &item.active_form
            } else {
                &item.content
            },
        );
        if diff.edited.contains(&item.id) {
            if let Some(owner) = &item.owner {
                out.push_str(" (");
                push_cut(&mut out, owner);
                out.push(')');
            }
        }
        match find {
            Some(find) => push_blocked_by_found(&mut out, items, find, n),
            None => push_blocked_by(&mut out, items, &index, n),
        }
        out.push('\n');
    }
    if shown > MAX_NAMED {
        let _ = writeln!(out, "... and {} more changed", shown - MAX_NAMED);
    }
    if !diff.demoted.is_empty() {
        out.push_str("Back to pending (one task runs at a time): ");
        push_ids(&mut out, diff.demoted.iter().map(String::as_str));
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    push_now_ready(&mut out, &diff.now_ready);
    if !items
        .iter()
        .any(|i| i.status == Status::InProgress && diff.started.contains(&i.id))
    {
        out.push_str("\nNext: ");
        write_next_step_briefly(&mut out, items, true);
    }
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
    fn a_shown_list_has_every_item_and_the_next_step() {
        let items = list(&[Status::InProgress, Status::Pending, Status::Pending]);
        let diff = Diff {
            added: vec!["t1".into(), "t2".into(), "t3".into()],
            ..Diff::default()
        };
        let text = write_result(&items, &diff, true, 30, &[]);
        assert_eq!(
            text,
            "[TODO list updated: 0/3 done]\n  t1 [in_progress] Step 0\n  t2 [pending] Step 1\n  t3 [pending] Step 2\nNext: work on t1."
        );
    }

    #[test]
    fn a_status_change_names_only_the_changed_items() {
        let mut items = list(&[Status::Completed, Status::InProgress, Status::Pending]);
        items[1].active_form = "Doing step 1".into();
        let diff = Diff {
            completed: vec!["t1".into()],
            started: vec!["t2".into()],
            ..Diff::default()
        };
        let text = write_result(&items, &diff, false, 30, &[]);
        assert_eq!(
            text,
            "[TODO list updated: 1/3 done]\nt1 completed: Step 0\nt2 in_progress: Doing step 1"
        );
    }

    #[test]
    fn a_status_change_in_a_long_list_stays_short() {
        let mut statuses = vec![Status::Completed; 40];
        statuses.push(Status::InProgress);
        statuses.extend(vec![Status::Pending; 959]);
        let mut items = list(&statuses);
        for item in &mut items {
            item.content = format!("Update the docstring of function-{} in its file", item.id);
        }
        let diff = Diff {
            completed: vec!["t40".into()],
            started: vec!["t41".into()],
            ..Diff::default()
        };
        let text = write_result(&items, &diff, false, 30, &[]);
        assert!(text.len() < 300, "{} bytes: {text}", text.len());
        assert!(
            text.contains("t40 completed: Update the docstring of function-t40"),
            "{text}"
        );
        assert!(!text.contains("t42"), "{text}");
    }

    #[test]
    fn many_changes_are_named_up_to_ten() {
        let items = list(&[Status::Completed; 25]);
        let diff = Diff {
            completed: items.iter().map(|i| i.id.clone()).collect(),
            ..Diff::default()
        };
        let text = write_result(&items, &diff, false, 30, &[]);
        assert!(
            text.contains("t10 completed: Step 9\n... and 15 more changed\n"),
            "{text}"
        );
        assert!(!text.contains("t11 "), "{text}");
    }

    #[test]
    fn an_unchanged_write_says_so() {
        let items = list(&[Status::InProgress]);
        let text = write_result(&items, &Diff::default(), false, 30, &[]);
        assert!(
            text.contains("\nNo change: the list is as it was.\n"),
            "{text}"
        );
    }

    #[test]
    fn a_reorder_says_so_and_shows_the_list_with_ids() {
        let mut items = list(&[Status::Pending, Status::Pending, Status::Pending]);
        items.reverse();
        let diff = Diff {
            moved: true,
            ..Diff::default()
        };
        let text = write_result(&items, &diff, true, 30, &[]);
        assert!(!text.contains("No change"), "{text}");
        assert!(text.contains("\nReordered: "), "{text}");
        let shown: Vec<&str> = text
            .lines()
            .filter_map(|line| line.trim_start().split(' ').next())
            .filter(|word| word.starts_with('t'))
            .collect();
        assert_eq!(shown, ["t3", "t2", "t1"], "{text}");
    }

    #[test]
    fn dropped_and_demoted_items_are_warned_about() {
        let mut retired = FxHashMap::default();
        let mut ids = IdCounter::default();
        let p = |content: &'static str, status| ProposedItem {
            id: None,
            content,
            active_form: None,
            status,
            parent: None,
            description: None,
            blocked_by: Vec::new(),
            owner: None,
        };
        let first = reconcile(
            &[],
            &mut retired,
            &mut ids,
            &[p("Keep me", Status::Pending), p("Lose me", Status::Pending)],
            0.0,
        )
        .unwrap();
        let second = reconcile(
            &first.items,
            &mut retired,
            &mut ids,
            &[
                p("Keep me", Status::InProgress),
                p("Other", Status::InProgress),
            ],
            0.0,
        )
        .unwrap();
        let text = write_result(&second.items, &second.diff, true, 30, &[]);
        assert!(
            text.contains(
                "dropped: t2 [pending] Lose me; if you meant to abandon them, set them cancelled"
            ),
            "{text}"
        );
        assert!(
            text.contains("t1 stays in progress, t3 set back to pending"),
            "{text}"
        );
    }

    #[test]
    fn long_lists_summarise_unchanged_finished_items_at_the_threshold() {
        let mut statuses = vec![Status::Completed; 29];
        statuses.push(Status::Pending);
        let items = list(&statuses);
        let added = Diff {
            added: vec!["t30".into()],
            ..Diff::default()
        };
        assert!(!write_result(&items, &added, true, 30, &[]).contains("not shown"));
        let mut items = items;
        items.push(Item::new(
            "t31".into(),
            "Last".into(),
            None,
            Status::Cancelled,
            0.0,
        ));
        let diff = Diff {
            completed: vec!["t2".into()],
            added: vec!["t31".into()],
            ..Diff::default()
        };
        let text = write_result(&items, &diff, true, 30, &[]);
        assert!(
            text.contains(
                "... and 28 unchanged finished items not shown (28 completed, 0 cancelled)"
            ),
            "{text}"
        );
        assert!(
            text.contains("t2 [completed]")
                && text.contains("t30 [pending]")
                && text.contains("t31 [cancelled]")
        );
        assert!(!text.contains("t1 [completed]"));
    }

    #[test]
    fn a_long_plan_shows_its_first_items_and_how_the_ids_run() {
        let items = list(&[Status::Pending; 1000]);
        let diff = Diff {
            added: items.iter().map(|i| i.id.clone()).collect(),
            ..Diff::default()
        };
        let text = write_result(&items, &diff, true, 30, &[]);
        assert!(
            text.contains("  t30 [pending] Step 29\n  ... and 970 more changed items not shown\n"),
            "{text}"
        );
        assert!(
            text.contains("New ids follow the order you sent: t1 to t1000.\n"),
            "{text}"
        );
        assert!(text.len() < 2000, "{} bytes", text.len());
    }

    #[test]
    fn added_ids_out_of_order_get_no_shortcut() {
        let mut items = list(&[Status::Pending; 3]);
        items.swap(0, 2);
        let diff = Diff {
            added: vec!["t1".into(), "t2".into(), "t3".into()],
            ..Diff::default()
        };
        assert!(!write_result(&items, &diff, true, 2, &[]).contains("New ids follow"));
        items.swap(0, 2);
        assert!(write_result(&items, &diff, true, 2, &[])
            .contains("New ids follow the order you sent: t1 to t3."));
        assert!(
            !write_result(&items, &diff, true, 3, &[]).contains("New ids follow"),
            "all shown"
        );
    }

    #[test]
    fn items_that_complete_on_a_tool_are_marked_while_open() {
        let mut items = list(&[Status::InProgress, Status::Completed]);
        items[0].content = "Run the suite with run_tests".into();
        items[1].content = "Check run_tests".into();
        let diff = Diff {
            added: vec!["t1".into(), "t2".into()],
            ..Diff::default()
        };
        let text = write_result(&items, &diff, true, 30, &["run_tests"]);
        assert!(text.contains(
            "t1 [in_progress] Run the suite with run_tests (completes when run_tests succeeds)\n"
        ));
        assert!(text.contains("t2 [completed] Check run_tests\n"));
        assert!(!write_result(&items, &diff, true, 30, &[]).contains("completes when"));
    }

    #[test]
    fn numbers_and_progress_read_as_formatted() {
        for n in [0, 7, 10, 99, 1000, 123_456_789, usize::MAX] {
            let mut out = String::from("x");
            push_number(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
        let counts = Counts {
            total: 1000,
            pending: 0,
            in_progress: 1,
            completed: 990,
            cancelled: 9,
        };
        assert_eq!(
            progress(&counts),
            "990/1000 done, 1 in progress, 9 cancelled"
        );
        assert_eq!(progress(&Counts::default()), "0/0 done");
    }

    #[test]
    fn next_step_covers_every_state() {
        assert!(next_step(&[]).contains("empty"));
        assert!(next_step(&list(&[Status::Pending])).starts_with("set t1 in_progress"));
        assert!(next_step(&list(&[Status::Completed, Status::Cancelled])).contains("finished"));
    }

    #[test]
    fn resume_guidance_says_why_and_names_the_open_items() {
        let items = list(&[Status::Completed, Status::InProgress, Status::Pending]);
        let text = resume_guidance(&items, "interrupted by the user", Some("t2"), 30);
        assert!(text.starts_with("THE PREVIOUS COMMAND STOPPED while t2 was in progress (interrupted by the user). Its todo list carries over with the same ids (1/3 done, 1 in progress, 1 pending):\n  t2 [in_progress] Step 1\n  t3 [pending] Step 2\n  (1 finished items not shown)\n"), "{text}");
        assert!(text.contains("set cancelled the items no longer wanted"));
        assert!(text.ends_with(GUIDANCE));
        let many = list(&[Status::Pending; 100]);
        assert!(resume_guidance(&many, "x", None, 30)
            .contains("... and 70 more pending items not shown"));
    }

    #[test]
    fn guidance_shows_the_list_it_was_given_and_how_to_merge() {
        let empty = prompt_guidance(&[], 30);
        assert!(empty.contains("send the whole plan first") && empty.contains("\"merge\": true"));
        let text = prompt_guidance(&list(&[Status::InProgress]), 30);
        assert!(text.starts_with("TODO LIST when this session started (0/1 done, 1 in progress):\n  t1 [in_progress] Step 0\n"), "{text}");
        assert!(text.ends_with(GUIDANCE));
    }
}

#[cfg(test)]
mod tree_tests {
    use super::*;
    use crate::model::sample_items;

    #[test]
    fn a_long_list_shows_subtasks_under_the_item_shown_before_them() {
        let mut statuses = vec![Status::InProgress, Status::Pending];
        statuses.extend([Status::Completed; 37]);
        statuses.extend([Status::Pending, Status::Pending]);
        let mut items = sample_items(&statuses);
        for (id, parent) in [("t2", "t1"), ("t40", "t1"), ("t41", "t3")] {
            if let Some(item) = items.iter_mut().find(|i| i.id == id) {
                item.parent = Some(parent.to_string());
            }
        }
        let diff = Diff {
            started: vec!["t1".into()],
            ..Diff::default()
        };
        assert_eq!(
            write_result(&items, &diff, true, 30, &[]),
            "[TODO list updated: 37/41 done]\n  t1 [in_progress] Step 0\n    t2 [pending] Step 1\n    t40 [pending] Step 39\n    t41 [pending] Step 40 (under t3)\n  ... and 37 unchanged finished items not shown (37 completed, 0 cancelled)\nNext: work on t1."
        );
    }

    #[test]
    fn a_subtask_first_in_the_list_names_its_parent() {
        let mut items = sample_items(&[Status::Pending, Status::Pending]);
        items[0].parent = Some("t2".into());
        let diff = Diff {
            added: vec!["t1".into(), "t2".into()],
            ..Diff::default()
        };
        assert_eq!(
            write_result(&items, &diff, true, 30, &[]),
            "[TODO list updated: 0/2 done]\n    t1 [pending] Step 0 (under t2)\n  t2 [pending] Step 1\nNext: set t1 in_progress and start it (Step 0)."
        );
    }
}

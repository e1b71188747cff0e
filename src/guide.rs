//! Nudges that keep the model working through its list: continuation when
//! it stops with items open, reminders to update the list, auto-completion
//! of items that name a tool, and a cheap guess of how many steps a request has.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use crate::model::{name_items, push_cut, Item, Status};
use crate::validate::{quote, InvalidInput, ToolStyle};

pub use crate::breaker::TODO_TOOLS;

pub const MAX_PAUSE_CHARS: usize = 500;

/// The tools that write the list: a call of one is the update a reminder
/// asks for.
const WRITE_TOOLS: [&str; 3] = ["todo_write", "TaskCreate", "TaskUpdate"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuideOptions {
    pub max_continuations: u32,
    pub reminder_after: u32,
    pub reminders: bool,
    /// The tools the model is offered: the texts name only those.
    pub style: ToolStyle,
}

impl Default for GuideOptions {
    fn default() -> GuideOptions {
        GuideOptions {
            max_continuations: 2,
            reminder_after: 4,
            reminders: true,
            style: ToolStyle::Todo,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Guide {
    continuations: u32,
    /// The list as it was when the last continuation was sent, to tell a
    /// model that is stuck from one that is moving.
    list_at_continuation: Option<u64>,
    pause_reason: Option<String>,
    /// Successful non-todo calls under `reminder_item` since the last
    /// write to the list or reminder.
    calls_under_item: u32,
    reminder_item: Option<String>,
}

fn list_fingerprint(items: &[Item]) -> u64 {
    let mut hasher = DefaultHasher::new();
    for item in items {
        (&item.id, item.status.wire_name(), &item.content).hash(&mut hasher);
    }
    hasher.finish()
}

/// The open items, at most MAX_NAMED of them named, on one line.
pub fn open_items(items: &[Item]) -> String {
    let mut out = String::new();
    name_items(
        &mut out,
        items.iter().filter(|i| i.status.is_open()),
        "",
        "; ",
    );
    out.truncate(out.len().saturating_sub(2));
    out
}

impl Guide {
    /// The todo_pause tool: the model says why it must stop with items open.
    pub fn pause(&mut self, reason: &str) -> Result<String, InvalidInput> {
        let trimmed = reason.trim();
        let chars = trimmed.chars().count();
        if chars == 0 || chars > MAX_PAUSE_CHARS {
            return Err(InvalidInput::new(
                "reason",
                format!("expected 1 to {MAX_PAUSE_CHARS} characters, got {chars}"),
            ));
        }
        if trimmed.contains('\0') {
            return Err(InvalidInput::new("reason", "contains a NUL character"));
        }
        self.pause_reason = Some(trimmed.to_string());
        Ok(format!(
            "[Paused] Noted: {}. You will not be asked to continue; the reason goes into the final report.",
            quote(trimmed)
        ))
    }

    pub fn pause_reason(&self) -> Option<&str> {
        self.pause_reason.as_deref()
    }

    /// An item was completed: the model is moving, so it earns its
    /// continuation budget back.
    pub fn note_progress(&mut self) {
        self.continuations = 0;
        self.list_at_continuation = None;
    }

    /// The model ended a turn.  Returns the message to send instead of
    /// ending, or None to let the session end.
    pub fn turn_end(
        &mut self,
        had_tool_calls: bool,
        items: &[Item],
        options: &GuideOptions,
    ) -> Option<String> {
        if had_tool_calls
            || self.pause_reason.is_some()
            || self.continuations >= options.max_continuations
        {
            return None;
        }
        if !items.iter().any(|i| i.status.is_open()) {
            return None;
        }
        let now = list_fingerprint(items);
        let stuck = self.list_at_continuation == Some(now);
        self.continuations += 1;
        self.list_at_continuation = Some(now);
        let next = items
            .iter()
            .find(|i| i.status == Status::InProgress)
            .or_else(|| items.iter().find(|i| i.status == Status::Pending))
            .map(|i| i.id.as_str())
            .unwrap_or("the next item");
        Some(if stuck {
            format!(
                "[efrit-todo] Your list has not changed since the last reminder and items are still open: {}. Reply now with the next concrete tool call for {next}, or call todo_pause with the reason you cannot go on.",
                open_items(items)
            )
        } else {
            format!(
                "[efrit-todo] You ended your turn with items still open: {}. Continue with {next}; mark finished items completed and abandoned ones cancelled with {}, or call todo_pause with the reason if you must stop.",
                open_items(items),
                options.style.update_tool()
            )
        })
    }

    /// Called after every tool call; returns a reminder to append, if due.
    pub fn after_call(
        &mut self,
        tool: &str,
        success: bool,
        current: Option<&Item>,
        options: &GuideOptions,
    ) -> Option<String> {
        if WRITE_TOOLS.contains(&tool) {
            self.calls_under_item = 0;
            return None;
        }
        if TODO_TOOLS.contains(&tool) || !success || !options.reminders {
            return None;
        }
        let item = current?;
        if self.reminder_item.as_deref() != Some(item.id.as_str()) {
            self.reminder_item = Some(item.id.clone());
            self.calls_under_item = 0;
        }
        self.calls_under_item += 1;
        if self.calls_under_item < options.reminder_after.max(1) {
            return None;
        }
        self.calls_under_item = 0;
        let mut text = format!("[efrit-todo reminder] {} (", item.id);
        push_cut(&mut text, &item.content);
        text.push_str(&format!(
            ") is still in_progress after {} tool calls. If it is done, mark it completed with {} and start the next item.",
            options.reminder_after,
            options.style.update_tool()
        ));
        Some(text)
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// How often TEXT contains WORD as a whole word, ignoring case.
fn count_word(text: &str, word: &str) -> usize {
    let text = text.to_lowercase();
    let word = word.to_lowercase();
    if word.is_empty() {
        return 0;
    }
    text.match_indices(&word)
        .filter(|(start, _)| {
            let before = text[..*start].chars().next_back();
            let after = text[start + word.len()..].chars().next();
            !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
        })
        .count()
}

fn contains_word(text: &str, word: &str) -> bool {
    count_word(text, word) > 0
}

/// The tool an item's CONTENT names, among TOOLS: whole words, case
/// ignored, the longest name when several match; todo tools never count.
pub fn named_tool<'a>(content: &str, tools: &[&'a str]) -> Option<&'a str> {
    tools
        .iter()
        .filter(|tool| !TODO_TOOLS.contains(tool) && contains_word(content, tool))
        .max_by_key(|tool| tool.len())
        .copied()
}

#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub complex: bool,
    pub score: f64,
    pub steps: usize,
    pub suggestion: String,
}

const ACTION_VERBS: [&str; 28] = [
    "add",
    "build",
    "change",
    "check",
    "clean",
    "create",
    "delete",
    "document",
    "edit",
    "find",
    "fix",
    "implement",
    "install",
    "make",
    "move",
    "open",
    "read",
    "refactor",
    "remove",
    "rename",
    "replace",
    "run",
    "search",
    "test",
    "update",
    "write",
    "format",
    "commit",
];

fn starts_with_verb(segment: &str) -> bool {
    let first = segment
        .trim()
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("")
        .to_lowercase();
    ACTION_VERBS.contains(&first.as_str())
}

fn is_list_line(line: &str) -> bool {
    let line = line.trim_start();
    if let Some(rest) = line.strip_prefix(['-', '*', '•']) {
        return rest.starts_with(' ');
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && line[digits..].starts_with(['.', ')'])
}

fn file_names(text: &str) -> HashSet<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '\'' | '`'))
        .map(|word| word.trim_end_matches(['.', ':', '!', '?']))
        .filter(|word| {
            word.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
            })
        })
        .map(str::to_string)
        .collect()
}

/// A cheap estimate of how many steps REQUEST asks for.
/// Its suggestion names the planning tools of STYLE.
pub fn analyze_request(request: &str, style: ToolStyle) -> Analysis {
    let lower = request.to_lowercase();
    let list_items = request.lines().filter(|l| is_list_line(l)).count();
    let sequencing = ["then", "after that", "afterwards", "finally"]
        .iter()
        .map(|marker| count_word(&lower, marker))
        .sum::<usize>();
    let verb_clauses = lower
        .split([',', ';', '\n'])
        .flat_map(|clause| clause.split(" and "))
        .filter(|clause| starts_with_verb(clause))
        .count();
    let files = file_names(request).len();
    let steps = list_items
        .max(verb_clauses)
        .max(if sequencing > 0 { sequencing + 1 } else { 0 });
    let score = (0.2 * steps as f64
        + 0.1 * files.saturating_sub(1) as f64
        + 0.1 * sequencing as f64
        + (request.chars().count() as f64 / 1000.0).min(0.2))
    .min(1.0);
    let complex = steps >= 3 || score >= 0.6;
    let suggestion = match (complex, style) {
        (false, _) => String::new(),
        (true, ToolStyle::Tasks) => format!(
            "This request looks like about {} steps. Create the plan with TaskCreate first, one task per step, naming in blockedBy what each must wait for; then work through the tasks, updating each with TaskUpdate as it starts and finishes.",
            steps.max(3)
        ),
        (true, ToolStyle::Todo | ToolStyle::Both) => format!(
            "This request looks like about {} steps. Call todo_write first with the whole plan (the first item in_progress), then work through it, updating the list as items finish.",
            steps.max(3)
        ),
    };
    Analysis {
        complex,
        score,
        steps,
        suggestion,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample_items as items;

    #[test]
    fn continuation_is_sent_twice_then_escalated_then_stops() {
        let mut guide = Guide::default();
        let options = GuideOptions::default();
        let list = items(&[Status::InProgress, Status::Pending]);
        assert_eq!(guide.turn_end(true, &list, &options), None);
        let first = guide.turn_end(false, &list, &options).unwrap();
        assert!(
            first.contains("t1 [in_progress] Step 0; t2 [pending] Step 1")
                && first.contains("Continue with t1")
        );
        let second = guide.turn_end(false, &list, &options).unwrap();
        assert!(second.contains("has not changed") && second.contains("todo_pause"));
        assert_eq!(guide.turn_end(false, &list, &options), None);
    }

    #[test]
    fn a_changed_list_is_not_escalated_and_only_progress_refills() {
        let mut guide = Guide::default();
        let options = GuideOptions::default();
        guide
            .turn_end(
                false,
                &items(&[Status::InProgress, Status::Pending]),
                &options,
            )
            .unwrap();
        let moved = items(&[Status::Cancelled, Status::InProgress]);
        assert!(!guide
            .turn_end(false, &moved, &options)
            .unwrap()
            .contains("has not changed"));
        assert_eq!(guide.turn_end(false, &moved, &options), None);
        guide.after_call("read_file", true, moved.get(1), &options);
        assert_eq!(guide.turn_end(false, &moved, &options), None);
        guide.note_progress();
        assert!(guide.turn_end(false, &moved, &options).is_some());
    }

    #[test]
    fn no_continuation_when_finished_or_paused() {
        let options = GuideOptions::default();
        assert_eq!(
            Guide::default().turn_end(false, &items(&[Status::Completed]), &options),
            None
        );
        assert_eq!(Guide::default().turn_end(false, &[], &options), None);
        let mut guide = Guide::default();
        assert!(guide
            .pause("The file is locked by another user")
            .unwrap()
            .contains("Paused"));
        assert_eq!(
            guide.turn_end(false, &items(&[Status::Pending]), &options),
            None
        );
        assert_eq!(
            guide.pause_reason(),
            Some("The file is locked by another user")
        );
    }

    #[test]
    fn pause_reason_bounds() {
        let mut guide = Guide::default();
        assert_eq!(guide.pause("   ").unwrap_err().path, "reason");
        assert!(guide.pause(&"x".repeat(501)).is_err());
        assert!(guide.pause(&"é".repeat(500)).is_ok());
        assert!(guide.pause("a").is_ok());
    }

    #[test]
    fn reminder_after_four_successful_calls_then_four_more() {
        let mut guide = Guide::default();
        let options = GuideOptions::default();
        let list = items(&[Status::InProgress]);
        for _ in 0..3 {
            assert_eq!(
                guide.after_call("read_file", true, list.first(), &options),
                None
            );
        }
        assert_eq!(
            guide.after_call("read_file", false, list.first(), &options),
            None
        );
        assert!(guide
            .after_call("eval_sexp", true, list.first(), &options)
            .unwrap()
            .contains("t1 (Step 0)"));
        assert_eq!(
            guide.after_call("read_file", true, list.first(), &options),
            None
        );
        for _ in 0..2 {
            assert_eq!(
                guide.after_call("read_file", true, list.first(), &options),
                None
            );
        }
        assert!(guide
            .after_call("read_file", true, list.first(), &options)
            .is_some());
    }

    #[test]
    fn todo_write_resets_and_options_disable_reminders() {
        let mut guide = Guide::default();
        let options = GuideOptions::default();
        let list = items(&[Status::InProgress]);
        for _ in 0..3 {
            guide.after_call("read_file", true, list.first(), &options);
        }
        assert_eq!(
            guide.after_call("todo_write", true, list.first(), &options),
            None
        );
        assert_eq!(
            guide.after_call("read_file", true, list.first(), &options),
            None
        );
        let off = GuideOptions {
            reminders: false,
            ..options
        };
        let mut quiet = Guide::default();
        assert!((0..10).all(|_| quiet
            .after_call("read_file", true, list.first(), &off)
            .is_none()));
        assert!((0..10).all(|_| quiet
            .after_call("read_file", true, None, &options)
            .is_none()));
    }

    /// Whether TEXT names only the tools STYLE offers for marking items:
    /// todo_write, TaskUpdate, or either.
    fn names_only_the_tools_of(style: ToolStyle, text: &str) -> bool {
        let (todo, task) = (text.contains("todo_write"), text.contains("TaskUpdate"));
        match style {
            ToolStyle::Todo => todo && !task,
            ToolStyle::Tasks => task && !todo,
            ToolStyle::Both => todo || task,
        }
    }

    #[test]
    fn continuations_and_reminders_name_the_tools_of_the_style() {
        let list = items(&[Status::InProgress, Status::Pending]);
        for style in ToolStyle::ALL {
            let options = GuideOptions {
                style,
                ..GuideOptions::default()
            };
            let mut guide = Guide::default();
            let first = guide.turn_end(false, &list, &options).unwrap();
            assert!(names_only_the_tools_of(style, &first), "{style:?}: {first}");
            let second = guide.turn_end(false, &list, &options).unwrap();
            assert!(!second.contains("todo_write"), "{style:?}: {second}");
            let reminder = (0..options.reminder_after)
                .filter_map(|_| guide.after_call("read_file", true, list.first(), &options))
                .next()
                .expect("a reminder");
            assert!(
                names_only_the_tools_of(style, &reminder),
                "{style:?}: {reminder}"
            );
        }
    }

    #[test]
    fn a_task_write_restarts_the_reminder_count_as_todo_write_does() {
        let list = items(&[Status::InProgress]);
        for tool in ["todo_write", "TaskUpdate", "TaskCreate"] {
            let mut guide = Guide::default();
            let options = GuideOptions::default();
            for _ in 0..3 {
                guide.after_call("read_file", true, list.first(), &options);
            }
            assert_eq!(guide.after_call(tool, true, list.first(), &options), None);
            assert_eq!(
                guide.after_call("read_file", true, list.first(), &options),
                None,
                "{tool}"
            );
        }
    }

    #[test]
    fn the_plan_suggestion_names_the_tools_of_the_style() {
        let request = "Please:\n1. Fix the parser\n2. Add a test\n3. Update the changelog";
        for style in ToolStyle::ALL {
            let suggestion = analyze_request(request, style).suggestion;
            assert!(suggestion.contains("about 3 steps"), "{suggestion}");
            match style {
                ToolStyle::Tasks => assert!(
                    suggestion.contains("TaskCreate") && !suggestion.contains("todo_write"),
                    "{suggestion}"
                ),
                _ => assert!(suggestion.contains("todo_write"), "{suggestion}"),
            }
        }
        assert!(analyze_request("What is this?", ToolStyle::Tasks)
            .suggestion
            .is_empty());
    }

    #[test]
    fn named_tool_takes_whole_words_and_the_longest() {
        let tools = ["read_file", "read", "eval_sexp", "todo_write"];
        assert_eq!(
            named_tool("Read the config with READ_FILE", &tools),
            Some("read_file")
        );
        assert_eq!(named_tool("Read it", &tools), Some("read"));
        assert_eq!(named_tool("Use eval_sexpr", &tools), None);
        assert_eq!(named_tool("Call todo_write", &tools), None);
    }

    #[test]
    fn analysis_counts_lists_sequences_and_verbs() {
        let simple = analyze_request("What does this function do?", ToolStyle::Todo);
        assert!(!simple.complex && simple.suggestion.is_empty());
        let listed = analyze_request(
            "Please:\n1. Fix the parser\n2. Add a test\n3. Update the changelog",
            ToolStyle::Todo,
        );
        assert!(listed.complex && listed.steps == 3 && listed.suggestion.contains("todo_write"));
        let verbs = analyze_request(
            "Rename foo to bar, update the callers and run the tests",
            ToolStyle::Todo,
        );
        assert_eq!(verbs.steps, 3);
        assert!(verbs.complex);
        let two = analyze_request("Open init.el and then fix the typo", ToolStyle::Todo);
        assert_eq!(two.steps, 2);
        assert!(!two.complex);
        assert!(
            (0.0..=1.0).contains(&analyze_request(&"fix a, ".repeat(100), ToolStyle::Todo).score)
        );
    }
}

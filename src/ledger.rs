//! The ledger: every tool call of a session and the final report built from it.
//!
//! Efrit loses tool output in two ways: a nil result becomes the generic
//! "Command executed successfully", and `session_complete` or the async
//! finalizer overwrite whatever came before.  The ledger keeps every result
//! as it was sent back to the model, and the report is built from the ledger,
//! so the user sees all of it, in order, with the todo summary and the
//! model's completion message last.

use std::borrow::Cow;
use std::fmt::Write;

use crate::model::{name_items, Counts, Item, Status};
use crate::render::progress;
use crate::validate::{Input, ToolStyle};

/// How much of a tool input the ledger keeps: enough to tell calls apart in the
/// report and the UI, not so much that a large buffer edit is stored twice.
pub const INPUT_SUMMARY_CHARS: usize = 200;

/// A sensible `max_result_chars` for callers with no setting of their own.
pub const DEFAULT_MAX_RESULT_CHARS: usize = 4000;

/// One tool call, as recorded.  `result` is the text sent back to the model,
/// never empty.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub tool: String,
    pub input: KeptInput,
    pub result: String,
    pub error: bool,
    /// The item that was in progress when the call ran.
    pub todo: Option<String>,
    /// Seconds since the epoch.
    pub time: f64,
    /// Seconds, when the caller measured it.
    pub duration: Option<f64>,
    /// The sub-agent that made the call; None for the session's own agent.
    pub agent: Option<String>,
}

/// Inputs of at most this weight (one per value, plus the bytes of its
/// text) are kept as they came; heavier ones are summarized at once, so
/// that a large buffer edit is not kept whole.
const KEEP_WHOLE_WEIGHT: usize = 1024;

/// A tool input as the ledger keeps it.  Summarizing costs more than the
/// rest of recording a call, and most summaries are never shown, so small
/// inputs are summarized only when shown.
#[derive(Debug, Clone, PartialEq)]
pub enum KeptInput {
    Whole(Input),
    Summary(String),
}

impl KeptInput {
    pub fn of(input: Input) -> KeptInput {
        let mut budget = KEEP_WHOLE_WEIGHT;
        if within(&input, &mut budget) {
            KeptInput::Whole(input)
        } else {
            KeptInput::Summary(summarize_input(&input, INPUT_SUMMARY_CHARS))
        }
    }

    /// A compact rendering of the input, at most `INPUT_SUMMARY_CHARS` characters.
    pub fn summary(&self) -> Cow<'_, str> {
        match self {
            KeptInput::Whole(input) => Cow::Owned(summarize_input(input, INPUT_SUMMARY_CHARS)),
            KeptInput::Summary(text) => Cow::Borrowed(text),
        }
    }
}

/// Whether INPUT weighs no more than BUDGET, which it uses up; stops as
/// soon as the budget is gone, so a huge input costs no more than a small.
fn within(input: &Input, budget: &mut usize) -> bool {
    let text = |text: &str| text.len();
    let own = 1 + match input {
        Input::Str(s) | Input::Unsupported(s) | Input::Invalid(s) => text(s),
        _ => 0,
    };
    let Some(left) = budget.checked_sub(own) else {
        return false;
    };
    *budget = left;
    match input {
        Input::Array(items) => items.iter().all(|item| within(item, budget)),
        Input::Map(pairs) => pairs.iter().all(|(key, value)| {
            match budget.checked_sub(text(key)) {
                Some(left) => *budget = left,
                None => return false,
            }
            within(value, budget)
        }),
        _ => true,
    }
}

#[derive(Debug, Clone, Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    /// Names of the tools called, kept apart so that asking for them costs
    /// the same at the 100000th call as at the first.
    tools: std::collections::BTreeSet<String>,
}

impl Ledger {
    /// Records a call; RESULT None or empty becomes "<tool> returned no output".
    /// Returns the recorded entry (its result is the text to send back).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        tool: &str,
        input: Input,
        result: Option<String>,
        flagged_error: bool,
        todo: Option<&str>,
        time: f64,
        duration: Option<f64>,
    ) -> &Entry {
        let error = is_error(result.as_deref(), flagged_error);
        // The result is taken over, not copied: it can be long.
        let text = match result {
            Some(text) if has_output(Some(&text)) => text,
            _ => no_output(tool),
        };
        let index = self.entries.len();
        if !self.tools.contains(tool) {
            self.tools.insert(tool.to_string());
        }
        self.entries.push(Entry {
            tool: tool.to_string(),
            input: KeptInput::of(input),
            error,
            result: text,
            todo: todo.map(str::to_string),
            time,
            duration,
            agent: None,
        });
        &self.entries[index]
    }

    /// Marks the last call as made by sub-agent AGENT.
    pub fn tag_last(&mut self, agent: &str) {
        if let Some(entry) = self.entries.last_mut() {
            entry.agent = Some(agent.to_string());
        }
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The distinct names of the tools called, in sorted order.
    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(String::as_str)
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.tools.clear();
    }
}

/// Whether RESULT is output, rather than nothing or only whitespace.
pub fn has_output(result: Option<&str>) -> bool {
    result.is_some_and(|text| !text.trim().is_empty())
}

/// What a call with no output is recorded as.  Naming the tool tells the model
/// and the user which call it was; "Command executed successfully" told
/// neither, and claimed a success nobody had seen.
pub fn no_output(tool: &str) -> String {
    let tool = tool.trim();
    if tool.is_empty() {
        "The tool returned no output".into()
    } else {
        format!("{tool} returned no output")
    }
}

/// A call failed when the caller says so or its result starts with "Error"
/// (Efrit's tools report failures as text, with `is_error` often nil).
/// No output is not an error: many editing commands return nothing.
pub fn is_error(result: Option<&str>, flagged: bool) -> bool {
    flagged || result.is_some_and(|text| text.trim_start().starts_with("Error"))
}

/// TEXT cut to MAX_CHARS characters, with a marker giving the full length, so
/// that nothing is ever dropped without saying so.  Cuts on char boundaries.
pub fn truncate(text: &str, max_chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max_chars) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => {
            let total = text.chars().count();
            Cow::Owned(format!("{}\n{}", &text[..cut], truncation_marker(total)))
        }
    }
}

pub fn truncation_marker(total_chars: usize) -> String {
    format!("[... truncated: {total_chars} characters in all]")
}

/// Accumulates text up to a character budget and notes when it ran over, so
/// that summarising a huge input costs only as much as the summary.
struct Budgeted {
    out: String,
    chars: usize,
    limit: usize,
}

impl Budgeted {
    fn over(&self) -> bool {
        self.chars > self.limit
    }

    fn push(&mut self, c: char) {
        if !self.over() {
            self.out.push(c);
            self.chars += 1;
        }
    }

    /// Characters that still fit: pushing stops once one more than the
    /// limit went in, which is how a cut is noticed.
    fn room(&self) -> usize {
        (self.limit + 1).saturating_sub(self.chars)
    }

    /// Pushes as much of TEXT as fits.
    fn push_str(&mut self, text: &str) {
        let room = self.room();
        let (mut end, mut count) = (0, 0);
        for (at, c) in text.char_indices() {
            if count == room {
                break;
            }
            end = at + c.len_utf8();
            count += 1;
        }
        self.out.push_str(&text[..end]);
        self.chars += count;
    }

    fn string(&mut self, text: &str) {
        self.push('"');
        let mut rest = text;
        while !rest.is_empty() && !self.over() {
            // Printable ASCII needs no escape and is one character a byte:
            // runs of it, most of any tool input, are copied at once.
            let plain = rest
                .bytes()
                .position(|b| !(b' '..=b'~').contains(&b) || b == b'"' || b == b'\\');
            let plain = plain.unwrap_or(rest.len()).min(self.room());
            if plain > 0 {
                self.out.push_str(&rest[..plain]);
                self.chars += plain;
                rest = &rest[plain..];
                continue;
            }
            let Some(c) = rest.chars().next() else { break };
            match c {
                '"' => self.push_str("\\\""),
                '\\' => self.push_str("\\\\"),
                '\n' => self.push_str("\\n"),
                '\r' => self.push_str("\\r"),
                '\t' => self.push_str("\\t"),
                c if c.is_control() => self.push_str(&format!("\\u{:04x}", c as u32)),
                c => self.push(c),
            }
            rest = &rest[c.len_utf8()..];
        }
        self.push('"');
    }

    fn input(&mut self, input: &Input) {
        if self.over() {
            return;
        }
        match input {
            Input::Null => self.push_str("null"),
            Input::Bool(b) => self.push_str(if *b { "true" } else { "false" }),
            Input::Int(n) => self.push_str(&n.to_string()),
            Input::Float(x) => self.push_str(&x.to_string()),
            Input::Str(s) => self.string(s),
            Input::Array(items) => {
                self.push('[');
                for (i, item) in items.iter().enumerate() {
                    if self.over() {
                        return;
                    }
                    if i > 0 {
                        self.push(',');
                    }
                    self.input(item);
                }
                self.push(']');
            }
            Input::Map(pairs) => {
                self.push('{');
                for (i, (key, value)) in pairs.iter().enumerate() {
                    if self.over() {
                        return;
                    }
                    if i > 0 {
                        self.push(',');
                    }
                    self.string(key);
                    self.push(':');
                    self.input(value);
                }
                self.push('}');
            }
            Input::Unsupported(what) => {
                self.push_str("#<");
                self.push_str(what);
                self.push('>');
            }
            Input::Invalid(why) => {
                self.push_str("#<invalid: ");
                self.push_str(why);
                self.push('>');
            }
        }
    }
}

/// The input as compact JSON (Lisp objects with no JSON meaning as `#<...>`),
/// at most MAX_CHARS characters, ending in "..." when cut.
pub fn summarize_input(input: &Input, max_chars: usize) -> String {
    let mut budget = Budgeted {
        out: String::with_capacity(max_chars.min(64)),
        chars: 0,
        limit: max_chars,
    };
    budget.input(input);
    if !budget.over() {
        return budget.out;
    }
    let ellipsis = if max_chars >= 3 { "..." } else { "" };
    let keep = max_chars - ellipsis.len();
    let mut out: String = budget.out.chars().take(keep).collect();
    out.push_str(ellipsis);
    out
}

fn entry_header(out: &mut String, number: usize, entry: &Entry) {
    // Written piece by piece: a report has one of these per tool call.
    let _ = write!(out, "--- {number}. ");
    out.push_str(&entry.tool);
    let input = entry.input.summary();
    if !input.is_empty() {
        out.push(' ');
        out.push_str(&input);
    }
    let seconds = entry.duration.filter(|d| d.is_finite() && *d >= 0.0);
    let mut notes = 0;
    let mut note = |out: &mut String| {
        out.push_str(if notes == 0 { " (" } else { ", " });
        notes += 1;
    };
    if let Some(agent) = &entry.agent {
        note(out);
        out.push_str("by ");
        out.push_str(agent);
    }
    if let Some(todo) = &entry.todo {
        note(out);
        out.push_str("during ");
        out.push_str(todo);
    }
    if entry.error {
        note(out);
        out.push_str("error");
    }
    if let Some(seconds) = seconds {
        note(out);
        let _ = write!(out, "{seconds:.2}s");
    }
    if notes > 0 {
        out.push(')');
    }
    out.push_str(" ---\n");
}

fn item_list(out: &mut String, title: &str, items: &[&Item], with_status: bool) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title} ({}):", items.len());
    for item in items {
        if with_status {
            let _ = writeln!(
                out,
                "  {} [{}] {}",
                item.id,
                item.status.wire_name(),
                item.content
            );
        } else {
            let _ = writeln!(out, "  {} {}", item.id, item.content);
        }
    }
}

fn todo_summary(out: &mut String, items: &[Item]) {
    if items.is_empty() {
        out.push_str("Todo list: no items.\n");
        return;
    }
    let _ = writeln!(out, "Todo list: {}", progress(&Counts::of(items)));
    let with = |status: Status| {
        items
            .iter()
            .filter(|i| i.status == status)
            .collect::<Vec<_>>()
    };
    item_list(out, "Done", &with(Status::Completed), false);
    item_list(out, "Cancelled", &with(Status::Cancelled), false);
    let open: Vec<&Item> = items.iter().filter(|i| i.status.is_open()).collect();
    item_list(out, "Left open", &open, true);
}

fn present(text: Option<&str>) -> Option<&str> {
    text.filter(|t| !t.trim().is_empty())
}

/// The aggregated report: every tool result in order (each cut to
/// MAX_RESULT_CHARS with a marker), the todo summary, the pause reason when
/// the model paused, and the completion message last.
pub fn report(
    entries: &[Entry],
    items: &[Item],
    message: Option<&str>,
    pause_reason: Option<&str>,
    max_result_chars: usize,
) -> String {
    let errors = entries.iter().filter(|e| e.error).count();
    let mut out = format!(
        "[Session report: {} tool call{}, {errors} error{}]\n\n",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        if errors == 1 { "" } else { "s" },
    );
    if entries.is_empty() {
        out.push_str("No tool calls were recorded.\n\n");
    }
    for (i, entry) in entries.iter().enumerate() {
        entry_header(&mut out, i + 1, entry);
        out.push_str(&truncate(&entry.result, max_result_chars));
        out.push_str("\n\n");
    }
    todo_summary(&mut out, items);
    if let Some(reason) = present(pause_reason) {
        let _ = write!(out, "\nPaused by the model: {reason}\n");
    }
    if let Some(message) = present(message) {
        let _ = write!(out, "\nCompletion message:\n{message}\n");
    }
    out
}

/// The session_complete guard.  A model that calls session_complete with items
/// still open has usually forgotten them, so the first such call is refused
/// with the open items listed; a model that meant it says so by calling again.
/// The refusal is spent once per session (until `reset`), so the guard can
/// cost at most one extra call.
#[derive(Debug, Clone, Default)]
pub struct CompletionGuard {
    refused: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub allowed: bool,
    /// For the user: the whole report when allowed, else the refusal.
    pub text: String,
    /// For the model: a short confirmation when allowed (it has seen every
    /// result already, and whatever it is sent stays in the conversation),
    /// else the refusal.
    pub model_text: String,
}

/// The confirmation the model gets for an allowed session_complete.
fn confirmation(entries: &[Entry], items: &[Item]) -> String {
    let mut out = String::from("Session complete: ");
    if !items.is_empty() {
        out.push_str("todo list ");
        out.push_str(&progress(&Counts::of(items)));
        out.push_str("; ");
    }
    let errors = entries.iter().filter(|e| e.error).count();
    let _ = write!(
        out,
        "the user was shown the full report of {} tool call{} ({errors} error{}) and your message.",
        entries.len(),
        if entries.len() == 1 { "" } else { "s" },
        if errors == 1 { "" } else { "s" },
    );
    out
}

impl CompletionGuard {
    pub fn complete(
        &mut self,
        entries: &[Entry],
        items: &[Item],
        message: &str,
        pause_reason: Option<&str>,
        max_result_chars: usize,
        style: ToolStyle,
    ) -> Completion {
        let open: Vec<&Item> = items.iter().filter(|i| i.status.is_open()).collect();
        if !open.is_empty() && !self.refused {
            self.refused = true;
            let text = refusal(&open, style);
            return Completion {
                allowed: false,
                model_text: text.clone(),
                text,
            };
        }
        Completion {
            allowed: true,
            text: report(
                entries,
                items,
                Some(message),
                pause_reason,
                max_result_chars,
            ),
            model_text: confirmation(entries, items),
        }
    }

    /// Whether the one refusal has been spent.
    pub fn refused(&self) -> bool {
        self.refused
    }

    pub fn reset(&mut self) {
        self.refused = false;
    }
}

fn refusal(open: &[&Item], style: ToolStyle) -> String {
    let mut out = format!(
        "[session_complete refused: {} todo item{} still open]\n",
        open.len(),
        if open.len() == 1 { " is" } else { "s are" }
    );
    name_items(&mut out, open.iter().copied(), "  ", "\n");
    let tool = style.update_tool();
    let _ = write!(
        out,
        "Choose one:\n\
         - finish them, marking each completed with {tool}, then call session_complete;\n\
         - set the ones you will not do to cancelled with {tool};\n\
         - or call session_complete again to end anyway with them left open."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample_items as items;
    use proptest::prelude::*;

    fn cmd(command: &str) -> Input {
        Input::Map(vec![("command".into(), Input::Str(command.into()))])
    }

    #[test]
    fn tool_names_are_kept_once_and_cleared_with_the_entries() {
        let mut ledger = Ledger::default();
        for tool in ["shell", "read_file", "shell", "eval_sexp", "shell"] {
            ledger.record(tool, Input::Null, Some("ok".into()), false, None, 0.0, None);
        }
        assert_eq!(
            ledger.tools().collect::<Vec<_>>(),
            ["eval_sexp", "read_file", "shell"]
        );
        ledger.clear();
        assert_eq!(ledger.tools().count(), 0);
    }

    #[test]
    fn nil_and_empty_results_name_the_tool() {
        let mut ledger = Ledger::default();
        assert_eq!(
            ledger
                .record("eval_sexp", Input::Null, None, false, None, 1.0, None)
                .result,
            "eval_sexp returned no output"
        );
        assert_eq!(
            ledger
                .record(
                    "shell_exec",
                    cmd("true"),
                    Some("".into()),
                    false,
                    Some("t1"),
                    2.0,
                    Some(0.5)
                )
                .result,
            "shell_exec returned no output"
        );
        assert_eq!(
            ledger
                .record("x", Input::Null, Some(" \n".into()), false, None, 3.0, None)
                .result,
            "x returned no output"
        );
        let entry = ledger
            .record(
                "buffer_create",
                Input::Null,
                Some("ok".into()),
                false,
                None,
                4.0,
                None,
            )
            .clone();
        assert_eq!(entry.result, "ok");
        assert_eq!(ledger.entries().len(), 4);
        assert_eq!(ledger.entries()[1].todo.as_deref(), Some("t1"));
        assert_eq!(ledger.entries()[1].input.summary(), r#"{"command":"true"}"#);
        assert_eq!(ledger.entries()[1].duration, Some(0.5));
        assert!(ledger
            .entries()
            .iter()
            .all(|e| !e.error && !e.result.contains("executed successfully")));
        let text = report(ledger.entries(), &[], None, None, 100);
        assert!(
            text.contains("eval_sexp returned no output")
                && text.contains("shell_exec returned no output")
        );
        ledger.clear();
        assert!(ledger.entries().is_empty());
    }

    #[test]
    fn errors_are_flagged_or_start_with_error() {
        assert!(is_error(Some("Error: no such file"), false));
        assert!(is_error(Some("  Error in process"), false));
        assert!(is_error(Some("fine"), true));
        assert!(is_error(None, true));
        assert!(!is_error(Some("No Error here"), false));
        assert!(!is_error(Some("error lowercase is text"), false));
        assert!(!is_error(None, false));
        assert!(!is_error(Some(""), false));
        let mut ledger = Ledger::default();
        assert!(
            ledger
                .record(
                    "shell_exec",
                    cmd("false"),
                    Some("Error: exit 1".into()),
                    false,
                    None,
                    0.0,
                    None
                )
                .error
        );
    }

    #[test]
    fn truncation_keeps_a_prefix_and_names_the_full_length() {
        assert_eq!(truncate("short", 5), "short");
        assert_eq!(
            truncate("abcdef", 3),
            "abc\n[... truncated: 6 characters in all]"
        );
        assert_eq!(truncate("abc", 0), "\n[... truncated: 3 characters in all]");
        // Multibyte text is cut between characters, never inside one.
        let text = "é🙂ü".repeat(10);
        assert_eq!(
            truncate(&text, 4),
            "é🙂üé\n[... truncated: 30 characters in all]"
        );
        let long = "x".repeat(12345);
        let shown = report(
            &[Entry {
                tool: "read".into(),
                input: KeptInput::Summary(String::new()),
                result: long,
                error: false,
                todo: None,
                time: 0.0,
                duration: None,
                agent: None,
            }],
            &[],
            None,
            None,
            100,
        );
        assert!(shown.contains(&format!(
            "{}\n[... truncated: 12345 characters in all]",
            "x".repeat(100)
        )));
        assert!(!shown.contains(&"x".repeat(101)));
    }

    #[test]
    fn input_summary_is_compact_bounded_and_multibyte_safe() {
        let input = Input::Map(vec![
            (
                "a".into(),
                Input::Array(vec![
                    Input::Int(1),
                    Input::Float(1.5),
                    Input::Bool(true),
                    Input::Null,
                ]),
            ),
            ("b".into(), Input::Str("q\"\n".into())),
            ("c".into(), Input::Unsupported("buffer foo".into())),
        ]);
        assert_eq!(
            summarize_input(&input, 200),
            r##"{"a":[1,1.5,true,null],"b":"q\"\n","c":#<buffer foo>}"##
        );
        let long = Input::Str("🙂".repeat(1000));
        let summary = summarize_input(&long, 20);
        assert_eq!(summary.chars().count(), 20);
        assert!(summary.ends_with("..."));
        assert_eq!(summarize_input(&long, 2).chars().count(), 2);
        assert_eq!(summarize_input(&Input::Str("ab".into()), 4), "\"ab\"");
        // Deep nesting costs no more than the budget.
        let mut deep = Input::Null;
        for _ in 0..10_000 {
            deep = Input::Array(vec![deep]);
        }
        assert_eq!(summarize_input(&deep, 10), "[[[[[[[...");
    }

    #[test]
    fn small_inputs_are_kept_whole_and_large_ones_summarized_at_once() {
        let small = cmd("make test");
        assert_eq!(KeptInput::of(small.clone()), KeptInput::Whole(small));
        let long_text = Input::Map(vec![("content".into(), Input::Str("x".repeat(100_000)))]);
        let many_values = Input::Array(vec![Input::Int(1); 10_000]);
        for large in [long_text, many_values] {
            let summary = summarize_input(&large, INPUT_SUMMARY_CHARS);
            assert_eq!(KeptInput::of(large), KeptInput::Summary(summary));
        }
        // The weight counts every value and every byte of text, keys too.
        let at_limit = Input::Str("x".repeat(KEEP_WHOLE_WEIGHT - 1));
        assert!(matches!(KeptInput::of(at_limit), KeptInput::Whole(_)));
        let over = Input::Map(vec![(
            "k".into(),
            Input::Str("x".repeat(KEEP_WHOLE_WEIGHT - 2)),
        )]);
        assert!(matches!(KeptInput::of(over), KeptInput::Summary(_)));
    }

    #[test]
    fn report_has_results_in_order_then_summary_then_message_last() {
        let mut ledger = Ledger::default();
        ledger.record(
            "first_tool",
            cmd("a"),
            Some("RESULT ONE".into()),
            false,
            Some("t1"),
            1.0,
            Some(0.25),
        );
        ledger.record(
            "second_tool",
            cmd("b"),
            Some("Error: RESULT TWO".into()),
            false,
            Some("t2"),
            2.0,
            None,
        );
        let list = items(&[Status::Completed, Status::Cancelled, Status::Pending]);
        let text = report(
            ledger.entries(),
            &list,
            Some("All done."),
            Some("need the user's password"),
            1000,
        );
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle:?} missing from {text}"))
        };
        assert!(text.starts_with("[Session report: 2 tool calls, 1 error]"));
        assert!(
            at("--- 1. first_tool {\"command\":\"a\"} (during t1, 0.25s) ---\nRESULT ONE\n")
                < at("RESULT TWO")
        );
        assert!(at("(during t2, error) ---\nError: RESULT TWO") < at("Todo list: 1/3 done"));
        assert!(at("Done (1):\n  t1 Step 0\n") < at("Cancelled (1):\n  t2 Step 1\n"));
        assert!(
            at("Left open (1):\n  t3 [pending] Step 2\n")
                < at("Paused by the model: need the user's password")
        );
        assert!(at("Paused by the model") < at("Completion message:\nAll done.\n"));
        assert!(text.ends_with("All done.\n"));

        let without = report(ledger.entries(), &list, None, None, 1000);
        assert!(!without.contains("Completion message") && !without.contains("Paused"));
        assert!(text.starts_with(&without));
        assert!(report(&[], &[], None, None, 10)
            .contains("No tool calls were recorded.\n\nTodo list: no items."));
    }

    #[test]
    fn completion_with_open_items_is_refused_once_then_allowed() {
        let list = items(&[Status::Completed, Status::InProgress, Status::Pending]);
        let mut guard = CompletionGuard::default();
        let first = guard.complete(&[], &list, "Done", None, 100, ToolStyle::Todo);
        assert!(!first.allowed);
        assert!(first
            .text
            .starts_with("[session_complete refused: 2 todo items are still open]"));
        assert!(first
            .text
            .contains("  t2 [in_progress] Step 1\n  t3 [pending] Step 2\n"));
        assert!(!first.text.contains("t1 "));
        assert!(
            first.text.contains("cancelled with todo_write")
                && first.text.contains("call session_complete again")
        );
        let second = guard.complete(&[], &list, "Done", None, 100, ToolStyle::Todo);
        assert!(second.allowed);
        assert!(second.text.ends_with("Completion message:\nDone\n"));
        assert!(second.text.contains("Left open (2):"));
        guard.reset();
        assert!(
            !guard
                .complete(&[], &list, "Done", None, 100, ToolStyle::Todo)
                .allowed
        );
    }

    #[test]
    fn the_completion_refusal_names_the_tools_of_the_style() {
        let list = items(&[Status::InProgress, Status::Pending]);
        for style in ToolStyle::ALL {
            let refusal = CompletionGuard::default()
                .complete(&[], &list, "Done", None, 100, style)
                .text;
            let (todo, task) = (
                refusal.contains("todo_write"),
                refusal.contains("TaskUpdate"),
            );
            let named_right = match style {
                ToolStyle::Todo => todo && !task,
                ToolStyle::Tasks => task && !todo,
                ToolStyle::Both => todo || task,
            };
            assert!(named_right, "{style:?}: {refusal}");
        }
    }

    #[test]
    fn completion_with_nothing_open_is_allowed_at_once() {
        let mut guard = CompletionGuard::default();
        for list in [items(&[]), items(&[Status::Completed, Status::Cancelled])] {
            let done = guard.complete(&[], &list, "Finished", None, 100, ToolStyle::Todo);
            assert!(done.allowed, "{}", done.text);
            assert_eq!(done.text, report(&[], &list, Some("Finished"), None, 100));
        }
        assert!(!guard.refused());
    }

    #[test]
    fn scripted_run_keeps_every_result() {
        let mut ledger = Ledger::default();
        let mut list = items(&[Status::Pending; 5]);
        let mut results = Vec::new();
        for call in 0..12 {
            let item = call * 5 / 12;
            list[item].set_status(Status::InProgress, call as f64);
            let result = match call {
                4 => None,
                7 => Some("Error: file not found".to_string()),
                n => Some(format!("output of call {n}")),
            };
            let todo = list[item].id.clone();
            ledger.record(
                "shell_exec",
                cmd(&format!("step {call}")),
                result.clone(),
                false,
                Some(&todo),
                call as f64,
                Some(0.1),
            );
            results.push(result);
            if (call + 1) * 5 / 12 != item || call == 11 {
                list[item].set_status(Status::Completed, call as f64);
            }
        }
        assert_eq!(Counts::of(&list).completed, 5);
        let mut guard = CompletionGuard::default();
        let done = guard.complete(
            ledger.entries(),
            &list,
            "Built and tested.",
            None,
            4000,
            ToolStyle::Todo,
        );
        assert!(done.allowed);
        for result in results.iter().flatten() {
            assert!(done.text.contains(result.as_str()), "{result} missing");
        }
        assert!(done.text.contains("shell_exec returned no output"));
        assert!(done
            .text
            .contains("[Session report: 12 tool calls, 1 error]"));
        assert!(done.text.contains("Todo list: 5/5 done\nDone (5):\n  t1 Step 0\n  t2 Step 1\n  t3 Step 2\n  t4 Step 3\n  t5 Step 4\n"));
        assert!(!done.text.contains("Left open"));
        assert!(done.text.ends_with("Built and tested.\n"));
    }

    /// A deliberately simple reference for `summarize_input`: the whole
    /// text built by plain recursion, then cut.  It shares nothing with the
    /// bounded printer, which stops early and copies runs of plain text.
    fn reference_summary(input: &Input, max_chars: usize) -> String {
        fn quoted(text: &str) -> String {
            let body: String = text
                .chars()
                .map(|c| match c {
                    '"' => "\\\"".to_string(),
                    '\\' => "\\\\".to_string(),
                    '\n' => "\\n".to_string(),
                    '\r' => "\\r".to_string(),
                    '\t' => "\\t".to_string(),
                    c if c.is_control() => format!("\\u{:04x}", c as u32),
                    c => c.to_string(),
                })
                .collect();
            format!("\"{body}\"")
        }
        fn whole(input: &Input) -> String {
            let joined = |parts: Vec<String>| parts.join(",");
            match input {
                Input::Null => "null".to_string(),
                Input::Bool(b) => b.to_string(),
                Input::Int(n) => n.to_string(),
                Input::Float(x) => x.to_string(),
                Input::Str(s) => quoted(s),
                Input::Array(items) => format!("[{}]", joined(items.iter().map(whole).collect())),
                Input::Map(pairs) => format!(
                    "{{{}}}",
                    joined(
                        pairs
                            .iter()
                            .map(|(k, v)| format!("{}:{}", quoted(k), whole(v)))
                            .collect()
                    )
                ),
                Input::Unsupported(what) => format!("#<{what}>"),
                Input::Invalid(why) => format!("#<invalid: {why}>"),
            }
        }
        let text = whole(input);
        if text.chars().count() <= max_chars {
            return text;
        }
        let ellipsis = if max_chars >= 3 { "..." } else { "" };
        let mut cut: String = text.chars().take(max_chars - ellipsis.len()).collect();
        cut.push_str(ellipsis);
        cut
    }

    fn arb_summarized() -> impl Strategy<Value = Input> {
        let leaf = prop_oneof![
            Just(Input::Null),
            any::<i64>().prop_map(Input::Int),
            any::<f64>().prop_map(Input::Float),
            r#"(?s)[a"\\\n\t\r\x01\x7f\x{85}é🙂 ]{0,30}"#.prop_map(Input::Str),
            "[a-z]{0,8}".prop_map(Input::Unsupported),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Input::Array),
                prop::collection::vec((r#"(?s)[a"\\\n🙂]{0,4}"#, inner), 0..4)
                    .prop_map(Input::map_of),
            ]
        })
    }

    proptest! {
        #[test]
        fn input_summary_agrees_with_the_reference(input in arb_summarized(), max_chars in 0usize..80) {
            prop_assert_eq!(summarize_input(&input, max_chars), reference_summary(&input, max_chars));
        }

        #[test]
        fn a_kept_input_shows_the_summary_it_would_have_had(input in arb_summarized()) {
            let kept = KeptInput::of(input.clone());
            prop_assert_eq!(kept.summary(), summarize_input(&input, INPUT_SUMMARY_CHARS));
        }

        #[test]
        fn report_contains_every_result_in_order(
            calls in prop::collection::vec(
                ("[a-z_]{0,8}", prop::option::of("(?s).{0,40}"), any::<bool>()), 0..12),
            max in 0usize..30,
        ) {
            let mut ledger = Ledger::default();
            for (tool, result, flagged) in &calls {
                ledger.record(tool, Input::Null, result.clone(), *flagged, None, 0.0, None);
            }
            let text = report(ledger.entries(), &[], Some("bye"), None, max);
            let mut from = 0;
            for entry in ledger.entries() {
                prop_assert!(!entry.result.trim().is_empty());
                let expected = truncate(&entry.result, max);
                let found = text[from..].find(expected.as_ref());
                prop_assert!(found.is_some(), "{:?} not found after {} in {:?}", expected, from, text);
                from += found.unwrap_or(0) + expected.len();
            }
            prop_assert!(text.ends_with("bye\n"));
        }
    }
}

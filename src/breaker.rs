//! The circuit breaker: stops an agent loop that no longer makes progress.
//!
//! The breaker sees every finished tool call of a session and decides whether
//! the loop may go on.  It is pure: the caller says what the call was (tool,
//! fingerprint of its input, error text, whether it completed an item, whether
//! it was a todo_write that changed nothing) and gets back a verdict.  Its
//! texts name only the tools of the style in its limits.
//!
//! Rules (a limit of 0 turns its rule off).  Counts include the call being
//! recorded.  The count rules (`without_progress`, `same_tool`, `identical`)
//! refuse, before it runs, the call that would exceed the limit, and only a
//! call of that kind: with the default 3, a fourth identical call is refused
//! and any other call goes ahead.  A model that asks for refused calls
//! `MAX_REFUSALS_IN_ROW` times in a row trips the breaker.  The rules that
//! judge results (`error_trip`, `oscillation`, `churn`) and the hard cap
//! trip on the call that brings their count to the limit.
//!
//! - `without_progress` (30): calls since the last call that completed a todo
//!   item.  Completing an item is the only thing that refills this budget;
//!   the todo tools themselves are never refused by it.
//! - `same_tool` (15): calls of one tool *in a row*.  Efrit counts consecutive
//!   calls (its counter restarts at 1 whenever another tool is called), so a
//!   long task that interleaves tools is never stopped by this rule; it only
//!   catches a model stuck hammering one tool.
//! - Planning is progress: a successful `PLANNING_TOOL` call unlike the call
//!   before is a plan being written one task per call.  Neither
//!   `same_tool` nor `without_progress` counts it, and it gets no warning
//!   about them; the same call again is still the `identical` rule's.
//! - `identical` (3): calls in a row with the same tool and the same input
//!   (equal fingerprints).
//! - `error_warn` / `error_trip` (3 / 5): the same error in a row.  As in
//!   Efrit, a successful call clears the count and a different error restarts
//!   it at 1; error texts are compared after blanking what varies between two
//!   runs of one failure (`#<...>` object printings and `line N` numbers).
//! - `oscillation` (6): the last N calls alternate between two distinct calls
//!   (A B A B A B, each with an unchanged input).  A B C A B C never counts.
//! - `churn` (3): todo_writes in a row that changed nothing.  Any other call,
//!   including a todo_write that changed something, ends the run.
//! - `hard_cap` (100): calls in the session, whatever the progress.
//!
//! Warnings ride on the tool result so the model can change course before the
//! trip:
//!
//! - the counting budgets (`without_progress`, `hard_cap`) warn when 3 or fewer
//!   calls are left;
//! - `same_tool` warns when a third of its limit or less is left (from the
//!   10th call in a row at the default 15, Efrit's own warning threshold);
//! - `error_trip` warns from `error_warn` occurrences on;
//! - the pattern rules warn one step before the trip (`identical`, `churn`)
//!   or two steps (`oscillation`, from A B A B on), and only once the pattern
//!   is really there (two identical calls, three alternating calls).
//!
//! When several rules trip on one call, the most specific reason is given
//! (identical, error, oscillation, churn, same tool, no progress, hard cap),
//! because it tells the user best what went wrong.  When several warn, all
//! warnings are given, one per line.
//!
//! Once tripped, the breaker refuses every call until `reset`.  Refusal and
//! trip texts start with "Error: ": Efrit marks a refusal as an error only
//! when its text starts that way, and a refusal must never look like success.

use crate::validate::{Input, ToolStyle};

/// Tools that manage the list itself: never work on an item, and never
/// refused for want of progress, since they are how progress is recorded.
pub const TODO_TOOLS: [&str; 5] = [
    "todo_write",
    "TaskCreate",
    "TaskUpdate",
    "todo_pause",
    "session_complete",
];

/// The tool that makes one task per call: a run of its calls, each unlike
/// the one before, is a plan being written, not a loop.
pub const PLANNING_TOOL: &str = "TaskCreate";

/// Refused calls in a row after which the breaker trips: a model that asks
/// again for what was just refused is stuck.
pub const MAX_REFUSALS_IN_ROW: u32 = 2;

/// The limits of the breaker; see the module documentation for their meaning.
/// A limit of 0 turns its rule off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerLimits {
    pub without_progress: u32,
    pub same_tool: u32,
    pub identical: u32,
    pub error_warn: u32,
    pub error_trip: u32,
    pub oscillation: u32,
    pub churn: u32,
    pub hard_cap: u32,
    /// Not a limit: the tools the model is offered, which the texts name.
    pub style: ToolStyle,
}

impl Default for BreakerLimits {
    /// Efrit's defaults for the rules Efrit has, and for the others limits
    /// that no sane loop reaches: 6 alternating calls is three full A B
    /// cycles, and 100 calls is far beyond any task Efrit runs in one session.
    fn default() -> Self {
        BreakerLimits {
            without_progress: 30,
            same_tool: 15,
            identical: 3,
            error_warn: 3,
            error_trip: 5,
            oscillation: 6,
            churn: 3,
            hard_cap: 100,
            style: ToolStyle::Todo,
        }
    }
}

/// One finished tool call as the breaker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call<'a> {
    pub tool: &'a str,
    /// `fingerprint(tool, input)`; equal fingerprints mean an identical call.
    pub fingerprint: u64,
    /// The error text when the call failed.
    pub error: Option<&'a str>,
    /// An item was completed by this call.
    pub progress: bool,
    /// A todo_write that changed nothing.
    pub unchanged_write: bool,
}

/// What the loop should do after a recorded call.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Nothing to say.
    Go,
    /// Text to append to the tool result; the loop goes on.
    Warn(String),
    /// The breaker tripped; the text (starting "Error: ") goes on the tool
    /// result and the loop must end with the report.
    Trip(String),
}

/// A snapshot of the breaker for display (`efrit-todo-breaker`), and as
/// the state file records it.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct BreakerState {
    pub tripped: bool,
    /// Why the breaker tripped, without the "Error: " framing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Calls in the session.
    pub calls: u32,
    /// Calls since the last one that completed an item.
    pub since_progress: u32,
    /// Calls of the last tool in a row.
    pub same_tool: u32,
    /// Identical calls in a row.
    pub identical: u32,
    /// Occurrences of the last error in a row.
    pub errors: u32,
    /// todo_writes in a row that changed nothing.
    pub churn: u32,
    /// Length of the current run of calls alternating between two calls.
    pub oscillation: u32,
}

/// A call as remembered for the pattern rules: tool and input fingerprint.
type Key = (String, u64);

/// The per-session breaker.  `Default` is a fresh breaker.
#[derive(Debug, Clone, Default)]
pub struct Breaker {
    reason: Option<String>,
    calls: u32,
    since_progress: u32,
    same_tool: u32,
    identical: u32,
    errors: u32,
    churn: u32,
    oscillation: u32,
    /// Calls refused in a row since the last call that ran.
    refused: u32,
    /// The last call and the one before it.
    last: Option<Key>,
    before_last: Option<Key>,
    /// Fingerprint of the normalized text of the last error in the current run.
    last_error: Option<u64>,
    /// Calls the session's other agents made, which its hard cap counts
    /// with this breaker's own.
    elsewhere: u32,
}

/// How many calls before a counting budget runs out the warnings start.
const BUDGET_WARN_WITHIN: u32 = 3;

/// Longest stretch of an error text quoted in a trip reason; error texts can
/// be whole backtraces.
const ERROR_QUOTE_CHARS: usize = 150;

fn plural(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// "N todo_writes", or "N more todo_writes" with MORE: writes to the
/// list, named by the tools of STYLE that write it.
fn writes(n: u32, more: bool, style: ToolStyle) -> String {
    let (one, many) = match style {
        ToolStyle::Todo => ("todo_write", "todo_writes"),
        ToolStyle::Tasks => ("TaskUpdate call", "TaskUpdate calls"),
        ToolStyle::Both => (
            "todo_write or TaskUpdate call",
            "todo_write or TaskUpdate calls",
        ),
    };
    let more = if more { "more " } else { "" };
    format!("{n} {more}{}", if n == 1 { one } else { many })
}

fn trip_text(reason: &str) -> String {
    format!("Error: circuit breaker tripped: {reason}. No further tool calls will run; the session ends with the report.")
}

/// Whether a rule with LIMIT is reached at COUNT.
fn reached(count: u32, limit: u32) -> bool {
    limit > 0 && count >= limit
}

/// Whether COUNT is within WINDOW calls of LIMIT without having reached it.
fn within(count: u32, limit: u32, window: u32) -> bool {
    limit > 0 && count < limit && limit - count <= window
}

impl Breaker {
    pub fn tripped(&self) -> bool {
        self.reason.is_some()
    }

    /// The refusal text for a call about to run, or None to let it run.  A
    /// tripped breaker refuses everything.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        self.reason.as_ref().map(|reason| {
            format!(
                "Error: {tool} was not run: circuit breaker tripped: {reason}. No further tool calls will run; the session ends with the report."
            )
        })
    }

    /// Whether some call could be refused now: the breaker tripped, or a
    /// count rule stands at its limit.  While not, `check` lets every call
    /// run, so callers may skip it.
    pub fn armed(&self, limits: &BreakerLimits) -> bool {
        self.reason.is_some()
            || reached(self.session_calls(), limits.hard_cap)
            || reached(self.identical, limits.identical)
            || reached(self.same_tool, limits.same_tool)
            || reached(self.since_progress, limits.without_progress)
    }

    /// Decides on a call of TOOL with input FINGERPRINT before it runs: None
    /// to let it run, or the refusal.  A count rule refuses the call that
    /// would take it past its limit; refusing `MAX_REFUSALS_IN_ROW` calls in
    /// a row trips the breaker.
    pub fn check(
        &mut self,
        tool: &str,
        fingerprint: u64,
        limits: &BreakerLimits,
    ) -> Option<String> {
        if self.reason.is_some() {
            return self.refusal(tool);
        }
        // Other agents' calls can bring the session to its hard cap
        // between two calls of this one.
        if reached(self.session_calls(), limits.hard_cap) {
            self.reason = Some(self.hard_cap_reason(limits));
            return self.refusal(tool);
        }
        let rule = self.exceeded_by(tool, fingerprint, limits)?;
        self.refused = self.refused.saturating_add(1);
        if self.refused >= MAX_REFUSALS_IN_ROW {
            self.reason = Some(format!(
                "{rule}, and {} refused calls came in a row",
                self.refused
            ));
            return self.refusal(tool);
        }
        Some(format!(
            "Error: {tool} was not run: {rule}. Do something different; another call the breaker refuses ends the session."
        ))
    }

    /// The count rule a call of TOOL with FINGERPRINT would break, if any.
    fn exceeded_by(&self, tool: &str, fingerprint: u64, limits: &BreakerLimits) -> Option<String> {
        let last_tool = self.last.as_ref().filter(|(last, _)| last == tool);
        if let Some((_, last)) = last_tool {
            if *last == fingerprint && reached(self.identical, limits.identical) {
                return Some(format!(
                    "it would be the same call to {tool} {} times in a row (limit {})",
                    self.identical + 1,
                    limits.identical
                ));
            }
            if reached(self.same_tool, limits.same_tool) {
                return Some(format!(
                    "it would be call {} to {tool} in a row (limit {})",
                    self.same_tool + 1,
                    limits.same_tool
                ));
            }
        }
        if reached(self.since_progress, limits.without_progress) && !TODO_TOOLS.contains(&tool) {
            return Some(format!(
                "{} without completing a todo item (limit {}); mark the finished item completed with {}, or call todo_pause",
                plural(self.since_progress, "tool call has run", "tool calls have run"),
                limits.without_progress,
                limits.style.update_tool()
            ));
        }
        None
    }

    /// Records a finished call; returns Go, a warning to append to the result,
    /// or Trip (after which refusal() is Some).
    pub fn record(&mut self, call: &Call, limits: &BreakerLimits) -> Verdict {
        if let Some(reason) = &self.reason {
            // The caller should have refused this call; say so again rather
            // than count a call that should not have run.
            return Verdict::Trip(trip_text(reason));
        }
        self.refused = 0;
        let planning = self.count(call);
        match self.trip_reason(call, limits) {
            Some(reason) => {
                let text = trip_text(&reason);
                self.reason = Some(reason);
                Verdict::Trip(text)
            }
            None => {
                let warnings = self.warnings(call, limits, planning);
                if warnings.is_empty() {
                    Verdict::Go
                } else {
                    Verdict::Warn(warnings.join("\n"))
                }
            }
        }
    }

    pub fn state(&self) -> BreakerState {
        BreakerState {
            tripped: self.reason.is_some(),
            reason: self.reason.clone(),
            calls: self.calls,
            since_progress: self.since_progress,
            same_tool: self.same_tool,
            identical: self.identical,
            errors: self.errors,
            churn: self.churn,
            oscillation: self.oscillation,
        }
    }

    /// Back to a fresh breaker: counts, patterns and the trip all go.
    pub fn reset(&mut self) {
        *self = Breaker::default();
    }

    /// Updates every counter for CALL; returns whether it was planning: a
    /// successful PLANNING_TOOL call unlike the one before, which neither
    /// the same-tool rule nor the progress budget counts (a plan made one
    /// task per call costs what one todo_write of the whole plan does).
    fn count(&mut self, call: &Call) -> bool {
        let is_this_call = |key: &Option<Key>| {
            key.as_ref()
                .is_some_and(|(tool, fp)| tool == call.tool && *fp == call.fingerprint)
        };
        let identical = is_this_call(&self.last);
        let planning = call.tool == PLANNING_TOOL && call.error.is_none() && !identical;
        self.calls = self.calls.saturating_add(1);
        self.since_progress = if call.progress {
            0
        } else if planning {
            self.since_progress
        } else {
            self.since_progress.saturating_add(1)
        };

        let same_tool = self
            .last
            .as_ref()
            .is_some_and(|(tool, _)| tool == call.tool);
        self.same_tool = if planning {
            0
        } else if same_tool {
            self.same_tool.saturating_add(1)
        } else {
            1
        };
        self.identical = if identical {
            self.identical.saturating_add(1)
        } else {
            1
        };

        // The alternation run: a call that differs from the last one and
        // repeats the one before it extends the run; a call that differs from
        // both starts a new candidate pair (run 2); a repeat of the last call
        // is the identical rule's business and ends the run.
        self.oscillation = match &self.last {
            None => 1,
            Some(_) if identical => 1,
            Some(_) if is_this_call(&self.before_last) => self.oscillation.saturating_add(1),
            Some(_) => 2,
        };

        self.errors = match call.error {
            None => {
                self.last_error = None;
                0
            }
            Some(text) => {
                let hash = error_hash(text);
                let same = self.last_error == Some(hash);
                self.last_error = Some(hash);
                if same {
                    self.errors.saturating_add(1)
                } else {
                    1
                }
            }
        };

        self.churn = if call.unchanged_write {
            self.churn.saturating_add(1)
        } else {
            0
        };

        // The call before last is forgotten now; its buffer takes this call's name.
        let mut tool = self
            .before_last
            .take()
            .map(|(tool, _)| tool)
            .unwrap_or_default();
        tool.clear();
        tool.push_str(call.tool);
        self.before_last = self.last.replace((tool, call.fingerprint));
        planning
    }

    /// The two calls of the current alternation, for the texts.
    fn pair(&self) -> (String, String) {
        let name = |k: &Option<Key>| k.as_ref().map(|(tool, _)| tool.clone()).unwrap_or_default();
        (name(&self.before_last), name(&self.last))
    }

    fn trip_reason(&self, call: &Call, limits: &BreakerLimits) -> Option<String> {
        if reached(self.errors, limits.error_trip) {
            let text = call.error.unwrap_or_default().trim();
            let quoted: String = text.chars().take(ERROR_QUOTE_CHARS).collect();
            let ellipsis = if text.chars().count() > ERROR_QUOTE_CHARS {
                "..."
            } else {
                ""
            };
            return Some(format!(
                "the same error {} times in a row (limit {}): {quoted}{ellipsis}",
                self.errors, limits.error_trip
            ));
        }
        if reached(self.oscillation, limits.oscillation) {
            let (a, b) = self.pair();
            return Some(format!(
                "{} calls alternating between the same {a} and {b} calls (limit {})",
                self.oscillation, limits.oscillation
            ));
        }
        if reached(self.churn, limits.churn) {
            return Some(format!(
                "{} in a row that changed nothing (limit {})",
                writes(self.churn, false, limits.style),
                limits.churn
            ));
        }
        if reached(self.session_calls(), limits.hard_cap) {
            return Some(self.hard_cap_reason(limits));
        }
        None
    }

    fn hard_cap_reason(&self, limits: &BreakerLimits) -> String {
        format!(
            "{} tool calls in this session (hard cap {})",
            self.session_calls(),
            limits.hard_cap
        )
    }

    /// This agent's calls and the other agents', which the hard cap counts.
    fn session_calls(&self) -> u32 {
        self.calls.saturating_add(self.elsewhere)
    }

    /// The calls this breaker counted itself.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Tells the breaker how many calls the session's other agents made:
    /// each agent has its own counters, and the hard cap counts them all.
    pub fn set_calls_elsewhere(&mut self, calls: u32) {
        self.elsewhere = calls;
    }

    /// The warnings after CALL; a PLANNING call spent no budget, so it
    /// gets none about the budgets.
    fn warnings(&self, call: &Call, limits: &BreakerLimits, planning: bool) -> Vec<String> {
        let tool = call.tool;
        let mut out = Vec::new();
        if self.identical >= 2 && reached(self.identical, limits.identical) {
            out.push(format!(
                "Warning: {tool} has run {} times in a row with this same input (limit {}): the same call again will be refused. Do something different.",
                self.identical, limits.identical
            ));
        }
        if self.errors > 0
            && limits.error_warn > 0
            && self.errors >= limits.error_warn
            && (limits.error_trip == 0 || self.errors < limits.error_trip)
        {
            let trips = if limits.error_trip == 0 {
                String::new()
            } else {
                format!(
                    " {} of it trips the circuit breaker (limit {}).",
                    plural(
                        limits.error_trip - self.errors,
                        "more occurrence",
                        "more occurrences"
                    ),
                    limits.error_trip
                )
            };
            out.push(format!(
                "Warning: the same error has occurred {} times in a row.{trips} The same approach keeps failing: try a completely different one.",
                self.errors
            ));
        }
        let oscillation_from = limits.oscillation.saturating_sub(2).max(3);
        if self.oscillation >= oscillation_from && within(self.oscillation, limits.oscillation, 2) {
            let (a, b) = self.pair();
            out.push(format!(
                "Warning: {} alternating between the same {a} and {b} calls trip the circuit breaker: the last {} calls went back and forth (limit {}). Break the cycle.",
                plural(limits.oscillation - self.oscillation, "more call", "more calls"),
                self.oscillation,
                limits.oscillation
            ));
        }
        if self.churn > 0 && within(self.churn, limits.churn, 1) {
            out.push(format!(
                "Warning: {} that changes nothing trips the circuit breaker: {} in a row changed nothing (limit {}). Do the work of the current item instead of rewriting the list.",
                writes(limits.churn - self.churn, true, limits.style),
                writes(self.churn, false, limits.style),
                limits.churn
            ));
        }
        if reached(self.same_tool, limits.same_tool) && self.same_tool > 1 {
            out.push(format!(
                "Warning: {tool} has been called {} times in a row (limit {}): another call of it will be refused. Vary your approach.",
                self.same_tool, limits.same_tool
            ));
        } else if within(self.same_tool, limits.same_tool, limits.same_tool / 3) {
            out.push(format!(
                "Warning: {} left before further calls to {tool} are refused: it has been called {} times in a row (limit {}). Vary your approach.",
                plural(limits.same_tool - self.same_tool, "call of it", "calls of it"),
                self.same_tool,
                limits.same_tool
            ));
        }
        if planning {
            // Nothing to say about the budgets: this call spent none.
        } else if reached(self.since_progress, limits.without_progress) {
            out.push(format!(
                "Warning: {} without completing a todo item (limit {}): other tools will be refused until you mark the finished item completed with {}, or stop with todo_pause.",
                plural(self.since_progress, "tool call has run", "tool calls have run"),
                limits.without_progress,
                limits.style.update_tool()
            ));
        } else if within(
            self.since_progress,
            limits.without_progress,
            BUDGET_WARN_WITHIN,
        ) {
            out.push(format!(
                "Warning: {} left before tool calls are refused: {} without completing a todo item (limit {}). Finish the current item and mark it completed, or stop and report.",
                plural(limits.without_progress - self.since_progress, "call", "calls"),
                plural(self.since_progress, "has run", "have run"),
                limits.without_progress
            ));
        }
        if within(self.session_calls(), limits.hard_cap, BUDGET_WARN_WITHIN) {
            out.push(format!(
                "Warning: {} left before the circuit breaker trips because the session has made {} tool calls (hard cap {}). Wrap up and report.",
                plural(limits.hard_cap - self.session_calls(), "call", "calls"),
                self.session_calls(),
                limits.hard_cap
            ));
        }
        out
    }
}

/// A 64-bit hash taking eight bytes a step (FxHash's step: rotate, xor,
/// multiply), where FNV took one: a fingerprint is computed on every tool
/// call, over the whole input.  Defined here, unlike std's `DefaultHasher`,
/// so that its output is the same on every Rust version.
struct Mixer(u64);

impl Mixer {
    fn new() -> Mixer {
        Mixer(0)
    }
    fn u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    /// The last word is padded with zeros; callers hash lengths first, or
    /// hash single tag bytes, so padding cannot make two inputs alike.
    fn bytes(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        let mut word = [0u8; 8];
        for chunk in &mut chunks {
            word.copy_from_slice(chunk);
            self.u64(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.u64(u64::from_le_bytes(word));
        }
    }
    /// Length first, so that ("ab", "c") and ("a", "bc") differ.
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

/// Stable fingerprint of a tool call: tool name plus input, objects compared
/// by content (key order ignored), so two hash tables with the same pairs give
/// the same fingerprint.
pub fn fingerprint(tool: &str, input: &Input) -> u64 {
    let mut h = Mixer::new();
    h.str(tool);
    h.u64(input_hash(input));
    h.0
}

/// Each variant gets its own tag so that, say, the string "1" and the integer
/// 1 differ.  An object hashes its (key, value-hash) pairs sorted, which makes
/// the order of pairs irrelevant even when a key repeats.
fn input_hash(input: &Input) -> u64 {
    let mut h = Mixer::new();
    match input {
        Input::Null => h.bytes(&[0]),
        Input::Bool(b) => h.bytes(&[1, u8::from(*b)]),
        Input::Int(n) => {
            h.bytes(&[2]);
            h.u64(*n as u64);
        }
        Input::Float(x) => {
            h.bytes(&[3]);
            h.u64(x.to_bits());
        }
        Input::Str(s) => {
            h.bytes(&[4]);
            h.str(s);
        }
        Input::Array(items) => {
            h.bytes(&[5]);
            h.u64(items.len() as u64);
            for item in items {
                h.u64(input_hash(item));
            }
        }
        Input::Map(pairs) => {
            // Sorted so that key order does not matter; the few keys of a
            // typical tool input are sorted on the stack.
            let mut few = [("", 0u64); 8];
            let mut many = Vec::new();
            let hashed: &mut [(&str, u64)] = if pairs.len() <= few.len() {
                for (slot, (k, v)) in few.iter_mut().zip(pairs) {
                    *slot = (k.as_ref(), input_hash(v));
                }
                &mut few[..pairs.len()]
            } else {
                many.extend(pairs.iter().map(|(k, v)| (k.as_ref(), input_hash(v))));
                &mut many
            };
            hashed.sort_unstable();
            h.bytes(&[6]);
            h.u64(hashed.len() as u64);
            for (key, value) in hashed.iter() {
                h.str(key);
                h.u64(*value);
            }
        }
        Input::Unsupported(what) => {
            h.bytes(&[7]);
            h.str(what);
        }
        Input::Invalid(why) => {
            h.bytes(&[8]);
            h.str(why);
        }
    }
    h.0
}

/// Blanks the parts of an error text that differ between two runs of the same
/// failure: printed objects `#<...>` (buffers, markers, addresses) and the
/// number after "line ".  Surrounding whitespace does not count either.
fn normalize_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("#<") {
            if let Some(end) = after.find('>') {
                out.push_str("#<>");
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("line ") {
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                out.push_str("line N");
                rest = &after[digits..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn error_hash(text: &str) -> u64 {
    let mut h = Mixer::new();
    h.str(&normalize_error(text));
    h.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn call(tool: &str, fingerprint: u64) -> Call<'_> {
        Call {
            tool,
            fingerprint,
            error: None,
            progress: false,
            unchanged_write: false,
        }
    }

    /// A call that no rule but the counting budgets notices: the tool and
    /// input change every time.
    fn varied(i: u32) -> Call<'static> {
        const TOOLS: [&str; 3] = ["read_file", "eval_sexp", "shell"];
        call(TOOLS[(i % 3) as usize], u64::from(i))
    }

    fn failing<'a>(tool: &'a str, fingerprint: u64, error: &'a str) -> Call<'a> {
        Call {
            error: Some(error),
            ..call(tool, fingerprint)
        }
    }

    fn progress(i: u32) -> Call<'static> {
        Call {
            progress: true,
            ..call("todo_write", 10_000 + u64::from(i))
        }
    }

    fn unchanged_write() -> Call<'static> {
        Call {
            unchanged_write: true,
            ..call("todo_write", 7)
        }
    }

    fn is_go(v: &Verdict) -> bool {
        *v == Verdict::Go
    }
    fn trip_text_of(v: &Verdict) -> &str {
        match v {
            Verdict::Trip(text) => text,
            other => panic!("expected a trip, got {other:?}"),
        }
    }
    fn warn_text_of(v: &Verdict) -> &str {
        match v {
            Verdict::Warn(text) => text,
            other => panic!("expected a warning, got {other:?}"),
        }
    }

    /// Records CALLS; returns the verdicts.
    fn run(b: &mut Breaker, limits: &BreakerLimits, calls: &[Call]) -> Vec<Verdict> {
        calls.iter().map(|c| b.record(c, limits)).collect()
    }

    #[test]
    fn defaults_match_efrit() {
        let l = BreakerLimits::default();
        assert_eq!(
            (
                l.without_progress,
                l.same_tool,
                l.identical,
                l.error_warn,
                l.error_trip,
                l.oscillation,
                l.churn,
                l.hard_cap
            ),
            (30, 15, 3, 3, 5, 6, 3, 100)
        );
    }

    #[test]
    fn fresh_breaker_lets_calls_run() {
        let b = Breaker::default();
        assert_eq!(b.refusal("read_file"), None);
        assert_eq!(b.state(), BreakerState::default());
    }

    #[test]
    fn no_progress_warns_then_refuses_the_thirty_first_call_but_not_todo_tools() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 1..=26 {
            assert!(is_go(&b.record(&varied(i), &limits)), "call {i}");
        }
        for (i, left) in [
            (27, "3 calls left"),
            (28, "2 calls left"),
            (29, "1 call left"),
        ] {
            let v = b.record(&varied(i), &limits);
            let text = warn_text_of(&v);
            assert!(text.starts_with("Warning: "), "{text}");
            assert!(text.contains(left), "{text}");
            assert!(
                text.contains(&format!(
                    "{i} have run without completing a todo item (limit 30)"
                )),
                "{text}"
            );
            assert_eq!(b.check("shell", 1, &limits), None);
        }
        // The thirtieth call runs; the next one would exceed the limit.
        let text = warn_text_of(&b.record(&varied(30), &limits)).to_string();
        assert!(text.contains("30 tool calls have run without completing a todo item (limit 30): other tools will be refused"), "{text}");
        assert!(b.armed(&limits) && !b.state().tripped);
        // The todo tools go ahead: they are how progress is made.
        assert_eq!(b.check("todo_write", 5, &limits), None);
        let refusal = b.check("shell", 31, &limits).expect("refused");
        assert!(refusal.starts_with("Error: shell was not run: 30 tool calls have run without completing a todo item (limit 30)"), "{refusal}");
        assert!(!b.state().tripped, "one refusal is no trip");
        // Progress recorded: calls run again.
        assert!(is_go(&b.record(&progress(1), &limits)));
        assert_eq!(b.check("shell", 31, &limits), None);
        assert!(!b.armed(&limits));
    }

    #[test]
    fn a_second_refused_call_in_a_row_trips() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let c = call("read_file", 42);
        run(&mut b, &limits, &[c, c, c]);
        assert!(b.check("read_file", 42, &limits).is_some());
        let text = b.check("read_file", 42, &limits).expect("refused");
        assert!(
            text.starts_with("Error: read_file was not run: circuit breaker tripped: it would be the same call to read_file 4 times in a row (limit 3), and 2 refused calls came in a row."),
            "{text}"
        );
        assert!(b.state().tripped);
        // A call that runs in between ends the run of refusals.
        let mut b = Breaker::default();
        run(&mut b, &limits, &[c, c, c]);
        assert!(b.check("read_file", 42, &limits).is_some());
        assert_eq!(b.check("shell", 1, &limits), None);
        b.record(&call("shell", 1), &limits);
        run(&mut b, &limits, &[c, c, c]);
        assert!(b.check("read_file", 42, &limits).is_some());
        assert!(!b.state().tripped);
    }
    #[test]
    fn progress_refills_the_no_progress_budget() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 1..=29 {
            b.record(&varied(i), &limits);
        }
        assert!(is_go(&b.record(&progress(1), &limits)));
        assert_eq!(b.state().since_progress, 0);
        assert_eq!(b.state().calls, 30);
        for i in 1..=30 {
            assert_eq!(b.check("shell", u64::from(i), &limits), None, "call {i}");
            assert!(
                !matches!(b.record(&varied(i), &limits), Verdict::Trip(_)),
                "call {i}"
            );
        }
        assert!(b.check("shell", 99, &limits).is_some());
    }
    #[test]
    fn progress_refills_nothing_else() {
        // Same tool: progress made by the tool itself does not end its run.
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 0..15 {
            let c = Call {
                progress: true,
                ..call("todo_write", i)
            };
            assert!(!matches!(b.record(&c, &limits), Verdict::Trip(_)));
        }
        let text = b.check("todo_write", 99, &limits).expect("refused");
        assert!(
            text.contains("it would be call 16 to todo_write in a row (limit 15)"),
            "{text}"
        );

        // Identical: progress does not excuse repeating a call.
        let mut b = Breaker::default();
        let c = Call {
            progress: true,
            ..call("todo_write", 1)
        };
        run(&mut b, &limits, &[c, c, c]);
        let text = b.check("todo_write", 1, &limits).expect("refused");
        assert!(
            text.contains("the same call to todo_write 4 times in a row"),
            "{text}"
        );
    }
    #[test]
    fn hard_cap_holds_whatever_the_progress() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 1..=96 {
            let c = if i % 2 == 0 { progress(i) } else { varied(i) };
            assert!(is_go(&b.record(&c, &limits)), "call {i}");
        }
        for (i, left) in [
            (97, "3 calls left"),
            (98, "2 calls left"),
            (99, "1 call left"),
        ] {
            let text = warn_text_of(&b.record(&progress(i), &limits)).to_string();
            assert!(
                text.contains(left) && text.contains("hard cap 100"),
                "{text}"
            );
        }
        let v = b.record(&progress(100), &limits);
        assert!(trip_text_of(&v).contains("100 tool calls in this session (hard cap 100)"));
        assert!(b.refusal("todo_write").is_some());
    }

    #[test]
    fn same_tool_warns_from_ten_and_refuses_the_sixteenth_call_of_that_tool_only() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 1..=9 {
            assert!(is_go(&b.record(&call("eval_sexp", i), &limits)), "call {i}");
        }
        for i in 10..=14 {
            let text = warn_text_of(&b.record(&call("eval_sexp", i), &limits)).to_string();
            assert!(
                text.contains(&format!("it has been called {i} times in a row (limit 15)")),
                "{text}"
            );
            let left = 15 - i;
            assert!(text.contains(&format!("{left} call")), "{text}");
        }
        let text = warn_text_of(&b.record(&call("eval_sexp", 15), &limits)).to_string();
        assert!(text.contains("eval_sexp has been called 15 times in a row (limit 15): another call of it will be refused"), "{text}");
        let refusal = b.check("eval_sexp", 16, &limits).expect("refused");
        assert!(refusal.starts_with("Error: eval_sexp was not run: it would be call 16 to eval_sexp in a row (limit 15)."), "{refusal}");
        assert_eq!(b.check("read_file", 16, &limits), None);
        assert!(is_go(&b.record(&call("read_file", 16), &limits)));
        assert_eq!(b.check("eval_sexp", 17, &limits), None);
    }
    #[test]
    fn another_tool_restarts_the_same_tool_count() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 1..=14 {
            b.record(&call("eval_sexp", i), &limits);
        }
        assert_eq!(b.state().same_tool, 14);
        assert!(is_go(&b.record(&call("read_file", 1), &limits)));
        assert_eq!(b.state().same_tool, 1);
        for i in 1..=9 {
            assert!(is_go(&b.record(&call("eval_sexp", 100 + i), &limits)));
        }
    }

    #[test]
    fn three_identical_calls_run_and_only_a_fourth_identical_one_is_refused() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let c = call("read_file", 42);
        assert!(is_go(&b.record(&c, &limits)));
        assert!(is_go(&b.record(&c, &limits)));
        assert_eq!(b.check("read_file", 42, &limits), None);
        let text = warn_text_of(&b.record(&c, &limits)).to_string();
        assert!(text.contains("read_file has run 3 times in a row with this same input (limit 3): the same call again will be refused"), "{text}");
        assert_eq!(b.state().identical, 3);
        assert!(!b.state().tripped);
        let refusal = b.check("read_file", 42, &limits).expect("refused");
        assert_eq!(
            refusal,
            "Error: read_file was not run: it would be the same call to read_file 4 times in a row (limit 3). Do something different; another call the breaker refuses ends the session."
        );
        // Another input, or another tool, goes ahead.
        assert_eq!(b.check("read_file", 43, &limits), None);
        assert_eq!(b.check("shell", 42, &limits), None);
    }
    #[test]
    fn a_different_input_or_tool_ends_an_identical_run() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let v = run(
            &mut b,
            &limits,
            &[
                call("read_file", 1),
                call("read_file", 1),
                call("read_file", 2),
                call("read_file", 2),
            ],
        );
        assert!(v.iter().all(|v| !matches!(v, Verdict::Trip(_))), "{v:?}");
        // Same fingerprint under another tool name is not identical.
        let mut b = Breaker::default();
        let v = run(
            &mut b,
            &limits,
            &[call("read_file", 1), call("read_file", 1), call("shell", 1)],
        );
        assert!(is_go(&v[2]), "{v:?}");
        assert_eq!(b.state().identical, 1);
    }

    #[test]
    fn abab_oscillation_warns_then_trips_at_six() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let (a, bb) = (call("read_file", 1), call("eval_sexp", 2));
        let v = run(&mut b, &limits, &[a, bb, a]);
        assert!(v.iter().all(is_go), "{v:?}");
        let text = warn_text_of(&b.record(&bb, &limits)).to_string();
        assert!(
            text.contains(
                "2 more calls alternating between the same read_file and eval_sexp calls"
            ),
            "{text}"
        );
        let text = warn_text_of(&b.record(&a, &limits)).to_string();
        assert!(text.contains("1 more call alternating"), "{text}");
        let text = trip_text_of(&b.record(&bb, &limits)).to_string();
        assert!(
            text.contains(
                "6 calls alternating between the same read_file and eval_sexp calls (limit 6)"
            ),
            "{text}"
        );
    }

    #[test]
    fn abcabc_never_oscillates() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let cycle = [call("read_file", 1), call("eval_sexp", 2), call("shell", 3)];
        for round in 0..4 {
            for c in &cycle {
                assert!(is_go(&b.record(c, &limits)), "round {round}");
            }
        }
        assert!(b.state().oscillation <= 2);
    }

    #[test]
    fn oscillation_needs_unchanged_inputs() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 0..10 {
            let c = if i % 2 == 0 {
                call("read_file", i)
            } else {
                call("eval_sexp", i)
            };
            assert!(is_go(&b.record(&c, &limits)), "call {i}");
        }
    }

    #[test]
    fn churn_warns_at_two_and_trips_at_three_unchanged_writes_in_a_row() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        // Vary the fingerprint so that the identical rule stays out of it.
        let w = |f| Call {
            unchanged_write: true,
            ..call("todo_write", f)
        };
        assert!(is_go(&b.record(&w(1), &limits)));
        let text = warn_text_of(&b.record(&w(2), &limits)).to_string();
        assert!(
            text.contains("1 more todo_write that changes nothing trips"),
            "{text}"
        );
        let text = trip_text_of(&b.record(&w(3), &limits)).to_string();
        assert!(
            text.contains("3 todo_writes in a row that changed nothing (limit 3)"),
            "{text}"
        );
    }

    #[test]
    fn any_other_call_ends_a_churn_run() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let w = |f| Call {
            unchanged_write: true,
            ..call("todo_write", f)
        };
        run(
            &mut b,
            &limits,
            &[w(1), w(2), call("read_file", 1), w(3), w(4)],
        );
        assert_eq!(b.state().churn, 2);
        assert!(b.refusal("todo_write").is_none());
        run(&mut b, &limits, &[call("todo_write", 5), w(6), w(7)]);
        assert!(b.refusal("todo_write").is_none());
    }

    #[test]
    fn unchanged_writes_trip_the_churn_rule_on_the_third() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let v = run(
            &mut b,
            &limits,
            &[unchanged_write(), unchanged_write(), unchanged_write()],
        );
        assert!(
            trip_text_of(&v[2]).contains("3 todo_writes in a row that changed nothing (limit 3)")
        );
        assert_eq!(b.state().churn, 3);
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
    fn warnings_and_refusals_name_the_tools_of_the_style() {
        for style in ToolStyle::ALL {
            let limits = BreakerLimits {
                without_progress: 5,
                style,
                ..BreakerLimits::default()
            };
            let mut b = Breaker::default();
            let calls: Vec<Call> = (0..5).map(varied).collect();
            let verdicts = run(&mut b, &limits, &calls);
            let warning = warn_text_of(&verdicts[4]);
            assert!(
                names_only_the_tools_of(style, warning),
                "{style:?}: {warning}"
            );
            let refusal = b.check("shell", 99, &limits).expect("refused");
            assert!(
                names_only_the_tools_of(style, &refusal),
                "{style:?}: {refusal}"
            );

            // A write that changes nothing, again and again.
            let mut b = Breaker::default();
            let w = |f| Call {
                unchanged_write: true,
                ..call(
                    if style == ToolStyle::Todo {
                        "todo_write"
                    } else {
                        "TaskUpdate"
                    },
                    f,
                )
            };
            let verdicts = run(&mut b, &limits, &[w(1), w(2), w(3)]);
            let warning = warn_text_of(&verdicts[1]);
            assert!(
                names_only_the_tools_of(style, warning),
                "{style:?}: {warning}"
            );
            let trip = trip_text_of(&verdicts[2]);
            assert!(names_only_the_tools_of(style, trip), "{style:?}: {trip}");
            let reason = b.state().reason.expect("tripped");
            assert!(
                names_only_the_tools_of(style, &reason),
                "{style:?}: {reason}"
            );
        }
    }

    #[test]
    fn a_count_of_one_is_singular() {
        let limits = BreakerLimits {
            without_progress: 1,
            ..BreakerLimits::default()
        };
        let mut b = Breaker::default();
        let warning = warn_text_of(&b.record(&varied(0), &limits)).to_string();
        assert!(
            warning.contains("1 tool call has run without completing"),
            "{warning}"
        );
        let refusal = b.check("shell", 99, &limits).expect("refused");
        assert!(
            refusal.contains("1 tool call has run without completing"),
            "{refusal}"
        );
        let limits = BreakerLimits {
            without_progress: 4,
            ..BreakerLimits::default()
        };
        let mut b = Breaker::default();
        let warning = warn_text_of(&b.record(&varied(0), &limits)).to_string();
        assert!(
            warning.contains(": 1 has run without completing a todo item (limit 4)"),
            "{warning}"
        );
    }

    #[test]
    fn a_plan_made_one_task_create_at_a_time_is_neither_refused_nor_warned() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        for i in 0..50 {
            assert_eq!(b.check("TaskCreate", i, &limits), None, "call {i}");
            assert_eq!(
                b.record(&call("TaskCreate", i), &limits),
                Verdict::Go,
                "call {i}"
            );
        }
        // The work can start: planning spent none of the progress budget.
        assert_eq!(b.check("read_file", 1, &limits), None);
        assert_eq!(b.record(&call("read_file", 1), &limits), Verdict::Go);
    }

    #[test]
    fn planning_neither_spends_nor_refills_the_progress_budget() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        run(&mut b, &limits, &(0..10).map(varied).collect::<Vec<_>>());
        let plan: Vec<Call> = (0..20).map(|i| call("TaskCreate", 1000 + i)).collect();
        assert!(run(&mut b, &limits, &plan).iter().all(is_go));
        assert_eq!(b.state().since_progress, 10);
        assert_eq!(b.state().calls, 30);
    }

    #[test]
    fn identical_task_creates_are_still_caught() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let verdicts = run(&mut b, &limits, &[call("TaskCreate", 5); 3]);
        assert!(is_go(&verdicts[1]));
        assert!(warn_text_of(&verdicts[2])
            .contains("TaskCreate has run 3 times in a row with this same input"));
        let refusal = b.check("TaskCreate", 5, &limits).expect("refused");
        assert!(
            refusal.contains("the same call to TaskCreate 4 times in a row"),
            "{refusal}"
        );
        // A different task still goes through.
        assert_eq!(b.check("TaskCreate", 6, &limits), None);
    }

    #[test]
    fn failing_task_creates_are_not_planning() {
        let limits = BreakerLimits {
            error_warn: 0,
            error_trip: 0,
            ..BreakerLimits::default()
        };
        let mut b = Breaker::default();
        for i in 0..15 {
            b.record(
                &failing("TaskCreate", i, "subject: expected a string"),
                &limits,
            );
        }
        let refusal = b.check("TaskCreate", 99, &limits).expect("refused");
        assert!(
            refusal.contains("it would be call 16 to TaskCreate in a row (limit 15)"),
            "{refusal}"
        );
    }

    #[test]
    fn same_error_warns_at_three_and_four_and_trips_at_five() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let err = "Symbol's function definition is void: foo";
        assert!(is_go(&b.record(&failing("eval_sexp", 1, err), &limits)));
        assert!(is_go(&b.record(&failing("eval_sexp", 2, err), &limits)));
        let text = warn_text_of(&b.record(&failing("eval_sexp", 3, err), &limits)).to_string();
        assert!(
            text.contains("occurred 3 times in a row") && text.contains("2 more occurrences"),
            "{text}"
        );
        let text = warn_text_of(&b.record(&failing("eval_sexp", 4, err), &limits)).to_string();
        assert!(
            text.contains("occurred 4 times in a row") && text.contains("1 more occurrence"),
            "{text}"
        );
        let text = trip_text_of(&b.record(&failing("eval_sexp", 5, err), &limits)).to_string();
        assert!(text.starts_with("Error: circuit breaker tripped: the same error 5 times in a row (limit 5): Symbol's function"), "{text}");
    }

    #[test]
    fn a_different_error_or_a_success_restarts_the_error_count() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        let calls = [
            failing("eval_sexp", 1, "void-function foo"),
            failing("eval_sexp", 2, "void-function foo"),
            failing("eval_sexp", 3, "wrong-type-argument stringp 3"),
        ];
        let v = run(&mut b, &limits, &calls);
        assert!(v.iter().all(is_go), "{v:?}");
        assert_eq!(b.state().errors, 1);
        run(
            &mut b,
            &limits,
            &[
                failing("eval_sexp", 4, "wrong-type-argument stringp 3"),
                call("shell", 1),
            ],
        );
        assert_eq!(b.state().errors, 0);
        let v = run(
            &mut b,
            &limits,
            &[failing("a", 1, "x"), failing("b", 2, "x")],
        );
        assert!(v.iter().all(is_go), "{v:?}");
        assert_eq!(b.state().errors, 2);
    }

    #[test]
    fn error_texts_differing_only_in_objects_or_line_numbers_are_the_same_error() {
        assert_eq!(
            normalize_error("  Wrong type: #<buffer *scratch*> at line 12 "),
            normalize_error("Wrong type: #<buffer foo.el> at line 7")
        );
        assert_ne!(normalize_error("error A"), normalize_error("error B"));
        assert_eq!(normalize_error("unclosed #<buffer"), "unclosed #<buffer");
        assert_eq!(normalize_error("line x and line 3é"), "line x and line Né");
    }

    #[test]
    fn long_errors_are_quoted_shortened() {
        let limits = BreakerLimits {
            error_trip: 1,
            ..BreakerLimits::default()
        };
        let mut b = Breaker::default();
        let err = "é".repeat(400);
        let text = trip_text_of(&b.record(&failing("shell", 1, &err), &limits)).to_string();
        assert!(text.contains(&format!("{}...", "é".repeat(150))));
        assert!(!text.contains(&"é".repeat(151)));
    }

    #[test]
    fn tripped_breaker_refuses_everything_until_reset() {
        let limits = BreakerLimits::default();
        let mut b = Breaker::default();
        run(
            &mut b,
            &limits,
            &[unchanged_write(), unchanged_write(), unchanged_write()],
        );
        let refusal = b.refusal("todo_write").expect("refused");
        assert!(refusal.starts_with("Error: todo_write was not run: circuit breaker tripped: 3 todo_writes in a row that changed nothing"), "{refusal}");
        assert_eq!(
            b.check("shell", 1, &limits),
            Some(refusal.replace("todo_write was", "shell was"))
        );
        let state = b.state();
        assert!(state.tripped);
        assert_eq!(
            state.reason.as_deref(),
            Some("3 todo_writes in a row that changed nothing (limit 3)")
        );
        // A call recorded anyway is not counted and trips again.
        assert!(matches!(b.record(&progress(1), &limits), Verdict::Trip(_)));
        assert_eq!(b.state().calls, 3);
        b.reset();
        assert_eq!(b.refusal("read_file"), None);
        assert_eq!(b.state(), BreakerState::default());
        assert!(is_go(&b.record(&call("read_file", 1), &limits)));
    }
    #[test]
    fn the_hard_cap_counts_the_calls_other_agents_made() {
        let limits = BreakerLimits {
            hard_cap: 10,
            ..BreakerLimits::default()
        };
        let mut b = Breaker::default();
        for i in 1..=3 {
            assert!(is_go(&b.record(&varied(i), &limits)));
        }
        b.set_calls_elsewhere(3);
        let text = warn_text_of(&b.record(&varied(4), &limits)).to_string();
        assert!(
            text.contains("3 calls left before the circuit breaker trips because the session has made 7 tool calls (hard cap 10)"),
            "{text}"
        );
        // The others reach the cap between two calls of this agent: its
        // next call is refused before it runs.
        b.set_calls_elsewhere(6);
        assert!(b.armed(&limits));
        let refusal = b.check("shell", 1, &limits).expect("refused");
        assert!(
            refusal
                .contains("circuit breaker tripped: 10 tool calls in this session (hard cap 10)"),
            "{refusal}"
        );
        assert_eq!(b.state().calls, 4);
        assert_eq!(b.calls(), 4);
    }

    #[test]
    fn a_zero_limit_turns_its_rule_off() {
        let limits = BreakerLimits {
            without_progress: 0,
            same_tool: 0,
            identical: 0,
            error_warn: 0,
            error_trip: 0,
            oscillation: 0,
            churn: 0,
            hard_cap: 0,
            style: ToolStyle::Todo,
        };
        let mut b = Breaker::default();
        for _ in 0..500 {
            let c = Call {
                unchanged_write: true,
                ..failing("todo_write", 1, "same")
            };
            assert!(is_go(&b.record(&c, &limits)));
        }
    }

    #[test]
    fn several_warnings_are_all_given() {
        let limits = BreakerLimits {
            hard_cap: 12,
            ..BreakerLimits::default()
        };
        let mut b = Breaker::default();
        for i in 1..=10 {
            b.record(&call("eval_sexp", i), &limits);
        }
        let text = warn_text_of(&b.record(&call("eval_sexp", 11), &limits)).to_string();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.contains("in a row (limit 15)") && text.contains("hard cap 12"),
            "{text}"
        );
    }

    #[test]
    fn fingerprints_keep_their_values() {
        // Pinned when the hash became `Mixer`; a change here changes which
        // calls count as identical, so it should be on purpose.
        let small = Input::Map(vec![
            ("path".into(), Input::Str("a.el".into())),
            ("line".into(), Input::Int(3)),
        ]);
        let big = Input::map_of((0..12).map(|n| (format!("k{}", 11 - n), Input::Int(n))));
        assert_eq!(fingerprint("read_file", &small), 2310596322559131476);
        assert_eq!(fingerprint("t", &big), 10886120151471417979);
    }

    #[test]
    fn fingerprints_ignore_key_order_but_not_content() {
        let map = |pairs: &[(&str, Input)]| {
            Input::map_of(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())))
        };
        let a = map(&[("path", Input::Str("a.el".into())), ("line", Input::Int(3))]);
        let b = map(&[("line", Input::Int(3)), ("path", Input::Str("a.el".into()))]);
        assert_eq!(fingerprint("read_file", &a), fingerprint("read_file", &b));
        assert_ne!(fingerprint("read_file", &a), fingerprint("write_file", &a));
        let nested_a = map(&[("o", a.clone()), ("x", Input::Null)]);
        let nested_b = map(&[("x", Input::Null), ("o", b.clone())]);
        assert_eq!(fingerprint("t", &nested_a), fingerprint("t", &nested_b));
        let c = map(&[("path", Input::Str("a.el".into())), ("line", Input::Int(4))]);
        assert_ne!(fingerprint("read_file", &a), fingerprint("read_file", &c));
        // Types and array order matter.
        assert_ne!(
            fingerprint("t", &Input::Int(1)),
            fingerprint("t", &Input::Str("1".into()))
        );
        assert_ne!(
            fingerprint("t", &Input::Int(1)),
            fingerprint("t", &Input::Float(1.0))
        );
        assert_ne!(
            fingerprint("t", &Input::Array(vec![Input::Int(1), Input::Int(2)])),
            fingerprint("t", &Input::Array(vec![Input::Int(2), Input::Int(1)]))
        );
        assert_ne!(
            fingerprint(
                "t",
                &Input::Array(vec![Input::Str("ab".into()), Input::Str("c".into())])
            ),
            fingerprint(
                "t",
                &Input::Array(vec![Input::Str("a".into()), Input::Str("bc".into())])
            )
        );
        assert_eq!(
            fingerprint("t", &Input::Float(0.5)),
            fingerprint("t", &Input::Float(0.5))
        );
    }

    fn arb_limits() -> impl Strategy<Value = BreakerLimits> {
        (
            0u32..8,
            0u32..8,
            0u32..5,
            0u32..5,
            0u32..7,
            0u32..8,
            0u32..5,
            0u32..40,
        )
            .prop_map(
                |(
                    without_progress,
                    same_tool,
                    identical,
                    error_warn,
                    error_trip,
                    oscillation,
                    churn,
                    hard_cap,
                )| BreakerLimits {
                    without_progress,
                    same_tool,
                    identical,
                    error_warn,
                    error_trip,
                    oscillation,
                    churn,
                    hard_cap,
                    style: ToolStyle::Todo,
                },
            )
    }

    type ArbCall = (usize, u64, Option<usize>, bool, bool);

    fn arb_calls() -> impl Strategy<Value = Vec<ArbCall>> {
        prop::collection::vec(
            (
                0usize..3,
                0u64..3,
                prop::option::of(0usize..2),
                any::<bool>(),
                any::<bool>(),
            ),
            0..60,
        )
    }

    fn to_call(&(tool, fingerprint, error, progress, unchanged_write): &ArbCall) -> Call<'static> {
        const TOOLS: [&str; 3] = ["todo_write", "read_file", "eval_sexp"];
        const ERRORS: [&str; 2] = ["void-function foo", "file missing"];
        Call {
            tool: TOOLS[tool],
            fingerprint,
            error: error.map(|e| ERRORS[e]),
            progress,
            unchanged_write,
        }
    }

    proptest! {
        #[test]
        fn once_tripped_every_call_is_refused_until_reset(limits in arb_limits(), calls in arb_calls()) {
            let mut b = Breaker::default();
            let mut tripped = false;
            for c in calls.iter().map(to_call) {
                if tripped {
                    let refusal = b.refusal(c.tool);
                    prop_assert!(refusal.as_deref().is_some_and(|r| r.starts_with("Error: ")));
                }
                let v = b.record(&c, &limits);
                if tripped {
                    prop_assert!(matches!(v, Verdict::Trip(_)));
                }
                if let Verdict::Trip(text) = &v {
                    prop_assert!(text.starts_with("Error: circuit breaker tripped: "));
                    tripped = true;
                }
                prop_assert_eq!(b.state().tripped, tripped);
                prop_assert_eq!(b.refusal("x").is_some(), tripped);
            }
            b.reset();
            prop_assert_eq!(b.refusal("read_file"), None);
            prop_assert_eq!(b.state(), BreakerState::default());
        }

        #[test]
        fn calls_at_or_beyond_the_hard_cap_are_never_go(
            limits in arb_limits(), hard_cap in 1u32..40, calls in arb_calls()
        ) {
            let limits = BreakerLimits { hard_cap, ..limits };
            let mut b = Breaker::default();
            for (i, c) in calls.iter().map(to_call).enumerate() {
                let n = i as u32 + 1;
                let v = b.record(&c, &limits);
                if n >= hard_cap {
                    prop_assert!(matches!(v, Verdict::Trip(_)), "call {} of cap {} gave {:?}", n, hard_cap, v);
                    prop_assert!(b.refusal(c.tool).is_some());
                }
                prop_assert!(b.state().calls <= hard_cap);
            }
        }

        #[test]
        fn fingerprint_ignores_pair_order(
            pairs in prop::collection::vec(("[a-d]{1,2}", any::<i64>()), 0..14), seed in any::<u64>()
        ) {
            let input: Vec<(String, Input)> = pairs.iter().map(|(k, v)| (k.clone(), Input::Int(*v))).collect();
            let mut shuffled = input.clone();
            // A deterministic permutation from the seed.
            let len = shuffled.len();
            if len > 1 {
                for i in 0..len {
                    shuffled.swap(i, (seed.wrapping_add(i as u64 * 7919) % len as u64) as usize);
                }
            }
            prop_assert_eq!(fingerprint("t", &Input::map_of(input)), fingerprint("t", &Input::map_of(shuffled)));
        }
    }
}

//! The agent-loop path of a session: the breaker before and after each
//! tool call, the ledger of tool outputs and the final report, the
//! system prompt's part, and stops, resumes and turns.

use std::borrow::Cow;

use crate::breaker::{fingerprint, Breaker, BreakerLimits, Call, Verdict};
use crate::guide::{named_tool, open_items, Guide};
use crate::history::{Actor, Change, ChangeKind, ChangedIds};
use crate::ledger::{has_output, report, Completion, CompletionGuard, Entry, Ledger};
use crate::model::{now, Status, MAX_NAMED};
use crate::render;
use crate::tree;
use crate::validate::{checked_text, non_blank, Input, InvalidInput, ToolStyle};

use super::agents::Agents;
use super::{LoopOptions, Session, Stop, MAX_STOP_REASON_CHARS};

/// The calls a report holds: a peer's own (see `Agents::acting_peer`),
/// else every call of the session.
fn reported_entries<'a>(ledger: &'a Ledger, agents: &Agents) -> Cow<'a, [Entry]> {
    match agents.acting().filter(|_| agents.acting_peer()) {
        Some(me) => Cow::Owned(
            ledger
                .entries()
                .iter()
                .filter(|entry| entry.agent.as_deref() == Some(me))
                .cloned()
                .collect(),
        ),
        None => Cow::Borrowed(ledger.entries()),
    }
}

impl Session {
    /// Completes the running item when its content names TOOL, which just
    /// succeeded, and starts the next pending one.  Returns the notice.
    pub(super) fn auto_complete(&mut self, tool: &str) -> Option<String> {
        let running = self.running_index()?;
        if named_tool(&self.items[running].content, &self.tool_names(Some(tool))) != Some(tool) {
            return None;
        }
        // A parent waits for its subtasks, whatever succeeded.
        if !tree::open_subtasks(&self.items, running).is_empty() {
            return None;
        }
        let before = self.items.clone();
        let at = now();
        self.items[running].set_status(Status::Completed, at);
        let mut notice = format!(
            "[efrit-todo] {} completed automatically: {tool} succeeded while it was in progress.",
            self.items[running].id
        );
        let next = (0..self.items.len())
            .find(|&n| self.items[n].status == Status::Pending && self.runs_next(&self.items[n]));
        if let Some(next) = next.map(|n| &mut self.items[n]) {
            next.set_status(Status::InProgress, at);
            notice.push_str(&format!(" {} is now in_progress.", next.id));
        }
        self.record(
            Actor::Model,
            ChangeKind::AutoComplete,
            before,
            Vec::new(),
            None,
            None,
        );
        Some(notice)
    }

    /// The breaker's answer before TOOL runs with INPUT: None to go ahead,
    /// or the refusal.  INPUT is looked at only when a refusal is possible.
    pub fn before_tool(
        &mut self,
        tool: &str,
        input: impl FnOnce() -> Input,
        limits: &BreakerLimits,
    ) -> Option<String> {
        if !self.breaker.armed(limits) {
            return None;
        }
        let fingerprint = fingerprint(tool, &input());
        self.breaker.check(tool, fingerprint, limits)
    }

    /// Whether a call could be refused in this session now.
    pub fn breaker_armed(&self, limits: &BreakerLimits) -> bool {
        self.breaker.armed(limits)
    }

    /// Records a finished call.  Returns the text to send back to the model
    /// when it is not RESULT as given (no output named, or notices
    /// appended), and None when RESULT goes back as it is: the usual case,
    /// which then costs no copy of the result.
    pub fn after_tool(
        &mut self,
        tool: &str,
        input: Input,
        result: Option<String>,
        flagged_error: bool,
        duration: Option<f64>,
        options: &LoopOptions,
    ) -> Option<String> {
        // The ledger takes the input over, so its fingerprint is taken first.
        let fingerprint = fingerprint(tool, &input);
        let running = self.running_index().map(|n| self.items[n].id.as_str());
        let as_given = has_output(result.as_deref());
        let entry =
            self.ledger
                .record(tool, input, result, flagged_error, running, now(), duration);
        let error = entry.error;
        // Error texts feed the breaker's repeated-error rule; they are rare,
        // so only they are copied out of the ledger.
        let error_text = error.then(|| entry.result.clone());
        if let Some(agent) = self.agents.acting() {
            self.ledger.tag_last(agent);
        }
        let mut notices = Vec::new();
        let (mut progress, mut changed_nothing) = (false, false);
        // One breaker whichever tool writes the list: TaskCreate and
        // TaskUpdate report their effect as todo_write does.
        if matches!(tool, "todo_write" | "TaskCreate" | "TaskUpdate") {
            if let Some(effect) = self.last_write.take() {
                progress = effect.completed_any;
                changed_nothing = effect.changed_nothing;
            }
        }
        if options.auto_complete && !error {
            if let Some(notice) = self.auto_complete(tool) {
                progress = true;
                self.guide.note_progress();
                notices.push(notice);
            }
        }
        let call = Call {
            tool,
            fingerprint,
            error: error_text.as_deref(),
            progress,
            unchanged_write: changed_nothing,
        };
        match self.breaker.record(&call, &options.breaker) {
            Verdict::Go => {}
            Verdict::Warn(text) | Verdict::Trip(text) => notices.push(text),
        }
        if !error {
            let current = self.running_index().map(|n| &self.items[n]);
            if let Some(reminder) = self.guide.after_call(tool, true, current, &options.guide) {
                notices.push(reminder);
            }
        }
        if !self.user_notes.is_empty() {
            notices.push(self.take_user_notes());
        }
        if as_given && notices.is_empty() {
            return None;
        }
        // Only here, with something to add, is the recorded result copied.
        let mut text = self
            .ledger
            .entries()
            .last()
            .map_or_else(String::new, |entry| entry.result.clone());
        for notice in notices {
            text.push_str("\n\n");
            text.push_str(&notice);
        }
        Some(text)
    }

    /// The aggregated report: every tool result, the list, the message last.
    pub fn report(&self, message: Option<&str>, options: &LoopOptions) -> String {
        report(
            &reported_entries(&self.ledger, &self.agents),
            &self.items,
            message,
            self.guide.pause_reason(),
            options.max_result_chars,
        )
    }

    /// The session_complete guard.
    pub fn complete(&mut self, message: &str, options: &LoopOptions) -> Completion {
        let entries = reported_entries(&self.ledger, &self.agents);
        self.completion.complete(
            &entries,
            &self.items,
            message,
            self.guide.pause_reason(),
            options.max_result_chars,
            options.guide.style,
        )
    }

    pub fn entries(&self) -> &[Entry] {
        self.ledger.entries()
    }

    /// The user's edits since the model was last told, as one notice for a
    /// tool result; they are then forgotten.  The newest MAX_NAMED are named.
    pub fn take_user_notes(&mut self) -> String {
        let notes = std::mem::take(&mut self.user_notes);
        let skipped = notes.len().saturating_sub(MAX_NAMED);
        let mut text = String::from("[efrit-todo] The user changed the list: ");
        if skipped > 0 {
            text.push_str(&format!("{skipped} earlier edits; "));
        }
        text.push_str(&notes[skipped..].join("; "));
        text.push('.');
        text
    }

    /// The system prompt's part for this session: the guidance and the list
    /// as it stood at the first call, the same text on every later call.
    /// After a resume it first says why the previous command stopped.
    pub fn prompt_guidance(&mut self, full_up_to: usize) -> &str {
        self.prompt_guidance_for(full_up_to, ToolStyle::Todo)
    }

    /// `prompt_guidance` for the tools of STYLE.  The text is fixed at the
    /// first call: a style changed mid-session takes effect in the next one,
    /// so the prompt stays byte-identical and cached.
    pub fn prompt_guidance_for(&mut self, full_up_to: usize, style: ToolStyle) -> &str {
        let (items, resumed) = (&self.items, &self.resumed_from);
        let peer = self
            .agents
            .acting()
            .filter(|_| self.agents.acting_peer())
            .map(|me| {
                format!(
                    "\n\nThis list is shared with other agents; you work on it as {me}. The items you add or start are yours; an item another agent owns is theirs to change."
                )
            });
        self.prompt.get_or_insert_with(|| {
            let mut text = match resumed {
                Some(stop) => render::resume_guidance_for(
                    items,
                    &stop.reason,
                    stop.running.as_deref(),
                    full_up_to,
                    style,
                ),
                None => render::prompt_guidance_for(items, full_up_to, style),
            };
            text.push_str(peer.as_deref().unwrap_or_default());
            text
        })
    }

    /// The session's command stopped for REASON.  With items open, the stop
    /// is kept (until `resume` or `forget_stop`), marked in the history and
    /// the ledger, and true returned; without, nothing happens.
    pub fn stop(&mut self, reason: &str) -> Result<bool, InvalidInput> {
        let reason = checked_text(
            &Input::Str(reason.trim().to_string()),
            "reason",
            MAX_STOP_REASON_CHARS,
        )
        .and_then(|t| non_blank(t, "reason"))?;
        if !self.items.iter().any(|i| i.status.is_open()) {
            self.stopped = None;
            return Ok(false);
        }
        let running = self.current().map(|i| i.id.clone());
        let at = now();
        let mut summary = String::from("stopped");
        if let Some(id) = &running {
            summary.push_str(" while ");
            summary.push_str(id);
            summary.push_str(" was in progress");
        }
        summary.push_str(": ");
        summary.push_str(&reason);
        let text = format!(
            "[efrit-todo] The session {summary}. Left open: {}",
            open_items(&self.items)
        );
        self.ledger.record(
            "session_stopped",
            Input::Null,
            Some(text),
            false,
            running.as_deref(),
            at,
            None,
        );
        self.history.push(Change::new(
            Actor::Model,
            ChangeKind::Stop,
            at,
            summary,
            ChangedIds::default(),
        ));
        self.stopped = Some(Stop {
            reason,
            at,
            running,
        });
        Ok(true)
    }

    /// A new command takes this stopped session over: its list, ids,
    /// history and ledger stay; breaker, guide and the completion guard
    /// start afresh, and the next prompt says why the last command stopped.
    pub fn resume(&mut self) {
        self.resumed_from = self.stopped.take();
        self.breaker = Breaker::default();
        self.agents.new_turn();
        self.guide = Guide::default();
        self.completion = CompletionGuard::default();
        self.last_write = None;
        self.prompt = None;
    }

    /// The user chose not to go on with this stopped list: it stays, but no
    /// command will take it over.
    pub fn forget_stop(&mut self) -> bool {
        self.stopped.take().is_some()
    }

    /// A new turn of a conversation that keeps its list (Efrit's REPL):
    /// breaker, ledger, guide and completion start over, the list and ids stay.
    pub fn begin_turn(&mut self) {
        self.breaker = Breaker::default();
        self.agents.new_turn();
        self.ledger = Ledger::default();
        self.guide = Guide::default();
        self.completion = CompletionGuard::default();
        self.last_write = None;
    }
}

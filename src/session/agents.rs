//! Agent teams: sub-agents working on a session's list beside the
//! session's own agent, the lead.  Each sub-agent has its own breaker,
//! guide, completion guard and last write; the list, ids, history and
//! ledger are shared.  A call is made on an agent's behalf through
//! `Session::as_agent`, which swaps that agent's state in for the call,
//! so the rest of the session code sees one agent at a time and asks
//! `Agents` only who owns what.
//!
//! Owners: an item belongs to a sub-agent when its owner names one the
//! session has known (running or ended); every other item is the lead's
//! or unowned.  A sub-agent that starts an unowned item claims it, and
//! the items it adds are its own.  It may not change an item another
//! agent owns; the lead may, and its result names the owner.  One item
//! runs per agent, and a whole-list write covers only the writer's items.
//!
//! With no sub-agent ever started nothing here changes what a call does.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use rustc_hash::FxHashSet;

use crate::breaker::{Breaker, BreakerLimits, BreakerState};
use crate::guide::{Guide, GuideOptions};
use crate::history::{Actor, ChangeKind};
use crate::ledger::CompletionGuard;
use crate::model::{now, Item, Status, MAX_NAMED};
use crate::reconcile::{match_items, Diff};
use crate::validate::{quote, InvalidInput, MergeItem, ProposedItem};

use super::{Options, Session, WriteEffect};

/// Longest agent type or name accepted.
pub const MAX_AGENT_NAME_CHARS: usize = 100;

/// Most sub-agents a session remembers by name (running or ended); a
/// file may not grow the list past it either.
pub const MAX_KNOWN_AGENTS: usize = 1000;

/// A running sub-agent and the per-agent state it does not share.
#[derive(Debug, Clone, Default)]
struct Agent {
    name: String,
    kind: String,
    breaker: Breaker,
    guide: Guide,
    completion: CompletionGuard,
    last_write: Option<WriteEffect>,
    /// Its part of the system prompt, fixed at its first request.
    prompt: Option<String>,
    /// When it started, for the lease other Emacsen see.
    since: f64,
    /// A peer works on a shared list beside others (an efrit-do command, a
    /// chat), not for the lead: its calls count against its own hard cap
    /// only, its report holds its own calls, and when it ends its open
    /// items are let go for the others to take.
    peer: bool,
}

/// The sub-agents of a session.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    running: Vec<Agent>,
    /// Every sub-agent name the session has known, oldest first: items
    /// they own stay theirs after they end.
    known: Vec<String>,
    /// Calls made by sub-agents that ended, which the hard cap still counts.
    ended_calls: u32,
    /// The sub-agent on whose behalf the current call runs; None for the lead.
    acting: Option<String>,
    /// Agents that other Emacsen run on this shared list, as its newest
    /// save says: their names are taken.
    elsewhere: Vec<PeerLease>,
    /// Agents started and ended so far, which a shared list's save records.
    starts_and_ends: u64,
}

/// A running agent as a shared list's file records it: its name, the
/// Emacs running it ("HOST:PID"), and since when.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerLease {
    pub name: String,
    pub holder: String,
    pub since: f64,
}

/// A running sub-agent as callers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentView {
    pub name: String,
    pub kind: String,
    /// Index of its running item in the list.
    pub current: Option<usize>,
}

impl Agents {
    /// Whether the session never had a sub-agent: then every call goes as
    /// it did before agent teams.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    pub fn is_known(&self, name: &str) -> bool {
        self.known.iter().any(|known| known == name)
    }

    /// The names of every sub-agent the session has known, oldest first.
    pub fn known(&self) -> &[String] {
        &self.known
    }

    /// Who runs an item with OWNER, for the one-running-item rule: the
    /// sub-agent it names, or None for the lead (unowned, or owned by a
    /// name that is no agent of the session).
    pub fn runner<'a>(&self, owner: Option<&'a str>) -> Option<&'a str> {
        owner.filter(|owner| self.is_known(owner))
    }

    /// The sub-agent the current call is made for; None for the lead.
    pub fn acting(&self) -> Option<&str> {
        self.acting.as_deref()
    }

    /// The owner an item that was WAS gets from a write that leaves it
    /// with OWNER and STATUS: a sub-agent starting an unowned item claims it.
    pub fn claim<'a>(
        &'a self,
        owner: Option<&'a str>,
        was: Status,
        status: Status,
    ) -> Option<&'a str> {
        match owner {
            None if status == Status::InProgress && was != Status::InProgress => {
                self.acting.as_deref()
            }
            owner => owner,
        }
    }

    /// The owner of an item a write adds without naming one: the
    /// sub-agent that adds it, none for the lead.
    pub fn new_owner(&self) -> Option<String> {
        self.acting.clone()
    }

    /// Whether some sub-agent's breaker could refuse a call now.
    pub fn any_armed(&self, limits: &BreakerLimits) -> bool {
        self.running.iter().any(|a| a.breaker.armed(limits))
    }

    /// Calls of every running and ended sub-agent working for the lead.
    fn calls(&self) -> u32 {
        self.running
            .iter()
            .filter(|a| !a.peer)
            .fold(self.ended_calls, |sum, a| {
                sum.saturating_add(a.breaker.calls())
            })
    }

    /// Whether the current call is made for a peer (see `Agent::peer`).
    pub fn acting_peer(&self) -> bool {
        self.acting
            .as_deref()
            .is_some_and(|me| self.running.iter().any(|a| a.peer && a.name == me))
    }

    /// The agents this Emacs runs, held by HOLDER, as a save records them.
    pub fn own_leases<'a>(&'a self, holder: &'a str) -> impl Iterator<Item = PeerLease> + 'a {
        self.running.iter().map(move |agent| PeerLease {
            name: agent.name.clone(),
            holder: holder.to_string(),
            since: agent.since,
        })
    }

    /// How many agents started and ended so far.
    pub fn starts_and_ends(&self) -> u64 {
        self.starts_and_ends
    }

    /// The agents other Emacsen run, as their newest save says.
    pub fn elsewhere(&self) -> &[PeerLease] {
        &self.elsewhere
    }

    pub fn set_elsewhere(&mut self, leases: Vec<PeerLease>) {
        self.elsewhere = leases;
    }

    /// Takes in the sub-agent names another Emacs's save of a shared list
    /// knew, after this session's own.
    pub fn learn_known(&mut self, names: &[String]) {
        for name in names {
            if self.known.len() >= MAX_KNOWN_AGENTS {
                break;
            }
            if !self.is_known(name) {
                self.known.push(name.clone());
            }
        }
    }

    /// Puts the sub-agent names a saved session knew back, none running.
    pub fn restore_known(&mut self, names: Vec<String>) {
        self.known = names;
    }

    /// A new turn or command: every sub-agent's counters start afresh.
    pub fn new_turn(&mut self) {
        self.ended_calls = 0;
        for agent in &mut self.running {
            agent.breaker = Breaker::default();
            agent.guide = Guide::default();
            agent.completion = CompletionGuard::default();
            agent.last_write = None;
        }
    }
}

/// A sub-agent's refusal to change ID, which OWNER owns.
fn owned_by(path: String, id: &str, owner: &str) -> InvalidInput {
    InvalidInput::new(
        path,
        format!("{id} is owned by {owner}; only {owner} or the lead may change it"),
    )
}

/// An agent type or name as a caller gives it: 1 to
/// `MAX_AGENT_NAME_CHARS` characters, no control characters, not blank.
pub fn check_agent_name(name: &str, path: &str) -> Result<(), InvalidInput> {
    if name.trim().is_empty()
        || name.chars().any(char::is_control)
        || name.chars().count() > MAX_AGENT_NAME_CHARS
    {
        Err(InvalidInput::new(
            path,
            format!(
                "expected a name of 1 to {MAX_AGENT_NAME_CHARS} characters without control characters, got {}",
                quote(name)
            ),
        ))
    } else {
        Ok(())
    }
}

impl Session {
    /// Starts a sub-agent of type KIND and returns its name: KIND, or
    /// KIND-2, KIND-3... while an agent of that name is running.
    pub fn agent_start(&mut self, kind: &str) -> Result<String, InvalidInput> {
        self.start_agent(kind, false)
    }

    /// Starts a peer of type KIND (see `Agent::peer`) and returns its name,
    /// as `agent_start` does.
    pub fn peer_start(&mut self, kind: &str) -> Result<String, InvalidInput> {
        self.start_agent(kind, true)
    }

    fn start_agent(&mut self, kind: &str, peer: bool) -> Result<String, InvalidInput> {
        check_agent_name(kind, "type")?;
        // A name another Emacs's agent has on this shared list is taken too.
        let running = |name: &str| {
            self.agents.running.iter().any(|a| a.name == name)
                || self.agents.elsewhere.iter().any(|a| a.name == name)
        };
        let mut name = kind.to_string();
        let mut n = 1u32;
        while running(&name) {
            n += 1;
            name = format!("{kind}-{n}");
        }
        check_agent_name(&name, "type")?;
        if !self.agents.is_known(&name) {
            if self.agents.known.len() >= MAX_KNOWN_AGENTS {
                return Err(InvalidInput::new(
                    "type",
                    format!(
                        "the session has known {MAX_KNOWN_AGENTS} sub-agents, the most it keeps"
                    ),
                ));
            }
            self.agents.known.push(name.clone());
        }
        self.agents.running.push(Agent {
            name: name.clone(),
            kind: kind.to_string(),
            peer,
            since: now(),
            ..Agent::default()
        });
        self.agents.starts_and_ends += 1;
        Ok(name)
    }

    /// Ends sub-agent NAME: its items in progress go back to pending,
    /// owner kept.  A peer lets its open items go (no owner), so that
    /// the others may take them.  Returns the text for the lead naming
    /// the items that were in progress, or None when none was or no agent
    /// NAME is running.
    pub fn agent_end(&mut self, name: &str) -> Option<String> {
        let at = self.agents.running.iter().position(|a| a.name == name)?;
        let agent = self.agents.running.remove(at);
        self.agents.starts_and_ends += 1;
        if !agent.peer {
            self.agents.ended_calls = self
                .agents
                .ended_calls
                .saturating_add(agent.breaker.calls());
        }
        let mine = |item: &Item| item.owner.as_deref() == Some(name);
        let left: Vec<usize> = (0..self.items.len())
            .filter(|&n| self.items[n].status == Status::InProgress && mine(&self.items[n]))
            .collect();
        let released: Vec<usize> = if agent.peer {
            (0..self.items.len())
                .filter(|&n| self.items[n].status == Status::Pending && mine(&self.items[n]))
                .collect()
        } else {
            Vec::new()
        };
        if left.is_empty() && released.is_empty() {
            return None;
        }
        let before = self.items.clone();
        let at = now();
        for &n in &left {
            self.items[n].set_status(Status::Pending, at);
        }
        if agent.peer {
            for &n in left.iter().chain(&released) {
                self.items[n].owner = None;
            }
        }
        if left.is_empty() {
            let summary = format!("{name} ended; its pending items are free to take");
            self.record_agent_end(before, summary);
            return None;
        }
        let mut named = String::new();
        for (k, &n) in left.iter().enumerate() {
            if k == MAX_NAMED {
                named.push_str(&format!(" and {} more", left.len() - MAX_NAMED));
                break;
            }
            if k > 0 {
                named.push_str(", ");
            }
            let item = &self.items[n];
            named.push_str(&item.id);
            named.push_str(" (");
            crate::model::push_cut(&mut named, &item.content);
            named.push(')');
        }
        let they = if left.len() == 1 { "it is" } else { "they are" };
        let free = if agent.peer { ", free to take" } else { "" };
        let text = format!("{name} left {named} unfinished; {they} pending again{free}.");
        self.record_agent_end(before, format!("{name} ended; {named} pending again"));
        Some(text)
    }

    /// Records an agent's end, which changed the list from BEFORE, as one
    /// change the user can undo.
    fn record_agent_end(&mut self, before: Vec<Item>, summary: String) {
        self.record(
            Actor::Model,
            ChangeKind::Status,
            before,
            Vec::new(),
            None,
            Some(summary),
        );
    }

    /// The running sub-agents, oldest first, each with its running item.
    pub fn running_agents(&self) -> Vec<AgentView> {
        self.agents
            .running
            .iter()
            .map(|a| AgentView {
                name: a.name.clone(),
                kind: a.kind.clone(),
                current: self.items.iter().position(|i| {
                    i.status == Status::InProgress && i.owner.as_deref() == Some(a.name.as_str())
                }),
            })
            .collect()
    }

    /// The breaker of AGENT (None: the lead), as `efrit-todo-breaker`
    /// shows it.
    pub fn breaker_of(&self, agent: Option<&str>) -> Result<BreakerState, InvalidInput> {
        match agent {
            None => Ok(self.breaker.state()),
            Some(name) => Ok(self.agents.running[self.running_agent(name)?]
                .breaker
                .state()),
        }
    }

    /// Whether AGENT's breaker (None: the lead's) could refuse a call now.
    pub fn breaker_armed_for(&self, agent: Option<&str>, limits: &BreakerLimits) -> bool {
        match agent {
            None => self.breaker.armed(limits),
            Some(name) => self
                .agents
                .running
                .iter()
                .any(|a| a.name == name && a.breaker.armed(limits)),
        }
    }

    fn running_agent(&self, name: &str) -> Result<usize, InvalidInput> {
        self.agents
            .running
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| {
                InvalidInput::new(
                    "efrit-todo-agent",
                    format!(
                        "no sub-agent {} is running in this session; start it with efrit-todo-agent-start",
                        quote(name)
                    ),
                )
            })
    }

    /// Exchanges the per-agent state of running sub-agent AT with the
    /// session's own fields.
    fn swap_agent(&mut self, at: usize) {
        let agent = &mut self.agents.running[at];
        std::mem::swap(&mut self.breaker, &mut agent.breaker);
        std::mem::swap(&mut self.guide, &mut agent.guide);
        std::mem::swap(&mut self.completion, &mut agent.completion);
        std::mem::swap(&mut self.last_write, &mut agent.last_write);
        std::mem::swap(&mut self.prompt, &mut agent.prompt);
    }

    /// Runs F on this session for AGENT: None for the lead, else a running
    /// sub-agent's name, whose breaker, guide, completion guard and last
    /// write stand in for the session's during F.  An agent that is not
    /// running is an error, and F does not run.
    pub fn as_agent<R>(
        &mut self,
        agent: Option<&str>,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Result<R, InvalidInput> {
        let Some(name) = agent else {
            if !self.agents.is_empty() {
                self.agents.acting = None;
                let elsewhere = self.agents.calls();
                self.breaker.set_calls_elsewhere(elsewhere);
            }
            return Ok(f(self));
        };
        let at = self.running_agent(name)?;
        self.swap_agent(at);
        // The lead's breaker is in the agent's place now: counted too.  A
        // peer's hard cap counts its own calls only.
        let elsewhere = if self.agents.running[at].peer {
            0
        } else {
            self.agents.calls()
        };
        self.breaker.set_calls_elsewhere(elsewhere);
        self.agents.acting = Some(name.to_string());
        let result = catch_unwind(AssertUnwindSafe(|| f(self)));
        self.agents.acting = None;
        self.swap_agent(at);
        result.map_err(|panic| resume_unwind(panic))
    }

    /// `as_agent` for a tool that may change items: when the lead changes
    /// an item a sub-agent owns, the result says whose it was.
    pub fn write_as_agent(
        &mut self,
        agent: Option<&str>,
        f: impl FnOnce(&mut Session) -> Result<String, InvalidInput>,
    ) -> Result<String, InvalidInput> {
        if self.agents.is_empty() {
            return self.as_agent(agent, f)?;
        }
        if let Some(name) = agent {
            let text = self.as_agent(agent, f)??;
            return Ok(self.next_step_for(Some(name), text));
        }
        let theirs: Vec<Item> = self
            .items
            .iter()
            .filter(|item| self.agents.runner(item.owner.as_deref()).is_some())
            .cloned()
            .collect();
        let mut text = self.as_agent(None, f)??;
        let changed: Vec<&Item> = theirs
            .iter()
            .filter(|was| self.find(&was.id) != Some(*was))
            .collect();
        if !changed.is_empty() {
            text.push_str("\nOwned by other agents: ");
            let shown: Vec<String> = changed
                .iter()
                .take(MAX_NAMED)
                .map(|was| format!("{} ({})", was.id, was.owner.as_deref().unwrap_or_default()))
                .collect();
            text.push_str(&shown.join(", "));
            if changed.len() > MAX_NAMED {
                text.push_str(&format!(" and {} more", changed.len() - MAX_NAMED));
            }
            text.push_str("; changed by the lead.");
        }
        Ok(self.next_step_for(None, text))
    }

    /// TEXT with its next step for AGENT: its own running item, else the
    /// first ready one it may take, rather than another agent's.
    fn next_step_for(&self, agent: Option<&str>, mut text: String) -> String {
        let Some(at) = text
            .rfind("\nNext: ")
            .map(|at| at + 1)
            .or_else(|| text.starts_with("Next: ").then_some(0))
        else {
            return text;
        };
        let end = text[at..].find('\n').map_or(text.len(), |n| at + n);
        let view: Vec<Item> = self
            .items
            .iter()
            .filter(|item| match agent {
                // Unowned items are free to take, but one running is the lead's.
                Some(me) => match item.owner.as_deref() {
                    Some(owner) => owner == me,
                    None => item.status != Status::InProgress,
                },
                None => self.agents.runner(item.owner.as_deref()).is_none(),
            })
            .cloned()
            .collect();
        let next = format!("Next: {}", crate::render::next_step(&view));
        text.replace_range(at..end, &next);
        text
    }

    /// Where the running item of the agent making the call is.
    pub(super) fn running_index(&self) -> Option<usize> {
        if self.agents.is_empty() {
            return self
                .items
                .iter()
                .position(|i| i.status == Status::InProgress);
        }
        let me = self.agents.acting();
        self.items.iter().position(|i| {
            i.status == Status::InProgress && self.agents.runner(i.owner.as_deref()) == me
        })
    }

    /// Whether the agent making the call may auto-start ITEM next.
    pub(super) fn runs_next(&self, item: &Item) -> bool {
        self.agents.is_empty() || self.agents.runner(item.owner.as_deref()) == self.agents.acting()
    }

    /// The model of the agent making the call ended a turn: a sub-agent
    /// is kept going by its own open items only.
    pub fn turn_end(&mut self, had_tool_calls: bool, options: &GuideOptions) -> Option<String> {
        match self.agents.acting.as_deref() {
            None => self.guide.turn_end(had_tool_calls, &self.items, options),
            Some(me) => {
                let own: Vec<Item> = self
                    .items
                    .iter()
                    .filter(|item| item.owner.as_deref() == Some(me))
                    .cloned()
                    .collect();
                self.guide.turn_end(had_tool_calls, &own, options)
            }
        }
    }

    /// A sub-agent may not change an item another agent owns: CHANGES are
    /// a merge's, LISTED the index of the item each changes.
    pub(super) fn check_owners(
        &self,
        changes: &[MergeItem],
        listed: &[Option<usize>],
    ) -> Result<(), InvalidInput> {
        let Some(me) = self.agents.acting() else {
            return Ok(());
        };
        for (i, (_, at)) in changes.iter().zip(listed).enumerate() {
            let Some(item) = at.map(|at| &self.items[at]) else {
                continue;
            };
            if let Some(owner) = item.owner.as_deref().filter(|owner| *owner != me) {
                return Err(owned_by(format!("todos[{i}].id"), &item.id, owner));
            }
        }
        Ok(())
    }

    /// A whole-list write that covers only the writer's items: a
    /// sub-agent's own and the unowned ones it names; the lead's own, the
    /// unowned ones and any it names.  The others stay where they are, as
    /// they are, and are not dropped.  A sub-agent that lists another
    /// agent's item unchanged leaves it alone; changed, it is refused.
    pub(super) fn replace_covered(
        &mut self,
        proposed: &[ProposedItem],
        options: &Options,
    ) -> Result<(Diff, bool), InvalidInput> {
        if self.agents.is_empty() {
            return self.replace(proposed, options);
        }
        let me = self.agents.acting.clone();
        let matching = match_items(&self.items, &self.retired, proposed)?;
        let snapshot = self.items.clone();
        let mut named = vec![false; snapshot.len()];
        // Each proposed item the write keeps, with the item it continues.
        let mut kept: Vec<(usize, Option<usize>)> = Vec::with_capacity(proposed.len());
        for (i, wanted) in proposed.iter().enumerate() {
            let continued = matching.continued(i);
            if let (Some(me), Some(j)) = (me.as_deref(), continued) {
                let item = &snapshot[j];
                if let Some(owner) = item.owner.as_deref().filter(|owner| *owner != me) {
                    if wanted.status == item.status && wanted.content == item.content {
                        continue;
                    }
                    return Err(owned_by(format!("todos[{i}]"), &item.id, owner));
                }
            }
            if let Some(j) = continued {
                named[j] = true;
            }
            kept.push((i, continued));
        }
        let covers = |j: usize| {
            named[j]
                || match me.as_deref() {
                    Some(me) => snapshot[j].owner.as_deref() == Some(me),
                    None => self.agents.runner(snapshot[j].owner.as_deref()).is_none(),
                }
        };
        let covered: Vec<bool> = (0..snapshot.len()).map(covers).collect();
        let listed: FxHashSet<&str> = snapshot.iter().map(|item| item.id.as_str()).collect();
        let mut staying: FxHashSet<&str> = FxHashSet::default();
        for (j, item) in snapshot.iter().enumerate() {
            if !covered[j] || named[j] {
                staying.insert(item.id.as_str());
            }
        }
        let own = |i: usize, continued: Option<usize>| {
            let wanted = &proposed[i];
            let was = continued.map(|j| &snapshot[j]);
            let owner = wanted
                .owner
                .or(was.and_then(|item| item.owner.as_deref()))
                .or_else(|| match (was, me.as_deref()) {
                    (None, Some(me)) => Some(me),
                    (Some(was), me) => self.agents.claim(None, was.status, wanted.status).and(me),
                    _ => None,
                });
            ProposedItem {
                id: was.map(|item| item.id.as_str()).or(wanted.id),
                owner,
                ..wanted.clone()
            }
        };
        let mut combined: Vec<ProposedItem> = Vec::with_capacity(snapshot.len() + kept.len());
        let mut queue = kept.iter();
        for (j, item) in snapshot.iter().enumerate() {
            if !covered[j] {
                combined.push(staying_as_it_is(item, &staying, &listed));
            } else if let Some(&(i, continued)) = queue.next() {
                combined.push(own(i, continued));
            }
        }
        for &(i, continued) in queue {
            combined.push(own(i, continued));
        }
        self.replace(&combined, options)
    }
}

/// ITEM, which a whole-list write does not cover, proposed as it is:
/// only a parent or blocker the write drops from the list leaves it.
fn staying_as_it_is<'a>(
    item: &'a Item,
    staying: &FxHashSet<&str>,
    listed: &FxHashSet<&str>,
) -> ProposedItem<'a> {
    let mut blocked_by = item.blocked_by.clone();
    blocked_by.retain(|id| staying.contains(id.as_str()) || !listed.contains(id.as_str()));
    ProposedItem {
        id: Some(item.id.as_str()),
        content: &item.content,
        active_form: Some(&item.active_form),
        status: item.status,
        parent: item
            .parent
            .as_deref()
            .filter(|parent| staying.contains(parent)),
        description: item.description.as_deref(),
        blocked_by,
        owner: item.owner.as_deref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::BreakerLimits;
    use crate::session::LoopOptions;
    use crate::validate::Input;
    use serde_json::json;

    fn write(
        s: &mut Session,
        agent: Option<&str>,
        v: serde_json::Value,
    ) -> Result<String, InvalidInput> {
        let input = Input::from_json(&v);
        s.write_as_agent(agent, |s| {
            s.write(&input, &Options::default(), false, vec![])
                .map(|outcome| outcome.text)
        })
    }

    fn task(
        s: &mut Session,
        agent: Option<&str>,
        tool: &str,
        v: serde_json::Value,
    ) -> Result<String, InvalidInput> {
        let input = Input::from_json(&v);
        s.write_as_agent(agent, |s| s.task_tool(tool, &input, &Options::default()))
    }

    fn owners(s: &Session) -> Vec<(String, Status, Option<String>)> {
        s.items
            .iter()
            .map(|i| (i.id.clone(), i.status, i.owner.clone()))
            .collect()
    }

    fn own(id: &str, status: Status, owner: Option<&str>) -> (String, Status, Option<String>) {
        (id.to_string(), status, owner.map(str::to_string))
    }

    /// Breaker limits and loop options with a hard cap of CAP calls.
    fn hard_capped(cap: u32) -> (BreakerLimits, LoopOptions) {
        let limits = BreakerLimits {
            hard_cap: cap,
            ..BreakerLimits::default()
        };
        let options = LoopOptions {
            breaker: limits,
            ..LoopOptions::default()
        };
        (limits, options)
    }

    /// The lead's plan: t1 running, t2 and t3 pending.
    fn planned() -> Session {
        let mut s = Session::started_now();
        write(
            &mut s,
            None,
            json!({"todos": [
                {"content": "Plan", "status": "in_progress"},
                {"content": "Patch the loop", "status": "pending"},
                {"content": "Test", "status": "pending"}]}),
        )
        .unwrap();
        s
    }

    use Status::{Completed, InProgress, Pending};

    #[test]
    fn agents_get_unique_names_while_running() {
        let mut s = Session::started_now();
        assert_eq!(s.agent_start("executor").unwrap(), "executor");
        assert_eq!(s.agent_start("executor").unwrap(), "executor-2");
        assert_eq!(s.agent_start("researcher").unwrap(), "researcher");
        assert_eq!(s.agent_start("executor").unwrap(), "executor-3");
        assert_eq!(s.agent_end("executor-2"), None);
        assert_eq!(s.agent_start("executor").unwrap(), "executor-2");
        let names: Vec<String> = s.running_agents().into_iter().map(|a| a.name).collect();
        assert_eq!(
            names,
            ["executor", "researcher", "executor-3", "executor-2"]
        );
        assert_eq!(s.running_agents()[1].kind, "researcher");
        for bad in ["", "  ", "a\nb"] {
            assert_eq!(s.agent_start(bad).unwrap_err().path, "type");
        }
        assert!(s.agent_start(&"x".repeat(101)).is_err());
    }

    #[test]
    fn a_call_for_an_agent_that_is_not_running_is_refused() {
        let mut s = planned();
        let before = owners(&s);
        let error = write(
            &mut s,
            Some("ghost"),
            json!({"todos": [{"content": "x", "status": "pending"}]}),
        )
        .unwrap_err();
        assert_eq!(error.path, "efrit-todo-agent");
        assert!(
            error.message.contains("no sub-agent \"ghost\" is running"),
            "{}",
            error.message
        );
        assert_eq!(owners(&s), before);
    }

    #[test]
    fn starting_an_unowned_task_claims_it_and_the_lead_keeps_running() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        let text = task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        assert!(text.contains("t2"), "{text}");
        assert_eq!(
            owners(&s),
            [
                own("t1", InProgress, None),
                own("t2", InProgress, Some("executor")),
                own("t3", Pending, None)
            ]
        );
        let views = s.running_agents();
        assert_eq!(views[0].current, Some(1));
        // Through todo_write's merge as well.
        s.agent_start("executor").unwrap();
        write(
            &mut s,
            Some("executor-2"),
            json!({"merge": true, "todos": [{"id": "t3", "status": "in_progress"}]}),
        )
        .unwrap();
        assert_eq!(s.items[2].owner.as_deref(), Some("executor-2"));
        assert_eq!(s.items[0].status, InProgress);
        assert_eq!(s.items[1].status, InProgress);
    }

    #[test]
    fn one_running_item_per_agent() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskCreate",
            json!({"subject": "Lint"}),
        )
        .unwrap();
        assert_eq!(
            s.items[3].owner.as_deref(),
            Some("executor"),
            "what a sub-agent adds is its own"
        );
        let text = task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t4", "status": "in_progress"}),
        )
        .unwrap();
        assert_eq!(
            s.items[1].status, Pending,
            "its own earlier running item: {text}"
        );
        assert_eq!(s.items[0].status, InProgress, "the lead's stays");
        // The lead starting t3 demotes its own t1 only.
        write(
            &mut s,
            None,
            json!({"merge": true, "todos": [{"id": "t3", "status": "in_progress"}]}),
        )
        .unwrap();
        assert_eq!(
            owners(&s),
            [
                own("t1", Pending, None),
                own("t2", Pending, Some("executor")),
                own("t3", InProgress, None),
                own("t4", InProgress, Some("executor")),
            ]
        );
    }

    #[test]
    fn a_sub_agent_cannot_change_another_agents_task_and_nothing_changes() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor-2"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        let before = s.items.clone();
        let seq = s.history.last_seq();
        let error = task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "completed"}),
        )
        .unwrap_err();
        assert_eq!(error.path, "taskId");
        assert_eq!(
            error.message,
            "t2 is owned by executor-2; only executor-2 or the lead may change it"
        );
        let error = write(
            &mut s,
            Some("executor"),
            json!({"merge": true, "todos": [{"id": "t2", "content": "Mine now"}]}),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "todos[0].id: t2 is owned by executor-2; only executor-2 or the lead may change it"
        );
        let error = write(
            &mut s,
            Some("executor"),
            json!({"todos": [{"id": "t2", "content": "Patch the loop", "status": "completed"}]}),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "todos[0]: t2 is owned by executor-2; only executor-2 or the lead may change it"
        );
        let error = task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "deleted"}),
        )
        .unwrap_err();
        assert!(error.message.contains("owned by executor-2"), "{error}");
        assert_eq!(s.items, before);
        assert_eq!(s.history.last_seq(), seq);
    }

    #[test]
    fn the_lead_may_change_a_sub_agents_task_and_the_result_names_the_owner() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        let text = task(
            &mut s,
            None,
            "TaskUpdate",
            json!({"taskId": "t2", "status": "completed"}),
        )
        .unwrap();
        assert!(text.contains("t2 (executor)"), "{text}");
        assert_eq!(s.items[1].status, Completed);
        assert_eq!(s.items[1].owner.as_deref(), Some("executor"));
        // The user may too.
        s.user_edit(
            super::super::UserEdit::SetStatus {
                id: "t2".into(),
                status: Pending,
            },
            &Options::default().limits,
        )
        .unwrap();
        assert_eq!(s.items[1].status, Pending);
    }

    #[test]
    fn a_sub_agents_whole_list_covers_its_own_items_only() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        let text = write(
            &mut s,
            Some("executor"),
            json!({"todos": [
                {"id": "t2", "content": "Patch the loop", "status": "in_progress"},
                {"content": "Read the loop", "status": "completed"},
                {"content": "Run the tests", "status": "pending"}]}),
        )
        .unwrap();
        assert!(!text.contains("dropped"), "others are not dropped: {text}");
        assert!(
            text.ends_with("Next: work on t2; mark it completed when it is done."),
            "{text}"
        );
        assert_eq!(
            owners(&s),
            [
                own("t1", InProgress, None),
                own("t2", InProgress, Some("executor")),
                own("t3", Pending, None),
                own("t4", Completed, Some("executor")),
                own("t5", Pending, Some("executor")),
            ]
        );
        // Its next whole list drops its own t5 (reported) and keeps the rest;
        // the lead's items it lists unchanged stay as they are.
        let text = write(
            &mut s,
            Some("executor"),
            json!({"todos": [
                {"id": "t1", "content": "Plan", "status": "in_progress"},
                {"id": "t2", "content": "Patch the loop", "status": "completed"},
                {"id": "t4", "content": "Read the loop", "status": "completed"}]}),
        )
        .unwrap();
        assert!(
            text.contains("were dropped: t5 [pending] Run the tests;"),
            "{text}"
        );
        assert!(
            text.ends_with("Next: set t3 in_progress and start it (Test)."),
            "{text}"
        );
        assert_eq!(
            s.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
            ["t1", "t2", "t3", "t4"]
        );
        assert_eq!(
            s.items[0].owner, None,
            "listing the lead's running item does not claim it"
        );
    }

    #[test]
    fn the_leads_whole_list_leaves_sub_agents_items_alone() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskCreate",
            json!({"subject": "Lint"}),
        )
        .unwrap();
        let text = write(
            &mut s,
            None,
            json!({"todos": [
                {"id": "t1", "content": "Plan", "status": "completed"},
                {"content": "Release", "status": "in_progress"}]}),
        )
        .unwrap();
        assert!(
            text.contains("were dropped: t3 [pending] Test;"),
            "its own t3 is dropped: {text}"
        );
        assert!(
            text.ends_with("Next: work on t5; mark it completed when it is done."),
            "{text}"
        );
        assert_eq!(
            owners(&s),
            [
                own("t1", Completed, None),
                own("t2", InProgress, Some("executor")),
                own("t5", InProgress, None),
                own("t4", Pending, Some("executor")),
            ]
        );
        // Undo brings the whole list back as it was.
        assert!(s.undo().is_some());
        assert_eq!(
            s.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
            ["t1", "t2", "t3", "t4"]
        );
    }

    #[test]
    fn ending_an_agent_puts_its_running_tasks_back_to_pending() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        assert_eq!(s.agent_end("executor"), None);
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        let text = s.agent_end("executor").unwrap();
        assert_eq!(
            text,
            "executor left t2 (Patch the loop) unfinished; it is pending again."
        );
        assert_eq!(owners(&s)[1], own("t2", Pending, Some("executor")));
        assert_eq!(s.items[0].status, InProgress);
        assert!(s.running_agents().is_empty());
        assert_eq!(s.agent_end("executor"), None);
        // The owner is still a known agent: the lead's whole list keeps t2.
        let text = write(&mut s, None, json!({"todos": [{"id": "t1", "content": "Plan", "status": "in_progress"}, {"id": "t3", "content": "Test", "status": "pending"}]})).unwrap();
        assert!(!text.contains("t2"), "{text}");
        assert_eq!(s.items.len(), 3);
    }

    #[test]
    fn each_agent_has_its_own_breaker_and_the_hard_cap_counts_all() {
        let (limits, options) = hard_capped(12);
        let mut s = planned();
        s.agent_start("executor").unwrap();
        let call = |s: &mut Session, agent: Option<&str>| {
            let input = Input::from_json(&json!({"path": "a.el"}));
            s.as_agent(agent, |s| {
                let refused = s.before_tool("read_file", || input.clone(), &limits);
                let text = refused.is_none().then(|| {
                    s.after_tool("read_file", input, Some("ok".into()), false, None, &options)
                });
                (refused, text)
            })
            .unwrap()
        };
        // The sub-agent repeats itself: its third identical call warns,
        // its fourth is refused, the fifth trips it.
        for _ in 0..3 {
            assert!(call(&mut s, Some("executor")).0.is_none());
        }
        assert!(call(&mut s, Some("executor")).0.is_some());
        let (refused, _) = call(&mut s, Some("executor"));
        assert!(refused.unwrap().contains("circuit breaker tripped"));
        assert!(s.breaker_of(Some("executor")).unwrap().tripped);
        // The lead is not refused: it never made those calls.
        assert!(!s.breaker_of(None).unwrap().tripped);
        assert!(call(&mut s, None).0.is_none());
        assert_eq!(s.breaker_of(None).unwrap().calls, 1);
        // A second sub-agent and the lead count against the one hard cap.
        s.agent_start("researcher").unwrap();
        let mut last = None;
        for n in 0..8 {
            let input = Input::from_json(&json!({"n": n}));
            let agent = if n % 2 == 0 { Some("researcher") } else { None };
            last = Some(
                s.as_agent(agent, |s| {
                    s.before_tool("shell", || input.clone(), &limits)
                        .or_else(|| {
                            s.after_tool("shell", input, Some("ok".into()), false, None, &options)
                        })
                })
                .unwrap(),
            );
        }
        // 3 + 1 + 8 = 12 calls: the last one tripped the cap.
        assert!(last
            .flatten()
            .unwrap()
            .contains("12 tool calls in this session (hard cap 12)"));
        let refused = s
            .as_agent(None, |s| s.before_tool("shell", || Input::Null, &limits))
            .unwrap();
        assert!(refused.unwrap().contains("hard cap 12"));
    }

    #[test]
    fn the_ledger_names_each_calls_agent_and_its_running_item() {
        let options = LoopOptions::default();
        let mut s = planned();
        s.agent_start("executor").unwrap();
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        s.as_agent(Some("executor"), |s| {
            s.after_tool(
                "shell",
                Input::Null,
                Some("ok".into()),
                false,
                None,
                &options,
            )
        })
        .unwrap();
        s.as_agent(None, |s| {
            s.after_tool(
                "shell",
                Input::Null,
                Some("ok".into()),
                false,
                None,
                &options,
            )
        })
        .unwrap();
        let entries = s.entries();
        assert_eq!(entries[0].agent.as_deref(), Some("executor"));
        assert_eq!(entries[0].todo.as_deref(), Some("t2"));
        assert_eq!(entries[1].agent, None);
        assert_eq!(entries[1].todo.as_deref(), Some("t1"));
        let report = s.report(None, &options);
        assert!(
            report.contains("--- 1. shell null (by executor, during t2)"),
            "{report}"
        );
        assert!(report.contains("--- 2. shell null (during t1)"), "{report}");
    }

    #[test]
    fn a_sub_agents_turn_ends_on_its_own_items() {
        let mut s = planned();
        s.agent_start("executor").unwrap();
        let options = GuideOptions::default();
        assert_eq!(
            s.as_agent(Some("executor"), |s| s.turn_end(false, &options))
                .unwrap(),
            None
        );
        task(
            &mut s,
            Some("executor"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "in_progress"}),
        )
        .unwrap();
        assert!(s
            .as_agent(Some("executor"), |s| s.turn_end(false, &options))
            .unwrap()
            .is_some());
    }

    #[test]
    fn without_sub_agents_nothing_changes() {
        // The lead as the only agent: owners set by the model do not
        // split the list, one item runs, a whole list covers everything.
        let mut a = Session::started_now();
        let mut b = Session::started_now();
        let steps = [
            json!({"todos": [{"content": "A", "status": "in_progress", "owner": "executor"}, {"content": "B", "status": "pending"}]}),
            json!({"merge": true, "todos": [{"id": "t2", "status": "in_progress"}]}),
            json!({"todos": [{"id": "t2", "content": "B", "status": "completed"}]}),
        ];
        for step in steps {
            let plain = b
                .write(&Input::from_json(&step), &Options::default(), false, vec![])
                .unwrap()
                .text;
            assert_eq!(write(&mut a, None, step).unwrap(), plain);
            let strip = |s: &Session| {
                s.items
                    .iter()
                    .map(|i| (i.id.clone(), i.content.clone(), i.status, i.owner.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(strip(&a), strip(&b));
        }
    }

    #[test]
    fn a_peer_that_ends_lets_its_open_items_go() {
        let mut s = Session::started_now();
        assert_eq!(s.peer_start("efrit").unwrap(), "efrit");
        write(
            &mut s,
            Some("efrit"),
            json!({"todos": [
                {"content": "Read", "status": "completed"},
                {"content": "Patch", "status": "in_progress"},
                {"content": "Test", "status": "pending"}]}),
        )
        .unwrap();
        assert_eq!(
            owners(&s),
            [
                own("t1", Completed, Some("efrit")),
                own("t2", InProgress, Some("efrit")),
                own("t3", Pending, Some("efrit"))
            ]
        );
        let text = s.agent_end("efrit").unwrap();
        assert!(text.contains("t2 (Patch)"), "{text}");
        assert!(text.contains("free to take"), "{text}");
        // What it did stays its own; what is open is anybody's.
        assert_eq!(
            owners(&s),
            [
                own("t1", Completed, Some("efrit")),
                own("t2", Pending, None),
                own("t3", Pending, None)
            ]
        );
        // Another peer takes the work up.
        s.peer_start("chat").unwrap();
        task(
            &mut s,
            Some("chat"),
            "TaskUpdate",
            json!({"taskId": "t2", "status": "completed"}),
        )
        .unwrap();
        assert_eq!(owners(&s)[1], own("t2", Completed, None));
        // One undo takes the let-go back as a whole.
        assert!(s
            .history
            .changes()
            .any(|change| change.summary.contains("efrit ended")));
    }

    #[test]
    fn a_peer_with_only_pending_items_lets_them_go_silently() {
        let mut s = Session::started_now();
        s.peer_start("chat").unwrap();
        write(
            &mut s,
            Some("chat"),
            json!({"todos": [{"content": "Later", "status": "pending"}]}),
        )
        .unwrap();
        assert_eq!(s.agent_end("chat"), None);
        assert_eq!(owners(&s), [own("t1", Pending, None)]);
    }

    #[test]
    fn running_peers_keep_off_each_others_items() {
        let mut s = Session::started_now();
        s.peer_start("efrit").unwrap();
        s.peer_start("chat").unwrap();
        write(
            &mut s,
            Some("efrit"),
            json!({"todos": [{"content": "Patch", "status": "in_progress"}]}),
        )
        .unwrap();
        let refused = task(
            &mut s,
            Some("chat"),
            "TaskUpdate",
            json!({"taskId": "t1", "status": "completed"}),
        )
        .unwrap_err();
        assert!(
            refused.message.contains("owned by efrit"),
            "{}",
            refused.message
        );
        // A whole-list write of the chat covers its own items only.
        write(
            &mut s,
            Some("chat"),
            json!({"todos": [{"content": "Docs", "status": "pending"}]}),
        )
        .unwrap();
        assert_eq!(
            owners(&s),
            [
                own("t1", InProgress, Some("efrit")),
                own("t2", Pending, Some("chat"))
            ]
        );
    }

    #[test]
    fn a_peer_has_its_own_hard_cap_and_report() {
        let (limits, options) = hard_capped(4);
        let mut s = Session::started_now();
        s.peer_start("efrit").unwrap();
        s.peer_start("chat").unwrap();
        let call = |s: &mut Session, agent: &str, n: usize| {
            let input = Input::from_json(&json!({ "n": n }));
            s.as_agent(Some(agent), |s| {
                s.before_tool("shell", || input.clone(), &limits)
                    .or_else(|| {
                        s.after_tool(
                            "shell",
                            input,
                            Some(format!("{agent} ran {n}")),
                            false,
                            None,
                            &options,
                        )
                    })
            })
            .unwrap()
        };
        for n in 0..3 {
            call(&mut s, "efrit", n);
            call(&mut s, "chat", n);
        }
        // Six calls in the session, three each: nobody is at the cap of 4.
        assert!(!s.breaker_of(Some("efrit")).unwrap().tripped);
        assert!(!s.breaker_of(Some("chat")).unwrap().tripped);
        assert!(!s.breaker_of(None).unwrap().tripped);
        assert_eq!(s.breaker_of(None).unwrap().calls, 0);
        let report = s
            .as_agent(Some("chat"), |s| s.report(None, &options))
            .unwrap();
        assert!(report.contains("3 tool calls"), "{report}");
        assert!(
            report.contains("(by chat)") && !report.contains("(by efrit)"),
            "{report}"
        );
        let whole = s.report(None, &options);
        assert!(whole.contains("6 tool calls"), "{whole}");
    }

    #[test]
    fn a_peer_is_told_it_shares_the_list() {
        let mut s = planned();
        let lead = s.prompt_guidance(30).to_string();
        assert!(!lead.contains("shared"), "{lead}");
        s.peer_start("efrit").unwrap();
        s.agent_start("executor").unwrap();
        let peer = s
            .as_agent(Some("efrit"), |s| s.prompt_guidance(30).to_string())
            .unwrap();
        assert!(
            peer.contains("shared with other agents; you work on it as efrit"),
            "{peer}"
        );
        assert!(peer.contains("t2 [pending] Patch the loop"), "{peer}");
        // A sub-agent working for the lead is not a peer; the lead's text
        // stays the same.
        let sub = s
            .as_agent(Some("executor"), |s| s.prompt_guidance(30).to_string())
            .unwrap();
        assert!(!sub.contains("shared"), "{sub}");
        assert_eq!(s.prompt_guidance(30), lead);
    }
}

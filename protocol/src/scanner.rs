//! The ExitPlanMode scanner (docs/ARCHITECTURE.md §3.3): a pure state machine the client's poll
//! loop and the server share. Feed it each new batch of events; it says what the batch means for
//! the plan.

use std::collections::{HashMap, HashSet};

use crate::events::{Event, EventBody};
use crate::plan_text::{extract_approved_plan, extract_teleport_plan};
use crate::session::{Phase, SessionStatus};

/// What a batch of events means for the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanResult {
    /// The newest plan was approved: execution continues remotely.
    Approved { plan: String, edited: bool },
    /// The newest plan was sent back to the terminal.
    Teleport { plan: String },
    /// A plan was rejected with feedback; the agent revises.
    Rejected { id: String },
    /// A plan awaits review.
    Pending,
    /// The session ended (a `result` with a non-`success` subtype).
    Terminated { subtype: String },
    /// Nothing that matters for the plan.
    Unchanged,
}

/// A batch the scanner cannot make sense of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// An approval result without the `## Approved Plan` marker: the plan cannot be extracted.
    #[error("approval of {tool_use_id} carries no approved-plan marker")]
    MarkerMissing { tool_use_id: String },
}

/// Tracks ExitPlanMode calls and their results across polls.
#[derive(Debug, Default, Clone)]
pub struct ExitPlanModeScanner {
    /// Main-agent ExitPlanMode tool_use ids, oldest first.
    calls: Vec<String>,
    /// tool_result text and error flag, by tool_use id.
    results: HashMap<String, (String, bool)>,
    rejected: HashSet<String>,
    rejection_count: u32,
}

enum Judgement {
    Approved { plan: String, edited: bool },
    Teleport { plan: String },
    Rejected,
    Pending,
}

impl ExitPlanModeScanner {
    /// A scanner that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many plans were rejected so far.
    pub fn rejection_count(&self) -> u32 {
        self.rejection_count
    }

    /// Whether the newest non-rejected ExitPlanMode call still awaits its result.
    pub fn has_pending_plan(&self) -> bool {
        self.newest_open_call()
            .is_some_and(|id| !self.results.contains_key(id))
    }

    /// Ingest a batch of new events (stamped or not) and judge it.
    pub fn ingest<E: AsRef<EventBody>>(&mut self, events: &[E]) -> Result<ScanResult, ScanError> {
        if events.is_empty() {
            return Ok(ScanResult::Unchanged);
        }
        let mut terminated = None;
        for body in events.iter().map(AsRef::as_ref) {
            if body.parent_tool_use_id().is_some() {
                continue;
            }
            self.record(body, &mut terminated);
        }
        let newly_rejected = self.collect_rejections();
        let newest = match self.newest_open_call() {
            Some(id) => Some((id.to_owned(), self.judge(id)?)),
            None => None,
        };
        Ok(match (newest, terminated, newly_rejected) {
            (Some((_, Judgement::Approved { plan, edited })), _, _) => {
                ScanResult::Approved { plan, edited }
            }
            (Some((_, Judgement::Teleport { plan })), _, _) => ScanResult::Teleport { plan },
            (_, Some(subtype), _) => ScanResult::Terminated { subtype },
            (_, None, Some(id)) => ScanResult::Rejected { id },
            (Some((_, Judgement::Pending)), None, None) => ScanResult::Pending,
            (Some((_, Judgement::Rejected)) | None, None, None) => ScanResult::Unchanged,
        })
    }

    fn record(&mut self, body: &EventBody, terminated: &mut Option<String>) {
        match body {
            EventBody::Assistant(_) => {
                for (id, _) in body.exit_plan_mode_calls() {
                    if !self.calls.iter().any(|c| c == id) {
                        self.calls.push(id.to_owned());
                    }
                }
            }
            EventBody::User(_) => {
                for (id, text, is_error) in body.tool_results() {
                    self.results.insert(id.to_owned(), (text, is_error));
                }
            }
            EventBody::Result(r) if r.is_terminal() => *terminated = Some(r.subtype.clone()),
            _ => {}
        }
    }

    /// Mark every call whose result is a plain error (not a teleport) as rejected; return the
    /// newest one this batch rejected.
    fn collect_rejections(&mut self) -> Option<String> {
        let fresh: Vec<String> = self
            .calls
            .iter()
            .filter(|id| !self.rejected.contains(*id))
            .filter(|id| match self.results.get(*id) {
                Some((text, true)) => extract_teleport_plan(text).is_none(),
                _ => false,
            })
            .cloned()
            .collect();
        self.rejection_count += u32::try_from(fresh.len()).unwrap_or(u32::MAX);
        self.rejected.extend(fresh.iter().cloned());
        fresh.last().cloned()
    }

    fn newest_open_call(&self) -> Option<&str> {
        self.calls
            .iter()
            .rev()
            .find(|id| !self.rejected.contains(*id))
            .map(String::as_str)
    }

    fn judge(&self, id: &str) -> Result<Judgement, ScanError> {
        let Some((text, is_error)) = self.results.get(id) else {
            return Ok(Judgement::Pending);
        };
        if *is_error {
            return Ok(match extract_teleport_plan(text) {
                Some(plan) => Judgement::Teleport { plan },
                None => Judgement::Rejected,
            });
        }
        match extract_approved_plan(text) {
            Some((plan, edited)) => Ok(Judgement::Approved { plan, edited }),
            None => Err(ScanError::MarkerMissing {
                tool_use_id: id.to_owned(),
            }),
        }
    }
}

impl AsRef<EventBody> for EventBody {
    fn as_ref(&self) -> &EventBody {
        self
    }
}

impl AsRef<EventBody> for Event {
    fn as_ref(&self) -> &EventBody {
        &self.body
    }
}

/// The pill phase: `plan_ready` if a plan is pending, else `needs_input` if the session is idle
/// or requires action and the poll brought no new events, else `running`. Archived sessions
/// are `ended`.
pub fn derive_phase(status: SessionStatus, has_pending_plan: bool, new_events: bool) -> Phase {
    if status == SessionStatus::Archived {
        return Phase::Ended;
    }
    if has_pending_plan {
        return Phase::PlanReady;
    }
    match status {
        SessionStatus::Idle | SessionStatus::RequiresAction if !new_events => Phase::NeedsInput,
        _ => Phase::Running,
    }
}

#[cfg(test)]
#[path = "scanner_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "scanner_props.rs"]
mod props;

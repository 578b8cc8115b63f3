//! `ultraplan wait`: whether a session has reached a phase, ended before it, or not yet, and
//! the exit code a script branches on. Pure: events and the session resource go in.
//!
//! Phases (`--until`):
//! - `plan`: a plan is ready for review, or one was already approved or teleported;
//! - `decided`: a plan was approved or teleported (a rejection is not final: the agent revises);
//! - `done`: the work is over: a teleported plan, or an approved plan whose remote execution
//!   finished (or whose session was archived after the approval).
//!
//! A session that is archived, or whose agent died (a `result` other than `success`), before
//! reaching the phase has ended: waiting longer cannot help.

use serde::Serialize;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::{Phase, SessionResource, SessionStatus};
use ultraplan_protocol::{ExitPlanModeScanner, ScanError, ScanResult};

/// Exit status: the phase was reached.
pub const EXIT_REACHED: u8 = 0;
/// Exit status: an error (the server, the network, an unknown session).
pub const EXIT_ERROR: u8 = 1;
/// Exit status: bad arguments (clap's own).
pub const EXIT_USAGE: u8 = 2;
/// Exit status: `--timeout` passed first.
pub const EXIT_TIMED_OUT: u8 = 3;
/// Exit status: the session ended (archived, or its agent failed) before reaching the phase.
pub const EXIT_ENDED: u8 = 4;
/// Exit status: interrupted (Ctrl-C).
pub const EXIT_INTERRUPTED: u8 = 130;

/// The phase to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Until {
    Plan,
    Decided,
    Done,
}

/// A final decision on a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decided {
    Approved,
    Teleported,
}

/// Where a wait stands after a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Waiting,
    Reached,
    /// Ended before reaching the phase.
    Ended,
}

/// How a wait finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Reached,
    Ended,
    TimedOut,
    Interrupted,
}

impl Outcome {
    /// The exit status a script branches on.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Reached => EXIT_REACHED,
            Outcome::Ended => EXIT_ENDED,
            Outcome::TimedOut => EXIT_TIMED_OUT,
            Outcome::Interrupted => EXIT_INTERRUPTED,
        }
    }
}

/// What the events said so far.
#[derive(Debug, Default)]
pub struct Progress {
    scanner: ExitPlanModeScanner,
    decided: Option<Decided>,
    failed: Option<String>,
}

impl Progress {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads new events, oldest first. An approval without its plan marker is an error.
    pub fn ingest(&mut self, events: &[Event]) -> Result<(), ScanError> {
        for event in events {
            if let EventBody::Result(r) = &event.body
                && r.is_terminal()
            {
                self.failed = Some(r.subtype.clone());
            }
        }
        match self.scanner.ingest(events)? {
            ScanResult::Approved { .. } => self.decided = Some(Decided::Approved),
            ScanResult::Teleport { .. } => self.decided = Some(Decided::Teleported),
            _ => {}
        }
        Ok(())
    }

    /// A plan waits for review.
    pub fn plan_ready(&self) -> bool {
        self.scanner.has_pending_plan()
    }

    pub fn decided(&self) -> Option<Decided> {
        self.decided
    }

    /// The `result` subtype that ended the agent, if one did.
    pub fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Where the wait for `until` stands, given the session's status and execution.
    pub fn verdict(
        &self,
        until: Until,
        status: SessionStatus,
        execution: Option<ExecutionState>,
    ) -> Verdict {
        let archived = status == SessionStatus::Archived;
        let reached = match until {
            Until::Plan => self.plan_ready() || self.decided.is_some(),
            Until::Decided => self.decided.is_some(),
            Until::Done => match self.decided {
                Some(Decided::Teleported) => true,
                Some(Decided::Approved) => {
                    execution == Some(ExecutionState::Finished)
                        || (archived && self.failed.is_none())
                }
                None => false,
            },
        };
        if reached {
            Verdict::Reached
        } else if archived || self.failed.is_some() {
            Verdict::Ended
        } else {
            Verdict::Waiting
        }
    }
}

/// The final state `wait --json` prints (every key always present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub id: String,
    pub until: Until,
    pub outcome: Outcome,
    pub exit_code: u8,
    /// The server's phase of the session; `null` when it was never read.
    pub phase: Option<Phase>,
    pub session_status: Option<SessionStatus>,
    pub plan_ready: bool,
    pub decision: Option<Decided>,
    /// The `result` subtype that ended the agent.
    pub failed: Option<String>,
    pub execution: Option<ExecutionState>,
    pub last_event_id: i64,
}

impl Report {
    pub fn new(
        id: &str,
        until: Until,
        outcome: Outcome,
        progress: &Progress,
        session: Option<&SessionResource>,
        last_event_id: i64,
    ) -> Self {
        Self {
            id: crate::sanitize::line(id),
            until,
            outcome,
            exit_code: outcome.exit_code(),
            phase: session.map(|s| s.phase),
            session_status: session.map(|s| s.session_status),
            plan_ready: progress.plan_ready(),
            decision: progress.decided(),
            failed: progress.failed().map(crate::sanitize::line),
            execution: session.and_then(|s| s.execution.as_ref().map(|e| e.state)),
            last_event_id,
        }
    }

    /// One line for a person.
    pub fn sentence(&self) -> String {
        let until = match self.until {
            Until::Plan => "a plan",
            Until::Decided => "a decision",
            Until::Done => "the end of the work",
        };
        let status = self.session_status.map_or("unknown", SessionStatus::as_str);
        match self.outcome {
            Outcome::Reached => format!("Session {} reached {until}.", self.id),
            Outcome::TimedOut => format!(
                "Timed out waiting for {until} in session {} (status {status}).",
                self.id
            ),
            Outcome::Interrupted => format!("Stopped waiting for {until}."),
            Outcome::Ended => {
                let why = match &self.failed {
                    Some(subtype) => format!("its agent ended ({subtype})"),
                    None => format!("it is {status}"),
                };
                format!("Session {} ended before {until}: {why}.", self.id)
            }
        }
    }
}

#[cfg(test)]
#[path = "wait_tests.rs"]
mod tests;

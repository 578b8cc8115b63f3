//! The poll loop as a pure state machine (docs/ARCHITECTURE.md §3.4): a poll result goes in, the
//! actions the IO layer must take come out, in order. No sockets, no clocks: time is an input.
//!
//! The time limit is the session's (the server flag `timeout_seconds`), which the server
//! enforces from the session's creation: the watch measures it from the same instant
//! ([`PollConfig::elapsed`]), and reads the server's own `error_timeout` result as that timeout,
//! so whichever side notices first, the user sees `timeout_pending` or `timeout_no_plan`.

use std::time::Duration;

use ultraplan_protocol::activity::AgentCounts;
use ultraplan_protocol::constants::{
    DEFAULT_TIMEOUT_SECONDS, MAX_TRANSIENT_POLL_FAILURES, POLL_INTERVAL_SECS,
};
use ultraplan_protocol::events::Event;
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::{Phase, SessionStatus};
use ultraplan_protocol::{ExitPlanModeScanner, ScanError, ScanResult, derive_phase};

use crate::api::ApiError;
use crate::state::{FailureReason, Outcome};

/// The `result` subtype the server appends when the session runs past `timeout_seconds`.
const SERVER_TIMEOUT: &str = "error_timeout";

/// Timing and patience of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollConfig {
    /// Pause between polls.
    pub interval: Duration,
    /// The session's time limit, measured from its creation.
    pub timeout: Duration,
    /// How long the session had already run when the watch started (zero when unknown).
    pub elapsed: Duration,
    /// Consecutive transient failures that end the watch.
    pub max_transient_failures: u32,
}

impl Default for PollConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(POLL_INTERVAL_SECS),
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECONDS),
            elapsed: Duration::ZERO,
            max_transient_failures: MAX_TRANSIENT_POLL_FAILURES,
        }
    }
}

/// What one successful poll saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    /// The new events, oldest first.
    pub events: Vec<Event>,
    pub status: SessionStatus,
    pub usage: Option<Usage>,
    /// Subagents and tool calls, as the session resource counts them.
    pub activity: Option<(AgentCounts, u64)>,
    /// The agent gave its sandbox up while it waits on the user.
    pub parked: bool,
}

/// One input of the machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Polled(Tick),
    Failed(ApiError),
    /// The watcher was told to stop (a signal).
    Stop,
}

/// What the IO layer must do, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Archive the remote session (a 409 counts as success).
    Archive,
    /// Persist [`Machine::view`].
    WriteState,
    /// Tell the user the session now needs them (bell or desktop notification).
    Notify(Phase),
    /// Wait, then poll again.
    Sleep(Duration),
    /// The watch is over.
    Finish,
}

/// What the machine knows, mirrored into the state file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    pub phase: Option<Phase>,
    pub status: Option<SessionStatus>,
    pub last_event_id: i64,
    pub rejection_count: u32,
    pub outcome: Option<Outcome>,
    pub failure: Option<FailureReason>,
    /// Extra words for the failure (a subtype, the last error).
    pub failure_detail: Option<String>,
    pub plan: Option<String>,
    pub usage: Option<Usage>,
    pub activity: Option<(AgentCounts, u64)>,
    /// The agent is parked while it waits on the user.
    pub parked: bool,
    pub transient_failures: u32,
    /// What is left of the time limit while a pending plan nears it ([`crate::pill::near_limit`]).
    pub expires_in: Option<Duration>,
}

impl View {
    /// The phase, `running` before the first poll.
    pub fn phase(&self) -> Phase {
        self.phase.unwrap_or(Phase::Running)
    }
}

/// The poll loop's state.
#[derive(Debug, Clone)]
pub struct Machine {
    config: PollConfig,
    scanner: ExitPlanModeScanner,
    started: Duration,
    /// What is left of the time limit at `started`.
    budget: Duration,
    view: View,
    /// The `plan` input of the newest main-agent ExitPlanMode call: what a timeout saves.
    last_plan: Option<String>,
}

impl Machine {
    /// A machine started at `now` (any monotonic origin), `config.elapsed` into the session.
    pub fn new(config: PollConfig, now: Duration) -> Self {
        Self {
            config,
            scanner: ExitPlanModeScanner::new(),
            started: now,
            budget: config.timeout.saturating_sub(config.elapsed),
            view: View::default(),
            last_plan: None,
        }
    }

    pub fn view(&self) -> &View {
        &self.view
    }

    pub fn config(&self) -> &PollConfig {
        &self.config
    }

    /// Whether the watch is over.
    pub fn finished(&self) -> bool {
        self.view.outcome.is_some()
    }

    /// Feeds one input at time `now`; returns the actions to take, in order.
    pub fn step(&mut self, input: Input, now: Duration) -> Vec<Action> {
        if self.finished() {
            return vec![Action::Finish];
        }
        match input {
            Input::Polled(tick) => self.polled(tick, now),
            Input::Failed(error) => self.failed(&error, now),
            Input::Stop => self.fail(
                FailureReason::Stopped,
                Some("the watcher was told to stop".to_owned()),
            ),
        }
    }

    fn polled(&mut self, tick: Tick, now: Duration) -> Vec<Action> {
        self.view.transient_failures = 0;
        let new_events = !tick.events.is_empty();
        if let Some(last) = tick.events.iter().map(|e| e.id).max() {
            self.view.last_event_id = self.view.last_event_id.max(last);
        }
        self.view.status = Some(tick.status);
        if tick.usage.is_some() {
            self.view.usage = tick.usage;
        }
        if tick.activity.is_some() {
            self.view.activity = tick.activity;
        }
        self.view.parked = tick.parked;
        if let Some(plan) = newest_plan_input(&tick.events) {
            self.last_plan = Some(plan);
        }
        let scanned = self.scanner.ingest(&tick.events);
        self.view.rejection_count = self.scanner.rejection_count();
        match scanned {
            Err(ScanError::MarkerMissing { tool_use_id }) => {
                return self.fail(FailureReason::ExtractMarkerMissing, Some(tool_use_id));
            }
            Ok(ScanResult::Approved { plan, .. }) => {
                return self.succeed(Outcome::Approved, plan);
            }
            Ok(ScanResult::Teleport { plan }) => return self.succeed(Outcome::Teleport, plan),
            Ok(ScanResult::Terminated { subtype }) if subtype == SERVER_TIMEOUT => {
                return self.time_out();
            }
            Ok(ScanResult::Terminated { subtype }) => {
                return self.fail(FailureReason::Terminated, Some(subtype));
            }
            Ok(ScanResult::Rejected { .. } | ScanResult::Pending | ScanResult::Unchanged) => {}
        }
        // Past the limit, the server archives the session on its own: that is the timeout,
        // not a stop from elsewhere.
        if self.past_limit(now) {
            return self.time_out();
        }
        if tick.status == SessionStatus::Archived {
            return self.fail(
                FailureReason::Stopped,
                Some("the session was archived".to_owned()),
            );
        }
        let phase = derive_phase(tick.status, self.scanner.has_pending_plan(), new_events);
        let mut actions = self.set_phase(phase);
        let remaining = self.remaining(now);
        self.view.expires_in = (phase == Phase::PlanReady
            && crate::pill::near_limit(self.config.timeout, remaining))
        .then_some(remaining);
        actions.extend(self.continue_or_time_out(now));
        actions
    }

    fn failed(&mut self, error: &ApiError, now: Duration) -> Vec<Action> {
        if !error.is_transient() {
            return self.fail(FailureReason::NetworkOrUnknown, Some(error.to_string()));
        }
        self.view.transient_failures += 1;
        if self.view.transient_failures >= self.config.max_transient_failures {
            let detail = format!(
                "{} polls in a row failed; last: {error}",
                self.view.transient_failures
            );
            return self.fail(FailureReason::NetworkOrUnknown, Some(detail));
        }
        tracing::warn!(
            failures = self.view.transient_failures,
            "poll failed, will retry: {error}"
        );
        self.continue_or_time_out(now)
    }

    fn set_phase(&mut self, phase: Phase) -> Vec<Action> {
        let changed = self.view.phase != Some(phase);
        self.view.phase = Some(phase);
        match phase {
            Phase::PlanReady | Phase::NeedsInput if changed => vec![Action::Notify(phase)],
            _ => Vec::new(),
        }
    }

    fn past_limit(&self, now: Duration) -> bool {
        self.remaining(now).is_zero()
    }

    /// What is left of the time limit at `now`.
    fn remaining(&self, now: Duration) -> Duration {
        self.budget.saturating_sub(now.saturating_sub(self.started))
    }

    fn continue_or_time_out(&mut self, now: Duration) -> Vec<Action> {
        if self.past_limit(now) {
            return self.time_out();
        }
        vec![Action::WriteState, Action::Sleep(self.config.interval)]
    }

    /// Ends the watch on the session's time limit, telling a pending plan from none.
    fn time_out(&mut self) -> Vec<Action> {
        let secs = self.config.timeout.as_secs();
        let detail = Some(if secs.is_multiple_of(60) {
            format!("after {} min", secs / 60)
        } else {
            format!("after {secs} s")
        });
        if self.scanner.has_pending_plan() {
            // The plan nobody reviewed goes into the view, so the driver can save it.
            self.view.plan.clone_from(&self.last_plan);
            self.fail(FailureReason::TimeoutPending, detail)
        } else {
            self.fail(FailureReason::TimeoutNoPlan, detail)
        }
    }

    fn succeed(&mut self, outcome: Outcome, plan: String) -> Vec<Action> {
        self.view.outcome = Some(outcome);
        self.view.plan = Some(plan);
        vec![Action::WriteState, Action::Finish]
    }

    fn fail(&mut self, reason: FailureReason, detail: Option<String>) -> Vec<Action> {
        self.view.outcome = Some(Outcome::Failed);
        self.view.failure = Some(reason);
        self.view.failure_detail = detail;
        vec![Action::Archive, Action::WriteState, Action::Finish]
    }
}

/// The `plan` input of the newest main-agent ExitPlanMode call among `events`.
fn newest_plan_input(events: &[Event]) -> Option<String> {
    events
        .iter()
        .flat_map(|e| e.body.exit_plan_mode_calls())
        .filter_map(|(_, plan)| plan)
        .next_back()
        .map(str::to_owned)
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;

//! The thin async loop around [`Machine`]: polls the server, feeds the machine, and carries out
//! its actions. Time comes from a [`Clock`], so tests run the loop on virtual time.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ultraplan_protocol::constants::MAX_EVENTS_PAGE;
use ultraplan_protocol::session::Phase;

use super::machine::{Action, Input, Machine, PollConfig, Tick, View};
use super::notify::Notifier;
use crate::api::{ApiError, Client};
use crate::state::{FailureReason, SessionState, StateStore};

/// Most events gathered in one poll before the machine sees them.
const MAX_EVENTS_PER_POLL: usize = 50 * MAX_EVENTS_PAGE as usize;

/// Archive attempts on transient failures.
const ARCHIVE_ATTEMPTS: u32 = 3;

/// A boxed sleep.
pub type Sleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Where the loop gets time from.
pub trait Clock: Send + Sync {
    /// Monotonic time since an arbitrary origin.
    fn now(&self) -> Duration;
    fn sleep(&self, duration: Duration) -> Sleep<'_>;
}

/// Real time.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl Default for TokioClock {
    fn default() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: Duration) -> Sleep<'_> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Everything the loop talks to.
pub struct Watcher<'a> {
    pub client: &'a Client,
    /// Where to persist the state; `None` keeps it in memory only.
    pub store: Option<&'a StateStore>,
    pub clock: &'a dyn Clock,
    pub notifier: &'a dyn Notifier,
    /// Long-poll `wait` for the events request.
    pub wait: Option<Duration>,
}

impl Watcher<'_> {
    /// Runs the watch of `state.session_id` until it finishes or `stop` resolves; returns the
    /// final state. `on_update` sees every state written.
    pub async fn run(
        &self,
        mut state: SessionState,
        config: PollConfig,
        stop: impl Future<Output = ()>,
        on_update: &mut (dyn FnMut(&SessionState) + Send),
    ) -> SessionState {
        let mut machine = Machine::new(config, self.clock.now());
        let mut stop = std::pin::pin!(stop);
        let mut stop_requested = false;
        loop {
            let input = if stop_requested {
                Input::Stop
            } else {
                let after = machine.view().last_event_id;
                tokio::select! {
                    polled = self.poll(&state.session_id, after) => match polled {
                        Ok(tick) => Input::Polled(tick),
                        Err(error) => Input::Failed(error),
                    },
                    () = &mut stop => { stop_requested = true; Input::Stop }
                }
            };
            for action in machine.step(input, self.clock.now()) {
                match action {
                    Action::Archive => state.archived = self.archive(&state.session_id).await,
                    Action::WriteState => {
                        apply_view(&mut state, machine.view());
                        save_unreviewed_plan(&mut state);
                        self.save(&mut state);
                        on_update(&state);
                    }
                    Action::Notify(phase) => self.notifier.notify(phase, &state),
                    Action::Sleep(duration) => {
                        if !stop_requested {
                            tokio::select! {
                                () = self.clock.sleep(duration) => {}
                                () = &mut stop => stop_requested = true,
                            }
                        }
                    }
                    Action::Finish => return state,
                }
            }
        }
    }

    /// One poll: every new event (following `has_more`) and the session's status and usage,
    /// which the last page carries (older servers: asked for separately).
    async fn poll(&self, id: &str, after_id: i64) -> Result<Tick, ApiError> {
        let mut events = Vec::new();
        let mut after = after_id;
        let mut wait = self.wait;
        let last_session = loop {
            let page = self.client.events(id, after, wait.take()).await?;
            after = page.last_id.unwrap_or(after).max(after);
            let more = page.has_more && !page.data.is_empty();
            events.extend(page.data);
            if !more || events.len() >= MAX_EVENTS_PER_POLL {
                break page.session;
            }
        };
        let session = match last_session {
            Some(session) => *session,
            None => self.client.session(id).await?,
        };
        Ok(Tick {
            events,
            status: session.session_status,
            usage: Some(session.usage),
            activity: Some((session.agents, session.tool_calls)),
            parked: session.parked,
        })
    }

    /// Archives the session, retrying transient failures; true when it is archived.
    async fn archive(&self, id: &str) -> bool {
        for attempt in 1..=ARCHIVE_ATTEMPTS {
            match self.client.archive(id).await {
                Ok(_) => return true,
                Err(e) if e.is_transient() && attempt < ARCHIVE_ATTEMPTS => {
                    tracing::warn!("archiving {id} failed (attempt {attempt}): {e}");
                    self.clock.sleep(Duration::from_secs(1)).await;
                }
                Err(e) => {
                    tracing::error!("could not archive {id}: {e}");
                    return false;
                }
            }
        }
        false
    }

    /// Writes the state, keeping what other commands recorded meanwhile (how a teleported
    /// plan was taken up, where it was saved, an archive).
    fn save(&self, state: &mut SessionState) {
        let Some(store) = self.store else {
            return;
        };
        if let Ok(Some(disk)) = store.load(&state.session_id) {
            state.handled = state.handled.or(disk.handled);
            state.plan_file = state.plan_file.take().or(disk.plan_file);
            state.repo_root = state.repo_root.take().or(disk.repo_root);
            state.archived |= disk.archived;
        }
        if let Err(e) = store.save(state) {
            tracing::error!("cannot write the session state: {e}");
        }
    }
}

/// A plan that timed out unreviewed is written to the repository the session was launched
/// from, and the state records where.
fn save_unreviewed_plan(state: &mut SessionState) {
    if state.failure != Some(FailureReason::TimeoutPending) || state.plan_file.is_some() {
        return;
    }
    let (Some(root), Some(plan)) = (&state.repo_root, &state.plan) else {
        return;
    };
    match crate::plan_file::save_unreviewed(root, &state.session_id, plan) {
        Ok(path) => {
            tracing::info!(path = %path.display(), "saved the unreviewed plan");
            state.plan_file = Some(path);
        }
        Err(error) => tracing::error!(%error, "cannot save the unreviewed plan"),
    }
}

/// Mirrors the machine's view into the state record.
pub fn apply_view(state: &mut SessionState, view: &View) {
    let phase = view.phase();
    state.phase = phase;
    let mut pill = phase.pill().to_owned();
    if view.parked && phase != Phase::Running {
        // Honest about where the agent is: stopped until the user answers.
        pill.push_str(" · parked");
    }
    if let Some(left) = view.expires_in {
        pill = format!("{pill} · {}", crate::pill::expires_in(left));
    }
    state.pill = pill;
    state.status = view.status.or(state.status);
    state.last_event_id = view.last_event_id;
    state.rejection_count = view.rejection_count;
    state.outcome = view.outcome;
    state.failure = view.failure;
    state.failure_message = view
        .failure
        .map(|reason| reason.message(view.failure_detail.as_deref()));
    if view.plan.is_some() {
        state.plan.clone_from(&view.plan);
    }
    if view.usage.is_some() {
        state.usage = view.usage;
    }
    if let Some((agents, tool_calls)) = view.activity {
        state.agents = Some(agents);
        state.tool_calls = tool_calls;
    }
    state.touch();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pill_says_parked_while_the_user_is_waited_on() {
        let cases = [
            (
                Some(Phase::PlanReady),
                true,
                None,
                "◆ ultraplan ready · parked",
            ),
            (
                Some(Phase::NeedsInput),
                true,
                None,
                "◇ ultraplan needs your input · parked",
            ),
            (Some(Phase::Running), true, None, "◇ ultraplan"),
            (Some(Phase::PlanReady), false, None, "◆ ultraplan ready"),
            (
                Some(Phase::PlanReady),
                true,
                Some(Duration::from_secs(120)),
                "◆ ultraplan ready · parked · expires in 2 min",
            ),
        ];
        for (phase, parked, expires_in, want) in cases {
            let view = View {
                phase,
                parked,
                expires_in,
                ..View::default()
            };
            let mut state = SessionState::new("s1", "http://x", "http://x/sessions/s1", "t");
            apply_view(&mut state, &view);
            assert_eq!(state.pill, want, "{phase:?} {parked}");
        }
    }
}

//! Runs sessions: one task per session starts its agent in the sandbox, pumps frames between
//! the agent, the model backend and the event log, and drives the pure
//! [`Lifecycle`](lifecycle::Lifecycle) with what happens.

mod agents;
mod backend;
mod durable;
pub mod lifecycle;
mod pump;
mod settings;
mod task;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, watch};
use ultraplan_protocol::SessionStatus;
use ultraplan_protocol::events::{EventBody, SystemEvent};

pub use agents::Agents;
pub use backend::{Completion, ModelBackend};
pub use settings::OrchestratorSettings;

use crate::core::Core;
use crate::runner::Runner;
use crate::store::{AgentState, SessionRow, StoreResult, now_ms};

/// What the session task is told from outside.
#[derive(Debug)]
pub(crate) enum Command {
    /// A decision or user message already in the log, for the agent.
    Deliver(Box<EventBody>),
    /// Stop the agent (archive).
    Stop,
}

/// How to start a session's agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub timeout_seconds: u64,
    /// Started again after a server restart.
    pub resumed: bool,
}

#[derive(Clone)]
struct Live {
    commands: mpsc::UnboundedSender<Command>,
    last_seen_ms: Arc<AtomicI64>,
    finished: watch::Receiver<bool>,
}

pub(crate) struct Inner {
    /// What the whole server shares (config, store, hub, counters).
    pub(crate) state: Core,
    pub(crate) runner: Runner,
    pub(crate) models: Arc<dyn ModelBackend>,
    pub(crate) settings: OrchestratorSettings,
    pub(crate) slots: Arc<Semaphore>,
    live: Mutex<HashMap<String, Live>>,
}

/// Starts, feeds and stops session agents.
#[derive(Clone)]
pub struct Orchestrator {
    inner: Arc<Inner>,
}

impl Orchestrator {
    /// An orchestrator over the shared core.
    pub fn new(
        state: Core,
        runner: Runner,
        models: Arc<dyn ModelBackend>,
        settings: OrchestratorSettings,
    ) -> Self {
        let slots = Arc::new(Semaphore::new(settings.max_running.max(1)));
        Orchestrator {
            inner: Arc::new(Inner {
                state,
                runner,
                models,
                settings,
                slots,
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Whether approved plans are executed here.
    pub fn executes(&self) -> bool {
        self.inner.settings.execute
    }

    /// The runner's name (`bwrap`, `process`).
    pub fn runner_name(&self) -> &'static str {
        self.inner.runner.name()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start the session's agent in the background (queued if the cap is reached).
    pub fn launch(&self, session: SessionRow, launch: Launch) {
        let mut live = self.live();
        self.spawn_task(&mut live, session, launch);
    }

    /// Like [`Orchestrator::launch`], unless a task already runs for the session (checked
    /// and claimed at once, so two callers never start two tasks). `true` when it started.
    pub fn launch_if_idle(&self, session: SessionRow, launch: Launch) -> bool {
        let mut live = self.live();
        if live.contains_key(&session.id) {
            return false;
        }
        self.spawn_task(&mut live, session, launch);
        true
    }

    fn spawn_task(&self, live: &mut HashMap<String, Live>, session: SessionRow, launch: Launch) {
        let (commands, rx) = mpsc::unbounded_channel();
        let (finished_tx, finished) = watch::channel(false);
        let last_seen_ms = Arc::new(AtomicI64::new(now_ms()));
        let entry = Live {
            commands,
            last_seen_ms: last_seen_ms.clone(),
            finished,
        };
        live.insert(session.id.clone(), entry);
        let me = self.clone();
        tokio::spawn(async move {
            let follow_up = Launch {
                resumed: false,
                ..launch.clone()
            };
            let row = session.clone();
            let execute_next = task::run(me.inner.clone(), session, launch, rx, last_seen_ms).await;
            me.live().remove(&row.id);
            let _ = finished_tx.send(true);
            if execute_next {
                me.execute_late_approval(row, follow_up).await;
            }
        });
    }

    /// A plan approved while its planning task was ending gets an executing task now.
    async fn execute_late_approval(&self, row: SessionRow, launch: Launch) {
        let fresh = self.inner.state.store.session(&row.id).await;
        let Ok(Some(row)) = fresh else {
            return;
        };
        if row.status == SessionStatus::Archived {
            return;
        }
        tracing::info!(session_id = %row.id, "starting execution of a plan approved as its agent ended");
        self.launch_if_idle(row, launch);
    }

    /// Hand an event that is already in the log to the session's agent, if one runs.
    pub fn deliver(&self, session_id: &str, event: EventBody) {
        if let Some(live) = self.live().get(session_id) {
            let _ = live.commands.send(Command::Deliver(Box::new(event)));
        }
    }

    /// Stop the session's agent and wait until it is gone. `false` if none was running.
    pub async fn stop(&self, session_id: &str) -> bool {
        let Some(live) = self.live().get(session_id).cloned() else {
            return false;
        };
        let _ = live.commands.send(Command::Stop);
        let mut finished = live.finished;
        let wait = finished.wait_for(|done| *done);
        if tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .is_err()
        {
            tracing::warn!(session_id, "agent did not stop within 10 s");
        }
        true
    }

    /// Whether the session's agent has been silent past the stall threshold.
    pub fn stalled(&self, session_id: &str) -> bool {
        let Some(live) = self.live().get(session_id).cloned() else {
            return false;
        };
        let silent_ms = now_ms() - live.last_seen_ms.load(Ordering::Relaxed);
        let limit = i64::try_from(self.inner.settings.stall_after.as_millis()).unwrap_or(i64::MAX);
        silent_ms > limit
    }

    /// Whether an agent task exists for the session.
    pub fn is_live(&self, session_id: &str) -> bool {
        self.live().contains_key(session_id)
    }

    /// Sessions with an agent task right now.
    pub fn live_count(&self) -> usize {
        self.live().len()
    }

    /// After a restart: start agents again for sessions that had one, from their event log;
    /// finish executions no agent will take up again.
    pub async fn recover(&self, timeout_for: impl Fn(&SessionRow) -> u64) -> StoreResult<usize> {
        let state = &self.inner.state;
        let rows = state.store.sessions_to_recover().await?;
        let mut count = 0;
        for row in rows {
            if crate::execution::settle_finished(state, &row).await? {
                state.store.set_status(&row.id, SessionStatus::Idle).await?;
                state
                    .store
                    .set_agent_state(&row.id, AgentState::Finished)
                    .await?;
                continue;
            }
            let note = EventBody::System(SystemEvent {
                subtype: "resumed".to_owned(),
                message: Some(
                    "The server restarted; the agent resumes from the event log.".to_owned(),
                ),
                data: serde_json::Value::Null,
            });
            state.append(&row, &[note]).await?;
            tracing::info!(session_id = %row.id, "resuming session");
            let timeout_seconds = timeout_for(&row);
            self.launch(
                row,
                Launch {
                    timeout_seconds,
                    resumed: true,
                },
            );
            count += 1;
        }
        crate::execution::finish_abandoned(
            state,
            |id| self.is_live(id),
            "the server restarted before the patch was made",
        )
        .await?;
        Ok(count)
    }
}

/// When no runner is available, sessions left running by a previous process get a clear
/// error instead of waiting forever; their executions are finished with the work done.
pub async fn fail_orphans(state: &Core, reason: &str) -> StoreResult<usize> {
    crate::execution::finish_abandoned(
        state,
        |_| false,
        &format!("the server has no runner: {reason}"),
    )
    .await?;
    let rows = state.store.sessions_to_recover().await?;
    for row in &rows {
        if !crate::execution::settle_finished(state, row).await? {
            let result = EventBody::error_result(
                "error_during_execution",
                format!("The session cannot resume: {reason}."),
            );
            state.append(row, &[result]).await?;
        }
        state.store.set_status(&row.id, SessionStatus::Idle).await?;
        state
            .store
            .set_agent_state(&row.id, AgentState::Finished)
            .await?;
    }
    Ok(rows.len())
}

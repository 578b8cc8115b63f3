//! This server's runner: claims sessions that wait for one under leases; one task per claimed
//! session starts its agent in the sandbox, pumps frames between the agent, the model backend
//! and the event log, and drives the pure [`Lifecycle`](lifecycle::Lifecycle) with what
//! happens.

mod agents;
mod backend;
mod claims;
mod consumed;
mod durable;
mod inbox;
pub mod lifecycle;
mod pump;
mod settings;
mod task;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use ultraplan_protocol::SessionStatus;
use ultraplan_protocol::events::{EventBody, SystemEvent};

pub use agents::Agents;
pub use backend::{Completion, ModelBackend};
pub use settings::OrchestratorSettings;

use crate::core::Core;
use crate::runner::Runner;
use crate::store::{AgentState, Claim, Lease, StoreResult, now_ms};

/// What the session task is told from outside.
#[derive(Debug)]
pub(crate) enum Command {
    /// A decision or user message already in the log, for the agent.
    Deliver(Box<EventBody>),
    /// Stop the agent (archive).
    Stop,
    /// The lease no longer holds the session: stop the agent and write nothing more.
    Lost,
    /// This runner is shutting down: stop the agent and hand the session back to the queue,
    /// where any runner resumes it from the log.
    HandBack,
}

/// How to start a session's agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    pub timeout_seconds: u64,
    /// An agent ran for the session before (the server restarted, or its runner was lost).
    pub resumed: bool,
}

#[derive(Clone)]
struct Live {
    commands: mpsc::UnboundedSender<Command>,
    last_seen_ms: Arc<AtomicI64>,
    finished: watch::Receiver<bool>,
    lease: Lease,
    /// When the lease was last renewed (ms).
    renewed_ms: Arc<AtomicI64>,
}

pub(crate) struct Inner {
    /// What the whole server shares (config, store, hub, counters).
    pub(crate) state: Core,
    pub(crate) runner: Runner,
    pub(crate) models: Arc<dyn ModelBackend>,
    pub(crate) settings: OrchestratorSettings,
    pub(crate) slots: Arc<Semaphore>,
    live: Mutex<HashMap<String, Live>>,
    /// Wakes the claim loop: a session was queued, or a slot came free.
    kick: Notify,
    /// Shutting down: no more claims.
    draining: AtomicBool,
}

/// This server's runner: claims waiting sessions under leases, starts, feeds and stops their
/// agents (docs/ARCHITECTURE.md §5.2).
#[derive(Clone)]
pub struct Orchestrator {
    inner: Arc<Inner>,
}

impl Orchestrator {
    /// An orchestrator over the shared core, claiming at once (call within a Tokio runtime).
    pub fn new(
        state: Core,
        runner: Runner,
        models: Arc<dyn ModelBackend>,
        settings: OrchestratorSettings,
    ) -> Self {
        let slots = Arc::new(Semaphore::new(settings.max_running.max(1)));
        let me = Orchestrator {
            inner: Arc::new(Inner {
                state,
                runner,
                models,
                settings,
                slots,
                live: Mutex::new(HashMap::new()),
                kick: Notify::new(),
                draining: AtomicBool::new(false),
            }),
        };
        tokio::spawn(claims::claim_loop(me.clone()));
        tokio::spawn(claims::heartbeat_loop(me.clone()));
        me
    }

    /// Whether approved plans are executed here.
    pub fn executes(&self) -> bool {
        self.inner.settings.execute
    }

    /// The sandbox's name (`bwrap`, `process`).
    pub fn runner_name(&self) -> &'static str {
        self.inner.runner.name()
    }

    /// The name this runner's leases carry.
    pub fn name(&self) -> &str {
        &self.inner.settings.runner_name
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        self.inner.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Put the session in the queue for a runner (this one or any other on the database) and
    /// wake the claim loop. Nothing when it is archived or a runner holds it; `true` when it
    /// was queued.
    pub async fn queue(&self, session_id: &str) -> StoreResult<bool> {
        let state = &self.inner.state;
        let now = now_ms();
        let queued = state.store.queue_session(session_id, now).await?;
        if !queued {
            return Ok(false);
        }
        self.inner.kick.notify_one();
        state.bell.ring();
        // More sessions wait (this one included) than this runner has free slots: say so.
        let waiting = state.store.sessions_waiting(now).await?;
        let free = i64::try_from(self.inner.slots.available_permits()).unwrap_or(i64::MAX);
        if waiting > free
            && let Some(row) = state.store.session(session_id).await?
        {
            let running = self.inner.settings.max_running;
            let note = EventBody::System(SystemEvent {
                subtype: "queued".to_owned(),
                message: Some(format!(
                    "Waiting for a free sandbox: {running} sessions are running."
                )),
                data: serde_json::Value::Null,
            });
            state.append(&row, &[note]).await?;
        }
        Ok(true)
    }

    /// A decision or message arrived for the session: queue it if it was parked.
    pub async fn unpark(&self, session_id: &str) -> StoreResult<bool> {
        let unparked = self
            .inner
            .state
            .store
            .unpark_session(session_id, now_ms())
            .await?;
        if unparked {
            self.inner.kick.notify_one();
            self.inner.state.bell.ring();
        }
        Ok(unparked)
    }

    fn spawn_task(&self, claim: Claim, launch: Launch, permit: OwnedSemaphorePermit) {
        let (commands, rx) = mpsc::unbounded_channel();
        let (finished_tx, finished) = watch::channel(false);
        let last_seen_ms = Arc::new(AtomicI64::new(now_ms()));
        let entry = Live {
            commands: commands.clone(),
            last_seen_ms: last_seen_ms.clone(),
            finished,
            lease: claim.lease.clone(),
            renewed_ms: Arc::new(AtomicI64::new(now_ms())),
        };
        let id = claim.lease.session_id.clone();
        let epoch = claim.lease.epoch;
        self.live().insert(id.clone(), entry);
        let me = self.clone();
        tokio::spawn(async move {
            let task = task::Task {
                claim,
                launch,
                commands: rx,
                to_self: commands,
                last_seen_ms,
            };
            task::run(me.inner.clone(), task).await;
            // A session this task parked or released may be claimed again here before this
            // line: that newer claim's entry stays.
            let mut live = me.live();
            if live.get(&id).is_some_and(|l| l.lease.epoch == epoch) {
                live.remove(&id);
            }
            drop(live);
            drop(permit);
            let _ = finished_tx.send(true);
            me.inner.kick.notify_one();
        });
    }

    /// Stop the session's agent here and wait until it is gone. `false` if none was running
    /// here (a runner elsewhere sees the archive in the log).
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

    /// Shut the runner down: claim nothing more, stop every agent and hand its session back
    /// to the queue, so another runner resumes it at once instead of after its lease lapses.
    /// How many were handed back.
    pub async fn drain(&self) -> usize {
        self.inner.draining.store(true, Ordering::SeqCst);
        let live: Vec<Live> = self.live().values().cloned().collect();
        let waits = live.into_iter().map(|live| async move {
            let _ = live.commands.send(Command::HandBack);
            let mut finished = live.finished;
            let wait = finished.wait_for(|done| *done);
            let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
        });
        let count = waits.len();
        futures_util::future::join_all(waits).await;
        tracing::info!(handed_back = count, runner = self.name(), "runner drained");
        count
    }

    /// Whether an agent task runs here for the session.
    pub fn is_live(&self, session_id: &str) -> bool {
        self.live().contains_key(session_id)
    }

    /// Sessions with an agent task here right now.
    pub fn live_count(&self) -> usize {
        self.live().len()
    }

    /// After a restart: sessions this runner's name held before (a previous process of it;
    /// every lease when `every_lease`, for a database only this process uses) go back to the
    /// queue at once instead of waiting for their leases to lapse; executions of sessions
    /// archived meanwhile are finished with the work done. How many were requeued.
    pub async fn start(&self, every_lease: bool) -> StoreResult<u64> {
        let state = &self.inner.state;
        let holder = (!every_lease).then(|| self.name().to_owned());
        let requeued = state
            .store
            .release_leases_of(holder.as_deref(), now_ms())
            .await?;
        crate::execution::finish_abandoned(
            state,
            |row| row.status != SessionStatus::Archived || row.runner.is_some(),
            "the server restarted before the patch was made",
        )
        .await?;
        self.sweep_environments();
        self.inner.kick.notify_one();
        Ok(requeued)
    }

    /// Remove expired environment snapshots nobody uses, now and every hour while the
    /// orchestrator lives (docs/ARCHITECTURE.md §6.5).
    fn sweep_environments(&self) {
        // A linked runner keeps (and sweeps) its snapshots on its own disk: its orchestrator
        // here holds no leases on this machine's, so it must not sweep what the local one uses.
        if self.inner.runner.is_remote() {
            return;
        }
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(3600));
            loop {
                every.tick().await;
                let Some(inner) = inner.upgrade() else { return };
                let cache = inner.settings.environments.cache().clone();
                drop(inner);
                let removed = tokio::task::spawn_blocking(move || cache.sweep())
                    .await
                    .unwrap_or(0);
                if removed > 0 {
                    tracing::info!(removed, "removed expired environment snapshots");
                }
            }
        });
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

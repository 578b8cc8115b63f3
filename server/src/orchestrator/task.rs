//! One session's task: queue for a slot, start the agent, pump until it ends.

mod agent_loop;
mod agent_network;
mod calls;
mod claim;
mod environment;
mod environment_host;
mod execution;
mod maintenance;

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use ultraplan_protocol::events::{EventBody, SystemEvent};
use ultraplan_protocol::frames::{AgentMode, ServerFrame, StartSettings};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::PromptVariant;

use super::{Command, Inner, Launch};
use crate::orchestrator::lifecycle::{Effect, Input, Lifecycle};
use crate::runner::{AgentControl, AgentExit, AgentProcess, RemoteLaunch, SandboxRequest};
use crate::store::{AgentState, SessionRow, StoreError, StoreResult, now_ms};
use crate::store::{Claim, Lease};

/// A model answer on its way back to the agent, with the session's new usage total.
type ModelReply = (ServerFrame, Option<Usage>);

/// A claimed session, handed to its task.
pub struct Task {
    pub claim: Claim,
    pub launch: Launch,
    pub commands: mpsc::UnboundedReceiver<Command>,
    /// The task's own command channel, for its inbox.
    pub to_self: mpsc::UnboundedSender<Command>,
    pub last_seen_ms: Arc<AtomicI64>,
}

struct SessionTask {
    inner: Arc<Inner>,
    session: SessionRow,
    /// The claim every write carries.
    lease: Lease,
    /// The lease was lost: another runner may hold the session now, so nothing more is written.
    lost: bool,
    /// The session was parked: its claim is released and nothing more is written.
    parked: bool,
    /// The runner is shutting down: the session goes back to the queue as it is.
    handed_back: bool,
    to_self: mpsc::UnboundedSender<Command>,
    lifecycle: Lifecycle,
    to_agent: Option<mpsc::UnboundedSender<ServerFrame>>,
    process: Option<AgentControl>,
    usage: Usage,
    saw_done: bool,
    last_seen_ms: Arc<AtomicI64>,
    calls: Arc<Semaphore>,
    /// What the current agent does.
    mode: AgentMode,
    /// The plan was approved: the planning agent stops and execution starts.
    handoff: bool,
    /// Why the current agent was stopped from outside, if it was.
    cut_short: Option<String>,
    /// The execution's patch is stored.
    patched: bool,
    /// What a remote runner made of the executing agent's workspace, once it exited.
    remote_patch: Option<crate::execution::RemotePatch>,
    /// The environment snapshot the current agent uses (kept from sweeping while held, here
    /// or on its linked runner).
    environment: Option<environment_host::Snapshot>,
    /// The Docker image (its id) the session's agents run in on this machine: its
    /// environment's `[base]` (a linked runner's snapshot names its own).
    base_image: Option<String>,
    /// Who an executing agent may reach: its environment's `[agent] network`, parsed and as
    /// written (for a linked runner).
    agent_network: (ultraplan_runner::egress::NetworkPolicy, Vec<String>),
    /// The egress proxy serving the current executing agent, and its socket.
    agent_proxy: Option<(ultraplan_runner::egress::EgressProxy, PathBuf)>,
}

/// How one agent's run ended.
enum RunEnd {
    /// Its session goes on with an executing agent.
    Execute,
    /// No agent follows.
    Over,
}

/// Run a claimed session until no agent is left to run for it, then give the claim up (back
/// to the queue when a plan was approved as its planning agent ended).
pub async fn run(inner: Arc<Inner>, task: Task) {
    let Task {
        claim,
        launch,
        mut commands,
        to_self,
        last_seen_ms,
    } = task;
    let calls = Arc::new(Semaphore::new(inner.settings.max_model_calls.max(1)));
    let executes = inner.settings.execute;
    let mut task = SessionTask {
        usage: claim.session.usage,
        inner,
        session: claim.session,
        lease: claim.lease,
        lost: false,
        parked: false,
        handed_back: false,
        to_self,
        lifecycle: Lifecycle::new(executes),
        to_agent: None,
        process: None,
        saw_done: false,
        last_seen_ms,
        calls,
        mode: AgentMode::Plan,
        handoff: false,
        cut_short: None,
        patched: false,
        remote_patch: None,
        environment: None,
        base_image: None,
        agent_network: (ultraplan_runner::egress::NetworkPolicy::None, Vec::new()),
        agent_proxy: None,
    };
    if !task.pick_up(launch.resumed, claim.took_over).await {
        task.release(false).await;
        return;
    }
    let failed = task.run(launch, &mut commands).await.err();
    if let Some(error) = failed.as_ref().filter(|_| !task.let_go()) {
        tracing::error!(session_id = %task.session.id, %error, "session task failed");
        let result = EventBody::error_result(
            "error_during_execution",
            format!("The server could not run the agent: {error}."),
        );
        task.apply(Input::AgentEvent(result)).await;
        if task.mode == AgentMode::Execute || task.execution_pending().await {
            task.kill();
            task.finish_execution().await;
        }
    }
    task.kill();
    if task.handed_back && !task.lost {
        // Still marked running, so the next claim resumes it from the log.
        task.release(false).await;
        return;
    }
    if task.let_go() {
        return;
    }
    task.set_agent_state(AgentState::Finished).await;
    let execute_next = failed.is_none() && task.left_an_approval().await;
    if execute_next {
        tracing::info!(session_id = %task.session.id, "a plan was approved as its agent ended: queueing its execution");
    }
    task.release(execute_next).await;
    if !execute_next && failed.is_none() && task.left_an_approval().await {
        // Approved between the check and the release: the decision saw the session held and
        // left it to this runner, so it is queued here.
        task.queue_after_release().await;
    }
}

impl SessionTask {
    async fn run(
        &mut self,
        launch: Launch,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<(), String> {
        self.set_agent_state(AgentState::Running).await;
        loop {
            let (transcript, last_id) = self.transcript().await.map_err(|e| e.to_string())?;
            let execution = self.execution().await.map_err(|e| e.to_string())?;
            self.mode = crate::execution::mode_for(
                &transcript,
                execution.as_ref(),
                self.inner.settings.execute,
            );
            let timeout_seconds = launch.timeout_seconds;
            let deadline = match self.mode {
                AgentMode::Plan => self.deadline(timeout_seconds),
                AgentMode::Execute => {
                    self.begin_execution(&transcript).await?;
                    tokio::time::Instant::now() + Duration::from_secs(timeout_seconds)
                }
            };
            if let environment::Readiness::Ended = self.ready_environment(&transcript).await? {
                self.cut_short = Some("its environment could not be made ready".to_owned());
                break;
            }
            match self
                .run_agent((transcript, last_id), deadline, timeout_seconds, commands)
                .await?
            {
                RunEnd::Execute => self.reset_for_next_agent(),
                RunEnd::Over => break,
            }
        }
        if self.mode == AgentMode::Execute && !self.let_go() {
            self.finish_execution().await;
        }
        Ok(())
    }

    /// One agent from start to exit.
    async fn run_agent(
        &mut self,
        (transcript, last_id): (Vec<EventBody>, i64),
        deadline: tokio::time::Instant,
        timeout_seconds: u64,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<RunEnd, String> {
        let inbox = super::inbox::follow(
            self.inner.state.clone(),
            self.session.id.clone(),
            last_id,
            self.to_self.clone(),
        );
        let connected = self.connect(transcript).await;
        let ran = match connected {
            Ok((mut frames, stderr_tail, waiting_on)) => {
                let limits = (deadline, timeout_seconds);
                let exit_reason = self.pump(&mut frames, waiting_on, limits, commands).await;
                Ok((exit_reason, stderr_tail))
            }
            Err(error) => Err(error),
        };
        inbox.abort();
        self.stop_agent_proxy().await;
        if self.inner.runner.link_lost() && !self.lost {
            // The runner is gone, not the session: another runner resumes it from the log.
            self.handed_back = true;
        }
        let (exit_reason, stderr_tail) = ran?;
        if self.let_go() {
            self.wait_for_exit().await;
            return Ok(RunEnd::Over);
        }
        if self.handoff {
            self.hand_over().await;
            return Ok(RunEnd::Execute);
        }
        self.finish(exit_reason, &stderr_tail).await;
        Ok(RunEnd::Over)
    }

    /// Past the deadline. An execution's patch is taken before the session is archived, so
    /// the work done so far is kept and reported first.
    async fn on_timeout(&mut self, timeout_seconds: u64) {
        self.cut_short = Some(format!("the {timeout_seconds}-second limit"));
        if self.mode == AgentMode::Execute {
            self.wait_for_exit().await;
            self.process = None;
            self.finish_execution().await;
        }
        self.apply(Input::TimedOut { timeout_seconds }).await;
    }

    /// The session is no longer this task's to write: its lease was lost, or it was parked.
    fn let_go(&self) -> bool {
        self.lost || self.parked || self.handed_back
    }

    fn reset_for_next_agent(&mut self) {
        self.handoff = false;
        self.saw_done = false;
        self.process = None;
        self.to_agent = None;
    }

    async fn start_agent(&mut self) -> Result<AgentProcess, String> {
        let remote = self.inner.runner.is_remote();
        let (workspace, writable) = match self.mode {
            // A remote runner fetches the bundle and makes its writable copy itself.
            _ if remote => (PathBuf::new(), self.mode == AgentMode::Execute),
            AgentMode::Plan => (self.bundle_path().await?, false),
            AgentMode::Execute => {
                let ws = crate::execution::workspace_of(&self.inner.state, &self.session.id);
                (ws.tree, true)
            }
        };
        self.inner
            .state
            .hub
            .notify(&self.session.id, self.session.last_event_id);
        self.start_agent_proxy().await?;
        let request = SandboxRequest {
            session_id: self.session.id.clone(),
            workspace,
            writable,
            agent_binary: self.inner.settings.agent_binary.clone(),
            limits: self.inner.settings.limits.clone(),
            log_filter: self.inner.settings.agent_log_filter.clone(),
            environment: self
                .environment
                .as_ref()
                .and_then(environment_host::Snapshot::local_tree),
            purpose: Default::default(),
            base_image: self.base_image.clone(),
            agent_egress: self.agent_proxy.as_ref().map(|(_, socket)| socket.clone()),
        };
        let binding = self
            .environment
            .as_ref()
            .and_then(environment_host::Snapshot::remote_binding);
        let (environment_key, base_image) = binding.unzip();
        let lease = RemoteLaunch {
            epoch: self.lease.epoch,
            bundle_id: self.session.bundle_id.clone().unwrap_or_default(),
            environment_key,
            base_image: base_image.flatten(),
            agent_network: match self.mode {
                AgentMode::Execute => self.agent_network.1.clone(),
                AgentMode::Plan => Vec::new(),
            },
        };
        self.apply_sync_starting();
        self.inner
            .runner
            .launch_leased(&request, &lease)
            .await
            .map_err(|e| e.to_string())
    }

    fn apply_sync_starting(&mut self) {
        // Starting carries no effects; keep the machine's stage honest.
        let _ = self.lifecycle.on(Input::Starting);
    }

    fn start_settings(&self) -> StartSettings {
        let context = &self.session.context;
        StartSettings {
            session_id: self.session.id.clone(),
            mode: self.mode,
            prompt_variant: context
                .prompt_variant
                .as_deref()
                .and_then(PromptVariant::parse)
                .unwrap_or_default(),
            model: self.model(),
            max_turns: self.inner.settings.max_turns,
            draft_plan: context.draft_plan.clone(),
        }
    }

    fn model(&self) -> String {
        self.session
            .context
            .model
            .clone()
            .unwrap_or_else(|| self.inner.state.config.model.clone())
    }

    fn deadline(&self, timeout_seconds: u64) -> tokio::time::Instant {
        let elapsed_ms = u64::try_from(now_ms() - self.session.created_at).unwrap_or(0);
        let left =
            Duration::from_secs(timeout_seconds).saturating_sub(Duration::from_millis(elapsed_ms));
        tokio::time::Instant::now() + left
    }

    /// The whole log, and its last event's id.
    async fn transcript(&self) -> StoreResult<(Vec<EventBody>, i64)> {
        let events = self.inner.state.events_after(&self.session.id, 0).await?;
        let last_id = events.last().map_or(0, |e| e.id);
        Ok((events.into_iter().map(|e| e.body).collect(), last_id))
    }

    async fn finish(&mut self, failure: Option<String>, stderr_tail: &Arc<Mutex<String>>) {
        let status = self.wait_for_exit().await;
        let clean =
            failure.is_none() && self.saw_done && status.as_ref().is_some_and(|s| s.success);
        let reason = failure.unwrap_or_else(|| match &status {
            Some(s) => format!("it exited with {}", s.description),
            None => "it did not exit and was killed".to_owned(),
        });
        let tail = stderr_tail.lock().map(|t| t.clone()).unwrap_or_default();
        self.apply(Input::AgentExited {
            clean,
            reason,
            stderr_tail: tail,
        })
        .await;
    }

    async fn wait_for_exit(&mut self) -> Option<AgentExit> {
        self.to_agent = None;
        let grace = self.inner.settings.stop_grace;
        let process = self.process.as_mut()?;
        if !self.saw_done {
            process.start_kill();
        }
        let exit = match tokio::time::timeout(grace.max(Duration::from_millis(100)), process.wait())
            .await
        {
            Ok(exit) => exit,
            Err(_) => {
                process.start_kill();
                process.wait().await
            }
        };
        if let Some(patch) = process.take_remote_patch() {
            self.remote_patch = Some(patch);
        }
        let refused = process.take_remote_refused();
        if let Some((blocked, beyond)) = refused.filter(|_| !self.let_go()) {
            self.note_refused(&blocked, beyond).await;
        }
        exit
    }

    fn kill(&mut self) {
        if let Some(process) = self.process.as_mut() {
            process.start_kill();
        }
    }

    fn seen(&self) {
        self.last_seen_ms.store(now_ms(), Ordering::Relaxed);
    }

    fn send(&self, frame: ServerFrame) {
        if let Some(to_agent) = &self.to_agent {
            let _ = to_agent.send(frame);
        }
    }

    async fn append_note(&self, subtype: &str, message: String) {
        let note = EventBody::System(SystemEvent {
            subtype: subtype.to_owned(),
            message: Some(message),
            data: serde_json::Value::Null,
        });
        let state = &self.inner.state;
        if let Err(error) = super::durable::append(state, &self.session, &[note], &self.lease).await
        {
            tracing::error!(session_id = %self.session.id, %error, "cannot append a note");
        }
    }

    async fn set_agent_state(&self, state: AgentState) {
        let store = &self.inner.state.store;
        let set = || store.set_agent_state_as(&self.lease, state);
        if let Err(error) = super::durable::write(&self.session.id, "agent state", set).await {
            tracing::error!(session_id = %self.session.id, %error, "cannot record the agent state");
        }
    }

    /// Feed the lifecycle and carry out its effects.
    async fn apply(&mut self, input: Input) {
        for effect in self.lifecycle.on(input) {
            if self.lost {
                return;
            }
            match self.carry_out(effect).await {
                Ok(()) => {}
                Err(StoreError::Fenced { epoch, .. }) => {
                    tracing::warn!(session_id = %self.session.id, epoch, "the lease was lost (a write was refused); stopping the agent");
                    self.lost = true;
                    self.kill();
                }
                Err(error) => {
                    tracing::error!(session_id = %self.session.id, %error, "session effect failed");
                }
            }
        }
    }

    async fn carry_out(&mut self, effect: Effect) -> StoreResult<()> {
        let state = &self.inner.state;
        let id = &self.session.id;
        match effect {
            Effect::SetStatus(status) => {
                let set = || state.store.set_status_as(&self.lease, status);
                super::durable::write(id, "status", set).await?;
            }
            Effect::Append(event) | Effect::Record(event) => {
                let elapsed_ms = u64::try_from(now_ms() - self.session.created_at).unwrap_or(0);
                let elapsed = Duration::from_millis(elapsed_ms);
                let event = super::consumed::account(event, self.usage, elapsed);
                super::durable::append(state, &self.session, &[event], &self.lease).await?;
            }
            Effect::Forward(event) => self.send(ServerFrame::UserEvent { event }),
            Effect::Kill => self.kill(),
            Effect::Execute => self.handoff = true,
            Effect::Archive => {
                state.store.archive_session(&self.session.id).await?;
                state.hub.forget(&self.session.id);
            }
        }
        Ok(())
    }
}

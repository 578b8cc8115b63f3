//! One session's task: queue for a slot, start the agent, pump until it ends.

mod agent_loop;
mod calls;
mod execution;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use ultraplan_protocol::events::{EventBody, SystemEvent};
use ultraplan_protocol::frames::{AgentMode, ServerFrame, StartSettings};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::PromptVariant;

use super::{Command, Inner, Launch};
use crate::orchestrator::lifecycle::{Effect, Input, Lifecycle, unanswered_tool};
use crate::runner::{AgentControl, AgentExit, AgentProcess, SandboxRequest};
use crate::store::{AgentState, SessionRow, StoreResult, now_ms};

/// A model answer on its way back to the agent, with the session's new usage total.
type ModelReply = (ServerFrame, Option<Usage>);

struct SessionTask {
    inner: Arc<Inner>,
    session: SessionRow,
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
}

/// How one agent's run ended.
enum RunEnd {
    /// Its session goes on with an executing agent.
    Execute,
    /// No agent follows.
    Over,
}

/// Run a session to the end of its agent. `true` when its plan was approved while this
/// (planning) task was ending, so an executing task must follow.
pub async fn run(
    inner: Arc<Inner>,
    session: SessionRow,
    launch: Launch,
    mut commands: mpsc::UnboundedReceiver<Command>,
    last_seen_ms: Arc<AtomicI64>,
) -> bool {
    let calls = Arc::new(Semaphore::new(inner.settings.max_model_calls.max(1)));
    let executes = inner.settings.execute;
    let mut task = SessionTask {
        usage: session.usage,
        inner,
        session,
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
    };
    let failed = task.run(launch, &mut commands).await.err();
    if let Some(error) = &failed {
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
    task.set_agent_state(AgentState::Finished).await;
    failed.is_none() && task.left_an_approval().await
}

impl SessionTask {
    async fn run(
        &mut self,
        launch: Launch,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<(), String> {
        let Some(_permit) = self.wait_for_slot(commands).await else {
            return Ok(());
        };
        self.set_agent_state(AgentState::Running).await;
        loop {
            let transcript = self.transcript().await.map_err(|e| e.to_string())?;
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
                    self.begin_execution().await?;
                    tokio::time::Instant::now() + Duration::from_secs(timeout_seconds)
                }
            };
            match self
                .run_agent(transcript, deadline, timeout_seconds, commands)
                .await?
            {
                RunEnd::Execute => self.reset_for_next_agent(),
                RunEnd::Over => break,
            }
        }
        if self.mode == AgentMode::Execute {
            self.finish_execution().await;
        }
        Ok(())
    }

    /// One agent from start to exit.
    async fn run_agent(
        &mut self,
        transcript: Vec<EventBody>,
        deadline: tokio::time::Instant,
        timeout_seconds: u64,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Result<RunEnd, String> {
        let waiting_on = unanswered_tool(&transcript);
        let (mut frames, stderr_tail) = self.connect(transcript).await?;
        let limits = (deadline, timeout_seconds);
        let exit_reason = self.pump(&mut frames, waiting_on, limits, commands).await;
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

    fn reset_for_next_agent(&mut self) {
        self.handoff = false;
        self.saw_done = false;
        self.process = None;
        self.to_agent = None;
    }

    async fn wait_for_slot(
        &mut self,
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Option<OwnedSemaphorePermit> {
        let slots = self.inner.slots.clone();
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Some(permit);
        }
        self.set_agent_state(AgentState::Queued).await;
        self.apply(Input::Queued).await;
        let running = self.inner.settings.max_running;
        self.append_note(
            "queued",
            format!("Waiting for a free sandbox: {running} sessions are running."),
        )
        .await;
        loop {
            tokio::select! {
                permit = slots.clone().acquire_owned() => return permit.ok(),
                command = commands.recv() => match command {
                    Some(Command::Stop) | None => {
                        self.apply(Input::Archived).await;
                        return None;
                    }
                    Some(Command::Deliver(_)) => {}
                },
            }
        }
    }

    async fn start_agent(&mut self) -> Result<AgentProcess, String> {
        let (workspace, writable) = match self.mode {
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
        let request = SandboxRequest {
            session_id: self.session.id.clone(),
            workspace,
            writable,
            agent_binary: self.inner.settings.agent_binary.clone(),
            limits: self.inner.settings.limits.clone(),
            log_filter: self.inner.settings.agent_log_filter.clone(),
        };
        self.apply_sync_starting();
        self.inner
            .runner
            .launch(&request)
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

    async fn transcript(&self) -> StoreResult<Vec<EventBody>> {
        let events = self.inner.state.events_after(&self.session.id, 0).await?;
        Ok(events.into_iter().map(|e| e.body).collect())
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
        match tokio::time::timeout(grace.max(Duration::from_millis(100)), process.wait()).await {
            Ok(exit) => exit,
            Err(_) => {
                process.start_kill();
                process.wait().await
            }
        }
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
        if let Err(error) = super::durable::append(state, &self.session, &[note]).await {
            tracing::error!(session_id = %self.session.id, %error, "cannot append a note");
        }
    }

    async fn set_agent_state(&self, state: AgentState) {
        let store = &self.inner.state.store;
        let set = || store.set_agent_state(&self.session.id, state);
        if let Err(error) = super::durable::write(&self.session.id, "agent state", set).await {
            tracing::error!(session_id = %self.session.id, %error, "cannot record the agent state");
        }
    }

    /// Feed the lifecycle and carry out its effects.
    async fn apply(&mut self, input: Input) {
        for effect in self.lifecycle.on(input) {
            if let Err(error) = self.carry_out(effect).await {
                tracing::error!(session_id = %self.session.id, %error, "session effect failed");
            }
        }
    }

    async fn carry_out(&mut self, effect: Effect) -> StoreResult<()> {
        let state = &self.inner.state;
        let id = &self.session.id;
        match effect {
            Effect::SetStatus(status) => {
                let set = || state.store.set_status(id, status);
                super::durable::write(id, "status", set).await?;
            }
            Effect::Append(event) | Effect::Record(event) => {
                super::durable::append(state, &self.session, &[event]).await?;
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

//! The loop: handshake, then feed the state machine and carry out its effects until it exits,
//! the server stops it, or the pipes break.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use ultraplan_protocol::EventBody;
use ultraplan_protocol::constants::FRAME_PROTOCOL_VERSION;
use ultraplan_protocol::frames::{AgentFrame, ServerFrame, StartSettings};
use ultraplan_protocol::model::Usage;

use super::frames_io::{FrameSender, FrameWriter, ReadError, spawn_reader};
use super::handshake::{Handshake, HandshakeError, Opened};
use super::setup::setup;
use super::tool_exec::ToolExec;
use super::{Incoming, Outcome, RunEnv};
use crate::config::AgentConfig;
use crate::conversation::result_event;
use crate::lifecycle::{Agent, ERROR_DURING_EXECUTION, Effect, Input, ToolRoot};
use crate::tools::{ToolOutput, ToolRegistry};
use crate::workspace::Workspace;
use crate::workspace_copy::{CopyLimits, MAX_COPY_ENTRIES, WorkspaceCopy, copy_workspace};
use crate::workspace_stamps::{Stamps, changed, stamps};

/// Interval between heartbeats.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// Runs the agent over `input` (server frames) and `output` (agent frames).
pub async fn run<R, W>(input: R, output: W, env: RunEnv) -> Outcome
where
    R: BufRead + Send + 'static,
    W: Write + Send + 'static,
{
    let (tx, mut rx) = unbounded_channel();
    spawn_reader(input, tx.clone());
    let writer = FrameWriter::spawn(output, tx.clone());
    let frames = writer.sender();
    frames.send(&AgentFrame::Hello {
        protocol_version: FRAME_PROTOCOL_VERSION,
        agent_version: env.agent_version.clone(),
    });
    let heartbeat = tokio::spawn(heartbeat(frames.clone()));
    let (outcome, done) = match open(&mut rx).await {
        Err(e) => (Outcome::failed(2, format!("handshake failed: {e}")), None),
        Ok(Opened::Stopped) => (Outcome::ok(), Some(Usage::default())),
        Ok(Opened::Start {
            settings,
            transcript,
        }) => start(settings, &transcript, &env, &frames, tx, rx).await,
    };
    // Stopped before `done`, so no heartbeat follows it.
    heartbeat.abort();
    let _ = heartbeat.await;
    if let Some(usage) = done {
        frames.send(&AgentFrame::Done { usage });
    }
    writer.close();
    outcome
}

/// Reads until the handshake ends.
async fn open(rx: &mut UnboundedReceiver<Incoming>) -> Result<Opened, HandshakeError> {
    let mut handshake = Handshake::default();
    loop {
        match rx.recv().await {
            Some(Incoming::Frame(Ok(frame))) => {
                if let Some(opened) = handshake.feed(frame)? {
                    return Ok(opened);
                }
            }
            Some(Incoming::Frame(Err(e))) => return Err(HandshakeError::Read(e)),
            Some(Incoming::OutputClosed) | None => return Err(HandshakeError::OutputClosed),
            Some(Incoming::Tools { .. } | Incoming::Copied(..) | Incoming::Checked(_)) => {}
        }
    }
}

async fn heartbeat(frames: FrameSender) {
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + HEARTBEAT_EVERY,
        HEARTBEAT_EVERY,
    );
    loop {
        ticks.tick().await;
        if !frames.send(&AgentFrame::Heartbeat {}) {
            return;
        }
    }
}

/// Sets the session up and runs it. Returns the outcome and, when `done` is due, the usage
/// to report in it.
async fn start(
    settings: StartSettings,
    transcript: &[ultraplan_protocol::EventBody],
    env: &RunEnv,
    frames: &FrameSender,
    tx: UnboundedSender<Incoming>,
    rx: UnboundedReceiver<Incoming>,
) -> (Outcome, Option<Usage>) {
    let config = AgentConfig::from_env(&settings.session_id);
    let session_id = settings.session_id.clone();
    match setup(&env.workspace, settings, transcript, config.clone()) {
        Ok((agent, exec)) => {
            tracing::info!(session_id, "session started");
            let mut session = Session {
                agent,
                exec: Arc::new(exec),
                frames: frames.clone(),
                tx,
                started: Instant::now(),
                env: env.clone(),
                config,
                verifier: None,
                stamps: None,
            };
            let ended = session.run(rx).await;
            // Whatever ended the session (exit, stop, broken pipes), no command outlives it,
            // and the verifier's copy goes.
            session.exec.kill_commands();
            session.remove_copy();
            ended
        }
        Err(e) => {
            let text = format!("The agent could not start: {e}");
            frames.send(&AgentFrame::Event {
                event: setup_failure(&text),
            });
            (Outcome::failed(1, text), Some(Usage::default()))
        }
    }
}

fn setup_failure(text: &str) -> EventBody {
    result_event(ERROR_DURING_EXECUTION, text, 0, Usage::default())
}

/// A running session.
struct Session {
    agent: Agent,
    exec: Arc<ToolExec>,
    frames: FrameSender,
    tx: UnboundedSender<Incoming>,
    started: Instant,
    env: RunEnv,
    config: AgentConfig,
    /// The verifier's copy of the workspace and the tools working in it.
    verifier: Option<(WorkspaceCopy, Arc<ToolExec>)>,
    /// The workspace as it was when the verifier's copy was made.
    stamps: Option<Stamps>,
}

/// What to do with an incoming item.
enum Next {
    Feed(Input),
    Skip,
    End(Outcome, bool),
}

impl Session {
    async fn run(&mut self, mut rx: UnboundedReceiver<Incoming>) -> (Outcome, Option<Usage>) {
        let mut effects = self.handle(Input::Begin);
        loop {
            if let Some(code) = self.apply(effects) {
                let outcome = Outcome { code, reason: None };
                return (outcome, Some(self.agent.usage()));
            }
            effects = Vec::new();
            let Some(incoming) = rx.recv().await else {
                return (Outcome::failed(1, "input channel closed"), None);
            };
            match self.next(incoming) {
                Next::Feed(input) => effects = self.handle(input),
                Next::Skip => {}
                Next::End(outcome, done) => return (outcome, done.then(|| self.agent.usage())),
            }
        }
    }

    /// Feeds the state machine, telling it the time first.
    fn handle(&mut self, input: Input) -> Vec<Effect> {
        let ms = self.started.elapsed().as_millis();
        self.agent.set_clock(u64::try_from(ms).unwrap_or(u64::MAX));
        self.agent.handle(input)
    }

    /// Carries out effects; returns the exit code when one of them is the exit.
    fn apply(&mut self, effects: Vec<Effect>) -> Option<u8> {
        for effect in effects {
            match effect {
                Effect::Emit(event) => {
                    self.frames.send(&AgentFrame::Event {
                        event: self.stamp(event),
                    });
                }
                Effect::Request {
                    request_id,
                    request,
                } => {
                    tracing::debug!(request_id, "model request");
                    self.frames.send(&AgentFrame::ModelRequest {
                        request_id,
                        request,
                    });
                }
                Effect::RunTools { batch, calls, root } => self.run_tools(batch, calls, root),
                Effect::CopyWorkspace => self.copy_workspace(),
                Effect::CheckWorkspace => self.check_workspace(),
                Effect::RemoveCopy => self.remove_copy(),
                Effect::Exit { code } => return Some(code),
            }
        }
        None
    }

    fn run_tools(&self, batch: u64, calls: Vec<crate::conversation::ToolCall>, root: ToolRoot) {
        let exec = match root {
            ToolRoot::Workspace => Some(Arc::clone(&self.exec)),
            ToolRoot::Copy => self.verifier.as_ref().map(|(_, exec)| Arc::clone(exec)),
        };
        let tx = self.tx.clone();
        let Some(exec) = exec else {
            tracing::error!(batch, "tools for a workspace copy that does not exist");
            let outputs = calls
                .iter()
                .map(|_| ToolOutput::error("The workspace copy is gone; the tool did not run."))
                .collect();
            let _ = tx.send(Incoming::Tools { batch, outputs });
            return;
        };
        tokio::spawn(async move {
            let outputs = exec.run_batch(calls).await;
            let _ = tx.send(Incoming::Tools { batch, outputs });
        });
    }

    /// Copies the workspace off the async threads; the result comes back as
    /// [`Incoming::Copied`].
    fn copy_workspace(&self) {
        let root = self.env.workspace.clone();
        let base = self.env.copy_base.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let copied = tokio::task::spawn_blocking(move || {
                let stamps = stamps(&root, MAX_COPY_ENTRIES);
                let copy =
                    copy_workspace(&root, &base, CopyLimits::default()).map_err(|e| e.to_string());
                (copy, stamps)
            })
            .await
            .unwrap_or_else(|e| (Err(format!("the copy failed unexpectedly: {e}")), None));
            let _ = tx.send(Incoming::Copied(copied.0, copied.1));
        });
    }

    /// Tells what changed in the workspace since the copy was made; the answer comes back as
    /// [`Incoming::Checked`]. Nothing is told when either look could not be taken whole.
    fn check_workspace(&mut self) {
        let before = self.stamps.take();
        let root = self.env.workspace.clone();
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let changes = tokio::task::spawn_blocking(move || {
                let after = stamps(&root, MAX_COPY_ENTRIES);
                match (before, after) {
                    (Some(before), Some(after)) => changed(&before, &after),
                    _ => Vec::new(),
                }
            })
            .await
            .unwrap_or_default();
            let _ = tx.send(Incoming::Checked(changes));
        });
    }

    /// Keeps a copy and sets up the verifier's tools in it.
    fn verifier_ready(&mut self, copied: Result<WorkspaceCopy, String>) -> Input {
        let result = copied.and_then(|copy| {
            let workspace = Workspace::new(copy.path()).map_err(|e| e.to_string())?;
            let exec = ToolExec::new(ToolRegistry::verifier(workspace), &self.config);
            self.verifier = Some((copy, Arc::new(exec)));
            Ok(())
        });
        Input::WorkspaceCopied(result)
    }

    /// Stops the verifier's commands and removes its copy.
    fn remove_copy(&mut self) {
        if let Some((copy, exec)) = self.verifier.take() {
            exec.kill_commands();
            drop(copy);
        }
    }

    /// Adds the session's duration to `result` events.
    fn stamp(&self, mut event: EventBody) -> EventBody {
        if let EventBody::Result(result) = &mut event
            && result.duration_ms.is_none()
        {
            let ms = self.started.elapsed().as_millis();
            result.duration_ms = Some(u64::try_from(ms).unwrap_or(u64::MAX));
        }
        event
    }

    fn next(&mut self, incoming: Incoming) -> Next {
        match incoming {
            Incoming::Frame(Ok(frame)) => translate(frame),
            Incoming::Frame(Err(ReadError::Eof)) => {
                tracing::warn!("the server closed stdin; exiting");
                Next::End(Outcome::ok(), true)
            }
            Incoming::Frame(Err(e)) => {
                Next::End(Outcome::failed(2, format!("protocol error: {e}")), false)
            }
            Incoming::Tools { batch, outputs } => Next::Feed(Input::ToolsDone { batch, outputs }),
            Incoming::OutputClosed => Next::End(Outcome::failed(1, "stdout closed"), false),
            Incoming::Copied(copied, stamps) => {
                self.stamps = stamps;
                Next::Feed(self.verifier_ready(copied))
            }
            Incoming::Checked(changes) => Next::Feed(Input::WorkspaceChecked(changes)),
        }
    }
}

/// Maps a server frame to a state-machine input.
fn translate(frame: ServerFrame) -> Next {
    match frame {
        ServerFrame::ModelResponse {
            request_id,
            response,
        } => Next::Feed(Input::Model {
            request_id,
            result: Ok(response),
        }),
        ServerFrame::ModelError { request_id, error } => Next::Feed(Input::Model {
            request_id,
            result: Err(error),
        }),
        ServerFrame::UserEvent { event } => Next::Feed(Input::User(event)),
        ServerFrame::Stop { reason } => {
            tracing::info!(%reason, "stopped by the server");
            Next::End(Outcome::ok(), true)
        }
        ServerFrame::Hello { .. } | ServerFrame::Start { .. } => {
            tracing::warn!("ignoring a repeated handshake frame");
            Next::Skip
        }
    }
}

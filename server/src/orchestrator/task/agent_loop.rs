//! One agent's frame loop: connect its pipes, then answer frames, commands, model replies
//! and the deadline until it ends, fails, is stopped or hands over to execution.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use ultraplan_protocol::constants::FRAME_PROTOCOL_VERSION;
use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::frames::{AgentFrame, AgentMode, ServerFrame};

use super::{Command, ModelReply, SessionTask};
use crate::orchestrator::lifecycle::{Input, Waiting, unanswered_tool};
use crate::orchestrator::pump::{read_frames, tail_stderr, write_frames};

/// Sleep until `at`; forever when there is none.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The agent's frames as they are read.
type Frames = mpsc::Receiver<Result<AgentFrame, String>>;

/// What one turn of the loop decided.
enum Step {
    Continue,
    /// The agent is done with; `Some(reason)` when it failed.
    End(Option<String>),
}

impl SessionTask {
    /// Start the agent, greet it and hand it its settings and transcript; with what the
    /// transcript it was handed leaves waiting on a person.
    pub(super) async fn connect(
        &mut self,
        transcript: Vec<EventBody>,
    ) -> Result<(Frames, Arc<Mutex<String>>, Option<Waiting>), String> {
        let (stdin, stdout, stderr, control) = self
            .start_agent()
            .await?
            .into_parts()
            .ok_or("the agent's stdio was not available")?;
        let transcript = if control.fresh_remote_workspace() {
            self.restart_on_fresh_copy(transcript).await
        } else {
            transcript
        };
        let waiting_on = unanswered_tool(&transcript);
        let frames = read_frames(stdout);
        let stderr_tail = tail_stderr(stderr, self.session.id.clone());
        let to_agent = write_frames(stdin);
        self.process = Some(control);
        let _ = to_agent.send(ServerFrame::Hello {
            protocol_version: FRAME_PROTOCOL_VERSION,
        });
        let _ = to_agent.send(ServerFrame::Start {
            settings: self.start_settings(),
            transcript,
        });
        self.to_agent = Some(to_agent);
        Ok((frames, stderr_tail, waiting_on))
    }

    /// An executing agent whose runner made its copy fresh from the bundle: the edits the
    /// log records since the execution started are not in it, so the agent starts the
    /// execution over (docs/ARCHITECTURE.md §5.3).
    async fn restart_on_fresh_copy(&self, transcript: Vec<EventBody>) -> Vec<EventBody> {
        if self.mode != AgentMode::Execute {
            return transcript;
        }
        let Some(cut) = crate::execution::restart_point(&transcript) else {
            return transcript;
        };
        tracing::warn!(
            session_id = %self.session.id,
            dropped = transcript.len() - cut.len(),
            "the execution's copy was lost with its runner: the agent starts the execution over"
        );
        let message = format!(
            "The runner that held this execution was lost with its copy of the repository. \
             The agent starts the execution over on {} from the uploaded repository; the log \
             above keeps what was done before.",
            self.lease.runner
        );
        self.append_note(crate::execution::EXECUTION_RESTARTED, message)
            .await;
        cut
    }

    /// Run the loop; `Some(reason)` when the agent failed.
    pub(super) async fn pump(
        &mut self,
        frames: &mut Frames,
        waiting_on: Option<Waiting>,
        (deadline, timeout_seconds): (tokio::time::Instant, u64),
        commands: &mut mpsc::UnboundedReceiver<Command>,
    ) -> Option<String> {
        let (model_tx, mut model_rx) = mpsc::unbounded_channel::<ModelReply>();
        let mut ready_with = Some(waiting_on);
        let mut park_at = None;
        loop {
            park_at = self.park_deadline(park_at);
            let step = tokio::select! {
                frame = frames.recv() => self.on_frame_read(frame, &mut ready_with, &model_tx).await,
                command = commands.recv() => self.on_command(command).await,
                Some(reply) = model_rx.recv() => self.on_model_reply(reply),
                () = tokio::time::sleep_until(deadline) => {
                    self.on_timeout(timeout_seconds).await;
                    Step::End(None)
                }
                () = sleep_until_some(park_at) => {
                    park_at = None;
                    match self.park().await {
                        true => Step::End(None),
                        false => Step::Continue,
                    }
                }
            };
            match step {
                Step::End(reason) => return reason,
                Step::Continue if self.let_go() => return None,
                Step::Continue if self.handoff => return None,
                Step::Continue => {}
            }
        }
    }

    /// When the agent is to be parked: `park_after` from when it began to wait on a person,
    /// while it still does and no model call is in flight.
    fn park_deadline(&self, current: Option<tokio::time::Instant>) -> Option<tokio::time::Instant> {
        let idle = self.lifecycle.waits_on_person()
            && self.calls.available_permits() == self.inner.settings.max_model_calls.max(1);
        match (idle, current) {
            (false, _) => None,
            (true, Some(at)) => Some(at),
            (true, None) => Some(tokio::time::Instant::now() + self.inner.settings.park_after),
        }
    }

    /// The planning agent's work is done: stop it (it waits on nothing) before execution.
    pub(super) async fn hand_over(&mut self) {
        self.send(ServerFrame::Stop {
            reason: "the plan was approved; execution starts".to_owned(),
        });
        self.wait_for_exit().await;
    }

    async fn on_frame_read(
        &mut self,
        frame: Option<Result<AgentFrame, String>>,
        ready_with: &mut Option<Option<Waiting>>,
        model_tx: &mpsc::UnboundedSender<ModelReply>,
    ) -> Step {
        match frame {
            Some(Ok(frame)) => {
                self.seen();
                match self.on_frame(frame, ready_with, model_tx).await {
                    Some(reason) => Step::End(Some(reason)),
                    None => Step::Continue,
                }
            }
            Some(Err(reason)) => Step::End(Some(reason)),
            None => Step::End(None),
        }
    }

    async fn on_command(&mut self, command: Option<Command>) -> Step {
        match command {
            Some(Command::Deliver(event)) => {
                self.apply(Input::Deliver(*event)).await;
                Step::Continue
            }
            Some(Command::Lost) => {
                self.lost = true;
                self.kill();
                Step::End(None)
            }
            Some(Command::HandBack) => {
                self.handed_back = true;
                self.kill();
                Step::End(None)
            }
            Some(Command::Stop) | None => {
                self.cut_short = Some("the session was archived".to_owned());
                self.apply(Input::Archived).await;
                Step::End(None)
            }
        }
    }

    fn on_model_reply(&mut self, (frame, usage): ModelReply) -> Step {
        if let Some(total) = usage {
            self.usage = total;
        }
        self.send(frame);
        Step::Continue
    }

    /// Handle one frame; `Some(reason)` ends the session with that failure.
    async fn on_frame(
        &mut self,
        frame: AgentFrame,
        ready_with: &mut Option<Option<Waiting>>,
        model_tx: &mpsc::UnboundedSender<ModelReply>,
    ) -> Option<String> {
        match frame {
            AgentFrame::Hello {
                protocol_version, ..
            } if protocol_version == FRAME_PROTOCOL_VERSION => {
                if let Some(waiting_on) = ready_with.take() {
                    self.apply(Input::AgentReady { waiting_on }).await;
                }
            }
            AgentFrame::Hello {
                protocol_version, ..
            } => {
                return Some(format!(
                    "the agent speaks frame protocol {protocol_version}, the server {FRAME_PROTOCOL_VERSION}"
                ));
            }
            AgentFrame::Event { event } => {
                if matches!(event, EventBody::ControlRequest(_)) {
                    return Some("the agent sent a control_request event".to_owned());
                }
                self.apply(Input::AgentEvent(event)).await;
            }
            AgentFrame::ModelRequest {
                request_id,
                request,
            } => self.call_model(request_id, request, model_tx.clone()),
            AgentFrame::Heartbeat {} => {}
            AgentFrame::Patch { .. } => {
                tracing::debug!(session_id = %self.session.id, "ignoring a patch frame: the server diffs the workspace itself");
            }
            AgentFrame::Done { .. } => self.saw_done = true,
        }
        None
    }
}

//! One remote agent's pipes: what the runner relays is written into in-memory stdio the session
//! task reads like a local child's, and what the task writes on stdin goes to the runner line
//! by line.

use std::sync::{Arc, Mutex, OnceLock};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use ultraplan_protocol::runner::{AgentRef, BlockedHost, ControlMessage, WorkspaceOrigin};
use ultraplan_runner::egress::BlockedAttempt;
use ultraplan_runner::environment::wire::blocked_from_wire;

use super::{RemoteLink, RemotePatch, Started};
use crate::runner::{AgentExit, AgentProcess, RemoteAgent};

/// How much of a pipe is buffered before its writer waits.
const PIPE_BYTES: usize = 64 * 1024;

/// The link's end of one agent.
pub(crate) struct Route {
    started: Option<oneshot::Sender<Result<(), String>>>,
    stdout: mpsc::UnboundedSender<Vec<u8>>,
    stderr: mpsc::UnboundedSender<Vec<u8>>,
    patch: Arc<Mutex<Option<RemotePatch>>>,
    origin: Arc<OnceLock<WorkspaceOrigin>>,
    refused: Refused,
    exit: oneshot::Sender<AgentExit>,
}

/// The hosts an agent's network allow-list refused, as its runner reported them.
type Refused = Arc<Mutex<Option<(Vec<BlockedAttempt>, u64)>>>;

impl Route {
    /// What the agent's egress proxy refused, checked (see [`blocked_from_wire`]).
    pub(super) fn refused(&self, blocked: Vec<BlockedHost>, beyond: u64) {
        if blocked.is_empty() && beyond == 0 {
            return;
        }
        let checked = (blocked_from_wire(blocked), beyond);
        *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(checked);
    }

    /// The runner's answer to the launch, with where an executing agent's copy came from.
    pub(super) fn started(&mut self, outcome: Result<Option<WorkspaceOrigin>, String>) {
        let outcome = outcome.map(|origin| {
            if let Some(origin) = origin {
                let _ = self.origin.set(origin);
            }
        });
        if let Some(started) = self.started.take() {
            let _ = started.send(outcome);
        }
    }

    pub(super) fn stdout(&self, line: String) {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let _ = self.stdout.send(bytes);
    }

    pub(super) fn stderr(&self, text: String) {
        let _ = self.stderr.send(text.into_bytes());
    }

    pub(super) fn patch(&self, patch: RemotePatch) {
        *self.patch.lock().unwrap_or_else(|e| e.into_inner()) = Some(patch);
    }

    /// The agent ended: its stdout and stderr close once what was relayed is read.
    pub(super) fn end(mut self, exit: AgentExit) {
        self.started(Err(exit.description.clone()));
        let _ = self.exit.send(exit);
    }
}

/// Stops and reaps a remote agent.
pub struct RemoteHandle {
    link: RemoteLink,
    agent: AgentRef,
    exit: Option<oneshot::Receiver<AgentExit>>,
    ended: Option<AgentExit>,
    patch: Arc<Mutex<Option<RemotePatch>>>,
    origin: Arc<OnceLock<WorkspaceOrigin>>,
    refused: Refused,
}

#[async_trait::async_trait]
impl RemoteAgent for RemoteHandle {
    fn start_kill(&mut self) {
        if self.ended.is_none() {
            self.link.kill(&self.agent, "stopped by the server");
        }
    }

    async fn wait(&mut self) -> Option<AgentExit> {
        if let Some(exit) = self.exit.take() {
            let ended = exit.await.unwrap_or_else(|_| AgentExit {
                success: false,
                description: "the runner's link was lost".to_owned(),
                code: None,
            });
            self.ended = Some(ended);
        }
        self.ended.clone()
    }

    /// What the runner made of an executing agent's workspace, once it said.
    fn fresh_workspace(&self) -> bool {
        self.origin.get() == Some(&WorkspaceOrigin::Fresh)
    }

    fn take_patch(&mut self) -> Option<RemotePatch> {
        self.patch.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn take_refused(&mut self) -> Option<(Vec<BlockedAttempt>, u64)> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

/// The pipes of a remote agent: the link's route, the launch answer, and the process the
/// session task drives.
pub(super) fn bridge(link: RemoteLink, agent: AgentRef) -> (Route, Started, AgentProcess) {
    let (started_tx, started) = oneshot::channel();
    let (exit_tx, exit_rx) = oneshot::channel();
    let (stdout_tx, stdout) = pipe_from_channel();
    let (stderr_tx, stderr) = pipe_from_channel();
    let stdin = pipe_to_link(link.clone(), agent.clone());
    let patch = Arc::new(Mutex::new(None));
    let origin = Arc::new(OnceLock::new());
    let refused = Refused::default();
    let route = Route {
        started: Some(started_tx),
        stdout: stdout_tx,
        stderr: stderr_tx,
        patch: patch.clone(),
        origin: origin.clone(),
        refused: refused.clone(),
        exit: exit_tx,
    };
    let handle = RemoteHandle {
        link,
        agent,
        exit: Some(exit_rx),
        ended: None,
        patch,
        origin,
        refused,
    };
    let process = AgentProcess::remote(
        Box::pin(stdin),
        Box::pin(stdout),
        Box::pin(stderr),
        Box::new(handle),
    );
    (route, started, process)
}

/// A readable pipe fed by a channel; it ends when the channel's senders are gone and
/// everything sent was read.
fn pipe_from_channel() -> (mpsc::UnboundedSender<Vec<u8>>, tokio::io::DuplexStream) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (mut writer, reader) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(async move {
        while let Some(chunk) = rx.recv().await {
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    });
    (tx, reader)
}

/// A writable pipe whose lines go to the runner as the agent's stdin.
fn pipe_to_link(link: RemoteLink, agent: AgentRef) -> tokio::io::DuplexStream {
    let (writer, reader) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(async move {
        let mut reader = BufReader::new(reader);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            let message = ControlMessage::Stdin {
                agent: agent.clone(),
                line: String::from_utf8_lossy(&line).into_owned(),
            };
            if !link.send(message) {
                return;
            }
        }
    });
    writer
}

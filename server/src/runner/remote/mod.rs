//! A sandbox on another machine: a keyless runner (`ultraplan-runner`) linked to this server
//! over one WebSocket (docs/ARCHITECTURE.md §5.3).
//!
//! The session task drives a remote agent exactly as a local one: it gets an
//! [`AgentProcess`] whose stdio are in-memory pipes. [`RemoteLink`] routes the runner's
//! messages into those pipes by [`AgentRef`] (session and lease epoch) and turns what the task
//! writes into messages for the runner. A message for an agent this link does not hold (a
//! stale epoch, a session given away while the runner was cut off) is refused, and the runner
//! is told to kill that agent.

mod agent;
mod environment;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use tokio::sync::{mpsc, oneshot};
use ultraplan_protocol::runner::{
    AgentRef, ControlMessage, FEATURE_ENVIRONMENTS, LaunchSpec, RunnerMessage,
};

pub use agent::RemoteHandle;
use agent::Route;
use environment::PrepareRoute;
pub use environment::{MAX_PREPARE_LINES, RemoteSnapshot};

use super::{AgentExit, AgentProcess, SandboxError};

/// Largest patch a runner may send (its diff, decoded).
pub const MAX_REMOTE_PATCH_BYTES: usize = 16 * 1024 * 1024;

/// How long a runner may take to fetch a bundle and start an agent.
pub(super) const LAUNCH_TIMEOUT: Duration = Duration::from_secs(300);

pub use super::RemotePatch;

/// One runner's link, shared by the tasks of the sessions it runs.
#[derive(Clone)]
pub struct RemoteLink {
    inner: Arc<LinkInner>,
}

struct LinkInner {
    name: String,
    out: mpsc::UnboundedSender<ControlMessage>,
    routes: Mutex<HashMap<AgentRef, Route>>,
    /// The `prepare`s waiting for the runner's answer.
    prepares: Mutex<HashMap<AgentRef, PrepareRoute>>,
    closed: AtomicBool,
    /// The runner prepares environments.
    environments: bool,
}

impl std::fmt::Debug for RemoteLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLink")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl RemoteLink {
    /// A link to the runner `name` with the `features` its hello named, and what to send
    /// it.
    pub fn new(name: &str, features: &[String]) -> (Self, mpsc::UnboundedReceiver<ControlMessage>) {
        let (out, rx) = mpsc::unbounded_channel();
        let link = RemoteLink {
            inner: Arc::new(LinkInner {
                name: name.to_owned(),
                out,
                routes: Mutex::new(HashMap::new()),
                prepares: Mutex::new(HashMap::new()),
                closed: AtomicBool::new(false),
                environments: features.iter().any(|f| f == FEATURE_ENVIRONMENTS),
            }),
        };
        (link, rx)
    }

    /// The runner's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<AgentRef, Route>> {
        self.inner.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn prepares(&self) -> std::sync::MutexGuard<'_, HashMap<AgentRef, PrepareRoute>> {
        self.inner
            .prepares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Send the runner a message; `false` once the link is gone.
    pub(crate) fn send(&self, message: ControlMessage) -> bool {
        !self.inner.closed.load(Ordering::SeqCst) && self.inner.out.send(message).is_ok()
    }

    /// Ask the runner to start an agent and wait until it runs.
    pub async fn launch(
        &self,
        agent: AgentRef,
        spec: LaunchSpec,
    ) -> Result<AgentProcess, SandboxError> {
        let program = format!("the agent on runner {}", self.name());
        let (route, started, process) = agent::bridge(self.clone(), agent.clone());
        if let Some(old) = self.routes().insert(agent.clone(), route) {
            old.end(exit("a newer launch of the same lease replaced it"));
        }
        if !self.send(ControlMessage::Launch {
            agent: agent.clone(),
            spec,
        }) {
            self.routes().remove(&agent);
            return Err(spawn_error(
                program,
                "the runner's link is closed".to_owned(),
            ));
        }
        match tokio::time::timeout(LAUNCH_TIMEOUT, started).await {
            Ok(Ok(Ok(()))) => Ok(process),
            Ok(Ok(Err(reason))) => Err(spawn_error(program, reason)),
            Ok(Err(_)) => Err(spawn_error(program, "the runner's link closed".to_owned())),
            Err(_) => {
                self.kill(&agent, "it did not start in time");
                Err(spawn_error(
                    program,
                    format!("it did not start within {LAUNCH_TIMEOUT:?}"),
                ))
            }
        }
    }

    /// Tell the runner to kill the agent; its route ends when the runner says it exited (or
    /// the link closes).
    pub(crate) fn kill(&self, agent: &AgentRef, reason: &str) {
        self.send(ControlMessage::Kill {
            agent: agent.clone(),
            reason: reason.to_owned(),
        });
    }

    /// Route one message from the runner. Anything about an agent this link does not hold is
    /// refused: the runner is told to kill it.
    pub fn dispatch(&self, message: RunnerMessage) {
        match message {
            RunnerMessage::Hello { .. } | RunnerMessage::Heartbeat {} => {}
            RunnerMessage::Started { agent, workspace } => {
                self.with_route(&agent, |r| r.started(Ok(workspace)))
            }
            RunnerMessage::LaunchFailed { agent, reason } => {
                if let Some(mut route) = self.routes().remove(&agent) {
                    route.started(Err(reason));
                }
            }
            RunnerMessage::Stdout { agent, line } => self.with_route(&agent, |r| r.stdout(line)),
            RunnerMessage::Stderr { agent, text } => self.with_route(&agent, |r| r.stderr(text)),
            RunnerMessage::Patch {
                agent,
                diff_base64,
                summary,
            } => {
                let patch = decode_patch(&diff_base64).map(|diff| (diff, summary));
                self.with_route(&agent, |r| r.patch(patch));
            }
            RunnerMessage::PatchFailed { agent, reason } => {
                self.with_route(&agent, |r| r.patch(Err(reason)));
            }
            RunnerMessage::Exited {
                agent,
                success,
                description,
                blocked,
                blocked_beyond,
            } => {
                if let Some(route) = self.routes().remove(&agent) {
                    route.refused(blocked, blocked_beyond);
                    route.end(AgentExit {
                        success,
                        description,
                        code: None,
                    });
                }
            }
            RunnerMessage::EnvironmentOutput { agent, lines } => {
                let known = match self.prepares().get_mut(&agent) {
                    Some(route) => {
                        route.output(lines);
                        true
                    }
                    None => false,
                };
                if !known {
                    self.refuse(&agent);
                }
            }
            RunnerMessage::EnvironmentDone { agent, outcome } => {
                let route = self.prepares().remove(&agent);
                match route {
                    Some(route) => route.end(outcome),
                    None => self.refuse(&agent),
                }
            }
        }
    }

    /// News of an agent this link does not hold: the runner is told to kill it.
    fn refuse(&self, agent: &AgentRef) {
        tracing::warn!(runner = self.name(), session_id = %agent.session_id, epoch = agent.epoch,
            "refused a message of a lease this server does not hold; the runner kills that agent");
        self.kill(agent, "this server holds no lease of that epoch");
    }

    fn with_route(&self, agent: &AgentRef, f: impl FnOnce(&mut Route)) {
        let known = {
            let mut routes = self.routes();
            match routes.get_mut(agent) {
                Some(route) => {
                    f(route);
                    true
                }
                None => false,
            }
        };
        if !known {
            self.refuse(agent);
        }
    }

    /// The link is gone: every agent on it ends (the runner kills its agents when it loses
    /// the link).
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let routes: Vec<Route> = self.routes().drain().map(|(_, r)| r).collect();
        for route in routes {
            route.end(exit("the runner's link was lost"));
        }
        // Their waiters hear the link was lost.
        self.prepares().clear();
    }

    /// Whether the link is gone.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Agents running on the link.
    pub fn agents(&self) -> usize {
        self.routes().len()
    }
}

fn exit(description: &str) -> AgentExit {
    AgentExit {
        success: false,
        description: description.to_owned(),
        code: None,
    }
}

fn spawn_error(program: String, reason: String) -> SandboxError {
    SandboxError::Spawn { program, reason }
}

fn decode_patch(diff_base64: &str) -> Result<Vec<u8>, String> {
    if diff_base64.len() > MAX_REMOTE_PATCH_BYTES / 3 * 4 + 4 {
        return Err(format!(
            "the patch is larger than {MAX_REMOTE_PATCH_BYTES} bytes"
        ));
    }
    base64::engine::general_purpose::STANDARD
        .decode(diff_base64)
        .map_err(|e| format!("the patch is not valid base64: {e}"))
}

/// Answered when the agent is running or could not start.
pub(crate) type Started = oneshot::Receiver<Result<(), String>>;

#[cfg(test)]
mod tests;

//! A running agent, whatever started it: its stdio and a way to stop and reap it.
#![allow(unsafe_code)] // libc calls for cgroups, mounts, memfds and the pre-exec step.

use std::pin::Pin;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};

use super::SandboxError;
use super::cgroup::SessionCgroup;
use super::docker::ContainerHandle;
use super::spec::CommandSpec;

/// The agent's stdin.
pub type AgentInput = Pin<Box<dyn AsyncWrite + Send>>;
/// The agent's stdout or stderr.
pub type AgentOutput = Pin<Box<dyn AsyncRead + Send>>;

/// How the agent ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentExit {
    pub success: bool,
    pub description: String,
    /// The exit status (128 + the signal's number when a signal ended it), when known.
    pub code: Option<i32>,
}

/// What a linked runner made of an executing agent's workspace: the diff and its summary,
/// or why it could not make one.
pub type RemotePatch = Result<(Vec<u8>, ultraplan_protocol::patch::PatchSummary), String>;

/// An agent that runs elsewhere (on a runner linked to a server), stopped and reaped through
/// whatever carries its stdio.
#[async_trait::async_trait]
pub trait RemoteAgent: Send + Sync {
    /// Ask for the agent to be killed; returns immediately.
    fn start_kill(&mut self);
    /// Wait for the agent's end.
    async fn wait(&mut self) -> Option<AgentExit>;
    /// The patch its runner sent, once it did.
    fn take_patch(&mut self) -> Option<RemotePatch>;
    /// Whether an executing agent's writable copy was made fresh from the bundle for this
    /// launch, so edits of an earlier launch elsewhere are not in it.
    fn fresh_workspace(&self) -> bool;
    /// The hosts its network allow-list refused (and how many attempts beyond those listed),
    /// once its runner said.
    fn take_refused(&mut self) -> Option<(Vec<crate::egress::BlockedAttempt>, u64)> {
        None
    }
}

enum Handle {
    /// A local process and the cgroup that holds its tree, if any.
    Child(Child, Option<SessionCgroup>),
    Container(ContainerHandle),
    /// An agent on a runner linked to this server.
    Remote(Box<dyn RemoteAgent>),
}

/// Work for the child between fork and exec.
pub type PreExec = Box<dyn FnMut() -> std::io::Result<()> + Send + Sync>;

/// Stops and reaps an agent once its stdio has been taken.
pub struct AgentControl {
    handle: Handle,
}

/// A running agent.
pub struct AgentProcess {
    pub stdin: Option<AgentInput>,
    pub stdout: Option<AgentOutput>,
    pub stderr: Option<AgentOutput>,
    handle: Handle,
}

impl AgentProcess {
    pub(crate) fn container(
        stdin: AgentInput,
        stdout: AgentOutput,
        stderr: AgentOutput,
        handle: ContainerHandle,
    ) -> Self {
        AgentProcess {
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
            handle: Handle::Container(handle),
        }
    }

    /// An agent running elsewhere, whose stdio are pipes to wherever it runs.
    pub fn remote(
        stdin: AgentInput,
        stdout: AgentOutput,
        stderr: AgentOutput,
        handle: Box<dyn RemoteAgent>,
    ) -> Self {
        AgentProcess {
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr: Some(stderr),
            handle: Handle::Remote(handle),
        }
    }

    /// The cgroup directories that hold the sandbox (empty when none is enforced).
    pub fn cgroup_dirs(&self) -> Vec<std::path::PathBuf> {
        match &self.handle {
            Handle::Child(_, Some(group)) => group.dirs().to_vec(),
            _ => Vec::new(),
        }
    }

    /// Split into stdio and the control handle; `None` if stdio was already taken.
    pub fn into_parts(self) -> Option<(AgentInput, AgentOutput, AgentOutput, AgentControl)> {
        Some((
            self.stdin?,
            self.stdout?,
            self.stderr?,
            AgentControl {
                handle: self.handle,
            },
        ))
    }
}

impl AgentControl {
    /// Start killing the agent; returns immediately.
    pub fn start_kill(&mut self) {
        match &mut self.handle {
            Handle::Child(child, _) => {
                if let Err(error) = child.start_kill() {
                    tracing::debug!(%error, "agent already gone");
                }
            }
            Handle::Container(container) => container.start_kill(),
            Handle::Remote(remote) => remote.start_kill(),
        }
    }

    /// What a remote runner made of an executing agent's workspace; `None` for a local agent
    /// (the server diffs the workspace itself) or when the runner said nothing.
    pub fn take_remote_patch(&mut self) -> Option<RemotePatch> {
        match &mut self.handle {
            Handle::Remote(remote) => remote.take_patch(),
            Handle::Child(..) | Handle::Container(_) => None,
        }
    }

    /// What a remote agent's network allow-list refused, as its runner reported it; `None`
    /// for a local agent (its proxy is the server's own) or when nothing was refused.
    pub fn take_remote_refused(&mut self) -> Option<(Vec<crate::egress::BlockedAttempt>, u64)> {
        match &mut self.handle {
            Handle::Remote(remote) => remote.take_refused(),
            Handle::Child(..) | Handle::Container(_) => None,
        }
    }

    /// Whether a remote executing agent's copy was made fresh for this launch (see
    /// [`RemoteAgent::fresh_workspace`]); a local agent's workspace is its runner's own,
    /// prepared once per execution.
    pub fn fresh_remote_workspace(&self) -> bool {
        matches!(&self.handle, Handle::Remote(remote) if remote.fresh_workspace())
    }

    /// Whether the agent runs on a remote runner.
    pub fn is_remote(&self) -> bool {
        matches!(self.handle, Handle::Remote(_))
    }

    /// Wait for the agent to end (and, for containers, be removed).
    pub async fn wait(&mut self) -> Option<AgentExit> {
        match &mut self.handle {
            Handle::Child(child, cgroup) => {
                let status = child.wait().await.ok();
                let limits = match cgroup.take() {
                    Some(group) => release(group).await,
                    None => Vec::new(),
                };
                status.map(|status| AgentExit {
                    success: status.success(),
                    code: exit_code(status),
                    description: std::iter::once(status.to_string())
                        .chain(limits)
                        .collect::<Vec<_>>()
                        .join("; "),
                })
            }
            Handle::Container(container) => container.wait().await,
            Handle::Remote(remote) => remote.wait().await,
        }
    }
}

/// The status a shell would report: the code, or 128 + the signal's number.
fn exit_code(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// What the cgroup's limits stopped, then the cgroup removed (its stragglers killed).
async fn release(mut group: SessionCgroup) -> Vec<String> {
    tokio::task::spawn_blocking(move || {
        let events = group.events();
        group.destroy();
        events
    })
    .await
    .unwrap_or_default()
}

/// Spawn the command with nothing inherited but what the spec names.
pub fn spawn(spec: &CommandSpec) -> Result<AgentProcess, SandboxError> {
    spawn_with(spec, None, None)
}

/// [`spawn`], with work for the child before exec and the cgroup it joins there.
pub fn spawn_with(
    spec: &CommandSpec,
    pre_exec: Option<PreExec>,
    cgroup: Option<SessionCgroup>,
) -> Result<AgentProcess, SandboxError> {
    let mut command = Command::new(&spec.program);
    command
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    if let Some(pre_exec) = pre_exec {
        // SAFETY: the callers' pre-exec work uses async-signal-safe syscalls only.
        unsafe {
            command.pre_exec(pre_exec);
        }
    }
    let mut child = command.spawn().map_err(|e| SandboxError::Spawn {
        program: spec.program.display().to_string(),
        reason: e.to_string(),
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(SandboxError::Spawn {
            program: spec.program.display().to_string(),
            reason: "stdio was not piped".to_owned(),
        });
    };
    Ok(AgentProcess {
        stdin: Some(Box::pin(stdin)),
        stdout: Some(Box::pin(stdout)),
        stderr: Some(Box::pin(stderr)),
        handle: Handle::Child(child, cgroup),
    })
}

//! A running agent, whatever started it: its stdio and a way to stop and reap it.

use std::pin::Pin;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::{Child, Command};

use super::RunnerError;
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
}

enum Handle {
    Child(Child),
    Container(ContainerHandle),
}

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
            Handle::Child(child) => {
                if let Err(error) = child.start_kill() {
                    tracing::debug!(%error, "agent already gone");
                }
            }
            Handle::Container(container) => container.start_kill(),
        }
    }

    /// Wait for the agent to end (and, for containers, be removed).
    pub async fn wait(&mut self) -> Option<AgentExit> {
        match &mut self.handle {
            Handle::Child(child) => child.wait().await.ok().map(|status| AgentExit {
                success: status.success(),
                description: status.to_string(),
            }),
            Handle::Container(container) => container.wait().await,
        }
    }
}

/// Spawn the command with nothing inherited but what the spec names.
pub fn spawn(spec: &CommandSpec) -> Result<AgentProcess, RunnerError> {
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
    let mut child = command.spawn().map_err(|e| RunnerError::Spawn {
        program: spec.program.display().to_string(),
        reason: e.to_string(),
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(RunnerError::Spawn {
            program: spec.program.display().to_string(),
            reason: "stdio was not piped".to_owned(),
        });
    };
    Ok(AgentProcess {
        stdin: Some(Box::pin(stdin)),
        stdout: Some(Box::pin(stdout)),
        stderr: Some(Box::pin(stderr)),
        handle: Handle::Child(child),
    })
}

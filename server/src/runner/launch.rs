//! Starting a [`CommandSpec`] as a child with piped stdio.

use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::RunnerError;
use super::spec::CommandSpec;

/// A running agent: its stdio and a way to stop it.
pub struct AgentProcess {
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
    pub child: Child,
}

impl AgentProcess {
    /// Take the stderr pipe (once).
    pub fn stderr_take(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// Start killing the agent; returns immediately.
    pub fn start_kill(&mut self) {
        if let Err(error) = self.child.start_kill() {
            tracing::debug!(%error, "agent already gone");
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
        stdin: Some(stdin),
        stdout: Some(stdout),
        stderr: Some(stderr),
        child,
    })
}

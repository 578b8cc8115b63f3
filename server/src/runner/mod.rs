//! Sandboxed runners for the agent: a pure spec builder per runner, and one way to start it.
//!
//! `auto` prefers Docker when the daemon answers and the agent image builds, then bwrap. `process` is for development only: it is chosen
//! explicitly and warns loudly. With neither, the server refuses to run
//! sessions (eligibility then says `no_runner`).

pub mod bwrap;
pub mod cgroup;
pub mod docker;
mod launch;
pub mod remote;
pub mod seccomp;
pub mod spec;
pub mod status;
pub mod tmpfs;

use std::path::Path;

pub use docker::DockerRunner;
pub use launch::{AgentControl, AgentExit, AgentInput, AgentOutput, AgentProcess};
pub use spec::{CommandSpec, SandboxLimits, SandboxRequest, process_spec};
pub use status::{SandboxStatus, sandbox_status};

use crate::config::RunnerKind;

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("no sandbox runner is available: {0}")]
    Unavailable(String),
}

/// What a remote runner needs beyond the sandbox request: the lease's epoch, which every
/// message about the agent carries, and the bundle to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLaunch {
    pub epoch: i64,
    pub bundle_id: String,
}

/// A runner that can start agents.
#[derive(Debug, Clone)]
pub enum Runner {
    Docker(DockerRunner),
    Bwrap,
    /// Unsandboxed; development only.
    Process,
    /// A keyless runner linked over the network, with a sandbox of its own.
    Remote(remote::RemoteLink),
}

impl Runner {
    /// The runner's name as configured and reported.
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Docker(_) => "docker",
            Runner::Bwrap => "bwrap",
            Runner::Process => "process",
            Runner::Remote(_) => "remote",
        }
    }

    /// Who must own an execution workspace so the sandboxed agent can write it: the
    /// sandboxes of a root server (Docker containers and bwrap alike) run as the unprivileged
    /// sandbox user, so the tree is handed to it. A non-root server's bwrap maps the sandbox
    /// user onto the server's own.
    pub fn workspace_owner(&self) -> Option<u32> {
        match self {
            Runner::Docker(_) | Runner::Bwrap if server_uid() == 0 => Some(spec::SANDBOX_UID),
            _ => None,
        }
    }

    /// Start an agent here.
    pub async fn launch(&self, req: &SandboxRequest) -> Result<AgentProcess, RunnerError> {
        match self {
            Runner::Docker(docker) => docker.launch(req).await,
            Runner::Bwrap => bwrap::spawn(req),
            Runner::Process => launch::spawn(&process_spec(req)),
            Runner::Remote(_) => Err(RunnerError::Unavailable(
                "a remote runner's agent needs its lease: use launch_leased".to_owned(),
            )),
        }
    }

    /// Start a session's agent under `lease`, which addresses it on a remote runner (that
    /// fetches the bundle itself, and makes its own writable copy to execute in).
    pub async fn launch_leased(
        &self,
        req: &SandboxRequest,
        lease: &RemoteLaunch,
    ) -> Result<AgentProcess, RunnerError> {
        match self {
            Runner::Docker(_) | Runner::Bwrap | Runner::Process => self.launch(req).await,
            Runner::Remote(link) => {
                let agent = ultraplan_protocol::runner::AgentRef {
                    session_id: req.session_id.clone(),
                    epoch: lease.epoch,
                };
                let spec = ultraplan_protocol::runner::LaunchSpec {
                    bundle_id: lease.bundle_id.clone(),
                    writable: req.writable,
                    log_filter: Some(req.log_filter.clone()),
                };
                link.launch(agent, spec).await
            }
        }
    }

    /// Whether this is a remote runner whose link is gone (its agents went with it).
    pub fn link_lost(&self) -> bool {
        matches!(self, Runner::Remote(link) if link.is_closed())
    }

    /// Whether agents run on another machine (which then holds the bundle and the execution
    /// workspace, and makes the patch).
    pub fn is_remote(&self) -> bool {
        matches!(self, Runner::Remote(_))
    }
}

/// Choose the runner for the configured kind, probing what `auto` needs. The probe starts the
/// agent binary's `--version` inside a real sandbox.
///
/// `instance` names this server (e.g. a hash of its data dir): Docker containers carry it, and
/// only this instance's orphans are swept at start-up, so servers sharing a daemon leave each
/// other alone.
pub async fn select(
    kind: RunnerKind,
    agent_binary: &Path,
    instance: &str,
) -> Result<Runner, RunnerError> {
    match kind {
        RunnerKind::Process => {
            tracing::warn!(
                "ULTRAPLAN_RUNNER=process: agents run UNSANDBOXED with network and host file \
                 access. Use it for development only."
            );
            status::publish(status::process());
            Ok(Runner::Process)
        }
        RunnerKind::Docker => {
            let docker = DockerRunner::prepare(agent_binary, instance).await?;
            status::publish(status::docker(docker.seccomp()));
            Ok(Runner::Docker(docker))
        }
        RunnerKind::Auto => match DockerRunner::prepare(agent_binary, instance).await {
            Ok(docker) => {
                status::publish(status::docker(docker.seccomp()));
                Ok(Runner::Docker(docker))
            }
            Err(error) => {
                tracing::info!(%error, "docker is not usable; trying bubblewrap");
                select_bwrap(agent_binary).await
            }
        },
        RunnerKind::Bwrap => select_bwrap(agent_binary).await,
    }
}

async fn select_bwrap(agent_binary: &Path) -> Result<Runner, RunnerError> {
    match probe_bwrap(agent_binary).await {
        Ok(()) => {
            status::publish(status::bwrap());
            Ok(Runner::Bwrap)
        }
        Err(reason) => Err(RunnerError::Unavailable(format!(
            "bubblewrap could not start a sandbox ({reason}). Install the 'bubblewrap' \
                 package and make sure user namespaces are allowed, or set \
                 ULTRAPLAN_RUNNER=process for local development"
        ))),
    }
}

async fn probe_bwrap(agent_binary: &Path) -> Result<(), String> {
    use tokio::io::AsyncReadExt;
    if !agent_binary.is_file() {
        return Err(format!(
            "agent binary {} not found (set ULTRAPLAN_AGENT_BIN)",
            agent_binary.display()
        ));
    }
    let req = SandboxRequest {
        session_id: "probe".to_owned(),
        workspace: std::env::temp_dir(),
        writable: false,
        agent_binary: agent_binary.to_path_buf(),
        limits: SandboxLimits::default(),
        log_filter: "warn".to_owned(),
    };
    let process = bwrap::spawn_with_args(&req, &["--version"]).map_err(|e| e.to_string())?;
    let (stdin, _stdout, mut stderr, mut control) =
        process.into_parts().ok_or("the probe has no stdio")?;
    drop(stdin);
    let mut text = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        stderr.read_to_string(&mut text),
    )
    .await;
    if read.is_err() {
        control.start_kill();
    }
    match control.wait().await {
        Some(exit) if exit.success => Ok(()),
        Some(exit) => Err(format!("{}: {}", exit.description, text.trim())),
        None => Err(format!("the probe could not be waited on: {}", text.trim())),
    }
}

/// The server's effective uid (the owner of `/proc/self`).
pub fn server_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

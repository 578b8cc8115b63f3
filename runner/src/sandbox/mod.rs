//! Sandboxes for the agent: a pure spec builder per kind, and one way to start it.
//!
//! `auto` prefers Docker when the daemon answers and the agent image builds, then bwrap.
//! `process` is for development only: it is chosen explicitly and warns loudly. With neither,
//! no agent runs (a server's eligibility then says `no_runner`). Both the server's in-process
//! runner and `ultraplan-runner` start agents through this module (docs/ARCHITECTURE.md §5).

pub mod bwrap;
pub mod cgroup;
pub mod docker;
mod launch;
mod probe;
pub mod seccomp;
pub mod spec;
pub mod status;
pub mod tmpfs;

use std::path::{Path, PathBuf};

pub use docker::DockerRunner;
pub use launch::{
    AgentControl, AgentExit, AgentInput, AgentOutput, AgentProcess, RemoteAgent, RemotePatch,
};
pub use spec::{CommandSpec, SandboxLimits, SandboxRequest, process_spec};
pub use status::{SandboxStatus, sandbox_status};

/// Which sandbox runs agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxKind {
    Auto,
    Docker,
    Bwrap,
    Process,
}

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
    #[error("no sandbox runner is available: {0}")]
    Unavailable(String),
}

/// A sandbox that can start agents on this machine.
#[derive(Debug, Clone)]
pub enum Sandbox {
    Docker(DockerRunner),
    Bwrap,
    /// Unsandboxed; development only.
    Process,
}

impl Sandbox {
    /// The id of the Docker image `reference`, for an environment's `[base] image`: only the
    /// docker sandbox runs one, and only an image its engine already has.
    pub async fn image_id(&self, reference: &str) -> Result<String, SandboxError> {
        match self {
            Sandbox::Docker(docker) => docker.image_id(reference).await,
            other => Err(SandboxError::Unavailable(format!(
                "the environment's base image {reference} needs the docker sandbox; this \
                 runner uses {}: use [base] image = \"host\", or run the server with \
                 --runner docker",
                other.name()
            ))),
        }
    }

    /// The sandbox's name as configured and reported.
    pub fn name(&self) -> &'static str {
        match self {
            Sandbox::Docker(_) => "docker",
            Sandbox::Bwrap => "bwrap",
            Sandbox::Process => "process",
        }
    }

    /// Who must own an execution workspace so the sandboxed agent can write it: the
    /// sandboxes of a root process (Docker containers and bwrap alike) run as the
    /// unprivileged sandbox user, so the tree is handed to it. A non-root bwrap maps the
    /// sandbox user onto the caller's own.
    pub fn workspace_owner(&self) -> Option<u32> {
        match self {
            Sandbox::Docker(_) | Sandbox::Bwrap if server_uid() == 0 => Some(spec::SANDBOX_UID),
            _ => None,
        }
    }

    /// Start an agent.
    pub async fn launch(&self, req: &SandboxRequest) -> Result<AgentProcess, SandboxError> {
        if req.base_image.is_some() && !matches!(self, Sandbox::Docker(_)) {
            return Err(SandboxError::Unavailable(format!(
                "a base image needs the docker sandbox; this runner uses {}",
                self.name()
            )));
        }
        match self {
            Sandbox::Docker(docker) => docker.launch(req).await,
            Sandbox::Bwrap => bwrap::spawn(req),
            Sandbox::Process => launch::spawn(&process_spec(req)),
        }
    }
}

/// Choose the sandbox for the configured kind, probing what `auto` needs. The probe starts
/// the agent binary's `--version` inside a real sandbox.
///
/// `instance` names this process (e.g. a hash of its data dir): Docker containers carry it,
/// and only this instance's orphans are swept at start-up, so processes sharing a daemon
/// leave each other alone.
pub async fn select(
    kind: SandboxKind,
    agent_binary: &Path,
    instance: &str,
) -> Result<Sandbox, SandboxError> {
    match kind {
        SandboxKind::Process => {
            tracing::warn!(
                "ULTRAPLAN_RUNNER=process: agents run UNSANDBOXED with network and host file \
                 access. Use it for development only."
            );
            status::publish(status::process());
            Ok(Sandbox::Process)
        }
        SandboxKind::Docker => {
            let docker = DockerRunner::prepare(agent_binary, instance).await?;
            status::publish(status::docker(docker.seccomp()));
            Ok(Sandbox::Docker(docker))
        }
        SandboxKind::Auto => match DockerRunner::prepare(agent_binary, instance).await {
            Ok(docker) => {
                status::publish(status::docker(docker.seccomp()));
                Ok(Sandbox::Docker(docker))
            }
            Err(error) => {
                tracing::info!(%error, "docker is not usable; trying bubblewrap");
                select_bwrap(agent_binary).await
            }
        },
        SandboxKind::Bwrap => select_bwrap(agent_binary).await,
    }
}

async fn select_bwrap(agent_binary: &Path) -> Result<Sandbox, SandboxError> {
    match probe::bwrap(agent_binary).await {
        Ok(()) => {
            status::publish(status::bwrap());
            Ok(Sandbox::Bwrap)
        }
        Err(reason) => Err(SandboxError::Unavailable(format!(
            "bubblewrap could not start a sandbox ({reason}). Install the 'bubblewrap' \
                 package and make sure user namespaces are allowed, or set \
                 ULTRAPLAN_RUNNER=process for local development"
        ))),
    }
}

/// Where the agent binary is: `ULTRAPLAN_AGENT_BIN`, else beside this executable.
pub fn default_agent_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ULTRAPLAN_AGENT_BIN").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("ultraplan-agent")))
        .unwrap_or_else(|| PathBuf::from("ultraplan-agent"))
}

/// This process's effective uid (the owner of `/proc/self`).
pub fn server_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

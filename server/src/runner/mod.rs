//! Where a session's agent runs: in a sandbox on this machine (the in-process runner, through
//! the runner crate's sandboxes) or on a keyless runner linked over the network.

pub mod remote;

pub use ultraplan_runner::sandbox::{
    AgentControl, AgentExit, AgentInput, AgentOutput, AgentProcess, CommandSpec, DockerRunner,
    RemoteAgent, RemotePatch, Sandbox, SandboxError, SandboxKind, SandboxLimits, SandboxRequest,
    SandboxStatus, sandbox_status, select, server_uid,
};

/// What a remote runner needs beyond the sandbox request: the lease's epoch, which every
/// message about the agent carries, the bundle to fetch, and the environment its `prepare`
/// left the runner holding.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RemoteLaunch {
    pub epoch: i64,
    pub bundle_id: String,
    /// The snapshot's key on the runner.
    pub environment_key: Option<String>,
    /// The snapshot's base image, as the runner reported it.
    pub base_image: Option<String>,
    /// An executing agent's `[agent] network` entries.
    pub agent_network: Vec<String>,
}

/// A runner that can start agents.
#[derive(Debug, Clone)]
pub enum Runner {
    /// A sandbox on this machine.
    Local(Sandbox),
    /// A keyless runner linked over the network, with a sandbox of its own.
    Remote(remote::RemoteLink),
}

impl Runner {
    /// The runner's name as configured and reported.
    pub fn name(&self) -> &'static str {
        match self {
            Runner::Local(sandbox) => sandbox.name(),
            Runner::Remote(_) => "remote",
        }
    }

    /// Who must own an execution workspace on this machine (see
    /// [`Sandbox::workspace_owner`]); a remote runner makes its own.
    pub fn workspace_owner(&self) -> Option<u32> {
        match self {
            Runner::Local(sandbox) => sandbox.workspace_owner(),
            Runner::Remote(_) => None,
        }
    }

    /// Start a session's agent under `lease`, which addresses it on a remote runner (that
    /// fetches the bundle itself, and makes its own writable copy to execute in).
    pub async fn launch_leased(
        &self,
        req: &SandboxRequest,
        lease: &RemoteLaunch,
    ) -> Result<AgentProcess, SandboxError> {
        match self {
            Runner::Local(sandbox) => sandbox.launch(req).await,
            Runner::Remote(link) => {
                let agent = ultraplan_protocol::runner::AgentRef {
                    session_id: req.session_id.clone(),
                    epoch: lease.epoch,
                };
                let spec = ultraplan_protocol::runner::LaunchSpec {
                    bundle_id: lease.bundle_id.clone(),
                    writable: req.writable,
                    log_filter: Some(req.log_filter.clone()),
                    environment_key: lease.environment_key.clone(),
                    base_image: lease.base_image.clone(),
                    agent_network: lease.agent_network.clone(),
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

    /// Whether agents run unsandboxed (development only).
    pub fn is_unsandboxed(&self) -> bool {
        matches!(self, Runner::Local(Sandbox::Process))
    }
}

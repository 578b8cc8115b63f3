//! What the chosen runner enforces on this host, said once at start-up and reported by
//! `/healthz`. A limit that cannot be enforced is named with its reason; nothing pretends.

use std::sync::RwLock;

use serde::Serialize;

use super::cgroup::CgroupMode;

/// The sandbox guarantees in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxStatus {
    /// `bwrap`, `docker` or `process`.
    pub runner: String,
    /// How memory, pids and CPU are bounded per sandbox: `v2`, `v1`, `docker` or `none`.
    pub cgroup: String,
    /// Whether a seccomp filter refuses namespaces, mounts, ptrace and the like.
    pub seccomp: bool,
    /// Whether the sandbox runs as a non-root host uid.
    pub unprivileged_uid: bool,
    /// How an execution workspace's size is capped: `tmpfs` or `none`.
    pub workspace_quota: String,
    /// Every limit not enforced, with its reason.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<String>,
}

static STATUS: RwLock<Option<SandboxStatus>> = RwLock::new(None);

/// The status of the runner this process selected last, if any.
pub fn sandbox_status() -> Option<SandboxStatus> {
    STATUS.read().ok().and_then(|s| s.clone())
}

/// Log the status and keep it for `/healthz`.
pub fn publish(status: SandboxStatus) {
    if status.not_enforced.is_empty() {
        tracing::info!(
            runner = %status.runner,
            cgroup = %status.cgroup,
            seccomp = status.seccomp,
            unprivileged_uid = status.unprivileged_uid,
            workspace_quota = %status.workspace_quota,
            "sandbox limits in force"
        );
    } else {
        tracing::warn!(
            runner = %status.runner,
            cgroup = %status.cgroup,
            seccomp = status.seccomp,
            unprivileged_uid = status.unprivileged_uid,
            workspace_quota = %status.workspace_quota,
            not_enforced = ?status.not_enforced,
            "some sandbox limits are NOT enforced on this host"
        );
    }
    if let Ok(mut slot) = STATUS.write() {
        *slot = Some(status);
    }
}

fn workspace_quota(not_enforced: &mut Vec<String>) -> String {
    match super::tmpfs::available() {
        Ok(()) => "tmpfs".to_owned(),
        Err(reason) => {
            not_enforced.push(format!("execution workspace size: {reason}"));
            "none".to_owned()
        }
    }
}

/// bubblewrap on this host.
pub fn bwrap() -> SandboxStatus {
    let host = super::bwrap::host();
    let mut not_enforced = Vec::new();
    match &host.cgroup {
        CgroupMode::None(reason) => not_enforced.push(format!(
            "aggregate memory, pids and CPU (only per-process rlimits): {reason}"
        )),
        mode => tracing::info!(mechanism = %mode.describe(), "sandbox cgroups"),
    }
    if let Err(reason) = &host.seccomp {
        not_enforced.push(format!("seccomp: {reason}"));
    }
    SandboxStatus {
        runner: "bwrap".to_owned(),
        cgroup: host.cgroup.short().to_owned(),
        seccomp: host.seccomp.is_ok(),
        // Root runs bwrap as the sandbox uid; any other server maps it onto its own uid.
        unprivileged_uid: true,
        workspace_quota: workspace_quota(&mut not_enforced),
        not_enforced,
    }
}

/// Docker: the engine's cgroup, default seccomp profile (when the daemon has seccomp) and
/// a non-root user.
pub fn docker(seccomp: bool) -> SandboxStatus {
    let mut not_enforced = Vec::new();
    if !seccomp {
        not_enforced.push("seccomp: the Docker daemon reports no seccomp support".to_owned());
    }
    SandboxStatus {
        runner: "docker".to_owned(),
        cgroup: "docker".to_owned(),
        seccomp,
        unprivileged_uid: true,
        workspace_quota: workspace_quota(&mut not_enforced),
        not_enforced,
    }
}

/// The unsandboxed development runner.
pub fn process() -> SandboxStatus {
    SandboxStatus {
        runner: "process".to_owned(),
        cgroup: "none".to_owned(),
        seccomp: false,
        unprivileged_uid: super::server_uid() != 0,
        workspace_quota: "none".to_owned(),
        not_enforced: vec![
            "every sandbox limit: ULTRAPLAN_RUNNER=process runs agents unsandboxed".to_owned(),
        ],
    }
}

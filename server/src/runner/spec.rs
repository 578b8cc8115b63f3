//! What a sandbox must provide, and the pure command lines that provide it.

use std::path::{Path, PathBuf};

/// Where the bundle appears inside the sandbox.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// Where the agent binary appears inside the sandbox.
pub const AGENT_MOUNT: &str = "/ultraplan-agent";
/// The unprivileged uid/gid the agent runs as.
pub const SANDBOX_UID: u32 = 65534;

/// Host directories bound read-only into execution sandboxes, so `Bash` finds a shell and the
/// usual tools. Plan mode gets none of them.
pub const TOOLCHAIN_DIRS: [&str; 6] = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];
/// The few `/etc` entries programs need; the rest of `/etc` stays out of the sandbox.
pub const TOOLCHAIN_ETC: [&str; 7] = [
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
];

/// Size of the sandbox's private `/tmp`.
pub const TMP_BYTES: u64 = 256 * 1024 * 1024;

/// Resource limits applied to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLimits {
    pub memory_bytes: u64,
    pub cpu_seconds: u64,
    pub processes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 2 * 1024 * 1024 * 1024,
            cpu_seconds: 3600,
            processes: 256,
            file_size_bytes: 256 * 1024 * 1024,
            open_files: 1024,
        }
    }
}

/// Everything needed to start one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRequest {
    pub session_id: String,
    /// Host path of the unpacked bundle.
    pub workspace: PathBuf,
    /// Plan mode is read-only; execution mode gets a writable copy.
    pub writable: bool,
    /// Host path of the static `ultraplan-agent` binary.
    pub agent_binary: PathBuf,
    pub limits: SandboxLimits,
    /// `ULTRAPLAN_LOG` for the agent's stderr logging.
    pub log_filter: String,
}

/// A fully specified command: program, arguments, the complete environment (nothing is
/// inherited) and working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
}

fn path_arg(p: &Path) -> String {
    p.display().to_string()
}

/// `prlimit` options for the limits; the wrapped command follows them.
fn prlimit_args(limits: &SandboxLimits) -> Vec<String> {
    vec![
        format!("--as={}", limits.memory_bytes),
        format!("--cpu={}", limits.cpu_seconds),
        format!("--nproc={}", limits.processes),
        format!("--fsize={}", limits.file_size_bytes),
        format!("--nofile={}", limits.open_files),
        "--".to_owned(),
    ]
}

/// The unsandboxed development runner: the agent as a plain child process with a cleared
/// environment and rlimits. Network and host files stay reachable: never use it for
/// untrusted code.
pub fn process_spec(req: &SandboxRequest) -> CommandSpec {
    let mut args = prlimit_args(&req.limits);
    args.push(path_arg(&req.agent_binary));
    CommandSpec {
        program: PathBuf::from("prlimit"),
        args,
        env: vec![
            ("ULTRAPLAN_WORKSPACE".to_owned(), path_arg(&req.workspace)),
            ("ULTRAPLAN_LOG".to_owned(), req.log_filter.clone()),
        ],
        cwd: Some(req.workspace.clone()),
    }
}

/// bubblewrap: every namespace unshared (no network), the bundle and the static agent
/// bound read-only (the bundle writable in execution, with the host toolchain read-only for
/// `Bash`), a read-only root, a private `/tmp`, a cleared environment, an unprivileged uid, rlimits,
/// and death with the server.
pub fn bwrap_spec(req: &SandboxRequest) -> CommandSpec {
    let uid = SANDBOX_UID.to_string();
    let workspace_bind = if req.writable { "--bind" } else { "--ro-bind" };
    let mut args = prlimit_args(&req.limits);
    args.extend(
        [
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--uid",
            &uid,
            "--gid",
            &uid,
            workspace_bind,
            &path_arg(&req.workspace),
            WORKSPACE_MOUNT,
            "--ro-bind",
            &path_arg(&req.agent_binary),
            AGENT_MOUNT,
            "--size",
            &TMP_BYTES.to_string(),
            "--tmpfs",
            "/tmp",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        .map(str::to_owned),
    );
    if req.writable {
        for path in TOOLCHAIN_DIRS.iter().chain(TOOLCHAIN_ETC.iter()) {
            args.extend(["--ro-bind-try", path, path].map(str::to_owned));
        }
    }
    // The sandbox's own root stays read-only too: only the workspace (in execution) and the
    // private /tmp take writes.
    args.extend(["--remount-ro", "/"].map(str::to_owned));
    args.extend(
        [
            "--setenv",
            "HOME",
            "/tmp",
            "--setenv",
            "ULTRAPLAN_WORKSPACE",
            WORKSPACE_MOUNT,
            "--setenv",
            "ULTRAPLAN_LOG",
            &req.log_filter,
            "--chdir",
            WORKSPACE_MOUNT,
            "--",
            AGENT_MOUNT,
        ]
        .map(str::to_owned),
    );
    CommandSpec {
        program: PathBuf::from("prlimit"),
        args,
        env: Vec::new(),
        cwd: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(writable: bool) -> SandboxRequest {
        SandboxRequest {
            session_id: "s1".into(),
            workspace: PathBuf::from("/data/bundles/abc"),
            writable,
            agent_binary: PathBuf::from("/opt/ultraplan-agent"),
            limits: SandboxLimits::default(),
            log_filter: "info".into(),
        }
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(3)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn bwrap_isolates_everything() {
        let spec = bwrap_spec(&request(false));
        let args = &spec.args;
        assert_eq!(spec.program, PathBuf::from("prlimit"));
        assert!(spec.env.is_empty(), "nothing inherited");
        for flag in [
            "--unshare-all",
            "--die-with-parent",
            "--clearenv",
            "--new-session",
        ] {
            assert!(args.iter().any(|a| a == flag), "{flag} missing");
        }
        assert!(!args.iter().any(|a| a == "--share-net"));
        assert_eq!(
            after(args, "--ro-bind"),
            vec!["/data/bundles/abc", "/opt/ultraplan-agent"]
        );
        assert_eq!(after(args, "--bind"), Vec::<&str>::new());
        assert_eq!(after(args, "--uid"), vec!["65534"]);
        assert_eq!(args.last().map(String::as_str), Some(AGENT_MOUNT));
        let bwrap_at = args.iter().position(|a| a == "bwrap").expect("bwrap");
        let limits = &args[..bwrap_at];
        for l in [
            "--as=2147483648",
            "--cpu=3600",
            "--nproc=256",
            "--fsize=268435456",
        ] {
            assert!(limits.iter().any(|a| a == l), "{l} missing");
        }
        let envs: Vec<&str> = args
            .windows(2)
            .filter(|w| w[0] == "--setenv")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(envs, vec!["HOME", "ULTRAPLAN_WORKSPACE", "ULTRAPLAN_LOG"]);
        assert_eq!(after(args, "--size"), vec!["268435456"]);
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--remount-ro" && w[1] == "/")
        );
    }

    #[test]
    fn execution_mode_binds_the_workspace_writable() {
        let spec = bwrap_spec(&request(true));
        assert_eq!(after(&spec.args, "--bind"), vec!["/data/bundles/abc"]);
        assert_eq!(after(&spec.args, "--ro-bind"), vec!["/opt/ultraplan-agent"]);
        let toolchain = after(&spec.args, "--ro-bind-try");
        assert!(toolchain.contains(&"/usr") && toolchain.contains(&"/etc/passwd"));
        assert!(
            !toolchain
                .iter()
                .any(|p| *p == "/etc" || p.starts_with("/home"))
        );
        assert!(after(&bwrap_spec(&request(false)).args, "--ro-bind-try").is_empty());
    }

    #[test]
    fn process_runner_clears_the_environment() {
        let spec = process_spec(&request(false));
        let keys: Vec<&str> = spec.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, vec!["ULTRAPLAN_WORKSPACE", "ULTRAPLAN_LOG"]);
        assert_eq!(spec.cwd, Some(PathBuf::from("/data/bundles/abc")));
        assert_eq!(
            spec.args.last().map(String::as_str),
            Some("/opt/ultraplan-agent")
        );
    }
}

//! What a sandbox must provide, and the pure command lines that provide it.

use std::path::{Path, PathBuf};

use ultraplan_protocol::environment::{EGRESS_SOCKET_MOUNT, ENV_MOUNT, ENV_VAR};

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
    /// Host path of a prepared environment, bound at `/env`: read-write while its setup
    /// runs, read-only for agents (docs/ARCHITECTURE.md §6.5).
    pub environment: Option<PathBuf>,
    /// What runs in the sandbox.
    pub purpose: Purpose,
    /// A Docker image (its id) the sandbox is made from instead of the agent's own image and
    /// the host's toolchain: an environment's `[base] image` (Docker only).
    pub base_image: Option<String>,
    /// The egress proxy's host socket for an executing agent whose environment lets it reach
    /// the network (bound at [`EGRESS_SOCKET_MOUNT`] like setup's).
    pub agent_egress: Option<PathBuf>,
}

/// What a sandbox runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Purpose {
    /// The agent, speaking frames on stdio.
    #[default]
    Agent,
    /// `ultraplan-agent setup`: an environment's setup commands, with the environment
    /// writable, the workspace read-only, and the egress proxy's socket (when the setup may
    /// reach the network) bound at [`EGRESS_SOCKET_MOUNT`].
    Setup { egress: Option<PathBuf> },
}

impl SandboxRequest {
    /// Whether the environment is bound writable (during its setup only).
    pub fn setup(&self) -> bool {
        matches!(self.purpose, Purpose::Setup { .. })
    }

    /// The egress proxy's host socket, for a setup that may reach the network.
    pub fn egress(&self) -> Option<&Path> {
        match &self.purpose {
            Purpose::Setup { egress } => egress.as_deref(),
            Purpose::Agent => self.agent_egress.as_deref(),
        }
    }

    /// Whether the host toolchain is bound (read-only): for `Bash` in execution, for setup,
    /// and wherever an environment (whose programs link against it) is bound.
    pub fn toolchain(&self) -> bool {
        self.base_image.is_none() && (self.writable || self.environment.is_some() || self.setup())
    }

    /// The agent's arguments: `setup` for a setup run, none for the agent.
    pub fn agent_args(&self) -> &'static [&'static str] {
        if self.setup() { &["setup"] } else { &[] }
    }
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

/// `prlimit` options for the limits; the wrapped command follows them. `nproc` is apart:
/// RLIMIT_NPROC counts every process of the host uid, so where a pids cgroup bounds each
/// sandbox it is only a host-wide backstop.
fn prlimit_args(limits: &SandboxLimits, nproc: u64) -> Vec<String> {
    vec![
        format!("--as={}", limits.memory_bytes),
        format!("--cpu={}", limits.cpu_seconds),
        format!("--nproc={nproc}"),
        format!("--fsize={}", limits.file_size_bytes),
        format!("--nofile={}", limits.open_files),
        "--".to_owned(),
    ]
}

/// The unsandboxed development runner: the agent as a plain child process with a cleared
/// environment and rlimits. Network and host files stay reachable: never use it for
/// untrusted code.
pub fn process_spec(req: &SandboxRequest) -> CommandSpec {
    let mut args = prlimit_args(&req.limits, req.limits.processes);
    args.push(path_arg(&req.agent_binary));
    args.extend(req.agent_args().iter().map(|a| (*a).to_owned()));
    let mut env = vec![
        ("ULTRAPLAN_WORKSPACE".to_owned(), path_arg(&req.workspace)),
        ("ULTRAPLAN_LOG".to_owned(), req.log_filter.clone()),
    ];
    if let Some(dir) = &req.environment {
        env.push((ENV_VAR.to_owned(), path_arg(dir)));
    }
    if let Some(socket) = req.egress() {
        env.push(("ULTRAPLAN_EGRESS_SOCKET".to_owned(), path_arg(socket)));
    }
    CommandSpec {
        program: PathBuf::from("prlimit"),
        args,
        env,
        cwd: Some(req.workspace.clone()),
    }
}

/// Where bubblewrap finds what it binds, and the descriptor of its seccomp filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BwrapLayout {
    /// The workspace as bwrap sees it (the host path, or its staged bind).
    pub workspace: PathBuf,
    /// The agent binary as bwrap sees it.
    pub agent: PathBuf,
    /// The environment as bwrap sees it, when one is bound.
    pub environment: Option<PathBuf>,
    /// The egress socket as bwrap sees it, for a setup that may reach the network.
    pub egress: Option<PathBuf>,
    pub seccomp_fd: Option<i32>,
}

impl BwrapLayout {
    /// The request's own host paths, no filter.
    pub fn direct(req: &SandboxRequest) -> Self {
        BwrapLayout {
            workspace: req.workspace.clone(),
            agent: req.agent_binary.clone(),
            environment: req.environment.clone(),
            egress: req.egress().map(Path::to_path_buf),
            seccomp_fd: None,
        }
    }
}

/// `prlimit <limits> -- bwrap --args FD -- /ultraplan-agent`: every bwrap option (host paths
/// included) is read from `args_fd`, so no process's command line names a host path (bwrap
/// takes the command itself only from its command line: the agent's path in the sandbox).
pub fn bwrap_command(limits: &SandboxLimits, nproc: u64, args_fd: i32) -> CommandSpec {
    let mut args = prlimit_args(limits, nproc);
    args.extend(["bwrap", "--args", &args_fd.to_string(), "--", AGENT_MOUNT].map(str::to_owned));
    CommandSpec {
        program: PathBuf::from("prlimit"),
        args,
        env: Vec::new(),
        cwd: None,
    }
}

/// bubblewrap's arguments: every namespace unshared (no network), the bundle and the static
/// agent bound read-only (the bundle writable in execution, with the host toolchain
/// read-only for `Bash`), a read-only root, a private `/tmp`, a cleared environment, an
/// unprivileged uid, the seccomp filter, and death with the server.
pub fn bwrap_args(req: &SandboxRequest, layout: &BwrapLayout) -> Vec<String> {
    let uid = SANDBOX_UID.to_string();
    let workspace_bind = if req.writable { "--bind" } else { "--ro-bind" };
    let mut args: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--uid",
        &uid,
        "--gid",
        &uid,
        workspace_bind,
        &path_arg(&layout.workspace),
        WORKSPACE_MOUNT,
        "--ro-bind",
        &path_arg(&layout.agent),
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
    .map(str::to_owned)
    .to_vec();
    if req.toolchain() {
        for path in TOOLCHAIN_DIRS.iter().chain(TOOLCHAIN_ETC.iter()) {
            args.extend(["--ro-bind-try", path, path].map(str::to_owned));
        }
    }
    if let Some(dir) = &layout.environment {
        let bind = if req.setup() { "--bind" } else { "--ro-bind" };
        args.extend([bind, &path_arg(dir), ENV_MOUNT].map(str::to_owned));
        args.extend(["--setenv", ENV_VAR, ENV_MOUNT].map(str::to_owned));
    }
    if let Some(socket) = &layout.egress {
        args.extend(["--bind", &path_arg(socket), EGRESS_SOCKET_MOUNT].map(str::to_owned));
    }
    // The sandbox's own root stays read-only too: only the workspace (in execution) and the
    // private /tmp take writes.
    args.extend(["--remount-ro", "/"].map(str::to_owned));
    if let Some(fd) = layout.seccomp_fd {
        args.extend(["--seccomp".to_owned(), fd.to_string()]);
    }
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
        ]
        .map(str::to_owned),
    );
    args
}

/// Arguments as bwrap's `--args` reads them: each one NUL-terminated. An argument holding a
/// NUL cannot be passed (and never is: they come from paths and the log filter).
pub fn nul_separated(args: &[String]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for arg in args {
        if arg.contains('\0') {
            return Err(format!("argument {arg:?} holds a NUL byte"));
        }
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    Ok(out)
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
            environment: None,
            purpose: Purpose::Agent,
            base_image: None,
            agent_egress: None,
        }
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(3)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    fn args(writable: bool) -> Vec<String> {
        let req = request(writable);
        bwrap_args(&req, &BwrapLayout::direct(&req))
    }

    #[test]
    fn bwrap_isolates_everything() {
        let args = &args(false);
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
        assert!(
            !args.iter().any(|a| a == "--"),
            "the command follows on the command line"
        );
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
        assert!(!args.iter().any(|a| a == "--seccomp"));
    }

    #[test]
    fn the_command_line_names_no_path_and_carries_the_limits() {
        let spec = bwrap_command(&SandboxLimits::default(), 4096, 7);
        assert_eq!(spec.program, PathBuf::from("prlimit"));
        assert!(spec.env.is_empty(), "nothing inherited");
        assert_eq!(
            spec.args,
            vec![
                "--as=2147483648",
                "--cpu=3600",
                "--nproc=4096",
                "--fsize=268435456",
                "--nofile=1024",
                "--",
                "bwrap",
                "--args",
                "7",
                "--",
                AGENT_MOUNT
            ]
        );
        let req = request(true);
        let layout = BwrapLayout {
            workspace: PathBuf::from("/tmp/staged/workspace"),
            agent: PathBuf::from("/tmp/staged/agent"),
            environment: None,
            egress: None,
            seccomp_fd: Some(9),
        };
        let args = bwrap_args(&req, &layout);
        assert_eq!(after(&args, "--bind"), vec!["/tmp/staged/workspace"]);
        assert_eq!(after(&args, "--seccomp"), vec!["9"]);
    }

    #[test]
    fn args_are_nul_terminated_and_nul_is_refused() {
        let args = vec!["--a".to_owned(), "b c".to_owned()];
        assert_eq!(nul_separated(&args).expect("args"), b"--a\0b c\0".to_vec());
        assert!(nul_separated(&["x\0y".to_owned()]).is_err());
    }

    #[test]
    fn execution_mode_binds_the_workspace_writable() {
        let spec = args(true);
        assert_eq!(after(&spec, "--bind"), vec!["/data/bundles/abc"]);
        assert_eq!(after(&spec, "--ro-bind"), vec!["/opt/ultraplan-agent"]);
        let toolchain = after(&spec, "--ro-bind-try");
        assert!(toolchain.contains(&"/usr") && toolchain.contains(&"/etc/passwd"));
        assert!(
            !toolchain
                .iter()
                .any(|p| *p == "/etc" || p.starts_with("/home"))
        );
        assert!(after(&args(false), "--ro-bind-try").is_empty());
    }

    #[test]
    fn an_environment_is_writable_in_its_setup_only() {
        let cases = [
            // (writable workspace, purpose, env bind flag, workspace flag, egress bound)
            (false, Purpose::Agent, "--ro-bind", "--ro-bind", false),
            (true, Purpose::Agent, "--ro-bind", "--bind", false),
            (
                false,
                Purpose::Setup { egress: None },
                "--bind",
                "--ro-bind",
                false,
            ),
            (
                false,
                Purpose::Setup {
                    egress: Some(PathBuf::from("/run/e.sock")),
                },
                "--bind",
                "--ro-bind",
                true,
            ),
        ];
        for (writable, purpose, env_flag, ws_flag, egress) in cases {
            let mut req = request(writable);
            req.environment = Some(PathBuf::from("/data/env/k1"));
            req.purpose = purpose.clone();
            let args = bwrap_args(&req, &BwrapLayout::direct(&req));
            let binds = |flag: &str| -> Vec<String> {
                args.windows(3)
                    .filter(|w| w[0] == flag)
                    .map(|w| format!("{}={}", w[1], w[2]))
                    .collect()
            };
            assert!(
                binds(env_flag).contains(&"/data/env/k1=/env".to_owned()),
                "{purpose:?}"
            );
            assert!(
                binds(ws_flag).contains(&"/data/bundles/abc=/workspace".to_owned()),
                "{purpose:?}"
            );
            assert_eq!(
                binds("--bind").contains(&"/run/e.sock=/run/ultraplan/egress.sock".to_owned()),
                egress,
                "{purpose:?}"
            );
            assert!(after(&args, "--ro-bind-try").contains(&"/usr"), "toolchain");
            assert!(
                args.windows(3)
                    .any(|w| w[0] == "--setenv" && w[1] == "ULTRAPLAN_ENV" && w[2] == "/env")
            );
            assert_eq!(req.agent_args().is_empty(), purpose == Purpose::Agent);
        }
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

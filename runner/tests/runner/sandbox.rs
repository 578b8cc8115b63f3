//! The sandbox holds. `ultraplan-sandbox-probe` (a second bin of the agent crate, built static
//! beside the agent by `scripts/build-agent`) is started through `Sandbox::launch` with the very
//! `SandboxRequest` an agent gets, and reports what it could do from inside: connect to a
//! listener of this test, read a host file outside the mounts, write the read-only workspace,
//! see a model key, run a shell.
//!
//! To prove the environment is cleared rather than merely never set, every case re-executes
//! this test binary with model keys in its environment and runs there: the server-side launch
//! happens in a process that holds `ANTHROPIC_API_KEY` and `OPENAI_API_KEY`.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use ultraplan_runner::sandbox::SandboxKind;
use ultraplan_runner::sandbox::docker::SESSION_LABEL;
use ultraplan_runner::sandbox::{
    AgentExit, DockerRunner, Sandbox, SandboxLimits, SandboxRequest, select,
};

/// Set in the re-executed child; its presence means "the keys are in this process".
pub(crate) const KEYED: &str = "ULTRAPLAN_SANDBOX_TEST_KEYED";
/// What the child's environment holds that no sandbox may pass on. Values are canaries, so a
/// real key of whoever runs the suite never reaches the child either.
pub(crate) const CANARIES: [(&str, &str); 3] = [
    ("ANTHROPIC_API_KEY", "sk-ant-sandbox-canary-7f3a"),
    ("OPENAI_API_KEY", "sk-openai-sandbox-canary-7f3a"),
    ("ULTRAPLAN_TEST_SECRET_TOKEN", "token-sandbox-canary-7f3a"),
];
/// Inside bwrap and Docker the bundle is here.
pub(crate) const WORKSPACE_MOUNT: &str = "/workspace";
pub(crate) const WORKSPACE_FILE: &str = "plan-input.txt";
pub(crate) const WORKSPACE_CONTENT: &[u8] = b"the bundle the agent plans over\n";
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// One sandboxed runner and what its sandbox legitimately puts in the environment.
struct Case {
    kind: SandboxKind,
    env: &'static [&'static str],
}

/// The sandboxed runners: every check below must hold for each of them.
const SANDBOXED: [Case; 2] = [
    Case {
        // bwrap itself sets PWD for `--chdir`.
        kind: SandboxKind::Bwrap,
        env: &["HOME", "PWD", "ULTRAPLAN_LOG", "ULTRAPLAN_WORKSPACE"],
    },
    Case {
        // Docker itself adds PATH and HOSTNAME to every container.
        kind: SandboxKind::Docker,
        env: &[
            "HOME",
            "HOSTNAME",
            "PATH",
            "ULTRAPLAN_LOG",
            "ULTRAPLAN_WORKSPACE",
        ],
    },
];

/// The development runner passes exactly these (see `process_spec`).
const PROCESS_ENV: &[&str] = &["ULTRAPLAN_LOG", "ULTRAPLAN_WORKSPACE"];

#[tokio::test]
async fn sandboxed_runners_refuse_network_host_files_workspace_writes_and_keys() {
    let probe = probe_binary();
    if rerun_holding_model_keys(
        "sandboxed_runners_refuse_network_host_files_workspace_writes_and_keys",
    )
    .await
    {
        return;
    }
    let mut failures = Vec::new();
    for case in &SANDBOXED {
        let name = kind_name(case.kind);
        match sandboxed_case(case, &probe).await {
            Ok(violations) => {
                failures.extend(violations.into_iter().map(|v| format!("{name}: {v}")))
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "the sandbox does not hold:\n  {}",
        failures.join("\n  ")
    );
}

#[tokio::test]
async fn the_process_runner_clears_the_environment_but_is_no_sandbox() {
    let probe = probe_binary();
    if rerun_holding_model_keys("the_process_runner_clears_the_environment_but_is_no_sandbox").await
    {
        return;
    }
    let fx = Fixture::new();
    let listener = Listener::start().await;
    let targets = listener.targets().await;
    let workspace = fx.workspace.path().to_path_buf();
    let written = workspace.join("probe-write.txt");
    let request = json!({
        "connect": targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "read": [workspace.join(WORKSPACE_FILE), fx.host_file],
        // Only inside the workspace: this runner would really write anywhere the user can.
        "write": [written],
        "env_absent": env_probes(),
        "exec": ["/bin/sh"],
    });
    let req = fx.request("process", &probe);
    let run = run_probe(&Sandbox::Process, &req, &request)
        .await
        .unwrap_or_else(|e| panic!("process: {e}"));
    eprintln!("{}", run.table("process"));
    assert!(
        run.exit.success,
        "the probe failed: {:?}\n{}",
        run.exit, run.stderr
    );

    // What holds: the environment is cleared (`process_spec` passes two variables).
    assert_eq!(run.env(), names(PROCESS_ENV), "{}", run.stdout);
    assert_no_secrets(&run);

    // What does not, honestly: `process_spec` documents "Network and host files stay
    // reachable: never use it for untrusted code". The probe runs as this test's user, reaches
    // the test's listener, reads host files and writes the plan-mode workspace.
    assert_eq!(
        run.report["uid"].as_u64(),
        own_uid(),
        "same uid as the server"
    );
    for target in &targets {
        assert!(
            run.allowed("connect", &target.to_string()),
            "{}",
            run.stdout
        );
    }
    assert_eq!(
        listener.wait_for(targets.len()).await,
        targets.len(),
        "the listener saw the probe"
    );
    assert!(run.allowed("read", &fx.host_file.display().to_string()));
    assert_eq!(
        run.detail(
            "read",
            &workspace.join(WORKSPACE_FILE).display().to_string()
        ),
        Some(format!("read {} bytes", WORKSPACE_CONTENT.len()))
    );
    assert!(
        run.allowed("write", &written.display().to_string()),
        "plan mode is not read-only without a sandbox"
    );
    assert!(run.allowed("exec", "/bin/sh"));
}

/// Launch the probe in one sandboxed runner and list every check that failed.
async fn sandboxed_case(case: &Case, probe: &Path) -> Result<Vec<String>, String> {
    let name = kind_name(case.kind);
    let fx = Fixture::new();
    let runner = match case.kind {
        SandboxKind::Docker => Sandbox::Docker(DockerRunner::prepare(probe, &format!("probe-{}", std::process::id())).await.map_err(|e| {
            format!(
                "DockerRunner::prepare failed, so the Docker sandbox cannot be tested: {e}. \
                 Docker must be reachable (CI starts dockerd; locally run \
                 `source scripts/ensure-dockerd` first)"
            )
        })?),
        kind => select(kind, probe, "probe")
            .await
            .map_err(|e| format!("selecting the runner failed: {e}"))?,
    };
    let listener = Listener::start().await;
    let targets = listener.targets().await;
    let inside = Path::new(WORKSPACE_MOUNT);
    let host_written = fx.workspace.path().join("probe-write.txt");
    let request = json!({
        "connect": targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "read": [inside.join(WORKSPACE_FILE), fx.host_file, "/etc/passwd"],
        "write": [inside.join("probe-write.txt"), "/etc/probe-write.txt", "/tmp/probe-write.txt"],
        "env_absent": env_probes(),
        "exec": ["/bin/sh"],
    });
    let req = fx.request(name, probe);
    let run = run_probe(&runner, &req, &request).await?;
    eprintln!("{}", run.table(name));

    let mut violations = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            violations.push(what);
        }
    };
    check(
        run.exit.success,
        format!("the probe failed: {:?}: {}", run.exit, run.stderr),
    );
    // The sandbox is not simply broken: the probe ran, as nobody, and read the bundle.
    check(
        run.report["uid"].as_u64() == Some(65534),
        format!("uid is {}, not 65534", run.report["uid"]),
    );
    let workspace_file = inside.join(WORKSPACE_FILE).display().to_string();
    check(
        run.detail("read", &workspace_file)
            == Some(format!("read {} bytes", WORKSPACE_CONTENT.len())),
        format!(
            "could not read the workspace file: {:?}",
            run.detail("read", &workspace_file)
        ),
    );
    // No network: not even the loopback listener the test just reached itself.
    for target in &targets {
        check(
            !run.allowed("connect", &target.to_string()),
            format!("connected to the test's listener at {target}"),
        );
    }
    check(
        listener.accepted_since_reset() == 0,
        format!(
            "the listener accepted {} connection(s) during the probe",
            listener.accepted_since_reset()
        ),
    );
    // Plan mode: the bundle is read-only.
    let workspace_write = inside.join("probe-write.txt").display().to_string();
    check(
        !run.allowed("write", &workspace_write),
        format!("wrote {workspace_write}"),
    );
    check(
        !host_written.exists(),
        format!("{} appeared on the host", host_written.display()),
    );
    check(
        !run.allowed("write", "/etc/probe-write.txt"),
        "wrote /etc/probe-write.txt".to_owned(),
    );
    // Host files outside the mounts do not exist in there.
    for host_file in [fx.host_file.as_path(), Path::new("/etc/passwd")] {
        let target = host_file.display().to_string();
        check(
            !run.allowed("read", &target),
            format!("read the host file {target}"),
        );
    }
    // No credentials, and nothing but the runner's own variables.
    check(
        run.env() == names(case.env),
        format!("environment is {:?}, expected {:?}", run.env(), case.env),
    );
    for (key, value) in CANARIES {
        check(!run.allowed("env_absent", key), format!("{key} is visible"));
        check(
            !run.stdout.contains(value),
            format!("the value of {key} leaked"),
        );
    }
    check(
        !run.allowed("env_scan", "*KEY*|*TOKEN*|*SECRET*"),
        format!(
            "secret-looking variables: {:?}",
            run.detail("env_scan", "*KEY*|*TOKEN*|*SECRET*")
        ),
    );
    // Nothing to run but the binary itself.
    check(!run.allowed("exec", "/bin/sh"), "ran /bin/sh".to_owned());

    if case.kind == SandboxKind::Docker {
        // `wait()` returned: the container must be gone.
        let left = containers_of_session(&req.session_id).await?;
        check(
            left.is_empty(),
            format!("containers of the session remain: {left:?}"),
        );
    }
    Ok(violations)
}

/// What the probe printed, and how it ended.
pub(crate) struct ProbeRun {
    pub(crate) report: Value,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) exit: AgentExit,
}

impl ProbeRun {
    pub(crate) fn result(&self, probe: &str, target: &str) -> Option<&Value> {
        self.report["results"]
            .as_array()?
            .iter()
            .find(|r| r["probe"] == probe && r["target"] == target)
    }

    /// Whether the attempt succeeded; a missing result counts as allowed (fail closed).
    pub(crate) fn allowed(&self, probe: &str, target: &str) -> bool {
        self.result(probe, target)
            .is_none_or(|r| r["allowed"].as_bool() != Some(false))
    }

    pub(crate) fn detail(&self, probe: &str, target: &str) -> Option<String> {
        self.result(probe, target)
            .and_then(|r| r["detail"].as_str())
            .map(str::to_owned)
    }

    pub(crate) fn env(&self) -> BTreeSet<String> {
        self.report["env"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn table(&self, runner: &str) -> String {
        let mut out = format!(
            "== {runner}: uid {} exit {:?}\n   env {:?}\n",
            self.report["uid"],
            self.exit.description,
            self.env()
        );
        for r in self.report["results"].as_array().into_iter().flatten() {
            let _ = writeln!(
                out,
                "   {:<10} {:<40} {:<7} {}",
                r["probe"].as_str().unwrap_or("?"),
                r["target"].as_str().unwrap_or("?"),
                if r["allowed"] == true {
                    "ALLOWED"
                } else {
                    "refused"
                },
                r["detail"].as_str().unwrap_or("")
            );
        }
        out
    }
}

/// Start the probe through the runner, send the request, read its one line, reap it.
pub(crate) async fn run_probe(
    runner: &Sandbox,
    req: &SandboxRequest,
    request: &Value,
) -> Result<ProbeRun, String> {
    Ok(run_probe_holding(runner, req, request, |_| ()).await?.0)
}

/// The sandbox seen from the host while a holding probe (`"hold": true`) still runs.
pub(crate) struct SandboxView {
    /// Host pids of the sandbox's processes.
    pub(crate) pids: Vec<i32>,
    /// The cgroup v1 directories (memory, pids) of the first pid.
    pub(crate) memory_dir: Option<PathBuf>,
    pub(crate) pids_dir: Option<PathBuf>,
    pub(crate) cpu_dir: Option<PathBuf>,
    /// The cgroups the server created for it (bwrap).
    pub(crate) cgroup_dirs: Vec<PathBuf>,
}

async fn sandbox_view(session_id: &str, cgroup_dirs: Vec<PathBuf>) -> SandboxView {
    let mut pids: Vec<i32> = cgroup_dirs
        .iter()
        .flat_map(|d| {
            std::fs::read_to_string(d.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    if cgroup_dirs.is_empty() {
        pids.extend(container_pid(session_id).await);
    }
    pids.sort_unstable();
    pids.dedup();
    let of = |controller: &str| {
        let text = std::fs::read_to_string(format!("/proc/{}/cgroup", pids.first()?)).ok()?;
        let path = text.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
            list.split(',')
                .any(|c| c == controller)
                .then(|| path.to_owned())
        })?;
        Some(
            Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(path.trim_start_matches('/')),
        )
    };
    SandboxView {
        memory_dir: of("memory"),
        pids_dir: of("pids"),
        cpu_dir: of("cpu"),
        pids,
        cgroup_dirs,
    }
}

/// The host pid of the session's running container.
async fn container_pid(session_id: &str) -> Option<i32> {
    let docker = bollard::Docker::connect_with_local_defaults().ok()?;
    let id = containers_of_session(session_id)
        .await
        .ok()?
        .into_iter()
        .next()?;
    let info = docker
        .inspect_container(
            &id,
            None::<bollard::query_parameters::InspectContainerOptions>,
        )
        .await
        .ok()?;
    info.state?
        .pid
        .and_then(|p| i32::try_from(p).ok())
        .filter(|p| *p > 0)
}

/// [`run_probe`]; when the request holds the probe, `inspect` looks at the sandbox from the
/// host after the report and before the probe is released.
pub(crate) async fn run_probe_holding<T>(
    runner: &Sandbox,
    req: &SandboxRequest,
    request: &Value,
    inspect: impl FnOnce(&SandboxView) -> T,
) -> Result<(ProbeRun, Option<T>), String> {
    let process = runner
        .launch(req)
        .await
        .map_err(|e| format!("launching the probe failed: {e}"))?;
    let cgroup_dirs = process.cgroup_dirs();
    let (mut stdin, stdout, mut stderr, mut control) = process
        .into_parts()
        .ok_or("the launched probe has no stdio")?;
    let stderr_task = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let exchange = async {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .map_err(|e| format!("writing the request: {e}"))?;
        stdin
            .flush()
            .await
            .map_err(|e| format!("flushing the request: {e}"))?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .await
            .map_err(|e| format!("reading the report: {e}"))?;
        Ok::<String, String>(line)
    };
    let line = match tokio::time::timeout(PROBE_TIMEOUT, exchange).await {
        Ok(line) => line,
        Err(_) => Err(format!("no report within {PROBE_TIMEOUT:?}")),
    };
    let mut seen = None;
    if request["hold"] == true && line.is_ok() {
        let view = sandbox_view(&req.session_id, cgroup_dirs).await;
        seen = Some(inspect(&view));
        let _ = stdin.write_all(b"release\n").await;
        let _ = stdin.flush().await;
    }
    drop(stdin);
    let exit = match tokio::time::timeout(PROBE_TIMEOUT, control.wait()).await {
        Ok(exit) => exit,
        Err(_) => {
            control.start_kill();
            control.wait().await;
            return Err(format!("the probe did not exit within {PROBE_TIMEOUT:?}"));
        }
    };
    let stderr = tokio::time::timeout(Duration::from_secs(10), stderr_task)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let stdout = line.map_err(|e| format!("{e}; stderr: {stderr}"))?;
    let report: Value = serde_json::from_str(stdout.trim())
        .map_err(|e| format!("the report is not JSON ({e}): {stdout:?}; stderr: {stderr}"))?;
    let exit = exit.ok_or("the runner could not tell how the probe ended")?;
    Ok((
        ProbeRun {
            report,
            stdout,
            stderr,
            exit,
        },
        seen,
    ))
}

/// A workspace the way bundles are published (0755 tree, 0644 files) and a world-readable
/// host file that no sandbox mounts, under the target dir rather than /tmp (bwrap and Docker
/// give /tmp a tmpfs of their own, which would hide a /tmp file for the wrong reason).
pub(crate) struct Fixture {
    pub(crate) workspace: tempfile::TempDir,
    _host_dir: tempfile::TempDir,
    pub(crate) host_file: PathBuf,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        let workspace = tempfile::tempdir().expect("workspace");
        chmod(workspace.path(), 0o755);
        let file = workspace.path().join(WORKSPACE_FILE);
        std::fs::write(&file, WORKSPACE_CONTENT).expect("workspace file");
        chmod(&file, 0o644);

        // Outside /tmp (the sandboxes get a private /tmp), wherever the checkout lives.
        let host_root = ["/var/tmp", env!("CARGO_TARGET_TMPDIR")]
            .into_iter()
            .map(Path::new)
            .find(|p| !p.starts_with("/tmp") && std::fs::create_dir_all(p).is_ok())
            .expect("a writable directory outside /tmp (/var/tmp)");
        let host_dir = tempfile::Builder::new()
            .prefix("ultraplan-sandbox-host-")
            .tempdir_in(host_root)
            .expect("host dir");
        chmod(host_dir.path(), 0o755);
        let host_file = host_dir.path().join("host-secret.txt");
        std::fs::write(&host_file, b"a host file outside every mount\n").expect("host file");
        chmod(&host_file, 0o644);
        assert!(
            !host_file.starts_with("/tmp") && host_file.is_file(),
            "{} must exist on the host, outside /tmp",
            host_file.display()
        );
        assert!(
            Path::new("/etc/passwd").is_file(),
            "/etc/passwd exists on the host"
        );
        Fixture {
            workspace,
            _host_dir: host_dir,
            host_file,
        }
    }

    pub(crate) fn request(&self, runner: &str, probe: &Path) -> SandboxRequest {
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        SandboxRequest {
            session_id: format!("sandbox-probe-{runner}-{}", &suffix[..8]),
            workspace: self.workspace.path().to_path_buf(),
            writable: false,
            agent_binary: probe.to_path_buf(),
            limits: SandboxLimits::default(),
            log_filter: "warn".to_owned(),
            environment: None,
            purpose: Default::default(),
            base_image: None,
            agent_egress: None,
        }
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A listener of the test that really accepts, on every interface, counting connections.
pub(crate) struct Listener {
    port: u16,
    accepted: Arc<Mutex<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    pub(crate) async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
            .await
            .expect("bind the test listener");
        let port = listener.local_addr().expect("listener address").port();
        let accepted = Arc::new(Mutex::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                *count.lock().expect("lock") += 1;
                drop(stream);
            }
        });
        Listener {
            port,
            accepted,
            task,
        }
    }

    /// Every IPv4 address of the host (loopback, the outward interface, Docker's bridge
    /// gateway...), each proven reachable from the test itself; the count is reset afterwards.
    pub(crate) async fn targets(&self) -> Vec<SocketAddr> {
        let ips = host_ipv4s();
        let targets: Vec<SocketAddr> = ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, self.port))
            .collect();
        for target in &targets {
            let target = *target;
            tokio::task::spawn_blocking(move || {
                TcpStream::connect_timeout(&target, Duration::from_secs(2))
                    .unwrap_or_else(|e| panic!("the test cannot reach its own {target}: {e}"))
            })
            .await
            .expect("connect task");
        }
        assert_eq!(
            self.wait_for(targets.len()).await,
            targets.len(),
            "the test listener accepts"
        );
        *self.accepted.lock().expect("lock") = 0;
        targets
    }

    /// The count once it reaches `n`, or after two seconds.
    pub(crate) async fn wait_for(&self, n: usize) -> usize {
        for _ in 0..200 {
            if self.accepted_since_reset() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.accepted_since_reset()
    }

    pub(crate) fn accepted_since_reset(&self) -> usize {
        *self.accepted.lock().expect("lock")
    }
}

/// 127.0.0.1 and every other local IPv4 address of the host, from the kernel's routing trie
/// (an address line followed by `/32 host LOCAL`).
pub(crate) fn host_ipv4s() -> Vec<IpAddr> {
    let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let lines: Vec<&str> = trie.lines().collect();
    for pair in lines.windows(2) {
        if pair[1].trim() != "/32 host LOCAL" {
            continue;
        }
        let Some(ip) = pair[0]
            .trim()
            .strip_prefix("|-- ")
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        else {
            continue;
        };
        if !ip.is_loopback() && !ips.contains(&IpAddr::V4(ip)) {
            ips.push(IpAddr::V4(ip));
        }
    }
    ips
}

/// Containers (running or not) labelled with the session.
pub(crate) async fn containers_of_session(session_id: &str) -> Result<Vec<String>, String> {
    let docker = bollard::Docker::connect_with_local_defaults()
        .map_err(|e| format!("connecting to Docker: {e}"))?;
    let filters =
        std::collections::HashMap::from([("label", vec![format!("{SESSION_LABEL}={session_id}")])]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker
        .list_containers(Some(options))
        .await
        .map_err(|e| format!("listing containers: {e}"))?;
    Ok(containers.into_iter().filter_map(|c| c.id).collect())
}

pub(crate) fn env_probes() -> Vec<&'static str> {
    let mut names: Vec<&str> = CANARIES.iter().map(|(k, _)| *k).collect();
    names.extend(["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "ULTRAPLAN_TOKEN"]);
    names
}

pub(crate) fn assert_no_secrets(run: &ProbeRun) {
    for (key, value) in CANARIES {
        assert!(!run.allowed("env_absent", key), "{key} is visible");
        assert!(!run.stdout.contains(value), "the value of {key} leaked");
    }
    assert!(
        !run.allowed("env_scan", "*KEY*|*TOKEN*|*SECRET*"),
        "{}",
        run.stdout
    );
}

pub(crate) fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

pub(crate) fn kind_name(kind: SandboxKind) -> &'static str {
    match kind {
        SandboxKind::Auto => "auto",
        SandboxKind::Docker => "docker",
        SandboxKind::Bwrap => "bwrap",
        SandboxKind::Process => "process",
    }
}

pub(crate) fn own_uid() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The probe: `ULTRAPLAN_SANDBOX_PROBE_BIN`, else beside `ULTRAPLAN_AGENT_BIN`. Never skips.
pub(crate) fn probe_binary() -> PathBuf {
    let path = match (
        std::env::var_os("ULTRAPLAN_SANDBOX_PROBE_BIN").filter(|v| !v.is_empty()),
        std::env::var_os("ULTRAPLAN_AGENT_BIN").filter(|v| !v.is_empty()),
    ) {
        (Some(probe), _) => PathBuf::from(probe),
        (None, Some(agent)) => Path::new(&agent)
            .parent()
            .unwrap_or(Path::new("."))
            .join("ultraplan-sandbox-probe"),
        (None, None) => panic!(
            "neither ULTRAPLAN_SANDBOX_PROBE_BIN nor ULTRAPLAN_AGENT_BIN is set: the sandbox \
             tests need the static probe. Run the suite with scripts/test, or \
             `ULTRAPLAN_AGENT_BIN=$(scripts/build-agent dev)/ultraplan-agent cargo test ...`"
        ),
    };
    assert!(
        path.is_file(),
        "the sandbox probe {} does not exist: `scripts/build-agent dev` builds it beside the \
         agent (set ULTRAPLAN_SANDBOX_PROBE_BIN to point elsewhere)",
        path.display()
    );
    path
}

/// Run `test` (a test of this module) again in a child of this test binary whose environment
/// holds model keys, and return true once it passed there; return false when this already is
/// that child (then the keys must be visible here: the premise of the environment checks).
pub(crate) async fn rerun_holding_model_keys(test: &str) -> bool {
    if std::env::var_os(KEYED).is_some() {
        for (key, value) in CANARIES {
            assert_eq!(
                std::env::var(key).ok().as_deref(),
                Some(value),
                "the launching process holds {key}"
            );
        }
        return false;
    }
    let name = if test.contains("::") {
        test.to_owned()
    } else {
        format!("sandbox::{test}")
    };
    let exe = std::env::current_exe().expect("the test binary");
    let output = tokio::process::Command::new(exe)
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .envs(CANARIES)
        .env(KEYED, "1")
        .output()
        .await
        .expect("re-running the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name}, run in a process holding model keys, failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    true
}

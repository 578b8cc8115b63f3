//! Sandbox limits hold in aggregate, inside real bwrap and Docker sandboxes started by this
//! (root) test through `Sandbox::launch`: a fork bomb stops at the process limit, memory hogs
//! that each fit the per-process limit are OOM-killed together at the cgroup limit, new user
//! namespaces, mounts, ptrace, keyctl and bpf are refused, `/proc` shows no host path, and the
//! sandboxed processes run as a non-root host uid. Each attack is bounded (a fork bomb of at
//! most 1000, hogs of 96 MiB) so the host stays fine whatever happens.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use ultraplan_runner::sandbox::SandboxKind;
use ultraplan_runner::sandbox::{DockerRunner, Sandbox, SandboxLimits, select};

use crate::sandbox::{Fixture, ProbeRun, SandboxView, kind_name, probe_binary, run_probe_holding};

const MEMORY_LIMIT: u64 = 256 * 1024 * 1024;
const PROCESS_LIMIT: u64 = 64;
const HOG_BYTES: u64 = 96 * 1024 * 1024;
const HOGS: u64 = 5;
const BOMB: u64 = 1000;

/// Syscalls that must fail inside every sandbox.
const REFUSED_SYSCALLS: [&str; 8] = [
    "unshare_user",
    "unshare_net",
    "unshare_mount",
    "mount_tmpfs",
    "ptrace_init",
    "keyctl",
    "bpf",
    "personality_no_aslr",
];

/// What the host saw while the probe held.
struct HostSide {
    uids: Vec<(i32, Option<u32>)>,
    memory_peak: Option<u64>,
    memory_limit: Option<u64>,
    oom_kills: Option<u64>,
    pids_max: Option<String>,
    pids_events: Option<u64>,
    cpu_quota: Option<String>,
    cgroup_dirs: Vec<PathBuf>,
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn counter(path: &Path, key: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn host_uid(pid: i32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn look(view: &SandboxView) -> HostSide {
    let memory = view.memory_dir.clone();
    let pids = view.pids_dir.clone();
    HostSide {
        uids: view.pids.iter().map(|p| (*p, host_uid(*p))).collect(),
        memory_peak: memory
            .as_ref()
            .and_then(|d| read_u64(&d.join("memory.max_usage_in_bytes"))),
        memory_limit: memory
            .as_ref()
            .and_then(|d| read_u64(&d.join("memory.limit_in_bytes"))),
        oom_kills: memory
            .as_ref()
            .and_then(|d| counter(&d.join("memory.oom_control"), "oom_kill")),
        pids_max: pids
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("pids.max")).ok())
            .map(|s| s.trim().to_owned()),
        pids_events: pids
            .as_ref()
            .and_then(|d| counter(&d.join("pids.events"), "max")),
        cpu_quota: view.cpu_dir.as_ref().and_then(|d| {
            let quota = std::fs::read_to_string(d.join("cpu.cfs_quota_us")).ok()?;
            let period = std::fs::read_to_string(d.join("cpu.cfs_period_us")).ok()?;
            Some(format!("{}/{}", quota.trim(), period.trim()))
        }),
        cgroup_dirs: view.cgroup_dirs.clone(),
    }
}

async fn runner_for(kind: SandboxKind, probe: &Path) -> Result<Sandbox, String> {
    match kind {
        SandboxKind::Docker => {
            let instance = format!("limits-{}", std::process::id());
            DockerRunner::prepare(probe, &instance)
                .await
                .map(Sandbox::Docker)
                .map_err(|e| {
                    format!(
                        "Docker must be reachable for this test (`source scripts/ensure-dockerd`): {e}"
                    )
                })
        }
        kind => select(kind, probe, "limits")
            .await
            .map_err(|e| format!("selecting the runner failed: {e}")),
    }
}

#[tokio::test]
async fn sandbox_limits_hold_in_aggregate_under_bwrap() {
    aggregate_case(SandboxKind::Bwrap).await;
}

#[tokio::test]
async fn sandbox_limits_hold_in_aggregate_under_docker() {
    aggregate_case(SandboxKind::Docker).await;
}

async fn aggregate_case(kind: SandboxKind) {
    let name = kind_name(kind);
    let probe = probe_binary();
    let runner = runner_for(kind, &probe)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let fx = Fixture::new();
    let mut req = fx.request(name, &probe);
    req.limits = SandboxLimits {
        memory_bytes: MEMORY_LIMIT,
        processes: PROCESS_LIMIT,
        ..SandboxLimits::default()
    };
    let host_paths = [
        fx.workspace.path().display().to_string(),
        probe.display().to_string(),
        env!("CARGO_MANIFEST_DIR").to_owned(),
    ];
    let request = json!({
        "syscall": REFUSED_SYSCALLS,
        "slurp": ["/proc/1/cmdline", "/proc/1/environ", "/proc/self/cmdline",
                  "/proc/self/environ", "/proc/self/mountinfo"],
        "fds": true,
        "fork_bomb": BOMB,
        "memory_hog": {"children": HOGS, "bytes": HOG_BYTES, "hold_ms": 3000},
        "hold": true,
    });
    let (run, seen) = run_probe_holding(&runner, &req, &request, look)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!("{}", run.table(name));
    let host = seen.unwrap_or_else(|| panic!("{name}: the host never looked"));
    eprintln!(
        "== {name} from the host: uids {:?}, memory peak {:?} of limit {:?}, OOM kills {:?}, \
         pids.max {:?} hit {:?} times, cpu quota/period {:?}, cgroups {:?}",
        host.uids,
        host.memory_peak,
        host.memory_limit,
        host.oom_kills,
        host.pids_max,
        host.pids_events,
        host.cpu_quota,
        host.cgroup_dirs
    );
    let mut failures = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    check(
        run.exit.success,
        format!("the probe failed: {:?} {}", run.exit, run.stderr),
    );
    check_processes(&run, &host, &mut check);
    check_memory(&run, &host, &mut check);
    for syscall in REFUSED_SYSCALLS {
        check(
            !run.allowed("syscall", syscall),
            format!("{syscall} succeeded: {:?}", run.detail("syscall", syscall)),
        );
    }
    check_proc_shows_no_host_path(&run, &host_paths, &mut check);
    if kind == SandboxKind::Bwrap {
        // The session ends with its limits named, and its cgroups are gone.
        check(
            run.exit.description.contains("OOM-killed")
                && run.exit.description.contains("process limit reached"),
            format!(
                "the exit does not name the limits hit: {}",
                run.exit.description
            ),
        );
        for dir in &host.cgroup_dirs {
            check(!dir.exists(), format!("{} was not removed", dir.display()));
        }
    }
    assert!(failures.is_empty(), "{name}:\n  {}", failures.join("\n  "));
}

fn check_processes(run: &ProbeRun, host: &HostSide, check: &mut impl FnMut(bool, String)) {
    let forked = run
        .result("fork_bomb", &BOMB.to_string())
        .and_then(|r| r["forked"].as_u64());
    check(
        forked.is_some_and(|n| n > 0 && n < PROCESS_LIMIT),
        format!("the fork bomb made {forked:?} processes under a limit of {PROCESS_LIMIT}"),
    );
    check(
        host.pids_max.as_deref() == Some(&PROCESS_LIMIT.to_string()),
        format!("pids.max is {:?}", host.pids_max),
    );
    check(
        host.pids_events.is_some_and(|n| n > 0),
        format!("pids.events max is {:?}", host.pids_events),
    );
    // One CPU: quota equals period.
    check(
        host.cpu_quota.as_deref() == Some("100000/100000"),
        format!("the CPU quota is {:?}", host.cpu_quota),
    );
    check(
        !host.uids.is_empty(),
        "no sandbox process was found from the host".to_owned(),
    );
    for (pid, uid) in &host.uids {
        check(
            uid.is_some_and(|u| u != 0),
            format!("host pid {pid} runs as host uid {uid:?}"),
        );
    }
}

fn check_memory(run: &ProbeRun, host: &HostSide, check: &mut impl FnMut(bool, String)) {
    let hog = run.result("memory_hog", &format!("{HOGS}x{HOG_BYTES}"));
    let killed = hog.and_then(|r| r["killed"].as_u64());
    check(
        killed.is_some_and(|k| k > 0),
        format!(
            "{HOGS} hogs of {HOG_BYTES} bytes under {MEMORY_LIMIT}: none was OOM-killed ({:?})",
            hog.map(|r| r["detail"].clone())
        ),
    );
    check(
        host.memory_limit == Some(MEMORY_LIMIT),
        format!("the memory limit is {:?}", host.memory_limit),
    );
    check(
        host.memory_peak.is_some_and(|p| p <= MEMORY_LIMIT),
        format!(
            "memory peaked at {:?} over {MEMORY_LIMIT}",
            host.memory_peak
        ),
    );
    check(
        host.oom_kills.is_some_and(|n| n > 0),
        format!("the cgroup counted {:?} OOM kills", host.oom_kills),
    );
}

fn check_proc_shows_no_host_path(
    run: &ProbeRun,
    host_paths: &[String],
    check: &mut impl FnMut(bool, String),
) {
    // Not /proc/self/mountinfo: its root field names each bind's source path within its
    // filesystem (bwrap and Docker alike); see the report printed above.
    let files = ["/proc/1/cmdline", "/proc/1/environ", "/proc/self/cmdline"];
    for file in files {
        let text = run.detail("slurp", file).unwrap_or_default();
        for path in host_paths {
            check(
                !text.contains(path.as_str()),
                format!("{file} shows {path}: {text}"),
            );
        }
    }
    let cmdline = run.detail("slurp", "/proc/1/cmdline").unwrap_or_default();
    check(
        run.allowed("slurp", "/proc/1/cmdline") && !cmdline.is_empty(),
        "/proc/1/cmdline could not be read".to_owned(),
    );
    let fds = run.detail("fds", "/proc/self/fd").unwrap_or_default();
    check(
        !fds.contains("memfd:"),
        format!("a server descriptor leaked in: {fds}"),
    );
    let value: Value = run.report.clone();
    check(
        value["uid"] == 65534,
        format!("uid inside is {}", value["uid"]),
    );
}

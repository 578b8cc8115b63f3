//! Execution-mode sandboxes get the plan-mode probe suite and more: the probe runs under the
//! execution request (a writable, size-capped workspace prepared by the server's own
//! `Workspace`, the host toolchain bound read-only) in real bwrap and Docker sandboxes, from a
//! process that holds model keys. Besides the plan-mode verdicts (no network, no host files,
//! no keys), writes outside the workspace are refused, `/tmp` is private and size-capped, a
//! shell runs but `unshare -U` / `unshare -r` do not, and a disk filler stops at the workspace
//! cap while the patch holds what fit.
//!
//! The reads target paths a wrong mount would expose (a world-readable file under /var/tmp,
//! the workspace's private git dir, /etc/os-release, a file in the host's /tmp), not paths
//! the sandbox hides for another reason.

use std::path::Path;

use serde_json::json;
use ultraplan_runner::sandbox::SandboxKind;
use ultraplan_runner::sandbox::spec::TMP_BYTES;
use ultraplan_runner::sandbox::{DockerRunner, Sandbox, SandboxRequest, select};
use ultraplan_runner::workspace::Workspace;

use crate::sandbox::{
    CANARIES, Fixture, Listener, ProbeRun, WORKSPACE_CONTENT, WORKSPACE_FILE, env_probes,
    kind_name, names, probe_binary, rerun_holding_model_keys, run_probe,
};

const WORKSPACE_CAP: u64 = 8 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;
const REFUSED_SYSCALLS: [&str; 5] = [
    "unshare_user",
    "mount_tmpfs",
    "ptrace_init",
    "keyctl",
    "bpf",
];

#[tokio::test]
async fn sandbox_execution_mode_holds_under_bwrap_and_docker() {
    let probe = probe_binary();
    if rerun_holding_model_keys(
        "sandbox_execution::sandbox_execution_mode_holds_under_bwrap_and_docker",
    )
    .await
    {
        return;
    }
    let mut failures = Vec::new();
    for (kind, env) in [
        (
            SandboxKind::Bwrap,
            &["HOME", "PWD", "ULTRAPLAN_LOG", "ULTRAPLAN_WORKSPACE"][..],
        ),
        (
            SandboxKind::Docker,
            &[
                "HOME",
                "HOSTNAME",
                "PATH",
                "ULTRAPLAN_LOG",
                "ULTRAPLAN_WORKSPACE",
            ][..],
        ),
    ] {
        let name = kind_name(kind);
        match execution_case(kind, env, &probe).await {
            Ok(v) => failures.extend(v.into_iter().map(|v| format!("{name}: {v}"))),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "the execution sandbox does not hold:\n  {}",
        failures.join("\n  ")
    );
}

async fn runner(kind: SandboxKind, probe: &Path) -> Result<Sandbox, String> {
    match kind {
        SandboxKind::Docker => {
            let instance = format!("exec-probe-{}", std::process::id());
            DockerRunner::prepare(probe, &instance)
                .await
                .map(Sandbox::Docker)
                .map_err(|e| format!("Docker must be reachable for this test: {e}"))
        }
        kind => select(kind, probe, "exec-probe")
            .await
            .map_err(|e| format!("selecting the runner failed: {e}")),
    }
}

async fn execution_case(
    kind: SandboxKind,
    env: &[&str],
    probe: &Path,
) -> Result<Vec<String>, String> {
    let name = kind_name(kind);
    let runner = runner(kind, probe).await?;
    let fx = Fixture::new();
    let root = tempfile::tempdir().map_err(|e| e.to_string())?;
    let workspace = Workspace::at(root.path()).capped(Some(WORKSPACE_CAP));
    workspace
        .prepare(fx.workspace.path(), runner.workspace_owner())
        .await
        .map_err(|e| format!("preparing the workspace: {e}"))?;
    let git_head = root.path().join("git/HEAD");
    let host_tmp = tempfile::Builder::new()
        .prefix("ultraplan-host-tmp-")
        .tempfile_in("/tmp")
        .map_err(|e| e.to_string())?;
    std::fs::write(host_tmp.path(), b"host /tmp\n").map_err(|e| e.to_string())?;
    let listener = Listener::start().await;
    let targets = listener.targets().await;
    let hidden = [
        fx.host_file.display().to_string(),
        git_head.display().to_string(),
        host_tmp.path().display().to_string(),
        "/etc/os-release".to_owned(),
    ];
    let request = json!({
        "connect": targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "read": [format!("/workspace/{WORKSPACE_FILE}"), &hidden[0], &hidden[1], &hidden[2], &hidden[3]],
        "write": ["/workspace/probe-write.txt", "/etc/probe-write.txt", "/usr/probe-write.txt",
                  "/probe-write.txt", "/ultraplan-agent", "/tmp/probe-write.txt"],
        "env_absent": env_probes(),
        "exec": ["/bin/sh"],
        "run": [["/bin/sh", "-c", "echo made by the shell > /workspace/by-shell.txt"],
                ["/usr/bin/unshare", "-U", "true"], ["/usr/bin/unshare", "-r", "true"]],
        "syscall": REFUSED_SYSCALLS,
        "slurp": ["/proc/1/cmdline", "/proc/self/mountinfo"],
        "fill": [{"dir": "/workspace/fill", "chunk": MIB, "max": 64 * MIB},
                 {"dir": "/tmp/fill", "chunk": 8 * MIB, "max": 2 * TMP_BYTES}],
    });
    let req = SandboxRequest {
        workspace: workspace.tree.clone(),
        writable: true,
        ..fx.request(name, probe)
    };
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
    check(
        run.report["uid"] == 65534,
        format!("uid is {}", run.report["uid"]),
    );
    check(
        run.detail("read", &format!("/workspace/{WORKSPACE_FILE}"))
            == Some(format!("read {} bytes", WORKSPACE_CONTENT.len())),
        "could not read the workspace".to_owned(),
    );
    for target in &targets {
        check(
            !run.allowed("connect", &target.to_string()),
            format!("connected to {target}"),
        );
    }
    check(
        listener.accepted_since_reset() == 0,
        "the listener accepted".to_owned(),
    );
    for path in &hidden {
        check(
            !run.allowed("read", path),
            format!("read the host file {path}"),
        );
    }
    check_writes(&run, &mut check);
    check(
        run.env() == names(env),
        format!("environment is {:?}", run.env()),
    );
    for (key, value) in CANARIES {
        check(!run.allowed("env_absent", key), format!("{key} is visible"));
        check(
            !run.stdout.contains(value),
            format!("the value of {key} leaked"),
        );
    }
    check(
        run.allowed("exec", "/bin/sh"),
        "execution mode has no shell".to_owned(),
    );
    check(
        std::fs::read_to_string(workspace.tree.join("by-shell.txt"))
            .ok()
            .as_deref()
            == Some("made by the shell\n"),
        "the shell's file is not in the workspace".to_owned(),
    );
    for cmd in ["/usr/bin/unshare -U true", "/usr/bin/unshare -r true"] {
        check(!run.allowed("run", cmd), format!("`{cmd}` succeeded"));
    }
    for syscall in REFUSED_SYSCALLS {
        check(
            !run.allowed("syscall", syscall),
            format!("{syscall} succeeded"),
        );
    }
    // The workspace is a tmpfs of its own: even the mount table does not name where it lives.
    let workspace_root = root.path().display().to_string();
    for file in ["/proc/1/cmdline", "/proc/self/mountinfo"] {
        let text = run.detail("slurp", file).unwrap_or_default();
        check(
            run.allowed("slurp", file) && !text.contains(&workspace_root),
            format!("{file} names the workspace's host path {workspace_root}: {text}"),
        );
    }
    check_fills(&run, &workspace, &mut check).await;
    workspace
        .remove()
        .map_err(|e| format!("removing the workspace: {e}"))?;
    check(
        !root.path().join("tree").exists(),
        "the workspace tree remains".to_owned(),
    );
    Ok(violations)
}

fn check_writes(run: &ProbeRun, check: &mut impl FnMut(bool, String)) {
    check(
        run.allowed("write", "/workspace/probe-write.txt"),
        "could not write the workspace".to_owned(),
    );
    check(
        run.allowed("write", "/tmp/probe-write.txt"),
        "could not write /tmp".to_owned(),
    );
    for path in [
        "/etc/probe-write.txt",
        "/usr/probe-write.txt",
        "/probe-write.txt",
        "/ultraplan-agent",
    ] {
        check(
            !run.allowed("write", path),
            format!("wrote {path} outside the workspace"),
        );
    }
}

async fn check_fills(run: &ProbeRun, workspace: &Workspace, check: &mut impl FnMut(bool, String)) {
    let fill = run
        .result("fill", "/workspace/fill")
        .cloned()
        .unwrap_or_default();
    let (bytes, files) = (fill["bytes"].as_u64(), fill["files"].as_u64().unwrap_or(0));
    let detail = fill["detail"].as_str().unwrap_or("");
    check(
        bytes.is_some_and(|b| b > 0 && b <= WORKSPACE_CAP) && detail.contains("No space left"),
        format!("the workspace filler did not stop at {WORKSPACE_CAP} with ENOSPC: {detail}"),
    );
    let tmp = run.result("fill", "/tmp/fill").cloned().unwrap_or_default();
    let tmp_detail = tmp["detail"].as_str().unwrap_or("");
    check(
        tmp["bytes"]
            .as_u64()
            .is_some_and(|b| b > 0 && b <= TMP_BYTES)
            && tmp_detail.contains("No space left"),
        format!("/tmp did not stop at {TMP_BYTES} with ENOSPC: {tmp_detail}"),
    );
    // The patch holds what fit: every whole file the filler wrote, and the shell's file.
    match workspace.diff(64 * MIB as usize).await {
        Ok(patch) => {
            let paths: Vec<&str> = patch
                .summary
                .files
                .iter()
                .map(|f| f.path.as_str())
                .collect();
            eprintln!(
                "   patch: {} files, {} bytes; filler wrote {files} whole files ({bytes:?} bytes)",
                paths.len(),
                patch.diff.len()
            );
            for n in 0..files {
                let path = format!("fill/fill-{n:04}.bin");
                check(
                    paths.contains(&path.as_str()),
                    format!("the patch lacks {path}"),
                );
            }
            check(
                paths.contains(&"by-shell.txt"),
                "the patch lacks by-shell.txt".to_owned(),
            );
        }
        Err(e) => check(false, format!("the patch could not be made: {e}")),
    }
}

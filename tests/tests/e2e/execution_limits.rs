//! A real execution session against its sandbox's limits, through the real server binary as
//! root under bwrap: the agent's Bash fills a workspace capped at 8 MiB
//! (`ULTRAPLAN_WORKSPACE_MAX_BYTES`) until ENOSPC, tries `unshare -U` and `unshare -r`, and
//! looks at who it is; the session still ends with a patch of what fit, and `/healthz` says
//! which limits are in force.

use serde_json::json;
use ultraplan_tests::fake_models::{FakeAnthropic, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::ServerProcess;

use crate::execution::{approve_first_plan, wait_for_patch};

const CAP: u64 = 8 * 1024 * 1024;

const FILL: &str = "mkdir -p fill; i=0; while [ $i -lt 64 ]; do \
    head -c 1048576 /dev/zero > fill/f$i.bin || { echo FILL_STOPPED_AT $i; break; }; \
    i=$((i+1)); done; echo FILL_DONE";
const ESCAPES: &str = "unshare -U true 2>&1 && echo USERNS_OPEN || echo USERNS_REFUSED; \
    unshare -r true 2>&1 && echo ROOTMAP_OPEN || echo ROOTMAP_REFUSED; id -u";

fn script() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("Nothing to test.\nVERDICT: PARTIAL");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Fill the disk\n2. Try to leave the sandbox");
        }
        match req.tool_results().len() {
            1 => Reply::tool_use("Bash", json!({"command": FILL})),
            2 => Reply::tool_use("Bash", json!({"command": ESCAPES})),
            _ => Reply::text("Done."),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_that_fills_its_disk_ends_with_the_patch_of_what_fit() {
    let fake = FakeAnthropic::start(script()).await;
    let cap = CAP.to_string();
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        (
            "ANTHROPIC_API_KEY",
            ultraplan_tests::fake_models::FAKE_ANTHROPIC_KEY,
        ),
        ("ANTHROPIC_BASE_URL", &fake.base_url()),
        ("ULTRAPLAN_WORKSPACE_MAX_BYTES", &cap),
    ])
    .await
    .expect("server");
    let (code, health) = server.get("/healthz").await.expect("healthz");
    assert_eq!(code, 200, "{health}");
    assert_eq!(health["status"], "ok", "{health}");
    let sandbox = &health["sandbox"];
    assert_eq!(sandbox["runner"], "bwrap", "{health}");
    assert_eq!(sandbox["seccomp"], true, "{health}");
    assert_eq!(sandbox["unprivileged_uid"], true, "{health}");
    assert_eq!(sandbox["workspace_quota"], "tmpfs", "{health}");

    let id = server.demo_session("fill the disk").await.expect("session");
    let mut seen = Vec::new();
    approve_first_plan(&server, &id, &mut seen).await;
    let result = wait_for_patch(&server, &id, &mut seen).await;

    let outputs: Vec<String> = fake
        .requests()
        .iter()
        .rev()
        .find(|r| !r.is_verifier())
        .map(|r| r.tool_results().into_iter().map(|t| t.text).collect())
        .unwrap_or_default();
    let fill = outputs
        .iter()
        .find(|t| t.contains("FILL_"))
        .cloned()
        .unwrap_or_default();
    assert!(
        fill.contains("No space left on device") && fill.contains("FILL_STOPPED_AT"),
        "the filler was not stopped by the cap: {fill}"
    );
    let stopped: u64 = fill
        .split("FILL_STOPPED_AT ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    assert!((1..8).contains(&stopped), "{fill}");
    let escapes = outputs
        .iter()
        .find(|t| t.contains("USERNS_"))
        .cloned()
        .unwrap_or_default();
    assert!(
        escapes.contains("USERNS_REFUSED") && escapes.contains("ROOTMAP_REFUSED"),
        "{escapes}"
    );
    assert!(
        escapes.contains("65534"),
        "the agent is not nobody: {escapes}"
    );

    eprintln!("filler: {fill}\nescapes: {escapes}\nhealthz: {health}");
    // The patch holds every file that fit, and the session says so.
    let files: Vec<String> = result
        .patch
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.path.clone()))
        .collect();
    for n in 0..stopped {
        let path = format!("fill/f{n}.bin");
        assert!(
            files.contains(&path),
            "{path} is not in the patch: {files:?}"
        );
    }
    assert!(!result.is_error, "{result:?}");
}

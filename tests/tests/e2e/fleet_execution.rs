//! An execution whose keyless runner dies: the next runner's copy is fresh from the bundle, so
//! the edits the log records are not in it. The agent starts the execution over from the
//! approval (told by a `system` note), rather than resume a transcript that claims edits its
//! tree does not hold, and the patch is what the new copy holds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::EventBody;
use ultraplan_tests::fake_models::{FakeAnthropic, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::ServerProcess;
use ultraplan_tests::runners::{RunnerProcess, runner_token};

use crate::execution::{approve_first_plan, wait_for_patch};
use crate::faults::assert_log_whole;

/// Plans; executing, writes `DONE.txt`, then runs a job that never ends the first time (its
/// runner is killed under it) and ends at once after.
fn script(slow_jobs: Arc<AtomicUsize>) -> Script {
    Script::from_fn(move |req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("DONE.txt is there.\nVERDICT: PASS");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Write DONE.txt\n2. Run the job");
        }
        // The approval is the first tool_result; every later one is an execution step.
        match req.tool_results().len() {
            1 => Reply::tool_use(
                "Write",
                json!({"file_path": "DONE.txt", "content": "written by the execution\n"}),
            ),
            2 if slow_jobs.fetch_add(1, Ordering::SeqCst) == 0 => Reply::tool_use(
                "Bash",
                json!({"command": "echo slow job started; sleep 600", "timeout": 600000}),
            ),
            2 => Reply::tool_use("Bash", json!({"command": "echo quick job"})),
            _ => Reply::text("Done."),
        }
    })
}

fn runs_bash(event: &EventBody) -> bool {
    matches!(event, EventBody::Assistant(a) if a.message.content.iter().any(
        |b| matches!(b, ContentBlock::ToolUse { name, .. } if name == "Bash")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_whose_runner_died_starts_over_on_a_fresh_copy() {
    let slow_jobs = Arc::new(AtomicUsize::new(0));
    let fake = FakeAnthropic::start(script(slow_jobs.clone())).await;
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        (
            "ANTHROPIC_API_KEY",
            ultraplan_tests::fake_models::FAKE_ANTHROPIC_KEY,
        ),
        ("ANTHROPIC_BASE_URL", &fake.base_url()),
    ])
    .await
    .expect("server");
    let token = runner_token(&server, "ci").await.expect("token");
    let mut r1 = RunnerProcess::start(&server.base_url, &token, "ci", "r1", 2)
        .await
        .expect("r1");
    let id = server
        .demo_session("write DONE.txt")
        .await
        .expect("session");
    let mut seen = Vec::new();
    approve_first_plan(&server, &id, &mut seen).await;
    server
        .wait_for(&id, &mut seen, |e| runs_bash(&e.body))
        .await
        .expect("the slow job starts after DONE.txt was written");
    let _r2 = RunnerProcess::start(&server.base_url, &token, "ci", "r2", 2)
        .await
        .expect("r2");
    r1.kill9().await.expect("kill -9");

    let result = wait_for_patch(&server, &id, &mut seen).await;
    assert!(
        result
            .result
            .as_deref()
            .is_some_and(|t| t.starts_with("Remote execution finished")),
        "{result:?}"
    );
    let files: Vec<&str> = result
        .patch
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.path.as_str()))
        .collect();
    assert_eq!(files, ["DONE.txt"], "written again on the fresh copy");

    let restarted = seen
        .iter()
        .position(|e| matches!(&e.body, EventBody::System(s) if s.subtype == "execution_restarted"))
        .unwrap_or_else(|| panic!("no restart note:\n{}", server.log()));
    let writes_after = seen[restarted..]
        .iter()
        .filter(|e| {
            matches!(&e.body, EventBody::Assistant(a) if a.message.content.iter().any(
                |b| matches!(b, ContentBlock::ToolUse { name, .. } if name == "Write")))
        })
        .count();
    assert_eq!(writes_after, 1, "the restarted agent wrote DONE.txt again");
    // The model was asked from the approval again: two executing requests carried only it.
    let from_approval = fake
        .requests()
        .iter()
        .filter(|r| {
            r.tool_names().iter().any(|t| t == "Bash")
                && !r.is_verifier()
                && r.tool_results().len() == 1
        })
        .count();
    assert_eq!(from_approval, 2, "the execution started over once");
    assert_eq!(slow_jobs.load(Ordering::SeqCst), 2);
    assert_log_whole(&server, &id).await;
}

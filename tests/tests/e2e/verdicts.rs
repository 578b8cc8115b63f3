//! The verifier's verdict end to end: an execution that breaks a test is verified in a copy,
//! judged FAIL with the failing test named; the verdict is in the patch result, on the page and
//! in `status`; `pull` refuses to apply it without a person's yes, and `--yes` applies it.

use serde_json::{Value, json};
use ultraplan_protocol::verdict::VerdictOutcome;
use ultraplan_tests::fake_models::{FakeAnthropic, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::ServerProcess;

use crate::environments::repository;
use crate::execution::{approve_first_plan, client, text, wait_for_patch};
use crate::live_clients::session_page;

const GREET: &str = "greet() {\n  echo hello\n}\n";
const TEST: &str = ". ./greet.sh\n[ \"$(greet)\" = hello ] || { echo 'FAIL: test_greet'; exit 1; }\necho 'all tests passed'\n";

/// Plans; executing, breaks greet(); the verifier runs the tests and reports what failed.
fn script() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        if req.is_verifier() {
            return match req.tool_results().len() {
                0 => Reply::tool_use(
                    "Bash",
                    json!({"command": "sh test.sh; echo \"exit code $?\""}),
                ),
                _ => {
                    let out = req
                        .tool_results()
                        .last()
                        .map(|t| t.text.clone())
                        .unwrap_or_default();
                    let failing = if out.contains("FAIL: test_greet") {
                        "test_greet"
                    } else {
                        "none"
                    };
                    Reply::text(format!(
                        "Ran `sh test.sh`: exit code 1. Failing test: {failing}.\n\
                         Plan step 1 (say goodbye) is done, but it breaks test_greet.\n\
                         VERDICT: FAIL"
                    ))
                }
            };
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Make greet() say goodbye");
        }
        match req.tool_results().len() {
            1 => Reply::tool_use(
                "Edit",
                json!({"file_path": "greet.sh", "old_string": "echo hello", "new_string": "echo goodbye"}),
            ),
            _ => Reply::text("Done: greet() says goodbye."),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_verdict_is_shown_and_pull_applies_it_only_when_told() {
    let root = tempfile::tempdir().expect("tempdir");
    let fake = FakeAnthropic::start(script()).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let home = root.path().join("home");
    let origin = repository(
        root.path(),
        "origin",
        &[("greet.sh", GREET.to_owned()), ("test.sh", TEST.to_owned())],
    );

    let out = client(
        &server,
        &home,
        &origin,
        &[
            "launch",
            "--yes",
            "--json",
            "--no-watch",
            "ultraplan say goodbye",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let session: Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = session["id"].as_str().expect("id").to_owned();
    let mut seen = Vec::new();
    approve_first_plan(&server, &id, &mut seen).await;
    let result = wait_for_patch(&server, &id, &mut seen).await;

    // The verdict names the failing test, in the result and the stored patch summary.
    let verdict = result
        .patch
        .clone()
        .and_then(|p| p.verdict)
        .expect("a verdict");
    assert_eq!(verdict.verdict, VerdictOutcome::Fail);
    assert!(verdict.evidence.contains("test_greet"), "{verdict:?}");
    let said = result.result.clone().unwrap_or_default();
    assert!(said.contains("Verification: FAIL"), "{said}");
    // The verifier ran in a copy: its `sh test.sh` left nothing, and the patch is the edit.
    let files: Vec<String> = result
        .patch
        .as_ref()
        .expect("patch")
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(files, ["greet.sh"]);

    let out = client(&server, &home, &origin, &["status", &id]);
    assert!(
        text(&out).contains(
            "Verification: FAIL — Ran `sh test.sh`: exit code 1. Failing test: test_greet."
        ),
        "{}",
        text(&out)
    );

    let page = session_page(&server.base_url, &server.token, &id).await;
    let at_verdict = page
        .find("Verification: FAIL")
        .expect("the verdict on the page");
    let at_diff = page.find("id=\"changed-files\"").expect("the file list");
    assert!(at_verdict < at_diff, "the verdict shows above the diff");
    assert!(
        page.contains("Failing test: test_greet"),
        "the evidence on the page"
    );

    // `pull` without a person to ask refuses and changes nothing; `--yes` applies.
    let out = client(&server, &home, &origin, &["pull", &id]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("--yes"), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(origin.join("greet.sh")).expect("read"),
        GREET
    );
    let out = client(&server, &home, &origin, &["pull", &id, "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Verification: FAIL"), "{}", text(&out));
    assert!(
        std::fs::read_to_string(origin.join("greet.sh"))
            .expect("read")
            .contains("goodbye")
    );
}

/// A verifier's Bash that writes the real workspace by its absolute path cannot PASS the work:
/// the verdict is at most PARTIAL and names what it changed, which the patch then holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_that_writes_the_workspace_cannot_pass_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let fake = FakeAnthropic::start(Script::from_fn(|req: &RecordedRequest| {
        if req.is_verifier() {
            return match req.tool_results().len() {
                0 => Reply::tool_use(
                    "Bash",
                    json!({"command": "echo sneaky > /workspace/sneaky.txt; sh test.sh"}),
                ),
                _ => Reply::text("Ran `sh test.sh`: exit code 0.\nVERDICT: PASS"),
            };
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Add NOTES.md");
        }
        match req.tool_results().len() {
            1 => Reply::tool_use(
                "Write",
                json!({"file_path": "NOTES.md", "content": "notes\n"}),
            ),
            _ => Reply::text("Done."),
        }
    }))
    .await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let home = root.path().join("home");
    let origin = repository(
        root.path(),
        "tamper",
        &[("greet.sh", GREET.to_owned()), ("test.sh", TEST.to_owned())],
    );
    let out = client(
        &server,
        &home,
        &origin,
        &[
            "launch",
            "--yes",
            "--json",
            "--no-watch",
            "ultraplan add notes",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let session: Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = session["id"].as_str().expect("id").to_owned();
    let mut seen = Vec::new();
    approve_first_plan(&server, &id, &mut seen).await;
    let result = wait_for_patch(&server, &id, &mut seen).await;
    let verdict = result
        .patch
        .clone()
        .and_then(|p| p.verdict)
        .expect("a verdict");
    assert_eq!(verdict.verdict, VerdictOutcome::Partial, "{verdict:?}");
    assert!(
        verdict.evidence.contains("- sneaky.txt (added)"),
        "{verdict:?}"
    );
    let files: Vec<String> = result
        .patch
        .as_ref()
        .expect("patch")
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    assert_eq!(
        files,
        ["NOTES.md", "sneaky.txt"],
        "the patch holds what it wrote"
    );
}

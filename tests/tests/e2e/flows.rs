//! The whole plan loop through the real server binary: a real agent in a real sandbox, the
//! gateway against fake providers (or the offline planner), decisions over HTTP, and the
//! client's scanner reading the log.

use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::{ExitPlanModeScanner, ScanResult};
use ultraplan_tests::fake_models::{
    FAKE_ANTHROPIC_KEY, FAKE_OPENAI_KEY, FakeAnthropic, FakeOpenAi, RecordedRequest, Reply, Script,
};
use ultraplan_tests::harness::{ServerProcess, containers_of, plan_call, processes_mentioning};

const FEEDBACK: &str = "Also add a regression test for empty passwords.";

/// Explore with Glob, Grep and Read, plan, revise on feedback, and try to keep working after a
/// teleport (the harness must not let it).
fn planning_script() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        let results = req.tool_results();
        let last = results.last().map(|r| r.text.clone()).unwrap_or_default();
        if last.contains("__ULTRAPLAN_TELEPORT_LOCAL__") {
            return Reply::tool_use("Glob", json!({"pattern": "**/*"}));
        }
        if last.contains(FEEDBACK) {
            return Reply::exit_plan_mode(format!(
                "# Plan v2\n1. Reject empty passwords in src/auth.rs\n2. {FEEDBACK}"
            ));
        }
        match results.len() {
            0 => Reply::tool_use("Glob", json!({"pattern": "**/*.rs"})),
            1 => Reply::tool_use(
                "Grep",
                json!({"pattern": "password", "output_mode": "content"}),
            ),
            2 => Reply::tool_use("Read", json!({"file_path": "src/auth.rs"})),
            _ => Reply::exit_plan_mode("# Plan v1\n1. Reject empty passwords in src/auth.rs"),
        }
    })
}

fn assistant_text(event: &Event) -> Option<String> {
    let EventBody::Assistant(a) = &event.body else {
        return None;
    };
    let text: String = a
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then_some(text)
}

/// Wait (bounded) until no agent process mentions the server's bundles.
async fn agents_gone(server: &ServerProcess) {
    let needle = server.data_dir.join("bundles").display().to_string();
    for _ in 0..200 {
        if processes_mentioning(&needle).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("agents still running: {:?}", processes_mentioning(&needle));
}

/// Plan → reject with feedback → revised plan → teleport; returns the session id and every
/// event.
async fn reject_then_teleport(server: &ServerProcess) -> (String, Vec<Event>) {
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let first = server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("plan");
    let (t1, _) = plan_call(&first).expect("plan call");
    let session = server.session(&id).await.expect("session");
    assert_eq!(session["session_status"], "requires_action");
    assert_eq!(session["phase"], "plan_ready");
    let code = server
        .decide(
            &id,
            &t1,
            json!({"decision": "reject", "feedback": FEEDBACK}),
        )
        .await
        .expect("reject");
    assert_eq!(code, 200);
    let second = server
        .wait_for(&id, &mut seen, |e| {
            plan_call(e).is_some_and(|(t, _)| t != t1)
        })
        .await
        .expect("revised plan");
    let (t2, _) = plan_call(&second).expect("plan call");
    let code = server
        .decide(&id, &t2, json!({"decision": "teleport"}))
        .await
        .expect("teleport");
    assert_eq!(code, 200);
    server
        .wait_for(&id, &mut seen, |e| matches!(e.body, EventBody::Result(_)))
        .await
        .expect("result");
    let replies: Vec<String> = seen.iter().filter_map(assistant_text).collect();
    assert_eq!(
        replies.last().map(String::as_str),
        Some(TELEPORT_REPLY),
        "{replies:#?}"
    );
    let ids: Vec<i64> = seen.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "ids: {ids:?}");
    let mut scanner = ExitPlanModeScanner::new();
    let outcome = scanner.ingest(&seen).expect("scan");
    assert!(
        matches!(outcome, ScanResult::Teleport { .. }),
        "{outcome:?}"
    );
    assert_eq!(scanner.rejection_count(), 1);
    agents_gone(server).await;
    (id, seen)
}

fn assert_explored(events: &[Event]) {
    let results: Vec<(String, bool)> = events
        .iter()
        .flat_map(|e| e.body.tool_results())
        .map(|(_, text, is_error)| (text, is_error))
        .collect();
    assert!(
        results
            .iter()
            .any(|(t, e)| !e && t.contains("BUG: accepts any password")),
        "Grep/Read saw the bundle: {results:#?}"
    );
}

#[tokio::test]
async fn anthropic_plan_reject_revise_teleport_in_bwrap() {
    let fake = FakeAnthropic::start(planning_script()).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let (_, events) = reject_then_teleport(&server).await;
    assert_explored(&events);
    let requests = fake.requests();
    assert_eq!(requests.len(), 5, "no model call after the teleport");
    assert!(requests.iter().all(|r| r.has_api_key(FAKE_ANTHROPIC_KEY)));
    assert!(
        requests[4]
            .last_tool_result()
            .is_some_and(|r| r.is_error && r.text == FEEDBACK)
    );
    for event in &events {
        let text = serde_json::to_string(&event.body).expect("json");
        assert!(
            !text.contains(FAKE_ANTHROPIC_KEY),
            "the key reached the log"
        );
    }
}

#[tokio::test]
async fn openai_compatible_plan_reject_revise_teleport_in_bwrap() {
    let fake = FakeOpenAi::start(planning_script()).await;
    let base = fake.base_url();
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "openai:gpt-test"),
        ("OPENAI_API_KEY", FAKE_OPENAI_KEY),
        ("OPENAI_BASE_URL", &base),
    ])
    .await
    .expect("server");
    let (_, events) = reject_then_teleport(&server).await;
    assert_explored(&events);
    assert_eq!(fake.requests().len(), 5, "no model call after the teleport");
}

#[tokio::test]
async fn anthropic_plan_reject_revise_teleport_in_docker() {
    let fake = FakeAnthropic::start(planning_script()).await;
    let server = ServerProcess::with_fake_anthropic("docker", &fake.base_url())
        .await
        .expect("server");
    let (id, events) = reject_then_teleport(&server).await;
    assert_explored(&events);
    assert_eq!(fake.requests().len(), 5, "no model call after the teleport");
    for _ in 0..400 {
        if containers_of(&id).is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("containers left behind: {:?}", containers_of(&id));
}

#[tokio::test]
async fn offline_plan_reject_revise_teleport_in_bwrap() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ])
    .await
    .expect("server");
    let (_, events) = reject_then_teleport(&server).await;
    let plans: Vec<String> = events
        .iter()
        .filter_map(plan_call)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(plans.len(), 2);
    assert!(plans[0].contains("offline planner"), "{}", plans[0]);
    assert!(
        plans[0].contains("src/auth.rs:"),
        "cites real lines: {}",
        plans[0]
    );
    assert!(
        plans[1].contains(FEEDBACK),
        "the revision quotes the feedback: {}",
        plans[1]
    );
}

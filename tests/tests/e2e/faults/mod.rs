//! Fault injection through the real binaries: PostgreSQL restarted mid-session, the Docker
//! daemon restarted while an agent runs, a data dir that fills up, a model stream that stalls,
//! and a client that dies mid-upload. Each fault is undone by a guard, even on failure.

mod client_kill;
mod services;
mod storage;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_tests::fake_models::{FAKE_ANTHROPIC_KEY, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::{ServerProcess, plan_call};

pub(super) const PLAN: &str = "# Plan\n1. Reject empty passwords in src/auth.rs";

/// Explore (Glob, Grep, Read), plan, then answer briefly once the plan is decided. Every event
/// is paced so the session spans the fault.
pub(super) fn paced_script(pace: Duration) -> Script {
    Script::from_fn(move |req: &RecordedRequest| {
        let reply = match req.tool_results().len() {
            0 => Reply::tool_use("Glob", json!({"pattern": "**/*.rs"})),
            1 => Reply::tool_use("Grep", json!({"pattern": "password"})),
            2 => Reply::tool_use("Read", json!({"file_path": "src/auth.rs"})),
            3 => Reply::exit_plan_mode(PLAN),
            _ => Reply::text("Done."),
        };
        reply.slow(pace)
    })
}

pub(super) fn result_of(event: &Event) -> Option<(String, bool, String)> {
    match &event.body {
        EventBody::Result(r) => Some((
            r.subtype.clone(),
            r.is_error,
            r.result.clone().unwrap_or_default(),
        )),
        _ => None,
    }
}

pub(super) fn is_result(event: &Event) -> bool {
    result_of(event).is_some()
}

/// The tool calls of the log's assistant turns, in order.
pub(super) fn tool_calls(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Assistant(a) => Some(a.message.content.clone()),
            _ => None,
        })
        .flatten()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { name, .. } => Some(name),
            _ => None,
        })
        .collect()
}

/// One line per event: id, type, and what it carries, for failure messages.
pub(super) fn summary(events: &[Event]) -> String {
    let lines: Vec<String> = events
        .iter()
        .map(|e| {
            let text = serde_json::to_string(&e.body).unwrap_or_default();
            let short: String = text.chars().take(160).collect();
            format!("{:>3} {short}", e.id)
        })
        .collect();
    lines.join("\n")
}

/// Every event of the session, page by page.
pub(super) async fn all_events(server: &ServerProcess, id: &str) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.id);
        let page = server.events(id, after, 0).await.expect("events");
        if page.data.is_empty() {
            return events;
        }
        events.extend(page.data);
    }
}

/// The log is whole: ids 1..n without gaps or repeats, no model turn or result written twice,
/// and only system notes after the last result (a server restarted just after a result
/// resumes the idle agent, and says so).
pub(super) async fn assert_log_whole(server: &ServerProcess, id: &str) -> Vec<Event> {
    let events = all_events(server, id).await;
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "ids 1..n without gaps or duplicates"
    );
    let mut turns = HashSet::new();
    for event in &events {
        if let EventBody::Assistant(_) = &event.body {
            let body = serde_json::to_string(&event.body).expect("json");
            assert!(
                turns.insert(body.clone()),
                "a turn was written twice: {body}"
            );
        }
    }
    let mut results = HashSet::new();
    for event in events.iter().filter(|e| is_result(e)) {
        let body = serde_json::to_string(&event.body).expect("json");
        assert!(
            results.insert(body.clone()),
            "a result was written twice: {body}"
        );
    }
    if let Some(last) = events.iter().rposition(is_result) {
        let after = &events[last + 1..];
        assert!(
            after.iter().all(|e| matches!(e.body, EventBody::System(_))),
            "only notes after the last result: {after:#?}"
        );
    }
    events
}

/// The server log's ERROR and WARN lines.
pub(super) fn problems(server: &ServerProcess) -> String {
    let log = server.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        .collect();
    lines.join("\n")
}

/// Bounded wait for a condition.
pub(super) async fn eventually(what: &str, mut done: impl FnMut() -> bool, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Drive a session past a fault: the plan arrives, the decision is taken, and a result
/// follows the decision; or the session ends with a result before any plan. Error results
/// must say why (an agent lost to the fault ends its turn with one; approving its plan then
/// starts another). Returns the last result.
pub(super) async fn plan_or_clear_failure(
    server: &ServerProcess,
    id: &str,
    decision: &str,
) -> (String, bool, String) {
    let mut seen = Vec::new();
    let hit = server
        .wait_for(id, &mut seen, |e| plan_call(e).is_some() || is_result(e))
        .await
        .expect("a plan or a result after the fault");
    let mut after = 0;
    if let Some((tool, plan)) = plan_call(&hit) {
        assert_eq!(plan, PLAN);
        let code = server
            .decide(id, &tool, json!({ "decision": decision }))
            .await
            .expect("decide");
        assert_eq!(code, 200, "the decision works after the fault");
        let answered = |e: &Event| {
            matches!(e.body, EventBody::User(_))
                && e.body.tool_results().iter().any(|(t, _, _)| *t == tool)
        };
        after = server
            .wait_for(id, &mut seen, answered)
            .await
            .expect("the decision is in the log")
            .id;
    }
    let done = server
        .wait_for(id, &mut seen, |e| is_result(e) && e.id > after)
        .await
        .expect("result");
    for result in seen.iter().filter_map(result_of) {
        assert!(
            !result.1 || !result.2.trim().is_empty(),
            "an error result says why: {result:?}"
        );
    }
    let (subtype, is_error, text) = result_of(&done).expect("result");
    if !is_error {
        assert_eq!(subtype, "success");
    }
    (subtype, is_error, text)
}

pub(super) async fn fake_anthropic_server(
    fake_url: &str,
    runner: &str,
    extra: &[(&str, &str)],
) -> ServerProcess {
    let mut env = vec![
        ("ULTRAPLAN_RUNNER", runner),
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        ("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY),
        ("ANTHROPIC_BASE_URL", fake_url),
    ];
    env.extend_from_slice(extra);
    ServerProcess::start(&env).await.expect("server")
}

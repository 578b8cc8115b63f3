//! Session lifecycle through the real server binary: Docker, crash recovery, timeouts,
//! archive, and many sessions under the running cap.

use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_tests::harness::{
    ServerProcess, containers_of, demo_repo, plan_call, processes_mentioning,
};

fn plan_id(event: &Event) -> Option<String> {
    plan_call(event).map(|(id, _)| id)
}

fn is_result(event: &Event) -> bool {
    matches!(event.body, EventBody::Result(_))
}

/// The server's closing result of an execution, written after its agent exited.
fn execution_finished(event: &Event) -> bool {
    matches!(&event.body, EventBody::Result(r) if r.result.as_deref().is_some_and(|t| t.starts_with("Remote execution finished")))
}

fn result_subtype(event: &Event) -> Option<String> {
    match &event.body {
        EventBody::Result(r) => Some(r.subtype.clone()),
        _ => None,
    }
}

async fn offline(runner: &str, extra: &[(&str, &str)]) -> ServerProcess {
    let mut env = vec![("ULTRAPLAN_RUNNER", runner), ("ULTRAPLAN_MODEL", "offline")];
    env.extend_from_slice(extra);
    ServerProcess::start(&env).await.expect("server")
}

/// Bounded wait for a condition over the process table or Docker.
async fn eventually(what: &str, mut done: impl FnMut() -> bool, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn docker_runner_plans_rejects_and_approves_and_removes_its_containers() {
    let server = offline("docker", &[]).await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let first = server
        .wait_for(&id, &mut seen, |e| plan_id(e).is_some())
        .await
        .expect("plan");
    assert_eq!(
        containers_of(&id).len(),
        1,
        "the agent runs in one labelled container"
    );
    assert_eq!(
        server.session(&id).await.expect("s")["session_status"],
        "requires_action"
    );
    let t1 = plan_id(&first).expect("id");
    let code = server
        .decide(
            &id,
            &t1,
            json!({"decision":"reject","feedback":"Add tests."}),
        )
        .await;
    assert_eq!(code.expect("reject"), 200);
    let second = server
        .wait_for(&id, &mut seen, |e| plan_id(e).is_some_and(|t| t != t1))
        .await
        .expect("revised");
    let t2 = plan_id(&second).expect("id");
    assert_eq!(
        server
            .decide(&id, &t2, json!({"decision":"approve"}))
            .await
            .expect("approve"),
        200
    );
    let done = server
        .wait_for(&id, &mut seen, is_result)
        .await
        .expect("result");
    assert_eq!(result_subtype(&done).as_deref(), Some("success"));
    eventually(
        "container removal",
        || containers_of(&id).is_empty(),
        Duration::from_secs(30),
    )
    .await;
}

#[tokio::test]
async fn a_killed_server_resumes_its_sessions_from_the_log() {
    let mut server = offline("bwrap", &[]).await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let first = server
        .wait_for(&id, &mut seen, |e| plan_id(e).is_some())
        .await
        .expect("plan");
    let t1 = plan_id(&first).expect("id");

    server.restart().await.expect("kill -9 and start again");
    let needle = server.data_dir.join("bundles").display().to_string();
    server
        .wait_for(
            &id,
            &mut seen,
            |e| matches!(&e.body, EventBody::System(s) if s.subtype == "resumed"),
        )
        .await
        .expect("resumed note");
    let session = server.session(&id).await.expect("session");
    assert_eq!(
        session["session_status"], "requires_action",
        "the plan is still pending"
    );
    assert!(
        !processes_mentioning(&needle).is_empty(),
        "the agent runs again"
    );

    let code = server
        .decide(
            &id,
            &t1,
            json!({"decision":"reject","feedback":"Split it up."}),
        )
        .await;
    assert_eq!(code.expect("decide"), 200);
    let second = server
        .wait_for(&id, &mut seen, |e| plan_id(e).is_some_and(|t| t != t1))
        .await
        .expect("the resumed agent revises");
    let t2 = plan_id(&second).expect("id");
    assert_eq!(
        server
            .decide(&id, &t2, json!({"decision":"approve"}))
            .await
            .expect("approve"),
        200
    );
    server
        .wait_for(&id, &mut seen, is_result)
        .await
        .expect("result");
    eventually(
        "agent exit",
        || processes_mentioning(&needle).is_empty(),
        Duration::from_secs(10),
    )
    .await;
    let all = server.events(&id, 0, 0).await.expect("events");
    let ids: Vec<i64> = all.data.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "strictly increasing, no duplicates"
    );
    let plans: Vec<String> = all.data.iter().filter_map(plan_id).collect();
    assert_eq!(
        plans.len(),
        2,
        "the pending plan was not re-proposed after the restart"
    );
}

#[tokio::test]
async fn timeouts_end_and_archive_the_session() {
    let server = offline("bwrap", &[]).await;
    server
        .admin(&["flags", "set", "timeout_seconds", "2", "--user", "tester"])
        .await
        .expect("flag");
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let ended = server
        .wait_for(&id, &mut seen, is_result)
        .await
        .expect("result");
    assert_eq!(result_subtype(&ended).as_deref(), Some("error_timeout"));
    let session = server.session(&id).await.expect("session");
    assert_eq!(session["session_status"], "archived");
    let needle = server.data_dir.join("bundles").display().to_string();
    eventually(
        "agent exit",
        || processes_mentioning(&needle).is_empty(),
        Duration::from_secs(5),
    )
    .await;
}

#[tokio::test]
async fn archive_kills_a_waiting_agent_within_two_seconds() {
    let server = offline("bwrap", &[]).await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| plan_id(e).is_some())
        .await
        .expect("plan");
    let needle = server.data_dir.join("bundles").display().to_string();
    assert!(
        !processes_mentioning(&needle).is_empty(),
        "the agent waits for the decision"
    );
    let (code, body) = server
        .post(&format!("/v1/sessions/{id}/archive"), &json!({}))
        .await
        .expect("archive");
    assert_eq!(
        (code, body["session_status"].as_str()),
        (200, Some("archived"))
    );
    eventually(
        "agent exit",
        || processes_mentioning(&needle).is_empty(),
        Duration::from_secs(2),
    )
    .await;
    let (code, _) = server
        .post(&format!("/v1/sessions/{id}/archive"), &json!({}))
        .await
        .expect("again");
    assert_eq!(code, 409);
}

#[tokio::test]
async fn fifty_sessions_under_a_cap_of_eight_all_complete() {
    let server = offline("bwrap", &[("ULTRAPLAN_MAX_RUNNING", "8")]).await;
    let bundle = server.upload(&demo_repo()).await.expect("upload");
    let server = std::sync::Arc::new(server);
    let mut tasks = Vec::new();
    for i in 0..50 {
        let server = server.clone();
        let bundle = bundle.clone();
        tasks.push(tokio::spawn(async move {
            let id = server
                .create_session(&bundle, &format!("fix login bug {i}"))
                .await?;
            let mut seen = Vec::new();
            let plan = server
                .wait_for(&id, &mut seen, |e| plan_id(e).is_some())
                .await?;
            let tool = plan_id(&plan).unwrap_or_default();
            let code = server
                .decide(&id, &tool, json!({"decision":"approve"}))
                .await?;
            anyhow::ensure!(code == 200, "decision answered {code}");
            // The agent's own result comes first; the server's account of the patch closes
            // the execution once the agent has exited.
            let done = server.wait_for(&id, &mut seen, execution_finished).await?;
            anyhow::Ok((result_subtype(&done), seen))
        }));
    }
    let mut queued = 0;
    for task in tasks {
        let (subtype, events) = task.await.expect("task").expect("session");
        assert_eq!(subtype.as_deref(), Some("success"), "{events:#?}");
        queued += events
            .iter()
            .filter(|e| matches!(&e.body, EventBody::System(s) if s.subtype == "queued"))
            .count();
    }
    assert!(
        queued > 0,
        "sessions beyond the cap waited in line and said so"
    );
    let needle = server.data_dir.join("bundles").display().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let groups: Vec<String> = left
                .iter()
                .filter_map(|l| l.split_whitespace().next())
                .map(|pid| {
                    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
                })
                .collect();
            panic!(
                "agents still alive a minute after every session ended: {left:#?}\ncgroups: {groups:#?}\nserver log:\n{}",
                server.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_spent_token_budget_stops_the_session_cleanly() {
    let server = offline("bwrap", &[("ULTRAPLAN_SESSION_TOKEN_BUDGET", "1")]).await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let ended = server
        .wait_for(&id, &mut seen, is_result)
        .await
        .expect("result");
    assert_eq!(
        result_subtype(&ended).as_deref(),
        Some("error_budget"),
        "{seen:#?}"
    );
    let session = server.session(&id).await.expect("session");
    assert!(
        session["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0,
        "usage was recorded"
    );
    assert_eq!(session["session_status"], "idle");
    // The result says what the session consumed, in its fields and its words.
    let EventBody::Result(result) = &ended.body else {
        panic!("not a result: {ended:?}");
    };
    assert!(result.usage.is_some_and(|u| u.total() > 0), "{result:?}");
    let text = result.result.as_deref().unwrap_or_default();
    assert!(
        text.contains("It used") && text.contains("tokens"),
        "{text}"
    );
    let needle = server.data_dir.join("bundles").display().to_string();
    eventually(
        "agent exit",
        || processes_mentioning(&needle).is_empty(),
        Duration::from_secs(10),
    )
    .await;
}

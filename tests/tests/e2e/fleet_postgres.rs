//! PostgreSQL restarted under a fleet: two `serve --no-local-runner` fronts on a throwaway
//! PostgreSQL and a keyless runner linked to each, with sessions mid-flight (their agents are
//! exploring, paced by the fake model). The database is stopped (`pg_ctl stop -m fast`, every
//! connection cut), left down longer than a lease and started again. Every session reaches its
//! plan, as each front sees it (so each front follows the other's announcements again), a
//! decision posted afterwards through the other front is carried out, event ids stay 1..n, the
//! runners' own ledgers show no session ever had two live agents, both runners are linked
//! again, and a session started afterwards plans as usual. A second test pins down what a
//! front remembers across a long outage.

use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_runner::read_ledger;
use ultraplan_tests::fake_models::{
    FAKE_ANTHROPIC_KEY, FakeAnthropic, RecordedRequest, Reply, Script,
};
use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, plan_call};
use ultraplan_tests::runners::{RunnerProcess, runner_token};

use crate::faults::{assert_log_whole, problems};
use crate::fleet::{agents_by_session, assert_never_two_agents};

const PLAN: &str = "# Plan\n1. Reject empty passwords in src/auth.rs";

/// Explore three times (every streamed event of an answer paced, about 1.5 s an answer, so
/// the sessions span the outage), then plan; an
/// executing agent (it has Bash) says it is done.
fn paced_planner() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        if req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::text("Implemented the plan.");
        }
        let reply = match req.tool_results().len() {
            0 => Reply::tool_use("Glob", json!({"pattern": "**/*.rs"})),
            1 => Reply::tool_use("Grep", json!({"pattern": "password"})),
            2 => Reply::tool_use("Read", json!({"file_path": "src/auth.rs"})),
            _ => Reply::exit_plan_mode(PLAN),
        };
        reply.slow(Duration::from_millis(150))
    })
}

fn is_execution_result(e: &Event) -> bool {
    matches!(&e.body, EventBody::Result(r) if r.result.as_deref().is_some_and(|t| t.starts_with("Remote execution finished")))
}

/// The `ultraplan_runners_linked` gauge of a front.
async fn runners_linked(front: &ServerProcess) -> Option<u64> {
    let metrics = reqwest::get(format!("{}/metrics", front.base_url))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("ultraplan_runners_linked "))
        .and_then(|v| v.trim().parse().ok())
}

/// Wait (bounded) until every front gauges one linked runner.
async fn wait_relinked(fronts: &[&ServerProcess], runners: &[&RunnerProcess]) {
    for _ in 0..600 {
        let mut all = true;
        for front in fronts {
            all &= runners_linked(front).await == Some(1);
        }
        if all {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let logs: Vec<String> = runners.iter().map(|r| r.log()).collect();
    panic!("the runners never linked again:\n{}", logs.join("\n----\n"));
}

/// The first plan of the session as `front` sees it: its tool_use_id.
async fn plan_seen_by(front: &ServerProcess, id: &str) -> String {
    let mut seen = Vec::new();
    let plan = front
        .wait_for(id, &mut seen, |e| plan_call(e).is_some())
        .await
        .unwrap_or_else(|error| panic!("{id} never reached its plan: {error}"));
    plan_call(&plan).expect("plan").0
}

#[tokio::test]
async fn postgres_restarted_under_a_fleet_servers_and_runners_reconnect_and_sessions_go_on() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let fake = FakeAnthropic::start(paced_planner()).await;
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let fake_url = fake.base_url();
    let env = [
        ("DATABASE_URL", pg.url.as_str()),
        ("ULTRAPLAN_BLOB_STORE", blob_url.as_str()),
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        ("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY),
        ("ANTHROPIC_BASE_URL", fake_url.as_str()),
        ("ULTRAPLAN_LEASE_SECONDS", "3"),
        ("ULTRAPLAN_PARK_AFTER_SECONDS", "1"),
    ];
    let front1 = ServerProcess::start(&env).await.expect("front 1");
    let front2 = ServerProcess::start_replica(&env, &front1.token)
        .await
        .expect("front 2");
    let fronts = [&front1, &front2];
    let token = runner_token(&front1, "fleet").await.expect("runner token");
    let r1 = RunnerProcess::start(&front1.base_url, &token, "fleet", "r1", 2)
        .await
        .expect("runner 1");
    let r2 = RunnerProcess::start(&front2.base_url, &token, "fleet", "r2", 2)
        .await
        .expect("runner 2");
    wait_relinked(&fronts, &[&r1, &r2]).await;

    // Four sessions, two started through each front, all at work when the database goes.
    let mut ids = Vec::new();
    for (i, front) in [&front1, &front2, &front1, &front2].into_iter().enumerate() {
        ids.push(
            front
                .demo_session(&format!("fix the login bug {i}"))
                .await
                .expect("session"),
        );
    }
    for (i, id) in ids.iter().enumerate() {
        let mut seen = Vec::new();
        fronts[i % 2]
            .wait_for(id, &mut seen, |e| matches!(e.body, EventBody::Assistant(_)))
            .await
            .expect("the agent works");
    }
    pg.stop().await.expect("stop postgres");
    // Longer than a lease, and than the pool's acquire timeout (5 s): leases cannot be renewed
    // and the fronts' listening connections fail to come back at once.
    tokio::time::sleep(Duration::from_secs(6)).await;
    pg.start().await.expect("start postgres again");

    // Every session reaches its plan, seen through both fronts.
    let mut plans = Vec::new();
    for id in &ids {
        let tool_use_id = plan_seen_by(&front1, id).await;
        assert_eq!(plan_seen_by(&front2, id).await, tool_use_id, "{id}");
        plans.push(tool_use_id);
    }
    wait_relinked(&fronts, &[&r1, &r2]).await;

    // Decisions posted afterwards, each through the front the session was not started on.
    let code = front2
        .decide(&ids[0], &plans[0], json!({"decision": "approve"}))
        .await
        .expect("approve");
    assert_eq!(code, 200);
    let feedback = json!({"decision": "reject", "feedback": "Also cover the empty password."});
    let code = front1
        .decide(&ids[1], &plans[1], feedback)
        .await
        .expect("reject");
    assert_eq!(code, 200);
    let mut seen = Vec::new();
    let executed = front1
        .wait_for(&ids[0], &mut seen, is_execution_result)
        .await;
    if let Err(error) = executed {
        panic!(
            "the approved plan was not executed: {error}\nfront 1:\n{}\nfront 2:\n{}\nr1:\n{}\nr2:\n{}",
            problems(&front1),
            problems(&front2),
            r1.log(),
            r2.log()
        );
    }
    let mut seen = Vec::new();
    front2
        .wait_for(&ids[1], &mut seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != plans[1])
        })
        .await
        .expect("the rejected plan was revised");
    let resource = front2.session(&ids[0]).await.expect("resource");
    assert_eq!(resource["execution"]["state"], "finished", "{resource}");
    for id in &ids {
        assert_log_whole(&front1, id).await;
        assert_log_whole(&front2, id).await;
    }
    let ledgers: Vec<_> = [&r1, &r2]
        .iter()
        .map(|r| agents_by_session(&read_ledger(&r.data_dir).expect("ledger"), i64::MAX))
        .collect();
    assert_never_two_agents(&ledgers);

    // A session started after the restart plans as usual.
    let next = front2
        .demo_session("after the restart")
        .await
        .expect("session");
    assert!(!plan_seen_by(&front1, &next).await.is_empty());
    assert_log_whole(&front1, &next).await;
    let links = |r: &RunnerProcess| r.log().matches("linked to the server").count();
    eprintln!(
        "after the postgres restart: links made by r1 {}, r2 {}\nfront 1:\n{}\nfront 2:\n{}",
        links(&r1),
        links(&r2),
        problems(&front1),
        problems(&front2)
    );
}

/// A front remembers an idle session (its poll at the head is answered from memory). The
/// database goes away for longer than a pool connection may be waited for, so the front's
/// listening connection fails to come back at once; then the other front writes to the session
/// the moment the database is back, perhaps before the first front listens again. The first
/// front must still see the write: once it listens again it forgets what it remembered.
#[tokio::test]
async fn a_front_that_listens_again_after_a_long_outage_sees_what_the_other_wrote_meanwhile() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let env = [
        ("DATABASE_URL", pg.url.as_str()),
        ("ULTRAPLAN_BLOB_STORE", blob_url.as_str()),
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "offline"),
    ];
    let front1 = ServerProcess::start(&env).await.expect("front 1");
    let front2 = ServerProcess::start_replica(&env, &front1.token)
        .await
        .expect("front 2");
    // No runner is linked: the session stays queued and nothing but this test writes to it.
    let id = front2
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let head = front1
        .events(&id, 0, 0)
        .await
        .expect("events")
        .last_id
        .expect("head");
    assert!(
        front1
            .events(&id, head, 0)
            .await
            .expect("poll")
            .data
            .is_empty()
    );

    pg.stop().await.expect("stop postgres");
    // Longer than the pool's acquire timeout (5 s): the listener's reconnection fails.
    tokio::time::sleep(Duration::from_secs(7)).await;
    pg.start().await.expect("start postgres again");
    let posted = post_note(&front2, &id).await;
    assert_eq!(posted, head + 1);
    // Seen once front 1 listens again; and what is written after that reaches it as before.
    let first = seen_by(&front1, &id, head, posted).await;
    let next = post_note(&front2, &id).await;
    let second = seen_by(&front1, &id, posted, next).await;
    if first && second {
        return;
    }
    panic!(
        "front 1 answered from what it remembered: it saw the write made before it listened \
         again: {first}, the write after: {second}\n{}",
        front1
            .log()
            .lines()
            .filter(|l| l.contains("replicas") || l.contains("WARN"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Post a user note to the session through `front` as soon as it can write; its event id.
async fn post_note(front: &ServerProcess, id: &str) -> i64 {
    let note = json!({"events": [
        {"type": "user", "message": {"role": "user", "content": "Also cover the empty password."}}
    ]});
    for _ in 0..100 {
        let posted = front
            .post(&format!("/v1/sessions/{id}/events"), &note)
            .await;
        if let Ok((200 | 201, page)) = posted {
            return page["data"][0]["id"].as_i64().expect("the note's id");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the note could not be posted");
}

/// Whether a poll of `front` after `after` shows event `event` (bounded wait).
async fn seen_by(front: &ServerProcess, id: &str, after: i64, event: i64) -> bool {
    for _ in 0..300 {
        if let Ok(page) = front.events(id, after, 0).await
            && page.data.iter().any(|e| e.id == event)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

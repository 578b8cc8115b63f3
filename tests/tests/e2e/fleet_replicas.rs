//! A runner killed under two replicas: two `serve --no-local-runner` fronts on one
//! PostgreSQL with the offline planner, a keyless runner linked to each. The runner holding a
//! session that waits on its plan's review is killed with SIGKILL; a rejection posted through
//! the front it was not linked to is answered by the other runner within the lease plus
//! 10 s, the log stays 1..n, and the runners' own ledgers show the session never had two live
//! agents.

use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::events::Event;
use ultraplan_runner::read_ledger;
use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, plan_call};
use ultraplan_tests::runners::{RunnerProcess, runner_token};

use crate::faults::assert_log_whole;
use crate::fleet::{agents_by_session, assert_never_two_agents};

const LEASE_SECONDS: u64 = 5;

/// A session's first plan as `front` sees it: the events so far and the plan's tool_use_id.
async fn planned(front: &ServerProcess, prompt: &str) -> (String, String, Vec<Event>) {
    let id = front.demo_session(prompt).await.expect("session");
    let mut seen = Vec::new();
    let plan = front
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    (id, plan_call(&plan).expect("plan").0, seen)
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    i64::try_from(since.as_millis()).expect("ms")
}

#[tokio::test]
async fn a_killed_runners_session_answers_a_decision_posted_through_the_other_replica() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let lease = LEASE_SECONDS.to_string();
    let env = [
        ("DATABASE_URL", pg.url.as_str()),
        ("ULTRAPLAN_BLOB_STORE", blob_url.as_str()),
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "offline"),
        ("ULTRAPLAN_LEASE_SECONDS", lease.as_str()),
    ];
    let front1 = ServerProcess::start(&env).await.expect("front 1");
    let front2 = ServerProcess::start_replica(&env, &front1.token)
        .await
        .expect("front 2");
    let token = runner_token(&front1, "fleet").await.expect("runner token");
    let mut runners = [
        RunnerProcess::start(&front1.base_url, &token, "fleet", "r1", 2)
            .await
            .expect("runner 1"),
        RunnerProcess::start(&front2.base_url, &token, "fleet", "r2", 2)
            .await
            .expect("runner 2"),
    ];
    let (id, tool_use_id, mut seen) = planned(&front1, "fix the login bug").await;
    let resource = front1.session(&id).await.expect("resource");
    let holder = resource["runner"].as_str().unwrap_or_default().to_owned();
    let victim = runners
        .iter()
        .position(|r| r.lease_name == holder)
        .unwrap_or_else(|| panic!("no runner holds {id}: {resource}"));
    // The front the killed runner was not linked to takes the decision.
    let other = if victim == 0 { &front2 } else { &front1 };
    runners[victim].kill9().await.expect("kill -9");
    let killed_at = now_ms();

    let code = other
        .decide(
            &id,
            &tool_use_id,
            json!({"decision": "reject", "feedback": "Also cover the empty password."}),
        )
        .await
        .expect("decide");
    assert_eq!(code, 200);
    let bound = Duration::from_secs(LEASE_SECONDS + 10);
    let revised = tokio::time::timeout(
        bound,
        other.wait_for(&id, &mut seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != tool_use_id)
        }),
    )
    .await;
    let logs = || {
        runners
            .iter()
            .map(RunnerProcess::log)
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    match revised {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => panic!("no revised plan: {error}\n{}", logs()),
        Err(_) => panic!(
            "no answer within the lease plus 10 s ({bound:?})\n{}",
            logs()
        ),
    }
    let survivor = &runners[1 - victim];
    let resource = other.session(&id).await.expect("resource");
    assert_eq!(
        resource["runner"],
        survivor.lease_name.as_str(),
        "{resource}"
    );
    assert_log_whole(other, &id).await;
    let dead = agents_by_session(
        &read_ledger(&runners[victim].data_dir).expect("ledger"),
        killed_at,
    );
    let alive = agents_by_session(&read_ledger(&survivor.data_dir).expect("ledger"), i64::MAX);
    assert!(
        dead.contains_key(&id) && alive.contains_key(&id),
        "both ran {id}"
    );
    assert_never_two_agents(&[dead, alive]);
}

//! Parking: an agent waiting on a person gives its sandbox up after a grace period, and the
//! decision or message that answers it queues the session for any runner, which resumes it
//! from the log. Capacity counts working agents only.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{agent_server_with, is_plan, planner, status, wait_for, wait_gone};
use crate::support::TestServer;

/// Until the session's resource says it is parked (bounded).
async fn wait_parked(server: &TestServer, token: &str, id: &str) -> Value {
    let parked = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let resource = status(server, token, id).await;
            if resource["parked"] == true {
                return resource;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    parked.expect("the session is parked")
}

#[tokio::test]
async fn sessions_waiting_for_decisions_free_their_slots_and_resume_on_the_decision() {
    let (server, orchestrator) = agent_server_with(Arc::new(planner()), |s| {
        s.max_running = 1;
        s.park_after = Duration::from_millis(300);
        s.execute = false;
    })
    .await;
    let token = server.user("a").await;
    // Three sessions on one slot: each reaches its plan because the one before it parked.
    let mut ids = Vec::new();
    for n in 0..3 {
        let session = server
            .session(&token, &format!("fix the login bug #{n}"))
            .await;
        ids.push(session["id"].as_str().expect("id").to_owned());
    }
    for id in &ids {
        wait_for(&server, &token, id, is_plan("plan1")).await;
        let resource = wait_parked(&server, &token, id).await;
        assert_eq!(resource["session_status"], "requires_action", "{resource}");
        assert_eq!(resource["phase"], "plan_ready", "{resource}");
        assert!(
            resource.get("runner").is_none(),
            "a parked session holds no runner: {resource}"
        );
    }
    for id in &ids {
        wait_gone(&orchestrator, id).await;
    }
    assert_eq!(
        orchestrator.live_count(),
        0,
        "no sandbox is held for waiting sessions"
    );

    // A rejection queues the session; the resumed agent revises its plan.
    let path = format!("/v1/sessions/{}/plans/plan1/decision", ids[1]);
    let body = json!({"decision": "reject", "feedback": "Cover the empty password too."});
    let (code, _) = server.post(&path, &token, &body).await;
    assert_eq!(code, 200);
    let events = wait_for(&server, &token, &ids[1], is_plan("plan2")).await;
    let after_decision: Vec<_> = events
        .iter()
        .skip_while(|e| !is_plan("plan1")(e))
        .filter(|e| matches!(&e.body, ultraplan_protocol::events::EventBody::System(s) if s.subtype == "resumed"))
        .collect();
    assert!(
        after_decision.is_empty(),
        "unparking is not a crash recovery: {after_decision:?}"
    );
    let resource = wait_parked(&server, &token, &ids[1]).await;
    assert_eq!(resource["phase"], "plan_ready");
    let all = wait_for(&server, &token, &ids[1], |_| true).await;
    let ids_in_log: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(
        ids_in_log,
        (1..=ids_in_log.len() as i64).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_message_arriving_as_the_agent_parks_is_never_lost() {
    // Parking at once: every wait races the next message, which must reach an agent.
    let (server, _orchestrator) = agent_server_with(Arc::new(planner()), |s| {
        s.park_after = Duration::ZERO;
        s.execute = false;
    })
    .await;
    let token = server.user("a").await;
    let session = server.session(&token, "fix the login bug").await;
    let id = session["id"].as_str().expect("id").to_owned();
    wait_for(&server, &token, &id, is_plan("plan1")).await;
    let path = format!("/v1/sessions/{id}/plans/plan1/decision");
    let body = json!({"decision": "reject", "feedback": "Smaller steps, please."});
    assert_eq!(server.post(&path, &token, &body).await.0, 200);
    wait_for(&server, &token, &id, is_plan("plan2")).await;
    let path = format!("/v1/sessions/{id}/plans/plan2/decision");
    assert_eq!(server.post(&path, &token, &body).await.0, 200);
    wait_for(&server, &token, &id, is_plan("plan3")).await;
}

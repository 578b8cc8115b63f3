//! Plan decisions over HTTP, read back by the client's scanner.

use serde_json::{Value, json};
use ultraplan_protocol::api::EventsPage;
use ultraplan_protocol::{ExitPlanModeScanner, ScanResult};

use crate::support::{Backend, TestServer, both, exit_plan_mode};

async fn events_after(server: &TestServer, token: &str, id: &str, after: i64) -> EventsPage {
    let (status, body) = server
        .get(&format!("/v1/sessions/{id}/events?after_id={after}"), token)
        .await;
    assert_eq!(status, 200);
    serde_json::from_value(body).expect("page")
}

/// What the client's poll loop does: page from the last seen id, feed the scanner.
struct Poller {
    seen: i64,
    scanner: ExitPlanModeScanner,
}

impl Poller {
    async fn scan(&mut self, server: &TestServer, token: &str, id: &str) -> ScanResult {
        let page = events_after(server, token, id, self.seen).await;
        self.seen = page.last_id.unwrap_or(self.seen);
        self.scanner.ingest(&page.data).expect("scan")
    }
}

both!(reject_revise_approve_edited, |backend| async move {
    let server = TestServer::start(backend).await;
    let token = server.user("a").await;
    let session = server.session(&token, "fix auth").await;
    let id = session["id"].as_str().expect("id");
    let mut poller = Poller {
        seen: 0,
        scanner: ExitPlanModeScanner::new(),
    };
    assert_eq!(
        poller.scan(&server, &token, id).await,
        ScanResult::Unchanged
    );

    server
        .agent_says(id, &[exit_plan_mode("p1", "# Plan v1")])
        .await;
    let (_, resource) = server.get(&format!("/v1/sessions/{id}"), &token).await;
    assert_eq!(resource["session_status"], "requires_action");
    assert_eq!(resource["phase"], "plan_ready");
    assert_eq!(poller.scan(&server, &token, id).await, ScanResult::Pending);

    let decide = format!("/v1/sessions/{id}/plans/p1/decision");
    let feedback = "Split step 2 <b>and</b> add tests \u{1F9EA}";
    let (status, plan) = server
        .post(
            &decide,
            &token,
            &json!({"decision":"reject","feedback":feedback}),
        )
        .await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(
        (plan["status"].as_str(), plan["revision"].as_u64()),
        (Some("rejected"), Some(1))
    );
    let page = events_after(&server, &token, id, poller.seen).await;
    let result = &page.data[0].body.tool_results()[0];
    assert_eq!(
        (result.1.as_str(), result.2),
        (feedback, true),
        "feedback verbatim, is_error"
    );
    assert_eq!(
        poller.scan(&server, &token, id).await,
        ScanResult::Rejected { id: "p1".into() }
    );
    assert_eq!(poller.scanner.rejection_count(), 1);

    // Repeating the same decision is harmless; a different one conflicts.
    let (status, _) = server
        .post(
            &decide,
            &token,
            &json!({"decision":"reject","feedback":feedback}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = server
        .post(&decide, &token, &json!({"decision":"approve"}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("decision_conflict"))
    );

    server
        .agent_says(id, &[exit_plan_mode("p2", "# Plan v2")])
        .await;
    assert_eq!(poller.scan(&server, &token, id).await, ScanResult::Pending);
    let edited = "# Plan v2\n\n1. edited by the reviewer";
    let (status, plan) = server
        .post(
            &format!("/v1/sessions/{id}/plans/p2/decision"),
            &token,
            &json!({"decision":"approve","plan":edited}),
        )
        .await;
    assert_eq!((status, plan["revision"].as_u64()), (200, Some(2)));
    assert_eq!(
        poller.scan(&server, &token, id).await,
        ScanResult::Approved {
            plan: edited.into(),
            edited: true
        }
    );
    let (_, plans) = server
        .get(&format!("/v1/sessions/{id}/plans"), &token)
        .await;
    let statuses: Vec<&str> = plans
        .as_array()
        .expect("plans")
        .iter()
        .filter_map(|p| p["status"].as_str())
        .collect();
    assert_eq!(statuses, vec!["rejected", "approved"]);
    assert_eq!(
        server
            .state
            .core
            .store
            .count_telemetry("approved")
            .await
            .expect("count"),
        1
    );
});

#[tokio::test]
async fn teleport_carries_the_sentinel_and_the_plan() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let session = server.session(&token, "x").await;
    let id = session["id"].as_str().expect("id");
    server
        .agent_says(id, &[exit_plan_mode("p1", "# Local plan\n1. do it")])
        .await;
    let (status, plan) = server
        .post(
            &format!("/v1/sessions/{id}/plans/p1/decision"),
            &token,
            &json!({"decision":"teleport"}),
        )
        .await;
    assert_eq!((status, plan["status"].as_str()), (200, Some("teleported")));
    let page = events_after(&server, &token, id, 0).await;
    let last = page.data.last().expect("event");
    let (_, text, is_error) = last.body.tool_results().remove(0);
    assert!(is_error);
    assert_eq!(text, "__ULTRAPLAN_TELEPORT_LOCAL__\n# Local plan\n1. do it");
    let mut scanner = ExitPlanModeScanner::new();
    assert_eq!(
        scanner.ingest(&page.data).expect("scan"),
        ScanResult::Teleport {
            plan: "# Local plan\n1. do it".into()
        }
    );
}

#[tokio::test]
async fn bad_decisions_get_reasons() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let session = server.session(&token, "x").await;
    let id = session["id"].as_str().expect("id");
    server
        .agent_says(id, &[exit_plan_mode("p1", "# Plan")])
        .await;
    let cases: [(&str, Value, u16, &str); 5] = [
        (
            "p1",
            json!({"decision":"reject","feedback":"  "}),
            400,
            "feedback_required",
        ),
        (
            "p1",
            json!({"decision":"approve","plan":""}),
            400,
            "empty_plan",
        ),
        ("p1", json!({"decision":"maybe"}), 400, "invalid_request"),
        (
            "nope",
            json!({"decision":"approve"}),
            400,
            "no_pending_plan",
        ),
        ("p1", json!({"decision":"reject"}), 400, "invalid_request"),
    ];
    for (plan, body, status, code) in cases {
        let (got, resp) = server
            .post(
                &format!("/v1/sessions/{id}/plans/{plan}/decision"),
                &token,
                &body,
            )
            .await;
        assert_eq!(
            (got, resp["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}"
        );
    }
    server
        .post(&format!("/v1/sessions/{id}/archive"), &token, &json!({}))
        .await;
    let (status, resp) = server
        .post(
            &format!("/v1/sessions/{id}/plans/p1/decision"),
            &token,
            &json!({"decision":"approve"}),
        )
        .await;
    assert_eq!(
        (status, resp["error"]["code"].as_str()),
        (409, Some("session_archived"))
    );
}

both!(
    concurrent_http_decisions_append_one_result,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let token = server.user("a").await;
        let session = server.session(&token, "x").await;
        let id = session["id"].as_str().expect("id").to_owned();
        server
            .agent_says(&id, &[exit_plan_mode("p1", "# Plan")])
            .await;
        let bodies = [
            json!({"decision":"approve"}),
            json!({"decision":"teleport"}),
            json!({"decision":"reject","feedback":"no"}),
        ];
        let mut requests = Vec::new();
        for i in 0..9 {
            let req = server
                .http
                .post(server.url(&format!("/v1/sessions/{id}/plans/p1/decision")))
                .bearer_auth(&token)
                .json(&bodies[i % 3])
                .send();
            requests.push(tokio::spawn(req));
        }
        let mut statuses = Vec::new();
        for r in requests {
            statuses.push(r.await.expect("task").expect("response").status().as_u16());
        }
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 409),
            "{statuses:?}"
        );
        assert!(statuses.contains(&409), "{statuses:?}");
        let page = events_after(&server, &token, &id, 0).await;
        let results = page
            .data
            .iter()
            .filter(|e| !e.body.tool_results().is_empty())
            .count();
        assert_eq!(results, 1, "exactly one decision reached the log");
    }
);

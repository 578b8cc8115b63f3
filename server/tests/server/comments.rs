//! Inline comments on plan passages over HTTP: added to pending plans by their owner only,
//! quoting the plan verbatim, carried to the agent by a rejection, addressed by the next
//! revision and reopened onto it.

use serde_json::{Value, json};
use ultraplan_protocol::api::EventsPage;
use ultraplan_protocol::comments::ADDRESSED_REQUEST;
use ultraplan_protocol::events::{ContentBlock, EventBody};

use crate::support::{TestServer, both, exit_plan_mode};

const PLAN: &str = "# Plan\n\nKeep it small.\n\n## Steps\n\n1. Add the table.\n2. Wire the API.\n";

async fn last_tool_result(server: &TestServer, token: &str, id: &str) -> (String, bool) {
    let (status, page) = server
        .get(&format!("/v1/sessions/{id}/events?after_id=0"), token)
        .await;
    assert_eq!(status, 200);
    let page: EventsPage = serde_json::from_value(page).expect("page");
    let last = page.data.last().expect("events");
    let (_, text, is_error) = last.body.tool_results().remove(0);
    (text.to_owned(), is_error)
}

fn states(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .expect("list")
        .iter()
        .map(|c| {
            let quote = c["quote"].as_str().expect("quote").to_owned();
            (quote, c["state"].as_str().expect("state").to_owned())
        })
        .collect()
}

fn pair(quote: &str, state: &str) -> (String, String) {
    (quote.to_owned(), state.to_owned())
}

both!(
    a_rejection_carries_comments_and_the_next_revision_addresses_them,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let token = server.user("a").await;
        let session = server.session(&token, "plan it").await;
        let id = session["id"].as_str().expect("id");
        server.agent_says(id, &[exit_plan_mode("p1", PLAN)]).await;
        let comments = format!("/v1/sessions/{id}/plans/p1/comments");

        let mut ids = Vec::new();
        for (quote, body) in [
            ("Add the table.", "Which migration number?"),
            ("Keep it small.", "Say what is out of scope."),
        ] {
            let (status, c) = server
                .post(&comments, &token, &json!({"quote": quote, "body": body}))
                .await;
            assert_eq!(status, 201, "{c}");
            assert_eq!(
                (c["state"].as_str(), c["author"].as_str()),
                (Some("open"), Some("a"))
            );
            ids.push(c["id"].as_str().expect("id").to_owned());
        }
        let (status, list) = server.get(&comments, &token).await;
        assert_eq!(status, 200);
        assert_eq!(list[0]["heading_path"], json!(["Plan", "Steps"]));
        assert_eq!(list[1]["heading_path"], json!(["Plan"]));
        assert_eq!(
            states(&list),
            vec![
                pair("Add the table.", "open"),
                pair("Keep it small.", "open")
            ]
        );

        let reject = json!({"decision": "reject", "feedback": "", "comment_ids": ids});
        let decide = format!("/v1/sessions/{id}/plans/p1/decision");
        let (status, plan) = server.post(&decide, &token, &reject).await;
        assert_eq!(
            (status, plan["status"].as_str()),
            (200, Some("rejected")),
            "{plan}"
        );
        assert_eq!(plan["decision"]["comment_ids"], json!(ids));
        let want = format!(
            "Comments on the plan:\n\
             1. [{}] On \"Add the table.\" (under Plan › Steps):\n   Which migration number?\n\
             2. [{}] On \"Keep it small.\" (under Plan):\n   Say what is out of scope.\n\n\
             {ADDRESSED_REQUEST}",
            ids[0], ids[1]
        );
        assert_eq!(
            last_tool_result(&server, &token, id).await,
            (want.to_owned(), true)
        );
        // The same decision again stands; the plan takes no more comments.
        let (status, _) = server.post(&decide, &token, &reject).await;
        assert_eq!(status, 200);
        let (status, body) = server
            .post(
                &comments,
                &token,
                &json!({"quote": "Add the table.", "body": "late"}),
            )
            .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (409, Some("plan_not_pending"))
        );

        // Revision 2 arrives: the agent says it addressed the first comment (and names an id
        // that is no comment of revision 1, which counts for nothing); the second stays open
        // and is reopened.
        let addressed = json!([ids[0], "cmt_elsewhere", ids[0]]);
        server
            .agent_says(
                id,
                &[EventBody::assistant(vec![ContentBlock::tool_use(
                    "p2",
                    "ExitPlanMode",
                    json!({
                        "plan": "# Plan\n\n## Steps\n\n1. Add table 0009.\n",
                        "addressed_comment_ids": addressed,
                    }),
                )])],
            )
            .await;
        let (_, list) = server.get(&comments, &token).await;
        assert_eq!(
            states(&list),
            vec![
                pair("Add the table.", "addressed"),
                pair("Keep it small.", "open")
            ]
        );
        assert_eq!(list[0]["addressed_by"], "agent");
        assert!(list[1].get("addressed_by").is_none(), "{list}");
        let reopen = format!("{comments}/{}/reopen", ids[1]);
        let (status, carried) = server.post(&reopen, &token, &json!({})).await;
        assert_eq!(status, 201, "{carried}");
        assert_eq!(
            (
                carried["tool_use_id"].as_str(),
                carried["reopened_from"].as_str()
            ),
            (Some("p2"), Some(ids[1].as_str()))
        );
        let (status, body) = server.post(&reopen, &token, &json!({})).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("comment_already_reopened"))
        );
        let (_, list) = server.get(&comments, &token).await;
        assert_eq!(
            states(&list),
            vec![
                pair("Add the table.", "addressed"),
                pair("Keep it small.", "reopened")
            ]
        );
        let (_, list2) = server
            .get(&format!("/v1/sessions/{id}/plans/p2/comments"), &token)
            .await;
        assert_eq!(states(&list2), vec![pair("Keep it small.", "open")]);

        // Feedback and a carried-over comment together.
        let carried_id = carried["id"].as_str().expect("id");
        let (status, _) = server
            .post(
                &format!("/v1/sessions/{id}/plans/p2/decision"),
                &token,
                &json!({"decision": "reject", "feedback": "Nearly.", "comment_ids": [carried_id]}),
            )
            .await;
        assert_eq!(status, 200);
        let want = format!(
            "Nearly.\n\nComments on the plan:\n\
             1. [{carried_id}] On \"Keep it small.\" (under Plan):\n   Say what is out of scope.\n\n\
             {ADDRESSED_REQUEST}"
        );
        assert_eq!(
            last_tool_result(&server, &token, id).await,
            (want.to_owned(), true)
        );
    }
);

both!(comments_are_checked_and_owner_only, |backend| async move {
    let server = TestServer::start(backend).await;
    let token = server.user("a").await;
    let other = server.user("b").await;
    let session = server.session(&token, "plan it").await;
    let id = session["id"].as_str().expect("id");
    server.agent_says(id, &[exit_plan_mode("p1", PLAN)]).await;
    let comments = format!("/v1/sessions/{id}/plans/p1/comments");
    let long = "x".repeat(4001);
    let cases: [(&str, Value, u16, &str); 6] = [
        (
            "p1",
            json!({"quote": "Add the tables", "body": "x"}),
            400,
            "quote_not_in_plan",
        ),
        (
            "p1",
            json!({"quote": "Add the table.", "body": " "}),
            400,
            "comment_body_required",
        ),
        (
            "p1",
            json!({"quote": "Add the table.", "body": long}),
            400,
            "comment_too_long",
        ),
        (
            "p1",
            json!({"quote": "", "body": "x"}),
            400,
            "quote_required",
        ),
        ("p1", json!({"body": "x"}), 400, "invalid_request"),
        (
            "nope",
            json!({"quote": "Add", "body": "x"}),
            404,
            "not_found",
        ),
    ];
    for (plan, body, status, code) in cases {
        let path = format!("/v1/sessions/{id}/plans/{plan}/comments");
        let (got, resp) = server.post(&path, &token, &body).await;
        assert_eq!(
            (got, resp["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}"
        );
    }
    // Another user sees no such session, to read or to write.
    let (status, _) = server.get(&comments, &other).await;
    assert_eq!(status, 404);
    let (status, _) = server
        .post(
            &comments,
            &other,
            &json!({"quote": "Add the table.", "body": "x"}),
        )
        .await;
    assert_eq!(status, 404);
    let (_, list) = server.get(&comments, &token).await;
    assert_eq!(list, json!([]));

    // At most 50 comments per plan.
    for n in 0..50 {
        let (status, _) = server
            .post(
                &comments,
                &token,
                &json!({"quote": "Add the table.", "body": format!("c{n}")}),
            )
            .await;
        assert_eq!(status, 201);
    }
    let (status, resp) = server
        .post(
            &comments,
            &token,
            &json!({"quote": "Add the table.", "body": "one more"}),
        )
        .await;
    assert_eq!(
        (status, resp["error"]["code"].as_str()),
        (400, Some("too_many_comments"))
    );

    // A rejection may only name comments on its plan, and needs feedback or comments.
    let decide = format!("/v1/sessions/{id}/plans/p1/decision");
    let cases = [
        (
            json!({"decision": "reject", "feedback": "", "comment_ids": ["cmt_nope"]}),
            "unknown_comment",
        ),
        (
            json!({"decision": "reject", "feedback": " ", "comment_ids": []}),
            "feedback_required",
        ),
    ];
    for (body, code) in cases {
        let (status, resp) = server.post(&decide, &token, &body).await;
        assert_eq!(
            (status, resp["error"]["code"].as_str()),
            (400, Some(code)),
            "{body}"
        );
    }
    // Old clients' rejections still work exactly as before.
    let (status, _) = server
        .post(
            &decide,
            &token,
            &json!({"decision": "reject", "feedback": "no"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        last_tool_result(&server, &token, id).await,
        ("no".to_owned(), true)
    );
});

both!(concurrent_comments_stop_at_the_cap, |backend| async move {
    let server = TestServer::start(backend).await;
    let token = server.user("a").await;
    let session = server.session(&token, "plan it").await;
    let id = session["id"].as_str().expect("id").to_owned();
    server.agent_says(&id, &[exit_plan_mode("p1", PLAN)]).await;
    let url = server.url(&format!("/v1/sessions/{id}/plans/p1/comments"));
    let mut requests = Vec::new();
    for n in 0..60 {
        let req = server
            .http
            .post(&url)
            .bearer_auth(&token)
            .json(&json!({"quote": "Add the table.", "body": format!("c{n}")}))
            .send();
        requests.push(tokio::spawn(req));
    }
    let mut created = 0;
    for r in requests {
        let status = r.await.expect("task").expect("response").status().as_u16();
        assert!(status == 201 || status == 400, "{status}");
        created += usize::from(status == 201);
    }
    assert_eq!(created, 50);
    let (_, list) = server
        .get(&format!("/v1/sessions/{id}/plans/p1/comments"), &token)
        .await;
    assert_eq!(list.as_array().expect("list").len(), 50);
});

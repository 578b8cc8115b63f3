//! Inline plan comments through the real server binary, a real agent in bwrap and the fake
//! Anthropic server: two comments on passages of the plan, a rejection naming them, and the
//! model's next request carries both with their ids and quotes in the ExitPlanMode
//! tool_result. The model's revision says it addressed the first (and names an id that is no
//! comment of the plan): the API shows the first addressed by the agent, the second open.

use serde_json::json;
use ultraplan_protocol::comments::{ADDRESSED_REQUEST, listed_comment_ids};
use ultraplan_tests::fake_models::{FakeAnthropic, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::{ServerProcess, plan_call};

const PLAN_V1: &str = "# Plan\n\n## Steps\n\n1. Reject empty passwords in src/auth.rs\n\
2. Log failed logins\n\n## Risks\n\nNone known.\n";
const PLAN_V2: &str = "# Plan\n\n## Steps\n\n1. Reject empty passwords in src/auth.rs\n";

fn script() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        let last = req.tool_results().last().map(|r| r.text.clone());
        match last {
            Some(text) if text.contains("Comments on the plan:") => {
                let listed = listed_comment_ids(&text);
                let first = listed.first().cloned().unwrap_or_default();
                Reply::tool_use(
                    "ExitPlanMode",
                    json!({"plan": PLAN_V2, "addressed_comment_ids": [first, "cmt_not_on_this_plan"]}),
                )
            }
            _ => Reply::exit_plan_mode(PLAN_V1),
        }
    })
}

#[tokio::test]
async fn the_model_receives_the_comments_with_their_quotes() {
    let fake = FakeAnthropic::start(script()).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
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
    let comments = format!("/v1/sessions/{id}/plans/{t1}/comments");
    let mut ids = Vec::new();
    for (quote, body) in [
        ("Log failed logins", "Without the password, please."),
        ("None known.", "What about existing sessions?"),
    ] {
        let (status, c) = server
            .post(&comments, &json!({"quote": quote, "body": body}))
            .await
            .expect("comment");
        assert_eq!(status, 201, "{c}");
        ids.push(c["id"].as_str().expect("id").to_owned());
    }
    let code = server
        .decide(
            &id,
            &t1,
            json!({"decision": "reject", "feedback": "", "comment_ids": ids}),
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

    let want = format!(
        "Comments on the plan:\n\
         1. [{}] On \"Log failed logins\" (under Plan › Steps):\n   Without the password, please.\n\
         2. [{}] On \"None known.\" (under Plan › Risks):\n   What about existing sessions?\n\n\
         {ADDRESSED_REQUEST}",
        ids[0], ids[1]
    );
    let requests = fake.requests();
    let got = requests
        .iter()
        .filter_map(RecordedRequest::last_tool_result)
        .find(|r| r.is_error);
    let got = got.expect("the model saw the rejection");
    assert_eq!(got.text, want);

    // Revision 2 says the first comment is addressed: the second stays open.
    let (_, list) = server.get(&comments).await.expect("list");
    let states: Vec<(&str, &str, Option<&str>)> = list
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| {
            let by = c.get("addressed_by").and_then(|b| b.as_str());
            Some((c["id"].as_str()?, c["state"].as_str()?, by))
        })
        .collect();
    assert_eq!(
        states,
        [
            (ids[0].as_str(), "addressed", Some("agent")),
            (ids[1].as_str(), "open", None)
        ],
        "revision 2 is {t2}"
    );
}

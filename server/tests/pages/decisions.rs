//! Teleport, answering a question and stopping, in a browser; each checked on the page and in
//! the event log.

use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, EventBody};
use ultraplan_protocol::session::SessionStatus;

use crate::browser::Browser;
use crate::flow::PLAN_V1;
use crate::support::{Server, User, exit_plan_mode, results};

async fn open(server: &Server, user: &User, id: &str) -> Browser {
    let (_, link) = server.login_link(user, &format!("/sessions/{id}")).await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser.until_text("#live", "Live").await;
    browser
}

/// What the terminal's poll loop does.
async fn terminal_polls(server: &Server, user: &User, id: &str) {
    let r = server
        .http
        .get(server.url(&format!("/v1/sessions/{id}/events?after_id=0")))
        .bearer_auth(&user.token)
        .send()
        .await
        .expect("poll");
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn teleport_is_offered_while_the_terminal_polls() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Rename the config loader").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let browser = open(&server, &alice, &id).await;
    browser.until_text("#plan-body", "Steps").await;
    assert_eq!(
        browser
            .js("return !!document.querySelector('#teleport')")
            .await,
        json!(false)
    );

    terminal_polls(&server, &alice, &id).await;
    browser
        .until(
            "the teleport button",
            "return !!document.querySelector('#teleport')",
        )
        .await;
    browser.click("#teleport").await;
    browser
        .until_text("#notice", "sent back to your terminal")
        .await;
    browser
        .until_text("#plan-status", "Sent back to the terminal")
        .await;
    assert_eq!(
        browser
            .js("return !!document.querySelector('#decide')")
            .await,
        json!(false)
    );
    let (tool, text, is_error) = results(&server.events(&id).await).pop().expect("decision");
    assert_eq!(tool, "plan-1");
    assert!(
        is_error && text.starts_with("__ULTRAPLAN_TELEPORT_LOCAL__\n# Fix the login"),
        "{text}"
    );
    browser.close().await;
}

#[tokio::test]
async fn a_question_is_answered_from_the_page() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Migrate sessions to Redis").await;
    let browser = open(&server, &alice, &id).await;
    let ask = ContentBlock::tool_use(
        "ask-1",
        "AskUserQuestion",
        json!({"question": "Should existing sessions survive the migration?", "options": ["Keep them", "Log everyone out"]}),
    );
    server
        .agent_says(&id, &[EventBody::assistant(vec![ask])])
        .await;
    browser
        .until_text("#question", "Should existing sessions survive")
        .await;
    browser
        .until_text("#question .choices", "Log everyone out")
        .await;
    browser.screenshot("session-question-1280", 1280).await;
    browser.screenshot("session-question-375", 375).await;
    browser
        .client
        .set_window_size(1280, 900)
        .await
        .expect("resize");

    browser
        .type_into("#answer", "Keep them: copy them over in a background job.")
        .await;
    browser.click("#send-answer").await;
    browser.until_text("#notice", "Answer sent").await;
    browser
        .until(
            "the question to go",
            "return !document.querySelector('#question')",
        )
        .await;
    browser
        .until_text("#res-ask-1", "Keep them: copy them over")
        .await;
    let answers = results(&server.events(&id).await);
    let want = (
        "ask-1".to_owned(),
        "Keep them: copy them over in a background job.".to_owned(),
        false,
    );
    assert!(answers.contains(&want), "{answers:?}");

    // A suggested answer is one click.
    let ask = ContentBlock::tool_use(
        "ask-2",
        "AskUserQuestion",
        json!({"question": "Which store?", "options": ["Redis", "Postgres"]}),
    );
    server
        .agent_says(&id, &[EventBody::assistant(vec![ask])])
        .await;
    browser.until_text("#question", "Which store?").await;
    browser.click("#question button[value=Postgres]").await;
    browser
        .until(
            "the second question to go",
            "return !document.querySelector('#question')",
        )
        .await;
    let answers = results(&server.events(&id).await);
    assert!(
        answers.contains(&("ask-2".into(), "Postgres".into(), false)),
        "{answers:?}"
    );
    browser.close().await;
}

#[tokio::test]
async fn a_session_is_stopped_after_confirmation() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Try a risky refactor").await;
    let browser = open(&server, &alice, &id).await;
    browser.click(".stop > summary").await;
    browser
        .until(
            "the confirmation",
            "return document.querySelector('.stop').open === true",
        )
        .await;
    assert_eq!(
        server.status(&id).await,
        SessionStatus::Running,
        "nothing happens before confirming"
    );
    browser.click("#confirm-stop").await;
    browser.until_text("#notice", "Session stopped").await;
    browser.until_text("#pill", "archived").await;
    assert_eq!(
        browser.js("return !!document.querySelector('.stop')").await,
        json!(false)
    );
    assert_eq!(server.status(&id).await, SessionStatus::Archived);
    let events = server.events(&id).await;
    let stopped = events
        .iter()
        .any(|e| matches!(&e.body, EventBody::System(s) if s.subtype == "archived"));
    assert!(stopped, "{events:?}");
    browser.close().await;
}

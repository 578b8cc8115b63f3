//! The review flow in a browser: log in through a one-time link, watch the plan arrive live,
//! reject it with feedback, see revision 2 with its diff, approve an edited plan. Screenshots
//! at 1280 px and 375 px land in `target/screenshots/`.

use serde_json::{Value, json};
use ultraplan_protocol::events::{ContentBlock, EventBody};

use crate::browser::Browser;
use crate::support::{Server, exit_plan_mode, results};

pub const PLAN_V1: &str = "# Fix the login redirect loop\n\n\
The session cookie is set after the redirect, so `/login` sends the user back to itself.\n\n\
## Steps\n\n1. Set the cookie in `src/auth/session.rs` **before** redirecting.\n\
2. Drop the duplicate guard in `src/routes/login.rs`.\n\n## Risks\n\n- Existing sessions stay valid.\n";

pub const PLAN_V2: &str = "# Fix the login redirect loop\n\n\
The session cookie is set after the redirect, so `/login` sends the user back to itself.\n\n\
## Steps\n\n1. Set the cookie in `src/auth/session.rs` **before** redirecting.\n\
2. Drop the duplicate guard in `src/routes/login.rs`.\n\
3. Add a regression test in `tests/login.rs` that follows the redirects.\n\n\
## Risks\n\n- Existing sessions stay valid.\n- The test needs the fake clock.\n";

const EDITED: &str = "# Fix the login redirect loop\n\n## Steps\n\n1. Set the cookie before redirecting.\n2. Add the regression test.";

/// Record Content-Security-Policy violations from now on in `window.__csp`.
pub const WATCH_CSP: &str = "window.__csp = []; document.addEventListener('securitypolicyviolation', \
    function (e) { window.__csp.push(e.violatedDirective + ' ' + e.blockedURI); }); return true";

pub fn body(value: Value) -> EventBody {
    serde_json::from_value(value).expect("event body")
}

/// Some exploration: text, a todo list, a subagent with its own tool call, and its report.
pub fn exploration() -> Vec<EventBody> {
    vec![
        EventBody::assistant(vec![
            ContentBlock::text(
                "I'll trace the login flow first, then check where the cookie is set.",
            ),
            ContentBlock::tool_use(
                "todo-1",
                "TodoWrite",
                json!({"todos":[
                {"content":"Trace the login redirect","status":"completed"},
                {"content":"Find where the cookie is set","status":"in_progress"},
                {"content":"Write the plan","status":"pending"}]}),
            ),
            ContentBlock::tool_use(
                "task-1",
                "Task",
                json!({"subagent_type":"explore","description":"Find every redirect to /login"}),
            ),
        ]),
        body(
            json!({"type":"assistant","parent_tool_use_id":"task-1","message":{"role":"assistant","content":[
            {"type":"tool_use","id":"grep-1","name":"Grep","input":{"pattern":"redirect_to\\(\"/login\"","path":"src"}}]}}),
        ),
        body(
            json!({"type":"user","parent_tool_use_id":"task-1","message":{"role":"user","content":[
            {"type":"tool_result","tool_use_id":"grep-1","content":"src/routes/login.rs:42: redirect_to(\"/login\")\nsrc/auth/guard.rs:17: redirect_to(\"/login\")"}]}}),
        ),
        EventBody::tool_result("todo-1", "Todo list updated.", false),
        EventBody::tool_result(
            "task-1",
            "Two redirects: `src/routes/login.rs:42` and `src/auth/guard.rs:17`.",
            false,
        ),
    ]
}

#[tokio::test]
async fn review_a_plan_live_then_reject_and_approve_an_edit() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix the login redirect loop").await;
    server.agent_says(&id, &exploration()).await;
    let (status, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;
    assert_eq!(status, 201, "{link}");

    let browser = Browser::start(1280, 900).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    let here = format!("return location.pathname === '/sessions/{id}' && location.search === ''");
    browser.until("the clean session URL", &here).await;
    assert_eq!(
        browser.js("return document.cookie").await,
        json!(""),
        "session cookie is HttpOnly"
    );
    browser.until_text("#live", "Live").await;
    browser.js(WATCH_CSP).await;
    browser
        .until_text("#timeline", "Find every redirect to /login")
        .await;
    browser
        .until_text("#todo", "Find where the cookie is set")
        .await;

    // The plan arrives while the page is open.
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    browser.until_text("#plan-body h2", "Steps").await;
    browser.until_text("#pill", "◆ ready").await;
    browser.until_text("#timeline", "revision 1").await;
    browser.until_text("#region-side .outline", "Risks").await;
    assert_eq!(
        browser.js("return window.__csp").await,
        json!([]),
        "no CSP violations"
    );
    browser.screenshot("session-plan-1280", 1280).await;
    browser.screenshot("session-plan-375", 375).await;
    browser
        .client
        .set_window_size(1280, 900)
        .await
        .expect("resize");

    // Reject with feedback.
    browser.click("#reject-plan > summary").await;
    browser
        .type_into("#feedback", "Add a regression test first.")
        .await;
    browser.click("#reject").await;
    browser.until_text("#notice", "Feedback sent").await;
    browser.until_text("#plan-status", "Rejected").await;
    let decided = results(&server.events(&id).await);
    assert!(
        decided.contains(&("plan-1".into(), "Add a regression test first.".into(), true)),
        "{decided:?}"
    );

    // Revision 2 arrives live, with a diff against revision 1.
    server
        .agent_says(&id, &[exit_plan_mode("plan-2", PLAN_V2)])
        .await;
    browser.until_text("#review .rev", "revision 2").await;
    browser
        .until_text("#review details.diff .dl.add", "Add a regression test in")
        .await;
    browser
        .until_text("#review details.diff summary", "+2")
        .await;
    browser
        .until_text("#rev-1", "Add a regression test first.")
        .await;
    browser.click("#review details.diff > summary").await;
    browser.screenshot("session-revision-2-1280", 1280).await;
    browser.screenshot("session-revision-2-375", 375).await;
    browser
        .client
        .set_window_size(1280, 900)
        .await
        .expect("resize");

    // Approve an edited plan.
    browser.click("#edit-plan > summary").await;
    browser.type_into("#plan-edit", EDITED).await;
    browser.click("#approve-edited").await;
    browser.until_text("#notice", "Plan approved").await;
    browser.until_text("#plan-status", "Approved").await;
    browser
        .until_text("#plan-body", "Add the regression test.")
        .await;
    let events = server.events(&id).await;
    let (_, text, is_error) = results(&events)
        .into_iter()
        .find(|(t, ..)| t == "plan-2")
        .expect("decision");
    assert!(!is_error);
    assert!(
        text.contains(&format!("## Approved Plan (edited by user):\n{EDITED}")),
        "{text}"
    );
    browser.screenshot("session-approved-1280", 1280).await;
    browser.close().await;
}

#[tokio::test]
async fn the_sessions_list_updates_live() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let quiet = server.session(&alice, "Speed up the test suite").await;
    let id = server.session(&alice, "Fix the login redirect loop").await;
    server
        .agent_says(
            &quiet,
            &[EventBody::assistant(vec![ContentBlock::text("Looking.")])],
        )
        .await;
    let (_, link) = server.login_link(&alice, "/").await;

    let browser = Browser::start(1280, 900).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser
        .until_text("#session-rows", "Speed up the test suite")
        .await;
    browser.until_text("#session-rows", "webapp · main").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    browser.until_text("#session-rows", "◆ ready").await;
    browser.screenshot("sessions-1280", 1280).await;
    browser.screenshot("sessions-375", 375).await;
    browser.close().await;
}

#[tokio::test]
async fn dark_mode_follows_the_system() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix the login redirect loop").await;
    server.agent_says(&id, &exploration()).await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let (_, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;
    let dark = [
        "--force-dark-mode",
        "--blink-settings=preferredColorScheme=0",
    ];
    let browser = Browser::start_with(1280, 900, &dark).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser.until_text("#plan-body", "Steps").await;
    let scheme = "return matchMedia('(prefers-color-scheme: dark)').matches";
    assert_eq!(browser.js(scheme).await, json!(true));
    let background = browser
        .js("return getComputedStyle(document.body).backgroundColor")
        .await;
    assert_eq!(background, json!("rgb(15, 17, 21)"));
    browser.screenshot("session-plan-dark-1280", 1280).await;
    browser.screenshot("session-plan-dark-375", 375).await;
    browser.close().await;
}

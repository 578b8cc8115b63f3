//! Hostile plan, agent and tool text renders inert: no script runs, no handler survives.

use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, EventBody};

use crate::browser::Browser;
use crate::flow::WATCH_CSP;
use crate::support::{Server, exit_plan_mode};

const HOSTILE_PLAN: &str = r#"# Plan <script>window.__pwned = 1</script>

<img src="x" onerror="window.__pwned = 2" id="bad-img">

[click me](javascript:window.__pwned=3) and <a href="JaVaScRiPt:window.__pwned=4">another</a>

<svg onload="window.__pwned = 5"><circle r="5"></circle></svg>

<iframe srcdoc="<script>parent.__pwned = 6</script>"></iframe>

<p style="color: red" onclick="window.__pwned = 7">styled</p>

<details open ontoggle="window.__pwned = 8"><summary>toggle</summary>x</details>

<a href="data:text/html,<script>alert(1)</script>">data link</a>

<form action="https://evil.example/"><input name="q"><button>go</button></form>

## Steps

1. Still readable.
"#;

/// No script ran and nothing executable is left in the page.
const INERT: &str = r#"
    return window.__pwned === undefined
        && document.querySelectorAll('main script, main iframe, main svg, main form[action^="https"], main input[name=q]').length === 0
        && document.querySelectorAll('[onerror], [onload], [onclick], [ontoggle]').length === 0
        && document.querySelectorAll('a[href^="javascript:" i], a[href^="data:" i]').length === 0
        && document.querySelectorAll('#plan-body [style], #timeline [style]').length === 0"#;

fn hostile_agent() -> Vec<EventBody> {
    vec![
        EventBody::assistant(vec![
            ContentBlock::text(
                "Found it <img src=x onerror=\"window.__pwned = 10\"> [x](javascript:window.__pwned=11)",
            ),
            ContentBlock::tool_use(
                "read-1",
                "Read",
                json!({"file_path": "<script>window.__pwned = 12</script>"}),
            ),
        ]),
        EventBody::tool_result(
            "read-1",
            "<script>window.__pwned = 13</script><img src=x onerror=window.__pwned=14>",
            false,
        ),
    ]
}

#[tokio::test]
async fn hostile_text_renders_inert() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server
        .session(&alice, "<img src=x onerror=\"window.__pwned = 9\">")
        .await;
    let (_, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser.until_text("#live", "Live").await;
    browser.js(WATCH_CSP).await;

    // Through the live stream…
    server.agent_says(&id, &hostile_agent()).await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", HOSTILE_PLAN)])
        .await;
    browser.until_text("#plan-body", "Still readable.").await;
    browser.until_text("#timeline", "onerror").await;
    browser.until("the page to stay inert", INERT).await;
    assert_eq!(
        browser.js("return window.__csp").await,
        json!([]),
        "nothing even tried to run"
    );
    assert_eq!(
        browser
            .js("return document.querySelector('h1').textContent")
            .await,
        json!("<img src=x onerror=\"window.__pwned = 9\">")
    );

    // …and rendered by the server.
    browser.client.refresh().await.expect("reload");
    browser.until_text("#plan-body", "Still readable.").await;
    browser.until_text("#live", "Live").await;
    browser
        .until("the reloaded page to stay inert", INERT)
        .await;
    browser.goto(&server.url("/")).await;
    browser.until_text("#session-rows", "onerror").await;
    browser.until("the list to stay inert", INERT).await;
    browser.close().await;
}

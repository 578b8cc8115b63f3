//! Inline comments in a real Chromium: one on a selected passage, one on a block focused
//! with the keyboard; "Request changes" sends both with their quotes in the ExitPlanMode
//! tool_result; revision 2 shows them addressed; the list survives a reload; hostile text is
//! inert. And over plain HTTP: other users get 404, a missing CSRF token 403.

use fantoccini::Locator;
use serde_json::json;
use ultraplan_protocol::comments::ADDRESSED_REQUEST;
use ultraplan_protocol::events::{ContentBlock, EventBody};

use crate::browser::{Browser, WAIT};
use crate::flow::{PLAN_V1, PLAN_V2};
use crate::support::{Server, csrf, exit_plan_mode, results};

const SELECTED: &str = "The session cookie is set after the redirect";
/// A list item as the page shows it, and as the plan's Markdown has it.
const BLOCK: &str = "Set the cookie in src/auth/session.rs before redirecting.";
const BLOCK_SOURCE: &str = "Set the cookie in `src/auth/session.rs` **before** redirecting.";
const HOSTILE: &str = "<img src=x onerror=\"window.pwned=1\"> keep them valid?";

/// Select `text` inside the plan (a range over one text node) and let go of the mouse.
const SELECT: &str = "var want = arguments[0]; var plan = document.getElementById('plan-body'); \
    var walk = document.createTreeWalker(plan, NodeFilter.SHOW_TEXT); var n; \
    while ((n = walk.nextNode())) { var i = n.data.indexOf(want); if (i >= 0) { \
      var r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + want.length); \
      var s = window.getSelection(); s.removeAllRanges(); s.addRange(r); \
      n.parentElement.dispatchEvent(new MouseEvent('mouseup', {bubbles: true})); return true; } } \
    return false;";

async fn comment_count(browser: &Browser) -> u64 {
    let script = "return document.querySelectorAll('#comment-list > li').length";
    browser.js(script).await.as_u64().unwrap_or(0)
}

#[tokio::test]
async fn comments_on_two_passages_reach_the_agent_and_revision_two_shows_them_addressed() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix the login loop").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let (_, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser.until_text("#plan-body", "Steps").await;

    // 1: select a passage with the mouse.
    let selected = browser
        .client
        .execute(SELECT, vec![json!(SELECTED)])
        .await
        .expect("select");
    assert_eq!(selected, json!(true));
    let quote = browser
        .js("return document.getElementById('comment-quote').value")
        .await;
    assert_eq!(quote, json!(SELECTED));
    browser
        .type_into("#comment-body", "Say why the order matters.")
        .await;
    browser.click("#add-comment").await;
    browser.until_text("#notice", "Comment added").await;

    // 2: focus a block with the keyboard and press C.
    let block = browser
        .client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::XPath(&format!(
            "//*[@id='plan-body']//li[normalize-space(.)='{BLOCK}']"
        )))
        .await
        .expect("block");
    assert_eq!(
        block.attr("tabindex").await.expect("attr").as_deref(),
        Some("0")
    );
    block.send_keys("c").await.expect("press C");
    browser
        .until(
            "the body field to take focus",
            "return document.activeElement && document.activeElement.id === 'comment-body'",
        )
        .await;
    let quote = browser
        .js("return document.getElementById('comment-quote').value")
        .await;
    assert_eq!(quote, json!(BLOCK));
    browser.type_into("#comment-body", HOSTILE).await;
    browser.click("#add-comment").await;
    browser
        .until(
            "two comments",
            "return document.querySelectorAll('#comment-list > li').length === 2",
        )
        .await;
    browser
        .until(
            "both passages marked in the plan",
            "return document.querySelectorAll('#plan-body .commented[aria-describedby]').length === 2",
        )
        .await;
    assert_eq!(
        browser.js("return window.pwned === undefined").await,
        json!(true)
    );
    browser.until_text("#comment-list", "onerror=").await;

    // The list survives a reload.
    browser.client.refresh().await.expect("reload");
    browser.until_text("#plan-body", "Steps").await;
    assert_eq!(comment_count(&browser).await, 2);
    browser
        .until_text("#comment-list", "under Fix the login redirect loop › Steps")
        .await;

    let ids = browser
        .js("return Array.from(document.querySelectorAll('#comment-list > li')).map(li => li.id.slice(8))")
        .await;
    let ids: Vec<&str> = ids
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    browser.type_into("#feedback", "Otherwise fine.").await;
    browser.click("#reject").await;
    browser.until_text("#notice", "Feedback sent").await;
    let (tool, text, is_error) = results(&server.events(&id).await).pop().expect("decision");
    let want = format!(
        "Otherwise fine.\n\nComments on the plan:\n\
         1. [{}] On \"{SELECTED}\" (under Fix the login redirect loop):\n   Say why the order matters.\n\
         2. [{}] On \"{BLOCK_SOURCE}\" (under Fix the login redirect loop › Steps):\n   {HOSTILE}\n\n\
         {ADDRESSED_REQUEST}",
        ids[0], ids[1]
    );
    assert_eq!(
        (tool.as_str(), text.as_str(), is_error),
        ("plan-1", want.as_str(), true)
    );

    // Revision 2: the agent says it addressed both comments of revision 1, and one can be
    // reopened.
    let revised = EventBody::assistant(vec![ContentBlock::tool_use(
        "plan-2",
        "ExitPlanMode",
        json!({"plan": PLAN_V2, "addressed_comment_ids": ids}),
    )]);
    server.agent_says(&id, &[revised]).await;
    browser.until_text("#plan-body", "regression test").await;
    browser
        .until(
            "two addressed comments",
            "return document.querySelectorAll('#previous-comments .comment-addressed').length === 2",
        )
        .await;
    browser
        .until_text(
            "#previous-comments",
            "Addressed: the agent says the next revision addresses it",
        )
        .await;
    assert_eq!(comment_count(&browser).await, 0);
    browser.click("#previous-comments form button").await;
    browser.until_text("#notice", "Comment reopened").await;
    assert_eq!(comment_count(&browser).await, 1);
    browser
        .until_text("#comment-list", "reopened from an earlier revision")
        .await;
    browser.close().await;
}

#[tokio::test]
async fn comment_forms_are_owner_only_and_need_the_csrf_token() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let bob = server.user("bob").await;
    let id = server.session(&alice, "Fix the login loop").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let path = format!("/sessions/{id}/plans/plan-1/comments");
    let form = |token: &str| {
        vec![
            ("csrf", token.to_owned()),
            ("quote", BLOCK.to_owned()),
            ("body", "x".to_owned()),
        ]
    };

    let bob_cookie = server.cookie(&bob).await;
    let (_, home) = server.page(&bob_cookie, "/").await;
    let bob_token = csrf(&home);
    let bob_form = form(&bob_token);
    let bob_form: Vec<(&str, &str)> = bob_form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(server.post_form(&bob_cookie, &path, &bob_form).await.0, 404);

    let cookie = server.cookie(&alice).await;
    let no_token: Vec<(&str, &str)> = vec![("quote", BLOCK), ("body", "x")];
    assert_eq!(server.post_form(&cookie, &path, &no_token).await.0, 403);
    let (_, page) = server.page(&cookie, &format!("/sessions/{id}")).await;
    let token = csrf(&page);
    let good = form(&token);
    let good: Vec<(&str, &str)> = good.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (status, location) = server.post_form(&cookie, &path, &good).await;
    assert_eq!(
        (status, location.contains("notice=commented")),
        (303, true),
        "{location}"
    );
    let (_, page) = server.page(&cookie, &format!("/sessions/{id}")).await;
    assert!(
        page.contains("id=\"comment-list\""),
        "the comment is listed"
    );
}

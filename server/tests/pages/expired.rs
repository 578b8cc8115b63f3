//! A plan nobody reviewed before the session ended stays readable on the review page.

use ultraplan_protocol::session::SessionStatus;

use crate::support::{Server, csrf, exit_plan_mode};

#[tokio::test]
async fn an_unreviewed_plan_stays_readable_once_the_session_is_archived() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Harden the login check").await;
    server
        .agent_says(
            &id,
            &[exit_plan_mode("plan-1", "# Plan\n1. Reject empty users")],
        )
        .await;
    let cookie = server.cookie(&alice).await;
    let page = format!("/sessions/{id}");
    let (_, html) = server.page(&cookie, &page).await;
    let token = csrf(&html);
    let stop = [("csrf", token.as_str())];
    let (status, _) = server
        .post_form(&cookie, &format!("/sessions/{id}/stop"), &stop)
        .await;
    assert_eq!(status, 303);
    assert_eq!(server.status(&id).await, SessionStatus::Archived);

    let (status, html) = server.page(&cookie, &page).await;
    assert_eq!(status, 200);
    assert!(html.contains("<li>Reject empty users</li>"), "{html}");
    assert!(
        html.contains("Not reviewed before the session ended"),
        "{html}"
    );
    assert!(html.contains("id=\"plan-kept\""), "{html}");
    assert!(html.contains(&format!("ultraplan pull {id}")), "{html}");
    // Nothing can be decided any more.
    assert!(!html.contains("id=\"approve\""), "{html}");
    assert!(!html.contains("plan-expiry"), "{html}");
}

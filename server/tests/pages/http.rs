//! Pages over plain HTTP: headers, assets, the token form, logout, repeated decisions and
//! the live stream's resume.

use std::time::Duration;

use ultraplan_protocol::events::EventBody;
use ultraplan_server::http::pages::CSP;

use crate::flow::PLAN_V1;
use crate::support::{Server, csrf, encode, exit_plan_mode};

#[tokio::test]
async fn pages_carry_security_headers_and_assets_are_cached() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let cookie = server.cookie(&alice).await;
    let r = server
        .http
        .get(server.url("/"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let h = r.headers();
    assert_eq!(h["content-security-policy"], CSP);
    assert!(
        CSP.contains("script-src 'self'")
            && CSP.contains("frame-ancestors 'none'")
            && CSP.contains("form-action 'self'")
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    let html = r.text().await.expect("body");
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "no inline script or style"
    );
    let css = html
        .split("href=\"/static/")
        .nth(2)
        .and_then(|s| s.split('"').next())
        .expect("css link");
    let asset = server
        .http
        .get(server.url(&format!("/static/{css}")))
        .send()
        .await
        .expect("send");
    assert_eq!(asset.status(), 200);
    assert_eq!(asset.headers()["content-type"], "text/css; charset=utf-8");
    assert_eq!(
        asset.headers()["cache-control"],
        "public, max-age=31536000, immutable"
    );
    let stale = server
        .http
        .get(server.url("/static/0000000000000000/app.css"))
        .send()
        .await
        .expect("send");
    assert_eq!(stale.status(), 404);
}

#[tokio::test]
async fn the_token_form_logs_in_and_logout_ends_the_session() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let r = server
        .http
        .get(server.url("/login?next=/sessions"))
        .send()
        .await
        .expect("send");
    let form_cookie = r.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    assert!(form_cookie.starts_with("ultraplan_login="));
    let token = csrf(&r.text().await.expect("body"));
    let post = |cookie: String, form: Vec<(&'static str, String)>| {
        let body = encode(
            &form
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
        );
        server
            .http
            .post(server.url("/login"))
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let no_cookie = post(
        String::new(),
        vec![("csrf", token.clone()), ("token", alice.token.clone())],
    )
    .await
    .expect("send");
    assert_eq!(no_cookie.status(), 403, "login CSRF");
    let wrong = post(
        form_cookie.clone(),
        vec![("csrf", token.clone()), ("token", "up_00_11".into())],
    )
    .await
    .expect("send");
    assert_eq!(wrong.status(), 401);
    assert!(wrong.text().await.expect("body").contains("not valid"));
    let ok = post(
        form_cookie,
        vec![
            ("csrf", token),
            ("token", alice.token.clone()),
            ("next", "/sessions".into()),
        ],
    )
    .await
    .expect("send");
    assert_eq!(ok.status(), 303);
    assert_eq!(ok.headers()["location"], "/sessions");
    let cookie = ok.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    let (status, home) = server.page(&cookie, "/").await;
    assert_eq!(status, 200);
    assert!(home.contains("alice"));

    let (status, location) = server
        .post_form(&cookie, "/logout", &[("csrf", &csrf(&home))])
        .await;
    assert_eq!((status, location.as_str()), (303, "/login"));
    assert_eq!(
        server.page(&cookie, "/").await.0,
        303,
        "the old cookie no longer works"
    );
}

#[tokio::test]
async fn a_second_decision_shows_what_stands() {
    second_decision(Server::start().await).await;
}

/// The pages' own tables and queries (login links, browser sessions, the list's last results)
/// on the other backend.
#[tokio::test]
async fn pages_work_on_postgres() {
    let server = Server::start_postgres().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix auth on Postgres").await;
    let failed = serde_json::json!({"type":"result","subtype":"error_timeout","is_error":true});
    server
        .agent_says(&id, &[serde_json::from_value(failed).expect("result")])
        .await;
    let cookie = server.cookie(&alice).await;
    let (status, home) = server.page(&cookie, "/").await;
    assert_eq!(status, 200);
    assert!(
        home.contains("Fix auth on Postgres") && home.contains("pill-failed"),
        "{home}"
    );
    second_decision(server).await;
}

async fn second_decision(server: Server) {
    let alice = server.user("reviewer").await;
    let id = server.session(&alice, "Fix auth").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let cookie = server.cookie(&alice).await;
    let token = csrf(&server.page(&cookie, &format!("/sessions/{id}")).await.1);
    let decide = format!("/sessions/{id}/plans/plan-1/decision");
    let approve = [("csrf", token.as_str()), ("decision", "approve")];
    let reject = [
        ("csrf", token.as_str()),
        ("decision", "reject"),
        ("feedback", "no"),
    ];
    let empty = [
        ("csrf", token.as_str()),
        ("decision", "reject"),
        ("feedback", " "),
    ];
    assert!(
        server
            .post_form(&cookie, &decide, &empty)
            .await
            .1
            .contains("notice=feedback_required")
    );
    assert!(
        server
            .post_form(&cookie, &decide, &approve)
            .await
            .1
            .contains("notice=approved")
    );
    assert!(
        server
            .post_form(&cookie, &decide, &approve)
            .await
            .1
            .contains("notice=already_decided")
    );
    let (status, location) = server.post_form(&cookie, &decide, &reject).await;
    assert_eq!(status, 303);
    assert!(location.contains("notice=conflict"), "{location}");
    let (status, page) = server.page(&cookie, &location).await;
    assert_eq!(status, 200);
    assert!(page.contains("A different decision was already taken"));
    assert!(
        page.contains(">Approved</span>"),
        "the standing decision is shown"
    );
    let teleport = [("csrf", token.as_str()), ("decision", "teleport")];
    let (_, location) = server.post_form(&cookie, &decide, &teleport).await;
    assert!(location.contains("notice=terminal_gone"), "{location}");
}

async fn first_frame(response: &mut reqwest::Response) -> String {
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(20), response.chunk())
            .await
            .expect("a frame in time")
            .expect("read")
            .expect("stream open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

#[tokio::test]
async fn the_stream_resumes_after_the_last_event_id() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix auth").await;
    server
        .agent_says(&id, &[EventBody::user_text("first message")])
        .await;
    let cookie = server.cookie(&alice).await;
    let mut r = server
        .http
        .get(server.url(&format!("/sessions/{id}/stream")))
        .header("cookie", &cookie)
        .header("last-event-id", "3")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let frame = first_frame(&mut r).await;
    assert!(
        frame.contains("event: update") && frame.contains("id: 3"),
        "{frame}"
    );
    assert!(
        !frame.contains("first message"),
        "nothing before Last-Event-ID: {frame}"
    );
    server
        .agent_says(&id, &[EventBody::user_text("second message")])
        .await;
    let frame = first_frame(&mut r).await;
    assert!(
        frame.contains("id: 4") && frame.contains("second message"),
        "{frame}"
    );
}

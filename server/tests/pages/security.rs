//! CSRF, ownership, login links and cookies, over plain HTTP.

use ultraplan_protocol::session::SessionStatus;

use crate::flow::PLAN_V1;
use crate::support::{Server, csrf, exit_plan_mode, results};

#[tokio::test]
async fn forms_without_the_right_csrf_token_are_refused() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix auth").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let cookie = server.cookie(&alice).await;
    let (status, html) = server.page(&cookie, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    let token = csrf(&html);
    let decide = format!("/sessions/{id}/plans/plan-1/decision");
    let cases: [(&str, Vec<(&str, &str)>); 4] = [
        ("missing", vec![("decision", "approve")]),
        ("empty", vec![("csrf", ""), ("decision", "approve")]),
        (
            "wrong",
            vec![("csrf", "0123456789abcdef"), ("decision", "approve")],
        ),
        (
            "another session's",
            vec![("csrf", &token[..token.len() - 1]), ("decision", "approve")],
        ),
    ];
    for (what, form) in cases {
        let (status, _) = server.post_form(&cookie, &decide, &form).await;
        assert_eq!(status, 403, "{what} token");
    }
    for path in [
        format!("/sessions/{id}/stop"),
        format!("/sessions/{id}/answer"),
        "/logout".to_owned(),
    ] {
        assert_eq!(server.post_form(&cookie, &path, &[]).await.0, 403, "{path}");
    }
    let cross_site = server
        .http
        .post(server.url(&decide))
        .header("cookie", &cookie)
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={token}&decision=approve"))
        .send()
        .await
        .expect("send");
    assert_eq!(cross_site.status(), 403);
    assert!(
        results(&server.events(&id).await).is_empty(),
        "no decision was taken"
    );
    assert_eq!(server.status(&id).await, SessionStatus::RequiresAction);

    let (status, location) = server
        .post_form(
            &cookie,
            &decide,
            &[("csrf", &token), ("decision", "approve")],
        )
        .await;
    assert_eq!(
        (status, location.as_str()),
        (
            303,
            format!("/sessions/{id}?notice=approved#review").as_str()
        )
    );
}

#[tokio::test]
async fn another_users_sessions_are_not_found() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let bob = server.user("bob").await;
    let id = server.session(&alice, "Alice's secret project").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let cookie = server.cookie(&bob).await;
    let (_, home) = server.page(&cookie, "/").await;
    assert!(!home.contains("secret project"), "bob's list");
    let token = csrf(&home);
    for path in [
        format!("/sessions/{id}"),
        format!("/sessions/{id}/stream"),
        "/sessions/nope".to_owned(),
    ] {
        assert_eq!(server.page(&cookie, &path).await.0, 404, "{path}");
    }
    let posts = [
        (
            format!("/sessions/{id}/plans/plan-1/decision"),
            vec![("csrf", token.as_str()), ("decision", "approve")],
        ),
        (
            format!("/sessions/{id}/answer"),
            vec![
                ("csrf", token.as_str()),
                ("tool_use_id", "x"),
                ("answer", "hi"),
            ],
        ),
        (
            format!("/sessions/{id}/stop"),
            vec![("csrf", token.as_str())],
        ),
    ];
    for (path, form) in posts {
        assert_eq!(
            server.post_form(&cookie, &path, &form).await.0,
            404,
            "{path}"
        );
    }
    assert!(results(&server.events(&id).await).is_empty());
    assert_eq!(server.status(&id).await, SessionStatus::RequiresAction);
}

#[tokio::test]
async fn logged_out_browsers_are_sent_to_login() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "x").await;
    let r = server
        .http
        .get(server.url(&format!("/sessions/{id}")))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 303);
    let location = r.headers()["location"].to_str().expect("ascii").to_owned();
    assert_eq!(location, format!("/login?next=%2Fsessions%2F{id}"));
    for path in [
        format!("/sessions/{id}/stream"),
        "/fragments/sessions".to_owned(),
    ] {
        assert_eq!(
            server.page("ultraplan_session=00.00", &path).await.0,
            401,
            "{path}"
        );
    }
    let forged = server
        .page(
            "ultraplan_session=abcdef.0123456789",
            &format!("/sessions/{id}"),
        )
        .await;
    assert_eq!(forged.0, 303);
}

#[tokio::test]
async fn login_links_are_one_time_and_set_a_safe_cookie() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "x").await;
    let (status, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;
    assert_eq!(status, 201);
    let url = link["url"].as_str().expect("url");
    assert!(url.starts_with(&format!("{}/login/", server.base)), "{url}");
    assert!(url.ends_with(&format!("?next=%2Fsessions%2F{id}")), "{url}");
    assert!(
        link["expires_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    let r = server.http.get(url).send().await.expect("send");
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], format!("/sessions/{id}").as_str());
    let cookie = r.headers()["set-cookie"].to_str().expect("ascii");
    for part in [
        "ultraplan_session=",
        "HttpOnly",
        "SameSite=Lax",
        "Path=/",
        "Max-Age=",
    ] {
        assert!(cookie.contains(part), "{part} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");
    assert_eq!(r.headers()["referrer-policy"], "no-referrer");

    let again = server.http.get(url).send().await.expect("send");
    assert_eq!(again.status(), 410, "a link works once");
    let tampered = url.replace("/login/", "/login/0");
    assert_eq!(
        server
            .http
            .get(&tampered)
            .send()
            .await
            .expect("send")
            .status(),
        410
    );

    let (status, body) = server.login_link(&alice, "https://evil.example/").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_next"))
    );
    let anonymous = server
        .http
        .post(server.url("/v1/login-links"))
        .json(&serde_json::json!({}))
        .send()
        .await;
    assert_eq!(anonymous.expect("send").status(), 401);
}

#[tokio::test]
async fn https_deployments_get_secure_host_cookies() {
    let server = Server::start_with(|c| c.public_url = "https://plans.example.com".into()).await;
    let alice = server.user("alice").await;
    let (_, link) = server.login_link(&alice, "/").await;
    let url = link["url"].as_str().expect("url");
    assert!(url.starts_with("https://plans.example.com/login/"), "{url}");
    let path = url.trim_start_matches("https://plans.example.com");
    let r = server
        .http
        .get(server.url(path))
        .send()
        .await
        .expect("send");
    let cookie = r.headers()["set-cookie"].to_str().expect("ascii");
    assert!(
        cookie.starts_with("__Host-ultraplan=") && cookie.contains("; Secure"),
        "{cookie}"
    );
}

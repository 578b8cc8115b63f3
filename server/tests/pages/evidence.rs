//! Evidence links: the plan's `path:line` citations link to the owner-scoped code view of the
//! session's bundle, which refuses paths outside the bundle and shows binary files as such.

use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, EventBody};
use ultraplan_protocol::session::{SessionContext, SessionStatus};
use ultraplan_server::store::{BundleRow, NewSession};

use crate::browser::Browser;
use crate::support::{Server, User, exit_plan_mode};

const SHA: &str = "5e1f0a0c0ffee0000000000000000000000000000000000000000000000000b1";

const PLAN: &str = "# Harden the login\n\n\
    1. The token check in `src/auth.rs:12` compares with `==`.\n\
    2. The pool in src/db.rs:3-4 is built per request.\n\
    3. src/nowhere.rs:1 is not in the bundle.\n";

fn auth_rs() -> String {
    let mut lines: Vec<String> = (1..=20).map(|n| format!("// line {n}")).collect();
    lines[11] = "fn check(a: &str, b: &str) -> bool { a == b } // <b>".to_owned();
    lines.join("\n") + "\n"
}

/// A bundle tree in the server's bundle directory: source, a PNG, and a symlink out.
fn write_bundle(server: &Server) {
    let bundles = server.state.core.config.bundles_dir();
    let root = bundles.join(SHA);
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::write(root.join("src/auth.rs"), auth_rs()).expect("write");
    std::fs::write(
        root.join("src/db.rs"),
        "use x;\n\nfn pool() {}\nfn more() {}\n",
    )
    .expect("write");
    std::fs::write(root.join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").expect("write");
    std::fs::write(bundles.join("secret.txt"), "not for you").expect("write");
    std::os::unix::fs::symlink("../../secret.txt", root.join("src/escape")).expect("link");
}

/// A session on that bundle whose agent read `src/auth.rs` and cited it and `src/db.rs`.
async fn cited_session(server: &Server, user: &User) -> String {
    write_bundle(server);
    let bundle = BundleRow {
        sha256: SHA.into(),
        files: 4,
        bytes: 1024,
        unpacked_bytes: 1024,
        created_at: 0,
    };
    let store = &server.state.core.store;
    store.put_bundle(&user.id, &bundle).await.expect("bundle");
    let new = NewSession {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user.id.clone(),
        title: "Harden the login".into(),
        bundle_id: Some(SHA.into()),
        context: SessionContext::default(),
        status: SessionStatus::Running,
    };
    let (row, _) = store
        .create_session(&new, &[EventBody::user_text("ultraplan harden")])
        .await
        .expect("create");
    let read = EventBody::assistant(vec![ContentBlock::tool_use(
        "read-1",
        "Read",
        json!({"file_path": "/workspace/src/auth.rs", "offset": 1, "limit": 20}),
    )]);
    server
        .agent_says(&row.id, &[read, exit_plan_mode("plan-1", PLAN)])
        .await;
    row.id
}

#[tokio::test]
async fn citations_link_to_the_highlighted_line_and_say_what_was_read() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = cited_session(&server, &alice).await;
    let cookie = server.cookie(&alice).await;
    let (status, html) = server.page(&cookie, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    let read = format!(
        "<a class=\"cite read\" href=\"/sessions/{id}/code/src/auth.rs?line=12#L12\" \
         title=\"the agent read this\">src/auth.rs:12</a>"
    );
    assert!(html.contains(&read), "{html}");
    let asserted = format!(
        "<a class=\"cite asserted\" href=\"/sessions/{id}/code/src/db.rs?line=3&amp;end=4#L3\""
    );
    assert!(html.contains(&asserted), "{html}");
    assert!(
        !html.contains("code/src/nowhere.rs"),
        "missing files are not linked"
    );

    let url = format!("/sessions/{id}/code/src/auth.rs?line=12");
    let r = server
        .http
        .get(server.url(&url))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .expect("csp");
    assert!(csp.contains("style-src 'self'") && !csp.contains("unsafe-inline"));
    let code = r.text().await.expect("body");
    assert!(code.contains("<tr id=\"L12\" class=\"marked\">"), "{code}");
    assert!(!code.contains("<tr id=\"L11\" class=\"marked\">"));
    assert!(code.contains("hl-"), "highlighted: {code}");
    assert!(
        code.contains("&lt;b&gt;") && !code.contains("<b>"),
        "escaped"
    );
    assert!(!code.contains("style="), "no inline styles");
    assert!(
        code.contains(&format!("href=\"/sessions/{id}\"")),
        "breadcrumb back"
    );

    let (status, ranged) = server
        .page(
            &cookie,
            &format!("/sessions/{id}/code/src/db.rs?line=3&end=4"),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(ranged.matches("class=\"marked\"").count(), 2, "{ranged}");
}

#[tokio::test]
async fn the_code_view_is_owner_scoped_and_keeps_inside_the_bundle() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let bob = server.user("bob").await;
    let id = cited_session(&server, &alice).await;
    let alice_cookie = server.cookie(&alice).await;
    let bob_cookie = server.cookie(&bob).await;
    let code = format!("/sessions/{id}/code/src/auth.rs?line=12");
    let (status, body) = server.page(&bob_cookie, &code).await;
    assert_eq!(status, 404, "another user's session");
    assert!(!body.contains("fn check"));
    let anonymous = server
        .http
        .get(server.url(&code))
        .send()
        .await
        .expect("send");
    assert_eq!(anonymous.status(), 303, "to the login form");

    let cases = [
        ("src%2F..%2F..%2Fsecret.txt", 400),
        ("..%2Fsecret.txt", 400),
        ("%2Fetc%2Fpasswd", 400),
        ("src/escape", 400),
        ("src/none.rs", 404),
        ("src", 404),
    ];
    for (path, want) in cases {
        let (status, body) = server
            .page(&alice_cookie, &format!("/sessions/{id}/code/{path}"))
            .await;
        assert_eq!(status, want, "{path}: {body}");
        assert!(
            !body.contains("not for you") && !body.contains("root:"),
            "{path}"
        );
        if want == 400 {
            assert!(
                body.contains("not a relative path inside the bundle"),
                "{body}"
            );
        }
    }

    let (status, body) = server
        .page(&alice_cookie, &format!("/sessions/{id}/code/logo.png"))
        .await;
    assert_eq!(status, 200);
    assert!(body.contains("binary file, 16 bytes"), "{body}");
    assert!(!body.contains("IHDR") && !body.contains("class=\"code-lines\""));
}

#[tokio::test]
async fn clicking_a_citation_lands_on_the_highlighted_line() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let id = cited_session(&server, &alice).await;
    let browser = Browser::start(1280, 600).await;
    let (_, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser.click("#review a.cite.read").await;
    browser
        .until(
            "the code view at line 12",
            "return location.pathname.endsWith('/code/src/auth.rs') && location.hash === '#L12' \
             && !!document.querySelector('tr#L12.marked')",
        )
        .await;
    let target = browser
        .js(
            "var r = document.querySelector('tr#L12').getBoundingClientRect(); \
             return r.top >= 0 && r.bottom <= innerHeight && \
             getComputedStyle(document.querySelector('tr#L12')).backgroundColor \
             !== getComputedStyle(document.querySelector('tr#L2')).backgroundColor",
        )
        .await;
    assert_eq!(target, json!(true), "line 12 is in view and highlighted");
    browser.screenshot("code-view", 1280).await;
    browser.close().await;
}

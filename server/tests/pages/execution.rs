//! Remote execution on the session page: "executing" while the agent implements the approved
//! plan, then the patch file by file (live, in a browser), and the `patch.diff` download for
//! the owner only.

use serde_json::json;
use ultraplan_protocol::patch::{Execution, ExecutionState, FileChange, PatchFile, PatchSummary};

use crate::browser::Browser;
use crate::flow::{PLAN_V1, WATCH_CSP, body};
use crate::support::{Server, User, csrf, exit_plan_mode};

/// One edited text file (with markup and a non-UTF-8 byte in it) and one new binary file.
const PATCH: &[u8] = b"diff --git a/src/auth/session.rs b/src/auth/session.rs\n\
index 4cb29ea38f70d7c61b2a3a25b02e3bdf44905402..047ece5a1a9528405383f9b570697bef4a035387 100644\n\
--- a/src/auth/session.rs\n\
+++ b/src/auth/session.rs\n\
@@ -40,3 +40,4 @@ pub fn login(req: &Request) -> Response {\n \
    let user = authenticate(req)?;\n\
-    redirect(\"/login\")\n\
+    set_cookie(&user); // <script>alert(1)</script> caf\xe9\n\
+    redirect(\"/home\")\n \
}\n\
diff --git a/assets/logo.png b/assets/logo.png\n\
new file mode 100644\n\
index 0000000000000000000000000000000000000000..4227ca4e8736af63036e7457e2db376ddf7e5795\n\
GIT binary patch\n\
literal 3\n\
KcmZQzU;qFB0{{U4\n\
\n\
literal 0\n\
HcmV?d00001\n\
\n";

fn summary() -> PatchSummary {
    PatchSummary {
        files: vec![
            PatchFile {
                path: "src/auth/session.rs".into(),
                change: FileChange::Modified,
                additions: 2,
                deletions: 1,
                binary: false,
            },
            PatchFile {
                path: "assets/logo.png".into(),
                change: FileChange::Added,
                additions: 0,
                deletions: 0,
                binary: true,
            },
        ],
        additions: 2,
        deletions: 1,
        bytes: PATCH.len() as u64,
        base_commit: Some("4f1c2a9e7d3b".into()),
        left_out: Vec::new(),
        verdict: None,
    }
}

/// A session whose plan `user` approved on the page, executing (as the orchestrator marks it).
async fn executing(server: &Server, user: &User, cookie: &str) -> String {
    let id = server.session(user, "Fix the login redirect loop").await;
    server
        .agent_says(&id, &[exit_plan_mode("plan-1", PLAN_V1)])
        .await;
    let token = csrf(&server.page(cookie, &format!("/sessions/{id}")).await.1);
    let decide = format!("/sessions/{id}/plans/plan-1/decision");
    let (status, location) = server
        .post_form(
            cookie,
            &decide,
            &[("csrf", &token), ("decision", "approve")],
        )
        .await;
    assert_eq!(status, 303);
    assert!(location.contains("notice=approved"), "{location}");
    let state = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    server
        .state
        .core
        .store
        .set_execution(&id, &state)
        .await
        .expect("executing");
    let started = json!({"type":"system","subtype":"execution_started",
        "message":"The plan was approved: the agent implements it in a writable copy of the repository."});
    server.agent_says(&id, &[body(started)]).await;
    id
}

/// Store the patch and report it as the orchestrator does.
async fn finish(server: &Server, id: &str, diff: &[u8], summary: &PatchSummary, text: &str) {
    server
        .state
        .core
        .store
        .save_patch(id, diff, summary)
        .await
        .expect("save patch");
    let result = json!({"type":"result","subtype":"success","is_error":false,
        "result": text, "patch": summary});
    server.agent_says(id, &[body(result)]).await;
}

#[tokio::test]
async fn the_page_follows_an_execution_to_its_patch() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let cookie = server.cookie(&alice).await;
    let id = executing(&server, &alice, &cookie).await;
    let (_, link) = server.login_link(&alice, &format!("/sessions/{id}")).await;

    let browser = Browser::start(1280, 900).await;
    browser.goto(link["url"].as_str().expect("url")).await;
    browser.until_text("#live", "Live").await;
    browser.js(WATCH_CSP).await;
    browser.until_text("#pill", "executing").await;
    browser
        .until_text("#changes", "implementing the approved plan")
        .await;
    browser.until_text("#plan-status", "Approved").await;
    browser
        .until_text("#timeline", "writable copy of the repository")
        .await;
    browser.screenshot("session-executing-1280", 1280).await;
    browser
        .client
        .set_window_size(1280, 900)
        .await
        .expect("resize");

    // The execution finishes while the page is open.
    let text = "Remote execution finished: 2 files changed, +2 −1.";
    finish(&server, &id, PATCH, &summary(), text).await;
    browser.until_text("#pill", "◆ executed").await;
    browser
        .until_text("#executed", "2 files changed, +2 −1")
        .await;
    browser
        .until_text("#file-1 > summary", "src/auth/session.rs")
        .await;
    browser
        .until_text(
            "#file-1 .dl.add",
            "set_cookie(&user); // <script>alert(1)</script> caf\u{fffd}",
        )
        .await;
    browser
        .until_text("#file-1 .dl.del", "redirect(\"/login\")")
        .await;
    browser
        .until_text("#file-2 .binary-note", "Binary file added (3 bytes)")
        .await;
    browser.until_text("#timeline", "Execution finished").await;
    browser
        .until_text("#live", "Remote execution finished")
        .await;
    let shape = "var open = document.querySelectorAll('#changes details.file-diff[open]').length; \
        var files = Array.from(document.querySelectorAll('#changed-files li a')).map(function (a) { \
            return a.getAttribute('href') + ' ' + a.textContent; }); \
        var link = document.querySelector('#download-patch').getAttribute('href'); \
        return [open, files, link, document.querySelectorAll('#changes script').length, \
            document.body.innerText.includes('KcmZQzU')];";
    assert_eq!(
        browser.js(shape).await,
        json!([
            2,
            ["#file-1 M src/auth/session.rs", "#file-2 A assets/logo.png"],
            format!("/sessions/{id}/patch.diff"),
            0,
            false
        ])
    );
    assert!(
        browser
            .js("return document.body.innerText")
            .await
            .as_str()
            .is_some_and(|t| t.contains(&format!("ultraplan pull {id}"))),
        "the pull hint"
    );
    assert_eq!(browser.js("return window.__csp").await, json!([]));
    browser.screenshot("session-executed-1280", 1280).await;
    browser.screenshot("session-executed-375", 375).await;
    browser.close().await;
}

#[tokio::test]
async fn the_patch_downloads_for_its_owner_only() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let bob = server.user("bob").await;
    let cookie = server.cookie(&alice).await;
    let id = executing(&server, &alice, &cookie).await;
    let download = format!("/sessions/{id}/patch.diff");
    let (status, page) = server.page(&cookie, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert!(page.contains("pill-executing") && !page.contains("id=\"download-patch\""));
    assert_eq!(
        server.page(&cookie, &download).await.0,
        409,
        "no patch while executing"
    );

    finish(
        &server,
        &id,
        PATCH,
        &summary(),
        "Remote execution finished.",
    )
    .await;
    let r = server
        .http
        .get(server.url(&download))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/x-diff; charset=utf-8");
    let id8: String = id.chars().take(8).collect();
    assert_eq!(
        r.headers()["content-disposition"],
        format!("attachment; filename=\"ultraplan-{id8}.diff\"").as_str()
    );
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(
        r.bytes().await.expect("body").as_ref(),
        PATCH,
        "byte for byte"
    );

    let bob_cookie = server.cookie(&bob).await;
    assert_eq!(server.page(&bob_cookie, &download).await.0, 404);
    assert_eq!(
        server.page(&bob_cookie, &format!("/sessions/{id}")).await.0,
        404
    );
    let anonymous = server
        .http
        .get(server.url(&download))
        .send()
        .await
        .expect("send");
    assert_eq!(anonymous.status(), 303, "to the login form");
    let api = server
        .http
        .get(server.url(&format!("/v1/sessions/{id}/patch")))
        .bearer_auth(&bob.token)
        .send()
        .await
        .expect("send");
    assert_eq!(api.status(), 404, "nor through the API");

    let planning = server.session(&alice, "No execution here").await;
    assert_eq!(
        server
            .page(&cookie, &format!("/sessions/{planning}/patch.diff"))
            .await
            .0,
        404
    );
}

#[tokio::test]
async fn empty_and_missing_patches_are_reported() {
    let server = Server::start().await;
    let alice = server.user("alice").await;
    let cookie = server.cookie(&alice).await;

    let id = executing(&server, &alice, &cookie).await;
    let text =
        "Remote execution finished: no changes. The workspace is identical to the uploaded bundle.";
    finish(&server, &id, b"", &PatchSummary::default(), text).await;
    let (status, page) = server.page(&cookie, &format!("/sessions/{id}")).await;
    assert_eq!(status, 200);
    assert!(
        page.contains("No changes: the execution left the repository as it was."),
        "{page}"
    );
    assert!(page.contains("◆ executed") && !page.contains("id=\"download-patch\""));

    let failed = executing(&server, &alice, &cookie).await;
    let state = Execution {
        state: ExecutionState::Finished,
        patch: None,
    };
    server
        .state
        .core
        .store
        .set_execution(&failed, &state)
        .await
        .expect("finished");
    server
        .agent_says(
            &failed,
            &[body(
                json!({"type":"result","subtype":"error_during_execution","is_error":true,
                "result":"The patch could not be produced."}),
            )],
        )
        .await;
    let (_, page) = server.page(&cookie, &format!("/sessions/{failed}")).await;
    assert!(
        page.contains("The execution ended without a patch; see the log")
            && page.contains("pill-failed"),
        "{page}"
    );
    assert_eq!(
        server
            .page(&cookie, &format!("/sessions/{failed}/patch.diff"))
            .await
            .0,
        404
    );
}

//! `ultraplan message` through the real binary, against a small server that stores posted
//! user messages as the real one does (`POST /v1/sessions/{id}/events` → the stored events,
//! 409 once the session is archived, 404 for another id).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::Home;

const ID: &str = "sess-m";

#[derive(Default)]
struct Inner {
    /// What `GET /v1/sessions/{id}` says.
    status: &'static str,
    phase: &'static str,
    /// `POST /events` answers 409 whatever the status (archived in between).
    archive_on_post: bool,
    posted: Vec<Value>,
}

type Shared = Arc<Mutex<Inner>>;

/// A running server on a free port; stops with the test process.
struct MessageServer {
    url: String,
    inner: Shared,
}

impl MessageServer {
    fn start(status: &'static str, phase: &'static str) -> Self {
        let inner: Shared = Arc::new(Mutex::new(Inner {
            status,
            phase,
            ..Inner::default()
        }));
        let shared = inner.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new()
                    .route("/v1/sessions/{id}", get(session))
                    .route("/v1/sessions/{id}/events", axum::routing::post(post))
                    .with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self {
            url: format!("http://{}", rx.recv().unwrap()),
            inner,
        }
    }

    fn posted(&self) -> Vec<Value> {
        self.inner.lock().unwrap().posted.clone()
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let home = Home::new();
        home.cmd(home.path())
            .args(["--server", &self.url])
            .args(args)
            .output()
            .unwrap()
    }
}

fn error(status: u16, code: &str, message: &str) -> Response {
    let body = json!({"error": {"code": code, "message": message}});
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

async fn session(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    if id != ID {
        return error(404, "not_found", "session not found");
    }
    let inner = shared.lock().unwrap();
    axum::Json(json!({
        "type": "session", "id": ID, "title": "t", "session_status": inner.status,
        "phase": inner.phase, "url": "http://x/sessions/sess-m",
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "session_context": {}, "usage": {"input_tokens": 1, "output_tokens": 1},
        "last_event_id": 41, "plan_revisions": 0,
    }))
    .into_response()
}

async fn post(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = shared.lock().unwrap();
    if id != ID {
        return error(404, "not_found", "session not found");
    }
    inner.posted.push(body.clone());
    if inner.status == "archived" || inner.archive_on_post {
        return error(409, "session_archived", "the session is archived");
    }
    let mut event = body["events"][0].clone();
    event["id"] = json!(42);
    event["session_id"] = json!(ID);
    event["created_at"] = json!("2026-01-01T00:00:01Z");
    axum::Json(json!({"data": [event]})).into_response()
}

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_message_is_posted_as_a_user_event_and_reported_delivered() {
    let cases = [
        (
            "running",
            "running",
            "The agent is busy: the message is queued",
        ),
        (
            "idle",
            "needs_input",
            "The agent was waiting and reads it now.",
        ),
        (
            "requires_action",
            "plan_ready",
            "A plan waits for your decision",
        ),
    ];
    for (status, phase, says) in cases {
        let server = MessageServer::start(status, phase);
        let out = server.run(&["message", ID, "-focus on the token refresh"]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{status}: {stdout}{stderr}");
        assert!(
            stdout.starts_with("Delivered to session sess-m (event 42)."),
            "{stdout}"
        );
        assert!(stdout.contains(says), "{status}: {stdout}");
        let posted = server.posted();
        assert_eq!(posted.len(), 1, "{posted:?}");
        let event = &posted[0]["events"][0];
        assert_eq!(event["type"], "user");
        assert_eq!(
            event["message"],
            json!({"role": "user", "content": "-focus on the token refresh"})
        );
        assert!(event["parent_tool_use_id"].is_null(), "{event}");
    }
}

#[test]
fn message_json_shape() {
    let server = MessageServer::start("running", "running");
    let out = server.run(&["message", ID, "go on", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let delivery: Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("message_json", delivery);
}

#[test]
fn archived_unknown_and_empty_are_refused_clearly() {
    let server = MessageServer::start("archived", "ended");
    let out = server.run(&["message", ID, "hello"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("session sess-m is archived"), "{stderr}");
    assert!(
        server.posted().is_empty(),
        "nothing is posted to an archived session"
    );

    let server = MessageServer::start("running", "running");
    server.inner.lock().unwrap().archive_on_post = true;
    let out = server.run(&["message", ID, "hello"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("session sess-m is archived"), "{stderr}");

    let out = server.run(&["message", "other", "hello"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("no session other"), "{stderr}");

    let out = server.run(&["message", ID, "  "]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("the message is empty"), "{stderr}");
    assert_eq!(
        server.posted().len(),
        1,
        "only the raced post reached the server"
    );
}

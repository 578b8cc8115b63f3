//! The scripted server: each events request takes the next scripted reply; everything the
//! client does is recorded.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use sha2::Digest;
use ultraplan_protocol::events::EventBody;

pub const SESSION_ID: &str = "sess-1";

/// One scripted answer to `GET /events`.
pub enum Reply {
    /// A page of new events; the session then has `status`.
    Page(Vec<EventBody>, &'static str),
    /// A page with `has_more: true` (the client must ask again at once).
    More(Vec<EventBody>),
    /// An error status with an `{error}` body.
    Error(u16),
}

/// How the server behaves.
#[derive(Clone)]
pub struct Config {
    pub eligible: bool,
    pub reasons: Vec<Value>,
    pub timeout_seconds: u64,
    /// When set, requests must carry this bearer token.
    pub token: Option<String>,
    /// `GET /plans`.
    pub plans: Vec<Value>,
    /// Decisions answer 409.
    pub decision_conflict: bool,
    /// Eligibility requests wait until the gate opens.
    pub gate: Arc<AtomicBool>,
    /// `session_context` of the session resource.
    pub session_context: Value,
    /// `execution` of the session resource, one per `GET /v1/sessions/{id}` (the last one
    /// repeats); empty: no execution.
    pub executions: Vec<Value>,
    /// The raw diff `GET /v1/sessions/{id}/patch` serves once execution finished.
    pub patch: Vec<u8>,
    /// The patch endpoint answers 409 `execution_running` whatever the resource says.
    pub patch_running: bool,
    /// Event pages carry the session resource (servers that do save a request per poll).
    pub pages_carry_session: bool,
    /// The title of the session resource.
    pub title: String,
    /// The patch is sent as a stream (chunked, no `Content-Length`).
    pub patch_streamed: bool,
    /// The patch is sent with this `Content-Length`, whatever its real length.
    pub patch_claimed_length: Option<u64>,
    /// `GET /v1/sessions/{id}` answers this error message (403) instead.
    pub session_error: Option<String>,
    /// `accepts_bundle_encodings` in the eligibility answer; `None` leaves the field out, as
    /// servers that predate it do.
    pub bundle_encodings: Option<Vec<String>>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            eligible: true,
            reasons: Vec::new(),
            timeout_seconds: 1800,
            token: None,
            plans: Vec::new(),
            decision_conflict: false,
            gate: Arc::new(AtomicBool::new(true)),
            session_context: json!({}),
            executions: Vec::new(),
            patch: Vec::new(),
            patch_running: false,
            pages_carry_session: false,
            title: "fix the auth flow".into(),
            patch_streamed: false,
            patch_claimed_length: None,
            session_error: None,
            bundle_encodings: None,
        }
    }
}

/// What the client did.
#[derive(Clone, Default, Debug)]
pub struct Recorded {
    /// `METHOD /path?query`, in order.
    pub requests: Vec<String>,
    pub archives: u32,
    pub heads: u32,
    pub puts: u32,
    /// `(Content-Type, first 4 bytes of the body)` of every bundle PUT.
    pub put_bodies: Vec<(String, Vec<u8>)>,
    pub events_polls: u32,
    /// `POST /v1/sessions` bodies.
    pub created: Vec<Value>,
    /// `(tool_use_id, body)` of decisions.
    pub decisions: Vec<(String, Value)>,
    /// `GET /v1/sessions/{id}` requests.
    pub session_gets: u32,
    /// `GET /v1/sessions/{id}/patch` requests, with their `Accept` header.
    pub patch_gets: Vec<String>,
    /// `(name, body)` of every `PUT /v1/secrets/{name}`.
    pub secret_puts: Vec<(String, Value)>,
}

struct Inner {
    config: Config,
    script: VecDeque<Reply>,
    status: String,
    next_id: i64,
    known_bundles: HashSet<String>,
    recorded: Recorded,
    url: String,
    /// The `execution` last served.
    execution: Option<Value>,
    /// When the session was created: the server start, as the watch measures the session's
    /// time limit from it.
    created_at: String,
    /// Secret names set, in order (values are only recorded, never served).
    secrets: Vec<String>,
}

type Shared = Arc<Mutex<Inner>>;

/// A running scripted server; stops when dropped.
pub struct Server {
    pub url: String,
    inner: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(config: Config, script: Vec<Reply>) -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            config,
            script: script.into(),
            status: "idle".into(),
            next_id: 0,
            known_bundles: HashSet::new(),
            recorded: Recorded::default(),
            url: String::new(),
            execution: None,
            created_at: time::OffsetDateTime::now_utc()
                .format(&time::format_description::well_known::Rfc3339)
                .expect("format now"),
            secrets: Vec::new(),
        }));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let shared = inner.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, router(shared))
                    .with_graceful_shutdown(async {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let url = format!("http://{}", addr_rx.recv().unwrap());
        inner.lock().unwrap().url = url.clone();
        Self {
            url,
            inner,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    pub fn recorded(&self) -> Recorded {
        self.inner.lock().unwrap().recorded.clone()
    }

    pub fn open_gate(&self) {
        self.inner
            .lock()
            .unwrap()
            .config
            .gate
            .store(true, Ordering::SeqCst);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn router(shared: Shared) -> Router {
    Router::new()
        .route("/v1/eligibility", get(eligibility))
        .route(
            "/v1/bundles/{sha}",
            get(not_found).head(head_bundle).put(put_bundle),
        )
        .route("/v1/sessions", get(list_sessions).post(create_session))
        .route("/v1/sessions/{id}", get(get_session))
        .route("/v1/sessions/{id}/events", get(events))
        .route("/v1/sessions/{id}/archive", post(archive))
        .route("/v1/sessions/{id}/plans", get(plans))
        .route("/v1/sessions/{id}/patch", get(patch))
        .route(
            "/v1/sessions/{id}/plans/{tool_use_id}/decision",
            post(decide),
        )
        .route("/v1/secrets", get(list_secrets))
        .route(
            "/v1/secrets/{name}",
            axum::routing::put(put_secret).delete(delete_secret),
        )
        .layer(axum::middleware::from_fn_with_state(shared.clone(), record))
        .with_state(shared)
}

fn error(status: u16, code: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    let body = json!({"error": {"code": code, "message": message}});
    (status, axum::Json(body)).into_response()
}

async fn record(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let token = {
        let mut inner = shared.lock().unwrap();
        inner.recorded.requests.push(format!("{method} {uri}"));
        inner.config.token.clone()
    };
    let presented = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    if token.is_some() && presented != token && uri.path() != "/v1/eligibility" {
        return error(401, "unauthorized", "missing or invalid API token");
    }
    next.run(request).await
}

async fn eligibility(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    let gate = shared.lock().unwrap().config.gate.clone();
    while !gate.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let inner = shared.lock().unwrap();
    let presented = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if inner.config.token.is_some() && presented != inner.config.token.as_deref() {
        let reason =
            json!({"code": "not_logged_in", "message": "No valid API token was presented."});
        return axum::Json(json!({"eligible": false, "reasons": [reason]})).into_response();
    }
    let mut answer = json!({
        "eligible": inner.config.eligible,
        "reasons": inner.config.reasons,
        "flags": {"prompt_variant": "simple_plan", "timeout_seconds": inner.config.timeout_seconds,
                  "model": "offline"},
    });
    if let Some(encodings) = &inner.config.bundle_encodings {
        answer["accepts_bundle_encodings"] = json!(encodings);
    }
    axum::Json(answer).into_response()
}

/// Stores the name like the real server; a name with a lower-case letter gets its 400, and
/// `EVIL` answers with escape sequences in its message.
async fn put_secret(
    State(shared): State<Shared>,
    Path(name): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = shared.lock().unwrap();
    inner.recorded.secret_puts.push((name.clone(), body));
    if name.chars().any(|c| c.is_ascii_lowercase()) {
        let message = "a secret name has only upper-case letters A-Z, digits and underscores";
        return error(400, "invalid_secret_name", message);
    }
    if name == "EVIL" {
        return error(400, "invalid_secret_name", "bad\x1b]0;PWNED\x07 name");
    }
    if !inner.secrets.contains(&name) {
        inner.secrets.push(name);
    }
    StatusCode::NO_CONTENT.into_response()
}

/// Every stored name; a hostile one is listed too, escape sequences and all.
async fn list_secrets(State(shared): State<Shared>) -> Response {
    let inner = shared.lock().unwrap();
    let mut secrets: Vec<Value> = inner
        .secrets
        .iter()
        .map(|name| json!({"name": name, "updated_at": "2026-12-02T10:00:00Z"}))
        .collect();
    secrets.push(json!({"name": "X\x1b]52;c;cm0K\x07Y", "updated_at": "2026-12-02T10:00:00Z"}));
    axum::Json(json!({ "secrets": secrets })).into_response()
}

async fn delete_secret(State(shared): State<Shared>, Path(name): Path<String>) -> Response {
    let mut inner = shared.lock().unwrap();
    let before = inner.secrets.len();
    inner.secrets.retain(|n| *n != name);
    if inner.secrets.len() == before {
        return error(404, "not_found", "secret not found");
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn not_found() -> Response {
    error(404, "not_found", "not found")
}

async fn head_bundle(State(shared): State<Shared>, Path(sha): Path<String>) -> StatusCode {
    let mut inner = shared.lock().unwrap();
    inner.recorded.heads += 1;
    if inner.known_bundles.contains(&sha) {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    }
}

async fn put_bundle(
    State(shared): State<Shared>,
    Path(sha): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut inner = shared.lock().unwrap();
    inner.recorded.puts += 1;
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let magic = body.iter().take(4).copied().collect();
    inner.recorded.put_bodies.push((content_type, magic));
    if hex::encode(sha2::Sha256::digest(&body)) != sha {
        return error(
            400,
            "sha256_mismatch",
            "the body does not hash to the path's sha256",
        );
    }
    inner.known_bundles.insert(sha.clone());
    axum::Json(json!({"bundle_id": sha, "files": 3, "bytes": body.len(), "unpacked_bytes": 100}))
        .into_response()
}

fn resource(inner: &Inner, title: &str) -> Value {
    let mut resource = json!({
        "type": "session", "id": SESSION_ID, "title": title,
        "session_status": inner.status, "phase": "running",
        "url": format!("{}/sessions/{SESSION_ID}", inner.url),
        "created_at": inner.created_at, "updated_at": inner.created_at,
        "session_context": inner.config.session_context,
        "usage": {"input_tokens": 1200, "output_tokens": 34},
        "last_event_id": inner.next_id, "plan_revisions": 0,
    });
    if let Some(execution) = &inner.execution {
        resource["execution"] = execution.clone();
    }
    resource
}

async fn create_session(
    State(shared): State<Shared>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = shared.lock().unwrap();
    let title = body["title"].as_str().unwrap_or("untitled").to_owned();
    inner.recorded.created.push(body);
    (StatusCode::CREATED, axum::Json(resource(&inner, &title))).into_response()
}

async fn get_session(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut inner = shared.lock().unwrap();
    if id != SESSION_ID {
        return error(404, "not_found", "session not found");
    }
    if let Some(message) = &inner.config.session_error {
        return error(403, "forbidden\u{1b}[8m", message);
    }
    let n = inner.recorded.session_gets as usize;
    inner.recorded.session_gets += 1;
    let executions = &inner.config.executions;
    inner.execution = executions.get(n).or(executions.last()).cloned();
    axum::Json(resource(&inner, &inner.config.title)).into_response()
}

/// `GET /v1/sessions/{id}/patch`, following the execution last served.
async fn patch(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut inner = shared.lock().unwrap();
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    inner.recorded.patch_gets.push(accept);
    if id != SESSION_ID {
        return error(404, "not_found", "session not found");
    }
    let execution = inner
        .execution
        .clone()
        .or_else(|| inner.config.executions.first().cloned());
    match execution {
        None => error(404, "no_patch", "this session executed no plan"),
        Some(e) if e["state"] == "executing" || inner.config.patch_running => error(
            409,
            "execution_running",
            "the agent is still executing the plan",
        ),
        Some(_) => super::patch_body::patch_body(&inner.config),
    }
}

/// An `execution` that is still running.
pub fn executing() -> Value {
    json!({"state": "executing"})
}

/// An `execution` that finished (the summary is not what the client applies).
pub fn finished() -> Value {
    json!({"state": "finished",
           "patch": {"files": [], "additions": 0, "deletions": 0, "bytes": 0}})
}

async fn list_sessions(State(shared): State<Shared>) -> Response {
    let inner = shared.lock().unwrap();
    axum::Json(json!({"data": [resource(&inner, &inner.config.title)], "has_more": false}))
        .into_response()
}

async fn events(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<HashMap<String, String>>,
) -> Response {
    let include = query.get("include").map(String::as_str);
    let mut inner = shared.lock().unwrap();
    inner.recorded.events_polls += 1;
    if id != SESSION_ID {
        return error(404, "not_found", "session not found");
    }
    let (bodies, has_more) = match inner.script.pop_front() {
        None => (Vec::new(), false),
        Some(Reply::Error(status)) => return error(status, "scripted", "scripted failure"),
        Some(Reply::More(bodies)) => (bodies, true),
        Some(Reply::Page(bodies, status)) => {
            inner.status = status.to_owned();
            (bodies, false)
        }
    };
    let data: Vec<Value> = bodies
        .into_iter()
        .map(|body| {
            inner.next_id += 1;
            let mut event = serde_json::to_value(body).unwrap();
            event["id"] = json!(inner.next_id);
            event["session_id"] = json!(SESSION_ID);
            event["created_at"] = json!("2026-01-01T00:00:00Z");
            event
        })
        .collect();
    let first = data.first().map(|e| e["id"].clone());
    let last = data.last().map(|e| e["id"].clone());
    let mut page = json!({"data": data, "has_more": has_more, "first_id": first, "last_id": last});
    if inner.config.pages_carry_session && include == Some("session") {
        page["session"] = resource(&inner, &inner.config.title);
    }
    axum::Json(page).into_response()
}

async fn archive(State(shared): State<Shared>) -> Response {
    let mut inner = shared.lock().unwrap();
    inner.recorded.archives += 1;
    if inner.status == "archived" {
        return error(409, "already_archived", "the session is already archived");
    }
    inner.status = "archived".into();
    axum::Json(resource(&inner, &inner.config.title)).into_response()
}

async fn plans(State(shared): State<Shared>) -> Response {
    axum::Json(Value::Array(shared.lock().unwrap().config.plans.clone())).into_response()
}

async fn decide(
    State(shared): State<Shared>,
    Path((_id, tool_use_id)): Path<(String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = shared.lock().unwrap();
    inner
        .recorded
        .decisions
        .push((tool_use_id.clone(), body.clone()));
    if inner.config.decision_conflict {
        return error(
            409,
            "decision_conflict",
            "a different decision already stands",
        );
    }
    let status = match body["decision"].as_str() {
        Some("approve") => "approved",
        Some("reject") => "rejected",
        _ => "teleported",
    };
    let mut plan = inner
        .config
        .plans
        .iter()
        .find(|p| p["tool_use_id"] == tool_use_id.as_str())
        .cloned()
        .unwrap_or_else(|| {
            json!({"session_id": SESSION_ID, "tool_use_id": tool_use_id,
                                  "revision": 1, "plan": super::events::PLAN})
        });
    plan["status"] = json!(status);
    axum::Json(plan).into_response()
}

/// A plan resource for `GET /plans`.
pub fn plan(tool_use_id: &str, revision: u32, status: &str) -> Value {
    json!({"session_id": SESSION_ID, "tool_use_id": tool_use_id, "revision": revision,
           "status": status, "plan": super::events::PLAN})
}

//! A fake OpenAI Chat Completions API: `POST /v1/chat/completions`, streaming and JSON. It speaks
//! only OpenAI; scripts are the same provider-neutral [`Reply`]s.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use serde_json::Value;

use super::openai_render::{completion_json, error_json, sse_chunks};
use super::record::{Provider, RecordedRequest};
use super::render::{assign_tool_ids, json_frames, stream_frames, whole};
use super::reply::{ApiError, Cut, Delivery, ErrorKind, Reply, Turn};
use super::script::Script;
use super::server::{
    FakeState, Frames, RunningServer, add_header, frames_body, response, sse_data,
};

/// The key [`FakeOpenAi::start`] expects as `Authorization: Bearer`.
pub const FAKE_OPENAI_KEY: &str = "sk-fake-openai-test-key-0001";

/// A running fake OpenAI-compatible API. Dropping it stops the server.
pub struct FakeOpenAi {
    server: RunningServer,
}

impl FakeOpenAi {
    /// Start on 127.0.0.1:0, expecting [`FAKE_OPENAI_KEY`].
    pub async fn start(script: Script) -> Self {
        FakeOpenAi::start_with_key(script, Some(FAKE_OPENAI_KEY)).await
    }

    /// Start expecting this key (`None`: no key needed, like a local OpenAI-compatible server).
    pub async fn start_with_key(script: Script, api_key: Option<&str>) -> Self {
        let state = Arc::new(FakeState::new(script, api_key.map(str::to_owned)));
        let router = Router::new().route("/v1/chat/completions", post(chat_completions));
        FakeOpenAi {
            server: RunningServer::start(router, state).await,
        }
    }

    /// `http://127.0.0.1:PORT/v1`, like `https://api.openai.com/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.server.state.recorder.snapshot()
    }

    /// The script, to queue more replies while running.
    pub fn script(&self) -> &Script {
        &self.server.state.script
    }
}

type Parts = (u16, Frames, &'static str, Option<u64>);

async fn chat_completions(
    State(state): State<Arc<FakeState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = state.recorder.arrive(
        Provider::OpenAi,
        method.as_str(),
        uri.path(),
        &headers,
        body,
    );
    let (status, frames, content_type, retry_after) = match precheck(&state, &request) {
        Some(error) => error_parts(&error),
        None => match state.script.next(&request) {
            Reply::Error(error) => error_parts(&error),
            Reply::Turn { turn, delivery } => turn_parts(&state, &request, turn, &delivery),
        },
    };
    let body = frames_body(frames, &state.recorder, request.seq);
    let mut response = response(status, content_type, body);
    add_header(
        &mut response,
        "x-request-id",
        &format!("req_fake_{}", request.seq),
    );
    if let Some(secs) = retry_after {
        add_header(&mut response, "retry-after", &secs.to_string());
    }
    response
}

fn precheck(state: &FakeState, request: &RecordedRequest) -> Option<ApiError> {
    let auth = ApiError::new(ErrorKind::Authentication);
    let invalid = ApiError::new(ErrorKind::InvalidRequest);
    if let Some(want) = &state.api_key {
        let given = request
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            None => {
                let msg = "You didn't provide an API key. You need to provide your API key in \
                           an Authorization header using Bearer auth (i.e. Authorization: Bearer \
                           YOUR_KEY).";
                return Some(auth.with_message(msg));
            }
            Some(key) if key != want => {
                let msg = format!("Incorrect API key provided: {}.", mask(key));
                return Some(auth.with_message(msg));
            }
            Some(_) => {}
        }
    }
    let Some(body) = &request.json else {
        return Some(invalid.with_message("We could not parse the JSON body of your request."));
    };
    ["model", "messages"]
        .into_iter()
        .find(|field| body.get(field).is_none())
        .map(|field| invalid.with_message(format!("Missing required parameter: '{field}'.")))
}

/// `sk-ab***0001`, as OpenAI shows a wrong key.
fn mask(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() < 10 {
        return "***".to_owned();
    }
    let head: String = chars[..5].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}***{tail}")
}

fn error_parts(error: &ApiError) -> Parts {
    // OpenAI has no 529; an overload there is a 503.
    let status = if error.status == 529 {
        503
    } else {
        error.status
    };
    (
        status,
        whole(&error_json(error)),
        "application/json",
        error.retry_after,
    )
}

fn turn_parts(
    state: &FakeState,
    request: &RecordedRequest,
    mut turn: Turn,
    delivery: &Delivery,
) -> Parts {
    assign_tool_ids(&mut turn.content, "call_fake_", || state.next_id());
    let model = request.model().unwrap_or("gpt-fake");
    let id = format!("chatcmpl-fake-{:04}", request.seq);
    if request.is_stream() {
        let include_usage = request
            .json
            .as_ref()
            .and_then(|j| j.pointer("/stream_options/include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let chunks = sse_chunks(&turn, model, &id, delivery, include_usage);
        let frames = stream_frames(chunks, delivery, |e| sse_data(&error_json(e).to_string()));
        return (200, frames, "text/event-stream; charset=utf-8", None);
    }
    if let Some(Cut::ErrorEvent { error, .. }) = &delivery.cut {
        return error_parts(error);
    }
    let body = completion_json(&turn, model, &id);
    (200, json_frames(&body, delivery), "application/json", None)
}

//! A fake Anthropic Messages API: `POST /v1/messages`, streaming (SSE) and JSON.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use axum::routing::post;
use bytes::Bytes;
use serde_json::{Value, json};
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{StopReason, Usage};

use super::record::{Provider, RecordedRequest};
use super::render::{assign_tool_ids, json_frames, stream_frames, whole};
use super::reply::{ApiError, Delivery, ErrorKind, Reply, Turn};
use super::script::Script;
use super::server::{
    FakeState, Frames, RunningServer, add_header, frames_body, response, split_chars, sse_event,
};

/// The key [`FakeAnthropic::start`] expects in `x-api-key`.
pub const FAKE_ANTHROPIC_KEY: &str = "sk-ant-fake-test-key-0001";

/// A running fake Anthropic API. Dropping it stops the server.
pub struct FakeAnthropic {
    server: RunningServer,
}

impl FakeAnthropic {
    /// Start on 127.0.0.1:0, expecting [`FAKE_ANTHROPIC_KEY`].
    pub async fn start(script: Script) -> Self {
        FakeAnthropic::start_with_key(script, Some(FAKE_ANTHROPIC_KEY)).await
    }

    /// Start expecting this key (`None`: accept any key).
    pub async fn start_with_key(script: Script, api_key: Option<&str>) -> Self {
        let state = Arc::new(FakeState::new(script, api_key.map(str::to_owned)));
        let router = Router::new().route("/v1/messages", post(messages));
        FakeAnthropic {
            server: RunningServer::start(router, state).await,
        }
    }

    /// `http://127.0.0.1:PORT` (the API path `/v1/messages` goes after it, as for
    /// `https://api.anthropic.com`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr)
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

async fn messages(
    State(state): State<Arc<FakeState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = state.recorder.arrive(
        Provider::Anthropic,
        method.as_str(),
        uri.path(),
        &headers,
        body,
    );
    let (status, frames, content_type, retry_after) = match precheck(&state, &request) {
        Some(error) => error_parts(&error, request.seq),
        None => match state.script.next(&request) {
            Reply::Error(error) => error_parts(&error, request.seq),
            Reply::Turn { turn, delivery } => turn_parts(&state, &request, turn, &delivery),
        },
    };
    let body = frames_body(frames, &state.recorder, request.seq);
    let mut response = response(status, content_type, body);
    add_header(
        &mut response,
        "request-id",
        &format!("req_fake_{}", request.seq),
    );
    if let Some(secs) = retry_after {
        add_header(&mut response, "retry-after", &secs.to_string());
    }
    if status >= 400 {
        let retry = status == 429 || status >= 500;
        add_header(&mut response, "x-should-retry", &retry.to_string());
    }
    response
}

type Parts = (u16, Frames, &'static str, Option<u64>);

/// The checks the real API makes before the model runs.
fn precheck(state: &FakeState, request: &RecordedRequest) -> Option<ApiError> {
    let auth = ApiError::new(ErrorKind::Authentication);
    let invalid = ApiError::new(ErrorKind::InvalidRequest);
    match request.header("x-api-key") {
        None if state.api_key.is_some() => {
            return Some(auth.with_message("x-api-key header is required"));
        }
        Some(key) if state.api_key.as_deref().is_some_and(|want| want != key) => {
            return Some(auth);
        }
        _ => {}
    }
    if request.header("anthropic-version").is_none() {
        return Some(invalid.with_message("anthropic-version: header is required"));
    }
    let Some(body) = &request.json else {
        return Some(invalid.with_message("There was an issue with the JSON body"));
    };
    ["model", "max_tokens", "messages"]
        .into_iter()
        .find(|field| body.get(field).is_none())
        .map(|field| invalid.with_message(format!("{field}: Field required")))
}

fn error_type(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Authentication => "authentication_error",
        ErrorKind::InvalidRequest | ErrorKind::PromptTooLong => "invalid_request_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::RateLimit => "rate_limit_error",
        ErrorKind::Server => "api_error",
        ErrorKind::Overloaded => "overloaded_error",
    }
}

fn error_json(error: &ApiError) -> Value {
    json!({
        "type": "error",
        "error": { "type": error_type(error.kind), "message": error.message },
    })
}

fn error_parts(error: &ApiError, seq: usize) -> Parts {
    let mut body = error_json(error);
    body["request_id"] = json!(format!("req_fake_{seq}"));
    (
        error.status,
        whole(&body),
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
    assign_tool_ids(&mut turn.content, "toolu_fake_", || state.next_id());
    let model = request.model().unwrap_or("claude-fake");
    let id = format!("msg_fake_{:04}", request.seq);
    if request.is_stream() {
        let frames = sse_frames(&turn, model, &id, delivery);
        let frames = stream_frames(frames, delivery, |e| sse_event("error", &error_json(e)));
        return (200, frames, "text/event-stream; charset=utf-8", None);
    }
    if let Some(super::reply::Cut::ErrorEvent { error, .. }) = &delivery.cut {
        return error_parts(error, request.seq);
    }
    let body = message_json(&turn, model, &id);
    (200, json_frames(&body, delivery), "application/json", None)
}

fn stop_reason(reason: StopReason) -> Value {
    serde_json::to_value(reason).unwrap_or(Value::Null)
}

fn usage_json(usage: &Usage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output_tokens,
    })
}

/// The non-streaming body: a complete `message`.
fn message_json(turn: &Turn, model: &str, id: &str) -> Value {
    json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": turn.content,
        "stop_reason": stop_reason(turn.stop_reason), "stop_sequence": null,
        "usage": usage_json(&turn.usage, turn.usage.output_tokens),
    })
}

/// The real event sequence: message_start, blocks (start, ping after the first, deltas, stop),
/// message_delta, message_stop.
fn sse_frames(turn: &Turn, model: &str, id: &str, delivery: &Delivery) -> Vec<Bytes> {
    let start = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": usage_json(&turn.usage, 1),
    }});
    let ping = sse_event("ping", &json!({"type": "ping"}));
    let mut frames = vec![sse_event("message_start", &start)];
    if turn.content.is_empty() {
        frames.push(ping.clone());
    }
    for (index, block) in turn.content.iter().enumerate() {
        let mut block_frames = block_events(index, block, delivery);
        if index == 0 && !block_frames.is_empty() {
            block_frames.insert(1, ping.clone());
        }
        frames.extend(block_frames);
    }
    let delta = json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(turn.stop_reason), "stop_sequence": null},
        "usage": {"output_tokens": turn.usage.output_tokens}});
    frames.push(sse_event("message_delta", &delta));
    frames.push(sse_event("message_stop", &json!({"type": "message_stop"})));
    frames
}

/// content_block_start, its deltas, content_block_stop.
fn block_events(index: usize, block: &ContentBlock, delivery: &Delivery) -> Vec<Bytes> {
    let (start, deltas) = match block {
        ContentBlock::Text { text, .. } => (
            json!({"type": "text", "text": ""}),
            split_chars(text, delivery.text_chunk_chars)
                .into_iter()
                .map(|t| json!({"type": "text_delta", "text": t}))
                .collect(),
        ),
        ContentBlock::ToolUse {
            id, name, input, ..
        } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            std::iter::once(String::new())
                .chain(split_chars(&input.to_string(), delivery.json_chunk_chars))
                .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                .collect(),
        ),
        ContentBlock::Thinking {
            thinking,
            signature,
        } => (
            json!({"type": "thinking", "thinking": ""}),
            thinking_deltas(thinking, signature.as_deref(), delivery),
        ),
        ContentBlock::ToolResult { .. } => return Vec::new(),
    };
    let block_start =
        json!({"type": "content_block_start", "index": index, "content_block": start});
    let mut frames = vec![sse_event("content_block_start", &block_start)];
    frames.extend(deltas.into_iter().map(|delta: Value| {
        let event = json!({"type": "content_block_delta", "index": index, "delta": delta});
        sse_event("content_block_delta", &event)
    }));
    let stop = json!({"type": "content_block_stop", "index": index});
    frames.push(sse_event("content_block_stop", &stop));
    frames
}

fn thinking_deltas(thinking: &str, signature: Option<&str>, delivery: &Delivery) -> Vec<Value> {
    let mut deltas: Vec<Value> = split_chars(thinking, delivery.text_chunk_chars)
        .into_iter()
        .map(|t| json!({"type": "thinking_delta", "thinking": t}))
        .collect();
    if let Some(signature) = signature {
        deltas.push(json!({"type": "signature_delta", "signature": signature}));
    }
    deltas
}

//! OpenAI Chat Completions wire shapes of a provider-neutral turn or error.

use bytes::Bytes;
use serde_json::{Value, json};
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{StopReason, Usage};

use super::reply::{ApiError, Delivery, ErrorKind, Turn};
use super::server::{split_chars, sse_data};

/// A fixed `created` stamp keeps rendered bodies deterministic.
const CREATED: u64 = 1_700_000_000;

/// `{"error": {message, type, param, code}}` with OpenAI's types and codes.
pub(crate) fn error_json(error: &ApiError) -> Value {
    let (kind, code, default) = match error.kind {
        ErrorKind::Authentication => ("invalid_request_error", json!("invalid_api_key"), None),
        ErrorKind::InvalidRequest => ("invalid_request_error", Value::Null, None),
        ErrorKind::PromptTooLong => (
            "invalid_request_error",
            json!("context_length_exceeded"),
            Some(
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 208310 tokens. Please reduce the length of the messages.",
            ),
        ),
        ErrorKind::NotFound => ("invalid_request_error", json!("model_not_found"), None),
        ErrorKind::RateLimit => ("requests", json!("rate_limit_exceeded"), None),
        ErrorKind::Server => ("server_error", Value::Null, None),
        ErrorKind::Overloaded => (
            "server_error",
            Value::Null,
            Some("The server is overloaded or not ready yet."),
        ),
    };
    // Keep a test's own message; replace the Anthropic-flavoured default.
    let message = match default {
        Some(text) if error.message == ApiError::new(error.kind).message => text,
        _ => error.message.as_str(),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        StopReason::EndTurn | StopReason::StopSequence | StopReason::PauseTurn => "stop",
    }
}

/// OpenAI counts cached tokens inside `prompt_tokens`.
fn usage_json(usage: &Usage) -> Value {
    let prompt =
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_input_tokens, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
            "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    })
}

fn text_of(turn: &Turn) -> String {
    turn.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// `(id, name, arguments)` of every tool call, in order.
fn calls_of(turn: &Turn) -> Vec<(&str, &str, String)> {
    turn.content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some((id.as_str(), name.as_str(), input.to_string())),
            _ => None,
        })
        .collect()
}

/// The non-streaming `chat.completion` body.
pub(crate) fn completion_json(turn: &Turn, model: &str, id: &str) -> Value {
    let text = text_of(turn);
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { json!(text) },
        "refusal": null,
    });
    let calls: Vec<Value> = calls_of(turn)
        .into_iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    json!({
        "id": id, "object": "chat.completion", "created": CREATED, "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "message": message, "logprobs": null,
            "finish_reason": finish_reason(turn.stop_reason)}],
        "usage": usage_json(&turn.usage),
    })
}

/// The chunk stream: role, text pieces, tool calls (id and name first, then argument pieces),
/// the finish chunk, the usage chunk when asked for, and `[DONE]`.
pub(crate) fn sse_chunks(
    turn: &Turn,
    model: &str,
    id: &str,
    delivery: &Delivery,
    include_usage: bool,
) -> Vec<Bytes> {
    let chunk = |delta: Value, finish: Option<&str>| {
        let mut c = json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if include_usage {
            c["usage"] = Value::Null;
        }
        sse_data(&c.to_string())
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )];
    for piece in split_chars(&text_of(turn), delivery.text_chunk_chars) {
        frames.push(chunk(json!({"content": piece}), None));
    }
    for (index, (call_id, name, args)) in calls_of(turn).into_iter().enumerate() {
        let head = json!({"index": index, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""}});
        frames.push(chunk(json!({"tool_calls": [head]}), None));
        for piece in split_chars(&args, delivery.json_chunk_chars) {
            let part = json!({"index": index, "function": {"arguments": piece}});
            frames.push(chunk(json!({"tool_calls": [part]}), None));
        }
    }
    frames.push(chunk(json!({}), Some(finish_reason(turn.stop_reason))));
    if include_usage {
        let last = json!({
            "id": id, "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "system_fingerprint": "fp_fake", "choices": [], "usage": usage_json(&turn.usage),
        });
        frames.push(sse_data(&last.to_string()));
    }
    frames.push(sse_data("[DONE]"));
    frames
}

//! Assembling Anthropic streams, event by event.

use serde_json::{Value, json};
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{ModelResponse, StopReason, Usage};

use super::anthropic_stream::{AnthropicStream, parse_message};
use super::retry::Failure;
use super::sse::{SseEvent, StreamAssembler};

fn event(data: Value) -> SseEvent {
    SseEvent {
        event: data["type"].as_str().map(str::to_owned),
        data: data.to_string(),
    }
}

fn start(usage: Value) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": usage}})
}

fn block_start(index: usize, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: usize, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn stop(index: usize) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(stop_reason: &str, usage: Value) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": usage})
}

type FailureCheck = fn(&Failure) -> bool;

fn assemble(events: Vec<Value>) -> Result<ModelResponse, Failure> {
    let mut stream = AnthropicStream::default();
    for data in events {
        if stream.on_event(&event(data))? {
            break;
        }
    }
    stream.finish()
}

fn full_stream() -> Vec<Value> {
    vec![
        start(
            json!({"input_tokens": 10, "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 30, "output_tokens": 1}),
        ),
        block_start(0, json!({"type": "thinking", "thinking": ""})),
        json!({"type": "ping"}),
        delta(0, json!({"type": "thinking_delta", "thinking": "hmm"})),
        delta(0, json!({"type": "signature_delta", "signature": "sig"})),
        stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        delta(1, json!({"type": "text_delta", "text": "Look"})),
        delta(1, json!({"type": "text_delta", "text": "ing."})),
        stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_1", "name": "Grep", "input": {}}),
        ),
        delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "{\"patt"}),
        ),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "ern\": \"fn ma"}),
        ),
        delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "in\"}"}),
        ),
        stop(2),
        block_start(
            3,
            json!({"type": "tool_use", "id": "toolu_2", "name": "TodoWrite", "input": {}}),
        ),
        stop(3),
        json!({"type": "some_future_event", "x": 1}),
        message_delta("tool_use", json!({"output_tokens": 42})),
        json!({"type": "message_stop"}),
    ]
}

#[test]
fn assembles_text_thinking_and_split_tool_input() {
    let response = assemble(full_stream()).unwrap();
    assert_eq!(response.id, "msg_1");
    assert_eq!(response.model, "claude-x");
    assert_eq!(
        response.content,
        vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some("sig".into())
            },
            ContentBlock::text("Looking."),
            ContentBlock::tool_use("toolu_1", "Grep", json!({"pattern": "fn main"})),
            ContentBlock::tool_use("toolu_2", "TodoWrite", json!({})),
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    let want = Usage {
        input_tokens: 10,
        output_tokens: 42,
        cache_read_input_tokens: 30,
        cache_creation_input_tokens: 20,
    };
    assert_eq!(response.usage, want);
}

#[test]
fn cumulative_message_delta_usage_overrides_the_start() {
    let events = vec![
        start(json!({"input_tokens": 10, "output_tokens": 1})),
        message_delta(
            "end_turn",
            json!({"input_tokens": 11, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 99, "output_tokens": 5}),
        ),
        json!({"type": "message_stop"}),
    ];
    let response = assemble(events).unwrap();
    assert_eq!(response.usage.input_tokens, 11);
    assert_eq!(response.usage.cache_read_input_tokens, 99);
    assert_eq!(response.usage.output_tokens, 5);
    assert!(response.content.is_empty());
}

#[test]
fn stop_reasons_map() {
    let cases = [
        ("end_turn", Some(StopReason::EndTurn)),
        ("max_tokens", Some(StopReason::MaxTokens)),
        ("stop_sequence", Some(StopReason::StopSequence)),
        ("pause_turn", Some(StopReason::PauseTurn)),
        ("refusal", Some(StopReason::Refusal)),
        ("model_context_window_exceeded", Some(StopReason::MaxTokens)),
        ("something_new", None),
    ];
    for (reason, want) in cases {
        let events = vec![
            start(json!({})),
            message_delta(reason, json!({})),
            json!({"type": "message_stop"}),
        ];
        assert_eq!(assemble(events).unwrap().stop_reason, want, "{reason}");
    }
}

#[test]
fn broken_streams_fail_in_the_right_way() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let mut truncated = full_stream();
    truncated.truncate(8);
    let mut bad_json = full_stream();
    bad_json[14] = delta(2, json!({"type": "input_json_delta", "partial_json": "}}"}));
    let cases: Vec<(&str, Vec<Value>, FailureCheck)> = vec![
        (
            "error event",
            vec![start(json!({})), overloaded],
            |f| matches!(f, Failure::Stream { error_type, .. } if error_type == "overloaded_error"),
        ),
        ("no message_stop", truncated, |f| {
            matches!(f, Failure::Transport(_))
        }),
        ("nothing at all", vec![], |f| {
            matches!(f, Failure::Transport(_))
        }),
        ("bad tool json", bad_json, |f| {
            matches!(f, Failure::Malformed(_))
        }),
        (
            "delta without block",
            vec![
                start(json!({})),
                delta(5, json!({"type": "text_delta", "text": "x"})),
            ],
            |f| matches!(f, Failure::Malformed(_)),
        ),
    ];
    for (name, events, check) in cases {
        let failure = assemble(events).unwrap_err();
        assert!(check(&failure), "{name}: {failure:?}");
        assert!(failure.is_retryable(), "{name} is worth a retry");
    }
}

#[test]
fn unknown_block_types_are_skipped_whole() {
    let events = vec![
        start(json!({})),
        block_start(0, json!({"type": "redacted_thinking", "data": "xyz"})),
        delta(0, json!({"type": "text_delta", "text": "ignored"})),
        stop(0),
        block_start(1, json!({"type": "text", "text": "kept"})),
        stop(1),
        message_delta("end_turn", json!({})),
        json!({"type": "message_stop"}),
    ];
    assert_eq!(
        assemble(events).unwrap().content,
        vec![ContentBlock::text("kept")]
    );
}

#[test]
fn parses_a_whole_message_body() {
    let body = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "t", "name": "Read", "input": {"path": "a"}},
            {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 6}});
    let response = parse_message(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("hi"),
            ContentBlock::tool_use("t", "Read", json!({"path": "a"}))
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(response.usage.total(), 18);
}

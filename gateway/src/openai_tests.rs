//! OpenAI translation, both ways.

use serde_json::{Value, json};
use ultraplan_protocol::events::{ContentBlock, Role, ToolResultBlock, ToolResultContent};
use ultraplan_protocol::model::{
    Message, ModelRequest, StopReason, SystemBlock, ToolDefinition, Usage,
};

use super::openai_stream::{OpenAiStream, parse_completion};
use super::openai_translate::{ChatMessage, TokenLimitField, to_chat_request};
use super::retry::Failure;
use super::sse::{SseEvent, StreamAssembler};

fn user(content: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::User,
        content,
    }
}

fn assistant(content: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::Assistant,
        content,
    }
}

fn tool_result(id: &str, text: &str, is_error: bool) -> ContentBlock {
    ContentBlock::ToolResult {
        tool_use_id: id.into(),
        content: ToolResultContent::Blocks(vec![ToolResultBlock::Text { text: text.into() }]),
        is_error: is_error.then_some(true),
        cache_control: None,
    }
}

fn conversation() -> ModelRequest {
    ModelRequest {
        model: Some("ignored".into()),
        max_tokens: 512,
        system: vec![
            SystemBlock::text("You plan."),
            SystemBlock::text("Be brief."),
        ],
        messages: vec![
            user(vec![ContentBlock::text("fix auth")]),
            assistant(vec![
                ContentBlock::Thinking {
                    thinking: "private".into(),
                    signature: None,
                },
                ContentBlock::text("Looking."),
                ContentBlock::tool_use("toolu_1", "Grep", json!({"pattern": "auth"})),
                ContentBlock::tool_use("toolu_2", "Read", json!({"path": "a.rs"})),
            ]),
            user(vec![
                tool_result("toolu_1", "a.rs:1", false),
                tool_result("toolu_2", "no such file", true),
                ContentBlock::text("also check b.rs"),
            ]),
            assistant(vec![ContentBlock::tool_use("toolu_3", "Glob", json!({}))]),
        ],
        tools: vec![ToolDefinition {
            name: "Grep".into(),
            description: "Search".into(),
            input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
            cache_control: None,
        }],
        temperature: Some(0.5),
    }
}

#[test]
fn translates_an_anthropic_conversation() {
    let chat = to_chat_request(&conversation(), "gpt-x", TokenLimitField::MaxTokens);
    let got = serde_json::to_value(&chat).unwrap();
    let want = json!({
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "You plan.\n\nBe brief."},
            {"role": "user", "content": "fix auth"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "Grep", "arguments": "{\"pattern\":\"auth\"}"}},
                {"id": "toolu_2", "type": "function", "function": {"name": "Read", "arguments": "{\"path\":\"a.rs\"}"}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "a.rs:1"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such file"},
            {"role": "user", "content": "also check b.rs"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "toolu_3", "type": "function", "function": {"name": "Glob", "arguments": "{}"}}]},
        ],
        "max_tokens": 512,
        "temperature": 0.5,
        "tools": [{"type": "function", "function": {"name": "Grep", "description": "Search",
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}}}}],
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    assert_eq!(got, want);
}

#[test]
fn picks_the_token_limit_field() {
    let cases = [
        (
            TokenLimitField::MaxTokens,
            ("max_tokens", "max_completion_tokens"),
        ),
        (
            TokenLimitField::MaxCompletionTokens,
            ("max_completion_tokens", "max_tokens"),
        ),
    ];
    for (field, (present, absent)) in cases {
        let value = serde_json::to_value(to_chat_request(&conversation(), "m", field)).unwrap();
        assert_eq!(value[present], 512);
        assert!(value.get(absent).is_none());
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> SseEvent {
    let data = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": null});
    SseEvent {
        event: None,
        data: data.to_string(),
    }
}

fn data(text: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: text.to_owned(),
    }
}

type FailureCheck = fn(&Failure) -> bool;

fn assemble(events: Vec<SseEvent>) -> Result<ultraplan_protocol::model::ModelResponse, Failure> {
    let mut stream = OpenAiStream::default();
    for event in events {
        if stream.on_event(&event)? {
            break;
        }
    }
    stream.finish()
}

fn tool_stream() -> Vec<SseEvent> {
    let usage = json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 100,
        "completion_tokens": 7, "total_tokens": 107, "prompt_tokens_details": {"cached_tokens": 60}}});
    vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Let me "}), None),
        chunk(json!({"content": "see."}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "Grep", "arguments": ""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pat"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "Read", "arguments": "{\"path\""}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "tern\":\"x\"}"}}]}),
            None,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"arguments": ":\"a.rs\"}"}}]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        data(&usage.to_string()),
        data("[DONE]"),
    ]
}

#[test]
fn assembles_interleaved_tool_call_fragments_and_usage() {
    let response = assemble(tool_stream()).unwrap();
    assert_eq!(response.id, "chatcmpl-1");
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Let me see."),
            ContentBlock::tool_use("call_a", "Grep", json!({"pattern": "x"})),
            ContentBlock::tool_use("call_b", "Read", json!({"path": "a.rs"})),
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    let want = Usage {
        input_tokens: 40,
        output_tokens: 7,
        cache_read_input_tokens: 60,
        cache_creation_input_tokens: 0,
    };
    assert_eq!(response.usage, want);
}

#[test]
fn maps_finish_reasons() {
    let cases = [
        ("stop", StopReason::EndTurn),
        ("length", StopReason::MaxTokens),
        ("tool_calls", StopReason::ToolUse),
        ("content_filter", StopReason::Refusal),
    ];
    for (finish, want) in cases {
        let events = vec![chunk(json!({"content": "x"}), Some(finish)), data("[DONE]")];
        assert_eq!(
            assemble(events).unwrap().stop_reason,
            Some(want),
            "{finish}"
        );
    }
    let calls_but_stop = vec![
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "Glob", "arguments": "{}"}}]}),
            Some("stop"),
        ),
        data("[DONE]"),
    ];
    assert_eq!(
        assemble(calls_but_stop).unwrap().stop_reason,
        Some(StopReason::ToolUse)
    );
}

#[test]
fn broken_streams_fail_in_the_right_way() {
    let error = data(r#"{"error":{"message":"overloaded","type":"server_error","code":null}}"#);
    let cases: Vec<(&str, Vec<SseEvent>, FailureCheck)> = vec![
        ("cut before finish", tool_stream()[..5].to_vec(), |f| {
            matches!(f, Failure::Transport(_))
        }),
        (
            "error chunk",
            vec![chunk(json!({"content": "a"}), None), error],
            |f| matches!(f, Failure::Stream { error_type, .. } if error_type == "server_error"),
        ),
        ("not json", vec![data("{oops")], |f| {
            matches!(f, Failure::Malformed(_))
        }),
    ];
    for (name, events, check) in cases {
        let failure = assemble(events).unwrap_err();
        assert!(check(&failure), "{name}: {failure:?}");
        assert!(failure.is_retryable(), "{name}");
    }
    let no_done = vec![chunk(json!({"content": "ok"}), Some("stop"))];
    assert_eq!(
        assemble(no_done).unwrap().content,
        vec![ContentBlock::text("ok")]
    );
}

#[test]
fn keeps_unparseable_arguments_and_sends_them_back_verbatim() {
    let events = vec![
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"name": "Read", "arguments": "{\"path\": "}}]}),
            Some("length"),
        ),
        data("[DONE]"),
    ];
    let response = assemble(events).unwrap();
    let ContentBlock::ToolUse { id, input, .. } = &response.content[0] else {
        panic!("tool use expected")
    };
    assert_eq!(id, "call_0");
    assert_eq!(input, &json!("{\"path\": "));
    let mut request = conversation();
    request.messages = vec![assistant(response.content.clone())];
    let chat = to_chat_request(&request, "m", TokenLimitField::MaxTokens);
    let ChatMessage::Assistant { tool_calls, .. } = &chat.messages[1] else {
        panic!("assistant expected")
    };
    assert_eq!(tool_calls[0].function.arguments, "{\"path\": ");
}

#[test]
fn a_response_round_trips_into_the_next_request() {
    let response = assemble(tool_stream()).unwrap();
    let mut request = conversation();
    request.system.clear();
    request.messages = vec![
        assistant(response.content.clone()),
        user(vec![
            tool_result("call_a", "found", false),
            tool_result("call_b", "body", false),
        ]),
    ];
    let chat = to_chat_request(&request, "m", TokenLimitField::MaxTokens);
    let ChatMessage::Assistant {
        content,
        tool_calls,
    } = &chat.messages[0]
    else {
        panic!("assistant expected")
    };
    assert_eq!(content.as_deref(), Some("Let me see."));
    let back: Vec<(String, String, Value)> = tool_calls
        .iter()
        .map(|c| {
            let input = serde_json::from_str(&c.function.arguments).unwrap();
            (c.id.clone(), c.function.name.clone(), input)
        })
        .collect();
    assert_eq!(
        back,
        vec![
            ("call_a".into(), "Grep".into(), json!({"pattern": "x"})),
            ("call_b".into(), "Read".into(), json!({"path": "a.rs"})),
        ]
    );
    let ids: Vec<&str> = chat.messages[1..]
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["call_a", "call_b"]);
}

#[test]
fn parses_a_whole_completion_body() {
    let body = json!({"id": "chatcmpl-2", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_z", "type": "function", "function": {"name": "Glob", "arguments": "{\"pattern\":\"*\"}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}});
    let response = parse_completion(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        response.content,
        vec![ContentBlock::tool_use(
            "call_z",
            "Glob",
            json!({"pattern": "*"})
        )]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (5, 2)
    );
}

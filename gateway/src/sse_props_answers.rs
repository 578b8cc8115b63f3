//! Random model answers for the SSE property tests, and the byte-exact Anthropic and OpenAI
//! event streams (with their expected assembled responses) that carry them.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Value, json};
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{ModelResponse, StopReason, Usage};

use super::{json_object, pieces, text};

#[derive(Debug, Clone)]
pub(super) enum Block {
    Text(String),
    Thinking(String, String),
    Tool(String, String, Value),
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        text().prop_map(Block::Text),
        (text(), "[a-zA-Z0-9+/=]{0,12}").prop_map(|(t, s)| Block::Thinking(t, s)),
        ("toolu_[a-z0-9]{1,8}", "[A-Za-z]{1,10}", json_object())
            .prop_map(|(id, name, input)| Block::Tool(id, name, input)),
    ]
}

/// Random cut points for every piece of text a stream carries.
fn cuts() -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..6)
}

#[derive(Debug, Clone)]
pub(super) struct Answer {
    blocks: Vec<Block>,
    /// Input, output, cache read, cache creation (output also serves OpenAI's completion).
    usage: [u32; 4],
    stop: &'static str,
    splits: Vec<Vec<Index>>,
    pings: Vec<bool>,
}

pub(super) fn answer() -> impl Strategy<Value = Answer> {
    (
        prop::collection::vec(block(), 0..4),
        any::<[u32; 4]>(),
        prop::sample::select(vec!["end_turn", "tool_use", "max_tokens", "stop_sequence"]),
        prop::collection::vec(cuts(), 4),
        prop::collection::vec(prop::bool::weighted(0.2), 1..6),
    )
        .prop_map(|(blocks, usage, stop, splits, pings)| Answer {
            blocks,
            usage,
            stop,
            splits,
            pings,
        })
}

pub(super) fn anthropic_events(a: &Answer) -> Vec<(Option<&'static str>, String)> {
    let [input, output, read, created] = a.usage;
    let mut out: Vec<(Option<&'static str>, Value)> = vec![(
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg_p", "type": "message",
            "role": "assistant", "model": "claude-p", "content": [], "stop_reason": null,
            "usage": {"input_tokens": input, "output_tokens": 1,
                "cache_read_input_tokens": read, "cache_creation_input_tokens": created}}}),
    )];
    for (i, block) in a.blocks.iter().enumerate() {
        let split = &a.splits[i % a.splits.len()];
        let (start, deltas): (Value, Vec<Value>) = match block {
            Block::Text(t) => (
                json!({"type": "text", "text": ""}),
                pieces(t, split)
                    .into_iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect(),
            ),
            Block::Thinking(t, sig) => (
                json!({"type": "thinking", "thinking": ""}),
                pieces(t, split)
                    .into_iter()
                    .map(|p| json!({"type": "thinking_delta", "thinking": p}))
                    .chain([json!({"type": "signature_delta", "signature": sig})])
                    .collect(),
            ),
            Block::Tool(id, name, input) => (
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                pieces(&input.to_string(), split)
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
        };
        out.push((
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        for (k, delta) in deltas.into_iter().enumerate() {
            if a.pings[k % a.pings.len()] {
                out.push((Some("ping"), json!({"type": "ping"})));
            }
            out.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": i, "delta": delta}),
            ));
        }
        out.push((
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    out.push((
        Some("message_delta"),
        json!({"type": "message_delta", "delta": {"stop_reason": a.stop, "stop_sequence": null},
            "usage": {"output_tokens": output}}),
    ));
    out.push((Some("message_stop"), json!({"type": "message_stop"})));
    out.into_iter().map(|(n, v)| (n, v.to_string())).collect()
}

pub(super) fn anthropic_expected(a: &Answer) -> ModelResponse {
    let [input, output, read, created] = a.usage.map(u64::from);
    ModelResponse {
        id: "msg_p".to_owned(),
        model: "claude-p".to_owned(),
        content: a
            .blocks
            .iter()
            .map(|b| match b {
                Block::Text(t) => ContentBlock::text(t.clone()),
                Block::Thinking(t, sig) => ContentBlock::Thinking {
                    thinking: t.clone(),
                    signature: Some(sig.clone()),
                },
                Block::Tool(id, name, input) => {
                    ContentBlock::tool_use(id.clone(), name.clone(), input.clone())
                }
            })
            .collect(),
        stop_reason: Some(match a.stop {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            _ => StopReason::StopSequence,
        }),
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: created,
        },
    }
}

/// OpenAI carries one text (the text blocks joined) and the tool calls; thinking is not sent.
pub(super) fn openai_events(a: &Answer) -> Vec<(Option<&'static str>, String)> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "model": "gpt-p",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut calls = 0;
    for (i, block) in a.blocks.iter().enumerate() {
        let split = &a.splits[i % a.splits.len()];
        match block {
            Block::Text(t) => out.extend(
                pieces(t, split)
                    .into_iter()
                    .map(|p| chunk(json!({"content": p}), Value::Null)),
            ),
            Block::Thinking(..) => {}
            Block::Tool(id, name, input) => {
                out.push(chunk(
                    json!({"tool_calls": [{"index": calls, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                out.extend(pieces(&input.to_string(), split).into_iter().map(|p| {
                    chunk(
                        json!({"tool_calls": [{"index": calls, "function": {"arguments": p}}]}),
                        Value::Null,
                    )
                }));
                calls += 1;
            }
        }
    }
    let finish = if calls > 0 { "tool_calls" } else { "stop" };
    out.push(chunk(json!({}), json!(finish)));
    let [input, output, read, _] = a.usage;
    let prompt = u64::from(input) + u64::from(read);
    out.push(json!({"id": "chatcmpl-p", "model": "gpt-p", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": output,
            "prompt_tokens_details": {"cached_tokens": read}}}));
    let mut events: Vec<(Option<&'static str>, String)> =
        out.into_iter().map(|v| (None, v.to_string())).collect();
    events.push((None, "[DONE]".to_owned()));
    events
}

pub(super) fn openai_expected(a: &Answer) -> ModelResponse {
    let [input, output, read, _] = a.usage.map(u64::from);
    let text: String = a
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<ContentBlock> = a
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Tool(id, name, input) => Some(ContentBlock::tool_use(
                id.clone(),
                name.clone(),
                input.clone(),
            )),
            _ => None,
        })
        .collect();
    let stop = if calls.is_empty() {
        StopReason::EndTurn
    } else {
        StopReason::ToolUse
    };
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(ContentBlock::text(text));
    }
    content.extend(calls);
    ModelResponse {
        id: "chatcmpl-p".to_owned(),
        model: "gpt-p".to_owned(),
        content,
        stop_reason: Some(stop),
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: 0,
        },
    }
}

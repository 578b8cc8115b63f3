//! Assembling an Anthropic Messages SSE stream (`message_start`, `content_block_start`,
//! `content_block_delta` with `text_delta` / `input_json_delta` / `thinking_delta` /
//! `signature_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`, `error`)
//! into a [`ModelResponse`].

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{ModelResponse, StopReason, Usage};

use super::http::stream_error;
use super::retry::Failure;
use super::sse::{SseEvent, StreamAssembler};

/// Usage fields as they appear in `message_start` and (cumulatively) in `message_delta`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct UsagePatch {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl UsagePatch {
    /// Overwrite the fields this patch carries.
    pub(super) fn apply(&self, usage: &mut Usage) {
        let set = |field: &mut u64, value: Option<u64>| *field = value.unwrap_or(*field);
        set(&mut usage.input_tokens, self.input_tokens);
        set(&mut usage.output_tokens, self.output_tokens);
        set(
            &mut usage.cache_read_input_tokens,
            self.cache_read_input_tokens,
        );
        set(
            &mut usage.cache_creation_input_tokens,
            self.cache_creation_input_tokens,
        );
    }
}

/// A stop reason; newer reasons we do not model become `None` (or `max_tokens` for a full
/// context window).
pub(super) fn parse_stop_reason(value: Option<&str>) -> Option<StopReason> {
    let value = value?;
    if value == "model_context_window_exceeded" {
        return Some(StopReason::MaxTokens);
    }
    serde_json::from_value(Value::String(value.to_owned())).ok()
}

#[derive(Debug, Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    usage: UsagePatch,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

/// A `content_block_delta` payload, by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: String },
    #[serde(rename = "signature_delta")]
    Signature { signature: String },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: UsagePatch,
    },
    MessageStop,
    Ping,
    Error,
    #[serde(other)]
    Unknown,
}

/// A block being built. Block types we do not model (server tools, redacted thinking) are
/// skipped whole.
#[derive(Debug)]
enum Building {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    Thinking {
        thinking: String,
        signature: Option<String>,
    },
    Skipped,
}

/// The state of one streamed message.
#[derive(Debug, Default)]
pub(super) struct AnthropicStream {
    id: String,
    model: String,
    usage: Usage,
    blocks: BTreeMap<usize, Building>,
    stop_reason: Option<StopReason>,
    started: bool,
    stopped: bool,
}

impl StreamAssembler for AnthropicStream {
    fn on_event(&mut self, event: &SseEvent) -> Result<bool, Failure> {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| Failure::Malformed(format!("event data is not JSON: {e}")))?;
        let parsed: StreamEvent = serde_json::from_value(data.clone())
            .map_err(|e| Failure::Malformed(format!("unexpected event {}: {e}", event.data)))?;
        match parsed {
            StreamEvent::MessageStart { message } => {
                self.started = true;
                self.id = message.id;
                self.model = message.model;
                message.usage.apply(&mut self.usage);
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                self.blocks.insert(index, start_block(content_block));
            }
            StreamEvent::ContentBlockDelta { index, delta } => self.delta(index, delta)?,
            StreamEvent::ContentBlockStop { .. } | StreamEvent::Ping | StreamEvent::Unknown => {}
            StreamEvent::MessageDelta { delta, usage } => {
                self.stop_reason = parse_stop_reason(delta.stop_reason.as_deref());
                usage.apply(&mut self.usage);
            }
            StreamEvent::MessageStop => self.stopped = true,
            StreamEvent::Error => return Err(stream_error(&data)),
        }
        Ok(self.stopped)
    }

    fn finish(self) -> Result<ModelResponse, Failure> {
        if !self.started || !self.stopped {
            return Err(Failure::Transport(
                "stream ended before message_stop".to_owned(),
            ));
        }
        let mut content = Vec::with_capacity(self.blocks.len());
        for building in self.blocks.into_values() {
            content.extend(finish_block(building)?);
        }
        Ok(ModelResponse {
            id: self.id,
            model: self.model,
            content,
            stop_reason: self.stop_reason,
            usage: self.usage,
        })
    }
}

impl AnthropicStream {
    fn delta(&mut self, index: usize, delta: Delta) -> Result<(), Failure> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(Failure::Malformed(format!(
                "delta for unknown block {index}"
            )));
        };
        match (block, delta) {
            (Building::Text(text), Delta::Text { text: more }) => text.push_str(&more),
            (Building::ToolUse { json, .. }, Delta::InputJson { partial_json }) => {
                json.push_str(&partial_json);
            }
            (Building::Thinking { thinking, .. }, Delta::Thinking { thinking: more }) => {
                thinking.push_str(&more);
            }
            (Building::Thinking { signature, .. }, Delta::Signature { signature: sig }) => {
                *signature = Some(sig);
            }
            (Building::Skipped, _) | (_, Delta::Other) => {}
            (_, delta) => {
                return Err(Failure::Malformed(format!(
                    "delta {delta:?} does not fit block {index}"
                )));
            }
        }
        Ok(())
    }
}

fn start_block(block: Value) -> Building {
    let text = |name: &str| {
        block
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match block.get("type").and_then(Value::as_str) {
        Some("text") => Building::Text(text("text")),
        Some("tool_use") => Building::ToolUse {
            id: text("id"),
            name: text("name"),
            start_input: block.get("input").cloned().unwrap_or(Value::Null),
            json: String::new(),
        },
        Some("thinking") => Building::Thinking {
            thinking: text("thinking"),
            signature: block
                .get("signature")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        _ => Building::Skipped,
    }
}

fn finish_block(building: Building) -> Result<Option<ContentBlock>, Failure> {
    Ok(match building {
        Building::Text(text) => Some(ContentBlock::text(text)),
        Building::ToolUse {
            id,
            name,
            start_input,
            json,
        } => {
            let input = if json.trim().is_empty() {
                if start_input.is_null() {
                    Value::Object(Default::default())
                } else {
                    start_input
                }
            } else {
                serde_json::from_str(&json).map_err(|e| {
                    Failure::Malformed(format!("tool input of {name} is not JSON: {e}"))
                })?
            };
            Some(ContentBlock::tool_use(id, name, input))
        }
        Building::Thinking {
            thinking,
            signature,
        } => Some(ContentBlock::Thinking {
            thinking,
            signature,
        }),
        Building::Skipped => None,
    })
}

/// A complete non-streaming `message` body (a provider that ignored `stream: true`).
pub(super) fn parse_message(body: &[u8]) -> Result<ModelResponse, Failure> {
    let message: Value = serde_json::from_slice(body)
        .map_err(|e| Failure::Malformed(format!("message body is not JSON: {e}")))?;
    let text = |name: &str| {
        message
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let mut content = Vec::new();
    for block in message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut building = start_block(block.clone());
        if let Building::ToolUse {
            json, start_input, ..
        } = &mut building
        {
            *json = start_input.to_string();
        }
        content.extend(finish_block(building)?);
    }
    let mut usage = Usage::default();
    if let Some(patch) = message.get("usage") {
        let patch: UsagePatch = serde_json::from_value(patch.clone()).unwrap_or_default();
        patch.apply(&mut usage);
    }
    Ok(ModelResponse {
        id: text("id").to_owned(),
        model: text("model").to_owned(),
        content,
        stop_reason: parse_stop_reason(message.get("stop_reason").and_then(Value::as_str)),
        usage,
    })
}

#[cfg(test)]
#[path = "sse_props.rs"]
mod sse_props;

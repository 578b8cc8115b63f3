//! OpenAI Chat Completions answers → [`ModelResponse`]: `data:` chunks whose `delta` carries
//! `content` and `tool_calls` fragments (merged by `index`), `finish_reason`, a final usage
//! chunk (`stream_options.include_usage`), and `data: [DONE]`; or a whole JSON completion.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{ModelResponse, StopReason, Usage};

use super::http::stream_error;
use super::retry::Failure;
use super::sse::{SseEvent, StreamAssembler};

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

impl ChatUsage {
    /// OpenAI counts cached tokens inside `prompt_tokens`; Anthropic-style usage does not.
    fn to_usage(&self) -> Usage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        Usage {
            input_tokens: self.prompt_tokens.saturating_sub(cached),
            output_tokens: self.completion_tokens,
            cache_read_input_tokens: cached,
            cache_creation_input_tokens: 0,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct FunctionPart {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ToolCallPart {
    #[serde(default)]
    index: u32,
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionPart>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallPart>>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    /// Streaming chunks carry `delta`, whole completions `message`; both have the same parts.
    #[serde(default, alias = "message")]
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Chunk {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<ChatUsage>,
}

#[derive(Debug, Default)]
struct CallBuilder {
    id: String,
    name: String,
    arguments: String,
}

/// The state of one streamed completion (also used for a whole JSON completion).
#[derive(Debug, Default)]
pub(super) struct OpenAiStream {
    id: String,
    model: String,
    text: String,
    calls: BTreeMap<u32, CallBuilder>,
    finish_reason: Option<String>,
    usage: Usage,
    done: bool,
}

impl StreamAssembler for OpenAiStream {
    fn on_event(&mut self, event: &SseEvent) -> Result<bool, Failure> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let value: Value = serde_json::from_str(&event.data)
            .map_err(|e| Failure::Malformed(format!("chunk is not JSON: {e}")))?;
        self.apply(value)?;
        Ok(false)
    }

    fn finish(self) -> Result<ModelResponse, Failure> {
        if !self.done && self.finish_reason.is_none() {
            return Err(Failure::Transport("stream ended before [DONE]".to_owned()));
        }
        Ok(self.into_response())
    }
}

impl OpenAiStream {
    fn apply(&mut self, value: Value) -> Result<(), Failure> {
        if value.get("error").is_some_and(|e| !e.is_null()) {
            return Err(stream_error(&value));
        }
        let chunk: Chunk = serde_json::from_value(value)
            .map_err(|e| Failure::Malformed(format!("unexpected chunk: {e}")))?;
        if self.id.is_empty() {
            self.id = chunk.id;
        }
        if self.model.is_empty() {
            self.model = chunk.model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = usage.to_usage();
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            self.finish_reason = choice.finish_reason.or(self.finish_reason.take());
            if let Some(delta) = choice.delta {
                self.delta(delta);
            }
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta) {
        if let Some(text) = delta.content {
            self.text.push_str(&text);
        }
        for part in delta.tool_calls.unwrap_or_default() {
            let call = self.calls.entry(part.index).or_default();
            if let Some(id) = part.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            let function = part.function.unwrap_or_default();
            if let Some(name) = function.name.filter(|_| call.name.is_empty()) {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn into_response(self) -> ModelResponse {
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(ContentBlock::text(self.text));
        }
        let has_calls = !self.calls.is_empty();
        for (index, call) in self.calls {
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            content.push(ContentBlock::tool_use(
                id,
                call.name,
                parse_arguments(&call.arguments),
            ));
        }
        ModelResponse {
            id: self.id,
            model: self.model,
            content,
            stop_reason: Some(stop_reason(self.finish_reason.as_deref(), has_calls)),
            usage: self.usage,
        }
    }
}

/// Tool arguments as JSON; text that does not parse is kept as a string (the agent reports a
/// bad input back to the model, and the string goes back to OpenAI verbatim).
fn parse_arguments(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// `tool_calls` → tool_use, `length` → max_tokens, `content_filter` → refusal, else end_turn;
/// a turn with tool calls is a tool_use turn whatever the server said.
fn stop_reason(finish_reason: Option<&str>, has_calls: bool) -> StopReason {
    match finish_reason {
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        _ if has_calls => StopReason::ToolUse,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

/// A whole (non-streaming) `chat.completion` body.
pub(super) fn parse_completion(body: &[u8]) -> Result<ModelResponse, Failure> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Failure::Malformed(format!("completion is not JSON: {e}")))?;
    let mut state = OpenAiStream::default();
    state.apply(value)?;
    Ok(state.into_response())
}

//! Reading the conversation out of a recorded request, in either wire format, so a script can
//! react to the tool results it receives.

use serde_json::Value;

use super::record::{Provider, RecordedRequest};

/// One tool result found in a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultView {
    pub tool_use_id: String,
    pub text: String,
    /// Always false for OpenAI, whose tool messages carry no error flag.
    pub is_error: bool,
}

impl RecordedRequest {
    /// Every tool result in the conversation, oldest first.
    pub fn tool_results(&self) -> Vec<ToolResultView> {
        match self.provider {
            Provider::Anthropic => self
                .messages()
                .iter()
                .filter(|m| role(m) == Some("user"))
                .flat_map(blocks)
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .map(anthropic_tool_result)
                .collect(),
            Provider::OpenAi => self
                .messages()
                .iter()
                .filter(|m| role(m) == Some("tool"))
                .map(|m| ToolResultView {
                    tool_use_id: str_field(m, "tool_call_id"),
                    text: content_text(m.get("content")),
                    is_error: false,
                })
                .collect(),
        }
    }

    /// The newest tool result in the conversation.
    pub fn last_tool_result(&self) -> Option<ToolResultView> {
        self.tool_results().pop()
    }

    /// The text of the newest user message that has any text.
    pub fn last_user_text(&self) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .filter(|m| role(m) == Some("user"))
            .map(|m| content_text(m.get("content")))
            .find(|t| !t.is_empty())
    }

    /// The whole system prompt as text (Anthropic `system`, or OpenAI system messages).
    pub fn system_text(&self) -> String {
        match self.provider {
            Provider::Anthropic => content_text(self.json.as_ref().and_then(|j| j.get("system"))),
            Provider::OpenAi => self
                .messages()
                .iter()
                .filter(|m| matches!(role(m), Some("system" | "developer")))
                .map(|m| content_text(m.get("content")))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// How many `cache_control` markers the body carries (Anthropic prompt caching).
    pub fn cache_breakpoints(&self) -> usize {
        self.json.as_ref().map_or(0, count_cache_control)
    }
}

fn count_cache_control(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            let own = usize::from(map.contains_key("cache_control"));
            own + map.values().map(count_cache_control).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(count_cache_control).sum(),
        _ => 0,
    }
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

fn str_field(value: &Value, name: &str) -> String {
    value
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn blocks(message: &Value) -> Vec<&Value> {
    match message.get("content") {
        Some(Value::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    }
}

fn anthropic_tool_result(block: &Value) -> ToolResultView {
    ToolResultView {
        tool_use_id: str_field(block, "tool_use_id"),
        text: content_text(block.get("content")),
        is_error: block
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

/// Text of a string, or of the `text` parts of a block list, joined by newlines.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

//! Anthropic-shaped [`ModelRequest`] → OpenAI Chat Completions request.
//!
//! System blocks become one `system` message; `tool_use` blocks become the assistant message's
//! `tool_calls` (arguments are JSON text); `tool_result` blocks become `tool` messages (placed
//! before any text of the same user turn, as OpenAI wants them right after the calls); tools
//! become `{type: "function", function: {name, description, parameters}}`. Thinking blocks and
//! `cache_control` have no OpenAI form and are dropped.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use ultraplan_protocol::events::{ContentBlock, Role};
use ultraplan_protocol::model::{Message, ModelRequest, ToolDefinition};

/// Which field carries the output limit. OpenAI's own API wants `max_completion_tokens` (its
/// newer models refuse `max_tokens`); OpenAI-compatible servers mostly know only `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenLimitField {
    MaxTokens,
    MaxCompletionTokens,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ChatRequest {
    pub(super) model: String,
    pub(super) messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) max_completion_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<ChatTool>,
    pub(super) stream: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(super) enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ChatToolCall {
    pub(super) id: String,
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) function: ChatFunctionCall,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ChatFunctionCall {
    pub(super) name: String,
    pub(super) arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ChatTool {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) function: ChatFunction,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ChatFunction {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) parameters: Value,
}

/// Prefix of a tool result the agent marked as an error (OpenAI has no error flag).
pub(super) const TOOL_ERROR_PREFIX: &str = "Error: ";

/// The streaming chat request for `model`.
pub(super) fn to_chat_request(
    request: &ModelRequest,
    model: &str,
    limit: TokenLimitField,
) -> ChatRequest {
    let system: Vec<&str> = request.system.iter().map(|b| b.text.as_str()).collect();
    let mut messages = Vec::new();
    if !system.is_empty() {
        messages.push(ChatMessage::System {
            content: system.join("\n\n"),
        });
    }
    for message in &request.messages {
        messages.extend(translate_message(message));
    }
    let max = Some(request.max_tokens);
    ChatRequest {
        model: model.to_owned(),
        messages,
        max_tokens: max.filter(|_| limit == TokenLimitField::MaxTokens),
        max_completion_tokens: max.filter(|_| limit == TokenLimitField::MaxCompletionTokens),
        temperature: request.temperature,
        tools: request.tools.iter().map(translate_tool).collect(),
        stream: true,
        stream_options: Some(StreamOptions {
            include_usage: true,
        }),
    }
}

fn translate_tool(tool: &ToolDefinition) -> ChatTool {
    ChatTool {
        kind: "function".to_owned(),
        function: ChatFunction {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.input_schema.clone(),
        },
    }
}

/// One Anthropic message → zero or more chat messages.
fn translate_message(message: &Message) -> Vec<ChatMessage> {
    match message.role {
        Role::Assistant => translate_assistant(&message.content).into_iter().collect(),
        Role::User => translate_user(&message.content),
    }
}

fn joined_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn translate_assistant(blocks: &[ContentBlock]) -> Option<ChatMessage> {
    let text = joined_text(blocks);
    let tool_calls: Vec<ChatToolCall> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some(ChatToolCall {
                id: id.clone(),
                kind: "function".to_owned(),
                function: ChatFunctionCall {
                    name: name.clone(),
                    arguments: arguments_text(input),
                },
            }),
            _ => None,
        })
        .collect();
    if text.is_empty() && tool_calls.is_empty() {
        return None;
    }
    Some(ChatMessage::Assistant {
        content: (!text.is_empty()).then_some(text),
        tool_calls,
    })
}

/// Tool input as OpenAI arguments. A string input is arguments the model sent that were not
/// valid JSON; they go back verbatim.
pub(super) fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

fn translate_user(blocks: &[ContentBlock]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = blocks
        .iter()
        .filter_map(ContentBlock::as_tool_result)
        .map(|(tool_use_id, text, is_error)| ChatMessage::Tool {
            tool_call_id: tool_use_id.to_owned(),
            content: if is_error {
                format!("{TOOL_ERROR_PREFIX}{text}")
            } else {
                text
            },
        })
        .collect();
    let text = joined_text(blocks);
    if !text.is_empty() {
        out.push(ChatMessage::User { content: text });
    }
    out
}

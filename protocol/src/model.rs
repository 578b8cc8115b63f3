//! Provider-neutral model requests and responses, in Anthropic Messages shape.
//!
//! The agent builds a [`ModelRequest`]; the server's gateway sends it to the configured
//! provider (translating for OpenAI-compatible ones) and returns a [`ModelResponse`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::events::{CacheControl, ContentBlock, Role};
pub use crate::usage::Usage;

/// One block of the system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SystemBlock {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

impl SystemBlock {
    /// A text block of the system prompt.
    pub fn text(text: impl Into<String>) -> Self {
        SystemBlock {
            kind: "text".to_owned(),
            text: text.into(),
            cache_control: None,
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

/// A model request in Anthropic Messages shape. `model` is filled in by the gateway when the
/// agent leaves it empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemBlock>,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal,
}

/// A complete model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelResponse {
    pub id: String,
    pub model: String,
    pub content: Vec<ContentBlock>,
    pub stop_reason: Option<StopReason>,
    #[serde(default)]
    pub usage: Usage,
}

/// A completed model call: the answer and how many provider attempts it took (retries
/// included; the offline planner always takes one).
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub response: ModelResponse,
    pub attempts: u32,
}

/// Why the gateway could not answer a model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ModelErrorKind {
    /// The conversation no longer fits the context window; the agent may compact and retry.
    PromptTooLong,
    /// The session's token budget is spent.
    BudgetExhausted,
    /// The provider kept failing after bounded retries.
    Unavailable,
    /// The provider refused the request (4xx other than 429).
    InvalidRequest,
}

/// A failed model request, as sent back to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelError {
    pub kind: ModelErrorKind,
    pub message: String,
}

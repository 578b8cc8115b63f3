//! SDK-message shaped events: the append-only session log is a sequence of these.
//!
//! An [`Event`] is an [`EventBody`] stamped by the server with `id`, `session_id` and
//! `created_at`. Bodies are what clients and the agent send; the stamp is added on append.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::constants::{EXIT_PLAN_MODE_TOOL, UserWait};
use crate::usage::Usage;

/// One stored event: a body plus the server's stamp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Event {
    /// Strictly increasing within a session.
    pub id: i64,
    pub session_id: String,
    /// RFC 3339 UTC timestamp.
    pub created_at: String,
    #[serde(flatten)]
    pub body: EventBody,
}

/// The SDK message kinds, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventBody {
    Assistant(AssistantEvent),
    User(UserEvent),
    Result(ResultEvent),
    System(SystemEvent),
    ControlRequest(ControlRequestEvent),
}

impl EventBody {
    /// The tool_use id of the subagent call this event belongs to, if any.
    pub fn parent_tool_use_id(&self) -> Option<&str> {
        match self {
            EventBody::Assistant(e) => e.parent_tool_use_id.as_deref(),
            EventBody::User(e) => e.parent_tool_use_id.as_deref(),
            _ => None,
        }
    }

    /// A user message with plain text content.
    pub fn user_text(text: impl Into<String>) -> Self {
        EventBody::User(UserEvent {
            message: UserMessage {
                role: Role::User,
                content: UserContent::Text(text.into()),
            },
            parent_tool_use_id: None,
        })
    }

    /// A user message carrying one tool_result block.
    pub fn tool_result(tool_use_id: &str, content: impl Into<String>, is_error: bool) -> Self {
        EventBody::User(UserEvent {
            message: UserMessage {
                role: Role::User,
                content: UserContent::Blocks(vec![ContentBlock::ToolResult {
                    tool_use_id: tool_use_id.to_owned(),
                    content: ToolResultContent::Text(content.into()),
                    is_error: is_error.then_some(true),
                    cache_control: None,
                }]),
            },
            parent_tool_use_id: None,
        })
    }

    /// A main-agent assistant message with the given blocks.
    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        EventBody::Assistant(AssistantEvent {
            message: AssistantMessage {
                role: Role::Assistant,
                content,
                model: None,
                stop_reason: None,
                usage: None,
            },
            parent_tool_use_id: None,
        })
    }

    /// The error `result` the harness appends when a session dies: `subtype` says how
    /// (`error_during_execution`, `error_max_turns`, …), `message` says why.
    pub fn error_result(subtype: &str, message: String) -> Self {
        EventBody::Result(ResultEvent {
            subtype: subtype.to_owned(),
            is_error: true,
            result: Some(message),
            num_turns: None,
            duration_ms: None,
            usage: None,
            patch: None,
        })
    }

    /// The `plan` input of every main-agent ExitPlanMode call in this event, with its id.
    pub fn exit_plan_mode_calls(&self) -> Vec<(&str, Option<&str>)> {
        self.main_agent_tool_uses()
            .filter(|(_, name, _)| *name == EXIT_PLAN_MODE_TOOL)
            .map(|(id, _, input)| (id, input.get("plan").and_then(Value::as_str)))
            .collect()
    }

    /// The whole input of every main-agent ExitPlanMode call in this event, with its id.
    pub fn exit_plan_mode_inputs(&self) -> Vec<(&str, &Value)> {
        self.main_agent_tool_uses()
            .filter(|(_, name, _)| *name == EXIT_PLAN_MODE_TOOL)
            .map(|(id, _, input)| (id, input))
            .collect()
    }

    /// Every main-agent tool_use of this event that leaves the session waiting on the user, in
    /// order, with what it waits for (see [`UserWait::of_tool`]). Subagent calls never wait.
    pub fn user_waits(&self) -> Vec<(&str, UserWait)> {
        self.main_agent_tool_uses()
            .filter_map(|(id, name, _)| UserWait::of_tool(name).map(|wait| (id, wait)))
            .collect()
    }

    /// `(id, name, input)` of every tool_use block of a main-agent assistant event.
    fn main_agent_tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        let blocks = match self {
            EventBody::Assistant(a) if a.parent_tool_use_id.is_none() => &a.message.content[..],
            _ => &[],
        };
        blocks.iter().filter_map(|b| match b {
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// Every tool_result block of a main-agent user event: `(tool_use_id, text, is_error)`.
    pub fn tool_results(&self) -> Vec<(&str, String, bool)> {
        let EventBody::User(u) = self else {
            return Vec::new();
        };
        if u.parent_tool_use_id.is_some() {
            return Vec::new();
        }
        let UserContent::Blocks(blocks) = &u.message.content else {
            return Vec::new();
        };
        blocks
            .iter()
            .filter_map(ContentBlock::as_tool_result)
            .collect()
    }
}

/// Message author.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    #[default]
    User,
    Assistant,
}

fn assistant_role() -> Role {
    Role::Assistant
}

/// `type: "assistant"`: a model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistantEvent {
    pub message: AssistantMessage,
    /// Set on subagent traffic: the Task tool_use that spawned it.
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
}

/// The assistant message inside an assistant event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AssistantMessage {
    #[serde(default = "assistant_role")]
    pub role: Role,
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `type: "user"`: a prompt, an answer, or tool results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserEvent {
    pub message: UserMessage,
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
}

/// The user message inside a user event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UserMessage {
    #[serde(default)]
    pub role: Role,
    pub content: UserContent,
}

/// User content is either a plain string or a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<ContentBlock>),
}

impl UserContent {
    /// The concatenated text of the content (text blocks only).
    pub fn text(&self) -> String {
        match self {
            UserContent::Text(t) => t.clone(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Prompt-cache breakpoint marker (Anthropic `cache_control`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheControl {
    #[serde(rename = "type")]
    pub kind: String,
}

impl CacheControl {
    /// The only kind providers accept today.
    pub fn ephemeral() -> Self {
        CacheControl {
            kind: "ephemeral".to_owned(),
        }
    }
}

/// Content blocks, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: String,
        name: String,
        #[cfg_attr(feature = "openapi", schema(value_type = Object))]
        input: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: String,
        content: ToolResultContent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
}

impl ContentBlock {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            cache_control: None,
        }
    }

    /// `(tool_use_id, text, is_error)` when this is a tool_result block.
    pub fn as_tool_result(&self) -> Option<(&str, String, bool)> {
        match self {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => Some((
                tool_use_id.as_str(),
                content.text(),
                is_error.unwrap_or(false),
            )),
            _ => None,
        }
    }

    /// A tool_use block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        ContentBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            cache_control: None,
        }
    }
}

/// tool_result content: a string or a list of text blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<ToolResultBlock>),
}

impl ToolResultContent {
    /// All text of the result, blocks joined by newlines.
    pub fn text(&self) -> String {
        match self {
            ToolResultContent::Text(t) => t.clone(),
            ToolResultContent::Blocks(blocks) => blocks
                .iter()
                .map(|ToolResultBlock::Text { text }| text.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// A block inside a tool_result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultBlock {
    Text { text: String },
}

/// `type: "result"`: the end of a turn (`success`) or of the session (`error_*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResultEvent {
    /// `success`, or `error_during_execution`, `error_timeout`, `error_max_turns`,
    /// `error_budget`, … when the session dies.
    pub subtype: String,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_turns: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// On the result that ends remote execution: the files it changed and their stats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<crate::patch::PatchSummary>,
}

impl ResultEvent {
    /// The subtype that marks an ordinary end of turn.
    pub const SUCCESS: &'static str = "success";

    /// Whether this result ends the session (any subtype but `success`).
    pub fn is_terminal(&self) -> bool {
        self.subtype != Self::SUCCESS
    }
}

/// `type: "system"`: lifecycle notes (`init`, `resumed`, `stalled`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SystemEvent {
    pub subtype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Value,
}

/// `type: "control_request"`: a client instruction to the harness.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ControlRequestEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub request: ControlRequest,
}

/// The control requests the harness understands, tagged by `subtype`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ControlRequest {
    SetPermissionMode {
        mode: PermissionMode,
        #[serde(default)]
        ultraplan: bool,
    },
    Interrupt {},
}

/// Agent permission modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    Plan,
    Default,
    AcceptEdits,
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;

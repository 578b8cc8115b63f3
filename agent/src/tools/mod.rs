//! The agent's workspace tools, plus the [`ToolRegistry`] that dispatches a model's tool_use to
//! them: the read-only `Glob`, `Grep` and `Read` (every mode), and `Write`, `Edit` and `Bash`,
//! which change the workspace (execution mode only).
//!
//! A tool's failure (bad input, missing file, invalid regex, …) is not a Rust error: it becomes a
//! [`ToolOutput`] with `is_error: true` and goes back to the model, which can correct itself.

pub mod bash;
pub mod edit;
pub mod glob;
pub mod grep;
mod grep_output;
mod grep_sink;
pub mod read;
mod registry;
mod walk;
pub mod write;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use thiserror::Error;
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::model::ToolDefinition;

use crate::conversation::tool_result_block;
use crate::workspace::WorkspaceError;

pub use registry::ToolRegistry;

/// The tools that change the workspace or run commands. A call of one of them that was cut
/// short by a restart is not repeated on resume (it may have taken effect).
pub const MUTATING_TOOLS: [&str; 3] = [write::NAME, edit::NAME, bash::NAME];

/// Whether `name` is one of [`MUTATING_TOOLS`].
pub fn is_mutating(name: &str) -> bool {
    MUTATING_TOOLS.contains(&name)
}

/// The result of one tool call, as returned to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failed result; the model sees `content` as the error.
    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: true,
        }
    }

    /// The `tool_result` block answering the tool_use `tool_use_id`.
    pub fn into_block(self, tool_use_id: &str) -> ContentBlock {
        tool_result_block(tool_use_id, self.content, self.is_error)
    }
}

impl From<Result<String, ToolError>> for ToolOutput {
    fn from(result: Result<String, ToolError>) -> Self {
        match result {
            Ok(content) => ToolOutput::ok(content),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

/// Why a tool call failed. The `Display` text is written for the model.
#[derive(Debug, Error)]
pub enum ToolError {
    /// The input does not match the tool's schema.
    #[error("Invalid input for {tool}: {message}")]
    InvalidInput { tool: &'static str, message: String },
    /// The path given is unusable.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    /// The input is well-formed but cannot be acted on (bad regex, directory given to Read, …).
    #[error("{0}")]
    Refused(String),
    /// Reading a file failed.
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Writing a file (or creating its directories) failed.
    #[error("cannot write `{path}`: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A tool as offered to the model, taking an object of `properties` of which `required` must be
/// given, and nothing else.
pub(crate) fn object_tool(
    name: &str,
    description: &str,
    properties: Value,
    required: &[&str],
) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        }),
        cache_control: None,
    }
}

/// Deserializes a tool's input, naming the offending field on failure.
pub(crate) fn parse_input<T: DeserializeOwned>(
    tool: &'static str,
    input: serde_json::Value,
) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." {
            inner.to_string()
        } else {
            format!("field `{path}`: {inner}")
        };
        ToolError::InvalidInput { tool, message }
    })
}

/// Cuts `text` to at most `max_chars` characters, marking the cut. Returns whether it cut.
pub(crate) fn truncate_chars(text: &mut String, max_chars: usize) -> bool {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return false;
    };
    text.truncate(cut);
    text.push_str(" […]");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Sample {
        name: String,
        #[serde(rename = "-A")]
        after: Option<u32>,
    }

    #[test]
    fn parse_errors_name_the_field() {
        let cases = [
            (serde_json::json!({}), "`name`"),
            (serde_json::json!({"name": 3}), "field `name`"),
            (serde_json::json!({"name": "x", "-A": "3"}), "field `-A`"),
            (serde_json::json!({"name": "x", "-A": -1}), "field `-A`"),
            (serde_json::json!({"name": "x", "bogus": 1}), "`bogus`"),
        ];
        for (input, needle) in cases {
            let err = parse_input::<Sample>("Sample", input.clone()).expect_err("must fail");
            let text = err.to_string();
            assert!(text.starts_with("Invalid input for Sample: "), "{text}");
            assert!(text.contains(needle), "{input}: {text}");
        }
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let cases = [
            ("héllo wörld", 5, "héllo […]", true),
            ("short", 10, "short", false),
        ];
        for (input, max, want, cut) in cases {
            let mut text = input.to_owned();
            assert_eq!(truncate_chars(&mut text, max), cut);
            assert_eq!(text, want);
        }
    }

    #[test]
    fn outputs_become_tool_result_blocks() {
        let block = ToolOutput::error("nope").into_block("toolu_1");
        let json = serde_json::to_value(block).expect("json");
        assert_eq!(json["type"], "tool_result");
        assert_eq!(json["is_error"], true);
        assert_eq!(json["content"], "nope");
        let ok = serde_json::to_value(ToolOutput::ok("fine").into_block("t")).expect("json");
        assert!(ok.get("is_error").is_none());
    }
}

//! The `Task` tool (alias `Agent`): starts a subagent. Its description lists the agent types
//! of the session; without `subagent_type` the subagent is a fork of the caller.

use serde::Deserialize;
use serde_json::{Value, json};
use ultraplan_protocol::model::ToolDefinition;

use super::definition::Catalog;
use crate::tools::parse_input;

/// The tool's name as offered.
pub const NAME: &str = "Task";
/// Another name models use for it; calls under it are treated the same.
pub const ALIAS: &str = "Agent";

/// Whether a call names this tool.
pub fn is_task(name: &str) -> bool {
    name == NAME || name == ALIAS
}

/// A valid call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInput {
    pub description: String,
    pub prompt: String,
    /// `None`: fork.
    pub subagent_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(expecting = "an object with `description` and `prompt` strings")]
struct RawInput {
    description: String,
    prompt: String,
    #[serde(default)]
    subagent_type: Option<String>,
}

/// Reads a call's input; the error text goes back to the model.
pub fn parse(input: &Value) -> Result<TaskInput, String> {
    let raw: RawInput = parse_input(NAME, input.clone()).map_err(|e| e.to_string())?;
    if raw.prompt.trim().is_empty() {
        return Err(format!("Invalid input for {NAME}: `prompt` is empty"));
    }
    let description = match raw.description.trim() {
        "" => "subagent".to_owned(),
        d => d.to_owned(),
    };
    Ok(TaskInput {
        description,
        prompt: raw.prompt,
        subagent_type: raw
            .subagent_type
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty()),
    })
}

/// Whether a call's input asks for a fork (no `subagent_type`).
pub fn is_fork(input: &Value) -> bool {
    parse(input).is_ok_and(|t| t.subagent_type.is_none())
}

/// The tool as offered, listing the catalog's agent types.
pub fn definition(catalog: &Catalog) -> ToolDefinition {
    let types: String = catalog
        .agents()
        .iter()
        .map(|a| {
            let start = if a.inherits_context { INHERITS } else { "" };
            format!("- {}: {}{start}\n", a.name, one_line(&a.description))
        })
        .collect();
    ToolDefinition {
        name: NAME.to_owned(),
        description: format!("{INTRO}\n\nAgent types (`subagent_type`):\n{types}\n{FORK}"),
        input_schema: json!({
            "type": "object",
            "properties": {
                "description": {"type": "string",
                    "description": "A short (3-6 word) label for the task."},
                "prompt": {"type": "string", "minLength": 1,
                    "description": "The complete brief for the subagent."},
                "subagent_type": {"type": "string",
                    "description": "The agent type to run; omit it to fork yourself."}
            },
            "required": ["description", "prompt"]
        }),
        cache_control: None,
    }
}

const INTRO: &str = "Start a subagent: a separate agent that works on one task in its own \
context and reports back. Use it to investigate several independent questions in parallel, or \
to get an independent review. Subagents started in the same message run concurrently; each \
one's final report comes back as this call's result, inside <task-notification> tags, with \
its status and usage.

Write `prompt` as a complete brief: a subagent of a named type has not seen this conversation \
(unless its entry says it starts from a copy of it) and cannot ask you questions. Say what to find out, where to start if you know, and what to \
report. Subagents are read-only; they cannot start subagents, ask the user questions or submit \
plans.";

/// Appended to the entry of a type that inherits the caller's context.
const INHERITS: &str = " It starts from a copy of this conversation.";

const FORK: &str = "Omit `subagent_type` to fork yourself: the subagent starts from a copy of \
this whole conversation and follows `prompt` as its directive. Forks suit work that needs the \
context you have already gathered; a fork cannot fork again.";

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_parse_or_explain() {
        let ok = parse(&json!({"description": " d ", "prompt": "p", "subagent_type": " explore "}));
        assert_eq!(
            ok,
            Ok(TaskInput {
                description: "d".into(),
                prompt: "p".into(),
                subagent_type: Some("explore".into()),
            })
        );
        assert!(is_fork(
            &json!({"description": "d", "prompt": "p", "subagent_type": ""})
        ));
        assert!(is_fork(
            &json!({"description": "d", "prompt": "p", "model": "x"})
        ));
        assert!(!is_fork(&json!({"description": "d"})));
        let cases = [
            (json!({"description": "d"}), "missing field `prompt`"),
            (
                json!({"description": "d", "prompt": "  "}),
                "`prompt` is empty",
            ),
            (json!("x"), "an object with `description` and `prompt`"),
        ];
        for (input, want) in cases {
            let err = parse(&input).expect_err("invalid");
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    #[test]
    fn the_definition_lists_agent_types_and_forking() {
        let def = definition(&Catalog::new(vec![]));
        assert_eq!(def.name, NAME);
        for name in [
            "- explore:",
            "- plan:",
            "- critique:",
            "- general:",
            "fork yourself",
        ] {
            assert!(def.description.contains(name), "{name}");
        }
        let critique = def
            .description
            .lines()
            .find(|l| l.starts_with("- critique:"));
        assert!(
            critique.is_some_and(|l| l.ends_with(INHERITS)),
            "{critique:?}"
        );
        let explore = def
            .description
            .lines()
            .find(|l| l.starts_with("- explore:"));
        assert!(
            explore.is_some_and(|l| !l.contains(INHERITS)),
            "{explore:?}"
        );
        assert!(!def.description.to_lowercase().contains("ultraplan"));
        assert!(is_task("Task") && is_task("Agent") && !is_task("task"));
    }
}

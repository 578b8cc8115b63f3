//! `AskUserQuestion`: a question for the user; the harness waits for the answer.

use serde::Deserialize;
use serde_json::{Value, json};
use ultraplan_protocol::constants::ASK_USER_QUESTION_TOOL;
use ultraplan_protocol::model::ToolDefinition;

use crate::tools::{object_tool, parse_input};

/// The tool's name as the model calls it.
pub const NAME: &str = ASK_USER_QUESTION_TOOL;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `question` string")]
struct AskInput {
    question: String,
    #[serde(default)]
    #[allow(dead_code)]
    options: Option<Vec<String>>,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "question": {"type": "string", "minLength": 1,
                "description": "One clear question, with the context the user needs to answer it."},
            "options": {"type": "array", "items": {"type": "string"},
                "description": "Suggested answers, if the choice is between a few options."}
        }),
        &["question"],
    )
}

const DESCRIPTION: &str = "Ask the user a question and wait for the answer. Use it only when \
the request is ambiguous in a way the code cannot settle and the answer changes the plan (for \
example, a choice between two designs with real trade-offs). Ask one question at a time, \
explain why it matters, and offer options when there are a few natural answers. Do not ask for \
approval of the plan here: submit it with ExitPlanMode.";

/// Checks the input; the error text goes back to the model.
pub fn validate(input: &Value) -> Result<(), String> {
    let parsed: AskInput = parse_input(NAME, input.clone()).map_err(|e| e.to_string())?;
    if parsed.question.trim().is_empty() {
        return Err(format!("Invalid input for {NAME}: `question` is empty"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_validated() {
        let cases = [
            (json!({"question": "Which DB?"}), None),
            (
                json!({"question": "Which DB?", "options": ["a", "b"]}),
                None,
            ),
            (json!({"question": "  "}), Some("`question` is empty")),
            (json!({}), Some("missing field `question`")),
            (
                json!({"question": "q", "options": "a"}),
                Some("field `options`"),
            ),
        ];
        for (input, want) in cases {
            match (validate(&input), want) {
                (Ok(()), None) => {}
                (Err(e), Some(needle)) => assert!(e.contains(needle), "{input}: {e}"),
                (got, _) => panic!("{input}: {got:?}"),
            }
        }
    }
}

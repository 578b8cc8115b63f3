//! `ExitPlanMode`: submits the plan for review. The user's decision comes back as its
//! tool_result (docs/ARCHITECTURE.md §3.2): approval, rejection with feedback, or teleport.

use serde::Deserialize;
use serde_json::{Value, json};
use ultraplan_protocol::comments::ADDRESSED_COMMENT_IDS;
use ultraplan_protocol::constants::EXIT_PLAN_MODE_TOOL;
use ultraplan_protocol::model::ToolDefinition;
use ultraplan_protocol::plan_text::{extract_approved_plan, extract_teleport_plan};

use crate::tools::{object_tool, parse_input};

/// The tool's name as the model calls it.
pub const NAME: &str = EXIT_PLAN_MODE_TOOL;

/// The final result text after an approval, while remote execution is not built.
pub const APPROVED_RESULT_TEXT: &str = "Plan approved. Remote execution is not enabled on this \
server; teleport the plan to implement it locally.";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `plan` string")]
struct ExitPlanInput {
    plan: String,
    /// Ids of the reviewer's comments the plan addresses (after a rejection with comments).
    #[serde(default)]
    addressed_comment_ids: Option<Vec<String>>,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "plan": {"type": "string", "minLength": 1,
                "description": "The complete plan in Markdown."},
            "addressed_comment_ids": {"type": "array", "items": {"type": "string"},
                "description": "Only when revising after a rejection that listed comments: \
                    the ids of the comments this plan addresses. Leave out any it does not."}
        }),
        &["plan"],
    )
}

const DESCRIPTION: &str = "Submit your finished plan for the user's review and wait for their \
decision. Pass the complete plan in Markdown as `plan`; the user sees exactly this text. Call it \
once the plan is complete, not to ask questions. The result tells you the decision: approval, \
or a rejection carrying the user's feedback, in which case revise the plan and call \
ExitPlanMode again with the complete revised plan. When the rejection lists comments with ids \
(`[cmt_…]`), name the ones the revised plan addresses in `addressed_comment_ids`.";

/// Checks the input; the error text goes back to the model.
pub fn validate(input: &Value) -> Result<(), String> {
    let parsed: ExitPlanInput = parse_input(NAME, input.clone()).map_err(|e| e.to_string())?;
    if parsed.plan.trim().is_empty() {
        return Err(format!("Invalid input for {NAME}: `plan` is empty"));
    }
    let ids = parsed.addressed_comment_ids.unwrap_or_default();
    if ids.iter().any(|id| id.trim().is_empty()) {
        return Err(format!(
            "Invalid input for {NAME}: `{ADDRESSED_COMMENT_IDS}` holds an empty id"
        ));
    }
    Ok(())
}

/// The user's decision on a submitted plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The plan phase ends.
    Approved,
    /// The feedback goes back to the model.
    Rejected,
    /// The plan goes back to the terminal; the harness stops.
    Teleported,
}

/// Classifies an ExitPlanMode tool_result.
pub fn classify(text: &str, is_error: bool) -> Decision {
    if is_error {
        if extract_teleport_plan(text).is_some() {
            Decision::Teleported
        } else {
            Decision::Rejected
        }
    } else {
        if extract_approved_plan(text).is_none() {
            tracing::warn!("approval result without the approved-plan marker");
        }
        Decision::Approved
    }
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::api::Decision as ApiDecision;
    use ultraplan_protocol::plan_text::decision_tool_result;

    use super::*;

    #[test]
    fn decisions_are_classified_from_their_results() {
        let cases = [
            (ApiDecision::Approve { plan: None }, Decision::Approved),
            (
                ApiDecision::Approve {
                    plan: Some("edited".into()),
                },
                Decision::Approved,
            ),
            (
                ApiDecision::Reject {
                    feedback: "add tests".into(),
                    comment_ids: Vec::new(),
                },
                Decision::Rejected,
            ),
            (
                ApiDecision::Reject {
                    feedback: "__ULTRAPLAN_TELEPORT_LOCALE__ no".into(),
                    comment_ids: Vec::new(),
                },
                Decision::Rejected,
            ),
            (ApiDecision::Teleport {}, Decision::Teleported),
        ];
        for (decision, want) in cases {
            let (text, is_error) = decision_tool_result(&decision, "1. plan");
            assert_eq!(classify(&text, is_error), want, "{decision:?}");
        }
    }

    #[test]
    fn inputs_are_validated() {
        assert!(validate(&json!({"plan": "# Plan"})).is_ok());
        let addressed = json!({"plan": "# Plan", "addressed_comment_ids": ["cmt_1"]});
        assert!(validate(&addressed).is_ok());
        assert!(validate(&json!({"plan": "# P", "addressed_comment_ids": []})).is_ok());
        let cases = [
            (json!({"plan": ""}), "`plan` is empty"),
            (json!({}), "missing field `plan`"),
            (json!({"plan": 3}), "field `plan`"),
            (
                json!({"plan": "# P", "addressed_comment_ids": "cmt_1"}),
                "addressed_comment_ids",
            ),
            (
                json!({"plan": "# P", "addressed_comment_ids": [" "]}),
                "holds an empty id",
            ),
            (json!({"plan": "# P", "other": 1}), "unknown field"),
        ];
        for (input, needle) in cases {
            let err = validate(&input).expect_err("invalid");
            assert!(err.contains(needle), "{input}: {err}");
        }
    }
}

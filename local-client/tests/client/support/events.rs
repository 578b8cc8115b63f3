//! Event bodies as the agent and the server produce them.

use serde_json::json;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{ContentBlock, EventBody, ResultEvent};
use ultraplan_protocol::plan_text::decision_tool_result;

pub const PLAN: &str = "# Plan\n\n1. Fix the token refresh.\n2. Add a test.";

/// The agent calls ExitPlanMode.
pub fn plan_call(tool_use_id: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::tool_use(
        tool_use_id,
        "ExitPlanMode",
        json!({ "plan": PLAN }),
    )])
}

/// The tool_result a decision produces.
pub fn decided(tool_use_id: &str, decision: &Decision) -> EventBody {
    let (text, is_error) = decision_tool_result(decision, PLAN);
    EventBody::tool_result(tool_use_id, text, is_error)
}

pub fn approved(tool_use_id: &str) -> EventBody {
    decided(tool_use_id, &Decision::Approve { plan: None })
}

pub fn teleported(tool_use_id: &str) -> EventBody {
    decided(tool_use_id, &Decision::Teleport {})
}

pub fn rejected(tool_use_id: &str) -> EventBody {
    decided(
        tool_use_id,
        &Decision::Reject {
            feedback: "cover the error path".into(),
            comment_ids: Vec::new(),
        },
    )
}

/// An approval result without the approved-plan marker.
pub fn approved_without_marker(tool_use_id: &str) -> EventBody {
    EventBody::tool_result(tool_use_id, "User has approved your plan.", false)
}

/// The session died.
pub fn terminated(subtype: &str) -> EventBody {
    EventBody::Result(ResultEvent {
        subtype: subtype.into(),
        is_error: true,
        result: None,
        num_turns: None,
        duration_ms: None,
        usage: None,
        patch: None,
    })
}

/// Some agent chatter.
pub fn text(t: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::text(t)])
}

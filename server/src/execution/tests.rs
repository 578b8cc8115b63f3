use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{ContentBlock, EventBody};
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::patch::{Execution, ExecutionState};
use ultraplan_protocol::plan_text::decision_tool_result;

use super::*;

fn approved_log(plan: &str) -> Vec<EventBody> {
    let call = EventBody::assistant(vec![ContentBlock::ToolUse {
        id: "toolu_1".into(),
        name: "ExitPlanMode".into(),
        input: serde_json::json!({"plan": plan}),
        cache_control: None,
    }]);
    let decision = Decision::Approve { plan: None };
    let (text, is_error) = decision_tool_result(&decision, plan);
    let answer = EventBody::tool_result("toolu_1", text, is_error);
    vec![EventBody::user_text("do it"), call, answer]
}

#[test]
fn mode_follows_the_log_and_the_execution_state() {
    let approved = approved_log("1. edit");
    let pending = approved[..2].to_vec();
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    let finished = Execution {
        state: ExecutionState::Finished,
        patch: None,
    };
    let cases = [
        (&pending, None, true, AgentMode::Plan),
        (&approved, None, true, AgentMode::Execute),
        (&approved, Some(&executing), true, AgentMode::Execute),
        (&approved, Some(&finished), true, AgentMode::Plan),
        (&approved, None, false, AgentMode::Plan),
    ];
    for (log, execution, enabled, want) in cases {
        assert_eq!(
            mode_for(log, execution, enabled),
            want,
            "{execution:?} {enabled}"
        );
    }
}

//! The plan rules of a session, as pure functions the store's callers apply: which appended
//! events propose plans and leave the session waiting on the user, and the tool_result event
//! a decision appends. The store writes what these say, atomically; it decides none of it.

use ultraplan_protocol::api::Decision;
use ultraplan_protocol::comments::addressed_comment_ids;
use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::plan_text::decision_tool_result;

use crate::comments::{CommentText, with_comments};
use crate::store::{AppendEffects, NewPlan};

/// What appending `events` does beyond the log: each main-agent ExitPlanMode call proposes a
/// plan, and any main-agent call that waits on the user (a plan or a question) puts the
/// session into `requires_action`.
pub fn append_effects(events: &[EventBody]) -> AppendEffects {
    let mut effects = AppendEffects::default();
    for (event, body) in events.iter().enumerate() {
        for (tool_use_id, input) in body.exit_plan_mode_inputs() {
            effects.plans.push(NewPlan {
                event,
                tool_use_id: tool_use_id.to_owned(),
                plan: input
                    .get("plan")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                addressed_comment_ids: addressed_comment_ids(input),
            });
        }
        effects.requires_action |= !body.user_waits().is_empty();
    }
    effects
}

/// The tool_result a decision on the plan `proposed` (called as `tool_use_id`) appends for
/// the agent.
pub fn decision_result(tool_use_id: &str, decision: &Decision, proposed: &str) -> EventBody {
    decision_result_with(tool_use_id, decision, proposed, &[])
}

/// [`decision_result`] for a decision that carries inline comments: a rejection's text keeps
/// its contract and lists the comments after it ([`crate::comments::with_comments`]).
pub fn decision_result_with(
    tool_use_id: &str,
    decision: &Decision,
    proposed: &str,
    comments: &[CommentText<'_>],
) -> EventBody {
    let (mut content, is_error) = decision_tool_result(decision, proposed);
    if matches!(decision, Decision::Reject { .. }) {
        content = with_comments(&content, comments);
    }
    EventBody::tool_result(tool_use_id, content, is_error)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use ultraplan_protocol::ContentBlock;

    use super::*;

    fn call(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
        ContentBlock::tool_use(id, name, input)
    }

    fn subagent(mut body: EventBody) -> EventBody {
        if let EventBody::Assistant(a) = &mut body {
            a.parent_tool_use_id = Some("task".to_owned());
        }
        body
    }

    fn plan(event: usize, id: &str, text: &str) -> NewPlan {
        NewPlan {
            event,
            tool_use_id: id.to_owned(),
            plan: text.to_owned(),
            addressed_comment_ids: None,
        }
    }

    #[test]
    fn plans_and_waits_come_from_main_agent_calls() {
        let exit = |id: &str, text: &str| call(id, "ExitPlanMode", json!({ "plan": text }));
        let ask = call("q", "AskUserQuestion", json!({ "questions": [] }));
        let read = call("r", "Read", json!({ "file_path": "a" }));
        let cases: Vec<(Vec<EventBody>, Vec<NewPlan>, bool)> = vec![
            (vec![EventBody::user_text("go")], vec![], false),
            (
                vec![EventBody::assistant(vec![read.clone()])],
                vec![],
                false,
            ),
            (
                vec![
                    EventBody::user_text("go"),
                    EventBody::assistant(vec![read, exit("p1", "# One")]),
                ],
                vec![plan(1, "p1", "# One")],
                true,
            ),
            (
                vec![EventBody::assistant(vec![exit("a", "A"), exit("b", "B")])],
                vec![plan(0, "a", "A"), plan(0, "b", "B")],
                true,
            ),
            (
                vec![EventBody::assistant(vec![call(
                    "p",
                    "ExitPlanMode",
                    json!({}),
                )])],
                vec![plan(0, "p", "")],
                true,
            ),
            (
                vec![EventBody::assistant(vec![call(
                    "r2",
                    "ExitPlanMode",
                    json!({"plan": "B", "addressed_comment_ids": ["cmt_1", "cmt_1", 7]}),
                )])],
                vec![NewPlan {
                    addressed_comment_ids: Some(vec!["cmt_1".to_owned()]),
                    ..plan(0, "r2", "B")
                }],
                true,
            ),
            (vec![EventBody::assistant(vec![ask.clone()])], vec![], true),
            (
                vec![
                    subagent(EventBody::assistant(vec![exit("s", "S")])),
                    subagent(EventBody::assistant(vec![ask])),
                ],
                vec![],
                false,
            ),
        ];
        for (events, plans, requires_action) in cases {
            let want = AppendEffects {
                plans,
                requires_action,
                ..AppendEffects::default()
            };
            assert_eq!(append_effects(&events), want, "{events:?}");
        }
    }

    #[test]
    fn a_decision_answers_its_tool_use_with_the_plan_text() {
        use ultraplan_protocol::plan_text::extract_approved_plan;
        // (decision, is_error, the plan the agent reads back from an approval)
        let cases = [
            (
                Decision::Approve { plan: None },
                false,
                Some(("# P", false)),
            ),
            (
                Decision::Approve {
                    plan: Some("# Edited".to_owned()),
                },
                false,
                Some(("# Edited", true)),
            ),
            (
                Decision::Reject {
                    feedback: "no".to_owned(),
                    comment_ids: Vec::new(),
                },
                true,
                None,
            ),
            (Decision::Teleport {}, true, None),
        ];
        for (decision, want_error, want_plan) in cases {
            let body = decision_result("p1", &decision, "# P");
            let results = body.tool_results();
            let [(id, text, is_error)] = results.as_slice() else {
                panic!("one tool_result, got {results:?}");
            };
            assert_eq!((*id, *is_error), ("p1", want_error), "{decision:?}");
            let plan = extract_approved_plan(text);
            let plan = plan.as_ref().map(|(p, edited)| (p.trim(), *edited));
            assert_eq!(plan, want_plan, "{decision:?}");
        }
    }
}

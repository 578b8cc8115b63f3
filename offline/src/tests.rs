//! `offline_turn` on hand-built conversations: tool availability, failures, limits, verdicts.

use serde_json::json;
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::constants::EXIT_PLAN_MODE_TOOL;
use ultraplan_protocol::events::Role;
use ultraplan_protocol::model::{Message, StopReason};

use super::fake_repo::{Agent, FakeRepo, request, tool_result, tools, user_text};
use super::{MAX_TURNS_PER_PLAN, PENDING_REPLY, offline_turn};

fn small_repo() -> FakeRepo {
    FakeRepo::new(&[
        ("go.mod", "module example.com/shop\n"),
        ("Makefile", "test:\n\tgo test ./...\n"),
        (
            "cart/cart.go",
            "package cart\n\n// Total sums the cart.\nfunc Total() int { return 0 }\n",
        ),
        (
            "cart/discount.go",
            "package cart\n\n// Discount applies coupons to the cart total.\nfunc Discount() {}\n",
        ),
        (
            "cart/cart_test.go",
            "package cart\n\nfunc TestTotal(t *testing.T) {}\n",
        ),
    ])
}

fn plan_of(agent: &mut Agent<'_>, max_turns: usize) -> String {
    match agent.run_until_plan(max_turns) {
        Some((plan, _)) => plan,
        None => match &agent
            .responses
            .last()
            .map(|r| r.content.clone())
            .unwrap_or_default()[..]
        {
            [ContentBlock::Text { text, .. }] => text.clone(),
            other => panic!("neither a plan nor a text: {other:?}"),
        },
    }
}

#[test]
fn only_offered_tools_are_used_and_a_plan_always_comes() {
    let repo = small_repo();
    // (tools offered, turns to the plan, tool names used, plan submitted via ExitPlanMode)
    let cases: &[(&[&str], usize, &[&str], bool)] = &[
        (
            &["Glob", "Grep", "Read", "ExitPlanMode"],
            4,
            &["Glob", "Grep", "Read"],
            true,
        ),
        (
            &["Glob", "Read", "ExitPlanMode"],
            3,
            &["Glob", "Read"],
            true,
        ),
        (
            &["Grep", "Read", "ExitPlanMode"],
            3,
            &["Grep", "Read"],
            true,
        ),
        (
            &["Glob", "Grep", "ExitPlanMode"],
            4,
            &["Glob", "Grep"],
            true,
        ),
        (&["ExitPlanMode"], 1, &[], true),
        (
            &["Glob", "Grep", "Read"],
            4,
            &["Glob", "Grep", "Read"],
            false,
        ),
        (&[], 1, &[], false),
    ];
    for (offered, turns, used, submitted) in cases {
        let mut agent = Agent::new(
            &repo,
            offered,
            vec![ContentBlock::text("fix the cart discount total")],
        );
        let plan = plan_of(&mut agent, 8);
        assert_eq!(agent.responses.len(), *turns, "{offered:?}");
        let mut names: Vec<String> = (0..agent.responses.len())
            .flat_map(|n| agent.calls(n))
            .map(|c| c.1)
            .filter(|n| n != EXIT_PLAN_MODE_TOOL)
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names, *used, "{offered:?}");
        let last = agent.responses.last().map(|r| r.stop_reason);
        let want = if *submitted {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        assert_eq!(last, Some(Some(want)), "{offered:?}");
        assert!(
            plan.starts_with("# Plan: Fix the cart discount total\n"),
            "{offered:?}: {plan}"
        );
        assert!(
            plan.contains("`go test ./...`") || !offered.contains(&"Glob"),
            "{offered:?}: {plan}"
        );
        if offered.contains(&"Glob") || offered.contains(&"Grep") {
            assert!(plan.contains("cart/discount.go"), "{offered:?}: {plan}");
        }
        if !offered.contains(&"Grep") {
            assert!(plan.contains("No Grep tool was available"), "{offered:?}");
        }
    }
}

#[test]
fn failing_tools_do_not_stop_the_plan() {
    let mut messages = vec![user_text("add coupon codes to the cart")];
    let offered = tools(&["Glob", "Grep", "Read", "ExitPlanMode"]);
    for turn in 1..=8 {
        let response = offline_turn(&request(messages.clone(), offered.clone()));
        messages.push(Message {
            role: Role::Assistant,
            content: response.content.clone(),
        });
        let ids: Vec<String> = response
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, name, .. } if name != EXIT_PLAN_MODE_TOOL => {
                    Some(id.clone())
                }
                _ => None,
            })
            .collect();
        if ids.is_empty() {
            let plan = response.content.iter().find_map(|b| match b {
                ContentBlock::ToolUse { input, .. } => input["plan"].as_str().map(str::to_owned),
                _ => None,
            });
            let plan = plan.unwrap_or_default();
            assert!(turn <= 3, "planned at turn {turn}");
            assert!(plan.contains("Glob `**/{Cargo.toml"), "{plan}");
            assert!(
                plan.contains("failed: permission denied; the plan may miss files"),
                "{plan}"
            );
            assert!(plan.contains("No test command detected"), "{plan}");
            return;
        }
        for id in ids {
            messages.push(tool_result(&id, "permission denied", true));
        }
    }
    panic!("no plan after 8 turns");
}

#[test]
fn the_turn_cap_forces_a_plan() {
    let offered = tools(&["Glob", "Grep", "Read", "TodoWrite", "ExitPlanMode"]);
    let mut messages = vec![user_text("add coupon codes")];
    for turn in 0..MAX_TURNS_PER_PLAN {
        let id = format!("todo_{turn}");
        messages.push(Message {
            role: Role::Assistant,
            content: vec![ContentBlock::tool_use(
                &id,
                "TodoWrite",
                json!({"todos": []}),
            )],
        });
        messages.push(tool_result(&id, "ok", false));
    }
    let response = offline_turn(&request(messages, offered));
    let [
        _,
        ContentBlock::ToolUse {
            id, name, input, ..
        },
    ] = &response.content[..]
    else {
        panic!("{:?}", response.content);
    };
    assert_eq!(
        (id.as_str(), name.as_str()),
        ("offline_t9_0", EXIT_PLAN_MODE_TOOL)
    );
    let plan = input["plan"].as_str().unwrap_or_default();
    assert!(
        plan.contains("Exploration stopped at the turn limit"),
        "{plan}"
    );
}

#[test]
fn a_plan_awaiting_review_gets_a_short_reply() {
    let offered = tools(&["Glob", "ExitPlanMode"]);
    let messages = vec![
        user_text("add coupon codes"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::tool_use(
                "p",
                EXIT_PLAN_MODE_TOOL,
                json!({"plan": "x"}),
            )],
        },
        user_text("any news?"),
    ];
    let response = offline_turn(&request(messages, offered));
    assert_eq!(response.content, [ContentBlock::text(PENDING_REPLY)]);
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
}

#[test]
fn responses_are_deterministic_and_fingerprinted() {
    let offered = tools(&["Glob", "ExitPlanMode"]);
    let a = request(vec![user_text("add coupon codes")], offered.clone());
    let b = request(vec![user_text("add gift cards")], offered);
    let (ra, rb) = (offline_turn(&a), offline_turn(&b));
    let bytes = |r| serde_json::to_string(r).unwrap_or_default();
    assert_eq!(bytes(&ra), bytes(&offline_turn(&a)));
    assert!(
        ra.id.starts_with("msg_offline_t1_") && ra.id != rb.id,
        "{} {}",
        ra.id,
        rb.id
    );
    let a_json = serde_json::to_string(&a).unwrap_or_default();
    assert_eq!(ra.usage.input_tokens, (a_json.len() as u64).div_ceil(4));
    assert_eq!(ra.usage.cache_read_input_tokens, 0);
}

#[test]
fn an_empty_request_still_gets_a_labelled_plan() {
    let offered = tools(&["ExitPlanMode"]);
    let response = offline_turn(&request(Vec::new(), offered));
    let plan = response
        .content
        .iter()
        .find_map(|b| match b {
            ContentBlock::ToolUse { input, .. } => input["plan"].as_str().map(str::to_owned),
            _ => None,
        })
        .unwrap_or_default();
    assert!(
        plan.starts_with("# Plan: Untitled request\n\n*Written by the offline planner"),
        "{plan}"
    );
    assert!(
        plan.contains("The request names nothing specific to search"),
        "{plan}"
    );
}

#[test]
fn revisions_without_grep_or_feedback_still_come() {
    let repo = small_repo();
    // (tools offered, feedback, turns from the rejection to the revised plan, expected step)
    let cases = [
        (
            &["Glob", "Read", "ExitPlanMode"][..],
            "Cover the empty cart.",
            1,
            "**Revision 1:** Address: Cover the empty cart.",
        ),
        (
            &["Glob", "Grep", "Read", "ExitPlanMode"][..],
            "",
            1,
            "**Revision 1:** Address: the plan was rejected without feedback",
        ),
        (
            &["Glob", "Grep", "Read", "ExitPlanMode"][..],
            "Cover the empty cart.",
            2,
            "**Revision 1:** Address: Cover the empty cart. (see `cart/cart.go:1`)",
        ),
    ];
    for (offered, feedback, turns, step) in cases {
        let first = vec![ContentBlock::text("fix the cart discount total")];
        let mut agent = Agent::new(&repo, offered, first);
        let (_, id) = agent.run_until_plan(8).expect("a plan");
        let before = agent.responses.len();
        agent.decide(&id, feedback, true);
        let (revised, _) = agent.run_until_plan(4).expect("a revised plan");
        assert_eq!(
            agent.responses.len() - before,
            turns,
            "{offered:?} {feedback:?}"
        );
        assert!(
            revised.contains(step),
            "{offered:?} {feedback:?}: {revised}"
        );
        let quoted = if feedback.is_empty() {
            "> (no feedback given)"
        } else {
            "> Cover the empty cart."
        };
        assert!(revised.contains(quoted), "{revised}");
    }
}

/// The input of the last ExitPlanMode call the agent made.
fn last_plan_input(agent: &Agent<'_>) -> serde_json::Value {
    let blocks = agent.responses.iter().flat_map(|r| &r.content);
    let mut inputs = blocks.filter_map(|b| match b {
        ContentBlock::ToolUse { name, input, .. } if name == EXIT_PLAN_MODE_TOOL => Some(input),
        _ => None,
    });
    inputs.next_back().cloned().expect("an ExitPlanMode call")
}

#[test]
fn a_revision_names_the_comments_it_addresses() {
    use ultraplan_protocol::comments::ADDRESSED_REQUEST;
    let repo = small_repo();
    let offered = &["Glob", "Grep", "Read", "ExitPlanMode"][..];
    let first = vec![ContentBlock::text("fix the cart discount total")];
    let mut agent = Agent::new(&repo, offered, first);
    let (_, id) = agent.run_until_plan(8).expect("a plan");
    assert!(
        last_plan_input(&agent)
            .get("addressed_comment_ids")
            .is_none()
    );
    let feedback = format!(
        "Comments on the plan:\n1. [cmt_a] On \"Total\":\n   Cover the empty cart.\n\
         2. [cmt_b] On \"Discount\" (under Plan):\n   Keep coupons.\n\n{ADDRESSED_REQUEST}"
    );
    agent.decide(&id, &feedback, true);
    let (revised, _) = agent.run_until_plan(4).expect("a revised plan");
    let input = last_plan_input(&agent);
    assert_eq!(input["addressed_comment_ids"], json!(["cmt_a", "cmt_b"]));
    assert!(revised.contains("Cover the empty cart."), "{revised}");
    assert!(!revised.contains("addressed_comment_ids"), "{revised}");
}

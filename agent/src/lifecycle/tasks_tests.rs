//! State-machine tests of subagents: several outstanding requests routed to the right agent,
//! the concurrency cap, tool layers, forks, failures and notifications.

use serde_json::{Value, json};
use ultraplan_protocol::model::{ModelError, ModelErrorKind, ModelRequest, StopReason};
use ultraplan_protocol::{ContentBlock, EventBody};

use super::test_harness::*;
use super::*;
use crate::conversation::{text_of, tool_results};
use crate::subagents::fork;

fn task(id: &str, kind: Option<&str>, prompt: &str) -> ContentBlock {
    let mut input = json!({"description": format!("task {id}"), "prompt": prompt});
    if let Some(kind) = kind {
        input["subagent_type"] = Value::from(kind);
    }
    tool(id, "Task", input)
}

fn say(text: &str) -> Result<ModelResponse, ModelError> {
    reply(vec![ContentBlock::text(text)], StopReason::EndTurn)
}

/// Begins and answers the first request with `blocks`; returns the agent and the effects.
fn fan_out(agent: &mut Agent, blocks: Vec<ContentBlock>) -> Vec<Effect> {
    let begin = agent.handle(Input::Begin);
    assert_eq!(
        labels(&begin),
        ["system", "request"],
        "the bad file is reported"
    );
    let id = request_id(&begin);
    model(agent, &id, reply(blocks, StopReason::ToolUse))
}

/// The request whose last user text contains `needle`.
fn request_for(effects: &[Effect], needle: &str) -> (String, ModelRequest) {
    requests(effects)
        .into_iter()
        .find(|(_, r)| {
            r.messages
                .last()
                .is_some_and(|m| text_of(m).contains(needle))
        })
        .unwrap_or_else(|| panic!("no request for {needle}"))
}

fn subtypes(effects: &[Effect]) -> Vec<String> {
    emitted(effects)
        .into_iter()
        .filter_map(|e| match e {
            EventBody::System(s) => Some(s.subtype),
            _ => None,
        })
        .collect()
}

#[test]
fn parallel_subagents_are_routed_by_request_and_answer_with_notifications() {
    let mut agent = team_agent(4, vec![]);
    let blocks = vec![
        ContentBlock::text("Three questions."),
        task("ta", Some("explore"), "QA"),
        tool("g1", "Glob", json!({"pattern": "*"})),
        task("tb", Some("explore"), "QB"),
        task("tc", Some("critique"), "QC"),
    ];
    let fanned = fan_out(&mut agent, blocks);
    let started = ["system", "user", "request"];
    let mut want = vec!["assistant", "system", "system", "system", "request"];
    want.extend(started);
    want.push("tools:Glob");
    assert_eq!(labels(&fanned), want, "the explorers wait for a warm-up");
    let (warm_up, _) = request_for(&fanned, "QA");
    let mut effects = model(&mut agent, &warm_up, say("."));
    assert_eq!(labels(&effects), [started, started].concat());
    effects.extend(fanned);
    let (a, request_a) = request_for(&effects, "QA");
    let (b, _) = request_for(&effects, "QB");
    let (c, request_c) = request_for(&effects, "QC");
    assert_eq!(request_a.messages.len(), 1, "only its prompt");
    assert_eq!(text_of(&request_a.messages[0]), "QA");
    // The explorer opens its system prompt with the notes every fresh subagent shares, each
    // block ending at a breakpoint; the critic starts from a copy of the caller's request, its
    // own prompt in the directive.
    assert!(
        request_a.system[0]
            .text
            .starts_with("# Working as a subagent")
    );
    assert!(
        request_a.system[1]
            .text
            .starts_with("You are an exploration subagent")
    );
    assert!(request_a.system.iter().all(|b| b.cache_control.is_some()));
    assert!(request_a.tools.iter().all(|t| t.cache_control.is_none()));
    let names: Vec<&str> = request_a.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Glob", "Grep", "Read"]);
    assert_eq!(request_c.system, agent.prefix.system);
    assert_eq!(request_c.tools.len(), agent.prefix.tools.len());
    let directive = text_of(last_message(&request_c));
    assert!(
        directive.contains("You are now a `critique` subagent")
            && directive.contains("Use only Glob, Grep and Read.")
            && directive.contains("You are an adversarial reviewer")
            && directive.ends_with("Directive: QC\n</fork-directive>"),
        "{directive}"
    );
    let placeholders = tool_results(last_message(&request_c));
    let ids: Vec<&str> = placeholders.iter().map(|r| r.0).collect();
    assert_eq!(ids, ["ta", "g1", "tb", "tc"]);
    for event in emitted(&effects)
        .iter()
        .filter(|e| !matches!(e, EventBody::System(_)))
    {
        let parent = event.parent_tool_use_id();
        assert!(parent.is_none() || ["ta", "tb", "tc"].contains(&parent.unwrap_or_default()));
    }

    agent.set_clock(250);
    let done_b = model(&mut agent, &b, say("B found src/b.rs:3"));
    assert_eq!(labels(&done_b), ["assistant", "system"]);
    assert_eq!(subtypes(&done_b), ["task_finished"]);
    assert_eq!(emitted(&done_b)[0].parent_tool_use_id(), Some("tb"));
    let glob_done = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("a.rs")],
    });
    assert!(glob_done.is_empty(), "subagents still run: {glob_done:?}");
    assert_eq!(
        labels(&model(&mut agent, &a, say("A found"))),
        ["assistant", "system"]
    );
    let last = model(&mut agent, &c, say("C objects"));
    assert_eq!(labels(&last), ["assistant", "system", "user", "request"]);

    let (_, main) = requests(&last).remove(0);
    let results = tool_results(last_message(&main));
    let ids: Vec<&str> = results.iter().map(|r| r.0).collect();
    assert_eq!(ids, ["ta", "g1", "tb", "tc"]);
    let b_note = &results[2].1;
    assert!(b_note.starts_with("<task-notification>\n<task-id>tb</task-id>\n<status>completed"));
    assert!(
        b_note.contains("<result>B found src/b.rs:3</result>"),
        "{b_note}"
    );
    assert!(
        b_note.contains("total_tokens: 15\ntool_uses: 0\nduration_ms: 250"),
        "{b_note}"
    );
    assert_eq!(
        agent.usage().input_tokens,
        50,
        "main turn, warm-up and three subagents"
    );
}

#[test]
fn subagents_beyond_the_cap_wait_for_a_free_slot() {
    let mut agent = team_agent(2, vec![]);
    let blocks = vec![
        task("t1", Some("explore"), "Q1"),
        task("t2", Some("explore"), "Q2"),
        task("t3", Some("explore"), "Q3"),
    ];
    let fanned = fan_out(&mut agent, blocks);
    assert_eq!(requests(&fanned).len(), 1, "one warm-up for the first two");
    let effects = model(&mut agent, &request_id(&fanned), say("."));
    assert_eq!(requests(&effects).len(), 2);
    let (first, _) = request_for(&effects, "Q1");
    let next = model(&mut agent, &first, say("one"));
    assert_eq!(subtypes(&next), ["task_finished", "task_started"]);
    let (third, _) = request_for(&next, "Q3");
    assert!(third != first);
}

#[test]
fn subagent_tools_are_filtered_and_refusals_never_run() {
    let mut agent = team_agent(4, vec![auditor(5)]);
    let effects = fan_out(&mut agent, vec![task("t1", Some("auditor"), "audit")]);
    let (id, request) = request_for(&effects, "audit");
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Grep", "Read"]);
    assert!(request.system[1].text.starts_with("You audit code."));
    let calls = vec![
        tool("c1", "Glob", json!({"pattern": "*"})),
        tool("c2", "Read", json!({"file_path": "a"})),
        task("c3", Some("explore"), "nested"),
        tool("c4", "ExitPlanMode", json!({"plan": "p"})),
        tool("c5", "TodoWrite", json!({"todos": []})),
    ];
    let effects = model(&mut agent, &id, reply(calls, StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "tools:Read"]);
    let Effect::RunTools { batch, .. } = &effects[1] else {
        panic!("tools")
    };
    let effects = agent.handle(Input::ToolsDone {
        batch: *batch,
        outputs: vec![ToolOutput::ok("file text")],
    });
    assert_eq!(labels(&effects), ["user", "request"]);
    assert_eq!(emitted(&effects)[0].parent_tool_use_id(), Some("t1"));
    let (_, next) = requests(&effects).remove(0);
    let results = tool_results(last_message(&next));
    let expect = [
        (
            "c1",
            true,
            "tool Glob is not available to this agent: this agent's definition",
        ),
        ("c2", false, "file text"),
        (
            "c3",
            true,
            "tool Task is not available to this agent: subagents cannot start",
        ),
        (
            "c4",
            true,
            "tool ExitPlanMode is not available to this agent",
        ),
        ("c5", true, "tool TodoWrite is not available to this agent"),
    ];
    for ((id, is_error, text), got) in expect.iter().zip(&results) {
        assert_eq!((got.0, got.2), (*id, *is_error), "{got:?}");
        assert!(got.1.starts_with(text), "{got:?}");
    }
}

#[test]
fn fork_children_share_the_prefix_and_cannot_fork_again() {
    let mut agent = team_agent(4, vec![]);
    let blocks = vec![
        tool("g1", "Grep", json!({"pattern": "x"})),
        task("f1", None, "Look at the callers."),
        task("f2", None, "Look at the tests."),
    ];
    let effects = fan_out(&mut agent, blocks);
    let (one, request_one) = request_for(&effects, "Look at the callers.");
    let (_, request_two) = request_for(&effects, "Look at the tests.");
    let mut main_tools = agent.prefix.tools.clone();
    main_tools.iter_mut().for_each(|t| t.cache_control = None);
    assert_eq!(
        request_one.tools, main_tools,
        "the exact tool array, without the caller's breakpoint after it"
    );
    assert_eq!(request_one.system, agent.prefix.system);
    let a = serde_json::to_string(&request_one).expect("json");
    let b = serde_json::to_string(&request_two).expect("json");
    let shared = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    let directive = "Directive: Look at the ";
    assert_eq!(
        shared,
        a.find(directive).expect("directive") + directive.len()
    );
    let placeholders = tool_results(last_message(&request_one));
    assert_eq!(placeholders.len(), 3);
    assert!(placeholders.iter().all(|r| r.1 == fork::PLACEHOLDER));

    let calls = vec![
        task("n1", None, "fork again"),
        task("n2", Some("explore"), "x"),
    ];
    let effects = model(&mut agent, &one, reply(calls, StopReason::ToolUse));
    let (_, next) = requests(&effects).remove(0);
    let results = tool_results(last_message(&next));
    assert!(results[0].2 && results[0].1.contains("a fork cannot fork again"));
    assert!(results[1].2 && results[1].1.contains("subagents cannot start subagents"));
}

#[test]
fn failed_and_killed_subagents_still_answer_their_call() {
    let mut agent = team_agent(4, vec![auditor(1)]);
    let blocks = vec![
        task("t1", Some("explore"), "Q1"),
        task("t2", Some("auditor"), "Q2"),
    ];
    let effects = fan_out(&mut agent, blocks);
    let (one, _) = request_for(&effects, "Q1");
    let (two, _) = request_for(&effects, "Q2");
    let unavailable = Err(ModelError {
        kind: ModelErrorKind::Unavailable,
        message: "overloaded".into(),
    });
    assert_eq!(
        subtypes(&model(&mut agent, &one, unavailable)),
        ["task_finished"]
    );
    let grep = vec![
        ContentBlock::text("Searching first."),
        tool("c1", "Grep", json!({"pattern": "x"})),
    ];
    let effects = model(&mut agent, &two, reply(grep, StopReason::ToolUse));
    let Some(Effect::RunTools { batch, .. }) = effects.last() else {
        panic!("tools")
    };
    let effects = agent.handle(Input::ToolsDone {
        batch: *batch,
        outputs: vec![ToolOutput::ok("hit")],
    });
    assert_eq!(labels(&effects), ["user", "system", "user", "request"]);
    let (_, main) = requests(&effects).remove(0);
    let results = tool_results(last_message(&main));
    assert!(results[0].2 && results[0].1.contains("<status>failed</status>"));
    assert!(results[0].1.contains("the model call failed (overloaded)"));
    assert!(!results[1].2 && results[1].1.contains("<status>killed</status>"));
    assert!(results[1].1.contains("<result>Searching first.</result>"));
    assert!(results[1].1.contains("tool_uses: 1"));
}

#[test]
fn bad_task_calls_are_refused_without_a_subagent() {
    let mut agent = team_agent(4, vec![]);
    let blocks = vec![
        task("t1", Some("wizard"), "x"),
        tool("t2", "Task", json!({"description": "d"})),
        tool(
            "t3",
            "Agent",
            json!({"description": "d", "prompt": "p", "subagent_type": "explore"}),
        ),
    ];
    let effects = fan_out(&mut agent, blocks);
    assert_eq!(
        subtypes(&effects),
        ["task_queued", "task_started"],
        "only the alias call"
    );
    let (alias, _) = request_for(&effects, "p");
    let effects = model(&mut agent, &alias, say("done"));
    let (_, main) = requests(&effects).remove(0);
    let results = tool_results(last_message(&main));
    assert!(
        results[0]
            .1
            .starts_with("Unknown subagent_type `wizard`. Available types: explore")
    );
    assert!(results[1].2 && results[1].1.contains("missing field `prompt`"));
    assert!(results[2].1.contains("<status>completed</status>"));
}

#[test]
fn without_subagents_task_is_an_unknown_tool_and_stale_replies_are_ignored() {
    let (mut agent, id) = started();
    let effects = model(
        &mut agent,
        &id,
        reply(vec![task("t1", Some("explore"), "x")], StopReason::ToolUse),
    );
    assert_eq!(labels(&effects), ["assistant", "user", "request"]);
    let (next, request) = requests(&effects).remove(0);
    assert!(
        tool_results(last_message(&request))[0]
            .1
            .starts_with("Unknown tool `Task`")
    );
    assert!(
        model(&mut agent, &id, say("late")).is_empty(),
        "already answered"
    );
    assert!(!model(&mut agent, &next, say("ok")).is_empty());
}

#[test]
fn long_reports_are_cut() {
    let mut agent = team_agent(4, vec![]);
    agent.config.context.spill_chars = 40;
    let effects = fan_out(&mut agent, vec![task("t1", Some("explore"), "Q1")]);
    let (id, _) = request_for(&effects, "Q1");
    let effects = model(&mut agent, &id, say(&"word ".repeat(100)));
    let (_, main) = requests(&effects).remove(0);
    let note = &tool_results(last_message(&main))[0].1;
    assert!(
        note.contains("[The report was cut here: it was too long.]</result>"),
        "{note}"
    );
    assert!(note.len() < 500, "{note}");
}

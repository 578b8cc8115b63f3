//! State-machine tests: the verifier at the end of an execution.

use serde_json::{Value, json};
use ultraplan_protocol::constants::{TASK_FINISHED, TASK_QUEUED, TASK_STARTED, VERIFICATION};
use ultraplan_protocol::events::SystemEvent;
use ultraplan_protocol::model::{ModelErrorKind, StopReason};
use ultraplan_protocol::verdict::{Verdict, VerdictOutcome};
use ultraplan_protocol::{ContentBlock, EventBody};

use super::execute_tests::{answers, approved, call, execute_agent, with};
use super::test_harness::*;
use super::verify::{NO_VERDICT, NOT_COPIED, verification_event};
use super::*;
use crate::conversation::{text_of, tool_calls};
use crate::subagents::verifier::{self, VERDICT_NUDGE};

const SUMMARY: &str = "Added greet() to src/lib.rs.";

fn edit() -> Value {
    json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"})
}

/// An execution with `max_turns` that ran `calls` (answered with `outputs`) and then ended
/// its turn with [`SUMMARY`]: the agent and the effects of that end.
fn ended_after(
    calls: Vec<ContentBlock>,
    outputs: Vec<ToolOutput>,
    max_turns: u32,
) -> (Agent, Vec<Effect>) {
    let mut agent = execute_agent(&approved(), max_turns);
    let id = request_id(&agent.handle(Input::Begin));
    model(&mut agent, &id, reply(calls, StopReason::ToolUse));
    let effects = agent.handle(Input::ToolsDone { batch: 1, outputs });
    let id = request_id(&effects);
    let text = vec![ContentBlock::text(SUMMARY)];
    let effects = model(&mut agent, &id, reply(text, StopReason::EndTurn));
    (agent, effects)
}

/// An execution that edited a file, ended, and had its copy made: the agent and the effects
/// of the verifier's start.
fn verifier_started(max_turns: u32) -> (Agent, Vec<Effect>) {
    let calls = vec![tool("e1", "Edit", edit())];
    let (mut agent, effects) = ended_after(calls, vec![ToolOutput::ok("Edited")], max_turns);
    assert_eq!(labels(&effects), ["assistant", "copy"]);
    let effects = agent.handle(Input::WorkspaceCopied(Ok(())));
    (agent, effects)
}

fn systems(effects: &[Effect]) -> Vec<SystemEvent> {
    emitted(effects)
        .into_iter()
        .filter_map(|e| match e {
            EventBody::System(s) => Some(s),
            _ => None,
        })
        .collect()
}

fn verdict_of(effects: &[Effect]) -> Option<Verdict> {
    let event = systems(effects)
        .into_iter()
        .find(|s| s.subtype == VERIFICATION)?;
    serde_json::from_value(event.data).ok()
}

fn say(text: &str) -> Result<ultraplan_protocol::model::ModelResponse, ModelError> {
    reply(vec![ContentBlock::text(text)], StopReason::EndTurn)
}

const CONCLUDED: [&str; 6] = [
    "system",
    "remove-copy",
    "system",
    "user",
    "result:success",
    "exit:0",
];

/// Answers the workspace check the verifier's end asks for (nothing changed) and returns
/// every effect but the check itself.
fn checked(agent: &mut Agent, mut effects: Vec<Effect>) -> Vec<Effect> {
    assert_eq!(labels(&effects).last().map(String::as_str), Some("check"));
    effects.pop();
    effects.extend(agent.handle(Input::WorkspaceChecked(Vec::new())));
    effects
}

#[test]
fn a_changing_execution_is_verified_in_the_copy_then_ends() {
    // The execution spends its whole budget of two turns; the verifier has its own.
    let (mut agent, effects) = verifier_started(2);
    assert_eq!(
        labels(&effects),
        ["assistant", "system", "system", "user", "request"]
    );
    let events = emitted(&effects);
    let EventBody::Assistant(task) = &events[0] else {
        panic!("the harness's Task tool_use")
    };
    assert_eq!(task.parent_tool_use_id, None);
    let calls = tool_calls(&crate::conversation::assistant(
        task.message.content.clone(),
    ));
    assert_eq!(calls.len(), 1);
    let task_id = calls[0].id.clone();
    assert_eq!(calls[0].name, "Task");
    assert_eq!(calls[0].input["subagent_type"], "verifier");
    assert_eq!(calls[0].input["started_by"], "ultraplan");
    let subtypes: Vec<String> = systems(&effects).into_iter().map(|s| s.subtype).collect();
    assert_eq!(subtypes, [TASK_QUEUED, TASK_STARTED]);
    assert_eq!(events[3].parent_tool_use_id(), Some(task_id.as_str()));

    let (id, request) = requests(&effects).remove(0);
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, verifier::TOOLS);
    let system: Vec<&str> = request.system.iter().map(|b| b.text.as_str()).collect();
    assert_eq!(system, [verifier::NOTES, verifier::PROMPT]);
    let brief = text_of(&request.messages[0]);
    assert!(
        brief.contains("<approved_plan>\n1. Add greet().\n</approved_plan>"),
        "{brief}"
    );
    assert!(brief.contains("- src/lib.rs\n"), "{brief}");
    assert!(!brief.contains("Bash commands"), "{brief}");

    let bash = tool("v1", "Bash", json!({"command": "sh test.sh"}));
    let effects = model(&mut agent, &id, reply(vec![bash], StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "copy-tools:Bash"]);
    let Some(Effect::RunTools { batch, .. }) = effects.last() else {
        panic!("tools")
    };
    let output = ToolOutput::error("FAIL test_greet\n\nExit code 1");
    let effects = agent.handle(Input::ToolsDone {
        batch: *batch,
        outputs: vec![output],
    });
    assert_eq!(labels(&effects), ["user", "request"]);
    let id = request_id(&effects);
    let report = "Ran `sh test.sh`: exit code 1 (test_greet fails).\nVERDICT: FAIL";
    let effects = model(&mut agent, &id, say(report));
    let effects = checked(&mut agent, effects);
    assert_eq!(labels(&effects)[1..], CONCLUDED);
    assert_eq!(systems(&effects)[0].subtype, TASK_FINISHED);
    let want = Verdict {
        verdict: VerdictOutcome::Fail,
        evidence: "Ran `sh test.sh`: exit code 1 (test_greet fails).".into(),
    };
    assert_eq!(verdict_of(&effects), Some(want.clone()));
    let event = systems(&effects).remove(1);
    assert_eq!(event.message.as_deref(), Some("Verification: FAIL"));
    assert_eq!(event.data, serde_json::to_value(&want).expect("json"));
    let answered = answers(&effects);
    assert_eq!(answered.len(), 1);
    assert_eq!(
        answered[0].0, task_id,
        "the harness's Task call is answered"
    );
    assert!(answered[0].1.contains("VERDICT: FAIL"), "{}", answered[0].1);
    assert_eq!(result_text(&effects).as_deref(), Some(SUMMARY));
    assert!(agent.is_done());
}

#[test]
fn verification_is_skipped_unless_the_execution_changed_something_unverified() {
    let ok = || ToolOutput::ok("ok");
    let read = || tool("r1", "Read", json!({"file_path": "a"}));
    let verified = EventBody::System(SystemEvent {
        subtype: VERIFICATION.into(),
        message: Some("Verification: PASS".into()),
        data: json!({"verdict": "PASS", "evidence": ""}),
    });
    let cases: Vec<(&str, Vec<ContentBlock>, Vec<ToolOutput>, bool)> = vec![
        ("reads only", vec![read()], vec![ok()], false),
        (
            "a failed edit",
            vec![tool("e1", "Edit", edit())],
            vec![ToolOutput::error("old_string not found")],
            false,
        ),
        (
            "a failed command",
            vec![tool("b1", "Bash", json!({"command": "false"}))],
            vec![ToolOutput::error("Exit code 1")],
            false,
        ),
        (
            "a command",
            vec![tool("b1", "Bash", json!({"command": "sed -i s/a/b/ x"}))],
            vec![ok()],
            true,
        ),
        (
            "a write",
            vec![tool(
                "w1",
                "Write",
                json!({"file_path": "n", "content": "x"}),
            )],
            vec![ok()],
            true,
        ),
    ];
    for (name, calls, outputs, verifies) in cases {
        let (_, effects) = ended_after(calls, outputs, 10);
        let want: &[&str] = if verifies {
            &["assistant", "copy"]
        } else {
            &["assistant", "result:success", "exit:0"]
        };
        assert_eq!(labels(&effects), want, "{name}");
        assert_eq!(
            verdict_of(&effects),
            None,
            "{name}: no verdict when skipped"
        );
    }

    // Resumed after the summary: an edit in the transcript is verified, unless a verdict is
    // already logged.
    let edited = vec![
        call("e1", "Edit", edit()),
        EventBody::tool_result("e1", "Edited", false),
        said(SUMMARY, StopReason::EndTurn),
    ];
    let resumed = with(approved(), edited.clone());
    let effects = execute_agent(&resumed, 10).handle(Input::Begin);
    assert_eq!(labels(&effects), ["copy"]);
    let mut done = edited;
    done.insert(2, verified);
    let effects = execute_agent(&with(approved(), done), 10).handle(Input::Begin);
    assert_eq!(labels(&effects), ["result:success", "exit:0"]);
    assert_eq!(result_text(&effects).as_deref(), Some(SUMMARY));
}

#[test]
fn a_report_without_a_verdict_is_asked_for_one_once() {
    let cases = [
        (
            "Tests pass.",
            "All steps done.\nVERDICT: PASS",
            VerdictOutcome::Pass,
            "All steps done.",
        ),
        (
            "Tests pass.",
            "Really, they pass.",
            VerdictOutcome::Partial,
            NO_VERDICT,
        ),
    ];
    for (first, second, outcome, evidence) in cases {
        let (mut agent, effects) = verifier_started(10);
        let effects = model(&mut agent, &request_id(&effects), say(first));
        assert_eq!(
            labels(&effects),
            ["assistant", "user", "request"],
            "{second}"
        );
        let (id, request) = requests(&effects).remove(0);
        assert_eq!(text_of(last_message(&request)), VERDICT_NUDGE);
        let effects = model(&mut agent, &id, say(second));
        let effects = checked(&mut agent, effects);
        assert_eq!(labels(&effects)[1..], CONCLUDED, "{second}");
        let verdict = verdict_of(&effects).expect("verdict");
        assert_eq!(verdict.verdict, outcome, "{second}");
        assert!(
            verdict.evidence.starts_with(evidence),
            "{}",
            verdict.evidence
        );
        if outcome == VerdictOutcome::Partial {
            assert!(verdict.evidence.contains(second), "{}", verdict.evidence);
        }
    }
}

#[test]
fn a_failing_verifier_or_copy_gives_partial() {
    let (mut agent, effects) = verifier_started(10);
    let error = ModelError {
        kind: ModelErrorKind::Unavailable,
        message: "overloaded".into(),
    };
    let effects = model(&mut agent, &request_id(&effects), Err(error));
    let effects = checked(&mut agent, effects);
    assert_eq!(labels(&effects), CONCLUDED);
    let verdict = verdict_of(&effects).expect("verdict");
    assert_eq!(verdict.verdict, VerdictOutcome::Partial);
    assert!(
        verdict
            .evidence
            .starts_with("Not verified: the verifier did not finish")
            && verdict.evidence.contains("overloaded"),
        "{}",
        verdict.evidence
    );

    // The turn limit: the verifier keeps calling tools.
    let (mut agent, mut effects) = verifier_started(10);
    for turn in 0..verifier::MAX_TURNS {
        let glob = tool(&format!("g{turn}"), "Glob", json!({"pattern": "*"}));
        effects = model(
            &mut agent,
            &request_id(&effects),
            reply(vec![glob], StopReason::ToolUse),
        );
        let Some(Effect::RunTools { batch, root, .. }) = effects.last() else {
            panic!("tools: {:?}", labels(&effects))
        };
        assert_eq!(*root, ToolRoot::Copy);
        effects = agent.handle(Input::ToolsDone {
            batch: *batch,
            outputs: vec![ToolOutput::ok("a")],
        });
    }
    let effects = checked(&mut agent, effects);
    assert_eq!(labels(&effects)[1..], CONCLUDED);
    let verdict = verdict_of(&effects).expect("verdict");
    assert_eq!(verdict.verdict, VerdictOutcome::Partial);
    assert!(
        verdict.evidence.contains("limit of 30 turns"),
        "{}",
        verdict.evidence
    );

    // No copy: no verifier, no Task call.
    let calls = vec![tool("e1", "Edit", edit())];
    let (mut agent, _) = ended_after(calls, vec![ToolOutput::ok("Edited")], 10);
    let effects = agent.handle(Input::WorkspaceCopied(Err("too big".into())));
    assert_eq!(
        labels(&effects),
        ["remove-copy", "system", "result:success", "exit:0"]
    );
    let want = Verdict {
        verdict: VerdictOutcome::Partial,
        evidence: format!("{NOT_COPIED}: too big."),
    };
    assert_eq!(verdict_of(&effects), Some(want.clone()));
    assert_eq!(emitted(&effects)[0], verification_event(&want));
    assert!(agent.handle(Input::WorkspaceCopied(Ok(()))).is_empty());
}

#[test]
fn the_brief_carries_the_approved_plan_as_the_user_left_it() {
    let decided = |text: &str| {
        with(
            approved()[..4].to_vec(),
            vec![EventBody::tool_result("p1", text, false)],
        )
    };
    let cases = [
        (approved(), "1. Add greet()."),
        (
            decided("## Approved Plan (edited by user):\n1. Add greet() and a test."),
            "1. Add greet() and a test.",
        ),
        (decided("Plan approved."), "1. Add greet()."),
    ];
    for (transcript, plan) in cases {
        let messages = execute_agent(&transcript, 10).messages().to_vec();
        assert_eq!(
            super::execute::approved_plan(&messages).as_deref(),
            Some(plan)
        );
    }
}

#[test]
fn a_verification_cut_short_by_a_restart_runs_again_unless_its_verdict_was_logged() {
    let harness = EventBody::assistant(vec![tool(
        "verifier_9",
        "Task",
        verifier::task_input("brief"),
    )]);
    let verdict = verification_event(&Verdict {
        verdict: VerdictOutcome::Pass,
        evidence: "ok".into(),
    });
    let ran = vec![
        call("e1", "Edit", edit()),
        EventBody::tool_result("e1", "Edited", false),
        said(SUMMARY, StopReason::EndTurn),
    ];
    let cases: [(Vec<EventBody>, &[&str]); 2] = [
        (vec![harness.clone()], &["copy"]),
        (vec![harness, verdict], &["result:success", "exit:0"]),
    ];
    for (tail, want) in cases {
        let transcript = with(with(approved(), ran.clone()), tail);
        let mut agent = execute_agent(&transcript, 10);
        let effects = agent.handle(Input::Begin);
        assert_eq!(labels(&effects), want);
        if want == ["copy"] {
            let effects = agent.handle(Input::WorkspaceCopied(Err("x".into())));
            assert_eq!(result_text(&effects).as_deref(), Some(SUMMARY));
        }
    }
}

#[test]
fn a_verifier_that_changed_the_workspace_never_passes() {
    let (mut agent, effects) = verifier_started(10);
    let effects = model(
        &mut agent,
        &request_id(&effects),
        say("All good.\nVERDICT: PASS"),
    );
    assert_eq!(labels(&effects).last().map(String::as_str), Some("check"));
    let changes = vec!["src/lib.rs (changed)".to_owned()];
    let effects = agent.handle(Input::WorkspaceChecked(changes));
    assert_eq!(labels(&effects), CONCLUDED[1..]);
    let verdict = verdict_of(&effects).expect("verdict");
    assert_eq!(verdict.verdict, VerdictOutcome::Partial);
    assert!(
        verdict.evidence.starts_with("All good."),
        "{}",
        verdict.evidence
    );
    assert!(
        verdict.evidence.contains("- src/lib.rs (changed)"),
        "{}",
        verdict.evidence
    );
    assert!(
        agent.handle(Input::WorkspaceChecked(Vec::new())).is_empty(),
        "answered once"
    );
}

#[test]
fn tampering_caps_a_pass_and_names_at_most_twenty_paths() {
    let verdict = |outcome| Verdict {
        verdict: outcome,
        evidence: "e".into(),
    };
    let many: Vec<String> = (0..25).map(|n| format!("f{n} (added)")).collect();
    for (outcome, changes, want) in [
        (VerdictOutcome::Pass, Vec::new(), VerdictOutcome::Pass),
        (VerdictOutcome::Pass, many.clone(), VerdictOutcome::Partial),
        (VerdictOutcome::Fail, many.clone(), VerdictOutcome::Fail),
        (
            VerdictOutcome::Partial,
            many.clone(),
            VerdictOutcome::Partial,
        ),
    ] {
        let got = super::verify::tampered(verdict(outcome), &changes);
        assert_eq!(got.verdict, want);
        if !changes.is_empty() {
            assert!(got.evidence.contains("f19 (added)") && !got.evidence.contains("f20 (added)"));
            assert!(got.evidence.contains("… and 5 more"), "{}", got.evidence);
        }
    }
}

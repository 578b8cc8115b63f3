//! Table-driven tests for the ExitPlanMode scanner and phase derivation (docs/ARCHITECTURE.md §3.2,
//! §3.3).
//!
//! Every scanner row is run twice: once with bare [`EventBody`]s and once with server-stamped
//! [`Event`]s, and both runs must agree with the row.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::api::Decision;
use crate::constants::{EXIT_PLAN_MODE_TOOL, TELEPORT_SENTINEL};
use crate::events::{ContentBlock, ResultEvent};
use crate::plan_text::decision_tool_result;

// ---------------------------------------------------------------------------------------------
// Event builders
// ---------------------------------------------------------------------------------------------

/// A main-agent turn that proposes a plan: a text block plus an ExitPlanMode tool_use whose
/// input carries `input_plan` (which the scanner must never report).
fn call(id: &str, input_plan: &str) -> EventBody {
    EventBody::assistant(vec![
        ContentBlock::text("Here is my plan."),
        ContentBlock::tool_use(id, EXIT_PLAN_MODE_TOOL, json!({ "plan": input_plan })),
    ])
}

/// A main-agent call of some other tool.
fn other_tool(id: &str, name: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::tool_use(
        id,
        name,
        json!({"pattern": "*.rs"}),
    )])
}

/// The tool_result the server writes when the reviewer approves `plan` unchanged.
fn approve(id: &str, plan: &str) -> EventBody {
    decided(id, &Decision::Approve { plan: None }, plan)
}

/// The tool_result the server writes when the reviewer edits `proposed` into `edited`.
fn approve_edited(id: &str, proposed: &str, edited: &str) -> EventBody {
    let decision = Decision::Approve {
        plan: Some(edited.to_owned()),
    };
    decided(id, &decision, proposed)
}

/// The tool_result the server writes when the reviewer rejects with `feedback`.
fn reject(id: &str, feedback: &str) -> EventBody {
    let decision = Decision::Reject {
        feedback: feedback.to_owned(),
        comment_ids: Vec::new(),
    };
    decided(id, &decision, "the proposed plan")
}

/// The tool_result the server writes when the reviewer teleports `plan` back to the terminal.
fn teleport(id: &str, plan: &str) -> EventBody {
    decided(id, &Decision::Teleport {}, plan)
}

fn decided(id: &str, decision: &Decision, proposed: &str) -> EventBody {
    let (text, is_error) = decision_tool_result(decision, proposed);
    EventBody::tool_result(id, text, is_error)
}

/// A tool_result with literal string content.
fn raw_result(id: &str, text: &str, is_error: bool) -> EventBody {
    EventBody::tool_result(id, text, is_error)
}

/// A tool_result whose content is a list of text blocks, parsed from the wire shape.
fn result_blocks(id: &str, parts: &[&str], is_error: bool) -> EventBody {
    let content: Vec<Value> = parts
        .iter()
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    serde_json::from_value(json!({
        "type": "user",
        "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}
        ]},
        "parent_tool_use_id": null
    }))
    .expect("valid user event")
}

/// Assistant prose.
fn say(text: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::text(text)])
}

/// A user message with plain text.
fn user_says(text: &str) -> EventBody {
    EventBody::user_text(text)
}

fn result(subtype: &str) -> EventBody {
    EventBody::Result(ResultEvent {
        subtype: subtype.to_owned(),
        is_error: subtype != ResultEvent::SUCCESS,
        result: None,
        num_turns: Some(3),
        duration_ms: None,
        usage: None,
        patch: None,
    })
}

/// An ordinary end of turn.
fn success() -> EventBody {
    result(ResultEvent::SUCCESS)
}

/// The session dying with an `error_*` subtype.
fn died(subtype: &str) -> EventBody {
    result(subtype)
}

/// The same event as subagent traffic (spawned by the `Task` call `task_1`).
fn sub(mut body: EventBody) -> EventBody {
    let parent = Some("task_1".to_owned());
    match &mut body {
        EventBody::Assistant(a) => a.parent_tool_use_id = parent,
        EventBody::User(u) => u.parent_tool_use_id = parent,
        other => panic!("only assistant and user events can be subagent traffic: {other:?}"),
    }
    body
}

// ---------------------------------------------------------------------------------------------
// Expectation builders
// ---------------------------------------------------------------------------------------------

type Expect = Result<ScanResult, ScanError>;

fn pending() -> Expect {
    Ok(ScanResult::Pending)
}

fn unchanged() -> Expect {
    Ok(ScanResult::Unchanged)
}

fn approved(plan: &str) -> Expect {
    Ok(ScanResult::Approved {
        plan: plan.to_owned(),
        edited: false,
    })
}

fn edited(plan: &str) -> Expect {
    Ok(ScanResult::Approved {
        plan: plan.to_owned(),
        edited: true,
    })
}

fn teleported(plan: &str) -> Expect {
    Ok(ScanResult::Teleport {
        plan: plan.to_owned(),
    })
}

fn rejected(id: &str) -> Expect {
    Ok(ScanResult::Rejected { id: id.to_owned() })
}

fn terminated(subtype: &str) -> Expect {
    Ok(ScanResult::Terminated {
        subtype: subtype.to_owned(),
    })
}

fn marker_missing(id: &str) -> Expect {
    Err(ScanError::MarkerMissing {
        tool_use_id: id.to_owned(),
    })
}

// ---------------------------------------------------------------------------------------------
// The case type
// ---------------------------------------------------------------------------------------------

/// One batch handed to `ingest`, and what `ingest` must answer.
struct Step {
    events: Vec<EventBody>,
    expect: Expect,
}

struct Case {
    name: &'static str,
    steps: Vec<Step>,
    rejections: Option<u32>,
    pending: Option<bool>,
}

/// A row with no batches yet; add them with [`Case::then`].
fn case(name: &'static str) -> Case {
    Case {
        name,
        steps: Vec::new(),
        rejections: None,
        pending: None,
    }
}

impl Case {
    /// The next batch and what `ingest` must answer for it.
    fn then(mut self, events: Vec<EventBody>, expect: Expect) -> Self {
        self.steps.push(Step { events, expect });
        self
    }

    /// Expected `rejection_count()` after the last batch.
    fn rejections(mut self, n: u32) -> Self {
        self.rejections = Some(n);
        self
    }

    /// Expected `has_pending_plan()` after the last batch.
    fn pending(mut self, p: bool) -> Self {
        self.pending = Some(p);
        self
    }

    /// Feed every batch through a fresh scanner, as bodies or as stamped events.
    fn run(&self, stamped: bool) {
        let mode = if stamped { "stamped" } else { "bodies" };
        let mut scanner = ExitPlanModeScanner::new();
        let mut next_id = 0_i64;
        for (i, s) in self.steps.iter().enumerate() {
            let got = if stamped {
                let events: Vec<Event> = s
                    .events
                    .iter()
                    .map(|body| {
                        next_id += 1;
                        Event {
                            id: next_id,
                            session_id: "sess_1".to_owned(),
                            created_at: format!("2026-01-01T00:00:{:02}Z", next_id % 60),
                            body: body.clone(),
                        }
                    })
                    .collect();
                scanner.ingest(&events)
            } else {
                scanner.ingest(&s.events)
            };
            assert_eq!(got, s.expect, "case {:?}, batch {i} ({mode})", self.name);
        }
        if let Some(n) = self.rejections {
            let got = scanner.rejection_count();
            assert_eq!(got, n, "case {:?}: rejection_count ({mode})", self.name);
        }
        if let Some(p) = self.pending {
            let got = scanner.has_pending_plan();
            assert_eq!(got, p, "case {:?}: has_pending_plan ({mode})", self.name);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The scanner table
// ---------------------------------------------------------------------------------------------

const ERR: &str = "error_during_execution";
/// A plan that quotes the edited-by-user marker (e.g. a plan for this very feature).
const QUOTES_EDITED: &str = "1. Parse `## Approved Plan (edited by user):` too\n2. Test";
/// A plan that quotes the plain marker.
const QUOTES_PLAIN: &str = "Keep `## Approved Plan:` as is";

// One row per case, one line per batch: rustfmt would explode every row over a dozen lines.
#[rustfmt::skip]
fn scanner_cases() -> Vec<Case> {
    vec![
        // --- approval ---------------------------------------------------------------------
        case("approve across batches")
            .then(vec![call("a", "draft")], pending())
            .then(vec![approve("a", "# A\n1. fix")], approved("# A\n1. fix"))
            .rejections(0).pending(false),
        case("approve in the same batch as the call")
            .then(vec![say("hm"), call("a", "p"), approve("a", "A")], approved("A"))
            .rejections(0).pending(false),
        case("approve with an edited plan")
            .then(vec![call("a", "v1")], pending())
            .then(vec![approve_edited("a", "v1", "v2 by reviewer")], edited("v2 by reviewer"))
            .pending(false),
        case("approved plan text comes from the tool_result, not the tool input")
            .then(vec![call("a", "INPUT"), approve("a", "RESULT")], approved("RESULT")),
        case("unedited plan quoting the edited marker stays unedited and whole")
            .then(vec![call("a", "p")], pending())
            .then(vec![approve("a", QUOTES_EDITED)], approved(QUOTES_EDITED)),
        case("edited plan quoting the plain marker stays edited and whole")
            .then(vec![call("a", "v1")], pending())
            .then(vec![approve_edited("a", "v1", QUOTES_PLAIN)], edited(QUOTES_PLAIN)),
        case("approval as a list of text blocks")
            .then(vec![call("a", "p")], pending())
            .then(vec![result_blocks("a", &["Y.", "## Approved Plan:\nS1"], false)], approved("S1"))
            .pending(false),
        case("approval without a marker is an error")
            .then(vec![call("a", "p")], pending())
            .then(vec![raw_result("a", "User approved. Go ahead.", false)], marker_missing("a"))
            .pending(false),
        // --- teleport ---------------------------------------------------------------------
        case("teleport takes the plan from the tool_result")
            .then(vec![call("a", "INPUT")], pending())
            .then(vec![teleport("a", "# Local\n1. do")], teleported("# Local\n1. do"))
            .rejections(0).pending(false),
        case("teleport as a list of text blocks is not a rejection")
            .then(vec![call("a", "p")], pending())
            .then(vec![result_blocks("a", &[TELEPORT_SENTINEL, "T"], true)], teleported("T"))
            .rejections(0),
        case("feedback merely mentioning the sentinel is a rejection")
            .then(vec![call("a", "p")], pending())
            .then(vec![raw_result("a", "no __ULTRAPLAN_TELEPORT_LOCAL__", true)], rejected("a"))
            .rejections(1),
        case("teleport after a rejection")
            .then(vec![call("a", "p1"), reject("a", "no")], rejected("a"))
            .then(vec![call("b", "p2")], pending())
            .then(vec![teleport("b", "B")], teleported("B"))
            .rejections(1).pending(false),
        // --- rejection --------------------------------------------------------------------
        case("reject, re-propose, approve across batches")
            .then(vec![call("a", "p1")], pending())
            .then(vec![reject("a", "add tests")], rejected("a"))
            .then(vec![say("revising"), call("b", "p2")], pending())
            .then(vec![approve("b", "B")], approved("B"))
            .rejections(1).pending(false),
        case("reject, re-propose, approve in one batch")
            .then(vec![call("a", "1"), reject("a", "n"), call("b", "2"), approve("b", "B")],
                approved("B"))
            .rejections(1).pending(false),
        case("a rejection and a new call in one batch report the rejection")
            .then(vec![call("a", "p1")], pending())
            .then(vec![reject("a", "no"), call("b", "p2")], rejected("a"))
            .then(vec![say("waiting")], pending())
            .rejections(1).pending(true),
        case("two rejections counted")
            .then(vec![call("a", "p1"), reject("a", "no")], rejected("a"))
            .then(vec![call("b", "p2")], pending())
            .then(vec![reject("b", "still no")], rejected("b"))
            .rejections(2).pending(false),
        case("three rejections then approval")
            .then(vec![call("a", "p1"), reject("a", "1")], rejected("a"))
            .then(vec![call("b", "p2"), reject("b", "2")], rejected("b"))
            .then(vec![call("c", "p3"), reject("c", "3")], rejected("c"))
            .then(vec![call("d", "p4"), approve("d", "D")], approved("D"))
            .rejections(3).pending(false),
        case("two rejections in one batch report the newest")
            .then(vec![call("a", "1"), reject("a", "x"), call("b", "2"), reject("b", "y")],
                rejected("b"))
            .rejections(2).pending(false),
        case("rejections are not recounted on later batches")
            .then(vec![call("a", "p1"), reject("a", "no")], rejected("a"))
            .then(vec![say("revising")], unchanged())
            .then(vec![reject("a", "no")], unchanged())
            .then(vec![call("b", "p2")], pending())
            .rejections(1).pending(true),
        case("rejection as a list of text blocks")
            .then(vec![call("a", "p")], pending())
            .then(vec![result_blocks("a", &["Please", "add tests"], true)], rejected("a"))
            .rejections(1).pending(false),
        // --- results and termination --------------------------------------------------------
        case("a success result with no plan is ignored")
            .then(vec![say("end of turn"), success()], unchanged()),
        case("a success result keeps a pending plan pending")
            .then(vec![call("a", "p")], pending())
            .then(vec![success()], pending())
            .pending(true),
        case("an error result terminates")
            .then(vec![say("working")], unchanged())
            .then(vec![died(ERR)], terminated(ERR))
            .pending(false),
        case("termination loses to an approval in the same batch")
            .then(vec![call("a", "p")], pending())
            .then(vec![approve("a", "A"), died(ERR)], approved("A")),
        case("termination loses to a teleport in the same batch")
            .then(vec![call("a", "p")], pending())
            .then(vec![died("error_timeout"), teleport("a", "T")], teleported("T")),
        case("termination beats a rejection, which still counts")
            .then(vec![call("a", "p")], pending())
            .then(vec![reject("a", "no"), died("error_max_turns")], terminated("error_max_turns"))
            .rejections(1).pending(false),
        case("termination beats a pending plan")
            .then(vec![call("a", "p"), died("error_budget")], terminated("error_budget"))
            .pending(true),
        // --- subagents ----------------------------------------------------------------------
        case("a subagent's ExitPlanMode call and result are ignored")
            .then(vec![sub(call("x", "sub plan"))], unchanged())
            .then(vec![sub(approve("x", "sub plan"))], unchanged())
            .rejections(0).pending(false),
        case("a subagent call does not supersede the main plan")
            .then(vec![call("a", "p")], pending())
            .then(vec![sub(call("x", "sub")), sub(reject("x", "no"))], pending())
            .then(vec![approve("a", "Main")], approved("Main"))
            .rejections(0),
        case("subagent results for the main call's id are ignored")
            .then(vec![call("a", "p")], pending())
            .then(vec![sub(approve("a", "fake"))], pending())
            .then(vec![sub(reject("a", "fake"))], pending())
            .rejections(0).pending(true),
        // --- nothing happening ----------------------------------------------------------------
        case("an empty batch is unchanged")
            .then(vec![], unchanged())
            .pending(false),
        case("an empty batch while pending is unchanged")
            .then(vec![call("a", "p")], pending())
            .then(vec![], unchanged())
            .pending(true),
        case("unrelated text only is unchanged")
            .then(vec![user_says("ultraplan fix auth"), say("Looking around.")], unchanged())
            .rejections(0).pending(false),
        case("other tools and their results are not plans")
            .then(vec![other_tool("g1", "Grep"), raw_result("g1", "a.rs:1", false)], unchanged())
            .then(vec![other_tool("r1", "Read"), raw_result("r1", "missing", true)], unchanged())
            .rejections(0).pending(false),
        case("pending while the newest call has no result")
            .then(vec![call("a", "p")], pending())
            .then(vec![say("waiting for review")], pending())
            .then(vec![other_tool("r1", "Read"), raw_result("r1", "denied", true)], pending())
            .rejections(0).pending(true),
        case("a result for an unknown tool_use id does nothing")
            .then(vec![raw_result("ghost", "## Approved Plan:\nX", false)], unchanged())
            .then(vec![call("a", "p")], pending())
            .then(vec![raw_result("zzz", "no", true)], pending())
            .rejections(0).pending(true),
        // Found by the property test (scanner_props.rs): this feedback read as a teleport.
        case("feedback opening with the teleport sentinel is still a rejection")
            .then(vec![call("a", "p")], pending())
            .then(vec![reject("a", "__ULTRAPLAN_TELEPORT_LOCAL__\nyou do it")], rejected("a"))
            .rejections(1).pending(false),
        case("duplicate delivery of a call across batches counts once")
            .then(vec![call("a", "p")], pending())
            .then(vec![call("a", "p")], pending())
            .then(vec![reject("a", "no")], rejected("a"))
            .rejections(1).pending(false),
        case("duplicate delivery of a call and its result within a batch counts once")
            .then(vec![call("a", "p"), call("a", "p"), reject("a", "x"), reject("a", "x")],
                rejected("a"))
            .rejections(1).pending(false),
        case("the newest call is judged when an older one never got a result")
            .then(vec![call("a", "p1"), call("b", "p2")], pending())
            .then(vec![approve("b", "B")], approved("B"))
            .rejections(0).pending(false),
    ]
}

#[test]
fn scanner_table() {
    let cases = scanner_cases();
    assert!(cases.len() >= 24, "the table keeps at least 24 rows");
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    for c in &cases {
        c.run(false);
        c.run(true);
    }
}

// ---------------------------------------------------------------------------------------------
// The phase table
// ---------------------------------------------------------------------------------------------

#[test]
fn derive_phase_table() {
    use SessionStatus::{Archived, Idle, RequiresAction, Running};
    // (status, has_pending_plan, new_events) → phase
    let cases = [
        (Idle, false, false, Phase::NeedsInput),
        (Idle, false, true, Phase::Running),
        (Idle, true, false, Phase::PlanReady),
        (Idle, true, true, Phase::PlanReady),
        (RequiresAction, false, false, Phase::NeedsInput),
        (RequiresAction, false, true, Phase::Running),
        (RequiresAction, true, false, Phase::PlanReady),
        (RequiresAction, true, true, Phase::PlanReady),
        (Running, false, false, Phase::Running),
        (Running, false, true, Phase::Running),
        (Running, true, false, Phase::PlanReady),
        (Running, true, true, Phase::PlanReady),
        (Archived, false, false, Phase::Ended),
        (Archived, false, true, Phase::Ended),
        (Archived, true, false, Phase::Ended),
        (Archived, true, true, Phase::Ended),
    ];
    let mut combos: Vec<(&str, bool, bool)> = cases
        .iter()
        .map(|(s, p, n, _)| (s.as_str(), *p, *n))
        .collect();
    combos.sort_unstable();
    combos.dedup();
    assert_eq!(
        combos.len(),
        16,
        "every status × pending × new_events combination, once"
    );
    for (status, pending, new_events, expected) in cases {
        assert_eq!(
            derive_phase(status, pending, new_events),
            expected,
            "status {status:?}, pending {pending}, new_events {new_events}"
        );
    }
}

/// The scanner and phase derivation together, as the client's poll loop uses them.
#[test]
fn phase_follows_the_scanner() {
    let mut scanner = ExitPlanModeScanner::new();
    let phase =
        |s: &ExitPlanModeScanner, status, new| derive_phase(status, s.has_pending_plan(), new);
    assert_eq!(scanner.ingest(&[say("exploring")]), unchanged());
    assert_eq!(
        phase(&scanner, SessionStatus::Running, true),
        Phase::Running
    );
    assert_eq!(scanner.ingest(&[call("a", "p")]), pending());
    assert_eq!(
        phase(&scanner, SessionStatus::RequiresAction, true),
        Phase::PlanReady
    );
    assert_eq!(scanner.ingest(&[reject("a", "no")]), rejected("a"));
    assert_eq!(
        phase(&scanner, SessionStatus::Running, true),
        Phase::Running
    );
    assert_eq!(scanner.ingest::<EventBody>(&[]), unchanged());
    assert_eq!(
        phase(&scanner, SessionStatus::Idle, false),
        Phase::NeedsInput
    );
    assert_eq!(Phase::NeedsInput.pill(), "◇ ultraplan needs your input");
    assert_eq!(Phase::PlanReady.pill(), "◆ ultraplan ready");
}

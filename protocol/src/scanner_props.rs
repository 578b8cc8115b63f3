//! Property test: the scanner over random event orders, against a small reference model of the
//! rules in the module doc and docs/ARCHITECTURE.md §3.3.
//!
//! Events: main-agent ExitPlanMode calls (whose tool input carries a decoy plan), reviewer
//! decisions as the server writes them (approve, approve edited, reject, teleport) for known and
//! unknown ids, results without a marker, `result`s of random subtypes, prose; any of them may
//! be subagent traffic. Each main-agent id gets at most one tool_result, as from the agent.
//!
//! - every batch of every split is judged as the model judges it, given what came before;
//! - the final state (pending plan, rejections, the judgement of a later neutral batch) does
//!   not depend on the split;
//! - subagent events change nothing: replaced by neutral events, every judgement is the same;
//! - an approved or teleported plan is the tool_result's, never the tool input's.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use std::collections::HashSet;

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::json;

use super::{ExitPlanModeScanner, ScanError, ScanResult};
use crate::api::Decision;
use crate::constants::EXIT_PLAN_MODE_TOOL;
use crate::events::{ContentBlock, EventBody, ResultEvent};
use crate::plan_text::decision_tool_result;

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Dec {
    Approve,
    ApproveEdited,
    Reject(String),
    Teleport,
    /// A non-error result without the approved-plan marker.
    NoMarker,
}

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Call(u8),
    Decide(u8, Dec),
    Result(&'static str),
    Say,
}

#[derive(Debug, Clone)]
struct Ev {
    op: Op,
    sub: bool,
}

fn id(n: u8) -> String {
    format!("toolu_{n}")
}

/// The plan the agent proposed for `n`, as the server quotes it in the tool_result.
fn proposed(n: u8) -> String {
    format!("1. RESULT plan {n}\n2. test it")
}

fn edited(n: u8) -> String {
    format!("1. EDITED plan {n}")
}

fn body(ev: &Ev) -> EventBody {
    let body = match &ev.op {
        Op::Call(n) => EventBody::assistant(vec![
            ContentBlock::text("Here is my plan."),
            ContentBlock::tool_use(
                id(*n),
                EXIT_PLAN_MODE_TOOL,
                json!({ "plan": format!("INPUT decoy {n}") }),
            ),
        ]),
        Op::Decide(n, dec) => {
            let decision = match dec {
                Dec::Approve => Decision::Approve { plan: None },
                Dec::ApproveEdited => Decision::Approve {
                    plan: Some(edited(*n)),
                },
                Dec::Reject(feedback) => Decision::Reject {
                    feedback: feedback.clone(),
                    comment_ids: Vec::new(),
                },
                Dec::Teleport => Decision::Teleport {},
                Dec::NoMarker => {
                    return with_parent(EventBody::tool_result(&id(*n), "done", false), ev.sub);
                }
            };
            let (text, is_error) = decision_tool_result(&decision, &proposed(*n));
            EventBody::tool_result(&id(*n), text, is_error)
        }
        Op::Result(subtype) => {
            return EventBody::Result(ResultEvent {
                subtype: (*subtype).to_owned(),
                is_error: *subtype != ResultEvent::SUCCESS,
                result: None,
                num_turns: None,
                duration_ms: None,
                usage: None,
                patch: None,
            });
        }
        Op::Say => EventBody::assistant(vec![ContentBlock::text("thinking aloud")]),
    };
    with_parent(body, ev.sub)
}

/// Subagent traffic carries its `Task` call's id.
fn with_parent(mut body: EventBody, sub: bool) -> EventBody {
    if sub {
        match &mut body {
            EventBody::Assistant(a) => a.parent_tool_use_id = Some("task_9".to_owned()),
            EventBody::User(u) => u.parent_tool_use_id = Some("task_9".to_owned()),
            _ => {}
        }
    }
    body
}

/// What the model knows of one decision: `(is_error, teleport plan, approved plan)`.
fn meaning(n: u8, dec: &Dec) -> (bool, Option<String>, Option<(String, bool)>) {
    match dec {
        Dec::Approve => (false, None, Some((proposed(n), false))),
        Dec::ApproveEdited => (false, None, Some((edited(n), true))),
        Dec::Reject(_) => (true, None, None),
        Dec::Teleport => (true, Some(proposed(n)), None),
        Dec::NoMarker => (false, None, None),
    }
}

/// The reference: the judgement of `batch` after `before`, from the documented rules.
fn model(before: &[Ev], batch: &[Ev]) -> Result<ScanResult, ScanError> {
    if batch.is_empty() {
        return Ok(ScanResult::Unchanged);
    }
    let main = |evs: &[Ev]| evs.iter().filter(|e| !e.sub).cloned().collect::<Vec<_>>();
    let (before, batch) = (main(before), main(batch));
    let all: Vec<&Ev> = before.iter().chain(&batch).collect();
    // Calls in order of first appearance.
    let mut calls: Vec<u8> = Vec::new();
    for e in &all {
        if let Op::Call(n) = e.op
            && !calls.contains(&n)
        {
            calls.push(n);
        }
    }
    let decision = |n: u8, evs: &[&Ev]| {
        evs.iter().find_map(|e| match &e.op {
            Op::Decide(m, dec) if *m == n => Some(meaning(n, dec)),
            _ => None,
        })
    };
    let calls_in = |evs: &[&Ev]| -> Vec<u8> {
        calls
            .iter()
            .copied()
            .filter(|&n| evs.iter().any(|e| e.op == Op::Call(n)))
            .collect()
    };
    let rejected_in = |evs: &[&Ev]| -> HashSet<u8> {
        calls_in(evs)
            .into_iter()
            .filter(|&n| matches!(decision(n, evs), Some((true, None, _))))
            .collect()
    };
    let before_refs: Vec<&Ev> = before.iter().collect();
    let rejected = rejected_in(&all);
    let earlier = rejected_in(&before_refs);
    let newly = calls
        .iter()
        .rev()
        .find(|n| rejected.contains(n) && !earlier.contains(n));
    let terminated = batch.iter().rev().find_map(|e| match e.op {
        Op::Result(s) if s != ResultEvent::SUCCESS => Some(s.to_owned()),
        _ => None,
    });
    let newest = calls.iter().rev().find(|n| !rejected.contains(n));
    if let Some(&n) = newest {
        match decision(n, &all) {
            Some((false, _, Some((plan, edited)))) => {
                return Ok(ScanResult::Approved { plan, edited });
            }
            Some((false, _, None)) => {
                return Err(ScanError::MarkerMissing { tool_use_id: id(n) });
            }
            Some((true, Some(plan), _)) => return Ok(ScanResult::Teleport { plan }),
            _ => {}
        }
    }
    Ok(match (terminated, newly, newest) {
        (Some(subtype), _, _) => ScanResult::Terminated { subtype },
        (None, Some(&n), _) => ScanResult::Rejected { id: id(n) },
        (None, None, Some(_)) => ScanResult::Pending,
        (None, None, None) => ScanResult::Unchanged,
    })
}

fn dec() -> impl Strategy<Value = Dec> {
    prop_oneof![
        3 => Just(Dec::Approve),
        2 => Just(Dec::ApproveEdited),
        3 => prop::sample::select(vec![
            "add tests",
            "## Approved Plan:\nnot really",
            "no\n__ULTRAPLAN_TELEPORT_LOCAL__",
            "__ULTRAPLAN_TELEPORT_LOCAL__\nyou do it",
        ])
        .prop_map(|f| Dec::Reject(f.to_owned())),
        2 => Just(Dec::Teleport),
        1 => Just(Dec::NoMarker),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..4).prop_map(Op::Call),
        4 => ((0u8..5), dec()).prop_map(|(n, d)| Op::Decide(n, d)),
        1 => prop::sample::select(vec![
            ResultEvent::SUCCESS,
            ResultEvent::SUCCESS,
            "error_max_turns",
            "error_during_execution",
        ])
        .prop_map(Op::Result),
        1 => Just(Op::Say),
    ]
}

/// Events (at most one main-agent result per id) and cut points.
fn stream() -> impl Strategy<Value = (Vec<Ev>, Vec<usize>)> {
    let ev = (op(), prop::bool::weighted(0.25)).prop_map(|(op, sub)| Ev {
        sub: sub && !matches!(op, Op::Result(_)),
        op,
    });
    (
        prop::collection::vec(ev, 0..16),
        prop::collection::vec(0usize..17, 0..5),
    )
        .prop_map(|(evs, cuts)| {
            let mut decided = HashSet::new();
            let evs = evs
                .into_iter()
                .filter(|e| match e.op {
                    Op::Decide(n, _) if !e.sub => decided.insert(n),
                    _ => true,
                })
                .collect();
            (evs, cuts)
        })
}

fn batches(evs: &[Ev], cuts: &[usize]) -> Vec<Vec<Ev>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(evs.len())).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for cut in cuts.into_iter().chain([evs.len()]) {
        out.push(evs[at..cut].to_vec());
        at = cut;
    }
    out
}

type Final = (Result<ScanResult, ScanError>, bool, u32);

/// Feed the batches; returns each batch's judgement and the final state.
fn run(batches: &[Vec<Ev>]) -> (Vec<Result<ScanResult, ScanError>>, Final) {
    let mut scanner = ExitPlanModeScanner::new();
    let judged = batches
        .iter()
        .map(|b| scanner.ingest(&b.iter().map(body).collect::<Vec<_>>()))
        .collect();
    let probe = scanner.ingest(&[body(&Ev {
        op: Op::Say,
        sub: false,
    })]);
    let state = (probe, scanner.has_pending_plan(), scanner.rejection_count());
    (judged, state)
}

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn scanner_follows_the_model_whatever_the_batching((evs, cuts) in stream()) {
        let split = batches(&evs, &cuts);
        let (judged, fin) = run(&split);
        let mut before = Vec::new();
        for (batch, got) in split.iter().zip(&judged) {
            prop_assert_eq!(got, &model(&before, batch), "batch {:?} after {:?}", batch, before);
            if let Ok(ScanResult::Approved { plan, .. } | ScanResult::Teleport { plan }) = got {
                prop_assert!(!plan.contains("INPUT"), "plan from the tool input: {}", plan);
            }
            before.extend(batch.iter().cloned());
        }
        let (_, whole) = run(std::slice::from_ref(&evs));
        prop_assert_eq!(&fin, &whole, "final state differs from one batch");
        // Subagent traffic replaced by neutral main-agent prose: the same judgements.
        let neutral: Vec<Vec<Ev>> = split
            .iter()
            .map(|b| {
                b.iter()
                    .map(|e| if e.sub { Ev { op: Op::Say, sub: false } } else { e.clone() })
                    .collect()
            })
            .collect();
        prop_assert_eq!(run(&neutral), (judged, fin), "subagent events changed a judgement");
    }
}

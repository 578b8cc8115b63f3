//! The `offline` model: a deterministic, clearly labelled planner that lets the whole product
//! run with no model key. It is not a language model and never pretends to be one.
//!
//! [`offline_turn`] is a pure function from a model request (the conversation so far) to the
//! next assistant turn. The server's model router calls it for the model name `offline`
//! ([`MODEL_NAME`]); the model gateway never does, and depends on nothing here. The agent runs
//! the tools it asks for and sends their results back in the next request, exactly as with a
//! real model:
//!
//! 1. Glob the build manifests and the source files;
//! 2. Grep the request's salient terms (files listing, plus a count per term);
//! 3. Read the best-ranked files and the main manifests, and Grep those files for the terms'
//!    lines;
//! 4. submit the plan with ExitPlanMode: Goal, Relevant files (`path:line`), Steps, Tests (from
//!    the manifests), Risks.
//!
//! After a rejection it searches the feedback's terms (one turn) and submits a revised plan that
//! quotes the feedback and adds steps for it. After an approval (the execution run) it makes
//! no edits, says that execution needs a model and ends its turn; after a teleport it gives
//! the teleport reply. The verifier an execution ends with (`verify`) gets the project's verify
//! commands run and a verdict on their exit codes. Which step comes next is derived from the conversation alone; a phase
//! whose tool is not offered is skipped, and after [`MAX_TURNS_PER_PLAN`] exploring turns it
//! writes the plan with what it has. The same request always yields the byte-identical
//! response. No IO happens here.

mod commands;
mod evidence;
mod explore;
mod plan;
mod rank;
mod request;
mod revise;
mod steps;
mod terms;
mod verify;

#[cfg(test)]
mod fake_repo;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde_json::json;
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::comments::{ADDRESSED_COMMENT_IDS, ADDRESSED_REQUEST, listed_comment_ids};
use ultraplan_protocol::constants::{EXIT_PLAN_MODE_TOOL, TELEPORT_REPLY};
use ultraplan_protocol::model::{ModelRequest, ModelResponse, StopReason, Usage};

use evidence::Evidence;
use explore::{Targets, Turn};
use plan::Findings;
use rank::Ranked;
use request::{Conversation, Verdict};
use terms::{MAX_TERMS, Term, salient_terms};

/// The model name the offline planner answers to and reports.
pub const MODEL_NAME: &str = ultraplan_protocol::model_spec::OFFLINE_MODEL;

/// Exploring turns after which the plan is written with whatever was found.
pub const MAX_TURNS_PER_PLAN: usize = 8;

/// The answer after an approval: the offline planner cannot execute.
pub const APPROVED_REPLY: &str = "Plan approved. The offline planner (no model configured) \
makes no edits: executing a plan needs a model, so this execution leaves the repository \
unchanged and its patch is empty. Set ULTRAPLAN_MODEL to anthropic:<model> or openai:<model> \
with its API key on the server to run approved plans remotely, or implement this one yourself.";

/// The answer while a submitted plan still awaits its review.
pub const PENDING_REPLY: &str = "The plan is waiting for review.";

/// Prefix of every text the offline planner writes alongside its tool calls.
const LABEL: &str = "Offline planner (no model configured):";

/// The next assistant turn for `request`.
pub fn offline_turn(request: &ModelRequest) -> ModelResponse {
    let convo = Conversation::read(request);
    let turn = convo.assistant_turns + 1;
    let action = if verify::is_verifier(request, &convo) {
        verify::next_action(&convo)
    } else {
        next_action(&convo)
    };
    let content = match action {
        Action::Explore(Turn { note, calls }) => {
            let mut blocks = vec![ContentBlock::text(format!("{LABEL} {note}"))];
            blocks.extend(calls.into_iter().enumerate().map(|(i, call)| {
                ContentBlock::tool_use(tool_use_id(turn, i), call.name, call.input)
            }));
            blocks
        }
        Action::Submit { plan, addressed } => {
            let mut input = json!({ "plan": plan });
            if !addressed.is_empty() {
                input[ADDRESSED_COMMENT_IDS] = json!(addressed);
            }
            vec![
                ContentBlock::text(format!("{LABEL} the plan is ready for review.")),
                ContentBlock::tool_use(tool_use_id(turn, 0), EXIT_PLAN_MODE_TOOL, input),
            ]
        }
        Action::Reply(text) => vec![ContentBlock::text(text)],
    };
    let calls_tools = content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
    let request_json = serde_json::to_string(request).unwrap_or_default();
    let content_json = serde_json::to_string(&content).unwrap_or_default();
    ModelResponse {
        id: format!(
            "msg_offline_t{turn}_{:016x}",
            fnv1a(request_json.as_bytes())
        ),
        model: MODEL_NAME.to_owned(),
        usage: Usage {
            input_tokens: estimate_tokens(&request_json),
            output_tokens: estimate_tokens(&content_json),
            ..Usage::default()
        },
        content,
        stop_reason: Some(if calls_tools {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        }),
    }
}

/// The id of the `index`-th tool call of assistant turn `turn` (1-based).
pub fn tool_use_id(turn: usize, index: usize) -> String {
    format!("offline_t{turn}_{index}")
}

/// A rough token count: one token per four bytes.
fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// FNV-1a, 64 bits: a stable fingerprint of the request for the response id.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What the next turn does.
enum Action {
    Explore(Turn),
    /// The plan, and the ids of the reviewer's comments it addresses: every comment the last
    /// rejection listed, each of which the revision turns into steps.
    Submit {
        plan: String,
        addressed: Vec<String>,
    },
    Reply(String),
}

fn next_action(convo: &Conversation<'_>) -> Action {
    let feedback = match convo.verdicts.last() {
        Some(Verdict::Approved) => return Action::Reply(APPROVED_REPLY.to_owned()),
        Some(Verdict::Teleported) => return Action::Reply(TELEPORT_REPLY.to_owned()),
        Some(Verdict::Pending) => return Action::Reply(PENDING_REPLY.to_owned()),
        Some(Verdict::Rejected { feedback }) => Some(feedback.as_str()),
        None => None,
    };
    let study = Study::new(convo);
    if convo.turns_in_cycle < MAX_TURNS_PER_PLAN {
        let turn = match feedback {
            None => explore::next_turn(convo, &study.terms, &study.targets),
            Some(feedback) => {
                let terms = salient_terms(&feedback.replace(ADDRESSED_REQUEST, ""), MAX_TERMS);
                explore::feedback_turn(convo, convo.verdicts.len(), &terms)
            }
        };
        if let Some(turn) = turn {
            return Action::Explore(turn);
        }
    }
    let plan = write_plan(convo, &study);
    if convo.offers(EXIT_PLAN_MODE_TOOL) {
        Action::Submit {
            plan,
            addressed: feedback.map(listed_comment_ids).unwrap_or_default(),
        }
    } else {
        Action::Reply(plan)
    }
}

/// What the first cycle's exploration established.
struct Study {
    terms: Vec<Term>,
    evidence: Evidence,
    ranked: Vec<Ranked>,
    targets: Targets,
}

impl Study {
    fn new(convo: &Conversation<'_>) -> Self {
        let mut text = convo.request.text.clone();
        if let Some(draft) = &convo.request.draft {
            text.push('\n');
            text.push_str(draft);
        }
        let terms = salient_terms(&text, MAX_TERMS);
        let evidence = Evidence::gather(convo.calls_in(0));
        let ranked = rank::rank(&evidence, &terms);
        let targets = explore::targets(&terms, &evidence, &ranked);
        Study {
            terms,
            evidence,
            ranked,
            targets,
        }
    }
}

fn write_plan(convo: &Conversation<'_>, study: &Study) -> String {
    let evidence = &study.evidence;
    let files = study
        .targets
        .files
        .iter()
        .filter(|p| {
            study.ranked.iter().any(|r| r.path == **p)
                || evidence.reads.contains_key(*p)
                || evidence.lines.contains_key(*p)
        })
        .cloned()
        .collect();
    let manifests: Vec<String> = commands::manifests(&evidence.globbed)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let contents: BTreeMap<&str, String> = manifests
        .iter()
        .filter_map(|m| Some((m.as_str(), evidence.contents(m)?)))
        .collect();
    let findings = Findings {
        request: &convo.request,
        summary: plan::summary(&convo.request),
        intent: steps::intent(&format!(
            "{}\n{}",
            convo.request.text,
            convo.request.draft.as_deref().unwrap_or_default()
        )),
        notes: &convo.notes,
        terms: &study.terms,
        evidence,
        ranked: &study.ranked,
        files,
        commands: commands::detect(&evidence.globbed, &contents),
        manifests,
        grep_offered: convo.offers("Grep"),
        cut_short: convo.first_cycle_turns >= MAX_TURNS_PER_PLAN,
    };
    let mut revisions = Vec::new();
    for (index, verdict) in convo.verdicts.iter().enumerate() {
        if let Verdict::Rejected { feedback } = verdict {
            let found = Evidence::gather(convo.calls_in(index + 1));
            let number = revisions.len() + 1;
            let feedback = feedback.replace(ADDRESSED_REQUEST, "");
            revisions.push(revise::revision(
                number,
                feedback.trim_end(),
                &found,
                &findings,
            ));
        }
    }
    plan::render(&findings, &revisions)
}

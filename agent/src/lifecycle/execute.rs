//! Execution mode: after the plan was approved, a new agent implements it.
//!
//! It starts from the plan session's transcript, whose latest ExitPlanMode decision must be an
//! approval; acting on that approval starts a model turn instead of ending the session. Turns
//! and the todo list count from the approval on. ExitPlanMode and AskUserQuestion are not
//! offered (nobody is watching), and calls to them are answered as unknown tools. The end of a
//! model turn ends execution: its text becomes the `result` and the agent exits, so the server
//! can collect the changes. On resume, a Write, Edit or Bash call left without a result is not
//! repeated (it may already have taken effect); the model is told so instead. When the
//! execution changed something, a verifier checks it before the session ends (`verify`).

use std::collections::HashSet;

use ultraplan_protocol::events::{ResultEvent, Role};
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::model::Message;
use ultraplan_protocol::plan_text::extract_approved_plan;

use super::turn::ERROR_DURING_EXECUTION;
use super::{Agent, Effect};
use crate::conversation::{tool_calls, tool_results};
use crate::plan_tools::exit_plan::{self, Decision};

/// The result when an execution agent is started without an approved plan.
pub const NO_APPROVED_PLAN: &str = "Execution needs an approved plan, and the transcript holds \
none: its latest ExitPlanMode decision is missing or not an approval.";

/// The answer to a writing call that a restart cut short.
pub const INTERRUPTED_CALL: &str = "This call was interrupted: the agent restarted before its \
result was recorded, so it may or may not have taken effect. Check the current state (Read the \
file, or run `git status` / `git diff` with Bash) before repeating it.";

impl Agent {
    /// Whether this agent implements an approved plan.
    pub(super) fn executing(&self) -> bool {
        self.settings.mode == AgentMode::Execute
    }

    /// In execution mode, ends the session when there is no approved plan to implement.
    /// Returns whether the agent can go on.
    pub(super) fn check_approved_plan(&mut self, out: &mut Vec<Effect>) -> bool {
        if !self.executing() || approval_index(&self.messages).is_some() {
            return true;
        }
        self.finish(ERROR_DURING_EXECUTION, NO_APPROVED_PLAN, out);
        false
    }

    /// The model ended its turn in execution mode: unless messages arrived meanwhile, its text
    /// is the summary that ends execution, once the verifier checked the work when it is due
    /// (see `verify`).
    pub(super) fn end_execution(&mut self, text: &str, out: &mut Vec<Effect>) {
        if !self.queued.is_empty() {
            self.flush_queued();
            return self.next_turn(out);
        }
        if self.verification_due() {
            return self.start_verification(text, out);
        }
        self.finish(ResultEvent::SUCCESS, text, out);
    }
}

/// Index of the message holding the latest ExitPlanMode decision, when that decision is an
/// approval.
pub(super) fn approval_index(messages: &[Message]) -> Option<usize> {
    let plan_calls: HashSet<String> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(tool_calls)
        .filter(|call| call.name == exit_plan::NAME)
        .map(|call| call.id)
        .collect();
    let (index, text, is_error) = messages.iter().enumerate().rev().find_map(|(i, m)| {
        tool_results(m)
            .into_iter()
            .rfind(|(id, _, _)| plan_calls.contains(*id))
            .map(|(_, text, is_error)| (i, text, is_error))
    })?;
    (exit_plan::classify(&text, is_error) == Decision::Approved).then_some(index)
}

/// The approved plan's text: from the approval's tool_result (the user's edits included),
/// else the input of the ExitPlanMode call it answers.
pub(super) fn approved_plan(messages: &[Message]) -> Option<String> {
    let index = approval_index(messages)?;
    let from_result = tool_results(&messages[index])
        .into_iter()
        .find_map(|(_, text, _)| extract_approved_plan(&text).map(|(plan, _)| plan));
    from_result.or_else(|| {
        messages[..index]
            .iter()
            .rev()
            .flat_map(|m| tool_calls(m).into_iter().rev())
            .find(|call| call.name == exit_plan::NAME)
            .and_then(|call| call.input.get("plan")?.as_str().map(str::to_owned))
    })
}

/// Where the execution phase starts in `messages`: after the approval in execution mode, at
/// the start in plan mode.
pub(super) fn phase_start(mode: AgentMode, messages: &[Message]) -> usize {
    match mode {
        AgentMode::Plan => 0,
        AgentMode::Execute => approval_index(messages).map_or(messages.len(), |i| i + 1),
    }
}

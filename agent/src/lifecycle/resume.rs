//! Where to start: a new session asks the model; a resumed one continues from where its
//! transcript stands. An execution agent starts from the plan session's transcript, at the
//! approval (see `execute`).

use std::collections::HashSet;

use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::events::{ResultEvent, Role};

use super::{Agent, Effect, Phase, Wait};
use crate::conversation::{ToolCall, text_of, tool_calls, tool_results};
use crate::plan_tools::exit_plan;

impl Agent {
    /// Handles [`super::Input::Begin`].
    pub(super) fn begin(&mut self, out: &mut Vec<Effect>) {
        if self.phase != Phase::Idle {
            return tracing::warn!("ignoring a second begin");
        }
        if !self.check_approved_plan(out) {
            return;
        }
        if self.messages.len() == 1 {
            self.report_invalid_definitions(out);
        }
        self.drop_interrupted_verification();
        let pending = self.unanswered_calls();
        if !pending.is_empty() {
            tracing::info!(calls = pending.len(), "resuming with unanswered tool calls");
            self.resume_batch(pending, out);
            return self.answer_question_from_queue(out);
        }
        if let Some((text, is_error)) = self.trailing_decision() {
            tracing::info!("resuming at a plan decision");
            self.flush_queued();
            return self.act_on_decision(&text, is_error, out);
        }
        match self.messages.last().map(|m| m.role) {
            Some(Role::Assistant) => self.resume_after_reply(out),
            _ => self.next_turn(out),
        }
    }

    /// The tool calls of the last assistant message that have no result after it.
    fn unanswered_calls(&self) -> Vec<ToolCall> {
        let Some(last) = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
        else {
            return Vec::new();
        };
        let answered: HashSet<String> = self.messages[last + 1..]
            .iter()
            .flat_map(|m| tool_results(m).into_iter().map(|(id, _, _)| id.to_owned()))
            .collect();
        tool_calls(&self.messages[last])
            .into_iter()
            .filter(|call| !answered.contains(&call.id))
            .collect()
    }

    /// The ExitPlanMode decision among the user messages after the last assistant message.
    fn trailing_decision(&self) -> Option<(String, bool)> {
        let last = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)?;
        let plan_calls: HashSet<String> = tool_calls(&self.messages[last])
            .into_iter()
            .filter(|c| c.name == exit_plan::NAME)
            .map(|c| c.id)
            .collect();
        self.messages[last + 1..]
            .iter()
            .flat_map(tool_results)
            .find(|(id, _, _)| plan_calls.contains(*id))
            .map(|(_, text, is_error)| (text, is_error))
    }

    /// A plain user message logged after a question is its answer.
    fn answer_question_from_queue(&mut self, out: &mut Vec<Effect>) {
        if matches!(self.phase, Phase::Waiting(Wait::Question { .. })) && !self.queued.is_empty() {
            let answer = self.queued.remove(0);
            self.on_user_message(answer, out);
        }
    }

    /// The transcript ends with an assistant message without tool calls.
    fn resume_after_reply(&mut self, out: &mut Vec<Effect>) {
        let text = self.messages.last().map(text_of).unwrap_or_default();
        if text.trim() == TELEPORT_REPLY {
            if !self.resume_closed {
                out.push(Effect::Emit(
                    self.result_event(ResultEvent::SUCCESS, TELEPORT_REPLY),
                ));
            }
            return self.exit(out);
        }
        match self.resume_stop_reason.as_deref() {
            Some("max_tokens") => self.continue_cut_reply(out),
            Some("pause_turn") => self.next_turn(out),
            _ if self.resume_closed && self.executing() => self.exit(out),
            _ if self.resume_closed => self.phase = Phase::Waiting(Wait::EndOfTurn),
            _ => self.end_turn(&text, out),
        }
    }
}

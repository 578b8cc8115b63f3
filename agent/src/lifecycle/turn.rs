//! Model turns: requests, replies, errors and compaction.

use serde_json::json;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::events::{ResultEvent, SystemEvent};
use ultraplan_protocol::model::{
    Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, StopReason,
};

use super::{Agent, CompactTrigger, Effect, Owner, Phase, Purpose, Wait};
use crate::context;
use crate::conversation::{assistant, reply, text_of, tool_calls, user_event, user_text};
use crate::plan_tools::todo;
use crate::prompts::CONTINUE_NUDGE;

/// Result subtypes the agent ends sessions with.
pub const ERROR_MAX_TURNS: &str = "error_max_turns";
pub const ERROR_PROMPT_TOO_LONG: &str = "error_prompt_too_long";
pub const ERROR_BUDGET: &str = "error_budget";
pub const ERROR_DURING_EXECUTION: &str = "error_during_execution";

impl Agent {
    /// Starts the next model turn: guards, compaction when due, then the request.
    pub(super) fn next_turn(&mut self, out: &mut Vec<Effect>) {
        let max = self.settings.max_turns;
        if max > 0 && self.turns >= max {
            let text = format!("Stopped after reaching the limit of {max} turns.");
            return self.finish(ERROR_MAX_TURNS, &text, out);
        }
        if self.compaction_due() {
            return self.start_compaction(CompactTrigger::Threshold, out);
        }
        let ctx = &self.config.context;
        let messages = context::turn_messages(&self.prefix, &self.messages, ctx);
        let mut request = self.prefix.request(messages, self.config.max_output_tokens);
        self.team.mark_shared_tools(&mut request);
        self.send(Purpose::Turn, request, out);
    }

    fn compaction_due(&self) -> bool {
        let ctx = &self.config.context;
        self.compacted_at != Some(self.messages.len())
            && self.messages.len() > 2
            && context::estimate(&self.prefix, &self.messages, ctx) > ctx.compact_threshold_tokens
    }

    fn start_compaction(&mut self, trigger: CompactTrigger, out: &mut Vec<Effect>) {
        tracing::info!(
            ?trigger,
            messages = self.messages.len(),
            "compacting the conversation"
        );
        let messages = context::summary_messages(&self.messages, &self.config.context);
        let request = self.prefix.request(messages, self.config.max_output_tokens);
        self.send(Purpose::Compact(trigger), request, out);
    }

    fn send(&mut self, purpose: Purpose, request: ModelRequest, out: &mut Vec<Effect>) {
        let request_id = self.ids.request();
        self.requests.insert(request_id.clone(), Owner::Main);
        self.phase = Phase::Model {
            request_id: request_id.clone(),
            purpose,
        };
        out.push(Effect::Request {
            request_id,
            request,
        });
    }

    /// Routes a model reply to the agent that asked for it; stale replies are ignored.
    pub(super) fn on_model(
        &mut self,
        request_id: &str,
        result: Result<ModelResponse, ModelError>,
        out: &mut Vec<Effect>,
    ) {
        match self.requests.remove(request_id) {
            Some(Owner::Main) => {}
            Some(Owner::Task(task_id)) => return self.on_task_model(&task_id, result, out),
            Some(Owner::WarmUp(task_ids)) => return self.on_warmed(task_ids, result, out),
            None => {
                return tracing::warn!(request_id, "ignoring a reply to no outstanding request");
            }
        }
        let purpose = match &self.phase {
            Phase::Model {
                request_id: expected,
                purpose,
            } if expected == request_id => *purpose,
            _ => {
                tracing::warn!(request_id, "ignoring a reply to no outstanding request");
                return;
            }
        };
        match (purpose, result) {
            (Purpose::Turn, Ok(response)) => self.on_turn_reply(response, out),
            (Purpose::Turn, Err(error)) => self.on_turn_error(error, out),
            (Purpose::Compact(trigger), Ok(response)) => {
                self.on_summary(trigger, response, out);
            }
            (Purpose::Compact(_), Err(error)) => self.on_fatal_model_error(error, out),
        }
    }

    fn on_turn_reply(&mut self, response: ModelResponse, out: &mut Vec<Effect>) {
        self.usage = self.usage + response.usage;
        self.turns = self.turns.saturating_add(1);
        self.overflow_retry_used = false;
        let stop_reason = response.stop_reason;
        let (message, event) = reply(response);
        let calls = tool_calls(&message);
        self.todos
            .on_assistant_turn(calls.iter().any(|c| c.name == todo::NAME));
        let text = text_of(&message);
        self.add(message, event, out);
        if !calls.is_empty() {
            return self.start_batch(calls, out);
        }
        match stop_reason {
            Some(StopReason::MaxTokens) => self.continue_cut_reply(out),
            Some(StopReason::PauseTurn) => self.next_turn(out),
            _ => self.end_turn(&text, out),
        }
    }

    /// A reply cut by the output limit: ask for the rest, without a recap.
    pub(super) fn continue_cut_reply(&mut self, out: &mut Vec<Effect>) {
        let nudge = user_text(CONTINUE_NUDGE);
        let event = user_event(&nudge);
        self.add(nudge, event, out);
        self.next_turn(out);
    }

    /// The model ended its turn: report it and wait for the user (or go on with messages
    /// that arrived meanwhile). In execution mode the end of a turn ends the session.
    pub(super) fn end_turn(&mut self, text: &str, out: &mut Vec<Effect>) {
        if self.executing() {
            return self.end_execution(text, out);
        }
        out.push(Effect::Emit(self.result_event(ResultEvent::SUCCESS, text)));
        self.phase = Phase::Waiting(Wait::EndOfTurn);
        if !self.queued.is_empty() {
            self.flush_queued();
            self.next_turn(out);
        }
    }

    fn on_turn_error(&mut self, error: ModelError, out: &mut Vec<Effect>) {
        if error.kind == ModelErrorKind::PromptTooLong && !self.overflow_retry_used {
            self.overflow_retry_used = true;
            return self.start_compaction(CompactTrigger::PromptTooLong, out);
        }
        self.on_fatal_model_error(error, out);
    }

    fn on_fatal_model_error(&mut self, error: ModelError, out: &mut Vec<Effect>) {
        let subtype = match error.kind {
            ModelErrorKind::PromptTooLong => ERROR_PROMPT_TOO_LONG,
            ModelErrorKind::BudgetExhausted => ERROR_BUDGET,
            ModelErrorKind::Unavailable | ModelErrorKind::InvalidRequest => ERROR_DURING_EXECUTION,
        };
        self.finish(subtype, &error.message, out);
    }

    fn on_summary(
        &mut self,
        trigger: CompactTrigger,
        response: ModelResponse,
        out: &mut Vec<Effect>,
    ) {
        self.usage = self.usage + response.usage;
        let summary = text_of(&assistant(response.content));
        if summary.trim().is_empty() {
            let text = "Compaction failed: the model returned no summary.";
            return self.finish(ERROR_DURING_EXECUTION, text, out);
        }
        let before = self.messages.len();
        let keep = self.config.context.compact_keep_tokens;
        self.messages = context::compact::apply_summary(&self.messages, &summary, keep);
        self.compacted_at = Some(self.messages.len());
        out.push(Effect::Emit(compact_event(
            trigger,
            before,
            &self.messages,
            &summary,
        )));
        self.next_turn(out);
    }
}

/// The `system` event recording a compaction.
fn compact_event(
    trigger: CompactTrigger,
    before: usize,
    after: &[Message],
    summary: &str,
) -> EventBody {
    let trigger = match trigger {
        CompactTrigger::Threshold => "threshold",
        CompactTrigger::PromptTooLong => "prompt_too_long",
    };
    EventBody::System(SystemEvent {
        subtype: "compact_boundary".to_owned(),
        message: Some("Earlier conversation summarized to save context.".to_owned()),
        data: json!({
            "trigger": trigger,
            "messages_before": before,
            "messages_after": after.len(),
            "summary": summary,
        }),
    })
}

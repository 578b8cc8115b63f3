//! User events: plan decisions, answers to questions, messages after a turn, and steering.

use ultraplan_protocol::EventBody;
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::events::ResultEvent;
use ultraplan_protocol::model::{Message, StopReason};

use super::{Agent, Effect, Phase, Wait};
use crate::conversation::{
    AssistantMeta, assistant, assistant_event, from_user_event, has_tool_results, text_of,
    tool_result_block, tool_results, user, user_event,
};
use crate::plan_tools::exit_plan::{self, APPROVED_RESULT_TEXT, Decision};

impl Agent {
    /// Takes a user event from the server; anything but a main-agent user message is ignored.
    pub(super) fn on_user_event(&mut self, event: EventBody, out: &mut Vec<Effect>) {
        match &event {
            EventBody::User(u) if u.parent_tool_use_id.is_none() => {
                self.on_user_message(from_user_event(u), out);
            }
            other => tracing::warn!(?other, "ignoring a user event the agent cannot use"),
        }
    }

    /// Routes a user message by what the agent is doing.
    pub(super) fn on_user_message(&mut self, message: Message, out: &mut Vec<Effect>) {
        let answers = |id: &str| tool_results(&message).iter().any(|(r, _, _)| *r == id);
        match &mut self.phase {
            Phase::Waiting(Wait::Decision { tool_use_id }) if answers(tool_use_id) => {
                let id = tool_use_id.clone();
                self.on_decision(message, &id, out);
            }
            Phase::Waiting(Wait::Question { tool_use_id }) if answers(tool_use_id) => {
                self.messages.push(message);
                self.flush_queued();
                self.next_turn(out);
            }
            Phase::Waiting(Wait::Question { tool_use_id }) if !has_tool_results(&message) => {
                let id = tool_use_id.clone();
                self.answer_from_text(&id, &message, out);
            }
            Phase::Waiting(Wait::EndOfTurn) if !has_tool_results(&message) => {
                self.messages.push(message);
                self.flush_queued();
                self.next_turn(out);
            }
            Phase::Tools(batch)
                if batch.early.is_none()
                    && batch
                        .waiting
                        .as_ref()
                        .is_some_and(|w| accepts(w, &message, &answers)) =>
            {
                batch.early = Some(message);
            }
            Phase::Done => {}
            _ if !has_tool_results(&message) => self.queued.push(message),
            _ => tracing::warn!("ignoring tool results the agent is not waiting for"),
        }
    }

    /// The user answered a question with a plain message: it becomes the tool_result.
    fn answer_from_text(&mut self, tool_use_id: &str, message: &Message, out: &mut Vec<Effect>) {
        let result = user(vec![tool_result_block(
            tool_use_id,
            text_of(message),
            false,
        )]);
        let event = user_event(&result);
        self.add(result, event, out);
        self.flush_queued();
        self.next_turn(out);
    }

    /// The ExitPlanMode decision arrived (the server logged it; it is not re-emitted).
    fn on_decision(&mut self, message: Message, tool_use_id: &str, out: &mut Vec<Effect>) {
        let (text, is_error) = tool_results(&message)
            .into_iter()
            .find(|(id, _, _)| *id == tool_use_id)
            .map(|(_, text, is_error)| (text, is_error))
            .unwrap_or_default();
        self.messages.push(message);
        self.act_on_decision(&text, is_error, out);
    }

    /// Approval ends the plan phase (in execution mode it starts the implementation), a
    /// teleport stops the harness, a rejection goes back to the model with any messages queued
    /// meanwhile.
    pub(super) fn act_on_decision(&mut self, text: &str, is_error: bool, out: &mut Vec<Effect>) {
        match exit_plan::classify(text, is_error) {
            Decision::Approved if self.executing() => {
                self.flush_queued();
                self.next_turn(out);
            }
            Decision::Approved => self.finish(ResultEvent::SUCCESS, APPROVED_RESULT_TEXT, out),
            Decision::Teleported => self.teleport(out),
            Decision::Rejected => {
                self.flush_queued();
                self.next_turn(out);
            }
        }
    }

    /// The plan went back to the terminal: the harness answers for the model and stops.
    pub(super) fn teleport(&mut self, out: &mut Vec<Effect>) {
        let reply = assistant(vec![ultraplan_protocol::ContentBlock::text(TELEPORT_REPLY)]);
        let meta = AssistantMeta {
            model: None,
            stop_reason: Some(StopReason::EndTurn),
            usage: None,
        };
        let event = assistant_event(&reply, meta);
        self.add(reply, event, out);
        self.finish(ResultEvent::SUCCESS, TELEPORT_REPLY, out);
    }
}

/// Whether `message` answers `wait`: its tool_result, or for a question any plain message.
fn accepts(wait: &Wait, message: &Message, answers: &impl Fn(&str) -> bool) -> bool {
    match wait {
        Wait::Decision { tool_use_id } => answers(tool_use_id),
        Wait::Question { tool_use_id } => answers(tool_use_id) || !has_tool_results(message),
        Wait::EndOfTurn => false,
    }
}

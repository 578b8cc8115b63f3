//! Rebuilds the main conversation from a session transcript (the event log so far).
//!
//! Subagent traffic (events with `parent_tool_use_id`), `system` and `control_request` events
//! are skipped (a `verification` event is only noted); `result` events only mark turn ends. The first plain user message is the
//! prompt. Plain user messages logged while tool results were still outstanding (steering that
//! raced the agent) are moved after those results, as the live agent would have placed them;
//! tool_results whose tool_use is unknown are dropped so the history stays valid.

use std::collections::HashSet;

use ultraplan_protocol::EventBody;
use ultraplan_protocol::constants::VERIFICATION;
use ultraplan_protocol::events::UserContent;
use ultraplan_protocol::model::Message;

use super::{assistant, from_user_event, has_tool_results, tool_calls, tool_results};

/// The conversation recovered from a transcript.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rebuilt {
    /// The user's prompt: the first main-agent plain user message.
    pub prompt: Option<String>,
    /// Every later message, in conversation order.
    pub messages: Vec<Message>,
    /// Plain user messages still waiting for outstanding tool results.
    pub deferred: Vec<Message>,
    /// The logged stop reason of the last assistant message.
    pub last_stop_reason: Option<String>,
    /// Whether a `result` event follows the last message.
    pub closed: bool,
    /// Whether a main-agent `verification` event (the verifier's verdict) was logged.
    pub verified: bool,
}

/// Rebuilds the conversation from `transcript`.
pub fn rebuild(transcript: &[EventBody]) -> Rebuilt {
    let mut state = State::default();
    for event in transcript {
        if event.parent_tool_use_id().is_none() {
            state.ingest(event);
        }
    }
    state.out
}

#[derive(Default)]
struct State {
    out: Rebuilt,
    /// Every tool_use id seen so far.
    known: HashSet<String>,
    /// tool_use ids still without a result.
    pending: HashSet<String>,
}

impl State {
    fn ingest(&mut self, event: &EventBody) {
        match event {
            EventBody::Assistant(a) => {
                let message = assistant(a.message.content.clone());
                for call in tool_calls(&message) {
                    self.known.insert(call.id.clone());
                    self.pending.insert(call.id);
                }
                self.out.last_stop_reason = a.message.stop_reason.clone();
                self.push(message);
            }
            EventBody::User(u) => {
                if self.out.prompt.is_none() {
                    if let UserContent::Text(text) = &u.message.content {
                        self.out.prompt = Some(text.clone());
                        return;
                    }
                    let message = from_user_event(u);
                    if !has_tool_results(&message) {
                        self.out.prompt = Some(super::text_of(&message));
                        return;
                    }
                }
                self.user(from_user_event(u));
            }
            EventBody::Result(_) => self.out.closed = true,
            EventBody::System(s) if s.subtype == VERIFICATION => self.out.verified = true,
            EventBody::System(_) | EventBody::ControlRequest(_) => {}
        }
    }

    fn user(&mut self, mut message: Message) {
        if !has_tool_results(&message) {
            if self.pending.is_empty() {
                self.push(message);
            } else {
                self.out.deferred.push(message);
                self.out.closed = false;
            }
            return;
        }
        message.content.retain(|block| match block {
            ultraplan_protocol::ContentBlock::ToolResult { tool_use_id, .. } => {
                self.known.contains(tool_use_id)
            }
            _ => true,
        });
        for (id, _, _) in tool_results(&message) {
            self.pending.remove(id);
        }
        if message.content.is_empty() {
            return;
        }
        self.push(message);
        if self.pending.is_empty() {
            let deferred = std::mem::take(&mut self.out.deferred);
            self.out.messages.extend(deferred);
        }
    }

    fn push(&mut self, message: Message) {
        self.out.messages.push(message);
        self.out.closed = false;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use ultraplan_protocol::ContentBlock;
    use ultraplan_protocol::events::{ControlRequest, ControlRequestEvent, PermissionMode};

    use super::*;
    use crate::conversation::{text_of, user_text};
    use crate::test_support::success;

    fn control() -> EventBody {
        EventBody::ControlRequest(ControlRequestEvent {
            request_id: None,
            request: ControlRequest::SetPermissionMode {
                mode: PermissionMode::Plan,
                ultraplan: true,
            },
        })
    }

    fn call(id: &str, name: &str) -> EventBody {
        EventBody::assistant(vec![ContentBlock::tool_use(id, name, json!({}))])
    }

    fn subagent(mut event: EventBody) -> EventBody {
        match &mut event {
            EventBody::Assistant(a) => a.parent_tool_use_id = Some("task".into()),
            EventBody::User(u) => u.parent_tool_use_id = Some("task".into()),
            _ => {}
        }
        event
    }

    /// Each message rendered as `role:text` or `role:[ids]` for compact comparison.
    fn shape(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| {
                let calls: Vec<String> = tool_calls(m).into_iter().map(|c| c.id).collect();
                let results: Vec<&str> = tool_results(m).into_iter().map(|r| r.0).collect();
                format!("{:?}:{}{:?}{:?}", m.role, text_of(m), calls, results)
            })
            .collect()
    }

    /// (name, transcript, message shapes, deferred shapes, closed)
    type Case = (
        &'static str,
        Vec<EventBody>,
        Vec<&'static str>,
        Vec<&'static str>,
        bool,
    );

    #[test]
    fn transcripts_rebuild_into_conversations() {
        let cases: Vec<Case> = vec![
            (
                "new session",
                vec![control(), EventBody::user_text("plan it")],
                vec![],
                vec![],
                false,
            ),
            (
                "tool round trip, turn closed",
                vec![
                    control(),
                    EventBody::user_text("plan it"),
                    call("a", "Glob"),
                    EventBody::tool_result("a", "x", false),
                    EventBody::assistant(vec![ContentBlock::text("done")]),
                    success(None),
                ],
                vec![
                    "Assistant:[\"a\"][]",
                    "User:[][\"a\"]",
                    "Assistant:done[][]",
                ],
                vec![],
                true,
            ),
            (
                "subagent traffic, system events and orphan results skipped",
                vec![
                    EventBody::user_text("plan it"),
                    subagent(call("s", "Read")),
                    subagent(EventBody::tool_result("s", "x", false)),
                    EventBody::tool_result("ghost", "x", false),
                    call("a", "Read"),
                ],
                vec!["Assistant:[\"a\"][]"],
                vec![],
                false,
            ),
            (
                "steering logged before the results moves after them",
                vec![
                    EventBody::user_text("plan it"),
                    call("a", "Grep"),
                    EventBody::user_text("also check docs"),
                    EventBody::tool_result("a", "x", false),
                    success(None),
                ],
                vec![
                    "Assistant:[\"a\"][]",
                    "User:[][\"a\"]",
                    "User:also check docs[][]",
                ],
                vec![],
                true,
            ),
            (
                "steering while a decision is pending stays deferred",
                vec![
                    EventBody::user_text("plan it"),
                    call("p", "ExitPlanMode"),
                    EventBody::user_text("one more thing"),
                ],
                vec!["Assistant:[\"p\"][]"],
                vec!["User:one more thing[][]"],
                false,
            ),
        ];
        for (name, transcript, messages, deferred, closed) in cases {
            let rebuilt = rebuild(&transcript);
            assert_eq!(rebuilt.prompt.as_deref(), Some("plan it"), "{name}");
            assert_eq!(shape(&rebuilt.messages), messages, "{name}");
            assert_eq!(shape(&rebuilt.deferred), deferred, "{name}");
            assert_eq!(rebuilt.closed, closed, "{name}");
        }
    }

    #[test]
    fn empty_transcript_has_no_prompt() {
        assert_eq!(rebuild(&[control()]).prompt, None);
        let blocks = rebuild(&[EventBody::User(ultraplan_protocol::events::UserEvent {
            message: ultraplan_protocol::events::UserMessage {
                role: ultraplan_protocol::events::Role::User,
                content: UserContent::Blocks(vec![ContentBlock::text("block prompt")]),
            },
            parent_tool_use_id: None,
        })]);
        assert_eq!(blocks.prompt.as_deref(), Some("block prompt"));
        assert_eq!(user_text("x").content.len(), 1);
    }

    #[test]
    fn last_stop_reason_is_kept() {
        let mut event = EventBody::assistant(vec![ContentBlock::text("part")]);
        if let EventBody::Assistant(a) = &mut event {
            a.message.stop_reason = Some("max_tokens".into());
        }
        let rebuilt = rebuild(&[EventBody::user_text("p"), event]);
        assert_eq!(rebuilt.last_stop_reason.as_deref(), Some("max_tokens"));
    }
}

//! The conversation as the model sees it: a list of [`Message`]s, with helpers to read
//! tool uses and results out of it, to convert to and from session events, and to estimate
//! its size.

mod rebuild;

use serde_json::Value;
use ultraplan_protocol::events::{
    AssistantEvent, AssistantMessage, ResultEvent, Role, ToolResultContent, UserContent, UserEvent,
    UserMessage,
};
use ultraplan_protocol::model::{Message, ModelResponse, StopReason, Usage};
use ultraplan_protocol::{ContentBlock, EventBody};

pub use rebuild::{Rebuilt, rebuild};

/// One tool_use block of an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// A user message with the given blocks.
pub fn user(content: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::User,
        content,
    }
}

/// A user message with one text block.
pub fn user_text(text: impl Into<String>) -> Message {
    user(vec![ContentBlock::text(text)])
}

/// An assistant message with the given blocks.
pub fn assistant(content: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::Assistant,
        content,
    }
}

/// The tool_use blocks of a message, in order.
pub fn tool_calls(message: &Message) -> Vec<ToolCall> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some(ToolCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The tool_result blocks of a message: `(tool_use_id, text, is_error)`.
pub fn tool_results(message: &Message) -> Vec<(&str, String, bool)> {
    message
        .content
        .iter()
        .filter_map(ContentBlock::as_tool_result)
        .collect()
}

/// Whether the message carries at least one tool_result block.
pub fn has_tool_results(message: &Message) -> bool {
    message
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
}

/// The text blocks of a message, joined by newlines.
pub fn text_of(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tool_result block.
pub fn tool_result_block(
    tool_use_id: &str,
    text: impl Into<String>,
    is_error: bool,
) -> ContentBlock {
    ContentBlock::ToolResult {
        tool_use_id: tool_use_id.to_owned(),
        content: ToolResultContent::Text(text.into()),
        is_error: is_error.then_some(true),
        cache_control: None,
    }
}

/// The message carried by a main-agent user event.
pub fn from_user_event(event: &UserEvent) -> Message {
    match &event.message.content {
        UserContent::Text(text) => user_text(text.clone()),
        UserContent::Blocks(blocks) => user(blocks.clone()),
    }
}

/// The event recording a user message the agent added.
pub fn user_event(message: &Message) -> EventBody {
    EventBody::User(UserEvent {
        message: UserMessage {
            role: Role::User,
            content: UserContent::Blocks(message.content.clone()),
        },
        parent_tool_use_id: None,
    })
}

/// `event` marked as subagent traffic of the Task call `task_id` (`parent_tool_use_id`).
pub fn for_task(mut event: EventBody, task_id: &str) -> EventBody {
    match &mut event {
        EventBody::Assistant(a) => a.parent_tool_use_id = Some(task_id.to_owned()),
        EventBody::User(u) => u.parent_tool_use_id = Some(task_id.to_owned()),
        _ => {}
    }
    event
}

/// What the model said, with how and by which model, for the event log.
#[derive(Debug, Clone, PartialEq)]
pub struct AssistantMeta {
    pub model: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub usage: Option<Usage>,
}

/// The event recording an assistant message.
pub fn assistant_event(message: &Message, meta: AssistantMeta) -> EventBody {
    EventBody::Assistant(AssistantEvent {
        message: AssistantMessage {
            role: Role::Assistant,
            content: message.content.clone(),
            model: meta.model,
            stop_reason: meta.stop_reason.map(stop_reason_name),
            usage: meta.usage,
        },
        parent_tool_use_id: None,
    })
}

/// The assistant message of a model reply, and the event that records it.
pub fn reply(response: ModelResponse) -> (Message, EventBody) {
    let message = assistant(response.content);
    let meta = AssistantMeta {
        model: Some(response.model),
        stop_reason: response.stop_reason,
        usage: Some(response.usage),
    };
    let event = assistant_event(&message, meta);
    (message, event)
}

/// The `result` event that closes a session: an error unless `subtype` is `success`.
pub fn result_event(subtype: &str, text: &str, num_turns: u32, usage: Usage) -> EventBody {
    EventBody::Result(ResultEvent {
        subtype: subtype.to_owned(),
        is_error: subtype != ResultEvent::SUCCESS,
        result: Some(text.to_owned()),
        num_turns: Some(num_turns),
        duration_ms: None,
        usage: Some(usage),
        patch: None,
    })
}

/// The wire name of a stop reason (`end_turn`, `max_tokens`, …).
pub fn stop_reason_name(reason: StopReason) -> String {
    match serde_json::to_value(reason) {
        Ok(Value::String(name)) => name,
        _ => format!("{reason:?}"),
    }
}

/// Estimated tokens of a message list: characters / 4.
pub fn estimate_tokens(messages: &[Message]) -> usize {
    messages.iter().map(message_chars).sum::<usize>() / 4
}

/// Characters of one message's payload.
pub fn message_chars(message: &Message) -> usize {
    message.content.iter().map(block_chars).sum()
}

fn block_chars(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text { text, .. } => text.len(),
        ContentBlock::ToolUse { name, input, .. } => name.len() + input.to_string().len(),
        ContentBlock::ToolResult { content, .. } => content.text().len(),
        ContentBlock::Thinking { thinking, .. } => thinking.len(),
    }
}

/// Whether cutting the history at `start` (keeping `messages[start..]`) leaves every
/// tool_result with its tool_use, for every possible `start`. `result[i]` answers for `i`;
/// `result[len]` (the empty tail) is always true.
pub fn safe_cuts(messages: &[Message]) -> Vec<bool> {
    let mut safe = vec![true; messages.len() + 1];
    let mut open: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (i, message) in messages.iter().enumerate().rev() {
        for (id, _, _) in tool_results(message) {
            open.insert(id.to_owned());
        }
        for call in tool_calls(message) {
            open.remove(&call.id);
        }
        safe[i] = open.is_empty();
    }
    safe
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Message {
        assistant(vec![ContentBlock::tool_use(id, "Read", json!({}))])
    }

    fn result(id: &str) -> Message {
        user(vec![tool_result_block(id, "r", false)])
    }

    #[test]
    fn safe_cuts_never_separate_results_from_uses() {
        let messages = vec![
            user_text("prompt"),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            user_text("steer"),
        ];
        assert_eq!(
            safe_cuts(&messages),
            vec![true, true, false, true, false, true, true]
        );
    }

    #[test]
    fn result_events_are_errors_unless_successful() {
        let usage = Usage {
            output_tokens: 7,
            ..Usage::default()
        };
        let cases = [("success", false), ("error_max_turns", true), ("", true)];
        for (subtype, is_error) in cases {
            let EventBody::Result(event) = result_event(subtype, "text", 3, usage) else {
                panic!("{subtype}: not a result event");
            };
            assert_eq!(event.subtype, subtype);
            assert_eq!(event.is_error, is_error, "{subtype}");
            assert_eq!(event.result.as_deref(), Some("text"));
            assert_eq!((event.num_turns, event.usage), (Some(3), Some(usage)));
        }
    }

    #[test]
    fn stop_reasons_use_wire_names() {
        let cases = [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::ToolUse, "tool_use"),
            (StopReason::PauseTurn, "pause_turn"),
        ];
        for (reason, name) in cases {
            assert_eq!(stop_reason_name(reason), name);
        }
    }

    #[test]
    fn estimates_count_every_block_kind() {
        let messages = vec![
            user_text("a".repeat(400)),
            assistant(vec![ContentBlock::tool_use("t", "Read", json!({"x": "y"}))]),
            user(vec![tool_result_block("t", "b".repeat(400), false)]),
        ];
        let tokens = estimate_tokens(&messages);
        assert!((200..210).contains(&tokens), "{tokens}");
    }
}

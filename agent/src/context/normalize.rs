//! Final shaping of a request's messages: empty messages dropped, consecutive messages of the
//! same role merged (tool_results first in a user message, as providers require), and prompt
//! cache breakpoints placed.

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::{CacheControl, Role};
use ultraplan_protocol::model::Message;

/// Drops empty messages and merges runs of one role into a single message.
pub fn merge_roles(messages: Vec<Message>) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for message in messages.into_iter().filter(|m| !m.content.is_empty()) {
        match out.last_mut() {
            Some(last) if last.role == message.role => last.content.extend(message.content),
            _ => out.push(message),
        }
    }
    for message in out.iter_mut().filter(|m| m.role == Role::User) {
        results_first(&mut message.content);
    }
    out
}

/// Moves tool_result blocks ahead of the other blocks, keeping each group's order.
fn results_first(blocks: &mut Vec<ContentBlock>) {
    let (mut results, others): (Vec<_>, Vec<_>) = std::mem::take(blocks)
        .into_iter()
        .partition(|b| matches!(b, ContentBlock::ToolResult { .. }));
    results.extend(others);
    *blocks = results;
}

/// Puts an ephemeral cache breakpoint on the last block of `message` that can carry one.
/// Returns whether it found such a block.
pub fn mark_cache(message: &mut Message) -> bool {
    for block in message.content.iter_mut().rev() {
        let slot = match block {
            ContentBlock::Text { cache_control, .. }
            | ContentBlock::ToolUse { cache_control, .. }
            | ContentBlock::ToolResult { cache_control, .. } => cache_control,
            ContentBlock::Thinking { .. } => continue,
        };
        *slot = Some(CacheControl::ephemeral());
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::conversation::{assistant, tool_result_block, user, user_text};

    fn kinds(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| {
                let blocks: Vec<&str> = m
                    .content
                    .iter()
                    .map(|b| match b {
                        ContentBlock::Text { .. } => "text",
                        ContentBlock::ToolUse { .. } => "use",
                        ContentBlock::ToolResult { .. } => "result",
                        ContentBlock::Thinking { .. } => "thinking",
                    })
                    .collect();
                format!("{:?}[{}]", m.role, blocks.join(","))
            })
            .collect()
    }

    #[test]
    fn runs_merge_with_results_first() {
        let cases = [
            (
                vec![user_text("a"), user_text("b")],
                vec!["User[text,text]"],
            ),
            (
                vec![
                    user_text("p"),
                    assistant(vec![ContentBlock::tool_use("t", "Read", json!({}))]),
                    user(vec![tool_result_block("t", "r", false)]),
                    user_text("steer"),
                    user(vec![tool_result_block("u", "r", true)]),
                ],
                vec!["User[text]", "Assistant[use]", "User[result,result,text]"],
            ),
            (
                vec![
                    user_text("p"),
                    assistant(vec![]),
                    user_text("q"),
                    assistant(vec![ContentBlock::text("x")]),
                    assistant(vec![ContentBlock::text("y")]),
                ],
                vec!["User[text,text]", "Assistant[text,text]"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(kinds(&merge_roles(input)), want);
        }
    }

    #[test]
    fn cache_marks_skip_thinking_blocks() {
        let mut message = assistant(vec![
            ContentBlock::text("x"),
            ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: None,
            },
        ]);
        assert!(mark_cache(&mut message));
        let json = serde_json::to_value(&message).expect("json");
        assert_eq!(json["content"][0]["cache_control"]["type"], "ephemeral");
        assert!(!mark_cache(&mut assistant(vec![])));
    }
}

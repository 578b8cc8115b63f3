//! Old tool results → one-line placeholders.
//!
//! Results of `Glob`, `Grep` and `Read` calls made more than `keep_turns` assistant turns ago
//! are replaced by `[Old tool result cleared: <tool> <short input>]`. The cut-off moves in
//! steps of `step` turns so that the request prefix, and with it the provider's prompt cache,
//! stays stable between steps. Small results are left alone: clearing them saves nothing.

use std::collections::HashMap;

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::{Role, ToolResultContent};
use ultraplan_protocol::model::Message;

use crate::conversation::{ToolCall, tool_calls};

/// Tools whose output can be recomputed, and so may be cleared.
pub const CLEARABLE_TOOLS: [&str; 3] = ["Glob", "Grep", "Read"];

/// Results shorter than this are kept.
const MIN_CLEAR_CHARS: usize = 256;

/// Longest rendering of a tool input inside a placeholder.
const SHORT_INPUT_CHARS: usize = 100;

/// The messages with old tool results replaced by placeholders.
pub fn clear_old_results(messages: &[Message], keep_turns: usize, step: usize) -> Vec<Message> {
    let old = old_calls(messages, cutoff(messages, keep_turns, step));
    if old.is_empty() {
        return messages.to_vec();
    }
    messages
        .iter()
        .map(|message| Message {
            role: message.role,
            content: message
                .content
                .iter()
                .map(|block| clear_block(block, &old))
                .collect(),
        })
        .collect()
}

/// The placeholder text for one call.
pub fn placeholder(call: &ToolCall) -> String {
    format!(
        "[Old tool result cleared: {} {}]",
        call.name,
        short_input(&call.input)
    )
}

/// Number of leading assistant turns whose results are cleared.
fn cutoff(messages: &[Message], keep_turns: usize, step: usize) -> usize {
    let turns = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    let clearable = turns.saturating_sub(keep_turns);
    clearable - clearable % step.max(1)
}

/// Clearable calls made in the first `cutoff` assistant turns, by id.
fn old_calls(messages: &[Message], cutoff: usize) -> HashMap<String, ToolCall> {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .take(cutoff)
        .flat_map(tool_calls)
        .filter(|call| CLEARABLE_TOOLS.contains(&call.name.as_str()))
        .map(|call| (call.id.clone(), call))
        .collect()
}

fn clear_block(block: &ContentBlock, old: &HashMap<String, ToolCall>) -> ContentBlock {
    let ContentBlock::ToolResult {
        tool_use_id,
        content,
        is_error,
        cache_control,
    } = block
    else {
        return block.clone();
    };
    match old.get(tool_use_id) {
        Some(call) if content.text().len() >= MIN_CLEAR_CHARS => ContentBlock::ToolResult {
            tool_use_id: tool_use_id.clone(),
            content: ToolResultContent::Text(placeholder(call)),
            is_error: *is_error,
            cache_control: cache_control.clone(),
        },
        _ => block.clone(),
    }
}

fn short_input(input: &serde_json::Value) -> String {
    let mut text = input.to_string();
    if let Some((cut, _)) = text.char_indices().nth(SHORT_INPUT_CHARS) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::context::tests::tool_rounds;
    use crate::conversation::tool_results;

    fn cleared_ids(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .flat_map(|m| {
                tool_results(m)
                    .into_iter()
                    .map(|(id, text, _)| (id.to_owned(), text))
            })
            .filter(|(_, text)| text.starts_with("[Old tool result cleared:"))
            .map(|(id, _)| id)
            .collect()
    }

    /// (turns, keep, step, tool names, result length, cleared ids)
    type Case = (
        usize,
        usize,
        usize,
        &'static [&'static str],
        usize,
        &'static [&'static str],
    );

    #[test]
    fn clears_in_steps_beyond_the_kept_turns() {
        let cases: [Case; 8] = [
            (3, 8, 4, &["Read"], 1000, &[]),
            (11, 8, 4, &["Read"], 1000, &[]),
            (12, 8, 4, &["Read"], 1000, &["t0", "t1", "t2", "t3"]),
            (15, 8, 4, &["Read"], 1000, &["t0", "t1", "t2", "t3"]),
            (5, 2, 1, &["Read"], 1000, &["t0", "t1", "t2"]),
            (
                5,
                2,
                1,
                &["Read", "ExitPlanMode", "TodoWrite"],
                1000,
                &["t0"],
            ),
            (
                8,
                2,
                1,
                &["Read", "ExitPlanMode", "TodoWrite"],
                1000,
                &["t0", "t3"],
            ),
            (5, 2, 1, &["Grep"], 10, &[]),
        ];
        for (turns, keep, step, names, len, want) in cases {
            let out = clear_old_results(&tool_rounds(turns, names, len), keep, step);
            assert_eq!(
                cleared_ids(&out),
                want,
                "{turns} turns keep {keep} step {step}"
            );
            assert_eq!(out.len(), 1 + 2 * turns);
        }
    }

    #[test]
    fn placeholders_name_the_tool_and_input() {
        let out = clear_old_results(&tool_rounds(2, &["Read"], 500), 1, 1);
        let (_, text, _) = tool_results(&out[2]).remove(0);
        assert_eq!(
            text,
            "[Old tool result cleared: Read {\"file_path\":\"src/f0.rs\"}]"
        );
        let long = ToolCall {
            id: "x".into(),
            name: "Grep".into(),
            input: json!({"pattern": "é".repeat(300)}),
        };
        assert!(placeholder(&long).chars().count() < 140);
    }
}

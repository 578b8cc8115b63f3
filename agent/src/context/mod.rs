//! Context management: what of the conversation goes into each model request.
//!
//! - [`spill`]: tool results over a size cap are saved to disk and replaced by a preview;
//! - [`clear`]: results of old read-only tool calls become one-line placeholders;
//! - [`snip`]: past a token threshold the middle of the history is cut out;
//! - [`compact`]: past a higher threshold a model-written summary replaces older history;
//! - [`normalize`]: roles merged, cache breakpoints placed.
//!
//! Every transformation is a pure function on message lists; the conversation itself is only
//! rewritten by a compaction.

pub mod clear;
pub mod compact;
pub mod normalize;
pub mod snip;
pub mod spill;

use ultraplan_protocol::model::{Message, ModelRequest, SystemBlock, ToolDefinition};

use crate::config::ContextSettings;
use crate::conversation::estimate_tokens;

/// The fixed head of every request: system prompt and tool definitions.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefix {
    pub system: Vec<SystemBlock>,
    pub tools: Vec<ToolDefinition>,
}

impl Prefix {
    /// Estimated tokens of the prefix.
    pub fn tokens(&self) -> usize {
        let system: usize = self.system.iter().map(|b| b.text.len()).sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len())
            .sum();
        (system + tools) / 4
    }

    /// A request carrying `messages` after this prefix.
    pub fn request(&self, messages: Vec<Message>, max_tokens: u32) -> ModelRequest {
        ModelRequest {
            model: None,
            max_tokens,
            system: self.system.clone(),
            messages,
            tools: self.tools.clone(),
            temperature: None,
        }
    }
}

/// Estimated tokens of the next request before any snipping: prefix plus the history with old
/// results cleared. Compaction is decided on this.
pub fn estimate(prefix: &Prefix, messages: &[Message], ctx: &ContextSettings) -> usize {
    prefix.tokens() + estimate_tokens(&cleared(messages, ctx))
}

/// The messages of an ordinary turn request.
pub fn turn_messages(prefix: &Prefix, messages: &[Message], ctx: &ContextSettings) -> Vec<Message> {
    finish(turn_view(prefix, messages, ctx))
}

/// The history an ordinary turn request shows, before cache breakpoints and role merging: old
/// results cleared, and the middle snipped past the threshold.
pub fn turn_view(prefix: &Prefix, messages: &[Message], ctx: &ContextSettings) -> Vec<Message> {
    let view = cleared(messages, ctx);
    if prefix.tokens() + estimate_tokens(&view) > ctx.snip_threshold_tokens {
        snip::snip_middle(&view, ctx.snip_keep_tokens)
    } else {
        view
    }
}

/// The messages of a summary request: the history cut down to `snip_keep_tokens` so that it
/// fits even when the last request was refused as too long, then the summary instruction.
pub fn summary_messages(messages: &[Message], ctx: &ContextSettings) -> Vec<Message> {
    let view = cleared(messages, ctx);
    let view = if estimate_tokens(&view) > ctx.snip_keep_tokens {
        snip::snip_middle(&view, ctx.snip_keep_tokens)
    } else {
        view
    };
    finish(compact::summary_request(view))
}

fn cleared(messages: &[Message], ctx: &ContextSettings) -> Vec<Message> {
    clear::clear_old_results(messages, ctx.keep_result_turns, ctx.clear_step_turns)
}

/// Cache breakpoints on the first message (instructions and task, stable for the session)
/// and on the last one (the growing conversation), then roles merged.
fn finish(mut view: Vec<Message>) -> Vec<Message> {
    if let Some(first) = view.first_mut() {
        normalize::mark_cache(first);
    }
    let mut merged = normalize::merge_roles(view);
    if merged.len() > 1
        && let Some(last) = merged.last_mut()
    {
        normalize::mark_cache(last);
    }
    merged
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use ultraplan_protocol::ContentBlock;

    use super::*;
    use crate::conversation::{assistant, text_of, tool_result_block, user, user_text};

    fn prefix() -> Prefix {
        Prefix {
            system: vec![SystemBlock::text("sys")],
            tools: vec![],
        }
    }

    /// A conversation of `turns` tool rounds after a prompt; round i calls `names[i % len]` with
    /// id `t<i>` and input `{"file_path": "src/f<i>.rs"}`, and gets `result_len` characters back.
    pub(super) fn tool_rounds(turns: usize, names: &[&str], result_len: usize) -> Vec<Message> {
        let mut messages = vec![user_text("prompt")];
        for i in 0..turns {
            let id = format!("t{i}");
            let name = names[i % names.len()];
            messages.push(assistant(vec![ContentBlock::tool_use(
                &id,
                name,
                json!({"file_path": format!("src/f{i}.rs")}),
            )]));
            messages.push(user(vec![tool_result_block(
                &id,
                "x".repeat(result_len),
                false,
            )]));
        }
        messages
    }

    fn marks(messages: &[Message]) -> usize {
        serde_json::to_string(messages)
            .expect("json")
            .matches("cache_control")
            .count()
    }

    #[test]
    fn turn_requests_snip_only_past_the_threshold() {
        let ctx = ContextSettings {
            keep_result_turns: 100,
            snip_threshold_tokens: 1000,
            snip_keep_tokens: 300,
            ..ContextSettings::default()
        };
        let cases = [(2, 400, 5), (20, 400, 1 + 2 * 2)];
        for (rounds, len, want) in cases {
            let out = turn_messages(&prefix(), &tool_rounds(rounds, &["Read"], len), &ctx);
            assert_eq!(out.len(), want, "{rounds} rounds");
            assert_eq!(marks(&out), 2);
        }
        let snipped = turn_messages(&prefix(), &tool_rounds(20, &["Read"], 400), &ctx);
        assert!(text_of(&snipped[0]).contains("[Earlier conversation snipped: 36 messages"));
    }

    #[test]
    fn summary_requests_end_with_the_instruction_and_fit() {
        let ctx = ContextSettings {
            snip_keep_tokens: 300,
            ..ContextSettings::default()
        };
        let out = summary_messages(&tool_rounds(20, &["Read"], 400), &ctx);
        let last = out.last().map(text_of).unwrap_or_default();
        assert!(last.ends_with(compact::SUMMARY_INSTRUCTION), "{last}");
        assert!(estimate_tokens(&out) < 700);
    }

    #[test]
    fn estimates_include_the_prefix_and_cleared_history() {
        let ctx = ContextSettings {
            keep_result_turns: 1,
            clear_step_turns: 1,
            ..ContextSettings::default()
        };
        let full = estimate_tokens(&tool_rounds(4, &["Read"], 4000));
        let estimated = estimate(&prefix(), &tool_rounds(4, &["Read"], 4000), &ctx);
        assert!(estimated < full / 2, "{estimated} vs {full}");
        assert!(estimated >= 1000);
    }
}

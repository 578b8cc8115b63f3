//! Fork mode: a `Task` call without `subagent_type` starts a child that inherits the caller's
//! request as is (the same system prompt bytes and tool array) and its history. Every
//! tool_use of the caller's last assistant message gets the same placeholder result, and the
//! child's directive is the final user text, so all children of one fork send a byte-identical
//! prefix and differ only in the directive. The last placeholder carries a cache breakpoint:
//! the shared prefix is written to the provider's prompt cache once and read by the siblings.
//!
//! Breakpoints in a fork request: system prompt, tools (both from the caller's prefix), the
//! first message (as the caller marks it, so the caller's own cache entries still match) and
//! the last placeholder — four, the most a request may carry.

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::Role;
use ultraplan_protocol::model::Message;

use crate::context::normalize::{mark_cache, merge_roles};
use crate::conversation::{tool_calls, tool_result_block, user};

/// The result every tool_use of the forking message gets in every child (identical bytes).
pub const PLACEHOLDER: &str = "Forked: this work continues in a subagent.";

/// The agent type reported for forks.
pub const FORK_TYPE: &str = "fork";

/// The messages every child of one fork starts from: the caller's `view` (its history as its
/// next request would show it, ending with the assistant message that forks), then one user
/// message answering each of that message's tool_uses with [`PLACEHOLDER`].
pub fn base(mut view: Vec<Message>) -> Vec<Message> {
    if let Some(first) = view.first_mut() {
        mark_cache(first);
    }
    let mut messages = merge_roles(view);
    let calls = messages
        .last()
        .filter(|m| m.role == Role::Assistant)
        .map(tool_calls)
        .unwrap_or_default();
    let mut placeholders = user(
        calls
            .iter()
            .map(|call| tool_result_block(&call.id, PLACEHOLDER, false))
            .collect(),
    );
    mark_cache(&mut placeholders);
    messages.push(placeholders);
    messages
}

/// A child's first messages: the shared `base`, with its directive as the final text.
pub fn child_messages(base: &[Message], directive: &str) -> Vec<Message> {
    let mut messages = base.to_vec();
    let text = ContentBlock::text(directive_text(directive));
    match messages.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(text),
        _ => messages.push(user(vec![text])),
    }
    messages
}

/// The directive as the child reads it. Everything before `directive` is the same for every
/// child.
pub fn directive_text(directive: &str) -> String {
    format!(
        "<fork-directive>\nYou are now a fork of the agent above, working on one part of the \
         task on your own. The tool results just above are placeholders: those calls are being \
         handled elsewhere. Do only what the directive below asks, with Glob, Grep and Read. Do \
         not start subagents, ask the user questions or submit a plan. Your final message goes \
         back to the main agent as your report: make it complete and self-contained.\n\n\
         Directive: {}\n</fork-directive>",
        directive.trim()
    )
}

/// A fork child's request messages, for any turn: its history with roles merged. The
/// breakpoints set in [`base`] stay where they are.
pub fn request_messages(messages: &[Message]) -> Vec<Message> {
    merge_roles(messages.to_vec())
}

#[cfg(test)]
#[path = "fork_tests.rs"]
mod tests;

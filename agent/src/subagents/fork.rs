//! Fork mode: a `Task` call without `subagent_type` starts a child that inherits the caller's
//! request as is (the same system prompt bytes and tool array) and its history; so does a call
//! naming a type that inherits the caller's context (the critic), whose directive then carries
//! the type's own prompt and tools. Every
//! tool_use of the caller's last assistant message gets the same placeholder result, and the
//! child's directive is the final user text, so all children of one fork send a byte-identical
//! prefix and differ only in the directive.
//!
//! Breakpoints in a fork request, four, the most a request may carry:
//! - the system prompt, as the caller marks it;
//! - the forking message: the caller's next request shows it too, followed by the children's
//!   reports, and reads it from the entry the first child wrote instead of writing it again;
//! - the last placeholder: the end of what every sibling shares, for siblings that start later;
//! - the request's last block: the child's own history, which its next turn reads.
//!
//! The caller's breakpoint after its last tool is left out to make room: the caller's own
//! requests wrote that entry, and every longer one the child reads contains it. A breakpoint
//! only says where to write and look up entries; it is not part of the cached bytes, so a
//! child reads the caller's entries whichever blocks carry breakpoints.

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::Role;
use ultraplan_protocol::model::Message;

use super::AgentDefinition;
use crate::context::Prefix;
use crate::context::normalize::{mark_cache, merge_roles};
use crate::conversation::{tool_calls, tool_result_block, user};

/// The result every tool_use of the forking message gets in every child (identical bytes).
pub const PLACEHOLDER: &str = "Forked: this work continues in a subagent.";

/// The agent type reported for forks.
pub const FORK_TYPE: &str = "fork";

/// A child's request prefix: the caller's system prompt and tools, byte for byte, without the
/// breakpoint after the last tool (see the module notes).
pub fn prefix(caller: &Prefix) -> Prefix {
    let mut prefix = caller.clone();
    for tool in &mut prefix.tools {
        tool.cache_control = None;
    }
    prefix
}

/// The messages every child of one fork starts from: the caller's `view` (its history as its
/// next request would show it, ending with the assistant message that forks), then one user
/// message answering each of that message's tool_uses with [`PLACEHOLDER`].
pub fn base(view: Vec<Message>) -> Vec<Message> {
    let mut messages = merge_roles(view);
    let forking = messages.last_mut().filter(|m| m.role == Role::Assistant);
    let calls = match forking {
        Some(message) => {
            mark_cache(message);
            tool_calls(message)
        }
        None => Vec::new(),
    };
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
    with_directive(base, directive_text(directive))
}

/// The first messages of a child of type `definition` that inherits the caller's context: the
/// shared `base`, then its directive with the type's prompt and `allowed` tools.
pub fn typed_child_messages(
    base: &[Message],
    definition: &AgentDefinition,
    allowed: &[String],
    directive: &str,
) -> Vec<Message> {
    with_directive(base, typed_directive_text(definition, allowed, directive))
}

fn with_directive(base: &[Message], directive_text: String) -> Vec<Message> {
    let mut messages = base.to_vec();
    let text = ContentBlock::text(directive_text);
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

/// The directive of a child of type `definition` that inherits the caller's context: what it
/// is and may do, its type's prompt, then `directive`.
pub fn typed_directive_text(
    definition: &AgentDefinition,
    allowed: &[String],
    directive: &str,
) -> String {
    format!(
        "<fork-directive>\nYou are now a `{}` subagent, started from a copy of the conversation \
         above to do one task on your own. The tool results just above are placeholders: those \
         calls are being handled elsewhere. {} Do not start subagents, ask the user \
         questions or submit a plan. Your final message goes back to the main agent as your \
         report: make it complete and self-contained.\n\n{}\n\nDirective: {}\n</fork-directive>",
        definition.name,
        tools_sentence(allowed),
        definition.system_prompt.trim(),
        directive.trim()
    )
}

/// `Use only a, b and c.`, or `Use no tools.`
fn tools_sentence(names: &[String]) -> String {
    match names {
        [] => "Use no tools.".to_owned(),
        [one] => format!("Use only {one}."),
        [init @ .., last] => format!("Use only {} and {last}.", init.join(", ")),
    }
}

/// A fork child's request messages, for any turn: its history with roles merged, the
/// breakpoints set in [`base`] where they are, and one on the last block.
pub fn request_messages(messages: &[Message]) -> Vec<Message> {
    let mut merged = merge_roles(messages.to_vec());
    if let Some(last) = merged.last_mut() {
        mark_cache(last);
    }
    merged
}

#[cfg(test)]
#[path = "fork_tests.rs"]
mod tests;

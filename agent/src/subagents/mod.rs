//! Subagents: the pure pieces behind the `Task` tool. The loop that runs them lives in the
//! `lifecycle` module, which builds on these.
//!
//! - [`definition`]: agent types, the catalog, and reports of skipped definition files;
//! - [`builtin`]: the built-in types `explore`, `plan`, `critique` and `general`;
//! - [`custom`]: custom types from the bundle's `.claude/agents/*.md` ([`front_matter`] reads
//!   their YAML subset);
//! - [`filter`]: which tools a subagent may use, in layers;
//! - [`fork`]: the requests of fork children, which share the caller's prefix byte for byte;
//! - [`notification`]: the `<task-notification>` a finished subagent returns, and the events
//!   that let the server count agents;
//! - [`task_tool`]: the `Task` tool itself;
//! - [`verifier`]: the read-only verifier the agent starts itself after an execution.

pub mod builtin;
pub mod custom;
pub mod definition;
pub mod filter;
pub mod fork;
pub mod front_matter;
pub mod notification;
pub mod task_tool;
pub mod verifier;

use ultraplan_protocol::events::CacheControl;
use ultraplan_protocol::model::{SystemBlock, ToolDefinition};

pub use definition::{AgentDefinition, Catalog, InvalidDefinition, Subagents};

use crate::context::Prefix;
use crate::workspace::Workspace;

/// The catalog of a session: the built-ins plus the bundle's valid custom definitions.
pub fn load(workspace: &Workspace) -> Subagents {
    let (custom, invalid) = custom::load(workspace);
    Subagents {
        catalog: Catalog::new(custom),
        invalid,
    }
}

/// The request prefix of a subagent of type `definition`: the caller's tool definitions
/// narrowed to `allowed`, then the system prompt in two blocks, each ending at a cache
/// breakpoint: the notes every subagent shares, then the type's own prompt.
///
/// The shared block comes first so that subagents of different types with the same tools
/// share the prompt-cache prefix up to its end: a planner started after the explorers reads
/// the tools and the notes from the entry the explorers' warm-up wrote, and writes only its
/// own prompt (when they offer the same tools). That block's breakpoint replaces one after the last tool, which would end the
/// same entry minus the notes (the tools alone are read from the caller's request, which
/// marks them). A request thus carries at most four breakpoints: the two here, and the first
/// and last message.
pub fn prefix(
    definition: &AgentDefinition,
    offered: &[ToolDefinition],
    allowed: &[String],
) -> Prefix {
    let mut shared = SystemBlock::text(builtin::SUBAGENT_NOTES);
    shared.cache_control = Some(CacheControl::ephemeral());
    let mut own = SystemBlock::text(definition.system_prompt.trim());
    own.cache_control = Some(CacheControl::ephemeral());
    let tools: Vec<ToolDefinition> = offered
        .iter()
        .filter(|t| allowed.contains(&t.name))
        .cloned()
        .map(|mut t| {
            t.cache_control = None;
            t
        })
        .collect();
    Prefix {
        system: vec![shared, own],
        tools,
    }
}

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
//! - [`task_tool`]: the `Task` tool itself.

pub mod builtin;
pub mod custom;
pub mod definition;
pub mod filter;
pub mod fork;
pub mod front_matter;
pub mod notification;
pub mod task_tool;

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

/// The request prefix of a subagent of type `definition`: its own system prompt, and the
/// caller's tool definitions narrowed to `allowed`, with breakpoints on the last of each.
pub fn prefix(
    definition: &AgentDefinition,
    offered: &[ToolDefinition],
    allowed: &[String],
) -> Prefix {
    let mut system = SystemBlock::text(format!(
        "{}\n\n{}",
        definition.system_prompt.trim(),
        builtin::SUBAGENT_NOTES
    ));
    system.cache_control = Some(CacheControl::ephemeral());
    let mut tools: Vec<ToolDefinition> = offered
        .iter()
        .filter(|t| allowed.contains(&t.name))
        .cloned()
        .map(|mut t| {
            t.cache_control = None;
            t
        })
        .collect();
    if let Some(last) = tools.last_mut() {
        last.cache_control = Some(CacheControl::ephemeral());
    }
    Prefix {
        system: vec![system],
        tools,
    }
}

//! Agent definitions: what a subagent type is (its system prompt, tools and limits), the
//! built-in ones, and the catalog the `Task` tool picks from.

use serde_json::json;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::events::SystemEvent;

use super::builtin;

/// The `system` event subtype reporting a definition file that was skipped.
pub const INVALID_SUBTYPE: &str = ultraplan_protocol::constants::AGENT_DEFINITION_INVALID;

/// Where a definition comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    BuiltIn,
    /// A file of the bundle, by its path relative to the repository root.
    File(String),
}

/// One subagent type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    pub name: String,
    /// When to use it (shown to the model in the `Task` tool's description).
    pub description: String,
    pub system_prompt: String,
    /// The tools it may use; `None` means every tool the layers above allow.
    pub tools: Option<Vec<String>>,
    /// Tools it may never use.
    pub disallowed_tools: Vec<String>,
    /// The model the definition asks for (`sonnet`, `haiku`, `inherit`, …). Recorded and
    /// reported; the server's gateway picks the model today.
    pub model: Option<String>,
    /// Most assistant turns it may take.
    pub max_turns: u32,
    /// Whether it starts from a copy of the caller's conversation (a fork that plays this
    /// type's part, see [`super::fork`]) rather than from a fresh context holding only its
    /// prompt.
    pub inherits_context: bool,
    pub source: Source,
}

/// A definition file that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidDefinition {
    /// Path relative to the repository root.
    pub path: String,
    pub reason: String,
}

impl InvalidDefinition {
    /// The `system` event that reports it.
    pub fn event(&self) -> EventBody {
        EventBody::System(SystemEvent {
            subtype: INVALID_SUBTYPE.to_owned(),
            message: Some(format!(
                "Skipped the agent definition {}: {}",
                self.path, self.reason
            )),
            data: json!({"path": self.path, "reason": self.reason}),
        })
    }
}

/// The subagent types of a session: the built-ins, then the bundle's own (a custom
/// definition with a built-in's name replaces it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    agents: Vec<AgentDefinition>,
}

/// Other names models use for `general`.
const GENERAL_ALIASES: [&str; 2] = ["general-purpose", "general_purpose"];

impl Catalog {
    /// The built-ins plus `custom`.
    pub fn new(custom: Vec<AgentDefinition>) -> Self {
        let mut agents = builtin::definitions();
        for definition in custom {
            match agents.iter_mut().find(|a| a.name == definition.name) {
                Some(existing) => {
                    tracing::info!(name = %definition.name, "a custom agent replaces a built-in");
                    *existing = definition;
                }
                None => agents.push(definition),
            }
        }
        Catalog { agents }
    }

    /// Every type, built-ins first.
    pub fn agents(&self) -> &[AgentDefinition] {
        &self.agents
    }

    /// The type called `name` (case-insensitive; `general-purpose` means `general`).
    pub fn find(&self, name: &str) -> Option<&AgentDefinition> {
        let name = name.trim();
        let wanted = if GENERAL_ALIASES.iter().any(|a| a.eq_ignore_ascii_case(name)) {
            builtin::GENERAL
        } else {
            name
        };
        self.agents
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(wanted))
    }

    /// The names, comma-separated (for error messages).
    pub fn names(&self) -> String {
        self.agents
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The subagent setup of a session: its catalog and the definition files it skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subagents {
    pub catalog: Catalog,
    pub invalid: Vec<InvalidDefinition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(name: &str) -> AgentDefinition {
        AgentDefinition {
            name: name.into(),
            description: "d".into(),
            system_prompt: "s".into(),
            tools: None,
            disallowed_tools: vec![],
            model: None,
            max_turns: 3,
            inherits_context: false,
            source: Source::File(format!(".claude/agents/{name}.md")),
        }
    }

    #[test]
    fn customs_follow_builtins_and_may_replace_them() {
        let catalog = Catalog::new(vec![custom("auditor"), custom("plan")]);
        let names: Vec<&str> = catalog.agents().iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["explore", "plan", "critique", "general", "auditor"]);
        assert_eq!(
            catalog.find("PLAN").map(|a| &a.source),
            Some(&Source::File(".claude/agents/plan.md".into()))
        );
        assert_eq!(
            catalog.find("general-purpose").map(|a| a.name.as_str()),
            Some("general")
        );
        assert!(catalog.find("nope").is_none());
        assert_eq!(catalog.names(), "explore, plan, critique, general, auditor");
    }

    #[test]
    fn invalid_files_become_system_events() {
        let invalid = InvalidDefinition {
            path: ".claude/agents/x.md".into(),
            reason: "`name` is missing".into(),
        };
        let EventBody::System(event) = invalid.event() else {
            panic!("system event")
        };
        assert_eq!(event.subtype, INVALID_SUBTYPE);
        let message = event.message.unwrap_or_default();
        assert!(message.contains(".claude/agents/x.md") && message.contains("`name` is missing"));
        assert_eq!(event.data["path"], ".claude/agents/x.md");
    }
}

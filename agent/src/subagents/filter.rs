//! Which tools a subagent may use, decided in layers, each only narrowing the one before:
//!
//! 1. the subagent deny list (`Task`, `ExitPlanMode`, `AskUserQuestion`): the recursion guard,
//!    and only the main agent talks to the user;
//! 2. plan mode: read-only tools only;
//! 3. the definition: its `tools` allow list (when it has one), then its `disallowedTools`.
//!
//! A call to a tool outside the result is answered with an error, never run.

use super::definition::AgentDefinition;
use super::task_tool;
use crate::plan_tools::{ask, exit_plan, todo};
use crate::tools::{glob, grep, read};

/// Tools no subagent may use, whatever its definition says.
pub const SUBAGENT_DENIED: [&str; 4] = [
    task_tool::NAME,
    task_tool::ALIAS,
    exit_plan::NAME,
    ask::NAME,
];

/// The tools plan mode allows.
pub const PLAN_MODE_TOOLS: [&str; 4] = [glob::NAME, grep::NAME, read::NAME, todo::NAME];

/// The layer that removed a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Subagents never get it.
    Subagent,
    /// Not read-only.
    PlanMode,
    /// The definition leaves it out.
    Definition,
}

impl Denied {
    fn reason(self) -> &'static str {
        match self {
            Denied::Subagent => {
                "subagents cannot start subagents, ask the user questions or submit plans"
            }
            Denied::PlanMode => "plan mode allows only read-only tools",
            Denied::Definition => "this agent's definition does not allow it",
        }
    }
}

/// Whether a subagent of `definition` (`None`: a fork, which has no definition) may use
/// `name`.
pub fn check(
    name: &str,
    definition: Option<&AgentDefinition>,
    plan_mode: bool,
) -> Result<(), Denied> {
    if contains(&SUBAGENT_DENIED, name) {
        return Err(Denied::Subagent);
    }
    if plan_mode && !contains(&PLAN_MODE_TOOLS, name) {
        return Err(Denied::PlanMode);
    }
    let Some(def) = definition else {
        return Ok(());
    };
    let allowed = def.tools.as_ref().is_none_or(|list| contains(list, name));
    if !allowed || contains(&def.disallowed_tools, name) {
        return Err(Denied::Definition);
    }
    Ok(())
}

/// The tools of `offered` (kept in their order) that pass every layer.
pub fn allowed(
    offered: &[String],
    definition: Option<&AgentDefinition>,
    plan_mode: bool,
) -> Vec<String> {
    offered
        .iter()
        .filter(|name| check(name, definition, plan_mode).is_ok())
        .cloned()
        .collect()
}

/// The error result for a call to `name`, which is not in `allowed`.
pub fn refusal(
    name: &str,
    definition: Option<&AgentDefinition>,
    plan_mode: bool,
    allowed: &[String],
) -> String {
    let reason = match check(name, definition, plan_mode) {
        Err(denied) => denied.reason(),
        Ok(()) => "no tool of this name is offered",
    };
    let available = if allowed.is_empty() {
        "none".to_owned()
    } else {
        allowed.join(", ")
    };
    format!("tool {name} is not available to this agent: {reason}. Available tools: {available}.")
}

/// Whether `list` names `tool` (case-insensitive; `Tool(pattern)` entries name `Tool`).
fn contains<S: AsRef<str>>(list: &[S], tool: &str) -> bool {
    list.iter().any(|entry| {
        let entry = entry.as_ref();
        let base = entry.split_once('(').map_or(entry, |(b, _)| b).trim();
        base.eq_ignore_ascii_case(tool)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subagents::definition::Source;

    fn offered() -> Vec<String> {
        [
            "Glob",
            "Grep",
            "Read",
            "TodoWrite",
            "AskUserQuestion",
            "ExitPlanMode",
            "Task",
        ]
        .map(String::from)
        .to_vec()
    }

    fn def(tools: Option<&[&str]>, deny: &[&str]) -> AgentDefinition {
        AgentDefinition {
            name: "x".into(),
            description: "d".into(),
            system_prompt: "s".into(),
            tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
            disallowed_tools: deny.iter().map(|s| (*s).to_owned()).collect(),
            model: None,
            max_turns: 5,
            inherits_context: false,
            source: Source::BuiltIn,
        }
    }

    #[test]
    fn each_layer_only_narrows() {
        let everything = def(None, &[]);
        let cases: [(Option<AgentDefinition>, bool, &[&str]); 6] = [
            (None, true, &["Glob", "Grep", "Read", "TodoWrite"]),
            (
                Some(everything.clone()),
                true,
                &["Glob", "Grep", "Read", "TodoWrite"],
            ),
            (
                Some(def(Some(&["Grep", "read", "Bash(git:*)"]), &[])),
                true,
                &["Grep", "Read"],
            ),
            (
                Some(def(None, &["TodoWrite", "Glob"])),
                true,
                &["Grep", "Read"],
            ),
            (
                Some(def(Some(&["Task", "ExitPlanMode", "Grep"]), &[])),
                false,
                &["Grep"],
            ),
            (
                Some(everything),
                false,
                &["Glob", "Grep", "Read", "TodoWrite"],
            ),
        ];
        for (definition, plan_mode, want) in cases {
            let got = allowed(&offered(), definition.as_ref(), plan_mode);
            assert_eq!(got, want, "{definition:?}");
        }
    }

    #[test]
    fn refusals_name_the_tool_and_the_layer() {
        let auditor = def(Some(&["Grep", "Read"]), &[]);
        let allowed = allowed(&offered(), Some(&auditor), true);
        let cases = [
            ("Task", "subagents cannot start subagents"),
            ("ExitPlanMode", "subagents cannot"),
            ("Bash", "plan mode allows only read-only tools"),
            ("Glob", "this agent's definition does not allow it"),
        ];
        for (name, reason) in cases {
            let text = refusal(name, Some(&auditor), true, &allowed);
            assert!(
                text.starts_with(&format!("tool {name} is not available to this agent")),
                "{text}"
            );
            assert!(text.contains(reason) && text.ends_with("Available tools: Grep, Read."));
        }
        let none = refusal("Read", None, true, &[]);
        assert!(none.contains("no tool of this name") && none.ends_with("tools: none."));
    }
}

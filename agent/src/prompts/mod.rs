//! The prompts: system prompt, tool list and first user message, by mode (plan or execution)
//! and, in plan mode, by prompt variant.

mod execution_text;
pub mod project_docs;
mod text;

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::CacheControl;
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::model::{Message, SystemBlock, ToolDefinition};
use ultraplan_protocol::session::PromptVariant;

pub use project_docs::ProjectDoc;
pub use text::CONTINUE_NUDGE;

use crate::context::Prefix;
use crate::conversation::user;

/// What a prompt variant changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VariantSpec {
    /// Extra instructions after the common ones.
    pub extra: Option<&'static str>,
    /// Whether the variant offers subagents (the `Task` tool of the `subagents` module).
    pub subagents: bool,
}

/// The spec of a variant.
pub fn variant_spec(variant: PromptVariant) -> VariantSpec {
    match variant {
        PromptVariant::SimplePlan => VariantSpec {
            extra: None,
            subagents: false,
        },
        PromptVariant::VisualPlan => VariantSpec {
            extra: Some(text::VISUAL_PLAN),
            subagents: false,
        },
        PromptVariant::ThreeSubagentsWithCritique => VariantSpec {
            extra: Some(text::THREE_SUBAGENTS_WITH_CRITIQUE),
            subagents: true,
        },
    }
}

/// The request prefix: system prompt and the tools (`base_tools` first, then the plan tools,
/// then `extra_tools` such as `Task`), with cache breakpoints on the last block of each.
pub fn prefix(base_tools: Vec<ToolDefinition>, extra_tools: Vec<ToolDefinition>) -> Prefix {
    let mut tools = base_tools;
    tools.extend(crate::plan_tools::definitions());
    tools.extend(extra_tools);
    marked(text::SYSTEM, tools)
}

/// The execution-mode request prefix: the execution system prompt, `base_tools` (the
/// workspace tools, writable ones included), then TodoWrite. No ExitPlanMode,
/// AskUserQuestion or Task: the plan is approved and nobody is watching.
pub fn execution_prefix(base_tools: Vec<ToolDefinition>) -> Prefix {
    let mut tools = base_tools;
    tools.push(crate::plan_tools::todo::execution_definition());
    marked(execution_text::SYSTEM, tools)
}

/// A prefix with cache breakpoints on the system prompt and the last tool.
fn marked(system: &str, mut tools: Vec<ToolDefinition>) -> Prefix {
    let mut system = vec![SystemBlock::text(system)];
    if let Some(last) = system.last_mut() {
        last.cache_control = Some(CacheControl::ephemeral());
    }
    if let Some(last) = tools.last_mut() {
        last.cache_control = Some(CacheControl::ephemeral());
    }
    Prefix { system, tools }
}

/// Everything the first user message is built from.
#[derive(Debug, Clone, Copy)]
pub struct FirstMessage<'a> {
    pub mode: AgentMode,
    pub variant: PromptVariant,
    pub prompt: &'a str,
    pub draft_plan: Option<&'a str>,
    pub project_docs: &'a [ProjectDoc],
    /// Where a prepared environment is bound read-only, if one is.
    pub environment: Option<&'a std::path::Path>,
}

/// What the agent is told about a prepared environment (docs/ARCHITECTURE.md §6.5).
fn environment_note(mode: AgentMode, dir: &std::path::Path) -> String {
    let dir = dir.display();
    let head = format!(
        "A prepared environment (what the repository's environment setup installed) is \
         mounted read-only at {dir}."
    );
    match mode {
        AgentMode::Plan => format!(
            "{head} Read, Grep and Glob accept absolute paths under {dir}, for example the \
             sources of installed dependencies under {dir}/venv/lib."
        ),
        _ => format!(
            "{head} Bash runs with {dir}/venv/bin and {dir}/bin first on PATH and its Python \
             virtual environment active: use it to build and run the project's tests."
        ),
    }
}

/// The first user message: instructions, project instructions, the draft plan, then the
/// user's own prompt, each its own text block. In execution mode the instructions say the plan
/// was approved, and the plan-mode extras (variant instructions, draft plan) are left out.
pub fn first_message(input: FirstMessage<'_>) -> Message {
    if input.mode == AgentMode::Execute {
        let mut blocks = vec![execution_text::INSTRUCTIONS.to_owned()];
        blocks.extend(project_docs::render_with(
            project_docs::EXECUTION_INTRO,
            input.project_docs,
            project_docs::MAX_PROJECT_DOC_BYTES,
        ));
        blocks.extend(input.environment.map(|d| environment_note(input.mode, d)));
        blocks.push(input.prompt.to_owned());
        return user(blocks.into_iter().map(ContentBlock::text).collect());
    }
    let mut blocks = vec![text::instructions()];
    blocks.extend(variant_spec(input.variant).extra.map(str::to_owned));
    blocks.extend(project_docs::render(
        input.project_docs,
        project_docs::MAX_PROJECT_DOC_BYTES,
    ));
    blocks.extend(
        input
            .draft_plan
            .filter(|d| !d.trim().is_empty())
            .map(text::draft_plan),
    );
    blocks.extend(input.environment.map(|d| environment_note(input.mode, d)));
    blocks.push(input.prompt.to_owned());
    user(blocks.into_iter().map(ContentBlock::text).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::text_of;

    #[test]
    fn first_message_orders_blocks() {
        let docs = [ProjectDoc {
            path: "CLAUDE.md".into(),
            text: "use tabs".into(),
            size: 8,
        }];
        let cases = [
            (PromptVariant::SimplePlan, None, &docs[..0], 2),
            (PromptVariant::VisualPlan, None, &docs[..0], 3),
            (PromptVariant::SimplePlan, Some("1. x"), &docs[..], 4),
            (
                PromptVariant::ThreeSubagentsWithCritique,
                Some(" "),
                &docs[..],
                4,
            ),
        ];
        for (variant, draft, docs, blocks) in cases {
            let message = first_message(FirstMessage {
                mode: AgentMode::Plan,
                variant,
                prompt: "fix login",
                draft_plan: draft,
                project_docs: docs,
                environment: None,
            });
            assert_eq!(message.content.len(), blocks, "{variant:?}");
            let all = text_of(&message);
            assert!(all.starts_with("<system-reminder>"));
            assert!(all.ends_with("fix login"));
            assert!(!all.to_lowercase().contains("ultraplan"));
            if draft == Some("1. x") {
                assert!(all.find("<draft-plan>") < all.find("fix login"));
            }
        }
    }

    #[test]
    fn execution_first_message_keeps_project_docs_and_drops_plan_extras() {
        let docs = [ProjectDoc {
            path: "CLAUDE.md".into(),
            text: "use tabs".into(),
            size: 8,
        }];
        let message = first_message(FirstMessage {
            mode: AgentMode::Execute,
            variant: PromptVariant::ThreeSubagentsWithCritique,
            prompt: "fix login",
            draft_plan: Some("1. x"),
            project_docs: &docs,
            environment: None,
        });
        assert_eq!(message.content.len(), 3);
        let all = text_of(&message);
        assert!(all.starts_with(execution_text::INSTRUCTIONS), "{all}");
        assert!(all.contains("## CLAUDE.md\n\nuse tabs"), "{all}");
        assert!(all.contains(project_docs::EXECUTION_INTRO), "{all}");
        assert!(all.ends_with("fix login"));
        assert!(!all.contains("<draft-plan>") && !all.contains("subagents"));
        assert!(!all.to_lowercase().contains("ultraplan"));
    }

    #[test]
    fn a_bound_environment_is_named_before_the_prompt_in_both_modes() {
        let env = std::path::Path::new("/env");
        for (mode, says) in [
            (
                AgentMode::Plan,
                "Read, Grep and Glob accept absolute paths under /env",
            ),
            (
                AgentMode::Execute,
                "Bash runs with /env/venv/bin and /env/bin first on PATH",
            ),
        ] {
            let message = first_message(FirstMessage {
                mode,
                variant: PromptVariant::default(),
                prompt: "fix login",
                draft_plan: None,
                project_docs: &[],
                environment: Some(env),
            });
            let blocks: Vec<String> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text, .. } => Some(text.clone()),
                    _ => None,
                })
                .collect();
            let note = &blocks[blocks.len() - 2];
            assert!(
                note.contains("mounted read-only at /env"),
                "{mode:?}: {note}"
            );
            assert!(note.contains(says), "{mode:?}: {note}");
            assert_eq!(blocks.last().map(String::as_str), Some("fix login"));
            assert!(!text_of(&message).to_lowercase().contains("ultraplan"));
        }
    }

    #[test]
    fn execution_prefix_offers_todo_after_the_workspace_tools() {
        let base = vec![crate::tools::bash::definition()];
        let p = execution_prefix(base);
        let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["Bash", "TodoWrite"]);
        assert!(p.tools[1].cache_control.is_some() && p.tools[0].cache_control.is_none());
        assert_eq!(p.system[0].text, execution_text::SYSTEM);
        assert!(p.system[0].cache_control.is_some());
        let system = execution_text::SYSTEM.to_lowercase();
        assert!(!system.contains("ultraplan"));
        for needle in [
            "approved plan",
            "todowrite",
            "no network",
            "do not commit",
            "summary",
        ] {
            assert!(system.contains(needle), "{needle}");
        }
    }

    #[test]
    fn prefix_offers_all_tools_with_cache_marks() {
        let p = prefix(vec![], vec![]);
        let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["TodoWrite", "AskUserQuestion", "ExitPlanMode"]);
        assert!(p.tools[2].cache_control.is_some() && p.tools[0].cache_control.is_none());
        assert!(p.system[0].cache_control.is_some());
        assert!(!text::SYSTEM.to_lowercase().contains("ultraplan"));
    }
}

//! Builds the state machine and the tool runner from the start frame and the bundle.

use std::path::Path;

use thiserror::Error;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::frames::StartSettings;

use super::tool_exec::ToolExec;
use crate::config::AgentConfig;
use crate::conversation::rebuild;
use crate::lifecycle::{Agent, Setup};
use crate::prompts::{self, FirstMessage, project_docs};
use crate::subagents::{self, task_tool};
use crate::tools::ToolRegistry;
use crate::workspace::{Workspace, WorkspaceError};

/// Why the session cannot start.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("the transcript holds no user prompt")]
    NoPrompt,
}

/// Opens the workspace at `root`, reads the project instructions, rebuilds the conversation
/// and builds the prompts.
pub fn setup(
    root: &Path,
    settings: StartSettings,
    transcript: &[EventBody],
    config: AgentConfig,
) -> Result<(Agent, ToolExec), SetupError> {
    let workspace = Workspace::new(root)?;
    let docs = project_docs::load(&workspace);
    let subagents = prompts::variant_spec(settings.prompt_variant)
        .subagents
        .then(|| subagents::load(&workspace));
    let rebuilt = rebuild(transcript);
    let prompt = rebuilt.prompt.clone().ok_or(SetupError::NoPrompt)?;
    let first_message = prompts::first_message(FirstMessage {
        variant: settings.prompt_variant,
        prompt: &prompt,
        draft_plan: settings.draft_plan.as_deref(),
        project_docs: &docs,
    });
    let exec = ToolExec::new(ToolRegistry::new(workspace), &config);
    let base_tools = exec.definitions();
    let runnable = base_tools.iter().map(|t| t.name.clone()).collect();
    let extra_tools = subagents
        .iter()
        .map(|s| task_tool::definition(&s.catalog))
        .collect();
    let agent = Agent::new(Setup {
        settings,
        config,
        prefix: prompts::prefix(base_tools, extra_tools),
        first_message,
        rebuilt,
        runnable,
        subagents,
    });
    Ok((agent, exec))
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::frames::AgentMode;
    use ultraplan_protocol::session::PromptVariant;

    use super::*;
    use crate::lifecycle::{Effect, Input};
    use crate::test_support::tree;

    /// The tool names of the first request, and the subtypes of the events before it.
    fn first_request(variant: PromptVariant) -> (Vec<String>, Vec<String>) {
        let repo = tree(&[
            ("src/a.rs", b"fn a() {}\n"),
            (
                ".claude/agents/auditor.md",
                b"---\nname: auditor\ndescription: Audits.\ntools: Grep\n---\nAudit.\n",
            ),
            (".claude/agents/bad.md", b"no front matter"),
        ]);
        let settings = StartSettings {
            session_id: "s".into(),
            mode: AgentMode::Plan,
            prompt_variant: variant,
            model: "anthropic:test".into(),
            max_turns: 5,
            draft_plan: None,
        };
        let transcript = [EventBody::user_text("plan it")];
        let (mut agent, _) =
            setup(repo.path(), settings, &transcript, AgentConfig::default()).expect("setup");
        let mut tools = Vec::new();
        let mut systems = Vec::new();
        for effect in agent.handle(Input::Begin) {
            match effect {
                Effect::Request { request, .. } => {
                    assert_eq!(request.messages.len(), 1);
                    tools = request.tools.into_iter().map(|t| t.name).collect();
                }
                Effect::Emit(EventBody::System(s)) => systems.push(s.subtype),
                _ => {}
            }
        }
        (tools, systems)
    }

    #[test]
    fn only_the_subagent_variant_offers_task_and_reads_definitions() {
        for variant in [PromptVariant::SimplePlan, PromptVariant::VisualPlan] {
            let (tools, systems) = first_request(variant);
            assert!(!tools.iter().any(|t| t == "Task"), "{variant:?}: {tools:?}");
            assert!(systems.is_empty(), "{variant:?}");
        }
        let (tools, systems) = first_request(PromptVariant::ThreeSubagentsWithCritique);
        assert_eq!(tools.last().map(String::as_str), Some("Task"));
        assert_eq!(systems, ["agent_definition_invalid"]);
    }
}

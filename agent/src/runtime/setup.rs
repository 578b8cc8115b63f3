//! Builds the state machine and the tool runner from the start frame and the bundle.

use std::path::Path;

use thiserror::Error;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::frames::{AgentMode, StartSettings};

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
/// and builds the prompts. Execution mode gets the writable tools and its own prompts, and
/// never subagents.
pub fn setup(
    root: &Path,
    settings: StartSettings,
    transcript: &[EventBody],
    config: AgentConfig,
) -> Result<(Agent, ToolExec), SetupError> {
    let mut workspace = Workspace::new(root)?;
    // The sandbox sets this where a prepared environment is bound read-only.
    if let Some(env) = std::env::var_os(ultraplan_protocol::environment::ENV_VAR) {
        workspace = workspace.with_read_only_root(Path::new(&env));
    }
    let docs = project_docs::load(&workspace);
    let executing = settings.mode == AgentMode::Execute;
    if executing {
        relay_egress();
    }
    let subagents = (!executing && prompts::variant_spec(settings.prompt_variant).subagents)
        .then(|| subagents::load(&workspace));
    let rebuilt = rebuild(transcript);
    let prompt = rebuilt.prompt.clone().ok_or(SetupError::NoPrompt)?;
    let first_message = prompts::first_message(FirstMessage {
        mode: settings.mode,
        variant: settings.prompt_variant,
        prompt: &prompt,
        draft_plan: settings.draft_plan.as_deref(),
        project_docs: &docs,
        environment: workspace.read_only_root(),
    });
    let registry = if executing {
        ToolRegistry::writable(workspace)
    } else {
        ToolRegistry::new(workspace)
    };
    let exec = ToolExec::new(registry, &config);
    let base_tools = exec.definitions();
    let runnable = base_tools.iter().map(|t| t.name.clone()).collect();
    let prefix = if executing {
        prompts::execution_prefix(base_tools)
    } else {
        let extra_tools = subagents
            .iter()
            .map(|s| task_tool::definition(&s.catalog))
            .collect();
        prompts::prefix(base_tools, extra_tools)
    };
    let agent = Agent::new(Setup {
        settings,
        config,
        prefix,
        first_message,
        rebuilt,
        runnable,
        subagents,
    });
    Ok((agent, exec))
}

/// An executing agent whose environment lets it reach the network finds the runner's egress
/// socket bound into its sandbox: relay a loopback port to it and give Bash's commands the
/// proxy (docs/ARCHITECTURE.md §6.5). Without the socket there is no network at all.
fn relay_egress() {
    use ultraplan_protocol::environment::{EGRESS_RELAY_PORT, EGRESS_SOCKET_MOUNT};
    let socket = Path::new(EGRESS_SOCKET_MOUNT);
    if !socket.exists() {
        return;
    }
    match crate::setup::relay::start(EGRESS_RELAY_PORT, socket.to_path_buf()) {
        Ok(addr) => {
            let _ = crate::tools::bash::process::PROXY.set(format!("http://{addr}"));
        }
        Err(error) => {
            tracing::warn!(%error, "cannot relay the egress socket; commands get no network")
        }
    }
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
        let transcript = [EventBody::user_text("plan it")];
        let (tools, systems, _) = first_request_in(AgentMode::Plan, variant, &transcript);
        (tools, systems)
    }

    /// The tool names and system prompt of the first request in `mode`, and the subtypes of
    /// the events before it.
    fn first_request_in(
        mode: AgentMode,
        variant: PromptVariant,
        transcript: &[EventBody],
    ) -> (Vec<String>, Vec<String>, String) {
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
            mode,
            prompt_variant: variant,
            model: "anthropic:test".into(),
            max_turns: 5,
            draft_plan: None,
        };
        let (mut agent, _) =
            setup(repo.path(), settings, transcript, AgentConfig::default()).expect("setup");
        let mut tools = Vec::new();
        let mut systems = Vec::new();
        let mut system_prompt = String::new();
        let effects = agent.handle(Input::Begin);
        assert!(
            matches!(effects.last(), Some(Effect::Request { .. })),
            "{effects:?}"
        );
        for effect in effects {
            match effect {
                Effect::Request { request, .. } => {
                    tools = request.tools.into_iter().map(|t| t.name).collect();
                    system_prompt = request.system.into_iter().map(|b| b.text).collect();
                }
                Effect::Emit(EventBody::System(s)) => systems.push(s.subtype),
                _ => {}
            }
        }
        (tools, systems, system_prompt)
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

    #[test]
    fn execution_mode_offers_the_writable_tools_and_never_task() {
        use serde_json::json;
        use ultraplan_protocol::ContentBlock;

        let transcript = [
            EventBody::user_text("plan it"),
            EventBody::assistant(vec![ContentBlock::tool_use(
                "p1",
                "ExitPlanMode",
                json!({"plan": "1. Do it."}),
            )]),
            EventBody::tool_result("p1", "## Approved Plan:\n1. Do it.", false),
        ];
        for variant in [
            PromptVariant::SimplePlan,
            PromptVariant::ThreeSubagentsWithCritique,
        ] {
            let (tools, systems, system) =
                first_request_in(AgentMode::Execute, variant, &transcript);
            let want = ["Glob", "Grep", "Read", "Write", "Edit", "Bash", "TodoWrite"];
            assert_eq!(tools, want, "{variant:?}");
            assert!(systems.is_empty(), "{variant:?}: {systems:?}");
            assert!(
                system.contains("implementing it in a writable copy"),
                "{system}"
            );
        }
    }
}

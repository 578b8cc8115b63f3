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
    let agent = Agent::new(Setup {
        settings,
        config,
        prefix: prompts::prefix(base_tools),
        first_message,
        rebuilt,
        runnable,
    });
    Ok((agent, exec))
}

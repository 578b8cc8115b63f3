//! Helpers for the state-machine tests: a fixture agent, canned replies, effect readers.

use serde_json::Value;
use ultraplan_protocol::events::ResultEvent;
use ultraplan_protocol::frames::{AgentMode, StartSettings};
use ultraplan_protocol::model::{
    Message, ModelError, ModelRequest, ModelResponse, StopReason, Usage,
};
use ultraplan_protocol::session::PromptVariant;
use ultraplan_protocol::{ContentBlock, EventBody};

use super::*;
use crate::conversation::{rebuild, user_text};
use crate::subagents::definition::{InvalidDefinition, Source};
use crate::subagents::{AgentDefinition, Catalog, task_tool};
use crate::tools::{glob, grep, read};

pub(crate) fn settings(max_turns: u32) -> StartSettings {
    StartSettings {
        session_id: "sess_test".into(),
        mode: AgentMode::Plan,
        prompt_variant: PromptVariant::SimplePlan,
        model: "anthropic:test".into(),
        max_turns,
        draft_plan: None,
    }
}

pub(crate) fn agent_from(transcript: &[EventBody], config: AgentConfig, max_turns: u32) -> Agent {
    let rebuilt = rebuild(transcript);
    Agent::new(Setup {
        settings: settings(max_turns),
        config,
        prefix: crate::prompts::prefix(vec![], vec![]),
        first_message: user_text(rebuilt.prompt.clone().unwrap_or_default()),
        rebuilt,
        runnable: vec!["Glob".into(), "Grep".into(), "Read".into()],
        subagents: None,
    })
}

/// A new session, begun: returns the agent and the id of its first request.
pub(crate) fn started() -> (Agent, String) {
    let mut agent = agent_from(
        &[EventBody::user_text("plan it")],
        AgentConfig::default(),
        50,
    );
    let effects = agent.handle(Input::Begin);
    let id = request_id(&effects);
    (agent, id)
}

pub(crate) fn reply(
    blocks: Vec<ContentBlock>,
    stop: StopReason,
) -> Result<ModelResponse, ModelError> {
    Ok(ModelResponse {
        id: "msg".into(),
        model: "test-model".into(),
        content: blocks,
        stop_reason: Some(stop),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
    })
}

/// A logged assistant reply of one text block that stopped for `stop`.
pub(crate) fn said(text: &str, stop: StopReason) -> EventBody {
    let mut event = EventBody::assistant(vec![ContentBlock::text(text)]);
    if let EventBody::Assistant(a) = &mut event {
        a.message.stop_reason = Some(crate::conversation::stop_reason_name(stop));
    }
    event
}

pub(crate) fn tool(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::tool_use(id, name, input)
}

pub(crate) fn model(
    agent: &mut Agent,
    id: &str,
    result: Result<ModelResponse, ModelError>,
) -> Vec<Effect> {
    agent.handle(Input::Model {
        request_id: id.to_owned(),
        result,
    })
}

pub(crate) fn request_id(effects: &[Effect]) -> String {
    requests(effects)
        .first()
        .map(|(id, _)| id.clone())
        .unwrap_or_default()
}

pub(crate) fn requests(effects: &[Effect]) -> Vec<(String, ModelRequest)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Request {
                request_id,
                request,
            } => Some((request_id.clone(), request.clone())),
            _ => None,
        })
        .collect()
}

pub(crate) fn emitted(effects: &[Effect]) -> Vec<EventBody> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Emit(event) => Some(event.clone()),
            _ => None,
        })
        .collect()
}

/// A compact label per effect: `assistant`, `user`, `result:<subtype>`, `system`, `request`,
/// `tools:<names>` (`copy-tools:<names>` in the verifier's copy), `copy`, `remove-copy`,
/// `check`, `exit`.
pub(crate) fn labels(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .map(|e| match e {
            Effect::Emit(EventBody::Assistant(_)) => "assistant".to_owned(),
            Effect::Emit(EventBody::User(_)) => "user".to_owned(),
            Effect::Emit(EventBody::Result(r)) => format!("result:{}", r.subtype),
            Effect::Emit(_) => "system".to_owned(),
            Effect::Request { .. } => "request".to_owned(),
            Effect::RunTools {
                calls,
                root: super::ToolRoot::Copy,
                ..
            } => format!(
                "copy-tools:{}",
                calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Effect::RunTools { calls, .. } => format!(
                "tools:{}",
                calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Effect::Exit { code } => format!("exit:{code}"),
            Effect::CopyWorkspace => "copy".to_owned(),
            Effect::CheckWorkspace => "check".to_owned(),
            Effect::RemoveCopy => "remove-copy".to_owned(),
        })
        .collect()
}

pub(crate) fn result_text(effects: &[Effect]) -> Option<String> {
    emitted(effects).into_iter().find_map(|e| match e {
        EventBody::Result(ResultEvent { result, .. }) => result,
        _ => None,
    })
}

pub(crate) fn last_message(request: &ModelRequest) -> &Message {
    request.messages.last().expect("a message")
}

pub(crate) fn auditor(max_turns: u32) -> AgentDefinition {
    AgentDefinition {
        name: "auditor".into(),
        description: "Security review.".into(),
        system_prompt: "You audit code.".into(),
        tools: Some(vec!["Grep".into(), "Read".into()]),
        disallowed_tools: vec![],
        model: None,
        max_turns,
        inherits_context: false,
        source: Source::File(".claude/agents/auditor.md".into()),
    }
}

/// An agent offering `Task`, with `custom` agent types and one skipped definition file.
pub(crate) fn team_agent(max_subagents: usize, custom: Vec<AgentDefinition>) -> Agent {
    team_agent_from(&[EventBody::user_text("plan it")], max_subagents, custom)
}

pub(crate) fn team_agent_from(
    transcript: &[EventBody],
    max_subagents: usize,
    custom: Vec<AgentDefinition>,
) -> Agent {
    let config = AgentConfig {
        max_subagents,
        ..AgentConfig::default()
    };
    let catalog = Catalog::new(custom);
    let base = vec![glob::definition(), grep::definition(), read::definition()];
    let mut settings = settings(50);
    settings.prompt_variant = PromptVariant::ThreeSubagentsWithCritique;
    Agent::new(Setup {
        settings,
        config,
        prefix: crate::prompts::prefix(base, vec![task_tool::definition(&catalog)]),
        first_message: user_text("plan it"),
        rebuilt: rebuild(transcript),
        runnable: vec!["Glob".into(), "Grep".into(), "Read".into()],
        subagents: Some(Subagents {
            catalog,
            invalid: vec![InvalidDefinition {
                path: ".claude/agents/bad.md".into(),
                reason: "`name` is missing".into(),
            }],
        }),
    })
}

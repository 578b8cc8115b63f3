//! One subagent's loop: its own messages, model requests and tool calls, until its final
//! answer. The main state machine owns the children and routes their replies here by
//! request and batch id. Every event a child emits carries its Task tool_use id as
//! `parent_tool_use_id`; a child never talks to the user and never ends the session.

use ultraplan_protocol::model::{
    Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, StopReason, Usage,
};

use super::{Effect, Ids, ToolRoot};
use crate::config::AgentConfig;
use crate::context::{self, Prefix};
use crate::conversation::{
    ToolCall, estimate_tokens, for_task, reply, text_of, tool_calls, user, user_event, user_text,
};
use crate::plan_tools::todo::{self, TodoState};
use crate::prompts::CONTINUE_NUDGE;
use crate::subagents::notification::{TaskReport, TaskStatus, lifecycle_event};
use crate::subagents::{AgentDefinition, filter, fork, task_tool};
use crate::tools::{ToolOutput, truncate_chars};

/// Everything a child starts from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ChildSpec {
    /// The Task tool_use id: the child's id and its events' `parent_tool_use_id`.
    pub task_id: String,
    pub description: String,
    /// The definition's name, or `fork`.
    pub agent_type: String,
    /// `None` for a fork.
    pub definition: Option<AgentDefinition>,
    pub prefix: Prefix,
    /// Its first messages: the prompt, or for a fork the shared history and its directive.
    pub messages: Vec<Message>,
    /// The prompt (or directive) as given in the Task call.
    pub prompt: String,
    /// The tools it may call.
    pub allowed: Vec<String>,
    pub plan_mode: bool,
    pub max_turns: u32,
    /// The main batch, and the slot in it, that its report answers (unused by the verifier,
    /// which answers the harness's own Task call).
    pub batch: u64,
    pub slot: usize,
    /// Where its tools run.
    pub root: ToolRoot,
}

/// What a child needs from its owner for one step.
pub(super) struct Env<'a> {
    pub ids: &'a mut Ids,
    pub config: &'a AgentConfig,
    /// Tools the runtime runs.
    pub runnable: &'a [String],
    pub now_ms: u64,
    pub out: &'a mut Vec<Effect>,
}

/// What the child did.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Step {
    /// It sent this model request.
    Requested(String),
    /// The runtime runs this tool batch for it.
    RunsTools(u64),
    /// It is done.
    Finished(Finish),
}

/// How and with what a child ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Finish {
    pub status: TaskStatus,
    pub reason: Option<String>,
}

/// A tool round in progress: one slot per call.
#[derive(Debug, Clone, PartialEq)]
struct Round {
    calls: Vec<ToolCall>,
    results: Vec<Option<ToolOutput>>,
    running: Vec<usize>,
}

/// A subagent.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Child {
    spec: ChildSpec,
    messages: Vec<Message>,
    turns: u32,
    usage: Usage,
    tool_uses: u32,
    started_ms: u64,
    /// The last non-empty text it said.
    last_text: String,
    todos: TodoState,
    round: Option<Round>,
}

impl Child {
    pub(super) fn new(mut spec: ChildSpec) -> Self {
        let messages = std::mem::take(&mut spec.messages);
        Child {
            spec,
            messages,
            turns: 0,
            usage: Usage::default(),
            tool_uses: 0,
            started_ms: 0,
            last_text: String::new(),
            todos: TodoState::default(),
            round: None,
        }
    }

    pub(super) fn batch(&self) -> u64 {
        self.spec.batch
    }

    pub(super) fn slot(&self) -> usize {
        self.spec.slot
    }

    /// The last non-empty text it said.
    pub(super) fn last_text(&self) -> &str {
        &self.last_text
    }

    /// After its final answer, asks it once more with `text` (one more turn is allowed even
    /// at its limit).
    pub(super) fn ask_again(&mut self, text: &str, env: &mut Env<'_>) -> Step {
        let message = user_text(text);
        self.emit(user_event(&message), env);
        self.messages.push(message);
        self.spec.max_turns = self.spec.max_turns.max(self.turns.saturating_add(1));
        self.next_turn(env)
    }

    /// Its request prefix (system prompt and tools).
    pub(super) fn prefix(&self) -> &Prefix {
        &self.spec.prefix
    }

    /// Whether it started from a copy of the caller's conversation: a fork, or a type that
    /// inherits the caller's context.
    fn forked(&self) -> bool {
        self.spec
            .definition
            .as_ref()
            .is_none_or(|d| d.inherits_context)
    }

    /// Estimated tokens of the request prefix it shares with siblings of the same kind, and of
    /// the part of it that was already in the prompt cache when it was created (call it before
    /// the child starts). A fresh child shares its system prompt and tools; a forked one also
    /// shares the caller's history, which the caller's last request wrote, up to the forking
    /// message and its placeholders.
    pub(super) fn shared_tokens(&self) -> (usize, usize) {
        let prefix = self.spec.prefix.tokens();
        if !self.forked() {
            return (prefix, 0);
        }
        let forking = self.messages.len().saturating_sub(2);
        let cached = prefix + estimate_tokens(&self.messages[..forking]);
        let mut added = self.messages[forking..].to_vec();
        if let Some(last) = added.last_mut() {
            last.content.pop(); // its own directive
        }
        let added = estimate_tokens(&added);
        (cached + added, cached)
    }

    /// Its next model request, as it stands now.
    pub(super) fn request(&self, config: &AgentConfig) -> ModelRequest {
        let messages = if self.forked() {
            fork::request_messages(&self.messages)
        } else {
            context::turn_messages(&self.spec.prefix, &self.messages, &config.context)
        };
        self.spec.prefix.request(messages, config.max_output_tokens)
    }

    /// Starts the loop: reports the start, shows the prompt, asks the model.
    pub(super) fn start(&mut self, env: &mut Env<'_>) -> Step {
        self.started_ms = env.now_ms;
        let spec = &self.spec;
        env.out.push(Effect::Emit(lifecycle_event(
            true,
            &spec.task_id,
            &spec.description,
            &spec.agent_type,
        )));
        let prompt = user_event(&user_text(spec.prompt.clone()));
        env.out.push(Effect::Emit(for_task(prompt, &spec.task_id)));
        self.next_turn(env)
    }

    fn next_turn(&mut self, env: &mut Env<'_>) -> Step {
        if self.turns >= self.spec.max_turns {
            return Step::Finished(Finish {
                status: TaskStatus::Killed,
                reason: Some(format!(
                    "stopped after reaching its limit of {} turns",
                    self.spec.max_turns
                )),
            });
        }
        let request = self.request(env.config);
        let request_id = env.ids.request();
        env.out.push(Effect::Request {
            request_id: request_id.clone(),
            request,
        });
        Step::Requested(request_id)
    }

    /// The reply to its model request.
    pub(super) fn on_model(
        &mut self,
        result: Result<ModelResponse, ModelError>,
        env: &mut Env<'_>,
    ) -> Step {
        match result {
            Ok(response) => self.on_reply(response, env),
            Err(error) => Step::Finished(Finish {
                status: TaskStatus::Failed,
                reason: Some(model_failure(&error)),
            }),
        }
    }

    fn on_reply(&mut self, response: ModelResponse, env: &mut Env<'_>) -> Step {
        self.usage = self.usage + response.usage;
        self.turns = self.turns.saturating_add(1);
        let stop_reason = response.stop_reason;
        let (message, event) = reply(response);
        let calls = tool_calls(&message);
        let text = text_of(&message);
        if !text.trim().is_empty() {
            self.last_text = text;
        }
        self.emit(event, env);
        self.messages.push(message);
        if !calls.is_empty() {
            return self.start_round(calls, env);
        }
        match stop_reason {
            Some(StopReason::MaxTokens) => {
                let nudge = user_text(CONTINUE_NUDGE);
                self.emit(user_event(&nudge), env);
                self.messages.push(nudge);
                self.next_turn(env)
            }
            Some(StopReason::PauseTurn) => self.next_turn(env),
            _ => Step::Finished(Finish {
                status: TaskStatus::Completed,
                reason: None,
            }),
        }
    }

    fn start_round(&mut self, calls: Vec<ToolCall>, env: &mut Env<'_>) -> Step {
        let count = u32::try_from(calls.len()).unwrap_or(u32::MAX);
        self.tool_uses = self.tool_uses.saturating_add(count);
        let mut round = Round {
            results: vec![None; calls.len()],
            calls,
            running: Vec::new(),
        };
        for i in 0..round.calls.len() {
            round.results[i] = self.answer(&round.calls[i], env.runnable);
            if round.results[i].is_none() {
                round.running.push(i);
            }
        }
        if round.running.is_empty() {
            return self.finish_round(round, env);
        }
        let batch = env.ids.batch();
        let calls = round.running.iter().map(|&i| round.calls[i].clone());
        env.out.push(Effect::RunTools {
            batch,
            calls: calls.collect(),
            root: self.spec.root,
        });
        self.round = Some(round);
        Step::RunsTools(batch)
    }

    /// The answer to a call the child makes itself; `None` when the runtime runs it.
    fn answer(&mut self, call: &ToolCall, runnable: &[String]) -> Option<ToolOutput> {
        let spec = &self.spec;
        let name = call.name.as_str();
        if spec.definition.is_none() && task_tool::is_task(name) && task_tool::is_fork(&call.input)
        {
            return Some(ToolOutput::error(format!(
                "tool {name} is not available to this agent: a fork cannot fork again. Do this \
                 part of the work yourself with the tools you have."
            )));
        }
        if !spec.allowed.iter().any(|a| a == name) {
            let def = spec.definition.as_ref();
            let text = filter::refusal(name, def, spec.plan_mode, &spec.allowed);
            return Some(ToolOutput::error(text));
        }
        if name == todo::NAME {
            return Some(self.todos.apply(call.input.clone()));
        }
        if runnable.iter().any(|r| r == name) {
            return None;
        }
        Some(ToolOutput::error(format!(
            "tool {name} is not available to this agent: it cannot run here."
        )))
    }

    /// The outputs of the tools the runtime ran for it.
    pub(super) fn on_tools(&mut self, outputs: Vec<ToolOutput>, env: &mut Env<'_>) -> Step {
        let Some(mut round) = self.round.take() else {
            return Step::Finished(Finish {
                status: TaskStatus::Failed,
                reason: Some("tool results arrived for no tool call".into()),
            });
        };
        let mut outputs = outputs.into_iter();
        for i in std::mem::take(&mut round.running) {
            round.results[i] = Some(
                outputs
                    .next()
                    .unwrap_or_else(|| ToolOutput::error("The tool produced no result.")),
            );
        }
        self.finish_round(round, env)
    }

    fn finish_round(&mut self, round: Round, env: &mut Env<'_>) -> Step {
        let blocks = round
            .calls
            .iter()
            .zip(round.results)
            .filter_map(|(call, result)| result.map(|r| r.into_block(&call.id)))
            .collect();
        let message = user(blocks);
        self.emit(user_event(&message), env);
        self.messages.push(message);
        self.next_turn(env)
    }

    fn emit(&self, event: ultraplan_protocol::EventBody, env: &mut Env<'_>) {
        env.out
            .push(Effect::Emit(for_task(event, &self.spec.task_id)));
    }

    /// Its report at `now_ms`, the result cut at `max_chars` characters.
    pub(super) fn report(&self, finish: Finish, now_ms: u64, max_chars: usize) -> TaskReport {
        let mut result = match (&finish.reason, self.last_text.trim()) {
            (_, text) if !text.is_empty() => text.to_owned(),
            (Some(reason), _) => format!("No answer: {reason}."),
            (None, _) => "(The agent finished without a text answer.)".to_owned(),
        };
        if truncate_chars(&mut result, max_chars) {
            result.push_str("\n[The report was cut here: it was too long.]");
        }
        TaskReport {
            task_id: self.spec.task_id.clone(),
            description: self.spec.description.clone(),
            agent_type: self.spec.agent_type.clone(),
            status: finish.status,
            result,
            reason: finish.reason,
            total_tokens: self.usage.total(),
            tool_uses: self.tool_uses,
            duration_ms: now_ms.saturating_sub(self.started_ms),
        }
    }
}

fn model_failure(error: &ModelError) -> String {
    match error.kind {
        ModelErrorKind::PromptTooLong => format!("its context overflowed ({})", error.message),
        ModelErrorKind::BudgetExhausted => format!("the token budget is spent ({})", error.message),
        ModelErrorKind::Unavailable | ModelErrorKind::InvalidRequest => {
            format!("the model call failed ({})", error.message)
        }
    }
}

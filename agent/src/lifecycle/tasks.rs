//! The main agent's `Task` calls: each accepted call becomes a subagent ([`Child`]) that runs
//! alongside the others, up to [`AgentConfig::max_subagents`] at once (the rest wait in
//! order). A finished subagent's `<task-notification>` fills its call's slot in the batch; the
//! batch's results go to the model once every slot is filled.
//!
//! [`AgentConfig::max_subagents`]: crate::config::AgentConfig::max_subagents

use std::collections::{BTreeMap, VecDeque};

use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::model::{ModelError, ModelRequest, ModelResponse};

use super::child::{Child, ChildSpec, Env, Finish, Step};
use super::warm_up;
use super::{Agent, Batch, Effect, Owner, Phase, ToolRoot};
use crate::context::{self, Prefix};
use crate::conversation::{ToolCall, user_text};
use crate::subagents::notification::lifecycle_event;
use crate::subagents::task_tool::{self, TaskInput};
use crate::subagents::{
    self, AgentDefinition, Catalog, InvalidDefinition, Subagents, filter, fork,
};
use crate::tools::ToolOutput;

/// Turns a fork child may take.
pub const FORK_MAX_TURNS: u32 = 24;

/// The subagents of a session.
#[derive(Debug, Default)]
pub(super) struct Team {
    /// `None` when the prompt variant offers no subagents.
    catalog: Option<Catalog>,
    /// Definition files to report at the start.
    invalid: Vec<InvalidDefinition>,
    /// Queued and running children, by Task tool_use id.
    children: BTreeMap<String, Child>,
    /// Children not started yet, in call order.
    queue: VecDeque<String>,
    /// Tool batches children wait for, and whose they are.
    batches: BTreeMap<u64, String>,
    /// Children's prefixes that an answered request wrote to the prompt cache, and when it
    /// was last used (milliseconds since the session started).
    written: Vec<(Prefix, u64)>,
    /// How many leading tools of the main agent's subagents share (see `warm_up`).
    shared_tools: Option<usize>,
}

impl Team {
    /// The team of a main agent that offers `offered` tools.
    pub(super) fn new(subagents: Option<Subagents>, offered: &[String], plan_mode: bool) -> Self {
        let (catalog, invalid) = match subagents {
            Some(s) => (Some(s.catalog), s.invalid),
            None => (None, Vec::new()),
        };
        let offers_task = offered.iter().any(|name| task_tool::is_task(name));
        let kinds: Vec<Vec<String>> = catalog
            .iter()
            .filter(|_| offers_task)
            .flat_map(Catalog::agents)
            .filter(|def| !def.inherits_context)
            .map(|def| filter::allowed(offered, Some(def), plan_mode))
            .collect();
        Team {
            catalog,
            invalid,
            shared_tools: warm_up::shared_tools(offered, &kinds),
            ..Team::default()
        }
    }

    /// Puts a breakpoint after the tools subagents share on a main-agent request that has one
    /// to spare, so subagents read their tool definitions from its cache entry.
    pub(super) fn mark_shared_tools(&self, request: &mut ModelRequest) {
        if let Some(shared) = self.shared_tools {
            warm_up::mark_tool(request, shared - 1);
        }
    }

    /// Whether a child waits for this tool batch.
    pub(super) fn owns_batch(&self, batch: u64) -> bool {
        self.batches.contains_key(&batch)
    }

    /// The queued or running child of this Task tool_use.
    pub(super) fn child(&self, task_id: &str) -> Option<&Child> {
        self.children.get(task_id)
    }

    /// Adds a child started at once, outside the queue and the main batches (the verifier).
    pub(super) fn insert_started(&mut self, task_id: String, child: Child) {
        self.children.insert(task_id, child);
    }

    /// Takes a child out of the team.
    pub(super) fn remove(&mut self, task_id: &str) -> Option<Child> {
        self.children.remove(task_id)
    }

    fn running(&self) -> usize {
        self.children.len() - self.queue.len()
    }

    /// Whether an answered request wrote `prefix` recently enough to be read now.
    pub(super) fn written_recently(&self, prefix: &Prefix, now_ms: u64) -> bool {
        self.written
            .iter()
            .any(|(p, at)| p == prefix && warm_up::alive(*at, now_ms))
    }

    /// An answered request wrote (or read, which refreshes) `prefix` at `now_ms`.
    pub(super) fn note_written(&mut self, prefix: Prefix, now_ms: u64) {
        self.written
            .retain(|(p, at)| *p != prefix && warm_up::alive(*at, now_ms));
        self.written.push((prefix, now_ms));
    }
}

impl Agent {
    /// Reports the definition files that were skipped (once, at the start of a session).
    pub(super) fn report_invalid_definitions(&mut self, out: &mut Vec<Effect>) {
        for invalid in std::mem::take(&mut self.team.invalid) {
            out.push(Effect::Emit(invalid.event()));
        }
    }

    /// Answers the Task call `i` of the main batch: `None` when a subagent will answer it.
    pub(super) fn dispatch_task(
        &mut self,
        batch: &mut Batch,
        i: usize,
        out: &mut Vec<Effect>,
    ) -> Option<ToolOutput> {
        let call = batch.calls[i].clone();
        let Some(catalog) = &self.team.catalog else {
            return Some(self.unknown_tool(&call.name));
        };
        let input = match task_tool::parse(&call.input) {
            Ok(input) => input,
            Err(e) => return Some(ToolOutput::error(e)),
        };
        if self.team.children.contains_key(&call.id) {
            return Some(ToolOutput::error(
                "A subagent with this tool_use id is running.",
            ));
        }
        let spec = match &input.subagent_type {
            Some(name) => match catalog.find(name) {
                Some(def) if def.inherits_context => {
                    let def = def.clone();
                    self.fork_spec(batch, &call, input, i, Some(def))
                }
                Some(def) => self.fresh_spec(def.clone(), &call, input, (batch.id, i)),
                None => return Some(unknown_type(name, catalog)),
            },
            None => self.fork_spec(batch, &call, input, i, None),
        };
        out.push(Effect::Emit(lifecycle_event(
            false,
            &spec.task_id,
            &spec.description,
            &spec.agent_type,
        )));
        self.team.queue.push_back(call.id.clone());
        self.team.children.insert(call.id, Child::new(spec));
        batch.tasks.push(i);
        None
    }

    fn plan_mode(&self) -> bool {
        self.settings.mode == AgentMode::Plan
    }

    pub(super) fn offered(&self) -> Vec<String> {
        self.prefix.tools.iter().map(|t| t.name.clone()).collect()
    }

    /// A subagent of type `def`: its own system prompt and tools, and only its prompt.
    fn fresh_spec(
        &self,
        def: AgentDefinition,
        call: &ToolCall,
        input: TaskInput,
        (batch, slot): (u64, usize),
    ) -> ChildSpec {
        let allowed = filter::allowed(&self.offered(), Some(&def), self.plan_mode());
        ChildSpec {
            task_id: call.id.clone(),
            description: input.description,
            agent_type: def.name.clone(),
            prefix: subagents::prefix(&def, &self.prefix.tools, &allowed),
            messages: vec![user_text(input.prompt.clone())],
            prompt: input.prompt,
            allowed,
            plan_mode: self.plan_mode(),
            max_turns: def.max_turns,
            definition: Some(def),
            batch,
            slot,
            root: ToolRoot::Workspace,
        }
    }

    /// A fork, or a subagent of type `def` that inherits the main agent's context: the main
    /// agent's prefix and history, then the placeholders and its directive.
    fn fork_spec(
        &self,
        batch: &mut Batch,
        call: &ToolCall,
        input: TaskInput,
        slot: usize,
        def: Option<AgentDefinition>,
    ) -> ChildSpec {
        let base = batch.fork_base.get_or_insert_with(|| {
            fork::base(context::turn_view(
                &self.prefix,
                &self.messages,
                &self.config.context,
            ))
        });
        let allowed = filter::allowed(&self.offered(), def.as_ref(), self.plan_mode());
        let messages = match &def {
            Some(def) => fork::typed_child_messages(base, def, &allowed, &input.prompt),
            None => fork::child_messages(base, &input.prompt),
        };
        ChildSpec {
            task_id: call.id.clone(),
            description: input.description,
            agent_type: def
                .as_ref()
                .map_or(fork::FORK_TYPE, |d| d.name.as_str())
                .to_owned(),
            prefix: fork::prefix(&self.prefix),
            messages,
            prompt: input.prompt,
            allowed,
            plan_mode: self.plan_mode(),
            max_turns: def.as_ref().map_or(FORK_MAX_TURNS, |d| d.max_turns),
            definition: def,
            batch: batch.id,
            slot,
            root: ToolRoot::Workspace,
        }
    }

    /// Starts waiting children while there is room. Children that start together with one
    /// prefix wait for a cache warm-up first when it pays (see `warm_up`).
    pub(super) fn launch_tasks(&mut self, out: &mut Vec<Effect>) {
        let mut starting = Vec::new();
        while self.team.running() < self.config.max_subagents {
            let Some(task_id) = self.team.queue.pop_front() else {
                break;
            };
            starting.push(task_id);
        }
        let warming = self.warm_up(&starting, out);
        for task_id in starting.iter().filter(|id| !warming.contains(id)) {
            self.start_child(task_id, out);
        }
    }

    pub(super) fn start_child(&mut self, task_id: &str, out: &mut Vec<Effect>) {
        if let Some(step) = self.step_child(task_id, out, |child, env| child.start(env)) {
            self.after_step(task_id, step, out);
        }
    }

    /// A model reply for a subagent.
    pub(super) fn on_task_model(
        &mut self,
        task_id: &str,
        result: Result<ModelResponse, ModelError>,
        out: &mut Vec<Effect>,
    ) {
        if let Ok(response) = &result {
            self.usage = self.usage + response.usage;
            if let Some(child) = self.team.children.get(task_id) {
                let prefix = child.prefix().clone();
                self.team.note_written(prefix, self.now_ms);
            }
        }
        if let Some(step) = self.step_child(task_id, out, |child, env| child.on_model(result, env))
        {
            self.after_step(task_id, step, out);
        }
    }

    /// A tool batch a subagent waited for.
    pub(super) fn on_task_tools(
        &mut self,
        batch: u64,
        outputs: Vec<ToolOutput>,
        out: &mut Vec<Effect>,
    ) {
        let Some(task_id) = self.team.batches.remove(&batch) else {
            return;
        };
        if let Some(step) =
            self.step_child(&task_id, out, |child, env| child.on_tools(outputs, env))
        {
            self.after_step(&task_id, step, out);
        }
    }

    /// Runs `f` on the child `task_id` with what it needs from the agent.
    pub(super) fn step_child(
        &mut self,
        task_id: &str,
        out: &mut Vec<Effect>,
        f: impl FnOnce(&mut Child, &mut Env<'_>) -> Step,
    ) -> Option<Step> {
        let child = self.team.children.get_mut(task_id)?;
        let mut env = Env {
            ids: &mut self.ids,
            config: &self.config,
            runnable: &self.runnable,
            now_ms: self.now_ms,
            out,
        };
        Some(f(child, &mut env))
    }

    /// Records what the child waits for now, or takes its report.
    pub(super) fn after_step(&mut self, task_id: &str, step: Step, out: &mut Vec<Effect>) {
        match step {
            Step::Requested(request_id) => {
                self.requests
                    .insert(request_id, Owner::Task(task_id.to_owned()));
            }
            Step::RunsTools(batch) => {
                self.team.batches.insert(batch, task_id.to_owned());
            }
            Step::Finished(finish) if self.is_verifier(task_id) => {
                self.on_verifier_finished(task_id, finish, out);
            }
            Step::Finished(finish) => self.finish_task(task_id, finish, out),
        }
    }

    /// A subagent ended: report it, start the next waiting one, answer its Task call.
    fn finish_task(&mut self, task_id: &str, finish: Finish, out: &mut Vec<Effect>) {
        let Some(child) = self.team.children.remove(task_id) else {
            return;
        };
        let report = child.report(finish, self.now_ms, self.config.context.spill_chars);
        tracing::info!(
            task_id,
            status = report.status.as_str(),
            "subagent finished"
        );
        out.push(Effect::Emit(report.event()));
        self.launch_tasks(out);
        self.answer_task(child.batch(), child.slot(), report.output(), out);
    }

    /// Fills a Task call's slot; the batch finishes when it was the last one open.
    fn answer_task(
        &mut self,
        batch_id: u64,
        slot: usize,
        output: ToolOutput,
        out: &mut Vec<Effect>,
    ) {
        let Phase::Tools(batch) = &mut self.phase else {
            return tracing::warn!(batch_id, "a subagent report for no running batch");
        };
        if batch.id != batch_id {
            return tracing::warn!(batch_id, "a subagent report for another batch");
        }
        batch.results[slot] = Some(output);
        batch.tasks.retain(|&s| s != slot);
        if !batch.tasks.is_empty() || !batch.running.is_empty() {
            return;
        }
        if let Phase::Tools(batch) = std::mem::replace(&mut self.phase, Phase::Idle) {
            self.finish_batch(batch, out);
        }
    }
}

fn unknown_type(name: &str, catalog: &Catalog) -> ToolOutput {
    ToolOutput::error(format!(
        "Unknown subagent_type `{name}`. Available types: {}. Omit subagent_type to fork \
         yourself.",
        catalog.names()
    ))
}

//! Answering the tool_use blocks of one assistant message.
//!
//! TodoWrite is answered here; the workspace tools are handed to the runtime (which runs them
//! concurrently in plan mode, in order in execution mode); `Task` calls are answered by
//! subagents (see `tasks`), which run alongside; ExitPlanMode and AskUserQuestion are answered
//! by the user after the batch, one per message (plan mode only); unknown tools and invalid
//! inputs get error results. On resume, writing calls an earlier process left unanswered are
//! not repeated (see `execute`). All results the agent produced go out as one user message, in
//! the order of the calls, once every tool and subagent is done.

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::constants::UserWait;

use super::execute::INTERRUPTED_CALL;
use super::{Agent, Batch, Effect, Phase, ToolRoot, Wait};
use crate::conversation::{ToolCall, user, user_event};
use crate::plan_tools::{ask, exit_plan, todo};
use crate::subagents::task_tool;
use crate::tools::{ToolOutput, is_mutating};

impl Agent {
    /// Answers the calls of an assistant message.
    pub(super) fn start_batch(&mut self, calls: Vec<ToolCall>, out: &mut Vec<Effect>) {
        self.open_batch(calls, false, out);
    }

    /// Answers the calls an earlier process left without results.
    pub(super) fn resume_batch(&mut self, calls: Vec<ToolCall>, out: &mut Vec<Effect>) {
        self.open_batch(calls, true, out);
    }

    fn open_batch(&mut self, calls: Vec<ToolCall>, resumed: bool, out: &mut Vec<Effect>) {
        let mut batch = Batch {
            id: self.ids.batch(),
            results: vec![None; calls.len()],
            calls,
            running: Vec::new(),
            waiting: None,
            early: None,
            tasks: Vec::new(),
            fork_base: None,
            resumed,
        };
        for i in 0..batch.calls.len() {
            self.dispatch(&mut batch, i, out);
        }
        self.launch_tasks(out);
        if batch.running.is_empty() && batch.tasks.is_empty() {
            return self.finish_batch(batch, out);
        }
        if !batch.running.is_empty() {
            let calls = batch.running.iter().map(|&i| batch.calls[i].clone());
            out.push(Effect::RunTools {
                batch: batch.id,
                calls: calls.collect(),
                root: ToolRoot::Workspace,
            });
        }
        self.phase = Phase::Tools(batch);
    }

    /// Decides how call `i` is answered.
    fn dispatch(&mut self, batch: &mut Batch, i: usize, out: &mut Vec<Effect>) {
        let call = &batch.calls[i];
        let name = call.name.as_str();
        let wait = UserWait::of_tool(name);
        let answer = match name {
            todo::NAME => Some(self.todos.apply(call.input.clone())),
            _ if wait.is_some() && self.executing() => Some(self.unknown_tool(name)),
            _ if let Some(wait) = wait => wait_for_user(batch, i, wait),
            _ if batch.resumed && is_mutating(name) => Some(ToolOutput::error(INTERRUPTED_CALL)),
            _ if task_tool::is_task(name) => self.dispatch_task(batch, i, out),
            _ if self.runnable.iter().any(|r| r == name) => {
                batch.running.push(i);
                None
            }
            _ => Some(self.unknown_tool(name)),
        };
        batch.results[i] = answer;
    }

    pub(super) fn unknown_tool(&self, name: &str) -> ToolOutput {
        let known: Vec<&str> = self.prefix.tools.iter().map(|t| t.name.as_str()).collect();
        ToolOutput::error(format!(
            "Unknown tool `{name}`. Available tools: {}.",
            known.join(", ")
        ))
    }

    /// Fills the outputs of the tools the runtime ran, then finishes the batch.
    pub(super) fn on_tools_done(
        &mut self,
        batch_id: u64,
        outputs: Vec<ToolOutput>,
        out: &mut Vec<Effect>,
    ) {
        let mut batch = match std::mem::replace(&mut self.phase, Phase::Idle) {
            Phase::Tools(batch) if batch.id == batch_id => batch,
            other => {
                tracing::warn!(batch_id, "ignoring results of no running batch");
                self.phase = other;
                return;
            }
        };
        if outputs.len() != batch.running.len() {
            tracing::error!(
                got = outputs.len(),
                want = batch.running.len(),
                "tool batch returned a wrong number of outputs"
            );
        }
        let running = std::mem::take(&mut batch.running);
        let mut outputs = outputs.into_iter();
        for i in running {
            let output = outputs
                .next()
                .unwrap_or_else(|| ToolOutput::error("The tool produced no result; try again."));
            batch.results[i] = Some(output);
        }
        if !batch.tasks.is_empty() {
            self.phase = Phase::Tools(batch);
            return;
        }
        self.finish_batch(batch, out);
    }

    /// Emits the results the agent produced, then waits for the user or starts the next turn.
    pub(super) fn finish_batch(&mut self, batch: Batch, out: &mut Vec<Effect>) {
        if self.executing() {
            self.note_changes(&batch.calls, &batch.results);
        }
        let mut blocks: Vec<ContentBlock> = batch
            .calls
            .iter()
            .zip(batch.results)
            .filter_map(|(call, result)| result.map(|r| r.into_block(&call.id)))
            .collect();
        if !blocks.is_empty() {
            if let Some(reminder) = self.todos.take_reminder() {
                blocks.push(ContentBlock::text(reminder));
            }
            let message = user(blocks);
            let event = user_event(&message);
            self.add(message, event, out);
        }
        match batch.waiting {
            Some(wait) => {
                self.phase = Phase::Waiting(wait);
                if let Some(answer) = batch.early {
                    self.on_user_message(answer, out);
                }
            }
            None => {
                self.flush_queued();
                self.next_turn(out);
            }
        }
    }
}

/// Registers call `i` as the one the user answers, or refuses it. `None` means "no result
/// now"; the user's answer comes later.
fn wait_for_user(batch: &mut Batch, i: usize, wait: UserWait) -> Option<ToolOutput> {
    let call = &batch.calls[i];
    let checked = match wait {
        UserWait::Decision => exit_plan::validate(&call.input),
        UserWait::Question => ask::validate(&call.input),
    };
    if let Err(message) = checked {
        return Some(ToolOutput::error(message));
    }
    if batch.waiting.is_some() {
        return Some(ToolOutput::error(format!(
            "Only one {} or {} call can wait for the user at a time; this {} call was not \
             shown to the user. Call it again after the first one is answered.",
            exit_plan::NAME,
            ask::NAME,
            call.name
        )));
    }
    let tool_use_id = call.id.clone();
    batch.waiting = Some(match wait {
        UserWait::Decision => Wait::Decision { tool_use_id },
        UserWait::Question => Wait::Question { tool_use_id },
    });
    None
}

//! The end of an execution: a read-only verifier checks the work before the session ends.
//!
//! It runs when an execution ends normally (the model ended its turn with nothing queued),
//! changed something (a successful Write, Edit or Bash call of its own, counted from the
//! approval on, resumed calls included), and holds no verdict yet (a resumed execution whose
//! transcript logged one is not verified again). Then:
//!
//! 1. [`Effect::CopyWorkspace`]: the runtime copies the workspace and answers with
//!    [`Input::WorkspaceCopied`](super::Input::WorkspaceCopied); when it cannot, the verdict is
//!    `PARTIAL` with the reason;
//! 2. the harness logs a main-agent `Task` tool_use (`subagent_type: verifier`, `started_by`)
//!    and runs a `verifier` subagent under it, whose tools run in the copy
//!    ([`ToolRoot::Copy`]), on its own turn budget;
//! 3. its final text is parsed with [`parse_verdict`]; without a verdict line it is asked once
//!    more, then the verdict is `PARTIAL`; a verifier that fails or hits its turn limit gives
//!    `PARTIAL` with the reason;
//! 4. [`Effect::RemoveCopy`], the `verification` event, the Task's tool_result, and the
//!    execution's own `result`, then the exit.
//!
//! A process restarted while its verifier ran finds the harness's Task call unanswered at the
//! end of the transcript; it drops that call and verifies again from the execution's summary.

use std::collections::HashMap;

use serde_json::json;
use ultraplan_protocol::constants::{HARNESS_STARTED_BY, VERIFICATION};
use ultraplan_protocol::events::{ResultEvent, Role, SystemEvent};
use ultraplan_protocol::model::Message;
use ultraplan_protocol::verdict::{Verdict, VerdictOutcome, parse_verdict};
use ultraplan_protocol::{ContentBlock, EventBody};

use super::child::{Child, ChildSpec, Finish};
use super::{Agent, Effect, Phase, ToolRoot};
use crate::conversation::{
    ToolCall, assistant, tool_calls, tool_results, user, user_event, user_text,
};
use crate::subagents::notification::{TaskStatus, lifecycle_event};
use crate::subagents::verifier::{self, Changes, VERDICT_NUDGE};
use crate::subagents::{filter, task_tool};
use crate::tools::ToolOutput;

/// The evidence when the workspace could not be copied (the reason follows).
pub const NOT_COPIED: &str = "Not verified: the workspace could not be copied for the verifier";

/// The evidence when the verifier's report, asked twice, holds no verdict line (its text
/// follows).
pub const NO_VERDICT: &str = "the verifier gave no verdict";

/// The verification of an ended execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Run {
    /// The execution's summary: its `result` once the verdict is in.
    summary: String,
    /// The harness's Task tool_use id, once the verifier started.
    task_id: Option<String>,
    /// The verifier was asked once more for its verdict.
    asked_again: bool,
    /// Its verdict and the Task's answer, while the workspace is checked for changes.
    pending: Option<(Verdict, Option<(String, ToolOutput)>)>,
}

/// What the successful Write, Edit and Bash calls in `messages` changed.
pub(super) fn replay_changes(messages: &[Message]) -> Changes {
    let ok: HashMap<&str, bool> = messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(tool_results)
        .map(|(id, _, is_error)| (id, !is_error))
        .collect();
    let mut changes = Changes::default();
    for call in messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(tool_calls)
    {
        if ok.get(call.id.as_str()).copied().unwrap_or(false) {
            changes.record(&call.name, &call.input);
        }
    }
    changes
}

/// The `system` event carrying a verdict.
pub(super) fn verification_event(verdict: &Verdict) -> EventBody {
    EventBody::System(SystemEvent {
        subtype: VERIFICATION.to_owned(),
        message: Some(format!("Verification: {}", verdict.verdict.as_str())),
        data: json!({"verdict": verdict.verdict.as_str(), "evidence": verdict.evidence}),
    })
}

/// The most changed paths a verdict names.
const NAMED_CHANGES: usize = 20;

/// A verdict whose verifier changed the workspace it may only read: never a PASS, and the
/// evidence says what changed (those changes are in the patch).
pub(super) fn tampered(verdict: Verdict, changes: &[String]) -> Verdict {
    if changes.is_empty() {
        return verdict;
    }
    let mut named: Vec<&str> = changes
        .iter()
        .take(NAMED_CHANGES)
        .map(String::as_str)
        .collect();
    let more = changes.len().saturating_sub(NAMED_CHANGES);
    let more_text = format!("… and {more} more");
    if more > 0 {
        named.push(&more_text);
    }
    let outcome = match verdict.verdict {
        VerdictOutcome::Pass => VerdictOutcome::Partial,
        other => other,
    };
    Verdict {
        verdict: outcome,
        evidence: format!(
            "{}\n\nThe verifier changed the workspace, which it may only read, so its verdict is \
             at most PARTIAL. These changes are in the patch; review them:\n- {}",
            verdict.evidence,
            named.join("\n- ")
        ),
    }
}

fn partial(evidence: String) -> Verdict {
    Verdict {
        verdict: VerdictOutcome::Partial,
        evidence,
    }
}

impl Agent {
    /// Records what a finished main batch changed.
    pub(super) fn note_changes(&mut self, calls: &[ToolCall], results: &[Option<ToolOutput>]) {
        for (call, result) in calls.iter().zip(results) {
            if result.as_ref().is_some_and(|r| !r.is_error) {
                self.changes.record(&call.name, &call.input);
            }
        }
    }

    /// On resume: when the transcript ends with the harness's own Task call (an earlier process
    /// stopped while its verifier ran), forgets that call, so the execution resumes at its
    /// summary and is verified again unless its verdict was logged.
    pub(super) fn drop_interrupted_verification(&mut self) {
        let Some(last) = self.messages.last() else {
            return;
        };
        let calls = tool_calls(last);
        let harness = |c: &ToolCall| {
            task_tool::is_task(&c.name)
                && c.input
                    .get("started_by")
                    .and_then(serde_json::Value::as_str)
                    == Some(HARNESS_STARTED_BY)
        };
        if self.executing()
            && last.role == Role::Assistant
            && !calls.is_empty()
            && calls.iter().all(harness)
        {
            tracing::info!("resuming an execution whose verification was interrupted");
            self.messages.pop();
        }
    }

    /// Whether the execution that just ended is to be verified.
    pub(super) fn verification_due(&self) -> bool {
        let due =
            self.executing() && self.changes.any() && !self.verified && self.verification.is_none();
        if !due {
            tracing::debug!(
                changed = self.changes.any(),
                verified = self.verified,
                "no verification"
            );
        }
        due
    }

    /// The execution ended with `summary`: have the workspace copied for the verifier.
    pub(super) fn start_verification(&mut self, summary: &str, out: &mut Vec<Effect>) {
        tracing::info!(
            files = self.changes.files.len(),
            bash = self.changes.bash,
            "verifying the execution"
        );
        self.verification = Some(Run {
            summary: summary.to_owned(),
            task_id: None,
            asked_again: false,
            pending: None,
        });
        self.phase = Phase::Verifying;
        out.push(Effect::CopyWorkspace);
    }

    /// The runtime made the copy, or could not.
    pub(super) fn on_workspace_copied(
        &mut self,
        result: Result<(), String>,
        out: &mut Vec<Effect>,
    ) {
        let waiting = self.phase == Phase::Verifying
            && self
                .verification
                .as_ref()
                .is_some_and(|r| r.task_id.is_none());
        if !waiting {
            return tracing::warn!("ignoring a workspace copy nobody waits for");
        }
        match result {
            Ok(()) => self.start_verifier(out),
            Err(reason) => {
                tracing::warn!(%reason, "the workspace could not be copied");
                let verdict = partial(format!("{NOT_COPIED}: {reason}."));
                self.conclude(verdict, None, out);
            }
        }
    }

    /// Logs the harness's Task tool_use and starts the verifier under it.
    fn start_verifier(&mut self, out: &mut Vec<Effect>) {
        let task_id = format!("verifier_{}", self.ids.batch());
        let prompt = verifier::brief(self.approved_plan.as_deref(), &self.changes);
        let definition = verifier::definition();
        let allowed = filter::allowed(&self.offered(), Some(&definition), false);
        let spec = ChildSpec {
            task_id: task_id.clone(),
            description: verifier::DESCRIPTION.to_owned(),
            agent_type: verifier::NAME.to_owned(),
            prefix: verifier::prefix(&self.prefix.tools, &allowed),
            messages: vec![user_text(prompt.clone())],
            prompt: prompt.clone(),
            allowed,
            plan_mode: false,
            max_turns: verifier::MAX_TURNS,
            definition: Some(definition),
            batch: 0,
            slot: 0,
            root: ToolRoot::Copy,
        };
        let call = vec![ContentBlock::tool_use(
            &task_id,
            task_tool::NAME,
            verifier::task_input(&prompt),
        )];
        self.add(assistant(call.clone()), EventBody::assistant(call), out);
        out.push(Effect::Emit(lifecycle_event(
            false,
            &task_id,
            verifier::DESCRIPTION,
            verifier::NAME,
        )));
        self.team.insert_started(task_id.clone(), Child::new(spec));
        if let Some(run) = &mut self.verification {
            run.task_id = Some(task_id.clone());
        }
        self.start_child(&task_id, out);
    }

    /// Whether `task_id` is the verifier's.
    pub(super) fn is_verifier(&self, task_id: &str) -> bool {
        self.verification
            .as_ref()
            .and_then(|r| r.task_id.as_deref())
            .is_some_and(|id| id == task_id)
    }

    /// The verifier ended its turn or stopped: take its verdict, or ask once more for one.
    pub(super) fn on_verifier_finished(
        &mut self,
        task_id: &str,
        finish: Finish,
        out: &mut Vec<Effect>,
    ) {
        let Some(child) = self.team.child(task_id) else {
            return;
        };
        let text = child.last_text().trim().to_owned();
        let asked_again = self.verification.as_ref().is_some_and(|r| r.asked_again);
        let verdict = match (&finish.status, parse_verdict(&text)) {
            (TaskStatus::Completed, Some(verdict)) => verdict,
            (TaskStatus::Completed, None) if !asked_again => {
                tracing::info!(task_id, "the verifier gave no verdict; asking once more");
                if let Some(run) = &mut self.verification {
                    run.asked_again = true;
                }
                if let Some(step) =
                    self.step_child(task_id, out, |c, env| c.ask_again(VERDICT_NUDGE, env))
                {
                    self.after_step(task_id, step, out);
                }
                return;
            }
            (TaskStatus::Completed, None) => partial(format!("{NO_VERDICT}.\n\n{text}")),
            (_, _) => {
                let reason = finish.reason.as_deref().unwrap_or("it stopped");
                let mut evidence = format!("Not verified: the verifier did not finish: {reason}.");
                if !text.is_empty() {
                    evidence.push_str(&format!("\n\nIts last message:\n{text}"));
                }
                partial(evidence)
            }
        };
        let Some(child) = self.team.remove(task_id) else {
            return;
        };
        let report = child.report(finish, self.now_ms, self.config.context.spill_chars);
        out.push(Effect::Emit(report.event()));
        // Its Bash could reach the workspace by its absolute path: check before concluding.
        if let Some(run) = &mut self.verification {
            run.pending = Some((verdict, Some((task_id.to_owned(), report.output()))));
        }
        out.push(Effect::CheckWorkspace);
    }

    /// The runtime told what changed in the workspace while the verifier ran.
    pub(super) fn on_workspace_checked(&mut self, changes: Vec<String>, out: &mut Vec<Effect>) {
        let Some((verdict, task)) = self.verification.as_mut().and_then(|r| r.pending.take())
        else {
            return tracing::warn!("ignoring a workspace check nobody waits for");
        };
        self.conclude(tampered(verdict, &changes), task, out);
    }

    /// Logs the verdict, answers the harness's Task call, and ends the session with the
    /// execution's summary.
    fn conclude(
        &mut self,
        verdict: Verdict,
        task: Option<(String, ToolOutput)>,
        out: &mut Vec<Effect>,
    ) {
        tracing::info!(verdict = verdict.verdict.as_str(), "execution verified");
        out.push(Effect::RemoveCopy);
        out.push(Effect::Emit(verification_event(&verdict)));
        if let Some((task_id, output)) = task {
            let message = user(vec![output.into_block(&task_id)]);
            let event = user_event(&message);
            self.add(message, event, out);
        }
        self.verified = true;
        if !self.queued.is_empty() {
            tracing::warn!(
                messages = self.queued.len(),
                "messages that arrived during verification are not answered"
            );
        }
        let summary = self
            .verification
            .as_ref()
            .map(|r| r.summary.clone())
            .unwrap_or_default();
        self.finish(ResultEvent::SUCCESS, &summary, out);
    }
}

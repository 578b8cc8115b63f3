//! The agent's lifecycle as a pure state machine: an [`Input`] in, [`Effect`]s out.
//!
//! The runtime feeds it what happens (start, model replies, finished tool batches, user
//! events) and carries out the effects (emit an event, send a model request, run tools, exit).
//! Nothing here does IO, reads a clock or spawns work, so every path is tested without pipes
//! or sleeps.
//!
//! - `turn`: model requests, replies, errors, compaction;
//! - `batch`: the tool_use blocks of one assistant message;
//! - `user`: user events (answers, plan decisions, steering);
//! - `resume`: where to continue from when the conversation was rebuilt from a transcript;
//! - `execute`: execution mode, where an approved plan is implemented and the end of a turn
//!   ends the session;
//! - `verify`: the end of an execution that changed something, where a read-only verifier
//!   subagent checks the work in a copy of the workspace and its verdict is logged;
//! - `tasks`: `Task` calls of the main agent, answered by subagents (`child`) that run
//!   concurrently, each with its own model requests and tool batches. Replies are routed by
//!   request id and batch id to the agent that is waiting for them. Children that start
//!   together with one prefix may first warm the prompt cache (`warm_up` decides, `warming`
//!   sends the warm-up and starts them when it returns).

mod batch;
mod child;
mod execute;
mod resume;
mod tasks;
mod turn;
mod user;
mod verify;
mod warm_up;
mod warming;

#[cfg(test)]
mod execute_tests;
#[cfg(test)]
mod resume_tests;
#[cfg(test)]
mod tasks_tests;
#[cfg(test)]
mod test_harness;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod user_tests;
#[cfg(test)]
mod verify_tests;
#[cfg(test)]
mod warm_up_tests;

pub use turn::ERROR_DURING_EXECUTION;
pub use verify::{NO_VERDICT, NOT_COPIED};

use std::collections::BTreeMap;

use ultraplan_protocol::EventBody;
use ultraplan_protocol::events::ResultEvent;
use ultraplan_protocol::frames::StartSettings;
use ultraplan_protocol::model::{Message, ModelError, ModelRequest, ModelResponse, Usage};

use crate::config::AgentConfig;
use crate::context::Prefix;
use crate::conversation::{self, Rebuilt, ToolCall};
use crate::plan_tools::todo::TodoState;
use crate::subagents::Subagents;
use crate::subagents::verifier::Changes;
use crate::tools::ToolOutput;

/// Everything the state machine starts from.
#[derive(Debug, Clone)]
pub struct Setup {
    pub settings: StartSettings,
    pub config: AgentConfig,
    /// System prompt and tool definitions.
    pub prefix: Prefix,
    /// The first user message (instructions, project instructions, draft plan, prompt).
    pub first_message: Message,
    /// The conversation recovered from the transcript (the prompt excluded).
    pub rebuilt: Rebuilt,
    /// Tools the runtime runs (the workspace tools); the others are answered here.
    pub runnable: Vec<String>,
    /// The subagent types, when the prompt variant offers `Task`.
    pub subagents: Option<Subagents>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The handshake is done: start or resume.
    Begin,
    /// The reply to a model request.
    Model {
        request_id: String,
        result: Result<ModelResponse, ModelError>,
    },
    /// A tool batch finished; one output per call, in the order of the calls.
    ToolsDone {
        batch: u64,
        outputs: Vec<ToolOutput>,
    },
    /// A user event from the server (already in the session log).
    User(EventBody),
    /// The answer to [`Effect::CopyWorkspace`]: the copy is ready, or why it could not be
    /// made.
    WorkspaceCopied(Result<(), String>),
    /// The answer to [`Effect::CheckWorkspace`]: what changed in the workspace while the
    /// verifier ran (one `path (added|removed|changed)` line each).
    WorkspaceChecked(Vec<String>),
}

/// Where a tool batch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolRoot {
    /// The workspace, whose changes make the patch.
    Workspace,
    /// The throw-away copy made by [`Effect::CopyWorkspace`], with the verifier's tools.
    Copy,
}

/// What to do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send the event for the session log.
    Emit(EventBody),
    /// Send a model request; its reply comes back as [`Input::Model`].
    Request {
        request_id: String,
        request: ModelRequest,
    },
    /// Run these tools in `root` (concurrently in plan mode, in order when Bash is offered);
    /// reply with [`Input::ToolsDone`].
    RunTools {
        batch: u64,
        calls: Vec<ToolCall>,
        root: ToolRoot,
    },
    /// Copy the workspace for the verifier (see `crate::workspace_copy`) and set up its tools
    /// there; reply with [`Input::WorkspaceCopied`].
    CopyWorkspace,
    /// The verifier is done: tell what changed in the workspace since the copy was made;
    /// reply with [`Input::WorkspaceChecked`].
    CheckWorkspace,
    /// The verifier is done: stop its commands and remove the copy.
    RemoveCopy,
    /// Send `done` with the total usage and exit with this code.
    Exit { code: u8 },
}

/// Who waits for a model request's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// The main agent.
    Main,
    /// The subagent of this Task tool_use.
    Task(String),
    /// The cache warm-up of these subagents, which start when it returns.
    WarmUp(Vec<String>),
}

/// Request and batch ids, unique across the main agent and its subagents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ids {
    request: u64,
    batch: u64,
}

impl Ids {
    fn request(&mut self) -> String {
        self.request += 1;
        format!("req_{}", self.request)
    }

    fn batch(&mut self) -> u64 {
        self.batch += 1;
        self.batch
    }
}

/// Why a model request was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Turn,
    Compact(CompactTrigger),
}

/// What started a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CompactTrigger {
    /// The history passed the compaction threshold.
    Threshold,
    /// The gateway refused the last request as too long.
    PromptTooLong,
}

/// What the agent waits for from the user.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wait {
    /// The ExitPlanMode decision for this tool_use.
    Decision { tool_use_id: String },
    /// The answer to this AskUserQuestion.
    Question { tool_use_id: String },
    /// A message after the end of a turn.
    EndOfTurn,
}

/// The tool_use blocks of one assistant message being answered.
#[derive(Debug, Clone, PartialEq)]
struct Batch {
    id: u64,
    calls: Vec<ToolCall>,
    /// One slot per call; `None` until answered (and for the call the user answers).
    results: Vec<Option<ToolOutput>>,
    /// Slots the runtime is running.
    running: Vec<usize>,
    /// The call the user answers after the batch.
    waiting: Option<Wait>,
    /// The user's answer to it, if it came while the batch ran.
    early: Option<Message>,
    /// Slots a subagent answers, until its report arrives.
    tasks: Vec<usize>,
    /// The history fork children of this batch start from (built at the first fork).
    fork_base: Option<Vec<Message>>,
    /// The calls were left unanswered by an earlier process (resume).
    resumed: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Idle,
    Model {
        request_id: String,
        purpose: Purpose,
    },
    Tools(Batch),
    Waiting(Wait),
    /// The verifier checks the finished execution.
    Verifying,
    Done,
}

/// The agent state machine.
#[derive(Debug)]
pub struct Agent {
    settings: StartSettings,
    config: AgentConfig,
    prefix: Prefix,
    runnable: Vec<String>,
    messages: Vec<Message>,
    /// User messages (already logged) to add at the next point the conversation allows.
    queued: Vec<Message>,
    todos: TodoState,
    usage: Usage,
    /// Assistant turns in the whole session (execution mode: since the approval), resumed ones
    /// included.
    turns: u32,
    ids: Ids,
    /// Outstanding model requests and who waits for each.
    requests: BTreeMap<String, Owner>,
    /// The subagents.
    team: tasks::Team,
    /// Milliseconds since the session started, as the runtime last said.
    now_ms: u64,
    phase: Phase,
    /// A compaction was already spent on the current prompt-too-long streak.
    overflow_retry_used: bool,
    /// History length right after the last compaction (no re-compaction before it grows).
    compacted_at: Option<usize>,
    /// The transcript's last assistant stop reason and whether its turn was closed.
    resume_stop_reason: Option<String>,
    resume_closed: bool,
    /// What the execution's own Write, Edit and Bash calls changed (execution mode).
    changes: Changes,
    /// The transcript already holds a verdict: this execution is not verified again.
    verified: bool,
    /// The approved plan's text (execution mode), kept from the start: compaction may drop
    /// the approval before the verifier needs it.
    approved_plan: Option<String>,
    /// The verifier's run, once the execution ended.
    verification: Option<verify::Run>,
}

impl Agent {
    /// A state machine ready for [`Input::Begin`].
    pub fn new(setup: Setup) -> Self {
        let offered: Vec<String> = setup.prefix.tools.iter().map(|t| t.name.clone()).collect();
        let plan_mode = setup.settings.mode == ultraplan_protocol::frames::AgentMode::Plan;
        let mut messages = vec![setup.first_message];
        messages.extend(setup.rebuilt.messages);
        let counted = &messages[execute::phase_start(setup.settings.mode, &messages)..];
        let turns = counted
            .iter()
            .filter(|m| m.role == ultraplan_protocol::events::Role::Assistant)
            .count();
        let changes = verify::replay_changes(counted);
        let approved_plan = match setup.settings.mode {
            ultraplan_protocol::frames::AgentMode::Execute => execute::approved_plan(&messages),
            ultraplan_protocol::frames::AgentMode::Plan => None,
        };
        Agent {
            approved_plan,
            changes,
            verified: setup.rebuilt.verified,
            verification: None,
            todos: TodoState::replay(counted),
            settings: setup.settings,
            config: setup.config,
            prefix: setup.prefix,
            runnable: setup.runnable,
            messages,
            queued: setup.rebuilt.deferred,
            usage: Usage::default(),
            turns: u32::try_from(turns).unwrap_or(u32::MAX),
            ids: Ids::default(),
            requests: BTreeMap::new(),
            team: tasks::Team::new(setup.subagents, &offered, plan_mode),
            now_ms: 0,
            phase: Phase::Idle,
            overflow_retry_used: false,
            compacted_at: None,
            resume_stop_reason: setup.rebuilt.last_stop_reason,
            resume_closed: setup.rebuilt.closed,
        }
    }

    /// Handles one input. Nothing is handled after the exit.
    pub fn handle(&mut self, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        if self.is_done() {
            return out;
        }
        match input {
            Input::Begin => self.begin(&mut out),
            Input::Model { request_id, result } => self.on_model(&request_id, result, &mut out),
            Input::ToolsDone { batch, outputs } if self.team.owns_batch(batch) => {
                self.on_task_tools(batch, outputs, &mut out);
            }
            Input::ToolsDone { batch, outputs } => self.on_tools_done(batch, outputs, &mut out),
            Input::User(event) => self.on_user_event(event, &mut out),
            Input::WorkspaceCopied(result) => self.on_workspace_copied(result, &mut out),
            Input::WorkspaceChecked(changes) => self.on_workspace_checked(changes, &mut out),
        }
        out
    }

    /// Sets the clock: milliseconds since the session started (subagent durations are
    /// measured on it). The runtime calls it before each input.
    pub fn set_clock(&mut self, now_ms: u64) {
        self.now_ms = self.now_ms.max(now_ms);
    }

    /// Tokens used by this process's model calls.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// Whether the agent has exited.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Adds a message the agent made and emits it.
    fn add(&mut self, message: Message, event: EventBody, out: &mut Vec<Effect>) {
        self.messages.push(message);
        out.push(Effect::Emit(event));
    }

    /// Adds the queued user messages.
    fn flush_queued(&mut self) {
        self.messages.append(&mut self.queued);
    }

    fn result_event(&self, subtype: &str, text: &str) -> EventBody {
        conversation::result_event(subtype, text, self.turns, self.usage)
    }

    /// Ends the session with a `result` of `subtype`.
    fn finish(&mut self, subtype: &str, text: &str, out: &mut Vec<Effect>) {
        if subtype != ResultEvent::SUCCESS {
            tracing::warn!(subtype, text, "session ends with an error");
        }
        out.push(Effect::Emit(self.result_event(subtype, text)));
        self.exit(out);
    }

    fn exit(&mut self, out: &mut Vec<Effect>) {
        self.phase = Phase::Done;
        out.push(Effect::Exit { code: 0 });
    }
}

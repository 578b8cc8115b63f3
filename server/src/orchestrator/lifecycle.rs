//! The session lifecycle as a pure state machine: an input in, effects out. The orchestrator
//! feeds it what happens (agent events, decisions, exits, timeouts) and carries out the
//! effects; nothing here does IO or reads a clock.

use ultraplan_protocol::constants::UserWait;
use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::plan_text::extract_approved_plan;
use ultraplan_protocol::session::SessionStatus;

/// Where the agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for a free slot under the running cap.
    Queued,
    /// The agent process is starting.
    Starting,
    /// The agent is working.
    Working,
    /// An ExitPlanMode or AskUserQuestion tool_use awaits the user. A question is also
    /// answered by a plain message; a plan only by its decision.
    Waiting { tool_use_id: String, question: bool },
    /// The agent ended its turn and waits for a message.
    Idle,
    /// No agent runs any more.
    Ended,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The session must wait for a slot.
    Queued,
    /// A slot is free and the agent is being started.
    Starting,
    /// The agent said hello. `waiting_on` is a tool_use (ExitPlanMode or AskUserQuestion)
    /// still unanswered in the log, when the agent resumes from one.
    AgentReady { waiting_on: Option<Waiting> },
    /// The agent emitted an event (already validated).
    AgentEvent(EventBody),
    /// A decision or user message for the agent (already in the log).
    Deliver(EventBody),
    /// The agent exited. `clean` when it sent `done` first.
    AgentExited {
        clean: bool,
        reason: String,
        stderr_tail: String,
    },
    /// The session ran past its timeout.
    TimedOut { timeout_seconds: u64 },
    /// A user archived the session.
    Archived,
}

/// A tool_use that waits on the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub tool_use_id: String,
    /// AskUserQuestion (answered by a plain message too) rather than ExitPlanMode.
    pub question: bool,
}

/// What to do about it, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    SetStatus(SessionStatus),
    /// Append an event to the log (written by the harness, not the agent).
    Append(EventBody),
    /// Store the agent's event in the log.
    Record(EventBody),
    /// Send the event to the agent.
    Forward(EventBody),
    /// Stop the agent now.
    Kill,
    /// Mark the session archived.
    Archive,
    /// The plan was approved: stop the planning agent and start execution.
    Execute,
}

/// The lifecycle of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    pub stage: Stage,
    /// An approved plan is executed here (else the planning agent is told and ends).
    pub executes: bool,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            stage: Stage::Starting,
            executes: false,
        }
    }
}

impl Lifecycle {
    /// Whether the agent waits on a person: a plan's decision, an answer, or a message after
    /// its turn. Such an agent can be parked.
    pub fn waits_on_person(&self) -> bool {
        matches!(self.stage, Stage::Waiting { .. } | Stage::Idle)
    }

    /// A lifecycle that hands approved plans to execution when `executes`.
    pub fn new(executes: bool) -> Self {
        Lifecycle {
            executes,
            ..Lifecycle::default()
        }
    }
}

/// The tool_use a log leaves waiting on the user: the newest main-agent ExitPlanMode or
/// AskUserQuestion call without a result.
pub fn unanswered_tool(events: &[EventBody]) -> Option<Waiting> {
    let mut waiting: Option<Waiting> = None;
    for body in events {
        if let Some(w) = &waiting
            && answers(body, w)
        {
            waiting = None;
        }
        if let Some(w) = waiting_tool(body) {
            waiting = Some(w);
        }
    }
    waiting
}

fn waiting_tool(body: &EventBody) -> Option<Waiting> {
    let (id, wait) = body.user_waits().pop()?;
    Some(Waiting {
        tool_use_id: id.to_owned(),
        question: wait == UserWait::Question,
    })
}

/// Whether `body` approves the plan the stage waits on.
fn approves_plan(stage: &Stage, body: &EventBody) -> bool {
    let Stage::Waiting {
        tool_use_id,
        question: false,
    } = stage
    else {
        return false;
    };
    body.tool_results().iter().any(|(id, text, is_error)| {
        id == tool_use_id && !is_error && extract_approved_plan(text).is_some()
    })
}

fn answers(body: &EventBody, waiting: &Waiting) -> bool {
    let EventBody::User(u) = body else {
        return false;
    };
    if u.parent_tool_use_id.is_some() {
        return false;
    }
    let results = body.tool_results();
    results.iter().any(|(id, _, _)| *id == waiting.tool_use_id)
        || (waiting.question && results.is_empty() && !u.message.content.text().trim().is_empty())
}

impl Lifecycle {
    /// Apply an input; returns the effects to carry out.
    pub fn on(&mut self, input: Input) -> Vec<Effect> {
        if self.stage == Stage::Ended {
            return Vec::new();
        }
        match input {
            Input::Queued => {
                self.stage = Stage::Queued;
                vec![Effect::SetStatus(SessionStatus::Idle)]
            }
            Input::Starting => {
                self.stage = Stage::Starting;
                Vec::new()
            }
            Input::AgentReady {
                waiting_on: Some(waiting),
            } => {
                self.stage = Stage::Waiting {
                    tool_use_id: waiting.tool_use_id,
                    question: waiting.question,
                };
                vec![Effect::SetStatus(SessionStatus::RequiresAction)]
            }
            Input::AgentReady { waiting_on: None } => {
                self.stage = Stage::Working;
                vec![Effect::SetStatus(SessionStatus::Running)]
            }
            Input::AgentEvent(body) => self.on_agent_event(body),
            Input::Deliver(body) => self.on_deliver(body),
            Input::AgentExited {
                clean,
                reason,
                stderr_tail,
            } => self.on_exit(clean, reason, stderr_tail),
            Input::TimedOut { timeout_seconds } => {
                self.stage = Stage::Ended;
                // Archived before the result is visible, so a poller woken by the result
                // already sees the final status.
                vec![
                    Effect::Kill,
                    Effect::Archive,
                    Effect::Append(EventBody::error_result(
                        "error_timeout",
                        format!("The session ran past its {timeout_seconds}-second limit."),
                    )),
                ]
            }
            Input::Archived => {
                self.stage = Stage::Ended;
                vec![Effect::Kill]
            }
        }
    }

    /// Status effects come before the event is recorded, so a poller woken by the append
    /// already reads the new status.
    fn on_agent_event(&mut self, body: EventBody) -> Vec<Effect> {
        let mut effects = Vec::new();
        let ends_turn = matches!(&body, EventBody::Result(_));
        if let Some(w) = waiting_tool(&body) {
            self.stage = Stage::Waiting {
                tool_use_id: w.tool_use_id,
                question: w.question,
            };
            effects.push(Effect::SetStatus(SessionStatus::RequiresAction));
        } else if ends_turn {
            if !matches!(self.stage, Stage::Waiting { .. }) {
                self.stage = Stage::Idle;
                effects.push(Effect::SetStatus(SessionStatus::Idle));
            }
        } else if self.stage == Stage::Idle || self.stage == Stage::Starting {
            self.stage = Stage::Working;
            effects.push(Effect::SetStatus(SessionStatus::Running));
        }
        effects.push(Effect::Record(body));
        effects
    }

    fn on_deliver(&mut self, body: EventBody) -> Vec<Effect> {
        let resumes = match &self.stage {
            Stage::Waiting {
                tool_use_id,
                question,
            } => answers(
                &body,
                &Waiting {
                    tool_use_id: tool_use_id.clone(),
                    question: *question,
                },
            ),
            Stage::Idle => true,
            _ => false,
        };
        if resumes && self.executes && approves_plan(&self.stage, &body) {
            // The planning agent is done; the one that executes starts from the log.
            self.stage = Stage::Starting;
            return vec![Effect::SetStatus(SessionStatus::Running), Effect::Execute];
        }
        let mut effects = vec![Effect::Forward(body)];
        if resumes {
            self.stage = Stage::Working;
            effects.push(Effect::SetStatus(SessionStatus::Running));
        }
        effects
    }

    fn on_exit(&mut self, clean: bool, reason: String, stderr_tail: String) -> Vec<Effect> {
        self.stage = Stage::Ended;
        if clean {
            return vec![Effect::SetStatus(SessionStatus::Idle)];
        }
        let mut message = format!("The agent stopped unexpectedly: {reason}.");
        if !stderr_tail.trim().is_empty() {
            message.push_str("\n\nLast output:\n");
            message.push_str(stderr_tail.trim_end());
        }
        vec![
            Effect::SetStatus(SessionStatus::Idle),
            Effect::Append(EventBody::error_result("error_during_execution", message)),
        ]
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;

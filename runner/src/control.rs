//! What one link holds, and how it acts on the server's messages and its own tasks' news:
//! the agents it runs, the `prepare`s under way, and the environment snapshots held for
//! agents about to launch. Dropping it kills the agents, stops the runs and releases the
//! snapshots: nothing outlives the link it was asked for on.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use ultraplan_protocol::runner::{AgentRef, ControlMessage, LaunchSpec, RunnerMessage};

use crate::agent::{self, AgentHandle};
use crate::context::{Context, Held, Up};
use crate::prepare::{self, PrepareHandle};

/// One link's agents, `prepare`s and held snapshots, by lease.
#[derive(Default)]
pub(crate) struct LinkState {
    agents: HashMap<AgentRef, AgentHandle>,
    preparing: HashMap<AgentRef, PrepareHandle>,
    prepared: HashMap<AgentRef, Held>,
}

impl LinkState {
    /// Agents running on the link.
    pub(crate) fn agents(&self) -> usize {
        self.agents.len()
    }

    /// Act on one message from the server; `Some(reason)` when the link is to end.
    pub(crate) fn on_control(
        &mut self,
        ctx: &Arc<Context>,
        up: &mpsc::UnboundedSender<Up>,
        message: ControlMessage,
    ) -> Option<String> {
        match message {
            ControlMessage::Welcome { .. } | ControlMessage::Heartbeat {} => {}
            ControlMessage::Goodbye { reason } => {
                return Some(format!("the server said goodbye: {reason}"));
            }
            ControlMessage::Launch { agent, spec } => self.launch(ctx, up, agent, spec),
            ControlMessage::Prepare { agent, spec } => {
                // The session id names directories and sandboxes here: only a plain id.
                if !is_session_id(&agent.session_id) {
                    let reason = "the session id is not 1 to 64 letters, digits or '-'";
                    say_prepare_error(up, agent, reason);
                    return None;
                }
                // A newer `prepare` of the agent replaces what an older one held or does.
                self.prepared.remove(&agent);
                let handle = prepare::spawn(ctx.clone(), agent.clone(), spec, up.clone());
                self.preparing.insert(agent, handle);
            }
            ControlMessage::Release { agent } => {
                self.prepared.remove(&agent);
            }
            ControlMessage::Stdin { agent, line } => {
                if let Some(handle) = self.agents.get(&agent) {
                    let _ = handle.stdin.send(line);
                }
            }
            ControlMessage::Kill { agent, reason } => {
                self.prepared.remove(&agent);
                if self.preparing.remove(&agent).is_some() {
                    tracing::info!(session_id = %agent.session_id, epoch = agent.epoch, ?reason, "the server stopped preparing an environment");
                }
                if let Some(handle) = self.agents.remove(&agent) {
                    tracing::info!(session_id = %agent.session_id, epoch = agent.epoch, ?reason, "the server asked to kill an agent");
                    let _ = handle.kill.send(());
                }
            }
        }
        None
    }

    fn launch(
        &mut self,
        ctx: &Arc<Context>,
        up: &mpsc::UnboundedSender<Up>,
        agent: AgentRef,
        spec: LaunchSpec,
    ) {
        let refuse = |agent: AgentRef, reason: String| {
            let _ = up.send(Up::Message(RunnerMessage::LaunchFailed { agent, reason }));
        };
        // The session id names a directory here: only a plain id is taken.
        if !is_session_id(&agent.session_id) {
            let reason = "the session id is not 1 to 64 letters, digits or '-'".to_owned();
            return refuse(agent, reason);
        }
        if self.agents.len() >= ctx.settings.capacity as usize {
            let reason = format!("the runner is at its capacity of {}", ctx.settings.capacity);
            return refuse(agent, reason);
        }
        let environment = match take_held(&mut self.prepared, &agent, &spec) {
            Ok(held) => held,
            Err(reason) => return refuse(agent, reason),
        };
        let handle = agent::spawn(ctx.clone(), agent.clone(), spec, environment, up.clone());
        self.agents.insert(agent, handle);
    }

    /// Take one piece of news from the link's tasks; what to tell the server, if anything.
    pub(crate) fn on_up(&mut self, up: Up) -> Option<RunnerMessage> {
        match up {
            Up::Message(message) => Some(message),
            Up::Ended(agent, launch) => {
                if self.agents.get(&agent).is_some_and(|h| h.launch == launch) {
                    self.agents.remove(&agent);
                }
                None
            }
            Up::Prepared {
                agent,
                number,
                held,
                done,
            } => {
                // A `prepare` the server stopped or replaced: nobody waits for its end.
                if self
                    .preparing
                    .get(&agent)
                    .is_none_or(|h| h.number != number)
                {
                    return None;
                }
                self.preparing.remove(&agent);
                if let Some(held) = held {
                    self.prepared.insert(agent, held);
                }
                Some(done)
            }
        }
    }
}

/// The snapshot held for `agent` when its launch names one: it must be the key (and base
/// image) the `prepare` reported.
fn take_held(
    prepared: &mut HashMap<AgentRef, Held>,
    agent: &AgentRef,
    spec: &LaunchSpec,
) -> Result<Option<Held>, String> {
    let Some(key) = &spec.environment_key else {
        return Ok(None);
    };
    match prepared.remove(agent) {
        Some(held) if &held.lease.meta.key == key && held.base_image == spec.base_image => {
            Ok(Some(held))
        }
        _ => Err("its environment is not prepared on this runner (prepare it first)".to_owned()),
    }
}

fn say_prepare_error(up: &mpsc::UnboundedSender<Up>, agent: AgentRef, reason: &str) {
    let outcome = ultraplan_protocol::runner::EnvironmentOutcome::Error {
        reason: reason.to_owned(),
    };
    let _ = up.send(Up::Message(RunnerMessage::EnvironmentDone {
        agent,
        outcome,
    }));
}

/// A session id as the server makes them (a UUID): safe as a path component and in logs.
fn is_session_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::is_session_id;

    #[test]
    fn only_plain_session_ids_name_a_workspace() {
        let cases = [
            ("1bb6730a-cbba-4f44-b5f2-d9b31c2f050a", true),
            ("", false),
            ("..", false),
            ("../../etc", false),
            ("a/b", false),
            ("a\u{1b}[31m", false),
        ];
        for (id, ok) in cases {
            assert_eq!(is_session_id(id), ok, "{id:?}");
        }
        assert!(!is_session_id(&"a".repeat(65)));
    }
}

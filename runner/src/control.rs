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
    use std::time::Duration;

    use super::*;
    use crate::environment::{EnvironmentCache, SnapshotMeta};

    fn held(cache: &EnvironmentCache, key: &str, image: Option<&str>) -> Held {
        let staging = cache.stage(None).expect("stage");
        let meta = SnapshotMeta {
            key: key.to_owned(),
            built_at_ms: crate::environment::cache::now_ms(),
            setup_ms: 1,
            generation: 0,
            maintained_at_ms: None,
        };
        Held {
            lease: cache.commit(staging, meta).expect("commit"),
            base_image: image.map(str::to_owned),
        }
    }

    #[test]
    fn a_launch_takes_only_the_snapshot_its_prepare_left() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = EnvironmentCache::new(dir.path().to_path_buf(), Duration::from_secs(60));
        let (key, other) = ("a".repeat(64), "b".repeat(64));
        let agent = AgentRef {
            session_id: "s1".to_owned(),
            epoch: 2,
        };
        let spec = |key: Option<&str>, image: Option<&str>| LaunchSpec {
            environment_key: key.map(str::to_owned),
            base_image: image.map(str::to_owned),
            ..LaunchSpec::default()
        };
        let mut prepared = HashMap::new();
        assert!(matches!(
            take_held(&mut prepared, &agent, &spec(None, None)),
            Ok(None)
        ));
        let cases = [
            (Some(key.as_str()), None, None, false, "nothing prepared"),
            (
                Some(other.as_str()),
                Some(key.as_str()),
                None,
                false,
                "another key",
            ),
            (
                Some(key.as_str()),
                Some(key.as_str()),
                Some("sha256:x"),
                false,
                "another image",
            ),
            (
                Some(key.as_str()),
                Some(key.as_str()),
                None,
                true,
                "the prepared one",
            ),
        ];
        for (asked, held_key, image, taken, what) in cases {
            prepared.clear();
            if let Some(held_key) = held_key {
                prepared.insert(agent.clone(), held(&cache, held_key, None));
            }
            let got = take_held(&mut prepared, &agent, &spec(asked, image));
            assert_eq!(got.is_ok_and(|h| h.is_some()), taken, "{what}");
            assert!(
                prepared.is_empty(),
                "{what}: a launch always settles what was held"
            );
        }
    }

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

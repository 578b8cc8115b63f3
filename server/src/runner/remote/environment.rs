//! Environments on a linked runner (docs/ARCHITECTURE.md §5.3, §6.5): a `prepare` asks the
//! runner whose agents will use the snapshot to make it ready on its disk, and waits for its
//! end while its output streams into the session's log.
//!
//! The runner is not trusted: its lines are masked again with the secrets sent for the run,
//! cleaned and capped (in length, per message and per run), its report's tail the same, and
//! news of a `prepare` this link is not waiting for is refused like any other message of a
//! lease this server does not hold.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use ultraplan_protocol::runner::{
    AgentRef, ControlMessage, EnvironmentOutcome, EnvironmentSpec,
    MAX_ENVIRONMENT_LINES_PER_MESSAGE, PreparePhase, RunReport,
};
use ultraplan_runner::environment::SnapshotMeta;
use ultraplan_runner::environment::output::{Redactor, TAIL_LINES};

use super::{LAUNCH_TIMEOUT, RemoteLink};

/// Most output lines one run may log; the rest are counted and dropped.
pub const MAX_PREPARE_LINES: usize = 20_000;
/// The longest reason a runner may give.
const MAX_REASON_BYTES: usize = 4096;
/// The longest image id a runner may report.
const MAX_IMAGE_ID_BYTES: usize = 256;

/// The link's end of one `prepare`.
pub(super) struct PrepareRoute {
    lines: mpsc::UnboundedSender<String>,
    redactor: Redactor,
    /// Lines this run may still log.
    left: usize,
    dropped: u64,
    done: oneshot::Sender<EnvironmentOutcome>,
}

impl PrepareRoute {
    /// Pass on a message's lines, masked and capped.
    pub(super) fn output(&mut self, lines: Vec<String>) {
        let offered = lines.len();
        for line in lines.into_iter().take(MAX_ENVIRONMENT_LINES_PER_MESSAGE) {
            if self.left == 0 {
                self.dropped += 1;
                continue;
            }
            self.left -= 1;
            let _ = self.lines.send(self.redactor.line(line.as_bytes()));
        }
        self.dropped += offered.saturating_sub(MAX_ENVIRONMENT_LINES_PER_MESSAGE) as u64;
    }

    /// The run ended: say how, once what it dropped is said.
    pub(super) fn end(self, outcome: EnvironmentOutcome) {
        if self.dropped > 0 {
            let _ = self.lines.send(format!(
                "… ({} more lines of output were dropped)",
                self.dropped
            ));
        }
        let _ = self.done.send(checked(outcome, &self.redactor));
    }
}

/// A runner's outcome with its free text masked and capped.
fn checked(outcome: EnvironmentOutcome, redactor: &Redactor) -> EnvironmentOutcome {
    let report = |mut report: RunReport| {
        let skip = report.tail.len().saturating_sub(TAIL_LINES);
        report.tail = report
            .tail
            .iter()
            .skip(skip)
            .map(|line| redactor.line(line.as_bytes()))
            .collect();
        report
    };
    match outcome {
        EnvironmentOutcome::Built {
            snapshot,
            report: r,
        } => EnvironmentOutcome::Built {
            snapshot,
            report: report(r),
        },
        EnvironmentOutcome::Failed { report: r } => {
            EnvironmentOutcome::Failed { report: report(r) }
        }
        EnvironmentOutcome::Error { reason } => {
            let mut reason = redactor.line(reason.as_bytes());
            if reason.len() > MAX_REASON_BYTES {
                let mut end = MAX_REASON_BYTES;
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                reason.truncate(end);
            }
            EnvironmentOutcome::Error { reason }
        }
        other => other,
    }
}

/// A snapshot a linked runner holds for the session's next agent; dropping it tells the
/// runner to let go of it unless an agent was launched with it.
pub struct RemoteSnapshot {
    pub meta: SnapshotMeta,
    /// The Docker image (its id on the runner's engine) the snapshot is built on.
    pub base_image: Option<String>,
    link: RemoteLink,
    agent: AgentRef,
}

impl std::fmt::Debug for RemoteSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSnapshot")
            .field("key", &self.meta.key)
            .field("runner", &self.link.name())
            .finish_non_exhaustive()
    }
}

impl Drop for RemoteSnapshot {
    fn drop(&mut self) {
        self.link.send(ControlMessage::Release {
            agent: self.agent.clone(),
        });
    }
}

impl RemoteLink {
    /// Whether the runner said it prepares environments.
    pub fn prepares_environments(&self) -> bool {
        self.inner.environments
    }

    /// Ask the runner to make `agent`'s environment ready and wait for its end; its output
    /// lines go to `lines` (masked with `spec`'s secrets) as they come. `Err` when the link
    /// went, or the runner took too long (it is then told to stop).
    pub async fn prepare(
        &self,
        agent: AgentRef,
        spec: EnvironmentSpec,
        lines: mpsc::UnboundedSender<String>,
    ) -> Result<EnvironmentOutcome, String> {
        let wait = match spec.phase {
            PreparePhase::Check => LAUNCH_TIMEOUT,
            _ => LAUNCH_TIMEOUT + Duration::from_secs(spec.timeout_seconds),
        };
        let (done, outcome) = oneshot::channel();
        let route = PrepareRoute {
            lines,
            redactor: Redactor::new(spec.secrets.0.values().map(String::as_str)),
            left: MAX_PREPARE_LINES,
            dropped: 0,
            done,
        };
        // A newer `prepare` of the same lease replaces an older one (whose waiter then ends).
        self.prepares().insert(agent.clone(), route);
        if !self.send(ControlMessage::Prepare {
            agent: agent.clone(),
            spec,
        }) {
            self.prepares().remove(&agent);
            return Err("the runner's link is closed".to_owned());
        }
        match tokio::time::timeout(wait, outcome).await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(_)) => Err("the runner's link was lost".to_owned()),
            Err(_) => {
                self.prepares().remove(&agent);
                self.kill(&agent, "its environment was not ready in time");
                Err(format!("the runner did not answer within {wait:?}"))
            }
        }
    }

    /// A snapshot the runner reported, held for `agent`; `None` when its key is not a
    /// plain key.
    pub fn snapshot(
        &self,
        agent: &AgentRef,
        info: &ultraplan_protocol::runner::SnapshotInfo,
    ) -> Option<RemoteSnapshot> {
        let meta = ultraplan_runner::environment::wire::meta_from_wire(info);
        let image_ok = info.base_image.as_ref().is_none_or(|id| {
            id.len() <= MAX_IMAGE_ID_BYTES && id.chars().all(|c| c.is_ascii_graphic())
        });
        let Some(meta) = meta.filter(|_| image_ok) else {
            self.send(ControlMessage::Release {
                agent: agent.clone(),
            });
            return None;
        };
        Some(RemoteSnapshot {
            meta,
            base_image: info.base_image.clone(),
            link: self.clone(),
            agent: agent.clone(),
        })
    }
}

//! Keyless runners linked to this process (docs/ARCHITECTURE.md §5.3).
//!
//! Each linked runner gets a runner of its own here: an [`Orchestrator`] over the runner's
//! link, claiming sessions under leases in the runner's name up to its capacity. The session
//! tasks (the lifecycle, the event log, the model gateway and its keys) stay in this process;
//! the runner only starts agents in its sandbox and relays their stdio. When the link goes,
//! its sessions go back to the queue at once, still marked running, and the next runner
//! resumes them from the log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::core::Core;
use crate::orchestrator::{ModelBackend, Orchestrator, OrchestratorSettings};
use crate::runner::Runner;
use crate::runner::remote::RemoteLink;

/// Most agents one runner may ask to run at once.
pub const MAX_CAPACITY: u32 = 64;

/// Why a runner cannot join.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JoinError {
    #[error("a runner named {0} is already linked to this server")]
    AlreadyLinked(String),
    #[error("a runner's capacity must be 1 to {MAX_CAPACITY}, not {0}")]
    Capacity(u32),
    #[error("the runner's name {0:?} is not 1 to 64 letters, digits, '.', '_' or '-'")]
    Name(String),
}

/// The runners linked here.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<FleetInner>,
}

struct FleetInner {
    core: Core,
    models: Arc<dyn ModelBackend>,
    /// What every linked runner's sessions run with, but its name and capacity.
    template: OrchestratorSettings,
    /// The orchestrator of each linked runner, by lease name (`None` while it joins).
    linked: Mutex<HashMap<String, Option<Orchestrator>>>,
}

/// A joined runner: its link and the orchestrator that claims for it.
pub struct Member {
    pub link: RemoteLink,
    pub orchestrator: Orchestrator,
}

impl Fleet {
    pub fn new(core: Core, models: Arc<dyn ModelBackend>, template: OrchestratorSettings) -> Self {
        Fleet {
            inner: Arc::new(FleetInner {
                core,
                models,
                template,
                linked: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn linked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<Orchestrator>>> {
        self.inner.linked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a lease holds: a linked runner silent this long is cut off.
    pub fn lease(&self) -> std::time::Duration {
        self.inner.template.lease
    }

    /// Runners linked here now.
    pub fn len(&self) -> usize {
        self.linked().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Link a runner: sessions its name held before (a previous link, cut) go back to the
    /// queue, then it claims up to `capacity` sessions.
    pub async fn join(
        &self,
        name: &str,
        capacity: u32,
        link: RemoteLink,
    ) -> Result<Member, JoinError> {
        check_name(name)?;
        if capacity == 0 || capacity > MAX_CAPACITY {
            return Err(JoinError::Capacity(capacity));
        }
        // Reserved under one lock: two links of one name never both join.
        {
            let mut linked = self.linked();
            if linked.contains_key(name) {
                return Err(JoinError::AlreadyLinked(name.to_owned()));
            }
            linked.insert(name.to_owned(), None);
        }
        let mut settings = self.inner.template.clone();
        settings.runner_name = name.to_owned();
        settings.max_running = capacity as usize;
        let orchestrator = Orchestrator::new(
            self.inner.core.clone(),
            Runner::Remote(link.clone()),
            self.inner.models.clone(),
            settings,
        );
        self.linked()
            .insert(name.to_owned(), Some(orchestrator.clone()));
        match orchestrator.start(false).await {
            Ok(requeued) => tracing::info!(runner = name, capacity, requeued, "runner linked"),
            Err(error) => {
                tracing::warn!(runner = name, %error, "cannot requeue the runner's previous sessions")
            }
        }
        Ok(Member { link, orchestrator })
    }

    /// Sessions whose agents the linked runners run now.
    pub fn agents_running(&self) -> usize {
        let members: Vec<Orchestrator> = self.linked().values().flatten().cloned().collect();
        members.iter().map(Orchestrator::live_count).sum()
    }

    /// This process is shutting down: every linked runner's sessions go back to the queue at
    /// once (their agents are stopped), rather than after their leases lapse. The runners redial
    /// (through the proxy, another replica) and resume them.
    pub async fn drain(&self) -> usize {
        let members: Vec<Orchestrator> = self.linked().values().flatten().cloned().collect();
        let drained = futures_util::future::join_all(members.iter().map(Orchestrator::drain)).await;
        drained.into_iter().sum()
    }

    /// The runner's link is gone: its agents are gone with it, so its sessions go back to the
    /// queue, still running, for the next runner to resume.
    pub async fn leave(&self, member: Member) {
        member.link.close();
        let handed_back = member.orchestrator.drain().await;
        self.linked().remove(member.link.name());
        tracing::info!(runner = member.link.name(), handed_back, "runner unlinked");
    }
}

/// A lease name: 1 to 64 of `[A-Za-z0-9._-]` (a token's name, `:`, the runner's own name).
fn check_name(name: &str) -> Result<(), JoinError> {
    let ok = |part: &str| {
        !part.is_empty()
            && part.len() <= 64
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    match name.split_once(':') {
        Some((token, own)) if ok(token) && ok(own) => Ok(()),
        _ => Err(JoinError::Name(name.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_token_and_runner() {
        let cases = [
            ("ci:runner-1", true),
            ("ci:host.example_2", true),
            ("ci", false),
            ("ci:", false),
            (":r", false),
            ("ci:a b", false),
            ("ci:a:b", false),
            ("ci:\u{1b}[31m", false),
        ];
        for (name, ok) in cases {
            assert_eq!(check_name(name).is_ok(), ok, "{name}");
        }
        assert!(check_name(&format!("ci:{}", "x".repeat(65))).is_err());
    }
}

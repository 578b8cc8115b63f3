//! Where a session's environment is made ready (docs/ARCHITECTURE.md §6.5): in this process's
//! cache for the in-process runner, or on the linked runner whose agents will use it (§5.3).
//! The session task decides and logs the same way for both; only these steps differ.

use std::path::PathBuf;

use tokio::sync::mpsc;
use ultraplan_protocol::runner::{
    AgentRef, EnvironmentOutcome, EnvironmentSpec, PreparePhase, SecretValues,
};
use ultraplan_runner::environment::output::Redactor;
use ultraplan_runner::environment::{
    Environments, Lease, PrepareError, Prepared, SetupReport, SetupRun, SnapshotMeta, Wanted,
};

use crate::runner::Sandbox;
use crate::runner::remote::{RemoteLink, RemoteSnapshot};

/// Where the environment is prepared.
pub(super) enum Host {
    /// This machine's sandbox and cache.
    Local {
        sandbox: Sandbox,
        environments: Environments,
    },
    /// A linked runner, for one lease of the session.
    Remote {
        link: RemoteLink,
        agent: AgentRef,
        bundle_id: String,
        log_filter: String,
    },
}

/// A snapshot held for the session's next agent (never swept while held).
#[derive(Debug)]
pub(crate) enum Snapshot {
    Local(Lease),
    Remote(RemoteSnapshot),
}

impl Snapshot {
    pub(super) fn meta(&self) -> &SnapshotMeta {
        match self {
            Snapshot::Local(lease) => &lease.meta,
            Snapshot::Remote(remote) => &remote.meta,
        }
    }

    /// Its tree on this machine (a local snapshot's).
    pub(super) fn local_tree(&self) -> Option<PathBuf> {
        match self {
            Snapshot::Local(lease) => Some(lease.tree.clone()),
            Snapshot::Remote(_) => None,
        }
    }

    /// What a linked runner needs to bind it: its key and base image.
    pub(super) fn remote_binding(&self) -> Option<(String, Option<String>)> {
        match self {
            Snapshot::Local(_) => None,
            Snapshot::Remote(remote) => Some((remote.meta.key.clone(), remote.base_image.clone())),
        }
    }
}

/// How a setup made the environment ready.
pub(super) enum Made {
    Reused(Snapshot),
    Built(Snapshot, SetupReport),
}

/// Why setup or maintenance did not make it ready.
pub(super) enum HostError {
    /// It ran and failed.
    Setup(SetupReport),
    /// It could not run, and why.
    Other(String),
}

impl From<PrepareError> for HostError {
    fn from(error: PrepareError) -> Self {
        match error {
            PrepareError::Setup(report) => HostError::Setup(report),
            other => HostError::Other(other.to_string()),
        }
    }
}

impl Host {
    /// Key `wanted` on the host's base (a `[base] image`'s id where the agents run) and look
    /// its snapshot up: the image id (for a local sandbox), and the snapshot if there is one.
    pub(super) async fn check(
        &self,
        wanted: &mut Wanted,
    ) -> Result<(Option<String>, Option<Snapshot>), String> {
        match self {
            Host::Local {
                sandbox,
                environments,
            } => {
                let image = match wanted.file.base_image.clone() {
                    Some(reference) => {
                        let id = sandbox
                            .image_id(&reference)
                            .await
                            .map_err(|e| e.to_string())?;
                        wanted.on_image(&id);
                        Some(id)
                    }
                    None => None,
                };
                Ok((image, environments.lookup(&wanted.key).map(Snapshot::Local)))
            }
            Host::Remote { link, agent, .. } => {
                let spec = self.spec(wanted, PreparePhase::Check, None);
                let (lines, _) = mpsc::unbounded_channel();
                match link.prepare(agent.clone(), spec, lines).await? {
                    EnvironmentOutcome::Reused { snapshot } => {
                        let snapshot = link
                            .snapshot(agent, &snapshot)
                            .ok_or("the runner named its snapshot oddly")?;
                        wanted.key = snapshot.meta.key.clone();
                        Ok((None, Some(Snapshot::Remote(snapshot))))
                    }
                    EnvironmentOutcome::Missing { key }
                        if ultraplan_runner::environment::cache::plain_key(&key) =>
                    {
                        wanted.key = key;
                        Ok((None, None))
                    }
                    EnvironmentOutcome::Error { reason } => Err(reason),
                    _ => Err("the runner answered a check with something else".to_owned()),
                }
            }
        }
    }

    /// Run `run` (setup) unless a snapshot of the key lands first.
    pub(super) async fn build(
        &self,
        wanted: &Wanted,
        run: SetupRun,
        lines: mpsc::UnboundedSender<String>,
    ) -> Result<Made, HostError> {
        match self {
            Host::Local {
                sandbox,
                environments,
            } => match environments.build(sandbox, &wanted.key, run, lines).await? {
                Prepared::Reused(lease) => Ok(Made::Reused(Snapshot::Local(lease))),
                Prepared::Built(lease, report) => Ok(Made::Built(Snapshot::Local(lease), report)),
            },
            Host::Remote { .. } => {
                match self
                    .remote(wanted, PreparePhase::Setup, &run, lines)
                    .await?
                {
                    Some((snapshot, None)) => Ok(Made::Reused(snapshot)),
                    Some((snapshot, Some(report))) => Ok(Made::Built(snapshot, report)),
                    None => Err(HostError::Other(
                        "the runner answered setup saying there is nothing to maintain".to_owned(),
                    )),
                }
            }
        }
    }

    /// Run `run` (maintenance) on a copy of the snapshot; `None` when it is gone.
    pub(super) async fn maintain(
        &self,
        wanted: &Wanted,
        run: SetupRun,
        lines: mpsc::UnboundedSender<String>,
    ) -> Result<Option<(Snapshot, SetupReport)>, HostError> {
        match self {
            Host::Local {
                sandbox,
                environments,
            } => Ok(environments
                .maintain(sandbox, &wanted.key, run, lines)
                .await?
                .map(|(lease, report)| (Snapshot::Local(lease), report))),
            Host::Remote { .. } => {
                match self
                    .remote(wanted, PreparePhase::Maintenance, &run, lines)
                    .await?
                {
                    Some((snapshot, Some(report))) => Ok(Some((snapshot, report))),
                    Some((_, None)) => Err(HostError::Other(
                        "the runner answered maintenance with a reuse".to_owned(),
                    )),
                    None => Ok(None),
                }
            }
        }
    }

    /// A setup or maintenance run on the linked runner: the snapshot, with the run's report
    /// when it ran; `None` when the snapshot to maintain is gone.
    async fn remote(
        &self,
        wanted: &Wanted,
        phase: PreparePhase,
        run: &SetupRun,
        lines: mpsc::UnboundedSender<String>,
    ) -> Result<Option<(Snapshot, Option<SetupReport>)>, HostError> {
        let Host::Remote { link, agent, .. } = self else {
            return Err(HostError::Other("not a linked runner".to_owned()));
        };
        let spec = self.spec(wanted, phase, Some(run));
        let outcome = link
            .prepare(agent.clone(), spec, lines)
            .await
            .map_err(HostError::Other)?;
        let held = |info| {
            link.snapshot(agent, info)
                .map(Snapshot::Remote)
                .ok_or_else(|| HostError::Other("the runner named its snapshot oddly".to_owned()))
        };
        // The link masked and capped what the runner said; this only changes its shape.
        let plain = Redactor::default();
        match outcome {
            EnvironmentOutcome::Reused { snapshot } => Ok(Some((held(&snapshot)?, None))),
            EnvironmentOutcome::Built { snapshot, report } => Ok(Some((
                held(&snapshot)?,
                Some(SetupReport::from_wire(report, &plain)),
            ))),
            EnvironmentOutcome::Failed { report } => {
                Err(HostError::Setup(SetupReport::from_wire(report, &plain)))
            }
            EnvironmentOutcome::Gone {} => Ok(None),
            EnvironmentOutcome::Error { reason } => Err(HostError::Other(reason)),
            EnvironmentOutcome::Missing { .. } => Err(HostError::Other(
                "the runner answered a run with a check's answer".to_owned(),
            )),
        }
    }

    /// What a linked runner is sent: the definition as keyed, and for a run its secrets and
    /// time limit.
    fn spec(
        &self,
        wanted: &Wanted,
        phase: PreparePhase,
        run: Option<&SetupRun>,
    ) -> EnvironmentSpec {
        let (bundle_id, log_filter) = match self {
            Host::Remote {
                bundle_id,
                log_filter,
                ..
            } => (bundle_id.clone(), Some(log_filter.clone())),
            Host::Local { .. } => (String::new(), None),
        };
        EnvironmentSpec {
            phase,
            bundle_id,
            definition: wanted.definition().to_owned(),
            lock_files: wanted.lock_digests(),
            scope: wanted.scope().to_owned(),
            secrets: SecretValues(run.map(|r| r.secrets.clone()).unwrap_or_default()),
            timeout_seconds: run.map_or(1, |r| r.timeout.as_secs().max(1)),
            log_filter,
        }
    }
}

//! A `prepare` from the server (docs/ARCHITECTURE.md §5.3, §6.5): make a session's
//! environment ready on this runner's disk, where its agents run. The runner keys the
//! definition on its own base, looks the snapshot up, or runs setup or maintenance in its
//! sandbox with the secrets the server sent for that run only (fed to setup's stdin, never
//! logged or written here), streams the masked output up the link, and holds the snapshot
//! it leased for the agent's launch.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use ultraplan_protocol::runner::{
    AgentRef, EnvironmentOutcome, EnvironmentSpec, MAX_ENVIRONMENT_LINES_PER_MESSAGE, PreparePhase,
    RunnerMessage,
};
use ultraplan_protocol::secret_names;

use crate::context::{Context, Held, Up};
use crate::egress::NetworkPolicy;
use crate::environment::wire::snapshot_info;
use crate::environment::{Lease, PrepareError, Prepared, SetupRun, Wanted};
use crate::sandbox::Sandbox;

/// The longest time limit a server may give setup.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// Most secrets one run takes.
const MAX_SECRETS: usize = 32;
/// How long output lines gather before they go up the link.
const BATCH_WINDOW: Duration = Duration::from_millis(100);

/// The link's end of a running `prepare`: dropping it stops the run.
pub(crate) struct PrepareHandle {
    _cancel: oneshot::Sender<()>,
    /// Tells this `prepare` apart from a later one of the same agent.
    pub(crate) number: u64,
}

/// Numbers the `prepare`s of this runner.
static PREPARES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Start a `prepare`; its end comes up the link as [`Up::Prepared`].
pub(crate) fn spawn(
    ctx: Arc<Context>,
    agent: AgentRef,
    spec: EnvironmentSpec,
    up: mpsc::UnboundedSender<Up>,
) -> PrepareHandle {
    let (cancel, cancelled) = oneshot::channel();
    let number = PREPARES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tokio::spawn(async move {
        let phase = spec.phase;
        tracing::info!(session_id = %agent.session_id, epoch = agent.epoch, ?phase, "preparing the environment");
        let (outcome, held) = match prepare(&ctx, &agent, spec, cancelled, &up).await {
            Ok(done) => done,
            Err(reason) => (EnvironmentOutcome::Error { reason }, None),
        };
        if let EnvironmentOutcome::Error { reason } = &outcome {
            tracing::warn!(session_id = %agent.session_id, ?phase, ?reason, "the environment could not be prepared");
        }
        let done = RunnerMessage::EnvironmentDone {
            agent: agent.clone(),
            outcome,
        };
        let _ = up.send(Up::Prepared {
            agent,
            number,
            held,
            done,
        });
    });
    PrepareHandle {
        _cancel: cancel,
        number,
    }
}

type Done = (EnvironmentOutcome, Option<Held>);

async fn prepare(
    ctx: &Context,
    agent: &AgentRef,
    spec: EnvironmentSpec,
    cancelled: oneshot::Receiver<()>,
    up: &mpsc::UnboundedSender<Up>,
) -> Result<Done, String> {
    check(&spec)?;
    let mut wanted = Wanted::from_wire(&spec.definition, &spec.lock_files, &spec.scope)
        .map_err(|e| e.to_string())?;
    let base_image = match wanted.file.base_image.clone() {
        Some(reference) => {
            let id = image_id(&ctx.sandbox, &reference).await?;
            wanted.on_image(&id);
            Some(id)
        }
        None => None,
    };
    let held = |lease: Lease| Held {
        lease,
        base_image: base_image.clone(),
    };
    let environments = &ctx.environments;
    let (commands, maintaining) = match spec.phase {
        PreparePhase::Check => {
            return Ok(match environments.lookup(&wanted.key) {
                Some(lease) => {
                    let snapshot = snapshot_info(&lease.meta, base_image.clone());
                    (EnvironmentOutcome::Reused { snapshot }, Some(held(lease)))
                }
                None => (EnvironmentOutcome::Missing { key: wanted.key }, None),
            });
        }
        PreparePhase::Setup => (wanted.file.setup.clone(), false),
        PreparePhase::Maintenance => (wanted.file.maintenance.clone(), true),
    };
    let bundle = crate::bundle::ensure(ctx, &spec.bundle_id).await?;
    let network = NetworkPolicy::parse(&wanted.file.setup_network).map_err(|e| e.to_string())?;
    let file_limit = wanted.file.timeout.unwrap_or(MAX_TIMEOUT);
    let run = SetupRun {
        session_id: agent.session_id.clone(),
        workspace: bundle,
        tree: std::path::PathBuf::new(),
        commands,
        secrets: spec.secrets.0,
        network,
        timeout: Duration::from_secs(spec.timeout_seconds).min(file_limit),
        agent_binary: ctx.settings.agent_binary.clone(),
        limits: ctx.settings.limits.clone(),
        log_filter: spec.log_filter.unwrap_or_else(|| "info".to_owned()),
        base_image: base_image.clone(),
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let forwarding = forward(rx, agent, up, cancelled);
    let key = wanted.key.clone();
    if maintaining {
        let maintaining = environments.maintain(&ctx.sandbox, &key, run, tx);
        let (maintained, ()) = tokio::join!(maintaining, forwarding);
        return Ok(match maintained {
            Ok(Some((lease, report))) => {
                let snapshot = snapshot_info(&lease.meta, base_image.clone());
                let report = report.to_wire();
                (
                    EnvironmentOutcome::Built { snapshot, report },
                    Some(held(lease)),
                )
            }
            Ok(None) => (EnvironmentOutcome::Gone {}, None),
            Err(error) => (failed(error), None),
        });
    }
    let building = environments.build(&ctx.sandbox, &key, run, tx);
    let (built, ()) = tokio::join!(building, forwarding);
    Ok(match built {
        Ok(Prepared::Reused(lease)) => {
            let snapshot = snapshot_info(&lease.meta, base_image.clone());
            (EnvironmentOutcome::Reused { snapshot }, Some(held(lease)))
        }
        Ok(Prepared::Built(lease, report)) => {
            let snapshot = snapshot_info(&lease.meta, base_image.clone());
            let report = report.to_wire();
            (
                EnvironmentOutcome::Built { snapshot, report },
                Some(held(lease)),
            )
        }
        Err(error) => (failed(error), None),
    })
}

/// The id this runner's own Docker engine gives `reference` (runners never pull).
async fn image_id(sandbox: &Sandbox, reference: &str) -> Result<String, String> {
    if !matches!(sandbox, Sandbox::Docker(_)) {
        return Err(format!(
            "the environment's base image {reference} needs the docker sandbox; the runner \
             uses {}: use [base] image = \"host\", or start ultraplan-runner with --sandbox docker",
            sandbox.name()
        ));
    }
    sandbox.image_id(reference).await.map_err(|e| e.to_string())
}

fn failed(error: PrepareError) -> EnvironmentOutcome {
    match error {
        PrepareError::Setup(report) => EnvironmentOutcome::Failed {
            report: report.to_wire(),
        },
        other => EnvironmentOutcome::Error {
            reason: other.to_string(),
        },
    }
}

/// What the server sent, checked before anything runs: a plain bundle id, a bounded time
/// limit, and secrets that are what the server's own rules allow.
fn check(spec: &EnvironmentSpec) -> Result<(), String> {
    if !ultraplan_bundle::is_valid_sha256(&spec.bundle_id) {
        return Err("the bundle id is not a sha256".to_owned());
    }
    if spec.timeout_seconds == 0 || spec.timeout_seconds > MAX_TIMEOUT.as_secs() {
        return Err(format!(
            "a time limit of {} s is not between 1 s and {} s",
            spec.timeout_seconds,
            MAX_TIMEOUT.as_secs()
        ));
    }
    if spec.phase == PreparePhase::Check && !spec.secrets.is_empty() {
        return Err("a check takes no secrets".to_owned());
    }
    if spec.secrets.0.len() > MAX_SECRETS {
        return Err(format!("more than {MAX_SECRETS} secrets"));
    }
    for (name, value) in &spec.secrets.0 {
        if let Some(problem) = secret_names::name_problem(name) {
            return Err(format!("secret {name:?}: {problem}"));
        }
        if let Some(problem) = secret_names::value_problem(value) {
            return Err(format!("secret {name}: {problem}"));
        }
    }
    Ok(())
}

/// Pass setup's lines up the link in batches, until they end or the server stops the run
/// (dropping the receiver then kills setup).
async fn forward(
    mut rx: mpsc::UnboundedReceiver<String>,
    agent: &AgentRef,
    up: &mpsc::UnboundedSender<Up>,
    mut cancelled: oneshot::Receiver<()>,
) {
    loop {
        let first = tokio::select! {
            line = rx.recv() => match line {
                Some(line) => line,
                None => return,
            },
            _ = &mut cancelled => return,
        };
        let mut lines = vec![first];
        let until = tokio::time::Instant::now() + BATCH_WINDOW;
        while lines.len() < MAX_ENVIRONMENT_LINES_PER_MESSAGE {
            match tokio::time::timeout_at(until, rx.recv()).await {
                Ok(Some(line)) => lines.push(line),
                Ok(None) | Err(_) => break,
            }
        }
        let message = RunnerMessage::EnvironmentOutput {
            agent: agent.clone(),
            lines,
        };
        if up.send(Up::Message(message)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ultraplan_protocol::runner::SecretValues;

    use super::*;

    fn spec() -> EnvironmentSpec {
        EnvironmentSpec {
            phase: PreparePhase::Setup,
            bundle_id: "a".repeat(64),
            definition: "[setup]\ncommands = [\"true\"]\n".to_owned(),
            lock_files: vec![],
            scope: "alice".to_owned(),
            secrets: SecretValues(BTreeMap::from([("TOKEN".to_owned(), "v".to_owned())])),
            timeout_seconds: 60,
            log_filter: None,
        }
    }

    #[test]
    fn a_prepare_is_checked_before_anything_runs() {
        assert_eq!(check(&spec()), Ok(()));
        let mut cases: Vec<(EnvironmentSpec, &str)> = Vec::new();
        let mut bad = spec();
        bad.bundle_id = "../x".to_owned();
        cases.push((bad, "bundle id"));
        let mut bad = spec();
        bad.timeout_seconds = 0;
        cases.push((bad, "time limit"));
        let mut bad = spec();
        bad.timeout_seconds = 10 * 24 * 3600;
        cases.push((bad, "time limit"));
        let mut bad = spec();
        bad.phase = PreparePhase::Check;
        cases.push((bad, "no secrets"));
        let mut bad = spec();
        bad.secrets.0.insert("lower".to_owned(), "v".to_owned());
        cases.push((bad, "lower"));
        let mut bad = spec();
        bad.secrets.0.insert("NUL".to_owned(), "a\0b".to_owned());
        cases.push((bad, "NUL byte"));
        for (spec, says) in cases {
            let error = check(&spec).expect_err(says);
            assert!(error.contains(says), "{says}: {error}");
        }
    }
}

//! The environment half of a session task: before an agent starts, make its repository's
//! environment ready (reuse the cached snapshot, or run setup with its output in the log),
//! or end the session saying why not (docs/ARCHITECTURE.md §6.5).

use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use ultraplan_protocol::constants::{
    ENVIRONMENT_FAILED, ENVIRONMENT_OUTPUT, ENVIRONMENT_READY, ENVIRONMENT_REUSED,
    ENVIRONMENT_SETUP, ERROR_ENVIRONMENT,
};
use ultraplan_protocol::events::{EventBody, SystemEvent};
use ultraplan_protocol::runner::AgentRef;
use ultraplan_runner::egress::{BlockedAttempt, NetworkPolicy};
use ultraplan_runner::environment::{
    SetupEnd, SetupReport, SetupRun, SnapshotMeta, Wanted, named_wanted, read_wanted,
};

use super::SessionTask;
use super::environment_host::{Host, HostError, Made};
use crate::orchestrator::lifecycle::Input;
use crate::runner::Runner;
use crate::secrets::SecretsError;

/// Output lines gathered into one event at most.
const BATCH_LINES: usize = 200;
/// How long output lines gather before they are logged.
const BATCH_WINDOW: Duration = Duration::from_millis(250);

/// Whether the next agent may start.
pub(super) enum Readiness {
    Ready,
    /// The session ended: its result is in the log.
    Ended,
}

pub(super) fn note(subtype: &str, message: String, data: serde_json::Value) -> EventBody {
    EventBody::System(SystemEvent {
        subtype: subtype.to_owned(),
        message: Some(message),
        data,
    })
}

/// "42 s", "5 min", "2 h", "3 days".
pub(crate) fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    }
}

pub(super) fn blocked_json(blocked: &[BlockedAttempt]) -> serde_json::Value {
    blocked
        .iter()
        .map(|b| json!({"host": b.host, "port": b.port, "attempts": b.attempts}))
        .collect()
}

pub(super) fn blocked_text(blocked: &[BlockedAttempt], beyond: u64) -> String {
    if blocked.is_empty() {
        return String::new();
    }
    let hosts: Vec<String> = blocked
        .iter()
        .map(|b| format!("{}:{}", b.host, b.port))
        .collect();
    let more = match beyond {
        0 => String::new(),
        n => format!(" (and {n} more attempts at hosts not listed)"),
    };
    format!(
        " Blocked (not in the allow-list): {}{more}.",
        hosts.join(", ")
    )
}

impl SessionTask {
    /// Make the environment ready for the agent about to start; `self.environment` holds its
    /// snapshot while the agent runs.
    pub(super) async fn ready_environment(
        &mut self,
        transcript: &[EventBody],
    ) -> Result<Readiness, String> {
        // A linked runner is told to let go of the previous agent's snapshot first.
        self.environment = None;
        self.base_image = None;
        self.agent_network = (NetworkPolicy::None, Vec::new());
        let bundle = self.bundle_path().await?;
        let (mut wanted, label) = match self.wanted(&bundle).await? {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(Readiness::Ready),
            Err(why) => return Ok(self.end_environment(why).await),
        };
        let host = match self.environment_host() {
            Ok(host) => host,
            Err(why) => return Ok(self.end_environment(why).await),
        };
        match NetworkPolicy::parse(&wanted.file.agent_network) {
            Ok(policy) => self.agent_network = (policy, wanted.file.agent_network.clone()),
            Err(error) => {
                let why = format!("{label}: [agent] network: {error}");
                return Ok(self.end_environment(why).await);
            }
        }
        let found = match host.check(&mut wanted).await {
            Ok((image, found)) => {
                self.base_image = image;
                found
            }
            Err(why) => return Ok(self.end_environment(why).await),
        };
        if let Some(snapshot) = found {
            let first_here = self.note_reused(snapshot.meta(), transcript).await;
            if !first_here || wanted.file.maintenance.is_empty() {
                self.environment = Some(snapshot);
                return Ok(Readiness::Ready);
            }
            drop(snapshot);
            let commands = wanted.file.maintenance.clone();
            return match self.setup_run(&wanted, &label, bundle, commands).await {
                Ok(run) => self.maintain(&host, &wanted, &label, run).await,
                Err(why) => Ok(self.end_environment(why).await),
            };
        }
        let commands = wanted.file.setup.clone();
        let run = match self.setup_run(&wanted, &label, bundle, commands).await {
            Ok(run) => run,
            Err(why) => return Ok(self.end_environment(why).await),
        };
        self.note_setup(&wanted, &run, (&label, "setup")).await;
        self.build(&host, &wanted, run).await
    }

    /// Where this session's environment is prepared: here for the in-process runner, on the
    /// linked runner for a remote one (if it can); `Err` says why it cannot be.
    fn environment_host(&self) -> Result<Host, String> {
        match &self.inner.runner {
            Runner::Local(sandbox) => Ok(Host::Local {
                sandbox: sandbox.clone(),
                environments: self.inner.settings.environments.clone(),
            }),
            Runner::Remote(link) if link.prepares_environments() => Ok(Host::Remote {
                link: link.clone(),
                agent: AgentRef {
                    session_id: self.session.id.clone(),
                    epoch: self.lease.epoch,
                },
                bundle_id: self.session.bundle_id.clone().unwrap_or_default(),
                log_filter: self.inner.settings.agent_log_filter.clone(),
            }),
            Runner::Remote(link) => Err(format!(
                "this session has an environment (its repository's file or a named one), but \
                 it runs on the linked runner {}, which does not build environments: upgrade \
                 its ultraplan-runner",
                link.name()
            )),
        }
    }

    /// A sandboxed run of `commands` with the environment's setup network and secrets; `Err`
    /// says why it cannot run.
    pub(super) async fn setup_run(
        &self,
        wanted: &Wanted,
        label: &str,
        workspace: std::path::PathBuf,
        commands: Vec<String>,
    ) -> Result<SetupRun, String> {
        let network = NetworkPolicy::parse(&wanted.file.setup_network)
            .map_err(|error| format!("{label}: [setup] network: {error}"))?;
        let secrets = self.setup_secrets(wanted).await?;
        let settings = &self.inner.settings;
        Ok(SetupRun {
            session_id: self.session.id.clone(),
            workspace,
            tree: std::path::PathBuf::new(),
            commands,
            secrets,
            network,
            timeout: wanted
                .file
                .timeout
                .map_or(settings.setup_timeout, |t| t.min(settings.setup_timeout)),
            agent_binary: settings.agent_binary.clone(),
            limits: settings.limits.clone(),
            log_filter: settings.agent_log_filter.clone(),
            base_image: self.base_image.clone(),
        })
    }

    /// What the session's environment is, and what to call it in messages: the named
    /// environment it was launched with, else its repository's file (`None` without one).
    /// The inner `Err` is why it cannot be used.
    async fn wanted(
        &self,
        bundle: &std::path::Path,
    ) -> Result<Result<Option<(Wanted, String)>, String>, String> {
        let owner = self.session.user_id.clone();
        let tree = bundle.to_path_buf();
        // Read afresh: the reviewer may choose another environment when approving.
        let current = self.inner.state.store.session(&self.session.id).await;
        let chosen = match current {
            Ok(Some(row)) => row.context.environment,
            Ok(None) => self.session.context.environment.clone(),
            Err(error) => return Err(error.to_string()),
        };
        let Some(name) = chosen else {
            let read = tokio::task::spawn_blocking(move || read_wanted(&tree, &owner))
                .await
                .map_err(|e| e.to_string())?;
            let label = ultraplan_runner::environment::ENVIRONMENT_FILE.to_owned();
            return Ok(read
                .map(|found| found.map(|w| (w, label)))
                .map_err(|e| e.to_string()));
        };
        let row = match self.inner.state.environments().resolve(&owner, &name).await {
            Ok(row) => row,
            Err(crate::environments::EnvironmentError::Store(error)) => {
                return Err(error.to_string());
            }
            Err(_) => {
                return Ok(Err(format!(
                    "the environment {name} this session was launched with no longer exists"
                )));
            }
        };
        // A shared environment's snapshot serves every user (it names no secrets).
        let scope = if row.shared() {
            "shared".to_owned()
        } else {
            owner
        };
        let label = format!("environment {name}");
        let read = tokio::task::spawn_blocking(move || {
            named_wanted(&tree, &row.definition, &scope).map(|w| Some((w, label)))
        })
        .await
        .map_err(|e| e.to_string())?;
        Ok(read.map_err(|e| format!("environment {name}: {}", e.0)))
    }

    async fn build(
        &mut self,
        host: &Host,
        wanted: &Wanted,
        run: SetupRun,
    ) -> Result<Readiness, String> {
        let (tx, rx) = mpsc::unbounded_channel();
        let building = host.build(wanted, run, tx);
        let (built, ()) = tokio::join!(building, self.log_output(rx));
        match built {
            Ok(Made::Reused(snapshot)) => {
                let _ = self.note_reused(snapshot.meta(), &[]).await;
                self.environment = Some(snapshot);
                Ok(Readiness::Ready)
            }
            Ok(Made::Built(snapshot, report)) => {
                self.note_ready(&snapshot.meta().key, &report).await;
                self.environment = Some(snapshot);
                Ok(Readiness::Ready)
            }
            Err(HostError::Setup(report)) => Ok(self.setup_failed(&report, "setup").await),
            Err(HostError::Other(why)) => Ok(self
                .end_environment(format!("the environment could not be set up: {why}"))
                .await),
        }
    }

    /// Log setup output as it comes, a batch of lines per event.
    pub(super) async fn log_output(&self, mut rx: mpsc::UnboundedReceiver<String>) {
        while let Some(first) = rx.recv().await {
            let mut lines = vec![first];
            let until = tokio::time::Instant::now() + BATCH_WINDOW;
            while lines.len() < BATCH_LINES {
                match tokio::time::timeout_at(until, rx.recv()).await {
                    Ok(Some(line)) => lines.push(line),
                    Ok(None) | Err(_) => break,
                }
            }
            let count = lines.len();
            let event = note(
                ENVIRONMENT_OUTPUT,
                lines.join("\n"),
                json!({"lines": count}),
            );
            self.append_events(&[event]).await;
        }
    }

    pub(super) async fn append_events(&self, events: &[EventBody]) {
        let state = &self.inner.state;
        let appended =
            crate::orchestrator::durable::append(state, &self.session, events, &self.lease);
        if let Err(error) = appended.await {
            tracing::error!(session_id = %self.session.id, %error, "cannot append environment events");
        }
    }

    /// Say a run of the environment's `phase` (`setup` or `maintenance`) is starting.
    pub(super) async fn note_setup(
        &self,
        wanted: &Wanted,
        run: &SetupRun,
        (label, phase): (&str, &str),
    ) {
        let network = if wanted.file.setup_network.is_empty() {
            "none".to_owned()
        } else {
            wanted.file.setup_network.join(", ")
        };
        let doing = match phase {
            "setup" => "Setting up the environment",
            _ => "Running the environment's maintenance",
        };
        let message = format!(
            "{doing} from {label} ({} command{}; network: {network}; time limit {} s).",
            run.commands.len(),
            if run.commands.len() == 1 { "" } else { "s" },
            run.timeout.as_secs()
        );
        let data = json!({
            "key": wanted.key,
            "phase": phase,
            "source": label,
            "commands": run.commands,
            "network": wanted.file.setup_network,
            "secrets": wanted.file.secrets,
            "timeout_seconds": run.timeout.as_secs(),
        });
        self.append_events(&[note(ENVIRONMENT_SETUP, message, data)])
            .await;
    }

    async fn note_ready(&self, key: &str, report: &SetupReport) {
        let ms = u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX);
        let message = format!(
            "Environment ready: setup took {:.1} s.{}",
            report.duration.as_secs_f64(),
            blocked_text(&report.blocked, report.blocked_beyond)
        );
        let data = json!({
            "key": key,
            "setup_ms": ms,
            "blocked": blocked_json(&report.blocked),
            "blocked_beyond": report.blocked_beyond,
        });
        self.append_events(&[note(ENVIRONMENT_READY, message, data)])
            .await;
    }

    /// Say a snapshot was reused, once per snapshot in a session's log; whether it said so.
    async fn note_reused(&self, meta: &SnapshotMeta, transcript: &[EventBody]) -> bool {
        let key = &meta.key;
        let said = transcript.iter().any(|e| match e {
            EventBody::System(s) => {
                [ENVIRONMENT_REUSED, ENVIRONMENT_READY].contains(&s.subtype.as_str())
                    && s.data.get("key").and_then(|k| k.as_str()) == Some(key)
            }
            _ => false,
        });
        if said {
            return false;
        }
        let age = u64::try_from(crate::store::now_ms() - meta.built_at_ms).unwrap_or(0);
        let message = format!("Environment reused (built {} ago).", ago(age));
        let data = json!({
            "key": key,
            "built_at_ms": meta.built_at_ms,
            "setup_ms": meta.setup_ms,
        });
        self.append_events(&[note(ENVIRONMENT_REUSED, message, data)])
            .await;
        true
    }

    /// End the session after a failed `phase` (`setup` or `maintenance`).
    pub(super) async fn setup_failed(&mut self, report: &SetupReport, phase: &str) -> Readiness {
        let (exit_code, timed_out, why) = match &report.end {
            SetupEnd::TimedOut => (
                None,
                true,
                format!(
                    "Environment {phase} ran past its time limit ({:.0} s) and was stopped.",
                    report.duration.as_secs_f64()
                ),
            ),
            SetupEnd::Failed {
                exit_code: Some(code),
                ..
            } => (
                Some(*code),
                false,
                format!("Environment {phase} failed with exit code {code}."),
            ),
            SetupEnd::Failed { description, .. } => (
                None,
                false,
                format!("Environment {phase} failed: {description}."),
            ),
            SetupEnd::Succeeded => (Some(0), false, format!("Environment {phase} succeeded.")),
        };
        let ms = u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX);
        let data = json!({
            "phase": phase,
            "exit_code": exit_code,
            "timed_out": timed_out,
            "tail": report.tail,
            "blocked": blocked_json(&report.blocked),
            "blocked_beyond": report.blocked_beyond,
            "setup_ms": ms,
        });
        let message = format!(
            "{why}{}",
            blocked_text(&report.blocked, report.blocked_beyond)
        );
        self.append_events(&[note(ENVIRONMENT_FAILED, message.clone(), data)])
            .await;
        let tail = report.tail.join("\n");
        let result = if tail.is_empty() {
            message
        } else {
            format!("{message}\nLast lines of its output:\n{tail}")
        };
        self.end_with(result).await
    }

    /// End the session before any agent starts: the environment is not usable.
    pub(super) async fn end_environment(&mut self, why: String) -> Readiness {
        self.end_with(format!("The environment could not be made ready: {why}"))
            .await
    }

    async fn end_with(&mut self, message: String) -> Readiness {
        if self.inner.runner.link_lost() && !self.lost {
            // The runner is gone, not the session: another runner resumes it from the log.
            self.handed_back = true;
            return Readiness::Ended;
        }
        let result = EventBody::error_result(ERROR_ENVIRONMENT, message);
        self.apply(Input::AgentEvent(result)).await;
        Readiness::Ended
    }

    /// The owner's values of the secrets the environment names.
    async fn setup_secrets(
        &self,
        wanted: &Wanted,
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        if wanted.file.secrets.is_empty() {
            return Ok(Default::default());
        }
        let secrets = self.inner.state.secrets();
        match secrets
            .values_for(&self.session.user_id, &wanted.file.secrets)
            .await
        {
            Ok(values) => Ok(values),
            Err(SecretsError::Missing(names)) => Err(format!(
                "the environment file names secrets you have not set: {}. Set each with \
                 `ultraplan secret set NAME`, then start the session again",
                names.join(", ")
            )),
            Err(error) => Err(format!("its secrets could not be read: {error}")),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn blocked_hosts_are_named_and_the_rest_counted() {
        use ultraplan_runner::egress::BlockedAttempt;
        let one = BlockedAttempt {
            host: "127.0.0.1".to_owned(),
            port: 9,
            attempts: 2,
        };
        let cases = [
            (vec![], 0, ""),
            (
                vec![one.clone()],
                0,
                " Blocked (not in the allow-list): 127.0.0.1:9.",
            ),
            (
                vec![one],
                5,
                " Blocked (not in the allow-list): 127.0.0.1:9 (and 5 more attempts at hosts not \
                 listed).",
            ),
        ];
        for (blocked, beyond, want) in cases {
            assert_eq!(super::blocked_text(&blocked, beyond), want);
        }
    }

    #[test]
    fn ages_read_like_a_person_would_say_them() {
        for (ms, want) in [
            (0, "0 s"),
            (59_999, "59 s"),
            (60_000, "1 min"),
            (2 * 3_600_000 + 5, "2 h"),
            (3 * 86_400_000, "3 days"),
        ] {
            assert_eq!(super::ago(ms), want);
        }
    }
}

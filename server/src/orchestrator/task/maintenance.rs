//! Maintenance of a reused environment (docs/ARCHITECTURE.md §6.5): the first agent of a
//! session that reuses a snapshot runs the environment's `[maintenance]` commands on a copy of
//! it, with setup's network and secrets, and the copy becomes the snapshot every later agent
//! (and session) uses. Its output streams into the log like setup's; a failure ends the
//! session with its reason.

use serde_json::json;
use tokio::sync::mpsc;
use ultraplan_protocol::constants::ENVIRONMENT_READY;
use ultraplan_runner::environment::{SetupReport, SetupRun, Wanted};

use super::SessionTask;
use super::environment::{Readiness, blocked_json, blocked_text, note};
use super::environment_host::{Host, HostError};

impl SessionTask {
    /// Run the maintenance commands `run` carries on the snapshot of `wanted`.
    pub(super) async fn maintain(
        &mut self,
        host: &Host,
        wanted: &Wanted,
        label: &str,
        run: SetupRun,
    ) -> Result<Readiness, String> {
        self.note_setup(wanted, &run, (label, "maintenance")).await;
        let (tx, rx) = mpsc::unbounded_channel();
        let maintaining = host.maintain(wanted, run, tx);
        let (maintained, ()) = tokio::join!(maintaining, self.log_output(rx));
        match maintained {
            Ok(Some((snapshot, report))) => {
                self.note_maintained(&wanted.key, &report).await;
                self.environment = Some(snapshot);
                Ok(Readiness::Ready)
            }
            Ok(None) => Ok(self
                .end_environment("the snapshot expired while it was about to be maintained; start the session again to build it afresh".to_owned())
                .await),
            Err(HostError::Setup(report)) => Ok(self.setup_failed(&report, "maintenance").await),
            Err(HostError::Other(why)) => Ok(self
                .end_environment(format!("the environment could not be maintained: {why}"))
                .await),
        }
    }

    async fn note_maintained(&self, key: &str, report: &SetupReport) {
        let ms = u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX);
        let message = format!(
            "Environment maintained: maintenance took {:.1} s.{}",
            report.duration.as_secs_f64(),
            blocked_text(&report.blocked, report.blocked_beyond)
        );
        let data = json!({
            "key": key,
            "phase": "maintenance",
            "maintenance_ms": ms,
            "blocked": blocked_json(&report.blocked),
            "blocked_beyond": report.blocked_beyond,
        });
        self.append_events(&[note(ENVIRONMENT_READY, message, data)])
            .await;
    }
}

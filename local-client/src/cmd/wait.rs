//! `wait ID [--until plan|decided|done] [--timeout S] [--json]`: block until the session
//! reaches a phase; the exit status says how it went (see [`ultraplan::script::wait`]).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ultraplan::api::Client;
use ultraplan::sanitize;
use ultraplan::script::follow::Follow;
use ultraplan::script::wait::{Outcome, Progress, Report, Until, Verdict};
use ultraplan_protocol::constants::POLL_INTERVAL_SECS;
use ultraplan_protocol::session::SessionResource;

use super::Env;

/// Overrides the pause after an empty poll, in milliseconds (the poller's variable).
const INTERVAL_ENV: &str = "ULTRAPLAN_POLL_INTERVAL_MS";

/// The pause after an empty poll, unless [`INTERVAL_ENV`] says otherwise.
const DEFAULT_PAUSE: Duration = Duration::from_millis(500);

/// How long one poll may hold for a new event (the server caps it at 25 s).
pub(super) const LONG_POLL: Duration = Duration::from_secs(POLL_INTERVAL_SECS);

/// The pause after a poll that brought nothing (the long poll already waited on servers that
/// hold requests; this keeps the pace on servers that do not).
pub(super) fn pause() -> Duration {
    std::env::var(INTERVAL_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_PAUSE, Duration::from_millis)
}

/// The `wait` command.
pub async fn command(
    env: &Env,
    id: &str,
    until: Until,
    timeout: Option<u64>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    let session = session_or_explain(&client, id).await?;
    let mut watch = Watch {
        follow: Follow::new(&client, id),
        progress: Progress::new(),
        session: Some(session),
    };
    let limit = async {
        match timeout {
            Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        outcome = watch.run(until) => outcome?,
        () = limit => Outcome::TimedOut,
        _ = tokio::signal::ctrl_c() => Outcome::Interrupted,
    };
    let report = Report::new(
        id,
        until,
        outcome,
        &watch.progress,
        watch.session.as_ref(),
        watch.follow.cursor(),
    );
    if json {
        println!("{}", sanitize::json(&serde_json::to_string(&report)?));
    } else {
        println!("{}", sanitize::line(&report.sentence()));
    }
    Ok(ExitCode::from(outcome.exit_code()))
}

/// A wait in progress: what it read so far.
struct Watch<'a> {
    follow: Follow<'a>,
    progress: Progress,
    session: Option<SessionResource>,
}

impl Watch<'_> {
    /// Polls until the phase is reached or the session ended.
    async fn run(&mut self, until: Until) -> anyhow::Result<Outcome> {
        let pause = pause();
        loop {
            let page = self
                .follow
                .next_patiently(Some(LONG_POLL), pause)
                .await
                .with_context(|| reading(self.follow.id()))?;
            self.progress
                .ingest(&page.events)
                .context("reading the session's plan decisions")?;
            let Some(session) = page.session else {
                continue;
            };
            let execution = session.execution.as_ref().map(|e| e.state);
            let verdict = self
                .progress
                .verdict(until, session.session_status, execution);
            self.session = Some(session);
            match verdict {
                Verdict::Reached => return Ok(Outcome::Reached),
                Verdict::Ended => return Ok(Outcome::Ended),
                Verdict::Waiting if page.events.is_empty() => tokio::time::sleep(pause).await,
                Verdict::Waiting => {}
            }
        }
    }
}

/// The context of a failed poll.
pub(super) fn reading(id: &str) -> String {
    format!("reading the events of session {}", sanitize::line(id))
}

/// Whether `client` can be asked about `id` at all: a clear error for an unknown id.
pub(super) async fn session_or_explain(
    client: &Client,
    id: &str,
) -> anyhow::Result<SessionResource> {
    client.session(id).await.map_err(|e| {
        match ultraplan::script::message::refusal(id, &e).filter(|_| e.status() == Some(404)) {
            Some(reason) => anyhow::anyhow!(reason),
            None => anyhow::Error::new(e).context("looking the session up"),
        }
    })
}

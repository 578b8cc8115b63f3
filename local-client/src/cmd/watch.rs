//! `ultraplan watch ID`: the poll loop in the foreground, and how `launch` starts it detached
//! (re-executing itself in its own process group, output to a log file, so it survives the
//! terminal and leaves it free).

use std::os::unix::process::CommandExt;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use anyhow::Context;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use ultraplan::config::Settings;
use ultraplan::pill;
use ultraplan::poll::{PollConfig, TerminalNotifier, TokioClock, Watcher};
use ultraplan::state::{Outcome, SessionState, StateStore};
use ultraplan_protocol::constants::{
    DEFAULT_TIMEOUT_SECONDS, MAX_EVENTS_WAIT_SECS, POLL_INTERVAL_SECS,
};

use super::Env;

/// Overrides the poll interval, in milliseconds (tests).
pub(super) const INTERVAL_ENV: &str = "ULTRAPLAN_POLL_INTERVAL_MS";

/// Long-poll `wait` for the events request, in seconds (default: plain polling).
const WAIT_ENV: &str = "ULTRAPLAN_POLL_WAIT_SECS";

/// Starts `ultraplan watch ID --detached` in the background; returns its pid.
pub fn spawn_detached(store: &StateStore, settings: &Settings, id: &str) -> anyhow::Result<u32> {
    let exe = std::env::current_exe().context("finding the ultraplan binary")?;
    let log_path = store.log_path(id)?;
    std::fs::create_dir_all(store.dir())
        .with_context(|| format!("creating {}", store.dir().display()))?;
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["watch", id, "--detached"])
        .env("ULTRAPLAN_SERVER", &settings.server)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("opening the log")?)
        .stderr(log)
        .process_group(0);
    match &settings.token {
        Some(token) => cmd.env("ULTRAPLAN_TOKEN", token),
        None => cmd.env_remove("ULTRAPLAN_TOKEN"),
    };
    let mut child = cmd.spawn().context("starting the background poller")?;
    let pid = child.id();
    // Reap it if this process outlives it (the interactive prompt does).
    std::thread::spawn(move || child.wait());
    Ok(pid)
}

/// The `watch` command.
pub async fn command(env: &Env, id: &str, json: bool, detached: bool) -> anyhow::Result<ExitCode> {
    let (client, settings) = env.client()?;
    let session = client.session(id).await;
    let mut state = match env.store.load(id)? {
        Some(state) => state,
        None => {
            let session = session.clone().context("looking the session up")?;
            SessionState::new(id, &settings.server, &session.url, &session.title)
        }
    };
    state.pid = Some(std::process::id());
    state.outcome = None;
    env.store.save(&state)?;
    let timeout = match client.eligibility().await {
        Ok(e) => e
            .flags
            .map_or(DEFAULT_TIMEOUT_SECONDS, |f| f.timeout_seconds),
        Err(e) => {
            tracing::warn!("eligibility unavailable, using the default timeout: {e}");
            DEFAULT_TIMEOUT_SECONDS
        }
    };
    let config = PollConfig {
        interval: env_duration(INTERVAL_ENV, Duration::from_millis)
            .unwrap_or(Duration::from_secs(POLL_INTERVAL_SECS)),
        timeout: Duration::from_secs(timeout),
        elapsed: match &session {
            Ok(session) => age(&session.created_at),
            Err(e) => {
                tracing::warn!("session unavailable, timing the watch from now: {e}");
                Duration::ZERO
            }
        },
        ..PollConfig::default()
    };
    let wait = env_duration(WAIT_ENV, |s| {
        Duration::from_secs(s.min(MAX_EVENTS_WAIT_SECS))
    });
    let clock = TokioClock::default();
    let watcher = Watcher {
        client: &client,
        store: Some(&env.store),
        clock: &clock,
        notifier: &TerminalNotifier,
        wait,
    };
    let mut last_line = String::new();
    let mut on_update = |s: &SessionState| report(s, json, detached, &mut last_line);
    let end = watcher
        .run(state, config, stop_signal(detached), &mut on_update)
        .await;
    if !json && let Some(hint) = pill::outcome_hint(&end) {
        println!("{}", ultraplan::sanitize::text(&hint));
    }
    Ok(match end.outcome {
        Some(Outcome::Approved | Outcome::Teleport) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

fn report(state: &SessionState, json: bool, detached: bool, last: &mut String) {
    if json {
        if let Ok(line) = serde_json::to_string(state) {
            println!("{}", ultraplan::sanitize::json(&line));
        }
        return;
    }
    let line = ultraplan::sanitize::line(&pill::pill(state));
    if *last != line {
        if detached {
            tracing::info!(phase = ?state.phase, "{line}");
        } else {
            println!("{line}");
        }
        *last = line;
    }
}

/// How long ago an RFC 3339 instant was, by this machine's clock (zero when it cannot be read
/// or lies in the future): the server's time limit runs from the session's `created_at`.
fn age(rfc3339: &str) -> Duration {
    OffsetDateTime::parse(rfc3339, &Rfc3339)
        .ok()
        .and_then(|start| Duration::try_from(OffsetDateTime::now_utc() - start).ok())
        .unwrap_or(Duration::ZERO)
}

pub(super) fn env_duration(name: &str, make: impl Fn(u64) -> Duration) -> Option<Duration> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(make)
}

/// Resolves on Ctrl-C or SIGTERM. Detached, hangups are ignored too.
async fn stop_signal(detached: bool) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot listen for SIGTERM: {e}");
            return std::future::pending().await;
        }
    };
    let mut hangup = signal(SignalKind::hangup()).ok().filter(|_| detached);
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return,
            _ = term.recv() => return,
            Some(()) = async {
                match hangup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            } => tracing::info!("hangup ignored"),
        }
    }
}

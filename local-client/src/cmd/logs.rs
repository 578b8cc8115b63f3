//! `logs ID [-f] [--json]`: a session's timeline in the terminal, or as JSON lines (see
//! [`ultraplan::script::timeline`]). With `-f` it follows the session live and returns when
//! the session ends; Ctrl-C stops it cleanly.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use ultraplan::api::Client;
use ultraplan::sanitize;
use ultraplan::script::follow::Follow;
use ultraplan::script::timeline::{self, Record, Timeline};
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::{SessionResource, SessionStatus};

use super::Env;
use super::wait::{LONG_POLL, pause, reading, session_or_explain};

/// The `logs` command.
pub async fn command(env: &Env, id: &str, follow: bool, json: bool) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    session_or_explain(&client, id).await?;
    let printed = tokio::select! {
        printed = print_timeline(&client, id, follow, json) => printed,
        _ = tokio::signal::ctrl_c(), if follow => Ok(()),
    };
    match printed {
        Err(e) if broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

/// Prints the timeline; following, until the session ends.
async fn print_timeline(client: &Client, id: &str, follow: bool, json: bool) -> anyhow::Result<()> {
    let mut events = Follow::new(client, id);
    let mut timeline = Timeline::new();
    let wait = follow.then_some(LONG_POLL);
    let pause = pause();
    let mut ended = false;
    loop {
        let page = events
            .next_patiently(wait, pause)
            .await
            .with_context(|| reading(id))?;
        for event in &page.events {
            for record in timeline.records(event) {
                emit(&record, json)?;
            }
            ended |= timeline::ends_session(event);
        }
        let Some(session) = page.session else {
            continue;
        };
        if !follow || ended || is_over(&session) {
            return Ok(());
        }
        if page.events.is_empty() {
            tokio::time::sleep(pause).await;
        }
    }
}

/// Archived, or its remote execution finished: nothing more will happen.
fn is_over(session: &SessionResource) -> bool {
    session.session_status == SessionStatus::Archived
        || session
            .execution
            .as_ref()
            .is_some_and(|e| e.state == ExecutionState::Finished)
}

fn emit(record: &Record, json: bool) -> anyhow::Result<()> {
    let line = if json {
        sanitize::json(&serde_json::to_string(record)?)
    } else {
        timeline::line(record)
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// The reader went away (`ultraplan logs ID | head`): not an error.
fn broken_pipe(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

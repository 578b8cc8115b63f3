//! `status [ID]`, `list`, `open ID`.

use std::process::ExitCode;

use anyhow::{Context, bail};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use ultraplan::pill;
use ultraplan::sanitize;
use ultraplan::state::SessionState;
use ultraplan_protocol::patch::Execution;
use ultraplan_protocol::session::SessionResource;

use super::{Env, ui};

/// Sessions `list` asks for.
const LIST_LIMIT: u32 = 50;

/// `status [ID] [--json]`: from the watcher's state file, else from the server.
pub async fn status(env: &Env, id: Option<&str>, json: bool) -> anyhow::Result<ExitCode> {
    let state = match id {
        Some(id) => env.store.load(id)?,
        None => env.store.latest(),
    };
    match (state, id) {
        (Some(state), _) => {
            if json {
                println!("{}", sanitize::json(&serde_json::to_string_pretty(&state)?));
            } else {
                let approved = state.outcome == Some(ultraplan::state::Outcome::Approved);
                let execution = if approved || state.outcome.is_none() {
                    remote_execution(env, &state.session_id, approved).await
                } else {
                    None
                };
                print_state(&state, execution.is_some());
                if let Some(execution) = &execution {
                    let line = pill::execution_line(&state.session_id, execution);
                    println!("  {}", sanitize::line(&line));
                }
            }
        }
        (None, Some(id)) => {
            let (client, _) = env.client()?;
            let session = client.session(id).await.context("looking the session up")?;
            if json {
                println!(
                    "{}",
                    sanitize::json(&serde_json::to_string_pretty(&session)?)
                );
            } else {
                print_resource(&session);
            }
        }
        (None, None) => {
            if json {
                println!("null");
            } else {
                println!("No ultraplan session yet. Start one with: ultraplan \"<what to plan>\"");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `executing`: the plan is approved and executing remotely, so no poller is missing.
fn print_state(state: &SessionState, executing: bool) {
    let status = pill::status_line(state, OffsetDateTime::now_utc());
    println!("{}", sanitize::line(&status));
    println!(
        "  {}  (session {})",
        sanitize::line(&state.title),
        sanitize::line(&state.session_id)
    );
    if !state.url.is_empty() {
        println!("  Review: {}", sanitize::line(&state.url));
    }
    if state.rejection_count > 0 {
        println!("  Plans rejected so far: {}", state.rejection_count);
    }
    if let Some(hint) = pill::outcome_hint(state) {
        println!("  {}", sanitize::text(&hint));
    }
    if !state.is_final() && !state.watcher_alive() && !executing {
        println!(
            "  The background poller is not running; resume it with `ultraplan watch {}`",
            sanitize::line(&state.session_id)
        );
    }
}

fn print_resource(session: &SessionResource) {
    let mut line = session.phase.pill().to_owned();
    if let Some(secs) = elapsed_since(&session.created_at) {
        line.push_str(&format!(" · {}", pill::format_elapsed(secs)));
    }
    if session.usage.total() > 0 {
        line.push_str(&format!(
            " · {}",
            pill::format_tokens(session.usage.total())
        ));
    }
    println!("{}", sanitize::line(&line));
    println!(
        "  {}  (session {}, {})",
        sanitize::line(&session.title),
        sanitize::line(&session.id),
        session.session_status.as_str()
    );
    println!("  Review: {}", sanitize::line(&session.url));
    if let Some(execution) = &session.execution {
        let line = pill::execution_line(&session.id, execution);
        println!("  {}", sanitize::line(&line));
    }
}

/// The remote execution of a session, asked from the server; `loud` says so when the server
/// cannot be asked.
async fn remote_execution(env: &Env, id: &str, loud: bool) -> Option<Execution> {
    let (client, _) = env.client().ok()?;
    match client.session(id).await {
        Ok(session) => session.execution,
        Err(error) => {
            if loud {
                println!("  (the server could not say how execution goes: {error})");
            }
            None
        }
    }
}

fn elapsed_since(rfc3339: &str) -> Option<u64> {
    let start = OffsetDateTime::parse(rfc3339, &Rfc3339).ok()?;
    u64::try_from((OffsetDateTime::now_utc() - start).whole_seconds()).ok()
}

/// `list [--json]`: the server's sessions as a table.
pub async fn list(env: &Env, json: bool) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    let sessions = client
        .sessions(LIST_LIMIT)
        .await
        .context("listing sessions")?;
    if json {
        println!(
            "{}",
            sanitize::json(&serde_json::to_string_pretty(&sessions)?)
        );
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.data.is_empty() {
        println!("No sessions.");
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&sessions.data));
    if sessions.has_more {
        println!("(only the {LIST_LIMIT} newest are shown)");
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows of `list`, columns padded.
pub fn table(sessions: &[SessionResource]) -> String {
    let header = ["ID", "STATUS", "PHASE", "CREATED", "TITLE"].map(str::to_owned);
    let rows: Vec<[String; 5]> = std::iter::once(header)
        .chain(sessions.iter().map(|s| {
            [
                sanitize::line(&s.id),
                s.session_status.as_str().to_owned(),
                s.phase.pill().to_owned(),
                sanitize::line(&s.created_at)
                    .chars()
                    .take(16)
                    .collect::<String>()
                    .replace('T', " "),
                sanitize::line(&s.title),
            ]
        }))
        .collect();
    let widths: Vec<usize> = (0..4)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        for (c, width) in widths.iter().enumerate() {
            let cell = &row[c];
            let pad = width.saturating_sub(cell.chars().count());
            out.push_str(cell);
            out.push_str(&" ".repeat(pad + 2));
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    out
}

/// The review URL with a one-time login token, so the browser lands signed in; `None` when
/// the server cannot mint one (the plain URL still works after a token login).
pub async fn signed_in_url(env: &Env, id: &str) -> Option<String> {
    let (client, _) = env.client().ok()?;
    client
        .login_link(&format!("/sessions/{id}"))
        .await
        .ok()
        .map(|link| link.url)
}

/// `open ID`: prints the review URL and opens the browser when one is available. Only an
/// http(s) URL on the configured server's origin is opened; anything else is refused.
pub async fn open(env: &Env, id: &str) -> anyhow::Result<ExitCode> {
    let server = env.settings()?.server;
    let url = match env.store.load(id)?.map(|s| s.url).filter(|u| !u.is_empty()) {
        Some(url) => url,
        None => {
            let (client, _) = env.client()?;
            client
                .session(id)
                .await
                .context("looking the session up")?
                .url
        }
    };
    if url.is_empty() {
        bail!("session {id} has no review URL");
    }
    let url = signed_in_url(env, id).await.unwrap_or(url);
    let url = match ultraplan::origin::check(&url, &server) {
        Ok(url) => url,
        Err(e) => {
            eprintln!(
                "ultraplan: not opening the review page of session {id}: {e}. Nothing was opened."
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    let url = url.as_str();
    println!("{url}");
    if ui::open_browser(url) {
        eprintln!("Opened in the browser.");
    }
    Ok(ExitCode::SUCCESS)
}

//! `ultraplan pull ID` for an approved plan: wait for the remote execution, download its patch,
//! check every file against this repository, then apply it here, in a fresh worktree, or
//! around a stash — and report each file.
//!
//! This file is the entry and the download; [`choose`] decides how to apply, [`dry_run`] only
//! says so, [`apply`] applies here or in a worktree, [`stash`] around a stash.

mod apply;
mod choose;
mod dry_run;
mod pulled;
mod stash;
mod text;
mod verdict;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use ultraplan::api::{ApiError, Client};
use ultraplan::patch::report;
use ultraplan::patch::{Repo, RepoError, parse};
use ultraplan_protocol::constants::POLL_INTERVAL_SECS;
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::SessionResource;

use self::pulled::Pulled;
use crate::cli::PullArgs;
use crate::cmd::{ui, watch};

/// Exit status of usage errors, as clap uses for bad arguments.
pub const USAGE: u8 = 2;

/// Consecutive transient failures tolerated while waiting.
const MAX_TRANSIENT: u32 = 5;

/// The patch flow: the repository first (a usage error without one), then the patch, then
/// the checks and the choice.
pub async fn command(client: &Client, args: &PullArgs) -> anyhow::Result<ExitCode> {
    let id = args.session.id.as_str();
    let Some(repo) = discover(args)? else {
        return Ok(ExitCode::from(USAGE));
    };
    let Some((session, bytes)) = download(client, id, args.no_wait).await? else {
        eprintln!(
            "\nStopped waiting; nothing was changed. Run `ultraplan pull {id}` again once the \
             execution has finished."
        );
        return Ok(ExitCode::FAILURE);
    };
    let files = parse::split(&bytes).context("reading the patch")?;
    if files.is_empty() {
        println!("The remote execution changed nothing.");
        return Ok(ExitCode::SUCCESS);
    }
    let judged = session
        .execution
        .as_ref()
        .and_then(|e| e.patch.as_ref())
        .and_then(|p| p.verdict.as_deref());
    if let Some(judged) = judged {
        eprintln!("{}", verdict::line(judged));
    }
    if verdict::gate(judged, args.yes, args.dry_run, id)? == verdict::Gate::Refuse {
        return Ok(ExitCode::FAILURE);
    }
    let pulled =
        Pulled {
            id,
            args,
            headline: report::headline(id, &files, bytes.len()),
            // A commit id from the server: hex or nothing (it is printed and handed to git).
            base: session.session_context.base.commit.clone().filter(|c| {
                (4..=64).contains(&c.len()) && c.chars().all(|c| c.is_ascii_hexdigit())
            }),
            repo,
            files,
            patch: bytes,
        };
    pulled.run()
}

/// The repository to apply to; `None`, said why, when there is none.
fn discover(args: &PullArgs) -> anyhow::Result<Option<Repo>> {
    let id = args.session.id.as_str();
    match Repo::discover(&args.repo) {
        Ok(repo) => Ok(Some(repo)),
        Err(e @ (RepoError::NotARepository { .. } | RepoError::NoSuchDirectory(_))) => {
            eprintln!(
                "ultraplan: {e}.\nThe patch of session {id} is applied to a git repository: run \
                 `ultraplan pull {id}` inside one, or pass -C PATH."
            );
            Ok(None)
        }
        Err(e) => Err(anyhow!(e).context("finding the git repository")),
    }
}

/// Waits for the execution to finish (unless `no_wait`) and downloads the patch. `None` when
/// Ctrl-C stopped the wait.
async fn download(
    client: &Client,
    id: &str,
    no_wait: bool,
) -> anyhow::Result<Option<(SessionResource, Vec<u8>)>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for Ctrl-C")?;
    tokio::select! {
        result = wait_for_patch(client, id, no_wait) => result.map(Some),
        _ = interrupt.recv() => Ok(None),
    }
}

async fn wait_for_patch(
    client: &Client,
    id: &str,
    no_wait: bool,
) -> anyhow::Result<(SessionResource, Vec<u8>)> {
    let interval = watch::env_duration(watch::INTERVAL_ENV, Duration::from_millis)
        .unwrap_or(Duration::from_secs(POLL_INTERVAL_SECS));
    let mut spinner = None;
    loop {
        let session = look_up(client, id, no_wait, interval).await?;
        if let Some(bytes) = finished_patch(client, id, &session).await? {
            return Ok((session, bytes));
        }
        if no_wait {
            bail!(
                "the approved plan of session {id} is still being executed remotely, so there is \
                 no patch yet. Run `ultraplan pull {id}` again later, or without --no-wait to \
                 wait for it."
            );
        }
        if spinner.is_none() {
            spinner = Some(announce_wait(id, interval));
        }
        tokio::time::sleep(interval).await;
    }
}

/// The session, retrying a few consecutive transient failures while waiting.
async fn look_up(
    client: &Client,
    id: &str,
    no_wait: bool,
    interval: Duration,
) -> anyhow::Result<SessionResource> {
    let mut transient = 0;
    loop {
        match client.session(id).await {
            Ok(s) => return Ok(s),
            Err(e) if e.is_transient() && !no_wait && transient + 1 < MAX_TRANSIENT => {
                transient += 1;
                tracing::warn!("looking the session up failed, retrying: {e}");
                tokio::time::sleep(interval).await;
            }
            Err(e) => return Err(anyhow!(e).context(format!("looking session {id} up"))),
        }
    }
}

/// The patch once the execution has finished; `None` while it still runs.
async fn finished_patch(
    client: &Client,
    id: &str,
    session: &SessionResource,
) -> anyhow::Result<Option<Vec<u8>>> {
    let Some(execution) = &session.execution else {
        return Err(no_execution(id));
    };
    if execution.state == ExecutionState::Executing {
        return Ok(None);
    }
    match client.patch(id, ultraplan::api::max_patch_bytes()).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(ApiError::Rejected { status: 409, .. }) => Ok(None),
        Err(ApiError::Rejected {
            status: 404, code, ..
        }) if code == "no_patch" => Err(no_execution(id)),
        Err(e) => Err(anyhow!(e).context(format!("downloading the patch of session {id}"))),
    }
}

fn no_execution(id: &str) -> anyhow::Error {
    anyhow!(
        "session {id} has no remote execution to pull a patch from (no plan of it was approved \
         for execution) and no teleported plan"
    )
}

/// Says the wait began: on a spinner, or as a line when there is no terminal to spin on.
fn announce_wait(id: &str, interval: Duration) -> Cleared {
    let line = format!(
        "Waiting for the remote execution of session {id} to finish (checking every {}; \
         Ctrl-C stops waiting and changes nothing)…",
        human(interval)
    );
    let bar = ui::spinner(&line, false);
    if bar.is_hidden() {
        eprintln!("{line}");
    }
    Cleared(bar)
}

/// A spinner that leaves no trace when the wait ends, however it ends.
struct Cleared(indicatif::ProgressBar);

impl Drop for Cleared {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

fn human(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

//! `ultraplan pull ID`: bring a teleported plan here — save it as "Save to file" does, print
//! it, archive the session; or, for a plan approved and executed remotely, apply its patch to
//! this repository ([`patch`]); for a plan that timed out unreviewed, print it and say where
//! it is saved ([`unreviewed`]).

mod patch;
mod unreviewed;

use std::process::ExitCode;

use anyhow::{Context, bail};
use ultraplan::plan_file;
use ultraplan::state::{Handled, Outcome, SessionState};
use ultraplan_protocol::api::PlanStatus;
use ultraplan_protocol::session::SessionStatus;

use super::{Env, archive_and_record, repo_root_of};
use crate::cli::PullArgs;

/// A flag that only means something for a patch.
fn patch_only_flag(args: &PullArgs) -> Option<&'static str> {
    [
        (args.dry_run, "--dry-run"),
        (args.worktree, "--worktree"),
        (args.worktree_dir.is_some(), "--worktree-dir"),
        (args.stash, "--stash"),
    ]
    .into_iter()
    .find_map(|(set, flag)| set.then_some(flag))
}

/// The `pull` command.
pub async fn command(env: &Env, args: &PullArgs) -> anyhow::Result<ExitCode> {
    let id = args.session.id.as_str();
    let (client, settings) = env.client()?;
    let local = env.store.load(id)?;
    let plans = client
        .plans(id)
        .await
        .context("listing the session's plans")?;
    let newest = plans
        .iter()
        .rev()
        .find(|p| p.status != PlanStatus::Rejected);
    let plan = match (newest.map(|p| p.status), &local) {
        (Some(PlanStatus::Teleported), _) => newest.map(|p| p.plan.clone()),
        (_, Some(s)) if s.outcome == Some(Outcome::Teleport) => s.plan.clone(),
        (Some(PlanStatus::Approved), _) => return patch::command(&client, args).await,
        (Some(PlanStatus::Pending), _) => {
            let session = client.session(id).await.context("looking the session up")?;
            if session.session_status == SessionStatus::Archived
                && let Some(pending) = newest
            {
                return unreviewed::command(env, id, &pending.plan, local.as_ref());
            }
            bail!(
                "the plan of session {id} still waits for review; approve it (the agent then \
             implements it remotely and `pull` applies the patch) or teleport it first with \
             `ultraplan teleport {id}`"
            )
        }
        _ => {
            // No decision we know of: a session may still carry an execution.
            let session = client.session(id).await.context("looking the session up")?;
            if session.execution.is_some() {
                return patch::command(&client, args).await;
            }
            bail!(
                "session {id} has nothing to pull: no teleported plan, and no plan approved \
                 for remote execution"
            )
        }
    };
    let Some(plan) = plan else {
        bail!("session {id} has no teleported plan to pull");
    };
    // The server's text: printed and saved without controls or escape sequences.
    let plan = ultraplan::sanitize::text(&plan);
    if let Some(flag) = patch_only_flag(args) {
        eprintln!(
            "ultraplan: {flag} is for the patch of a plan executed remotely; session {id} has a \
             teleported plan: run `ultraplan pull {id}` without it. Nothing was changed."
        );
        return Ok(ExitCode::from(patch::USAGE));
    }
    let title = match &local {
        Some(s) => s.title.clone(),
        None => client
            .session(id)
            .await
            .map(|s| s.title)
            .unwrap_or_default(),
    };
    let root = repo_root_of(local.as_ref());
    let path = plan_file::save(&root, &plan_file::today(), &title, &plan)
        .with_context(|| format!("saving the plan under {}", root.display()))?;
    let mut state = local.unwrap_or_else(|| SessionState::new(id, &settings.server, "", &title));
    state.outcome = Some(Outcome::Teleport);
    state.plan = Some(plan.clone());
    state.handled = Some(Handled::Pull);
    state.plan_file = Some(path.clone());
    state.touch();
    env.store.save(&state)?;
    println!("{}", plan.trim_end());
    eprintln!("\nSaved to {}", path.display());
    archive_and_record(env, &state.server, id).await;
    Ok(ExitCode::SUCCESS)
}

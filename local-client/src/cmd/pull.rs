//! `ultraplan pull ID`: bring a teleported plan here — save it as "Save to file" does, print
//! it, archive the session. Approved sessions would pull a patch, which is not available yet.

use std::process::ExitCode;

use anyhow::{Context, bail};
use ultraplan::plan_file;
use ultraplan::state::{Handled, Outcome, SessionState};
use ultraplan_protocol::api::PlanStatus;

use super::{Env, archive_and_record, repo_root_of};

/// The `pull` command.
pub async fn command(env: &Env, id: &str) -> anyhow::Result<ExitCode> {
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
        (Some(PlanStatus::Approved), _) => {
            eprintln!(
                "ultraplan: the plan of session {id} was approved and is executed remotely; \
                 pulling its patch is not available in this version yet."
            );
            return Ok(ExitCode::FAILURE);
        }
        (Some(PlanStatus::Pending), _) => bail!(
            "the plan of session {id} still waits for review; teleport it first with \
             `ultraplan teleport {id}`"
        ),
        _ => bail!("session {id} has no teleported plan to pull"),
    };
    let Some(plan) = plan else {
        bail!("session {id} has no teleported plan to pull");
    };
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

//! `approve ID`, `reject ID -m`, `teleport ID`: decide the pending plan from the terminal;
//! `stop ID`: archive a session.

use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use ultraplan::api::{ApiError, Archived, Client};
use ultraplan::state::{FailureReason, Outcome, SessionState};
use ultraplan_protocol::api::{Decision, PlanResource, PlanStatus};

use super::{Env, pending, repo_root_of, ui};

/// The plan waiting for review, or an error that says why there is none.
async fn pending_plan(client: &Client, id: &str) -> anyhow::Result<PlanResource> {
    let plans = client
        .plans(id)
        .await
        .context("listing the session's plans")?;
    if let Some(plan) = plans.iter().rev().find(|p| p.status == PlanStatus::Pending) {
        return Ok(plan.clone());
    }
    match plans.last() {
        None => bail!(
            "session {id} has no plan yet; the agent is still working (see `ultraplan status {id}`)"
        ),
        Some(latest) => bail!(
            "no plan is waiting for review in session {id}: the latest plan (revision {}) is \
             already {}",
            latest.revision,
            latest.status.as_str()
        ),
    }
}

/// Posts a decision on the pending plan, with clear words for a conflict.
async fn decide(client: &Client, id: &str, decision: &Decision) -> anyhow::Result<PlanResource> {
    let plan = pending_plan(client, id).await?;
    match client.decide(id, &plan.tool_use_id, decision).await {
        Ok(decided) => Ok(decided),
        Err(ApiError::Rejected {
            status: 409,
            message,
            ..
        }) => Err(anyhow!(
            "another decision already stands on plan revision {} of session {id}: {message}",
            plan.revision
        )),
        Err(e) => Err(anyhow!(e).context(format!("sending the decision on session {id}"))),
    }
}

/// `approve ID`.
pub async fn approve(env: &Env, id: &str) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    let plan = decide(&client, id, &Decision::Approve { plan: None }).await?;
    println!(
        "Approved plan revision {} of session {id}; the agent now implements it remotely.\n\
         `ultraplan pull {id}` applies its patch here once it is done (it waits if needed).",
        plan.revision
    );
    Ok(ExitCode::SUCCESS)
}

/// `reject ID -m FEEDBACK`.
pub async fn reject(env: &Env, id: &str, feedback: &str) -> anyhow::Result<ExitCode> {
    if feedback.trim().is_empty() {
        bail!("say what to change: ultraplan reject {id} -m \"…\"");
    }
    let (client, _) = env.client()?;
    let decision = Decision::Reject {
        feedback: feedback.to_owned(),
        comment_ids: Vec::new(),
    };
    let plan = decide(&client, id, &decision).await?;
    println!(
        "Rejected plan revision {} of session {id}; the agent revises it with your feedback.",
        plan.revision
    );
    Ok(ExitCode::SUCCESS)
}

/// `teleport ID`: the plan comes back here, then the teleport-back choice.
pub async fn teleport(env: &Env, id: &str) -> anyhow::Result<ExitCode> {
    let (client, settings) = env.client()?;
    let plan = decide(&client, id, &Decision::Teleport {}).await?;
    let existing = env.store.load(id)?;
    let mut state = match existing {
        Some(state) => state,
        None => {
            let session = client.session(id).await.context("looking the session up")?;
            SessionState::new(id, &settings.server, &session.url, &session.title)
        }
    };
    if state.repo_root.is_none() {
        state.repo_root = Some(repo_root_of(None));
    }
    state.outcome = Some(Outcome::Teleport);
    state.plan = Some(plan.plan.clone());
    state.touch();
    env.store.save(&state)?;
    println!(
        "Teleported plan revision {} of session {id} back here.",
        plan.revision
    );
    pending::offer(env, &state).await?;
    Ok(ExitCode::SUCCESS)
}

/// `stop ID [--yes]`.
pub async fn stop(env: &Env, id: &str, yes: bool) -> anyhow::Result<ExitCode> {
    let (client, _) = env.client()?;
    if !yes {
        if !ui::interactive() {
            bail!("not stopping without confirmation: there is no terminal to ask on; pass --yes");
        }
        if !ui::confirm(&format!("Stop session {id} and archive it?"))? {
            eprintln!("Not stopped.");
            return Ok(ExitCode::FAILURE);
        }
    }
    let archived = client
        .archive(id)
        .await
        .with_context(|| format!("archiving session {id}"))?;
    env.store.update(id, |s| {
        s.archived = true;
        if !s.is_final() {
            s.outcome = Some(Outcome::Failed);
            s.failure = Some(FailureReason::Stopped);
            s.failure_message = Some(FailureReason::Stopped.message(Some("stopped by you")));
        }
    })?;
    match archived {
        Archived::Now => println!("Stopped and archived session {id}."),
        Archived::Already => println!("Session {id} was already archived."),
    }
    Ok(ExitCode::SUCCESS)
}

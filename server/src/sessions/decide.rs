//! Plan decisions: one path for the API and the review page.

use ultraplan_protocol::api::{Decision, PlanResource};
use ultraplan_protocol::patch::{Execution, ExecutionState};
use ultraplan_protocol::session::SessionStatus;

use crate::http::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::{DecideOutcome, SessionRow};
use crate::telemetry::names;

/// What a decision request achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionOutcome {
    /// This request decided the plan.
    Decided(PlanResource),
    /// The same decision already stood; nothing changed.
    AlreadyStands(PlanResource),
}

fn check(decision: &Decision) -> ApiResult<()> {
    match decision {
        Decision::Reject { feedback } if feedback.trim().is_empty() => Err(ApiError::bad_request(
            "feedback_required",
            "a rejection needs feedback for the agent",
        )),
        Decision::Approve { plan: Some(plan) } if plan.trim().is_empty() => Err(
            ApiError::bad_request("empty_plan", "an edited plan cannot be empty"),
        ),
        _ => Ok(()),
    }
}

/// Decide a pending plan. Idempotent for the same decision; 409 when another stands; 400 when
/// no such plan is pending.
pub async fn decide(
    state: &AppState,
    session: &SessionRow,
    tool_use_id: &str,
    decision: &Decision,
) -> ApiResult<DecisionOutcome> {
    check(decision)?;
    if session.status == SessionStatus::Archived {
        return Err(ApiError::conflict(
            "session_archived",
            "the session is archived; its plans can no longer be decided",
        ));
    }
    match state
        .store
        .decide_plan(&session.id, tool_use_id, decision)
        .await?
    {
        DecideOutcome::Decided { plan, event } => {
            let executes = matches!(decision, Decision::Approve { .. }) && executes(state);
            if executes {
                mark_executing(state, session).await?;
            }
            super::after_append(state, session, std::slice::from_ref(&event)).await;
            super::deliver(state, &session.id, std::slice::from_ref(&event));
            if executes {
                start_if_idle(state, session).await?;
            }
            let target = match decision {
                Decision::Approve { .. } => Some("remote"),
                Decision::Teleport {} => Some("local"),
                Decision::Reject { .. } => None,
            };
            if let Some(target) = target {
                state
                    .telemetry(
                        names::APPROVED,
                        &[("execution_target", target)],
                        Some(&session.user_id),
                        Some(&session.id),
                    )
                    .await;
            }
            Ok(DecisionOutcome::Decided(plan.to_resource()))
        }
        DecideOutcome::AlreadyStands(plan) => {
            Ok(DecisionOutcome::AlreadyStands(plan.to_resource()))
        }
        DecideOutcome::Conflict(plan) => Err(ApiError::conflict(
            "decision_conflict",
            format!(
                "a different decision already stands on plan {}: {}",
                plan.tool_use_id,
                plan.decision.as_ref().map_or("unknown", Decision::kind)
            ),
        )),
        DecideOutcome::UnknownPlan => Err(ApiError::bad_request(
            "no_pending_plan",
            format!("no plan {tool_use_id} is pending in this session"),
        )),
    }
}

fn executes(state: &AppState) -> bool {
    state.orchestrator.as_ref().is_some_and(|o| o.executes())
}

/// An approved plan is executing from the moment of the decision, so nobody asking for the
/// patch right after approving is told there is no execution.
async fn mark_executing(state: &AppState, session: &SessionRow) -> ApiResult<()> {
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    state.store.set_execution(&session.id, &executing).await?;
    Ok(())
}

/// With no agent alive (it crashed while its plan waited), the approval starts one: the log
/// says the plan is approved, so it executes.
async fn start_if_idle(state: &AppState, session: &SessionRow) -> ApiResult<()> {
    let Some(orchestrator) = &state.orchestrator else {
        return Ok(());
    };
    if orchestrator.is_live(&session.id) {
        // A live task either hands over, or (ending) starts execution as it goes.
        return Ok(());
    }
    let flags = crate::http::api::sessions::user_flags(state, &session.user_id).await?;
    let Some(row) = state.store.session(&session.id).await? else {
        return Ok(());
    };
    let launch = crate::orchestrator::Launch {
        timeout_seconds: flags.timeout_seconds,
        resumed: false,
    };
    if orchestrator.launch_if_idle(row, launch) {
        tracing::info!(session_id = %session.id, "no agent was running: one starts to execute the approved plan");
    }
    Ok(())
}

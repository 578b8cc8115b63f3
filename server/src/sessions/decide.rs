//! Plan decisions: one path for the API and the review page.

use ultraplan_protocol::api::{Decision, PlanResource};
use ultraplan_protocol::session::SessionStatus;

use crate::error::{ApiError, ApiResult};
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
            super::after_append(state, session, std::slice::from_ref(&event)).await;
            super::deliver(state, &session.id, std::slice::from_ref(&event));
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

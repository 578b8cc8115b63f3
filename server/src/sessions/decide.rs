//! Plan decisions: one path for the API and the review page.

use ultraplan_protocol::api::{Decision, PlanResource};
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::SessionStatus;

use super::{SessionError, SessionResult};
use crate::comments::CommentText;
use crate::core::Core;
use crate::orchestrator::Agents;
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

fn check(decision: &Decision) -> SessionResult<()> {
    match decision {
        Decision::Reject {
            feedback,
            comment_ids,
        } if feedback.trim().is_empty() && comment_ids.is_empty() => {
            Err(SessionError::FeedbackRequired)
        }
        Decision::Approve { plan: Some(plan) } if plan.trim().is_empty() => {
            Err(SessionError::EmptyPlan)
        }
        _ => Ok(()),
    }
}

/// Decide a pending plan. Idempotent for the same decision; 409 when another stands; 400 when
/// no such plan is pending.
pub async fn decide(
    state: &Core,
    agents: &Agents,
    session: &SessionRow,
    tool_use_id: &str,
    decision: &Decision,
) -> SessionResult<DecisionOutcome> {
    check(decision)?;
    if session.status == SessionStatus::Archived {
        return Err(SessionError::Archived(
            "the session is archived; its plans can no longer be decided",
        ));
    }
    // The plan's text never changes once proposed, so the result built from it here is
    // the one the decision appends.
    let outcome = match state.store.plan(&session.id, tool_use_id).await? {
        Some(plan) => {
            let ids = match decision {
                Decision::Reject { comment_ids, .. } => comment_ids.as_slice(),
                _ => &[],
            };
            let named =
                super::comments::named_comments(state, &session.id, tool_use_id, ids).await?;
            let texts: Vec<CommentText<'_>> = named
                .iter()
                .map(|c| CommentText {
                    id: &c.id,
                    quote: &c.quote,
                    heading_path: &c.heading_path,
                    body: &c.body,
                })
                .collect();
            let result =
                crate::plans::decision_result_with(tool_use_id, decision, &plan.plan, &texts);
            state
                .store
                .decide_plan(&session.id, tool_use_id, decision, &result)
                .await?
        }
        None => DecideOutcome::UnknownPlan,
    };
    match outcome {
        DecideOutcome::Decided { plan, event } => {
            let executes = matches!(decision, Decision::Approve { .. }) && agents.executes();
            if executes {
                mark_executing(state, session).await?;
            }
            state
                .after_append(session, std::slice::from_ref(&event))
                .await;
            // A parked session is queued so an agent takes the decision. With no agent at all
            // (it crashed while its plan waited, or was ending), an approval queues the session
            // too: the log says the plan is approved, so the next agent executes it. A session
            // a runner holds is left alone: that runner's agent takes the decision.
            agents.unpark(&session.id).await?;
            if executes && awaits_an_agent(state, &session.id).await? {
                agents.queue(&session.id).await?;
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
        DecideOutcome::Conflict(plan) => Err(SessionError::DecisionConflict {
            standing: plan.decision.as_ref().map_or("unknown", Decision::kind),
            tool_use_id: plan.tool_use_id,
        }),
        DecideOutcome::UnknownPlan => Err(SessionError::NoPendingPlan(tool_use_id.to_owned())),
    }
}

/// Whether the approved plan's execution has not finished. A busy server may answer the
/// decision after a runner took it, executed it and let the session go; queueing it then would
/// start a fresh agent on a finished session. (Whether a runner holds it is the queue's own
/// atomic check; a runner that lets it go just after checks the approval again.)
async fn awaits_an_agent(state: &Core, session_id: &str) -> SessionResult<bool> {
    let Some(row) = state.store.session(session_id).await? else {
        return Ok(false);
    };
    Ok(row
        .execution
        .is_some_and(|e| e.state == ExecutionState::Executing))
}

/// An approved plan is executing from the moment of the decision, so nobody asking for the
/// patch right after approving is told there is no execution. A runner that took the decision
/// first (and may have finished the execution already) keeps what it recorded.
async fn mark_executing(state: &Core, session: &SessionRow) -> SessionResult<()> {
    state.store.mark_executing(&session.id).await?;
    Ok(())
}

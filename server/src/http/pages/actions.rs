//! The page's forms: plan decisions, answers, stopping. Each goes through the same session
//! logic as the API and then redirects back to the page with a notice (post/redirect/get), so
//! a double click or a second tab shows what already stands instead of an error.

use axum::extract::{Path, State};
use axum::response::Redirect;
use serde::Deserialize;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::session::SessionStatus;

use super::auth::{CsrfForm, Posted};
use super::digest::Digest;
use super::error::{PageError, PageResult};
use super::notice::Notice;
use super::session::{owned, terminal_polling};
use crate::http::state::AppState;
use crate::sessions::{self, DecisionOutcome, SessionError};

/// The decision form: `decision` is `approve`, `approve_edited`, `reject` or `teleport`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct DecisionForm {
    pub csrf: String,
    pub decision: String,
    pub plan: String,
    pub feedback: String,
    /// The ids of the plan's comments a rejection carries, space separated.
    pub comments: String,
    /// With an approval: `""` keeps the session's environment, `"-"` uses the repository's
    /// file, anything else names an environment.
    pub environment: String,
}

/// The answer form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct AnswerForm {
    pub csrf: String,
    pub tool_use_id: String,
    pub answer: String,
    /// A suggested answer the reviewer picked instead of writing one.
    pub choice: String,
}

/// A form with nothing but its token.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct TokenForm {
    pub csrf: String,
}

impl CsrfForm for DecisionForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}
impl CsrfForm for AnswerForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}
impl CsrfForm for TokenForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// Text from a textarea: browsers send CRLF line ends.
pub fn normalize(text: &str) -> String {
    text.replace("\r\n", "\n")
}

/// The decision a form asks for, or the notice that explains why it cannot be taken.
pub fn to_decision(form: &DecisionForm) -> PageResult<Result<Decision, Notice>> {
    Ok(match form.decision.as_str() {
        "approve" => Ok(Decision::Approve { plan: None }),
        "approve_edited" => {
            let plan = normalize(&form.plan);
            if plan.trim().is_empty() {
                Err(Notice::EmptyPlan)
            } else {
                Ok(Decision::Approve { plan: Some(plan) })
            }
        }
        "reject" => {
            let feedback = normalize(&form.feedback);
            let comment_ids: Vec<String> = form
                .comments
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            if feedback.trim().is_empty() && comment_ids.is_empty() {
                Err(Notice::FeedbackRequired)
            } else {
                Ok(Decision::Reject {
                    feedback,
                    comment_ids,
                })
            }
        }
        "teleport" => Ok(Decision::Teleport {}),
        _ => return Err(PageError::BadRequest("unknown decision".to_owned())),
    })
}

/// What the shared decision logic's answer means for the reviewer.
pub fn decision_notice(
    decision: &Decision,
    result: Result<DecisionOutcome, SessionError>,
) -> PageResult<Notice> {
    match result {
        Ok(DecisionOutcome::Decided(_)) => Ok(match decision {
            Decision::Approve { .. } => Notice::Approved,
            Decision::Reject { .. } => Notice::Rejected,
            Decision::Teleport {} => Notice::Teleported,
        }),
        Ok(DecisionOutcome::AlreadyStands(_)) => Ok(Notice::AlreadyDecided),
        Err(SessionError::DecisionConflict { .. }) => Ok(Notice::Conflict),
        Err(SessionError::Archived(_)) => Ok(Notice::Archived),
        Err(SessionError::FeedbackRequired) => Ok(Notice::FeedbackRequired),
        Err(SessionError::EmptyPlan) => Ok(Notice::EmptyPlan),
        Err(SessionError::NoPendingPlan(_)) => Ok(Notice::NoPendingPlan),
        Err(error) => Err(error.into()),
    }
}

fn back(session_id: &str, notice: Notice, anchor: &str) -> Redirect {
    let id = super::auth::encode_query(session_id);
    Redirect::to(&format!("/sessions/{id}?notice={}{anchor}", notice.code()))
}

/// `POST /sessions/{id}/plans/{tool_use_id}/decision`.
pub async fn decide(
    State(state): State<AppState>,
    Path((id, tool_use_id)): Path<(String, String)>,
    Posted { user, form }: Posted<DecisionForm>,
) -> PageResult<Redirect> {
    let row = owned(&state, &user, &id).await?;
    let decision = match to_decision(&form)? {
        Ok(decision) => decision,
        Err(notice) => return Ok(back(&row.id, notice, "#review")),
    };
    if decision == (Decision::Teleport {}) && !terminal_polling(&state, &row.id) {
        return Ok(back(&row.id, Notice::TerminalGone, "#review"));
    }
    if matches!(decision, Decision::Approve { .. })
        && let Err(notice) = choose_environment(&state, &row, &form.environment).await?
    {
        return Ok(back(&row.id, notice, "#review"));
    }
    let result = sessions::decide(&state.core, &state.agents, &row, &tool_use_id, &decision).await;
    let notice = decision_notice(&decision, result)?;
    Ok(back(&row.id, notice, "#review"))
}

/// Carry out the approve form's environment choice before the approval, so the execution the
/// approval starts uses it. The inner `Err` is the notice of a refused choice.
async fn choose_environment(
    state: &AppState,
    row: &crate::store::SessionRow,
    choice: &str,
) -> PageResult<Result<(), Notice>> {
    let choice = match choice.trim() {
        "" => return Ok(Ok(())),
        "-" => None,
        name => Some(name),
    };
    match sessions::choose_environment(&state.core, row, choice).await {
        Ok(()) => Ok(Ok(())),
        Err(SessionError::Invalid {
            code: "unknown_environment",
            ..
        }) => Ok(Err(Notice::EnvironmentUnknown)),
        Err(SessionError::Invalid {
            code: "execution_started",
            ..
        }) => Ok(Err(Notice::ExecutionStarted)),
        Err(error) => Err(error.into()),
    }
}

/// `POST /sessions/{id}/answer`: answer the agent's open question.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { user, form }: Posted<AnswerForm>,
) -> PageResult<Redirect> {
    let row = owned(&state, &user, &id).await?;
    if row.status == SessionStatus::Archived {
        return Ok(back(&row.id, Notice::Archived, ""));
    }
    let answer = normalize(if form.choice.trim().is_empty() {
        &form.answer
    } else {
        &form.choice
    });
    if answer.trim().is_empty() {
        return Ok(back(&row.id, Notice::AnswerRequired, "#question"));
    }
    let mut digest = Digest::default();
    for event in state.core.events_after(&row.id, 0).await? {
        digest.ingest(&event);
    }
    if digest.question.as_ref().map(|q| q.tool_use_id.as_str()) != Some(form.tool_use_id.as_str()) {
        return Ok(back(&row.id, Notice::QuestionGone, ""));
    }
    let body = EventBody::tool_result(&form.tool_use_id, answer, false);
    match sessions::post_events(&state.core, &state.agents, &row, &[body]).await {
        Ok(_) => Ok(back(&row.id, Notice::Answered, "")),
        Err(SessionError::Archived(_)) => Ok(back(&row.id, Notice::Archived, "")),
        Err(error) => Err(error.into()),
    }
}

/// `POST /sessions/{id}/stop`: stop the agent and archive the session, as the API's archive.
pub async fn stop(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Posted { user, form: _ }: Posted<TokenForm>,
) -> PageResult<Redirect> {
    let row = owned(&state, &user, &id).await?;
    let note = format!("Session stopped by {} from the review page.", user.name);
    match sessions::archive(&state.core, &state.agents, &row, note).await {
        Ok(_) => Ok(back(&row.id, Notice::Stopped, "")),
        Err(SessionError::AlreadyArchived) => Ok(back(&row.id, Notice::AlreadyStopped, "")),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(decision: &str, plan: &str, feedback: &str) -> DecisionForm {
        DecisionForm {
            csrf: "t".into(),
            decision: decision.into(),
            plan: plan.into(),
            feedback: feedback.into(),
            comments: String::new(),
            environment: String::new(),
        }
    }

    #[test]
    fn forms_become_decisions() {
        let ok = |f: DecisionForm| to_decision(&f).expect("known").expect("valid");
        assert_eq!(
            ok(form("approve", "ignored", "")),
            Decision::Approve { plan: None }
        );
        assert_eq!(
            ok(form("approve_edited", "a\r\nb", "")),
            Decision::Approve {
                plan: Some("a\nb".into())
            }
        );
        assert_eq!(
            ok(form("reject", "", "more\r\ntests")),
            Decision::Reject {
                feedback: "more\ntests".into(),
                comment_ids: Vec::new(),
            }
        );
        assert_eq!(ok(form("teleport", "", "")), Decision::Teleport {});
        let notice = |f: DecisionForm| to_decision(&f).expect("known").expect_err("refused");
        assert_eq!(notice(form("reject", "", "  ")), Notice::FeedbackRequired);
        assert_eq!(
            notice(form("approve_edited", "\r\n", "")),
            Notice::EmptyPlan
        );
        assert!(to_decision(&form("delete", "", "")).is_err());
    }

    #[test]
    fn use_case_outcomes_become_notices() {
        let approve = Decision::Approve { plan: None };
        let conflict = SessionError::DecisionConflict {
            tool_use_id: "t".into(),
            standing: "reject",
        };
        assert_eq!(
            decision_notice(&approve, Err(conflict)).expect("notice"),
            Notice::Conflict
        );
        let archived = SessionError::Archived("x");
        assert_eq!(
            decision_notice(&approve, Err(archived)).expect("notice"),
            Notice::Archived
        );
        let gone = SessionError::NoPendingPlan("t".into());
        assert_eq!(
            decision_notice(&approve, Err(gone)).expect("notice"),
            Notice::NoPendingPlan
        );
        let lost = SessionError::Store(crate::store::StoreError::Corrupt("x".into()));
        assert!(decision_notice(&approve, Err(lost)).is_err());
    }
}

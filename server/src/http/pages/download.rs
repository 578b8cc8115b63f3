//! `GET /sessions/{id}/patch.diff`: the patch of a session's remote execution, byte for byte,
//! as a download for the browser's cookie session (the bearer API serves the same bytes at
//! `GET /v1/sessions/{id}/patch`).

use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use ultraplan_protocol::patch::ExecutionState;

use super::auth::WebUser;
use super::error::{PageError, PageResult};
use super::session::owned;
use crate::http::state::AppState;

/// `ultraplan-<first 8 characters of the id>.diff`, safe in a header.
pub fn file_name(session_id: &str) -> String {
    let short: String = session_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(8)
        .collect();
    format!("ultraplan-{short}.diff")
}

/// `GET /sessions/{id}/patch.diff`.
pub async fn patch_diff(
    State(state): State<AppState>,
    user: WebUser,
    Path(id): Path<String>,
) -> PageResult<Response> {
    let row = owned(&state, &user, &id).await?;
    let patch = match row.execution.as_ref().map(|e| e.state) {
        None => {
            return Err(PageError::Missing(
                "This session has no remote execution, so it has no patch.",
            ));
        }
        Some(ExecutionState::Executing) => {
            return Err(PageError::Conflict(
                "The agent is still executing the plan; the patch is ready when it finishes.",
            ));
        }
        Some(ExecutionState::Finished) => crate::execution::load_patch(&state.core, &row.id)
            .await?
            .ok_or(PageError::Missing(
                "The execution ended without a patch; the session log says why.",
            ))?,
    };
    let disposition = format!("attachment; filename=\"{}\"", file_name(&row.id));
    let mut response = patch.diff.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/x-diff; charset=utf-8"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_short_and_header_safe() {
        let cases = [
            (
                "0b7c2f1e-4a5b-4c6d-8e9f-000000000000",
                "ultraplan-0b7c2f1e.diff",
            ),
            ("ab\"; x=1", "ultraplan-abx1.diff"),
            ("", "ultraplan-.diff"),
        ];
        for (id, want) in cases {
            assert_eq!(file_name(id), want);
        }
    }
}

//! Remote execution of an approved plan: the writable workspace, the patch it produces, and
//! the `result` that reports it.
//!
//! The workspace and the patch making are the runner crate's (`ultraplan_runner::workspace`),
//! shared with `ultraplan-runner`; this module decides the mode, stores and reports patches.

mod fresh_copy;
mod remote;
mod report;
mod restart;

use std::path::PathBuf;

use ultraplan_protocol::constants::VERIFICATION;
use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::patch::{Execution, ExecutionState};
use ultraplan_protocol::verdict::Verdict;
use ultraplan_protocol::{ExitPlanModeScanner, ScanResult};

pub use fresh_copy::{EXECUTION_RESTARTED, EXECUTION_STARTED, is_execution_started, restart_point};
pub use remote::RemotePatch;
pub use report::{Ending, patch_result};
pub use restart::{finish_abandoned, settle_finished};
pub use ultraplan_runner::workspace::{
    MAX_PATCH_BYTES, Patch, Workspace, WorkspaceError, git_available, patch_of,
    remove_root as remove_workspace_root,
};

use crate::core::Core;
use crate::store::{PatchRow, SessionRow, StoreError, StoreResult};

/// Why execution could not be prepared or finished.
#[derive(Debug, thiserror::Error)]
pub enum ExecutionError {
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error("the patch could not be stored: {0}")]
    Blob(String),
    #[error("the runner's patch was refused: {0}")]
    Remote(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Where a session's execution workspace lives.
pub fn workspace_of(state: &Core, session_id: &str) -> Workspace {
    Workspace::at(&workspace_root(state, session_id))
}

fn workspace_root(state: &Core, session_id: &str) -> PathBuf {
    state.config.data_dir.join("workspaces").join(session_id)
}

/// The mode a session's next agent runs in: execution once the newest plan is approved and
/// its execution has not finished (and the server executes at all), else planning.
pub fn mode_for(
    transcript: &[EventBody],
    execution: Option<&Execution>,
    enabled: bool,
) -> AgentMode {
    let finished = execution.is_some_and(|e| e.state == ExecutionState::Finished);
    let approved = matches!(
        ExitPlanModeScanner::new().ingest(transcript),
        Ok(ScanResult::Approved { .. })
    );
    if enabled && approved && !finished {
        AgentMode::Execute
    } else {
        AgentMode::Plan
    }
}

/// Compute, store and report the patch of a session whose execution ended. Errors are
/// reported in the log as an error `result` and returned.
pub async fn finish(
    state: &Core,
    session: &SessionRow,
    ending: Ending,
) -> Result<(), ExecutionError> {
    finish_from(state, session, ending, PatchSource::Workspace).await
}

/// Where an ended execution's patch comes from.
pub enum PatchSource {
    /// This server's workspace of the session.
    Workspace,
    /// The remote runner that ran the agent diffed its own copy; `None` when it said nothing
    /// (its link was lost first).
    Remote(Option<RemotePatch>),
}

/// [`finish`], with the patch from `source`.
pub async fn finish_from(
    state: &Core,
    session: &SessionRow,
    ending: Ending,
    source: PatchSource,
) -> Result<(), ExecutionError> {
    let local = matches!(source, PatchSource::Workspace);
    let verdict = verdict_of(state, &session.id).await;
    let outcome = match source {
        PatchSource::Workspace => compute(state, session, verdict).await,
        PatchSource::Remote(patch) => store_remote(state, session, patch, verdict).await,
    };
    let event = match &outcome {
        Ok(patch) => patch_result(&session.id, &patch.summary, &ending),
        Err(error) => EventBody::error_result(
            "error_during_execution",
            format!("The patch could not be produced: {error}."),
        ),
    };
    if let Err(error) = &outcome {
        tracing::error!(session_id = %session.id, %error, "cannot produce the patch");
        let failed = Execution {
            state: ExecutionState::Finished,
            patch: None,
        };
        state.store.set_execution(&session.id, &failed).await?;
    }
    if outcome.is_ok() && local {
        remove_workspace(state, &session.id).await;
    }
    state.append(session, &[event]).await?;
    outcome.map(|_| ())
}

/// A session's stored patch: its diff from the blob store, or from the database for a patch
/// stored before diffs moved to the blob store (its row holds the diff itself).
pub async fn load_patch(state: &Core, session_id: &str) -> StoreResult<Option<PatchRow>> {
    let Some(mut row) = state.store.patch(session_id).await? else {
        return Ok(None);
    };
    let wanted = usize::try_from(row.summary.bytes).unwrap_or(usize::MAX);
    if row.diff.is_empty() && wanted > 0 {
        let corrupt = |e: String| StoreError::Corrupt(format!("the patch of {session_id}: {e}"));
        let blobs = state.config.blobs().map_err(|e| corrupt(e.to_string()))?;
        let key = crate::blobs::patch_key(session_id);
        let diff = blobs
            .get_bytes(&key, MAX_PATCH_BYTES)
            .await
            .map_err(|e| corrupt(e.to_string()))?;
        if diff.len() != wanted {
            return Err(corrupt(format!(
                "the blob holds {} bytes, the summary says {wanted}",
                diff.len()
            )));
        }
        row.diff = diff;
    }
    Ok(Some(row))
}

/// Drop a finished execution's copy: the stored patch is all that is kept. A workspace whose
/// patch failed stays for inspection.
async fn remove_workspace(state: &Core, session_id: &str) {
    let root = workspace_root(state, session_id);
    let removed = tokio::task::spawn_blocking(move || remove_workspace_root(&root)).await;
    if let Ok(Err(error)) | Err(error) = removed.map_err(std::io::Error::other) {
        tracing::warn!(session_id, %error, "cannot remove the execution workspace");
    }
}

/// The verdict of the execution's verifier: the last `verification` note since the
/// execution (last) started (docs/ARCHITECTURE.md §6.6).
async fn verdict_of(state: &Core, session_id: &str) -> Option<Verdict> {
    let events = match state.events_after(session_id, 0).await {
        Ok(events) => events,
        Err(error) => {
            tracing::warn!(session_id, %error, "cannot read the log for the verdict");
            return None;
        }
    };
    let bodies: Vec<EventBody> = events.into_iter().map(|e| e.body).collect();
    let start = bodies.iter().rposition(is_execution_started).unwrap_or(0);
    bodies[start..].iter().rev().find_map(|body| match body {
        EventBody::System(s) if s.subtype == VERIFICATION => {
            serde_json::from_value(s.data.clone()).ok()
        }
        _ => None,
    })
}

async fn compute(
    state: &Core,
    session: &SessionRow,
    verdict: Option<Verdict>,
) -> Result<Patch, ExecutionError> {
    let patch = patch_of(&workspace_root(state, &session.id), MAX_PATCH_BYTES).await?;
    save(state, session, patch, verdict).await
}

/// A remote runner's patch, checked like any input from across a boundary: its size, and the
/// files its summary names against the diff itself.
async fn store_remote(
    state: &Core,
    session: &SessionRow,
    patch: Option<RemotePatch>,
    verdict: Option<Verdict>,
) -> Result<Patch, ExecutionError> {
    let (diff, summary) = match patch {
        Some(Ok(patch)) => patch,
        Some(Err(reason)) => return Err(ExecutionError::Remote(reason)),
        None => {
            return Err(ExecutionError::Remote(
                "the runner was lost before it sent the patch".to_owned(),
            ));
        }
    };
    if diff.len() > MAX_PATCH_BYTES {
        return Err(WorkspaceError::TooLarge(MAX_PATCH_BYTES).into());
    }
    remote::check_summary(&diff, &summary).map_err(ExecutionError::Remote)?;
    save(state, session, Patch { diff, summary }, verdict).await
}

/// The diff goes to the blob store (`patches/<session>.diff`), where every replica finds it;
/// the database keeps the summary, whose `bytes` say how long the diff is. An empty diff needs
/// no blob.
async fn save(
    state: &Core,
    session: &SessionRow,
    mut patch: Patch,
    verdict: Option<Verdict>,
) -> Result<Patch, ExecutionError> {
    patch.summary.base_commit = session.context.base.commit.clone();
    patch.summary.verdict = verdict.map(Box::new);
    if !patch.diff.is_empty() {
        let blobs = state
            .config
            .blobs()
            .map_err(|e| ExecutionError::Blob(e.to_string()))?;
        // Only the summary is used from here on: the diff moves to the store, uncopied.
        let bytes = bytes::Bytes::from(std::mem::take(&mut patch.diff));
        blobs
            .put_bytes(&crate::blobs::patch_key(&session.id), bytes)
            .await
            .map_err(|e| ExecutionError::Blob(e.to_string()))?;
    }
    state
        .store
        .save_patch(&session.id, &[], &patch.summary)
        .await?;
    tracing::info!(
        session_id = %session.id,
        files = patch.summary.files.len(),
        bytes = patch.summary.bytes,
        "patch stored"
    );
    Ok(patch)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

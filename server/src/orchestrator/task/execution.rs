//! The execution half of a session task: prepare the writable copy when a plan is approved,
//! and store and report the patch when the executing agent ends.

use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::patch::{Execution, ExecutionState};

use super::SessionTask;
use crate::blobs::ensure_session_bundle_tree;
use crate::execution::{EXECUTION_STARTED, Ending, PatchSource, is_execution_started};
use crate::store::StoreResult;

impl SessionTask {
    pub(super) async fn execution(&self) -> StoreResult<Option<Execution>> {
        let row = self.inner.state.store.session(&self.session.id).await?;
        Ok(row.and_then(|r| r.execution))
    }

    /// Prepare the writable copy (once; a resumed execution keeps its edits) and mark the
    /// execution started.
    pub(super) async fn begin_execution(&mut self, transcript: &[EventBody]) -> Result<(), String> {
        let state = &self.inner.state;
        let executing = Execution {
            state: ExecutionState::Executing,
            patch: None,
        };
        state
            .store
            .set_execution(&self.session.id, &executing)
            .await
            .map_err(|e| e.to_string())?;
        if self.inner.runner.is_remote() {
            // The runner makes its own copy; the log says once that execution started.
            if transcript.iter().any(is_execution_started) {
                return Ok(());
            }
        } else {
            let workspace = crate::execution::workspace_of(state, &self.session.id);
            if workspace.is_prepared().await {
                return Ok(());
            }
            let bundle = self.bundle_path().await?;
            let owner = self.inner.runner.workspace_owner();
            workspace
                .prepare(&bundle, owner)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.append_note(
            EXECUTION_STARTED,
            "The plan was approved: the agent implements it in a writable copy of the \
             repository."
                .to_owned(),
        )
        .await;
        Ok(())
    }

    /// Whether the store says an execution is under way (marked at approval).
    pub(super) async fn execution_pending(&self) -> bool {
        self.execution()
            .await
            .is_ok_and(|e| e.is_some_and(|e| e.state == ExecutionState::Executing))
    }

    /// A planning task that ended on its own (not stopped, not past its time) while the
    /// store says its plan is approved for execution: the decision came too late for it.
    pub(super) async fn left_an_approval(&self) -> bool {
        self.mode == AgentMode::Plan && self.cut_short.is_none() && self.execution_pending().await
    }

    /// Store and report the execution's patch, once.
    pub(super) async fn finish_execution(&mut self) {
        if self.patched {
            return;
        }
        self.patched = true;
        let ending = match self.cut_short.clone() {
            Some(why) => Ending::CutShort(why),
            None if self.saw_done => Ending::Finished,
            None => Ending::CutShort("the agent stopped unexpectedly".to_owned()),
        };
        let source = if self.inner.runner.is_remote() {
            PatchSource::Remote(self.remote_patch.take())
        } else {
            PatchSource::Workspace
        };
        let state = &self.inner.state;
        if let Err(error) =
            crate::execution::finish_from(state, &self.session, ending, source).await
        {
            tracing::error!(session_id = %self.session.id, %error, "execution ended without a patch");
        }
    }

    /// The bundle's unpacked tree, unpacked from the blob store first when this server has no
    /// copy of it.
    pub(super) async fn bundle_path(&self) -> Result<std::path::PathBuf, String> {
        let bundle = self
            .session
            .bundle_id
            .as_deref()
            .ok_or("the session has no bundle")?;
        let config = &self.inner.state.config;
        let blobs = config.blobs().map_err(|e| e.to_string())?;
        ensure_session_bundle_tree(&blobs, &config.bundles_dir(), bundle, &config.bundle_limits)
            .await
            .map_err(|e| e.to_string())
    }
}

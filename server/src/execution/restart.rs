//! Executions a previous server process left unfinished: the patch is produced for every one
//! no agent will take up again (archived meanwhile, or no runner), and a patch that was stored
//! without its `result` gets that result.

use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::patch::ExecutionState;

use super::{Ending, finish, patch_result};
use crate::core::Core;
use crate::store::{SessionRow, StoreResult};

/// Finish every execution still marked executing whose session no agent will take up again
/// (`taken_up` says which will). Returns how many were finished.
pub async fn finish_abandoned(
    state: &Core,
    taken_up: impl Fn(&SessionRow) -> bool,
    why: &str,
) -> StoreResult<usize> {
    let mut finished = 0;
    for row in state.store.sessions_executing().await? {
        if taken_up(&row) {
            continue;
        }
        tracing::warn!(session_id = %row.id, why, "finishing an abandoned execution");
        if let Err(error) = finish(state, &row, Ending::CutShort(why.to_owned())).await {
            tracing::error!(session_id = %row.id, %error, "execution ended without a patch");
        }
        finished += 1;
    }
    Ok(finished)
}

/// Whether the session's execution is over (patch stored or failed), so no agent should be
/// started for it. Appends the patch's `result` when a crash came between storing the patch
/// and reporting it.
pub async fn settle_finished(state: &Core, row: &SessionRow) -> StoreResult<bool> {
    let Some(execution) = &row.execution else {
        return Ok(false);
    };
    if execution.state != ExecutionState::Finished {
        return Ok(false);
    }
    if let Some(summary) = &execution.patch
        && !reported(state, &row.id).await?
    {
        let ending = Ending::CutShort("the server restarted".to_owned());
        let event = patch_result(&row.id, summary, &ending);
        state.append(row, &[event]).await?;
    }
    Ok(true)
}

/// Whether the log already has the result that reports the patch.
async fn reported(state: &Core, session_id: &str) -> StoreResult<bool> {
    let events = state.events_after(session_id, 0).await?;
    Ok(events
        .iter()
        .any(|e| matches!(&e.body, EventBody::Result(r) if r.patch.is_some())))
}

//! The approve form's environment choice (docs/ARCHITECTURE.md §6.5): the named environments
//! the owner can use, offered while a plan is pending.

use super::error::PageResult;
use super::view::{EnvironmentView, SessionView};
use crate::http::state::AppState;
use crate::store::SessionRow;

/// Fill in [`SessionView::environment`]: options only while a plan waits for a decision.
pub async fn attach(state: &AppState, row: &SessionRow, v: &mut SessionView) -> PageResult<()> {
    let pending = v.plan.as_ref().is_some_and(|p| p.pending);
    let options = if pending {
        let mut names: Vec<String> = state
            .core
            .environments()
            .list(&row.user_id)
            .await
            .map_err(|e| super::error::PageError::Api(e.into()))?
            .into_iter()
            .map(|e| e.name)
            .collect();
        names.dedup();
        names
    } else {
        Vec::new()
    };
    v.environment = EnvironmentView {
        current: row.context.environment.clone(),
        options,
    };
    Ok(())
}

//! Choosing a session's environment before its execution starts (the review page's approve
//! form): a named environment the owner can use, or the repository's own file.

use super::{SessionError, SessionResult};
use crate::core::Core;
use crate::environments::EnvironmentError;
use crate::store::SessionRow;

/// Use `choice` (a named environment, or `None` for the repository's
/// `.ultraplan/environment.toml`) from the next agent on. Refused once an execution is
/// recorded: the environment an execution started with is the one it keeps.
pub async fn choose_environment(
    core: &Core,
    session: &SessionRow,
    choice: Option<&str>,
) -> SessionResult<()> {
    if let Some(name) = choice {
        match core.environments().resolve(&session.user_id, name).await {
            Ok(_) => {}
            Err(EnvironmentError::Store(error)) => return Err(error.into()),
            Err(error) => {
                return Err(SessionError::invalid(
                    "unknown_environment",
                    error.to_string(),
                ));
            }
        }
    }
    let mut context = session.context.clone();
    if context.environment.as_deref() == choice {
        return Ok(());
    }
    context.environment = choice.map(str::to_owned);
    if !core
        .store
        .set_context_before_execution(&session.id, &context)
        .await?
    {
        return Err(SessionError::invalid(
            "execution_started",
            "the execution has started; its environment can no longer change",
        ));
    }
    tracing::info!(session_id = %session.id, environment = ?choice, "environment chosen for the execution");
    Ok(())
}

//! Creating a session: the user's flags allow it, the request is valid, the bundle is the
//! user's; then the session and its first events are stored at once and its agent starts.

use ultraplan_protocol::api::CreateSessionRequest;
use ultraplan_protocol::session::{SessionResource, SessionStatus};

use super::{SessionError, SessionResult, resource, validate_create};
use crate::auth::AuthUser;
use crate::core::Core;
use crate::orchestrator::Agents;
use crate::store::NewSession;
use crate::telemetry::names;

/// Create a session from an uploaded bundle and its first events, and start its agent.
/// A refusal is counted in telemetry under its reason.
pub async fn create(
    core: &Core,
    agents: &Agents,
    user: &AuthUser,
    req: CreateSessionRequest,
) -> SessionResult<SessionResource> {
    let result = create_inner(core, agents, user, req).await;
    if let Err(error) = &result {
        record_create_failure(core, &user.id, failure_reason(error)).await;
    }
    result
}

/// Count a refused creation (also for requests refused before they reach [`create`]).
pub async fn record_create_failure(core: &Core, user_id: &str, reason: &str) {
    core.telemetry(
        names::CREATE_FAILED,
        &[("reason", reason)],
        Some(user_id),
        None,
    )
    .await;
}

fn failure_reason(error: &SessionError) -> &'static str {
    match error {
        SessionError::NotFound(_) => "bundle_not_found",
        SessionError::Store(_) => "internal",
        other => other.code(),
    }
}

async fn create_inner(
    core: &Core,
    agents: &Agents,
    user: &AuthUser,
    mut req: CreateSessionRequest,
) -> SessionResult<SessionResource> {
    let flags = crate::flags::for_user(core, &user.id).await?;
    if !flags.enabled {
        return Err(SessionError::Disabled);
    }
    let title = validate_create(&req, &core.config)?;
    if core
        .store
        .owned_bundle(&user.id, &req.bundle_id)
        .await?
        .is_none()
    {
        return Err(SessionError::NotFound("bundle"));
    }
    if let Some(name) = &req.session_context.environment {
        check_environment(core, &user.id, name).await?;
    }
    req.session_context
        .prompt_variant
        .get_or_insert_with(|| flags.prompt_variant.as_str().to_owned());
    req.session_context.model.get_or_insert(flags.model);
    let new = NewSession {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user.id.clone(),
        title,
        bundle_id: Some(req.bundle_id.clone()),
        context: req.session_context,
        // Queued for a runner is running to the person waiting: only a session no agent can
        // run is idle (a full fleet must not read as "needs your input").
        status: match agents.problem() {
            None => SessionStatus::Running,
            Some(_) => SessionStatus::Idle,
        },
    };
    let (row, events) = core.store.create_session(&new, &req.events).await?;
    core.after_append(&row, &events).await;
    agents.queue(&row.id).await?;
    core.telemetry(names::LAUNCHED, &[], Some(&user.id), Some(&row.id))
        .await;
    tracing::info!(session_id = %row.id, user = %user.name, "session created");
    Ok(resource(core, agents, &row))
}

/// A named environment the session asks for must be one the user can use, so a typo is
/// refused at launch rather than when its agent starts.
async fn check_environment(core: &Core, owner: &str, name: &str) -> SessionResult<()> {
    use crate::environments::EnvironmentError;
    match core.environments().resolve(owner, name).await {
        Ok(_) => Ok(()),
        Err(EnvironmentError::Store(error)) => Err(error.into()),
        Err(error) => Err(SessionError::invalid(
            "unknown_environment",
            format!(
                "{error}: see `ultraplan env list` for the environments you can use, or drop                  --env to use the repository's .ultraplan/environment.toml"
            ),
        )),
    }
}

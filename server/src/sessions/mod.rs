//! Session use cases, one path each for the API and the review pages: create a session, post
//! user events (messages and answers), decide a plan, archive (stop) a session; and the API
//! resource of a stored session. Each returns a [`SessionError`] that the HTTP layer maps at its
//! boundary; none of them knows about HTTP.

mod archive;
mod comments;
mod create;
mod decide;
mod environment;
mod error;
mod post;
mod resource;
mod validate;

pub use archive::archive;
pub use comments::{add_comment, list_comments, reopen_comment, session_comments};
pub use create::{create, record_create_failure};
pub use decide::{DecisionOutcome, decide};
pub use environment::choose_environment;
pub use error::{SessionError, SessionResult};
pub use post::post_events;
pub use resource::resource;
pub use validate::{validate_client_events, validate_create};

use crate::core::Core;
use crate::store::SessionRow;

/// The session if it belongs to `user_id`; `NotFound` for other users' sessions too.
pub async fn owned(core: &Core, user_id: &str, id: &str) -> SessionResult<SessionRow> {
    core.store
        .session_for_user(user_id, id)
        .await?
        .ok_or(SessionError::NotFound("session"))
}

//! Which runner of the fleet is calling: a runner token (`urt_…`) as the bearer credential,
//! verified once by the rate limiter (recorded as [`VerifiedRunner`]) or here. A user's token,
//! a browser session or no credential is refused with 401; runner tokens are refused on every
//! user route in turn ([`crate::auth`]).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

pub use crate::auth::RunnerIdentity;
use crate::auth::verify_runner;
use crate::http::auth::bearer;
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The outcome of verifying a request's bearer token as a runner's, recorded in its extensions
/// by the rate limiter so [`RunnerAuth`] does not ask the store again.
#[derive(Debug, Clone)]
pub struct VerifiedRunner(pub Option<RunnerIdentity>);

/// The runner a request authenticated as; rejects with 401 `unauthorized` otherwise.
#[derive(Debug, Clone)]
pub struct RunnerAuth(pub RunnerIdentity);

impl FromRequestParts<AppState> for RunnerAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let runner = match parts.extensions.get::<VerifiedRunner>() {
            Some(VerifiedRunner(runner)) => runner.clone(),
            None => match bearer(parts) {
                Some(token) => verify_runner(state.core.store.as_ref(), token).await?,
                None => None,
            },
        };
        runner.map(RunnerAuth).ok_or(ApiError::Unauthorized)
    }
}

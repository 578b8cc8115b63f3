//! The middleware that limits API requests on the identity they authenticate as.
//!
//! A request with a bearer token has it verified here, once: the verified user goes into the
//! request's extensions (the [`AuthUser`](crate::auth::AuthUser) extractor takes it from
//! there), and the request is counted against that user's bucket, whatever the spelling of
//! its `Authorization` header. A credential that does not verify is counted against the client
//! address's bucket. Requests without a token pass untouched: the login routes and page
//! forms limit themselves (they know what they authenticate).
//!
//! A runner token (`urt_…`, [`auth::is_runner_token`]) is verified as a runner instead, and the
//! request counted against that runner's own bucket (`runner:<name>`, the same read and write
//! rates a user has), never the client address's: many runners behind one NAT must not starve
//! each other or the address's anonymous traffic. The verified runner goes into the extensions
//! as [`VerifiedRunner`] for the runner extractor; as a user it is `Verified(None)`.

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ClientAddr;
use crate::auth;
use crate::http::auth::{Verified, bearer_of};
use crate::http::error::ApiError;
use crate::http::runner_auth::VerifiedRunner;
use crate::http::state::AppState;

/// Middleware: verify a presented bearer token and limit the request on who it is.
pub async fn limit(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    if !request.headers().contains_key(AUTHORIZATION) {
        return next.run(request).await;
    }
    let store = state.core.store.as_ref();
    let (user, runner) = match bearer_of(request.headers()).map(str::to_owned) {
        Some(token) if auth::is_runner_token(&token) => {
            match auth::verify_runner(store, &token).await {
                Ok(runner) => (None, runner),
                Err(error) => return ApiError::from(error).into_response(),
            }
        }
        Some(token) => match auth::verify(store, &token).await {
            Ok(user) => (user, None),
            Err(error) => return ApiError::from(error).into_response(),
        },
        None => (None, None),
    };
    let limiters = &state.rate_limiters;
    let verdict = match (&user, &runner) {
        (Some(user), _) => limiters.check_user(request.method(), &user.id),
        (None, Some(runner)) => limiters.check_runner(request.method(), &runner.name),
        (None, None) => limiters.check_anonymous(ClientAddr::of(request.extensions())),
    };
    if let Err(retry_after) = verdict {
        tracing::debug!(
            user = user.as_ref().map(|u| u.id.as_str()),
            runner = runner.as_ref().map(|r| r.name.as_str()),
            "rate limited"
        );
        return super::too_many(retry_after);
    }
    request.extensions_mut().insert(Verified(user));
    request.extensions_mut().insert(VerifiedRunner(runner));
    next.run(request).await
}

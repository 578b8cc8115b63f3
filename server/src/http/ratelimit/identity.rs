//! The middleware that limits API requests on the identity they authenticate as.
//!
//! A request with a bearer token has it verified here, once: the verified user goes into the
//! request's extensions (the [`AuthUser`](crate::auth::AuthUser) extractor takes it from
//! there), and the request is counted against that user's bucket, whatever the spelling of
//! its `Authorization` header. A credential that does not verify is counted against the client
//! address's bucket. Requests without a token pass untouched: the login routes and page
//! forms limit themselves (they know what they authenticate).

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ClientAddr;
use crate::auth;
use crate::http::auth::{Verified, bearer_of};
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// Middleware: verify a presented bearer token and limit the request on who it is.
pub async fn limit(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    if !request.headers().contains_key(AUTHORIZATION) {
        return next.run(request).await;
    }
    let user = match bearer_of(request.headers()).map(str::to_owned) {
        Some(token) => match auth::verify(state.core.store.as_ref(), &token).await {
            Ok(user) => user,
            Err(error) => return ApiError::from(error).into_response(),
        },
        None => None,
    };
    let limiters = &state.rate_limiters;
    let verdict = match &user {
        Some(user) => limiters.check_user(request.method(), &user.id),
        None => limiters.check_anonymous(ClientAddr::of(request.extensions())),
    };
    if let Err(retry_after) = verdict {
        tracing::debug!(user = user.as_ref().map(|u| u.id.as_str()), "rate limited");
        return super::too_many(retry_after);
    }
    request.extensions_mut().insert(Verified(user));
    next.run(request).await
}

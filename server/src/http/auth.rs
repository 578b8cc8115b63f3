//! Who is calling: the bearer token of a request, verified once (the rate limiter records the
//! outcome in the request's extensions) and handed to handlers as [`AuthUser`] or [`MaybeUser`].

use axum::extract::FromRequestParts;
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::auth::{AuthUser, verify};
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// The bearer token of a request, if any.
pub fn bearer(parts: &Parts) -> Option<&str> {
    bearer_of(&parts.headers)
}

/// The bearer token in these headers, if any: the scheme in any case, then spaces or tabs.
pub fn bearer_of(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The outcome of verifying a request's credential, recorded in its extensions by the rate
/// limiter (which verifies every presented token once, to key its bucket on the user), so
/// the extractors below do not ask the store again.
#[derive(Debug, Clone)]
pub struct Verified(pub Option<AuthUser>);

/// The request's user: taken from [`Verified`] when the limiter recorded it, else verified.
async fn resolve(parts: &Parts, state: &AppState) -> Result<Option<AuthUser>, ApiError> {
    if let Some(Verified(user)) = parts.extensions.get::<Verified>() {
        return Ok(user.clone());
    }
    match bearer(parts) {
        Some(token) => Ok(verify(state.core.store.as_ref(), token).await?),
        None => Ok(None),
    }
}

impl FromRequestParts<AppState> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        resolve(parts, state).await?.ok_or(ApiError::Unauthorized)
    }
}

/// The caller if a valid token was presented; never rejects.
pub struct MaybeUser(pub Option<AuthUser>);

impl FromRequestParts<AppState> for MaybeUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Ok(MaybeUser(resolve(parts, state).await?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_spellings_give_the_same_token() {
        let cases = [
            ("Bearer up_a_b", Some("up_a_b")),
            ("bearer up_a_b", Some("up_a_b")),
            ("BEARER   up_a_b  ", Some("up_a_b")),
            ("Bearer\tup_a_b", Some("up_a_b")),
            ("  Bearer \t up_a_b", Some("up_a_b")),
            ("Bearer", None),
            ("Bearer   ", None),
            ("Basic up_a_b", None),
            ("Bearerup_a_b", None),
        ];
        for (value, want) in cases {
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, value.parse().expect("header"));
            assert_eq!(bearer_of(&headers), want, "{value:?}");
        }
    }
}

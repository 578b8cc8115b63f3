//! Browser sessions: an HttpOnly cookie `<id>.<secret>` whose secret is stored only as a
//! SHA-256 hash and compared in constant time, and a per-session CSRF token checked on every
//! form. Login links use the same `<id>.<secret>` shape.

use std::time::Duration;

use axum::extract::{Form, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::error::{PageError, PageResult};
use super::templates::{ErrorPage, Layout, render};
use crate::http::ratelimit::ClientAddr;
use crate::http::state::AppState;
use crate::store::{WebSessionRow, now_ms};

/// How long a browser session lasts.
pub const SESSION_TTL_MS: i64 = 7 * 24 * 3600 * 1000;

/// A fresh random secret: 128 bits per UUID, hex.
pub fn random_hex(uuids: usize) -> String {
    (0..uuids)
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect()
}

/// SHA-256 of a secret, hex.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Constant-time string equality.
pub fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Split `<id>.<secret>` (both hex).
pub fn split_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let hexy =
        |s: &str| !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hexy(id) && hexy(secret)).then_some((id, secret))
}

/// Whether cookies must be `Secure` (the public URL is https).
pub fn secure(state: &AppState) -> bool {
    state.core.config.public_url.starts_with("https://")
}

/// The session cookie's name: `__Host-` prefixed when it can be Secure.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-ultraplan"
    } else {
        "ultraplan_session"
    }
}

/// A `Set-Cookie` value; `max_age_s` 0 deletes the cookie.
pub fn set_cookie(
    name: &str,
    value: &str,
    max_age_s: i64,
    secure: bool,
    same_site: &str,
) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite={same_site}; Max-Age={max_age_s}{secure}")
}

/// The value of a cookie in the request.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
}

/// A local path safe to redirect to after login (no scheme, no host, no backslashes).
pub fn safe_next(next: &str) -> Option<String> {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && next.len() <= 512
        && !next.chars().any(|c| c == '\\' || c.is_control());
    ok.then(|| next.to_owned())
}

/// Percent-encode a query value.
pub fn encode_query(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Where to send a browser that must log in first.
pub fn login_path(next: &str) -> String {
    match safe_next(next) {
        Some(next) if next != "/" => format!("/login?next={}", encode_query(&next)),
        _ => "/login".to_owned(),
    }
}

/// Start a browser session for a user; returns the row and the cookie value.
pub async fn start_session(state: &AppState, user_id: &str) -> PageResult<(WebSessionRow, String)> {
    let (id, secret) = (random_hex(1), random_hex(2));
    let now = now_ms();
    let row = WebSessionRow {
        id: id.clone(),
        user_id: user_id.to_owned(),
        user_name: String::new(),
        hash: hash(&secret),
        csrf: random_hex(2),
        created_at: now,
        expires_at: now + SESSION_TTL_MS,
    };
    state.core.store.insert_web_session(&row).await?;
    Ok((row, format!("{id}.{secret}")))
}

/// The logged-in browser user.
#[derive(Clone, PartialEq, Eq)]
pub struct WebUser {
    pub id: String,
    pub name: String,
    pub session_id: String,
    pub csrf: String,
}

impl std::fmt::Debug for WebUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebUser")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl WebUser {
    /// 403 unless `presented` is this session's CSRF token.
    pub fn check_csrf(&self, presented: &str) -> PageResult<()> {
        if !presented.is_empty() && same(presented, &self.csrf) {
            Ok(())
        } else {
            Err(PageError::Forbidden(
                "the form's security token is missing or wrong; reload the page and try again",
            ))
        }
    }
}

/// The browser user of a request, if its cookie names a live session.
pub async fn current(state: &AppState, headers: &HeaderMap) -> PageResult<Option<WebUser>> {
    let Some((id, secret)) = cookie(headers, cookie_name(secure(state))).and_then(split_token)
    else {
        return Ok(None);
    };
    let Some(row) = state.core.store.web_session(id, now_ms()).await? else {
        return Ok(None);
    };
    Ok(same(&hash(secret), &row.hash).then_some(WebUser {
        id: row.user_id,
        name: row.user_name,
        session_id: row.id,
        csrf: row.csrf,
    }))
}

impl FromRequestParts<AppState> for WebUser {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> PageResult<Self> {
        let next = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let next = if parts.method == axum::http::Method::GET {
            next
        } else {
            "/".to_owned()
        };
        current(state, &parts.headers)
            .await?
            .ok_or(PageError::LoginRequired { next })
    }
}

/// The browser user of a stream or fragment request: 401 rather than a redirect.
pub struct FeedUser(pub WebUser);

impl FromRequestParts<AppState> for FeedUser {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> PageResult<Self> {
        current(state, &parts.headers)
            .await?
            .map(FeedUser)
            .ok_or(PageError::Unauthorized)
    }
}

/// A form that carries a CSRF token in its `csrf` field.
pub trait CsrfForm {
    fn csrf(&self) -> &str;
}

/// A posted form from the logged-in user whose CSRF token checked out. Forms from other sites
/// (`Sec-Fetch-Site: cross-site`) are refused before their token is looked at. Each user's
/// posts count against their write bucket; posts without a live session against the client
/// address's bucket.
pub struct Posted<T> {
    pub user: WebUser,
    pub form: T,
}

impl<T> FromRequest<AppState> for Posted<T>
where
    T: DeserializeOwned + CsrfForm + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let user = match WebUser::from_request_parts(&mut parts, state).await {
            Ok(user) => user,
            Err(error) => {
                let refused = limit_anonymous(state, ClientAddr::of(&parts.extensions));
                return Err(refused.unwrap_or_else(|| error.into_response()));
            }
        };
        if let Err(retry_after) = state.rate_limiters.check_user(&parts.method, &user.id) {
            return Err(too_many_page(retry_after));
        }
        if parts
            .headers
            .get("sec-fetch-site")
            .is_some_and(|v| v.as_bytes() == b"cross-site")
        {
            return Err(PageError::Forbidden("cross-site form posts are refused").into_response());
        }
        let req = Request::from_parts(parts, body);
        let Form(form) = Form::<T>::from_request(req, state)
            .await
            .map_err(|e| PageError::BadRequest(e.body_text()).into_response())?;
        user.check_csrf(form.csrf())
            .map_err(IntoResponse::into_response)?;
        Ok(Posted { user, form })
    }
}

/// Count a request that does not authenticate against its client address's bucket; the
/// refusal page when it is over the limit.
pub fn limit_anonymous(state: &AppState, client: ClientAddr) -> Option<Response> {
    state
        .rate_limiters
        .check_anonymous(client)
        .err()
        .map(too_many_page)
}

/// 429 as a page, with `Retry-After`.
pub fn too_many_page(retry_after: Duration) -> Response {
    let seconds = crate::http::ratelimit::retry_seconds(retry_after);
    let page = ErrorPage {
        layout: Layout::anonymous("Too many requests"),
        status: 429,
        message: format!("Too many requests in a short time. Try again in {seconds} s."),
        show_login: false,
    };
    crate::http::ratelimit::with_retry_after(
        render(StatusCode::TOO_MANY_REQUESTS, &page),
        retry_after,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_only_when_well_formed() {
        assert_eq!(split_token("ab.cd"), Some(("ab", "cd")));
        for bad in ["", ".", "ab.", ".cd", "ab", "a b.cd", "ab.c.d", "xy.cd"] {
            assert_eq!(split_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn next_paths_stay_local() {
        assert_eq!(
            safe_next("/sessions/1?x=2").as_deref(),
            Some("/sessions/1?x=2")
        );
        for bad in ["https://evil", "//evil", "/\\evil", "evil", "/a\nb"] {
            assert_eq!(safe_next(bad), None, "{bad}");
        }
        assert_eq!(login_path("/"), "/login");
        assert_eq!(login_path("//evil"), "/login");
        assert_eq!(
            login_path("/sessions/a b"),
            "/login?next=%2Fsessions%2Fa%20b"
        );
    }

    #[test]
    fn cookies_are_found_and_built() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "a=1; ultraplan_session=ab.cd".parse().expect("header"),
        );
        assert_eq!(cookie(&headers, "ultraplan_session"), Some("ab.cd"));
        assert_eq!(cookie(&headers, "b"), None);
        let set = set_cookie("__Host-ultraplan", "v", 60, true, "Lax");
        assert_eq!(
            set,
            "__Host-ultraplan=v; Path=/; HttpOnly; SameSite=Lax; Max-Age=60; Secure"
        );
        assert!(!set_cookie("n", "v", 0, false, "Lax").contains("Secure"));
    }

    #[test]
    fn csrf_is_checked() {
        let user = WebUser {
            id: "u".into(),
            name: "n".into(),
            session_id: "s".into(),
            csrf: "token".into(),
        };
        assert!(user.check_csrf("token").is_ok());
        assert!(user.check_csrf("").is_err());
        assert!(user.check_csrf("tokem").is_err());
    }
}

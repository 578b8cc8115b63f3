//! Logging in: one-time links minted over the API (`ultraplan open ID`), confirmed first when
//! they could be a login CSRF, a token form, and logging out. Attempts are limited per client
//! address.

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

mod confirm;

use super::auth::{
    Posted, SESSION_TTL_MS, cookie, cookie_name, current, hash, limit_anonymous, random_hex,
    safe_next, same, secure, set_cookie, split_token, start_session,
};
use super::error::{PageError, PageResult};
use super::templates::{Layout, LoginPage, render};
use crate::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult};
use crate::http::ratelimit::ClientAddr;
use crate::http::state::AppState;
use crate::store::{LinkRow, format_ms, now_ms};

/// How long a login link works.
pub const LINK_TTL_MS: i64 = 10 * 60 * 1000;
const LOGIN_FORM_COOKIE: &str = "ultraplan_login";

/// `POST /v1/login-links` body.
#[derive(Debug, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct LinkRequest {
    /// Local path to open after logging in (default `/`).
    pub next: Option<String>,
}

/// `POST /v1/login-links` response.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
pub struct LinkResponse {
    /// Open this once, within ten minutes.
    pub url: String,
    pub expires_at: String,
}

/// A one-time browser login link for the caller (what `ultraplan open ID` opens). It works
/// once, within ten minutes, and leads to `next`.
#[utoipa::path(post, path = "/v1/login-links", tag = "login",
    request_body = LinkRequest,
    responses((status = 201, body = LinkResponse),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 401, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn mint(
    State(state): State<AppState>,
    user: AuthUser,
    body: Result<Json<LinkRequest>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<LinkResponse>)> {
    let Json(req) = body.map_err(|e| ApiError::bad_request("invalid_request", e.body_text()))?;
    let next = match req.next.as_deref() {
        None => "/".to_owned(),
        Some(n) => safe_next(n).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_next",
                "`next` must be a local path such as /sessions/ID",
            )
        })?,
    };
    let (id, secret) = (random_hex(1), random_hex(2));
    let now = now_ms();
    let link = LinkRow {
        id: id.clone(),
        user_id: user.id,
        hash: hash(&secret),
        next_path: next.clone(),
        created_at: now,
        expires_at: now + LINK_TTL_MS,
    };
    state
        .core
        .store
        .insert_login_link(&link)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let base = state.core.config.public_url.trim_end_matches('/');
    let url = format!(
        "{base}/login/{id}.{secret}?next={}",
        super::auth::encode_query(&next)
    );
    Ok((
        StatusCode::CREATED,
        Json(LinkResponse {
            url,
            expires_at: format_ms(link.expires_at),
        }),
    ))
}

/// A 303 to `next` that sets the session cookie.
fn logged_in(state: &AppState, cookie_value: &str, next: &str) -> Response {
    let secure = secure(state);
    let target = safe_next(next).unwrap_or_else(|| "/".to_owned());
    let mut response = Redirect::to(&target).into_response();
    let set = set_cookie(
        cookie_name(secure),
        cookie_value,
        SESSION_TTL_MS / 1000,
        secure,
        "Lax",
    );
    if let Ok(value) = HeaderValue::from_str(&set) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `GET /login/{token}`: spend a one-time link and start a browser session; or, when the
/// link comes from another site or is for someone other than the logged-in user, ask first
/// (the link stays unspent until the confirming post).
pub async fn exchange(
    State(state): State<AppState>,
    client: ClientAddr,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> PageResult<Response> {
    if let Some(refused) = limit_anonymous(&state, client) {
        return Ok(refused);
    }
    let link = usable(&state, &token).await?;
    let current = current(&state, &headers).await?;
    let site = confirm::fetch_site(&headers);
    if confirm::must_confirm(site, current.as_ref().map(|u| u.id.as_str()), &link.user_id) {
        let cross_site = confirm::from_elsewhere(site);
        let (page, form_token) =
            confirm::page(&state, current.as_ref(), &link, &token, cross_site).await?;
        tracing::info!(link_user = %link.user_id, cross_site, "login link needs confirmation");
        return Ok(with_form_cookie(&state, page, &form_token));
    }
    spend(&state, &link).await?;
    let (_, value) = start_session(&state, &link.user_id).await?;
    tracing::info!(user_id = %link.user_id, "browser login by link");
    Ok(logged_in(&state, &value, &link.next_path))
}

/// The link `<id>.<secret>` names, if it is unused, unexpired and its secret matches.
async fn usable(state: &AppState, token: &str) -> PageResult<LinkRow> {
    let (id, secret) = split_token(token).ok_or(PageError::LinkInvalid)?;
    let link = state
        .core
        .store
        .usable_login_link(id, now_ms())
        .await?
        .ok_or(PageError::LinkInvalid)?;
    if !same(&hash(secret), &link.hash) {
        return Err(PageError::LinkInvalid);
    }
    Ok(link)
}

/// Mark the link used; only one request can.
async fn spend(state: &AppState, link: &LinkRow) -> PageResult<()> {
    if state.core.store.use_login_link(&link.id, now_ms()).await? {
        Ok(())
    } else {
        Err(PageError::LinkInvalid)
    }
}

/// Query and form of the token login.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LoginForm {
    pub csrf: String,
    pub token: String,
    pub next: String,
    /// A login link's `<id>.<secret>`, posted from its confirmation page.
    pub link: String,
}

fn login_page(state: &AppState, status: StatusCode, next: &str, error: Option<String>) -> Response {
    let token = random_hex(2);
    let page = LoginPage {
        layout: Layout::anonymous("Log in"),
        form_token: token.clone(),
        next: safe_next(next).unwrap_or_else(|| "/".to_owned()),
        error,
    };
    with_form_cookie(state, render(status, &page), &token)
}

/// Set the login form's double-submit cookie (SameSite=Strict: never sent by a post from
/// another site).
fn with_form_cookie(state: &AppState, mut response: Response, token: &str) -> Response {
    let set = set_cookie(login_cookie(state), token, 3600, secure(state), "Strict");
    if let Ok(value) = HeaderValue::from_str(&set) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn login_cookie(state: &AppState) -> &'static str {
    if secure(state) {
        "__Host-ultraplan_login"
    } else {
        LOGIN_FORM_COOKIE
    }
}

/// `GET /login`: the token form (or straight on when already logged in).
pub async fn form(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(query): Query<LoginForm>,
) -> PageResult<Response> {
    if current(&state, &headers).await?.is_some() {
        return Ok(
            Redirect::to(&safe_next(&query.next).unwrap_or_else(|| "/".to_owned())).into_response(),
        );
    }
    Ok(login_page(&state, StatusCode::OK, &query.next, None))
}

/// `POST /login`: check the pasted API token, or spend the login link a confirmation page
/// posts back. The form's double-submitted token guards against login CSRF, and posts from
/// other sites are refused outright.
pub async fn submit(
    State(state): State<AppState>,
    client: ClientAddr,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> PageResult<Response> {
    if let Some(refused) = limit_anonymous(&state, client) {
        return Ok(refused);
    }
    let expected = cookie(&headers, login_cookie(&state)).unwrap_or("");
    if expected.is_empty() || !same(expected, &form.csrf) {
        return Err(PageError::Forbidden(
            "the login form expired; reload it and try again",
        ));
    }
    if confirm::from_elsewhere(confirm::fetch_site(&headers)) {
        return Err(PageError::Forbidden("cross-site login posts are refused"));
    }
    let (user_id, next) = if form.link.is_empty() {
        let Some(user) = crate::auth::verify(state.core.store.as_ref(), form.token.trim()).await?
        else {
            let error =
                Some("That token is not valid. Check that you pasted all of it.".to_owned());
            return Ok(login_page(
                &state,
                StatusCode::UNAUTHORIZED,
                &form.next,
                error,
            ));
        };
        tracing::info!(user = %user.name, "browser login by token");
        (user.id, form.next)
    } else {
        let link = usable(&state, &form.link).await?;
        spend(&state, &link).await?;
        tracing::info!(user_id = %link.user_id, "browser login by confirmed link");
        (link.user_id, link.next_path)
    };
    let (_, value) = start_session(&state, &user_id).await?;
    let mut response = logged_in(&state, &value, &next);
    let clear = set_cookie(login_cookie(&state), "", 0, secure(&state), "Strict");
    if let Ok(value) = HeaderValue::from_str(&clear) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `POST /logout`.
pub async fn logout(
    State(state): State<AppState>,
    Posted { user, .. }: Posted<super::actions::TokenForm>,
) -> PageResult<Response> {
    state
        .core
        .store
        .delete_web_session(&user.session_id)
        .await?;
    let secure = secure(&state);
    let mut response = Redirect::to("/login").into_response();
    let set = set_cookie(cookie_name(secure), "", 0, secure, "Lax");
    if let Ok(value) = HeaderValue::from_str(&set) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(response)
}

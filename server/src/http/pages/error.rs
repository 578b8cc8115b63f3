//! Errors of the pages: a small HTML page with the right status, never internals.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::templates::{ErrorPage, render};
use crate::http::error::ApiError;
use crate::sessions::SessionError;
use crate::store::StoreError;

/// An error a page handler returns.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// No browser session: send the browser to the login form, then back to `next`.
    #[error("login required")]
    LoginRequired { next: String },
    /// No browser session, for streams and fragments (no redirect).
    #[error("login required")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("not found")]
    NotFound,
    /// A 404 that says what is missing.
    #[error("{0}")]
    Missing(&'static str),
    /// A 409: not now (e.g. the patch of an execution still running).
    #[error("{0}")]
    Conflict(&'static str),
    #[error("{0}")]
    BadRequest(String),
    #[error("this login link is invalid, used or expired")]
    LinkInvalid,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("template error: {0}")]
    Render(#[from] askama::Error),
}

impl From<SessionError> for PageError {
    fn from(error: SessionError) -> Self {
        PageError::Api(error.into())
    }
}

/// Result alias for page handlers.
pub type PageResult<T> = Result<T, PageError>;

impl PageError {
    fn status(&self) -> StatusCode {
        match self {
            PageError::LoginRequired { .. } => StatusCode::SEE_OTHER,
            PageError::Unauthorized => StatusCode::UNAUTHORIZED,
            PageError::Forbidden(_) => StatusCode::FORBIDDEN,
            PageError::NotFound | PageError::Missing(_) => StatusCode::NOT_FOUND,
            PageError::Conflict(_) => StatusCode::CONFLICT,
            PageError::BadRequest(_) => StatusCode::BAD_REQUEST,
            PageError::LinkInvalid => StatusCode::GONE,
            PageError::Api(e) => e.clone_status(),
            PageError::Store(StoreError::NotFound(_)) => StatusCode::NOT_FOUND,
            PageError::Store(_) | PageError::Database(_) | PageError::Render(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    fn title(status: StatusCode) -> &'static str {
        match status.as_u16() {
            401 => "Please log in",
            403 => "Not allowed",
            404 => "Not found",
            409 => "Not yet",
            410 => "Login link expired",
            400..=499 => "That did not work",
            _ => "Something went wrong",
        }
    }
}

/// The status an API error maps to, without consuming it.
trait ApiStatus {
    fn clone_status(&self) -> StatusCode;
}

impl ApiStatus for ApiError {
    fn clone_status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_)
            | ApiError::Missing { .. }
            | ApiError::Store(StoreError::NotFound(_)) => StatusCode::NOT_FOUND,
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        if let PageError::LoginRequired { next } = &self {
            return Redirect::to(&super::auth::login_path(next)).into_response();
        }
        let status = self.status();
        let message = if status.is_server_error() {
            tracing::error!(error = %self, "page failed");
            "The server could not finish this request. Try again in a moment.".to_owned()
        } else {
            self.to_string()
        };
        let page = ErrorPage {
            layout: super::templates::Layout::anonymous(Self::title(status)),
            status: status.as_u16(),
            message,
            show_login: matches!(status.as_u16(), 401 | 410),
        };
        let mut response = render(status, &page);
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Cookie"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_error() {
        let cases = [
            (PageError::NotFound, 404),
            (PageError::Missing("no patch"), 404),
            (PageError::Conflict("still running"), 409),
            (PageError::Api(ApiError::missing("no_patch", "m")), 404),
            (PageError::Forbidden("csrf"), 403),
            (PageError::Unauthorized, 401),
            (PageError::LinkInvalid, 410),
            (PageError::BadRequest("x".into()), 400),
            (PageError::Api(ApiError::conflict("c", "m")), 409),
            (PageError::Api(ApiError::NotFound("session")), 404),
            (PageError::Store(StoreError::Corrupt("x".into())), 500),
        ];
        for (error, status) in cases {
            assert_eq!(error.status().as_u16(), status, "{error}");
        }
    }

    #[test]
    fn internal_errors_hide_details_and_login_redirects() {
        let response = PageError::Store(StoreError::Corrupt("secret".into())).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let response = PageError::LoginRequired {
            next: "/sessions/x".into(),
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            response.headers()[header::LOCATION],
            "/login?next=%2Fsessions%2Fx"
        );
    }
}

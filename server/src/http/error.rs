//! The one error type every handler returns: `{error:{code, message}}` with the right status,
//! never internals.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ultraplan_protocol::api::{ErrorBody, ErrorDetail};

use crate::environments::EnvironmentError;
use crate::retention::QuotaError;
use crate::secrets::SecretsError;
use crate::sessions::SessionError;
use crate::store::StoreError;
use ultraplan_bundle::BundleError;

/// An API error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("missing or invalid API token")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{message}")]
    Missing { code: &'static str, message: String },
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The user's bundle storage quota would be exceeded (413 `quota_exceeded`).
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    TooManyRequests(String),
    /// 408, 429 or 503 with a stable code, and how long to wait before retrying.
    #[error("{message}")]
    Throttled {
        status: StatusCode,
        code: &'static str,
        message: String,
        retry_after: Option<std::time::Duration>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    /// A 400 with a stable code.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// A 404 with a stable code other than `not_found`.
    pub fn missing(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Missing {
            code,
            message: message.into(),
        }
    }

    /// A 409 with a stable code.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Conflict {
            code,
            message: message.into(),
        }
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Missing { code, .. } => (StatusCode::NOT_FOUND, code),
            ApiError::BadRequest { code, .. } => (StatusCode::BAD_REQUEST, code),
            ApiError::Conflict { code, .. } => (StatusCode::CONFLICT, code),
            ApiError::PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            ApiError::QuotaExceeded(_) => (StatusCode::PAYLOAD_TOO_LARGE, "quota_exceeded"),
            ApiError::TooManyRequests(_) => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::Throttled { status, code, .. } => (*status, code),
            ApiError::Store(StoreError::NotFound(_)) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Store(StoreError::AlreadyExists(_)) => (StatusCode::CONFLICT, "exists"),
            ApiError::Store(e) if e.is_storage_full() => {
                (StatusCode::INSUFFICIENT_STORAGE, "storage_full")
            }
            ApiError::Bundle(e) if e.is_storage_full() => {
                (StatusCode::INSUFFICIENT_STORAGE, "storage_full")
            }
            ApiError::Store(e) if e.is_unavailable() => {
                (StatusCode::SERVICE_UNAVAILABLE, "database_unavailable")
            }
            ApiError::Store(_) | ApiError::Internal(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, "internal")
            }
            ApiError::Bundle(e) if !e.is_client_error() => {
                (StatusCode::INTERNAL_SERVER_ERROR, "internal")
            }
            ApiError::Bundle(e) if matches!(e.code(), "unknown_base" | "missing_content") => {
                (StatusCode::CONFLICT, e.code())
            }
            ApiError::Bundle(e) if e.code() == "archive_too_large" || e.code() == "too_large" => {
                (StatusCode::PAYLOAD_TOO_LARGE, e.code())
            }
            ApiError::Bundle(e) => (StatusCode::BAD_REQUEST, e.code()),
        }
    }
}

impl From<QuotaError> for ApiError {
    fn from(error: QuotaError) -> Self {
        match error {
            QuotaError::Exceeded(message) => ApiError::QuotaExceeded(message),
            QuotaError::Store(e) => ApiError::Store(e),
        }
    }
}

impl From<SessionError> for ApiError {
    fn from(error: SessionError) -> Self {
        let code = error.code();
        match error {
            SessionError::Store(e) => ApiError::Store(e),
            SessionError::NotFound(what) => ApiError::NotFound(what),
            SessionError::Disabled => ApiError::Forbidden(error.to_string()),
            SessionError::AlreadyArchived
            | SessionError::Archived(_)
            | SessionError::DecisionConflict { .. }
            | SessionError::PlanNotPending(_) => ApiError::conflict(code, error.to_string()),
            SessionError::Invalid { .. }
            | SessionError::FeedbackRequired
            | SessionError::EmptyPlan
            | SessionError::NoPendingPlan(_) => ApiError::bad_request(code, error.to_string()),
        }
    }
}

impl From<SecretsError> for ApiError {
    fn from(error: SecretsError) -> Self {
        let code = error.code();
        match error {
            SecretsError::InvalidName(_) | SecretsError::InvalidValue(_) => {
                ApiError::bad_request(code, error.to_string())
            }
            SecretsError::NotFound(_) => ApiError::NotFound("secret"),
            SecretsError::Store(e) => ApiError::Store(e),
            // The key file, the cipher or a stored row is at fault: the server's trouble.
            SecretsError::Missing(_)
            | SecretsError::Unreadable(_)
            | SecretsError::Key(_)
            | SecretsError::Cipher(_) => ApiError::Internal(error.to_string()),
        }
    }
}

impl From<EnvironmentError> for ApiError {
    fn from(error: EnvironmentError) -> Self {
        let code = error.code();
        match error {
            EnvironmentError::InvalidName(_) | EnvironmentError::InvalidDefinition(_) => {
                ApiError::bad_request(code, error.to_string())
            }
            EnvironmentError::NotFound(_) => ApiError::NotFound("environment"),
            EnvironmentError::Store(e) => ApiError::Store(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        // Server-side failures say what kind of trouble it is, never the internals.
        let message = match code {
            "storage_full" => "the server is out of disk space; try again once space is freed",
            "database_unavailable" => "the database is unavailable; try again shortly",
            _ if status == StatusCode::INTERNAL_SERVER_ERROR => "internal server error",
            _ => "",
        };
        let message = if message.is_empty() {
            self.to_string()
        } else {
            tracing::error!(error = %self, code, "request failed");
            message.to_owned()
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: code.to_owned(),
                message,
            },
        };
        let retry_after = match &self {
            ApiError::Throttled { retry_after, .. } => *retry_after,
            _ if code == "database_unavailable" => Some(std::time::Duration::from_secs(5)),
            _ => None,
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(wait) = retry_after {
            response = crate::http::ratelimit::with_retry_after(response, wait);
        }
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_hide_details() {
        let cases = [
            (ApiError::Internal("db password x".into()), 500, "internal"),
            (ApiError::NotFound("session"), 404, "not_found"),
            (ApiError::Unauthorized, 401, "unauthorized"),
            (
                ApiError::conflict("decision_conflict", "x"),
                409,
                "decision_conflict",
            ),
            (
                ApiError::bad_request("invalid_event", "x"),
                400,
                "invalid_event",
            ),
            (ApiError::PayloadTooLarge("big".into()), 413, "too_large"),
            (
                ApiError::QuotaExceeded("full".into()),
                413,
                "quota_exceeded",
            ),
        ];
        for (error, status, code) in cases {
            let (s, c) = error.status_and_code();
            assert_eq!((s.as_u16(), c), (status, code));
        }
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let trouble = [
            (
                ApiError::Store(StoreError::Database(sqlx::Error::PoolTimedOut)),
                503,
                "database_unavailable",
            ),
            (
                ApiError::Bundle(BundleError::io("writing", full)),
                507,
                "storage_full",
            ),
            (
                ApiError::Store(StoreError::Database(sqlx::Error::Io(
                    std::io::ErrorKind::StorageFull.into(),
                ))),
                507,
                "storage_full",
            ),
        ];
        for (error, status, code) in trouble {
            let (s, c) = error.status_and_code();
            assert_eq!((s.as_u16(), c), (status, code));
            let response = error.into_response();
            assert_eq!(response.status().as_u16(), status);
        }
        let response = ApiError::Internal("db password x".into()).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}

//! `/v1/bundles/{sha256}`: content-addressed repository bundles, streamed and validated as
//! they arrive.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use futures_util::TryStreamExt;
use tokio_util::io::{StreamReader, SyncIoBridge};
use ultraplan_protocol::api::BundleUploaded;

use crate::auth::AuthUser;
use crate::blobs::{self, BlobError, BlobStore};
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::store::{BundleRow, now_ms};
use ultraplan_bundle::{self as bundles, BundleEncoding, BundleStats};

pub(super) fn check_sha(sha: &str) -> ApiResult<()> {
    if bundles::is_valid_sha256(sha) {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_sha256",
            "the path must be the 64-character lowercase hex sha256 of the bundle",
        ))
    }
}

/// 200 when the caller already uploaded this bundle (skip the upload), else 404.
///
/// Answered from the blob store, so a bundle any replica received counts.
#[utoipa::path(head, path = "/v1/bundles/{sha256}", tag = "bundles",
    params(("sha256" = String, Path, description = "sha256 of the .tar.gz or .tar.zst")),
    responses((status = 200, description = "held"), (status = 404, description = "not held")),
    security(("bearer" = [])))]
pub async fn head(
    State(state): State<AppState>,
    user: AuthUser,
    Path(sha): Path<String>,
) -> ApiResult<StatusCode> {
    check_sha(&sha)?;
    let owned = state
        .core
        .store
        .owned_bundle(&user.id, &sha)
        .await?
        .is_some();
    let held = owned
        && blob_store(&state)?
            .find_bundle(&sha)
            .await
            .map_err(blob_error)?
            .is_some();
    Ok(if held {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    })
}

/// Upload a gzip'd tar, or a zstd'd one (`application/zstd`, when eligibility lists `zstd` in
/// `accepts_bundle_encodings`). Magic bytes that contradict the Content-Type are refused
/// (`encoding_mismatch`). Hostile archives are refused with 4xx and leave nothing behind.
///
/// The body must arrive within the server's deadline and at its minimum rate; each user may
/// upload a few bundles at once. The answer comes once the archive is in the blob store.
#[utoipa::path(put, path = "/v1/bundles/{sha256}", tag = "bundles",
    params(("sha256" = String, Path, description = "sha256 of the .tar.gz or .tar.zst")),
    request_body(content((Vec<u8> = "application/gzip"), (Vec<u8> = "application/zstd"))),
    responses((status = 200, body = BundleUploaded),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 408, description = "the body arrived too slowly (`upload_too_slow`) or not \
            within the deadline (`body_deadline`)", body = ultraplan_protocol::api::ErrorBody),
        (status = 413, body = ultraplan_protocol::api::ErrorBody),
        (status = 429, description = "too many requests (`rate_limited`), or this user already \
            has as many uploads in progress as allowed (`too_many_uploads`); see Retry-After",
            body = ultraplan_protocol::api::ErrorBody),
        (status = 503, description = "the server is receiving as many uploads as it can \
            (`uploads_busy`), or the blob store failed (`blob_store_unavailable`); see \
            Retry-After", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    user: AuthUser,
    Path(sha): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<BundleUploaded>> {
    check_sha(&sha)?;
    let encoding = check_headers(&headers, state.core.config.bundle_limits.max_archive_bytes)?;
    // The user's storage quota, checked before the body is read and again once it is
    // unpacked; retention leaves this bundle's files alone meanwhile.
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let quota = crate::retention::Quota::check(&state.core, &user.id, &sha, declared).await?;
    // Held until the bundle is stored or refused; taken before the body is read or a
    // blocking thread is used.
    let _slot = state.rate_limiters.uploads.acquire(&user.id).await?;
    let stats = ingest(&state, &sha, encoding, body).await?;
    Ok(Json(keep(&state, &user, quota, stats).await?))
}

/// A validated bundle: recorded as the user's (within the quota) and its archive sent to the
/// blob store.
pub(super) async fn keep(
    state: &AppState,
    user: &AuthUser,
    quota: crate::retention::Quota,
    stats: BundleStats,
) -> ApiResult<BundleUploaded> {
    let sha = stats.sha256.clone();
    let row = BundleRow {
        sha256: stats.sha256.clone(),
        files: i64::try_from(stats.files).unwrap_or(i64::MAX),
        bytes: i64::try_from(stats.archive_bytes).unwrap_or(i64::MAX),
        unpacked_bytes: i64::try_from(stats.unpacked_bytes).unwrap_or(i64::MAX),
        created_at: now_ms(),
    };
    quota.record(&state.core, &user.id, &row).await?;
    // Recorded first, so the archive is only ever sent for a bundle within its user's quota;
    // until it is in the blob store HEAD says 404 and the client uploads again.
    store_archive(state, &sha, stats.encoding).await?;
    tracing::info!(sha256 = %sha, files = stats.files, bytes = stats.archive_bytes, "bundle stored");
    Ok(BundleUploaded {
        bundle_id: stats.sha256,
        files: stats.files,
        bytes: stats.archive_bytes,
        unpacked_bytes: stats.unpacked_bytes,
    })
}

/// A Content-Length within `max`, then the encoding the Content-Type declares.
pub(super) fn check_headers(headers: &HeaderMap, max: u64) -> ApiResult<Option<BundleEncoding>> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max) {
        return Err(ApiError::PayloadTooLarge(format!(
            "the bundle exceeds the server's {max}-byte limit"
        )));
    }
    declared_encoding(headers)
}

/// The encoding the Content-Type declares (`None` for octet-stream: the magic bytes decide).
pub(super) fn declared_encoding(headers: &HeaderMap) -> ApiResult<Option<BundleEncoding>> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/gzip");
    BundleEncoding::from_content_type(content_type).map_err(|other| {
        ApiError::bad_request(
            "unsupported_media_type",
            format!("bundles are application/gzip or application/zstd, not {other}"),
        )
    })
}

async fn ingest(
    state: &AppState,
    sha: &str,
    declared: Option<BundleEncoding>,
    body: Body,
) -> ApiResult<BundleStats> {
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let reader = SyncIoBridge::new(StreamReader::new(stream));
    let root = state.core.config.bundles_dir();
    let limits = state.core.config.bundle_limits.clone();
    let sha = sha.to_owned();
    tokio::task::spawn_blocking(move || {
        bundles::ingest_bundle_as(reader, declared, &sha, &root, &limits)
    })
    .await
    .map_err(|e| ApiError::Internal(format!("bundle task failed: {e}")))?
    .map_err(ApiError::from)
}

/// Send the stored archive to the blob store, unless the store has it already (another
/// user's or replica's upload of the same bytes).
async fn store_archive(state: &AppState, sha: &str, encoding: BundleEncoding) -> ApiResult<()> {
    let blobs = blob_store(state)?;
    let key = blobs::bundle_key_as(sha, encoding);
    if blobs.exists(&key).await.map_err(blob_error)? {
        return Ok(());
    }
    let archive = bundles::archive_path_as(&state.core.config.bundles_dir(), sha, encoding);
    let sent = blobs
        .put_file_streaming(&key, &archive)
        .await
        .map_err(blob_error)?;
    tracing::info!(sha256 = %sha, bytes = sent, location = %blobs.location(), "bundle archive in the blob store");
    Ok(())
}

pub(super) fn blob_store(state: &AppState) -> ApiResult<BlobStore> {
    state.core.config.blobs().map_err(blob_error)
}

/// 507 `storage_full` when a disk is full, 503 with Retry-After when the store failed (worth
/// retrying), 500 otherwise; the details go to the log, never to the client.
pub(super) fn blob_error(error: BlobError) -> ApiError {
    tracing::error!(code = error.code(), %error, "blob store operation failed");
    if error.is_storage_full() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        ApiError::Bundle(bundles::BundleError::Io {
            context: "writing to the blob store".to_owned(),
            source: full,
        })
    } else if error.is_unavailable() {
        ApiError::Throttled {
            status: StatusCode::SERVICE_UNAVAILABLE,
            code: "blob_store_unavailable",
            message: "the blob store is unavailable; try again shortly".to_owned(),
            retry_after: Some(std::time::Duration::from_secs(5)),
        }
    } else {
        ApiError::Internal(error.to_string())
    }
}

//! `/v1/bundles/{sha256}/upload`: resumable uploads of large bundles. An upload is sent in
//! one or more `PATCH` requests, each continuing at the offset the server holds; when a
//! connection is cut, the bytes that arrived are kept, `HEAD` says how many, and the client
//! sends the rest. The finished archive is validated like a `PUT` (docs/ARCHITECTURE.md
//! §3.1).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::TryStreamExt;
use tokio_util::io::{StreamReader, SyncIoBridge};
use ultraplan_bundle::partial::{Held, Partial, PartialError, PartialState};
use ultraplan_bundle::{self as bundles, BundleEncoding, BundleStats};

use super::bundles::{check_sha, declared_encoding, keep};
use crate::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;

/// The bytes an upload holds so far.
pub const UPLOAD_OFFSET: HeaderName = HeaderName::from_static("upload-offset");
/// The archive's total length, declared by every request of an upload.
pub const UPLOAD_LENGTH: HeaderName = HeaderName::from_static("upload-length");

fn partial_of(state: &AppState, user: &AuthUser, sha: &str) -> ApiResult<Partial> {
    Partial::new(&state.core.config.bundles_dir(), &user.id, sha)
        .ok_or_else(|| ApiError::Internal("a user id that cannot name a directory".to_owned()))
}

fn number(value: u64) -> HeaderValue {
    HeaderValue::from(value)
}

/// 200 with `Upload-Offset` and `Upload-Length` while the caller has an upload of this
/// bundle in progress on this server, else 404 (start at 0).
#[utoipa::path(head, path = "/v1/bundles/{sha256}/upload", tag = "bundles",
    operation_id = "head_bundle_upload",
    params(("sha256" = String, Path, description = "sha256 of the .tar.gz or .tar.zst")),
    responses((status = 200, description = "in progress: `Upload-Offset` bytes of \
        `Upload-Length` are held"), (status = 404, description = "no upload in progress")),
    security(("bearer" = [])))]
pub async fn head(
    State(state): State<AppState>,
    user: AuthUser,
    Path(sha): Path<String>,
) -> ApiResult<Response> {
    check_sha(&sha)?;
    let partial = partial_of(&state, &user, &sha)?;
    // Answer once a request still writing it is done (say a cut one), so the offset is
    // settled; past the wait, the offset as it stands.
    let _held = hold(&partial).await;
    let found = tokio::task::spawn_blocking(move || partial.state())
        .await
        .map_err(|e| ApiError::Internal(format!("upload task failed: {e}")))?
        .map_err(partial_error)?;
    let Some(found) = found else {
        return Ok(StatusCode::NOT_FOUND.into_response());
    };
    Ok((
        StatusCode::OK,
        [
            (UPLOAD_OFFSET, number(found.offset)),
            (UPLOAD_LENGTH, number(found.length)),
        ],
    )
        .into_response())
}

/// Continue an upload at `Upload-Offset` (0 starts one) of an archive of `Upload-Length`
/// bytes, with the body as the next bytes. Answers 204 with the new `Upload-Offset` while
/// bytes are missing, and 200 with the stored bundle once the last byte arrived and the
/// archive passed every check a `PUT` makes (a refused archive leaves nothing behind). A
/// request at another offset than the server holds is refused with 409
/// `upload_offset_mismatch` and the held offset in `Upload-Offset`.
#[utoipa::path(patch, path = "/v1/bundles/{sha256}/upload", tag = "bundles",
    operation_id = "patch_bundle_upload",
    params(("sha256" = String, Path, description = "sha256 of the .tar.gz or .tar.zst"),
        ("Upload-Offset" = u64, Header, description = "where this body starts"),
        ("Upload-Length" = u64, Header, description = "the whole archive's length")),
    request_body(content((Vec<u8> = "application/gzip"), (Vec<u8> = "application/zstd"))),
    responses((status = 200, body = ultraplan_protocol::api::BundleUploaded),
        (status = 204, description = "kept; `Upload-Offset` bytes are held"),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, description = "`upload_offset_mismatch` (see `Upload-Offset`), \
            `upload_conflict` (another length or encoding than the upload started with) or \
            `upload_in_progress` (another request still sends it)",
            body = ultraplan_protocol::api::ErrorBody),
        (status = 413, body = ultraplan_protocol::api::ErrorBody),
        (status = 429, body = ultraplan_protocol::api::ErrorBody),
        (status = 503, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    user: AuthUser,
    Path(sha): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    check_sha(&sha)?;
    let wanted = declared(&state, &headers)?;
    // The quota holds the bundle's registry entry too: one request of this sha at a time.
    let quota =
        crate::retention::Quota::check(&state.core, &user.id, &sha, Some(wanted.length)).await?;
    let _slot = state.rate_limiters.uploads.acquire(&user.id).await?;
    let partial = partial_of(&state, &user, &sha)?;
    let Some(held) = hold(&partial).await else {
        return Err(ApiError::conflict(
            "upload_in_progress",
            "another request is still sending this upload; ask where it stands and go on",
        ));
    };
    let (appended, held) = append(partial.clone(), held, wanted, body).await?;
    let offset = match appended {
        Ok(offset) => offset,
        Err(PartialError::OffsetMismatch { current, requested }) => {
            return Ok(offset_mismatch(current, requested));
        }
        Err(error) => return Err(partial_error(error)),
    };
    if offset < wanted.length {
        return Ok((StatusCode::NO_CONTENT, [(UPLOAD_OFFSET, number(offset))]).into_response());
    }
    let stats = ingest_finished(&state, partial, held, &sha, wanted.encoding).await;
    Ok(Json(keep(&state, &user, quota, stats?).await?).into_response())
}

/// The upload the request's headers declare: where the body starts, the archive's length
/// (within the server's limit) and its encoding.
fn declared(state: &AppState, headers: &HeaderMap) -> ApiResult<PartialState> {
    let header = |name: &HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_upload_header",
                    format!("{name} must be a byte count"),
                )
            })
    };
    let (offset, length) = (header(&UPLOAD_OFFSET)?, header(&UPLOAD_LENGTH)?);
    let max = state.core.config.bundle_limits.max_archive_bytes;
    if length > max {
        return Err(ApiError::PayloadTooLarge(format!(
            "the bundle exceeds the server's {max}-byte limit"
        )));
    }
    if offset > length {
        return Err(ApiError::bad_request(
            "invalid_upload_header",
            "Upload-Offset is past Upload-Length",
        ));
    }
    let encoding = declared_encoding(headers)?;
    Ok(PartialState {
        offset,
        length,
        encoding,
    })
}

/// How long a request waits for another one writing the same upload.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The right to write `partial`, waiting (bounded) for a request that holds it.
async fn hold(partial: &Partial) -> Option<Held> {
    let deadline = tokio::time::Instant::now() + HOLD_WAIT;
    loop {
        if let Some(held) = partial.try_hold() {
            return Some(held);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Append the body; the inner error is the partial upload's refusal. `held` goes with the
/// writing task and comes back: the upload stays held until the write is over, even if the
/// request is gone meanwhile.
async fn append(
    partial: Partial,
    held: Held,
    wanted: PartialState,
    body: Body,
) -> ApiResult<(Result<u64, PartialError>, Held)> {
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let reader = SyncIoBridge::new(StreamReader::new(stream));
    tokio::task::spawn_blocking(move || (partial.append(wanted, reader), held))
        .await
        .map_err(|e| ApiError::Internal(format!("upload task failed: {e}")))
}

/// Validate and unpack the finished archive, as a `PUT` of it would, then forget the partial
/// upload (accepted or not), still holding it.
async fn ingest_finished(
    state: &AppState,
    partial: Partial,
    held: Held,
    sha: &str,
    encoding: Option<BundleEncoding>,
) -> ApiResult<BundleStats> {
    let root = state.core.config.bundles_dir();
    let limits = state.core.config.bundle_limits.clone();
    let sha = sha.to_owned();
    tokio::task::spawn_blocking(move || {
        let _held = held;
        let ingested = std::fs::File::open(partial.path())
            .map_err(|e| bundles::BundleError::io("reading", e))
            .and_then(|file| {
                let reader = std::io::BufReader::new(file);
                bundles::ingest_bundle_as(reader, encoding, &sha, &root, &limits)
            });
        partial.remove();
        ingested
    })
    .await
    .map_err(|e| ApiError::Internal(format!("bundle task failed: {e}")))?
    .map_err(ApiError::from)
}

fn offset_mismatch(current: u64, requested: u64) -> Response {
    let error = ApiError::conflict(
        "upload_offset_mismatch",
        format!("the upload stands at byte {current}, not {requested}: continue from there"),
    );
    let mut response = error.into_response();
    response
        .headers_mut()
        .insert(UPLOAD_OFFSET, number(current));
    response
}

fn partial_error(error: PartialError) -> ApiError {
    match error {
        PartialError::OffsetMismatch { .. } | PartialError::Conflict(_) => {
            ApiError::conflict("upload_conflict", error.to_string())
        }
        PartialError::TooLong(_) => ApiError::PayloadTooLarge(error.to_string()),
        PartialError::Io { context, source } => {
            ApiError::Bundle(bundles::BundleError::io(context, source))
        }
    }
}

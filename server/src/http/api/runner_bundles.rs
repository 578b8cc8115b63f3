//! `GET /v1/runner/bundles/{bundle_id}`: a runner of the fleet downloads the archive of a
//! session's bundle from the blob store, streamed a chunk at a time, never held whole.
//!
//! Runner tokens only ([`RunnerAuth`]): a user's token gets 401. Any runner may fetch any
//! bundle, since it may be handed any user's session. Requests are limited per runner token by
//! the rate limiter's read bucket (`runner:<name>`), like a user's reads.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use std::time::Duration;

use crate::blobs::tree_archive::{ARCHIVE_WAIT, find_or_wait};
use crate::blobs::{self, BlobError};
use crate::http::api::bundles::{blob_error, blob_store, check_sha};
use crate::http::error::{ApiError, ApiResult};
use crate::http::runner_auth::RunnerAuth;
use crate::http::state::AppState;
use ultraplan_bundle::BundleEncoding;

/// The media type of an archive in this encoding: the one its upload declared.
pub fn content_type(encoding: BundleEncoding) -> &'static str {
    match encoding {
        BundleEncoding::Gzip => "application/gzip",
        BundleEncoding::Zstd => "application/zstd",
    }
}

/// The archive's bytes as uploaded, `Content-Type` by its encoding; 404 `not_found` when the
/// blob store does not have it.
pub async fn get(
    State(state): State<AppState>,
    RunnerAuth(runner): RunnerAuth,
    Path(bundle_id): Path<String>,
) -> ApiResult<Response> {
    check_sha(&bundle_id)?;
    let blobs = blob_store(&state)?;
    let missing = || ApiError::NotFound("bundle");
    // A bundle materialised moments ago may still be on its way to the blob store.
    let known = state.core.store.bundle_known(&bundle_id).await?;
    let wait = if known { ARCHIVE_WAIT } else { Duration::ZERO };
    let encoding = find_or_wait(&blobs, &state.core.config.bundles_dir(), &bundle_id, wait)
        .await
        .map_err(blob_error)?
        .ok_or_else(missing)?;
    // Retention may delete it between the lookup and the read: that is a 404 too.
    let stream = match blobs
        .get_stream(&blobs::bundle_key_as(&bundle_id, encoding))
        .await
    {
        Ok(stream) => stream,
        Err(BlobError::NotFound { .. }) => return Err(missing()),
        Err(error) => return Err(blob_error(error)),
    };
    tracing::info!(runner = %runner.name, sha256 = %bundle_id, encoding = encoding.name(), "runner downloads a bundle");
    let mut response = Body::from_stream(stream).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(encoding)),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_the_ones_uploads_declare() {
        for encoding in BundleEncoding::ALL {
            let declared = BundleEncoding::from_content_type(content_type(encoding));
            assert_eq!(declared, Ok(Some(encoding)));
        }
    }
}

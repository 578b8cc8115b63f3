//! `/v1/manifests`: incremental bundles (docs/ARCHITECTURE.md §5.1). The client sends the
//! manifest of its tree (whole, or as a change to one it sent before), hears which contents
//! the caller's store lacks, and sends only those; the server builds the tree from its
//! content store under every rule a bundle upload meets, and the bundle id it answers works
//! wherever an uploaded bundle's does.

use std::io::Read;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use futures_util::TryStreamExt;
use tokio_util::io::{StreamReader, SyncIoBridge};
use ultraplan_bundle::BundleError;
use ultraplan_bundle::incremental::{self, Accepted, OnBase, OwnerStore, Pending, TreeManifest};
use ultraplan_protocol::api::{BundleUploaded, ManifestAccepted, ManifestRequest};

use super::bundles::{blob_error, blob_store, check_headers, check_sha};
use crate::auth::AuthUser;
use crate::blobs::tree_archive;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::retention::Quota;
use crate::store::{BundleRow, now_ms};

/// Most bytes of a manifest request body, compressed or not, and of its JSON once unpacked.
const MAX_MANIFEST_BYTES: usize = 64 << 20;

/// Check a tree's manifest for the caller and say which contents the server lacks.
///
/// The body is JSON, or zstd-compressed JSON (`Content-Type: application/zstd`). With `base`
/// it is a change to a manifest the caller had accepted; a base the caller's store does not
/// hold is 409 `unknown_base` (send the whole manifest). Paths, symlinks, counts, sizes and
/// the quota are judged here as for an uploaded archive, with the same codes.
#[utoipa::path(post, path = "/v1/manifests", tag = "bundles",
    request_body(content((ManifestRequest = "application/json"), (Vec<u8> = "application/zstd"))),
    responses((status = 200, body = ManifestAccepted),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, description = "`unknown_base`: send the whole manifest",
            body = ultraplan_protocol::api::ErrorBody),
        (status = 413, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn post(
    State(state): State<AppState>,
    user: AuthUser,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<ManifestAccepted>> {
    // A manifest is read whole: it takes an upload slot, so a user's manifests in memory at
    // once are few.
    let _slot = state.rate_limiters.uploads.acquire(&user.id).await?;
    let request = read_request(&headers, body).await?;
    let root = state.core.config.bundles_dir();
    let limits = state.core.config.bundle_limits.clone();
    let owner = user.id.clone();
    let accepted = blocking(move || incremental::accept(&root, &owner, request, &limits)).await?;
    let id = accepted.bundle_id.clone();
    let quota = Quota::check(&state.core, &user.id, &id, Some(accepted.totals.bytes)).await?;
    drop(quota);
    let (root, owner) = (state.core.config.bundles_dir(), user.id.clone());
    let accepted = blocking(move || {
        incremental::keep_manifest(&root, &owner, &accepted)?;
        Ok(accepted)
    })
    .await?;
    let held = holds(&state, &user, &id).await?;
    tracing::info!(user_id = %user.id, sha256 = %id, files = accepted.totals.files,
        missing = accepted.missing.len(), held, "manifest accepted");
    Ok(Json(answer(accepted, held)))
}

fn answer(accepted: Accepted, held: bool) -> ManifestAccepted {
    ManifestAccepted {
        bundle_id: accepted.bundle_id,
        held,
        missing: if held {
            Vec::new()
        } else {
            accepted
                .missing
                .iter()
                .map(|(d, _)| hex::encode(d))
                .collect()
        },
        files: accepted.totals.files,
        unpacked_bytes: accepted.totals.bytes,
    }
}

/// The caller holds bundle `id` and it is usable: its tree is here (or being built here) or
/// its archive stored.
async fn holds(state: &AppState, user: &AuthUser, id: &str) -> ApiResult<bool> {
    if state.core.store.owned_bundle(&user.id, id).await?.is_none() {
        return Ok(false);
    }
    if tree_archive::busy(id) {
        return Ok(true);
    }
    let (root, owned) = (state.core.config.bundles_dir(), id.to_owned());
    let here = blocking(move || Ok(ultraplan_bundle::tree_exists(&root, &owned))).await?;
    Ok(here
        || blob_store(state)?
            .find_bundle(id)
            .await
            .map_err(blob_error)?
            .is_some())
}

/// Send the contents a manifest's answer listed as missing, as one tar of regular files
/// named by their BLAKE3 hex (`application/zstd` or `application/gzip`), and get the bundle.
///
/// Each content must be one of the tree's, sent once, at its size, hashing to its name
/// (`content_hash_mismatch`, `unexpected_content`); one still missing is 409
/// `missing_content`. The tree is built from the caller's own store only, under every rule
/// of an uploaded archive; a refusal leaves nothing behind. The answer comes once every check
/// passed; the tree's files are linked, and its archive sent to the blob store, right after
/// (whoever needs them meanwhile waits). A change on a base whose tree is built here and that
/// touches no symlink is answered once its changed contents are found, and its tree is laid
/// out (and checked on disk) after.
#[utoipa::path(put, path = "/v1/manifests/{bundle_id}/contents", tag = "bundles",
    params(("bundle_id" = String, Path, description = "the id `POST /v1/manifests` answered")),
    request_body(content((Vec<u8> = "application/zstd"), (Vec<u8> = "application/gzip"))),
    responses((status = 200, body = BundleUploaded),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 404, description = "`unknown_manifest`: send the manifest first",
            body = ultraplan_protocol::api::ErrorBody),
        (status = 409, description = "`missing_content`: send the manifest again",
            body = ultraplan_protocol::api::ErrorBody),
        (status = 413, body = ultraplan_protocol::api::ErrorBody),
        (status = 429, body = ultraplan_protocol::api::ErrorBody),
        (status = 503, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn put_contents(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Json<BundleUploaded>> {
    check_sha(&id)?;
    let config = &state.core.config;
    let encoding = check_headers(&headers, config.bundle_limits.max_archive_bytes)?;
    let manifest = load(&state, &user, &id).await?;
    let bytes = manifest.contents().values().map(|(size, _)| size).sum();
    let quota = Quota::check(&state.core, &user.id, &id, Some(bytes)).await?;
    let _slot = state.rate_limiters.uploads.acquire(&user.id).await?;
    let owner = OwnerStore::new(&config.bundles_dir(), &user.id)
        .ok_or_else(|| ApiError::Internal("a user id that cannot name a directory".to_owned()))?;
    let on_base = on_a_built_base(&state, &user, &id).await?;
    let answered_early = on_base.is_some();
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    let reader = SyncIoBridge::new(StreamReader::new(stream));
    let (root, limits, owned_id) = (
        config.bundles_dir(),
        config.bundle_limits.clone(),
        id.clone(),
    );
    let (built, pending) = blocking(move || {
        let incoming = incremental::receive_contents(
            reader, encoding, &manifest, &owned_id, &root, &owner, &limits,
        )?;
        match on_base {
            // The base's tree passed every check on disk the new one could fail: answer once
            // the changed files' contents are here, and lay the tree out after.
            Some(on_base) => {
                incoming.check_present(&manifest, &on_base.changed)?;
                let built = incremental::stats_of(&manifest, incoming.archive_bytes());
                let pending = Pending::Received {
                    incoming,
                    manifest,
                    limits,
                };
                Ok((built, pending))
            }
            None => {
                let prepared = incoming.lay_out(&manifest, &limits)?;
                Ok((prepared.stats(), Pending::LaidOut(prepared)))
            }
        }
    })
    .await?;
    let row = BundleRow {
        sha256: id.clone(),
        files: i64::try_from(built.files).unwrap_or(i64::MAX),
        bytes: i64::try_from(built.unpacked_bytes).unwrap_or(i64::MAX),
        unpacked_bytes: i64::try_from(built.unpacked_bytes).unwrap_or(i64::MAX),
        created_at: now_ms(),
    };
    quota.record(&state.core, &user.id, &row).await?;
    // Held before answering, so whoever needs the tree or its archive waits for them.
    let held = tree_archive::hold(&id).await;
    tree_archive::spawn_build(
        blob_store(&state)?,
        config.bundles_dir(),
        id.clone(),
        pending,
        held,
    );
    tracing::info!(user_id = %user.id, sha256 = %id, files = built.files,
        sent = built.archive_bytes, answered_early, "bundle materialised");
    Ok(Json(BundleUploaded {
        bundle_id: id,
        files: built.files,
        bytes: built.archive_bytes,
        unpacked_bytes: built.unpacked_bytes,
    }))
}

/// How the caller's manifest `id` was made from a base whose tree this replica built and
/// published (not one being built now), when it was a change touching no symlink.
async fn on_a_built_base(state: &AppState, user: &AuthUser, id: &str) -> ApiResult<Option<OnBase>> {
    let (root, owner, owned) = (
        state.core.config.bundles_dir(),
        user.id.clone(),
        id.to_owned(),
    );
    let found = blocking(move || {
        Ok(incremental::on_base_of(&root, &owner, &owned)
            .filter(|on| ultraplan_bundle::tree_exists(&root, &on.base)))
    })
    .await?;
    Ok(found.filter(|on| !tree_archive::busy(&on.base)))
}

async fn load(state: &AppState, user: &AuthUser, id: &str) -> ApiResult<TreeManifest> {
    let (root, owner, owned) = (
        state.core.config.bundles_dir(),
        user.id.clone(),
        id.to_owned(),
    );
    match blocking(move || incremental::load_manifest(&root, &owner, &owned)).await {
        Err(ApiError::Bundle(BundleError::UnknownBase(_))) => Err(ApiError::missing(
            "unknown_manifest",
            "no manifest of this bundle is held for you: send it with POST /v1/manifests first",
        )),
        other => other,
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, BundleError> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Internal(format!("bundle task failed: {e}")))?
        .map_err(ApiError::from)
}

/// The request body as a manifest: JSON, or zstd'd JSON, each within [`MAX_MANIFEST_BYTES`].
async fn read_request(headers: &HeaderMap, body: Body) -> ApiResult<ManifestRequest> {
    let too_large = || {
        ApiError::PayloadTooLarge(format!(
            "a manifest is at most {MAX_MANIFEST_BYTES} bytes; send a change to an earlier one"
        ))
    };
    let raw = axum::body::to_bytes(body, MAX_MANIFEST_BYTES)
        .await
        .map_err(|_| too_large())?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let json = if content_type.starts_with("application/zstd") {
        let mut decoder = zstd::Decoder::new(&raw[..]).map_err(|e| invalid(e.to_string()))?;
        // The window a frame may ask for is bounded, as for bundles (8 MiB).
        decoder
            .window_log_max(23)
            .map_err(|e| invalid(e.to_string()))?;
        let mut json = Vec::new();
        let read = decoder
            .take(MAX_MANIFEST_BYTES as u64 + 1)
            .read_to_end(&mut json);
        read.map_err(|e| invalid(format!("not zstd: {e}")))?;
        if json.len() > MAX_MANIFEST_BYTES {
            return Err(too_large());
        }
        json
    } else {
        raw.to_vec()
    };
    serde_json::from_slice(&json).map_err(|e| invalid(e.to_string()))
}

fn invalid(detail: String) -> ApiError {
    ApiError::bad_request("invalid_manifest", format!("invalid manifest: {detail}"))
}

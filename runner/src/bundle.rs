//! Bundles, fetched from the server once per runner and unpacked through the same validating
//! ingestion an upload goes through: the sha256 of the bytes (or, for a bundle the server
//! materialised from a manifest, the unpacked tree's id) must be the bundle's id, so a server
//! or proxy cannot hand this runner another tree than the session's.

use std::path::PathBuf;

use futures_util::TryStreamExt;
use tokio_util::io::{StreamReader, SyncIoBridge};
use ultraplan_bundle::{self as bundles, ingest_bundle_verified};

use crate::context::Context;

/// The unpacked tree of bundle `sha`, fetched and unpacked first when this runner has none.
pub(crate) async fn ensure(ctx: &Context, sha: &str) -> Result<PathBuf, String> {
    if !bundles::is_valid_sha256(sha) {
        return Err(format!("{sha:?} is not a bundle id"));
    }
    let root = ctx.settings.bundles_dir();
    let dir = bundles::bundle_dir(&root, sha);
    if dir.is_dir() {
        return Ok(dir);
    }
    // One fetch at a time: two sessions of one bundle wait for the first.
    let _fetching = ctx.fetching.lock().await;
    if dir.is_dir() {
        return Ok(dir);
    }
    let url = format!(
        "{}/v1/runner/bundles/{sha}",
        ctx.settings.server.trim_end_matches('/')
    );
    let response = ctx
        .http
        .get(&url)
        .bearer_auth(&ctx.settings.token)
        .send()
        .await
        .map_err(|e| format!("fetching bundle {sha}: {e}"))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "fetching bundle {sha}: the server answered {status}"
        ));
    }
    let stream = response.bytes_stream().map_err(std::io::Error::other);
    let reader = SyncIoBridge::new(StreamReader::new(stream));
    let (owned, limits) = (sha.to_owned(), ctx.settings.bundle_limits.clone());
    let stats = tokio::task::spawn_blocking(move || {
        ingest_bundle_verified(reader, None, &owned, &root, &limits)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("bundle {sha} was refused: {e}"))?;
    tracing::info!(sha256 = sha, files = stats.files, "bundle fetched");
    Ok(dir)
}

//! Sending a bundle: one `PUT` for a small archive; for a large one, when the server takes
//! them, a resumable upload that continues where a cut connection left it.

use std::io::SeekFrom;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::AsyncSeekExt;
use ultraplan_protocol::api::BundleUploaded;

use crate::api::{ApiError, Client, Part};
use crate::bundle::Bundle;

/// Archives from this size on go resumably when the server takes it.
pub const RESUMABLE_FROM_BYTES: u64 = 8 * 1024 * 1024;

/// Tries of a resumable upload before its error is the answer.
const MAX_TRIES: u32 = 8;

/// Called with the bytes of the archive the server holds or was sent so far.
pub type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// What the upload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upload {
    /// The server already held the bundle (`HEAD` said 200): nothing was sent.
    Unchanged,
    Uploaded(BundleUploaded),
}

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("reading the bundle {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Upload `bundle`, written at `path`, unless the server already has it. `resumable`: the
/// server takes resumable uploads (eligibility says so).
pub async fn upload(
    client: &Client,
    path: &Path,
    bundle: &Bundle,
    progress: Progress,
    resumable: bool,
) -> Result<Upload, UploadError> {
    let sha256 = &bundle.sha256;
    if client.has_bundle(sha256).await? {
        return Ok(Upload::Unchanged);
    }
    let length = tokio::fs::metadata(path)
        .await
        .map_err(|source| read_error(path, source))?
        .len();
    if resumable && length >= RESUMABLE_FROM_BYTES {
        return resume_until_stored(client, path, bundle, length, &progress).await;
    }
    let body = body_from(path, 0, progress).await?;
    let content_type = bundle.encoding.content_type();
    Ok(Upload::Uploaded(
        client
            .upload_bundle(sha256, content_type, length, body)
            .await?,
    ))
}

fn read_error(path: &Path, source: std::io::Error) -> UploadError {
    UploadError::Read {
        path: path.to_owned(),
        source,
    }
}

/// The file's bytes from `offset` on, reporting `offset` plus what was read.
async fn body_from(
    path: &Path,
    offset: u64,
    progress: Progress,
) -> Result<reqwest::Body, UploadError> {
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(|source| read_error(path, source))?;
    file.seek(SeekFrom::Start(offset))
        .await
        .map_err(|source| read_error(path, source))?;
    let mut sent = offset;
    progress(sent);
    let stream = tokio_util::io::ReaderStream::new(file).inspect(move |chunk| {
        if let Ok(bytes) = chunk {
            sent += bytes.len() as u64;
            progress(sent);
        }
    });
    Ok(reqwest::Body::wrap_stream(stream))
}

/// Ask where the upload stands, send the rest, and do it again after a failure worth
/// retrying, until the bundle is stored or the tries run out.
async fn resume_until_stored(
    client: &Client,
    path: &Path,
    bundle: &Bundle,
    length: u64,
    progress: &Progress,
) -> Result<Upload, UploadError> {
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = send_rest(client, path, bundle, length, progress).await;
        match outcome {
            Ok(Some(stored)) => return Ok(Upload::Uploaded(stored)),
            Ok(None) if tries < MAX_TRIES => {}
            Err(UploadError::Api(error)) if tries < MAX_TRIES && worth_retrying(&error) => {
                tracing::info!(%error, tries, "the upload was interrupted; resuming");
                tokio::time::sleep(backoff(tries)).await;
            }
            Ok(None) => {
                return Err(UploadError::Api(ApiError::decode(
                    "the bundle upload",
                    "the server kept asking for more bytes than the archive has",
                )));
            }
            Err(error) => return Err(error),
        }
    }
}

/// One try: the bytes the server lacks, from where it stands. `None` when it still wants
/// more.
async fn send_rest(
    client: &Client,
    path: &Path,
    bundle: &Bundle,
    length: u64,
    progress: &Progress,
) -> Result<Option<BundleUploaded>, UploadError> {
    let held = client.upload_offset(&bundle.sha256).await?;
    let offset = resume_from(held, length);
    let body = body_from(path, offset, progress.clone()).await?;
    let content_type = bundle.encoding.content_type();
    match client
        .upload_part(&bundle.sha256, content_type, (offset, length), body)
        .await?
    {
        Part::Stored(stored) => Ok(Some(stored)),
        Part::Held(_) => Ok(None),
    }
}

/// Where to continue: the server's offset when it holds an upload of this length, else the
/// start (the server refuses another length for an upload it holds, so that cannot loop).
fn resume_from(held: Option<(u64, u64)>, length: u64) -> u64 {
    match held {
        Some((offset, declared)) if declared == length && offset <= length => offset,
        _ => 0,
    }
}

/// A failure another try can get past: no answer (a cut connection), the server's trouble,
/// a rate limit, a body cut off for slowness, an offset that moved under us, or a request of
/// ours (a cut one) the server is still finishing.
fn worth_retrying(error: &ApiError) -> bool {
    error.is_transient()
        || matches!(error.status(), Some(408))
        || matches!(
            error.code(),
            Some("upload_offset_mismatch" | "upload_in_progress")
        )
}

/// 0.5 s, 1 s, 2 s, … up to 8 s.
fn backoff(tries: u32) -> Duration {
    Duration::from_millis(500 << tries.saturating_sub(1).min(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_continues_from_what_the_server_holds_of_the_same_length() {
        let cases = [
            (None, 100, 0),
            (Some((40, 100)), 100, 40),
            (Some((100, 100)), 100, 100),
            (Some((40, 90)), 100, 0),
            (Some((140, 100)), 100, 0),
        ];
        for (held, length, want) in cases {
            assert_eq!(resume_from(held, length), want, "{held:?} of {length}");
        }
    }

    #[test]
    fn only_failures_another_try_can_get_past_are_retried() {
        let rejected = |status, code: &str| ApiError::Rejected {
            status,
            code: code.to_owned(),
            message: String::new(),
        };
        let cases = [
            (
                ApiError::Unreachable {
                    url: "u".into(),
                    message: "reset".into(),
                },
                true,
            ),
            (
                ApiError::Server {
                    status: 503,
                    code: "uploads_busy".into(),
                    message: String::new(),
                },
                true,
            ),
            (rejected(408, "upload_too_slow"), true),
            (rejected(409, "upload_offset_mismatch"), true),
            (rejected(409, "upload_in_progress"), true),
            (rejected(429, "rate_limited"), true),
            (rejected(409, "upload_conflict"), false),
            (rejected(413, "payload_too_large"), false),
            (rejected(400, "invalid_bundle"), false),
        ];
        for (error, want) in cases {
            assert_eq!(worth_retrying(&error), want, "{error:?}");
        }
    }

    #[test]
    fn retries_back_off_up_to_eight_seconds() {
        let waits: Vec<u64> = (1..=7).map(|t| backoff(t).as_millis() as u64).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
    }
}

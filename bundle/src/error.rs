//! Why an upload was refused (or failed on our side).

use std::io;

/// Every way [`ingest_bundle`](super::ingest_bundle) can fail.
///
/// Each refusal names the offending archive entry where there is one. [`code`](Self::code)
/// gives a stable snake_case reason for API responses; [`is_client_error`](Self::is_client_error)
/// is `false` only for server-side storage failures (answer 5xx for those, 4xx otherwise).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The sha256 in the URL is not 64 lowercase hex characters.
    #[error("bundle id {0:?} is not a sha256 (64 lowercase hex characters)")]
    InvalidSha256(String),

    /// An entry path (or Windows-style prefix) that is absolute.
    #[error("entry {path:?}: absolute paths are not allowed ({reason})")]
    AbsolutePath { path: String, reason: &'static str },

    /// An entry path with a `..` component.
    #[error("entry {path:?}: `..` components are not allowed")]
    PathTraversal { path: String },

    /// An entry path (or link target) longer than the limit.
    #[error("entry {path:?}: path is longer than {max} bytes")]
    PathTooLong { path: String, max: usize },

    /// An entry path that is empty, has a NUL byte, an over-long component, or names the root.
    #[error("entry {path:?}: invalid path ({reason})")]
    InvalidPath { path: String, reason: &'static str },

    /// An entry path whose parent goes through a symlink extracted earlier.
    #[error("entry {path:?}: path goes through the symlink {symlink:?}")]
    SymlinkInPath { path: String, symlink: String },

    /// An entry that would replace something already extracted, or sit under a file.
    #[error("entry {path:?}: {reason}")]
    PathConflict { path: String, reason: &'static str },

    /// A symlink or hard link whose target is absolute or leaves the bundle root.
    #[error("entry {path:?}: link target {target:?} escapes the bundle ({reason})")]
    LinkEscape {
        path: String,
        target: String,
        reason: &'static str,
    },

    /// A link whose target is unusable (empty, or a hard link to something that is not an
    /// already-extracted regular file).
    #[error("entry {path:?}: invalid link target {target:?} ({reason})")]
    InvalidLink {
        path: String,
        target: String,
        reason: &'static str,
    },

    /// Devices, FIFOs, sparse files and unknown entry types.
    #[error("entry {path:?}: {kind} entries are not allowed")]
    SpecialFile { path: String, kind: String },

    /// More entries (including created directories) than `max_files`.
    #[error("entry {path:?}: the bundle has more than {max} entries")]
    TooManyFiles { path: String, max: u64 },

    /// More unpacked bytes than `max_unpacked_bytes`.
    #[error("entry {path:?}: the bundle unpacks to more than {max} bytes")]
    TooLarge { path: String, max: u64 },

    /// More compressed bytes than `max_archive_bytes`.
    #[error("the compressed bundle is larger than {max} bytes{}", at_entry(.entry))]
    ArchiveTooLarge { max: u64, entry: Option<String> },

    /// Decompressed/compressed ratio above `max_ratio` (a decompression bomb).
    #[error("the bundle decompresses more than {max}:1{}", at_entry(.entry))]
    RatioExceeded { max: u64, entry: Option<String> },

    /// The upload is complete but its sha256 is not the one announced.
    #[error("sha256 mismatch: the upload hashes to {actual}, not {expected}")]
    HashMismatch { expected: String, actual: String },

    /// The upload's magic bytes are another encoding's than its `Content-Type` declares.
    #[error("the upload is declared {} but its bytes are {}", .declared.name(), .found.name())]
    EncodingMismatch {
        declared: super::BundleEncoding,
        found: super::BundleEncoding,
    },

    /// Corrupt or truncated gzip, zstd or tar data.
    #[error("malformed archive{}: {detail}", at_entry(.entry))]
    MalformedArchive {
        entry: Option<String>,
        detail: String,
    },

    /// A tree manifest that is malformed (an entry neither file nor symlink, a bad digest,
    /// two sizes for one content, a delta removing a path its base lacks).
    #[error("invalid manifest: {0}")]
    InvalidManifest(String),

    /// A delta manifest against a base this owner's store does not hold (send the whole
    /// manifest instead).
    #[error("unknown base manifest {0:?}: send the whole manifest")]
    UnknownBase(String),

    /// Uploaded content whose bytes do not hash to the digest it is named by.
    #[error("content {digest}: its bytes hash to {actual}")]
    ContentMismatch { digest: String, actual: String },

    /// Uploaded content the manifest does not ask for (or sent twice).
    #[error("content entry {name:?}: {reason}")]
    UnexpectedContent { name: String, reason: &'static str },

    /// Content the tree needs that neither the upload nor the owner's store holds.
    #[error("content {digest} of {path:?} is missing: send it, or start over with the manifest")]
    MissingContent { digest: String, path: String },

    /// Reading the request body failed (client went away, body limit hit, ...).
    #[error("reading the upload failed: {0}")]
    Upload(#[source] io::Error),

    /// The bundle store itself failed (disk full, permissions, ...): a server error.
    #[error("bundle store I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

fn at_entry(entry: &Option<String>) -> String {
    match entry {
        Some(path) => format!(" (at entry {path:?})"),
        None => String::new(),
    }
}

impl BundleError {
    /// A stable snake_case code for the API's error body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidSha256(_) => "invalid_sha256",
            Self::AbsolutePath { .. } => "absolute_path",
            Self::PathTraversal { .. } => "path_traversal",
            Self::PathTooLong { .. } => "path_too_long",
            Self::InvalidPath { .. } => "invalid_path",
            Self::SymlinkInPath { .. } => "symlink_in_path",
            Self::PathConflict { .. } => "path_conflict",
            Self::LinkEscape { .. } => "link_escape",
            Self::InvalidLink { .. } => "invalid_link",
            Self::SpecialFile { .. } => "special_file",
            Self::TooManyFiles { .. } => "too_many_files",
            Self::TooLarge { .. } => "too_large",
            Self::ArchiveTooLarge { .. } => "archive_too_large",
            Self::RatioExceeded { .. } => "ratio_exceeded",
            Self::HashMismatch { .. } => "hash_mismatch",
            Self::EncodingMismatch { .. } => "encoding_mismatch",
            Self::MalformedArchive { .. } => "malformed_archive",
            Self::InvalidManifest(_) => "invalid_manifest",
            Self::UnknownBase(_) => "unknown_base",
            Self::ContentMismatch { .. } => "content_hash_mismatch",
            Self::UnexpectedContent { .. } => "unexpected_content",
            Self::MissingContent { .. } => "missing_content",
            Self::Upload(_) => "upload_failed",
            Self::Io { .. } => "io_error",
        }
    }

    /// The bundle store's disk (or quota) is full: no upload fits until space returns.
    pub fn is_storage_full(&self) -> bool {
        matches!(self, Self::Io { source, .. } if is_storage_full(source))
    }

    /// `false` only for server-side storage failures ([`BundleError::Io`]).
    pub fn is_client_error(&self) -> bool {
        !matches!(self, Self::Io { .. })
    }

    /// A storage failure while `context` (e.g. "writing").
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// ENOSPC or EDQUOT.
pub fn is_storage_full(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// Entry paths in messages: raw tar bytes shown lossily, capped so a 4 KiB hostile path
/// doesn't end up whole in every log line.
pub(crate) fn display_path(raw: &[u8]) -> String {
    const MAX_SHOWN: usize = 512;
    let text = String::from_utf8_lossy(raw);
    if text.chars().count() <= MAX_SHOWN {
        return text.into_owned();
    }
    let mut short: String = text.chars().take(MAX_SHOWN).collect();
    short.push('…');
    short
}

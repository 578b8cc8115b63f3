//! Why a blob store operation failed.

use ultraplan_bundle::BundleError;

/// Every way the blob store can fail. [`is_unavailable`](Self::is_unavailable) tells a store
/// that could not be reached or answered badly (worth retrying) from a blob that is missing or
/// damaged.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The store could not be set up from its location and the `AWS_*` variables.
    #[error("cannot open the blob store {location}: {source}")]
    Open {
        location: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// No blob under that key.
    #[error("{key} is not in the blob store {location}")]
    NotFound { location: String, key: String },

    /// The store refused or failed a request.
    #[error("blob store {location}: {action} {key} failed: {source}")]
    Store {
        location: String,
        action: &'static str,
        key: String,
        source: Box<object_store::Error>,
    },

    /// A download broke off half way.
    #[error("blob store {location}: downloading {key} broke off: {source}")]
    Interrupted {
        location: String,
        key: String,
        source: std::io::Error,
    },

    /// Reading or writing the local side of a transfer failed.
    #[error("{action} {path}: {source}")]
    Local {
        action: &'static str,
        path: String,
        source: std::io::Error,
    },

    /// The bytes in the blob store are not the bundle they are named after, or not a bundle
    /// the server accepts: its sha256 differs (changed in the store) or its content is refused.
    #[error("bundle {sha} in the blob store {location} is damaged and was not unpacked: {source}")]
    Damaged {
        sha: String,
        location: String,
        source: BundleError,
    },

    /// Unpacking a bundle from the blob store failed on this server's side (disk, IO).
    #[error("bundle {sha} could not be unpacked from the blob store {location}: {source}")]
    Unpack {
        sha: String,
        location: String,
        source: BundleError,
    },

    /// Not a bundle id.
    #[error("{0:?} is not a bundle id (64 lowercase hex characters)")]
    InvalidId(String),

    /// The blob is larger than its reader accepts.
    #[error("{key} in the blob store is larger than {max_bytes} bytes")]
    TooLarge { key: String, max_bytes: usize },

    /// A blocking task died.
    #[error("a blob store task failed: {0}")]
    Task(String),
}

impl BlobError {
    /// A stable snake_case reason for API errors and logs.
    pub fn code(&self) -> &'static str {
        match self {
            BlobError::Open { .. } => "blob_store_config",
            BlobError::NotFound { .. } => "blob_not_found",
            BlobError::Store { .. } | BlobError::Interrupted { .. } => "blob_store_unavailable",
            BlobError::Local { .. } | BlobError::Unpack { .. } | BlobError::Task(_) => {
                "blob_store_local_io"
            }
            BlobError::Damaged { .. } | BlobError::TooLarge { .. } => "blob_damaged",
            BlobError::InvalidId(_) => "invalid_sha256",
        }
    }

    /// `true` when a disk on the way is full (ENOSPC or EDQUOT anywhere in the error's
    /// chain): a local blob store on a full disk, or the local side of a transfer.
    pub fn is_storage_full(&self) -> bool {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(error) = next {
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(ultraplan_bundle::is_storage_full)
            {
                return true;
            }
            next = error.source();
        }
        false
    }

    /// `true` when the store itself failed (unreachable, refused the request): a retry may
    /// succeed.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            BlobError::Store { .. } | BlobError::Interrupted { .. }
        )
    }
}

//! Errors of the bundler.

use std::path::PathBuf;

/// Why a bundle could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{path}: not a directory")]
    NotADirectory { path: PathBuf },

    #[error("compression level {0} is out of range 1..=6")]
    Level(u32),

    #[error("walking {path}: {source}")]
    Walk {
        path: PathBuf,
        #[source]
        source: ignore::Error,
    },

    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{path} changed while it was being bundled (expected {expected} bytes); try again")]
    FileChanged { path: PathBuf, expected: u64 },

    #[error("building the tar header of {path}: {source}")]
    Header {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("writing the bundle: {0}")]
    Write(#[source] std::io::Error),

    #[error("a compression worker stopped unexpectedly")]
    Worker,
}

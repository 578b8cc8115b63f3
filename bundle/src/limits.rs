//! Limits an upload must stay within, and what a successful ingest reports.

const MIB: u64 = 1024 * 1024;

/// Most bytes the tar reader may consume between two entries (headers, GNU long names, pax
/// extensions, sparse maps). The tar crate buffers these in memory, so they must stay small.
pub(crate) const MAX_HEADER_BYTES: u64 = MIB;

/// Most decompressed bytes allowed after the tar end-of-archive marker (record padding). They
/// must all be zero: anything else is data we would silently drop.
pub(crate) const MAX_TRAILING_BYTES: u64 = 4 * MIB;

/// Largest zstd window a frame may ask the decoder for, as a power of two (8 MiB: every
/// standard level up to 19 fits; a frame asking for more is refused before it is allocated).
pub(crate) const MAX_ZSTD_WINDOW_LOG: u32 = 23;

/// Longest single path component (Linux `NAME_MAX`).
pub(crate) const MAX_COMPONENT_LEN: usize = 255;

/// Bounds on one bundle upload. Every limit is enforced while streaming, before the data it
/// guards is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleLimits {
    /// Most raw (compressed) bytes read from the upload.
    pub max_archive_bytes: u64,
    /// Most entries: every tar entry, plus each directory created implicitly for a parent.
    pub max_files: u64,
    /// Most bytes of file data written (plus data of non-file entries, which is skipped).
    pub max_unpacked_bytes: u64,
    /// Most decompressed bytes per compressed byte read so far ...
    pub max_ratio: u64,
    /// ... checked only once more than this many bytes have been decompressed.
    pub ratio_grace_bytes: u64,
    /// Longest entry path or link target, in bytes.
    pub max_path_len: usize,
}

impl Default for BundleLimits {
    fn default() -> Self {
        Self {
            max_archive_bytes: 512 * MIB,
            max_files: 100_000,
            max_unpacked_bytes: 2048 * MIB,
            max_ratio: 100,
            ratio_grace_bytes: 8 * MIB,
            max_path_len: 4096,
        }
    }
}

/// What a successful [`ingest_bundle`](super::ingest_bundle) stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleStats {
    /// sha256 of the raw upload, lowercase hex (the bundle id).
    pub sha256: String,
    /// How the upload is compressed (which archive extension it is stored under).
    pub encoding: super::BundleEncoding,
    /// Non-directory entries extracted: regular files, symlinks and hard links.
    pub files: u64,
    /// Raw (compressed) bytes received.
    pub archive_bytes: u64,
    /// File data bytes written (hard links count once).
    pub unpacked_bytes: u64,
}

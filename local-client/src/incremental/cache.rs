//! The client's cache of file hashes, like git's index: a file whose inode, size,
//! modification and change times are what they were when it was hashed is not read again.
//!
//! A file modified within the timestamp granularity of its hashing could change again
//! without its modification time moving ("racy" in git's words): an entry is only trusted
//! when the file's modification time is at least [`RACY_NS`] older than the moment its
//! hashing began, else the file is hashed again.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;

use crate::bundle::Stamp;

/// How much older than its hashing a file's modification time must be for the hash to be
/// trusted: covers coarse timestamps (2 s on some filesystems) and clock ticks.
pub const RACY_NS: i64 = 2_000_000_000;

const MAGIC: &[u8] = b"ultraplan-hashes-v1\n";

/// One file as it was hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    pub stamp: Stamp,
    pub size: u64,
    /// When the hashing began (ns since the epoch).
    pub hashed_at_ns: i64,
    pub blake3: [u8; 32],
}

impl Cached {
    /// The hash, if the file is still what was hashed and was not racy then.
    pub fn hash_for(&self, stamp: Stamp, size: u64) -> Option<[u8; 32]> {
        let same = self.stamp == stamp && self.size == size;
        let settled = stamp.mtime_ns.saturating_add(RACY_NS) < self.hashed_at_ns;
        (same && settled).then_some(self.blake3)
    }
}

/// The hashes of one tree's files, by path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HashCache {
    pub entries: HashMap<String, Cached>,
}

impl HashCache {
    /// The cache at `path`; empty when there is none or it cannot be read.
    pub fn load(path: &Path) -> Self {
        fs::read(path)
            .ok()
            .and_then(|bytes| Self::decode(&bytes))
            .unwrap_or_default()
    }

    /// Write the cache to `path` (through a temporary file beside it).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let partial = path.with_extension(format!("tmp{}", std::process::id()));
        fs::write(&partial, self.encode())?;
        fs::rename(&partial, path)
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.entries.len() * 120);
        out.extend_from_slice(MAGIC);
        for (path, c) in &self.entries {
            let len = u32::try_from(path.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(path.as_bytes());
            out.extend_from_slice(&c.stamp.ino.to_le_bytes());
            out.extend_from_slice(&c.stamp.mtime_ns.to_le_bytes());
            out.extend_from_slice(&c.stamp.ctime_ns.to_le_bytes());
            out.extend_from_slice(&c.size.to_le_bytes());
            out.extend_from_slice(&c.hashed_at_ns.to_le_bytes());
            out.extend_from_slice(&c.blake3);
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut entries = HashMap::new();
        while !rest.is_empty() {
            let (len, r) = rest.split_first_chunk::<4>()?;
            let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
            let path = std::str::from_utf8(r.get(..len)?).ok()?.to_owned();
            let r = r.get(len..)?;
            let (ino, r) = r.split_first_chunk::<8>()?;
            let (mtime, r) = r.split_first_chunk::<8>()?;
            let (ctime, r) = r.split_first_chunk::<8>()?;
            let (size, r) = r.split_first_chunk::<8>()?;
            let (at, r) = r.split_first_chunk::<8>()?;
            let (blake3, r) = r.split_first_chunk::<32>()?;
            let stamp = Stamp {
                ino: u64::from_le_bytes(*ino),
                mtime_ns: i64::from_le_bytes(*mtime),
                ctime_ns: i64::from_le_bytes(*ctime),
            };
            let cached = Cached {
                stamp,
                size: u64::from_le_bytes(*size),
                hashed_at_ns: i64::from_le_bytes(*at),
                blake3: *blake3,
            };
            entries.insert(path, cached);
            rest = r;
        }
        Some(Self { entries })
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;

//! Test helpers: a raw tar writer (it writes header bytes directly, so it can produce the
//! `..` and absolute paths `tar::Builder` refuses), gzip helpers, and a store environment that
//! can prove nothing was left behind.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

use super::super::{BundleError, BundleLimits, BundleStats, ingest_bundle};

/// Builds tar bytes entry by entry, with no validation at all.
#[derive(Default)]
pub struct Tar(Vec<u8>);

impl Tar {
    pub fn new() -> Self {
        Self::default()
    }

    /// One raw entry. Names or link names over 100 bytes get a GNU `L`/`K` entry first.
    pub fn raw(
        mut self,
        kind: EntryType,
        name: &[u8],
        link: &[u8],
        mode: u32,
        data: &[u8],
    ) -> Self {
        if name.len() > 100 {
            self = self.gnu_long(EntryType::GNULongName, name);
        }
        if link.len() > 100 {
            self = self.gnu_long(EntryType::GNULongLink, link);
        }
        let mut header = Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(data.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        let old = header.as_old_mut();
        let name = &name[..name.len().min(100)];
        old.name[..name.len()].copy_from_slice(name);
        let link = &link[..link.len().min(100)];
        old.linkname[..link.len()].copy_from_slice(link);
        header.set_cksum();
        self.0.extend_from_slice(header.as_bytes());
        self.data(data)
    }

    /// A header whose size field claims `size` bytes, with no data written after it.
    pub fn header_only(mut self, kind: EntryType, name: &str, size: u64) -> Self {
        let mut header = Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(size);
        header.set_mode(0o644);
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_cksum();
        self.0.extend_from_slice(header.as_bytes());
        self
    }

    fn data(mut self, data: &[u8]) -> Self {
        self.0.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.0.extend(std::iter::repeat_n(0, pad));
        self
    }

    fn gnu_long(self, kind: EntryType, value: &[u8]) -> Self {
        let mut data = value.to_vec();
        data.push(0);
        self.raw(kind, b"././@LongLink", b"", 0o644, &data)
    }

    pub fn dir(self, name: &str) -> Self {
        self.raw(EntryType::Directory, name.as_bytes(), b"", 0o755, b"")
    }

    pub fn file(self, name: &str, data: &[u8]) -> Self {
        self.raw(EntryType::Regular, name.as_bytes(), b"", 0o644, data)
    }

    pub fn file_mode(self, name: &str, data: &[u8], mode: u32) -> Self {
        self.raw(EntryType::Regular, name.as_bytes(), b"", mode, data)
    }

    pub fn symlink(self, name: &str, target: &str) -> Self {
        self.raw(
            EntryType::Symlink,
            name.as_bytes(),
            target.as_bytes(),
            0o777,
            b"",
        )
    }

    pub fn hardlink(self, name: &str, target: &str) -> Self {
        self.raw(
            EntryType::Link,
            name.as_bytes(),
            target.as_bytes(),
            0o644,
            b"",
        )
    }

    pub fn special(self, name: &str, kind: EntryType) -> Self {
        self.raw(kind, name.as_bytes(), b"", 0o644, b"")
    }

    /// A pax extended header (`x`, or `g` when `global`) with the given records.
    pub fn pax(self, global: bool, records: &[(&str, &[u8])]) -> Self {
        let mut data = Vec::new();
        for (key, value) in records {
            // "<len> key=value\n", where len counts itself.
            let body = key.len() + value.len() + 3;
            let mut len = body + 1;
            while len != body + len.to_string().len() {
                len = body + len.to_string().len();
            }
            data.extend_from_slice(format!("{len} {key}=").as_bytes());
            data.extend_from_slice(value);
            data.push(b'\n');
        }
        let (kind, name) = if global {
            (EntryType::XGlobalHeader, "pax_global_header")
        } else {
            (EntryType::XHeader, "PaxHeaders/entry")
        };
        self.raw(kind, name.as_bytes(), b"", 0o644, &data)
    }

    /// Append raw bytes (no padding).
    pub fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    /// The tar stream with its end-of-archive marker (two zero blocks).
    pub fn finish(self) -> Vec<u8> {
        let mut out = self.0;
        out.extend(std::iter::repeat_n(0, 1024));
        out
    }

    /// Without the end-of-archive marker.
    pub fn unterminated(self) -> Vec<u8> {
        self.0
    }
}

pub fn gz(data: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// The compressions every hostile-archive test runs through (the validator is one pipeline
/// behind either decoder, and must refuse the same archives the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Zstd,
}

pub const CODECS: [Codec; 2] = [Codec::Gzip, Codec::Zstd];

impl Codec {
    pub fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Self::Gzip => gz(data),
            Self::Zstd => zst(data),
        }
    }

    /// A streaming encoder over `reader`, for bombs that are never held whole.
    pub fn encoder<'a, R: Read + 'a>(self, reader: R) -> Box<dyn Read + 'a> {
        match self {
            Self::Gzip => Box::new(flate2::read::GzEncoder::new(reader, Compression::fast())),
            Self::Zstd => Box::new(zstd::stream::read::Encoder::new(reader, 1).unwrap()),
        }
    }

    /// Index of a byte of the integrity check at the end of `len` compressed bytes (gzip's
    /// CRC-32, zstd's frame checksum).
    pub fn checksum_byte(self, len: usize) -> usize {
        match self {
            Self::Gzip => len - 8,
            Self::Zstd => len - 2,
        }
    }

    /// The test case's name with the codec, for assertion messages.
    pub fn case(self, name: &str) -> String {
        format!("{name} [{self:?}]")
    }
}

/// zstd level 1 with a frame checksum, as the client writes it.
pub fn zst(data: &[u8]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    enc.include_checksum(true).unwrap();
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// `data` split in `parts` pieces, each its own zstd frame, concatenated.
pub fn zst_frames(data: &[u8], parts: usize) -> Vec<u8> {
    let chunk = data.len().div_ceil(parts).max(1);
    data.chunks(chunk).flat_map(zst).collect()
}

/// `data` split in `parts` pieces, each its own gzip member, concatenated.
pub fn gz_members(data: &[u8], parts: usize) -> Vec<u8> {
    let chunk = data.len().div_ceil(parts).max(1);
    data.chunks(chunk).flat_map(gz).collect()
}

pub fn sha(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// A temp dir holding `store/` (the store root) and `outside/canary.txt`; hostile archives
/// aim at both the temp dir and `outside/`.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub store: PathBuf,
    before: BTreeSet<PathBuf>,
}

impl Env {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        fs::create_dir(&store).unwrap();
        fs::create_dir(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/canary.txt"), b"canary").unwrap();
        let before = walk(tmp.path());
        Self { tmp, store, before }
    }

    pub fn ingest(&self, upload: &[u8]) -> Result<BundleStats, BundleError> {
        self.ingest_with(upload, &sha(upload), &BundleLimits::default())
    }

    pub fn ingest_with(
        &self,
        upload: &[u8],
        sha: &str,
        limits: &BundleLimits,
    ) -> Result<BundleStats, BundleError> {
        ingest_bundle(upload, sha, &self.store, limits)
    }

    /// The store is empty again and nothing appeared or changed anywhere in the temp dir.
    pub fn assert_untouched(&self, case: &str) {
        assert_eq!(
            walk(self.tmp.path()),
            self.before,
            "{case}: files appeared or vanished"
        );
        let canary = self.tmp.path().join("outside/canary.txt");
        assert_eq!(
            fs::read(&canary).unwrap(),
            b"canary",
            "{case}: canary modified"
        );
        let links = std::os::unix::fs::MetadataExt::nlink(&fs::metadata(&canary).unwrap());
        assert_eq!(links, 1, "{case}: canary was hard-linked");
    }
}

/// Every path under `root` (not following symlinks).
pub fn walk(root: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path.clone());
            }
            out.insert(path);
        }
    }
    out
}

/// Yields `len` zero bytes without ever holding them, counting how many were pulled.
pub struct Zeros {
    pub left: u64,
    pub pulled: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        buf[..n].fill(0);
        self.left -= n as u64;
        self.pulled.set(self.pulled.get() + n as u64);
        Ok(n)
    }
}

/// A reader that fails after yielding `ok` bytes of `data`.
pub struct FailingReader {
    pub data: Vec<u8>,
    pub ok: usize,
}

impl Read for FailingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ok == 0 {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "client went away",
            ));
        }
        let n = buf.len().min(self.ok);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data.drain(..n);
        self.ok -= n;
        Ok(n)
    }
}

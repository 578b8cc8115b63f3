//! Each owner's contents by BLAKE3: `<store_root>/.content/<owner>/<hh>/<hex>` (mode 0644),
//! with `<hex>.x` (0755) beside it once an executable file needed it, so a materialised tree
//! can hard-link either. An owner only ever reaches its own directory: a digest another owner
//! uploaded is, to this one, missing.
//!
//! Uploaded contents arrive as one tar (gzip'd or zstd'd) whose entries are regular files named
//! by their digest's hex; each is written into the request's staging directory while it is
//! hashed, and kept only when its bytes hash to its name.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::manifest::{Digest, TreeManifest, parse_digest};
use crate::encoding::{BundleEncoding, Decoder};
use crate::error::{BundleError, display_path};
use crate::limits::{BundleLimits, MAX_HEADER_BYTES};
use crate::stream::{Count, Guard, Shared, stream_error};
use crate::{drain_tar_padding, read_head};

/// One owner's contents.
#[derive(Debug, Clone)]
pub struct OwnerStore {
    dir: PathBuf,
}

impl OwnerStore {
    /// `owner`'s store under `store_root`; `None` unless the owner id is plain (1–64 letters,
    /// digits, `-` or `_`), since it names a directory.
    pub fn new(store_root: &Path, owner: &str) -> Option<Self> {
        crate::partial::is_plain(owner).then(|| Self {
            dir: store_root.join(".content").join(owner),
        })
    }

    /// Where content `digest` is kept, as 0644 or (`executable`) 0755.
    pub fn path(&self, digest: &Digest, executable: bool) -> PathBuf {
        let hex = hex::encode(digest);
        let name = if executable { format!("{hex}.x") } else { hex };
        self.dir.join(&name[..2]).join(name)
    }

    /// Does the owner hold `digest`?
    pub fn has(&self, digest: &Digest) -> bool {
        fs::symlink_metadata(self.path(digest, false)).is_ok_and(|m| m.is_file())
    }

    /// The contents `manifest` needs that the owner does not hold, with their sizes; only
    /// among `among` (contents and their sizes) when given: the rest are taken to be held.
    pub fn missing(
        &self,
        manifest: &TreeManifest,
        among: Option<&BTreeMap<Digest, u64>>,
    ) -> BTreeMap<Digest, u64> {
        match among {
            Some(among) => among
                .iter()
                .filter(|(digest, _)| !self.has(digest))
                .map(|(digest, size)| (*digest, *size))
                .collect(),
            None => manifest
                .contents()
                .into_iter()
                .filter(|(digest, _)| !self.has(digest))
                .map(|(digest, (size, _))| (digest, size))
                .collect(),
        }
    }

    /// Which of `digests` the owner holds, looked up on several threads (a large tree's
    /// contents are many files whose metadata may not be cached).
    pub fn holding<'a>(&self, digests: impl Iterator<Item = &'a Digest>) -> HashSet<Digest> {
        const THREADS: usize = 8;
        let digests: Vec<&Digest> = digests.collect();
        let chunk = digests.len().div_ceil(THREADS).max(1);
        std::thread::scope(|scope| {
            let found: Vec<_> = digests
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .filter(|d| self.has(d))
                            .map(|d| **d)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            found
                .into_iter()
                .flat_map(|handle| handle.join().unwrap_or_default())
                .collect()
        })
    }

    /// Move a verified file from staging into the store (replacing an equal copy).
    pub(crate) fn keep(&self, staged: &Path, digest: &Digest, executable: bool) -> io::Result<()> {
        let target = self.path(digest, executable);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::rename(staged, target)
    }
}

/// Contents received by one request, in its staging directory.
#[derive(Debug, Default)]
pub struct Received {
    pub staged: HashMap<Digest, PathBuf>,
    /// Raw (compressed) bytes read.
    pub archive_bytes: u64,
}

/// Receive uploaded contents into `dir`: only digests in `wanted` (the tree's contents), each
/// once, at its size, and hashing to its name. On a refusal the reader is not drained.
pub fn receive<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    wanted: &BTreeMap<Digest, u64>,
    dir: &Path,
    limits: &BundleLimits,
) -> Result<Received, BundleError> {
    let shared = Rc::new(Shared::default());
    let mut count = Count::new(reader, Rc::clone(&shared), limits.max_archive_bytes);
    let head = read_head(&mut count).map_err(|e| stream_error(&shared, limits, e, None))?;
    let encoding = match (declared, BundleEncoding::sniff(&head)) {
        (Some(declared), Some(found)) if declared != found => {
            return Err(BundleError::EncodingMismatch { declared, found });
        }
        (_, Some(found)) => found,
        (Some(declared), None) => declared,
        (None, None) => BundleEncoding::Zstd,
    };
    let raw = BufReader::with_capacity(64 * 1024, io::Cursor::new(head).chain(count));
    let decoder = Decoder::new(encoding, raw).map_err(|e| BundleError::MalformedArchive {
        entry: None,
        detail: e.to_string(),
    })?;
    let mut guard = Guard::new(
        decoder,
        Rc::clone(&shared),
        limits.max_ratio,
        limits.ratio_grace_bytes,
    );
    let mut received = Received::default();
    read_entries(&mut guard, &shared, wanted, dir, limits, &mut received)?;
    drain_tar_padding(&mut guard, &shared, limits)?;
    let mut raw = guard.into_inner().into_inner();
    io::copy(&mut raw, &mut io::sink()).map_err(|e| stream_error(&shared, limits, e, None))?;
    received.archive_bytes = shared.raw.get();
    Ok(received)
}

fn read_entries<R: Read>(
    stream: R,
    shared: &Shared,
    wanted: &BTreeMap<Digest, u64>,
    dir: &Path,
    limits: &BundleLimits,
    received: &mut Received,
) -> Result<(), BundleError> {
    let mut archive = tar::Archive::new(stream);
    let mut entries = archive
        .entries()
        .map_err(|e| stream_error(shared, limits, e, None))?;
    loop {
        shared.begin_headers(MAX_HEADER_BYTES);
        let next = entries.next();
        shared.end_headers();
        let Some(entry) = next else {
            return Ok(());
        };
        let mut entry = entry.map_err(|e| stream_error(shared, limits, e, None))?;
        let name = display_path(&entry.path_bytes());
        let unexpected = |reason| BundleError::UnexpectedContent {
            name: name.clone(),
            reason,
        };
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Err(unexpected("contents are regular files only"));
        }
        let digest = parse_digest(&name).ok_or_else(|| unexpected("not a BLAKE3 digest"))?;
        match wanted.get(&digest) {
            None => return Err(unexpected("the manifest does not ask for it")),
            Some(&size) if size != entry.size() => {
                return Err(unexpected("its size is not the manifest's"));
            }
            Some(_) if received.staged.contains_key(&digest) => {
                return Err(unexpected("sent twice"));
            }
            Some(_) => {}
        }
        let path = dir.join(&name);
        write_verified(&mut entry, &path, &digest, shared, limits, &name)?;
        received.staged.insert(digest, path);
    }
}

/// Write one entry to `path` while hashing it; refuse bytes that do not hash to `digest`.
fn write_verified<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    path: &Path,
    digest: &Digest,
    shared: &Shared,
    limits: &BundleLimits,
    name: &str,
) -> Result<(), BundleError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)
        .map_err(|e| BundleError::io("staging uploaded content", e))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(stream_error(shared, limits, e, Some(name.to_owned()))),
        };
        total += n as u64;
        hasher.update(&buf[..n]);
        file.write_all(&buf[..n])
            .map_err(|e| BundleError::io("staging uploaded content", e))?;
    }
    if total != entry.size() {
        return Err(BundleError::MalformedArchive {
            entry: Some(name.to_owned()),
            detail: format!(
                "entry data is truncated ({total} of {} bytes)",
                entry.size()
            ),
        });
    }
    let actual = hasher.finalize();
    if actual.as_bytes() != digest {
        return Err(BundleError::ContentMismatch {
            digest: name.to_owned(),
            actual: actual.to_hex().to_string(),
        });
    }
    // Explicitly, so the server's umask doesn't decide the mode trees link to.
    file.set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(|e| BundleError::io("staging uploaded content", e))
}

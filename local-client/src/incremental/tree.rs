//! The manifest of a walked tree: each file's BLAKE3 from the hash cache when the file is
//! unchanged since it was hashed, else read now (on every core).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use ultraplan_protocol::api::ManifestEntry;

use super::IncrementalError;
use super::cache::{Cached, HashCache};
use crate::bundle::{Entry, EntryKind};

/// A tree's manifest, by path, and the cache that now describes its files.
#[derive(Debug)]
pub struct Hashed {
    pub entries: BTreeMap<String, ManifestEntry>,
    pub cache: HashCache,
    /// Files read and hashed this time (the rest came from the cache).
    pub hashed: usize,
}

/// The manifest of `entries` (walked under `root`), hashing what `cache` cannot vouch for.
pub fn manifest(
    root: &Path,
    entries: &[Entry],
    cache: &HashCache,
) -> Result<Hashed, IncrementalError> {
    // Gathered, then sorted once: faster than inserting into the map path by path.
    let mut out = Vec::with_capacity(entries.len());
    let mut fresh = HashCache::default();
    fresh.entries.reserve(entries.len());
    let mut work = Vec::new();
    for entry in entries {
        let path = text(&entry.path)?;
        match &entry.kind {
            EntryKind::Symlink { target } => {
                let target = Some(text(target)?);
                out.push((path.clone(), symlink(path, target)));
            }
            EntryKind::File { size, executable } => {
                let known = cache.entries.get(&path);
                match known.and_then(|c| c.hash_for(entry.stamp, *size).map(|h| (c, h))) {
                    Some((cached, hash)) => {
                        out.push((path.clone(), file(&path, *executable, *size, &hash)));
                        fresh.entries.insert(path, *cached);
                    }
                    None => work.push((path, entry)),
                }
            }
        }
    }
    let hashed = work.len();
    for (path, entry, size, cached) in hash_all(root, work)? {
        let EntryKind::File { executable, .. } = entry.kind else {
            continue;
        };
        out.push((path.clone(), file(&path, executable, size, &cached.blake3)));
        fresh.entries.insert(path, cached);
    }
    Ok(Hashed {
        entries: BTreeMap::from_iter(out),
        cache: fresh,
        hashed,
    })
}

fn text(path: &Path) -> Result<String, IncrementalError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| IncrementalError::NotUtf8(path.display().to_string()))
}

fn symlink(path: String, target: Option<String>) -> ManifestEntry {
    ManifestEntry {
        path,
        mode: None,
        size: None,
        blake3: None,
        target,
    }
}

fn file(path: &str, executable: bool, size: u64, blake3: &[u8; 32]) -> ManifestEntry {
    ManifestEntry {
        path: path.to_owned(),
        mode: Some(if executable { 0o755 } else { 0o644 }),
        size: Some(size),
        blake3: Some(hex::encode(blake3)),
        target: None,
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

type Done<'a> = (String, &'a Entry, u64, Cached);

/// Hash every file of `work` on every core.
fn hash_all<'a>(
    root: &Path,
    work: Vec<(String, &'a Entry)>,
) -> Result<Vec<Done<'a>>, IncrementalError> {
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(work.len()));
    let failed = Mutex::new(None);
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(work.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some((path, entry)) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let hashed_at_ns = now_ns();
                    match hash_file(&root.join(path)) {
                        Ok((size, blake3)) => {
                            let cached = Cached {
                                stamp: entry.stamp,
                                size,
                                hashed_at_ns,
                                blake3,
                            };
                            lock(&done).push((path.clone(), *entry, size, cached));
                        }
                        Err(source) => {
                            *lock(&failed) = Some(IncrementalError::Read {
                                path: path.clone(),
                                source,
                            });
                        }
                    }
                }
            });
        }
    });
    match failed
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        Some(error) => Err(error),
        None => Ok(done
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Size and BLAKE3 of the file's bytes as read now.
pub fn hash_file(path: &Path) -> std::io::Result<(u64, [u8; 32])> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(std::fs::File::open(path)?)?;
    let size = hasher.count();
    Ok((size, *hasher.finalize().as_bytes()))
}

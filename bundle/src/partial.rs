//! Resumable uploads: the bytes of a large bundle received so far, kept per owner until the
//! rest arrives, so an interrupted upload continues where it stopped.
//!
//! Layout under `<store_root>/.partial/<owner>/`: `<sha>.part` (the archive's first bytes, as
//! received) and `<sha>.meta` (the declared total length and encoding, one line). The offset
//! is the length of the `.part` file; nothing else records it, so a crash can never leave the
//! two disagreeing. A finished upload is ingested from the file like any other ([`crate::
//! ingest_bundle_as`]), which checks its sha256, so bytes of a torn write are caught there.
//!
//! Everything here is blocking; call it from `tokio::task::spawn_blocking`.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

use crate::BundleEncoding;

/// A partial upload untouched for this long is abandoned: [`sweep`] removes it.
pub const PARTIAL_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// What an upload in progress declared, and how far it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartialState {
    /// Bytes received and kept.
    pub offset: u64,
    /// The archive's total length.
    pub length: u64,
    /// The encoding its first request declared (`None`: the magic bytes decide).
    pub encoding: Option<BundleEncoding>,
}

/// Why bytes could not be appended.
#[derive(Debug, thiserror::Error)]
pub enum PartialError {
    /// The request's offset is not where the upload stands.
    #[error("the upload stands at byte {current}, not {requested}")]
    OffsetMismatch { current: u64, requested: u64 },
    /// The request declares another total length or encoding than the upload's first did.
    #[error("the upload was started as {0}; start again under that, or finish it")]
    Conflict(String),
    /// More bytes arrived than the declared length.
    #[error("the body runs past the declared length of {0} bytes")]
    TooLong(u64),
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
}

fn io_error(context: &'static str) -> impl FnOnce(io::Error) -> PartialError {
    move |source| PartialError::Io { context, source }
}

/// The partial uploads a request of this process is writing.
fn busy() -> MutexGuard<'static, HashSet<PathBuf>> {
    static BUSY: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    BUSY.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The right to write one partial upload: one request at a time appends to it. Released on
/// drop, so move it into the blocking task that writes, which may outlive its request.
#[derive(Debug)]
pub struct Held {
    key: PathBuf,
}

impl Drop for Held {
    fn drop(&mut self) {
        busy().remove(&self.key);
    }
}

/// One owner's partial upload of one bundle.
#[derive(Debug, Clone)]
pub struct Partial {
    part: PathBuf,
    meta: PathBuf,
}

impl Partial {
    /// The upload `owner` makes of `sha`; `None` unless both are plain ids (1–64 letters,
    /// digits, `-` or `_`), since they name a directory and files.
    pub fn new(store_root: &Path, owner: &str, sha: &str) -> Option<Self> {
        if !is_plain(owner) || !is_plain(sha) {
            return None;
        }
        let dir = store_root.join(".partial").join(owner);
        Some(Partial {
            part: dir.join(format!("{sha}.part")),
            meta: dir.join(format!("{sha}.meta")),
        })
    }

    /// Take the right to write this upload, unless another request holds it.
    pub fn try_hold(&self) -> Option<Held> {
        let key = self.part.clone();
        // Built only once inserted: a `Held` dropped while the set is locked would deadlock.
        let inserted = busy().insert(key.clone());
        inserted.then(|| Held { key })
    }

    /// Where the received bytes are.
    pub fn path(&self) -> &Path {
        &self.part
    }

    /// The upload in progress, if any.
    pub fn state(&self) -> Result<Option<PartialState>, PartialError> {
        let meta = match fs::read_to_string(&self.meta) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("reading the upload's record")(e)),
        };
        let Some((length, encoding)) = parse_meta(&meta) else {
            // A torn record: the upload starts again.
            self.remove();
            return Ok(None);
        };
        let offset = match fs::metadata(&self.part) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(io_error("sizing the upload")(e)),
        };
        Ok(Some(PartialState {
            offset: offset.min(length),
            length,
            encoding,
        }))
    }

    /// Append `body` at `offset` to the upload of `length` bytes declared as `encoding`,
    /// starting it when `offset` is 0 and none is in progress. Bytes are kept as they arrive:
    /// when `body` fails midway (the connection was cut), what came before stays, and the
    /// error is returned. Returns the new offset.
    pub fn append(&self, state: PartialState, body: impl Read) -> Result<u64, PartialError> {
        let current = self.begin(state)?;
        if current != state.offset {
            return Err(PartialError::OffsetMismatch {
                current,
                requested: state.offset,
            });
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(&self.part)
            .map_err(io_error("opening the upload"))?;
        let mut limited = body.take(state.length - current);
        let copied = io::copy(&mut limited, &mut file);
        file.sync_data().map_err(io_error("syncing the upload"))?;
        copied.map_err(io_error("receiving the body"))?;
        let mut rest = limited.into_inner();
        let mut probe = [0u8; 1];
        if rest
            .read(&mut probe)
            .map_err(io_error("receiving the body"))?
            > 0
        {
            // The body does not fit what the upload declared: none of it can be trusted.
            self.remove();
            return Err(PartialError::TooLong(state.length));
        }
        file.metadata()
            .map(|m| m.len())
            .map_err(io_error("sizing the upload"))
    }

    /// The upload's offset, after recording it when it is new. Continuing an upload in
    /// progress must declare what it did; starting over (offset 0) replaces it.
    fn begin(&self, wanted: PartialState) -> Result<u64, PartialError> {
        if let Some(existing) = self.state()? {
            let same = (existing.length, existing.encoding) == (wanted.length, wanted.encoding);
            if !same && wanted.offset == 0 {
                self.remove();
                return self.begin(wanted);
            }
            if !same {
                return Err(PartialError::Conflict(format!(
                    "{} bytes of {}",
                    existing.length,
                    encoding_name(existing.encoding)
                )));
            }
            return Ok(existing.offset);
        }
        let dir = self.part.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io_error("creating the upload's directory"))?;
        File::create(&self.part).map_err(io_error("creating the upload"))?;
        let record = format!("{} {}\n", wanted.length, encoding_name(wanted.encoding));
        let temporary = self.meta.with_extension("meta.new");
        fs::write(&temporary, record).map_err(io_error("recording the upload"))?;
        fs::rename(&temporary, &self.meta).map_err(io_error("recording the upload"))?;
        Ok(0)
    }

    /// Forget the upload (finished, refused or abandoned).
    pub fn remove(&self) {
        for path in [&self.meta, &self.part] {
            if let Err(error) = fs::remove_file(path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), %error, "cannot remove a partial upload");
            }
        }
    }
}

pub(crate) fn is_plain(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn encoding_name(encoding: Option<BundleEncoding>) -> &'static str {
    encoding.map_or("auto", BundleEncoding::name)
}

/// `<length> <gzip|zstd|auto>`.
fn parse_meta(meta: &str) -> Option<(u64, Option<BundleEncoding>)> {
    let mut words = meta.split_whitespace();
    let length = words.next()?.parse().ok()?;
    let encoding = match words.next()? {
        "gzip" => Some(BundleEncoding::Gzip),
        "zstd" => Some(BundleEncoding::Zstd),
        "auto" => None,
        _ => return None,
    };
    words.next().is_none().then_some((length, encoding))
}

/// Remove partial uploads untouched for `ttl`; returns how many files went.
pub fn sweep(store_root: &Path, ttl: Duration) -> usize {
    let Ok(owners) = fs::read_dir(store_root.join(".partial")) else {
        return 0;
    };
    let now = SystemTime::now();
    let mut removed = 0;
    for owner in owners.flatten() {
        let Ok(files) = fs::read_dir(owner.path()) else {
            continue;
        };
        for file in files.flatten() {
            let old = file
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age > ttl));
            if old && fs::remove_file(file.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

#[cfg(test)]
#[path = "partial_tests.rs"]
mod tests;

//! The reader pipeline: upload → [`Tee`] (count, hash, copy to the temp archive) → gzip →
//! [`Guard`] (ratio and header budget) → tar.
//!
//! The readers report *why* they stopped through [`Shared::trip`], because the io::Error they
//! return passes through flate2 and tar, which may reword or wrap it.

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::rc::Rc;

use sha2::{Digest, Sha256};

use super::error::BundleError;
use super::limits::{BundleLimits, MAX_HEADER_BYTES};

/// Why the pipeline stopped, recorded by the reader that stopped it.
#[derive(Debug)]
pub(crate) enum Trip {
    ArchiveTooLarge,
    RatioExceeded,
    HeaderTooLarge,
    Upload(io::Error),
    Store(io::Error),
}

/// Counters shared by the readers and the extractor (single thread, hence `Cell`).
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Raw bytes read from the upload.
    pub raw: Cell<u64>,
    /// Bytes out of the gzip decoder.
    pub decompressed: Cell<u64>,
    /// `Some(budget left)` while the tar crate is reading headers.
    header_budget: Cell<Option<u64>>,
    trip: RefCell<Option<Trip>>,
}

impl Shared {
    fn trip(&self, why: Trip) -> io::Error {
        let mut slot = self.trip.borrow_mut();
        if slot.is_none() {
            *slot = Some(why);
        }
        io::Error::other("bundle ingestion stopped")
    }

    /// The reason recorded by a reader, if any (taken once).
    pub fn take_trip(&self) -> Option<Trip> {
        self.trip.borrow_mut().take()
    }

    /// Start counting header bytes against `budget`.
    pub fn begin_headers(&self, budget: u64) {
        self.header_budget.set(Some(budget));
    }

    pub fn end_headers(&self) {
        self.header_budget.set(None);
    }
}

/// Turn an error that came out of the reader pipeline (possibly reworded by flate2 or tar)
/// into the refusal: the recorded trip if a reader stopped it, else corrupt data.
pub(crate) fn stream_error(
    shared: &Shared,
    limits: &BundleLimits,
    err: io::Error,
    entry: Option<String>,
) -> BundleError {
    match shared.take_trip() {
        Some(Trip::ArchiveTooLarge) => BundleError::ArchiveTooLarge {
            max: limits.max_archive_bytes,
            entry,
        },
        Some(Trip::RatioExceeded) => BundleError::RatioExceeded {
            max: limits.max_ratio,
            entry,
        },
        Some(Trip::HeaderTooLarge) => BundleError::MalformedArchive {
            entry,
            detail: format!(
                "entry headers (long names, pax records) exceed {MAX_HEADER_BYTES} bytes"
            ),
        },
        Some(Trip::Upload(e)) => BundleError::Upload(e),
        Some(Trip::Store(e)) => BundleError::io("saving the uploaded archive", e),
        None => BundleError::MalformedArchive {
            entry,
            detail: err.to_string(),
        },
    }
}

/// Reads the upload: counts raw bytes against the archive limit, hashes them and copies them
/// to the temp archive file.
pub(crate) struct Tee<R> {
    inner: R,
    hasher: Sha256,
    sink: BufWriter<File>,
    shared: Rc<Shared>,
    max_archive_bytes: u64,
}

impl<R: Read> Tee<R> {
    pub fn new(inner: R, sink: File, shared: Rc<Shared>, max_archive_bytes: u64) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            sink: BufWriter::with_capacity(64 * 1024, sink),
            shared,
            max_archive_bytes,
        }
    }

    /// Flush and fsync the copy; return the hex sha256 of everything read.
    pub fn finish(self) -> io::Result<String> {
        let file = self
            .sink
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        Ok(hex::encode(self.hasher.finalize()))
    }
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = loop {
            match self.inner.read(buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.shared.trip(Trip::Upload(e))),
            }
        };
        let raw = self.shared.raw.get().saturating_add(n as u64);
        self.shared.raw.set(raw);
        if raw > self.max_archive_bytes {
            return Err(self.shared.trip(Trip::ArchiveTooLarge));
        }
        let data = &buf[..n];
        self.hasher.update(data);
        if let Err(e) = self.sink.write_all(data) {
            return Err(self.shared.trip(Trip::Store(e)));
        }
        Ok(n)
    }
}

/// Reads an upload that is not kept whole: counts raw bytes against the archive limit.
pub(crate) struct Count<R> {
    inner: R,
    shared: Rc<Shared>,
    max_archive_bytes: u64,
}

impl<R: Read> Count<R> {
    pub fn new(inner: R, shared: Rc<Shared>, max_archive_bytes: u64) -> Self {
        Self {
            inner,
            shared,
            max_archive_bytes,
        }
    }
}

impl<R: Read> Read for Count<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = loop {
            match self.inner.read(buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.shared.trip(Trip::Upload(e))),
            }
        };
        let raw = self.shared.raw.get().saturating_add(n as u64);
        self.shared.raw.set(raw);
        if raw > self.max_archive_bytes {
            return Err(self.shared.trip(Trip::ArchiveTooLarge));
        }
        Ok(n)
    }
}

/// Sits on the decompressed stream: enforces the ratio and the per-entry header budget, so a
/// bomb stops after about `ratio_grace_bytes` instead of being inflated.
pub(crate) struct Guard<R> {
    inner: R,
    shared: Rc<Shared>,
    max_ratio: u64,
    ratio_grace_bytes: u64,
}

impl<R: Read> Guard<R> {
    pub fn new(inner: R, shared: Rc<Shared>, max_ratio: u64, ratio_grace_bytes: u64) -> Self {
        Self {
            inner,
            shared,
            max_ratio,
            ratio_grace_bytes,
        }
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for Guard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let shared = &self.shared;
        let total = shared.decompressed.get().saturating_add(n as u64);
        shared.decompressed.set(total);
        if let Some(left) = shared.header_budget.get() {
            match left.checked_sub(n as u64) {
                Some(left) => shared.header_budget.set(Some(left)),
                None => return Err(shared.trip(Trip::HeaderTooLarge)),
            }
        }
        if total > self.ratio_grace_bytes && total > shared.raw.get().saturating_mul(self.max_ratio)
        {
            return Err(shared.trip(Trip::RatioExceeded));
        }
        Ok(n)
    }
}

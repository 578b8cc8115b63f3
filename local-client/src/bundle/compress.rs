//! Parallel compression: every chunk of the planned tar stream becomes an independent gzip
//! member (or zstd frame), compressed on its own thread; they are written in order, so the
//! output is a plain `.tar.gz` that `tar xzf` and flate2's `MultiGzDecoder` read (or a
//! `.tar.zst` that `zstd -d` reads). The SHA-256 of the output is computed as it is written.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};

use super::codec::Codec;
use super::error::BundleError;
use super::plan::{Piece, Plan};
use super::walk::Entry;

const READ_BUFFER: usize = 64 * 1024;
const ZEROS: [u8; 4096] = [0; 4096];

/// What is compressed: the planned stream and where its files live.
pub struct Source<'a> {
    pub root: &'a Path,
    pub entries: &'a [Entry],
    pub plan: &'a Plan,
}

/// The written bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub sha256: String,
    pub bytes: u64,
}

type Member = (usize, Result<Vec<u8>, BundleError>);

/// How to compress: codec and level.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub codec: Codec,
    pub level: u32,
}

/// Compresses `source` with `setting` on `threads` threads into `out`.
pub fn compress<W: Write>(
    source: &Source<'_>,
    level: Setting,
    threads: usize,
    out: W,
) -> Result<Written, BundleError> {
    let next = AtomicUsize::new(0);
    let abort = AtomicBool::new(false);
    let threads = threads.clamp(1, source.plan.chunks.len().max(1));
    let (tx, rx) = sync_channel::<Member>(threads * 2);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, abort) = (&next, &abort);
            scope.spawn(move || worker(source, level, next, abort, tx));
        }
        drop(tx);
        let written = write_in_order(rx, out, source.plan.chunks.len());
        if written.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        written
    })
}

fn worker(
    source: &Source<'_>,
    level: Setting,
    next: &AtomicUsize,
    abort: &AtomicBool,
    tx: SyncSender<Member>,
) {
    let mut buffer = vec![0; READ_BUFFER];
    while !abort.load(Ordering::Relaxed) {
        let index = next.fetch_add(1, Ordering::Relaxed);
        let Some(chunk) = source.plan.chunks.get(index) else {
            return;
        };
        let member = compress_chunk(source, chunk, level, &mut buffer);
        let failed = member.is_err();
        if tx.send((index, member)).is_err() || failed {
            return;
        }
    }
}

/// Writes members in index order as they arrive (they may arrive out of order).
fn write_in_order<W: Write>(
    rx: Receiver<Member>,
    mut out: W,
    total: usize,
) -> Result<Written, BundleError> {
    let mut pending = BTreeMap::new();
    let mut hasher = Sha256::new();
    let (mut next, mut bytes) = (0, 0u64);
    for (index, member) in rx {
        pending.insert(index, member?);
        while let Some(data) = pending.remove(&next) {
            hasher.update(&data);
            out.write_all(&data).map_err(BundleError::Write)?;
            bytes += data.len() as u64;
            next += 1;
        }
    }
    if next != total {
        return Err(BundleError::Worker);
    }
    out.flush().map_err(BundleError::Write)?;
    Ok(Written {
        sha256: hex::encode(hasher.finalize()),
        bytes,
    })
}

fn compress_chunk(
    source: &Source<'_>,
    chunk: &[Piece],
    setting: Setting,
    buffer: &mut [u8],
) -> Result<Vec<u8>, BundleError> {
    match setting.codec {
        Codec::Gzip => {
            let mut encoder = GzEncoder::new(Vec::new(), Compression::new(setting.level));
            for piece in chunk {
                write_piece(source, piece, &mut encoder, buffer)?;
            }
            encoder.finish().map_err(BundleError::Write)
        }
        Codec::Zstd => {
            let level =
                i32::try_from(setting.level).map_err(|_| BundleError::Level(setting.level))?;
            let mut encoder =
                zstd::stream::write::Encoder::new(Vec::new(), level).map_err(BundleError::Write)?;
            // A checksum per frame, as gzip has its CRC per member.
            encoder.include_checksum(true).map_err(BundleError::Write)?;
            for piece in chunk {
                write_piece(source, piece, &mut encoder, buffer)?;
            }
            encoder.finish().map_err(BundleError::Write)
        }
    }
}

fn write_piece<W: Write>(
    source: &Source<'_>,
    piece: &Piece,
    out: &mut W,
    buffer: &mut [u8],
) -> Result<(), BundleError> {
    match piece {
        Piece::Header(range) => {
            let bytes = source
                .plan
                .headers
                .get(range.clone())
                .ok_or(BundleError::Worker)?;
            out.write_all(bytes).map_err(BundleError::Write)
        }
        Piece::Zeros(len) => write_zeros(out, *len),
        Piece::File { entry, offset, len } => {
            let entry = source.entries.get(*entry).ok_or(BundleError::Worker)?;
            copy_range(&source.root.join(&entry.path), *offset, *len, out, buffer)
        }
    }
}

fn write_zeros<W: Write>(out: &mut W, mut len: u64) -> Result<(), BundleError> {
    while len > 0 {
        let n = len.min(ZEROS.len() as u64) as usize;
        out.write_all(&ZEROS[..n]).map_err(BundleError::Write)?;
        len -= n as u64;
    }
    Ok(())
}

/// Copies exactly `len` bytes at `offset` of the file at `path`; a shorter file changed since
/// the walk.
fn copy_range<W: Write>(
    path: &Path,
    offset: u64,
    len: u64,
    out: &mut W,
    buffer: &mut [u8],
) -> Result<(), BundleError> {
    let read_error = |source| BundleError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(read_error)?;
    if offset > 0 {
        file.seek(SeekFrom::Start(offset)).map_err(read_error)?;
    }
    let mut left = len;
    while left > 0 {
        let want = left.min(buffer.len() as u64) as usize;
        let n = file.read(&mut buffer[..want]).map_err(read_error)?;
        if n == 0 {
            let expected = offset + len;
            return Err(BundleError::FileChanged {
                path: path.to_owned(),
                expected,
            });
        }
        out.write_all(&buffer[..n]).map_err(BundleError::Write)?;
        left -= n as u64;
    }
    Ok(())
}

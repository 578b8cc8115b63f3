//! The tar stream, planned before any file is read, then cut into fixed-size chunks that are
//! compressed independently (one gzip member each).
//!
//! The stream is a sequence of pieces: header blocks (built here, deterministic: fixed mtime,
//! uid/gid 0, mode 0644/0755, 0777 for links), file contents read later by the workers, and
//! zero padding. Chunk boundaries depend only on the entry list, never on the machine, so the
//! same tree always gives the same bytes.

use std::ops::Range;

use tar::{EntryType, Header};

use super::error::BundleError;
use super::walk::{Entry, EntryKind};

/// Uncompressed bytes per gzip member.
pub const CHUNK_SIZE: u64 = 1 << 20;

/// Tar blocks are 512 bytes, and an archive ends with two zero blocks.
const BLOCK: u64 = 512;
const END_OF_ARCHIVE: u64 = 2 * BLOCK;

/// One contiguous part of the tar stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes of [`Plan::headers`].
    Header(Range<usize>),
    /// Bytes `offset..offset + len` of the file of entry `entry`.
    File { entry: usize, offset: u64, len: u64 },
    /// Zero bytes.
    Zeros(u64),
}

impl Piece {
    fn len(&self) -> u64 {
        match self {
            Piece::Header(r) => (r.end - r.start) as u64,
            Piece::File { len, .. } | Piece::Zeros(len) => *len,
        }
    }

    /// Splits at `at` bytes (0 < at < len).
    fn split(self, at: u64) -> (Piece, Piece) {
        match self {
            Piece::Header(r) => {
                let mid = r.start + at as usize;
                (Piece::Header(r.start..mid), Piece::Header(mid..r.end))
            }
            Piece::File { entry, offset, len } => (
                Piece::File {
                    entry,
                    offset,
                    len: at,
                },
                Piece::File {
                    entry,
                    offset: offset + at,
                    len: len - at,
                },
            ),
            Piece::Zeros(len) => (Piece::Zeros(at), Piece::Zeros(len - at)),
        }
    }
}

/// The whole stream: header bytes and the chunks that reference them.
#[derive(Debug, Default)]
pub struct Plan {
    pub headers: Vec<u8>,
    pub chunks: Vec<Vec<Piece>>,
}

/// Plans the tar stream of `entries` (sorted), with chunks of `chunk_size` bytes.
pub fn plan(entries: &[Entry], chunk_size: u64) -> Result<Plan, BundleError> {
    let mut headers = HeaderWriter::new();
    let mut chunks = Chunker::new(chunk_size.max(1));
    for (index, entry) in entries.iter().enumerate() {
        chunks.push(Piece::Header(headers.write(entry)?));
        if let EntryKind::File { size, .. } = entry.kind {
            chunks.push(Piece::File {
                entry: index,
                offset: 0,
                len: size,
            });
            chunks.push(Piece::Zeros((BLOCK - size % BLOCK) % BLOCK));
        }
    }
    chunks.push(Piece::Zeros(END_OF_ARCHIVE));
    Ok(Plan {
        headers: headers.finish(),
        chunks: chunks.finish(),
    })
}

/// Cuts a stream of pieces into chunks of exactly `size` bytes (the last may be shorter).
struct Chunker {
    size: u64,
    used: u64,
    current: Vec<Piece>,
    done: Vec<Vec<Piece>>,
}

impl Chunker {
    fn new(size: u64) -> Self {
        Self {
            size,
            used: 0,
            current: Vec::new(),
            done: Vec::new(),
        }
    }

    fn push(&mut self, mut piece: Piece) {
        while piece.len() > 0 {
            let room = self.size - self.used;
            if piece.len() <= room {
                self.used += piece.len();
                self.current.push(piece);
                break;
            }
            let (head, tail) = piece.split(room);
            self.current.push(head);
            self.used = self.size;
            piece = tail;
            self.cut();
        }
        if self.used == self.size {
            self.cut();
        }
    }

    fn cut(&mut self) {
        self.done.push(std::mem::take(&mut self.current));
        self.used = 0;
    }

    fn finish(mut self) -> Vec<Vec<Piece>> {
        if !self.current.is_empty() {
            self.cut();
        }
        self.done
    }
}

/// Builds header blocks with tar's own long-name (GNU `././@LongLink`) handling: appending an
/// entry with no data to a builder writes exactly its header blocks.
struct HeaderWriter {
    builder: tar::Builder<Vec<u8>>,
    len: usize,
}

impl HeaderWriter {
    fn new() -> Self {
        Self {
            builder: tar::Builder::new(Vec::new()),
            len: 0,
        }
    }

    /// Appends the header blocks of `entry` and returns their range.
    fn write(&mut self, entry: &Entry) -> Result<Range<usize>, BundleError> {
        let error = |source| BundleError::Header {
            path: entry.path.clone(),
            source,
        };
        let mut header = Header::new_gnu();
        header.set_mtime(tar::DETERMINISTIC_TIMESTAMP);
        header.set_uid(0);
        header.set_gid(0);
        match &entry.kind {
            EntryKind::File { size, executable } => {
                header.set_entry_type(EntryType::Regular);
                header.set_mode(if *executable { 0o755 } else { 0o644 });
                header.set_size(*size);
                self.builder
                    .append_data(&mut header, &entry.path, std::io::empty())
                    .map_err(error)?;
            }
            EntryKind::Symlink { target } => {
                header.set_entry_type(EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                self.builder
                    .append_link(&mut header, &entry.path, target)
                    .map_err(error)?;
            }
        }
        let start = self.len;
        self.len = self.builder.get_ref().len();
        Ok(start..self.len)
    }

    fn finish(mut self) -> Vec<u8> {
        // Taking the bytes leaves the builder's own end-of-archive blocks out.
        std::mem::take(self.builder.get_mut())
    }
}

#[cfg(test)]
mod tests;

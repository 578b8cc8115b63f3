//! The contents the server lacks, as one zstd'd tar of regular files named by their BLAKE3
//! hex, each checked against its hash as it is read (a file edited since it was hashed stops
//! the upload instead of sending bytes the server would refuse).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use ultraplan_protocol::api::ManifestEntry;

use super::IncrementalError;

/// zstd level of the contents archive (the bundler's default).
const LEVEL: i32 = 3;

/// Write the contents `missing` names (hex digests) to `out`, reading each from a path of
/// `entries` that has it. Returns the archive's size.
pub fn write(
    root: &Path,
    entries: &BTreeMap<String, ManifestEntry>,
    missing: &[String],
    out: &Path,
) -> Result<u64, IncrementalError> {
    let mut by_digest: HashMap<&str, (&str, u64)> = HashMap::new();
    for entry in entries.values() {
        if let (Some(digest), Some(size)) = (&entry.blake3, entry.size) {
            by_digest.entry(digest).or_insert((&entry.path, size));
        }
    }
    let write_error = |source| IncrementalError::Write {
        path: out.display().to_string(),
        source,
    };
    let file = BufWriter::with_capacity(1 << 20, File::create(out).map_err(write_error)?);
    let mut encoder = zstd::Encoder::new(file, LEVEL).map_err(write_error)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    encoder
        .multithread(u32::try_from(threads).unwrap_or(1))
        .map_err(write_error)?;
    let mut builder = tar::Builder::new(encoder);
    for digest in missing {
        let Some(&(path, size)) = by_digest.get(digest.as_str()) else {
            return Err(IncrementalError::Protocol(format!(
                "the server asked for content {digest}, which no file has"
            )));
        };
        append(&mut builder, root, path, digest, size)?;
    }
    let mut file = builder
        .into_inner()
        .and_then(|encoder| encoder.finish())
        .map_err(write_error)?;
    file.flush().map_err(write_error)?;
    drop(file);
    Ok(std::fs::metadata(out).map_err(write_error)?.len())
}

fn append<W: Write>(
    builder: &mut tar::Builder<W>,
    root: &Path,
    path: &str,
    digest: &str,
    size: u64,
) -> Result<(), IncrementalError> {
    let read_error = |source| IncrementalError::Read {
        path: path.to_owned(),
        source,
    };
    let file = File::open(root.join(path)).map_err(read_error)?;
    let mut reader = Hashing {
        inner: file.take(size),
        hasher: blake3::Hasher::new(),
    };
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    header.set_size(size);
    header.set_mtime(0);
    builder
        .append_data(&mut header, digest, &mut reader)
        .map_err(read_error)?;
    let read = reader.hasher.count();
    if read != size || reader.hasher.finalize().to_hex().as_str() != digest {
        return Err(IncrementalError::Changed(path.to_owned()));
    }
    Ok(())
}

struct Hashing<R> {
    inner: R,
    hasher: blake3::Hasher,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

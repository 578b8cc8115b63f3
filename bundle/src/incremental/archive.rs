//! The canonical archive of a materialised bundle: its tree as a deterministic tar in
//! manifest order, zstd-compressed, at `<store_root>/<id>.tar.zst` (what the blob store keeps
//! for runners and other replicas, which check it against the tree id).

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::manifest::{Node, TreeManifest};
use crate::encoding::BundleEncoding;
use crate::{archive_path_as, bundle_dir};

/// zstd level of canonical archives (the client's default).
const LEVEL: i32 = 3;

/// Write bundle `id`'s archive from its tree and manifest, unless it is there; returns the
/// archive's path. Written beside it first and renamed, so a reader never sees half of one.
pub fn write_archive(
    store_root: &Path,
    id: &str,
    manifest: &TreeManifest,
) -> io::Result<std::path::PathBuf> {
    let target = archive_path_as(store_root, id, BundleEncoding::Zstd);
    if target.is_file() {
        return Ok(target);
    }
    let tree = bundle_dir(store_root, id);
    let partial = store_root.join(format!(".{id}.{}.tar.zst", std::process::id()));
    let written = write_to(&partial, &tree, manifest).and_then(|()| fs::rename(&partial, &target));
    if written.is_err() {
        let _ = fs::remove_file(&partial);
    }
    written.map(|()| target)
}

fn write_to(path: &Path, tree: &Path, manifest: &TreeManifest) -> io::Result<()> {
    let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut encoder = zstd::Encoder::new(file, LEVEL)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    encoder.multithread(u32::try_from(threads).unwrap_or(1))?;
    let mut builder = tar::Builder::new(encoder);
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, node) in manifest.entries() {
        let mut header = tar::Header::new_gnu();
        match node {
            Node::File {
                executable, size, ..
            } => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(if *executable { 0o755 } else { 0o644 });
                header.set_size(*size);
                header.set_mtime(0);
                let file = File::open(tree.join(path))?;
                builder.append_data(&mut header, path, file)?;
            }
            Node::Symlink { target } => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                header.set_mtime(0);
                builder.append_link(&mut header, path, target)?;
            }
        }
    }
    let encoder = builder.into_inner()?;
    let mut file = encoder.finish()?;
    file.flush()?;
    file.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .sync_all()
}

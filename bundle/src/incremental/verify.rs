//! A tree on disk as its manifest, so a bundle's tree can be checked against a bundle id that
//! names a tree (a materialised bundle) rather than an archive's bytes.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::manifest::{Node, TreeManifest};
use crate::error::BundleError;

/// The manifest of the tree at `root`: its files (execute bit, size, BLAKE3) and symlinks.
/// A directory with nothing in it, or anything but files, directories and symlinks, has no
/// manifest (no bundle id can name it): `InvalidManifest`.
pub fn manifest_of_dir(root: &Path) -> Result<TreeManifest, BundleError> {
    let mut manifest = TreeManifest::default();
    let mut pending = vec![String::new()];
    while let Some(dir) = pending.pop() {
        let full = root.join(&dir);
        let mut empty = true;
        let entries = fs::read_dir(&full).map_err(|e| BundleError::io("reading a tree", e))?;
        for entry in entries {
            let entry = entry.map_err(|e| BundleError::io("reading a tree", e))?;
            empty = false;
            let name = text(&entry.file_name())?;
            let path = if dir.is_empty() {
                name
            } else {
                format!("{dir}/{name}")
            };
            let meta = entry
                .metadata()
                .map_err(|e| BundleError::io("reading a tree", e))?;
            let kind = meta.file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_symlink() {
                let target = fs::read_link(entry.path())
                    .map_err(|e| BundleError::io("reading a tree", e))?;
                let target = text(target.as_os_str())?;
                manifest.insert(path, Node::Symlink { target })?;
            } else if kind.is_file() {
                let node = file_node(&entry.path(), &meta)?;
                manifest.insert(path, node)?;
            } else {
                return Err(unnamed(
                    &path,
                    "is neither a file, a directory nor a symlink",
                ));
            }
        }
        if empty && !dir.is_empty() {
            return Err(unnamed(&dir, "is an empty directory"));
        }
    }
    Ok(manifest)
}

fn file_node(path: &Path, meta: &fs::Metadata) -> Result<Node, BundleError> {
    let file = fs::File::open(path).map_err(|e| BundleError::io("reading a tree", e))?;
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_reader(file)
        .map_err(|e| BundleError::io("reading a tree", e))?;
    Ok(Node::File {
        executable: meta.permissions().mode() & 0o100 != 0,
        size: meta.len(),
        blake3: *hasher.finalize().as_bytes(),
    })
}

fn text(name: &OsStr) -> Result<String, BundleError> {
    String::from_utf8(name.as_bytes().to_vec())
        .map_err(|_| unnamed(&name.to_string_lossy(), "is not UTF-8"))
}

fn unnamed(path: &str, what: &str) -> BundleError {
    BundleError::InvalidManifest(format!("{path:?} {what}: no tree id names this tree"))
}

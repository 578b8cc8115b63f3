//! Reading a session's bundle for the code view and for evidence links: the unpacked tree
//! comes from the blob store when this server has no copy, and every path is checked
//! against the real tree (symlinks resolved) before anything is read.

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::citations::clean_path;
use crate::http::state::AppState;
use crate::store::SessionRow;

/// Largest file the code view shows; longer files show their first bytes and say so.
pub const MAX_SHOWN_BYTES: u64 = 1024 * 1024;

/// Why a path is not shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the path is not a relative path inside the bundle")]
    Outside,
    #[error("no such file in the bundle")]
    Missing,
}

/// A file of the bundle as the code view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    Text {
        text: String,
        truncated: bool,
        size: u64,
    },
    Binary {
        size: u64,
    },
}

/// The session's unpacked bundle tree, or `None` when it has none or it cannot be had (then
/// the failure is logged; the page still renders without evidence links).
pub async fn bundle_root(state: &AppState, row: &SessionRow) -> Option<PathBuf> {
    let sha = row.bundle_id.as_deref()?;
    let config = &state.core.config;
    let blobs = match config.blobs() {
        Ok(blobs) => blobs,
        Err(error) => {
            tracing::warn!(session_id = %row.id, %error, "no blob store for the bundle");
            return None;
        }
    };
    let dir = crate::blobs::ensure_session_bundle_tree(
        &blobs,
        &config.bundles_dir(),
        sha,
        &config.bundle_limits,
    )
    .await;
    match dir {
        Ok(dir) => Some(dir),
        Err(error) => {
            tracing::warn!(session_id = %row.id, bundle = sha, %error, "bundle tree unavailable");
            None
        }
    }
}

/// The real path of the bundle file `rel` under `root`, refusing anything that is not a
/// plain relative path, or that resolves (through symlinks too) outside the tree.
pub fn resolve(root: &Path, rel: &str) -> Result<PathBuf, Refused> {
    let rel = clean_path(rel).ok_or(Refused::Outside)?;
    if rel.contains(['\\', '\0']) {
        return Err(Refused::Outside);
    }
    let real_root = root.canonicalize().map_err(|_| Refused::Missing)?;
    let real = real_root
        .join(rel)
        .canonicalize()
        .map_err(|_| Refused::Missing)?;
    if !real.starts_with(&real_root) {
        return Err(Refused::Outside);
    }
    if !real.is_file() {
        return Err(Refused::Missing);
    }
    Ok(real)
}

/// Which of `paths` name files inside the tree.
pub fn existing(root: &Path, paths: &BTreeSet<String>) -> BTreeSet<String> {
    paths
        .iter()
        .filter(|p| resolve(root, p).is_ok())
        .cloned()
        .collect()
}

/// Whether bytes look binary: a NUL, or not UTF-8 (allowing a character cut at the end).
pub fn is_binary(bytes: &[u8]) -> bool {
    if bytes.contains(&0) {
        return true;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some(),
    }
}

/// Read a resolved file: text up to [`MAX_SHOWN_BYTES`], or that it is binary.
pub fn read(path: &Path) -> std::io::Result<FileContent> {
    let size = std::fs::metadata(path)?.len();
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_SHOWN_BYTES)
        .read_to_end(&mut bytes)?;
    if is_binary(&bytes) {
        return Ok(FileContent::Binary { size });
    }
    let truncated = size > bytes.len() as u64;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    Ok(FileContent::Text {
        text,
        truncated,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_keeps_to_the_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("tree");
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::write(root.join("src/a.rs"), "fn a() {}\n").expect("write");
        std::fs::write(dir.path().join("secret"), "s").expect("write");
        std::os::unix::fs::symlink("../../secret", root.join("src/out")).expect("link");
        std::os::unix::fs::symlink("a.rs", root.join("src/in")).expect("link");
        std::os::unix::fs::symlink("/etc", root.join("etc")).expect("link");
        let cases = [
            ("src/a.rs", Ok(())),
            ("./src/a.rs", Ok(())),
            ("src/in", Ok(())),
            ("src/out", Err(Refused::Outside)),
            ("etc/passwd", Err(Refused::Outside)),
            ("../secret", Err(Refused::Outside)),
            ("src/../../secret", Err(Refused::Outside)),
            ("/etc/passwd", Err(Refused::Outside)),
            ("src\\a.rs", Err(Refused::Outside)),
            ("src", Err(Refused::Missing)),
            ("src/none.rs", Err(Refused::Missing)),
        ];
        for (rel, want) in cases {
            assert_eq!(resolve(&root, rel).map(|_| ()), want, "{rel}");
        }
    }

    #[test]
    fn binary_detection() {
        let cases: [(&[u8], bool); 5] = [
            (b"plain text\n", false),
            ("ünïcode".as_bytes(), false),
            (b"a\0b", true),
            (&[0xff, 0xfe, 0x41], true),
            (&[b'a', 0xc3], false),
        ];
        for (bytes, want) in cases {
            assert_eq!(is_binary(bytes), want, "{bytes:?}");
        }
    }
}

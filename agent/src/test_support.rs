//! Builders for the temporary file trees the unit tests search.

use std::path::Path;

use tempfile::TempDir;

/// Creates a temporary tree holding `files` (path relative to the root, contents).
pub(crate) fn tree(files: &[(&str, &[u8])]) -> TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, contents) in files {
        write(dir.path(), path, contents);
    }
    dir
}

/// Writes one file under `root`, creating its parent directories.
pub(crate) fn write(root: &Path, path: &str, contents: &[u8]) {
    let full = root.join(path);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(full, contents).expect("write");
}

/// Creates a symlink at `root/link` pointing to `target` (taken as is).
pub(crate) fn symlink(root: &Path, link: &str, target: &Path) {
    let full = root.join(link);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::os::unix::fs::symlink(target, full).expect("symlink");
}

/// Sets the modification time of `root/path` to `secs` after the epoch.
pub(crate) fn set_mtime(root: &Path, path: &str, secs: u64) {
    let file = std::fs::File::options()
        .write(true)
        .open(root.join(path))
        .expect("open for mtime");
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    file.set_modified(time).expect("set mtime");
}

//! Copying a validated bundle tree: files with their modes, directories, and symlinks as
//! links (extraction already refused links that escape the bundle).

use std::path::Path;

use super::WorkspaceError;

fn io(path: &Path, e: std::io::Error) -> WorkspaceError {
    WorkspaceError::Io(format!("{}: {e}", path.display()))
}

/// Copy the contents of `from` into the existing directory `to`.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    for entry in std::fs::read_dir(from).map_err(|e| io(from, e))? {
        let entry = entry.map_err(|e| io(from, e))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| io(&source, e))?;
        if kind.is_symlink() {
            let link = std::fs::read_link(&source).map_err(|e| io(&source, e))?;
            std::os::unix::fs::symlink(&link, &target).map_err(|e| io(&target, e))?;
        } else if kind.is_dir() {
            std::fs::create_dir(&target).map_err(|e| io(&target, e))?;
            copy_tree(&source, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target).map_err(|e| io(&target, e))?;
        }
    }
    Ok(())
}

/// Give everything under `root` (itself included) to `uid:uid`, links not followed.
pub fn chown_tree(root: &Path, uid: u32) -> Result<(), WorkspaceError> {
    std::os::unix::fs::lchown(root, Some(uid), Some(uid)).map_err(|e| io(root, e))?;
    for entry in std::fs::read_dir(root).map_err(|e| io(root, e))? {
        let entry = entry.map_err(|e| io(root, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| io(&path, e))?;
        if kind.is_dir() {
            chown_tree(&path, uid)?;
        } else {
            std::os::unix::fs::lchown(&path, Some(uid), Some(uid)).map_err(|e| io(&path, e))?;
        }
    }
    Ok(())
}

/// Remove what must never reach the server's git from the tree the agent wrote: any entry
/// named `.git` (a nested repository's config could make `git add` run commands) and FIFOs,
/// sockets and devices (git cannot store them). Links are not followed. Returns the removed
/// paths, relative to `root`.
pub fn scrub(root: &Path) -> Result<Vec<String>, WorkspaceError> {
    let mut removed = Vec::new();
    scrub_dir(root, root, &mut removed)?;
    Ok(removed)
}

fn scrub_dir(root: &Path, dir: &Path, removed: &mut Vec<String>) -> Result<(), WorkspaceError> {
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| io(&path, e))?;
        let is_git = entry
            .file_name()
            .as_encoded_bytes()
            .eq_ignore_ascii_case(b".git");
        let special = !kind.is_dir() && !kind.is_file() && !kind.is_symlink();
        if is_git || special {
            let gone = if kind.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            gone.map_err(|e| io(&path, e))?;
            let relative = path.strip_prefix(root).unwrap_or(&path);
            removed.push(relative.display().to_string());
        } else if kind.is_dir() {
            scrub_dir(root, &path, removed)?;
        }
    }
    Ok(())
}

/// Regular files larger than `min_bytes` under `root` (links not followed), with their
/// `/`-separated paths relative to `root`. Paths that are not UTF-8 are skipped.
pub fn large_files(root: &Path, min_bytes: u64) -> Result<Vec<(String, u64)>, WorkspaceError> {
    let mut found = Vec::new();
    large_in(root, root, min_bytes, &mut found)?;
    found.sort();
    Ok(found)
}

fn large_in(
    root: &Path,
    dir: &Path,
    min_bytes: u64,
    found: &mut Vec<(String, u64)>,
) -> Result<(), WorkspaceError> {
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let meta = entry.metadata().map_err(|e| io(&path, e))?;
        if meta.is_dir() {
            large_in(root, &path, min_bytes, found)?;
        } else if meta.is_file() && meta.len() > min_bytes {
            let relative = path.strip_prefix(root).ok().and_then(Path::to_str);
            if let Some(relative) = relative {
                found.push((relative.to_owned(), meta.len()));
            }
        }
    }
    Ok(())
}

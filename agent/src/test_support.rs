//! Builders for the unit tests: the temporary file trees they search, and transcript events.

use std::path::Path;

use tempfile::TempDir;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::events::ResultEvent;

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

/// A logged `result` event of a session that ended well, carrying `result` as its text.
pub(crate) fn success(result: Option<&str>) -> EventBody {
    EventBody::Result(ResultEvent {
        subtype: "success".into(),
        is_error: false,
        result: result.map(str::to_owned),
        num_turns: None,
        duration_ms: None,
        usage: None,
        patch: None,
    })
}

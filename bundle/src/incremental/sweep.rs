//! Retention of the incremental store: manifests nobody named for a while, and contents no
//! bundle tree links any more.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How long an unused manifest or content is kept.
pub const TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Remove every owner's manifests untouched for `ttl`, and contents older than `ttl` that no
/// tree links (link count 1). Returns how many files went. A content removed here is only
/// uploaded again when a later tree needs it.
pub fn sweep(store_root: &Path, ttl: Duration) -> usize {
    let now = SystemTime::now();
    let old = |meta: &fs::Metadata| {
        meta.modified()
            .is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age > ttl))
    };
    let mut removed = 0;
    for owner in children(&store_root.join(".manifests")) {
        for file in children(&owner) {
            removed += remove_if(&file, |m| m.is_file() && old(m));
        }
    }
    for owner in children(&store_root.join(".content")) {
        for shard in children(&owner) {
            for file in children(&shard) {
                removed += remove_if(&file, |m| m.is_file() && m.nlink() == 1 && old(m));
            }
            let _ = fs::remove_dir(&shard);
        }
    }
    removed
}

fn children(dir: &Path) -> Vec<std::path::PathBuf> {
    fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

fn remove_if(path: &Path, wanted: impl Fn(&fs::Metadata) -> bool) -> usize {
    let gone =
        fs::symlink_metadata(path).is_ok_and(|m| wanted(&m)) && fs::remove_file(path).is_ok();
    usize::from(gone)
}

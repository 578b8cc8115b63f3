//! What the workspace held, entry by entry, so a change made while only reading it (the
//! verifier's Bash reaching `/workspace` by its absolute path) can be told afterwards. `.git`
//! is left out: reading git (`git status`) rewrites its index.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// One entry: its kind and what a change to it would move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    kind: char,
    len: u64,
    mode: u32,
    mtime_ns: i128,
    target: Option<String>,
}

/// Every entry below the root, by relative path.
pub type Stamps = BTreeMap<String, Stamp>;

/// The stamps of `root`'s tree; `None` past `max_entries` or when it cannot be read whole.
pub fn stamps(root: &Path, max_entries: usize) -> Option<Stamps> {
    let mut found = Stamps::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()? {
            let entry = entry.ok()?;
            if entry.file_name() == ".git" {
                continue;
            }
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let kind = if meta.is_dir() {
                stack.push(path.clone());
                'd'
            } else if meta.file_type().is_symlink() {
                'l'
            } else {
                'f'
            };
            let target = (kind == 'l')
                .then(|| std::fs::read_link(&path).ok())
                .flatten()
                .map(|t| t.display().to_string());
            let relative = path.strip_prefix(root).ok()?.display().to_string();
            let stamp = Stamp {
                kind,
                len: if kind == 'd' { 0 } else { meta.len() },
                mode: meta.mode(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                target,
            };
            found.insert(relative, stamp);
            if found.len() > max_entries {
                return None;
            }
        }
    }
    Some(found)
}

/// What changed from `before` to `after`, one line per path: `path (added|removed|changed)`.
/// A directory whose only change is its own time (an entry below it came or went) is not
/// listed: that entry is.
pub fn changed(before: &Stamps, after: &Stamps) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, old) in before {
        match after.get(path) {
            None => lines.push(format!("{path} (removed)")),
            Some(new) if differs(old, new) => lines.push(format!("{path} (changed)")),
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        lines.push(format!("{path} (added)"));
    }
    lines.sort();
    lines
}

fn differs(old: &Stamp, new: &Stamp) -> bool {
    if old.kind == 'd' && new.kind == 'd' {
        return old.mode != new.mode;
    }
    old != new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_told_by_path_and_git_is_left_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).expect("mkdir");
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        std::fs::write(root.join("src/a.rs"), "a").expect("write");
        std::fs::write(root.join("gone.txt"), "g").expect("write");
        std::fs::write(root.join("same.txt"), "s").expect("write");
        let before = stamps(root, 100).expect("stamps");
        assert!(stamps(root, 2).is_none(), "past the limit");

        std::fs::write(root.join("src/a.rs"), "changed").expect("write");
        std::fs::remove_file(root.join("gone.txt")).expect("rm");
        std::fs::write(root.join("src/new.rs"), "n").expect("write");
        std::fs::write(root.join(".git/index"), "rewritten").expect("write");
        let after = stamps(root, 100).expect("stamps");
        assert_eq!(
            changed(&before, &after),
            [
                "gone.txt (removed)",
                "src/a.rs (changed)",
                "src/new.rs (added)"
            ]
        );
        assert!(changed(&after, &after).is_empty());
    }
}

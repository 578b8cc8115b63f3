//! A tree sent as a change to one whose tree this server already built and checked on disk.
//!
//! When the change touches no symlink (none added, replaced or removed, and no symlink
//! replaced by a file), the new tree has exactly the base's symlinks, so every rule the base's
//! tree passed on disk (no path through a link, no link out of the tree) holds for the new
//! one as soon as its manifest passed [`TreeManifest::check`](super::TreeManifest::check).
//! Such an upload can be answered once the changed files' contents are here; the tree is laid
//! out, and checked on disk again by the same extractor, right after (docs/ARCHITECTURE.md
//! §5.1).

use std::fs;
use std::path::Path;

use ultraplan_protocol::api::ManifestEntry;

use super::manifest::{Node, TreeManifest, put_bytes, take_text};

const MAGIC: &[u8] = b"ultraplan-on-base-v1\n";

/// How a manifest was made from a base: the base's id and the paths it added or replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnBase {
    pub base: String,
    pub changed: Vec<String>,
}

impl OnBase {
    /// The change `removed` + `entries` to `base` (whose id is `base_id`), when it touches no
    /// symlink; `None` when it does.
    pub fn of_change(
        base_id: &str,
        base: &TreeManifest,
        removed: &[String],
        entries: &[ManifestEntry],
    ) -> Option<Self> {
        let was_link = |path: &str| matches!(base.entries.get(path), Some(Node::Symlink { .. }));
        let touches_links = entries
            .iter()
            .any(|e| e.target.is_some() || was_link(&e.path))
            || removed.iter().any(|path| was_link(path));
        (!touches_links).then(|| OnBase {
            base: base_id.to_owned(),
            changed: entries.iter().map(|e| e.path.clone()).collect(),
        })
    }

    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        put_bytes(&mut out, self.base.as_bytes());
        for path in &self.changed {
            put_bytes(&mut out, path.as_bytes());
        }
        out
    }

    pub(super) fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let (base, mut rest) = take_text(rest)?;
        let mut changed = Vec::new();
        while !rest.is_empty() {
            let (path, after) = take_text(rest)?;
            changed.push(path);
            rest = after;
        }
        crate::is_valid_sha256(&base).then_some(OnBase { base, changed })
    }
}

/// Where the record of manifest `id` is kept in an owner's manifests directory.
pub(super) fn record_path(dir: &Path, id: &str) -> std::path::PathBuf {
    dir.join(format!("{id}.base"))
}

/// The record of how manifest `id` was made, if one was kept and reads back.
pub(super) fn read(dir: &Path, id: &str) -> Option<OnBase> {
    OnBase::from_bytes(&fs::read(record_path(dir, id)).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, target: Option<&str>) -> ManifestEntry {
        ManifestEntry {
            path: path.to_owned(),
            mode: target.is_none().then_some(0o644),
            size: target.is_none().then_some(1),
            blake3: target.is_none().then(|| "00".repeat(32)),
            target: target.map(str::to_owned),
        }
    }

    fn base() -> TreeManifest {
        TreeManifest::from_wire(vec![entry("src/a.rs", None), entry("link", Some("src"))]).unwrap()
    }

    #[test]
    fn only_changes_that_leave_the_symlinks_alone_qualify() {
        let id = "ab".repeat(32);
        let cases: Vec<(&str, Vec<String>, Vec<ManifestEntry>, bool)> = vec![
            ("a file edited", vec![], vec![entry("src/a.rs", None)], true),
            ("a file added", vec![], vec![entry("src/b.rs", None)], true),
            ("a file removed", vec!["src/a.rs".into()], vec![], true),
            (
                "a link added",
                vec![],
                vec![entry("l2", Some("src"))],
                false,
            ),
            (
                "a link retargeted",
                vec![],
                vec![entry("link", Some("x"))],
                false,
            ),
            (
                "a link made a file",
                vec![],
                vec![entry("link", None)],
                false,
            ),
            ("a link removed", vec!["link".into()], vec![], false),
        ];
        for (name, removed, entries, qualifies) in cases {
            let got = OnBase::of_change(&id, &base(), &removed, &entries);
            assert_eq!(got.is_some(), qualifies, "{name}");
            if let Some(on) = got {
                assert_eq!(on.base, id, "{name}");
                let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
                assert_eq!(on.changed, paths, "{name}");
            }
        }
    }

    #[test]
    fn records_read_back_and_damaged_ones_do_not() {
        let on = OnBase {
            base: "cd".repeat(32),
            changed: vec!["a b".into(), "dir/é\n".into()],
        };
        let bytes = on.to_bytes();
        assert_eq!(OnBase::from_bytes(&bytes), Some(on));
        assert_eq!(OnBase::from_bytes(&bytes[..bytes.len() - 1]), None);
        assert_eq!(OnBase::from_bytes(b"something else"), None);
        let not_an_id = OnBase {
            base: "../x".into(),
            changed: vec![],
        };
        assert_eq!(OnBase::from_bytes(&not_an_id.to_bytes()), None);
    }
}

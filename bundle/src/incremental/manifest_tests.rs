use ultraplan_protocol::api::ManifestEntry;

use super::{Node, TreeManifest, parse_digest};
use crate::limits::BundleLimits;

fn file(path: &str, byte: u8, size: u64) -> ManifestEntry {
    ManifestEntry {
        path: path.to_owned(),
        mode: Some(0o644),
        size: Some(size),
        blake3: Some(hex::encode([byte; 32])),
        target: None,
    }
}

fn link(path: &str, target: &str) -> ManifestEntry {
    ManifestEntry {
        path: path.to_owned(),
        mode: None,
        size: None,
        blake3: None,
        target: Some(target.to_owned()),
    }
}

fn small_limits() -> BundleLimits {
    BundleLimits {
        max_files: 4,
        max_unpacked_bytes: 100,
        ..BundleLimits::default()
    }
}

/// The code each manifest is refused with, or `None` when it passes.
#[test]
fn manifests_are_checked_like_archives() {
    let cases: Vec<(&str, Vec<ManifestEntry>, Option<&str>)> = vec![
        (
            "a plain tree",
            vec![file("a", 1, 1), file("d/b", 2, 1), link("d/l", "b")],
            None,
        ),
        (
            "a link to a sibling directory",
            vec![file("d/b", 1, 1), link("e", "d/b")],
            None,
        ),
        ("dot-dot", vec![file("../x", 1, 1)], Some("path_traversal")),
        (
            "dot-dot inside",
            vec![file("a/../../x", 1, 1)],
            Some("path_traversal"),
        ),
        (
            "absolute",
            vec![file("/etc/passwd", 1, 1)],
            Some("absolute_path"),
        ),
        (
            "drive letter",
            vec![file("C:/x", 1, 1)],
            Some("absolute_path"),
        ),
        (
            ".git",
            vec![file(".git/config", 1, 1)],
            Some("invalid_path"),
        ),
        (
            "nested .GIT",
            vec![file("a/.GIT/hooks/x", 1, 1)],
            Some("invalid_path"),
        ),
        (
            "not canonical",
            vec![file("a//b", 1, 1)],
            Some("invalid_path"),
        ),
        (
            "dot component",
            vec![file("./a", 1, 1)],
            Some("invalid_path"),
        ),
        (
            "trailing slash",
            vec![file("a/", 1, 1)],
            Some("invalid_path"),
        ),
        ("empty", vec![file("", 1, 1)], Some("invalid_path")),
        ("NUL", vec![file("a\0b", 1, 1)], Some("invalid_path")),
        (
            "absolute link",
            vec![link("l", "/etc")],
            Some("link_escape"),
        ),
        (
            "link climbing out",
            vec![link("d/l", "../../x")],
            Some("link_escape"),
        ),
        ("empty link", vec![link("l", "")], Some("invalid_link")),
        (
            "a path under a file",
            vec![file("a", 1, 1), file("a/b", 2, 1)],
            Some("path_conflict"),
        ),
        (
            "a path under a file, a sibling between them",
            vec![file("a", 1, 1), file("a-x", 3, 1), file("a/b", 2, 1)],
            Some("path_conflict"),
        ),
        (
            "a directory counts once",
            vec![file("d/a", 1, 1), file("d-x", 2, 1), file("d/b", 3, 1)],
            None,
        ),
        (
            "a path under a link",
            vec![link("a", "b"), file("a/b", 2, 1)],
            Some("path_conflict"),
        ),
        (
            "too many files",
            (0..5).map(|i| file(&format!("f{i}"), i, 1)).collect(),
            Some("too_many_files"),
        ),
        (
            "directories count",
            vec![file("a/b/c/d/e", 1, 1)],
            Some("too_many_files"),
        ),
        (
            "too many bytes",
            vec![file("a", 1, 60), file("b", 2, 60)],
            Some("too_large"),
        ),
        (
            "one content, two sizes",
            vec![file("a", 1, 1), file("b", 1, 2)],
            Some("invalid_manifest"),
        ),
    ];
    for (name, entries, want) in cases {
        let got = TreeManifest::from_wire(entries).and_then(|m| m.check(&small_limits()));
        assert_eq!(
            got.as_ref().err().map(|e| e.code()),
            want,
            "{name}: {got:?}"
        );
    }
}

#[test]
fn malformed_entries_are_refused() {
    let cases: Vec<(&str, ManifestEntry)> = vec![
        (
            "no digest",
            ManifestEntry {
                blake3: None,
                ..file("a", 1, 1)
            },
        ),
        (
            "no size",
            ManifestEntry {
                size: None,
                ..file("a", 1, 1)
            },
        ),
        (
            "short digest",
            ManifestEntry {
                blake3: Some("ab".into()),
                ..file("a", 1, 1)
            },
        ),
        (
            "upper-case digest",
            ManifestEntry {
                blake3: Some("AB".repeat(32)),
                ..file("a", 1, 1)
            },
        ),
        (
            "odd mode",
            ManifestEntry {
                mode: Some(0o4755),
                ..file("a", 1, 1)
            },
        ),
        (
            "link with a size",
            ManifestEntry {
                size: Some(1),
                ..link("l", "a")
            },
        ),
    ];
    for (name, entry) in cases {
        let got = TreeManifest::from_wire(vec![entry]);
        assert_eq!(
            got.err().map(|e| e.code()),
            Some("invalid_manifest"),
            "{name}"
        );
    }
    let twice = TreeManifest::from_wire(vec![file("a", 1, 1), file("a", 1, 1)]);
    assert_eq!(twice.err().map(|e| e.code()), Some("path_conflict"));
}

#[test]
fn canonical_bytes_round_trip_and_name_the_tree() {
    let entries = vec![
        file("b", 2, 7),
        ManifestEntry {
            mode: Some(0o755),
            ..file("a/x", 1, 3)
        },
        link("a/l", "x"),
    ];
    let manifest = TreeManifest::from_wire(entries.clone()).unwrap();
    let bytes = manifest.to_bytes();
    assert_eq!(TreeManifest::from_bytes(&bytes), Some(manifest.clone()));
    assert!(TreeManifest::from_bytes(&bytes[..bytes.len() - 1]).is_none());
    assert!(TreeManifest::from_bytes(b"something else").is_none());
    // Order of the wire entries does not matter; any change of mode, size, digest or target does.
    let reversed = TreeManifest::from_wire(entries.iter().rev().cloned().collect()).unwrap();
    assert_eq!(reversed.bundle_id(), manifest.bundle_id());
    let changes = [
        ManifestEntry {
            mode: Some(0o644),
            ..file("a/x", 1, 3)
        },
        file("a/x", 9, 3),
        link("a/x", "b"),
    ];
    for change in changes {
        let mut other = entries.clone();
        other[1] = change;
        let other = TreeManifest::from_wire(other).unwrap();
        assert_ne!(other.bundle_id(), manifest.bundle_id());
    }
    let executable = manifest.entries().find(|(p, _)| *p == "a/x").unwrap().1;
    assert!(matches!(
        executable,
        Node::File {
            executable: true,
            size: 3,
            ..
        }
    ));
}

#[test]
fn digests_parse_only_in_canonical_hex() {
    assert_eq!(parse_digest(&"0f".repeat(32)), Some([0x0f; 32]));
    assert_eq!(parse_digest(&"0F".repeat(32)), None);
    assert_eq!(parse_digest("0f"), None);
}

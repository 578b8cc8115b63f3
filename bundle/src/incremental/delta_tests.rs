use ultraplan_protocol::api::ManifestEntry;

use super::apply;
use crate::incremental::manifest::{Node, TreeManifest};

fn file(path: &str, byte: u8) -> ManifestEntry {
    ManifestEntry {
        path: path.to_owned(),
        mode: None,
        size: Some(1),
        blake3: Some(hex::encode([byte; 32])),
        target: None,
    }
}

fn base() -> TreeManifest {
    TreeManifest::from_wire(vec![file("a", 1), file("d/b", 2), file("d/c", 3)]).unwrap()
}

fn paths(tree: &TreeManifest) -> Vec<&str> {
    tree.entries().map(|(p, _)| p.as_str()).collect()
}

#[test]
fn deltas_apply_or_are_refused() {
    type Case = (
        &'static str,
        Vec<&'static str>,
        Vec<ManifestEntry>,
        Result<Vec<&'static str>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "nothing changes",
            vec![],
            vec![],
            Ok(vec!["a", "d/b", "d/c"]),
        ),
        (
            "a file is added",
            vec![],
            vec![file("e", 4)],
            Ok(vec!["a", "d/b", "d/c", "e"]),
        ),
        (
            "a file is removed",
            vec!["d/b"],
            vec![],
            Ok(vec!["a", "d/c"]),
        ),
        (
            "a file is replaced",
            vec![],
            vec![file("a", 9)],
            Ok(vec!["a", "d/b", "d/c"]),
        ),
        (
            "a file becomes a directory",
            vec!["a"],
            vec![file("a/x", 5)],
            Ok(vec!["a/x", "d/b", "d/c"]),
        ),
        (
            "removing what the base lacks",
            vec!["zzz"],
            vec![],
            Err("invalid_manifest"),
        ),
        (
            "an entry twice",
            vec![],
            vec![file("e", 4), file("e", 5)],
            Err("path_conflict"),
        ),
        (
            "a malformed entry",
            vec![],
            vec![ManifestEntry {
                size: None,
                ..file("e", 1)
            }],
            Err("invalid_manifest"),
        ),
    ];
    for (name, removed, entries, want) in cases {
        let removed: Vec<String> = removed.into_iter().map(str::to_owned).collect();
        let got = apply(base(), &removed, entries);
        match (got, want) {
            (Ok(tree), Ok(want)) => assert_eq!(paths(&tree), want, "{name}"),
            (Err(e), Err(code)) => assert_eq!(e.code(), code, "{name}: {e}"),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn a_replaced_entry_takes_the_new_content() {
    let tree = apply(base(), &[], vec![file("a", 9)]).unwrap();
    let a = tree.entries().find(|(p, _)| *p == "a").unwrap().1;
    assert!(matches!(a, Node::File { blake3, .. } if *blake3 == [9; 32]));
}

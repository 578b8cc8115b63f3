use std::io::Read;
use std::path::PathBuf;

use super::{CHUNK_SIZE, Piece, Plan, plan};
use crate::bundle::walk::{Entry, EntryKind};

fn file(path: &str, size: u64) -> Entry {
    Entry {
        path: PathBuf::from(path),
        kind: EntryKind::File {
            size,
            executable: false,
        },
        stamp: Default::default(),
    }
}

/// File contents are a pattern derived from the entry index and offset.
fn content_byte(entry: usize, at: u64) -> u8 {
    (entry as u64 * 31 + at % 251) as u8
}

fn materialize(plan: &Plan) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in plan.chunks.iter().flatten() {
        match piece {
            Piece::Header(r) => out.extend_from_slice(&plan.headers[r.clone()]),
            Piece::Zeros(n) => out.resize(out.len() + *n as usize, 0),
            Piece::File { entry, offset, len } => {
                out.extend((*offset..offset + len).map(|at| content_byte(*entry, at)));
            }
        }
    }
    out
}

#[test]
fn chunks_have_the_fixed_size_except_the_last() {
    let entries = [file("a", 10), file("b", 3 * CHUNK_SIZE + 7), file("c", 0)];
    let plan = plan(&entries, CHUNK_SIZE).unwrap();
    let sizes: Vec<u64> = plan
        .chunks
        .iter()
        .map(|c| c.iter().map(Piece::len).sum())
        .collect();
    let (last, full) = sizes.split_last().unwrap();
    assert!(full.iter().all(|&s| s == CHUNK_SIZE), "{sizes:?}");
    assert!(*last > 0 && *last <= CHUNK_SIZE);
    assert_eq!(sizes.iter().sum::<u64>() % 512, 0);
}

#[test]
fn the_stream_is_a_valid_tar_even_with_tiny_chunks() {
    let long = format!("{}/file.txt", "deep/".repeat(40));
    let entries = [
        file("a.txt", 5),
        file(&long, 1000),
        Entry {
            path: "link".into(),
            kind: EntryKind::Symlink {
                target: "a.txt".into(),
            },
            stamp: Default::default(),
        },
        file("z", 0),
    ];
    let plan = plan(&entries, 100).unwrap();
    assert!(plan.chunks.len() > 10);
    let bytes = materialize(&plan);
    let mut archive = tar::Archive::new(bytes.as_slice());
    let mut seen = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().into_owned();
        let header = entry.header().clone();
        assert_eq!(header.mtime().unwrap(), tar::DETERMINISTIC_TIMESTAMP);
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        seen.push((path, header.entry_type(), data.len()));
    }
    let expected = [
        (PathBuf::from("a.txt"), tar::EntryType::Regular, 5),
        (PathBuf::from(&long), tar::EntryType::Regular, 1000),
        (PathBuf::from("link"), tar::EntryType::Symlink, 0),
        (PathBuf::from("z"), tar::EntryType::Regular, 0),
    ];
    assert_eq!(seen, expected);
}

#[test]
fn an_empty_tree_is_an_empty_archive() {
    let plan = plan(&[], CHUNK_SIZE).unwrap();
    assert_eq!(materialize(&plan), vec![0; 1024]);
}

#[test]
fn the_plan_is_deterministic() {
    let entries = [file("x", 700), file("y/z", 2)];
    let a = plan(&entries, 300).unwrap();
    let b = plan(&entries, 300).unwrap();
    assert_eq!((a.headers, a.chunks), (b.headers, b.chunks));
}

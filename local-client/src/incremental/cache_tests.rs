use super::{Cached, HashCache, RACY_NS};
use crate::bundle::Stamp;

const SECOND: i64 = 1_000_000_000;

fn stamp(ino: u64, mtime_ns: i64) -> Stamp {
    Stamp {
        ino,
        mtime_ns,
        ctime_ns: mtime_ns,
    }
}

fn cached(mtime_ns: i64, hashed_at_ns: i64) -> Cached {
    Cached {
        stamp: stamp(7, mtime_ns),
        size: 10,
        hashed_at_ns,
        blake3: [1; 32],
    }
}

#[test]
fn a_hash_is_trusted_only_for_an_unchanged_settled_file() {
    let t = 1_000 * SECOND;
    let cases: &[(&str, Cached, Stamp, u64, bool)] = &[
        (
            "unchanged, old",
            cached(t, t + 10 * SECOND),
            stamp(7, t),
            10,
            true,
        ),
        (
            "another size",
            cached(t, t + 10 * SECOND),
            stamp(7, t),
            11,
            false,
        ),
        (
            "another inode",
            cached(t, t + 10 * SECOND),
            stamp(8, t),
            10,
            false,
        ),
        (
            "modified since",
            cached(t, t + 10 * SECOND),
            stamp(7, t + 20 * SECOND),
            10,
            false,
        ),
        (
            "changed (ctime)",
            cached(t, t + 10 * SECOND),
            Stamp {
                ctime_ns: t + 1,
                ..stamp(7, t)
            },
            10,
            false,
        ),
        (
            "modified the moment it was hashed",
            cached(t, t),
            stamp(7, t),
            10,
            false,
        ),
        (
            "modified just before it was hashed",
            cached(t, t + RACY_NS - 1),
            stamp(7, t),
            10,
            false,
        ),
        (
            "modified just over the granularity before",
            cached(t, t + RACY_NS + 1),
            stamp(7, t),
            10,
            true,
        ),
    ];
    for (name, entry, now, size, trusted) in cases {
        assert_eq!(entry.hash_for(*now, *size).is_some(), *trusted, "{name}");
    }
}

#[test]
fn the_cache_round_trips_and_a_damaged_one_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/cache");
    let mut cache = HashCache::default();
    cache.entries.insert("a/b.rs".into(), cached(5, 6));
    cache.entries.insert("ünï".into(), cached(7, 8));
    cache.save(&path).unwrap();
    assert_eq!(HashCache::load(&path), cache);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    assert_eq!(HashCache::load(&path), HashCache::default());
    assert_eq!(
        HashCache::load(&dir.path().join("none")),
        HashCache::default()
    );
}

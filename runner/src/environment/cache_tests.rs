use super::*;

const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn built(cache: &EnvironmentCache, key: &str, age: Duration) -> Lease {
    let staging = cache.stage(None).expect("stage");
    std::fs::write(staging.tree.join("marker"), b"built").expect("write");
    let meta = SnapshotMeta {
        key: key.to_owned(),
        built_at_ms: now_ms() - i64::try_from(age.as_millis()).expect("ms"),
        setup_ms: 1500,
    };
    cache.commit(staging, meta).expect("commit")
}

#[test]
fn a_committed_build_is_found_until_it_expires() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = EnvironmentCache::new(dir.path().to_path_buf(), Duration::from_secs(3600));
    assert!(cache.lookup(KEY).is_none());
    drop(built(&cache, KEY, Duration::ZERO));
    let lease = cache.lookup(KEY).expect("found");
    assert_eq!(
        std::fs::read(lease.tree.join("marker")).expect("marker"),
        b"built"
    );
    assert_eq!(lease.meta.setup_ms, 1500);
    assert!(cache.lookup("../etc").is_none(), "only plain keys");
    assert!(cache.lookup(&KEY.to_uppercase()).is_none());
}

#[test]
fn expired_snapshots_are_swept_unless_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = EnvironmentCache::new(dir.path().to_path_buf(), Duration::from_secs(60));
    let old = "1".repeat(64);
    let used = "2".repeat(64);
    drop(built(&cache, &old, Duration::from_secs(120)));
    let lease = built(&cache, &used, Duration::from_secs(120));
    drop(built(&cache, KEY, Duration::ZERO));
    assert!(cache.lookup(&old).is_none(), "expired is not reused");
    assert_eq!(cache.sweep(), 1, "the expired, unused one");
    assert!(!dir.path().join(&old).exists());
    assert!(dir.path().join(&used).exists(), "leased: kept");
    drop(lease);
    assert_eq!(cache.sweep(), 1);
    assert!(!dir.path().join(&used).exists());
    assert!(cache.lookup(KEY).is_some(), "fresh: kept");
}

#[test]
fn a_second_build_of_the_same_key_keeps_the_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = EnvironmentCache::new(dir.path().to_path_buf(), Duration::from_secs(3600));
    drop(built(&cache, KEY, Duration::ZERO));
    let staging = cache.stage(None).expect("stage");
    std::fs::write(staging.tree.join("marker"), b"second").expect("write");
    let meta = SnapshotMeta {
        key: KEY.to_owned(),
        built_at_ms: now_ms(),
        setup_ms: 1,
    };
    let lease = cache.commit(staging, meta).expect("commit");
    assert_eq!(
        std::fs::read(lease.tree.join("marker")).expect("marker"),
        b"built"
    );
    let staging_left = std::fs::read_dir(dir.path().join(".staging"))
        .expect("dir")
        .count();
    assert_eq!(staging_left, 0, "the losing build is removed");
}

use super::*;

const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn built(cache: &EnvironmentCache, key: &str, age: Duration) -> Lease {
    let staging = cache.stage(None).expect("stage");
    std::fs::write(staging.tree.join("marker"), b"built").expect("write");
    let meta = SnapshotMeta {
        key: key.to_owned(),
        built_at_ms: now_ms() - i64::try_from(age.as_millis()).expect("ms"),
        setup_ms: 1500,
        generation: 0,
        maintained_at_ms: None,
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
        generation: 0,
        maintained_at_ms: None,
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

#[test]
fn maintenance_makes_a_new_generation_and_the_old_goes_once_unused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = EnvironmentCache::new(dir.path().to_path_buf(), Duration::from_secs(3600));
    drop(built(&cache, KEY, Duration::from_secs(60)));
    let base = cache.lookup(KEY).expect("found");
    let staging = cache.copy_for_maintenance(&base, None).expect("copy");
    assert_eq!(
        std::fs::read(staging.tree.join("marker")).expect("copied"),
        b"built"
    );
    std::fs::write(staging.tree.join("marker"), b"maintained").expect("write");
    let fresh = cache.commit_generation(staging, &base).expect("commit");
    assert_eq!(fresh.meta.generation, 1);
    assert!(fresh.meta.maintained_at_ms.is_some());
    assert_eq!(
        fresh.meta.built_at_ms, base.meta.built_at_ms,
        "expiry counts from setup"
    );
    assert!(fresh.tree.ends_with("gen-1"));
    // The base tree is still there for whoever holds it; a lookup now finds the new one.
    assert_eq!(
        std::fs::read(base.tree.join("marker")).expect("old"),
        b"built"
    );
    let found = cache.lookup(KEY).expect("found");
    assert_eq!(
        std::fs::read(found.tree.join("marker")).expect("new"),
        b"maintained"
    );
    drop((base, fresh, found));
    assert_eq!(cache.sweep(), 0, "nothing expired");
    assert!(
        !dir.path().join(KEY).join("tree").exists(),
        "the old generation is swept"
    );
    assert!(dir.path().join(KEY).join("gen-1").exists());
}

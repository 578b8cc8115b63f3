//! The blob store over a real local directory (the S3 backend is exercised against a real
//! S3-compatible server in the end-to-end suite).

use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::*;
use ultraplan_bundle::{BundleError, BundleLimits};

fn store(dir: &Path) -> BlobStore {
    BlobStore::open(&BlobLocation::File(dir.join("blobs"))).expect("open")
}

/// Bytes gzip cannot shrink: a sha256 chain.
fn noise(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut block = Sha256::digest(b"blob-test");
    while out.len() < len {
        out.extend_from_slice(&block);
        block = Sha256::digest(block);
    }
    out.truncate(len);
    out
}

/// A gzip'd tar of the files and its sha256.
fn tarball(files: &[(&str, &[u8])]) -> (Vec<u8>, String) {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path, *data)
            .expect("append");
    }
    let tar = builder.into_inner().expect("tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gzip");
    let bytes = gz.finish().expect("gzip");
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

/// The same tar, zstd'd, and its sha256.
fn zstd_tarball(files: &[(&str, &[u8])]) -> (Vec<u8>, String) {
    let (gz, _) = tarball(files);
    let mut tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut tar)
        .expect("gunzip");
    let bytes = zstd::encode_all(tar.as_slice(), 1).expect("zstd");
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

async fn put_bytes(blobs: &BlobStore, dir: &Path, key: &str, bytes: &[u8]) -> u64 {
    let file = dir.join("upload.bin");
    std::fs::write(&file, bytes).expect("write");
    blobs.put_file_streaming(key, &file).await.expect("put")
}

#[tokio::test]
async fn a_multipart_upload_reads_back_whole_and_goes_away_on_delete() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    // Three parts: two full ones and a short last one.
    let bytes = noise(2 * PART_BYTES + 12_345);
    let key = "bundles/big.tar.gz";
    assert!(!blobs.exists(key).await.expect("head"));
    assert_eq!(
        put_bytes(&blobs, tmp.path(), key, &bytes).await,
        bytes.len() as u64
    );
    assert!(blobs.exists(key).await.expect("head"));

    let back = tmp.path().join("back.bin");
    let got = blobs.get_to_file(key, &back).await.expect("get");
    assert_eq!(got, bytes.len() as u64);
    assert!(std::fs::read(&back).expect("read") == bytes, "same bytes");

    let listed = blobs.list("bundles").await.expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].key, key);
    assert!(listed[0].modified_ms > 0);

    blobs.delete(key).await.expect("delete");
    assert!(!blobs.exists(key).await.expect("head"));
    blobs
        .delete(key)
        .await
        .expect("deleting a missing blob is fine");
    let missing = blobs.get_to_file(key, &back).await;
    assert!(
        matches!(missing, Err(BlobError::NotFound { .. })),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_missing_tree_is_unpacked_from_its_blob_and_then_served_from_the_cache() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    let (bytes, sha) = tarball(&[
        ("README.md", b"# hello\n"),
        ("src/lib.rs", b"pub fn f() {}\n"),
    ]);
    put_bytes(&blobs, tmp.path(), &bundle_key(&sha), &bytes).await;
    let root = tmp.path().join("bundles");
    let limits = BundleLimits::default();

    let tree = ensure_bundle_tree(&blobs, &root, &sha, &limits)
        .await
        .expect("materialise");
    assert_eq!(tree, ultraplan_bundle::bundle_dir(&root, &sha));
    assert_eq!(
        std::fs::read_to_string(tree.join("src/lib.rs")).expect("file"),
        "pub fn f() {}\n"
    );
    assert!(
        ultraplan_bundle::bundle_exists(&root, &sha),
        "tree and archive"
    );

    // The cached tree is used as it is, even when the blob has gone.
    blobs.delete(&bundle_key(&sha)).await.expect("delete");
    let again = ensure_bundle_tree(&blobs, &root, &sha, &limits)
        .await
        .expect("cached");
    assert_eq!(again, tree);
}

#[tokio::test]
async fn a_zstd_bundle_is_found_unpacked_and_deleted_under_its_own_key() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    let (bytes, sha) = zstd_tarball(&[("src/lib.rs", b"pub fn z() {}\n")]);
    assert_eq!(blobs.find_bundle(&sha).await.expect("find"), None);
    let key = bundle_key_as(&sha, BundleEncoding::Zstd);
    assert_eq!(key, format!("bundles/{sha}.tar.zst"));
    put_bytes(&blobs, tmp.path(), &key, &bytes).await;
    assert_eq!(
        blobs.find_bundle(&sha).await.expect("find"),
        Some(BundleEncoding::Zstd)
    );
    let root = tmp.path().join("bundles");
    let tree = ensure_bundle_tree(&blobs, &root, &sha, &BundleLimits::default())
        .await
        .expect("materialise");
    assert_eq!(
        std::fs::read_to_string(tree.join("src/lib.rs")).expect("file"),
        "pub fn z() {}\n"
    );
    let archive = ultraplan_bundle::archive_path(&root, &sha);
    assert!(
        archive.to_string_lossy().ends_with(".tar.zst"),
        "{archive:?}"
    );
    assert_eq!(std::fs::read(&archive).expect("archive"), bytes);
    blobs.delete_bundle(&sha).await.expect("delete");
    assert_eq!(blobs.find_bundle(&sha).await.expect("find"), None);
}

/// zstd bytes kept under the gzip key are a damaged blob, refused by the magic-bytes check.
#[tokio::test]
async fn a_blob_whose_bytes_contradict_its_key_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    let (bytes, sha) = zstd_tarball(&[("a.txt", b"a\n")]);
    put_bytes(&blobs, tmp.path(), &bundle_key(&sha), &bytes).await;
    let root = tmp.path().join("bundles");
    let refused = ensure_bundle_tree(&blobs, &root, &sha, &BundleLimits::default()).await;
    assert!(
        matches!(
            &refused,
            Err(BlobError::Damaged {
                source: BundleError::EncodingMismatch { .. },
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(!ultraplan_bundle::tree_exists(&root, &sha));
}

#[tokio::test]
async fn changed_bytes_in_the_store_are_refused_and_leave_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    let (_, sha) = tarball(&[("a.txt", b"the real bundle\n")]);
    let (other, _) = tarball(&[("a.txt", b"something else\n")]);
    put_bytes(&blobs, tmp.path(), &bundle_key(&sha), &other).await;
    let root = tmp.path().join("bundles");

    let refused = ensure_bundle_tree(&blobs, &root, &sha, &BundleLimits::default()).await;
    match refused {
        Err(BlobError::Damaged {
            source: BundleError::HashMismatch { expected, .. },
            ..
        }) => assert_eq!(expected, sha),
        other => panic!("expected a damaged-bundle refusal, got {other:?}"),
    }
    assert!(!ultraplan_bundle::tree_exists(&root, &sha));
    let left: Vec<_> = std::fs::read_dir(&root)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
}

#[tokio::test]
async fn missing_blobs_and_bad_ids_are_told_apart() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    let root = tmp.path().join("bundles");
    let limits = BundleLimits::default();
    let missing = ensure_bundle_tree(&blobs, &root, &"a".repeat(64), &limits).await;
    assert!(
        matches!(&missing, Err(BlobError::NotFound { key, .. }) if key.starts_with("bundles/")),
        "{missing:?}"
    );
    let bad = ensure_bundle_tree(&blobs, &root, "../../etc", &limits).await;
    assert!(matches!(bad, Err(BlobError::InvalidId(_))), "{bad:?}");
}

#[test]
fn bundle_keys_round_trip() {
    let sha = "0123456789abcdef".repeat(4);
    assert_eq!(bundle_key(&sha), format!("bundles/{sha}.tar.gz"));
    assert_eq!(bundle_of_key(&bundle_key(&sha)), Some(sha.as_str()));
    let zst = bundle_key_as(&sha, BundleEncoding::Zstd);
    assert_eq!(bundle_of_key(&zst), Some(sha.as_str()));
    let cases = [
        "bundles/abc.tar.gz",
        "patches/x.tar.gz",
        &format!("bundles/{sha}.tar"),
        &format!("bundles/{sha}.tar.zst.tar.gz"),
        &format!("bundles/{sha}.zst"),
        &format!("other/{sha}.tar.gz"),
        &format!("bundles/{}.tar.gz", sha.to_uppercase()),
    ];
    for key in cases {
        assert_eq!(bundle_of_key(key), None, "{key}");
    }
}

#[test]
fn debug_output_names_only_the_location() {
    let tmp = tempfile::tempdir().expect("tmp");
    let blobs = store(tmp.path());
    let printed = format!("{blobs:?}");
    assert!(printed.contains("file://"), "{printed}");
    assert_eq!(blobs.location().kind(), "file");
}

#[test]
fn a_full_disk_is_found_anywhere_in_the_chain() {
    let full = || std::io::Error::from(std::io::ErrorKind::StorageFull);
    let local = BlobError::Local {
        action: "reading",
        path: "/x".to_owned(),
        source: full(),
    };
    let wrapped = BlobError::Store {
        location: "file:///b".to_owned(),
        action: "uploading",
        key: "k".to_owned(),
        source: Box::new(object_store::Error::Generic {
            store: "LocalFileSystem",
            source: Box::new(full()),
        }),
    };
    let other = BlobError::Store {
        location: "s3://b".to_owned(),
        action: "uploading",
        key: "k".to_owned(),
        source: Box::new(object_store::Error::Generic {
            store: "S3",
            source: Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        }),
    };
    let missing = BlobError::NotFound {
        location: "s3://b".to_owned(),
        key: "k".to_owned(),
    };
    let cases = [
        (&local, true, false),
        (&wrapped, true, true),
        (&other, false, true),
        (&missing, false, false),
    ];
    for (error, full, unavailable) in cases {
        assert_eq!(error.is_storage_full(), full, "{error}");
        assert_eq!(error.is_unavailable(), unavailable, "{error}");
    }
}

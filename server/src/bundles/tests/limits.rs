//! Size, count and ratio limits, corrupt or truncated gzip, hash and upload failures.

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

use flate2::Compression;
use flate2::read::GzEncoder;
use tar::EntryType;

use super::super::{BundleLimits, ingest_bundle};
use super::support::{Env, FailingReader, Tar, Zeros, gz, sha};

#[test]
fn limits_are_enforced() {
    let small = |f: fn(&mut BundleLimits)| {
        let mut limits = BundleLimits::default();
        f(&mut limits);
        limits
    };
    let five_files = (1..=5).fold(Tar::new(), |t, i| t.file(&format!("f{i}"), b"data"));
    let cases = [
        (
            "too many entries",
            five_files.finish(),
            small(|l| l.max_files = 3),
            "too_many_files",
            "f4",
        ),
        (
            "too many implicit directories",
            Tar::new().file("a/b/c/d/f", b"x").finish(),
            small(|l| l.max_files = 3),
            "too_many_files",
            "a/b/c/d/f",
        ),
        (
            "declared size over the limit (refused before reading)",
            Tar::new()
                .header_only(EntryType::Regular, "huge", 10 << 30)
                .unterminated(),
            BundleLimits::default(),
            "too_large",
            "huge",
        ),
        (
            "unpacked total over the limit",
            Tar::new()
                .file("a", &[1; 600])
                .file("b", &[2; 600])
                .finish(),
            small(|l| l.max_unpacked_bytes = 1000),
            "too_large",
            "\"b\"",
        ),
        (
            "compressed archive over the limit",
            Tar::new().file("a", b"x").finish(),
            small(|l| l.max_archive_bytes = 40),
            "archive_too_large",
            "40 bytes",
        ),
        (
            "path over the limit",
            Tar::new().file("abcdefghijk", b"x").finish(),
            small(|l| l.max_path_len = 10),
            "path_too_long",
            "abcdefghijk",
        ),
        (
            "symlink target over the limit",
            Tar::new().symlink("l", "abcdefghijk").finish(),
            small(|l| l.max_path_len = 10),
            "path_too_long",
            "\"l\"",
        ),
        (
            "ratio over the limit (tiny grace)",
            Tar::new().file("zeros", &[0; 64 * 1024]).finish(),
            small(|l| l.ratio_grace_bytes = 4096),
            "ratio_exceeded",
            "100:1",
        ),
    ];
    for (name, tar, limits, code, mentions) in cases {
        let env = Env::new();
        let upload = gz(&tar);
        let err = env
            .ingest_with(&upload, &sha(&upload), &limits)
            .unwrap_err();
        assert_eq!(err.code(), code, "{name}: {err}");
        assert!(err.is_client_error(), "{name}");
        assert!(
            err.to_string().contains(mentions),
            "{name}: {err} lacks {mentions:?}"
        );
        env.assert_untouched(name);
    }
}

/// 1 GiB of zeros in one entry, compressed on the fly: refused after inflating about the
/// grace bytes, without pulling the rest of the bomb through the encoder.
#[test]
fn gzip_bomb_is_stopped_early() {
    let env = Env::new();
    const GIB: u64 = 1 << 30;
    let header = Tar::new()
        .header_only(EntryType::Regular, "bomb.bin", GIB)
        .unterminated();
    let pulled = Rc::new(Cell::new(0));
    let zeros = Zeros {
        left: GIB,
        pulled: Rc::clone(&pulled),
    };
    let bomb = GzEncoder::new(header.as_slice().chain(zeros), Compression::fast());
    let err =
        ingest_bundle(bomb, &"0".repeat(64), &env.store, &BundleLimits::default()).unwrap_err();
    assert_eq!(err.code(), "ratio_exceeded", "{err}");
    assert!(err.to_string().contains("bomb.bin"), "{err}");
    assert!(
        pulled.get() < 64 << 20,
        "inflated {} bytes of the bomb",
        pulled.get()
    );
    env.assert_untouched("gzip bomb");
}

/// Zeros after the end-of-archive marker are padding; a mountain of them is refused.
#[test]
fn padding_bomb_is_stopped_early() {
    let env = Env::new();
    let pulled = Rc::new(Cell::new(0));
    let zeros = Zeros {
        left: 1 << 30,
        pulled: Rc::clone(&pulled),
    };
    let tar = Tar::new().file("a", b"x").unterminated();
    let bomb = GzEncoder::new(tar.as_slice().chain(zeros), Compression::fast());
    let err =
        ingest_bundle(bomb, &"0".repeat(64), &env.store, &BundleLimits::default()).unwrap_err();
    assert_eq!(err.code(), "malformed_archive", "{err}");
    assert!(pulled.get() < 64 << 20, "inflated {} bytes", pulled.get());
    env.assert_untouched("padding bomb");
}

#[test]
fn corrupt_and_truncated_gzip_is_malformed() {
    let tar = Tar::new()
        .file("a.txt", &b"some text that compresses ".repeat(2000))
        .file("b.txt", b"b")
        .finish();
    let good = gz(&tar);
    let len = good.len();
    let mut bad_crc = good.clone();
    bad_crc[len - 8] ^= 0xff;
    let mut garbage_after = good.clone();
    garbage_after.extend_from_slice(b"garbage");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty upload", Vec::new()),
        ("not gzip", b"this is not a gzip stream at all".to_vec()),
        ("cut in the gzip header", good[..5].to_vec()),
        ("cut in the deflate stream", good[..len / 2].to_vec()),
        ("cut in the gzip trailer", good[..len - 3].to_vec()),
        ("crc mismatch", bad_crc),
        ("garbage after the last member", garbage_after),
    ];
    for (name, upload) in cases {
        let env = Env::new();
        // The announced sha is the upload's own: the archive itself must be refused.
        let err = env.ingest(&upload).unwrap_err();
        assert_eq!(err.code(), "malformed_archive", "{name}: {err}");
        env.assert_untouched(name);
    }
}

#[test]
fn hash_mismatch_is_refused() {
    let env = Env::new();
    let upload = gz(&Tar::new().file("a", b"x").finish());
    let wrong = sha(b"something else");
    let err = env
        .ingest_with(&upload, &wrong, &BundleLimits::default())
        .unwrap_err();
    assert_eq!(err.code(), "hash_mismatch");
    assert!(err.is_client_error());
    let msg = err.to_string();
    assert!(msg.contains(&wrong) && msg.contains(&sha(&upload)), "{msg}");
    env.assert_untouched("hash mismatch");
}

#[test]
fn invalid_sha_is_refused_before_anything_is_created() {
    let env = Env::new();
    let upload = gz(&Tar::new().file("a", b"x").finish());
    for bad in [
        "",
        "abc",
        &sha(&upload).to_uppercase(),
        &format!("../{}", &sha(&upload)[3..]),
    ] {
        let err = env
            .ingest_with(&upload, bad, &BundleLimits::default())
            .unwrap_err();
        assert_eq!(err.code(), "invalid_sha256", "{bad:?}");
        env.assert_untouched(bad);
    }
}

#[test]
fn failing_upload_is_a_client_error() {
    let env = Env::new();
    let upload = gz(&Tar::new().file("a", &[3; 100_000]).finish());
    let reader = FailingReader {
        ok: upload.len() / 2,
        data: upload.clone(),
    };
    let err =
        ingest_bundle(reader, &sha(&upload), &env.store, &BundleLimits::default()).unwrap_err();
    assert_eq!(err.code(), "upload_failed", "{err}");
    assert!(err.is_client_error());
    env.assert_untouched("failing upload");
}

#[test]
fn store_failure_is_a_server_error() {
    let env = Env::new();
    let upload = gz(&Tar::new().file("a", b"x").finish());
    let not_a_dir = env.tmp.path().join("outside/canary.txt");
    let err = ingest_bundle(
        upload.as_slice(),
        &sha(&upload),
        &not_a_dir,
        &BundleLimits::default(),
    )
    .unwrap_err();
    assert_eq!(err.code(), "io_error", "{err}");
    assert!(!err.is_client_error());
    env.assert_untouched("store failure");
}

/// Many long symlink targets walking a deep tree: verification work is capped for the
/// whole upload instead of growing with depth × links.
#[test]
fn symlink_verification_work_is_bounded() {
    let env = Env::new();
    let depth = 1000;
    let mut tar = Tar::new().file(&format!("{}f", "d/".repeat(depth)), b"x");
    let target = format!("{}{}", "d/".repeat(depth), "../".repeat(600));
    for i in 0..2000 {
        tar = tar.symlink(&format!("l{i}"), &target);
    }
    let upload = gz(&tar.finish());
    // Identical links compress far beyond the default ratio; lift it to reach the check.
    let limits = BundleLimits {
        max_ratio: u64::MAX,
        ..BundleLimits::default()
    };
    let err = env
        .ingest_with(&upload, &sha(&upload), &limits)
        .unwrap_err();
    assert_eq!(err.code(), "invalid_link", "{err}");
    assert!(err.to_string().contains("too deeply chained"), "{err}");
    env.assert_untouched("symlink work bound");
}

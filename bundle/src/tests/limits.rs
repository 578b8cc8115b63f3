//! Size, count and ratio limits, corrupt or truncated gzip or zstd, hash and upload failures;
//! each through both codecs.

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

use tar::EntryType;

use super::super::{BundleEncoding, BundleLimits, ingest_bundle, ingest_bundle_as};
use super::support::{CODECS, Codec, Env, FailingReader, Tar, Zeros, sha};

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
    for ((name, tar, limits, code, mentions), codec) in cases
        .iter()
        .flat_map(|case| CODECS.map(|codec| (case, codec)))
    {
        let env = Env::new();
        let name = &codec.case(name);
        let upload = codec.compress(tar);
        let err = env.ingest_with(&upload, &sha(&upload), limits).unwrap_err();
        assert_eq!(err.code(), *code, "{name}: {err}");
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
fn bombs_are_stopped_early() {
    for codec in CODECS {
        compression_bomb_is_stopped_early(codec);
        padding_bomb_is_stopped_early(codec);
    }
}

fn compression_bomb_is_stopped_early(codec: Codec) {
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
    let bomb = codec.encoder(header.as_slice().chain(zeros));
    let err =
        ingest_bundle(bomb, &"0".repeat(64), &env.store, &BundleLimits::default()).unwrap_err();
    assert_eq!(err.code(), "ratio_exceeded", "{codec:?}: {err}");
    assert!(err.to_string().contains("bomb.bin"), "{err}");
    assert!(
        pulled.get() < 64 << 20,
        "{codec:?}: inflated {} bytes of the bomb",
        pulled.get()
    );
    env.assert_untouched(&codec.case("compression bomb"));
}

/// Zeros after the end-of-archive marker are padding; a mountain of them is refused.
fn padding_bomb_is_stopped_early(codec: Codec) {
    let env = Env::new();
    let pulled = Rc::new(Cell::new(0));
    let zeros = Zeros {
        left: 1 << 30,
        pulled: Rc::clone(&pulled),
    };
    let tar = Tar::new().file("a", b"x").unterminated();
    let bomb = codec.encoder(tar.as_slice().chain(zeros));
    let err =
        ingest_bundle(bomb, &"0".repeat(64), &env.store, &BundleLimits::default()).unwrap_err();
    assert_eq!(err.code(), "malformed_archive", "{codec:?}: {err}");
    assert!(
        pulled.get() < 64 << 20,
        "{codec:?}: inflated {} bytes",
        pulled.get()
    );
    env.assert_untouched(&codec.case("padding bomb"));
}

/// A zstd frame asking for a window larger than the decoder allows is refused before the
/// window is allocated.
#[test]
fn zstd_window_over_the_limit_is_refused() {
    let env = Env::new();
    let tar = Tar::new().file("a", &vec![5; 1 << 20]).finish();
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 19).unwrap();
    enc.window_log(27).unwrap();
    enc.long_distance_matching(true).unwrap();
    std::io::Write::write_all(&mut enc, &tar).unwrap();
    let upload = enc.finish().unwrap();
    let err = env.ingest(&upload).unwrap_err();
    assert_eq!(err.code(), "malformed_archive", "{err}");
    assert!(
        err.to_string().contains("memory"),
        "refused for its window: {err}"
    );
    env.assert_untouched("zstd window");
}

/// Bytes of one codec declared as the other are refused, whatever they hold.
#[test]
fn encoding_mismatch_is_refused() {
    let tar = Tar::new().file("a", b"x").finish();
    let cases = [
        (Codec::Gzip, BundleEncoding::Zstd),
        (Codec::Zstd, BundleEncoding::Gzip),
    ];
    for (codec, declared) in cases {
        let env = Env::new();
        let upload = codec.compress(&tar);
        let err = ingest_bundle_as(
            upload.as_slice(),
            Some(declared),
            &sha(&upload),
            &env.store,
            &BundleLimits::default(),
        )
        .unwrap_err();
        assert_eq!(err.code(), "encoding_mismatch", "{codec:?}: {err}");
        assert!(err.is_client_error());
        env.assert_untouched(&codec.case("mismatch"));
    }
}

#[test]
fn corrupt_and_truncated_archives_are_malformed() {
    for codec in CODECS {
        corrupt_and_truncated_is_malformed(codec);
    }
}

fn corrupt_and_truncated_is_malformed(codec: Codec) {
    let tar = Tar::new()
        .file("a.txt", &b"some text that compresses ".repeat(2000))
        .file("b.txt", b"b")
        .finish();
    let good = codec.compress(&tar);
    let len = good.len();
    let mut bad_crc = good.clone();
    bad_crc[codec.checksum_byte(len)] ^= 0xff;
    let mut garbage_after = good.clone();
    garbage_after.extend_from_slice(b"garbage");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty upload", Vec::new()),
        (
            "not compressed",
            b"this is not a gzip stream at all".to_vec(),
        ),
        ("cut in the header", good[..5].to_vec()),
        ("cut in the compressed stream", good[..len / 2].to_vec()),
        ("cut in the trailer", good[..len - 3].to_vec()),
        ("checksum mismatch", bad_crc),
        ("garbage after the last member", garbage_after),
    ];
    for (name, upload) in cases {
        let env = Env::new();
        // The announced sha is the upload's own: the archive itself must be refused.
        let name = &codec.case(name);
        let declared = match codec {
            Codec::Gzip => BundleEncoding::Gzip,
            Codec::Zstd => BundleEncoding::Zstd,
        };
        let err = ingest_bundle_as(
            upload.as_slice(),
            Some(declared),
            &sha(&upload),
            &env.store,
            &BundleLimits::default(),
        )
        .unwrap_err();
        assert_eq!(err.code(), "malformed_archive", "{name}: {err}");
        env.assert_untouched(name);
    }
}

#[test]
fn hash_mismatch_is_refused() {
    for codec in CODECS {
        hash_mismatch(codec);
    }
}

fn hash_mismatch(codec: Codec) {
    let env = Env::new();
    let upload = codec.compress(&Tar::new().file("a", b"x").finish());
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
    let upload = Codec::Gzip.compress(&Tar::new().file("a", b"x").finish());
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
    for codec in CODECS {
        failing_upload(codec);
    }
}

fn failing_upload(codec: Codec) {
    let env = Env::new();
    let upload = codec.compress(&Tar::new().file("a", &[3; 100_000]).finish());
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
    let upload = Codec::Zstd.compress(&Tar::new().file("a", b"x").finish());
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
    for codec in CODECS {
        symlink_verification_bounded(codec);
    }
}

fn symlink_verification_bounded(codec: Codec) {
    let env = Env::new();
    let depth = 1000;
    let mut tar = Tar::new().file(&format!("{}f", "d/".repeat(depth)), b"x");
    let target = format!("{}{}", "d/".repeat(depth), "../".repeat(600));
    for i in 0..2000 {
        tar = tar.symlink(&format!("l{i}"), &target);
    }
    let upload = codec.compress(&tar.finish());
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

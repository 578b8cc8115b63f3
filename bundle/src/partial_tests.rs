use std::io::{self, Read};
use std::time::{Duration, SystemTime};

use super::*;

const SHA: &str = "ab";

/// Yields `data`, then fails the way a cut connection does.
struct CutAfter<'a>(&'a [u8]);

impl Read for CutAfter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::Error::new(io::ErrorKind::ConnectionReset, "cut"));
        }
        let n = buf.len().min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn at(offset: u64, length: u64) -> PartialState {
    PartialState {
        offset,
        length,
        encoding: Some(BundleEncoding::Zstd),
    }
}

#[test]
fn bytes_before_a_cut_are_kept_and_the_upload_continues_from_them() {
    let root = tempfile::tempdir().unwrap();
    let partial = Partial::new(root.path(), "u1", SHA).expect("plain ids");
    assert_eq!(partial.state().unwrap(), None);
    let cut = partial.append(at(0, 10), CutAfter(b"abcd"));
    assert!(matches!(cut, Err(PartialError::Io { .. })), "{cut:?}");
    assert_eq!(partial.state().unwrap(), Some(at(4, 10)));
    assert_eq!(partial.append(at(4, 10), &b"efgh"[..]).unwrap(), 8);
    assert_eq!(partial.append(at(8, 10), &b"ij"[..]).unwrap(), 10);
    assert_eq!(fs::read(partial.path()).unwrap(), b"abcdefghij");
    partial.remove();
    assert_eq!(partial.state().unwrap(), None);
}

#[test]
fn requests_that_do_not_fit_the_upload_are_refused_and_change_nothing() {
    let root = tempfile::tempdir().unwrap();
    let partial = Partial::new(root.path(), "u1", SHA).expect("plain ids");
    partial.append(at(0, 10), &b"abcd"[..]).unwrap();
    let gzip = PartialState {
        encoding: Some(BundleEncoding::Gzip),
        ..at(4, 10)
    };
    let cases: [(&str, PartialState, &[u8]); 4] = [
        ("behind", at(2, 10), b"cd"),
        ("ahead", at(6, 10), b"gh"),
        ("another length, continuing", at(4, 12), b"ef"),
        ("another encoding, continuing", gzip, b"ef"),
    ];
    for (name, state, body) in cases {
        let refused = partial.append(state, body);
        assert!(
            matches!(
                refused,
                Err(PartialError::OffsetMismatch { current: 4, .. } | PartialError::Conflict(_))
            ),
            "{name}: {refused:?}"
        );
        assert_eq!(partial.state().unwrap(), Some(at(4, 10)), "{name}");
    }
}

#[test]
fn a_body_past_the_declared_length_is_refused_and_the_upload_dropped() {
    let root = tempfile::tempdir().unwrap();
    let partial = Partial::new(root.path(), "u1", SHA).expect("plain ids");
    let long = partial.append(at(0, 4), &b"abcdef"[..]);
    assert!(matches!(long, Err(PartialError::TooLong(4))), "{long:?}");
    assert_eq!(partial.state().unwrap(), None);
}

#[test]
fn starting_over_replaces_an_upload_declared_otherwise() {
    let root = tempfile::tempdir().unwrap();
    let partial = Partial::new(root.path(), "u1", SHA).expect("plain ids");
    partial.append(at(0, 10), &b"abcd"[..]).unwrap();
    assert_eq!(partial.append(at(0, 6), &b"xyz"[..]).unwrap(), 3);
    assert_eq!(partial.state().unwrap(), Some(at(3, 6)));
    assert_eq!(fs::read(partial.path()).unwrap(), b"xyz");
}

#[test]
fn owners_never_see_each_others_uploads() {
    let root = tempfile::tempdir().unwrap();
    Partial::new(root.path(), "u1", SHA)
        .expect("plain ids")
        .append(at(0, 10), &b"abcd"[..])
        .unwrap();
    assert_eq!(
        Partial::new(root.path(), "u2", SHA)
            .expect("plain ids")
            .state()
            .unwrap(),
        None
    );
}

#[test]
fn a_torn_record_starts_the_upload_again() {
    let root = tempfile::tempdir().unwrap();
    let partial = Partial::new(root.path(), "u1", SHA).expect("plain ids");
    partial.append(at(0, 10), &b"abcd"[..]).unwrap();
    for torn in ["", "10", "ten zstd", "10 brotli", "10 zstd extra"] {
        fs::write(&partial.meta, torn).unwrap();
        assert_eq!(partial.state().unwrap(), None, "{torn:?}");
        partial.append(at(0, 10), &b"abcd"[..]).unwrap();
    }
}

#[test]
fn sweeping_removes_only_uploads_untouched_past_their_time() {
    let root = tempfile::tempdir().unwrap();
    let old = Partial::new(root.path(), "u1", "old").expect("plain ids");
    let fresh = Partial::new(root.path(), "u1", "fresh").expect("plain ids");
    old.append(at(0, 10), &b"abcd"[..]).unwrap();
    fresh.append(at(0, 10), &b"abcd"[..]).unwrap();
    let long_ago = SystemTime::now() - Duration::from_secs(2 * 24 * 60 * 60);
    for path in [&old.part, &old.meta] {
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    assert_eq!(sweep(root.path(), PARTIAL_TTL), 2);
    assert_eq!(old.state().unwrap(), None);
    assert_eq!(fresh.state().unwrap(), Some(at(4, 10)));
}

#[test]
fn one_request_at_a_time_writes_an_upload() {
    let root = tempfile::tempdir().unwrap();
    let partial = Partial::new(root.path(), "u1", SHA).expect("plain ids");
    let other = Partial::new(root.path(), "u2", SHA).expect("plain ids");
    let held = partial.try_hold().expect("free");
    assert!(partial.try_hold().is_none(), "held");
    assert!(
        other.try_hold().is_some(),
        "another owner's upload is another lock"
    );
    drop(held);
    assert!(partial.try_hold().is_some(), "released on drop");
}

#[test]
fn ids_that_are_not_plain_name_no_upload() {
    let root = tempfile::tempdir().unwrap();
    for (owner, sha) in [
        ("", "ab"),
        ("u1", ""),
        ("../u2", "ab"),
        ("u1", "a/b"),
        ("u1", ".."),
    ] {
        assert!(
            Partial::new(root.path(), owner, sha).is_none(),
            "{owner:?} {sha:?}"
        );
    }
}

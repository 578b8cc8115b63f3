use super::*;

const FILE: &str =
    "[setup]\ncommands = [\"true\"]\nlock_files = [\"requirements.txt\", \"absent.lock\"]\n";

fn tree_with_lock() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("requirements.txt"), b"tinypkg==1\n").expect("write");
    dir
}

#[test]
fn a_wanted_sent_over_the_link_keys_as_it_would_here() {
    let tree = tree_with_lock();
    let here = super::super::named_wanted(tree.path(), FILE, "alice").expect("wanted");
    let locks = here.lock_digests();
    let absent = locks
        .iter()
        .find(|l| l.path == "absent.lock")
        .expect("named");
    assert_eq!(absent.sha256, None, "an absent lock file stays absent");
    let there = Wanted::from_wire(here.definition(), &locks, here.scope()).expect("rebuilt");
    assert_eq!(there.key, here.key);
    assert_eq!(there.file, here.file);
    let mut imaged = there.clone();
    imaged.on_image("sha256:abc");
    assert_ne!(imaged.key, here.key, "a base image keys apart");
}

#[test]
fn what_a_runner_is_sent_is_checked() {
    let tree = tree_with_lock();
    let here = super::super::named_wanted(tree.path(), FILE, "alice").expect("wanted");
    let locks = here.lock_digests();
    let present = locks
        .iter()
        .position(|l| l.sha256.is_some())
        .expect("a digest");
    let mut upper = locks.clone();
    upper[present].sha256 = upper[present].sha256.as_ref().map(|d| d.to_uppercase());
    let mut short = locks.clone();
    short[present].sha256 = Some("abc".to_owned());
    let mut renamed = locks.clone();
    renamed[present].path = "../../etc/passwd".to_owned();
    let cases: Vec<(String, Vec<LockDigest>, String, &str)> = vec![
        (FILE.to_owned(), upper, "alice".to_owned(), "64 hex"),
        (FILE.to_owned(), short, "alice".to_owned(), "64 hex"),
        (FILE.to_owned(), renamed, "alice".to_owned(), "not those"),
        (
            FILE.to_owned(),
            locks[..1].to_vec(),
            "alice".to_owned(),
            "not those",
        ),
        (FILE.to_owned(), locks.clone(), String::new(), "scope"),
        (FILE.to_owned(), locks.clone(), "a\nb".to_owned(), "scope"),
        (FILE.to_owned(), locks.clone(), "x".repeat(300), "scope"),
        (
            "[nonsense]".to_owned(),
            vec![],
            "alice".to_owned(),
            "nonsense",
        ),
        ("#".repeat(70_000), vec![], "alice".to_owned(), "too large"),
    ];
    for (definition, locks, scope, says) in cases {
        let error = Wanted::from_wire(&definition, &locks, &scope)
            .expect_err("refused")
            .to_string();
        assert!(error.contains(says), "{says}: {error}");
    }
}

#[test]
fn reports_cross_the_link_and_are_checked_on_arrival() {
    let report = SetupReport {
        end: SetupEnd::Failed {
            exit_code: Some(3),
            description: "exit status: 3".to_owned(),
        },
        duration: Duration::from_millis(1234),
        blocked: vec![BlockedAttempt {
            host: "127.0.0.1".to_owned(),
            port: 9,
            attempts: 2,
        }],
        blocked_beyond: 4,
        tail: vec!["one".to_owned(), "two".to_owned()],
    };
    let back = SetupReport::from_wire(report.to_wire(), &Redactor::default());
    assert_eq!(back.end, report.end);
    assert_eq!(back.duration, report.duration);
    assert_eq!(back.blocked, report.blocked);
    assert_eq!(back.blocked_beyond, 4);
    assert_eq!(back.tail, report.tail);

    // A runner that masks nothing, floods the tail or names odd hosts is cut down to size.
    let mut hostile = report.to_wire();
    hostile.tail = (0..100).map(|i| format!("line {i} tok-secret")).collect();
    hostile.tail.push("x".repeat(100_000));
    hostile.blocked = (0..1000)
        .map(|i| BlockedHost {
            host: format!("h{i}\u{1b}[31m.example"),
            port: 1,
            attempts: 1,
        })
        .collect();
    let back = SetupReport::from_wire(hostile, &Redactor::new(["tok-secret"]));
    assert_eq!(back.tail.len(), TAIL_LINES);
    assert!(back.tail.iter().all(|l| !l.contains("tok-secret")));
    assert!(back.tail.iter().all(|l| l.len() < 4096));
    assert_eq!(back.blocked.len(), MAX_BLOCKED_DISTINCT);
    assert_eq!(back.blocked[0].host, "h0[31m.example");
}

#[test]
fn snapshots_cross_the_link_only_under_plain_keys() {
    let meta = SnapshotMeta {
        key: "a".repeat(64),
        built_at_ms: 5,
        setup_ms: 7,
        generation: 2,
        maintained_at_ms: Some(9),
    };
    let info = snapshot_info(&meta, Some("sha256:1".to_owned()));
    assert_eq!(info.base_image.as_deref(), Some("sha256:1"));
    let back = meta_from_wire(&info).expect("plain");
    assert_eq!((back.key, back.generation), (meta.key, 2));
    let odd = SnapshotInfo {
        key: "../x".to_owned(),
        ..info
    };
    assert!(meta_from_wire(&odd).is_none());
}

use serde_json::{Value, json};

use super::*;
use crate::test_support::{symlink, tree};

fn numbered(range: std::ops::RangeInclusive<u64>, text: impl Fn(u64) -> String) -> String {
    range
        .map(|n| format!("{n:>6}\t{}", text(n)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn reads_text_with_line_numbers() {
    let many: String = (1..=2500).map(|n| format!("line {n}\n")).collect();
    let long = "é".repeat(2100);
    let outside = tree(&[("secret.txt", b"secret\n")]);
    let dir = tree(&[
        ("abc.txt", b"a\nb\nc\n"),
        ("no_newline.txt", b"a\nb"),
        ("crlf.txt", b"one\r\ntwo\r\n"),
        ("empty.txt", b""),
        ("blank_lines.txt", b"\n\n"),
        ("ünï/日本.md", "こんにちは\n".as_bytes()),
        ("latin1.txt", b"caf\xe9\n"),
        ("long.txt", long.as_bytes()),
        ("many.txt", many.as_bytes()),
    ]);
    symlink(dir.path(), "escape.txt", &outside.path().join("secret.txt"));
    let ws = Workspace::new(dir.path()).expect("workspace");
    let lines = |r| numbered(r, |n| format!("line {n}"));
    let cases: Vec<(Value, String)> = vec![
        (
            json!({"file_path": "abc.txt"}),
            "     1\ta\n     2\tb\n     3\tc".to_owned(),
        ),
        (
            json!({"file_path": "./abc.txt", "offset": 0}),
            "     1\ta\n     2\tb\n     3\tc".to_owned(),
        ),
        (
            json!({"file_path": "abc.txt", "offset": 2, "limit": 1}),
            "     2\tb\n\n(Stopped at line 2 because of the line limit; the file continues. \
             Read more with offset=3.)"
                .to_owned(),
        ),
        (
            json!({"file_path": "abc.txt", "offset": 3, "limit": 5}),
            "     3\tc".to_owned(),
        ),
        (
            json!({"file_path": "abc.txt", "offset": 10}),
            "(`abc.txt` has 3 lines; offset 10 is past the end.)".to_owned(),
        ),
        (
            json!({"file_path": "no_newline.txt"}),
            "     1\ta\n     2\tb".to_owned(),
        ),
        (
            json!({"file_path": "crlf.txt"}),
            "     1\tone\n     2\ttwo".to_owned(),
        ),
        (
            json!({"file_path": "empty.txt"}),
            "(`empty.txt` is empty.)".to_owned(),
        ),
        (
            json!({"file_path": "blank_lines.txt"}),
            "     1\t\n     2\t".to_owned(),
        ),
        (
            json!({"file_path": "ünï/日本.md"}),
            "     1\tこんにちは".to_owned(),
        ),
        (
            json!({"file_path": "latin1.txt"}),
            "     1\tcaf\u{fffd}".to_owned(),
        ),
        (
            json!({"file_path": "long.txt"}),
            format!(
                "     1\t{} […]\n\n(Some lines were longer than 2000 characters and were cut.)",
                "é".repeat(2000)
            ),
        ),
        (
            json!({"file_path": "many.txt"}),
            format!(
                "{}\n\n(Stopped at line 2000 because of the line limit; the file continues. \
                 Read more with offset=2001.)",
                lines(1..=2000)
            ),
        ),
        (
            json!({"file_path": "many.txt", "offset": 2001}),
            lines(2001..=2500),
        ),
    ];
    for (input, want) in cases {
        let got = run(&ws, input.clone()).expect("read");
        assert_eq!(got, want, "{input}");
    }
}

#[test]
fn output_is_capped_with_a_way_to_continue() {
    let wide: String = (1..=200)
        .map(|n| format!("{n:04}{}\n", "x".repeat(996)))
        .collect();
    let dir = tree(&[("wide.txt", wide.as_bytes())]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    let got = run(&ws, json!({"file_path": "wide.txt"})).expect("read");
    assert!(got.len() <= MAX_OUTPUT_CHARS + 200, "{}", got.len());
    let shown = got.lines().filter(|l| l.contains('\t')).count() as u64;
    assert!(shown > 90 && shown < 100, "{shown}");
    let note = format!(
        "because of the output size cap; the file continues. Read more with offset={}.",
        shown + 1
    );
    assert!(
        got.ends_with(&format!("{note})")),
        "{}",
        &got[got.len() - 200..]
    );
}

#[test]
fn refuses_what_it_cannot_show() {
    let outside = tree(&[("secret.txt", b"secret\n")]);
    let dir = tree(&[("bin.dat", b"\x7fELF\0\0\x01"), ("src/a.rs", b"")]);
    symlink(dir.path(), "escape.txt", &outside.path().join("secret.txt"));
    let ws = Workspace::new(dir.path()).expect("workspace");
    let secret = outside.path().join("secret.txt").display().to_string();
    let cases = [
        (
            json!({"file_path": "bin.dat"}),
            "is a binary file (7 bytes)",
        ),
        (json!({"file_path": "src"}), "`src` is a directory"),
        (json!({"file_path": "."}), "is a directory"),
        (json!({"file_path": "../x"}), "escapes the workspace root"),
        (json!({"file_path": secret}), "outside the workspace root"),
        (json!({"file_path": "escape.txt"}), "symlink"),
        (json!({"file_path": "missing.rs"}), "does not exist"),
        (
            json!({"file_path": "src/a.rs", "limit": "ten"}),
            "field `limit`",
        ),
        (json!({"path": "src/a.rs"}), "unknown field `path`"),
    ];
    for (input, needle) in cases {
        let err = run(&ws, input.clone()).expect_err("must fail").to_string();
        assert!(err.contains(needle), "{input}: {err}");
    }
}

#[test]
fn capped_line_reader_handles_chunk_boundaries() {
    /// Input, line cap, expected (kept bytes, consumed bytes) per line.
    type Case = (&'static [u8], usize, Vec<(&'static [u8], u64)>);
    let cases: [Case; 4] = [
        (b"ab\ncd\n", 10, vec![(b"ab", 3), (b"cd", 3)]),
        (b"abcdef\ng", 3, vec![(b"abc", 7), (b"g", 1)]),
        (b"\n\n", 10, vec![(b"", 1), (b"", 1)]),
        (b"", 10, vec![]),
    ];
    for (input, cap, want) in cases {
        let mut reader = BufReader::with_capacity(2, input);
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(n) = read_line_capped(&mut reader, &mut buf, cap).expect("read") {
            got.push((buf.clone(), n));
        }
        let want: Vec<(Vec<u8>, u64)> = want.into_iter().map(|(b, n)| (b.to_vec(), n)).collect();
        assert_eq!(got, want, "{input:?}");
    }
}

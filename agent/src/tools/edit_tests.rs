use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use super::*;
use crate::test_support::{symlink, tree};

const LIB: &str = "fn a() {\n    old();\n}\n\nfn b() {\n    old();\n}\n";

fn edit(file_path: &str, old: &str, new: &str) -> Value {
    json!({"file_path": file_path, "old_string": old, "new_string": new})
}

/// What an edit is expected to do.
enum Want {
    /// Succeeds: the report contains this, and the file then holds this.
    Ok(&'static str, &'static str),
    /// Fails with this in the message; the file is unchanged.
    Err(&'static str),
}

#[test]
fn edits_replace_exact_strings() {
    let with_all = |mut v: Value, all: bool| {
        v["replace_all"] = json!(all);
        v
    };
    let cases: Vec<(&str, Value, Want)> = vec![
        (
            "unique",
            edit("lib.rs", "fn a() {\n    old();", "fn a() {\n    new();"),
            Want::Ok(
                "Edited lib.rs: 1 replacement.\n     1\tfn a() {\n     2\t    new();\n     3\t}",
                "fn a() {\n    new();\n}\n\nfn b() {\n    old();\n}\n",
            ),
        ),
        (
            "not found",
            edit("lib.rs", "missing();", "x"),
            Want::Err("`old_string` was not found in `lib.rs`"),
        ),
        (
            "whitespace matters",
            edit("lib.rs", "fn a() {\n  old();", "x"),
            Want::Err("was not found"),
        ),
        (
            "ambiguous",
            edit("lib.rs", "old();", "new();"),
            Want::Err("`old_string` occurs 2 times in `lib.rs`"),
        ),
        (
            "ambiguous, replace_all false",
            with_all(edit("lib.rs", "old();", "new();"), false),
            Want::Err("set replace_all to true"),
        ),
        (
            "replace_all",
            with_all(edit("lib.rs", "old();", "new();"), true),
            Want::Ok(
                "2 replacements (the first is shown)",
                "fn a() {\n    new();\n}\n\nfn b() {\n    new();\n}\n",
            ),
        ),
        (
            "same string",
            edit("lib.rs", "old();", "old();"),
            Want::Err("are the same"),
        ),
        (
            "empty old_string on a non-empty file",
            edit("lib.rs", "", "x"),
            Want::Err("`old_string` is empty but `lib.rs` is not"),
        ),
        (
            "deletion",
            edit("lib.rs", "\nfn b() {\n    old();\n}\n", ""),
            Want::Ok("Edited lib.rs: 1 replacement.", "fn a() {\n    old();\n}\n"),
        ),
    ];
    for (name, input, want) in cases {
        let dir = tree(&[("lib.rs", LIB.as_bytes())]);
        let ws = Workspace::new(dir.path()).expect("workspace");
        let result = run(&ws, input);
        let after = std::fs::read_to_string(dir.path().join("lib.rs")).expect("read");
        match (want, result) {
            (Want::Ok(report, content), Ok(out)) => {
                assert!(out.contains(report), "{name}: {out}");
                assert_eq!(after, content, "{name}");
            }
            (Want::Err(needle), Err(e)) => {
                assert!(e.to_string().contains(needle), "{name}: {e}");
                assert_eq!(after, LIB, "{name}: unchanged");
            }
            (_, got) => panic!("{name}: unexpected {got:?}"),
        }
    }
}

#[test]
fn empty_old_string_creates_missing_or_empty_files() {
    let dir = tree(&[("empty.txt", b"")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        ("docs/new.md", "Created docs/new.md (6 bytes)"),
        ("empty.txt", "Edited empty.txt: 1 replacement."),
    ];
    for (path, report) in cases {
        let out = run(&ws, edit(path, "", "# New\n")).expect(path);
        assert!(out.starts_with(report), "{path}: {out}");
        let content = std::fs::read_to_string(dir.path().join(path)).expect("read");
        assert_eq!(content, "# New\n", "{path}");
    }
    let err = run(&ws, edit("nope.rs", "x", "y")).expect_err("missing");
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[test]
fn edits_keep_permissions() {
    let dir = tree(&[("run.sh", b"#!/bin/sh\necho old\n"), ("key", b"k=old\n")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    for (path, mode) in [("run.sh", 0o755), ("key", 0o600)] {
        let full = dir.path().join(path);
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)).expect("chmod");
        run(&ws, edit(path, "old", "new")).expect(path);
        let meta = std::fs::metadata(&full).expect("metadata");
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{path}");
        assert!(
            std::fs::read_to_string(&full)
                .expect("read")
                .contains("new")
        );
    }
}

#[test]
fn edits_outside_or_on_odd_files_are_refused() {
    let outside = tree(&[("secret.txt", b"secret old")]);
    let dir = tree(&[("bin.dat", b"\xff\xfe old"), ("src/a.rs", b"a")]);
    symlink(dir.path(), "out", &outside.path().join("secret.txt"));
    symlink(dir.path(), "outdir", outside.path());
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        ("../secret.txt", "escapes the workspace root"),
        ("/etc/passwd", "outside the workspace root"),
        ("out", "symlink that points outside"),
        ("outdir/secret.txt", "symlink that points outside"),
        ("src", "is a directory"),
        ("bin.dat", "not valid UTF-8"),
    ];
    for (path, needle) in cases {
        let err = run(&ws, edit(path, "old", "new"))
            .expect_err(path)
            .to_string();
        assert!(err.contains(needle), "{path}: {err}");
    }
    let secret = std::fs::read_to_string(outside.path().join("secret.txt")).expect("read");
    assert_eq!(secret, "secret old");
}

#[test]
fn snippets_number_the_lines_around_the_change() {
    let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let start = text.find("line 10").expect("present");
    let shown = snippet(&text, start, "line 10");
    let numbers: Vec<&str> = shown
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default().trim())
        .collect();
    assert_eq!(numbers, ["7", "8", "9", "10", "11", "12", "13"]);
}

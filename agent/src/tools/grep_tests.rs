use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;
use crate::test_support::{set_mtime, symlink, tree, write};

fn fixture() -> (TempDir, TempDir) {
    let outside = tree(&[("leak.txt", b"hello from outside\n")]);
    let dir = tree(&[
        (
            "src/main.rs",
            b"fn main() {\n    let x = 1;\n    println!(\"Hello\");\n}\n",
        ),
        (
            "src/lib.rs",
            b"pub fn hello() -> &'static str {\n    \"hello world\"\n}\n// TODO: more\n",
        ),
        (
            "docs/guide.md",
            b"# Guide\nSay Hello to everyone.\nhello again\n",
        ),
        (".hidden/secret.txt", b"hello from hidden\n"),
        (".git/objects/x", b"hello in git\n"),
        ("ignored.log", b"hello ignored\n"),
        ("bin.dat", b"hello\0binary\n"),
        (
            "\u{fc}n\u{ef}/日本.txt",
            "こんにちは hello ünïcödé\n".as_bytes(),
        ),
        ("ctx.txt", b"a\nb\nMATCH1\nc\nd\ne\nf\nMATCH2\ng\n"),
        ("crlf.txt", b"one\r\nhello crlf\r\n"),
        (".gitignore", b"*.log\n"),
    ]);
    symlink(dir.path(), "escape", outside.path());
    (dir, outside)
}

fn grep(ws: &Workspace, input: Value) -> Result<GrepOutcome, ToolError> {
    let input: GrepInput = parse_input(NAME, input)?;
    search(ws, &input)
}

fn paths(outcome: &GrepOutcome) -> Vec<&str> {
    let mut paths: Vec<&str> = outcome.files.iter().map(|f| f.path.as_str()).collect();
    paths.sort_unstable();
    paths
}

#[test]
fn finds_matching_files() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let hello = vec![
        ".hidden/secret.txt",
        "crlf.txt",
        "docs/guide.md",
        "src/lib.rs",
        "ünï/日本.txt",
    ];
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"pattern": "hello"}), hello.clone()),
        (
            json!({"pattern": "hello", "output_mode": "files_with_matches"}),
            hello,
        ),
        (
            json!({"pattern": "hello", "-i": true}),
            vec![
                ".hidden/secret.txt",
                "crlf.txt",
                "docs/guide.md",
                "src/lib.rs",
                "src/main.rs",
                "ünï/日本.txt",
            ],
        ),
        (
            json!({"pattern": "hello", "type": "rust"}),
            vec!["src/lib.rs"],
        ),
        (
            json!({"pattern": "hello", "type": "rs"}),
            vec!["src/lib.rs"],
        ),
        (
            json!({"pattern": "hello", "glob": "*.md"}),
            vec!["docs/guide.md"],
        ),
        (
            json!({"pattern": "hello", "glob": "src/**"}),
            vec!["src/lib.rs"],
        ),
        (
            json!({"pattern": "hello", "glob": "!*.{md,txt}"}),
            vec!["src/lib.rs"],
        ),
        (
            json!({"pattern": "hello", "path": "src"}),
            vec!["src/lib.rs"],
        ),
        (
            json!({"pattern": "hello", "path": "docs/guide.md"}),
            vec!["docs/guide.md"],
        ),
        (
            json!({"pattern": "hello", "path": "ignored.log"}),
            vec!["ignored.log"],
        ),
        (json!({"pattern": "hello", "path": "bin.dat"}), vec![]),
        (json!({"pattern": "ünïcödé"}), vec!["ünï/日本.txt"]),
        (
            json!({"pattern": "ÜNÏCÖDÉ", "-i": true}),
            vec!["ünï/日本.txt"],
        ),
        (json!({"pattern": "こんにちは"}), vec!["ünï/日本.txt"]),
        (json!({"pattern": "outside"}), vec![]),
        (json!({"pattern": "hello crlf"}), vec!["crlf.txt"]),
        (json!({"pattern": "no such text anywhere"}), vec![]),
    ];
    for (input, want) in cases {
        let got = grep(&ws, input.clone()).expect("grep");
        assert_eq!(paths(&got), want, "{input}");
        assert_eq!(got.total_files, want.len() as u64, "{input}");
    }
}

#[test]
fn renders_each_mode() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let ctx = |extra: Value| {
        let mut input = json!({"pattern": "MATCH\\d", "output_mode": "content", "path": "ctx.txt"});
        if let (Some(obj), Some(more)) = (input.as_object_mut(), extra.as_object()) {
            obj.extend(more.clone());
        }
        input
    };
    let cases: Vec<(Value, &str)> = vec![
        (ctx(json!({})), "ctx.txt:3:MATCH1\nctx.txt:8:MATCH2"),
        (ctx(json!({"-n": false})), "ctx.txt:MATCH1\nctx.txt:MATCH2"),
        (
            ctx(json!({"-C": 1})),
            "ctx.txt-2-b\nctx.txt:3:MATCH1\nctx.txt-4-c\n--\nctx.txt-7-f\nctx.txt:8:MATCH2\nctx.txt-9-g",
        ),
        (
            ctx(json!({"-A": 1, "-B": 0, "-C": 5})),
            "ctx.txt:3:MATCH1\nctx.txt-4-c\n--\nctx.txt:8:MATCH2\nctx.txt-9-g",
        ),
        (
            ctx(json!({"-B": 2})),
            "ctx.txt-1-a\nctx.txt-2-b\nctx.txt:3:MATCH1\n--\nctx.txt-6-e\nctx.txt-7-f\nctx.txt:8:MATCH2",
        ),
        (
            ctx(json!({"pattern": "MATCH1\\nc", "multiline": true})),
            "ctx.txt:3:MATCH1\nctx.txt:4:c",
        ),
        (
            json!({"pattern": "fn main.*Hello", "multiline": true, "output_mode": "content"}),
            "src/main.rs:1:fn main() {\nsrc/main.rs:2:    let x = 1;\nsrc/main.rs:3:    println!(\"Hello\");",
        ),
        (
            json!({"pattern": "hello", "output_mode": "count"}),
            ".hidden/secret.txt:1\ncrlf.txt:1\ndocs/guide.md:1\nsrc/lib.rs:2\nünï/日本.txt:1\n\n\
             Found 6 matching lines in 5 files.",
        ),
        (
            json!({"pattern": "crlf", "output_mode": "content"}),
            "crlf.txt:2:hello crlf",
        ),
        (
            json!({"pattern": "hello", "path": "src", "output_mode": "content", "-i": true}),
            "src/lib.rs:1:pub fn hello() -> &'static str {\nsrc/lib.rs:2:    \"hello world\"\n\
             src/main.rs:3:    println!(\"Hello\");",
        ),
        (json!({"pattern": "zzz"}), "No matches found for `zzz`."),
    ];
    for (input, want) in cases {
        let text = run(&ws, input.clone()).expect("grep");
        assert_eq!(text, want, "{input}");
    }
}

#[test]
fn files_mode_lists_newest_first() {
    let dir = tree(&[("a.txt", b"x\n"), ("b.txt", b"x\n"), ("c.txt", b"x\n")]);
    for (name, secs) in [("a.txt", 200), ("b.txt", 300), ("c.txt", 100)] {
        set_mtime(dir.path(), name, secs);
    }
    let ws = Workspace::new(dir.path()).expect("workspace");
    let text = run(&ws, json!({"pattern": "x"})).expect("grep");
    assert_eq!(text, "Found 3 files\nb.txt\na.txt\nc.txt");
    let text = run(&ws, json!({"pattern": "x", "head_limit": 2})).expect("grep");
    assert!(
        text.starts_with("Found 3 files\nb.txt\na.txt\n\n(Showing 2 of 3 files."),
        "{text}"
    );
}

#[test]
fn head_limit_cuts_content_with_a_note() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let input = json!({"pattern": "MATCH", "output_mode": "content", "head_limit": 1});
    let text = run(&ws, input).expect("grep");
    assert!(
        text.starts_with("ctx.txt:3:MATCH1\n\n(Output truncated after 1 lines."),
        "{text}"
    );
    assert!(
        text.contains("In total 2 matching lines in 1 files"),
        "{text}"
    );
}

#[test]
fn huge_output_is_capped_but_counts_are_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body: String = (0..100)
        .map(|i| format!("needle line {i} with some padding text to make it longer\n"))
        .collect();
    for f in 0..200 {
        write(dir.path(), &format!("f{f:03}.txt"), body.as_bytes());
    }
    write(
        dir.path(),
        "long.txt",
        format!("needle {}\n", "y".repeat(5000)).as_bytes(),
    );
    let ws = Workspace::new(dir.path()).expect("workspace");
    let input = json!({"pattern": "needle", "output_mode": "content"});
    let outcome = grep(&ws, input.clone()).expect("grep");
    assert_eq!(outcome.total_matches, 20_001);
    assert_eq!(outcome.total_files, 201);
    assert!(outcome.incomplete);
    let text = outcome.render();
    assert!(text.len() < MAX_OUTPUT_CHARS + 1_000, "{}", text.len());
    assert!(
        text.starts_with("f000.txt:1:needle line 0 "),
        "{}",
        &text[..80]
    );
    assert!(text.contains("In total 20001 matching lines in 201 files"));
    let long = grep(
        &ws,
        json!({"pattern": "needle", "path": "long.txt", "output_mode": "content"}),
    )
    .expect("grep")
    .render();
    assert!(long.ends_with(" […]") && long.len() < 600, "{long}");
    assert_eq!(
        run(&ws, input).expect("grep"),
        text,
        "output is deterministic"
    );
}

#[test]
fn binary_files_are_skipped_like_ripgrep() {
    let mut late_binary = "hello early\n".repeat(10_000).into_bytes();
    late_binary.extend_from_slice(b"\0tail hello\n");
    let dir = tree(&[("early.bin", b"\0hello\n"), ("late.bin", &late_binary)]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    let files = grep(&ws, json!({"pattern": "hello"})).expect("grep");
    assert_eq!(
        paths(&files),
        ["late.bin"],
        "files mode stops at the first match"
    );
    let count = grep(&ws, json!({"pattern": "hello", "output_mode": "count"})).expect("grep");
    assert_eq!(
        count.total_files, 0,
        "count mode drops files with binary data"
    );
}

#[test]
fn refuses_bad_input() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        (json!({"pattern": ""}), "must not be empty"),
        (json!({"pattern": "("}), "invalid regex `(`"),
        (json!({"pattern": "a\\nb"}), "multiline: true"),
        (
            json!({"pattern": "x", "type": "nosuchtype"}),
            "unknown file `type` `nosuchtype`",
        ),
        (json!({"pattern": "x", "glob": "[z"}), "invalid `glob`"),
        (
            json!({"pattern": "x", "path": "../"}),
            "escapes the workspace root",
        ),
        (
            json!({"pattern": "x", "path": "/etc"}),
            "outside the workspace root",
        ),
        (json!({"pattern": "x", "path": "escape"}), "symlink"),
        (json!({"pattern": "x", "path": "missing"}), "does not exist"),
        (
            json!({"pattern": "x", "output_mode": "lines"}),
            "field `output_mode`",
        ),
        (json!({"pattern": "x", "-A": -1}), "field `-A`"),
        (json!({"pattern": "x", "-Z": 1}), "unknown field `-Z`"),
    ];
    for (input, needle) in cases {
        let err = grep(&ws, input.clone()).expect_err("must fail").to_string();
        assert!(err.contains(needle), "{input}: {err}");
    }
}

#[test]
fn counts_lines_or_multiline_matches_like_ripgrep() {
    let dir = tree(&[("a.txt", b"a1 a2\na3\nb\n")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        (json!({"pattern": "a\\d", "output_mode": "count"}), 2),
        (
            json!({"pattern": "a\\d", "output_mode": "count", "multiline": true}),
            3,
        ),
        (
            json!({"pattern": "a\\d.a\\d", "output_mode": "count", "multiline": true}),
            1,
        ),
        (json!({"pattern": "a\\d", "output_mode": "content"}), 2),
    ];
    for (input, want) in cases {
        let got = grep(&ws, input.clone()).expect("grep");
        assert_eq!(got.total_matches, want, "{input}");
    }
}

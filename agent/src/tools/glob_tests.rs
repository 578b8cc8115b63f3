use serde_json::json;
use tempfile::TempDir;

use super::*;
use crate::test_support::{set_mtime, symlink, tree};

/// A repository-like tree with known modification times.
fn fixture() -> (TempDir, TempDir) {
    let outside = tree(&[("leak.rs", b"outside")]);
    let files: &[(&str, &[u8], u64)] = &[
        ("src/main.rs", b"fn main() {}", 500),
        ("src/lib.rs", b"", 400),
        ("src/deep/x.rs", b"", 300),
        (".hidden/h.rs", b"", 200),
        ("ünï/файл.rs", b"", 100),
        ("README.md", b"# readme", 50),
        ("ignored.rs", b"", 600),
        ("target/out.rs", b"", 700),
        (".git/hooks/pre.rs", b"", 800),
        (".gitignore", b"target/\nignored.rs\n", 10),
    ];
    let dir = tree(&files.iter().map(|(p, c, _)| (*p, *c)).collect::<Vec<_>>());
    for (path, _, secs) in files {
        set_mtime(dir.path(), path, *secs);
    }
    symlink(dir.path(), "escape", outside.path());
    (dir, outside)
}

fn glob(ws: &Workspace, input: serde_json::Value) -> Result<GlobOutcome, ToolError> {
    let input: GlobInput = parse_input(NAME, input)?;
    search(ws, &input)
}

#[test]
fn finds_files_newest_first() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let root = dir.path().display().to_string();
    let all_rs = vec![
        "src/main.rs",
        "src/lib.rs",
        "src/deep/x.rs",
        ".hidden/h.rs",
        "ünï/файл.rs",
    ];
    let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
        (json!({"pattern": "**/*.rs"}), all_rs.clone()),
        (json!({"pattern": "./**/*.rs"}), all_rs),
        (json!({"pattern": "*.rs"}), vec![]),
        (json!({"pattern": "*.md"}), vec!["README.md"]),
        (
            json!({"pattern": "src/*.rs"}),
            vec!["src/main.rs", "src/lib.rs"],
        ),
        (
            json!({"pattern": "src/**"}),
            vec!["src/main.rs", "src/lib.rs", "src/deep/x.rs"],
        ),
        (json!({"pattern": "src/main.rs"}), vec!["src/main.rs"]),
        (
            json!({"pattern": "*.rs", "path": "src"}),
            vec!["src/main.rs", "src/lib.rs"],
        ),
        (
            json!({"pattern": "**/x.rs", "path": "src/deep"}),
            vec!["src/deep/x.rs"],
        ),
        (
            json!({"pattern": "**/*.{md,rs}", "path": "ünï"}),
            vec!["ünï/файл.rs"],
        ),
        (
            json!({"pattern": format!("{root}/src/*.rs")}),
            vec!["src/main.rs", "src/lib.rs"],
        ),
        (json!({"pattern": "nothing/here/*.rs"}), vec![]),
        (json!({"pattern": "**/.gitignore"}), vec![".gitignore"]),
        (json!({"pattern": "**/pre.rs"}), vec![]),
        (json!({"pattern": "**/leak.rs"}), vec![]),
    ];
    for (input, want) in cases {
        let got = glob(&ws, input.clone()).expect("glob");
        assert_eq!(got.files, want, "{input}");
        assert_eq!(got.total, want.len(), "{input}");
    }
}

#[test]
fn refuses_bad_input() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        (json!({"pattern": ""}), "must not be empty"),
        (json!({"pattern": "../*.rs"}), "must not contain `..`"),
        (json!({"pattern": "src/[a"}), "invalid glob pattern"),
        (json!({"pattern": "/etc/*"}), "outside the repository"),
        (
            json!({"pattern": "*", "path": "../"}),
            "escapes the workspace root",
        ),
        (
            json!({"pattern": "*", "path": "/tmp"}),
            "outside the workspace root",
        ),
        (json!({"pattern": "*", "path": "src/main.rs"}), "is a file"),
        (json!({"pattern": "*", "path": "nope"}), "does not exist"),
        (json!({"pattern": "*", "path": "escape"}), "symlink"),
        (json!({"pattern": "escape/*.rs"}), "symlink"),
        (json!({"pattern": 3}), "field `pattern`"),
        (json!({"glob": "*"}), "unknown field `glob`"),
    ];
    for (input, needle) in cases {
        let err = glob(&ws, input.clone()).expect_err("must fail").to_string();
        assert!(err.contains(needle), "{input}: {err}");
    }
}

#[test]
fn caps_results_with_a_note() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..150u64 {
        let name = format!("f{i:03}.txt");
        crate::test_support::write(dir.path(), &name, b"");
        set_mtime(dir.path(), &name, 1_000 + i);
    }
    let ws = Workspace::new(dir.path()).expect("workspace");
    let got = glob(&ws, json!({"pattern": "*.txt"})).expect("glob");
    assert_eq!(got.total, 150);
    assert_eq!(got.files.len(), MAX_RESULTS);
    assert_eq!(got.files[0], "f149.txt");
    assert_eq!(got.files[99], "f050.txt");
    let text = got.render();
    assert!(text.contains("Truncated: showing the 100 most recently modified of 150"));
}

#[test]
fn renders_empty_results_plainly() {
    let (dir, _outside) = fixture();
    let ws = Workspace::new(dir.path()).expect("workspace");
    let text = run(&ws, json!({"pattern": "**/*.py"})).expect("run");
    assert_eq!(text, "No files found matching `**/*.py`.");
    let text = run(&ws, json!({"pattern": "src/*.rs"})).expect("run");
    assert_eq!(text, "src/main.rs\nsrc/lib.rs");
}

#[test]
fn literal_prefix_stops_at_glob_syntax() {
    let cases = [
        ("**/*.rs", ""),
        ("src/*.rs", "src"),
        ("src/main.rs", "src"),
        ("a/b/{c,d}/*.rs", "a/b"),
        ("a//b/*", "a/b"),
        ("*.rs", ""),
    ];
    for (pattern, want) in cases {
        assert_eq!(literal_prefix(pattern), PathBuf::from(want), "{pattern}");
    }
}

//! Property tests of the patch parser against real git:
//! - a random small repository gets random edits (create, modify, delete, rename, mode change,
//!   binary, symlink, type change; names with spaces, quotes, tabs, backslashes and non-ASCII;
//!   lines that look like diff headers) and real `git diff --cached --binary --full-index`, with
//!   or without rename detection, diffs it; the parser's files, paths, +/- counts, binary flags,
//!   creations, deletions, renames, modes and symlinks must match what
//!   `git apply --numstat --summary -z` reads in the same bytes, and every symlink's target is
//!   the one on disk;
//! - random bytes, and real diffs cut or with a byte changed, never panic the parser.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use ultraplan_protocol::patch::FileChange;

use super::split;

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// File names: nested, spaced, quoted, tabbed, escaped, non-ASCII, dash-led.
const NAMES: &[&str] = &[
    "a.txt",
    "b",
    "d/c.rs",
    "d/e/f",
    "sp ace",
    "café",
    "qu\"ote",
    "ta\tb",
    "x\\y",
    "-dash",
    "日本.md",
];

/// Lines, some of which look like patch syntax.
const LINES: &[&str] = &[
    "fn main() {",
    "}",
    "",
    "let x = 1;",
    "  indented",
    "é ü",
    "\\ backslash",
    "+plus",
    "-minus",
    "@@ -1 +1 @@",
    "diff --git a/x b/x",
    "--- a/x",
    "+++ b/x",
    "GIT binary patch",
    "trailing \r",
    " space",
];

#[derive(Debug, Clone)]
enum Content {
    Text { lines: Vec<usize>, eol: bool },
    Binary(Vec<u8>),
    Link(usize),
}

#[derive(Debug, Clone)]
enum Edit {
    Keep,
    Write(Content),
    Delete,
    Rename(usize),
    Chmod,
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        5 => (prop::collection::vec(0..LINES.len(), 0..12), any::<bool>())
            .prop_map(|(lines, eol)| Content::Text { lines, eol }),
        1 => prop::collection::vec(any::<u8>(), 1..64)
            .prop_map(|mut b| { b.push(0); Content::Binary(b) }),
        1 => (0..NAMES.len() + 2).prop_map(Content::Link),
    ]
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => Just(Edit::Keep),
        4 => content().prop_map(Edit::Write),
        1 => Just(Edit::Delete),
        1 => (0..NAMES.len()).prop_map(Edit::Rename),
        1 => Just(Edit::Chmod),
    ]
}

#[derive(Debug, Clone)]
struct Scenario {
    initial: Vec<(Option<Content>, bool)>,
    edits: Vec<Edit>,
    renames: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(
            (prop::option::weighted(0.7, content()), any::<bool>()),
            NAMES.len(),
        ),
        prop::collection::vec(edit(), NAMES.len()),
        any::<bool>(),
    )
        .prop_map(|(initial, edits, renames)| Scenario {
            initial,
            edits,
            renames,
        })
}

fn git(dir: &Path, args: &[&str], input: Option<&[u8]>) -> Vec<u8> {
    let mut child = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(["-c", "core.autocrlf=false", "-c", "core.symlinks=true"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("git runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.unwrap_or_default()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn write(root: &Path, name: &str, content: &Content, exec: bool) {
    let path = root.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let _ = fs::remove_file(&path);
    match content {
        Content::Text { lines, eol } => {
            let mut text = lines
                .iter()
                .map(|&i| LINES[i])
                .collect::<Vec<_>>()
                .join("\n");
            if *eol && !lines.is_empty() {
                text.push('\n');
            }
            fs::write(&path, text).unwrap();
        }
        Content::Binary(bytes) => fs::write(&path, bytes).unwrap(),
        Content::Link(i) => {
            let target = NAMES.get(*i).copied().unwrap_or("missing/target");
            std::os::unix::fs::symlink(target, &path).unwrap();
            return;
        }
    }
    let mode = if exec { 0o755 } else { 0o644 };
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
}

fn exists(root: &Path, name: &str) -> bool {
    fs::symlink_metadata(root.join(name)).is_ok()
}

/// Builds the repository, commits, applies the edits, and returns the staged diff.
fn make_diff(root: &Path, s: &Scenario) -> Vec<u8> {
    git(root, &["init", "-q"], None);
    for (name, (content, exec)) in NAMES.iter().zip(&s.initial) {
        if let Some(content) = content {
            write(root, name, content, *exec);
        }
    }
    git(root, &["add", "-A"], None);
    git(root, &["commit", "-q", "--allow-empty", "-m", "base"], None);
    for (i, (name, edit)) in NAMES.iter().zip(&s.edits).enumerate() {
        let path = root.join(name);
        match edit {
            Edit::Keep => {}
            Edit::Write(content) => write(root, name, content, s.initial[i].1),
            Edit::Delete if exists(root, name) => fs::remove_file(&path).unwrap(),
            Edit::Rename(to) if exists(root, name) && !exists(root, NAMES[*to]) => {
                let dest = root.join(NAMES[*to]);
                fs::create_dir_all(dest.parent().unwrap()).unwrap();
                fs::rename(&path, &dest).unwrap();
            }
            Edit::Chmod if fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) => {
                let mode = fs::metadata(&path).unwrap().permissions().mode() ^ 0o111;
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            }
            _ => {}
        }
    }
    git(root, &["add", "-A"], None);
    let renames = if s.renames { "-M" } else { "--no-renames" };
    git(
        root,
        &[
            "diff",
            "--cached",
            "--binary",
            "--full-index",
            "--no-ext-diff",
            renames,
            "HEAD",
        ],
        None,
    )
}

/// git's summary lines, structured.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Summary {
    Create {
        path: String,
        link: bool,
    },
    Delete(String),
    Rename {
        from: String,
        to: String,
    },
    /// A mode change; git leaves out the name on a renamed file.
    Mode {
        path: Option<String>,
        to: String,
    },
}

/// `d/{x => y}` or `x => y`, as git's rename summary compresses them.
fn expand_rename(text: &str) -> (String, String) {
    if let (Some(open), Some(close)) = (text.find('{'), text.rfind('}')) {
        let (pre, post) = (&text[..open], &text[close + 1..]);
        let (a, b) = text[open + 1..close].split_once(" => ").unwrap();
        let join = |mid: &str| format!("{pre}{mid}{post}").replace("//", "/");
        return (join(a), join(b));
    }
    let (a, b) = text.split_once(" => ").unwrap();
    (a.to_owned(), b.to_owned())
}

/// One numstat record: the path and (added, deleted), `None` for a binary patch.
type Numstat = (String, Option<(u64, u64)>);

/// `git apply --numstat --summary -z`: per file (name, counts), then the summary.
fn git_reading(root: &Path, patch: &[u8]) -> (Vec<Numstat>, BTreeSet<Summary>) {
    let out = git(
        root,
        &["apply", "--numstat", "--summary", "-z", "-"],
        Some(patch),
    );
    let mut rest = &out[..];
    let mut files = Vec::new();
    while rest
        .first()
        .is_some_and(|b| b.is_ascii_digit() || *b == b'-')
    {
        let end = rest.iter().position(|&b| b == 0).unwrap();
        let record = String::from_utf8(rest[..end].to_vec()).unwrap();
        rest = &rest[end + 1..];
        let mut fields = record.splitn(3, '\t');
        let (a, d, name) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        let counts = (a != "-").then(|| (a.parse().unwrap(), d.parse().unwrap()));
        files.push((name.to_owned(), counts));
    }
    let mut summary = BTreeSet::new();
    for line in String::from_utf8(rest.to_vec()).unwrap().split('\n') {
        if let Some(rest) = line.strip_prefix(" create mode ") {
            let (mode, path) = rest.split_once(' ').unwrap();
            summary.insert(Summary::Create {
                path: path.to_owned(),
                link: mode == "120000",
            });
        } else if let Some(rest) = line.strip_prefix(" delete mode ") {
            summary.insert(Summary::Delete(rest.split_once(' ').unwrap().1.to_owned()));
        } else if let Some(rest) = line.strip_prefix(" rename ") {
            let text = &rest[..rest.rfind(" (").unwrap()];
            let (from, to) = expand_rename(text);
            summary.insert(Summary::Rename { from, to });
        } else if let Some(rest) = line.strip_prefix(" mode change ") {
            let mut parts = rest.splitn(4, ' ');
            let (_, _, to) = (parts.next(), parts.next(), parts.next().unwrap().to_owned());
            summary.insert(Summary::Mode {
                path: parts.next().map(str::to_owned),
                to,
            });
        } else {
            assert!(line.is_empty(), "unknown summary line {line:?}");
        }
    }
    (files, summary)
}

fn check(s: &Scenario) -> Result<(), TestCaseError> {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let patch = make_diff(root, s);
    let files = split(&patch).map_err(|e| TestCaseError::fail(e.to_string()))?;
    // Edits that cancel out leave git nothing to read ("No valid patches").
    if patch.is_empty() {
        prop_assert!(files.is_empty());
        return Ok(());
    }
    let (seen, summary) = git_reading(root, &patch);
    let ours: Vec<Numstat> = files
        .iter()
        .map(|f| {
            (
                f.path.clone(),
                (!f.binary).then_some((f.additions, f.deletions)),
            )
        })
        .collect();
    prop_assert_eq!(
        &ours,
        &seen,
        "files and counts; patch:\n{}",
        String::from_utf8_lossy(&patch)
    );
    let mut expected = BTreeSet::new();
    for f in &files {
        match (f.change, &f.from) {
            (FileChange::Added, _) => {
                expected.insert(Summary::Create {
                    path: f.path.clone(),
                    link: f.symlink,
                });
            }
            (FileChange::Deleted, _) => {
                expected.insert(Summary::Delete(f.path.clone()));
            }
            (_, Some(from)) => {
                expected.insert(Summary::Rename {
                    from: from.clone(),
                    to: f.path.clone(),
                });
            }
            _ => {}
        }
        if let Some(to) = &f.new_mode {
            let path = f.from.is_none().then(|| f.path.clone());
            expected.insert(Summary::Mode {
                path,
                to: to.clone(),
            });
        }
        // A symlink the patch leaves behind: its target is what is on disk.
        if f.symlink && f.change != FileChange::Deleted {
            let on_disk = fs::read_link(root.join(&f.path)).unwrap();
            prop_assert_eq!(f.link_target.as_deref(), on_disk.to_str(), "{}", f.path);
        }
        prop_assert_eq!(&f.text[..11], b"diff --git ");
    }
    prop_assert_eq!(
        &expected,
        &summary,
        "summary; patch:\n{}",
        String::from_utf8_lossy(&patch)
    );
    // Damaged copies of a real patch never panic the parser.
    for cut in [
        patch.len() / 3,
        patch.len() / 2,
        patch.len().saturating_sub(1),
    ] {
        let _ = split(&patch[..cut]);
    }
    Ok(())
}

proptest! {
    // Each case runs git half a dozen times.
    #![proptest_config(config(48))]

    #[test]
    fn parser_reads_real_diffs_as_git_does(s in scenario()) {
        check(&s)?;
    }
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn random_bytes_never_panic(
        parts in prop::collection::vec(
            prop_oneof![
                prop::sample::select(vec![
                    "diff --git ", "a/", " b/", "\"a/x\\", "\\303\\251\"", "\n", "--- ", "+++ ",
                    "@@ -1 +1 @@\n", "+", "-", "new file mode 120000\n", "old mode ", "new mode ",
                    "rename from ", "rename to ", "index 0..1 100644\n", "GIT binary patch\n",
                    "/dev/null", "\t", "\\", "\"", "\\0", "\\377",
                ])
                .prop_map(|s| s.as_bytes().to_vec()),
                prop::collection::vec(any::<u8>(), 1..4),
            ],
            0..40,
        ),
        at in any::<Index>(),
    ) {
        let bytes = parts.concat();
        let _ = split(&bytes);
        if !bytes.is_empty() {
            let _ = split(&bytes[at.index(bytes.len())..]);
        }
    }
}

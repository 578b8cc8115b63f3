//! The per-file report: one line per file (what happened or would happen, the path, and why or
//! how much), under a headline. Pure text.

use ultraplan_protocol::patch::FileChange;

use super::guard::Refusal;
use super::parse::{FilePatch, summary};
use super::preflight::Verdict;

/// Whether the report tells what would happen or what happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing was touched (a dry run, or a refusal).
    Preview,
    /// The patch was applied.
    Applied,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub status: &'static str,
    pub path: String,
    pub detail: String,
}

/// What happened to a conflicting file in a worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Markers {
    /// Not applied at all (or nothing was tried).
    None,
    /// Merged with conflict markers left in the file.
    Left,
}

/// `Patch of session ID: 3 files changed, +12 −2`.
pub fn headline(id: &str, files: &[FilePatch], bytes: usize) -> String {
    format!(
        "Patch of session {id}: {}",
        summary(files, bytes).headline()
    )
}

/// The size of a file's change: `+3 −1`, `binary`, `mode changed`, with its kind.
pub fn detail(file: &FilePatch) -> String {
    let size = if let Some(target) = file.link_target.as_ref().filter(|_| file.symlink) {
        format!("symlink to {target}")
    } else if file.binary {
        "binary".to_owned()
    } else if file.change == FileChange::TypeChanged {
        "mode changed".to_owned()
    } else {
        format!("+{} −{}", file.additions, file.deletions)
    };
    match (&file.from, file.change) {
        (_, FileChange::Added) => format!("new file, {size}"),
        (_, FileChange::Deleted) => format!("deleted, {size}"),
        (Some(from), _) => format!("renamed from {from}, {size}"),
        (None, _) => size,
    }
}

/// The lines for these files and verdicts. `markers` (per file, may be empty) says where a
/// worktree kept a conflicting merge.
pub fn lines(
    files: &[FilePatch],
    verdicts: &[Verdict],
    mode: Mode,
    markers: &[Markers],
) -> Vec<Line> {
    files
        .iter()
        .zip(verdicts)
        .enumerate()
        .map(|(i, (file, verdict))| {
            let (status, detail) = match (verdict, mode) {
                (Verdict::Clean, Mode::Preview) => ("would apply", detail(file)),
                (Verdict::Merge, Mode::Preview) => {
                    ("would apply", format!("{} (3-way merge)", detail(file)))
                }
                (Verdict::Clean, Mode::Applied) => ("applied", detail(file)),
                (Verdict::Merge, Mode::Applied) => {
                    ("applied", format!("{} (3-way merge)", detail(file)))
                }
                (Verdict::AlreadyApplied, Mode::Preview) => {
                    ("would skip", "already applied".to_owned())
                }
                (Verdict::AlreadyApplied, Mode::Applied) => {
                    ("skipped", "already applied".to_owned())
                }
                (Verdict::Conflict { reason }, Mode::Preview) => ("conflicted", reason.clone()),
                (Verdict::Conflict { reason }, Mode::Applied) => {
                    let what = match markers.get(i) {
                        Some(Markers::Left) => "conflict markers left in the file",
                        _ => "not applied",
                    };
                    ("conflicted", format!("{reason}; {what}"))
                }
            };
            Line {
                status,
                path: file.path.clone(),
                detail,
            }
        })
        .collect()
}

/// The lines of a refused patch: every refused file and why.
pub fn refused(refusals: &[Refusal]) -> Vec<Line> {
    refusals
        .iter()
        .map(|r| Line {
            status: "refused",
            path: r.path.clone(),
            detail: r.reason.clone(),
        })
        .collect()
}

/// The lines as aligned text, two spaces in, one line each. Paths and details come from the
/// patch, so they are sanitised here, where they become terminal text.
pub fn render(lines: &[Line]) -> String {
    let lines: Vec<Line> = lines
        .iter()
        .map(|l| Line {
            status: l.status,
            path: crate::sanitize::line(&l.path),
            detail: crate::sanitize::line(&l.detail),
        })
        .collect();
    let lines = lines.as_slice();
    const MAX_PATH_COLUMN: usize = 48;
    let width = |s: &str| s.chars().count();
    let status_w = lines.iter().map(|l| width(l.status)).max().unwrap_or(0);
    let path_w = lines
        .iter()
        .map(|l| width(&l.path))
        .filter(|&w| w <= MAX_PATH_COLUMN)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for line in lines {
        let pad_status = status_w - width(line.status);
        let pad_path = path_w.saturating_sub(width(&line.path));
        out.push_str(&format!(
            "  {}{}  {}{}  {}\n",
            line.status,
            " ".repeat(pad_status),
            line.path,
            " ".repeat(pad_path),
            line.detail
        ));
    }
    out
}

/// How many files ended each way: `(applies, skipped, conflicted)`.
pub fn counts(verdicts: &[Verdict]) -> (usize, usize, usize) {
    let applies = verdicts.iter().filter(|v| v.applies()).count();
    let skipped = verdicts
        .iter()
        .filter(|v| **v == Verdict::AlreadyApplied)
        .count();
    (applies, skipped, verdicts.len() - applies - skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, change: FileChange, from: Option<&str>, binary: bool) -> FilePatch {
        FilePatch {
            path: path.into(),
            from: from.map(str::to_owned),
            change,
            additions: if binary { 0 } else { 3 },
            deletions: if binary { 0 } else { 1 },
            binary,
            new_mode: None,
            symlink: false,
            link_target: None,
            text: b"0123456789".to_vec(),
        }
    }

    #[test]
    fn details() {
        let cases = [
            (file("a", FileChange::Modified, None, false), "+3 −1"),
            (file("a", FileChange::Added, None, true), "new file, binary"),
            (
                file("a", FileChange::Deleted, None, false),
                "deleted, +3 −1",
            ),
            (
                file("a", FileChange::TypeChanged, None, false),
                "mode changed",
            ),
            (
                file("b", FileChange::Modified, Some("a"), false),
                "renamed from a, +3 −1",
            ),
            (
                FilePatch {
                    symlink: true,
                    link_target: Some("../logo.png".into()),
                    ..file("l", FileChange::Added, None, false)
                },
                "new file, symlink to ../logo.png",
            ),
        ];
        for (file, want) in cases {
            assert_eq!(detail(&file), want);
        }
    }

    #[test]
    fn lines_per_verdict_and_mode() {
        let f = file("src/lib.rs", FileChange::Modified, None, false);
        let conflict = Verdict::Conflict {
            reason: "overlaps your uncommitted changes".into(),
        };
        let cases = [
            (
                Verdict::Clean,
                Mode::Preview,
                Markers::None,
                "would apply",
                "+3 −1",
            ),
            (
                Verdict::Clean,
                Mode::Applied,
                Markers::None,
                "applied",
                "+3 −1",
            ),
            (
                Verdict::Merge,
                Mode::Applied,
                Markers::None,
                "applied",
                "+3 −1 (3-way merge)",
            ),
            (
                Verdict::Merge,
                Mode::Preview,
                Markers::None,
                "would apply",
                "+3 −1 (3-way merge)",
            ),
            (
                Verdict::AlreadyApplied,
                Mode::Preview,
                Markers::None,
                "would skip",
                "already applied",
            ),
            (
                Verdict::AlreadyApplied,
                Mode::Applied,
                Markers::None,
                "skipped",
                "already applied",
            ),
            (
                conflict.clone(),
                Mode::Preview,
                Markers::None,
                "conflicted",
                "overlaps your uncommitted changes",
            ),
            (
                conflict.clone(),
                Mode::Applied,
                Markers::None,
                "conflicted",
                "overlaps your uncommitted changes; not applied",
            ),
            (
                conflict,
                Mode::Applied,
                Markers::Left,
                "conflicted",
                "overlaps your uncommitted changes; conflict markers left in the file",
            ),
        ];
        for (verdict, mode, markers, status, detail) in cases {
            let got = lines(
                std::slice::from_ref(&f),
                std::slice::from_ref(&verdict),
                mode,
                &[markers],
            );
            assert_eq!(
                got,
                [Line {
                    status,
                    path: "src/lib.rs".into(),
                    detail: detail.into()
                }],
                "{verdict:?} {mode:?}"
            );
        }
    }

    #[test]
    fn rendering_aligns_columns() {
        let lines = [
            Line {
                status: "applied",
                path: "src/lib.rs".into(),
                detail: "+3 −1".into(),
            },
            Line {
                status: "conflicted",
                path: "é.md".into(),
                detail: "why".into(),
            },
        ];
        assert_eq!(
            render(&lines),
            "  applied     src/lib.rs  +3 −1\n  conflicted  é.md        why\n"
        );
        assert_eq!(render(&[]), "");
        let hostile = [Line {
            status: "refused",
            path: "evil\u{1b}]0;PWNED\u{7}name".into(),
            detail: "why\u{9b}31m\nSYSTEM".into(),
        }];
        assert_eq!(render(&hostile), "  refused  evilname  why SYSTEM\n");
        let refusals = [Refusal::new("leak", "absolute")];
        assert_eq!(refused(&refusals)[0].status, "refused");
    }

    #[test]
    fn headline_and_counts() {
        let files = [
            file("a", FileChange::Modified, None, false),
            file("b", FileChange::Added, None, true),
        ];
        assert_eq!(
            headline("s1", &files, 20),
            "Patch of session s1: 2 files changed, +3 −1"
        );
        let verdicts = [
            Verdict::Clean,
            Verdict::Merge,
            Verdict::AlreadyApplied,
            Verdict::Conflict { reason: "x".into() },
        ];
        assert_eq!(counts(&verdicts), (2, 1, 1));
    }
}

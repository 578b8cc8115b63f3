//! Before anything is touched: what each file's patch would do to a work tree, and whether the
//! tree is dirty in a way that matters.
//!
//! `git apply --check --3way` alone cannot tell: since git 2.47 it exits 0 on a conflicting
//! merge. So each file is judged on its own: it applies (`--check`), else it is already applied
//! (`--check --reverse`), else a 3-way merge decides (`--check --3way`: "cleanly" or "with
//! conflicts"/failure).

use super::git::{Git, GitError};
use super::parse::FilePatch;

/// Flags of every `git apply`: the patch is applied as written, whatever `apply.whitespace` says.
pub const APPLY: [&str; 2] = ["apply", "--whitespace=nowarn"];

/// The reason of a conflict a 3-way merge can leave markers for.
pub const MERGE_CONFLICT: &str = "a 3-way merge conflicts with the local version";

/// What one file's patch would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It applies as is.
    Clean,
    /// It applies with a 3-way merge against the blob it was made from.
    Merge,
    /// The file already looks like the patch's result; nothing to do.
    AlreadyApplied,
    /// It does not apply here.
    Conflict { reason: String },
}

impl Verdict {
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// Whether applying changes the file.
    pub fn applies(&self) -> bool {
        matches!(self, Self::Clean | Self::Merge)
    }
}

/// One probe: whether `git apply --check …` succeeded, and what it said.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    pub success: bool,
    pub stderr: &'a str,
}

/// The verdict from the probes: forward, reverse, then 3-way (absent when not run).
pub fn classify(forward: Probe<'_>, reverse: Probe<'_>, three_way: Option<Probe<'_>>) -> Verdict {
    if forward.success {
        return Verdict::Clean;
    }
    if reverse.success {
        return Verdict::AlreadyApplied;
    }
    match three_way {
        Some(p) if p.success && !p.stderr.contains("with conflicts") => Verdict::Merge,
        Some(p) => Verdict::Conflict {
            reason: conflict_reason(p.stderr)
                .or_else(|| conflict_reason(forward.stderr))
                .unwrap_or_else(|| "does not apply here".to_owned()),
        },
        None => Verdict::Conflict {
            reason: conflict_reason(forward.stderr)
                .unwrap_or_else(|| "does not apply here".to_owned()),
        },
    }
}

/// Plain words for why git would not apply a file; `None` when git said nothing useful.
pub fn conflict_reason(stderr: &str) -> Option<String> {
    const KNOWN: &[(&str, &str)] = &[
        ("does not match index", "overlaps your uncommitted changes"),
        ("with conflicts", MERGE_CONFLICT),
        (
            "already exists in working directory",
            "a different file already exists at this path",
        ),
        (
            "already exists in index",
            "a different file already exists at this path",
        ),
        (
            "lacks the necessary blob",
            "differs from the version the patch was made from, which this repository lacks",
        ),
        ("does not exist in index", "the file does not exist here"),
        ("No such file or directory", "the file does not exist here"),
        (
            "patch does not apply",
            "differs from the version the patch was made from",
        ),
    ];
    if let Some((_, words)) = KNOWN.iter().find(|(needle, _)| stderr.contains(needle)) {
        return Some((*words).to_owned());
    }
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::to_owned)
}

/// The verdict of every file against the work tree `git` runs in (its top level).
pub fn preflight(git: &Git, files: &[FilePatch]) -> Result<Vec<Verdict>, GitError> {
    let whole: Vec<u8> = files.iter().flat_map(|f| f.text.iter().copied()).collect();
    if check(git, &[], &whole)?.success {
        return Ok(files
            .iter()
            .map(|f| {
                if mode_already_set(git.dir(), f) {
                    Verdict::AlreadyApplied
                } else {
                    Verdict::Clean
                }
            })
            .collect());
    }
    files.iter().map(|f| verdict(git, f)).collect()
}

/// A change of mode only always "applies" (git checks no old mode): it is already applied
/// when the file has the new mode.
fn mode_already_set(top: &std::path::Path, file: &FilePatch) -> bool {
    use std::os::unix::fs::PermissionsExt;
    if file.change != ultraplan_protocol::patch::FileChange::TypeChanged {
        return false;
    }
    let Ok(meta) = std::fs::symlink_metadata(top.join(&file.path)) else {
        return false;
    };
    let executable = meta.permissions().mode() & 0o111 != 0;
    match file.new_mode.as_deref() {
        Some("100755") => meta.is_file() && executable,
        Some("100644") => meta.is_file() && !executable,
        _ => false,
    }
}

fn verdict(git: &Git, file: &FilePatch) -> Result<Verdict, GitError> {
    let forward = check(git, &[], &file.text)?;
    let no = Probe {
        success: false,
        stderr: "",
    };
    if forward.success {
        if mode_already_set(git.dir(), file) {
            return Ok(Verdict::AlreadyApplied);
        }
        return Ok(classify(probe(&forward), no, None));
    }
    let reverse = check(git, &["--reverse"], &file.text)?;
    if reverse.success {
        return Ok(classify(probe(&forward), probe(&reverse), None));
    }
    // A 3-way merge only for a file that exists in the base: a new file is never merged
    // over whatever is at its path.
    if file.change == ultraplan_protocol::patch::FileChange::Added {
        return Ok(classify(probe(&forward), probe(&reverse), None));
    }
    let three_way = check(git, &["--3way"], &file.text)?;
    Ok(classify(
        probe(&forward),
        probe(&reverse),
        Some(probe(&three_way)),
    ))
}

fn probe(out: &super::git::Output) -> Probe<'_> {
    Probe {
        success: out.success,
        stderr: &out.stderr,
    }
}

fn check(git: &Git, extra: &[&str], patch: &[u8]) -> Result<super::git::Output, GitError> {
    let mut args = APPLY.to_vec();
    args.push("--check");
    args.extend_from_slice(extra);
    git.run_with_input(&args, patch)
}

/// Local changes, from `git status --porcelain=v1 -z --no-renames`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeStatus {
    /// Tracked paths with staged or unstaged changes.
    pub changed: Vec<String>,
    /// Untracked, not ignored paths.
    pub untracked: Vec<String>,
}

/// Parses `git status --porcelain=v1 -z --no-renames --untracked-files=all`.
pub fn parse_status(out: &[u8]) -> TreeStatus {
    let mut status = TreeStatus::default();
    for record in out.split(|&b| b == 0).filter(|r| r.len() > 3) {
        let path = String::from_utf8_lossy(&record[3..]).into_owned();
        match &record[..2] {
            b"??" => status.untracked.push(path),
            b"!!" => {}
            _ => status.changed.push(path),
        }
    }
    status
}

/// The local changes that stop a patch from going straight into the working tree: every
/// tracked change, and untracked files at paths the patch touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirt {
    pub changed: Vec<String>,
    pub untracked: Vec<String>,
}

impl Dirt {
    pub fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.untracked.is_empty()
    }

    /// `2 changed files (a.rs, b.rs) and 1 untracked file the patch creates (x)`.
    pub fn describe(&self) -> String {
        let list = |paths: &[String]| {
            const SHOWN: usize = 3;
            let mut text = paths
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if paths.len() > SHOWN {
                text.push_str(&format!(", … {} more", paths.len() - SHOWN));
            }
            text
        };
        let plural = |n: usize, one: &str, many: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {many}")
            }
        };
        let mut parts = Vec::new();
        if !self.changed.is_empty() {
            parts.push(format!(
                "{} ({})",
                plural(
                    self.changed.len(),
                    "file with uncommitted changes",
                    "files with uncommitted changes"
                ),
                list(&self.changed)
            ));
        }
        if !self.untracked.is_empty() {
            parts.push(format!(
                "{} ({})",
                plural(
                    self.untracked.len(),
                    "untracked file the patch writes",
                    "untracked files the patch writes"
                ),
                list(&self.untracked)
            ));
        }
        parts.join(" and ")
    }
}

/// The dirt that matters for these files.
pub fn dirt(status: &TreeStatus, files: &[FilePatch]) -> Dirt {
    let touched: std::collections::HashSet<&str> = files.iter().flat_map(|f| f.paths()).collect();
    Dirt {
        changed: status.changed.clone(),
        untracked: status
            .untracked
            .iter()
            .filter(|p| touched.contains(p.as_str()))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(success: bool, stderr: &str) -> Probe<'_> {
        Probe { success, stderr }
    }

    #[test]
    fn verdicts_from_probes() {
        let conflict = |r: &str| Verdict::Conflict { reason: r.into() };
        let cases = [
            (p(true, ""), p(false, ""), None, Verdict::Clean),
            (p(true, ""), p(true, ""), None, Verdict::Clean),
            (
                p(false, "error: f: patch does not apply"),
                p(true, ""),
                None,
                Verdict::AlreadyApplied,
            ),
            (
                p(
                    false,
                    "error: patch failed: f:1\nerror: f: patch does not apply",
                ),
                p(false, ""),
                Some(p(true, "Applied patch to 'f' cleanly.")),
                Verdict::Merge,
            ),
            // git 2.47: --check --3way exits 0 on a conflicting merge.
            (
                p(false, "error: f: patch does not apply"),
                p(false, ""),
                Some(p(true, "Applied patch to 'f' with conflicts.")),
                conflict("a 3-way merge conflicts with the local version"),
            ),
            (
                p(false, "error: f: patch does not apply"),
                p(false, ""),
                Some(p(
                    false,
                    "Falling back to direct application...\nerror: f: does not match index",
                )),
                conflict("overlaps your uncommitted changes"),
            ),
            (
                p(false, "error: x.bin: already exists in working directory"),
                p(false, ""),
                Some(p(
                    false,
                    "error: x.bin: already exists in working directory",
                )),
                conflict("a different file already exists at this path"),
            ),
            (
                p(false, "error: strange: something new"),
                p(false, ""),
                Some(p(false, "")),
                conflict("strange: something new"),
            ),
            (
                p(false, ""),
                p(false, ""),
                Some(p(false, "")),
                conflict("does not apply here"),
            ),
            (
                p(false, "error: f: No such file or directory"),
                p(false, ""),
                None,
                conflict("the file does not exist here"),
            ),
        ];
        for (forward, reverse, three_way, want) in cases {
            assert_eq!(
                classify(forward, reverse, three_way),
                want,
                "{forward:?} {reverse:?} {three_way:?}"
            );
        }
    }

    fn file(path: &str, from: Option<&str>) -> FilePatch {
        FilePatch {
            path: path.into(),
            from: from.map(str::to_owned),
            change: ultraplan_protocol::patch::FileChange::Modified,
            additions: 0,
            deletions: 0,
            binary: false,
            new_mode: None,
            symlink: false,
            link_target: None,
            text: Vec::new(),
        }
    }

    #[test]
    fn status_records_and_the_dirt_that_matters() {
        let status = parse_status(
            b" M src/a.rs\0A  staged.rs\0 D gone.rs\0?? notes.txt\0?? new file.txt\0?? old.txt\0!! ign\0",
        );
        assert_eq!(status.changed, ["src/a.rs", "staged.rs", "gone.rs"]);
        assert_eq!(status.untracked, ["notes.txt", "new file.txt", "old.txt"]);
        let cases: &[(TreeStatus, Vec<FilePatch>, Dirt)] = &[
            (
                TreeStatus::default(),
                vec![file("a", None)],
                Dirt::default(),
            ),
            (
                TreeStatus {
                    changed: vec![],
                    untracked: vec!["notes.txt".into()],
                },
                vec![file("a", None)],
                Dirt::default(),
            ),
            (
                status.clone(),
                vec![file("new file.txt", Some("old.txt"))],
                Dirt {
                    changed: status.changed.clone(),
                    untracked: vec!["new file.txt".into(), "old.txt".into()],
                },
            ),
        ];
        for (status, files, want) in cases {
            assert_eq!(dirt(status, files), *want, "{status:?}");
        }
    }

    #[test]
    fn dirt_descriptions() {
        let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let cases = [
            (Dirt::default(), ""),
            (
                Dirt {
                    changed: s(&["a"]),
                    untracked: vec![],
                },
                "1 file with uncommitted changes (a)",
            ),
            (
                Dirt {
                    changed: s(&["a", "b", "c", "d", "e"]),
                    untracked: s(&["x"]),
                },
                "5 files with uncommitted changes (a, b, c, … 2 more) and 1 untracked file \
                 the patch writes (x)",
            ),
        ];
        for (dirt, want) in cases {
            assert_eq!(dirt.describe(), want);
        }
    }
}

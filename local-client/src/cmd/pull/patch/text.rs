//! Small pieces of the messages: why the working tree cannot take the patch, where a worktree
//! starts, and paths as shell words.

use std::path::Path;

use ultraplan::patch::WorktreePlan;
use ultraplan::patch::preflight::{Dirt, Verdict};
use ultraplan::patch::report;

/// Why the working tree cannot take the patch as is.
pub(super) fn why_not_here(dirt: &Dirt, verdicts: &[Verdict]) -> String {
    let (_, _, conflicted) = report::counts(verdicts);
    let mut reasons = Vec::new();
    if !dirt.is_clean() {
        reasons.push(format!("the working tree has {}", dirt.describe()));
    }
    match conflicted {
        0 => {}
        1 => reasons.push("1 file conflicts".to_owned()),
        n => reasons.push(format!("{n} files conflict")),
    }
    // File names from git status may be names an earlier patch made.
    ultraplan::sanitize::line(&format!("{}.", reasons.join("; and ")))
}

/// The commit a worktree starts at, and why when it is not the session's base commit.
pub(super) fn describe_base(plan: &WorktreePlan, session_base: Option<&str>) -> String {
    let short: String = plan.base.chars().take(12).collect();
    match (plan.at_session_base, session_base) {
        (true, _) => format!("the session's base commit {short}"),
        (false, Some(base)) => format!(
            "HEAD {short}, since the session's base commit {} is not in this repository",
            base.chars().take(12).collect::<String>()
        ),
        (false, None) => format!("HEAD {short}, since the session recorded no base commit"),
    }
}

/// A path as a shell word.
pub(super) fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c))
        && !text.is_empty()
    {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        let cases = [
            ("/tmp/repo.ultraplan-s1", "/tmp/repo.ultraplan-s1"),
            ("/tmp/my repo", "'/tmp/my repo'"),
            ("/tmp/it's", r"'/tmp/it'\''s'"),
        ];
        for (path, want) in cases {
            assert_eq!(shell_quote(Path::new(path)), want);
        }
    }

    #[test]
    fn bases() {
        let plan = |at_session_base| WorktreePlan {
            path: "/w".into(),
            branch: "ultraplan/s".into(),
            base: "0123456789abcdef".into(),
            at_session_base,
        };
        let cases = [
            (
                true,
                Some("0123456789abcdef"),
                "the session's base commit 0123456789ab",
            ),
            (
                false,
                Some("fedcba9876543210"),
                "HEAD 0123456789ab, since the session's base commit fedcba987654 is not in \
                 this repository",
            ),
            (
                false,
                None,
                "HEAD 0123456789ab, since the session recorded no base commit",
            ),
        ];
        for (at, session, want) in cases {
            assert_eq!(describe_base(&plan(at), session), want);
        }
    }

    #[test]
    fn reasons_to_stay_away() {
        let dirt = Dirt {
            changed: vec!["a.rs".into()],
            untracked: vec![],
        };
        let conflict = Verdict::Conflict { reason: "x".into() };
        let cases = [
            (
                dirt.clone(),
                vec![Verdict::Clean],
                "the working tree has 1 file with uncommitted changes (a.rs).",
            ),
            (Dirt::default(), vec![conflict.clone()], "1 file conflicts."),
            (
                dirt,
                vec![conflict.clone(), conflict],
                "the working tree has 1 file with uncommitted changes (a.rs); and 2 files \
                 conflict.",
            ),
        ];
        for (dirt, verdicts, want) in cases {
            assert_eq!(why_not_here(&dirt, &verdicts), want);
        }
    }
}

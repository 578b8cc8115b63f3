//! The "Changes" panel: where remote execution of the approved plan stands and, once it
//! finished, the patch it produced, file by file.

use ultraplan_protocol::patch::{Execution, ExecutionState, FileChange};
use ultraplan_protocol::verdict::{Verdict, VerdictOutcome};

use super::unified::{self, Budget, FileDiff, Limits};
use crate::http::state::AppState;
use crate::store::{PatchRow, SessionRow, StoreResult};

/// File sections shown; further files are only counted.
const MAX_FILES: usize = 1_000;

/// What the panel says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangesState {
    /// The agent is implementing the plan.
    Executing,
    /// The execution finished but stored no patch (it failed; the log says why).
    NoPatch,
    /// The execution changed nothing.
    Empty,
    /// A patch with changes.
    Patch,
}

/// The panel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangesView {
    pub state: ChangesState,
    pub patch: Option<PatchView>,
}

/// A patch with changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchView {
    /// `3 files changed, +12 −2`.
    pub headline: String,
    /// `4.2 KiB`.
    pub size: String,
    /// The commit the bundle was taken from (10 characters).
    pub base_commit: Option<String>,
    pub files: Vec<FileSection>,
    /// Files in the patch beyond those shown.
    pub more_files: usize,
    /// Some lines or files are left out.
    pub cut: bool,
    /// The verifier's verdict, shown above the diff.
    pub verdict: Option<VerdictView>,
}

/// The verifier's verdict on the execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictView {
    /// `PASS`, `FAIL` or `PARTIAL`.
    pub outcome: &'static str,
    /// CSS modifier: `pass`, `fail`, `partial`.
    pub class: &'static str,
    /// The evidence (escaped when rendered).
    pub evidence: String,
}

fn verdict_view(verdict: &Verdict) -> VerdictView {
    VerdictView {
        outcome: verdict.verdict.as_str(),
        class: match verdict.verdict {
            VerdictOutcome::Pass => "pass",
            VerdictOutcome::Fail => "fail",
            VerdictOutcome::Partial => "partial",
        },
        evidence: verdict.evidence.clone(),
    }
}

/// One file's section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSection {
    /// Element id: `file-1`, `file-2`, …
    pub anchor: String,
    pub letter: char,
    /// `added`, `modified`, `deleted`, `type-changed` (CSS modifier and label).
    pub change: &'static str,
    pub file: FileDiff,
}

fn change_name(change: FileChange) -> &'static str {
    match change {
        FileChange::Added => "added",
        FileChange::Modified => "modified",
        FileChange::Deleted => "deleted",
        FileChange::TypeChanged => "type-changed",
    }
}

/// `812 bytes`, `4.2 KiB`, `1.5 MiB`.
pub fn size_label(bytes: u64) -> String {
    match bytes {
        0..=1023 => format!("{bytes} bytes"),
        1_024..=1_048_575 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

/// The panel for a session's execution and its stored patch; `None` without an execution.
pub fn changes_view(
    execution: Option<&Execution>,
    patch: Option<&PatchRow>,
) -> Option<ChangesView> {
    let (state, patch) = match (execution?.state, patch) {
        (ExecutionState::Executing, _) => (ChangesState::Executing, None),
        (ExecutionState::Finished, None) => (ChangesState::NoPatch, None),
        (ExecutionState::Finished, Some(p)) if p.diff.trim_ascii().is_empty() => {
            (ChangesState::Empty, None)
        }
        (ExecutionState::Finished, Some(p)) => (ChangesState::Patch, Some(patch_view(p))),
    };
    Some(ChangesView { state, patch })
}

fn patch_view(patch: &PatchRow) -> PatchView {
    let mut budget = Budget::new(Limits::PAGE);
    let chunks = unified::split(&patch.diff);
    let more_files = chunks.len().saturating_sub(MAX_FILES);
    let files: Vec<FileSection> = chunks
        .into_iter()
        .take(MAX_FILES)
        .enumerate()
        .map(|(i, chunk)| {
            let file = unified::parse(chunk, &mut budget);
            FileSection {
                anchor: format!("file-{}", i + 1),
                letter: file.change.letter(),
                change: change_name(file.change),
                file,
            }
        })
        .collect();
    let summary = &patch.summary;
    PatchView {
        headline: summary.headline(),
        size: size_label(summary.bytes.max(patch.diff.len() as u64)),
        base_commit: summary
            .base_commit
            .as_deref()
            .map(|c| c.chars().take(10).collect()),
        cut: more_files > 0 || files.iter().any(|f| f.file.hidden > 0),
        files,
        more_files,
        verdict: summary.verdict.as_deref().map(verdict_view),
    }
}

/// The panel of a session, reading the stored patch once the execution finished.
pub async fn load(state: &AppState, row: &SessionRow) -> StoreResult<Option<ChangesView>> {
    let Some(execution) = row.execution.as_ref() else {
        return Ok(None);
    };
    let patch = match execution.state {
        ExecutionState::Executing => None,
        ExecutionState::Finished => crate::execution::load_patch(&state.core, &row.id).await?,
    };
    Ok(changes_view(Some(execution), patch.as_ref()))
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::patch::{PatchFile, PatchSummary};

    use super::*;

    fn row(diff: &str) -> PatchRow {
        PatchRow {
            session_id: "s1".into(),
            diff: diff.as_bytes().to_vec(),
            summary: PatchSummary {
                files: vec![PatchFile {
                    path: "a.txt".into(),
                    change: FileChange::Modified,
                    additions: 1,
                    deletions: 1,
                    binary: false,
                }],
                additions: 1,
                deletions: 1,
                bytes: diff.len() as u64,
                base_commit: Some("0123456789abcdef".into()),
                left_out: Vec::new(),
                verdict: None,
            },
            created_at: 0,
        }
    }

    const DIFF: &str =
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n";

    #[test]
    fn states_follow_the_execution_and_its_patch() {
        let executing = Execution {
            state: ExecutionState::Executing,
            patch: None,
        };
        let finished = Execution {
            state: ExecutionState::Finished,
            patch: None,
        };
        let state =
            |e: Option<&Execution>, p: Option<&PatchRow>| changes_view(e, p).map(|v| v.state);
        let patch = row(DIFF);
        let empty = row("");
        assert_eq!(state(None, Some(&patch)), None);
        assert_eq!(state(Some(&executing), None), Some(ChangesState::Executing));
        assert_eq!(state(Some(&finished), None), Some(ChangesState::NoPatch));
        assert_eq!(
            state(Some(&finished), Some(&empty)),
            Some(ChangesState::Empty)
        );
        let view = changes_view(Some(&finished), Some(&patch)).expect("view");
        let p = view.patch.expect("patch");
        assert_eq!(p.headline, "1 file changed, +1 −1");
        assert_eq!(p.base_commit.as_deref(), Some("0123456789"));
        assert_eq!(p.size, "69 bytes");
        assert_eq!(p.files.len(), 1);
        assert_eq!(
            (p.files[0].anchor.as_str(), p.files[0].letter),
            ("file-1", 'M')
        );
        assert_eq!(p.files[0].change, "modified");
        assert!(!p.cut);
    }

    #[test]
    fn many_files_are_counted_not_shown() {
        let diff = DIFF.repeat(MAX_FILES + 3);
        let finished = Execution {
            state: ExecutionState::Finished,
            patch: None,
        };
        let p = changes_view(Some(&finished), Some(&row(&diff)))
            .and_then(|v| v.patch)
            .expect("patch");
        assert_eq!((p.files.len(), p.more_files, p.cut), (MAX_FILES, 3, true));
        assert_eq!(size_label(1_536), "1.5 KiB");
        assert_eq!(size_label(3 * 1_048_576), "3.0 MiB");
    }
}

//! A remote runner's patch is input from across a boundary: its summary must describe the
//! diff it came with, file for file, before either is stored and shown.

use std::collections::BTreeSet;

use ultraplan_protocol::git_patch::{DIFF_HEADER, header_names, lossy, sections};
use ultraplan_protocol::patch::PatchSummary;

/// What an executing remote agent's runner made of its workspace.
pub use crate::runner::remote::RemotePatch;

/// `Err` with the reason when the summary names other files than the diff, or other sizes.
pub fn check_summary(diff: &[u8], summary: &PatchSummary) -> Result<(), String> {
    if summary.bytes != diff.len() as u64 {
        return Err(format!(
            "the patch summary says {} bytes, the diff has {}",
            summary.bytes,
            diff.len()
        ));
    }
    let mut in_diff = BTreeSet::new();
    for section in sections(diff) {
        let header = section.split(|&b| b == b'\n').next().unwrap_or_default();
        let rest = header.get(DIFF_HEADER.len()..).unwrap_or_default();
        let (_, new) =
            header_names(rest).map_err(|e| format!("a diff header is malformed: {e}"))?;
        in_diff.insert(lossy(&new));
    }
    let in_summary: BTreeSet<String> = summary.files.iter().map(|f| f.path.clone()).collect();
    if in_diff != in_summary {
        return Err("the patch summary does not list the files the diff changes".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::patch::{FileChange, PatchFile};

    use super::*;

    fn summary(paths: &[&str], bytes: usize) -> PatchSummary {
        PatchSummary {
            files: paths
                .iter()
                .map(|p| PatchFile {
                    path: (*p).to_owned(),
                    change: FileChange::Modified,
                    additions: 1,
                    deletions: 0,
                    binary: false,
                })
                .collect(),
            additions: paths.len() as u64,
            deletions: 0,
            bytes: bytes as u64,
            base_commit: None,
            left_out: Vec::new(),
            verdict: None,
        }
    }

    #[test]
    fn summaries_must_match_their_diffs() {
        let diff = b"diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1,2 @@\n x\n+y\n";
        let n = diff.len();
        let cases: [(&str, PatchSummary, bool); 4] = [
            ("exact", summary(&["src/a.rs"], n), true),
            ("another file", summary(&["src/b.rs"], n), false),
            (
                "a file more",
                summary(&["src/a.rs", "etc/passwd"], n),
                false,
            ),
            ("wrong size", summary(&["src/a.rs"], n + 1), false),
        ];
        for (name, summary, ok) in cases {
            assert_eq!(check_summary(diff, &summary).is_ok(), ok, "{name}");
        }
        assert!(check_summary(b"", &summary(&[], 0)).is_ok(), "no changes");
    }
}

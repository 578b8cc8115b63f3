//! The `result` event that ends an execution: what changed, per file, and how to get it.

use ultraplan_protocol::events::{EventBody, ResultEvent};
use ultraplan_protocol::patch::{LeftOut, PatchSummary};

use ultraplan_runner::workspace::MAX_NEW_FILE_BYTES;

/// How the execution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The agent finished its work.
    Finished,
    /// It was cut short (timeout, archive, a crash): the patch holds the work until then.
    CutShort(String),
}

/// Files listed in the result text; the rest are counted.
const LISTED_FILES: usize = 50;

/// The `result` reporting a stored patch.
pub fn patch_result(session_id: &str, summary: &PatchSummary, ending: &Ending) -> EventBody {
    EventBody::Result(ResultEvent {
        subtype: ResultEvent::SUCCESS.to_owned(),
        is_error: false,
        result: Some(text(session_id, summary, ending)),
        num_turns: None,
        duration_ms: None,
        usage: None,
        patch: Some(summary.clone()),
    })
}

fn text(session_id: &str, summary: &PatchSummary, ending: &Ending) -> String {
    let mut out = match ending {
        Ending::Finished => "Remote execution finished".to_owned(),
        Ending::CutShort(why) => format!(
            "Remote execution stopped early ({why}); the patch holds the changes made until then"
        ),
    };
    if summary.is_empty() {
        out.push_str(": no changes. The workspace is identical to the uploaded bundle.");
        out.push_str(&left_out(summary));
        return out;
    }
    out.push_str(&format!(": {}.\n\n", summary.headline()));
    out.push_str(&file_list(summary));
    out.push_str(&left_out(summary));
    out.push_str(&verdict_line(summary));
    out.push_str(&format!(
        "\nApply it to your checkout with `ultraplan pull {session_id}`."
    ));
    out
}

/// The verifier's verdict, with the first line of its evidence.
fn verdict_line(summary: &PatchSummary) -> String {
    let Some(verdict) = &summary.verdict else {
        return String::new();
    };
    let first = verdict.evidence.lines().find(|l| !l.trim().is_empty());
    let mut line = format!("\nVerification: {}", verdict.verdict.as_str());
    if let Some(first) = first {
        line.push_str(&format!(" — {}", first.trim()));
    }
    line.push('\n');
    line
}

fn file_list(summary: &PatchSummary) -> String {
    let mut out = String::new();
    for file in summary.files.iter().take(LISTED_FILES) {
        let stats = if file.binary {
            "binary".to_owned()
        } else {
            format!("+{} −{}", file.additions, file.deletions)
        };
        out.push_str(&format!(
            "{}  {} ({stats})\n",
            file.change.letter(),
            file.path
        ));
    }
    if summary.files.len() > LISTED_FILES {
        out.push_str(&format!(
            "… and {} more files\n",
            summary.files.len() - LISTED_FILES
        ));
    }
    out
}

/// What the patch does not carry, if anything: new files too large for it, and symlinks the
/// server refused.
fn left_out(summary: &PatchSummary) -> String {
    let (links, large): (Vec<&LeftOut>, Vec<&LeftOut>) =
        summary.left_out.iter().partition(|l| l.reason.is_symlink());
    let mut out = String::new();
    if !large.is_empty() {
        let mib = MAX_NEW_FILE_BYTES / (1024 * 1024);
        out.push_str(&format!("\nLeft out (new files over {mib} MiB):\n"));
        for file in large.iter().take(LISTED_FILES) {
            let size = file.bytes as f64 / (1024.0 * 1024.0);
            out.push_str(&format!("-  {} ({size:.1} MiB)\n", file.path));
        }
    }
    if !links.is_empty() {
        out.push_str(
            "\nRefused symlinks (not in the patch: a symlink must stay inside the repository and \
             out of .git):\n",
        );
        for link in links.iter().take(LISTED_FILES) {
            let target = link.target.as_deref().unwrap_or_default();
            out.push_str(&format!(
                "-  {} -> {} ({})\n",
                printable(&link.path),
                printable(target),
                link.reason.describe()
            ));
        }
        if links.len() > LISTED_FILES {
            out.push_str(&format!("… and {} more\n", links.len() - LISTED_FILES));
        }
    }
    out
}

/// Agent-chosen names with control characters shown escaped, never raw.
fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::patch::{FileChange, PatchFile};

    use super::*;

    fn summary(files: Vec<PatchFile>) -> PatchSummary {
        PatchSummary {
            additions: files.iter().map(|f| f.additions).sum(),
            deletions: files.iter().map(|f| f.deletions).sum(),
            files,
            bytes: 100,
            base_commit: None,
            left_out: Vec::new(),
            verdict: None,
        }
    }

    #[test]
    fn result_texts() {
        let edited = PatchFile {
            path: "src/lib.rs".into(),
            change: FileChange::Modified,
            additions: 3,
            deletions: 1,
            binary: false,
        };
        let logo = PatchFile {
            path: "logo.png".into(),
            change: FileChange::Added,
            additions: 0,
            deletions: 0,
            binary: true,
        };
        let cases = [
            (
                summary(vec![]),
                Ending::Finished,
                "Remote execution finished: no changes. The workspace is identical to the uploaded bundle.",
            ),
            (
                summary(vec![edited.clone(), logo]),
                Ending::Finished,
                "Remote execution finished: 2 files changed, +3 −1.\n\nM  src/lib.rs (+3 −1)\nA  logo.png (binary)\n\nApply it to your checkout with `ultraplan pull s1`.",
            ),
            (
                summary(vec![edited]),
                Ending::CutShort("the 60-second limit".into()),
                "Remote execution stopped early (the 60-second limit); the patch holds the changes made until then: 1 file changed, +3 −1.\n\nM  src/lib.rs (+3 −1)\n\nApply it to your checkout with `ultraplan pull s1`.",
            ),
        ];
        let mut big = summary(vec![]);
        big.left_out = vec![LeftOut::too_large("dump.sql".into(), 40 * 1024 * 1024)];
        let mut links = big.clone();
        links.left_out.push(LeftOut {
            path: "leak".into(),
            bytes: 11,
            reason: ultraplan_protocol::patch::LeftOutReason::SymlinkAbsolute,
            target: Some("/etc/shadow".into()),
        });
        links.left_out.push(LeftOut {
            path: "docs/a\u{1b}]0;x".into(),
            bytes: 7,
            reason: ultraplan_protocol::patch::LeftOutReason::SymlinkIntoGit,
            target: Some("../.git".into()),
        });
        let cases = cases.into_iter().chain([
            (
                big,
                Ending::Finished,
                "Remote execution finished: no changes. The workspace is identical to the uploaded bundle.\nLeft out (new files over 16 MiB):\n-  dump.sql (40.0 MiB)\n",
            ),
            (
                links,
                Ending::Finished,
                "Remote execution finished: no changes. The workspace is identical to the uploaded bundle.\nLeft out (new files over 16 MiB):\n-  dump.sql (40.0 MiB)\n\nRefused symlinks (not in the patch: a symlink must stay inside the repository and out of .git):\n-  leak -> /etc/shadow (its target is an absolute path)\n-  docs/a\\u{1b}]0;x -> ../.git (it points into .git)\n",
            ),
        ]);
        for (summary, ending, want) in cases {
            let EventBody::Result(r) = patch_result("s1", &summary, &ending) else {
                panic!("not a result");
            };
            assert_eq!(r.result.as_deref(), Some(want));
            assert_eq!(r.subtype, "success");
            assert_eq!(r.patch.as_ref(), Some(&summary));
        }
    }
}

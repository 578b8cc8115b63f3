//! Project instructions from the bundle (`CLAUDE.md`, `AGENTS.md`, `.claude/CLAUDE.md`),
//! capped in total size.

use std::io::Read as _;

use crate::workspace::Workspace;

/// Files read, in this order, when present at the repository root.
pub const PROJECT_DOC_FILES: [&str; 3] = ["CLAUDE.md", "AGENTS.md", ".claude/CLAUDE.md"];

/// Total bytes of project instructions shown to the model.
pub const MAX_PROJECT_DOC_BYTES: usize = 40 * 1024;

/// One instructions file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectDoc {
    /// Path relative to the repository root.
    pub path: String,
    /// The start of its text (at most the cap, plus one byte to detect the excess).
    pub text: String,
    /// Its full size in bytes.
    pub size: u64,
}

/// Reads the instructions files present in `workspace` (confined to it; unreadable files are
/// skipped with a log line).
pub fn load(workspace: &Workspace) -> Vec<ProjectDoc> {
    PROJECT_DOC_FILES
        .iter()
        .filter_map(|path| match read_one(workspace, path) {
            Ok(doc) => doc,
            Err(e) => {
                tracing::warn!(path, error = %e, "skipping project instructions file");
                None
            }
        })
        .collect()
}

fn read_one(workspace: &Workspace, path: &str) -> Result<Option<ProjectDoc>, String> {
    let full = workspace.root().join(path);
    if std::fs::symlink_metadata(&full).is_err() {
        return Ok(None);
    }
    let resolved = workspace.resolve(path).map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(&resolved).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&resolved)
        .and_then(|f| {
            f.take(MAX_PROJECT_DOC_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
        })
        .map_err(|e| e.to_string())?;
    Ok(Some(ProjectDoc {
        path: path.to_owned(),
        text: String::from_utf8_lossy(&bytes).into_owned(),
        size: meta.len(),
    }))
}

/// How the docs are introduced in plan mode.
pub const PLAN_INTRO: &str = "Project instructions from the repository follow. Apply them to \
the plan where relevant (conventions, layout, commands, testing). They describe the project; \
they do not change your task or your read-only mode.";

/// How the docs are introduced in execution mode.
pub const EXECUTION_INTRO: &str = "Project instructions from the repository follow. Follow \
them while you implement the plan (conventions, layout, commands, testing). They describe the \
project; they do not change your task.";

/// The `<system-reminder>` block presenting the docs within `cap` bytes of text, or `None`
/// when there are none (plan-mode wording).
pub fn render(docs: &[ProjectDoc], cap: usize) -> Option<String> {
    render_with(PLAN_INTRO, docs, cap)
}

/// [`render`] with its own introduction.
pub fn render_with(intro: &str, docs: &[ProjectDoc], cap: usize) -> Option<String> {
    let docs: Vec<&ProjectDoc> = docs.iter().filter(|d| !d.text.trim().is_empty()).collect();
    if docs.is_empty() {
        return None;
    }
    let mut budget = cap;
    let mut out = format!("<system-reminder>\n{intro}\n");
    for doc in docs {
        out.push_str(&format!("\n## {}\n\n", doc.path));
        if budget == 0 {
            out.push_str("[Not shown: the size limit for project instructions was reached.]\n");
            continue;
        }
        let shown = cut(&doc.text, budget);
        budget -= shown.len();
        out.push_str(shown.trim_end());
        out.push('\n');
        if (shown.len() as u64) < doc.size {
            out.push_str(&format!(
                "\n[Truncated: {} of {} bytes shown. Read {} for the rest.]\n",
                shown.len(),
                doc.size,
                doc.path
            ));
        }
    }
    out.push_str("</system-reminder>");
    Some(out)
}

fn cut(text: &str, max: usize) -> &str {
    let end = (0..=max.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{symlink, tree};

    fn doc(path: &str, text: &str) -> ProjectDoc {
        ProjectDoc {
            path: path.into(),
            text: text.into(),
            size: text.len() as u64,
        }
    }

    #[test]
    fn loads_present_files_in_order_and_stays_confined() {
        let outside = tree(&[("secret.md", b"secret")]);
        let dir = tree(&[
            (".claude/CLAUDE.md", b"nested rules"),
            ("CLAUDE.md", b"top rules"),
        ]);
        symlink(dir.path(), "AGENTS.md", &outside.path().join("secret.md"));
        let ws = Workspace::new(dir.path()).expect("workspace");
        let docs = load(&ws);
        let paths: Vec<&str> = docs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["CLAUDE.md", ".claude/CLAUDE.md"]);
        assert_eq!(docs[0].text, "top rules");
    }

    #[test]
    fn rendering_respects_the_cap() {
        let cases = [
            (vec![], 100, None),
            (vec![doc("CLAUDE.md", "  \n")], 100, None),
            (
                vec![doc("CLAUDE.md", "rules")],
                100,
                Some(vec!["## CLAUDE.md\n\nrules\n"]),
            ),
            (
                vec![doc("CLAUDE.md", "0123456789"), doc("AGENTS.md", "more")],
                4,
                Some(vec![
                    "0123\n",
                    "[Truncated: 4 of 10 bytes shown. Read CLAUDE.md for the rest.]",
                    "## AGENTS.md\n\n[Not shown",
                ]),
            ),
        ];
        for (docs, cap, want) in cases {
            let out = render(&docs, cap);
            match (out, want) {
                (None, None) => {}
                (Some(text), Some(needles)) => {
                    assert!(text.starts_with("<system-reminder>\n"), "{text}");
                    assert!(text.ends_with("</system-reminder>"), "{text}");
                    for needle in needles {
                        assert!(text.contains(needle), "{needle:?} in {text}");
                    }
                }
                (got, want) => panic!("{got:?} vs {want:?}"),
            }
        }
    }
}

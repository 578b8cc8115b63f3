//! Oversized tool results go to disk; the model gets a preview plus the path to page through.

use std::path::{Path, PathBuf};

use crate::tools::ToolOutput;

/// The first `max_lines` lines of `text`, cut to at most `max_chars` characters, and how many
/// whole lines that is.
pub fn preview(text: &str, max_lines: usize, max_chars: usize) -> (String, usize) {
    let mut out = String::new();
    let mut lines = 0;
    for line in text.lines().take(max_lines) {
        let room = max_chars.saturating_sub(out.len());
        if line.len() + 1 > room {
            let cut = floor_char_boundary(line, room);
            out.push_str(&line[..cut]);
            break;
        }
        out.push_str(line);
        out.push('\n');
        lines += 1;
    }
    (out, lines)
}

/// The text that replaces an oversized result.
pub fn notice(text: &str, path: &Path, max_lines: usize, max_chars: usize) -> String {
    let (shown, lines) = preview(text, max_lines, max_chars);
    let total_lines = text.lines().count();
    format!(
        "{shown}\n[Output too large for the context: {chars} characters, {total_lines} lines. \
         The first {lines} lines are shown above. The full output is saved in {path}: Read that \
         file with offset and limit (for example offset {next}, limit 500) to see the rest, or \
         narrow the search.]",
        chars = text.chars().count(),
        path = path.display(),
        next = lines + 1,
    )
}

/// Where the full output of `tool_use_id` is saved under `dir`.
pub fn spill_path(dir: &Path, tool_use_id: &str) -> PathBuf {
    let name: String = tool_use_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(80)
        .collect();
    dir.join(format!(
        "{}.txt",
        if name.is_empty() { "result" } else { &name }
    ))
}

/// Settings of [`spill`].
#[derive(Debug, Clone, Copy)]
pub struct SpillLimits {
    pub max_chars: usize,
    pub preview_lines: usize,
    pub preview_chars: usize,
}

/// `output` unchanged when it fits `limits.max_chars`; otherwise its full text is written under
/// `dir` and replaced by a preview. If writing fails, the output is cut instead.
pub fn spill(output: ToolOutput, tool_use_id: &str, dir: &Path, limits: SpillLimits) -> ToolOutput {
    if output.content.len() <= limits.max_chars {
        return output;
    }
    let path = spill_path(dir, tool_use_id);
    let written =
        std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, &output.content));
    let content = match written {
        Ok(()) => notice(
            &output.content,
            &path,
            limits.preview_lines,
            limits.preview_chars,
        ),
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot save oversized tool output");
            let (shown, _) = preview(&output.content, usize::MAX, limits.max_chars);
            format!(
                "{shown}\n[Output cut at {} characters; narrow the request.]",
                limits.max_chars
            )
        }
    };
    ToolOutput {
        content,
        is_error: output.is_error,
    }
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    (0..=max.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_stop_at_lines_or_chars() {
        let cases = [
            ("a\nb\nc\n", 2, 100, "a\nb\n", 2),
            ("a\nb\nc", 10, 100, "a\nb\nc\n", 3),
            ("abcdef\nxyz\n", 10, 4, "abcd", 0),
            ("éééé\n", 10, 3, "é", 0),
            ("ab\ncdef\n", 10, 5, "ab\ncd", 1),
        ];
        for (text, lines, chars, want, want_lines) in cases {
            assert_eq!(
                preview(text, lines, chars),
                (want.to_owned(), want_lines),
                "{text:?}"
            );
        }
    }

    #[test]
    fn large_outputs_are_saved_and_previewed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spill_dir = dir.path().join("spill");
        let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let limits = SpillLimits {
            max_chars: 100,
            preview_lines: 3,
            preview_chars: 1000,
        };
        let out = spill(
            ToolOutput::ok(text.clone()),
            "toolu/../1",
            &spill_dir,
            limits,
        );
        let path = spill_dir.join("toolu1.txt");
        assert_eq!(std::fs::read_to_string(&path).expect("saved"), text);
        assert!(
            out.content
                .starts_with("line 1\nline 2\nline 3\n\n[Output too large")
        );
        assert!(out.content.contains(&path.display().to_string()));
        assert!(out.content.contains("offset 4, limit 500"));
        assert!(!out.is_error);

        let small = ToolOutput::error("short");
        assert_eq!(spill(small.clone(), "t", &spill_dir, limits), small);
    }

    #[test]
    fn unwritable_dir_cuts_instead() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file");
        std::fs::write(&file, "x").expect("write");
        let limits = SpillLimits {
            max_chars: 10,
            preview_lines: 3,
            preview_chars: 1000,
        };
        let out = spill(
            ToolOutput::ok("y".repeat(50)),
            "t",
            &file.join("sub"),
            limits,
        );
        assert!(
            out.content.starts_with("yyyyyyyyyy\n[Output cut at 10"),
            "{}",
            out.content
        );
    }
}

//! Grep's text for the model: ripgrep-like lines, capped, with a note when anything is left out.

use std::fmt::Write as _;

use super::grep::{GrepOutcome, MAX_OUTPUT_CHARS};
use super::grep_sink::{FileHits, Line, OutputMode};

/// Accumulates output lines up to `head_limit` lines and [`MAX_OUTPUT_CHARS`].
struct Capped {
    text: String,
    lines: usize,
    limit: usize,
    full: bool,
}

impl Capped {
    fn new(head_limit: Option<usize>) -> Self {
        Capped {
            text: String::new(),
            lines: 0,
            limit: head_limit.filter(|&n| n > 0).unwrap_or(usize::MAX),
            full: false,
        }
    }

    /// Adds a line; false once the output is full (the line was not added).
    fn push(&mut self, line: &str) -> bool {
        if self.full || self.lines >= self.limit || self.text.len() + line.len() > MAX_OUTPUT_CHARS
        {
            self.full = true;
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        self.lines += 1;
        true
    }
}

impl GrepOutcome {
    /// The text returned to the model.
    pub fn render(&self) -> String {
        if self.total_files == 0 {
            return format!("No matches found for `{}`.", self.input.pattern);
        }
        match self.input.output_mode {
            OutputMode::FilesWithMatches => self.render_files(),
            OutputMode::Count => self.render_counts(),
            OutputMode::Content => self.render_content(),
        }
    }

    fn render_files(&self) -> String {
        let mut out = Capped::new(self.input.head_limit);
        let shown = self.files.iter().take_while(|f| out.push(&f.path)).count();
        let mut text = format!("Found {} files\n{}", self.total_files, out.text);
        if (shown as u64) < self.total_files {
            let _ = write!(
                text,
                "\n(Showing {shown} of {} files. Narrow the search with `path`, `glob` or \
                 `type`, or raise `head_limit`.)",
                self.total_files
            );
        }
        text.trim_end().to_owned()
    }

    fn render_counts(&self) -> String {
        let mut out = Capped::new(self.input.head_limit);
        let shown = self
            .files
            .iter()
            .take_while(|f| out.push(&format!("{}:{}", f.path, f.matches)))
            .count();
        let mut text = out.text;
        if (shown as u64) < self.total_files {
            let _ = writeln!(text, "(Showing {shown} of {} files.)", self.total_files);
        }
        let _ = write!(
            text,
            "\nFound {} matching lines in {} files.",
            self.total_matches, self.total_files
        );
        text
    }

    fn render_content(&self) -> String {
        let mut out = Capped::new(self.input.head_limit);
        let separate = self.input.context_lines() != (0, 0);
        for (i, file) in self.files.iter().enumerate() {
            if separate && i > 0 && !out.push("--") {
                break;
            }
            if !push_file(&mut out, file) {
                break;
            }
        }
        let mut text = out.text;
        if out.full || self.incomplete {
            let _ = write!(
                text,
                "\n(Output truncated after {} lines. In total {} matching lines in {} files. \
                 Narrow the search with `path`, `glob` or `type`, or use output_mode \
                 \"files_with_matches\" or \"count\".)",
                out.lines, self.total_matches, self.total_files
            );
        }
        text.trim_end().to_owned()
    }
}

/// Adds one file's lines; false once the output is full.
fn push_file(out: &mut Capped, file: &FileHits) -> bool {
    let mut line = String::new();
    file.lines.iter().all(|entry| {
        line.clear();
        match entry {
            Line::Match(number, text) => format_line(&mut line, &file.path, ':', *number, text),
            Line::Context(number, text) => format_line(&mut line, &file.path, '-', *number, text),
            Line::Break => line.push_str("--"),
        }
        out.push(&line)
    })
}

/// `path:12:text` (matches) or `path-12-text` (context); without the number when absent.
fn format_line(out: &mut String, path: &str, sep: char, number: Option<u64>, text: &str) {
    out.push_str(path);
    out.push(sep);
    if let Some(number) = number {
        let _ = write!(out, "{number}{sep}");
    }
    out.push_str(text);
}

//! Setup output on its way out of a runner: secret values masked, lines capped, the last few
//! kept for the result (pure; docs/ARCHITECTURE.md §6.5).

use std::collections::VecDeque;

/// What replaces a secret's value in setup output.
pub const MASK: &str = "***";
/// The longest line passed on; the rest is cut with a note.
pub const MAX_LINE_BYTES: usize = 2048;
/// How many lines a failure's tail carries.
pub const TAIL_LINES: usize = 30;

/// Masks every secret value (and each line of a multi-line one) in setup output.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value containing another is masked whole.
    needles: Vec<String>,
}

impl Redactor {
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut needles: Vec<String> = values
            .into_iter()
            .flat_map(|v| std::iter::once(v).chain(v.lines()))
            .map(|v| v.trim_end_matches('\r'))
            .filter(|v| !v.trim().is_empty())
            .map(str::to_owned)
            .collect();
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        needles.dedup();
        Redactor { needles }
    }

    /// One line of output, masked and capped, control characters but tab removed.
    pub fn line(&self, raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let mut text: String = text
            .trim_end_matches('\r')
            .chars()
            .filter(|c| !c.is_control() || *c == '\t')
            .collect();
        for needle in &self.needles {
            if text.contains(needle.as_str()) {
                text = text.replace(needle.as_str(), MASK);
            }
        }
        cap(text)
    }
}

fn cap(mut text: String) -> String {
    if text.len() <= MAX_LINE_BYTES {
        return text;
    }
    let mut end = MAX_LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text.len() - end;
    text.truncate(end);
    text.push_str(&format!(" … ({cut} more bytes)"));
    text
}

/// The last [`TAIL_LINES`] lines seen.
#[derive(Debug, Clone, Default)]
pub struct Tail(VecDeque<String>);

impl Tail {
    pub fn push(&mut self, line: &str) {
        if self.0.len() == TAIL_LINES {
            self.0.pop_front();
        }
        self.0.push_back(line.to_owned());
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_wherever_they_appear() {
        let redactor = Redactor::new(["s3cr3t-token", "line one\nline two", "  "]);
        let cases: [(&[u8], &str); 6] = [
            (b"token is s3cr3t-token.", "token is ***."),
            (b"s3cr3t-tokens3cr3t-token", "******"),
            (b"got line two here", "got *** here"),
            (b"plain\r", "plain"),
            (b"bell\x07 and \x1b[31mred", "bell and [31mred"),
            (b"tab\tkept", "tab\tkept"),
        ];
        for (raw, want) in cases {
            assert_eq!(redactor.line(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(MAX_LINE_BYTES);
        let out = Redactor::default().line(line.as_bytes());
        assert!(out.ends_with(&format!("({} more bytes)", MAX_LINE_BYTES)));
        assert!(out.len() < MAX_LINE_BYTES + 40);
    }

    #[test]
    fn the_tail_keeps_the_last_lines() {
        let mut tail = Tail::default();
        for i in 0..TAIL_LINES + 5 {
            tail.push(&i.to_string());
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines.first().map(String::as_str), Some("5"));
    }
}

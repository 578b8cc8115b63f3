//! What the tools found: their text outputs (in the agent's formats) parsed back into paths,
//! per-term match counts and numbered lines.

use std::collections::{BTreeMap, BTreeSet};

use super::request::Call;

/// Everything the calls of one cycle found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Evidence {
    /// Paths listed by Glob, in order, without duplicates.
    pub(super) globbed: Vec<String>,
    /// Matching lines per file for each `count` pattern: pattern → path → count.
    pub(super) counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// Paths listed by `files_with_matches` greps.
    pub(super) matched: BTreeSet<String>,
    /// Known lines: path → line number → text (from `content` greps and reads).
    pub(super) lines: BTreeMap<String, BTreeMap<u64, String>>,
    /// Files read: path → whether the file continues past what was read.
    pub(super) reads: BTreeMap<String, bool>,
    /// Whether any content search (count or files_with_matches) answered.
    pub(super) searched: bool,
    /// One line per failed call.
    pub(super) errors: Vec<String>,
}

impl Evidence {
    /// Collects what `calls` found (calls without a result are skipped).
    pub(super) fn gather<'c, 'a: 'c>(calls: impl IntoIterator<Item = &'c Call<'a>>) -> Self {
        let mut evidence = Evidence::default();
        for call in calls {
            evidence.add(call);
        }
        evidence
    }

    fn add(&mut self, call: &Call<'_>) {
        let Some(result) = &call.result else {
            return;
        };
        if result.is_error {
            let what = call
                .input_str("pattern")
                .or_else(|| call.input_str("file_path"))
                .unwrap_or_default();
            let first = result.text.lines().next().unwrap_or_default().trim();
            self.errors.push(format!(
                "{} `{what}` failed: {}",
                call.name,
                clip(first, 160)
            ));
            return;
        }
        let text = result.text.as_str();
        match call.name {
            "Glob" => {
                for path in parse_glob(text) {
                    if !self.globbed.contains(&path) {
                        self.globbed.push(path);
                    }
                }
            }
            "Grep" => self.add_grep(call, text),
            "Read" => {
                let Some(path) = call.input_str("file_path") else {
                    return;
                };
                let (lines, continues) = parse_read(text);
                self.reads.insert(path.to_owned(), continues);
                self.lines.entry(path.to_owned()).or_default().extend(lines);
            }
            _ => {}
        }
    }

    fn add_grep(&mut self, call: &Call<'_>, text: &str) {
        let pattern = call.input_str("pattern").unwrap_or_default();
        match call
            .input_str("output_mode")
            .unwrap_or("files_with_matches")
        {
            "count" => {
                self.searched = true;
                let counts = self.counts.entry(pattern.to_owned()).or_default();
                counts.extend(parse_counts(text));
            }
            "content" => {
                for (path, number, line) in parse_content(text, call.input_str("path")) {
                    self.lines.entry(path).or_default().insert(number, line);
                }
            }
            _ => {
                self.searched = true;
                self.matched.extend(parse_files(text));
            }
        }
    }

    /// The text of a file read from its first line, if it was.
    pub(super) fn contents(&self, path: &str) -> Option<String> {
        self.reads.get(path)?;
        let lines = self.lines.get(path)?;
        lines.contains_key(&1).then(|| {
            lines
                .values()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
    }
}

/// Glob: one path per line; notes in parentheses.
pub(super) fn parse_glob(text: &str) -> Vec<String> {
    if text.starts_with("No files found") {
        return Vec::new();
    }
    listed_lines(text).map(str::to_owned).collect()
}

/// Grep `files_with_matches`: `Found N files`, then one path per line.
pub(super) fn parse_files(text: &str) -> Vec<String> {
    if text.starts_with("No matches found") {
        return Vec::new();
    }
    listed_lines(text)
        .filter(|line| !(line.starts_with("Found ") && line.ends_with(" files")))
        .map(str::to_owned)
        .collect()
}

/// Grep `count`: `path:N` per line, then `Found … matching lines in … files.`
pub(super) fn parse_counts(text: &str) -> Vec<(String, u64)> {
    listed_lines(text)
        .filter_map(|line| {
            let (path, count) = line.rsplit_once(':')?;
            Some((path.to_owned(), count.parse().ok()?))
        })
        .filter(|(path, _)| !path.is_empty())
        .collect()
}

/// Grep `content`: `path:line:text` per match. When the search was limited to one file,
/// `known_path` disambiguates paths that contain `:digits:`.
pub(super) fn parse_content(text: &str, known_path: Option<&str>) -> Vec<(String, u64, String)> {
    text.lines()
        .filter_map(|line| {
            if let Some(rest) = known_path.and_then(|p| line.strip_prefix(p)?.strip_prefix(':')) {
                let (number, text) = rest.split_once(':')?;
                return Some((
                    known_path?.to_owned(),
                    number.parse().ok()?,
                    text.to_owned(),
                ));
            }
            split_content_line(line)
        })
        .collect()
}

/// `path:12:text` at its first `:digits:`.
fn split_content_line(line: &str) -> Option<(String, u64, String)> {
    line.match_indices(':').find_map(|(i, _)| {
        let rest = &line[i + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if i == 0 || digits == 0 || rest.as_bytes().get(digits) != Some(&b':') {
            return None;
        }
        let number = rest[..digits].parse().ok()?;
        Some((line[..i].to_owned(), number, rest[digits + 1..].to_owned()))
    })
}

/// Read: `{number:>6}\t{line}` per line; notes after a blank line. Also returns whether the
/// file continues past the lines shown.
pub(super) fn parse_read(text: &str) -> (Vec<(u64, String)>, bool) {
    let lines = text
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once('\t')?;
            Some((number.trim_start().parse().ok()?, rest.to_owned()))
        })
        .collect();
    (lines, text.contains("the file continues"))
}

/// Non-empty lines that are not notes (notes start with `(`).
fn listed_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim_end)
        .filter(|line| !line.trim().is_empty() && !line.starts_with('('))
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub(super) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", text[..cut].trim_end()),
        None => text.to_owned(),
    }
}

/// `text` cut to `max` characters at a word boundary when there is one, with an ellipsis.
pub(super) fn clip_words(text: &str, max: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    let head = &text[..cut];
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space > 0 => &head[..space],
        _ => head,
    };
    format!("{}…", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Outputs copied from the agent's tools (agent/src/tools).
    #[test]
    fn parses_glob_and_file_lists() {
        let cases: &[(&str, &[&str])] = &[
            ("No files found matching `**/*.rs`.", &[]),
            ("src/a.rs\nsrc/b.rs", &["src/a.rs", "src/b.rs"]),
            (
                "a.rs\n\n(Truncated: showing the 1 most recently modified of 3 matching files. \
                 Use a more specific pattern or path to narrow the results.)",
                &["a.rs"],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_glob(text), *want, "{text}");
        }
        let files: &[(&str, &[&str])] = &[
            ("No matches found for `x`.", &[]),
            (
                "Found 2 files\nsrc/a.rs\nREADME.md",
                &["src/a.rs", "README.md"],
            ),
            (
                "Found 3 files\nsrc/a.rs\n\n(Showing 1 of 3 files. Narrow the search with \
                 `path`, `glob` or `type`, or raise `head_limit`.)",
                &["src/a.rs"],
            ),
        ];
        for (text, want) in files {
            assert_eq!(parse_files(text), *want, "{text}");
        }
    }

    #[test]
    fn parses_counts_and_content() {
        let counts = "src/a.rs:3\nweird:name.rs:1\n(Showing 2 of 3 files.)\n\n\
                      Found 5 matching lines in 3 files.";
        assert_eq!(
            parse_counts(counts),
            [("src/a.rs".to_owned(), 3), ("weird:name.rs".to_owned(), 1)]
        );
        assert!(parse_counts("No matches found for `x`.").is_empty());
        let content = "src/a.rs:12:fn login() {\nsrc/b.rs:3:  let x = a:1:b;\n--\n\
                       (Output truncated after 2 lines. In total 9 matching lines in 3 files.)";
        assert_eq!(
            parse_content(content, None),
            [
                ("src/a.rs".to_owned(), 12, "fn login() {".to_owned()),
                ("src/b.rs".to_owned(), 3, "  let x = a:1:b;".to_owned()),
            ]
        );
        let odd = "a:1:b.rs:7:hit";
        assert_eq!(
            parse_content(odd, Some("a:1:b.rs")),
            [("a:1:b.rs".to_owned(), 7, "hit".to_owned())]
        );
    }

    #[test]
    fn parses_reads() {
        let text = "     1\tfn main() {\n     2\t\tlet x = 1;\n\n(Stopped at line 2 because of \
                    the line limit; the file continues. Read more with offset=3.)";
        let (lines, continues) = parse_read(text);
        assert_eq!(
            lines,
            [
                (1, "fn main() {".to_owned()),
                (2, "\tlet x = 1;".to_owned())
            ]
        );
        assert!(continues);
        assert_eq!(parse_read("(`a` is empty.)"), (Vec::new(), false));
    }

    #[test]
    fn clips_on_char_boundaries() {
        assert_eq!(clip("héllo wörld", 5), "héllo…");
        assert_eq!(clip("short", 9), "short");
        assert_eq!(clip_words("one two three", 9), "one two…");
        assert_eq!(clip_words("onetwothree", 5), "onetw…");
        assert_eq!(clip_words("short", 9), "short");
    }
}

//! Grep's per-file sink and the per-thread accumulator that keeps memory bounded.
//!
//! Counts are always exact. The text of matching lines is kept only for the files that can
//! appear in the output: files are shown in path order, so each thread keeps the smallest paths
//! whose text fills the output budget and drops the rest (their counts stay).

use std::collections::BTreeMap;
use std::io;
use std::time::SystemTime;

use grep_matcher::Matcher;
use grep_regex::RegexMatcher;
use grep_searcher::{Searcher, Sink, SinkContext, SinkFinish, SinkMatch};
use serde::Deserialize;

use super::truncate_chars;

/// Longest line shown in content mode, in characters.
pub const MAX_LINE_CHARS: usize = 500;

/// What Grep returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines, with optional context.
    Content,
    /// Paths of the files that match.
    #[default]
    FilesWithMatches,
    /// Matching line counts per file.
    Count,
}

/// One output line of content mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Match(Option<u64>, String),
    Context(Option<u64>, String),
    /// A gap between non-adjacent groups of lines (`--`).
    Break,
}

/// What one file yielded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHits {
    /// Root-relative path.
    pub path: String,
    /// Matching lines (matches, in multiline mode).
    pub matches: u64,
    /// Content mode only; may stop short of `matches` when `clipped`.
    pub lines: Vec<Line>,
    /// Files mode only: the file's modification time.
    pub mtime: SystemTime,
    /// The file's text exceeded the budget and was cut.
    pub clipped: bool,
    /// Estimated size of the rendered lines, in bytes.
    size: usize,
}

/// A reusable sink collecting one file's results at a time.
pub(crate) struct FileSink {
    mode: OutputMode,
    /// In multiline mode, counts the matches inside each reported block (as ripgrep does).
    counter: Option<RegexMatcher>,
    budget: usize,
    matches: u64,
    lines: Vec<Line>,
    size: usize,
    clipped: bool,
    binary: bool,
}

impl FileSink {
    pub(crate) fn new(mode: OutputMode, budget: usize, counter: Option<RegexMatcher>) -> Self {
        FileSink {
            mode,
            counter,
            budget,
            matches: 0,
            lines: Vec::new(),
            size: 0,
            clipped: false,
            binary: false,
        }
    }

    /// The results of the file just searched, if it counts as a match; resets the sink.
    ///
    /// Like ripgrep, a file whose binary data stopped the search still lists (files mode) and
    /// shows the lines matched before it (content mode), but counts nothing (count mode).
    pub(crate) fn take(&mut self, path: impl FnOnce() -> String) -> Option<FileHits> {
        let matches = std::mem::take(&mut self.matches);
        let binary = std::mem::take(&mut self.binary);
        let lines = std::mem::take(&mut self.lines);
        let size = std::mem::take(&mut self.size);
        let clipped = std::mem::take(&mut self.clipped);
        if matches == 0 || (binary && self.mode == OutputMode::Count) {
            return None;
        }
        let path = path();
        let size = size + lines.len() * (path.len() + 12);
        Some(FileHits {
            path,
            matches,
            lines,
            mtime: SystemTime::UNIX_EPOCH,
            clipped,
            size,
        })
    }

    fn push(&mut self, line: Line) {
        if self.size >= self.budget {
            self.clipped = true;
            return;
        }
        if let Line::Match(_, text) | Line::Context(_, text) = &line {
            self.size += text.len();
        }
        self.lines.push(line);
    }

    fn push_match(&mut self, mat: &SinkMatch<'_>) {
        let first = mat.line_number();
        for (i, bytes) in mat.lines().enumerate() {
            let number = first.map(|n| n + i as u64);
            self.push(Line::Match(number, line_text(bytes)));
        }
    }
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matches += match &self.counter {
            Some(matcher) => count_matches(matcher, mat.bytes()).max(1),
            None => 1,
        };
        match self.mode {
            OutputMode::FilesWithMatches => return Ok(false),
            OutputMode::Content => self.push_match(mat),
            OutputMode::Count => {}
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.push(Line::Context(ctx.line_number(), line_text(ctx.bytes())));
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.push(Line::Break);
        Ok(true)
    }

    fn finish(&mut self, _: &Searcher, finish: &SinkFinish) -> Result<(), io::Error> {
        self.binary = finish.binary_byte_offset().is_some();
        Ok(())
    }
}

/// How many matches `bytes` holds.
fn count_matches(matcher: &RegexMatcher, bytes: &[u8]) -> u64 {
    let mut count = 0;
    let _ = matcher.find_iter(bytes, |_| {
        count += 1;
        true
    });
    count
}

/// A line's text without its terminator, lossily decoded and cut at [`MAX_LINE_CHARS`].
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    truncate_chars(&mut text, MAX_LINE_CHARS);
    text
}

/// One thread's results: exact totals, plus the files whose text may be shown.
#[derive(Debug, Default)]
pub(crate) struct Hits {
    pub(crate) files: BTreeMap<String, FileHits>,
    pub(crate) total_files: u64,
    pub(crate) total_matches: u64,
    stored: usize,
}

impl Hits {
    /// Records a matching file, then drops the largest paths no longer needed to fill `budget`.
    pub(crate) fn add(&mut self, hits: FileHits, budget: usize) {
        self.total_files += 1;
        self.total_matches += hits.matches;
        self.stored += hits.size;
        self.files.insert(hits.path.clone(), hits);
        self.evict(budget);
    }

    /// Merges every thread's results into one.
    pub(crate) fn merge(parts: Vec<Hits>, budget: usize) -> Hits {
        let mut all = Hits::default();
        for part in parts {
            all.total_files += part.total_files;
            all.total_matches += part.total_matches;
            all.stored += part.stored;
            all.files.extend(part.files);
            all.evict(budget);
        }
        all
    }

    /// Whether some matching file's text was dropped or cut.
    pub(crate) fn incomplete(&self) -> bool {
        self.files.len() as u64 != self.total_files || self.files.values().any(|f| f.clipped)
    }

    fn evict(&mut self, budget: usize) {
        while let Some(last) = self.files.last_entry() {
            let size = last.get().size;
            if size == 0 || self.stored - size < budget {
                break;
            }
            self.stored -= size;
            last.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, size: usize) -> FileHits {
        FileHits {
            path: path.to_owned(),
            matches: 1,
            lines: Vec::new(),
            mtime: SystemTime::UNIX_EPOCH,
            clipped: false,
            size,
        }
    }

    #[test]
    fn eviction_keeps_the_smallest_paths_that_fill_the_budget() {
        /// Inserted paths with their sizes, the budget, the paths kept.
        type Case<'a> = (&'a [(&'a str, usize)], usize, &'a [&'a str]);
        let cases: &[Case] = &[
            (&[("b", 10), ("a", 10), ("c", 10)], 15, &["a", "b"]),
            (&[("c", 10), ("b", 10), ("a", 10)], 10, &["a"]),
            (&[("a", 5), ("b", 5)], 100, &["a", "b"]),
            (&[("a", 0), ("b", 0), ("c", 0)], 1, &["a", "b", "c"]),
        ];
        for (inserted, budget, kept) in cases {
            let mut hits = Hits::default();
            for (path, size) in *inserted {
                hits.add(file(path, *size), *budget);
            }
            let got: Vec<&str> = hits.files.keys().map(String::as_str).collect();
            assert_eq!(&got, kept, "{inserted:?} budget {budget}");
            assert_eq!(hits.total_files, inserted.len() as u64);
        }
    }

    #[test]
    fn merge_is_the_same_as_one_thread() {
        let mut left = Hits::default();
        let mut right = Hits::default();
        for (i, name) in ["e", "a", "d", "b", "c"].iter().enumerate() {
            let side = if i % 2 == 0 { &mut left } else { &mut right };
            side.add(file(name, 10), 25);
        }
        let merged = Hits::merge(vec![left, right], 25);
        let got: Vec<&str> = merged.files.keys().map(String::as_str).collect();
        assert_eq!(got, ["a", "b", "c"]);
        assert_eq!(merged.total_files, 5);
        assert!(merged.incomplete());
    }

    #[test]
    fn line_text_strips_terminators_and_decodes() {
        let long = "x".repeat(MAX_LINE_CHARS + 10);
        let cases: [(&[u8], String); 4] = [
            (b"plain\n", "plain".to_owned()),
            (b"crlf\r\n", "crlf".to_owned()),
            (b"bad \xff byte", "bad \u{fffd} byte".to_owned()),
            (
                long.as_bytes(),
                format!("{} […]", "x".repeat(MAX_LINE_CHARS)),
            ),
        ];
        for (bytes, want) in cases {
            assert_eq!(line_text(bytes), want);
        }
    }
}

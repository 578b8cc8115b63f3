//! A `git diff --binary` patch split into per-file sections, with each hunk line classified
//! and numbered for display. Pure: bytes in, a display model out. Non-UTF-8 bytes are shown
//! lossily; binary patch data (base85) is never shown, only described.

use ultraplan_protocol::git_patch::{self, display_name};
use ultraplan_protocol::patch::FileChange;

use super::format::thousands;
use super::git_paths::{header_paths, side_path};

/// The per-file chunks of a patch: each starts at a `diff --git ` line. Text before the first
/// header (never produced by git) is dropped.
pub use git_patch::sections as split;

/// How much of a patch the page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Hunk lines shown per file.
    pub file_lines: usize,
    /// Hunk lines shown in all.
    pub total_lines: usize,
    /// Bytes of line text shown in all.
    pub total_bytes: usize,
    /// Characters shown of one line.
    pub line_chars: usize,
}

impl Limits {
    /// What the session page shows.
    pub const PAGE: Limits = Limits {
        file_lines: 2_000,
        total_lines: 20_000,
        total_bytes: 1024 * 1024,
        line_chars: 2_000,
    };
}

/// One line of a file's diff, ready to render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchLine {
    /// `add`, `del`, `same`, `hunk` or `note`.
    pub class: &'static str,
    /// `+`, `-`, ` ` or empty.
    pub sign: &'static str,
    /// Line number in the old file (empty when none).
    pub old: String,
    /// Line number in the new file (empty when none).
    pub new: String,
    pub text: String,
}

/// One file's section of the patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    pub path: String,
    /// The old path, when it differs (renames and copies).
    pub old_path: Option<String>,
    pub change: FileChange,
    /// Extended header lines worth showing (`new file mode 100644`, `mode 100644 → 100755`).
    pub notes: Vec<String>,
    /// What replaces the lines of a binary file.
    pub binary: Option<String>,
    pub additions: u64,
    pub deletions: u64,
    pub lines: Vec<PatchLine>,
    /// Hunk lines left out by the limits.
    pub hidden: usize,
}

/// What is left to show.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    limits: Limits,
    lines: usize,
    bytes: usize,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Budget {
            limits,
            lines: limits.total_lines,
            bytes: limits.total_bytes,
        }
    }

    /// Take one line of `len` bytes; false when the budget is spent.
    fn take(&mut self, len: usize) -> bool {
        if self.lines == 0 || self.bytes < len {
            self.lines = 0;
            return false;
        }
        self.lines -= 1;
        self.bytes -= len;
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Header,
    Hunks,
    Binary,
}

/// Parse one file's chunk (starting with its `diff --git ` line).
pub fn parse(chunk: &[u8], budget: &mut Budget) -> FileDiff {
    let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
    let mut lines = body.split(|b| *b == b'\n');
    let header = lines.next().unwrap_or_default();
    let mut file = FileDiff {
        path: String::new(),
        old_path: None,
        change: FileChange::Modified,
        notes: Vec::new(),
        binary: None,
        additions: 0,
        deletions: 0,
        lines: Vec::new(),
        hidden: 0,
    };
    let mut paths = Paths::default();
    let mut part = Part::Header;
    let mut numbers = (0_u32, 0_u32);
    let mut sizes: Vec<u64> = Vec::new();
    for raw in lines {
        if part == Part::Header {
            part = header_line(raw, &mut file, &mut paths);
        }
        match part {
            Part::Header => {}
            Part::Binary => sizes.extend(binary_size(raw)),
            Part::Hunks => {
                let open = file.lines.len() < budget.limits.file_lines
                    && file.hidden == 0
                    && budget.lines > 0;
                if !open {
                    // Past the limits lines are only counted, never built.
                    match raw.first() {
                        Some(b'+') => file.additions += 1,
                        Some(b'-') => file.deletions += 1,
                        _ => {}
                    }
                    file.hidden += 1;
                    continue;
                }
                let line = hunk_line(raw, &mut numbers, &mut file, budget.limits.line_chars);
                if budget.take(line.text.len() + 1) {
                    file.lines.push(line);
                } else {
                    file.hidden += 1;
                }
            }
        }
    }
    if part == Part::Binary || file.binary.is_some() {
        file.binary = Some(binary_text(file.change, &sizes));
    }
    let (old, new) = paths.resolve(header);
    file.path = new.clone().or_else(|| old.clone()).unwrap_or_default();
    file.old_path = old.filter(|o| new.as_ref().is_some_and(|n| n != o));
    file
}

/// Paths seen in the extended header.
#[derive(Debug, Default)]
struct Paths {
    minus: Option<String>,
    plus: Option<String>,
    renamed_from: Option<String>,
    renamed_to: Option<String>,
}

impl Paths {
    /// `(old, new)`: from `---`/`+++`, else from rename/copy lines, else from the header.
    fn resolve(self, header: &[u8]) -> (Option<String>, Option<String>) {
        if self.minus.is_some() || self.plus.is_some() {
            return (self.minus, self.plus);
        }
        if self.renamed_from.is_some() || self.renamed_to.is_some() {
            return (self.renamed_from, self.renamed_to);
        }
        header_paths(
            header
                .strip_prefix(git_patch::DIFF_HEADER)
                .unwrap_or(header),
        )
    }
}

/// One line of the extended header; returns the part that follows it.
fn header_line(raw: &[u8], file: &mut FileDiff, paths: &mut Paths) -> Part {
    let line = lossy(raw);
    if let Some(rest) = line.strip_prefix("--- ") {
        paths.minus = side_path(rest.as_bytes(), b"a/");
    } else if let Some(rest) = line.strip_prefix("+++ ") {
        paths.plus = side_path(rest.as_bytes(), b"b/");
    } else if line.starts_with("@@") {
        return Part::Hunks;
    } else if line.starts_with("GIT binary patch") {
        return Part::Binary;
    } else if line.starts_with("Binary files ") {
        file.binary = Some(String::new());
    } else if let Some(mode) = line.strip_prefix("new file mode ") {
        file.change = FileChange::Added;
        file.notes.push(format!("new file, mode {mode}"));
    } else if let Some(mode) = line.strip_prefix("deleted file mode ") {
        file.change = FileChange::Deleted;
        file.notes.push(format!("deleted file, mode {mode}"));
    } else if let Some(mode) = line.strip_prefix("old mode ") {
        file.notes.push(format!("mode {mode}"));
    } else if let Some(mode) = line.strip_prefix("new mode ") {
        match file.notes.last_mut() {
            Some(note) if note.starts_with("mode ") => note.push_str(&format!(" → {mode}")),
            _ => file.notes.push(format!("new mode {mode}")),
        }
    } else if let Some(rest) = line
        .strip_prefix("rename from ")
        .or_else(|| line.strip_prefix("copy from "))
    {
        paths.renamed_from = Some(display_name(rest.as_bytes()));
    } else if let Some(rest) = line
        .strip_prefix("rename to ")
        .or_else(|| line.strip_prefix("copy to "))
    {
        paths.renamed_to = Some(display_name(rest.as_bytes()));
    } else if line.starts_with("similarity index ") || line.starts_with("dissimilarity index ") {
        file.notes.push(line);
    }
    Part::Header
}

/// A hunk line as shown, counting additions and deletions and moving the line numbers.
fn hunk_line(
    raw: &[u8],
    numbers: &mut (u32, u32),
    file: &mut FileDiff,
    line_chars: usize,
) -> PatchLine {
    let (first, rest) = match raw.split_first() {
        Some((b, rest)) => (*b, rest),
        None => (b' ', raw),
    };
    let (old, new) = (numbers.0.to_string(), numbers.1.to_string());
    let (class, sign, old, new) = match first {
        b'+' => {
            file.additions += 1;
            numbers.1 += 1;
            ("add", "+", String::new(), new)
        }
        b'-' => {
            file.deletions += 1;
            numbers.0 += 1;
            ("del", "-", old, String::new())
        }
        b'@' if raw.starts_with(b"@@") => {
            let text = lossy(raw);
            *numbers = hunk_start(&text);
            return PatchLine {
                class: "hunk",
                sign: "",
                old: String::new(),
                new: String::new(),
                text,
            };
        }
        b'\\' => {
            let text = lossy(raw);
            let text = text.strip_prefix("\\ ").unwrap_or(&text).to_owned();
            return PatchLine {
                class: "note",
                sign: "",
                old: String::new(),
                new: String::new(),
                text,
            };
        }
        _ => {
            numbers.0 += 1;
            numbers.1 += 1;
            ("same", " ", old, new)
        }
    };
    let rest = if first == b' ' || first == b'+' || first == b'-' {
        rest
    } else {
        raw
    };
    PatchLine {
        class,
        sign,
        old,
        new,
        text: shown(rest, line_chars),
    }
}

/// `@@ -12,3 +14,5 @@` → `(12, 14)`.
fn hunk_start(line: &str) -> (u32, u32) {
    let mut words = line.split_whitespace().skip(1);
    let start = |word: Option<&str>, sign: char| -> u32 {
        word.and_then(|w| w.strip_prefix(sign))
            .and_then(|w| w.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let old = start(words.next(), '-');
    let new = start(words.next(), '+');
    (old, new)
}

/// Line text for display: lossy UTF-8, a visible carriage return, long lines cut.
fn shown(raw: &[u8], max_chars: usize) -> String {
    let (raw, cr) = match raw.strip_suffix(b"\r") {
        Some(r) => (r, true),
        None => (raw, false),
    };
    let text = lossy(raw);
    let mut out = match text.char_indices().nth(max_chars) {
        Some((at, _)) => {
            let left = text[at..].chars().count();
            format!(
                "{} … ({} more characters)",
                &text[..at],
                thousands(left as u64)
            )
        }
        None => text,
    };
    if cr {
        out.push('␍');
    }
    out
}

/// The size in a binary patch's `literal N` line (`delta` sizes are not file sizes).
fn binary_size(raw: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(raw).ok()?;
    if line.starts_with("delta ") {
        return Some(u64::MAX);
    }
    line.strip_prefix("literal ")?.trim().parse().ok()
}

/// What the page says instead of a binary file's contents. `sizes` are the forward then the
/// reverse `literal` sizes (`u64::MAX` for a delta, whose size is no file size).
fn binary_text(change: FileChange, sizes: &[u64]) -> String {
    let size = |n: Option<&u64>| n.copied().filter(|n| *n != u64::MAX).map(thousands);
    match (change, size(sizes.first()), size(sizes.get(1))) {
        (FileChange::Added, Some(n), _) => format!("Binary file added ({n} bytes)"),
        (FileChange::Added, None, _) => "Binary file added".to_owned(),
        (FileChange::Deleted, _, Some(n)) => format!("Binary file deleted ({n} bytes)"),
        (FileChange::Deleted, _, None) => "Binary file deleted".to_owned(),
        (_, Some(n), _) => format!("Binary file changed (now {n} bytes)"),
        (_, None, _) => "Binary file changed".to_owned(),
    }
}

fn lossy(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

#[cfg(test)]
#[path = "unified_tests.rs"]
mod tests;

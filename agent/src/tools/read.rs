//! `Read`: show a text file with `cat -n` style line numbers.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read as _};

use serde::Deserialize;
use serde_json::json;
use ultraplan_protocol::model::ToolDefinition;

use super::{ToolError, object_tool, parse_input, truncate_chars};
use crate::workspace::Workspace;

/// The tool's name as the model calls it.
pub const NAME: &str = "Read";
/// Lines shown when no `limit` is given.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Longer lines are cut at this many characters.
pub const MAX_LINE_CHARS: usize = 2000;
/// Output stops near this many characters, with a note on how to continue.
pub const MAX_OUTPUT_CHARS: usize = 100_000;
/// At most this many bytes of a file are scanned (to reach `offset` or otherwise).
pub const MAX_SCAN_BYTES: u64 = 64 * 1024 * 1024;
/// Bytes sniffed for a NUL to detect binary files.
const SNIFF_BYTES: usize = 8192;

/// The tool's input.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `file_path` string")]
pub struct ReadInput {
    pub file_path: String,
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "file_path": {"type": "string", "description": "File to read, relative to the \
                repository root (or absolute under it)."},
            "offset": {"type": "integer", "minimum": 1, "description": "Line number to \
                start at (1-based). Use it with `limit` for long files."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to \
                read (default 2000)."}
        }),
        &["file_path"],
    )
}

const DESCRIPTION: &str = "Read a text file. Output is numbered like `cat -n`: the line number, \
a tab, then the line. Reads up to 2000 lines from the start by default; pass `offset` and \
`limit` to page through longer files. Lines longer than 2000 characters are cut. Refuses \
directories (use Glob) and binary files. Read the files you will reference before planning \
changes to them.";

/// Runs the tool on raw model input.
pub(crate) fn run(workspace: &Workspace, input: serde_json::Value) -> Result<String, ToolError> {
    let input: ReadInput = parse_input(NAME, input)?;
    read(workspace, &input)
}

/// Reads the lines `input` asks for.
pub fn read(workspace: &Workspace, input: &ReadInput) -> Result<String, ToolError> {
    let label = input.file_path.trim();
    let path = workspace.resolve(label)?;
    let io_err = |source| ToolError::Io {
        path: label.to_owned(),
        source,
    };
    let meta = std::fs::metadata(&path).map_err(io_err)?;
    if meta.is_dir() {
        return Err(ToolError::Refused(format!(
            "`{label}` is a directory, not a file; use Glob (e.g. pattern \"{}/*\") to list it",
            workspace.display(&path)
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::Refused(format!(
            "`{label}` is not a regular file"
        )));
    }
    let mut file = File::open(&path).map_err(io_err)?;
    let head = sniff(&mut file).map_err(io_err)?;
    if head.contains(&0) {
        return Err(ToolError::Refused(format!(
            "`{label}` is a binary file ({} bytes); Read only shows text files",
            meta.len()
        )));
    }
    let reader = BufReader::with_capacity(64 * 1024, io::Cursor::new(head).chain(file));
    let window = Window::new(input.offset, input.limit);
    let page = window.collect(reader).map_err(io_err)?;
    Ok(page.render(label, &window))
}

/// Reads the first bytes of the file (fewer if it is shorter).
fn sniff(file: &mut File) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    file.by_ref()
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    Ok(head)
}

/// The lines asked for: `first..first+limit` (1-based).
struct Window {
    first: u64,
    limit: u64,
}

/// What was read.
#[derive(Default)]
struct Page {
    text: String,
    /// Last line number shown (0 when none).
    last_shown: u64,
    /// Lines seen in the file (only up to where reading stopped).
    lines_seen: u64,
    /// More lines follow the last one shown.
    more: bool,
    /// Stopped because the output reached its cap.
    capped: bool,
    /// Stopped before `first` because the scan limit was reached.
    scan_limited: bool,
    cut_lines: bool,
}

impl Window {
    fn new(offset: Option<u64>, limit: Option<u64>) -> Self {
        Window {
            first: offset.unwrap_or(1).max(1),
            limit: limit.filter(|&l| l > 0).unwrap_or(DEFAULT_LIMIT),
        }
    }

    fn last(&self) -> u64 {
        self.first.saturating_add(self.limit - 1)
    }

    /// Reads lines until the window is shown, the output is full, or the scan cap is hit.
    fn collect(&self, mut reader: impl BufRead) -> io::Result<Page> {
        let mut page = Page::default();
        let mut buf = Vec::new();
        let mut scanned = 0u64;
        loop {
            let Some(consumed) = read_line_capped(&mut reader, &mut buf, MAX_LINE_CHARS * 4)?
            else {
                return Ok(page);
            };
            scanned += consumed;
            let number = page.lines_seen + 1;
            if number > self.last() || page.capped {
                page.more = true;
                return Ok(page);
            }
            page.lines_seen = number;
            if number >= self.first {
                page.show(number, &buf);
            } else if scanned > MAX_SCAN_BYTES {
                page.scan_limited = true;
                return Ok(page);
            }
        }
    }
}

impl Page {
    fn show(&mut self, number: u64, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let mut line = String::from_utf8_lossy(bytes).into_owned();
        self.cut_lines |= truncate_chars(&mut line, MAX_LINE_CHARS);
        if self.text.len() + line.len() > MAX_OUTPUT_CHARS && self.last_shown > 0 {
            self.capped = true;
            return;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        let _ = write!(self.text, "{number:>6}\t{line}");
        self.last_shown = number;
    }

    fn render(mut self, label: &str, window: &Window) -> String {
        if self.lines_seen == 0 && !self.scan_limited {
            return format!("(`{label}` is empty.)");
        }
        if self.last_shown == 0 {
            return self.render_nothing_shown(label, window);
        }
        if self.cut_lines {
            let _ = write!(
                self.text,
                "\n\n(Some lines were longer than {MAX_LINE_CHARS} characters and were cut.)"
            );
        }
        if self.more || self.capped {
            let why = if self.capped {
                "the output size cap"
            } else {
                "the line limit"
            };
            let _ = write!(
                self.text,
                "\n\n(Stopped at line {} because of {why}; the file continues. Read more with \
                 offset={}.)",
                self.last_shown,
                self.last_shown + 1
            );
        }
        self.text
    }

    fn render_nothing_shown(&self, label: &str, window: &Window) -> String {
        if self.scan_limited {
            return format!(
                "(Stopped scanning `{label}` after {} MiB before reaching line {}; the file is \
                 too large to page that far. Use Grep to find the lines you need.)",
                MAX_SCAN_BYTES / (1024 * 1024),
                window.first
            );
        }
        format!(
            "(`{label}` has {} lines; offset {} is past the end.)",
            self.lines_seen, window.first
        )
    }
}

/// Reads one line (through `\n`) into `buf`, keeping at most `cap` bytes of it and without
/// the terminator. Returns the bytes consumed, or `None` at end of file.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<u64>> {
    buf.clear();
    let mut consumed = 0u64;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok((consumed > 0).then_some(consumed));
        }
        let (line_part, done) = match memchr_newline(chunk) {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&line_part[..line_part.len().min(room)]);
        let used = done.unwrap_or(chunk.len());
        reader.consume(used);
        consumed += used as u64;
        if done.is_some() {
            return Ok(Some(consumed));
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;

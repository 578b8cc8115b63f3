//! `Edit`: exact string replacement in a text file (execution mode).
//!
//! `old_string` must occur in the file exactly; when it occurs more than once, `replace_all`
//! must say so. An empty `old_string` creates a missing file (or fills an empty one) with
//! `new_string`. The file is rewritten in place, keeping its permissions, and the result shows
//! the edited lines with their numbers so the model can check the change without a Read.

use std::path::Path;

use serde::Deserialize;
use serde_json::json;
use ultraplan_protocol::model::ToolDefinition;

use super::write::{Target, inspect, write_file};
use super::{ToolError, object_tool, parse_input};
use crate::workspace::Workspace;

/// The tool's name as the model calls it.
pub const NAME: &str = "Edit";
/// Larger files are refused (Write replaces them whole if really needed).
pub const MAX_EDIT_BYTES: u64 = 16 * 1024 * 1024;
/// Lines of context shown before and after the edited lines.
const CONTEXT_LINES: usize = 3;
/// Most edited lines shown in the snippet.
const MAX_SNIPPET_LINES: usize = 30;
/// Longer snippet lines are cut.
const MAX_SNIPPET_LINE_CHARS: usize = 300;

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object with `file_path`, `old_string` and `new_string` strings"
)]
struct EditInput {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "file_path": {"type": "string", "description": "File to edit, relative to the \
                repository root (or absolute under it)."},
            "old_string": {"type": "string", "description": "The exact text to replace, \
                including whitespace and indentation. Empty only to create a file."},
            "new_string": {"type": "string", "description": "The text to put in its place \
                (must differ from old_string)."},
            "replace_all": {"type": "boolean", "default": false, "description": "Replace \
                every occurrence of old_string instead of exactly one."}
        }),
        &["file_path", "old_string", "new_string"],
    )
}

const DESCRIPTION: &str = "Replace an exact string in a text file. `old_string` must match the \
file exactly, whitespace and indentation included (copy it from Read output, without the line \
number prefix). It must occur exactly once unless `replace_all` is true: when it is ambiguous, \
include more surrounding lines to make it unique. Use `replace_all` to rename something \
throughout the file. With an empty `old_string`, a missing file is created with `new_string` as \
its content. Read the file before editing it. The result shows the changed lines with their \
line numbers; the file keeps its permissions.";

/// Runs the tool on raw model input.
pub(crate) fn run(workspace: &Workspace, input: serde_json::Value) -> Result<String, ToolError> {
    let input: EditInput = parse_input(NAME, input)?;
    let label = input.file_path.trim();
    if input.old_string == input.new_string {
        return Err(ToolError::Refused(
            "`old_string` and `new_string` are the same; there is nothing to change".to_owned(),
        ));
    }
    let path = workspace.resolve_for_write(label)?;
    let shown = workspace.display(&path);
    match inspect(workspace, label, &path)? {
        Target::Missing if input.old_string.is_empty() => {
            write_file(label, &path, input.new_string.as_bytes())?;
            Ok(format!(
                "Created {shown} ({} bytes)",
                input.new_string.len()
            ))
        }
        Target::Missing => Err(ToolError::Refused(format!(
            "`{label}` does not exist (relative paths start at the repository root); check the \
             path with Glob, or create the file with Write"
        ))),
        Target::File(size) if size > MAX_EDIT_BYTES => Err(ToolError::Refused(format!(
            "`{label}` is too large to edit ({size} bytes; the limit is {MAX_EDIT_BYTES})"
        ))),
        Target::File(_) => edit_file(label, &path, &shown, &input),
    }
}

/// Replaces in an existing file.
fn edit_file(
    label: &str,
    path: &Path,
    shown: &str,
    input: &EditInput,
) -> Result<String, ToolError> {
    let bytes = std::fs::read(path).map_err(|source| ToolError::Io {
        path: label.to_owned(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::Refused(format!(
            "`{label}` is not valid UTF-8 text; Edit only changes text files"
        ))
    })?;
    let edit = plan_edit(label, &text, input)?;
    write_file(label, path, edit.text.as_bytes())?;
    let count = match edit.count {
        1 => "1 replacement".to_owned(),
        n => format!("{n} replacements (the first is shown)"),
    };
    Ok(format!(
        "Edited {shown}: {count}.\n{}",
        snippet(&edit.text, edit.start, input.new_string.as_str())
    ))
}

/// A replacement worked out in memory.
#[derive(Debug, PartialEq, Eq)]
struct Planned {
    /// The new content.
    text: String,
    /// Occurrences replaced.
    count: usize,
    /// Byte offset of the first replacement in the new content.
    start: usize,
}

/// Checks the replacement against the content and applies it.
fn plan_edit(label: &str, text: &str, input: &EditInput) -> Result<Planned, ToolError> {
    let old = input.old_string.as_str();
    let new = input.new_string.as_str();
    if old.is_empty() {
        if !text.is_empty() {
            return Err(ToolError::Refused(format!(
                "`old_string` is empty but `{label}` is not; give the exact text to replace, or \
                 use Write to replace the whole file"
            )));
        }
        return Ok(Planned {
            text: new.to_owned(),
            count: 1,
            start: 0,
        });
    }
    let Some(start) = text.find(old) else {
        return Err(ToolError::Refused(format!(
            "`old_string` was not found in `{label}`. It must match the file exactly, \
             whitespace and indentation included; Read the file and copy the text"
        )));
    };
    let count = text.matches(old).count();
    let replace_all = input.replace_all.unwrap_or(false);
    if count > 1 && !replace_all {
        return Err(ToolError::Refused(format!(
            "`old_string` occurs {count} times in `{label}`. Include more surrounding context \
             in old_string so that it matches exactly once, or set replace_all to true to \
             replace every occurrence"
        )));
    }
    let text = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    Ok(Planned { text, count, start })
}

/// The lines around the replacement starting at byte `start`, numbered like Read's output.
fn snippet(text: &str, start: usize, new: &str) -> String {
    let first = text[..start].matches('\n').count();
    let changed = new.lines().count().clamp(1, MAX_SNIPPET_LINES);
    let from = first.saturating_sub(CONTEXT_LINES);
    let to = first + changed + CONTEXT_LINES;
    text.lines()
        .enumerate()
        .skip(from)
        .take(to - from)
        .map(|(i, line)| {
            let mut line = line.to_owned();
            super::truncate_chars(&mut line, MAX_SNIPPET_LINE_CHARS);
            format!("{:>6}\t{line}", i + 1)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;

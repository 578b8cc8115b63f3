//! `Write`: create a file or replace its whole content (execution mode).
//!
//! The path is resolved by [`Workspace::resolve_for_write`], so it cannot leave the workspace,
//! not even through a symlinked file or parent directory. Missing parent directories are
//! created. An existing file is rewritten in place (truncated, then written), which keeps its
//! permissions, owner and hard links.

use std::io::{self, Write as _};
use std::path::Path;

use serde::Deserialize;
use serde_json::json;
use ultraplan_protocol::model::ToolDefinition;

use super::{ToolError, object_tool, parse_input};
use crate::workspace::Workspace;

/// The tool's name as the model calls it.
pub const NAME: &str = "Write";

#[derive(Debug, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object with `file_path` and `content` strings"
)]
struct WriteInput {
    file_path: String,
    content: String,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "file_path": {"type": "string", "description": "File to write, relative to the \
                repository root (or absolute under it)."},
            "content": {"type": "string", "description": "The complete new content of the \
                file."}
        }),
        &["file_path", "content"],
    )
}

const DESCRIPTION: &str = "Create a file, or replace the whole content of an existing one, \
inside the repository. Missing parent directories are created; an existing file keeps its \
permissions. Pass the complete content: nothing of the old file is kept. To change part of an \
existing file, use Edit instead, which is safer and shorter. Paths outside the repository \
(including through symlinks) are refused, and so are directories.";

/// What a write target is before the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Nothing there yet: the write creates the file.
    Missing,
    /// A regular file of this many bytes.
    File(u64),
}

/// Runs the tool on raw model input.
pub(crate) fn run(workspace: &Workspace, input: serde_json::Value) -> Result<String, ToolError> {
    let input: WriteInput = parse_input(NAME, input)?;
    let label = input.file_path.trim();
    let path = workspace.resolve_for_write(label)?;
    let target = inspect(workspace, label, &path)?;
    write_file(label, &path, input.content.as_bytes())?;
    let verb = match target {
        Target::Missing => "Created",
        Target::File(_) => "Updated",
    };
    Ok(format!(
        "{verb} {} ({} bytes)",
        workspace.display(&path),
        input.content.len()
    ))
}

/// Checks a resolved write target: missing, or a regular file; directories and special files
/// are refused.
pub(crate) fn inspect(
    workspace: &Workspace,
    label: &str,
    path: &Path,
) -> Result<Target, ToolError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(ToolError::Refused(format!(
            "`{label}` is a directory ({}); give the path of a file",
            workspace.display(path)
        ))),
        Ok(meta) if !meta.is_file() => Err(ToolError::Refused(format!(
            "`{label}` is not a regular file; refused"
        ))),
        Ok(meta) => Ok(Target::File(meta.len())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Target::Missing),
        Err(source) => Err(ToolError::Io {
            path: label.to_owned(),
            source,
        }),
    }
}

/// Writes `bytes` to `path` in place, creating its parent directories first.
pub(crate) fn write_file(label: &str, path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let err = |source| ToolError::Write {
        path: label.to_owned(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    let mut file = std::fs::File::create(path).map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.flush().map_err(err)
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;

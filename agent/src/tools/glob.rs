//! `Glob`: find files by name pattern, newest first.

use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use serde_json::json;
use ultraplan_protocol::model::ToolDefinition;

use super::{ToolError, object_tool, parse_input, walk};
use crate::workspace::{Workspace, WorkspaceError};

/// The tool's name as the model calls it.
pub const NAME: &str = "Glob";

/// At most this many paths are listed.
pub const MAX_RESULTS: usize = 100;

/// The tool's input.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `pattern` string")]
pub struct GlobInput {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "pattern": {
                "type": "string",
                "description": "Glob matched against paths relative to `path`, e.g. \
                    \"**/*.rs\", \"src/**/*.{ts,tsx}\" or \"*.toml\" (top level only)."
            },
            "path": {
                "type": "string",
                "description": "Directory to search in, relative to the repository root \
                    (or absolute under it). Omit it to search the whole repository."
            }
        }),
        &["pattern"],
    )
}

const DESCRIPTION: &str = "Find files by name with a glob pattern. `*` matches within one \
directory level, `**` across any number of levels, `{a,b}` alternatives, `[abc]` classes. \
Respects .gitignore, includes hidden files, never lists .git/. Returns paths relative to the \
repository root, most recently modified first, at most 100 of them. Use it to locate files \
by name; use Grep to search file contents.";

/// What a search found: `files` holds the newest [`MAX_RESULTS`] of `total` matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobOutcome {
    pub pattern: String,
    pub total: usize,
    pub files: Vec<String>,
}

impl GlobOutcome {
    /// The text returned to the model.
    pub fn render(&self) -> String {
        if self.files.is_empty() {
            return format!("No files found matching `{}`.", self.pattern);
        }
        let mut out = self.files.join("\n");
        if self.total > self.files.len() {
            out.push_str(&format!(
                "\n\n(Truncated: showing the {} most recently modified of {} matching files. \
                 Use a more specific pattern or path to narrow the results.)",
                self.files.len(),
                self.total
            ));
        }
        out
    }
}

/// Runs the tool on raw model input.
pub(crate) fn run(workspace: &Workspace, input: serde_json::Value) -> Result<String, ToolError> {
    let input: GlobInput = parse_input(NAME, input)?;
    Ok(search(workspace, &input)?.render())
}

/// Finds the files matching `input`: the newest [`MAX_RESULTS`] of them, and how many there are.
pub fn search(workspace: &Workspace, input: &GlobInput) -> Result<GlobOutcome, ToolError> {
    let mut hits = every_match(workspace, input)?;
    let total = hits.len();
    newest_first(&mut hits, MAX_RESULTS);
    Ok(GlobOutcome {
        pattern: input.pattern.clone(),
        total,
        files: hits.into_iter().map(|(_, path)| path).collect(),
    })
}

/// Every file matching `input`, by path (for benchmarks that compare results).
pub fn all_matches(workspace: &Workspace, input: &GlobInput) -> Result<Vec<String>, ToolError> {
    let mut paths: Vec<String> = every_match(workspace, input)?
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    paths.sort_unstable();
    Ok(paths)
}

fn every_match(
    workspace: &Workspace,
    input: &GlobInput,
) -> Result<Vec<(SystemTime, String)>, ToolError> {
    let (base, pattern) = locate(workspace, input)?;
    let matcher = compile(&pattern)?;
    let prefix = literal_prefix(&pattern);
    match workspace.confine(&pattern, &base.join(&prefix)) {
        Ok(start) if start.is_dir() => Ok(collect(workspace, &start, &prefix, &matcher)),
        Ok(_) | Err(WorkspaceError::NotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// The directory to search from and the pattern relative to it.
fn locate(workspace: &Workspace, input: &GlobInput) -> Result<(PathBuf, String), ToolError> {
    let raw = input.pattern.trim();
    if raw.is_empty() {
        return Err(ToolError::Refused("`pattern` must not be empty".to_owned()));
    }
    let (base_label, pattern) = match workspace.strip_root(Path::new(raw)) {
        Some(rest) => (String::new(), rest.to_string_lossy().into_owned()),
        None if raw.starts_with('/') => {
            return Err(ToolError::Refused(format!(
                "pattern `{raw}` is an absolute path outside the repository; use a pattern \
                 relative to the repository root"
            )));
        }
        None => (input.path.clone().unwrap_or_default(), raw.to_owned()),
    };
    let pattern = pattern.trim_start_matches("./").to_owned();
    if Path::new(&pattern)
        .components()
        .any(|c| c == Component::ParentDir)
    {
        return Err(ToolError::Refused(format!(
            "pattern `{raw}` must not contain `..`; set `path` to choose the directory instead"
        )));
    }
    let base = workspace.resolve(&base_label)?;
    if !base.is_dir() {
        return Err(ToolError::Refused(format!(
            "path `{base_label}` is a file, not a directory; Glob searches directories \
             (use Read to open a file)"
        )));
    }
    Ok((base, pattern))
}

fn compile(pattern: &str) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|e| ToolError::Refused(format!("invalid glob pattern `{pattern}`: {e}")))
}

/// The leading directories of `pattern` that contain no glob syntax: the walk starts there.
fn literal_prefix(pattern: &str) -> PathBuf {
    let parts: Vec<&str> = pattern.split('/').collect();
    let dirs = &parts[..parts.len().saturating_sub(1)];
    dirs.iter()
        .take_while(|part| !part.contains(['*', '?', '[', ']', '{', '}', '\\']))
        .filter(|part| !part.is_empty() && **part != ".")
        .collect()
}

/// Walks `start` (the real path of `prefix`) and keeps the files whose pattern-relative path
/// (`prefix` + path under `start`) matches.
fn collect(
    workspace: &Workspace,
    start: &Path,
    prefix: &Path,
    matcher: &GlobMatcher,
) -> Vec<(SystemTime, String)> {
    let builder = walk::builder(workspace, start);
    let per_thread = walk::for_each_file(&builder, || {
        |entry: &ignore::DirEntry, hits: &mut Vec<(SystemTime, String)>| {
            let Ok(under) = entry.path().strip_prefix(start) else {
                return;
            };
            let matched = if prefix.as_os_str().is_empty() {
                matcher.is_match(under)
            } else {
                matcher.is_match(prefix.join(under))
            };
            if matched {
                hits.push((walk::mtime(entry), workspace.display(entry.path())));
            }
        }
    });
    per_thread.into_iter().flatten().collect()
}

/// Keeps the `keep` newest entries, newest first (ties by path).
fn newest_first(hits: &mut Vec<(SystemTime, String)>, keep: usize) {
    let order = |a: &(SystemTime, String), b: &(SystemTime, String)| {
        b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1))
    };
    if hits.len() > keep && keep > 0 {
        hits.select_nth_unstable_by(keep - 1, order);
        hits.truncate(keep);
    }
    hits.sort_unstable_by(order);
}

#[cfg(test)]
#[path = "glob_tests.rs"]
mod tests;

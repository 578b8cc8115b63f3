//! `Grep`: search file contents with a regular expression, on every core, ripgrep-style.

use std::path::PathBuf;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use serde::Deserialize;
use serde_json::json;
use ultraplan_protocol::model::ToolDefinition;

use super::grep_sink::{FileSink, Hits};
use super::{ToolError, object_tool, parse_input, walk};
use crate::workspace::Workspace;

pub use super::grep_sink::{FileHits, Line, OutputMode};

/// The tool's name as the model calls it.
pub const NAME: &str = "Grep";

/// Output is cut near this many characters, with a note.
pub const MAX_OUTPUT_CHARS: usize = 30_000;

/// The tool's input; field names follow ripgrep's flags.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `pattern` string")]
pub struct GrepInput {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub glob: Option<String>,
    #[serde(default, rename = "type")]
    pub file_type: Option<String>,
    #[serde(default)]
    pub output_mode: OutputMode,
    #[serde(default, rename = "-i")]
    pub case_insensitive: bool,
    #[serde(default, rename = "-n")]
    pub line_numbers: Option<bool>,
    #[serde(default, rename = "-A")]
    pub after: Option<usize>,
    #[serde(default, rename = "-B")]
    pub before: Option<usize>,
    #[serde(default, rename = "-C")]
    pub context: Option<usize>,
    #[serde(default)]
    pub multiline: bool,
    #[serde(default)]
    pub head_limit: Option<usize>,
}

impl GrepInput {
    /// Context lines after and before each match (content mode only).
    pub(crate) fn context_lines(&self) -> (usize, usize) {
        if self.output_mode != OutputMode::Content {
            return (0, 0);
        }
        let after = self.after.or(self.context).unwrap_or(0);
        let before = self.before.or(self.context).unwrap_or(0);
        (after, before)
    }

    /// Whether content lines carry their line number (default: yes).
    pub(crate) fn numbered(&self) -> bool {
        self.output_mode == OutputMode::Content && self.line_numbers.unwrap_or(true)
    }
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(NAME, DESCRIPTION, properties(), &["pattern"])
}

const DESCRIPTION: &str = "Search file contents with a regular expression (ripgrep engine and \
syntax: `\\s`, `\\w+`, `(a|b)`; escape literal braces and dots, e.g. `fn\\s+main\\(`). Respects \
.gitignore, includes hidden files, skips .git/ and binary files. output_mode \
\"files_with_matches\" (default) lists matching files, most recently modified first; \"count\" \
gives matching lines per file; \"content\" shows the lines as `path:line:text` (context lines as \
`path-line-text`, `--` between groups). Narrow big searches with `path`, `glob` or `type`. \
Output is capped near 30000 characters; counts always cover every match.";

/// The input's fields.
fn properties() -> serde_json::Value {
    json!({
        "pattern": {"type": "string", "description": "Regular expression to search for."},
        "path": {"type": "string", "description": "File or directory to search, relative \
            to the repository root (default: the whole repository)."},
        "glob": {"type": "string", "description": "Only search files matching this glob \
            (like rg --glob), e.g. \"*.rs\", \"*.{ts,tsx}\", \"src/**/*.py\"; prefix with \
            `!` to exclude."},
        "type": {"type": "string", "description": "Only search files of this type (like \
            rg --type), e.g. rust, py, js, ts, go, java, c, cpp, md, json, yaml, toml."},
        "output_mode": {"type": "string",
            "enum": ["content", "files_with_matches", "count"],
            "description": "What to return (default files_with_matches)."},
        "-i": {"type": "boolean", "description": "Case-insensitive search."},
        "-n": {"type": "boolean", "description": "Show line numbers (content mode; \
            default true)."},
        "-A": {"type": "integer", "minimum": 0, "description": "Lines of context after \
            each match (content mode)."},
        "-B": {"type": "integer", "minimum": 0, "description": "Lines of context before \
            each match (content mode)."},
        "-C": {"type": "integer", "minimum": 0, "description": "Lines of context before \
            and after each match (content mode)."},
        "multiline": {"type": "boolean", "description": "Let the pattern span lines; `.` \
            then also matches newlines (like rg -U --multiline-dotall)."},
        "head_limit": {"type": "integer", "minimum": 0, "description": "Show only the \
            first N output lines (content), files (files_with_matches) or entries (count)."}
    })
}

/// Everything a search found. Totals are exact; `files` may stop short (see
/// [`GrepOutcome::incomplete`]).
#[derive(Debug, Clone)]
pub struct GrepOutcome {
    pub input: GrepInput,
    /// Files with matches: by path, or newest first in files_with_matches mode.
    pub files: Vec<FileHits>,
    /// Number of files with matches.
    pub total_files: u64,
    /// Number of matching lines (count and content modes; matches, in multiline mode).
    pub total_matches: u64,
    /// Some matching file's text was dropped from `files` to bound memory.
    pub incomplete: bool,
}

/// Runs the tool on raw model input.
pub(crate) fn run(workspace: &Workspace, input: serde_json::Value) -> Result<String, ToolError> {
    let input: GrepInput = parse_input(NAME, input)?;
    Ok(search(workspace, &input)?.render())
}

/// Searches the workspace as `input` asks, keeping text for the model's output budget.
pub fn search(workspace: &Workspace, input: &GrepInput) -> Result<GrepOutcome, ToolError> {
    search_within(workspace, input, MAX_OUTPUT_CHARS)
}

/// Searches the workspace as `input` asks, keeping the text of matching lines up to `budget`
/// bytes (`usize::MAX` keeps every file and line: for benchmarks that compare results).
pub fn search_within(
    workspace: &Workspace,
    input: &GrepInput,
    budget: usize,
) -> Result<GrepOutcome, ToolError> {
    let matcher = build_matcher(input)?;
    let start = workspace.resolve(input.path.as_deref().unwrap_or(""))?;
    let walker = build_walker(workspace, start, input)?;
    let searcher = build_searcher(input);
    let mode = input.output_mode;
    let per_thread = walk::for_each_file(&walker, || {
        let mut searcher = searcher.clone();
        let matcher = matcher.clone();
        let counter = input.multiline.then(|| matcher.clone());
        let mut sink = FileSink::new(mode, budget, counter);
        move |entry: &ignore::DirEntry, hits: &mut Hits| {
            if let Err(e) = searcher.search_path(&matcher, entry.path(), &mut sink) {
                tracing::debug!(path = %entry.path().display(), error = %e, "grep: skipped");
                let _ = sink.take(String::new);
                return;
            }
            if let Some(mut found) = sink.take(|| workspace.display(entry.path())) {
                if mode == OutputMode::FilesWithMatches {
                    found.mtime = walk::mtime(entry);
                }
                hits.add(found, budget);
            }
        }
    });
    Ok(outcome(input, Hits::merge(per_thread, budget)))
}

fn outcome(input: &GrepInput, hits: Hits) -> GrepOutcome {
    let incomplete = hits.incomplete();
    let mut files: Vec<FileHits> = hits.files.into_values().collect();
    if input.output_mode == OutputMode::FilesWithMatches {
        files.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));
    }
    GrepOutcome {
        input: input.clone(),
        files,
        total_files: hits.total_files,
        total_matches: hits.total_matches,
        incomplete,
    }
}

/// The regex matcher, configured like ripgrep's.
fn build_matcher(input: &GrepInput) -> Result<RegexMatcher, ToolError> {
    if input.pattern.is_empty() {
        return Err(ToolError::Refused("`pattern` must not be empty".to_owned()));
    }
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(input.case_insensitive)
        .multi_line(true);
    if input.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&input.pattern).map_err(|e| {
        let hint = if !input.multiline && e.to_string().contains(r"\n") {
            " (set `multiline: true` to match across lines)"
        } else {
            ""
        };
        ToolError::Refused(format!("invalid regex `{}`: {e}{hint}", input.pattern))
    })
}

/// The searcher: quits a file at its first NUL byte (binary), as ripgrep does when walking.
fn build_searcher(input: &GrepInput) -> Searcher {
    let (after, before) = input.context_lines();
    SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(input.numbered())
        .multi_line(input.multiline)
        .after_context(after)
        .before_context(before)
        .build()
}

/// The walk, with the `glob` and `type` filters.
fn build_walker(
    workspace: &Workspace,
    start: PathBuf,
    input: &GrepInput,
) -> Result<WalkBuilder, ToolError> {
    let mut walker = walk::builder(workspace, &start);
    if let Some(glob) = input
        .glob
        .as_deref()
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        let overrides = OverrideBuilder::new(workspace.root())
            .add(glob)
            .and_then(|b| b.build())
            .map_err(|e| ToolError::Refused(format!("invalid `glob` `{glob}`: {e}")))?;
        walker.overrides(overrides);
    }
    if let Some(name) = input
        .file_type
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        walker.types(file_types(name)?);
    }
    Ok(walker)
}

/// ripgrep's file type `name` (plus the alias `rs`).
fn file_types(name: &str) -> Result<ignore::types::Types, ToolError> {
    let name = if name == "rs" { "rust" } else { name };
    let mut types = TypesBuilder::new();
    types.add_defaults();
    if !types.definitions().iter().any(|d| d.name() == name) {
        return Err(ToolError::Refused(format!(
            "unknown file `type` `{name}`; use a ripgrep type name such as rust, py, js, ts, \
             go, java, c, cpp, md, json, yaml or toml, or filter with `glob` (e.g. \"*.{name}\")"
        )));
    }
    types
        .select(name)
        .build()
        .map_err(|e| ToolError::Refused(format!("bad file `type` `{name}`: {e}")))
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;

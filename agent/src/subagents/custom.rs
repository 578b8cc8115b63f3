//! Custom agent types from the bundle's `.claude/agents/*.md`: YAML front matter (`name`,
//! `description`, `tools`, `disallowedTools`, `model`, `maxTurns`) and the body as the system
//! prompt. A file that cannot be used is reported and skipped, never fatal.

use std::io::Read as _;
use std::path::Path;

use thiserror::Error;

use super::definition::{AgentDefinition, InvalidDefinition, Source};
use super::front_matter::{self, FrontMatterError, Value};
use crate::workspace::Workspace;

/// The folder read, relative to the repository root.
pub const AGENTS_DIR: &str = ".claude/agents";
/// Largest definition file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// At most this many files are read.
pub const MAX_FILES: usize = 64;
/// Turns a custom agent gets when its file sets none.
pub const DEFAULT_MAX_TURNS: u32 = 24;
/// The highest `maxTurns` accepted.
pub const MAX_MAX_TURNS: u32 = 200;

/// Why a definition file was skipped. The text is shown to the user.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DefinitionError {
    #[error(transparent)]
    FrontMatter(#[from] FrontMatterError),
    #[error("`{0}` is missing")]
    Missing(&'static str),
    #[error("`{field}` must be {expected}")]
    Type {
        field: &'static str,
        expected: &'static str,
    },
    #[error("`name` `{0}` may hold only letters, digits, `-` and `_` (at most 64)")]
    BadName(String),
    #[error("`maxTurns` must be a whole number from 1 to {MAX_MAX_TURNS}, not `{0}`")]
    BadMaxTurns(String),
    #[error("the body (the agent's system prompt) is empty")]
    EmptyBody,
    #[error("the name `{name}` is already defined by {other}")]
    Duplicate { name: String, other: String },
    #[error("{0}")]
    Unreadable(String),
}

/// Reads every definition in the workspace's `.claude/agents/`, in file-name order.
pub fn load(workspace: &Workspace) -> (Vec<AgentDefinition>, Vec<InvalidDefinition>) {
    let mut valid: Vec<AgentDefinition> = Vec::new();
    let mut invalid = Vec::new();
    for path in definition_files(workspace) {
        let parsed = read(workspace, &path).and_then(|text| parse(&path, &text));
        match parsed.and_then(|def| unique(def, &valid)) {
            Ok(def) => valid.push(def),
            Err(e) => {
                tracing::warn!(path, reason = %e, "skipping an agent definition");
                invalid.push(InvalidDefinition {
                    path,
                    reason: e.to_string(),
                });
            }
        }
    }
    (valid, invalid)
}

/// The `.md` files directly in the folder, as paths relative to the root.
fn definition_files(workspace: &Workspace) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(workspace.root().join(AGENTS_DIR)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && !n.starts_with('.'))
        .collect();
    names.sort();
    if names.len() > MAX_FILES {
        tracing::warn!(
            found = names.len(),
            "reading only the first agent definitions"
        );
        names.truncate(MAX_FILES);
    }
    names
        .into_iter()
        .map(|n| format!("{AGENTS_DIR}/{n}"))
        .collect()
}

fn read(workspace: &Workspace, path: &str) -> Result<String, DefinitionError> {
    let unreadable = |e: &dyn std::fmt::Display| DefinitionError::Unreadable(e.to_string());
    let resolved = workspace.resolve(path).map_err(|e| unreadable(&e))?;
    let meta = std::fs::metadata(&resolved).map_err(|e| unreadable(&e))?;
    if !meta.is_file() {
        return Err(DefinitionError::Unreadable("not a regular file".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(DefinitionError::Unreadable(format!(
            "larger than {MAX_FILE_BYTES} bytes"
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&resolved)
        .and_then(|f| f.take(MAX_FILE_BYTES).read_to_end(&mut bytes))
        .map_err(|e| unreadable(&e))?;
    String::from_utf8(bytes).map_err(|_| DefinitionError::Unreadable("not UTF-8 text".into()))
}

/// Parses one definition file; `path` is where it came from.
pub fn parse(path: &str, text: &str) -> Result<AgentDefinition, DefinitionError> {
    let doc = front_matter::parse(text)?;
    let name = required(doc.get("name"), "name")?;
    if !valid_name(&name) {
        return Err(DefinitionError::BadName(name));
    }
    let description = required(doc.get("description"), "description")?;
    let system_prompt = doc.body.trim().to_owned();
    if system_prompt.is_empty() {
        return Err(DefinitionError::EmptyBody);
    }
    Ok(AgentDefinition {
        name,
        description,
        system_prompt,
        tools: tool_list(doc.get("tools")),
        disallowed_tools: tool_list(doc.get("disallowedTools")).unwrap_or_default(),
        model: optional_scalar(doc.get("model"), "model")?,
        max_turns: max_turns(doc.get("maxTurns"))?,
        inherits_context: false,
        source: Source::File(Path::new(path).display().to_string()),
    })
}

fn unique(
    def: AgentDefinition,
    seen: &[AgentDefinition],
) -> Result<AgentDefinition, DefinitionError> {
    match seen.iter().find(|d| d.name.eq_ignore_ascii_case(&def.name)) {
        Some(other) => Err(DefinitionError::Duplicate {
            name: def.name,
            other: match &other.source {
                Source::File(path) => path.clone(),
                Source::BuiltIn => "a built-in agent".into(),
            },
        }),
        None => Ok(def),
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

fn required(value: Option<&Value>, field: &'static str) -> Result<String, DefinitionError> {
    optional_scalar(value, field)?.ok_or(DefinitionError::Missing(field))
}

/// A non-empty scalar, or nothing.
fn optional_scalar(
    value: Option<&Value>,
    field: &'static str,
) -> Result<Option<String>, DefinitionError> {
    match value {
        None => Ok(None),
        Some(Value::Scalar(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        Some(Value::List(_)) => Err(DefinitionError::Type {
            field,
            expected: "text, not a list",
        }),
    }
}

/// A comma-separated scalar or a list of tool names; `*` (or nothing) means no restriction.
fn tool_list(value: Option<&Value>) -> Option<Vec<String>> {
    let items: Vec<String> = match value {
        None => return None,
        Some(Value::Scalar(s)) if s.trim().is_empty() => return None,
        Some(Value::Scalar(s)) => s.split(',').map(|t| t.trim().to_owned()).collect(),
        Some(Value::List(items)) => items.iter().map(|t| t.trim().to_owned()).collect(),
    };
    let items: Vec<String> = items.into_iter().filter(|t| !t.is_empty()).collect();
    if items.iter().any(|t| t == "*") {
        return None;
    }
    Some(items)
}

fn max_turns(value: Option<&Value>) -> Result<u32, DefinitionError> {
    let Some(raw) = optional_scalar(value, "maxTurns")? else {
        return Ok(DEFAULT_MAX_TURNS);
    };
    match raw.parse::<u32>() {
        Ok(n) if (1..=MAX_MAX_TURNS).contains(&n) => Ok(n),
        _ => Err(DefinitionError::BadMaxTurns(raw)),
    }
}

#[cfg(test)]
#[path = "custom_tests.rs"]
mod tests;

//! `.ultraplan/environment.toml`: how a repository's environment is set up (pure parsing and
//! validation; docs/ARCHITECTURE.md §6.5).

use std::time::Duration;

use serde::Deserialize;
use ultraplan_protocol::secret_names;

/// Where the environment file lives in a repository.
pub const ENVIRONMENT_FILE: &str = ".ultraplan/environment.toml";
/// The largest environment file read.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
const MAX_COMMANDS: usize = 64;
const MAX_COMMAND_BYTES: usize = 8 * 1024;
const MAX_SECRETS: usize = 32;
const MAX_LOCK_FILES: usize = 32;

/// A parsed, validated environment file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvironmentFile {
    /// Commands run once to build the environment.
    pub setup: Vec<String>,
    /// Commands run on a reused environment before each session uses it.
    pub maintenance: Vec<String>,
    /// Who setup may reach: raw entries, `[]` for none and `["*"]` for all.
    pub setup_network: Vec<String>,
    /// Names of the owner's server-held secrets given to setup (only).
    pub secrets: Vec<String>,
    /// Setup's own time limit, when the file sets one (the server caps it).
    pub timeout: Option<Duration>,
    /// Repository files whose contents key the cached environment (lock files).
    pub lock_files: Vec<String>,
    /// Commands that test the project, for the verifier.
    pub verify: Vec<String>,
    /// Who the executing agent's Bash may reach (same entries as setup's); empty for none,
    /// the default.
    pub agent_network: Vec<String>,
    /// A Docker image present on the runner's engine to build on instead of the host's
    /// toolchain (`[base] image`); `None` for the host.
    pub base_image: Option<String>,
}

/// Why an environment file was refused; the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ENVIRONMENT_FILE}: {0}")]
pub struct FileError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    base: Option<RawBase>,
    setup: Option<RawSetup>,
    maintenance: Option<RawCommands>,
    agent: Option<RawAgent>,
    verify: Option<RawCommands>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBase {
    image: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSetup {
    #[serde(default)]
    commands: Vec<String>,
    network: Option<RawNetwork>,
    #[serde(default)]
    secrets: Vec<String>,
    timeout_seconds: Option<u64>,
    #[serde(default)]
    lock_files: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCommands {
    #[serde(default)]
    commands: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    network: Option<RawNetwork>,
}

/// `network = ["host:port", …]`, `network = "none" | "all"`, or `network = { allow = […] }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawNetwork {
    List(Vec<String>),
    Word(String),
    Table { allow: Vec<String> },
}

impl RawNetwork {
    fn entries(self, what: &str) -> Result<Vec<String>, FileError> {
        match self {
            RawNetwork::List(list) | RawNetwork::Table { allow: list } => Ok(list),
            RawNetwork::Word(word) => match word.as_str() {
                "none" => Ok(Vec::new()),
                "all" => Ok(vec!["*".to_owned()]),
                other => Err(FileError(format!(
                    "{what}: {other:?} is not a network policy; use \"none\", \"all\", \
                     a list of \"host:port\" entries, or {{ allow = [...] }}"
                ))),
            },
        }
    }
}

/// Parse and validate an environment file's text.
pub fn parse(text: &str) -> Result<EnvironmentFile, FileError> {
    let raw: Raw = toml::from_str(text).map_err(|e| FileError(one_line(&e.to_string())))?;
    let base_image = match raw.base.and_then(|b| b.image) {
        Some(image) if image != "host" => Some(image_reference(image)?),
        _ => None,
    };
    let agent_network = match raw.agent.and_then(|a| a.network) {
        Some(network) => network.entries("[agent] network")?,
        None => Vec::new(),
    };
    let setup = raw.setup.unwrap_or_default();
    let file = EnvironmentFile {
        setup_network: match setup.network {
            Some(network) => network.entries("[setup] network")?,
            None => Vec::new(),
        },
        setup: commands("[setup] commands", setup.commands)?,
        maintenance: commands(
            "[maintenance] commands",
            raw.maintenance.unwrap_or_default().commands,
        )?,
        secrets: secrets(setup.secrets)?,
        timeout: timeout(setup.timeout_seconds)?,
        lock_files: lock_files(setup.lock_files)?,
        verify: commands("[verify] commands", raw.verify.unwrap_or_default().commands)?,
        base_image,
        agent_network,
    };
    Ok(file)
}

/// A Docker image reference (`name[:tag]` or `name@sha256:…`, with an optional registry
/// host): letters, digits and `._-/:@`, not starting with `-`, at most 255 characters.
fn image_reference(image: String) -> Result<String, FileError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._-/:@".contains(c);
    let plain = !image.is_empty()
        && image.len() <= 255
        && image.chars().all(allowed)
        && !image.starts_with(['-', '/', ':', '@', '.'])
        && !image.contains("..");
    if plain {
        Ok(image)
    } else {
        Err(FileError(format!(
            "[base] image {image:?} is not a Docker image reference (e.g. \"python:3.12\"), \
             or \"host\" for the runner's own toolchain"
        )))
    }
}

fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn commands(what: &str, list: Vec<String>) -> Result<Vec<String>, FileError> {
    if list.len() > MAX_COMMANDS {
        return Err(FileError(format!(
            "{what}: more than {MAX_COMMANDS} commands"
        )));
    }
    for command in &list {
        if command.trim().is_empty() {
            return Err(FileError(format!("{what}: a command is empty")));
        }
        if command.len() > MAX_COMMAND_BYTES || command.contains('\0') {
            return Err(FileError(format!(
                "{what}: a command is longer than {MAX_COMMAND_BYTES} bytes or holds a NUL byte"
            )));
        }
    }
    Ok(list)
}

fn secrets(names: Vec<String>) -> Result<Vec<String>, FileError> {
    if names.len() > MAX_SECRETS {
        return Err(FileError(format!(
            "[setup] secrets: more than {MAX_SECRETS} names"
        )));
    }
    if let Some(problem) = names.iter().find_map(|n| secret_names::name_problem(n)) {
        return Err(FileError(format!("[setup] secrets: {problem}")));
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    Ok(sorted)
}

fn timeout(seconds: Option<u64>) -> Result<Option<Duration>, FileError> {
    match seconds {
        Some(0) => Err(FileError(
            "[setup] timeout_seconds must be at least 1".to_owned(),
        )),
        other => Ok(other.map(Duration::from_secs)),
    }
}

/// Whether `path` is a plain relative path inside the repository (no `..`, `.` or empty
/// parts, not absolute, no NUL).
pub fn plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\0')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

fn lock_files(paths: Vec<String>) -> Result<Vec<String>, FileError> {
    if paths.len() > MAX_LOCK_FILES {
        return Err(FileError(format!(
            "[setup] lock_files: more than {MAX_LOCK_FILES} paths"
        )));
    }
    if let Some(bad) = paths.iter().find(|p| !plain_relative(p)) {
        return Err(FileError(format!(
            "[setup] lock_files: {bad:?} must be a relative path inside the repository"
        )));
    }
    let mut sorted = paths;
    sorted.sort();
    sorted.dedup();
    Ok(sorted)
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;

//! Client configuration: the server URL, the API token and the local coding command.
//!
//! Precedence: command-line flags, then the environment (`ULTRAPLAN_SERVER`, `ULTRAPLAN_TOKEN`,
//! `ULTRAPLAN_LOCAL_COMMAND`), then the file `config.toml` that `ultraplan login` writes with
//! mode 0600 (it holds a token).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The command run to implement a teleported plan when none is configured.
pub const DEFAULT_LOCAL_COMMAND: &str = "claude";

/// Environment variable naming the local coding command.
pub const LOCAL_COMMAND_ENV: &str = "ULTRAPLAN_LOCAL_COMMAND";

/// What `config.toml` holds. Every key is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_command: Option<String>,
}

/// The effective settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Base URL without a trailing slash.
    pub server: String,
    pub token: Option<String>,
    /// The local coding command (a shell command line).
    pub local_command: String,
}

/// Values that override the file: flags, or the environment through clap.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub server: Option<String>,
    pub token: Option<String>,
    pub local_command: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no server configured: run `ultraplan login --server URL --token TOKEN`, or set ULTRAPLAN_SERVER"
    )]
    NoServer,
    #[error("{url:?} is not a server URL: it must start with http:// or https://")]
    BadUrl { url: String },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    NoDirectory(#[from] crate::paths::NoDirectory),
}

/// Checks a server URL and drops trailing slashes.
pub fn normalize_server(url: &str) -> Result<String, ConfigError> {
    let trimmed = url.trim().trim_end_matches('/');
    let has_host = |rest: &str| !rest.is_empty() && !rest.starts_with('/');
    let ok = ["http://", "https://"]
        .iter()
        .any(|scheme| trimmed.strip_prefix(scheme).is_some_and(has_host));
    if ok {
        Ok(trimmed.to_owned())
    } else {
        Err(ConfigError::BadUrl {
            url: url.to_owned(),
        })
    }
}

/// Reads the file; a missing file is an empty configuration.
pub fn load_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileConfig::default()),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    toml::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Writes the file atomically with mode 0600 (its directory 0700).
pub fn save_file(path: &Path, config: &FileConfig) -> Result<(), ConfigError> {
    let write_err = |source| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    let text = toml::to_string(config).map_err(|e| ConfigError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(write_err)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(write_err)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let result = write_private(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(write_err)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Combines overrides with the file.
pub fn resolve(overrides: &Overrides, file: FileConfig) -> Result<Settings, ConfigError> {
    let server = overrides
        .server
        .clone()
        .filter(|s| !s.trim().is_empty())
        .or(file.server)
        .ok_or(ConfigError::NoServer)?;
    let non_empty = |s: &String| !s.trim().is_empty();
    Ok(Settings {
        server: normalize_server(&server)?,
        token: overrides
            .token
            .clone()
            .filter(non_empty)
            .or(file.token.filter(non_empty)),
        local_command: overrides
            .local_command
            .clone()
            .filter(non_empty)
            .or(file.local_command.filter(non_empty))
            .unwrap_or_else(|| DEFAULT_LOCAL_COMMAND.to_owned()),
    })
}

/// The local command override from the environment.
pub fn local_command_from_env() -> Option<String> {
    std::env::var(LOCAL_COMMAND_ENV)
        .ok()
        .filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(server: &str, token: &str) -> FileConfig {
        FileConfig {
            server: Some(server.into()),
            token: Some(token.into()),
            local_command: None,
        }
    }

    #[test]
    fn overrides_win_over_the_file() {
        let overrides = Overrides {
            server: Some("http://flag:1/".into()),
            token: None,
            local_command: Some("aider".into()),
        };
        let s = resolve(&overrides, file("http://file:2", "t-file")).unwrap();
        assert_eq!(s.server, "http://flag:1");
        assert_eq!(s.token.as_deref(), Some("t-file"));
        assert_eq!(s.local_command, "aider");
        let s = resolve(&Overrides::default(), file("https://file:2", "t")).unwrap();
        assert_eq!(s.server, "https://file:2");
        assert_eq!(s.local_command, DEFAULT_LOCAL_COMMAND);
    }

    #[test]
    fn missing_or_bad_server_is_an_error() {
        assert!(matches!(
            resolve(&Overrides::default(), FileConfig::default()),
            Err(ConfigError::NoServer)
        ));
        for bad in ["localhost:7878", "ftp://x", "http://", "http:///x"] {
            assert!(normalize_server(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_file_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ultraplan/config.toml");
        assert_eq!(load_file(&path).unwrap(), FileConfig::default());
        let config = file("http://127.0.0.1:7878", "secret");
        save_file(&path, &config).unwrap();
        save_file(&path, &config).unwrap();
        assert_eq!(load_file(&path).unwrap(), config);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
    }

    #[test]
    fn a_broken_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "server = [").unwrap();
        let err = load_file(&path).unwrap_err().to_string();
        assert!(err.contains("config.toml"), "{err}");
    }
}

//! Where the client keeps its files, following the XDG base directory spec:
//! configuration in `$XDG_CONFIG_HOME/ultraplan` (`~/.config/ultraplan`), watcher state in
//! `$XDG_STATE_HOME/ultraplan` (`~/.local/state/ultraplan`), bundles in
//! `$XDG_CACHE_HOME/ultraplan` (`~/.cache/ultraplan`). Relative XDG values are ignored, as the
//! spec asks.

use std::path::PathBuf;

/// No home directory to put files in.
#[derive(Debug, thiserror::Error)]
#[error("no {kind} directory: set HOME or {var}")]
pub struct NoDirectory {
    kind: &'static str,
    var: &'static str,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn base(var: &'static str, kind: &'static str, home_rel: &str) -> Result<PathBuf, NoDirectory> {
    env_path(var)
        .filter(|p| p.is_absolute())
        .or_else(|| env_path("HOME").map(|home| home.join(home_rel)))
        .map(|dir| dir.join("ultraplan"))
        .ok_or(NoDirectory { kind, var })
}

/// `$XDG_CONFIG_HOME/ultraplan`.
pub fn config_dir() -> Result<PathBuf, NoDirectory> {
    base("XDG_CONFIG_HOME", "configuration", ".config")
}

/// `$XDG_STATE_HOME/ultraplan`.
pub fn state_dir() -> Result<PathBuf, NoDirectory> {
    base("XDG_STATE_HOME", "state", ".local/state")
}

/// `$XDG_CACHE_HOME/ultraplan`.
pub fn cache_dir() -> Result<PathBuf, NoDirectory> {
    base("XDG_CACHE_HOME", "cache", ".cache")
}

/// The configuration file.
pub fn config_file() -> Result<PathBuf, NoDirectory> {
    Ok(config_dir()?.join("config.toml"))
}

/// One JSON state file per watched session lives here.
pub fn sessions_dir() -> Result<PathBuf, NoDirectory> {
    Ok(state_dir()?.join("sessions"))
}

/// The first executable called `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

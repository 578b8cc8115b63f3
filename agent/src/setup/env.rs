//! Where setup finds things, and the environment its commands run with
//! (docs/ARCHITECTURE.md §6.5). Pure, but for [`find_program`], which looks at files.

use std::path::{Path, PathBuf};

use ultraplan_protocol::environment::{
    EGRESS_RELAY_PORT, EGRESS_SOCKET_MOUNT, ENV_MOUNT, ENV_VAR, SetupInput,
};

use super::SetupError;

/// The workspace when `ULTRAPLAN_WORKSPACE` is unset.
pub const DEFAULT_WORKSPACE: &str = "/workspace";

/// Where setup works. The defaults are the sandbox's; the `ULTRAPLAN_*` overrides let tests
/// run setup outside one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupPaths {
    /// `ULTRAPLAN_ENV`, default `ENV_MOUNT`.
    pub env_root: PathBuf,
    /// `ULTRAPLAN_WORKSPACE`, default [`DEFAULT_WORKSPACE`].
    pub workspace: PathBuf,
    /// `ULTRAPLAN_EGRESS_SOCKET`, default `EGRESS_SOCKET_MOUNT`.
    pub egress_socket: PathBuf,
    /// `ULTRAPLAN_EGRESS_PORT`, default `EGRESS_RELAY_PORT`.
    pub relay_port: u16,
}

impl SetupPaths {
    /// Read the settings through `var` (a variable's value, `None` when unset).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<SetupPaths, SetupError> {
        let path = |name: &str, default: &str| {
            PathBuf::from(var(name).unwrap_or_else(|| default.to_owned()))
        };
        let relay_port = match var("ULTRAPLAN_EGRESS_PORT") {
            None => EGRESS_RELAY_PORT,
            Some(value) => match value.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => {
                    return Err(SetupError::BadPort {
                        name: "ULTRAPLAN_EGRESS_PORT",
                        value,
                    });
                }
            },
        };
        Ok(SetupPaths {
            env_root: path(ENV_VAR, ENV_MOUNT),
            workspace: path("ULTRAPLAN_WORKSPACE", DEFAULT_WORKSPACE),
            egress_socket: path("ULTRAPLAN_EGRESS_SOCKET", EGRESS_SOCKET_MOUNT),
            relay_port,
        })
    }

    /// The settings of this process's environment.
    pub fn from_process() -> Result<SetupPaths, SetupError> {
        SetupPaths::from_vars(|name| std::env::var(name).ok())
    }

    /// `<env>/home`: `HOME` for the commands.
    pub fn home(&self) -> PathBuf {
        self.env_root.join("home")
    }

    /// `<env>/bin`: on `PATH` after the virtual environment.
    pub fn bin(&self) -> PathBuf {
        self.env_root.join("bin")
    }

    /// `<env>/venv`: the Python virtual environment.
    pub fn venv(&self) -> PathBuf {
        self.env_root.join("venv")
    }

    /// The `PATH` the commands get.
    pub fn search_path(&self) -> String {
        format!(
            "{}:{}:/usr/local/bin:/usr/bin:/bin",
            text(&self.venv().join("bin")),
            text(&self.bin())
        )
    }
}

/// The commands' environment before the input's variables: nothing is inherited.
pub fn base_env(paths: &SetupPaths, venv_exists: bool, egress: bool) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH", paths.search_path()),
        ("HOME", text(&paths.home())),
        (ENV_VAR, text(&paths.env_root)),
    ];
    if venv_exists {
        env.push(("VIRTUAL_ENV", text(&paths.venv())));
    }
    env.extend([
        ("LANG", "C.UTF-8".to_owned()),
        ("TMPDIR", "/tmp".to_owned()),
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1".to_owned()),
        ("PIP_NO_INPUT", "1".to_owned()),
        ("DEBIAN_FRONTEND", "noninteractive".to_owned()),
        ("CI", "true".to_owned()),
    ]);
    if egress {
        let proxy = format!("http://127.0.0.1:{}", paths.relay_port);
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            env.push((name, proxy.clone()));
        }
        env.extend([("NO_PROXY", String::new()), ("no_proxy", String::new())]);
    }
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// [`base_env`] with the input's variables on top (an input variable replaces a base one
/// in place; new ones follow in the input's order).
pub fn command_env(
    paths: &SetupPaths,
    venv_exists: bool,
    input: &SetupInput,
) -> Vec<(String, String)> {
    let mut env = base_env(paths, venv_exists, input.egress);
    for (name, value) in &input.env {
        match env.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1.clone_from(value),
            None => env.push((name.clone(), value.clone())),
        }
    }
    env
}

/// The first executable `name` in the directories of `search_path`.
pub fn find_program(search_path: &str, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    search_path
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;

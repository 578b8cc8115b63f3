//! The commands: each one gathers what it needs, calls the library, and prints.

// Printing the result is what a command is for; the library never prints.
#![allow(clippy::print_stdout)]

pub mod environment;
pub mod hook;
pub mod launch;
pub mod login;
pub mod logs;
pub mod message;
pub mod pending;
pub mod pull;
pub mod repl;
pub mod review;
pub mod secret;
pub mod sessions;
pub mod ui;
pub mod wait;
pub mod watch;

use anyhow::Context;
use ultraplan::api::Client;
use ultraplan::config::{self, FileConfig, Overrides, Settings};
use ultraplan::state::StateStore;

use crate::cli::GlobalArgs;

/// What every command may need: the configuration and the state files.
pub struct Env {
    overrides: Overrides,
    pub file: FileConfig,
    pub store: StateStore,
}

impl Env {
    /// Reads the configuration file and locates the state directory.
    pub fn load(global: &GlobalArgs) -> anyhow::Result<Self> {
        let path = ultraplan::paths::config_file()?;
        let file = config::load_file(&path)?;
        Ok(Self {
            overrides: Overrides {
                server: global.server.clone(),
                token: global.token.clone(),
                local_command: config::local_command_from_env(),
            },
            file,
            store: StateStore::open_default()?,
        })
    }

    /// The effective settings (fails when no server is configured).
    pub fn settings(&self) -> anyhow::Result<Settings> {
        Ok(config::resolve(&self.overrides, self.file.clone())?)
    }

    /// The local coding command, even without a server.
    pub fn local_command(&self) -> String {
        self.overrides
            .local_command
            .clone()
            .or_else(|| self.file.local_command.clone())
            .unwrap_or_else(|| config::DEFAULT_LOCAL_COMMAND.to_owned())
    }

    /// A client of the configured server.
    pub fn client(&self) -> anyhow::Result<(Client, Settings)> {
        let settings = self.settings()?;
        let client = Client::new(&settings.server, settings.token.as_deref())?;
        Ok((client, settings))
    }

    /// A client of `server` (a session's own server): the configured token goes with it only
    /// when it is the configured server.
    pub fn client_for(&self, server: &str) -> anyhow::Result<Client> {
        let token = self
            .settings()
            .ok()
            .filter(|s| s.server == server.trim_end_matches('/'))
            .and_then(|s| s.token);
        Client::new(server, token.as_deref()).context("building the HTTP client")
    }
}

/// Archives a session on its own server and records it in its state file. Returns whether it
/// is archived (a 409 counts); failures are reported, not raised.
pub async fn archive_and_record(env: &Env, server: &str, id: &str) -> bool {
    let archived = match env.client_for(server) {
        Ok(client) => match client.archive(id).await {
            Ok(_) => true,
            Err(e) => {
                eprintln!("ultraplan: could not archive session {id}: {e}");
                false
            }
        },
        Err(e) => {
            eprintln!("ultraplan: could not archive session {id}: {e:#}");
            false
        }
    };
    if archived && let Err(e) = env.store.update(id, |s| s.archived = true) {
        tracing::warn!("{e}");
    }
    archived
}

/// The repository a session belongs to: the one recorded, else the one around the current
/// directory.
pub fn repo_root_of(state: Option<&ultraplan::state::SessionState>) -> std::path::PathBuf {
    state
        .and_then(|s| s.repo_root.clone())
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| ultraplan::bundle::repo_root(std::path::Path::new(".")))
}

/// `ULTRAPLAN_NO_WATCH=1` keeps launches from starting the background poller.
pub fn no_watch() -> bool {
    std::env::var("ULTRAPLAN_NO_WATCH").is_ok_and(|v| !v.is_empty() && v != "0")
}

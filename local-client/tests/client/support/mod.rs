//! Test support: a scripted ultraplan server (axum, on a free loopback port, in its own
//! runtime thread) that serves scripted event pages and records what the client did, plus
//! event builders and a throwaway HOME for the binary.

pub mod events;
pub mod patch_body;
pub mod pty;
pub mod server;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use assert_cmd::cargo::cargo_bin_cmd;
use tempfile::TempDir;

/// A throwaway HOME with XDG dirs, and a separate repository directory.
pub struct Home {
    pub dir: TempDir,
}

impl Home {
    pub fn new() -> Self {
        Self {
            dir: TempDir::new().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn config(&self) -> PathBuf {
        self.path().join(".config")
    }

    pub fn state(&self) -> PathBuf {
        self.path().join(".local/state")
    }

    pub fn sessions(&self) -> PathBuf {
        self.state().join("ultraplan/sessions")
    }

    /// The environment of the binary: only these variables.
    pub fn envs(&self) -> Vec<(String, String)> {
        let p = |rel: &str| self.path().join(rel).to_string_lossy().into_owned();
        vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), p("")),
            ("XDG_CONFIG_HOME".into(), p(".config")),
            ("XDG_CACHE_HOME".into(), p(".cache")),
            ("XDG_STATE_HOME".into(), p(".local/state")),
            ("XDG_DATA_HOME".into(), p(".local/share")),
            ("BROWSER".into(), "true".into()),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ]
    }

    /// The binary with this HOME, in `cwd`.
    pub fn cmd(&self, cwd: &Path) -> Command {
        let mut cmd = cargo_bin_cmd!("ultraplan");
        cmd.env_clear().envs(self.envs()).current_dir(cwd);
        cmd
    }

    /// Writes a state file as the watcher would.
    pub fn write_state(&self, state: &serde_json::Value) {
        let id = state["session_id"].as_str().unwrap();
        std::fs::create_dir_all(self.sessions()).unwrap();
        std::fs::write(
            self.sessions().join(format!("{id}.json")),
            serde_json::to_vec_pretty(state).unwrap(),
        )
        .unwrap();
    }

    /// Reads a state file.
    pub fn read_state(&self, id: &str) -> Option<serde_json::Value> {
        let bytes = std::fs::read(self.sessions().join(format!("{id}.json"))).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// A small git repository with one commit and one untracked file.
pub fn git_repo(parent: &Path) -> PathBuf {
    let repo = parent.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(
        repo.join("src/main.rs"),
        "fn main() { println!(\"hi\"); }\n",
    )
    .unwrap();
    std::fs::write(repo.join("README.md"), "# demo\n").unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", parent)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(status.status.success(), "git {args:?}: {status:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
    std::fs::write(repo.join("notes.txt"), "untracked\n").unwrap();
    repo.canonicalize().unwrap()
}

/// A state file as the watcher writes it.
pub fn state_json(id: &str, server: &str, repo: Option<&Path>) -> serde_json::Value {
    serde_json::json!({
        "session_id": id,
        "server": server,
        "url": format!("{server}/sessions/{id}"),
        "title": "fix the auth flow",
        "repo_root": repo,
        "phase": "running",
        "pill": "◇ ultraplan",
        "started_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
    })
}

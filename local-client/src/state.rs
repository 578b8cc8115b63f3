//! The watcher's state file, `$XDG_STATE_HOME/ultraplan/sessions/<id>.json`: what the detached
//! poller knows about a session. `status`, the interactive prompt, the teleport-back choice and
//! the Claude Code hook read it; the watcher (and the commands that settle a session) write it.

mod reason;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::{Phase, SessionStatus};

pub use reason::{FailureReason, Handled, Outcome};

/// Everything recorded about one watched session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    pub session_id: String,
    /// The server's base URL.
    pub server: String,
    /// The review page.
    pub url: String,
    pub title: String,
    /// The repository that was bundled.
    #[serde(default)]
    pub repo_root: Option<PathBuf>,
    pub phase: Phase,
    /// The pill text of `phase`.
    pub pill: String,
    #[serde(default)]
    pub status: Option<SessionStatus>,
    #[serde(default)]
    pub last_event_id: i64,
    #[serde(default)]
    pub rejection_count: u32,
    /// Set once the watch ended.
    #[serde(default)]
    pub outcome: Option<Outcome>,
    #[serde(default)]
    pub failure: Option<FailureReason>,
    /// The message the user sees for `failure`.
    #[serde(default)]
    pub failure_message: Option<String>,
    /// The approved or teleported plan.
    #[serde(default)]
    pub plan: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Subagents by state, when the session uses any.
    #[serde(default)]
    pub agents: Option<ultraplan_protocol::activity::AgentCounts>,
    #[serde(default)]
    pub tool_calls: u64,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// The watcher process.
    #[serde(default)]
    pub pid: Option<u32>,
    /// Whether the remote session was archived by us (or found archived).
    #[serde(default)]
    pub archived: bool,
    /// For a teleported plan: how it was taken up.
    #[serde(default)]
    pub handled: Option<Handled>,
    /// Where the plan was saved, if it was.
    #[serde(default)]
    pub plan_file: Option<PathBuf>,
}

impl SessionState {
    /// A fresh record for a session that was just created.
    pub fn new(session_id: &str, server: &str, url: &str, title: &str) -> Self {
        let now = now_rfc3339();
        Self {
            session_id: session_id.to_owned(),
            server: server.to_owned(),
            url: url.to_owned(),
            title: title.to_owned(),
            repo_root: None,
            phase: Phase::Running,
            pill: Phase::Running.pill().to_owned(),
            status: None,
            last_event_id: 0,
            rejection_count: 0,
            outcome: None,
            failure: None,
            failure_message: None,
            plan: None,
            usage: None,
            agents: None,
            tool_calls: 0,
            started_at: now.clone(),
            updated_at: now,
            pid: None,
            archived: false,
            handled: None,
            plan_file: None,
        }
    }

    /// True once the watch ended (approved, teleported or failed).
    pub fn is_final(&self) -> bool {
        self.outcome.is_some()
    }

    /// A teleported plan nobody has taken up yet.
    pub fn teleport_waiting(&self) -> Option<&str> {
        match (self.outcome, &self.handled) {
            (Some(Outcome::Teleport), None) => self.plan.as_deref(),
            _ => None,
        }
    }

    /// Whether the recorded watcher process still runs (Linux `/proc`).
    pub fn watcher_alive(&self) -> bool {
        self.pid
            .is_some_and(|pid| Path::new("/proc").join(pid.to_string()).exists())
    }

    /// Stamps `updated_at` with the current time.
    pub fn touch(&mut self) {
        self.updated_at = now_rfc3339();
    }

    /// Seconds since `started_at`, when it parses.
    pub fn elapsed_secs(&self, now: OffsetDateTime) -> Option<u64> {
        let started = OffsetDateTime::parse(&self.started_at, &Rfc3339).ok()?;
        u64::try_from((now - started).whole_seconds()).ok()
    }
}

/// The current UTC time, RFC 3339.
pub fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{0:?} is not a session id")]
    BadId(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid state file: {message}")]
    Parse { path: PathBuf, message: String },
}

/// The directory of state files.
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
}

impl StateStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The default location under the XDG state directory.
    pub fn open_default() -> Result<Self, crate::paths::NoDirectory> {
        Ok(Self::new(crate::paths::sessions_dir()?))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The state file of a session.
    pub fn path(&self, id: &str) -> Result<PathBuf, StateError> {
        let valid = !id.is_empty()
            && id.len() <= 128
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if valid {
            Ok(self.dir.join(format!("{id}.json")))
        } else {
            Err(StateError::BadId(id.to_owned()))
        }
    }

    /// The watcher's log file of a session.
    pub fn log_path(&self, id: &str) -> Result<PathBuf, StateError> {
        Ok(self.path(id)?.with_extension("log"))
    }

    /// The state of a session, or `None` when no file exists.
    pub fn load(&self, id: &str) -> Result<Option<SessionState>, StateError> {
        let path = self.path(id)?;
        match std::fs::read(&path) {
            Ok(bytes) => parse(&path, &bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    /// Writes the state atomically (write a temporary file, then rename).
    pub fn save(&self, state: &SessionState) -> Result<(), StateError> {
        let path = self.path(&state.session_id)?;
        let io = |source| StateError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let bytes = serde_json::to_vec_pretty(state).map_err(|e| StateError::Parse {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let tmp = path.with_extension(format!("json.tmp-{}", std::process::id()));
        let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }

    /// Loads, changes and saves a session's state; `None` when it has no state file.
    pub fn update(
        &self,
        id: &str,
        change: impl FnOnce(&mut SessionState),
    ) -> Result<Option<SessionState>, StateError> {
        let Some(mut state) = self.load(id)? else {
            return Ok(None);
        };
        change(&mut state);
        state.touch();
        self.save(&state)?;
        Ok(Some(state))
    }

    /// Every readable state, newest first. Unreadable files are skipped with a warning.
    pub fn list(&self) -> Vec<SessionState> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut states: Vec<SessionState> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .filter_map(|path| match std::fs::read(&path) {
                Ok(bytes) => parse(&path, &bytes)
                    .inspect_err(|e| tracing::warn!("{e}"))
                    .ok(),
                Err(e) => {
                    tracing::warn!("{}: {e}", path.display());
                    None
                }
            })
            .collect();
        states.sort_by(|a, b| b.started_at.cmp(&a.started_at));
        states
    }

    /// The most recently started session.
    pub fn latest(&self) -> Option<SessionState> {
        self.list().into_iter().next()
    }
}

fn parse(path: &Path, bytes: &[u8]) -> Result<SessionState, StateError> {
    serde_json::from_slice(bytes).map_err(|e| StateError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path().join("sessions"));
        assert!(store.load("s1").unwrap().is_none());
        let mut a = SessionState::new("s1", "http://x", "http://x/s/s1", "one");
        a.started_at = "2026-01-01T00:00:00Z".into();
        let mut b = SessionState::new("s2", "http://x", "http://x/s/s2", "two");
        b.started_at = "2026-01-02T00:00:00Z".into();
        store.save(&a).unwrap();
        store.save(&b).unwrap();
        assert_eq!(store.load("s1").unwrap(), Some(a));
        assert_eq!(store.latest().unwrap().session_id, "s2");
        let updated = store.update("s2", |s| s.rejection_count = 2).unwrap();
        assert_eq!(updated.unwrap().rejection_count, 2);
        assert!(store.update("nope", |_| {}).unwrap().is_none());
    }

    #[test]
    fn ids_cannot_escape_the_directory() {
        let store = StateStore::new("/tmp/x");
        for bad in ["", "../etc/passwd", "a/b", "a.json"] {
            assert!(store.path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn teleport_waits_until_handled() {
        let mut s = SessionState::new("s", "h", "u", "t");
        assert!(s.teleport_waiting().is_none());
        s.outcome = Some(Outcome::Teleport);
        s.plan = Some("the plan".into());
        assert_eq!(s.teleport_waiting(), Some("the plan"));
        s.handled = Some(Handled::SaveToFile);
        assert!(s.teleport_waiting().is_none());
    }
}

//! Storage behind a trait: SQLite (the default) and PostgreSQL implement the same [`Store`].
//!
//! The event log is append-only. Appends are atomic and take ids from a per-session counter
//! under the session row's write lock, so ids are strictly increasing per session and a reader
//! paging with `after_id` never skips an event that commits late.
//!
//! The store keeps what it is given: which events propose plans or leave the session waiting
//! on the user is decided by the caller ([`AppendEffects`]), and so is the tool_result a plan
//! decision appends. The store makes each of those writes atomic.

mod backend;
mod cache;
mod comments;
mod leases;
mod models;
mod postgres;
mod retention;
mod sql;
mod sqlite;

use std::collections::HashMap;

use async_trait::async_trait;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::SessionStatus;

pub use cache::CachedStore;
pub use comments::{AddComment, CommentRow};
pub use leases::{Author, Claim, Lease};
pub use models::{
    AgentState, AppendEffects, BundleRow, DecideOutcome, EnvironmentRow, FlagRow, LinkRow,
    ModelCall, NewPlan, NewSession, PatchRow, PlanRow, SHARED_OWNER, SecretRow, SessionRow,
    TokenRow, UserRow, WebSessionRow,
};
pub use postgres::{Change, Changes, PostgresStore};
pub use retention::{Admission, Collected, stored_bytes};
pub use sqlite::SqliteStore;

/// Errors from the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("{0} already exists")]
    AlreadyExists(&'static str),
    #[error("unsupported database url: {0}")]
    UnsupportedUrl(String),
    /// A write carried a lease that no longer holds the session: another runner claimed it
    /// since (a newer epoch), or it was released. Nothing was written.
    #[error("the lease on session {session_id} (epoch {epoch}) no longer holds it")]
    Fenced { session_id: String, epoch: i64 },
}

impl StoreError {
    /// The database's disk is full: SQLite `SQLITE_FULL` (13), PostgreSQL class 53
    /// (`disk_full`, out of memory or connections), or ENOSPC on a file.
    pub fn is_storage_full(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => {
                let code = db.code().unwrap_or_default();
                code == "13" || code.starts_with("53")
            }
            StoreError::Database(sqlx::Error::Io(e)) => ultraplan_bundle::is_storage_full(e),
            _ => false,
        }
    }

    /// The database cannot be reached now: no connection to be had in time, the connection
    /// broke, or the server is shutting down or starting (PostgreSQL classes 08 and 57P).
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => {
                let code = db.code().unwrap_or_default();
                code.starts_with("08") || code.starts_with("57P")
            }
            StoreError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                !self.is_storage_full()
            }
            _ => false,
        }
    }

    /// The write certainly did not happen, so it can be tried again without any risk of
    /// applying it twice: no connection could be had; or the database answered a statement
    /// with an error that aborts its transaction because it is shutting down (PostgreSQL
    /// class 57P: an answer to the statement, so no COMMIT had completed) or out of space
    /// (PostgreSQL class 53, SQLite `SQLITE_FULL`: the transaction is rolled back).
    pub fn not_applied(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::PoolTimedOut) => true,
            StoreError::Database(sqlx::Error::Database(db)) => {
                let code = db.code().unwrap_or_default();
                code == "13" || code.starts_with("53") || code.starts_with("57P")
            }
            _ => false,
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// Everything the server persists.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Apply the embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Tell other processes on the same database that session `id` changed, so they forget
    /// what they remember of it and wake its pollers (PostgreSQL `NOTIFY`; nothing on SQLite,
    /// which one process owns).
    async fn announce(&self, session_id: &str) -> StoreResult<()>;
    /// Forget what is remembered of session `id`: another process changed it.
    fn forget(&self, _session_id: &str) {}
    /// Forget everything remembered: announcements may have been missed.
    fn forget_all(&self) {}

    // --- users and tokens ---
    async fn create_user(&self, name: &str) -> StoreResult<UserRow>;
    async fn user_by_name(&self, name: &str) -> StoreResult<Option<UserRow>>;
    async fn user_by_id(&self, id: &str) -> StoreResult<Option<UserRow>>;
    async fn add_token(
        &self,
        user_id: &str,
        token_id: &str,
        salt: &str,
        hash: &str,
    ) -> StoreResult<()>;
    async fn token(&self, token_id: &str) -> StoreResult<Option<TokenRow>>;

    // --- runner tokens (never users' tokens: a table of their own) ---
    /// Record runner `name`'s token hash; `AlreadyExists("runner")` when the name is taken.
    async fn add_runner_token(
        &self,
        name: &str,
        token_hash: &str,
        created_at: i64,
    ) -> StoreResult<()>;
    /// The name of the runner whose token hashes to `token_hash`.
    async fn runner_by_token_hash(&self, token_hash: &str) -> StoreResult<Option<String>>;
    /// Every runner's name and creation time (ms), by name.
    async fn runner_tokens(&self) -> StoreResult<Vec<(String, i64)>>;
    /// Delete runner `name`'s token; `false` when there was none.
    async fn revoke_runner_token(&self, name: &str) -> StoreResult<bool>;

    // --- secrets (docs/ARCHITECTURE.md §6.5): sealed by the caller, kept per owner ---
    /// Create or replace `row.owner_id`'s secret `row.name`; a replacement keeps the first
    /// `created_at` and takes the new value and `updated_at`.
    async fn put_secret(&self, row: &SecretRow) -> StoreResult<()>;
    /// The names of `owner_id`'s secrets and when each was last set (ms), by name.
    async fn secret_names(&self, owner_id: &str) -> StoreResult<Vec<(String, i64)>>;
    /// Delete `owner_id`'s secret `name`; `false` when there was none.
    async fn delete_secret(&self, owner_id: &str, name: &str) -> StoreResult<bool>;
    /// Every owner's secrets, sealed (for re-sealing them under a new key).
    async fn all_sealed_secrets(&self) -> StoreResult<Vec<SecretRow>>;
    /// Replace `old`'s sealed value with `nonce` and `ciphertext` if it is still exactly
    /// `old` (a value set meanwhile is left alone); `true` when replaced.
    async fn reseal_secret(
        &self,
        old: &SecretRow,
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> StoreResult<bool>;
    /// Those of `owner_id`'s secrets among `names` that exist, sealed, by name.
    async fn sealed_secrets(&self, owner_id: &str, names: &[String])
    -> StoreResult<Vec<SecretRow>>;

    // --- named environments (docs/ARCHITECTURE.md §6.5) ---
    /// Create or replace `row.owner_id`'s environment `row.name`, keeping the first
    /// `created_at`.
    async fn put_environment(&self, row: &EnvironmentRow) -> StoreResult<()>;
    /// `owner_id`'s environments and the shared ones, by name (the owner's first on a tie).
    async fn environments_for(&self, owner_id: &str) -> StoreResult<Vec<EnvironmentRow>>;
    /// The environment `name` as `owner_id` sees it: their own, else a shared one.
    async fn environment_for(
        &self,
        owner_id: &str,
        name: &str,
    ) -> StoreResult<Option<EnvironmentRow>>;
    /// Delete `owner_id`'s environment `name` (a shared one with [`SHARED_OWNER`]); `false`
    /// when there was none.
    async fn delete_environment(&self, owner_id: &str, name: &str) -> StoreResult<bool>;

    // --- bundles ---
    /// Record a validated bundle and that `user_id` holds it.
    async fn put_bundle(&self, user_id: &str, bundle: &BundleRow) -> StoreResult<()>;
    /// The bundle, if `user_id` uploaded it.
    async fn owned_bundle(&self, user_id: &str, sha256: &str) -> StoreResult<Option<BundleRow>>;
    /// Bytes (archive plus unpacked tree) of every bundle `user_id` holds.
    async fn bundle_bytes_used(&self, user_id: &str) -> StoreResult<u64>;
    /// Like [`Store::put_bundle`], unless holding it takes `user_id` over `quota` bytes (0: no
    /// limit); holding it already refreshes the holding's age.
    async fn put_bundle_within_quota(
        &self,
        user_id: &str,
        bundle: &BundleRow,
        quota: u64,
    ) -> StoreResult<Admission>;
    /// Whether anyone holds or uses bundle `sha256` (its row exists).
    async fn bundle_known(&self, sha256: &str) -> StoreResult<bool>;
    /// One retention pass at `now` (ms): holdings older than `grace_ms` that no session of
    /// their user uses are dropped; bundles nobody holds or uses are deleted (except those
    /// `busy` names) and returned, for their files to be removed; expired or used login
    /// links and expired browser sessions are deleted.
    async fn collect_garbage(
        &self,
        now: i64,
        grace_ms: i64,
        busy: &(dyn for<'s> Fn(&'s str) -> bool + Sync),
    ) -> StoreResult<Collected>;

    // --- sessions and events ---
    /// Create a session and append its first events in one transaction.
    async fn create_session(
        &self,
        new: &NewSession,
        events: &[EventBody],
    ) -> StoreResult<(SessionRow, Vec<Event>)>;
    /// The session if it belongs to `user_id`.
    async fn session_for_user(&self, user_id: &str, id: &str) -> StoreResult<Option<SessionRow>>;
    /// The session regardless of owner (for the orchestrator).
    async fn session(&self, id: &str) -> StoreResult<Option<SessionRow>>;
    /// A user's sessions, newest first.
    async fn list_sessions(&self, user_id: &str, limit: u32) -> StoreResult<Vec<SessionRow>>;
    /// Sessions in any of the given statuses, oldest first.
    async fn sessions_with_status(
        &self,
        statuses: &[SessionStatus],
    ) -> StoreResult<Vec<SessionRow>>;
    /// Append events atomically, with the plan rows and status change `effects` names in the
    /// same transaction.
    async fn append_events(
        &self,
        session_id: &str,
        events: &[EventBody],
        effects: &AppendEffects,
    ) -> StoreResult<Vec<Event>>;
    /// Events with `id > after_id`, oldest first, at most `limit`; and whether more follow.
    async fn list_events(
        &self,
        session_id: &str,
        after_id: i64,
        limit: u32,
    ) -> StoreResult<(Vec<Event>, bool)>;
    /// The subtype of the newest `result` event of each of the user's sessions that has one.
    async fn last_results(&self, user_id: &str) -> StoreResult<HashMap<String, String>>;
    async fn set_status(&self, session_id: &str, status: SessionStatus) -> StoreResult<()>;
    /// Mark archived; `false` when it already was.
    async fn archive_session(&self, session_id: &str) -> StoreResult<bool>;
    /// Record whether an agent is meant to be running for the session.
    async fn set_agent_state(&self, session_id: &str, state: AgentState) -> StoreResult<()>;
    /// Sessions whose agent was queued or running and that are not archived, oldest first:
    /// after a restart these need their agents back.
    async fn sessions_to_recover(&self) -> StoreResult<Vec<SessionRow>>;
    /// Record where remote execution stands.
    async fn set_execution(
        &self,
        session_id: &str,
        execution: &ultraplan_protocol::patch::Execution,
    ) -> StoreResult<()>;
    /// Replace the session's context (the environment chosen at approval), only while no
    /// execution is recorded; `true` when replaced.
    async fn set_context_before_execution(
        &self,
        session_id: &str,
        context: &ultraplan_protocol::session::SessionContext,
    ) -> StoreResult<bool>;
    /// Mark an approved plan's execution as under way, unless the session already records
    /// one (a runner may have started, or even finished, it first); `true` when marked.
    async fn mark_executing(&self, session_id: &str) -> StoreResult<bool>;
    /// Store the patch of a finished execution (replacing an earlier one) and mark the
    /// execution finished, in one transaction.
    async fn save_patch(
        &self,
        session_id: &str,
        diff: &[u8],
        summary: &ultraplan_protocol::patch::PatchSummary,
    ) -> StoreResult<()>;
    /// The stored patch.
    async fn patch(&self, session_id: &str) -> StoreResult<Option<PatchRow>>;
    /// Sessions whose execution is marked executing, archived ones included, oldest first.
    async fn sessions_executing(&self) -> StoreResult<Vec<SessionRow>>;
    /// Record one model call and add its usage to the session's total; returns the new total.
    async fn record_model_call(&self, call: &ModelCall) -> StoreResult<Usage>;

    // --- leases (docs/ARCHITECTURE.md §5.2) ---
    /// Put the session in the queue for a runner, unless it is archived or a runner holds it;
    /// `true` when it was queued.
    async fn queue_session(&self, session_id: &str, now: i64) -> StoreResult<bool>;
    /// Claim the session that has waited longest for a runner (queued, or running under a
    /// lease that lapsed before `now`) for `runner` until `now + lease_ms`, with a new epoch.
    /// Concurrent claimers never get the same session (`FOR UPDATE SKIP LOCKED` on
    /// PostgreSQL, the write lock on SQLite).
    async fn claim_session(
        &self,
        runner: &str,
        now: i64,
        lease_ms: i64,
    ) -> StoreResult<Option<Claim>>;
    /// Extend the lease to `expires_at`; `false` when it no longer holds the session.
    async fn renew_lease(&self, lease: &Lease, expires_at: i64) -> StoreResult<bool>;
    /// Give the session up (its agent ended, or it goes back to the queue when `requeue`);
    /// `false` when the lease no longer held it.
    async fn release_lease(&self, lease: &Lease, requeue: bool) -> StoreResult<bool>;
    /// Requeue every session `runner` holds (all sessions when `None`): a runner starting
    /// under a name knows its previous incarnation is gone. The number released.
    async fn release_leases_of(&self, runner: Option<&str>, now: i64) -> StoreResult<u64>;
    /// [`Store::set_status`] by a lease holder: `false` (nothing written) once it lost the
    /// session.
    async fn set_status_as(&self, lease: &Lease, status: SessionStatus) -> StoreResult<bool>;
    /// [`Store::set_agent_state`] by a lease holder: `false` (nothing written) once it lost
    /// the session.
    async fn set_agent_state_as(&self, lease: &Lease, state: AgentState) -> StoreResult<bool>;
    /// Park the session `lease` holds: release it with its agent state `parked`, only while
    /// its log still ends at `last_event_id` (nothing arrived that the agent has not seen).
    /// `false` when it did not.
    async fn park_session(&self, lease: &Lease, last_event_id: i64) -> StoreResult<bool>;
    /// Queue a parked session (a decision or message arrived); `true` when it was parked.
    async fn unpark_session(&self, session_id: &str, now: i64) -> StoreResult<bool>;
    /// How many sessions wait for a runner at `now`.
    async fn sessions_waiting(&self, now: i64) -> StoreResult<i64>;
    /// Events users wrote (messages, decisions) with `id > after_id`, oldest first.
    async fn user_events_after(&self, session_id: &str, after_id: i64) -> StoreResult<Vec<Event>>;

    // --- plans ---
    async fn plan(&self, session_id: &str, tool_use_id: &str) -> StoreResult<Option<PlanRow>>;
    async fn list_plans(&self, session_id: &str) -> StoreResult<Vec<PlanRow>>;
    /// Take a decision on a pending plan atomically: the plan row changes and `result` (the
    /// decision's tool_result event) is appended in one transaction. Concurrent deciders see
    /// exactly one `Decided`; the others see what stands.
    async fn decide_plan(
        &self,
        session_id: &str,
        tool_use_id: &str,
        decision: &Decision,
        result: &EventBody,
    ) -> StoreResult<DecideOutcome>;

    // --- inline comments on plans ---
    /// Add a comment to its pending plan unless the plan already carries `max`, atomically.
    async fn add_plan_comment(&self, new: &CommentRow, max: usize) -> StoreResult<AddComment>;
    /// Carry the comment `new.reopened_from` names over as `new` (on a pending plan) and mark
    /// it reopened, atomically: nothing is written unless `new` is added.
    async fn reopen_plan_comment(&self, new: &CommentRow, max: usize) -> StoreResult<AddComment>;
    /// Every comment of the session, oldest first.
    async fn plan_comments(&self, session_id: &str) -> StoreResult<Vec<CommentRow>>;

    // --- flags and telemetry ---
    async fn list_flags(&self) -> StoreResult<Vec<FlagRow>>;
    async fn set_flag(&self, row: &FlagRow) -> StoreResult<()>;
    async fn record_telemetry(
        &self,
        name: &str,
        labels: &serde_json::Value,
        user_id: Option<&str>,
        session_id: Option<&str>,
    ) -> StoreResult<()>;
    /// Count of telemetry rows with this name (for tests and admin).
    async fn count_telemetry(&self, name: &str) -> StoreResult<i64>;

    // --- the review pages' logins ---
    /// Store a new login link, dropping expired ones.
    async fn insert_login_link(&self, link: &LinkRow) -> StoreResult<()>;
    /// The link, if it exists, is unused and has not expired at `now`.
    async fn usable_login_link(&self, id: &str, now: i64) -> StoreResult<Option<LinkRow>>;
    /// Spend the link; `false` when another request spent it first or it expired.
    async fn use_login_link(&self, id: &str, now: i64) -> StoreResult<bool>;
    /// Store a new browser session, dropping expired ones.
    async fn insert_web_session(&self, row: &WebSessionRow) -> StoreResult<()>;
    /// The browser session with its user's name, if it has not expired at `now`.
    async fn web_session(&self, id: &str, now: i64) -> StoreResult<Option<WebSessionRow>>;
    /// End a browser session.
    async fn delete_web_session(&self, id: &str) -> StoreResult<()>;
}

/// Open the store a database URL names (`sqlite:` / `sqlite://` paths or `postgres://`),
/// behind the [`CachedStore`] that answers idle polls from memory.
pub async fn connect(url: &str) -> StoreResult<std::sync::Arc<dyn Store>> {
    Ok(open_url(url, false).await?.0)
}

/// Like [`connect`], with the changes other processes announce on the same database (PostgreSQL
/// only; a SQLite database belongs to one process).
pub async fn connect_following(
    url: &str,
) -> StoreResult<(std::sync::Arc<dyn Store>, Option<Changes>)> {
    open_url(url, true).await
}

async fn open_url(
    url: &str,
    follow: bool,
) -> StoreResult<(std::sync::Arc<dyn Store>, Option<Changes>)> {
    let (inner, changes): (std::sync::Arc<dyn Store>, _) = if url.starts_with("sqlite:") {
        (std::sync::Arc::new(SqliteStore::connect(url).await?), None)
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PostgresStore::connect(url).await?;
        let changes = match follow {
            true => Some(store.changes().await?),
            false => None,
        };
        (std::sync::Arc::new(store), changes)
    } else {
        return Err(StoreError::UnsupportedUrl(redact_url(url)));
    };
    Ok((std::sync::Arc::new(CachedStore::new(inner)), changes))
}

/// A database URL with any password replaced, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    let now = time::OffsetDateTime::now_utc();
    i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// RFC 3339 rendering of a millisecond timestamp.
pub fn format_ms(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

/// The millisecond timestamp [`format_ms`] rendered.
pub fn parse_ms(rendered: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(rendered, &time::format_description::well_known::Rfc3339)
        .ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_timestamps_read_back() {
        for ms in [
            0,
            1,
            999,
            1_000,
            1_764_720_000_123,
            1_764_720_000_100,
            4_102_444_800_000,
        ] {
            assert_eq!(parse_ms(&format_ms(ms)), Some(ms), "{}", format_ms(ms));
        }
        assert_eq!(parse_ms("yesterday"), None);
    }

    #[test]
    fn urls_are_redacted() {
        let cases = [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("postgres://h/db", "postgres://h/db"),
            ("sqlite:///tmp/x.db", "sqlite:///tmp/x.db"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want);
        }
    }

    #[test]
    fn timestamps_format_as_rfc3339() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_ms(1_500), "1970-01-01T00:00:01.5Z");
    }
}

//! PostgreSQL backend, for deployments at scale.

use async_trait::async_trait;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use tokio::sync::mpsc;

use super::StoreResult;
use super::backend::{Arg, Backend, Conn, Dialect, Row, Tx, impl_conn};

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
    /// Names this process in its announcements, so it can skip its own.
    origin: String,
    /// Sessions to announce, sent in batches ([`spawn_announcer`]).
    announcer: mpsc::UnboundedSender<String>,
}

/// Most announcements one statement carries.
const MAX_BATCH: usize = 256;

/// Send the announcements of session changes in batches, off the writers' path: each
/// statement carries every announcement made while the one before it was out, one
/// notification per session (the payload other processes read is unchanged).
fn spawn_announcer(pool: PgPool, origin: String) -> mpsc::UnboundedSender<String> {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            batch.sort_unstable();
            batch.dedup();
            let payloads: Vec<String> =
                batch.drain(..).map(|id| format!("{origin} {id}")).collect();
            let sent = sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
                .bind(CHANNEL)
                .bind(&payloads)
                .execute(&pool)
                .await;
            if let Err(error) = sent {
                // Other processes learn of these changes at their long polls' end.
                tracing::warn!(%error, sessions = payloads.len(), "could not announce session changes");
            }
        }
    });
    tx
}

/// A pooled connection idle longer than this is pinged before it is handed out.
const PING_IF_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

impl PostgresStore {
    const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

    /// Connect to the database a `postgres://` URL names.
    pub async fn connect(url: &str) -> Result<Self, super::StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            // While the database is away (restarted, failing over) a request learns so in
            // seconds (503 database_unavailable) instead of waiting out sqlx's 30 s default;
            // the orchestrator retries its own writes (see `orchestrator::durable`).
            .acquire_timeout(std::time::Duration::from_secs(5))
            // A connection that sat idle is pinged before use (the database may have gone
            // since); one in steady use is not, so a busy server does not pay a round trip
            // per query.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for > PING_IF_IDLE {
                        sqlx::Connection::ping(conn).await?;
                    }
                    Ok(true)
                })
            })
            .connect(url)
            .await?;
        let origin = uuid::Uuid::new_v4().simple().to_string();
        let announcer = spawn_announcer(pool.clone(), origin.clone());
        Ok(PostgresStore {
            pool,
            origin,
            announcer,
        })
    }

    /// Follow what other processes announce on this database.
    pub async fn changes(&self) -> StoreResult<Changes> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(CHANNEL).await?;
        Ok(Changes {
            listener,
            pool: self.pool.clone(),
            origin: self.origin.clone(),
            broken: false,
        })
    }
}

#[async_trait]
impl Backend for PostgresStore {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn pool(&self) -> Box<dyn Conn> {
        Box::new(self.pool.clone())
    }

    /// Row locks taken by the first UPDATE of each write serialise concurrent appends.
    async fn write_tx(&self) -> StoreResult<Box<dyn Tx>> {
        Ok(Box::new(self.pool.begin().await?))
    }

    async fn migrate(&self) -> StoreResult<()> {
        Self::MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    async fn announce(&self, session_id: &str) -> StoreResult<()> {
        if self.announcer.send(session_id.to_owned()).is_err() {
            tracing::warn!(
                session_id,
                "the announcer has stopped; other processes learn later"
            );
        }
        Ok(())
    }
}

/// The notification channel that carries the ids of changed sessions between processes.
pub const CHANNEL: &str = "ultraplan_sessions";

/// What other processes announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// This session changed.
    Session(String),
    /// The connection was lost and came back: announcements may have been missed.
    Missed,
}

/// The sessions other processes on the same PostgreSQL database change, as they announce them
/// (`<origin> <session id>`; this process's own announcements are skipped).
pub struct Changes {
    listener: sqlx::postgres::PgListener,
    pool: sqlx::PgPool,
    origin: String,
    /// The listener failed: the next call listens on a fresh connection first.
    broken: bool,
}

impl Changes {
    /// The next change another process made. When the connection drops, or the database
    /// could not be reached, the next call listens on a fresh connection and says
    /// [`Change::Missed`] only once it listens again, so nothing announced after that is
    /// lost. An error means the database cannot be reached now.
    pub async fn next(&mut self) -> StoreResult<Change> {
        if self.broken {
            let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
            listener.listen(CHANNEL).await?;
            self.listener = listener;
            self.broken = false;
            return Ok(Change::Missed);
        }
        loop {
            let received = self.listener.try_recv().await;
            let received = received.inspect_err(|_| self.broken = true)?;
            let Some(notification) = received else {
                return Ok(Change::Missed);
            };
            if let Some(change) = change_of(notification.payload(), &self.origin) {
                return Ok(change);
            }
        }
    }
}

/// The change an announcement's payload names, unless `origin` made it or it is malformed.
fn change_of(payload: &str, origin: &str) -> Option<Change> {
    let (from, session_id) = payload.split_once(' ')?;
    (from != origin && !session_id.is_empty()).then(|| Change::Session(session_id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_name_a_session_of_another_process() {
        let cases = [
            ("other s1", Some(Change::Session("s1".to_owned()))),
            ("me s1", None),
            ("other ", None),
            ("garbage", None),
            ("", None),
        ];
        for (payload, want) in cases {
            assert_eq!(change_of(payload, "me"), want, "{payload:?}");
        }
    }
}

impl_conn!(sqlx::Postgres);

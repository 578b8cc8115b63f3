//! SQLite backend: the default, a WAL-mode file in the data dir.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection as _, SqlitePool};

use super::StoreResult;
use super::backend::{Arg, Backend, Conn, Dialect, Row, Tx, impl_conn};

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

    /// Open (creating if missing) the database a `sqlite:` URL names.
    pub async fn connect(url: &str) -> Result<Self, super::StoreError> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            // A write whose COMMIT failed (a full disk: SQLite rolls the transaction back
            // itself) leaves the connection's transaction depth above zero, and every later
            // `BEGIN IMMEDIATE` on it fails. Such a connection is closed, never handed out.
            .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(options)
            .await?;
        Ok(SqliteStore { pool })
    }
}

#[async_trait]
impl Backend for SqliteStore {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn pool(&self) -> Box<dyn Conn> {
        Box::new(self.pool.clone())
    }

    /// Writers take the database lock up front so concurrent writers queue on the busy
    /// timeout instead of failing on a lock upgrade.
    async fn write_tx(&self) -> StoreResult<Box<dyn Tx>> {
        Ok(Box::new(self.pool.begin_with("BEGIN IMMEDIATE").await?))
    }

    async fn migrate(&self) -> StoreResult<()> {
        Self::MIGRATOR.run(&self.pool).await?;
        Ok(())
    }
}

impl_conn!(sqlx::Sqlite);

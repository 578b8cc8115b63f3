//! PostgreSQL backend, for deployments at scale.

use async_trait::async_trait;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use super::StoreResult;
use super::backend::{Arg, Backend, Conn, Row, Tx, impl_conn};

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

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
            .test_before_acquire(true)
            .connect(url)
            .await?;
        Ok(PostgresStore { pool })
    }
}

#[async_trait]
impl Backend for PostgresStore {
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
}

impl_conn!(sqlx::Postgres);

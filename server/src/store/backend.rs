//! The few primitives a database gives the store: run a statement, fetch rows, open a write
//! transaction. Everything else (`sql/`, `retention`) is written once over them.
//!
//! Why this shape rather than the alternatives: store functions generic over
//! `sqlx::Database` need sqlx's higher-ranked executor and encoding bounds restated on every
//! function (bounds on a helper trait are not implied at its use sites), and `sqlx::Any` opens
//! SQLite from the URL alone, losing the WAL, busy-timeout and transaction-depth settings
//! `SqliteStore::connect` makes. Here each backend keeps its own pool and its own way of
//! opening a write transaction (SQLite `BEGIN IMMEDIATE`, PostgreSQL row locks), and hands out
//! [`Conn`]s: object-safe, so the store logic is plain non-generic code. The per-driver glue
//! (binding [`Arg`]s, boxing rows) is one short macro, [`impl_conn`], instantiated per driver.

use async_trait::async_trait;
use sqlx::{ColumnIndex, Decode, Type};

use super::{StoreError, StoreResult};

/// A statement parameter: the column types the schema uses (BIGINT, TEXT, BLOB, nullable).
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Int(i64),
    Text(&'a str),
    Bytes(&'a [u8]),
    OptInt(Option<i64>),
    OptText(Option<&'a str>),
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::OptInt(v)
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::OptText(v)
    }
}

/// A fetched row, read by column name.
pub trait Record: Send {
    fn int(&self, col: &str) -> StoreResult<i64>;
    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>>;
    fn text(&self, col: &str) -> StoreResult<String>;
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>>;
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>>;
}

/// A fetched row of either backend.
pub type Row = Box<dyn Record>;

/// One connection, transaction or pool to run statements on.
#[async_trait]
pub trait Conn: Send {
    /// Run a statement; the number of rows it changed.
    async fn execute(&mut self, sql: &'static str, args: &[Arg<'_>]) -> StoreResult<u64>;
    /// The first row of a query, if any.
    async fn fetch_optional(
        &mut self,
        sql: &'static str,
        args: &[Arg<'_>],
    ) -> StoreResult<Option<Row>>;
    /// Every row of a query.
    async fn fetch_all(&mut self, sql: &'static str, args: &[Arg<'_>]) -> StoreResult<Vec<Row>>;

    /// The first row of a query, which must exist.
    async fn fetch_one(&mut self, sql: &'static str, args: &[Arg<'_>]) -> StoreResult<Row> {
        self.fetch_optional(sql, args)
            .await?
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))
    }
}

/// An open write transaction: dropped without [`Tx::commit`], it rolls back.
#[async_trait]
pub trait Tx: Send {
    /// The transaction's connection.
    fn conn(&mut self) -> &mut dyn Conn;
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// Which SQL a backend speaks where the two differ (row locking).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// What a database gives the store. [`super::Store`] is implemented once for every backend.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The SQL this database speaks.
    fn dialect(&self) -> Dialect;
    /// The pool, for reads and single statements.
    fn pool(&self) -> Box<dyn Conn>;
    /// A write transaction, opened the way this database serialises writers.
    async fn write_tx(&self) -> StoreResult<Box<dyn Tx>>;
    /// Apply this backend's embedded migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Tell other processes on this database that session `id` changed (nothing to tell where
    /// one process owns the database).
    async fn announce(&self, _session_id: &str) -> StoreResult<()> {
        Ok(())
    }
}

/// Implement [`Conn`] for a driver's pool and transactions, and [`Tx`] for the latter:
/// binding [`Arg`]s and boxing rows is the same code for every driver, but sqlx's bounds for
/// it cannot be stated once generically. The caller imports `Arg, Conn, Row, StoreResult, Tx`.
macro_rules! impl_conn {
    ($db:ty) => {
        type Query<'q> = sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments>;
        fn bind<'q>(mut query: Query<'q>, args: &[Arg<'_>]) -> Query<'q> {
            for arg in args {
                query = match *arg {
                    Arg::Int(v) => query.bind(v),
                    Arg::Text(v) => query.bind(v),
                    Arg::Bytes(v) => query.bind(v),
                    Arg::OptInt(v) => query.bind(v),
                    Arg::OptText(v) => query.bind(v),
                };
            }
            query
        }
        $crate::store::backend::impl_conn!(@on sqlx::Pool<$db>, |p| &*p);
        $crate::store::backend::impl_conn!(@on sqlx::Transaction<'static, $db>, |t| &mut **t);
        #[async_trait::async_trait]
        impl Tx for sqlx::Transaction<'static, $db> {
            fn conn(&mut self) -> &mut dyn Conn {
                self
            }
            async fn commit(self: Box<Self>) -> StoreResult<()> {
                Ok((*self).commit().await?)
            }
        }
    };
    (@on $on:ty, |$s:ident| $exec:expr) => {
        #[async_trait::async_trait]
        impl Conn for $on {
            async fn execute(&mut self, sql: &'static str, args: &[Arg<'_>]) -> StoreResult<u64> {
                let $s = self;
                Ok(bind(sqlx::query(sql), args).execute($exec).await?.rows_affected())
            }
            async fn fetch_optional(&mut self, sql: &'static str, args: &[Arg<'_>])
            -> StoreResult<Option<Row>> {
                let $s = self;
                let row = bind(sqlx::query(sql), args).fetch_optional($exec).await?;
                Ok(row.map(|r| Box::new(r) as Row))
            }
            async fn fetch_all(&mut self, sql: &'static str, args: &[Arg<'_>])
            -> StoreResult<Vec<Row>> {
                let $s = self;
                let rows = bind(sqlx::query(sql), args).fetch_all($exec).await?;
                Ok(rows.into_iter().map(|r| Box::new(r) as Row).collect())
            }
        }
    };
}

pub(crate) use impl_conn;

impl<R> Record for R
where
    R: sqlx::Row,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> Vec<u8>: Decode<'r, R::Database> + Type<R::Database>,
{
    fn int(&self, col: &str) -> StoreResult<i64> {
        Ok(self.try_get(col)?)
    }
    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get(col)?)
    }
    fn text(&self, col: &str) -> StoreResult<String> {
        Ok(self.try_get(col)?)
    }
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get(col)?)
    }
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        Ok(self.try_get(col)?)
    }
}

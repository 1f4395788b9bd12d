//! One module per service, each holding everything lockbench knows about it: its nodes,
//! flags and readiness, its leader, its slots, its durability, its work counters, and its
//! claim, clean-up and description on an external target. Each implements `kind.rs`'s
//! `ServiceKind` and has one line in `registry.rs`; they import the rooms of `cluster/`
//! below them (model, backends, counters), never `registry.rs` or `work.rs`.

pub mod etcd;
pub mod mariadb;
pub mod postgres;
pub mod redis;
pub mod redis_cluster;
pub mod sentinel;
pub mod zookeeper;

use sqlx::{ConnectOptions, Connection, Database, Executor, FromRow, IntoArguments};

/// The rows `sql` selects on a connection of its own made with `opts`, closed after: one
/// question to a MariaDB or PostgreSQL server, its error as text.
async fn rows<O, DB, T>(opts: O, sql: &'static str) -> Result<Vec<T>, String>
where
    O: ConnectOptions,
    O::Connection: Connection<Database = DB> + Sized,
    for<'c> &'c mut O::Connection: Executor<'c, Database = DB>,
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    T: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
{
    let mut con = opts.connect().await.map_err(|e| e.to_string())?;
    let rows = (sqlx::query_as::<DB, T>(sql).fetch_all(&mut con).await).map_err(|e| e.to_string());
    let _ = con.close().await;
    rows
}

/// The first of `rows` (a question that selects one row).
fn first<T>(rows: Vec<T>) -> Result<T, String> {
    rows.into_iter().next().ok_or_else(|| "no row".to_string())
}

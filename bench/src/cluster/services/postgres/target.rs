//! An external PostgreSQL: the tables `<prefix>_*` of the login's database, in its current
//! schema, marked by `<prefix>_owner`, as on a MariaDB target.

use std::net::SocketAddr;

use sqlx::{ConnectOptions, Connection, PgConnection};

use super::{at, version};
use crate::cluster::error::ClusterError;
use crate::cluster::external::{
    MARKER, bounded, cleaned, owned_or_empty, target_err, unowned_node,
};
use crate::cluster::model::{NodeInfo, PostgresEndpoint, Role, Service};
use crate::cluster::namespace::Prefix;

/// The service as errors and failures name it.
const SERVICE: &str = "postgres";

async fn connection(p: &PostgresEndpoint) -> Result<PgConnection, String> {
    p.connect_options()
        .connect()
        .await
        .map_err(|e| e.to_string())
}

/// Tables of the current schema whose names start with `<prefix>_`.
async fn prefix_tables(con: &mut PgConnection, p: &Prefix) -> Result<Vec<String>, String> {
    // `_` is a LIKE wildcard: escaped (backslash is LIKE's default escape). The prefix is
    // [a-z0-9_] only (validated).
    let like = format!("{}%", p.table("").replace('_', "\\_"));
    sqlx::query_scalar::<_, String>(
        "SELECT tablename::text FROM pg_tables \
         WHERE schemaname = current_schema() AND tablename LIKE $1 ORDER BY tablename",
    )
    .bind(like)
    .fetch_all(con)
    .await
    .map_err(|e| e.to_string())
}

/// Checks that the prefix holds no tables but lockbench's, then marks it.
pub(super) async fn claim_prefix(ep: &PostgresEndpoint, p: &Prefix) -> Result<(), ClusterError> {
    let err = |e| target_err(SERVICE, e);
    let mut con = bounded("connect", connection(ep)).await.map_err(err)?;
    let tables = bounded("list tables", prefix_tables(&mut con, p))
        .await
        .map_err(err)?;
    let owner = p.table("owner");
    owned_or_empty(SERVICE, p, &tables, &owner)?;
    let mark = async {
        let ddl = format!(
            "CREATE TABLE IF NOT EXISTS {owner} (note text NOT NULL); \
             INSERT INTO {owner} (note) VALUES ('{MARKER}')"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
            .execute(&mut con)
            .await
            .map_err(|e| e.to_string())?;
        let _ = con.close().await;
        Ok(())
    };
    bounded("mark the prefix", mark).await.map_err(err)
}

/// Drops every table of the prefix (and what depends on them).
async fn drop_tables(ep: &PostgresEndpoint, p: &Prefix) -> Result<(), String> {
    let mut con = connection(ep).await?;
    for t in prefix_tables(&mut con, p).await? {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS \"{t}\" CASCADE"
        )))
        .execute(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    }
    let _ = con.close().await;
    Ok(())
}

/// Removes every table of the prefix; what failed.
pub(super) async fn release(ep: &PostgresEndpoint, p: &Prefix) -> Vec<String> {
    cleaned(SERVICE, "drop tables", drop_tables(ep, p)).await
}

/// The primary and its standbys, with the versions they report.
pub(super) async fn describe(ep: &PostgresEndpoint, standbys: &[SocketAddr]) -> Vec<NodeInfo> {
    let mut out = Vec::new();
    let all = std::iter::once(ep.addr).chain(standbys.iter().copied());
    for (i, addr) in all.enumerate() {
        let v = bounded("version", version(at(ep, addr))).await;
        let (name, role) = match (i, standbys.is_empty()) {
            (0, true) => (SERVICE.to_string(), Role::Primary),
            (0, false) => (SERVICE.to_string(), Role::Master),
            _ => (format!("{SERVICE}-standby-{i}"), Role::Replica),
        };
        out.push(unowned_node(name, Service::Postgres, role, addr, v));
    }
    out
}

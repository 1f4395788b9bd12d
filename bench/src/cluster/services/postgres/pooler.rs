//! PgBouncer between the buyers and the PostgreSQL primary (`servers.postgres_pooler`): its
//! configuration, where Debian puts it, and the question that says it is ready. `local.rs`
//! starts it beside the primary, as a process the primary's guard owns.
//!
//! What it models: the most reported failure of session advisory locks (pgbouncer#617, #102).
//! Under `pool_mode = transaction` a server connection serves one transaction of a client,
//! then another client's, so a session lock stays with the server connection, not with the
//! buyer that took it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use sqlx::ConnectOptions;

use crate::cluster::error::ClusterError;
use crate::cluster::model::{PoolerEndpoint, Pooling, PostgresEndpoint, session_settings};

/// Its node name in logs and errors (its port is `postgres (pooler)`).
pub(super) const NAME: &str = "postgres-pooler";
/// The reserved port's name: on the primary's host.
pub(super) const PORT_NAME: &str = "postgres (pooler)";
/// The package, and where it puts the program (off a normal user's PATH).
const PACKAGE: &str = "pgbouncer";
const PROGRAM: &str = "/usr/sbin/pgbouncer";

/// The `pgbouncer` program, or an error naming how to install it.
pub(super) fn program() -> Result<PathBuf, ClusterError> {
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("pgbouncer"))
        .find(|p| p.is_file());
    let found = on_path.or_else(|| Some(PathBuf::from(PROGRAM)).filter(|p| p.is_file()));
    found.ok_or_else(|| ClusterError::Setup {
        node: NAME.into(),
        what: "find pgbouncer".into(),
        detail: format!(
            "servers.postgres_pooler needs PgBouncer: install {PACKAGE} (scripts/install-deps.sh, \
             or apt-get install {PACKAGE})"
        ),
    })
}

/// `pgbouncer.ini`: listens on `listen`, pools `ep`'s database on `server` as `ep`'s user, in
/// `pooling`'s mode with [`crate::cluster::Pooler::pool_size`] server connections and room for
/// [`max_clients`]. Each server connection it opens gets
/// the buyers' `lock_timeout` and `statement_timeout` (`connect_query`): PgBouncer 1.18 cannot
/// pass on the `options` a direct buyer sends them in. No unix socket, no pid file, the log
/// on stderr (the node's log). `auth_file`: the [`userlist`]'s path.
pub(super) fn ini(
    (listen, server): (SocketAddr, SocketAddr),
    ep: &PostgresEndpoint,
    pooling: &Pooling,
    auth_file: &Path,
) -> String {
    let mode = pooling.pooler.pool_mode().unwrap_or("session");
    let set: Vec<String> = session_settings(pooling.lock_wait, pooling.timeout)
        .iter()
        .map(|(k, v)| format!("SET {k} = {v}"))
        .collect();
    format!(
        "[databases]\n\
         {db} = host={host} port={port} dbname={db} user={user} connect_query='{set}'\n\
         \n\
         [pgbouncer]\n\
         listen_addr = {lhost}\n\
         listen_port = {lport}\n\
         unix_socket_dir =\n\
         pidfile =\n\
         logfile =\n\
         auth_type = scram-sha-256\n\
         auth_file = {auth}\n\
         pool_mode = {mode}\n\
         default_pool_size = {pool}\n\
         max_client_conn = {clients}\n\
         ignore_startup_parameters = extra_float_digits, options\n\
         log_connections = 0\n\
         log_disconnections = 0\n",
        db = ep.database,
        host = server.ip(),
        port = server.port(),
        user = ep.user,
        set = set.join("; "),
        lhost = listen.ip(),
        lport = listen.port(),
        pool = pooling.pooler.pool_size(pooling.clients),
        clients = max_clients(pooling.clients),
        auth = auth_file.display(),
    )
}

/// PgBouncer's `max_client_conn` for `clients` buyers: four times as many, and 100 more. A
/// buyer whose call timed out drops its connection and opens another at once; on a busy
/// machine PgBouncer accepted the new ones before it had closed the old (with room for 80, 64
/// buyers were refused "no more connections allowed (max_client_conn)").
pub(super) fn max_clients(clients: u32) -> u32 {
    clients.saturating_mul(4).saturating_add(100)
}

/// `userlist.txt`: the user and its password, which PgBouncer checks clients against and logs
/// in to the server with (SCRAM both ways). A file of the node's own, mode 0600.
pub(super) fn userlist(ep: &PostgresEndpoint) -> String {
    format!("\"{}\" \"{}\"\n", ep.user, ep.password)
}

/// What the buyers reach through the pooler at `addr`.
pub(super) fn endpoint(addr: SocketAddr, pooling: &Pooling) -> PoolerEndpoint {
    PoolerEndpoint {
        addr,
        pooler: pooling.pooler,
        pool_size: pooling.pooler.pool_size(pooling.clients),
    }
}

/// Ready once a client of `ep` logs in through the pooler and a query reaches the server (a
/// simple query: nothing prepared); answers PgBouncer's version.
pub(super) async fn ready(ep: PostgresEndpoint) -> Result<String, String> {
    let mut con = ep
        .buyer_options()
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    sqlx::raw_sql("SELECT 1")
        .execute(&mut con)
        .await
        .map_err(|e| e.to_string())?;
    let _ = sqlx::Connection::close(con).await;
    Ok("PgBouncer".into())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cluster::model::Pooler;

    fn ep() -> PostgresEndpoint {
        PostgresEndpoint {
            addr: "127.0.0.1:5000".parse().unwrap(),
            user: "lockbench".into(),
            password: "pw-1".into(),
            database: "lockbench".into(),
            pooler: None,
        }
    }

    #[test]
    fn the_ini_pools_few_server_connections_for_every_buyer_with_their_timeouts() {
        let pooling = Pooling {
            pooler: Pooler::PgbouncerTransaction,
            clients: 32,
            lock_wait: Duration::from_secs(5),
            timeout: Duration::from_millis(500),
        };
        let listen = "127.0.0.1:6000".parse().unwrap();
        let auth = Path::new("/run/x/userlist.txt");
        let ini = ini((listen, ep().addr), &ep(), &pooling, auth);
        for want in [
            "lockbench = host=127.0.0.1 port=5000 dbname=lockbench user=lockbench \
             connect_query='SET lock_timeout = 5000; SET statement_timeout = 5500'",
            "listen_addr = 127.0.0.1\n",
            "listen_port = 6000\n",
            "pool_mode = transaction\n",
            "default_pool_size = 4\n",
            "max_client_conn = 228\n",
            "auth_file = /run/x/userlist.txt\n",
            "ignore_startup_parameters = extra_float_digits, options\n",
        ] {
            assert!(ini.contains(want), "{want} in {ini}");
        }
        // The password is in the userlist only, never in the ini (which a log may quote).
        assert!(!ini.contains("pw-1"));
        assert_eq!(userlist(&ep()), "\"lockbench\" \"pw-1\"\n");
        let session = Pooling {
            pooler: Pooler::PgbouncerSession,
            ..pooling
        };
        let ini = super::ini((listen, ep().addr), &ep(), &session, auth);
        assert!(ini.contains("pool_mode = session\n") && ini.contains("default_pool_size = 32\n"));
    }

    #[test]
    fn transaction_pooling_shares_fewer_server_connections_than_buyers() {
        let t = Pooler::PgbouncerTransaction;
        assert_eq!((t.pool_size(1), t.pool_size(2), t.pool_size(3)), (1, 1, 2));
        assert_eq!((t.pool_size(5), t.pool_size(500)), (4, 4));
        assert_eq!(Pooler::PgbouncerSession.pool_size(32), 32);
        assert!(t.shares_sessions() && !Pooler::PgbouncerSession.shares_sessions());
        assert_eq!(
            "pgbouncer-session".parse::<Pooler>(),
            Ok(Pooler::PgbouncerSession)
        );
    }

    #[test]
    fn a_buyer_behind_a_transaction_pooler_caches_no_statement() {
        let mut e = ep();
        assert!(!e.simple_queries());
        e.pooler = Some(endpoint(
            "127.0.0.1:6000".parse().unwrap(),
            &Pooling {
                pooler: Pooler::PgbouncerTransaction,
                clients: 8,
                ..Pooling::default()
            },
        ));
        assert!(e.simple_queries());
        let o = e.buyer_options();
        assert_eq!(o.get_port(), 6000);
        e.pooler = e.pooler.map(|p| PoolerEndpoint {
            pooler: Pooler::PgbouncerSession,
            ..p
        });
        assert!(!e.simple_queries());
    }
}

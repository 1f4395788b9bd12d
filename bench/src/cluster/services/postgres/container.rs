//! PostgreSQL in containers of the run's Docker network: the same flags as a local node, and
//! the same data setup done by the container's start script. The script runs as root (the
//! images' user) only to give `/tmp/pg` to the `postgres` user, then runs everything else as
//! that user through `setpriv` (which execs: the server stays the container's main process).
//! A restarted container keeps its file system, so the script skips the setup then.

use std::net::SocketAddr;

use super::{
    DATABASE, HBA, NAME, PORT, REPLICA, SUPERUSER, USER, create_user, password, random_password,
    server_settings, superuser, version,
};
use crate::cluster::backend::wait_ready;
use crate::cluster::containers::{Containers, Spec};
use crate::cluster::durability::SynchronousCommit;
use crate::cluster::error::ClusterError;
use crate::cluster::model::{PostgresEndpoint, Role, Service};
use crate::cluster::node::Node;

/// Where the data lives in the container.
const DIR: &str = "/tmp/pg";
/// Debian's PostgreSQL 15 programs, in lockbench's image and the official one alike.
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// How a node gets its data directory the first time it starts.
enum Setup {
    /// `initdb`, superuser password from `$LOCKBENCH_SUPERUSER_PASSWORD`.
    Init,
    /// `pg_basebackup -R` from the primary at this address.
    CopyOf(SocketAddr),
}

/// The script the container runs (`sh -c`), acknowledging commits as `sync` says.
fn script(setup: Setup, sync: SynchronousCommit) -> String {
    let data = format!("{DIR}/data");
    let make = match setup {
        Setup::Init => format!(
            "printf \"%s\" \"$LOCKBENCH_SUPERUSER_PASSWORD\" > {DIR}/pw; \
             {BIN}/initdb -D {data} -U {SUPERUSER} -E UTF8 --no-locale --no-instructions \
             --pwfile={DIR}/pw --auth=scram-sha-256 --no-sync > {DIR}/setup.log 2>&1 \
             || {{ cat {DIR}/setup.log; exit 1; }}; rm -f {DIR}/pw; \
             printf \"{hba}\" > {data}/pg_hba.conf",
            hba = HBA.replace('\n', "\\n"),
        ),
        Setup::CopyOf(primary) => format!(
            "PGPASSWORD=\"$LOCKBENCH_SUPERUSER_PASSWORD\" {BIN}/pg_basebackup -D {data} \
             -h {ip} -p {port} -U {SUPERUSER} -R -X stream -c fast --no-sync \
             > {DIR}/setup.log 2>&1 || {{ cat {DIR}/setup.log; exit 1; }}",
            ip = primary.ip(),
            port = primary.port(),
        ),
    };
    // `listen_addresses=*`: the container's address is Docker's to choose.
    let flags: Vec<String> = (server_settings("*", PORT, sync).iter())
        .map(|a| format!("\"{a}\""))
        .collect();
    let flags = flags.join(" ");
    let as_postgres = format!(
        "set -e; cd {DIR}; if [ ! -f {data}/PG_VERSION ]; then {make}; fi; \
         exec {BIN}/postgres -D {data} {flags}"
    );
    format!(
        "set -e; mkdir -p {DIR}; chown postgres:postgres {DIR}; \
         exec setpriv --reuid=postgres --regid=postgres --init-groups sh -c '{as_postgres}'"
    )
}

/// One container of node `name`, set up by `setup`; returns it once it answers the superuser.
async fn launch(
    run: &Containers,
    name: &str,
    setup: Setup,
    sync: SynchronousCommit,
    su_password: &str,
) -> Result<(Node, SocketAddr), ClusterError> {
    let spec = Spec {
        name: name.into(),
        image: run.images.get(super::IMAGE),
        cmd: vec!["sh".into(), "-c".into(), script(setup, sync)],
        env: vec![("LOCKBENCH_SUPERUSER_PASSWORD", su_password.to_string())],
    };
    let mut c = run.launch_one(spec).await?;
    let addr = c.addr(PORT);
    let su = superuser(addr, su_password);
    let version = wait_ready(name, &mut [&mut c], || version(su.clone())).await?;
    let node = Node {
        name: name.into(),
        service: Service::Postgres,
        role: Role::Primary,
        addr,
        version,
        server: Box::new(c),
    };
    Ok((node, addr))
}

/// The primary: its node, the login, and the superuser's password (the replica's copy needs
/// it).
pub(super) async fn start_primary(
    run: &Containers,
    sync: SynchronousCommit,
) -> Result<(Node, PostgresEndpoint, String), ClusterError> {
    let su_password = random_password();
    let (node, addr) = launch(run, NAME, Setup::Init, sync, &su_password).await?;
    let password = password()?;
    create_user(&superuser(addr, &su_password), &password).await?;
    let endpoint = PostgresEndpoint {
        addr,
        user: USER.into(),
        password,
        database: DATABASE.into(),
        pooler: None,
    };
    Ok((node, endpoint, su_password))
}

/// A streaming replica of the primary at `primary`.
pub(super) async fn start_replica(
    run: &Containers,
    (primary, su_password): (SocketAddr, &str),
    sync: SynchronousCommit,
) -> Result<Node, ClusterError> {
    let setup = Setup::CopyOf(primary);
    let (mut node, _) = launch(run, REPLICA, setup, sync, su_password).await?;
    node.role = Role::Replica;
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_sets_up_once_and_runs_the_server_as_postgres() {
        let s = script(Setup::Init, SynchronousCommit::On);
        assert_contains!(s, "setpriv --reuid=postgres");
        assert_contains!(s, "if [ ! -f /tmp/pg/data/PG_VERSION ]");
        assert!(s.contains("exec /usr/lib/postgresql/15/bin/postgres -D /tmp/pg/data"));
        assert!(s.contains("\"-c\" \"listen_addresses=*\"") && s.contains("\"port=5432\""));
        // The inner script sits between single quotes: it must hold none of its own.
        let inner = s.split_once("sh -c '").unwrap().1;
        assert_eq!(inner.matches('\'').count(), 1, "{inner}");
        let r = script(
            Setup::CopyOf("10.1.0.2:5432".parse().unwrap()),
            SynchronousCommit::Off,
        );
        assert_contains!(r, "pg_basebackup -D /tmp/pg/data -h 10.1.0.2 -p 5432");
        assert!(r.contains("\"synchronous_commit=off\""));
    }
}

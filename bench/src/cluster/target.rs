//! External targets: servers that already exist (a staging cluster), named in a TOML file.
//! lockbench is only a client of them: it starts, kills and pauses nothing.
//!
//! Shared servers hold other people's data, so a run [`claim`]s its [`Prefix`] first (refusing
//! when the prefix already holds data lockbench did not create), creates only names under it,
//! and [`release`]s everything under it at the end. Credentials come from environment
//! variables the file names and are never written into results.
//!
//! This file reads the target file; each service's claim, clean-up and description are in its
//! own module (`ServiceKind`), run here in the registry's order.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use serde::Deserialize;

use super::durability::Source;
use super::error::ClusterError;
use super::external::target_err;
use super::kind::FromTarget;
use super::model::{Auth, Endpoints, MysqlEndpoint, Needs, NodeInfo, PostgresEndpoint, Service};
use super::namespace::Prefix;
use super::registry;

/// A validated target file: servers that already exist, which lockbench only uses as a client.
#[derive(Debug, Clone)]
pub struct ExternalTarget {
    /// Where it came from.
    pub file: String,
    /// Every server it names, credentials filled in from the environment.
    pub endpoints: Endpoints,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    #[allow(dead_code)] // free text for the reader of the file
    description: Option<String>,
    prefix: Option<String>,
    mysql: Option<RawMysql>,
    redis: Option<RawAuthNodes>,
    sentinel: Option<RawSentinel>,
    redis_cluster: Option<RawAuthNodes>,
    zookeeper: Option<RawAuthNodes>,
    etcd: Option<RawAuthNodes>,
    postgres: Option<RawPostgres>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMysql {
    dsn: String,
    password_env: Option<String>,
}

/// A PostgreSQL primary, and the standbys a client may find promoted after a failover.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPostgres {
    dsn: String,
    password_env: Option<String>,
    #[serde(default)]
    standbys: Vec<String>,
}

/// Nodes of a service, and a login if it asks for one.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuthNodes {
    /// Required, except in `[redis]` beside `[sentinel]`: a login alone is the login of the
    /// master the sentinels name.
    #[serde(default)]
    nodes: Vec<String>,
    username: Option<String>,
    password_env: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSentinel {
    nodes: Vec<String>,
    master: Option<String>,
    username: Option<String>,
    password_env: Option<String>,
}

const ADDR_FORM: &str = "\"host:port\" (a name or an IP address)";
const DSN_FORM: &str = "\"mysql://USER@HOST:PORT/DATABASE\" (the password goes into the environment \
     variable that mysql.password_env names, never into the file)";
const PG_DSN_FORM: &str = "\"postgresql://USER@HOST:PORT/DATABASE\" (the password goes into the \
     environment variable that postgres.password_env names, never into the file)";

impl ExternalTarget {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Self, ClusterError> {
        let (file, text) = read(path)?;
        Self::parse(&file, &text, |k| std::env::var(k).ok())
    }

    /// Parses target text; `env` looks up credentials.
    pub fn parse(
        file: &str,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ClusterError> {
        let env = |var: &str| {
            env(var)
                .ok_or_else(|| format!("the name of a set environment variable (export {var}=…)"))
        };
        Self::parse_with(file, text, &env, &resolve)
    }

    /// [`Self::parse`], with `env` giving a password variable's value (or the form expected of
    /// its name) and `resolve` turning each `host:port` into an address.
    fn parse_with(
        file: &str,
        text: &str,
        env: &dyn Fn(&str) -> Result<String, String>,
        resolve: &dyn Fn(&str) -> Result<SocketAddr, String>,
    ) -> Result<Self, ClusterError> {
        let r = Reader { file, env, resolve };
        let raw: RawTarget = toml::from_str(text).map_err(|e| ClusterError::Target {
            file: file.to_string(),
            field: "-".into(),
            problem: e.to_string().trim_end().to_string(),
        })?;
        let mut ep = Endpoints::default();
        if let Some(p) = &raw.prefix {
            ep.prefix = Prefix::new(p).map_err(|e| ClusterError::Target {
                file: file.to_string(),
                field: "prefix".into(),
                problem: e,
            })?;
        }
        if let Some(m) = &raw.mysql {
            let (user, host, database) = parse_dsn(&m.dsn)
                .ok_or_else(|| r.bad("mysql.dsn", &format!("{:?}", m.dsn), DSN_FORM))?;
            let addr = (r.resolve)(host).map_err(|e| r.bad("mysql.dsn", &e, DSN_FORM))?;
            let password = r.password("mysql", &m.password_env)?.unwrap_or_default();
            ep.mysql = Some(MysqlEndpoint {
                addr,
                user: user.to_string(),
                password,
                database: database.to_string(),
            });
        }
        if let Some(p) = &raw.postgres {
            ep.postgres = Some(r.postgres(p)?);
            if !p.standbys.is_empty() {
                ep.postgres_standbys = r.addrs("postgres.standbys", &p.standbys)?;
            }
        }
        r.redis_sets(&raw, &mut ep)?;
        if let Some(x) = &raw.zookeeper {
            ep.zookeeper = r.addrs("zookeeper.nodes", &x.nodes)?;
            ep.zookeeper_auth = r.auth("zookeeper", &x.username, &x.password_env)?;
        }
        if let Some(x) = &raw.etcd {
            let plain: Vec<String> = x
                .nodes
                .iter()
                .map(|n| n.trim_start_matches("http://").to_string())
                .collect();
            ep.etcd = r.addrs("etcd.nodes", &plain)?;
            ep.etcd_auth = r.auth("etcd", &x.username, &x.password_env)?;
        }
        // etcd and ZooKeeper's digest scheme have no default user.
        for (table, a) in [("etcd", &ep.etcd_auth), ("zookeeper", &ep.zookeeper_auth)] {
            if a.as_ref().is_some_and(|a| a.username.is_none()) {
                return Err(r.bad(
                    &format!("{table}.username"),
                    "missing",
                    "the user that `password_env`'s password belongs to",
                ));
            }
        }
        Ok(Self {
            file: file.to_string(),
            endpoints: ep,
        })
    }

    /// The part of the target a strategy needs; a missing table is an error naming it.
    pub fn endpoints_for(&self, strategy: &str, needs: Needs) -> Result<Endpoints, ClusterError> {
        let ep = &self.endpoints;
        let missing = |table: &str, what: &str| ClusterError::Target {
            file: self.file.clone(),
            field: table.into(),
            problem: format!("missing: strategy `{strategy}` needs {what}"),
        };
        let mut out = Endpoints {
            prefix: ep.prefix.clone(),
            ..Endpoints::default()
        };
        // Each service copies its part, in the registry's order (which names the first
        // table missing).
        for kind in registry::ALL.into_iter().filter(|k| k.wanted(needs)) {
            let from = FromTarget { target: ep, needs };
            (kind.copy_from_target(from, &mut out))
                .map_err(|(table, what)| missing(table, &what))?;
        }
        Ok(out)
    }
}

/// A target file read away from its network, for manifests that run lockbench inside it
/// (`lockbench k8s render`): every rule of [`ExternalTarget::parse`] holds, except that host
/// names are checked for form only (a cluster's names resolve only inside it) and no password
/// is read: only the names of the variables that will hold them.
#[derive(Debug, Clone)]
pub struct OfflineTarget {
    /// The file as read. It holds no password: `password_env` only names a variable.
    pub text: String,
    /// For checks only, never to connect: every address is `0.0.0.0:<port>`, every password
    /// empty.
    pub checked: ExternalTarget,
    /// The variable each login reads its password from.
    pub password_vars: PasswordVars,
}

/// The environment variable each login of a target file reads its password from (the
/// table's `password_env`), by service: `[mysql]` is MariaDB's login, and `[redis]` or
/// `[redis_cluster]` give Redis's (one Redis login serves both). A service without one has
/// no password.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PasswordVars(BTreeMap<Service, String>);

impl PasswordVars {
    /// The variable `service`'s login reads its password from, if it has one.
    pub fn get(&self, service: Service) -> Option<&str> {
        self.0.get(&service).map(String::as_str)
    }

    /// `self` with `service`'s variable set to `var` (none: left without).
    pub fn with(mut self, service: Service, var: Option<String>) -> Self {
        if let Some(v) = var {
            self.0.insert(service, v);
        }
        self
    }
}

impl OfflineTarget {
    /// Reads and validates `path` (see [`OfflineTarget`]).
    pub fn load(path: &Path) -> Result<Self, ClusterError> {
        let (file, text) = read(path)?;
        Self::parse(&file, &text)
    }

    /// Validates target text (see [`OfflineTarget`]); `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ClusterError> {
        // Each login's password is the name of its variable, which says where it comes from.
        let env = |var: &str| {
            is_env_name(var).then(|| var.to_string()).ok_or_else(|| {
                "an environment variable name: ASCII letters, digits and `_`, not starting \
                 with a digit (it also names a key of a Kubernetes Secret)"
                    .to_string()
            })
        };
        let named = ExternalTarget::parse_with(file, text, &env, &unresolved)?;
        let mut ep = named.endpoints;
        let take = |a: &mut Option<Auth>| a.as_mut().map(|a| std::mem::take(&mut a.password));
        let mysql = ep.mysql.as_mut().map(|m| std::mem::take(&mut m.password));
        let postgres = ep
            .postgres
            .as_mut()
            .map(|p| std::mem::take(&mut p.password));
        let password_vars = PasswordVars::default()
            // A MySQL login without `password_env` has an empty password.
            .with(Service::Mariadb, mysql.filter(|v| !v.is_empty()))
            .with(Service::Redis, take(&mut ep.redis_auth))
            .with(Service::Sentinel, take(&mut ep.sentinel_auth))
            .with(Service::Etcd, take(&mut ep.etcd_auth))
            .with(Service::Zookeeper, take(&mut ep.zookeeper_auth))
            .with(Service::Postgres, postgres.filter(|v| !v.is_empty()));
        let checked = ExternalTarget {
            file: named.file,
            endpoints: ep,
        };
        Ok(Self {
            text: text.to_string(),
            checked,
            password_vars,
        })
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: a name every shell and a Secret key accept.
fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The text of the target file at `path`, and its name for errors.
fn read(path: &Path) -> Result<(String, String), ClusterError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ClusterError::Target {
        file: file.clone(),
        field: "-".into(),
        problem: format!("cannot read target file: {e}"),
    })?;
    Ok((file, text))
}

/// Reads the tables of one target file: every error names the file and the field.
struct Reader<'a> {
    file: &'a str,
    env: &'a dyn Fn(&str) -> Result<String, String>,
    resolve: &'a dyn Fn(&str) -> Result<SocketAddr, String>,
}

impl Reader<'_> {
    /// Reads `[redis]`, `[sentinel]` and `[redis_cluster]` into `ep`: one Redis login serves
    /// the plain servers and the cluster.
    fn redis_sets(&self, raw: &RawTarget, ep: &mut Endpoints) -> Result<(), ClusterError> {
        if let Some(x) = &raw.redis {
            if !(x.nodes.is_empty() && raw.sentinel.is_some()) {
                ep.redis = self.addrs("redis.nodes", &x.nodes)?;
            }
            ep.redis_auth = self.auth("redis", &x.username, &x.password_env)?;
        }
        if let Some(x) = &raw.sentinel {
            ep.sentinels = self.addrs("sentinel.nodes", &x.nodes)?;
            ep.sentinel_master = x.master.clone();
            ep.sentinel_auth = self.auth("sentinel", &x.username, &x.password_env)?;
        }
        if let Some(x) = &raw.redis_cluster {
            ep.redis_cluster = self.addrs("redis_cluster.nodes", &x.nodes)?;
            if let Some(a) = self.auth("redis_cluster", &x.username, &x.password_env)? {
                if ep.redis_auth.is_some() {
                    return Err(self.bad(
                        "redis_cluster.password_env",
                        "set",
                        "one Redis login: in [redis] or in [redis_cluster], not both",
                    ));
                }
                ep.redis_auth = Some(a);
            }
        }
        Ok(())
    }

    /// `[postgres]`'s login: its DSN, and the password `password_env` names.
    fn postgres(&self, p: &RawPostgres) -> Result<PostgresEndpoint, ClusterError> {
        let bad = |v: &str| self.bad("postgres.dsn", v, PG_DSN_FORM);
        let (user, host, database) =
            parse_pg_dsn(&p.dsn).ok_or_else(|| bad(&format!("{:?}", p.dsn)))?;
        let addr = (self.resolve)(host).map_err(|e| bad(&e))?;
        let password = self.password("postgres", &p.password_env)?;
        Ok(PostgresEndpoint {
            addr,
            user: user.to_string(),
            password: password.unwrap_or_default(),
            database: database.to_string(),
            pooler: None,
        })
    }

    fn bad(&self, field: &str, value: &str, expected: &str) -> ClusterError {
        ClusterError::Target {
            file: self.file.to_string(),
            field: field.to_string(),
            problem: format!("{value}: expected {expected}"),
        }
    }

    /// A non-empty list of `host:port` addresses.
    fn addrs(&self, field: &str, nodes: &[String]) -> Result<Vec<SocketAddr>, ClusterError> {
        if nodes.is_empty() {
            return Err(self.bad(field, "[]", &format!("a list of {ADDR_FORM}")));
        }
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (self.resolve)(n).map_err(|e| self.bad(&format!("{field}[{i}]"), &e, ADDR_FORM))
            })
            .collect()
    }

    /// The password a table's `password_env` names, read from the environment.
    fn password(&self, table: &str, var: &Option<String>) -> Result<Option<String>, ClusterError> {
        var.as_ref()
            .map(|var| {
                (self.env)(var).map_err(|expected| {
                    self.bad(
                        &format!("{table}.password_env"),
                        &format!("{var:?}"),
                        &expected,
                    )
                })
            })
            .transpose()
    }

    /// A table's login: `username` (optional) and the password `password_env` names.
    fn auth(
        &self,
        table: &str,
        user: &Option<String>,
        var: &Option<String>,
    ) -> Result<Option<Auth>, ClusterError> {
        Ok(match self.password(table, var)? {
            Some(password) => Some(Auth {
                username: user.clone(),
                password,
            }),
            None if user.is_some() => {
                return Err(self.bad(
                    &format!("{table}.password_env"),
                    "missing",
                    "the name of the environment variable that holds the password of \
                     `username`",
                ));
            }
            None => None,
        })
    }
}

/// `mysql://user@host:port/database` → (user, host:port, database).
fn parse_dsn(dsn: &str) -> Option<(&str, &str, &str)> {
    split_dsn(dsn.strip_prefix("mysql://")?)
}

/// `postgresql://user@host:port/database` (or `postgres://`) → (user, host:port, database).
fn parse_pg_dsn(dsn: &str) -> Option<(&str, &str, &str)> {
    let rest = (dsn.strip_prefix("postgresql://")).or_else(|| dsn.strip_prefix("postgres://"))?;
    split_dsn(rest)
}

/// `user@host:port/database` → (user, host:port, database); no password, no options.
fn split_dsn(rest: &str) -> Option<(&str, &str, &str)> {
    let (user, rest) = rest.split_once('@')?;
    let (host, database) = rest.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && !s.contains([':', '/', '@', '?']);
    (ok(user) && !host.is_empty() && ok(database)).then_some((user, host, database))
}

/// `host:port` checked for its form only, as `0.0.0.0:port` (see [`OfflineTarget`]).
fn unresolved(hostport: &str) -> Result<SocketAddr, String> {
    let bad = || format!("{hostport:?} (not host:port)");
    let (host, port) = hostport.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(bad());
    }
    Ok(SocketAddr::from(([0, 0, 0, 0], port)))
}

fn resolve(hostport: &str) -> Result<SocketAddr, String> {
    hostport
        .to_socket_addrs()
        .map_err(|e| format!("{hostport:?} ({e})"))?
        .next()
        .ok_or_else(|| format!("{hostport:?} (no address)"))
}

/// Checks that the prefix is free or lockbench's own on every server `ep` names, then marks
/// it as lockbench's. Refuses ([`ClusterError::PrefixTaken`]) when it holds data without the
/// marker. Everything is bounded.
pub async fn claim(ep: &Endpoints) -> Result<(), ClusterError> {
    for (i, kind) in registry::ALL.iter().enumerate() {
        if let Err(e) = kind.claim(ep).await {
            // The services claimed before this one were found empty under the prefix (or
            // lockbench's): their marks come off again, so a refused run leaves nothing. The
            // refusing service is left alone: its prefix may hold someone else's data.
            for done in &registry::ALL[..i] {
                for f in done.release(ep).await {
                    eprintln!("lockbench: warning: undoing the claim: {f}");
                }
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Removes everything under the prefix (lockbench's, as [`claim`] established) from every
/// server `ep` names. Best effort on each server; the first failure is returned after all
/// were tried.
pub async fn release(ep: &Endpoints) -> Result<(), ClusterError> {
    let mut failures = Vec::new();
    for kind in registry::ALL {
        failures.extend(kind.release(ep).await);
    }
    match failures.is_empty() {
        true => Ok(()),
        false => Err(target_err(
            "clean-up",
            format!(
                "could not remove everything under prefix `{}`: {}",
                ep.prefix,
                failures.join("; ")
            ),
        )),
    }
}

/// What each server of `ep` is, with the version it reports (nodes that do not answer are
/// listed with version `unreachable`). `pid` is 0 and `log` empty: nothing runs here.
pub async fn describe(ep: &Endpoints) -> Vec<NodeInfo> {
    let mut out = Vec::new();
    for kind in registry::ALL {
        out.extend(kind.describe(ep).await);
    }
    // Asked of each server (Redis, MariaDB); etcd's and ZooKeeper's cannot be, so their
    // defaults are assumed and marked so.
    let nodes = out.iter().map(|n| (n.service, n.addr));
    let read = registry::durability(nodes, ep, Source::ServerDefault).await;
    for (n, d) in out.iter_mut().zip(read) {
        n.durability = d;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ExternalTarget, String> {
        ExternalTarget::parse("t.toml", text, |k| {
            (k == "PW").then(|| "secret".to_string())
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn parses_every_role_and_reads_the_password_from_the_environment() {
        let t = parse(
            "prefix = \"lb_stage\"\n\
             [mysql]\ndsn = \"mysql://bench@127.0.0.1:3306/shop\"\npassword_env = \"PW\"\n\
             [redis]\nnodes = [\"127.0.0.1:6379\"]\n\
             [sentinel]\nnodes = [\"127.0.0.1:26379\"]\nmaster = \"mymaster\"\n\
             [zookeeper]\nnodes = [\"127.0.0.1:2181\", \"localhost:2182\"]\n\
             [etcd]\nnodes = [\"http://127.0.0.1:2379\"]\n",
        )
        .unwrap();
        let ep = &t.endpoints;
        assert_eq!(ep.prefix.as_str(), "lb_stage");
        let m = ep.mysql.as_ref().unwrap();
        assert_eq!(
            (m.user.as_str(), m.password.as_str(), m.database.as_str()),
            ("bench", "secret", "shop")
        );
        assert_eq!(ep.sentinel_master(), "mymaster");
        assert_eq!(ep.zookeeper.len(), 2);
        assert_eq!(ep.etcd[0].port(), 2379);
        // The password never reaches what results are written from.
        let json = serde_json::to_string(ep).unwrap();
        assert!(!json.contains("secret"), "{json}");
    }

    #[test]
    fn a_postgres_table_names_its_primary_standbys_and_password_variable() {
        let t = parse(
            "[postgres]\ndsn = \"postgresql://bench@127.0.0.1:5432/shop\"\n\
             password_env = \"PW\"\nstandbys = [\"127.0.0.1:5433\"]\n",
        )
        .unwrap();
        let p = t.endpoints.postgres.as_ref().unwrap();
        assert_eq!(
            (p.user.as_str(), p.password.as_str(), p.database.as_str()),
            ("bench", "secret", "shop")
        );
        assert_eq!(p.addr.port(), 5432);
        assert_eq!(t.endpoints.postgres_standbys[0].port(), 5433);
        let json = serde_json::to_string(&t.endpoints).unwrap();
        assert!(!json.contains("secret"), "{json}");
        let needs = Needs {
            postgres: true,
            ..Needs::NONE
        };
        let ep = t.endpoints_for("pg-advisory", needs).unwrap();
        assert_eq!(ep.postgres.unwrap().addr, p.addr);
        let e = parse("[redis]\nnodes = [\"127.0.0.1:1\"]\n")
            .unwrap()
            .endpoints_for("pg-advisory", needs)
            .unwrap_err()
            .to_string();
        assert_contains!(e, "[postgres]", "pg-advisory");
        // `postgres://` is the other spelling; a password in the DSN is refused.
        assert!(parse("[postgres]\ndsn = \"postgres://u@127.0.0.1:1/d\"\n").is_ok());
        let e = parse("[postgres]\ndsn = \"postgresql://u:pw@127.0.0.1:1/d\"\n").unwrap_err();
        assert_contains!(e, "t.toml: postgres.dsn", "postgres.password_env");
        let off = OfflineTarget::parse(
            "t.toml",
            "[postgres]\ndsn = \"postgresql://u@db.svc:5432/d\"\npassword_env = \"PG_PW\"\n",
        )
        .unwrap();
        assert_eq!(off.password_vars.get(Service::Postgres), Some("PG_PW"));
    }

    #[test]
    fn redis_sentinel_and_etcd_logins_come_from_the_environment() {
        let t = parse(
            "[mysql]\ndsn = \"mysql://bench@127.0.0.1:3306/shop\"\n\
             [redis]\nnodes = [\"127.0.0.1:6379\"]\nusername = \"bench\"\npassword_env = \"PW\"\n\
             [sentinel]\nnodes = [\"127.0.0.1:26379\"]\npassword_env = \"PW\"\n\
             [etcd]\nnodes = [\"127.0.0.1:2379\"]\nusername = \"root\"\npassword_env = \"PW\"\n\
             [zookeeper]\nnodes = [\"127.0.0.1:2181\"]\nusername = \"zk\"\npassword_env = \"PW\"\n",
        )
        .unwrap();
        let ep = &t.endpoints;
        let login = |a: &Option<Auth>| a.as_ref().map(|a| (a.username.clone(), a.password.clone()));
        assert_eq!(
            login(&ep.redis_auth),
            Some((Some("bench".into()), "secret".into()))
        );
        assert_eq!(login(&ep.sentinel_auth), Some((None, "secret".into())));
        assert_eq!(
            login(&ep.etcd_auth),
            Some((Some("root".into()), "secret".into()))
        );
        assert_eq!(ep.zookeeper_auth.as_ref().unwrap().digest(), b"zk:secret");
        // The sentinel strategy also gets the Redis login: the master is a Redis server.
        let s = t
            .endpoints_for(
                "redis-sentinel",
                crate::strategy::find("redis-sentinel").unwrap().needs,
            )
            .unwrap();
        assert!(s.redis_auth.is_some() && s.sentinel_auth.is_some());
        // Sentinels and a master login, no Redis nodes of its own: a Sentinel deployment.
        let only = parse(
            "[mysql]\ndsn = \"mysql://bench@127.0.0.1:3306/shop\"\n\
             [redis]\npassword_env = \"PW\"\n[sentinel]\nnodes = [\"127.0.0.1:26379\"]\n",
        )
        .unwrap();
        assert!(only.endpoints.redis.is_empty());
        let needs = |id| crate::strategy::find(id).unwrap().needs;
        let s = only.endpoints_for("redis-sentinel", needs("redis-sentinel"));
        assert_eq!(login(&s.unwrap().redis_auth), Some((None, "secret".into())));
        let e = only.endpoints_for("redis-setnx", needs("redis-setnx"));
        assert!(e.unwrap_err().to_string().contains("[redis] nodes"));
        let json = serde_json::to_string(ep).unwrap();
        assert!(!json.contains("secret") && json.contains("bench"), "{json}");
        // A serve/worker endpoints file carries the passwords beside the endpoints.
        let file = super::super::EndpointsFile::new(ep.clone(), Vec::new());
        let back: super::super::EndpointsFile =
            serde_json::from_str(&serde_json::to_string(&file).unwrap()).unwrap();
        assert_eq!(back.redis_password.as_deref(), Some("secret"));
        assert_eq!(back.etcd_password.as_deref(), Some("secret"));
        for (text, want) in [
            (
                "[redis]\nnodes = [\"127.0.0.1:1\"]\npassword_env = \"NOPE\"\n",
                "t.toml: redis.password_env: \"NOPE\": expected the name of a set environment variable",
            ),
            (
                "[redis]\nnodes = [\"127.0.0.1:1\"]\nusername = \"u\"\n",
                "t.toml: redis.password_env: missing",
            ),
            (
                "[etcd]\nnodes = [\"127.0.0.1:1\"]\npassword_env = \"PW\"\n",
                "t.toml: etcd.username: missing",
            ),
            (
                "[zookeeper]\nnodes = [\"127.0.0.1:1\"]\npassword_env = \"PW\"\n",
                "t.toml: zookeeper.username: missing",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn bad_files_name_file_field_and_form() {
        let cases = [
            ("[mysql]\ndsn = \"bench@db/shop\"\n", "t.toml: mysql.dsn"),
            (
                "[mysql]\ndsn = \"mysql://bench:pw@127.0.0.1:1/shop\"\n",
                "mysql.dsn",
            ),
            (
                "[mysql]\ndsn = \"mysql://bench@127.0.0.1:1/shop\"\npassword_env = \"NOPE\"\n",
                "t.toml: mysql.password_env: \"NOPE\": expected the name of a set environment variable",
            ),
            ("[redis]\nnodes = [\"nohost\"]\n", "t.toml: redis.nodes[0]"),
            ("[redis]\nnodes = []\n", "redis.nodes"),
            // Without nodes, [redis] is only a login for the master that sentinels name.
            ("[redis]\nusername = \"u\"\n", "t.toml: redis.nodes: []"),
            ("[etcd]\n", "t.toml: etcd.nodes: []"),
            ("prefix = \"Bad-Prefix\"\n", "t.toml: prefix"),
            (
                "[redis]\nnode = [\"127.0.0.1:1\"]\n",
                "unknown field `node`",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_shipped_example_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let text = std::fs::read_to_string(root.join("targets/example.toml")).unwrap();
        let t = ExternalTarget::parse("targets/example.toml", &text, |k| {
            k.starts_with("LOCKBENCH_").then(|| "pw".to_string())
        })
        .unwrap();
        for s in crate::strategy::ALL {
            t.endpoints_for(s.id, s.needs)
                .unwrap_or_else(|e| panic!("{}: {e}", s.id));
        }
    }

    #[test]
    fn an_offline_target_names_its_password_variables_and_resolves_nothing() {
        // Names of a cluster's network, variables unset here: both are fine away from it.
        let text = "[mysql]\ndsn = \"mysql://bench@db.shop.svc:3306/shop\"\npassword_env = \"DB_PW\"\n\
             [redis_cluster]\nnodes = [\"redis-0.redis.shop.svc.cluster.local:7000\"]\n\
             password_env = \"RC_PW\"\n\
             [etcd]\nnodes = [\"http://etcd.shop.svc:2379\"]\nusername = \"root\"\npassword_env = \"ETCD_PW\"\n";
        let t = OfflineTarget::parse("t.toml", text).unwrap();
        assert_eq!(
            t.password_vars,
            PasswordVars::default()
                .with(Service::Mariadb, Some("DB_PW".into()))
                .with(Service::Redis, Some("RC_PW".into()))
                .with(Service::Etcd, Some("ETCD_PW".into()))
        );
        assert_eq!(t.text, text);
        let ep = &t.checked.endpoints;
        assert_eq!(ep.mysql.as_ref().unwrap().password, "");
        assert_eq!(ep.etcd_auth.as_ref().unwrap().password, "");
        assert_eq!(ep.redis_cluster[0].port(), 7000);
        let needs = crate::strategy::find("etcd").unwrap().needs;
        t.checked.endpoints_for("etcd", needs).unwrap();
        for (text, want) in [
            (
                "[redis]\nnodes = [\"redis:x\"]\n",
                "t.toml: redis.nodes[0]: \"redis:x\"",
            ),
            ("[redis]\nnodes = [\"redis\"]\n", "t.toml: redis.nodes[0]"),
            ("[redis]\nnodes = [\":6379\"]\n", "t.toml: redis.nodes[0]"),
            (
                "[redis]\nnodes = [\"r:1\"]\npassword_env = \"MY-PW\"\n",
                "t.toml: redis.password_env: \"MY-PW\": expected an environment variable name",
            ),
            (
                "[etcd]\nnodes = [\"e:1\"]\npassword_env = \"PW\"\n",
                "t.toml: etcd.username: missing",
            ),
            ("[redis]\nnode = [\"r:1\"]\n", "unknown field `node`"),
        ] {
            let e = OfflineTarget::parse("t.toml", text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_strategy_gets_only_what_it_needs_and_a_missing_role_is_named() {
        let t = parse("[redis]\nnodes = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n").unwrap();
        let needs = crate::strategy::find("redis-lua-decr").unwrap().needs;
        assert_eq!(
            t.endpoints_for("redis-lua-decr", needs)
                .unwrap()
                .redis
                .len(),
            1
        );
        let needs = crate::strategy::find("redlock").unwrap().needs;
        let e = t.endpoints_for("redlock", needs).unwrap_err().to_string();
        assert_contains!(e, "t.toml: [mysql]");
        let t = parse(
            "[mysql]\ndsn = \"mysql://u@127.0.0.1:1/d\"\n[redis]\nnodes = [\"127.0.0.1:1\"]\n",
        )
        .unwrap();
        let e = t.endpoints_for("redlock", needs).unwrap_err().to_string();
        assert_contains!(e, "[redis] nodes", "5 independent");
    }
}

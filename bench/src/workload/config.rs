//! The workload file: TOML → raw structs (unknown keys rejected) → validation into a [`Workload`].
//!
//! Every error names where the value came from (the file or the `--set` flag), the field, the
//! value and the expected form.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use crate::cluster::durability::{Appendfsync, SynchronousCommit};
use crate::cluster::{EtcdBuild, MysqlBuild, Pooler, PostgresBuild, RedisBuild, ZookeeperBuild};

use super::human::human;
use super::number::{RawInt, number};
use super::sale::{Buyers, Popularity, RawBuyers, Shape};

/// The default workload file (`--workload`), relative to the checkout.
pub const DEFAULT_FILE: &str = "workloads/flash-sale.toml";
/// Its text, built in, so the binary runs from any folder.
pub const DEFAULT_TEXT: &str = include_str!("../../../workloads/flash-sale.toml");

/// Errors in a workload file or its overrides.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The file could not be read.
    #[error("{file}: cannot read workload file: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown / mistyped keys.
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    /// A `--set` argument is malformed or names an unknown key.
    #[error("--set {arg}: {problem}")]
    Override { arg: String, problem: String },
    /// A value is out of range.
    #[error("{origin}: {field} = {value}: expected {expected}")]
    Invalid {
        origin: String,
        field: &'static str,
        value: String,
        expected: std::borrow::Cow<'static, str>,
    },
}

/// How attempts are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
    /// Attempts arrive on a schedule whatever the latency (no coordinated omission); latency is
    /// measured from the intended start.
    Open,
    /// `clients` buyers each start the next attempt when the last one ended (saturation).
    Closed,
}

/// Inter-arrival distribution of the open loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Exactly `1/rate` apart.
    Constant,
    /// Exponentially distributed gaps with mean `1/rate`, drawn from the seed.
    Poisson,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    seed: Option<RawInt>,
    #[serde(default)]
    inventory: RawInventory,
    #[serde(default)]
    load: RawLoad,
    #[serde(default)]
    critical_section: RawCriticalSection,
    #[serde(default)]
    lock: RawLock,
    #[serde(default)]
    servers: RawServers,
    #[serde(default)]
    environment: RawEnvironment,
    buyers: Option<RawBuyers>,
    pay: Option<super::pay::RawPay>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInventory {
    skus: Option<RawInt>,
    stock: Option<RawInt>,
    hot_stock: Option<RawInt>,
    popularity: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    mode: Option<LoadMode>,
    arrival: Option<Arrival>,
    rate: Option<f64>,
    clients: Option<RawInt>,
    duration: Option<String>,
    max_attempts: Option<RawInt>,
    timeout: Option<String>,
    drain: Option<String>,
    read_fraction: Option<f64>,
    warmup: Option<String>,
    shape: Option<String>,
    /// `shape = "sale"`: when the sale opens, the rise, the peak rate, the decay's half-life
    /// and the tail rate.
    start: Option<String>,
    rise: Option<String>,
    peak: Option<f64>,
    half_life: Option<String>,
    tail: Option<f64>,
    /// `shape = "trace"`: the CSV replayed.
    trace: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCriticalSection {
    hold: Option<String>,
    touch_store: Option<bool>,
    precheck: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    ttl: Option<String>,
    acquire_timeout: Option<String>,
    wait: Option<WaitMode>,
    poll_interval: Option<String>,
    poll_jitter: Option<String>,
    /// Replaced by `wait` / `poll_interval` / `poll_jitter`: kept only to say so.
    retry_interval: Option<String>,
    node_timeout: Option<String>,
    optimistic_retries: Option<RawInt>,
    optimistic_backoff: Option<String>,
}

/// How a buyer waits for a busy lock before trying again (locks without a server-side queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Redisson-style: the release publishes on the lock's channel and wakes a waiter, which
    /// otherwise waits at most the lock's remaining TTL.
    Notify,
    /// Sleep `poll_interval` ± `poll_jitter` between tries (redis-py, node-redlock, Spring's
    /// JdbcLockRegistry).
    Poll,
}

crate::names::enum_names!(WaitMode {
    Notify = "notify",
    Poll = "poll",
});

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServers {
    redis_appendfsync: Option<String>,
    postgres_synchronous_commit: Option<String>,
    postgres_pooler: Option<String>,
    mariadb_flush_log_at_trx_commit: Option<i64>,
    #[serde(default, deserialize_with = "version_name")]
    redis: Option<String>,
    #[serde(default, deserialize_with = "version_name")]
    etcd: Option<String>,
    #[serde(default, deserialize_with = "version_name")]
    zookeeper: Option<String>,
    #[serde(default, deserialize_with = "version_name")]
    postgres: Option<String>,
    #[serde(default)]
    mysql: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvironment {
    rtt: Option<String>,
    fsync: Option<String>,
}

/// A server build's name, as a string or as the number TOML reads from `etcd = 3.5` (or from
/// `--set servers.etcd=3.5`): `3.5` is read as "3.5", `7.0` as "7.0", `18` as "18".
fn version_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Name {
        Text(String),
        Whole(i64),
        Number(f64),
    }
    Ok(Some(match Name::deserialize(d)? {
        Name::Text(s) => s,
        Name::Whole(n) => n.to_string(),
        Name::Number(n) => format!("{n:?}"),
    }))
}

/// A validated workload: every value present and in range. Serialises to the effective
/// workload written into `summary.json` (durations as strings like `"10s"`).
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// Seed for arrivals, SKU choice and anything else random in a run.
    pub seed: u64,
    /// What is on sale.
    pub inventory: Inventory,
    /// How buyers arrive.
    pub load: Load,
    /// What happens under the lock.
    pub critical_section: CriticalSection,
    /// Lock parameters.
    pub lock: LockParams,
    /// How the servers lockbench starts are configured.
    pub servers: Servers,
    /// A slower network and disk for the whole run (`[environment]`); left out of the
    /// effective workload when neither is set, as it was before the section existed.
    #[serde(skip_serializing_if = "Environment::is_none")]
    pub environment: Environment,
    /// Buyers as people (`[buyers]`); `None`: anonymous arrivals, one unit each, no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buyers: Option<Buyers>,
    /// Reserve, then pay (`[pay]`, a sale's only); `None`: a purchase is final.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pay: Option<super::pay::Pay>,
}

/// `[inventory]`
#[derive(Debug, Clone, Serialize)]
pub struct Inventory {
    /// Number of distinct items on sale; each has its own stock row and lock key.
    pub skus: u32,
    /// Initial units per SKU.
    pub stock: u64,
    /// Initial units of SKU 0, the hot item, when it differs from `stock`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_stock: Option<u64>,
    /// How demand spreads over the SKUs.
    pub popularity: Popularity,
}

impl Inventory {
    /// Initial units of `sku`: `hot_stock` for SKU 0 when set, `stock` otherwise.
    pub fn stock_of(&self, sku: u32) -> u64 {
        match (sku, self.hot_stock) {
            (0, Some(hot)) => hot,
            _ => self.stock,
        }
    }

    /// Initial units of every SKU, by SKU number.
    pub fn stocks(&self) -> Vec<u64> {
        (0..self.skus).map(|s| self.stock_of(s)).collect()
    }
}

/// `[load]`
#[derive(Debug, Clone, Serialize)]
pub struct Load {
    /// Open (scheduled arrivals) or closed (saturation) loop.
    pub mode: LoadMode,
    /// Open-loop inter-arrival distribution.
    pub arrival: Arrival,
    /// Open-loop attempts per second (ignored by the closed loop).
    pub rate: f64,
    /// Concurrent buyers: in-flight cap of the open loop, number of loops of the closed one.
    pub clients: u32,
    /// How long attempts are started for.
    #[serde(serialize_with = "human")]
    pub duration: Duration,
    /// Optional bound on the number of attempts.
    pub max_attempts: Option<u64>,
    /// Timeout of every single network call.
    #[serde(serialize_with = "human")]
    pub timeout: Duration,
    /// Open loop: how long after `duration` buyers still start the arrivals that were due
    /// before it and waited for a free buyer (default: `timeout`). The end of the load is the
    /// harness's, not the buyers': a buyer who came 5 ms before it is served, late, as a real
    /// one would be. Only an arrival still unstarted after the drain counts as never started,
    /// and it has waited at least this long.
    #[serde(serialize_with = "human")]
    pub drain: Duration,
    /// Share of arrivals that are reads (check stock and price under the read lock) instead of
    /// purchases, `0..=1`; each slot is marked from the seed ([`super::pacing::Slot::read`]).
    pub read_fraction: f64,
    /// Load offered before the measured one, on the same servers and strategy, then thrown
    /// away with everything it sold (the store is prepared again): servers that just started
    /// (a JVM's JIT, first connections) are warm when the measurement starts, as a service's
    /// servers are. 0 (the default): none.
    #[serde(serialize_with = "human")]
    pub warmup: Duration,
    /// The arrivals' shape over time (`steady`: `rate` throughout); its keys sit in `[load]`.
    #[serde(flatten)]
    pub shape: super::sale::Shape,
}

impl Load {
    /// Expected arrivals per second at `t` from the start of the load (the shape's curve).
    pub fn rate_at(&self, t: Duration) -> f64 {
        self.shape.rate_at(self.rate, t)
    }
}

/// `[critical_section]`
#[derive(Debug, Clone, Serialize)]
pub struct CriticalSection {
    /// Business time between reading and writing the stock.
    #[serde(serialize_with = "human")]
    pub hold: Duration,
    /// `false` measures a lock alone: acquire then release, no read, no write (lock
    /// strategies only; attempts end as `locked`).
    pub touch_store: bool,
    /// The cheap check in front of the lock (or the lock-free deduction); written out only
    /// when on, so the resolved config of a run without it is unchanged.
    #[serde(skip_serializing_if = "Precheck::is_off")]
    pub precheck: Precheck,
}

/// `critical_section.precheck`: what a buyer checks before the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precheck {
    /// Nothing: every attempt goes to the lock and the store.
    #[default]
    Off,
    /// A process-local sold-out flag per SKU, set by a sold-out answer: later buyers of that
    /// SKU are answered sold out without the lock or the store (`strategy::precheck`).
    Flag,
}

impl Precheck {
    /// Whether there is no pre-check (the default).
    pub fn is_off(&self) -> bool {
        *self == Self::Off
    }
}

/// `[lock]`
#[derive(Debug, Clone, Serialize)]
pub struct LockParams {
    /// Lease time of expiring locks.
    #[serde(serialize_with = "human")]
    pub ttl: Duration,
    /// How long a buyer tries to get the lock before giving up (`lock_timeout`).
    #[serde(serialize_with = "human")]
    pub acquire_timeout: Duration,
    /// How a buyer waits for a busy lock; `None`: each strategy's default (`lockbench list`).
    pub wait: Option<WaitMode>,
    /// Pause between polls of a busy lock; `None`: the strategy's default.
    #[serde(serialize_with = "human_opt")]
    pub poll_interval: Option<Duration>,
    /// Each poll's pause is drawn uniformly from `poll_interval ± poll_jitter`; `None`: the
    /// strategy's default.
    #[serde(serialize_with = "human_opt")]
    pub poll_jitter: Option<Duration>,
    /// Bound of one call to one node of a multi-node lock (Redlock): far below the ttl, so a
    /// slow or paused node costs little.
    #[serde(serialize_with = "human")]
    pub node_timeout: Duration,
    /// Version conflicts an optimistic buyer retries before giving up.
    pub optimistic_retries: u32,
    /// First pause before an optimistic buyer retries a version conflict (doubles, with
    /// jitter, up to 8x).
    #[serde(serialize_with = "human")]
    pub optimistic_backoff: Duration,
}

/// `[environment]`: every round trip between a buyer and a server, and between peers of a
/// replicated service, lengthened by `rtt`, and every fsync of a server's data by `fsync`,
/// from before the warm-up to the end of the load (docs/chaos.md, "A steady environment").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Environment {
    #[serde(serialize_with = "human")]
    pub rtt: Duration,
    #[serde(serialize_with = "human")]
    pub fsync: Duration,
}

/// The longest `environment.rtt` or `environment.fsync`: beyond it no strategy's default
/// timeouts hold.
pub const ENVIRONMENT_MAX: Duration = Duration::from_secs(1);

impl Environment {
    /// Neither set: the machine as it is.
    pub fn is_none(&self) -> bool {
        self.rtt.is_zero() && self.fsync.is_zero()
    }
}

/// `[servers]`: settings of the servers lockbench starts (servers of `--endpoints` and
/// `--target` keep their own).
#[derive(Debug, Clone, Serialize)]
pub struct Servers {
    /// What every Redis node does with a write before acknowledging it.
    pub redis_appendfsync: Appendfsync,
    /// What every PostgreSQL node waits for before acknowledging a commit: `"on"` (the
    /// server's default: the WAL flushed), `"off"`, `"local"`, `"remote_write"`,
    /// `"remote_apply"`.
    pub postgres_synchronous_commit: SynchronousCommit,
    /// The connection pooler between the buyers and PostgreSQL: `"none"` (the default),
    /// `"pgbouncer-transaction"`, `"pgbouncer-session"` (docs/postgres.md). Left out of the
    /// effective workload when none, as it was before the key existed.
    #[serde(skip_serializing_if = "Pooler::is_none")]
    pub postgres_pooler: Pooler,
    /// MariaDB's `innodb_flush_log_at_trx_commit`: 1 (the default: the redo log fsynced at
    /// every commit) or 2 (written at commit, fsynced once a second: a power loss can take
    /// the last second of commits). Left out of the effective workload when 1, as it was
    /// before the key existed.
    #[serde(skip_serializing_if = "is_one")]
    pub mariadb_flush_log_at_trx_commit: u8,
    /// Which build every Redis node runs: `"7.0"` (bookworm's), `"valkey-8.0"`, `"valkey-9.1"`.
    pub redis: RedisBuild,
    /// Which build every etcd member runs: `"3.4"` (bookworm's), `"3.5"`.
    pub etcd: EtcdBuild,
    /// Which build every ZooKeeper member runs: `"3.8"` (bookworm's), `"3.9"`.
    pub zookeeper: ZookeeperBuild,
    /// Which build every PostgreSQL node runs: `"15"` (bookworm's), `"18"`.
    pub postgres: PostgresBuild,
    /// Which database server runs: `"mariadb-10.11"` (bookworm's), `"mysql-9"` (containers).
    pub mysql: MysqlBuild,
}

impl Servers {
    /// The builds of the services `needs` uses (bookworm's for the others).
    pub fn builds(&self, needs: crate::cluster::Needs) -> crate::cluster::Builds {
        let uses_redis = needs.redis || needs.redlock || needs.sentinel || needs.redis_cluster;
        crate::cluster::Builds {
            redis: if_runs(uses_redis, self.redis),
            etcd: if_runs(needs.etcd, self.etcd),
            zookeeper: if_runs(needs.zookeeper, self.zookeeper),
            mysql: if_runs(needs.mariadb, self.mysql),
            postgres: if_runs(needs.runs(crate::cluster::Service::Postgres), self.postgres),
        }
    }
}

/// `build` where its service runs, bookworm's (the default) where it does not.
fn if_runs<T: Default>(runs: bool, build: T) -> T {
    if runs { build } else { T::default() }
}

fn is_one(n: &u8) -> bool {
    *n == 1
}

fn human_opt<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => human(d, s),
        None => s.serialize_none(),
    }
}

/// Where a value came from, for error messages.
struct Origins<'a> {
    file: &'a str,
    overrides: HashMap<String, String>,
}

impl Origins<'_> {
    fn of(&self, field: &str) -> String {
        match self.overrides.get(field) {
            Some(arg) => format!("--set {arg}"),
            None => self.file.to_string(),
        }
    }
}

impl Workload {
    /// Reads `path`, applies `overrides` (`section.key=value`) and validates the result.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, WorkloadError> {
        let file = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            // The default file, outside the checkout: the copy built into the binary.
            Err(e)
                if path == Path::new(DEFAULT_FILE) && e.kind() == std::io::ErrorKind::NotFound =>
            {
                DEFAULT_TEXT.to_string()
            }
            read => read.map_err(|source| WorkloadError::Read {
                file: file.clone(),
                source,
            })?,
        };
        Self::parse(&file, &text, overrides)
    }

    /// Parses workload text; `file` names it in errors.
    pub fn parse(file: &str, text: &str, overrides: &[String]) -> Result<Self, WorkloadError> {
        // Parse the text as written first, so syntax and unknown-key errors point at its lines.
        let parse_err = |e: toml::de::Error| WorkloadError::Parse {
            file: file.to_string(),
            message: e.to_string().trim_end().to_string(),
        };
        let mut raw: RawWorkload = toml::from_str(text).map_err(parse_err)?;
        let mut origins = Origins {
            file,
            overrides: HashMap::new(),
        };
        if !overrides.is_empty() {
            let mut table: toml::Table = toml::from_str(text).map_err(parse_err)?;
            for arg in overrides {
                let path = apply_override(&mut table, arg)?;
                // Deserialise after each one so a bad key or type names its own flag.
                raw = RawWorkload::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                    WorkloadError::Override {
                        arg: arg.clone(),
                        problem: e.to_string().trim_end().to_string(),
                    }
                })?;
                origins.overrides.insert(path, arg.clone());
            }
        }
        raw.validate(&origins)
    }
}

/// Sets `section.key` (or a top-level `key`) in `table` from `arg`; returns the dotted path.
fn apply_override(table: &mut toml::Table, arg: &str) -> Result<String, WorkloadError> {
    let bad = |problem: &str| WorkloadError::Override {
        arg: arg.to_string(),
        problem: format!("{problem}; expected section.key=value, e.g. --set load.clients=64"),
    };
    let (path, value) = arg.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let path = path.trim();
    let parts: Vec<&str> = path.split('.').collect();
    if path.is_empty() || parts.iter().any(|p| p.is_empty()) || parts.len() > 2 {
        return Err(bad(
            "the key must be `section.key` or a top-level key like `seed`",
        ));
    }
    let value = value.trim();
    if value.is_empty() {
        return Err(bad("the value is empty"));
    }
    // A TOML literal (64, 0.5, "x", true) keeps its type; anything else (10s) is a string.
    let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    // The value replaced (if any) is not needed: the override wins.
    match parts.as_slice() {
        [key] => {
            table.insert(key.to_string(), value);
        }
        [section, key] => {
            let section = table
                .entry(section.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(section) = section else {
                return Err(bad("that section is not a table"));
            };
            section.insert(key.to_string(), value);
        }
        _ => unreachable!("length checked above"),
    }
    Ok(path.to_string())
}

/// The highest rate a workload may ask for, in arrivals per second.
const MAX_RATE: f64 = 10_000_000.0;

/// Checks single fields; every error names the field and where its value came from.
struct Fields<'a> {
    o: &'a Origins<'a>,
}

impl Fields<'_> {
    fn invalid(
        &self,
        field: &'static str,
        value: String,
        expected: impl Into<std::borrow::Cow<'static, str>>,
    ) -> WorkloadError {
        WorkloadError::Invalid {
            origin: self.o.of(field),
            field,
            value,
            expected: expected.into(),
        }
    }

    /// An integer in `1..=max`; a refusal states the range.
    fn positive_int(
        &self,
        field: &'static str,
        v: impl Into<RawInt>,
        max: i64,
    ) -> Result<i64, WorkloadError> {
        self.int_in(field, v.into(), 1, max)
    }

    /// An integer in `min..=max`; a refusal states the range.
    fn int_in(
        &self,
        field: &'static str,
        v: RawInt,
        min: i64,
        max: i64,
    ) -> Result<i64, WorkloadError> {
        let expected = || format!("an integer from {min} to {max}");
        match v {
            RawInt::Int(v) if (min..=max).contains(&v) => Ok(v),
            RawInt::Int(v) => Err(self.invalid(field, v.to_string(), expected())),
            RawInt::Float(v) => Err(self.invalid(field, number(v), expected())),
        }
    }

    /// A duration (`default` when absent); zero only if `allow_zero`.
    fn duration(
        &self,
        field: &'static str,
        v: Option<String>,
        default: &str,
        allow_zero: bool,
    ) -> Result<Duration, WorkloadError> {
        let text = v.unwrap_or_else(|| default.to_string());
        let expected = if allow_zero {
            "a duration such as \"2ms\", \"1s\" or \"0s\""
        } else {
            "a positive duration such as \"500ms\", \"10s\" or \"1m\""
        };
        match humantime::parse_duration(text.trim()) {
            Ok(d) if allow_zero || !d.is_zero() => Ok(d),
            _ => Err(self.invalid(field, format!("{text:?}"), expected)),
        }
    }

    /// The `[load]` section.
    fn load(&self, l: RawLoad) -> Result<Load, WorkloadError> {
        let rate = l.rate.unwrap_or(1000.0);
        if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
            return Err(self.invalid(
                "load.rate",
                number(rate),
                "attempts per second, a number above 0 and at most 10000000 (e.g. 1000)",
            ));
        }
        let clients = self.positive_int(
            "load.clients",
            l.clients.unwrap_or(RawInt::Int(64)),
            100_000,
        )?;
        let max_attempts = l
            .max_attempts
            .map(|m| self.positive_int("load.max_attempts", m, i64::MAX))
            .transpose()?;
        let read_fraction = l.read_fraction.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&read_fraction) {
            return Err(self.invalid(
                "load.read_fraction",
                read_fraction.to_string(),
                "the share of arrivals that are reads, a number from 0 to 1 (e.g. 0.9)",
            ));
        }
        let shape = self.shape(&l)?;
        let timeout = self.duration("load.timeout", l.timeout, "1s", false)?;
        Ok(Load {
            mode: l.mode.unwrap_or(LoadMode::Open),
            arrival: l.arrival.unwrap_or(Arrival::Poisson),
            rate,
            clients: clients as u32,
            duration: self.duration("load.duration", l.duration, "10s", false)?,
            max_attempts: max_attempts.map(|m| m as u64),
            timeout,
            drain: match l.drain {
                Some(d) => self.duration("load.drain", Some(d), "0s", true)?,
                None => timeout,
            },
            read_fraction,
            warmup: self.duration("load.warmup", l.warmup, "0s", true)?,
            shape,
        })
    }

    /// `[load] shape` and its keys; a key of another shape is refused.
    fn shape(&self, l: &RawLoad) -> Result<Shape, WorkloadError> {
        let shape = l.shape.as_deref().unwrap_or("steady");
        let given = |key: &'static str, set: bool, of: &str| {
            if set && shape != of {
                Err(self.invalid(
                    key,
                    format!("given with load.shape = {shape:?}"),
                    "no value: the key belongs to another shape (sale: start, rise, peak, \
                     half_life, tail; trace: trace)",
                ))
            } else {
                Ok(())
            }
        };
        given("load.start", l.start.is_some(), "sale")?;
        given("load.rise", l.rise.is_some(), "sale")?;
        given("load.peak", l.peak.is_some(), "sale")?;
        given("load.half_life", l.half_life.is_some(), "sale")?;
        given("load.tail", l.tail.is_some(), "sale")?;
        given("load.trace", l.trace.is_some(), "trace")?;
        match shape {
            "steady" => Ok(Shape::Steady),
            "sale" => self.sale(l),
            "trace" => self.trace(l.trace.as_deref()),
            other => Err(self.invalid(
                "load.shape",
                format!("{other:?}"),
                "one of \"steady\", \"sale\", \"trace\"",
            )),
        }
    }

    /// `shape = "sale"`: every rate positive (the curve is inverted, so it never reaches 0).
    fn sale(&self, l: &RawLoad) -> Result<Shape, WorkloadError> {
        let rate = |field: &'static str, v: Option<f64>| match v {
            Some(v) if v.is_finite() && v > 0.0 && v <= MAX_RATE => Ok(v),
            v => Err(self.invalid(
                field,
                v.map_or("missing".into(), number),
                "arrivals per second, a number above 0 and at most 10000000 (e.g. 50000)",
            )),
        };
        Ok(Shape::Sale {
            start: self.duration("load.start", l.start.clone(), "0s", true)?,
            rise: self.duration("load.rise", l.rise.clone(), "0s", true)?,
            peak: rate("load.peak", l.peak)?,
            half_life: self.duration("load.half_life", l.half_life.clone(), "1s", false)?,
            tail: rate(
                "load.tail",
                Some(l.tail.unwrap_or(l.rate.unwrap_or(1000.0))),
            )?,
        })
    }

    /// `shape = "trace"`: the file resolved against the workload file's folder, read now so
    /// a bad trace fails before anything starts.
    fn trace(&self, file: Option<&str>) -> Result<Shape, WorkloadError> {
        let file = file.ok_or_else(|| {
            self.invalid(
                "load.trace",
                "missing".into(),
                "a CSV file (e.g. trace = \"traces/example.csv\"), relative to the workload \
                 file's folder",
            )
        })?;
        let mut path = std::path::PathBuf::from(file);
        if path.is_relative() {
            let folder = Path::new(self.o.file).parent().unwrap_or(Path::new(""));
            path = folder.join(path);
        }
        let path = std::path::absolute(&path).unwrap_or(path);
        let arrivals = super::trace::Trace::read(&path).map_err(|e| WorkloadError::Invalid {
            origin: self.o.of("load.trace"),
            field: "load.trace",
            value: format!("{file:?} ({e})"),
            expected: "a CSV of `t_ms,count` per bucket or one `t_us` timestamp per line".into(),
        })?;
        Ok(Shape::Trace {
            path,
            arrivals: std::sync::Arc::new(arrivals),
        })
    }

    /// The `[buyers]` section.
    fn buyers(&self, b: RawBuyers) -> Result<Buyers, WorkloadError> {
        let count = self.positive_int(
            "buyers.count",
            b.count.unwrap_or(RawInt::Int(100_000)),
            1 << 40,
        )?;
        let limit =
            self.positive_int("buyers.limit", b.limit.unwrap_or(RawInt::Int(1)), 1_000_000)?;
        let quantity = match b.quantity {
            None => super::sale::Quantity { min: 1, max: 1 },
            Some(q) => q.text().parse().map_err(|_| {
                self.invalid(
                    "buyers.quantity",
                    format!("{:?}", q.text()),
                    "units per order: a positive integer (\"1\") or a range \"1..3\"",
                )
            })?,
        };
        let share = |field: &'static str, v: Option<f64>| {
            let v = v.unwrap_or(0.0);
            if (0.0..=1.0).contains(&v) {
                Ok(v)
            } else {
                Err(self.invalid(field, v.to_string(), "a share from 0 to 1 (e.g. 0.05)"))
            }
        };
        Ok(Buyers {
            count: count as u64,
            limit: limit as u32,
            quantity,
            resubmit: share("buyers.resubmit", b.resubmit)?,
            retry_after_timeout: share("buyers.retry_after_timeout", b.retry_after_timeout)?,
        })
    }

    /// The `[pay]` section: a reservation is a sale's order, so it needs `[buyers]`.
    fn pay(&self, p: super::pay::RawPay, buyers: bool) -> Result<super::pay::Pay, WorkloadError> {
        if !buyers {
            return Err(self.invalid(
                "pay",
                "given without [buyers]".into(),
                "a [buyers] section beside it: a reservation is a sale's order",
            ));
        }
        p.validate()
            .map_err(|(field, value, expected)| self.invalid(field, value, expected))
    }

    /// The `[lock]` section.
    /// `servers.mariadb_flush_log_at_trx_commit`: 1 (the default) or 2.
    fn flush_log(&self, raw: Option<i64>) -> Result<u8, WorkloadError> {
        match raw {
            None => Ok(1),
            Some(n @ (1 | 2)) => Ok(n as u8),
            Some(n) => Err(self.invalid(
                "servers.mariadb_flush_log_at_trx_commit",
                n.to_string(),
                "1 (the redo log fsynced at every commit, MariaDB's default) or 2 (written at \
                 commit, fsynced once a second)",
            )),
        }
    }

    /// `[servers]`: each value one of its names.
    /// The `[environment]` section: each delay from 0 (the default) to [`ENVIRONMENT_MAX`].
    fn environment(&self, raw: RawEnvironment) -> Result<Environment, WorkloadError> {
        let delay = |field: &'static str, v: Option<String>| {
            let d = self.duration(field, v.clone(), "0s", true)?;
            if d > ENVIRONMENT_MAX {
                return Err(self.invalid(
                    field,
                    format!("{:?}", v.unwrap_or_default()),
                    "a duration from \"0s\" to \"1s\", such as \"1ms\" or \"500us\"",
                ));
            }
            Ok(d)
        };
        Ok(Environment {
            rtt: delay("environment.rtt", raw.rtt)?,
            fsync: delay("environment.fsync", raw.fsync)?,
        })
    }

    fn servers(&self, raw: RawServers) -> Result<Servers, WorkloadError> {
        fn named<T: std::str::FromStr + Default>(
            f: &Fields<'_>,
            field: &'static str,
            v: Option<String>,
            expected: &'static str,
        ) -> Result<T, WorkloadError> {
            match v {
                None => Ok(T::default()),
                Some(v) => v
                    .parse()
                    .map_err(|_| f.invalid(field, format!("{v:?}"), expected)),
            }
        }
        let flush = self.flush_log(raw.mariadb_flush_log_at_trx_commit)?;
        Ok(Servers {
            mariadb_flush_log_at_trx_commit: flush,
            redis_appendfsync: named(
                self,
                "servers.redis_appendfsync",
                raw.redis_appendfsync,
                "one of \"off\", \"no\", \"everysec\", \"always\"",
            )?,
            postgres_synchronous_commit: named(
                self,
                "servers.postgres_synchronous_commit",
                raw.postgres_synchronous_commit,
                "one of \"on\" (PostgreSQL's default), \"off\", \"local\", \"remote_write\", \
                 \"remote_apply\"",
            )?,
            postgres_pooler: named(
                self,
                "servers.postgres_pooler",
                raw.postgres_pooler,
                "one of \"none\" (the buyers connect to PostgreSQL directly), \
                 \"pgbouncer-transaction\", \"pgbouncer-session\"",
            )?,
            redis: named(
                self,
                "servers.redis",
                raw.redis,
                "one of \"7.0\" (Debian bookworm's Redis), \"valkey-8.0\", \"valkey-9.1\"",
            )?,
            etcd: named(
                self,
                "servers.etcd",
                raw.etcd,
                "one of \"3.4\" (Debian bookworm's etcd), \"3.5\"",
            )?,
            postgres: named(
                self,
                "servers.postgres",
                raw.postgres,
                "one of \"15\" (Debian bookworm's PostgreSQL), \"18\"",
            )?,
            zookeeper: named(
                self,
                "servers.zookeeper",
                raw.zookeeper,
                "one of \"3.8\" (Debian bookworm's ZooKeeper), \"3.9\"",
            )?,
            mysql: named(
                self,
                "servers.mysql",
                raw.mysql,
                "one of \"mariadb-10.11\" (Debian bookworm's MariaDB), \"mysql-9\" (with \
                 --provision containers)",
            )?,
        })
    }

    fn lock(&self, k: RawLock) -> Result<LockParams, WorkloadError> {
        if let Some(v) = k.retry_interval {
            return Err(self.invalid(
                "lock.retry_interval",
                format!("{v:?}"),
                "no value: the key was replaced by lock.wait (\"notify\" or \"poll\"), \
                 lock.poll_interval and lock.poll_jitter (each strategy's defaults: `lockbench \
                 list`), and lock.optimistic_backoff for mysql-optimistic",
            ));
        }
        let optional = |field, v: Option<String>, zero| {
            v.map(|v| self.duration(field, Some(v), "", zero))
                .transpose()
        };
        Ok(LockParams {
            ttl: self.duration("lock.ttl", k.ttl, "5s", false)?,
            acquire_timeout: self.duration(
                "lock.acquire_timeout",
                k.acquire_timeout,
                "2s",
                false,
            )?,
            wait: k.wait,
            poll_interval: optional("lock.poll_interval", k.poll_interval, false)?,
            poll_jitter: optional("lock.poll_jitter", k.poll_jitter, true)?,
            node_timeout: self.duration("lock.node_timeout", k.node_timeout, "50ms", false)?,
            optimistic_retries: self.positive_int(
                "lock.optimistic_retries",
                k.optimistic_retries.unwrap_or(RawInt::Int(20)),
                10_000,
            )? as u32,
            optimistic_backoff: self.duration(
                "lock.optimistic_backoff",
                k.optimistic_backoff,
                "1ms",
                false,
            )?,
        })
    }
}

impl RawWorkload {
    fn validate(self, o: &Origins) -> Result<Workload, WorkloadError> {
        let f = Fields { o };
        let seed = f.int_in("seed", self.seed.unwrap_or(RawInt::Int(1)), 0, i64::MAX)?;
        let skus = f.positive_int(
            "inventory.skus",
            self.inventory.skus.unwrap_or(RawInt::Int(1)),
            1_000_000,
        )?;
        let stock = f.positive_int(
            "inventory.stock",
            self.inventory.stock.unwrap_or(RawInt::Int(100)),
            i64::MAX / 4,
        )?;

        let hot_stock = self
            .inventory
            .hot_stock
            .map(|h| f.positive_int("inventory.hot_stock", h, i64::MAX / 4))
            .transpose()?;
        let popularity = match self.inventory.popularity {
            None => Popularity::Uniform,
            Some(p) => p.parse().map_err(|_| {
                f.invalid(
                    "inventory.popularity",
                    format!("{p:?}"),
                    "\"uniform\" or \"zipf:S\" with S in (0, 10], e.g. \"zipf:1.1\"",
                )
            })?,
        };
        let buyers = self.buyers.map(|b| f.buyers(b)).transpose()?;
        let load = f.load(self.load)?;
        let precheck = match self.critical_section.precheck.as_deref() {
            None | Some("off") => Precheck::Off,
            Some("flag") => Precheck::Flag,
            Some(other) => {
                return Err(f.invalid(
                    "critical_section.precheck",
                    format!("{other:?}"),
                    "\"off\" or \"flag\"",
                ));
            }
        };
        let critical_section = CriticalSection {
            precheck,
            touch_store: self.critical_section.touch_store.unwrap_or(true),
            hold: f.duration(
                "critical_section.hold",
                self.critical_section.hold,
                "2ms",
                true,
            )?,
        };
        let lock = f.lock(self.lock)?;
        let servers = f.servers(self.servers)?;
        let environment = f.environment(self.environment)?;
        if lock.ttl.as_millis() == 0 {
            return Err(f.invalid(
                "lock.ttl",
                format!("{:?}", lock.ttl),
                "at least 1ms (Redis PX is in milliseconds)",
            ));
        }
        Ok(Workload {
            seed: seed as u64,
            inventory: Inventory {
                skus: skus as u32,
                stock: stock as u64,
                hot_stock: hot_stock.map(|h| h as u64),
                popularity,
            },
            load,
            critical_section,
            lock,
            servers,
            environment,
            pay: self.pay.map(|p| f.pay(p, buyers.is_some())).transpose()?,
            buyers,
        })
    }
}

impl Workload {
    /// Total units on sale over all SKUs.
    pub fn total_stock(&self) -> u64 {
        (0..self.inventory.skus)
            .map(|s| self.inventory.stock_of(s))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
seed = 7
[inventory]
skus = 2
stock = 20
[load]
mode = "closed"
clients = 32
duration = "3s"
[critical_section]
hold = "2ms"
[lock]
ttl = "1s"
"#;

    fn parsed(text: &str, overrides: &[&str]) -> Workload {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        Workload::parse("w.toml", text, &o).unwrap()
    }

    /// A `[servers]` setting, read through `get`: `GOOD` leaves it at `default`, the file's
    /// line `file.0` sets `file.1`, a `--set` `set.0` sets `set.1`, and the effective workload
    /// (what workers get, as TOML) reads that back the same.
    fn setting<T: PartialEq + std::fmt::Debug>(
        get: impl Fn(&Workload) -> T,
        default: T,
        file: (&str, T),
        set: (&str, T),
    ) {
        assert_eq!(get(&parsed(GOOD, &[])), default);
        assert_eq!(
            get(&parsed(&format!("[servers]\n{}\n", file.0), &[])),
            file.1
        );
        let w = parsed(GOOD, &[set.0]);
        assert_eq!(get(&w), set.1);
        let back = Workload::parse("effective", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(get(&back), set.1, "read back from the effective workload");
    }

    /// The error of `--set set` on `GOOD`, which must name the `--set` first.
    fn bad_set(set: &str) -> String {
        let e = err(GOOD, &[set]);
        assert!(e.starts_with(&format!("--set {set}:")), "{e}");
        e
    }

    fn err(text: &str, overrides: &[&str]) -> String {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        Workload::parse("w.toml", text, &o).unwrap_err().to_string()
    }

    #[test]
    fn parses_and_fills_defaults() {
        let w = Workload::parse("w.toml", GOOD, &[]).unwrap();
        assert_eq!((w.seed, w.inventory.skus, w.inventory.stock), (7, 2, 20));
        assert_eq!(w.load.mode, LoadMode::Closed);
        assert_eq!(w.load.duration, Duration::from_secs(3));
        assert_eq!(w.lock.acquire_timeout, Duration::from_secs(2));
        assert_eq!(w.total_stock(), 40);
    }

    #[test]
    fn overrides_replace_and_add_values() {
        let o = vec![
            "load.clients=8".to_string(),
            "load.duration=500ms".into(),
            "seed=9".into(),
        ];
        let w = Workload::parse("w.toml", GOOD, &o).unwrap();
        assert_eq!(w.load.clients, 8);
        assert_eq!(w.load.duration, Duration::from_millis(500));
        assert_eq!(w.seed, 9);
    }

    #[test]
    fn malformed_toml_names_the_file_and_line() {
        let e = err("[inventory\nstock = 1", &[]);
        assert!(e.starts_with("w.toml:") && e.contains("line 1"), "{e}");
    }

    #[test]
    fn unknown_key_is_rejected_with_the_expected_keys() {
        let e = err("[inventory]\nstok = 5\n", &[]);
        assert_contains!(e, "w.toml", "stok", "stock");
    }

    #[test]
    fn out_of_range_values_name_field_value_and_form() {
        let e = err("[inventory]\nstock = 0\n", &[]);
        assert_contains!(
            e,
            "w.toml: inventory.stock = 0: expected an integer from 1 to"
        );
        let e = err("[inventory]\nstock = -3\n", &[]);
        assert_contains!(e, "inventory.stock = -3");
        let e = err("[load]\nrate = 0\n", &[]);
        assert_contains!(e, "load.rate = 0: expected attempts per second");
        let e = err("[load]\nduration = \"0s\"\n", &[]);
        assert_contains!(e, "load.duration = \"0s\": expected a positive duration");
        let e = err("[load]\nduration = \"soon\"\n", &[]);
        assert_contains!(e, "load.duration = \"soon\"");
        let e = err("[load]\nmode = \"half\"\n", &[]);
        assert_contains!(e, "half", "open", "closed");
    }

    #[test]
    fn the_default_workload_is_built_in_and_another_missing_file_is_an_error() {
        // Unit tests run in bench/, where the default's relative path names nothing.
        assert!(!Path::new(DEFAULT_FILE).exists());
        let w = Workload::load(Path::new(DEFAULT_FILE), &["load.rate=7".into()]).unwrap();
        let from_text = Workload::parse(DEFAULT_FILE, DEFAULT_TEXT, &["load.rate=7".into()]);
        assert_eq!(format!("{w:?}"), format!("{:?}", from_text.unwrap()));
        let e = Workload::load(Path::new("workloads/none.toml"), &[]).unwrap_err();
        assert!(
            e.to_string().contains("workloads/none.toml: cannot read"),
            "{e}"
        );
    }

    #[test]
    fn every_rejected_number_states_its_range() {
        let cases = [
            (
                "[load]\nrate = 1e12\n",
                "load.rate = 1e12: expected attempts per second, a number above 0 and at most 10000000",
            ),
            (
                "[inventory]\nstock = 1e23\n",
                "inventory.stock = 1e23: expected an integer from 1 to 2305843009213693951",
            ),
            (
                "[inventory]\nstock = 2.5\n",
                "inventory.stock = 2.5: expected an integer from 1 to",
            ),
            (
                "[load]\nclients = 0\n",
                "load.clients = 0: expected an integer from 1 to 100000",
            ),
            (
                "seed = -1\n",
                "seed = -1: expected an integer from 0 to 9223372036854775807",
            ),
            (
                "[buyers]\nlimit = 1e7\n",
                "buyers.limit = 10000000: expected an integer from 1 to 1000000",
            ),
            (
                "[load]\nshape = \"sale\"\npeak = 1e9\n",
                "load.peak = 1e9: expected arrivals per second, a number above 0 and at most 10000000",
            ),
        ];
        for (text, want) in cases {
            let e = err(text, &[]);
            assert!(e.contains(want), "{text}: {e}");
        }
        // Through --set too, named by the flag.
        let e = err(GOOD, &["inventory.stock=1e23"]);
        assert_contains!(e, "inventory.stock = 1e23: expected an integer from 1 to");
        // A value that is not a number at all is still the parser's, naming the type.
        let e = err("[inventory]\nstock = \"many\"\n", &[]);
        assert_contains!(e, "expected an integer");
    }

    #[test]
    fn read_fraction_defaults_to_zero_and_is_checked() {
        let w = Workload::parse("w.toml", GOOD, &[]).unwrap();
        assert_eq!(w.load.read_fraction, 0.0);
        let w = Workload::parse("w.toml", GOOD, &["load.read_fraction=0.9".to_string()]).unwrap();
        assert_eq!(w.load.read_fraction, 0.9);
        let w = Workload::parse("w.toml", "[load]\nread_fraction = 1\n", &[]).unwrap();
        assert_eq!(w.load.read_fraction, 1.0);
        let e = err("[load]\nread_fraction = 1.5\n", &[]);
        assert_eq!(
            e,
            "w.toml: load.read_fraction = 1.5: expected the share of arrivals that are reads, a \
             number from 0 to 1 (e.g. 0.9)"
        );
        let e = err(GOOD, &["load.read_fraction=-0.1"]);
        assert!(
            e.starts_with("--set load.read_fraction=-0.1: load.read_fraction = -0.1"),
            "{e}"
        );
        bad_set("load.read_fraction=nan");
        let e = err("[load]\nread_fraction = \"most\"\n", &[]);
        assert!(
            e.starts_with("w.toml:") && e.contains("read_fraction"),
            "{e}"
        );
        // Workers get the effective workload as TOML: it must read back the same.
        let w = Workload::parse("w.toml", GOOD, &["load.read_fraction=0.25".to_string()]).unwrap();
        let back = Workload::parse("effective", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(back.load.read_fraction, 0.25);
    }

    #[test]
    fn environment_sets_rtt_and_fsync_and_refuses_what_is_not_a_delay() {
        let w = Workload::parse("w.toml", GOOD, &[]).unwrap();
        assert!(w.environment.is_none());
        // Absent from the effective workload when not set, as before the section existed.
        assert!(!toml::to_string(&w).unwrap().contains("environment"));
        let o = ["environment.rtt=1ms", "environment.fsync=2ms"].map(String::from);
        let w = Workload::parse("w.toml", GOOD, &o).unwrap();
        assert_eq!(w.environment.rtt, Duration::from_millis(1));
        assert_eq!(w.environment.fsync, Duration::from_millis(2));
        // Workers get the effective workload as TOML: it must read back the same.
        let back = Workload::parse("effective", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(back.environment, w.environment);
        let e = err(GOOD, &["environment.rtt=fast"]);
        assert_contains!(e, "environment.rtt", "expected a duration");
        let e = err("[environment]\nfsync = \"2s\"\n", &[]);
        assert_contains!(e, "w.toml", "environment.fsync");
        assert_contains!(e, "from \"0s\" to \"1s\"");
        let e = err("[environment]\nlatency = \"2ms\"\n", &[]);
        assert_contains!(e, "latency");
    }

    #[test]
    fn servers_section_sets_redis_appendfsync() {
        setting(
            |w| w.servers.redis_appendfsync,
            Appendfsync::Off,
            ("redis_appendfsync = \"always\"", Appendfsync::Always),
            ("servers.redis_appendfsync=everysec", Appendfsync::Everysec),
        );
    }

    #[test]
    fn servers_section_sets_mariadb_flush_log_at_trx_commit_to_1_or_2() {
        setting(
            |w| w.servers.mariadb_flush_log_at_trx_commit,
            1,
            ("mariadb_flush_log_at_trx_commit = 2", 2),
            ("servers.mariadb_flush_log_at_trx_commit=2", 2),
        );
        let bad = "[servers]\nmariadb_flush_log_at_trx_commit = 3\n";
        let e = Workload::parse("w.toml", bad, &[]).unwrap_err().to_string();
        assert_contains!(
            e,
            "w.toml",
            "servers.mariadb_flush_log_at_trx_commit",
            "1 (the redo log"
        );
    }

    #[test]
    fn servers_section_sets_postgres_synchronous_commit() {
        setting(
            |w| w.servers.postgres_synchronous_commit,
            SynchronousCommit::On,
            (
                "postgres_synchronous_commit = \"off\"",
                SynchronousCommit::Off,
            ),
            (
                "servers.postgres_synchronous_commit=remote_apply",
                SynchronousCommit::RemoteApply,
            ),
        );
        // The build, by name or number; only when a strategy runs PostgreSQL.
        let w = Workload::parse("w.toml", "[servers]\npostgres = 18\n", &[]).unwrap();
        assert_eq!(w.servers.postgres, PostgresBuild::Pg18);
        let pg = crate::cluster::Needs {
            postgres: true,
            ..crate::cluster::Needs::NONE
        };
        assert_eq!(w.servers.builds(pg).postgres, PostgresBuild::Pg18);
        let none = crate::cluster::Needs::NONE;
        assert_eq!(w.servers.builds(none).postgres, PostgresBuild::Pg15);
        let e = err("[servers]\npostgres = 16\n", &[]);
        assert_contains!(e, "servers.postgres = \"16\"", "\"18\"");
        let e = err("[servers]\npostgres_synchronous_commit = \"yes\"\n", &[]);
        assert_eq!(
            e,
            "w.toml: servers.postgres_synchronous_commit = \"yes\": expected one of \"on\" \
             (PostgreSQL's default), \"off\", \"local\", \"remote_write\", \"remote_apply\""
        );
        bad_set("servers.postgres_synchronous_commit=true");
    }

    #[test]
    fn servers_section_sets_postgres_pooler() {
        setting(
            |w| w.servers.postgres_pooler,
            Pooler::None,
            (
                "postgres_pooler = \"pgbouncer-transaction\"",
                Pooler::PgbouncerTransaction,
            ),
            (
                "servers.postgres_pooler=pgbouncer-session",
                Pooler::PgbouncerSession,
            ),
        );
        let e = err("[servers]\npostgres_pooler = \"pgbouncer\"\n", &[]);
        assert_eq!(
            e,
            "w.toml: servers.postgres_pooler = \"pgbouncer\": expected one of \"none\" (the \
             buyers connect to PostgreSQL directly), \"pgbouncer-transaction\", \
             \"pgbouncer-session\""
        );
        bad_set("servers.postgres_pooler=odyssey");
    }

    #[test]
    fn servers_section_chooses_builds_by_name_or_number() {
        let w = Workload::parse("w.toml", GOOD, &[]).unwrap();
        assert_eq!((w.servers.redis, w.servers.etcd), Default::default());
        let text = "[servers]\nredis = \"valkey-8.0\"\netcd = 3.5\n";
        let w = Workload::parse("w.toml", text, &[]).unwrap();
        assert_eq!(
            (w.servers.redis, w.servers.etcd),
            (RedisBuild::Valkey80, EtcdBuild::Etcd35)
        );
        let o = [
            "servers.redis=valkey-9.1",
            "servers.etcd=3.4",
            "servers.redis=7.0",
        ];
        let o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
        let w = Workload::parse("w.toml", GOOD, &o[..2]).unwrap();
        assert_eq!(
            (w.servers.redis, w.servers.etcd),
            (RedisBuild::Valkey91, EtcdBuild::Etcd34)
        );
        let w = Workload::parse("w.toml", GOOD, &o[2..]).unwrap();
        assert_eq!(w.servers.redis, RedisBuild::Redis70);
        // Workers get the effective workload as TOML: it reads back the same builds.
        let w = Workload::parse("w.toml", text, &[]).unwrap();
        let back = Workload::parse("effective", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(
            (back.servers.redis, back.servers.etcd),
            (w.servers.redis, w.servers.etcd)
        );
        let e = err("[servers]\netcd = 3.6\n", &[]);
        assert_eq!(
            e,
            "w.toml: servers.etcd = \"3.6\": expected one of \"3.4\" (Debian bookworm's etcd), \
             \"3.5\""
        );
        let e = err(GOOD, &["servers.redis=valkey-8"]);
        assert!(
            e.starts_with("--set servers.redis=valkey-8: servers.redis"),
            "{e}"
        );
        assert_contains!(e, "\"valkey-8.0\"");
    }

    #[test]
    fn bad_servers_values_name_file_field_and_form() {
        let e = err("[servers]\nredis_appendfsync = \"sometimes\"\n", &[]);
        assert_eq!(
            e,
            "w.toml: servers.redis_appendfsync = \"sometimes\": expected one of \"off\", \"no\", \
             \"everysec\", \"always\""
        );
        let e = err(GOOD, &["servers.redis_appendfsync=yes"]);
        assert!(
            e.starts_with("--set servers.redis_appendfsync=yes: servers.redis_appendfsync"),
            "{e}"
        );
        let e = err("[servers]\nredis_appendfsync = 1\n", &[]);
        assert!(
            e.starts_with("w.toml:") && e.contains("redis_appendfsync"),
            "{e}"
        );
        let e = err("[servers]\nredis_aof = \"always\"\n", &[]);
        assert_contains!(e, "w.toml", "redis_aof", "redis_appendfsync");
    }

    #[test]
    fn bad_overrides_name_the_flag() {
        assert_contains!(bad_set("load.clients"), "section.key=value");
        assert_contains!(bad_set("load.clientz=3"), "clientz");
        let e = err(GOOD, &["inventory.stock=0"]);
        assert!(
            e.starts_with("--set inventory.stock=0: inventory.stock = 0"),
            "{e}"
        );
        bad_set("a.b.c=1");
    }

    #[test]
    fn wait_keys_parse_and_the_old_retry_interval_points_to_them() {
        let w = Workload::parse("w.toml", GOOD, &[]).unwrap();
        assert_eq!((w.lock.wait, w.lock.poll_interval), (None, None));
        let o = [
            "lock.wait=\"poll\"".to_string(),
            "lock.poll_interval=\"200ms\"".into(),
            "lock.poll_jitter=\"100ms\"".into(),
        ];
        let w = Workload::parse("w.toml", GOOD, &o).unwrap();
        assert_eq!(w.lock.wait, Some(WaitMode::Poll));
        assert_eq!(w.lock.poll_interval, Some(Duration::from_millis(200)));
        assert_eq!(w.lock.poll_jitter, Some(Duration::from_millis(100)));
        let e = err("[lock]\nwait = \"spin\"\n", &[]);
        assert_contains!(e, "w.toml", "spin", "notify", "poll");
        let e = err("[lock]\npoll_interval = \"0s\"\n", &[]);
        assert_contains!(e, "lock.poll_interval = \"0s\"");
        let e = err("[lock]\nretry_interval = \"1ms\"\n", &[]);
        assert_contains!(e, "w.toml: lock.retry_interval", "lock.wait");
    }

    #[test]
    fn a_precheck_is_off_by_default_reads_flag_and_names_the_field_when_wrong() {
        let w = Workload::parse("w.toml", GOOD, &[]).unwrap();
        assert_eq!(w.critical_section.precheck, Precheck::Off);
        assert!(!toml::to_string(&w).unwrap().contains("precheck"));
        let flag = ["critical_section.precheck=\"flag\"".to_string()];
        let w = Workload::parse("w.toml", GOOD, &flag).unwrap();
        assert_eq!(w.critical_section.precheck, Precheck::Flag);
        let back = Workload::parse("<coordinator>", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(back.critical_section.precheck, Precheck::Flag);
        let e = err(GOOD, &["critical_section.precheck=\"cache\""]);
        assert_contains!(e, "critical_section.precheck", "\"flag\"");
    }

    #[test]
    fn buyers_and_a_hot_item_parse_and_cross_to_a_worker() {
        let text = "[inventory]\nskus = 4\nstock = 100\nhot_stock = 1000\npopularity = \"zipf:1.1\"\n\
                    [buyers]\ncount = 5000\nlimit = 2\nquantity = \"1..3\"\nresubmit = 0.1\n";
        let w = Workload::parse("w.toml", text, &[]).expect("valid");
        assert_eq!(w.inventory.stocks(), vec![1000, 100, 100, 100]);
        assert_eq!(w.total_stock(), 1300);
        assert_eq!(w.inventory.popularity, super::Popularity::Zipf(1.1));
        let b = w.buyers.clone().expect("[buyers] given");
        assert_eq!(
            (b.count, b.limit, b.quantity.to_string()),
            (5000, 2, "1..3".into())
        );
        assert_eq!((b.resubmit, b.retry_after_timeout), (0.1, 0.0));
        let back = Workload::parse("<coordinator>", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::to_value(&back).unwrap()
        );
        // Without [buyers]: anonymous arrivals, as every steady workload had.
        let plain = Workload::parse("w.toml", "", &[]).unwrap();
        assert!(plain.buyers.is_none());
        assert_eq!(plain.inventory.popularity, super::Popularity::Uniform);
    }

    #[test]
    fn bad_buyers_and_popularity_name_the_field_and_the_form() {
        let e = err("[buyers]\nquantity = \"3..1\"", &[]);
        assert_contains!(e, "w.toml: buyers.quantity = \"3..1\"", "1..3");
        let e = err("[buyers]\nresubmit = 1.5", &[]);
        assert_contains!(e, "buyers.resubmit = 1.5: expected a share from 0 to 1");
        let e = err("[buyers]\nlimit = 0", &[]);
        assert_contains!(e, "buyers.limit = 0");
        let e = err("[buyers]\nlimits = 2", &[]);
        assert_contains!(e, "unknown field `limits`");
        let e = err("", &["inventory.popularity=zipf"]);
        assert_contains!(e, "--set inventory.popularity=zipf", "zipf:1.1");
        let e = err("[inventory]\nhot_stock = 0", &[]);
        assert_contains!(e, "inventory.hot_stock = 0");
    }

    #[test]
    fn a_sale_shape_parses_crosses_to_a_worker_and_refuses_bad_keys() {
        let text = "[load]\nrate = 500\nshape = \"sale\"\nstart = \"2s\"\nrise = \"100ms\"\n\
                    peak = 50000\nhalf_life = \"1s\"\ntail = 1000\n";
        let w = Workload::parse("w.toml", text, &[]).expect("valid");
        assert_eq!(w.load.shape.surge_start(), Some(Duration::from_secs(2)));
        assert!((w.load.rate_at(Duration::from_millis(2100)) - 50_000.0).abs() < 1e-6);
        let back = Workload::parse("<coordinator>", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(back.load.shape, w.load.shape);
        let e = err(text, &["load.peak=0"]);
        assert_contains!(
            e,
            "--set load.peak=0: load.peak = 0: expected arrivals per second"
        );
        let e = err("[load]\nshape = \"sale\"\n", &[]);
        assert_contains!(e, "load.peak = missing");
        let e = err(text, &["load.half_life=0s"]);
        assert_contains!(e, "load.half_life = \"0s\": expected a positive");
        let e = err("[load]\npeak = 5\n", &[]);
        assert_contains!(e, "load.peak = given with load.shape = \"steady\"", "sale:");
        let e = err("[load]\nshape = \"surge\"\n", &[]);
        assert_contains!(e, "\"steady\", \"sale\", \"trace\"");
        let e = err("[load]\nshape = \"trace\"\ntrace = \"nowhere.csv\"\n", &[]);
        assert!(
            e.starts_with("w.toml: load.trace = \"nowhere.csv\" (") && e.contains("cannot read"),
            "{e}"
        );
    }
}

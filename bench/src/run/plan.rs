//! What to run, validated once: [`RunOptions`] as the command line gave them become a [`Plan`]
//! (the strategy looked up, the options checked against each other and the chaos plan, the
//! workers and the cluster options derived) before any server starts.

use std::path::PathBuf;
use std::time::Duration;

use super::RunError;
use crate::chaos::ChaosPlan;
use crate::cluster::durability::SynchronousCommit;
use crate::cluster::redis::Appendfsync;
use crate::cluster::target::ExternalTarget;
use crate::cluster::{Builds, ClusterOptions, Pooling, Provisioner, Service};
use crate::strategy::{self, StrategyInfo};
use crate::workload::Workload;

/// Worker processes used when the chaos plan pauses clients and `--workers` is not given.
pub const DEFAULT_WORKERS: u32 = 4;

/// Where a command's servers come from, as its flags gave them (`--base-port`, `--endpoints`,
/// `--provision`): the options every command that runs strategies carries, made a `Source`
/// by `Source::of`.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// First port for the servers; `None` picks free ports.
    pub base_port: Option<u16>,
    /// Use the servers of a running `lockbench serve` (its endpoints.json) instead of starting
    /// new ones.
    pub endpoints: Option<PathBuf>,
    /// How to start the servers (local processes or containers); ignored with `endpoints` (and
    /// by a run with a target).
    pub provision: Provisioner,
}

/// What to run, as given.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Strategy id.
    pub strategy: String,
    /// The validated workload.
    pub workload: Workload,
    /// Faults to inject while the load runs.
    pub chaos: Option<ChaosPlan>,
    /// Worker processes for the buyers (0: in this process, unless the chaos plan pauses
    /// clients, which needs [`DEFAULT_WORKERS`]).
    pub workers: u32,
    /// How the workers are reached.
    pub worker_link: crate::clients::WorkerLink,
    /// Servers and workers on hosts of their own (the network partition faults use), with or
    /// without faults.
    pub private_network: bool,
    /// Where the workload came from (recorded in the summary).
    pub workload_file: String,
    /// Results folder (created).
    pub out: PathBuf,
    /// Where the servers come from: ports, a `serve`'s endpoints, the provisioner (ignored
    /// with `target`).
    pub servers: ServerOptions,
    /// Use servers that already exist (`--target FILE`): claim the prefix, run, clean up.
    pub target: Option<ExternalTarget>,
    /// Also write `history.jsonl`, one line per attempt.
    pub history: bool,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
    /// Read the servers' work counters around the load (`run::work`: one idle window of
    /// [`IDLE_WINDOW`](super::work::IDLE_WINDOW) more per run); a sweep's trials do not.
    pub server_work: bool,
}

impl RunOptions {
    /// A run of `strategy` on local servers it starts, buyers in this process (or the
    /// default workers if `chaos` pauses clients), no history, no progress bar.
    pub fn new(
        strategy: &str,
        workload: Workload,
        chaos: Option<ChaosPlan>,
        workload_file: &str,
        out: PathBuf,
    ) -> Self {
        Self {
            strategy: strategy.into(),
            workload,
            chaos,
            workers: 0,
            worker_link: crate::clients::WorkerLink::Pipe,
            private_network: false,
            workload_file: workload_file.into(),
            out,
            servers: ServerOptions::default(),
            target: None,
            history: false,
            progress: false,
            server_work: true,
        }
    }

    /// A trial of a [`Session`](super::Session) (a sweep's step, a contend level): `strategy`
    /// on the session's servers, buyers in this process, no faults, and the servers' work not
    /// read (a trial is seconds long, and a 1 s idle window before each would add a third to
    /// it; a job's calm run measures the work). `provision`: how the session started its servers
    /// (the summary records it; the builds are checked against it).
    pub fn trial(
        strategy: &str,
        workload: Workload,
        workload_file: &str,
        out: PathBuf,
        provision: Provisioner,
    ) -> Self {
        Self {
            servers: ServerOptions {
                provision,
                ..ServerOptions::default()
            },
            server_work: false,
            ..Self::new(strategy, workload, None, workload_file, out)
        }
    }

    /// The checks of a run given servers it does not start, for servers started as `flag`
    /// starts them (with their defaults, by a session): a setting only a run's own servers
    /// take is refused, not silently dropped.
    pub fn check_defaults_suffice(&self, info: &StrategyInfo, flag: &str) -> Result<(), RunError> {
        redis_appendfsync(self, info, Some(flag))?;
        postgres_synchronous_commit(self, info, Some(flag))?;
        postgres_pooling(self, info, Some(flag)).map(|_| ())
    }

    /// Where this run's servers come from.
    pub fn provisioner(&self) -> Provisioner {
        if self.target.is_some() {
            Provisioner::Target
        } else {
            self.servers.provision
        }
    }

    /// Validates the options into a plan; every check a run makes before it starts anything.
    pub fn plan(&self) -> Result<Plan<'_>, RunError> {
        let info = strategy::resolve(&self.strategy, &self.workload)?;
        Plan::new(self, info)
    }

    /// [`plan`](Self::plan) for an entry the registry does not list (the in-memory strategy of
    /// [`crate::sim`]): the same checks, on `info`.
    pub fn plan_with(&self, info: &'static StrategyInfo) -> Result<Plan<'_>, RunError> {
        info.supports(&self.workload)?;
        Plan::new(self, info)
    }
}

/// A run that has passed every check, with what follows from its options.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The options as given.
    pub opts: &'a RunOptions,
    /// The strategy.
    pub info: &'static StrategyInfo,
    /// Worker processes (0: buyers run in this process).
    pub workers: u32,
    /// How to start servers, when this run starts them.
    pub cluster: ClusterOptions,
    /// How long a paused client may stretch an attempt beyond the strategy's bound.
    pub extra_bound: Duration,
}

impl<'a> Plan<'a> {
    fn new(opts: &'a RunOptions, info: &'static StrategyInfo) -> Result<Self, RunError> {
        let w = &opts.workload;
        let chaos = opts.chaos.as_ref();
        if let Some(plan) = chaos {
            check_chaos(plan, opts, info)?;
        }
        check_connections(opts, info)?;
        check_environment(opts, nix::unistd::geteuid().is_root())?;
        let needs_workers = chaos.is_some_and(ChaosPlan::needs_workers);
        let mut workers = match (opts.workers, needs_workers) {
            (0, true) => DEFAULT_WORKERS.min(w.load.clients),
            (n, _) => n.min(w.load.clients),
        };
        let remote = matches!(opts.worker_link, crate::clients::WorkerLink::Remote { .. });
        if remote && opts.workers == 0 {
            return Err(RunError::Options(
                "lockbench coordinate needs --workers N (N >= 1): how many agents connect".into(),
            ));
        }
        let steady_rtt = !w.environment.rtt.is_zero();
        let needs_network = chaos.is_some_and(ChaosPlan::needs_network) || steady_rtt;
        if remote && (opts.private_network || needs_network) {
            return Err(RunError::Options(
                "partition and network faults, and environment.rtt, put each worker into a \
                 network namespace of this run, which remote workers cannot join: drop them, or \
                 use `lockbench run --worker-link tcp` on one host"
                    .into(),
            ));
        }
        if opts.worker_link == crate::clients::WorkerLink::Tcp && workers == 0 {
            return Err(RunError::Options(
                "--worker-link tcp needs --workers N: the buyers run in this process otherwise"
                    .into(),
            ));
        }
        if needs_workers && workers < 2 {
            return Err(RunError::Options(format!(
                "the chaos plan pauses a client process: that needs at least 2 workers (and \
                 load.clients >= 2), got {workers}"
            )));
        }
        let mut cluster = cluster_options(opts, info)?;
        cluster.provisioner = opts.servers.provision;
        // Containers are partitioned on their own Docker network; only local processes need
        // namespaces for that.
        if opts.private_network
            && (opts.provisioner() != Provisioner::Local
                || opts.servers.endpoints.is_some()
                || workers == 0)
        {
            return Err(RunError::Options(
                "--private-network needs servers this run starts as local processes and \
                 --workers N (each worker is a host of its own)"
                    .into(),
            ));
        }
        cluster.network =
            opts.servers.provision == Provisioner::Local && (opts.private_network || needs_network);
        if cluster.network {
            workers = workers.min(crate::cluster::net::CLIENT_HOSTS as u32);
        }
        Ok(Self {
            opts,
            info,
            workers,
            cluster,
            // A paused client's attempt outlasts the usual bound by its pause.
            extra_bound: chaos.map(ChaosPlan::max_client_pause).unwrap_or_default(),
        })
    }

    /// The workload.
    pub fn workload(&self) -> &'a Workload {
        &self.opts.workload
    }
}

/// The cluster options a run's servers start with, from its workload and chaos plan (its
/// private network and the workers it needs aside).
fn cluster_options(opts: &RunOptions, info: &StrategyInfo) -> Result<ClusterOptions, RunError> {
    let (w, chaos) = (&opts.workload, opts.chaos.as_ref());
    let given = given_servers(opts);
    let aof = redis_appendfsync(opts, info, given)?;
    let mut cluster = ClusterOptions::new(opts.out.join("logs"));
    cluster.base_port = opts.servers.base_port;
    cluster.redis_appendfsync = aof;
    cluster.postgres_synchronous_commit = postgres_synchronous_commit(opts, info, given)?;
    cluster.postgres_pooling = postgres_pooling(opts, info, given)?;
    cluster.mariadb_flush_log_at_trx_commit = mariadb_flush_log(opts, info, given)?;
    cluster.builds = builds(opts, info)?;
    cluster.clock_shim = chaos.is_some_and(ChaosPlan::needs_clock_shim);
    // Only the services a power-loss or slow-disk fault hits keep their data on lazyfs.
    cluster.lazyfs = chaos.map_or_else(Vec::new, |c| c.lazyfs_services(info.lock_service()));
    // Its network is the plan's, decided with the workers (`Plan::new`).
    steady(&mut cluster, w, info.needs);
    Ok(cluster)
}

/// Refuses a chaos plan whose faults these servers cannot take: servers this run does not
/// own, a provisioner or a service the faults cannot reach.
fn check_chaos(plan: &ChaosPlan, opts: &RunOptions, info: &StrategyInfo) -> Result<(), RunError> {
    if opts.servers.endpoints.is_some() {
        return Err(RunError::Options(
            "--chaos with --endpoints: faults need servers this run starts and owns \
             (kill, pause, clock); drop --endpoints"
                .into(),
        ));
    }
    plan.check_provisioner(opts.provisioner())?;
    plan.check_privileges(nix::unistd::geteuid().is_root())?;
    if opts.target.is_none() {
        plan.check_services(info.lock_service(), info.needs)?;
    }
    Ok(())
}

/// Refuses a workload's `[environment]` where it cannot be made, before anything starts: a
/// steady delay needs the private network (root, servers this run starts as local
/// processes), a steady slow disk lazyfs (root, /dev/fuse, the same local servers).
fn check_environment(opts: &RunOptions, root: bool) -> Result<(), RunError> {
    let given = given_servers(opts);
    let w = &opts.workload;
    environment_possible(&opts.workload_file, w, given, opts.servers.provision, root)
}

/// [`check_environment`] for servers given by the flag `given` (`--target`, `--endpoints`) or
/// started by `provision`; `file` names the workload in the error.
pub(super) fn environment_possible(
    file: &str,
    w: &Workload,
    given: Option<&str>,
    provision: Provisioner,
    root: bool,
) -> Result<(), RunError> {
    let env = &w.environment;
    let fuse = std::path::Path::new("/dev/fuse").exists();
    for (key, d, what) in [
        (
            "rtt",
            env.rtt,
            "a delay of every packet in this run's private network",
        ),
        (
            "fsync",
            env.fsync,
            "every node's data on lazyfs, a FUSE filesystem",
        ),
    ] {
        if d.is_zero() {
            continue;
        }
        let why = if let Some(flag) = given {
            format!("{flag}: lockbench slows only servers it starts")
        } else if provision != Provisioner::Local {
            "--provision containers: it needs local processes (--provision local)".into()
        } else if !root {
            "this process is not root (network namespaces, iptables, FUSE need root)".into()
        } else if key == "fsync" && !fuse {
            "/dev/fuse missing (the kernel, or the container lockbench runs in, has no FUSE)".into()
        } else {
            continue;
        };
        return Err(RunError::Options(format!(
            "{file}: environment.{key} = \"{}\" needs {what}, which cannot be made with {why}; \
             expected environment.{key} = \"0s\" (the default) there",
            humantime::format_duration(d)
        )));
    }
    Ok(())
}

/// What a workload's `[environment]` asks of the servers `needs` starts: the steady delays,
/// every node's data on lazyfs for a slow disk, the private network for a delay.
pub(super) fn steady(co: &mut ClusterOptions, w: &Workload, needs: crate::cluster::Needs) {
    let env = w.environment;
    if !env.fsync.is_zero() {
        co.lazyfs = (Service::ALL.iter().copied())
            .filter(|s| needs.runs(*s))
            .collect();
    }
    co.network |= !env.rtt.is_zero();
    co.steady = crate::cluster::Steady {
        rtt: env.rtt,
        fsync: env.fsync,
    };
}

/// Refuses more buyers than a SQL server this run uses accepts connections: each buyer holds
/// one. Servers of a target keep their own limit, which lockbench does not know.
fn check_connections(opts: &RunOptions, info: &StrategyInfo) -> Result<(), RunError> {
    use crate::cluster::limits::{CONNECTION_LIMITS, RESERVED_CONNECTIONS};
    let clients = opts.workload.load.clients;
    if opts.target.is_some() {
        return Ok(());
    }
    for (service, limit) in CONNECTION_LIMITS {
        let most = limit - RESERVED_CONNECTIONS;
        if info.needs.runs(service) && clients > most {
            return Err(RunError::Options(format!(
                "load.clients = {clients}: each buyer holds a connection to {service}, which \
                 accepts {limit} (max_connections), {RESERVED_CONNECTIONS} of them kept for \
                 lockbench itself: expected at most {most} clients with `{}`",
                info.id
            )));
        }
    }
    Ok(())
}

/// The server builds this run starts, from `[servers]`, for the services the strategy uses.
/// The container images carry Debian bookworm's builds and sid's MySQL 9; the private prefix
/// of the local provisioner carries the others (MySQL 9 needs a newer libc than bookworm's);
/// a target's servers are whatever they are. Servers of `--endpoints` (a `serve`'s, or a
/// sweep's) must report the build asked for: checked when the run reads the endpoints file.
fn builds(opts: &RunOptions, info: &StrategyInfo) -> Result<Builds, RunError> {
    let b = opts.workload.servers.builds(info.needs);
    let containers = opts.servers.provision == Provisioner::Containers;
    let refused = if opts.target.is_some() && !b.are_default() {
        Some((
            b.chosen().join(", "),
            "--target, whose servers are what they are",
        ))
    } else if opts.target.is_none() {
        b.unsupported_by(containers).map(|keys| {
            let why = if containers {
                "--provision containers, whose images carry Debian bookworm's builds (and \
                 MySQL 9)"
            } else {
                "--provision local: MySQL 9 is built for Debian sid's glibc 2.38, bookworm has \
                 2.36; its image comes from scripts/container-images.sh"
            };
            (keys, why)
        })
    } else {
        None
    };
    match refused {
        Some((keys, why)) => Err(RunError::Options(format!(
            "{keys} with {why}: run it with --provision {}, or drop the key",
            if containers {
                "local (scripts/install-deps.sh --servers installs the build)"
            } else {
                "containers"
            }
        ))),
        None => Ok(b),
    }
}

/// What the PostgreSQL nodes this run starts wait for before acknowledging a commit, from
/// `servers.postgres_synchronous_commit`. As with Redis's persistence, servers this run does
/// not start keep their own, and asking for another one there is an error.
fn postgres_synchronous_commit(
    opts: &RunOptions,
    info: &StrategyInfo,
    given: Option<&str>,
) -> Result<SynchronousCommit, RunError> {
    let v = opts.workload.servers.postgres_synchronous_commit;
    let Some(flag) = given else {
        return Ok(v);
    };
    if info.needs.runs(Service::Postgres) && v != SynchronousCommit::default() {
        let setting = format!("postgres_synchronous_commit = \"{v}\"");
        return Err(kept_own(&setting, flag, "PostgreSQL"));
    }
    Ok(v)
}

/// `servers.mariadb_flush_log_at_trx_commit`, refused (unless 1, the default) for servers this
/// run does not start.
fn mariadb_flush_log(
    opts: &RunOptions,
    info: &StrategyInfo,
    given: Option<&str>,
) -> Result<u8, RunError> {
    let v = opts.workload.servers.mariadb_flush_log_at_trx_commit;
    match given {
        Some(flag) if info.needs.mariadb && v != 1 => Err(kept_own(
            &format!("mariadb_flush_log_at_trx_commit = {v}"),
            flag,
            "MariaDB",
        )),
        _ => Ok(v),
    }
}

/// The pooler a run puts between its buyers and PostgreSQL (`servers.postgres_pooler`),
/// refused before anything starts where it cannot be: servers this run does not start (or a
/// session's, started before), containers (PgBouncer runs as a local process), a strategy
/// that does not connect to PostgreSQL, a library's adapter (it connects on its own), or a
/// machine without PgBouncer.
fn postgres_pooling(
    opts: &RunOptions,
    info: &StrategyInfo,
    given: Option<&str>,
) -> Result<Pooling, RunError> {
    let w = &opts.workload;
    let pooler = w.servers.postgres_pooler;
    let pooling = Pooling {
        pooler,
        clients: w.load.clients,
        lock_wait: w.lock.acquire_timeout,
        timeout: w.load.timeout,
    };
    let why = if pooler.is_none() {
        return Ok(pooling);
    } else if let Some(flag) = given {
        format!("{flag}: only servers this run starts get a pooler in front")
    } else if opts.servers.provision != Provisioner::Local {
        "--provision containers: PgBouncer runs as a local process beside a local \
         PostgreSQL; use --provision local"
            .into()
    } else if !info.needs.runs(Service::Postgres) {
        format!("{}: it does not connect to PostgreSQL", info.id)
    } else if info.id.starts_with("lib:") {
        format!(
            "{}: the library's adapter connects to PostgreSQL on its own, not through the pooler",
            info.id
        )
    } else {
        crate::cluster::postgres::pooler_installed()?;
        return Ok(pooling);
    };
    Err(RunError::Options(format!(
        "servers.postgres_pooler = \"{pooler}\" with {why}; or drop the key"
    )))
}

/// The refusal of a durability `setting` (`key = value` of `[servers]`) for `service`'s servers
/// given by `flag`, which this run does not start and which keep their own.
fn kept_own(setting: &str, flag: &str, service: &str) -> RunError {
    RunError::Options(format!(
        "servers.{setting} with {flag}: only {service} servers this run starts can be \
         configured; these keep their own setting (summary.json reports it under \
         servers[].durability): drop the key, or let this run start its servers"
    ))
}

/// The flag by which a run is given servers it does not start, if it is.
fn given_servers(opts: &RunOptions) -> Option<&'static str> {
    if opts.target.is_some() {
        Some("--target")
    } else if opts.servers.endpoints.is_some() {
        Some("--endpoints")
    } else {
        None
    }
}

/// The persistence of the Redis nodes this run starts, from `servers.redis_appendfsync`.
/// Servers this run does not start (`--endpoints`, `--target`) keep their own setting, which
/// their summary reports: asking for another one there is an error, not a silent no-op.
fn redis_appendfsync(
    opts: &RunOptions,
    info: &StrategyInfo,
    given: Option<&str>,
) -> Result<Appendfsync, RunError> {
    let n = info.needs;
    let v = opts.workload.servers.redis_appendfsync;
    let uses_redis = n.redis || n.redlock || n.sentinel;
    if let Some(flag) = given.filter(|_| uses_redis && v != Appendfsync::Off) {
        let setting = format!("redis_appendfsync = \"{v}\"");
        return Err(kept_own(&setting, flag, "Redis"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(strategy: &str, clients: u32) -> Result<(), RunError> {
        let set = [format!("load.clients={clients}")];
        let w = Workload::parse("w.toml", "", &set).unwrap();
        RunOptions::new(strategy, w, None, "w.toml", PathBuf::from("out"))
            .plan()
            .map(|_| ())
    }

    #[test]
    fn a_steady_environment_is_refused_where_it_cannot_be_made() {
        let set = ["environment.rtt=20ms".to_string()];
        let w = Workload::parse("w.toml", "", &set).unwrap();
        let mut o = RunOptions::new("mysql-atomic", w, None, "w.toml", PathBuf::from("out"));
        // As root on local processes it is made; not as another user.
        check_environment(&o, true).unwrap();
        let e = check_environment(&o, false).unwrap_err().to_string();
        assert_contains!(e, "w.toml", "environment.rtt = \"20ms\"");
        assert_contains!(e, "not root", "expected");
        o.servers.provision = Provisioner::Containers;
        let e = check_environment(&o, true).unwrap_err().to_string();
        assert_contains!(e, "--provision containers");
        o.servers.provision = Provisioner::Local;
        o.servers.endpoints = Some(PathBuf::from("endpoints.json"));
        let e = check_environment(&o, true).unwrap_err().to_string();
        assert_contains!(e, "--endpoints");
        // fsync alike; without either, nothing is asked.
        let w = Workload::parse("w.toml", "[environment]\nfsync = \"2ms\"\n", &[]).unwrap();
        let mut o = RunOptions::new("zookeeper", w, None, "w.toml", PathBuf::from("out"));
        o.servers.provision = Provisioner::Containers;
        let e = check_environment(&o, true).unwrap_err().to_string();
        assert_contains!(e, "environment.fsync = \"2ms\"");
        let w = Workload::parse("w.toml", "", &[]).unwrap();
        let mut o = RunOptions::new("zookeeper", w, None, "w.toml", PathBuf::from("out"));
        o.servers.provision = Provisioner::Containers;
        check_environment(&o, false).unwrap();
    }

    #[test]
    fn clients_beyond_a_sql_servers_connections_are_refused_with_the_limit() {
        let e = plan("mysql-atomic", 5000).unwrap_err().to_string();
        assert_contains!(e, "load.clients = 5000", "accepts 2000", "1984");
        plan("mysql-atomic", 1984).unwrap();
        let e = plan("pg-atomic", 1200).unwrap_err().to_string();
        assert_contains!(e, "accepts 1000", "at most 984");
        // A strategy on neither SQL server has no such limit.
        let other = strategy::ALL
            .iter()
            .find(|s| !s.needs.runs(Service::Mariadb) && !s.needs.runs(Service::Postgres))
            .expect("a strategy without SQL");
        plan(other.id, 5000).unwrap();
    }
}

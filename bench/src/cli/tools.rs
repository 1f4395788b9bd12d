//! The subcommands that run no strategy: `list`, `serve`, `adapter-check`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::runs::strategy_ids;
use super::{AdapterCheckArgs, AdapterServers, EXIT_INTERRUPTED, EXIT_PARTIAL, ServeArgs};
use crate::cluster::{ClusterOptions, Needs, OwnedCluster};
use crate::strategy;

/// Prints the strategy list.
pub fn list(out: &mut impl Write) -> std::io::Result<()> {
    let width = strategy::ALL.iter().map(|s| s.id.len()).max().unwrap_or(0);
    let needs_width = strategy::ALL
        .iter()
        .map(|s| s.needs.names().join("+").len())
        .max()
        .unwrap_or(0);
    let wait = |s: &strategy::StrategyInfo| match &s.wait {
        Some(d) => format!("{} ({})", d.policy(), d.follows),
        None => "-".to_string(),
    };
    let wait_width = strategy::ALL.iter().map(|s| wait(s).chars().count()).max();
    let wait_width = wait_width.unwrap_or(0);
    let rules = |s: &strategy::StrategyInfo| s.enforcement().describe();
    let rules_width = strategy::ALL.iter().map(|s| rules(s).len()).max();
    let rules_width = rules_width.unwrap_or(0);
    writeln!(
        out,
        "{:<width$}  {:<9}  {:<needs_width$}  {:<25}  {:<wait_width$}  {:<rules_width$}  about",
        "id",
        "kind",
        "servers",
        "fencing token",
        "waits for a busy lock",
        "sale: limit, request id"
    )?;
    for s in strategy::ALL {
        let kind = match s.kind {
            strategy::Kind::Lock => "lock",
            strategy::Kind::LockFree => "lock-free",
            strategy::Kind::Control => "control",
        };
        writeln!(
            out,
            "{:<width$}  {:<9}  {:<needs_width$}  {:<25}  {:<wait_width$}  {:<rules_width$}  {}",
            s.id,
            kind,
            s.needs.names().join("+"),
            s.fence_token.unwrap_or("-"),
            wait(s),
            rules(s),
            s.about
        )?;
    }
    writeln!(
        out,
        "\nwaits for a busy lock: the default follows the library named; lock.wait \
         (\"notify\" | \"poll\"), lock.poll_interval and lock.poll_jitter change it. \
         \"-\": no client-side wait (a server-side queue, or no lock).\n\
         sale: how a [buyers] workload's per-buyer limit and request id are enforced (the \
         store's unique key and holdings row, one script, or reads inside the lock)."
    )?;
    list_libraries(out)
}

/// The real libraries, run through adapters (`lib:<name>`): not in a default comparison.
pub(super) fn list_libraries(out: &mut impl Write) -> std::io::Result<()> {
    use strategy::adapter::{self, LIBRARIES};
    let dir = adapter::adapters_dir();
    writeln!(
        out,
        "\nlibraries, through adapters (adapters/PROTOCOL.md), as --strategy lib:<name>; install \
         with scripts/install-deps.sh --adapters; check with lockbench adapter-check --lib <name>"
    )?;
    let all = strategy::LIBRARY_STRATEGIES;
    let width = all.iter().map(|s| s.id.len()).max().unwrap_or(0);
    let needs = |s: &strategy::StrategyInfo| s.needs.names().join("+");
    let needs_width = all.iter().map(|s| needs(s).chars().count()).max();
    let needs_width = needs_width.unwrap_or(0);
    let fence_width = all.iter().map(|s| s.fence_token.unwrap_or("-").len()).max();
    let fence_width = fence_width.unwrap_or(0);
    writeln!(
        out,
        "{:<width$}  {:<needs_width$}  {:<fence_width$}  {:<9}  package (pinned version): about",
        "id", "servers", "fencing token", "installed"
    )?;
    for s in all {
        let lib = adapter::library_of(s.id).expect("every library strategy has its library");
        writeln!(
            out,
            "{:<width$}  {:<needs_width$}  {:<fence_width$}  {:<9}  {} {}: {}",
            s.id,
            needs(s),
            s.fence_token.unwrap_or("-"),
            if lib.installed(&dir) { "yes" } else { "no" },
            lib.package,
            lib.version,
            s.about
        )?;
    }
    debug_assert_eq!(LIBRARIES.len() + 4, all.len(), "four -fenced variants");
    Ok(())
}

pub(super) async fn cmd_serve(
    args: ServeArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let mut needs = Needs::NONE;
    for id in strategy_ids(&args.strategies)? {
        needs = needs.union(strategy::find(&id)?.needs);
    }
    let mut opts = ClusterOptions::new(args.out.join("logs"));
    opts.base_port = args.start.base_port;
    opts.provisioner = args.start.provision;
    let cluster = tokio::select! {
        c = OwnedCluster::start(needs, &opts) => c?,
        _ = cancel.cancelled() => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
    };
    let path = args.out.join("endpoints.json");
    cluster.write_endpoints(&path)?;
    for n in cluster.info() {
        eprintln!(
            "{:<8} {} (version {}, pid {})",
            n.name, n.addr, n.version, n.pid
        );
    }
    println!("{}", path.display());
    tokio::select! {
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(args.lifetime) => eprintln!("lockbench: serve: --for elapsed, stopping"),
    }
    cluster.stop();
    let _ = std::fs::remove_file(&path);
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn cmd_adapter_check(
    args: AdapterCheckArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    use strategy::adapter::{self, check};
    let (name, argv, mut needs) = match &args.lib {
        Some(lib) => {
            let id = format!("lib:{}", lib.trim_start_matches("lib:"));
            let l = adapter::library_of(&id).with_context(|| {
                let known: Vec<_> = adapter::LIBRARIES.iter().map(|l| l.name).collect();
                format!("unknown library `{lib}`; known: {}", known.join(", "))
            })?;
            let needs = strategy::find(&id)?.needs;
            (id, l.argv(&adapter::adapters_dir()), needs)
        }
        None => {
            let mut needs = Needs::NONE;
            for s in &args.servers {
                match s {
                    AdapterServers::Redis => needs.redis = true,
                    AdapterServers::Redlock => needs.redlock = true,
                    AdapterServers::Zookeeper => needs.zookeeper = true,
                    AdapterServers::Etcd => needs.etcd = true,
                    AdapterServers::Postgres => needs.postgres = true,
                }
            }
            ("under check".to_string(), args.command.clone(), needs)
        }
    };
    needs.mariadb = false;
    let scratch = tempfile::tempdir().context("a scratch folder for the servers' logs")?;
    let (endpoints, _cluster) = match &args.endpoints {
        Some(path) => (crate::cluster::EndpointsFile::read(path)?.endpoints, None),
        None => {
            let opts = ClusterOptions::new(scratch.path().join("logs"));
            let cluster = tokio::select! {
                c = OwnedCluster::start(needs, &opts) => c?,
                _ = cancel.cancelled() => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
            };
            (cluster.endpoints().clone(), Some(cluster))
        }
    };
    let opts = check::CheckOptions {
        endpoints: adapter::wire::InitEndpoints::of(&endpoints, needs),
        ttl: std::time::Duration::from_secs(2),
        acquire_timeout: std::time::Duration::from_secs(1),
        call_timeout: std::time::Duration::from_millis(500),
        clients: args.clients,
        cycles: args.cycles,
        init_timeout: args.init_timeout,
    };
    let report = tokio::select! {
        r = check::check(&name, &argv, &opts) => r,
        _ = cancel.cancelled() => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
    };
    println!("{report}");
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PARTIAL)
    })
}

/// `reproduce`: the scenarios' list, or their runs (exit 1 if one could not run).
pub(super) async fn cmd_reproduce(
    args: super::ReproduceArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    use crate::reproduce;
    let chosen = reproduce::chosen(&args.names).map_err(anyhow::Error::msg)?;
    let mut out = std::io::stdout().lock();
    if args.list {
        for s in chosen {
            writeln!(
                out,
                "{:<18} {}\n{:<18} {}",
                s.name,
                s.source,
                "",
                s.runs_on()
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let opts = reproduce::Options {
        names: args.names,
        rounds: args.rounds,
        out: args
            .out
            .unwrap_or_else(|| super::runs::default_out("reproduce")),
    };
    let found = reproduce::run(&opts, &mut out, &cancel).await?;
    writeln!(
        out,
        "results: {}",
        opts.out.join("reproduce.json").display()
    )?;
    Ok(if found.iter().any(|f| f.verdict == "error") {
        ExitCode::from(EXIT_PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}

//! The command line: argument definitions and the subcommands, as library code so tests can
//! call it. `main.rs` only parses and maps the result to an exit code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::chaos::ChaosPlan;
use crate::cluster::target::ExternalTarget;
use crate::cluster::{ClusterOptions, Needs, OwnedCluster, Provisioner};
use crate::report::sweep::DEFAULTS;
use crate::report::{self, Summary};
use crate::run::{RunError, RunOptions, run};
use crate::strategy;
use crate::workload::Workload;

/// Exit code when the run was interrupted (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;
/// Exit code when some strategy of a comparison failed to run, or the gate failed.
pub const EXIT_PARTIAL: u8 = 1;

/// lockbench: compare distributed-lock strategies for a flash sale on real servers —
/// throughput, tail latency and oversell, side by side.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug); RUST_LOG overrides. Without it the
    /// terminal shows lockbench's own warnings and errors only; every crate's log (client
    /// libraries included, debug with -vv) goes to each run's <out>/logs/lockbench.log.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the strategies, with what each needs and does.
    List,
    /// Run one strategy: start its servers, load them, audit the stock, write results.
    Run(RunArgs),
    /// Run several strategies one after another on the same workload and print one table.
    Compare(CompareArgs),
    /// Find each strategy's capacity: an interval of offered rates, from the highest decided
    /// to sustain a latency target (SLO) to the lowest decided to miss it, by short open-loop
    /// trials on one set of servers.
    ///
    /// For each strategy: a closed-loop warm-up, then steps from --start (up by --factor until
    /// one fails, down by its square root until one passes, then geometric midpoints) until the
    /// interval is within --goal-width or --budget is spent. A step runs trials until the share
    /// of arrivals slower than the target or never served is decided, at --confidence, below
    /// 1 − the percentile (pass) or above it (fail), or --step-budget runs out (undecided). Each
    /// trial's stock covers every arrival, so none sells out. Writes <out>/sweep.json (the
    /// interval per strategy; every step's counts, bounds, trials and machine pressure), a
    /// folder per trial, and report.html; prints the capacity table.
    Sweep(SweepArgs),
    /// Whether sweeps of one build agree: each strategy's capacity interval in every sweep,
    /// whether they overlap, and the ratio of their midpoints; exits 1 when some do not
    /// overlap (scripts/reproducibility.sh runs the sweeps).
    Agreement(AgreementArgs),
    /// Render <DIR>/report.html (tables, charts, reproduction) from saved results, no servers.
    ///
    /// Reads summary.json, compare.json or sweep.json (or a job folder of scripts/compare.sh),
    /// timeline.csv and latency.hlog; writes report.html
    /// (self-contained: inline CSS and SVG, no scripts), charts/*.svg, charts/*.png and
    /// effective-workload.toml. `run` and `compare` already write it at their end; use this to
    /// re-render a folder. Prints the path of report.html.
    Report(ReportArgs),
    /// Start the servers some strategies need and keep them up (until Ctrl-C or --for runs
    /// out), writing <out>/endpoints.json for `run --endpoints` and for other tools.
    Serve(ServeArgs),
    /// Compare results with a baseline: exit 1 when a safe strategy became unsafe, a control is
    /// no longer caught, or median throughput / p99 moved beyond the tolerance.
    Gate(GateArgs),
    /// Check that an adapter speaks adapters/PROTOCOL.md, on real servers it starts: init,
    /// acquire/release, mutual exclusion under contention (and growing fences), busy after the
    /// acquire timeout, a repeated release, an unknown request, shutdown, exit on stdin's end.
    /// Exits 1 naming the rule broken and the offending line.
    ///
    /// `lockbench adapter-check --lib redis-py` checks a shipped adapter;
    /// `lockbench adapter-check --servers redis -- python3 my_adapter.py` checks your own.
    AdapterCheck(AdapterCheckArgs),
    /// Run the buyers of one strategy with workers on other hosts: `run`, but instead of
    /// starting its workers it listens on --listen and waits for --workers agents
    /// (`lockbench worker --connect`) that know the token in LOCKBENCH_TOKEN.
    ///
    /// Without --target the servers listen on this host's loopback, so the workers must run
    /// here too; with --target every worker reaches the target's servers itself (their
    /// passwords come from each worker's LOCKBENCH_<SERVICE>_PASSWORD variables).
    Coordinate(CoordinateArgs),
    /// A client worker. With --connect: the agent of a worker on another host (see
    /// `coordinate`), which runs this worker's part of the coordinator's load and exits when it
    /// is done. Without: the load process of a local run, driven over stdin (internal).
    Worker(WorkerArgs),
    /// Kubernetes: manifests for a run whose workers are pods of a cluster.
    #[command(subcommand)]
    K8s(crate::clients::k8s::K8sCommand),
}

/// `lockbench coordinate`
#[derive(Debug, Args)]
pub struct CoordinateArgs {
    /// Address to listen on for workers, e.g. 0.0.0.0:7400.
    #[arg(long, value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// How long to wait for every worker to connect and be ready.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = humantime::parse_duration)]
    pub wait: std::time::Duration,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `lockbench worker`
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The coordinator, HOST:PORT (`lockbench coordinate --listen`). The shared token comes
    /// from LOCKBENCH_TOKEN; server passwords from LOCKBENCH_<SERVICE>_PASSWORD (MYSQL, REDIS,
    /// SENTINEL, ETCD, ZOOKEEPER).
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// This worker's index, 0..N; each index runs once. Default: JOB_COMPLETION_INDEX, which a
    /// Kubernetes Indexed Job sets.
    #[arg(long, env = "JOB_COMPLETION_INDEX", requires = "connect")]
    pub index: Option<u32>,
}

/// `lockbench serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Comma-separated strategy ids whose servers to start. Default: every strategy's.
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Folder for endpoints.json and the server logs.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// First port for the servers. Default: free ports chosen by the OS.
    #[arg(long, value_name = "PORT")]
    pub base_port: Option<u16>,
    /// Where the servers come from: `local` processes or `containers` (see `run --help`).
    #[arg(long, value_enum, default_value_t = Provisioner::Local, conflicts_with = "base_port")]
    pub provision: Provisioner,
    /// Stop the servers after this long at the latest.
    #[arg(long = "for", value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub lifetime: std::time::Duration,
}

/// `lockbench adapter-check`
#[derive(Debug, Args)]
pub struct AdapterCheckArgs {
    /// A library of `lockbench list` (e.g. `redis-py`): its adapter, on the servers it needs.
    #[arg(long, conflicts_with = "command", required_unless_present = "command")]
    pub lib: Option<String>,
    /// Servers to start for COMMAND (comma-separated): redis, redlock (five independent
    /// masters), zookeeper, etcd.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "redis",
        conflicts_with = "lib"
    )]
    pub servers: Vec<AdapterServers>,
    /// Use the servers of a running `lockbench serve` (its endpoints.json) instead.
    #[arg(long, value_name = "FILE")]
    pub endpoints: Option<PathBuf>,
    /// How long the adapter may take to answer init.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub init_timeout: std::time::Duration,
    /// Buyers contending for one key in the mutual-exclusion rule.
    #[arg(long, default_value_t = 8)]
    pub clients: u32,
    /// Acquire/release cycles per buyer in the mutual-exclusion rule.
    #[arg(long, default_value_t = 25)]
    pub cycles: u32,
    /// The adapter's command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Servers an adapter under check may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdapterServers {
    /// One Redis.
    Redis,
    /// Five independent Redis masters.
    Redlock,
    /// A ZooKeeper ensemble.
    Zookeeper,
    /// An etcd cluster.
    Etcd,
}

/// `lockbench gate`
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Baseline results: a folder with baseline.json (see --update-baseline), or results
    /// folders (compare.json / summary.json); every one found below it is one repetition.
    #[arg(long, value_name = "DIR")]
    pub baseline: PathBuf,
    /// Current results, read the same way.
    #[arg(long, value_name = "DIR")]
    pub current: PathBuf,
    /// Largest accepted drop of a strategy's median sales/s, e.g. `15%`: a smaller drop passes
    /// even when significant.
    #[arg(long, value_name = "PCT", default_value = "15%", value_parser = percent)]
    pub max_throughput_drop: f64,
    /// Largest accepted rise of a strategy's median p99 latency, e.g. `25%`.
    #[arg(long, value_name = "PCT", default_value = "25%", value_parser = percent)]
    pub max_p99_rise: f64,
    /// Chance of a false alarm for the whole gate, e.g. `5%`: each strategy's change must be
    /// significant (one-sided exact Mann–Whitney across repetitions, Holm over every test).
    #[arg(long, value_name = "LEVEL", default_value = "5%", value_parser = alpha)]
    pub alpha: f64,
    /// Do not judge: write the current results as the new baseline (<baseline>/baseline.json).
    #[arg(long)]
    pub update_baseline: bool,
    /// Print the verdict as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `15%` (or `15`) → 0.15.
fn percent(s: &str) -> Result<f64, String> {
    let n: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| format!("`{s}`: expected a percentage such as 15%"))?;
    if !(0.0..=1000.0).contains(&n) {
        return Err(format!("`{s}`: expected a percentage between 0% and 1000%"));
    }
    Ok(n / 100.0)
}

/// `lockbench agreement`
#[derive(Debug, Args)]
pub struct AgreementArgs {
    /// Two or more sweeps: their folders or sweep.json files.
    #[arg(required = true, num_args = 2..)]
    pub sweeps: Vec<PathBuf>,
}

/// A significance level, `5%` or `0.05` (a bare number is a fraction here, so `0.05` cannot be
/// read as 0.05 %); above 0 and at most 50 %.
fn alpha(s: &str) -> Result<f64, String> {
    let a = if s.trim().ends_with('%') {
        percent(s)?
    } else {
        s.trim()
            .parse::<f64>()
            .map_err(|_| format!("`{s}`: expected a level such as 5% or 0.05"))?
    };
    if a <= 0.0 || a > 0.5 {
        return Err(format!(
            "`{s}`: expected a level above 0% and at most 50%, e.g. 5%"
        ));
    }
    Ok(a)
}

/// `lockbench report`
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results folder: the --out of `run` (holds summary.json), of `compare` (compare.json and
    /// one subfolder per strategy), of `sweep` (sweep.json), or of scripts/compare.sh (a job:
    /// sweep/, calm/, chaos/<scenario>/).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// What a strategy must do to qualify, comma-separated; the page of a sweep or a job lists
    /// which strategies meet every term, and why, from measured fields only. Terms:
    /// `capacity>=N` (arrivals/s at the sweep's SLO), `safe` (in every measured part),
    /// `safe-under-SCENARIO` (every chaos scenario named SCENARIO or SCENARIO-…),
    /// `recovery<=DURATION` (every fault served again within it), `p99<=DURATION` (calm run),
    /// `fenced-ok` (a fenced verdict counts as safe). E.g. `safe-under-pause,capacity>=500`.
    #[arg(long, value_name = "LIST")]
    pub needs: Option<report::Needs>,
}

/// The workload flags, shared by `run`, `compare` and `sweep`.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// Workload file (TOML; see workloads/flash-sale.toml for every key). A sweep sets its
    /// rate, duration and stock itself.
    #[arg(long, short = 'w', default_value = "workloads/flash-sale.toml")]
    pub workload: PathBuf,
    /// Override a workload value, e.g. `--set load.clients=64` (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
}

impl WorkloadArgs {
    fn load(&self) -> anyhow::Result<Workload> {
        Ok(Workload::load(&self.workload, &self.set)?)
    }
}

/// Where the servers come from, shared by `run`, `compare` and `sweep`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// First port for the servers (each node takes the next; every port is checked before
    /// start). Default: free ports chosen by the OS.
    #[arg(long, value_name = "PORT")]
    pub base_port: Option<u16>,
    /// Use the servers of a running `lockbench serve` (its endpoints.json) instead of starting
    /// new ones. The stock tables / keys on them are recreated.
    #[arg(long, value_name = "FILE", conflicts_with = "base_port")]
    pub endpoints: Option<PathBuf>,
    /// Where the servers come from: `local` child processes from the Debian packages, or
    /// `containers` on a private Docker network (testcontainers; DOCKER_HOST names the
    /// daemon). Images: LOCKBENCH_IMAGE_REDIS (default redis:7.0), LOCKBENCH_IMAGE_MARIADB
    /// (mariadb:10.11), LOCKBENCH_IMAGE_ZOOKEEPER (zookeeper:3.8), LOCKBENCH_IMAGE_ETCD
    /// (quay.io/coreos/etcd:v3.4.23); they must be on the Docker host (never pulled). Chaos on
    /// containers: kill + restart, pause / unpause, partitions with clients = "all"
    /// (disconnect from the network); no clock faults.
    #[arg(
        long,
        value_enum,
        default_value_t = Provisioner::Local,
        conflicts_with_all = ["endpoints", "base_port"]
    )]
    pub provision: Provisioner,
}

/// Options shared by `run` and `compare`.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    pub load: WorkloadArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
    /// Also write history.jsonl: one line per attempt with its times, outcome and lease.
    #[arg(long)]
    pub history: bool,
    /// Print the summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Measure servers that already exist, named in a target file (TOML; see
    /// targets/example.toml): lockbench starts nothing, works under the file's `prefix`
    /// (refusing when it holds data lockbench did not create), removes what it created at the
    /// end, and injects faults only through the chaos file's `command` faults.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["base_port", "endpoints", "provision"]
    )]
    pub target: Option<PathBuf>,
    /// Chaos file (TOML; see chaos/*.toml): faults injected while the load runs — kill, pause,
    /// clock and partition faults on servers (partitions need root), pauses of client
    /// processes. Healed before the run ends, on every path.
    #[arg(long, value_name = "FILE")]
    pub chaos: Option<PathBuf>,
    /// Run the buyers in N worker processes instead of inside lockbench. Default: 0, or 4 when
    /// the chaos file pauses clients (a pause stops one whole worker process) or partitions
    /// the network (each worker is a client host of its own).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub workers: u32,
    /// How the workers are reached: `pipe` (their stdin and stdout) or `tcp` (the agents of
    /// `lockbench worker --connect`, started here, over TCP with a fresh token: what
    /// `lockbench coordinate` does with workers on other hosts, on this one).
    #[arg(long, value_enum, default_value_t = crate::clients::WorkerLink::Pipe)]
    pub worker_link: crate::clients::WorkerLink,
    /// Put the servers and each worker on hosts of their own (network namespaces on a bridge
    /// of this run), as partition faults do, without any fault. Needs root and --workers.
    #[arg(long)]
    pub private_network: bool,
}

/// `lockbench run`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Strategy id (see `lockbench list`).
    #[arg(long, short = 's')]
    pub strategy: String,
    /// Results folder. Default: results/runs/<time>-<strategy>.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub common: Common,
}

/// `lockbench sweep`
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Comma-separated strategy ids. Default: every strategy (as `compare`).
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Results folder. Default: results/runs/<time>-sweep.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// The latency target: a percentile of every scheduled arrival (p50, p90, p99 or p99.9)
    /// and its bound. The default, 100 ms at p99, is the budget of one backend step a buyer
    /// waits on after "buy" (the 0.1 s a response may take and still feel immediate), and it
    /// is 50x the default 2 ms critical section: a lock that queues buyers for longer is the
    /// bottleneck of the page.
    #[arg(long, default_value = "p99=100ms", value_parser = crate::report::sweep::Slo::parse)]
    pub slo: (f64, f64),
    /// Least share of the scheduled arrivals that must be served (sold, or told "sold out"):
    /// arrivals never started, lock timeouts and errors count against it.
    #[arg(long, value_name = "PCT", default_value = "99%", value_parser = percent)]
    pub min_served: f64,
    /// First offered rate (arrivals/s). Default: half the throughput of the strategy's
    /// closed-loop warm-up.
    #[arg(long, value_name = "RATE")]
    pub start: Option<f64>,
    /// Lowest rate the search may offer.
    #[arg(long, value_name = "RATE", default_value_t = DEFAULTS.min_per_s)]
    pub min: f64,
    /// Highest rate offered; a strategy that sustains it reads "≥ RATE". The default is above
    /// what one load generator drives on 2 cores (Redis Cluster's Lua deduction failed 102,000/s
    /// beside it), so only a lock-free deduction on a large machine reaches it.
    #[arg(long, value_name = "RATE", default_value_t = DEFAULTS.max_per_s)]
    pub max: f64,
    /// Until a rate fails the next is the highest passed times this; until one passes, the
    /// lowest failed divided by its square root.
    #[arg(long, default_value_t = DEFAULTS.factor)]
    pub factor: f64,
    /// Confidence of each step's decision: the share of arrivals slower than the target or
    /// never served must be decided below (pass) or above (fail) 1 − the percentile.
    #[arg(long, value_name = "PCT", default_value = "95%", value_parser = percent)]
    pub confidence: f64,
    /// The search ends when the capacity interval's upper end over its lower end is at most
    /// this.
    #[arg(long, value_name = "RATIO", default_value_t = DEFAULTS.goal_width)]
    pub goal_width: f64,
    /// Time one strategy may spend on steps; no step runs past it by more than a trial.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub budget: std::time::Duration,
    /// Time one step may spend on trials before it reads undecided.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub step_budget: std::time::Duration,
    /// Shortest load of one trial; a trial aims for the arrivals a pass needs (299 for a p99
    /// at 95 %), up to --max-trial.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub trial: std::time::Duration,
    /// Longest load of one trial.
    #[arg(long, value_name = "DURATION", default_value = "6s", value_parser = humantime::parse_duration)]
    pub max_trial: std::time::Duration,
    #[command(flatten)]
    pub load: WorkloadArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
}

/// `lockbench compare`
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Comma-separated strategy ids. Default: every strategy.
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Results folder; each strategy writes into a subfolder. Default: results/runs/<time>-compare.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Offer each strategy a rate from a sweep (its sweep.json or folder) instead of
    /// load.rate: --rate-share of its own capacity, or with --common-rate one rate for all.
    #[arg(long, value_name = "FILE")]
    pub rate_from: Option<PathBuf>,
    /// With --rate-from: the share of the capacity offered, e.g. `70%`.
    #[arg(long, value_name = "PCT", default_value = "100%", value_parser = percent, requires = "rate_from")]
    pub rate_share: f64,
    /// With --rate-from: offer every strategy the same rate, --rate-share of the lowest
    /// capacity among the strategies the sweep saw safe (no control; a capacity below the
    /// lowest rate offered does not count).
    #[arg(long, requires = "rate_from")]
    pub common_rate: bool,
    #[command(flatten)]
    pub common: Common,
}

/// Sets up logging ([`crate::logging`]): lockbench's own warnings on the terminal, every
/// crate's events in the run's `logs/lockbench.log`; a worker logs everything to its stderr.
pub fn init_tracing(cli: &Cli) {
    let output = match cli.command {
        Command::Worker(_) => crate::logging::Output::WorkerStderr,
        _ => crate::logging::Output::Terminal,
    };
    crate::logging::init(cli.verbose, output);
}

/// Runs a parsed command line.
pub fn main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::List => {
            list(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => with_runtime(|cancel| cmd_run(args, cancel)),
        Command::Compare(args) => with_runtime(|cancel| cmd_compare(args, cancel)),
        Command::Sweep(args) => with_runtime(|cancel| cmd_sweep(args, cancel)),
        Command::Serve(args) => with_runtime(|cancel| cmd_serve(args, cancel)),
        Command::Gate(args) => cmd_gate(args),
        Command::Agreement(args) => {
            let sweeps = args
                .sweeps
                .iter()
                .map(|p| report::sweep::Sweep::read(p))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let agree = report::agreement::print_agreement(&mut std::io::stdout(), &sweeps)?;
            Ok(if agree {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::AdapterCheck(args) => with_runtime(|cancel| cmd_adapter_check(args, cancel)),
        Command::K8s(crate::clients::k8s::K8sCommand::Render(args)) => cmd_k8s_render(args),
        Command::Report(args) => {
            let path = report::write_report_with(&args.dir, args.needs.as_ref())?;
            println!("{}", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Coordinate(args) => with_runtime(|cancel| cmd_coordinate(args, cancel)),
        Command::Worker(WorkerArgs {
            connect: Some(addr),
            index,
        }) => {
            let index = index.context(
                "--index (or JOB_COMPLETION_INDEX) is needed with --connect: which worker this is",
            )?;
            let rt = tokio::runtime::Runtime::new().context("start the tokio runtime")?;
            rt.block_on(crate::clients::agent::agent_main(&addr, index))
                .with_context(|| format!("worker {index}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(_) => {
            // Started as /proc/self/exe (see `WorkerSet::start`), which ps and pgrep would
            // show as `exe`; threads started from here inherit the name.
            let _ = nix::sys::prctl::set_name(c"lockbench");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("start the tokio runtime")?;
            let done = rt.block_on(crate::clients::worker::worker_main());
            // Reading stdin occupies a blocking thread that a normal shutdown would wait for.
            rt.shutdown_background();
            done?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

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
    writeln!(
        out,
        "{:<width$}  {:<9}  {:<needs_width$}  {:<25}  {:<wait_width$}  about",
        "id", "kind", "servers", "fencing token", "waits for a busy lock"
    )?;
    for s in strategy::ALL {
        let kind = match s.kind {
            strategy::Kind::Lock => "lock",
            strategy::Kind::LockFree => "lock-free",
            strategy::Kind::Control => "control",
        };
        writeln!(
            out,
            "{:<width$}  {:<9}  {:<needs_width$}  {:<25}  {:<wait_width$}  {}",
            s.id,
            kind,
            s.needs.names().join("+"),
            s.fence_token.unwrap_or("-"),
            wait(s),
            s.about
        )?;
    }
    writeln!(
        out,
        "\nwaits for a busy lock: the default follows the library named; lock.wait \
         (\"notify\" | \"poll\"), lock.poll_interval and lock.poll_jitter change it. \
         \"-\": no client-side wait (a server-side queue, or no lock)."
    )?;
    list_libraries(out)
}

/// The real libraries, run through adapters (`lib:<name>`): not in a default comparison.
fn list_libraries(out: &mut impl Write) -> std::io::Result<()> {
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
    debug_assert_eq!(LIBRARIES.len() + 3, all.len(), "three -fenced variants");
    Ok(())
}

/// Builds the runtime and a cancellation token fired by the first Ctrl-C or SIGTERM. A second
/// signal exits at once; servers still die then, through their parent-death signal.
fn with_runtime<F, Fut>(f: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<ExitCode>>,
{
    // One thread, like redis-benchmark: on a small machine the servers need the other cores,
    // and cross-thread wake-ups cost more than they give (scripts/bench-overhead.sh measured
    // 0.8x of redis-benchmark multi-threaded, 1.09x single-threaded).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the tokio runtime")?;
    rt.block_on(async {
        let cancel = CancellationToken::new();
        let on_signal = cancel.clone();
        tokio::spawn(async move {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term_recv = async {
                match term.as_mut() {
                    Some(t) => t.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term_recv => {}
            }
            eprintln!("lockbench: interrupted: stopping the load, auditing what ran and stopping servers (Ctrl-C again aborts)");
            on_signal.cancel();
            let _ = tokio::signal::ctrl_c().await;
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        });
        f(cancel).await
    })
}

fn load_chaos(c: &Common, w: &Workload) -> anyhow::Result<Option<ChaosPlan>> {
    let Some(path) = &c.chaos else {
        return Ok(None);
    };
    Ok(Some(ChaosPlan::load(path, w)?))
}

fn load_target(c: &Common) -> anyhow::Result<Option<ExternalTarget>> {
    Ok(c.target.as_deref().map(ExternalTarget::load).transpose()?)
}

fn default_out(suffix: &str) -> PathBuf {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    PathBuf::from("results/runs").join(format!("{}-{suffix}", now.replace(':', "")))
}

fn print(summaries: &[Summary], json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, summaries)?;
        writeln!(out)?;
    } else {
        report::print_table(&mut out, summaries)?;
        report::print_faults(&mut out, summaries)?;
    }
    Ok(())
}

async fn cmd_run(args: RunArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    run_with(args, None, cancel).await
}

async fn cmd_coordinate(
    args: CoordinateArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let link = crate::clients::WorkerLink::Remote {
        listen: args.listen,
        wait: args.wait,
    };
    run_with(args.run, Some(link), cancel).await
}

/// `run`, with its workers reached as `link` says (default: `--worker-link`).
async fn run_with(
    args: RunArgs,
    link: Option<crate::clients::WorkerLink>,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    // Validate everything before any server starts.
    let workload = args.common.load.load()?;
    let chaos = load_chaos(&args.common, &workload)?;
    let target = load_target(&args.common)?;
    let out = args.out.unwrap_or_else(|| default_out(&args.strategy));
    let mut opts = run_options(&args.strategy, workload, chaos, target, &args.common, out);
    if let Some(link) = link {
        opts.worker_link = link;
    }
    let plan = opts.plan()?;
    let summary = match run(&plan, &cancel).await {
        Ok(s) => s,
        Err(RunError::Interrupted) => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
        Err(e) => return Err(e).with_context(|| format!("run of `{}` failed", args.strategy)),
    };
    print(std::slice::from_ref(&summary), args.common.json)?;
    eprintln!("results: {}", opts.out.display());
    write_report(&opts.out);
    if summary.interrupted {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if !summary.worker_failures.is_empty() {
        // The totals hold what the workers reported, but not their whole share of the load.
        anyhow::bail!(
            "{} worker failure(s), results written but incomplete: {}",
            summary.worker_failures.len(),
            summary.worker_failures.join("; ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_options(
    strategy: &str,
    workload: Workload,
    chaos: Option<ChaosPlan>,
    target: Option<ExternalTarget>,
    c: &Common,
    out: PathBuf,
) -> RunOptions {
    RunOptions {
        strategy: strategy.to_string(),
        workload,
        chaos,
        workers: c.workers,
        worker_link: c.worker_link,
        private_network: c.private_network,
        workload_file: c.load.workload.display().to_string(),
        out,
        base_port: c.servers.base_port,
        endpoints: c.servers.endpoints.clone(),
        provision: c.servers.provision,
        target,
        history: c.history,
        progress: !c.json,
    }
}

fn strategy_ids(given: &[String]) -> anyhow::Result<Vec<String>> {
    let ids: Vec<String> = if given.is_empty() {
        strategy::ALL.iter().map(|s| s.id.to_string()).collect()
    } else {
        given
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    if ids.is_empty() {
        bail!(
            "--strategies: no strategy given; expected ids separated by commas, e.g. none,redis-setnx"
        );
    }
    for id in &ids {
        strategy::find(id).context("--strategies")?;
    }
    Ok(ids)
}

async fn cmd_serve(args: ServeArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let mut needs = Needs::NONE;
    for id in strategy_ids(&args.strategies)? {
        needs = needs.union(strategy::find(&id)?.needs);
    }
    let mut opts = ClusterOptions::new(args.out.join("logs"));
    opts.base_port = args.base_port;
    opts.provisioner = args.provision;
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

async fn cmd_adapter_check(
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

async fn cmd_compare(args: CompareArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    let ids = strategy_ids(&args.strategies)?;
    let workload = args.common.load.load()?;
    let chaos = load_chaos(&args.common, &workload)?;
    let target = load_target(&args.common)?;
    let out = args.out.unwrap_or_else(|| default_out("compare"));
    let mut runs: Vec<RunOptions> = ids
        .iter()
        .map(|id| {
            let (w, c, t) = (workload.clone(), chaos.clone(), target.clone());
            run_options(id, w, c, t, &args.common, out.join(id))
        })
        .collect();
    if let Some(path) = &args.rate_from {
        runs = rates_from_sweep(runs, path, args.rate_share, args.common_rate)?;
        if runs.is_empty() {
            bail!(
                "--rate-from {}: no strategy has a rate to run at",
                path.display()
            );
        }
    }
    // Every run's plan holds before the first server starts.
    let plans = runs
        .iter()
        .map(RunOptions::plan)
        .collect::<Result<Vec<_>, _>>()?;
    let mut summaries = Vec::new();
    let mut failed = Vec::new();
    for plan in &plans {
        let id = &plan.opts.strategy;
        if cancel.is_cancelled() {
            break;
        }
        match run(plan, &cancel).await {
            Ok(s) => {
                summaries.push(s);
                // Written after every strategy, so an interrupted comparison keeps what it has.
                write_compare(&out, &summaries)?;
            }
            Err(RunError::Interrupted) => break,
            Err(e) => {
                eprintln!("lockbench: {id}: {e}");
                failed.push(id.clone());
            }
        }
    }
    print(&summaries, args.common.json)?;
    eprintln!("results: {}", out.display());
    if !summaries.is_empty() {
        write_report(&out);
    }
    if cancel.is_cancelled() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    if !failed.is_empty() {
        eprintln!("lockbench: failed strategies: {}", failed.join(", "));
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

/// Sets each run's offered rate from a sweep (`compare --rate-from`), saying where it came from.
/// A strategy with no rate (it met the SLO at no rate offered) is left out, and said so: its
/// row would measure a backlog, not the strategy.
fn rates_from_sweep(
    runs: Vec<RunOptions>,
    path: &Path,
    share: f64,
    common: bool,
) -> anyhow::Result<Vec<RunOptions>> {
    let sweep = report::sweep::Sweep::read(path).context("--rate-from")?;
    let pct = share * 100.0;
    let common = if common {
        let (cap, whose) = sweep.common_rate().with_context(|| {
            format!(
                "--common-rate: no strategy in {} was seen safe with a capacity at the SLO",
                path.display()
            )
        })?;
        eprintln!(
            "offered rate: {pct:.0}% of {cap}/s = {:.1}/s for every strategy (the lowest capacity at {} among those the sweep saw safe, its lower end or {:.0}% of the lowest rate that did not pass, rounded down 1-2-5: {whose})",
            cap * share,
            sweep.slo.label(),
            report::sweep::NO_PASS_SHARE * 100.0
        );
        Some(cap * share)
    } else {
        None
    };
    let mut kept = Vec::new();
    for mut opts in runs {
        let rate = match common {
            Some(r) => r,
            None => match sweep.rate_for(&opts.strategy, share) {
                Ok((r, basis)) => {
                    eprintln!("offered rate of {}: {basis} = {r:.2}/s", opts.strategy);
                    r
                }
                Err(e) => {
                    eprintln!("lockbench: left out: {e}");
                    continue;
                }
            },
        };
        opts.workload.load.rate = rate;
        kept.push(opts);
    }
    Ok(kept)
}

async fn cmd_sweep(args: SweepArgs, cancel: CancellationToken) -> anyhow::Result<ExitCode> {
    use crate::report::sweep::{Search, Slo};
    use crate::run::sweep::{SweepOptions, sweep};
    let ids = strategy_ids(&args.strategies)?;
    let workload = args.load.load()?;
    let out = args.out.unwrap_or_else(|| default_out("sweep"));
    let opts = SweepOptions {
        strategies: ids.clone(),
        workload_file: args.load.workload.display().to_string(),
        slo: Slo {
            quantile: args.slo.0,
            latency_ms: args.slo.1,
            min_served: args.min_served,
        },
        search: Search {
            start_per_s: args.start,
            min_per_s: args.min,
            max_per_s: args.max,
            factor: args.factor,
            confidence: args.confidence,
            goal_width: args.goal_width,
            budget_s: args.budget.as_secs_f64(),
            step_budget_s: args.step_budget.as_secs_f64(),
            trial_s: args.trial.as_secs_f64(),
            max_trial_s: args.max_trial.as_secs_f64(),
        },
        out: out.clone(),
        base_port: args.servers.base_port,
        endpoints: args.servers.endpoints,
        provision: args.servers.provision,
        workload,
    };
    crate::run::sweep::check(&opts)?;
    let q = &opts.search;
    eprintln!(
        "sweep: {} strategies, SLO {}, each step decided at {}% confidence; trials of {}..{} s, \
         {} s a step, {} s a strategy, until the interval is within {}x ({}..{}/s)",
        ids.len(),
        opts.slo.label(),
        q.confidence * 100.0,
        q.trial_s,
        q.max_trial_s,
        q.step_budget_s,
        q.budget_s,
        q.goal_width,
        q.min_per_s,
        q.max_per_s
    );
    let result = sweep(&opts, &cancel, &mut std::io::stderr()).await;
    let sweep = match result {
        Ok(s) => s,
        Err(RunError::Interrupted) => return Ok(ExitCode::from(EXIT_INTERRUPTED)),
        Err(e) => return Err(e).context("sweep failed"),
    };
    report::sweep::print_capacity(&mut std::io::stdout().lock(), &sweep)?;
    eprintln!("results: {}", out.display());
    write_report(&out);
    if cancel.is_cancelled() {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    let failed: Vec<&str> = sweep
        .entries
        .iter()
        .filter(|e| e.error.is_some())
        .map(|e| e.strategy.as_str())
        .collect();
    if !failed.is_empty() {
        eprintln!("lockbench: sweep incomplete for: {}", failed.join(", "));
        return Ok(ExitCode::from(EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

/// `k8s render`: the files and every check `coordinate` makes before it starts anything, then
/// the manifests.
fn cmd_k8s_render(args: crate::clients::k8s::RenderArgs) -> anyhow::Result<ExitCode> {
    use crate::clients::k8s;
    let inputs = k8s::Inputs::load(&args)?;
    let opts = RunOptions {
        strategy: args.strategy.clone(),
        workload: inputs.workload.clone(),
        chaos: inputs.chaos.as_ref().map(|(plan, _)| plan.clone()),
        workers: args.workers,
        worker_link: crate::clients::WorkerLink::Remote {
            listen: std::net::SocketAddr::from(([0, 0, 0, 0], args.port)),
            wait: std::time::Duration::from_secs(120),
        },
        private_network: false,
        workload_file: args.workload.display().to_string(),
        out: PathBuf::new(),
        base_port: None,
        endpoints: None,
        provision: Provisioner::Local,
        target: Some(inputs.target.checked.clone()),
        history: false,
        progress: false,
    };
    let plan = opts.plan()?;
    if plan.workers != args.workers {
        bail!(
            "--workers {}: expected at most load.clients = {} (each worker runs at least one buyer)",
            args.workers,
            inputs.workload.load.clients
        );
    }
    inputs
        .target
        .checked
        .endpoints_for(&args.strategy, plan.info.needs)?;
    k8s::write(&args, &inputs)?;
    Ok(ExitCode::SUCCESS)
}

fn cmd_gate(args: GateArgs) -> anyhow::Result<ExitCode> {
    use crate::report::gate;
    let current = gate::load_results(&args.current).context("--current")?;
    if args.update_baseline {
        let n = current.len();
        let path = gate::write_baseline(&args.baseline, current)
            .with_context(|| format!("write the baseline into {}", args.baseline.display()))?;
        eprintln!("baseline updated: {} ({n} runs)", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let baseline = gate::load_results(&args.baseline).context("--baseline")?;
    let report = gate::gate(
        &baseline,
        &current,
        gate::Tolerance {
            max_throughput_drop: args.max_throughput_drop,
            max_p99_rise: args.max_p99_rise,
            alpha: args.alpha,
        },
    );
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        gate::print_gate(&mut out, &report)?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PARTIAL)
    })
}

/// Renders report.html after the results are safely written: a failure only warns.
fn write_report(out: &Path) {
    match report::write_report(out) {
        Ok(path) => eprintln!("report: {}", path.display()),
        Err(e) => eprintln!("lockbench: warning: report.html not written: {e}"),
    }
}

fn write_compare(out: &Path, summaries: &[Summary]) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let path = out.join("compare.json");
    std::fs::write(&path, serde_json::to_vec_pretty(summaries)?)
        .with_context(|| format!("write {}", path.display()))
}

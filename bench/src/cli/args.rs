//! Every flag of every subcommand, each declared once: groups shared by several commands
//! (`WorkloadArgs`, `ServerArgs`, `Common`) are flattened into them.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::cluster::Provisioner;
use crate::report;
use crate::report::sweep::DEFAULTS;
use crate::run::ServerOptions;
use crate::run::paired::Variant;
use crate::workload::Workload;

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
    /// Run one strategy: start its servers, load them, audit the stock, write results. Exit
    /// codes: 0 done (whatever the verdict), 2 error, 3 with --fail-on unsafe when a strategy
    /// that claims safety was seen unsafe, 130 interrupted.
    Run(RunArgs),
    /// The cost of contention: each lock in a closed loop on one key at 1, 2, 4, … --max
    /// contenders (or --levels), --trials trials of --duration at each level, on one set of
    /// servers per strategy. Measures grants/s (mean and 95% interval over the trials) and
    /// the acquire wait of every granted attempt (p50, p99 with their sample counts), and fits
    /// the Universal Scalability Law (λ, σ contention, κ coherency, R², peak N) per strategy.
    /// Writes <out>/contend.json after every trial, a folder per trial, and report.html with
    /// the contention chart; prints the table. See docs/contention.md.
    Contend(ContendArgs),
    /// What one grant of each lock costs in round trips and fsyncs: each strategy on one key
    /// (--contenders in a closed loop) with every round trip and every fsync made slower for
    /// the whole run (`environment.rtt`, `environment.fsync`) at each of --points, the time per
    /// grant fitted to them (ms per grant = base + serial round trips × rtt + serial fsyncs ×
    /// fsync), and the --check points the fit did not see, predicted against measured (±25 %).
    /// Writes <out>/model.json after every point, for `lockbench predict`. Needs root (slow
    /// links and disks are local processes' namespaces and FUSE mounts). See docs/predict.md.
    Calibrate(CalibrateArgs),
    /// Capacity on one hot key on another network and disk, from a `calibrate` model: each
    /// strategy's grants/s at --rtt and --fsync (absolute, as that deployment measures them),
    /// with the 95% interval of one trial there; outside the fitted range, or with another
    /// --cpu-score, the figure says it extrapolates. See docs/predict.md.
    Predict(PredictArgs),

    /// Run several strategies one after another on the same workload and print one table.
    Compare(CompareArgs),
    /// The main job (docs/main-job.md): for every strategy, its capacity within the SLO (a
    /// sweep, <out>/sweep/), a calm run at one common rate, the lowest capacity among the
    /// strategies seen safe (<out>/calm/), and each chaos scenario at --chaos-share of its own
    /// capacity, with 2 s leases and stock that never runs out (<out>/chaos/<scenario>/);
    /// then one report, <out>/report.html. A part that fails does not stop the later ones;
    /// the job exits non-zero when one did.
    ///
    /// scripts/compare.sh runs it, its environment mapped onto these flags: SLO, CHAOS_SHARE,
    /// SCENARIOS, STRATEGIES, NEEDS, CALM_DURATION, CHAOS_DURATION name theirs; SWEEP_ARGS are
    /// the sweep's flags (--slo to --revisit-budget, as `sweep` takes them); its extra
    /// arguments (e.g. --set load.clients=32) come last, and a --set applies to every part.
    Job(JobArgs),
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
    /// Server builds side by side, from the folder scripts/versions.sh wrote: for each strategy
    /// and build, what its servers reported, its capacity interval against the first build's,
    /// and its calm p99 with its 95% interval and sample count.
    Versions(VersionsArgs),
    /// Strategies in pairs, side by side, from saved results: from a sweep, each capacity
    /// interval and the ratio of each pair (an interval too: a pair reads higher or lower only
    /// when it excludes 1, else overlap); from a comparison, sales/s, p99, utilization and
    /// verdict, and the ratio of sales/s. scripts/versus.sh and scripts/libraries.sh run them.
    Versus(VersusArgs),
    /// Runs repeated in rounds, by group: the median over the rounds of utilization, sales/s,
    /// p99 and lock timeouts, then the median and range of how the lock shared its key
    /// (acquire p99, Jain's fairness, barges per handoff, missed wake-ups per give-up), and the
    /// first group's sales/s over each other's (scripts/bench-wait.sh runs them).
    Rounds(RoundsArgs),
    /// Every run's headline figures below the folders, one CSV row per run and strategy in
    /// the order the runs started (time, build, strategy, workload, sales/s, p99 with its n,
    /// sell-out time, verdict, cores), for a trend tool: docs/ci-formats.md runs Apache Otava
    /// on it to find change points across commits.
    History(HistoryArgs),
    /// Runs of one seed made different ways, totals side by side (attempts, sales, unstarted
    /// arrivals, sales/s, p99, worker failures); exits 1 unless every run's attempts, sales and
    /// unstarted arrivals equal the first's (scripts/remote.sh runs them).
    Totals(TotalsArgs),
    /// Print a TCP port on 127.0.0.1 that is free now, for a script that starts
    /// `coordinate --listen` and the workers that connect to it.
    FreePort,
    /// Published lock failures, each run on real servers of the builds where it was found and
    /// where it may be fixed: what was published beside what lockbench measured, and a verdict
    /// per build (reproduced, not reproduced: fixed in X, not run and why). Writes
    /// <out>/reproduce.json; exits 1 if a scenario could not run for an error.
    Reproduce(ReproduceArgs),
    /// Render <DIR>/report.html (tables, charts, reproduction) from saved results, no servers.
    ///
    /// Reads summary.json, compare.json or sweep.json (or a job folder of `lockbench job`),
    /// timeline.csv and latency.hlog; writes report.html
    /// (self-contained: inline CSS and SVG, no scripts), charts/*.svg, charts/*.png and
    /// effective-workload.toml. `run` and `compare` already write it at their end; use this to
    /// re-render a folder. Prints the path of report.html.
    Report(ReportArgs),
    /// Which strategies of a results folder meet stated needs, in words, each answer naming
    /// the figure it rests on (docs/choosing.md): a job folder, a sweep or a comparison (a
    /// sale's runs answer the sale's terms). Judged from measured fields only; a term nothing
    /// measured is "not shown either way", never met.
    Advise(AdviseArgs),
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
    #[command(flatten)]
    pub start: StartArgs,
    /// Stop the servers after this long at the latest.
    #[arg(long = "for", value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub lifetime: std::time::Duration,
}

/// The servers a command starts itself (`serve`, `contend`): its ports and its provisioner.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// First port for the servers. Default: free ports chosen by the OS.
    #[arg(long, value_name = "PORT")]
    pub base_port: Option<u16>,
    /// Where the servers come from: `local` processes or `containers` (see `run --help`).
    #[arg(long, value_enum, default_value_t = Provisioner::Local, conflicts_with = "base_port")]
    pub provision: Provisioner,
}

impl StartArgs {
    /// The servers these flags start.
    pub(super) fn options(&self) -> ServerOptions {
        ServerOptions {
            base_port: self.base_port,
            endpoints: None,
            provision: self.provision,
        }
    }
}

/// `lockbench adapter-check`
#[derive(Debug, Args)]
pub struct AdapterCheckArgs {
    /// A library of `lockbench list` (e.g. `redis-py`): its adapter, on the servers it needs.
    #[arg(long, conflicts_with = "command", required_unless_present = "command")]
    pub lib: Option<String>,
    /// Servers to start for COMMAND (comma-separated): redis, redlock (five independent
    /// masters), zookeeper, etcd, postgres.
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
    /// A PostgreSQL server (its password in the adapter's PGPASSWORD).
    Postgres,
}

/// `lockbench gate`: against a stored baseline (`--baseline`, `--current`), or paired
/// (`--a`, `--b`): both measured side by side now, on this machine.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Baseline results: a folder with baseline.json (see --update-baseline), or results
    /// folders (compare.json / summary.json); every one found below it is one repetition.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "a",
        conflicts_with = "a"
    )]
    pub baseline: Option<PathBuf>,
    /// Current results, read the same way.
    #[arg(
        long,
        value_name = "DIR",
        required_unless_present = "a",
        conflicts_with = "a"
    )]
    pub current: Option<PathBuf>,
    /// The paired gate's A (the reference): current, bin:PATH (another lockbench build, such
    /// as the merge base's), set:KEY=VALUE[,KEY=VALUE…], server:SERVICE=BUILD, adapter:ID.
    #[arg(long, value_name = "VARIANT", requires = "b", value_parser = parse_variant)]
    pub a: Option<Variant>,
    /// The paired gate's B (the change), in the same forms.
    #[arg(long, value_name = "VARIANT", requires = "a", value_parser = parse_variant)]
    pub b: Option<Variant>,
    #[command(flatten)]
    pub paired: PairedArgs,
    /// Largest accepted drop of a strategy's sales/s, e.g. `15%`: a smaller drop passes even
    /// when significant. Default: 15% against a baseline, 5% paired.
    #[arg(long, value_name = "PCT", value_parser = percent)]
    pub max_throughput_drop: Option<f64>,
    /// Largest accepted rise of a strategy's p99 latency. Default: 25% against a baseline,
    /// 20% paired (a rise under 1 ms never fails).
    #[arg(long, value_name = "PCT", value_parser = percent)]
    pub max_p99_rise: Option<f64>,
    /// Chance of a false alarm for the whole baseline gate, e.g. `5%`: each strategy's change
    /// must be significant (one-sided exact Mann–Whitney across repetitions, Holm over every
    /// test). Paired: 1 − the intervals' confidence.
    #[arg(long, value_name = "LEVEL", default_value = "5%", value_parser = alpha)]
    pub alpha: f64,
    /// Do not judge: write the current results as the new baseline (<baseline>/baseline.json).
    #[arg(long, conflicts_with = "a")]
    pub update_baseline: bool,
    /// Print the verdict as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ci: CiArgs,
}

/// The paired gate's knobs (with `--a`, `--b`).
#[derive(Debug, Args)]
pub struct PairedArgs {
    /// Comma-separated strategy ids both sides run (an adapter: variant runs its lib:ID).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mysql-atomic,redis-setnx-watchdog,redis-lua-decr"
    )]
    pub strategies: Vec<String>,
    /// The workload both sides run.
    #[arg(long, value_name = "FILE", default_value = "workloads/ci.toml")]
    pub workload: PathBuf,
    /// Overrides of both sides, as `run --set` takes them.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// The first pair's seed; pair i runs on seed + i, both halves on the same.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No verdict before this many pairs (a 95% interval needs 6).
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub min_pairs: u32,
    /// The most pairs.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub max_pairs: u32,
    /// No pair starts that would end past it.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = humantime::parse_duration)]
    pub budget: std::time::Duration,
    /// Largest accepted rise of a sale's time to sell its hot item out.
    #[arg(long, value_name = "PCT", default_value = "10%", value_parser = percent)]
    pub max_sold_out_rise: f64,
    /// Results: <out>/pair-NN/<a|b>/ and gate.json. Default: results/runs/<time>-gate.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    /// Reuse the pairs already in --out (an interrupted gate, or one judged again with other
    /// tolerances): a side with results there is read, not run again.
    #[arg(long, requires = "out")]
    pub resume: bool,
    #[command(flatten)]
    pub out_args: OutArgs,
}

fn parse_variant(s: &str) -> Result<Variant, String> {
    s.parse()
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

/// `lockbench reproduce`
#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// Scenarios to run (default: all); `--list` names them.
    pub names: Vec<String>,
    /// Only list the scenarios, their sources and the builds they run on.
    #[arg(long)]
    pub list: bool,
    /// Rounds of each direct scenario on each build: etcd-11456's rounds; jepsen-etcd-lock runs
    /// 10 s a round (one 5 s pause, 5 s calm).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Results folder (default: results/runs/<time>-reproduce).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// `lockbench versions`
#[derive(Debug, Args)]
pub struct VersionsArgs {
    /// The folder scripts/versions.sh wrote: one `<key>-<build>/` per server build.
    pub dir: PathBuf,
    /// Instead of the table: the calm rate of each of --strategies on the builds of this
    /// `[servers]` key swept so far, one `strategy rate duration` line each (half the lowest
    /// capacity of any build, three significant digits; a load of about --samples arrivals).
    #[arg(long, value_name = "KEY", requires = "strategies")]
    pub calm_rates: Option<String>,
    /// With --calm-rates: comma-separated strategy ids.
    #[arg(long, value_delimiter = ',', requires = "calm_rates")]
    pub strategies: Vec<String>,
    /// With --calm-rates: only these builds of the key (comma-separated; default: every one
    /// in DIR).
    #[arg(long, value_delimiter = ',', requires = "calm_rates")]
    pub builds: Vec<String>,
    /// With --calm-rates: arrivals a calm run should have (its load lasts 5 to 30 s).
    #[arg(long, default_value_t = 1000, requires = "calm_rates")]
    pub samples: u32,
}

/// `lockbench versus`
#[derive(Debug, Args)]
pub struct VersusArgs {
    /// Sweep folders (sweep.json) or comparison folders (compare.json), one table each.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The pairs, comma-separated: `a=b` sets strategy a against b (b is the ratio's
    /// denominator), e.g. `redis-rwlock=redis-reentrant,zookeeper-rwlock=zookeeper`.
    #[arg(long, required = true, value_delimiter = ',', value_name = "A=B,...")]
    pub pairs: Vec<report::versus::Pair>,
}

/// `lockbench rounds`
#[derive(Debug, Args)]
pub struct RoundsArgs {
    /// One folder per group, each holding one run folder (summary.json) per round; a group is
    /// named by its folder, the first is the one the ratios divide.
    #[arg(required = true, value_name = "DIR")]
    pub groups: Vec<PathBuf>,
}

/// `lockbench totals`
#[derive(Debug, Args)]
pub struct TotalsArgs {
    /// Run folders (summary.json) of one seed, each named by its folder; the first is the
    /// reference.
    #[arg(required = true, num_args = 2.., value_name = "DIR")]
    pub runs: Vec<PathBuf>,
}

/// `lockbench history`
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Results folders: every compare.json, summary.json or baseline.json in or below them
    /// counts (as `gate` reads them).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Only these strategies (comma-separated): a trend tool reads one strategy's series.
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Write the CSV here instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// `lockbench calibrate`
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Comma-separated strategy ids. Default: one lock per family whose servers take slow
    /// links and disks, and optimistic versioning (mysql-for-update, mysql-optimistic,
    /// redis-setnx, zookeeper, etcd).
    #[arg(long, alias = "strategy", value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// The fit's points, RTT:FSYNC added to this machine's, 0:0 among them.
    #[arg(long, value_name = "RTT:FSYNC,...", default_value = crate::run::calibrate::DEFAULT_POINTS,
          value_parser = points)]
    pub points: Points,
    /// Points held out of the fit, predicted and then measured ("none": no check).
    #[arg(long, value_name = "RTT:FSYNC,...", default_value = crate::run::calibrate::DEFAULT_CHECK,
          value_parser = points_or_none)]
    pub check: Points,
    /// Buyers in a closed loop on the one key.
    #[arg(long, default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::run::contend::MAX_CONTENDERS)))]
    pub contenders: u32,
    /// Trials at each point (a fresh set of servers per point).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub trials: u32,
    /// Load of one trial.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = trial_duration)]
    pub duration: std::time::Duration,
    /// Closed-loop load before each point's first trial, not measured (0s: none).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub warm_up: std::time::Duration,
    /// Time the whole command may take: no point starts after it.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = humantime::parse_duration)]
    pub budget: std::time::Duration,
    /// Results folder. Default: results/runs/<time>-calibrate.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub out_args: OutArgs,
    #[command(flatten)]
    pub load: WorkloadArgs,
    #[command(flatten)]
    pub start: StartArgs,
}

/// Points of `--points` / `--check`.
#[derive(Debug, Clone)]
pub struct Points(pub Vec<crate::run::calibrate::At>);

fn points(s: &str) -> Result<Points, String> {
    crate::run::calibrate::parse_points(s).map(Points)
}

fn points_or_none(s: &str) -> Result<Points, String> {
    if s.trim() == "none" {
        return Ok(Points(Vec::new()));
    }
    points(s)
}

/// `lockbench predict`
#[derive(Debug, Args)]
pub struct PredictArgs {
    /// The model: a `calibrate` folder or its model.json.
    #[arg(long)]
    pub model: PathBuf,
    /// The deployment's round trip between the application and the lock's servers (and
    /// between the servers), e.g. 1ms.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub rtt: std::time::Duration,
    /// The deployment's fsync (fdatasync) time on the servers' disks, e.g. 2ms.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub fsync: std::time::Duration,
    /// The deployment's CPU score (the fingerprint's `cpu_score.m_per_s`). Default: this
    /// model's machine's; another widens each interval (see docs/predict.md).
    #[arg(long, value_name = "N")]
    pub cpu_score: Option<f64>,
}

/// `lockbench agreement`
#[derive(Debug, Args)]
pub struct AgreementArgs {
    /// Two or more sweeps: their folders or sweep.json files.
    #[arg(required = true, num_args = 2..)]
    pub sweeps: Vec<PathBuf>,
    /// Two sweeps from different machines (or environments): a `calibrate` model (its folder
    /// or model.json) says which differences the machines' fingerprints explain; exits 1 when
    /// some difference is not explained. See docs/predict.md.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<PathBuf>,
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
    /// one subfolder per strategy), of `sweep` (sweep.json), or of `job` (a job:
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

/// The files CI tools read (docs/ci-formats.md), written once the runs are done.
#[derive(Debug, Args, Default)]
pub struct CiArgs {
    /// JUnit XML: per strategy a `safety` testcase (fails when the verdict is not what the
    /// strategy claims) and one per figure (sales/s, p99 with its interval and n, a sale's
    /// sell-out time).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// A short Markdown table (strategy, verdict, sales/s, p99 with n, sell-out); also appended
    /// to $GITHUB_STEP_SUMMARY when that is set.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Bencher Metric Format JSON: per strategy, each figure's value and, where measured, its
    /// lower_value and upper_value.
    #[arg(long, value_name = "FILE")]
    pub bmf: Option<PathBuf>,
    /// github-action-benchmark's customSmallerIsBetter JSON (p99, sell-out time); its
    /// customBiggerIsBetter twin (sales/s) goes beside it as <stem>-bigger.<ext>.
    #[arg(long, value_name = "FILE")]
    pub github_benchmark: Option<PathBuf>,
}

impl CiArgs {
    /// What to write.
    pub fn outputs(&self) -> report::ci::CiOutputs {
        report::ci::CiOutputs {
            junit: self.junit.clone(),
            markdown: self.markdown.clone(),
            bmf: self.bmf.clone(),
            github_benchmark: self.github_benchmark.clone(),
        }
    }
}

/// `lockbench advise`.
#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// Results folder: a job's, a sweep's or a comparison's --out.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// What a strategy must do, comma-separated: every term of `report --needs`, and the
    /// sale's: `sold-out<=DURATION` (the hot item sold out within it of the surge's start),
    /// `sale-p99<=DURATION` (buyers' p99 in the surge), `fcfs>=X` (0 to 1). `safe` covers
    /// the sale's runs too. E.g. `safe,safe-under-kill-master,sold-out<=3s,capacity>=500`.
    #[arg(long, value_name = "LIST")]
    pub needs: report::Needs,
}

/// The workload flags, shared by `run`, `compare` and `sweep`.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// Workload file (TOML; see workloads/flash-sale.toml for every key). A sweep sets its
    /// rate, duration and stock itself. The default is built in: it runs from any folder.
    #[arg(long, short = 'w', default_value = crate::workload::config::DEFAULT_FILE)]
    pub workload: PathBuf,
    /// Override a workload value, e.g. `--set load.clients=64` (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
}

impl WorkloadArgs {
    pub(super) fn load(&self) -> anyhow::Result<Workload> {
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

impl ServerArgs {
    /// The servers these flags name.
    pub(super) fn options(&self) -> ServerOptions {
        ServerOptions {
            base_port: self.base_port,
            endpoints: self.endpoints.clone(),
            provision: self.provision,
        }
    }
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
    /// Print every column of the table (the default fits 120 columns; docs/reading.md).
    #[arg(long)]
    pub wide: bool,
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
    #[command(flatten)]
    pub out_args: OutArgs,
    /// Exit-code policy: `unsafe` exits 3 when a strategy that claims safety is seen unsafe
    /// (oversold, a double grant, a lost update, …). Without it an UNSAFE verdict is in the
    /// table and the exit code is 0.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
}

/// What `--fail-on` fails on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A strategy that claims safety was seen unsafe: exit 3.
    Unsafe,
}

/// What may be in the results folder before a run writes there.
#[derive(Debug, Args)]
pub struct OutArgs {
    /// Write into a --out folder that is not empty. Without it such a folder is refused: an
    /// earlier run's results and logs would mix with this one's.
    #[arg(long)]
    pub force: bool,
}

impl OutArgs {
    /// Refuses `out` when it is a folder that holds anything, unless `--force`.
    pub(super) fn check(&self, out: &Path) -> anyhow::Result<()> {
        if self.force {
            return Ok(());
        }
        let first = std::fs::read_dir(out)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok);
        if let Some(e) = first {
            anyhow::bail!(
                "--out {}: the folder is not empty (it holds {}); an earlier run's files would \
                 mix with this one's: choose a new folder, or pass --force to write into it",
                out.display(),
                e.file_name().to_string_lossy()
            );
        }
        Ok(())
    }
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
    #[command(flatten)]
    pub ci: CiArgs,
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
    #[command(flatten)]
    pub out_args: OutArgs,
    #[command(flatten)]
    pub search: SearchArgs,
    #[command(flatten)]
    pub load: WorkloadArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
}

/// The capacity search's flags, shared by `sweep` and `job`.
#[derive(Debug, Args)]
pub struct SearchArgs {
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
    /// Time one strategy's search may spend on steps; no step runs past it by more than a
    /// trial.
    #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = humantime::parse_duration)]
    pub budget: std::time::Duration,
    /// Time one step may spend on trials before it reads undecided (a step at a low rate
    /// always has room for the arrivals a pass needs, within --budget).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub step_budget: std::time::Duration,
    /// Shortest load of one trial; a trial aims for the arrivals a pass needs (299 for a p99
    /// at 95 %), up to --max-trial.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = humantime::parse_duration)]
    pub trial: std::time::Duration,
    /// Longest load of one trial.
    #[arg(long, value_name = "DURATION", default_value = "6s", value_parser = humantime::parse_duration)]
    pub max_trial: std::time::Duration,
    /// Do not run each strategy's decided ends again after every strategy was searched (the
    /// revisit widens an interval whose end the machine moved during the sweep, so that it
    /// holds the capacity of both moments, and measures how far the machine moves capacities,
    /// which widens every interval; without it the intervals hold one moment each).
    #[arg(long)]
    pub no_revisit: bool,
    /// Time one strategy's revisit may spend: both ends again, then, where one moved, the
    /// later moment's own end on that side.
    #[arg(long, value_name = "DURATION", default_value = "12s", value_parser = humantime::parse_duration)]
    pub revisit_budget: std::time::Duration,
}

impl SearchArgs {
    /// The latency target.
    pub fn slo(&self) -> crate::report::sweep::Slo {
        crate::report::sweep::Slo {
            quantile: self.slo.0,
            latency_ms: self.slo.1,
            min_served: self.min_served,
        }
    }

    /// How rates are searched.
    pub fn search(&self) -> crate::report::sweep::Search {
        crate::report::sweep::Search {
            start_per_s: self.start,
            min_per_s: self.min,
            max_per_s: self.max,
            factor: self.factor,
            confidence: self.confidence,
            goal_width: self.goal_width,
            budget_s: self.budget.as_secs_f64(),
            step_budget_s: self.step_budget.as_secs_f64(),
            trial_s: self.trial.as_secs_f64(),
            max_trial_s: self.max_trial.as_secs_f64(),
            revisit: !self.no_revisit,
            revisit_budget_s: self.revisit_budget.as_secs_f64(),
        }
    }
}

/// `lockbench job`
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Comma-separated strategy ids (compare.sh: STRATEGIES). Default: every strategy, and
    /// every lock under pause-holder (a lock-free strategy has no holder to pause).
    #[arg(long, value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// The job folder. Default: results/runs/<UTC time>-compare.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub out_args: OutArgs,
    /// Share of its own capacity each strategy is offered under a fault (CHAOS_SHARE): room
    /// to drain the backlog a fault builds, so the fault is measured, not the backlog.
    #[arg(long, value_name = "PCT", default_value = "70%", value_parser = percent)]
    pub chaos_share: f64,
    /// Chaos scenarios, comma-separated: files of chaos/ without .toml (SCENARIOS).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "kill-master,pause-holder"
    )]
    pub scenarios: Vec<String>,
    /// The sale part's workload (SALE): every strategy on its surge, one seed; `none`: no sale
    /// part. The `--set`s given apply to the steady parts only.
    #[arg(long, value_name = "FILE", default_value = "workloads/sale.toml")]
    pub sale: PathBuf,
    /// The sale part's chaos scenarios after the sale without a fault, comma-separated: files
    /// of chaos/ without .toml (SALE_SCENARIOS; empty: none).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "kill-master-in-surge"
    )]
    pub sale_scenarios: Vec<String>,
    /// The calm part's load, each strategy (CALM_DURATION).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = job_duration)]
    pub calm_duration: String,
    /// Each chaos part's load, each strategy (CHAOS_DURATION).
    #[arg(long, value_name = "DURATION", default_value = "8s", value_parser = job_duration)]
    pub chaos_duration: String,
    /// What a strategy must do to qualify, judged in the report (NEEDS; see `report --help`),
    /// e.g. `safe-under-pause,capacity>=500`.
    #[arg(long, value_name = "LIST")]
    pub needs: Option<report::Needs>,
    // The capacity part's SLO and search (SLO; SWEEP_ARGS: any of these, as `sweep` takes them).
    #[command(flatten)]
    pub search: SearchArgs,
    // The workload of every part, and --set given to every part (after the job's own).
    #[command(flatten)]
    pub load: WorkloadArgs,
    #[command(flatten)]
    pub servers: ServerArgs,
    // The CI files over the job's parts (docs/ci-formats.md, "The main job").
    #[command(flatten)]
    pub ci: CiArgs,
}

/// A part's load, kept as written (it becomes `--set load.duration="…"`), checked now.
fn job_duration(s: &str) -> Result<String, String> {
    humantime::parse_duration(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("`{s}`: {e}; expected a duration such as 5s"))
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
    #[command(flatten)]
    pub ci: CiArgs,
}

/// `lockbench contend`
#[derive(Debug, Args)]
pub struct ContendArgs {
    /// Comma-separated lock strategy ids. Default: one per lock family (mysql-for-update,
    /// redis-setnx, redlock, zookeeper, etcd).
    #[arg(long, alias = "strategy", value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Contenders of the last level: the levels are 1, 2, 4, … up to it.
    #[arg(long, default_value_t = 64, conflicts_with = "levels",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::run::contend::MAX_CONTENDERS)))]
    pub max: u32,
    /// The contender counts to measure instead of --max, e.g. 1,2,4,8.
    #[arg(long, value_name = "N,N,...", value_parser = levels)]
    pub levels: Option<Levels>,
    /// Trials at each level (their spread is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub trials: u32,
    /// Load of one trial (the level's bound is this plus a minute).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = trial_duration)]
    pub duration: std::time::Duration,
    /// Closed-loop load before a strategy's first trial, not measured (0s: none).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = humantime::parse_duration)]
    pub warm_up: std::time::Duration,
    /// Time the whole command may take: no trial starts after it, and what was measured is
    /// kept.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = humantime::parse_duration)]
    pub budget: std::time::Duration,
    /// Results folder. Default: results/runs/<time>-contend.
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub out_args: OutArgs,
    #[command(flatten)]
    pub load: WorkloadArgs,
    #[command(flatten)]
    pub start: StartArgs,
}

/// The contender counts of `--levels`, ascending.
#[derive(Debug, Clone)]
pub struct Levels(pub Vec<u32>);

fn levels(s: &str) -> Result<Levels, String> {
    crate::run::contend::parse_levels(s).map(Levels)
}

/// A trial's load: from 200ms (a shorter one holds few grants at 1 contender) to 10m.
fn trial_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("`{s}`: {e}; expected a duration such as 2s or 500ms"))?;
    if d < std::time::Duration::from_millis(200) || d > std::time::Duration::from_secs(600) {
        return Err(format!(
            "`{s}`: expected a duration from 200ms to 10m, e.g. 2s"
        ));
    }
    Ok(d)
}

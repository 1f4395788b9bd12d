//! `lockbench contend`: the cost of contention. Each strategy runs closed loops on one key at
//! 1, 2, 4, … N contenders, each level a few trials, every trial a whole run with its own
//! folder, a trial of the strategy's [`Session`] (one set of servers, started once, warmed
//! once). A trial counts its grants per second; its acquire waits and fairness are the
//! recorder's (`summary.json`'s `contention`). Trials go round the levels in turn, so a
//! machine that drifts moves every level alike. `contend.json` is rewritten after every trial,
//! so Ctrl-C, an error or the budget keeps what was measured.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{RunError, RunOptions, ServerOptions, Session, Source};
use crate::report::Summary;
use crate::report::contend::{CONTEND_SCHEMA, Contend, ContendEntry, Level, LevelTrial};
use crate::strategy;
use crate::workload::Workload;
use crate::workload::config::LoadMode;

/// One representative per lock family (`strategy::Family`): the row lock of the database,
/// PostgreSQL's session advisory lock, SET NX on one Redis, Redlock across five, and both
/// consensus locks, which queue differently (ZooKeeper's sequential nodes, etcd's revisions).
pub const DEFAULT_STRATEGIES: &[&str] = &[
    "mysql-for-update",
    "pg-advisory",
    "redis-setnx",
    "redlock",
    "zookeeper",
    "etcd",
];

/// The most contenders a level may have: each is a buyer with connections of its own.
pub const MAX_CONTENDERS: u32 = 1024;

/// A level's run may take this much longer than its load (servers answering slowly at the
/// start, the audit, writing results) before it is cut.
const LEVEL_SLACK: Duration = Duration::from_secs(60);

/// How long a trial waits for MariaDB to end the connections of the trial before.
const SETTLE_BOUND: Duration = Duration::from_secs(10);

/// What to measure, as given.
#[derive(Debug, Clone)]
pub struct ContendOptions {
    /// Strategy ids, in order.
    pub strategies: Vec<String>,
    /// The workload every level starts from (its load, SKUs and stock are the level's).
    pub workload: Workload,
    /// Where it came from.
    pub workload_file: String,
    /// Contender counts, ascending.
    pub levels: Vec<u32>,
    /// Trials at each level.
    pub trials: u32,
    /// Load of one trial.
    pub trial: Duration,
    /// Closed-loop load before a strategy's first trial, not measured (0: none).
    pub warm_up: Duration,
    /// Time the whole command may take; no trial starts after it.
    pub budget: Duration,
    /// Results folder.
    pub out: PathBuf,
    /// Where each strategy's servers come from.
    pub servers: ServerOptions,
    /// Measure a lock-free strategy too, its sales per second standing for grants (calibrate:
    /// optimistic versioning serialises on its row as a lock does).
    pub lock_free_sales: bool,
}

/// 1, 2, 4, … up to `max`, and `max` itself when it is not a power of two.
pub fn plan_levels(max: u32) -> Vec<u32> {
    let mut levels: Vec<u32> = std::iter::successors(Some(1u32), |n| n.checked_mul(2))
        .take_while(|n| *n <= max)
        .collect();
    if levels.last() != Some(&max) && max >= 1 {
        levels.push(max);
    }
    levels
}

/// `--levels 1,2,4,8`: contender counts, each 1..=[`MAX_CONTENDERS`], returned ascending
/// without repeats.
pub fn parse_levels(s: &str) -> Result<Vec<u32>, String> {
    let expected = format!(
        "expected contender counts from 1 to {MAX_CONTENDERS} separated by commas, e.g. 1,2,4,8"
    );
    let mut levels = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: u32 = part
            .parse()
            .map_err(|_| format!("`{s}`: `{part}` is not a count; {expected}"))?;
        if !(1..=MAX_CONTENDERS).contains(&n) {
            return Err(format!("`{s}`: {n} is out of range; {expected}"));
        }
        levels.push(n);
    }
    if levels.is_empty() {
        return Err(format!("`{s}`: no level; {expected}"));
    }
    levels.sort_unstable();
    levels.dedup();
    Ok(levels)
}

/// The workload of one trial: `n` buyers in a closed loop on one SKU for `secs`, with stock no
/// trial can sell out (a sold-out answer still takes the lock, but sells nothing).
pub fn level_workload(base: &Workload, n: u32, load: Duration) -> Workload {
    let mut w = base.clone();
    w.inventory.skus = 1;
    w.inventory.stock = w.inventory.stock.max(10_000_000);
    w.load.mode = LoadMode::Closed;
    w.load.clients = n;
    w.load.duration = load;
    w.load.max_attempts = None;
    w.load.warmup = Duration::ZERO;
    w.load.read_fraction = 0.0;
    w
}

/// One trial: `n` contenders of `id` for `load` on the strategy's servers, into `<out>/<dir>`.
fn trial_options(opts: &ContendOptions, id: &str, n: u32, load: Duration, dir: &str) -> RunOptions {
    let (w, file) = (level_workload(&opts.workload, n, load), &opts.workload_file);
    RunOptions::trial(id, w, file, opts.out.join(dir), opts.servers.provision)
}

/// Every check a trial makes, for every strategy, before any server starts; and only locks:
/// a lock-free strategy has no acquire to wait on.
pub fn check(opts: &ContendOptions) -> Result<(), RunError> {
    if opts.levels.is_empty() || opts.trials == 0 {
        return Err(RunError::Options(
            "--levels / --trials: expected at least one level and one trial".into(),
        ));
    }
    let top = *opts.levels.last().expect("not empty");
    for id in &opts.strategies {
        let info = strategy::find(id)?;
        if !info.locks && !opts.lock_free_sales {
            return Err(RunError::Options(format!(
                "--strategies {id}: contend measures the wait for a lock, and {id} takes none; \
                 expected a lock strategy, e.g. {}",
                DEFAULT_STRATEGIES.join(",")
            )));
        }
        let o = trial_options(opts, id, top, opts.trial, id);
        o.plan()?;
        // Each strategy's servers start with their defaults.
        o.check_defaults_suffice(info, "contend")?;
    }
    Ok(())
}

/// Runs every strategy's levels; returns the results (also in `<out>/contend.json`).
pub async fn contend(
    opts: &ContendOptions,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Contend, RunError> {
    contend_on(opts, &Source::of(&opts.servers), cancel, log).await
}

/// [`contend`] with each strategy's servers from `source` (the sim's tests: none).
pub async fn contend_on(
    opts: &ContendOptions,
    source: &Source,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Contend, RunError> {
    let began = super::begin_in(&opts.out, source).await?;
    let mut c = Contend {
        schema: CONTEND_SCHEMA.to_string(),
        lockbench_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        workload_file: opts.workload_file.clone(),
        levels: opts.levels.clone(),
        trials: opts.trials,
        trial_s: opts.trial.as_secs_f64(),
        budget_s: opts.budget.as_secs_f64(),
        elapsed_s: 0.0,
        interrupted: false,
        entries: Vec::new(),
        machine: crate::record::machine::taken().cloned(),
    };
    for id in &opts.strategies {
        if cancel.is_cancelled() {
            break;
        }
        let info = source.info(id)?;
        c.entries.push(ContendEntry::new(id, info.family()));
        let mut bench = Bench {
            opts,
            id,
            began,
            cancel,
            log: &mut *log,
        };
        if let Err(e) = bench.strategy(&mut c, source, info).await {
            let _ = writeln!(bench.log, "{id:<22} stopped: {e}");
            if let Some(entry) = c.entries.last_mut() {
                entry.error = Some(e);
            }
        }
        c.elapsed_s = began.elapsed().as_secs_f64();
        c.interrupted = cancel.is_cancelled();
        c.write(&opts.out).map_err(super::write_err(&opts.out))?;
    }
    Ok(c)
}

/// One strategy's run through the levels.
struct Bench<'a> {
    opts: &'a ContendOptions,
    id: &'a str,
    began: Instant,
    cancel: &'a CancellationToken,
    log: &'a mut dyn Write,
}

impl Bench<'_> {
    /// Opens the strategy's session, warms its servers, runs its trials; the servers stop
    /// when this returns, on every path. An error is why it stopped early.
    async fn strategy(
        &mut self,
        c: &mut Contend,
        source: &Source,
        info: &'static strategy::StrategyInfo,
    ) -> Result<(), String> {
        let (w, logs) = (
            &self.opts.workload,
            self.opts.out.join(self.id).join("logs"),
        );
        let mut session = match Session::open(source, w, info.needs, logs, self.cancel).await {
            Ok(s) => s,
            Err(RunError::Interrupted) => return Err("interrupted".into()),
            Err(e) => return Err(format!("servers: {e}")),
        };
        let result = self.trials(c, &mut session).await;
        session.close();
        result
    }

    /// The warm-up, then every trial at every level, round by round.
    async fn trials(&mut self, c: &mut Contend, session: &mut Session) -> Result<(), String> {
        let opts = self.opts;
        if !opts.warm_up.is_zero() {
            let n = (*opts.levels.last().expect("checked")).min(16);
            let dir = format!("{}/warm-up", self.id);
            let o = trial_options(opts, self.id, n, opts.warm_up, &dir);
            self.bounded(session, &o).await?;
        }
        let mut pooled: Vec<Vec<LevelTrial>> = vec![Vec::new(); opts.levels.len()];
        for k in 1..=opts.trials {
            for (i, &n) in opts.levels.iter().enumerate() {
                if self.cancel.is_cancelled() {
                    return Err("interrupted".into());
                }
                if self.began.elapsed() >= opts.budget {
                    return Err(format!(
                        "the budget ({}) was spent before trial {k} of {n} contenders",
                        humantime::format_duration(opts.budget)
                    ));
                }
                let _ = session.settle(SETTLE_BOUND).await;
                let dir = format!("{}/n{n}/trial-{k}", self.id);
                let o = trial_options(opts, self.id, n, opts.trial, &dir);
                let lock_free = opts.lock_free_sales
                    && !session.info(self.id).map_err(|e| e.to_string())?.locks;
                let trial = level_trial(&dir, &self.bounded(session, &o).await?, lock_free)?;
                let _ = writeln!(
                    self.log,
                    "{}",
                    trial_line(self.id, n, k, opts.trials, &trial)
                );
                pooled[i].push(trial);
                self.publish(c, &pooled)?;
            }
        }
        Ok(())
    }

    /// Runs `o` on `session` within its load and [`LEVEL_SLACK`]; Ctrl-C stops it too (its
    /// summary says so).
    async fn bounded(&mut self, session: &mut Session, o: &RunOptions) -> Result<Summary, String> {
        let plan = session.plan(o).map_err(|e| e.to_string())?;
        let bound = o.workload.load.duration + LEVEL_SLACK;
        let child = self.cancel.child_token();
        let timer = {
            let child = child.clone();
            tokio::spawn(async move {
                tokio::time::sleep(bound).await;
                child.cancel();
            })
        };
        let result = session.trial(&plan, &child).await;
        timer.abort();
        let cut = child.is_cancelled() && !self.cancel.is_cancelled();
        match result {
            _ if cut => Err(format!(
                "{}: cut at its bound of {}",
                o.out.display(),
                humantime::format_duration(bound)
            )),
            Ok(t) => Ok(t.summary),
            Err(RunError::Interrupted) => Err("interrupted".into()),
            Err(e) => Err(format!("{}: {e}", o.out.display())),
        }
    }

    /// The strategy's levels as they stand, its fit, and contend.json rewritten.
    fn publish(&self, c: &mut Contend, pooled: &[Vec<LevelTrial>]) -> Result<(), String> {
        let entry = c.entries.last_mut().expect("pushed before its trials");
        entry.levels = self
            .opts
            .levels
            .iter()
            .zip(pooled)
            .filter(|(_, p)| !p.is_empty())
            .map(|(&n, p)| Level::of(n, p.clone()))
            .collect();
        entry.refit();
        c.elapsed_s = self.began.elapsed().as_secs_f64();
        c.write(&self.opts.out)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A lock-free trial's row (only `calibrate` asks for one, `lock_free_sales`): its audited
/// sales stand for grants; it has no acquire wait.
fn lock_free_trial(dir: &str, s: &Summary) -> LevelTrial {
    let outcome = |k: &str| s.outcomes.get(k).copied().unwrap_or(0);
    LevelTrial {
        dir: dir.to_string(),
        grants: (s.throughput.sales_per_s * s.duration_s).round() as u64,
        duration_s: s.duration_s,
        grants_per_s: s.throughput.sales_per_s,
        lock_timeouts: outcome("lock_timeout"),
        errors: s.errors + s.unknown,
        acquire_us: Default::default(),
        fairness: None,
        barges: 0,
        handoffs_with_waiter: 0,
        missed_wakeups: 0,
        safe: s.safe,
        interrupted: s.interrupted,
        cost: s.cost.clone(),
        environment: s.environment.clone(),
    }
}

/// A trial's row of contend.json from its summary: grants and waits are the recorder's.
fn level_trial(dir: &str, s: &Summary, lock_free: bool) -> Result<LevelTrial, String> {
    if lock_free {
        return Ok(lock_free_trial(dir, s));
    }
    let c = s
        .contention
        .as_ref()
        .ok_or_else(|| format!("{dir}: summary.json holds no contention (no lock taken?)"))?;
    let outcome = |k: &str| s.outcomes.get(k).copied().unwrap_or(0);
    let grants = c.acquire.count;
    Ok(LevelTrial {
        dir: dir.to_string(),
        grants,
        duration_s: s.duration_s,
        grants_per_s: if s.duration_s > 0.0 {
            grants as f64 / s.duration_s
        } else {
            0.0
        },
        lock_timeouts: outcome("lock_timeout"),
        errors: s.errors + s.unknown,
        acquire_us: c.acquire,
        fairness: c.fairness.clone(),
        barges: c.barges,
        handoffs_with_waiter: c.handoffs_with_waiter,
        missed_wakeups: c.missed_wakeups,
        safe: s.safe,
        interrupted: s.interrupted,
        cost: s.cost.clone(),
        environment: s.environment.clone(),
    })
}

fn trial_line(id: &str, n: u32, k: u32, trials: u32, t: &LevelTrial) -> String {
    use crate::record::Pct;
    use crate::report::format::{latency_parts, ms_table};
    let jain = t
        .fairness
        .as_ref()
        .map_or("-".into(), |f| format!("{:.3}", f.jain));
    let p99 = latency_parts(&t.acquire_us, Pct::P99, |_| false, ms_table)
        .map_or("-".into(), |(v, n)| format!("{v} ms ({n})"));
    format!(
        "{id:<22} N={n:<4} trial {k}/{trials}: {:.0} grants/s, acquire p99 {p99}, Jain {jain}, \
         {} lock timeouts{}",
        t.grants_per_s,
        t.lock_timeouts,
        if t.safe { "" } else { ", UNSAFE" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_double_up_to_the_maximum_and_end_on_it() {
        assert_eq!(plan_levels(64), [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(plan_levels(1), [1]);
        assert_eq!(plan_levels(48), [1, 2, 4, 8, 16, 32, 48]);
        assert_eq!(plan_levels(3), [1, 2, 3]);
        assert!(plan_levels(0).is_empty());
    }

    #[test]
    fn given_levels_are_sorted_without_repeats_and_bad_ones_named() {
        assert_eq!(parse_levels("8, 1,4,4").unwrap(), [1, 4, 8]);
        for (bad, says) in [
            ("0,2", "0 is out of range"),
            ("1,two", "`two` is not a count"),
            ("", "no level"),
            ("2000", "out of range"),
        ] {
            let e = parse_levels(bad).unwrap_err();
            assert!(e.contains(says) && e.contains("e.g. 1,2,4,8"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_level_is_a_closed_loop_of_its_contenders_on_one_key() {
        let base = Workload::parse("w.toml", "[inventory]\nskus = 4\nstock = 10", &[]).unwrap();
        let w = level_workload(&base, 32, Duration::from_secs(2));
        assert_eq!(w.load.mode, LoadMode::Closed);
        assert_eq!((w.load.clients, w.inventory.skus), (32, 1));
        assert_eq!(w.load.duration, Duration::from_secs(2));
        assert!(w.inventory.stock >= 10_000_000);
    }

    #[test]
    fn the_default_strategies_cover_every_lock_family() {
        use crate::strategy::Family;
        let families: Vec<Family> = DEFAULT_STRATEGIES
            .iter()
            .map(|id| strategy::find(id).unwrap().family())
            .collect();
        for f in Family::ALL {
            if matches!(f, Family::Libraries | Family::Controls) {
                continue;
            }
            assert!(families.contains(&f), "{f:?} has no representative");
        }
        assert!(
            DEFAULT_STRATEGIES
                .iter()
                .all(|id| strategy::find(id).unwrap().locks)
        );
    }
}

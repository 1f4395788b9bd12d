//! `lockbench calibrate`: each strategy on one hot key (a `contend` level) in several
//! environments — round trips and fsyncs made slower for the whole run by
//! `environment.rtt` / `environment.fsync` — fitted into `report::predict`'s model, and checked
//! on points the fit did not see. Writes `<out>/model.json` after every point, so Ctrl-C, an
//! error or `--budget` keep what was measured.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::contend::{self, ContendOptions};
use super::{RunError, ServerOptions, Source};
use crate::report::contend::LevelTrial;
use crate::report::predict::{Env, Model, Point};
use crate::workload::Workload;

/// One lock per family whose servers take both slow links and a slow disk (MariaDB's row
/// lock, Redis, ZooKeeper, etcd), and optimistic versioning: the pair whose order a faster disk
/// changed between two machines (issue 43).
pub const DEFAULT_STRATEGIES: [&str; 5] = [
    "mysql-for-update",
    "mysql-optimistic",
    "redis-setnx",
    "zookeeper",
    "etcd",
];
/// The fit's points, `rtt:fsync` added: each term alone at two sizes, and both at once.
pub const DEFAULT_POINTS: &str = "0:0,1ms:0,2ms:0,0:2ms,0:4ms,2ms:4ms";
/// The held-out point: inside the fitted range, on neither axis.
pub const DEFAULT_CHECK: &str = "1.5ms:3ms";

/// Round trip and fsync time added, as asked.
pub type At = (Duration, Duration);

/// What `calibrate` runs.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    pub strategies: Vec<String>,
    /// The workload file and its `--set` overrides: each point adds its environment's.
    pub workload_file: PathBuf,
    pub overrides: Vec<String>,
    /// Contenders on the key.
    pub contenders: u32,
    pub trials: u32,
    pub trial: Duration,
    pub warm_up: Duration,
    /// The fit's points, and those held out of it.
    pub points: Vec<At>,
    pub held_out: Vec<At>,
    /// No point starts after this.
    pub budget: Duration,
    pub out: PathBuf,
    pub servers: ServerOptions,
}

/// `RTT:FSYNC,…`, each a duration or 0, e.g. `0:0,1ms:0,0:2ms`.
pub fn parse_points(s: &str) -> Result<Vec<At>, String> {
    let expected = "expected RTT:FSYNC pairs, each a duration or 0, e.g. 0:0,1ms:0,0:2ms";
    let one = |d: &str| -> Result<Duration, String> {
        match d.trim() {
            "0" => Ok(Duration::ZERO),
            t => humantime::parse_duration(t).map_err(|e| format!("`{t}`: {e}; {expected}")),
        }
    };
    s.split(',')
        .map(|pair| {
            let (r, f) = pair
                .split_once(':')
                .ok_or_else(|| format!("`{pair}`: {expected}"))?;
            Ok((one(r)?, one(f)?))
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The folder of one point: `<strategy>/rtt<R>-fsync<F>`, in µs so every point has its own.
fn point_dir(id: &str, (r, f): At) -> String {
    format!("{id}/rtt{}us-fsync{}us", r.as_micros(), f.as_micros())
}

/// The workload of one point: the file, its overrides, then the point's environment.
fn workload_at(opts: &CalibrateOptions, (r, f): At) -> Result<Workload, RunError> {
    let mut sets = opts.overrides.clone();
    sets.push(format!("environment.rtt={}us", r.as_micros()));
    sets.push(format!("environment.fsync={}us", f.as_micros()));
    Workload::load(&opts.workload_file, &sets).map_err(|e| RunError::Options(e.to_string()))
}

fn contend_options(opts: &CalibrateOptions, id: &str, at: At) -> Result<ContendOptions, RunError> {
    Ok(ContendOptions {
        strategies: vec![id.to_string()],
        workload: workload_at(opts, at)?,
        workload_file: opts.workload_file.display().to_string(),
        levels: vec![opts.contenders],
        trials: opts.trials,
        trial: opts.trial,
        warm_up: opts.warm_up,
        budget: opts.budget,
        out: opts.out.join(point_dir(id, at)),
        servers: opts.servers.clone(),
        lock_free_sales: true,
    })
}

/// Every point's checks, for every strategy, before any server starts: a point that cannot
/// run (no root for a slow link, a lock-free strategy) fails here, not an hour in.
pub fn check(opts: &CalibrateOptions) -> Result<(), RunError> {
    let zero = (Duration::ZERO, Duration::ZERO);
    if !opts.points.contains(&zero) {
        return Err(RunError::Options(
            "--points: expected 0:0 among them, this machine as it is (the fit's zero)".into(),
        ));
    }
    for id in &opts.strategies {
        for &at in opts.points.iter().chain(&opts.held_out) {
            contend::check(&contend_options(opts, id, at)?)?;
        }
    }
    Ok(())
}

/// Runs every strategy at every point, fits, checks; returns the model (also in
/// `<out>/model.json`).
pub async fn calibrate_on(
    opts: &CalibrateOptions,
    source: &Source,
    cancel: &CancellationToken,
    log: &mut dyn Write,
) -> Result<Model, RunError> {
    let began = super::begin_in(&opts.out, source).await?;
    let mut m = Model::empty(
        &opts.workload_file.display().to_string(),
        (opts.contenders, opts.trials, opts.trial.as_secs_f64()),
        crate::record::machine::taken().cloned(),
    );
    let held = |at: &At| (*at, true);
    let all: Vec<(At, bool)> = (opts.points.iter().map(|a| (*a, false)))
        .chain(opts.held_out.iter().map(held))
        .collect();
    'strategies: for id in &opts.strategies {
        for &(at, held_out) in &all {
            if cancel.is_cancelled() || began.elapsed() >= opts.budget {
                break 'strategies;
            }
            let _ = writeln!(log, "{id}: rtt +{} ms, fsync +{} ms", ms(at.0), ms(at.1));
            let mut o = contend_options(opts, id, at)?;
            o.budget = opts.budget.saturating_sub(began.elapsed());
            let c = contend::contend_on(&o, source, cancel, log).await?;
            let entry = c.entries.first();
            if let Some(e) = entry.and_then(|e| e.error.clone()) {
                m.errors
                    .push((id.clone(), format!("at {}: {e}", point_dir(id, at))));
                continue 'strategies;
            }
            let Some(level) = entry.and_then(|e| e.levels.first()) else {
                continue;
            };
            let family = entry.expect("has a level").family;
            m.points
                .push(point(id, family, at, held_out, &level.trials));
            m.conclude();
            m.write(&opts.out).map_err(super::write_err(&opts.out))?;
        }
    }
    m.conclude();
    m.write(&opts.out).map_err(super::write_err(&opts.out))?;
    Ok(m)
}

/// A point from its trials: grants/s each, costs as the trials counted them.
fn point(
    id: &str,
    family: crate::strategy::Family,
    at: At,
    held_out: bool,
    trials: &[LevelTrial],
) -> Point {
    let mean = |f: &dyn Fn(&LevelTrial) -> Option<f64>| {
        let v: Vec<f64> = trials.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    Point {
        strategy: id.to_string(),
        family,
        injected: Env {
            rtt_ms: ms(at.0),
            fsync_ms: ms(at.1),
        },
        measured_rtt_ms: mean(&|t| t.environment.as_ref().and_then(|e| e.probe.rtt_ms)),
        measured_fsync_ms: mean(&|t| t.environment.as_ref().and_then(|e| e.probe.fsync_ms)),
        grants_per_s: trials.iter().map(|t| t.grants_per_s).collect(),
        dir: point_dir(id, at),
        held_out,
        round_trips_per_sale: mean(&|t| t.cost.as_ref().and_then(|c| c.round_trips_per_sale)),
        fsyncs_per_sale: mean(&|t| t.cost.as_ref().and_then(|c| c.fsyncs_per_sale)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_parse_and_bad_ones_say_the_form() {
        let p = parse_points(DEFAULT_POINTS).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(p[5], (Duration::from_millis(2), Duration::from_millis(4)));
        assert_eq!(
            parse_points(DEFAULT_CHECK).unwrap(),
            vec![(Duration::from_micros(1500), Duration::from_millis(3))]
        );
        let e = parse_points("1ms").unwrap_err();
        assert_contains!(e, "RTT:FSYNC");
        let e = parse_points("1ms:fast").unwrap_err();
        assert_contains!(e, "`fast`", "RTT:FSYNC");
    }

    #[test]
    fn each_point_has_its_own_folder() {
        let a = point_dir("zookeeper", (Duration::from_micros(1500), Duration::ZERO));
        assert_eq!(a, "zookeeper/rtt1500us-fsync0us");
    }
}

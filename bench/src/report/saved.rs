//! A results folder read back: each strategy's summary, timeline and latency histogram, for
//! the HTML report and its charts; a sweep's `sweep.json`; a job folder's parts (sweep, calm
//! compare, one compare per chaos scenario). Missing files become problems shown in the report,
//! not failures.

use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use super::Summary;
use super::error::{ReportError, read};
use super::hlog::read_hlog;
use super::layout::JobLayout;
use super::sweep::Sweep;

/// One second of `timeline.csv` (the columns the charts use).
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    /// Second since the start of the load.
    pub second: u32,
    /// Sales that completed in it.
    pub sold: u64,
    /// All completions in it.
    pub attempts: u64,
    /// Their p99 latency, µs (0 without completions).
    pub p99_us: u64,
    /// Active fault ids, e.g. `1+2` (empty: none).
    pub faults: String,
}

/// One strategy's saved results.
pub struct RunData {
    /// Its `summary.json` (or its entry of `compare.json`).
    pub summary: Summary,
    /// Its `timeline.csv` (empty when missing).
    pub timeline: Vec<TimelineRow>,
    /// Every outcome class of its `latency.hlog` merged (`None` when missing).
    pub latency: Option<Histogram<u64>>,
    /// Files that were missing or unreadable: shown in the report instead of failing it.
    pub problems: Vec<String>,
}

/// `tests/fixtures/summary.json` as a run of strategy `strategy` with no timeline or histogram
/// (the renderers' tests).
#[cfg(test)]
pub(crate) fn fixture_run(strategy: &str) -> RunData {
    let mut summary: Summary =
        serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
    summary.strategy = strategy.into();
    RunData {
        summary,
        timeline: Vec::new(),
        latency: None,
        problems: Vec::new(),
    }
}

/// What a results folder holds.
pub(super) enum Folder {
    /// One run (`summary.json`) or a comparison (`compare.json` and one subfolder per
    /// strategy).
    Runs {
        /// The runs, in the order of compare.json.
        runs: Vec<RunData>,
        /// Whether it is a comparison.
        compare: bool,
    },
    /// A sweep folder (`sweep.json`) or a job folder (`sweep/`, `calm/`, `chaos/<scenario>/`).
    Job(Box<Job>),
}

/// A run or a comparison: one part of a job.
pub(super) struct Part {
    /// Its folder.
    pub dir: PathBuf,
    /// Its runs, in the order of compare.json.
    pub runs: Vec<RunData>,
}

/// The parts of a job folder that are there (any may be missing: render what is there).
pub(super) struct Job {
    /// The job folder.
    pub dir: PathBuf,
    /// `sweep/sweep.json` (or `sweep.json` of a sweep folder given alone).
    pub sweep: Option<Sweep>,
    /// `calm/`: one calm run of each strategy.
    pub calm: Option<Part>,
    /// `chaos/<scenario>/`, by scenario name.
    pub chaos: Vec<(String, Part)>,
    /// `sale/<calm|scenario>/`: the sale without a fault first.
    pub sale: Vec<(String, Part)>,
    /// Parts that were missing or unreadable, in words.
    pub problems: Vec<String>,
}

/// Reads a results folder: a run, a comparison, a sweep or a job.
pub(super) fn load_folder(dir: &Path) -> Result<Folder, ReportError> {
    if !dir.is_dir() {
        return Err(ReportError::NoFolder {
            dir: dir.to_path_buf(),
        });
    }
    if dir.join("compare.json").is_file() || dir.join("summary.json").is_file() {
        let (runs, compare) = load(dir)?;
        return Ok(Folder::Runs { runs, compare });
    }
    if dir.join("sweep.json").is_file() {
        let mut job = Job::empty(dir);
        job.sweep = Some(read_sweep(&dir.join("sweep.json"))?);
        return Ok(Folder::Job(Box::new(job)));
    }
    let layout = JobLayout::new(dir);
    if layout.has_parts() {
        return Ok(Folder::Job(Box::new(load_job(&layout))));
    }
    Err(ReportError::NotResults {
        dir: dir.to_path_buf(),
    })
}

impl Job {
    pub(super) fn empty(dir: &Path) -> Job {
        Job {
            dir: dir.to_path_buf(),
            sweep: None,
            calm: None,
            chaos: Vec::new(),
            sale: Vec::new(),
            problems: Vec::new(),
        }
    }
}

fn read_sweep(path: &Path) -> Result<Sweep, ReportError> {
    Sweep::read(path).map_err(|e| {
        // Sweep::read names the file already; ReportError::Parse names it too.
        let msg = format!("{e:#}");
        let prefix = format!("{}: ", path.display());
        ReportError::Parse {
            path: path.to_path_buf(),
            msg: msg.strip_prefix(&prefix).unwrap_or(&msg).to_string(),
        }
    })
}

/// A job's parts: each one missing or unreadable is a problem in the page, not a failure, so
/// a job stopped early still renders what it measured.
fn load_job(layout: &JobLayout) -> Job {
    let mut job = Job::empty(layout.root());
    if layout.sweep_json().is_file() {
        match read_sweep(&layout.sweep_json()) {
            Ok(s) => job.sweep = Some(s),
            Err(e) => job.problems.push(e.to_string()),
        }
    } else if layout.sweep().is_dir() {
        job.problems
            .push("sweep/ holds no sweep.json: the sweep finished no strategy".into());
    }
    let mut part = |sub: &Path, name: &str| -> Option<Part> {
        match load(sub) {
            Ok((runs, _)) => Some(Part {
                dir: sub.to_path_buf(),
                runs,
            }),
            Err(e) => {
                job.problems.push(format!("{name}: {e}"));
                None
            }
        }
    };
    let calm = layout.calm();
    let calm = calm.is_dir().then(|| part(&calm, "calm")).flatten();
    let mut chaos = Vec::new();
    for (name, sub) in layout.scenarios() {
        if let Some(p) = part(&sub, &format!("chaos/{name}")) {
            chaos.push((name, p));
        }
    }
    let mut sale = Vec::new();
    for (name, sub) in layout.sales() {
        if let Some(p) = part(&sub, &format!("sale/{name}")) {
            sale.push((name, p));
        }
    }
    job.calm = calm;
    job.chaos = chaos;
    job.sale = sale;
    job
}

/// The summaries of a run's folder (summary.json) or a comparison's (compare.json), without
/// their timelines and histograms.
pub fn summaries(dir: &Path) -> Result<Vec<Summary>, ReportError> {
    Ok(load(dir)?.0.into_iter().map(|r| r.summary).collect())
}

/// The runs of a folder and whether it is a comparison.
pub(super) fn load(dir: &Path) -> Result<(Vec<RunData>, bool), ReportError> {
    let parse = |path: &Path, e: serde_json::Error| ReportError::Parse {
        path: path.to_path_buf(),
        msg: format!("not a lockbench summary ({}): {e}", super::SCHEMA),
    };
    if !dir.is_dir() {
        return Err(ReportError::NoFolder {
            dir: dir.to_path_buf(),
        });
    }
    let compare = dir.join("compare.json");
    let single = dir.join("summary.json");
    if compare.is_file() {
        let summaries: Vec<Summary> =
            serde_json::from_slice(&read(&compare)?).map_err(|e| parse(&compare, e))?;
        if summaries.is_empty() {
            return Err(ReportError::Parse {
                path: compare,
                msg: "no strategy finished: nothing to report".into(),
            });
        }
        let runs = summaries
            .into_iter()
            .map(|s| {
                let sub = dir.join(&s.strategy);
                load_run(s, &sub)
            })
            .collect();
        Ok((runs, true))
    } else if single.is_file() {
        let s: Summary = serde_json::from_slice(&read(&single)?).map_err(|e| parse(&single, e))?;
        Ok((vec![load_run(s, dir)], false))
    } else {
        Err(ReportError::NotResults {
            dir: dir.to_path_buf(),
        })
    }
}

fn load_run(summary: Summary, dir: &Path) -> RunData {
    let mut problems = Vec::new();
    let timeline = match read_timeline(&dir.join("timeline.csv")) {
        Ok(t) => t,
        Err(e) => {
            problems.push(e.to_string());
            Vec::new()
        }
    };
    let latency = match read_hlog(&dir.join("latency.hlog")) {
        Ok(h) => Some(h),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    RunData {
        summary,
        timeline,
        latency,
        problems,
    }
}

/// Reads `timeline.csv` by column name, so added columns do not break old reports.
pub fn read_timeline(path: &Path) -> Result<Vec<TimelineRow>, ReportError> {
    let text = String::from_utf8(read(path)?).map_err(|e| ReportError::Parse {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    let bad = |msg: String| ReportError::Parse {
        path: path.to_path_buf(),
        msg,
    };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| bad(format!("no `{name}` column")))
    };
    let (c_second, c_sold, c_attempts, c_p99) = (
        col("second")?,
        col("sold")?,
        col("attempts")?,
        col("p99_us")?,
    );
    let c_faults = col("faults").ok();
    lines
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, line)| {
            let cells: Vec<&str> = line.split(',').collect();
            let num = |c: usize| -> Result<u64, ReportError> {
                cells
                    .get(c)
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad(format!("line {}: column {} is not a number", i + 2, c + 1)))
            };
            Ok(TimelineRow {
                second: num(c_second)? as u32,
                sold: num(c_sold)?,
                attempts: num(c_attempts)?,
                p99_us: num(c_p99)?,
                faults: c_faults
                    .and_then(|c| cells.get(c))
                    .unwrap_or(&"")
                    .to_string(),
            })
        })
        .collect()
}

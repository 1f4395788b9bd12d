//! `report.html`: one self-contained page per results folder (inline CSS and SVG, no scripts,
//! no external references) rendered from the saved files only, so any folder can be re-rendered
//! without servers: `summary.json` / `compare.json`, `timeline.csv`, `latency.hlog`.
//!
//! One file per page, each built from the kit below it, none importing another page:
//! - `run`: one run or a comparison;
//! - `job`: a job or sweep folder (capacity, calm run, chaos), with `needs`: which strategies
//!   meet `--needs`;
//! - `versions`: a `scripts/versions.sh` folder (server builds side by side);
//! - `contend`: a `lockbench contend` folder (the cost of contention);
//! - `predict`: a `lockbench calibrate` folder (what a grant costs, predicted against measured);
//! - the kit: `page` (head, style, escaping, figures, grouping by family), `tables` (the
//!   headline table and the tables of runs), `sale` (what each run's flash sale cost), `contention` (how locks shared their keys),
//!   `work` (the servers' work per grant),
//!   `environment` (versions, servers, reproduction).
//!
//! This file only picks the page and writes it.

mod contend;
mod contention;
mod environment;
mod job;
mod needs;
mod page;
mod predict;
mod run;
mod sale;
mod tables;
mod versions;
mod work;

use std::path::{Path, PathBuf};

use super::error::{ReportError, write_whole};
use super::model::Model;
use super::needs::Needs;
use super::saved::{Folder, load_folder};

/// Renders `dir/report.html` and its charts (`dir/charts/`) from the results in `dir` (one
/// run, a comparison, a sweep or a job folder) and returns the path of the page. A sweep or
/// job folder also gets `report.json`: the conclusions the page states ([`Model`]).
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    write_report_with(dir, None)
}

/// `--needs` judges only a job or a sweep: refused for `dir`, a folder of `what`.
fn no_needs(needs: Option<&Needs>, dir: &Path, what: &'static str) -> Result<(), ReportError> {
    match needs {
        Some(_) => Err(ReportError::NeedsJob {
            dir: dir.to_path_buf(),
            what,
        }),
        None => Ok(()),
    }
}

/// [`write_report`], judging the strategies of a sweep or a job folder against `needs` (see
/// [`Needs`]): the page lists which qualify and why. A run or a comparison alone cannot answer
/// them (no capacity, no chaos part), so `needs` there is an error.
pub fn write_report_with(dir: &Path, needs: Option<&Needs>) -> Result<PathBuf, ReportError> {
    if let Some(builds) = versions_folder(dir) {
        no_needs(
            needs,
            dir,
            "a versions.sh folder of server builds side by side",
        )?;
        return write_whole(
            dir,
            "report.html",
            versions::render(dir, &builds).as_bytes(),
        );
    }
    if dir.join("model.json").is_file() {
        no_needs(
            needs,
            dir,
            "a calibrate folder (no capacity, no chaos part)",
        )?;
        let path = dir.join("model.json");
        let m =
            super::predict::Model::read(&path).map_err(|msg| ReportError::Parse { path, msg })?;
        return write_whole(dir, "report.html", predict::render(dir, &m).as_bytes());
    }
    if dir.join("contend.json").is_file() {
        no_needs(needs, dir, "a contend folder (no capacity, no chaos part)")?;
        let path = dir.join("contend.json");
        let mut c = super::contend::Contend::read(&path).map_err(|e| ReportError::Parse {
            path,
            msg: format!("{e:#}"),
        })?;
        // The fit is derived from the trials: refitted by this lockbench and saved with them, so
        // the page and contend.json agree (the trials themselves are untouched).
        c.entries
            .iter_mut()
            .for_each(super::contend::ContendEntry::refit);
        c.write(dir).map_err(|source| ReportError::Write {
            path: dir.join("contend.json"),
            source,
        })?;
        return write_whole(dir, "report.html", contend::render(dir, &c)?.as_bytes());
    }
    let page = match load_folder(dir)? {
        Folder::Job(job) => {
            let model = Model::of(&job, needs);
            model.write(dir)?;
            job::render(&job, &model)?
        }
        Folder::Runs { runs, compare } => {
            no_needs(needs, dir, "one run or one comparison")?;
            run::render(dir, &runs, compare)?
        }
    };
    write_whole(dir, "report.html", page.as_bytes())
}

/// The builds of a `scripts/versions.sh` folder: `<key>-<build>/sweep/sweep.json` inside, and
/// none of a run's, comparison's, sweep's or job's files at its top.
fn versions_folder(dir: &Path) -> Option<Vec<super::versions::Build>> {
    let own = [
        "summary.json",
        "compare.json",
        "sweep.json",
        "contend.json",
        "model.json",
        "sweep",
        "calm",
    ];
    if own.iter().any(|f| dir.join(f).exists()) {
        return None;
    }
    super::versions::load(dir).ok()
}

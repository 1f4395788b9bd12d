//! `report.html`: one self-contained page per results folder (inline CSS and SVG, no scripts,
//! no external references) rendered from the saved files only, so any folder can be re-rendered
//! without servers: `summary.json` / `compare.json`, `timeline.csv`, `latency.hlog`.
//!
//! One file per page, each built from the kit below it, none importing another page:
//! - `run`: one run or a comparison;
//! - `job`: a job or sweep folder (capacity, calm run, chaos), with `needs`: which strategies
//!   meet `--needs`;
//! - the kit: `page` (head, style, escaping, figures, grouping by family), `tables` (the
//!   headline table and the tables of runs), `environment` (versions, servers, reproduction).
//!
//! This file only picks the page and writes it.

mod environment;
mod job;
mod needs;
mod page;
mod run;
mod tables;

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

/// [`write_report`], judging the strategies of a sweep or a job folder against `needs` (see
/// [`Needs`]): the page lists which qualify and why. A run or a comparison alone cannot answer
/// them (no capacity, no chaos part), so `needs` there is an error.
pub fn write_report_with(dir: &Path, needs: Option<&Needs>) -> Result<PathBuf, ReportError> {
    let page = match load_folder(dir)? {
        Folder::Job(job) => {
            let model = Model::of(&job, needs);
            model.write(dir)?;
            job::render(&job, &model)?
        }
        Folder::Runs { runs, compare } => {
            if needs.is_some() {
                return Err(ReportError::NeedsJob {
                    dir: dir.to_path_buf(),
                });
            }
            run::render(dir, &runs, compare)?
        }
    };
    write_whole(dir, "report.html", page.as_bytes())
}

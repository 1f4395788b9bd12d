//! What a job's report concludes, strategy by strategy, as one serializable model: the
//! plain-words line of each strategy (every number linked to the cell it came from), its
//! capacity, and, with `--needs`, whether it meets them and why. `report.html`'s summary and
//! needs sections render it, and `report.json` beside the page is the same model, so a
//! script reads exactly what the page says. The tables and charts read the saved results
//! themselves (`saved::Job`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::{ReportError, write_whole};
use super::evidence::{Capacity, Evidence, Said};
use super::needs::{Judgement, Needs};
use super::saved::{Job, Part};
use super::{Summary, sweep::Sweep};
use crate::strategy::{Family, Kind};

/// Schema id of `report.json`; bump on any incompatible change.
pub const REPORT_SCHEMA: &str = "lockbench.report/1";

/// The conclusions of one job (or sweep) folder.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    /// [`REPORT_SCHEMA`].
    pub schema: &'static str,
    /// Every strategy: the sweep's order, then any only in the calm or chaos parts.
    pub strategies: Vec<Conclusion>,
    /// Whether each strategy meets the needs asked for (`lockbench report --needs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs: Option<NeedsAnswer>,
    /// Parts missing from the folder, or unreadable, in words.
    pub problems: Vec<String>,
}

/// What the report says of one strategy.
#[derive(Debug, Clone, Serialize)]
pub struct Conclusion {
    /// Strategy id.
    pub strategy: String,
    /// Its family (`null`: unknown to this lockbench and absent from the sweep).
    pub family: Option<Family>,
    /// A known-unsafe control (it makes no safety claim).
    pub control: bool,
    /// What the sweep says its capacity is (`null`: not measured, or no step passed).
    pub capacity: Option<Capacity>,
    /// The plain-words line: capacity, calm run and every fault, as plain text.
    pub text: String,
    /// The same line in pieces, each number with the id of the page's cell it came from.
    pub line: Said,
}

/// The needs asked for, and every strategy judged against them.
#[derive(Debug, Clone, Serialize)]
pub struct NeedsAnswer {
    /// The needs as given.
    pub given: String,
    /// Whether a fenced verdict counts as safe.
    pub fenced_ok: bool,
    /// One per strategy, in the order of `strategies`.
    pub judgements: Vec<Judgement>,
}

impl Model {
    /// Concludes what `job` holds, judging it against `needs` when given.
    pub(super) fn of(job: &Job, needs: Option<&Needs>) -> Model {
        let ids = strategies(job);
        let evidence: Vec<Evidence<'_>> = ids.iter().map(|id| evidence(job, id)).collect();
        Model {
            schema: REPORT_SCHEMA,
            strategies: evidence
                .iter()
                .map(|e| Conclusion {
                    strategy: e.strategy.to_string(),
                    family: e.family,
                    control: e.control,
                    capacity: e.entry.and_then(Capacity::of),
                    text: e.line().text(),
                    line: e.line(),
                })
                .collect(),
            needs: needs.map(|n| NeedsAnswer {
                given: n.given.clone(),
                fenced_ok: n.fenced_ok,
                judgements: evidence.iter().map(|e| n.judge(e)).collect(),
            }),
            problems: job.problems.clone(),
        }
    }

    /// Writes `<dir>/report.json` (through a temporary file, so a reader never sees half).
    pub(super) fn write(&self, dir: &Path) -> Result<PathBuf, ReportError> {
        let text = serde_json::to_string_pretty(self).expect("the model serializes") + "\n";
        write_whole(dir, "report.json", text.as_bytes())
    }
}

/// Every strategy of the job: the sweep's order, then any only in the calm or chaos parts.
fn strategies(job: &Job) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let sweep = job.sweep.iter().flat_map(|s| &s.entries);
    let runs = job
        .calm
        .iter()
        .chain(job.chaos.iter().map(|(_, p)| p))
        .chain(job.sale.iter().map(|(_, p)| p))
        .flat_map(|p| &p.runs);
    for id in sweep
        .map(|e| &e.strategy)
        .chain(runs.map(|r| &r.summary.strategy))
    {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    ids
}

/// A strategy's run in one part of the job.
pub(super) fn run_in<'a>(part: &'a Part, strategy: &str) -> Option<&'a Summary> {
    part.runs
        .iter()
        .map(|r| &r.summary)
        .find(|s| s.strategy == strategy)
}

/// A strategy's family: this lockbench's registry, else what the sweep recorded.
pub(super) fn family(sweep: Option<&Sweep>, strategy: &str) -> Option<Family> {
    crate::strategy::find(strategy)
        .ok()
        .map(|i| i.family())
        .or_else(|| sweep?.entry(strategy).map(|e| e.family))
}

fn evidence<'a>(job: &'a Job, strategy: &'a str) -> Evidence<'a> {
    let entry = job.sweep.as_ref().and_then(|s| s.entry(strategy));
    let calm = job.calm.as_ref().and_then(|p| run_in(p, strategy));
    let chaos: Vec<(&str, Option<&Summary>)> = job
        .chaos
        .iter()
        .map(|(name, p)| (name.as_str(), run_in(p, strategy)))
        .collect();
    let sale: Vec<(&str, Option<&Summary>)> = job
        .sale
        .iter()
        .map(|(name, p)| (name.as_str(), run_in(p, strategy)))
        .collect();
    // What the results say first: the registry may not know a strategy of another version.
    let control = calm
        .or_else(|| chaos.iter().find_map(|(_, r)| *r))
        .or_else(|| sale.iter().find_map(|(_, r)| *r))
        .map(|s| !s.claims_safety)
        .or_else(|| entry.map(|e| e.kind == Kind::Control))
        .or_else(|| {
            crate::strategy::find(strategy)
                .ok()
                .map(|i| i.kind == Kind::Control)
        })
        .unwrap_or(false);
    Evidence {
        strategy,
        family: family(job.sweep.as_ref(), strategy),
        control,
        sweep: job.sweep.as_ref(),
        entry,
        calm_part: job.calm.is_some(),
        calm,
        chaos,
        sale,
    }
}

//! What a job's report concludes, strategy by strategy, as one serializable model: the
//! plain-words line of each strategy (every number linked to the cell it came from), its
//! capacity, and, with `--needs`, whether it meets them and why. `report.html`'s summary and
//! needs sections render it, and `report.json` beside the page is the same model, so a
//! script reads exactly what the page says. The tables and charts read the saved results
//! themselves (`saved::Job`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::{ReportError, write_whole};
use super::evidence::{Capacity, Evidence, Said};
use super::format::secs;
use super::needs::{Judgement, Needs};
use super::saved::{Job, Part};
use super::{Summary, sweep::Sweep};
use crate::record::DangerWindow;
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

/// The plain-words line of one run (`run`, `compare`, a sweep's step), without the strategy's
/// name: its sale, then what a calm run's line says (verdict, p99, how busy the lock was),
/// then its faults as a chaos scenario's line says them. The printed table's line under each
/// row: the same words as report.html's summary.
pub fn run_line(s: &Summary) -> String {
    let scenario = s.chaos_file.as_deref().map_or("faults", |f| {
        Path::new(f)
            .file_stem()
            .and_then(|x| x.to_str())
            .unwrap_or(f)
    });
    let e = Evidence {
        strategy: &s.strategy,
        family: family(None, &s.strategy),
        control: !s.claims_safety,
        sweep: None,
        entry: None,
        calm_part: false,
        calm: None,
        chaos: Vec::new(),
        sale: vec![("sale", Some(s))],
    };
    let mut said = Said::default();
    if let Some(sale) = e.sale() {
        said = said.t(format!("in the sale {}; ", sale.line()));
    }
    said = said.and(e.run_said(s));
    if !s.faults.is_empty() {
        said = said.t("; ").and(e.chaos_said(scenario, Some(s)));
    }
    if let Some(line) = s.danger_window.as_ref().and_then(danger_line) {
        said = said.t(format!("; {line}"));
    }
    said.t(".").text()
}

/// The danger window in plain words (`None` when no lease was lost): "a holder went on
/// 2.134 s past its lease before it noticed (n=1), and wrote once after the loss, 2.140 s
/// past it, refused by the fence (loss moment: lease arithmetic)".
pub fn danger_line(d: &DangerWindow) -> Option<String> {
    if d.lost == 0 {
        return d.unnoticed_went_on_max_us.map(|us| {
            format!(
                "{} never told of its lost lease went on {} s after another holder got it",
                plural(d.unnoticed_overlapped, "holder"),
                secs(us as f64 / 1e6)
            )
        });
    }
    let times = |n: u64| match n {
        1 => "once".to_string(),
        n => format!("{n} times"),
    };
    let s_of = |us: u64| format!("{} s", secs(us as f64 / 1e6));
    let mut line = match (d.loss_to_notice_p50_us, d.loss_to_notice_max_us) {
        (Some(p50), Some(max)) if d.n > 1 => format!(
            "holders went on {} past their lease before they noticed (median of n={}; longest {})",
            s_of(p50),
            d.n,
            s_of(max)
        ),
        (Some(_), Some(max)) => format!(
            "a holder went on {} past its lease before it noticed (n=1)",
            s_of(max)
        ),
        _ => format!("{} lost", plural(d.lost, "lease")),
    };
    if d.writes_after_loss > 0 {
        let refused = match d.refused_by_fence {
            0 => String::new(),
            r if r == d.writes_after_loss => ", refused by the fence".into(),
            r => format!(", {r} of them refused by the fence"),
        };
        let _ = write!(
            line,
            ", and wrote {} after the loss, up to {} past it{refused}",
            times(d.writes_after_loss),
            s_of(d.write_after_loss_max_us.unwrap_or(0))
        );
    }
    if d.unnoticed > 0 {
        let _ = write!(
            line,
            "; {} never noticed",
            plural(d.unnoticed, "lost lease")
        );
    }
    if let Some(us) = d.unnoticed_went_on_max_us {
        let _ = write!(
            line,
            "; {} never told went on up to {} s after another holder got it",
            plural(d.unnoticed_overlapped, "holder"),
            secs(us as f64 / 1e6)
        );
    }
    if let Some(source) = &d.source {
        let _ = write!(line, " (loss moment: {})", source.replace('-', " "));
    }
    Some(line)
}

/// `1 lease`, `2 leases`.
fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
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

#[cfg(test)]
mod danger_tests {
    use super::*;

    fn window(n: u64, writes: u64, refused: u64) -> DangerWindow {
        DangerWindow {
            n,
            lost: n,
            loss_to_notice_p50_us: Some(1_812_000),
            loss_to_notice_max_us: Some(2_400_000),
            writes_after_loss: writes,
            write_after_loss_max_us: (writes > 0).then_some(1_900_000),
            refused_by_fence: refused,
            source: Some("lease-arithmetic".into()),
            ..DangerWindow::default()
        }
    }

    #[test]
    fn a_danger_window_reads_in_plain_words() {
        assert_eq!(
            danger_line(&window(1, 1, 1)).unwrap(),
            "a holder went on 2.400 s past its lease before it noticed (n=1), and wrote once \
             after the loss, up to 1.900 s past it, refused by the fence (loss moment: lease \
             arithmetic)"
        );
        assert_eq!(
            danger_line(&window(3, 2, 0)).unwrap(),
            "holders went on 1.812 s past their lease before they noticed (median of n=3; \
             longest 2.400 s), and wrote 2 times after the loss, up to 1.900 s past it (loss \
             moment: lease arithmetic)"
        );
        assert_eq!(danger_line(&DangerWindow::default()), None, "nothing lost");
        let figures = crate::report::format::danger_window(&window(3, 2, 1));
        assert_eq!(
            figures,
            "n=3, loss → notice p50 1.812 s, max 2.400 s; 2 writes after the loss, longest \
             1.900 s past it, 1 refused by a fence; loss moment: lease-arithmetic"
        );
    }
}

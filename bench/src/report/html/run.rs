//! The page of one run (`summary.json`) or a comparison (`compare.json`): the headline table,
//! notes, charts, utilization, faults and phases, and how to reproduce the runs.

use std::fmt::Write as _;
use std::path::Path;

use super::environment::{environment, write_effective_workload};
use super::page::{caption, esc, family_of, figure, machines, page_end, page_start};
use super::tables::{
    Columns, TableSpec, faults_table, headline_note, headline_table, notes, phases, reads_table,
    utilization,
};
use crate::report::charts;
use crate::report::error::ReportError;
use crate::report::saved::RunData;

/// The page of one run or a comparison, with its charts (drawn into `dir/charts/`) and the
/// effective workload beside it.
pub(super) fn render(dir: &Path, runs: &[RunData], compare: bool) -> Result<String, ReportError> {
    let charts = charts::render_all(runs, &dir.join("charts"))?;
    let exact = write_effective_workload(dir, &runs[0].summary)?;
    Ok(page(dir, runs, compare, &charts, exact.as_deref()))
}

fn page(
    dir: &Path,
    runs: &[RunData],
    compare: bool,
    charts: &[charts::Chart],
    exact: Option<&Path>,
) -> String {
    let mut h = String::new();
    let names: Vec<&str> = runs.iter().map(|r| r.summary.strategy.as_str()).collect();
    let first = &runs[0].summary;
    // Beyond a handful, the names are in the table, not the title.
    let title = if compare && names.len() > 5 {
        format!("lockbench compare: {} strategies", names.len())
    } else if compare {
        format!("lockbench compare: {}", names.join(", "))
    } else {
        format!("lockbench run: {}", first.strategy)
    };
    page_start(&mut h, &title);
    machines(
        &mut h,
        runs.iter().filter_map(|r| r.summary.machine.as_ref()),
    );
    let _ = writeln!(
        h,
        "<p>Workload <code>{}</code>{}; started {}; seed {}. Latency is measured from each \
         attempt's intended start (queueing included). Safety comes from the audit of the store \
         and the lease log, never from client counters.</p>",
        esc(&first.workload_file),
        first
            .chaos_file
            .as_deref()
            .map(|c| format!(", chaos <code>{}</code>", esc(c)))
            .unwrap_or_default(),
        esc(&first.started_at),
        first.seed
    );
    headline(&mut h, runs);
    notes(&mut h, runs);
    let _ = writeln!(h, "<h2>Charts</h2>");
    for c in charts {
        let png = format!("charts/{}.png", c.kind.file());
        figure(&mut h, c, &caption(c.kind, runs), &png);
    }
    utilization(&mut h, runs);
    super::contention::contention_table(&mut h, runs);
    super::contention::danger_table(&mut h, runs);
    super::work::server_work(&mut h, runs);
    faults(&mut h, runs);
    environment(&mut h, runs, compare, exact, "");
    page_end(
        &mut h,
        dir,
        "Charts also in <code>charts/</code> (SVG, PNG).",
    );
    h
}

fn headline(h: &mut String, runs: &[RunData]) {
    let _ = writeln!(h, "<h2>Results</h2>");
    headline_table(h, runs, &compare_spec());
    let _ = writeln!(h, "<p><small>{}</small></p>", headline_note());
    reads_table(h, runs);
    super::sale::sale_table(h, runs, "h2");
}

fn faults(h: &mut String, runs: &[RunData]) {
    if runs.iter().all(|r| r.summary.faults.is_empty()) {
        return;
    }
    let _ = writeln!(h, "<h2>Faults</h2>");
    faults_table(h, runs, "faults");
    let _ = writeln!(h, "<h2>Phases</h2>");
    phases(h, runs, "h3");
}

/// The compare page's table: every headline column, no cell ids.
fn compare_spec() -> TableSpec<'static> {
    TableSpec {
        id: "headline".into(),
        cell_id: None,
        lead: Vec::new(),
        fields: Columns::All,
        family: &family_of,
    }
}

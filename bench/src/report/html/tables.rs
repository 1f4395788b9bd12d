//! The tables of runs a page shows: the headline table (every number with the summary.json
//! field it comes from), reads, notes, lock utilization, faults and phases.

use std::fmt::Write as _;

use super::page::{by_family, esc, family_row, note_list};
use crate::check::Verdict;
use crate::record::Pct;
use crate::report::Summary;
use crate::report::evidence::Recovery;
use crate::report::format::{
    latency_cell, ms_exact, or_dash, percent, probe_rtt, rate_cell, secs, too_few_note,
};
use crate::report::saved::RunData;
use crate::report::table::heading as h;
use crate::strategy::Family;

/// The headline columns: heading, `data-field` (a path into summary.json, or a derived name),
/// and the short name a job page gives the cell's id (`calm-<strategy>-<short>`).
pub(super) const HEADLINE: [(&str, &str, &str); 17] = [
    (h::SALES, "throughput.sales_per_s", "sales"),
    (h::UTIL, "utilization.overall", "util"),
    (h::STARTED, "started_fraction", "started"),
    (h::P50, "latency_us.p50", "p50"),
    (h::P99, "latency_us.p99", "p99"),
    (h::P999, "latency_us.p999", "p999"),
    (h::OVERSELL, "oversell", "oversell"),
    (h::LOST, "lost_updates", "lost-updates"),
    (h::DOUBLE, "double_grant_incidents", "double-grants"),
    (h::LEASES_LOST, "lease_lost", "leases-lost"),
    (h::STALE, "stale_rejected", "stale"),
    (h::ERRORS, "errors", "errors"),
    (h::UNKNOWN, "unknown", "unknown"),
    ("recovery (s, max)", "recovery_s", "recovery"),
    (h::LOCK, "lock_verdict", "lock"),
    (h::STORE, "store_verdict", "store"),
    (h::VERDICT, "verdict", "verdict"),
];

/// One cell of the headline table: the JSON value it comes from and how it is shown.
struct Cell {
    field: &'static str,
    value: serde_json::Value,
    text: String,
}

fn headline_cells(s: &Summary) -> Vec<Cell> {
    let json = serde_json::to_value(s).expect("summary serialises");
    HEADLINE
        .iter()
        .map(|&(_, field, _)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let value = json.get_pointer(&pointer);
            let text = match field {
                "throughput.sales_per_s" => rate_cell(s.throughput.sales_per_s),
                "started_fraction" => percent(s.started_fraction),
                "utilization.overall" => or_dash(value.as_f64(), |u| u.to_string()),
                "lock_verdict" => Verdict::lock_text(s.lock_verdict).into(),
                "store_verdict" => Verdict::store_text(s.store_verdict).into(),
                f if f.starts_with("latency_us.") => {
                    let p = match f {
                        "latency_us.p50" => Pct::P50,
                        "latency_us.p99" => Pct::P99,
                        _ => Pct::P999,
                    };
                    latency_cell(&s.latency_us, p, |q| s.among_unstarted(q), ms_exact)
                }
                _ => value.as_u64().map(|n| n.to_string()).unwrap_or_default(),
            };
            match field {
                "recovery_s" => {
                    let r = max_recovery(s);
                    Cell {
                        field,
                        value: r.map_or(serde_json::Value::Null, serde_json::Value::from),
                        // The worst fault decides: never a partial maximum.
                        text: Recovery::of(s).cell(),
                    }
                }
                "verdict" => Cell {
                    field,
                    value: serde_json::Value::from(s.headline()),
                    text: s.headline().into(),
                },
                _ => Cell { field, value, text },
            }
        })
        .collect()
}

trait Pointer {
    fn get_pointer(&self, p: &str) -> serde_json::Value;
}

impl Pointer for serde_json::Value {
    fn get_pointer(&self, p: &str) -> serde_json::Value {
        self.pointer(p).cloned().unwrap_or(serde_json::Value::Null)
    }
}

/// The longest recovery of a run's faults; `None` without any measured recovery.
fn max_recovery(s: &Summary) -> Option<f64> {
    s.faults
        .iter()
        .filter_map(|f| f.recovery_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
}

/// A column a job page puts before the headline's: heading, short name (for the cell's id),
/// and the cell of a run (its value for `data-value`, its text).
pub(super) struct Lead<'a> {
    /// Column heading.
    pub heading: &'static str,
    /// Short name in the cell's id.
    pub short: &'static str,
    /// The cell of a run.
    pub cell: LeadCell<'a>,
}

/// A lead column's cell of a run: its value (for `data-value`) and its text.
pub(super) type LeadCell<'a> = Box<dyn Fn(&Summary) -> (serde_json::Value, String) + 'a>;

/// The id of a cell from (strategy, short name).
pub(super) type CellId<'a> = &'a dyn Fn(&str, &str) -> String;

/// How a table of runs is drawn.
pub(super) struct TableSpec<'a> {
    /// The table's `id`.
    pub id: String,
    /// The id of a cell from (strategy, short name); `None`: cells get no id.
    pub cell_id: Option<CellId<'a>>,
    /// Columns before the headline's.
    pub lead: Vec<Lead<'a>>,
    /// The headline columns shown, in [`HEADLINE`] order.
    pub fields: Columns<'a>,
    /// A strategy's family: rows are grouped by it when there is more than one.
    pub family: &'a dyn Fn(&str) -> Option<Family>,
}

/// Which of the [`HEADLINE`] columns a table shows, by `data-field` name.
#[derive(Clone, Copy)]
pub(super) enum Columns<'a> {
    All,
    Except(&'a [&'a str]),
    Only(&'a [&'a str]),
}

impl Columns<'_> {
    fn shows(&self, field: &str) -> bool {
        match self {
            Columns::All => true,
            Columns::Except(out) => !out.contains(&field),
            Columns::Only(shown) => shown.contains(&field),
        }
    }
}

/// The row class and badge of a run.
fn row_class(s: &Summary) -> (&'static str, &'static str) {
    match (s.claims_safety, s.headline()) {
        (false, _) => ("control", "<span class=\"badge b-control\">control</span>"),
        (true, "safe") => ("safe", ""),
        (true, "fenced") => ("fenced", "<span class=\"badge b-fenced\">fenced</span>"),
        (true, _) => ("unsafe", "<span class=\"badge b-unsafe\">UNSAFE</span>"),
    }
}

/// The results table: one row per run, grouped by family, every number with the summary.json
/// field it comes from (`data-field`, `data-value`).
pub(super) fn headline_table(h: &mut String, runs: &[RunData], t: &TableSpec<'_>) {
    let shown: Vec<(&str, &str, &str)> = HEADLINE
        .iter()
        .copied()
        .filter(|(_, f, _)| t.fields.shows(f))
        .collect();
    let columns = 1 + t.lead.len() + shown.len();
    let _ = writeln!(
        h,
        "<div class=\"scroll\"><table id=\"{}\" class=\"runs\">\n<thead><tr><th>strategy</th>{}{}</tr></thead>\n<tbody>",
        esc(&t.id),
        t.lead
            .iter()
            .map(|l| format!("<th>{}</th>", esc(l.heading)))
            .collect::<String>(),
        shown
            .iter()
            .map(|(head, _, _)| format!("<th>{}</th>", esc(head)))
            .collect::<String>()
    );
    let groups = by_family(runs, |r| (t.family)(&r.summary.strategy));
    for (title, group) in &groups {
        family_row(h, groups.len(), title, columns);
        for r in group {
            let s = &r.summary;
            let (class, badge) = row_class(s);
            let _ = write!(
                h,
                "<tr class=\"{class}\" data-strategy=\"{}\"><td>{}{badge}</td>",
                esc(&s.strategy),
                esc(&s.strategy)
            );
            let id = |short: &str| {
                t.cell_id
                    .map(|f| format!(" id=\"{}\"", esc(&f(&s.strategy, short))))
                    .unwrap_or_default()
            };
            for l in &t.lead {
                let (value, text) = (l.cell)(s);
                let _ = write!(
                    h,
                    "<td class=\"n\"{} data-field=\"{}\" data-value=\"{}\">{}</td>",
                    id(l.short),
                    l.short,
                    esc(&value.to_string()),
                    esc(&text)
                );
            }
            for (c, (_, _, short)) in headline_cells(s)
                .into_iter()
                .zip(HEADLINE)
                .filter(|(c, _)| t.fields.shows(c.field))
            {
                let num = if c.field == "verdict" {
                    ""
                } else {
                    " class=\"n\""
                };
                let _ = write!(
                    h,
                    "<td{num}{} data-field=\"{}\" data-value=\"{}\">{}</td>",
                    id(short),
                    c.field,
                    esc(&c.value.to_string()),
                    esc(&c.text)
                );
            }
            let _ = writeln!(h, "</tr>");
        }
    }
    let _ = writeln!(h, "</tbody>\n</table></div>");
}

/// What the headline columns mean, and what `(max of N)` in a percentile cell means.
pub(super) fn headline_note() -> String {
    format!("{HEADLINE_NOTE} {}.", too_few_note())
}

/// What the headline columns mean.
const HEADLINE_NOTE: &str = "sales/s: audited sales over the selling window; \
     started: scheduled arrivals a buyer started; p50/p99/p99.9: latency of every scheduled \
     arrival from its intended start, an arrival never started counting as the whole load \
     (a + marks a percentile among them), n= the samples it is of; oversell: units sold beyond stock; lost updates: \
     sales whose decrement vanished; double-grant incidents: leases a later grant of the \
     same key overlapped (one per stale holder); leases lost: leases that ended before their \
     holder released them; stale rejected: writes a fenced store refused; recovery: heal → \
     first served attempt, the longest over the run's faults (none after fault N: nothing \
     served from that heal to the end of the load). Lock: held, BROKEN (two \
     holders at once, or a lease lost while held), or broken, fenced (that happened and the \
     store refused every stale write); store: intact or CORRUPTED; safe = lock held and \
     store intact. Red rows claim safety and broke it; amber rows broke the lock and were \
     saved by fencing; controls (italic) make no claim and must be caught.";

/// The reads of the runs that had any (`load.read_fraction > 0`), under the headline: the
/// other rows are not cluttered with empty read columns.
pub(super) fn reads_table(h: &mut String, runs: &[RunData]) {
    let with: Vec<&Summary> = runs
        .iter()
        .map(|r| &r.summary)
        .filter(|s| s.had_reads())
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<h3>Reads</h3>\n<table id=\"reads\">\n<thead><tr><th>strategy</th><th>read fraction</th>\
         <th>reads</th><th>reads/s</th><th>torn reads</th><th>read p50 ms</th>\
         <th>read p99 ms</th></tr></thead>\n<tbody>"
    );
    for s in with {
        let fraction = s.workload.pointer("/load/read_fraction").cloned();
        let read = s.latency_us_by_outcome.get("read");
        let p =
            |p: Pct| read.map_or_else(|| "-".into(), |l| latency_cell(l, p, |_| false, ms_exact));
        let torn = if s.torn_reads > 0 {
            " class=\"n bad\""
        } else {
            " class=\"n\""
        };
        let _ = writeln!(
            h,
            "<tr data-strategy=\"{}\"><td>{}</td>\
             <td class=\"n\" data-field=\"workload.load.read_fraction\">{}</td>\
             <td class=\"n\" data-field=\"reads\" data-value=\"{}\">{}</td>\
             <td class=\"n\" data-field=\"throughput.reads_per_s\" data-value=\"{}\">{:.1}</td>\
             <td{torn} data-field=\"torn_reads\" data-value=\"{}\">{}</td>\
             <td class=\"n\" data-field=\"latency_us_by_outcome.read.p50\">{}</td>\
             <td class=\"n\" data-field=\"latency_us_by_outcome.read.p99\">{}</td></tr>",
            esc(&s.strategy),
            esc(&s.strategy),
            fraction.map_or_else(|| "-".into(), |f| f.to_string()),
            s.reads,
            s.reads,
            s.throughput.reads_per_s,
            s.throughput.reads_per_s,
            s.torn_reads,
            s.torn_reads,
            p(Pct::P50),
            p(Pct::P99),
        );
    }
    let _ = writeln!(
        h,
        "</tbody>\n</table>\n<p><small>A read checks a SKU's stock and price under the read lock, \
         holds for the business time, and reads the stock again. A torn read saw it change: a \
         writer got in under the read lock, so the lock is BROKEN. Double grants count \
         reader–writer and writer–writer overlaps; readers sharing a key are allowed. Read \
         latency is from the intended start, torn reads apart.</small></p>"
    );
}

pub(super) fn notes(h: &mut String, runs: &[RunData]) {
    let mut notes = Vec::new();
    for r in runs {
        let s = &r.summary;
        let n = |t: String| format!("{}: {t}", s.strategy);
        if s.not_started > 0 {
            notes.push(n(format!(
                "{} scheduled attempts never started: the open loop outran the strategy (saturation)",
                s.not_started
            )));
        }
        if s.stuck_locks > 0 {
            notes.push(n(format!(
                "{} lock(s) left held with no expiry",
                s.stuck_locks
            )));
        }
        if let Some(note) = s.clock_note() {
            notes.push(n(note));
        }
        if let Some(note) = s.pooler_note() {
            notes.push(n(note));
        }
        if s.interrupted {
            notes.push(n("interrupted before the end of the load".into()));
        }
        for w in &s.worker_failures {
            notes.push(n(format!("worker failure: {w}")));
        }
        for b in &s.broken {
            notes.push(n(format!("the run failed: {b}")));
        }
        for f in &s.faults {
            if let Some(note) = &f.note {
                notes.push(n(format!("fault {}: {note}", f.id)));
            }
        }
        for p in &r.problems {
            notes.push(n(format!("{p} (left out of the charts)")));
        }
    }
    note_list(h, None, &notes);
}

/// At most this many SKUs get a column each; beyond, min / median / max.
const SKU_COLUMNS: usize = 12;

/// Per-SKU lock utilization of every run with a lock (see README "Utilization").
pub(super) fn utilization(h: &mut String, runs: &[RunData]) {
    let rows: Vec<(&str, &crate::record::utilization::Utilization)> = runs
        .iter()
        .filter_map(|r| Some((r.summary.strategy.as_str(), r.summary.utilization.as_ref()?)))
        .collect();
    let Some(skus) = rows.iter().map(|(_, u)| u.per_sku.len()).max() else {
        return;
    };
    let each = skus <= SKU_COLUMNS;
    let heads: Vec<String> = if each {
        (0..skus).map(|i| format!("<th>SKU {i}</th>")).collect()
    } else {
        ["min", "median", "max"]
            .iter()
            .map(|q| format!("<th>{q} over {skus} SKUs</th>"))
            .collect()
    };
    let _ = writeln!(
        h,
        "<h2>Lock utilization</h2>\n<p>Share of each SKU's selling window (from the start of \
         the load until it sold out, <sup>s</sup>, or the load ended) during which some holder \
         was inside its lease; 1 means the lock never idled while it was selling.</p>\n\
         <table id=\"utilization\">\n<thead><tr><th>strategy</th><th>overall</th>{}</tr></thead>\n<tbody>",
        heads.concat()
    );
    for (strategy, u) in rows {
        let cells: Vec<String> = if each {
            u.per_sku
                .iter()
                .map(|k| {
                    let mark = if k.sold_out { "<sup>s</sup>" } else { "" };
                    format!("<td class=\"n\">{}{mark}</td>", k.utilization)
                })
                .collect()
        } else {
            let mut v: Vec<f64> = u.per_sku.iter().map(|k| k.utilization).collect();
            v.sort_by(f64::total_cmp);
            let at = |q: f64| v.get(((v.len() - 1) as f64 * q).round() as usize).copied();
            [0.0, 0.5, 1.0]
                .iter()
                .map(|q| format!("<td class=\"n\">{}</td>", at(*q).unwrap_or(0.0)))
                .collect()
        };
        let _ = writeln!(
            h,
            "<tr data-strategy=\"{}\"><td>{}</td><td class=\"n\">{}</td>{}</tr>",
            esc(strategy),
            esc(strategy),
            u.overall,
            cells.concat()
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}

/// One row per fault of every run: what it hit, when, how long until served again.
pub(super) fn faults_table(h: &mut String, runs: &[RunData], id: &str) {
    let _ = writeln!(
        h,
        "<div class=\"scroll\"><table id=\"{}\">\n<thead><tr><th>strategy</th><th>fault</th>\
         <th>hit</th><th>started s</th><th>healed s</th><th>first served after start s</th>\
         <th>recovery s</th><th>promotion s</th><th>unavailable s</th>\
         <th>probe round trip ms before / during / after</th><th>note</th></tr>\
         </thead>\n<tbody>",
        esc(id)
    );
    let secs = |t: Option<f64>| or_dash(t, secs);
    for r in runs {
        for f in &r.summary.faults {
            let _ = writeln!(
                h,
                "<tr class=\"fault\" data-strategy=\"{}\" data-fault=\"{}\" data-started=\"{}\" \
                 data-healed=\"{}\"><td>{}</td><td>{} {}</td><td>{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"probe\">{}</td>\
                 <td>{}</td></tr>",
                esc(&r.summary.strategy),
                f.id,
                f.started_s.map(|v| v.to_string()).unwrap_or_default(),
                f.healed_s.map(|v| v.to_string()).unwrap_or_default(),
                esc(&r.summary.strategy),
                f.id,
                esc(&f.label),
                esc(&f.nodes.join(", ")),
                secs(f.started_s),
                secs(f.healed_s),
                secs(f.first_served_after_start_s),
                secs(f.recovery_s),
                secs(f.promotion_s),
                secs(f.unavailable_s),
                or_dash(f.probe.as_ref(), |p| esc(&format!(
                    "{}: {}",
                    p.path,
                    probe_rtt(p)
                ))),
                esc(f.note.as_deref().unwrap_or(""))
            );
        }
    }
    let _ = writeln!(h, "</tbody>\n</table></div>");
}

/// Each run's phases (before / during / after each fault), each under a heading of level
/// `heading` (`h3`, `h4`) naming the strategy.
pub(super) fn phases(h: &mut String, runs: &[RunData], heading: &str) {
    for r in runs.iter().filter(|r| !r.summary.phases.is_empty()) {
        let _ = writeln!(h, "<{heading}>{}</{heading}>", esc(&r.summary.strategy));
        let _ = writeln!(
            h,
            "<table class=\"phases\" data-strategy=\"{}\">\n<thead><tr><th>phase</th>\
             <th>from s</th><th>to s</th><th>sales/s</th><th>p99 ms</th><th>errors</th>\
             <th>unknown</th><th>lock timeouts</th></tr></thead>\n<tbody>",
            esc(&r.summary.strategy)
        );
        for p in &r.summary.phases {
            // No completion in the phase: `-` (not 0).
            let p99 = latency_cell(&p.latency_us, Pct::P99, |_| false, ms_exact);
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{:.1}</td><td class=\"n\">{p99}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&p.name),
                secs(p.from_s),
                secs(p.to_s),
                p.sales_per_s,
                p.errors,
                p.unknown,
                p.lock_timeouts
            );
        }
        let _ = writeln!(h, "</tbody>\n</table>");
    }
}

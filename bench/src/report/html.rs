//! `report.html`: one self-contained page per results folder (inline CSS and SVG, no scripts,
//! no external references) rendered from the saved files only, so any folder can be re-rendered
//! without servers: `summary.json` / `compare.json`, `timeline.csv`, `latency.hlog`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::Summary;
use super::charts::{self, Kind};
use super::needs::Needs;
use super::saved::{Folder, ReportError, RunData, load_folder};
use crate::check::Verdict;
use crate::cluster::Provisioner;
use crate::record::Pct;
use crate::strategy::Family;

/// Renders `dir/report.html` and its charts (`dir/charts/`) from the results in `dir` (one
/// run, a comparison, a sweep or a job folder) and returns the path of the page.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    write_report_with(dir, None)
}

/// [`write_report`], judging the strategies of a sweep or a job folder against `needs` (see
/// [`Needs`]): the page lists which qualify and why. A run or a comparison alone cannot answer
/// them (no capacity, no chaos part), so `needs` there is an error.
pub fn write_report_with(dir: &Path, needs: Option<&Needs>) -> Result<PathBuf, ReportError> {
    let page = match load_folder(dir)? {
        Folder::Job(job) => super::job::render(&job, needs)?,
        Folder::Runs { runs, compare } => {
            if needs.is_some() {
                return Err(ReportError::NeedsJob {
                    dir: dir.to_path_buf(),
                });
            }
            let charts = charts::render_all(&runs, &dir.join("charts"))?;
            let exact = write_effective_workload(dir, &runs[0].summary)?;
            render_page(dir, &runs, compare, &charts, exact.as_deref())
        }
    };
    let path = dir.join("report.html");
    let tmp = dir.join(".report.html.tmp");
    std::fs::write(&tmp, page)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

/// The exact replay needs the effective workload as a file `--workload` accepts: writes it
/// beside the page and returns its path.
pub(super) fn write_effective_workload(
    dir: &Path,
    s: &Summary,
) -> Result<Option<PathBuf>, ReportError> {
    let Some(t) = effective_toml(&s.workload) else {
        return Ok(None);
    };
    let path = dir.join("effective-workload.toml");
    std::fs::write(&path, t).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Some(path))
}

/// Escapes text for HTML content and attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// µs as ms with three decimals: exact (every µs value has one such spelling).
pub fn fmt_ms(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// The longest recovery of a run's faults; `None` without any measured recovery.
pub fn max_recovery(s: &Summary) -> Option<f64> {
    s.faults
        .iter()
        .filter_map(|f| f.recovery_s)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))))
}

/// One cell of the headline table: the JSON value it comes from and how it is shown.
struct Cell {
    field: &'static str,
    value: serde_json::Value,
    text: String,
}

/// The headline columns: heading, `data-field` (a path into summary.json, or a derived name),
/// and the short name a job page gives the cell's id (`calm-<strategy>-<short>`).
pub(super) const HEADLINE: [(&str, &str, &str); 17] = [
    ("sales/s", "throughput.sales_per_s", "sales"),
    ("lock utilization", "utilization.overall", "util"),
    ("started", "started_fraction", "started"),
    ("p50 ms", "latency_us.p50", "p50"),
    ("p99 ms", "latency_us.p99", "p99"),
    ("p99.9 ms", "latency_us.p999", "p999"),
    ("oversell", "oversell", "oversell"),
    ("lost updates", "lost_updates", "lost-updates"),
    (
        "double-grant incidents",
        "double_grant_incidents",
        "double-grants",
    ),
    ("leases lost", "lease_lost", "leases-lost"),
    ("stale rejected", "stale_rejected", "stale"),
    ("errors", "errors", "errors"),
    ("unknown", "unknown", "unknown"),
    ("recovery s (max)", "recovery_s", "recovery"),
    ("lock", "lock_verdict", "lock"),
    ("store", "store_verdict", "store"),
    ("verdict", "verdict", "verdict"),
];

fn headline_cells(s: &Summary) -> Vec<Cell> {
    let json = serde_json::to_value(s).expect("summary serialises");
    HEADLINE
        .iter()
        .map(|&(_, field, _)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let value = json.get_pointer(&pointer);
            let text = match field {
                "throughput.sales_per_s" => format!("{:.1}", s.throughput.sales_per_s),
                "started_fraction" => super::table::percent(s.started_fraction),
                "utilization.overall" => value.as_f64().map_or("-".into(), |u| u.to_string()),
                "lock_verdict" => Verdict::lock_text(s.lock_verdict).into(),
                "store_verdict" => Verdict::store_text(s.store_verdict).into(),
                f if f.starts_with("latency_us.") => {
                    let p = match f {
                        "latency_us.p50" => Pct::P50,
                        "latency_us.p99" => Pct::P99,
                        _ => Pct::P999,
                    };
                    let censored = |q| super::table::among_unstarted(s, q);
                    super::table::latency_cell(&s.latency_us, p, censored, fmt_ms)
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
                        text: super::evidence::Recovery::of(s).cell(),
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

const CSS: &str = "
body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:2em auto;max-width:1320px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
table.runs{font-size:.8em}table.runs td,table.runs th{padding:.2em .3em}
td.why{font-size:.85em;color:#555}td.steps{min-width:18em}.part{font-weight:bold;color:#356;white-space:nowrap}
th,td{border:1px solid #ccc;padding:.25em .5em}td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
thead th{position:sticky;top:0;z-index:1}
.scroll{overflow-x:auto}
tr.family th{background:#e4e9f0;text-align:left;font-size:1.05em}
tr.unsafe td{background:#fdd;color:#900;font-weight:bold}
tr.fenced td{background:#fff3d6;color:#7a4b00}
tr.control td{color:#666;font-style:italic}
.badge{font-size:.75em;border-radius:3px;padding:0 .35em;margin-left:.4em;font-style:normal}
.b-control{background:#ddd;color:#444}.b-unsafe{background:#c00;color:#fff}
.b-fenced{background:#e9a100;color:#fff}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}
.note{color:#a60}
ul.plain{padding-left:1.2em;overflow-wrap:anywhere}ul.plain li{margin:.3em 0}
a.num{color:inherit;text-decoration:underline dotted}
a.bad,td.bad{color:#c00;font-weight:bold}a.warn{color:#a06000;font-weight:bold}
.gap{color:#555}
:target{outline:2px solid #e9a100;background:#fff7d6}
";

fn render_page(
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
    faults(&mut h, runs);
    environment(&mut h, runs, compare, exact, "");
    page_end(
        &mut h,
        dir,
        "Charts also in <code>charts/</code> (SVG, PNG).",
    );
    h
}

/// The family a report groups a strategy in (`None`: unknown to this lockbench).
pub(super) fn family_of(strategy: &str) -> Option<Family> {
    crate::strategy::find(strategy).ok().map(|i| i.family())
}

/// Items grouped by family in [`Family::ALL`] order, unknown families last as `other`; the
/// order within a group is kept.
pub(super) fn by_family<T>(
    items: &[T],
    family: impl Fn(&T) -> Option<Family>,
) -> Vec<(&'static str, Vec<&T>)> {
    let mut groups: Vec<(&'static str, Vec<&T>)> = Family::ALL
        .iter()
        .map(|f| {
            let of: Vec<&T> = items.iter().filter(|i| family(i) == Some(*f)).collect();
            (f.title(), of)
        })
        .collect();
    groups.push((
        "other",
        items.iter().filter(|i| family(i).is_none()).collect(),
    ));
    groups.retain(|(_, v)| !v.is_empty());
    groups
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
    /// The headline columns shown (`data-field` names), in [`HEADLINE`] order; empty: all.
    pub fields: &'a [&'a str],
    /// A strategy's family: rows are grouped by it when there is more than one.
    pub family: &'a dyn Fn(&str) -> Option<Family>,
}

impl TableSpec<'_> {
    /// The compare page's table: every headline column, no cell ids.
    fn compare() -> TableSpec<'static> {
        TableSpec {
            id: "headline".into(),
            cell_id: None,
            lead: Vec::new(),
            fields: &[],
            family: &family_of,
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
        .filter(|(_, f, _)| t.fields.is_empty() || t.fields.contains(f))
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
        if groups.len() > 1 {
            let _ = writeln!(
                h,
                "<tr class=\"family\"><th colspan=\"{columns}\">{}</th></tr>",
                esc(title)
            );
        }
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
                .filter(|(c, _)| t.fields.is_empty() || t.fields.contains(&c.field))
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

/// The page's head, its style and its title.
pub(super) fn page_start(h: &mut String, title: &str) {
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
}

/// The page's end: what rendered it and how to render it again (`extra` is HTML).
pub(super) fn page_end(h: &mut String, dir: &Path, extra: &str) {
    let _ = writeln!(
        h,
        "<p><small>Rendered by lockbench {} from the saved results; re-render with \
         <code>lockbench report {}</code>. {extra}</small></p>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION"),
        esc(&dir.display().to_string())
    );
}

fn headline(h: &mut String, runs: &[RunData]) {
    let _ = writeln!(h, "<h2>Results</h2>");
    headline_table(h, runs, &TableSpec::compare());
    let _ = writeln!(h, "<p><small>{}</small></p>", headline_note());
    reads_table(h, runs);
}

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
        let p = |p: Pct| {
            read.map_or_else(
                || "-".into(),
                |l| super::table::latency_cell(l, p, |_| false, fmt_ms),
            )
        };
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

/// What the headline columns mean, and what `(max of N)` in a percentile cell means.
pub(super) fn headline_note() -> String {
    format!("{HEADLINE_NOTE} {}.", super::table::too_few_note())
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
    if notes.is_empty() {
        return;
    }
    let _ = writeln!(h, "<ul class=\"note\">");
    for n in notes {
        let _ = writeln!(h, "<li>{}</li>", esc(&n));
    }
    let _ = writeln!(h, "</ul>");
}

/// What a chart shows.
fn caption_text(kind: Kind) -> &'static str {
    match kind {
        Kind::Throughput => {
            "Sales completed per second (timeline.csv). The last, partial second is shown as a \
             rate over the part that ran, or left out when under half a second."
        }
        Kind::P99 => "p99 of the attempts that completed in each second (timeline.csv).",
        Kind::Spectrum => {
            "Every outcome class of latency.hlog merged per strategy; the right end is the \
             maximum. A flat line is a predictable system, a late cliff is a tail."
        }
        Kind::Tradeoff => {
            "One point per strategy (summary.json): fast and safe is top left. A cross marks a \
             strategy that claims safety and broke it."
        }
        Kind::Safety => {
            "Oversell and lost updates from the audit of the store; double grants from the lease \
             log. Every bar carries its value."
        }
        Kind::LatencyVsRate => {
            "The SLO percentile over every scheduled arrival at each offered rate (sweep.json); \
             a triangle is a lower bound (arrivals never served), the ring the capacity."
        }
        Kind::Capacity => {
            "The highest offered rate that met the SLO with the store intact (sweep.json); an \
             open end is a lower bound, \"<\" failed even the lowest rate."
        }
    }
}

/// The caption of a chart of `runs` (none for the sweep's charts).
pub(super) fn caption(kind: Kind, runs: &[RunData]) -> String {
    let any_faults = runs.iter().any(|r| !r.summary.faults.is_empty());
    let bands = if any_faults && matches!(kind, Kind::Throughput | Kind::P99) {
        " Grey bands: fault windows (started → healed), one per strategy run."
    } else {
        ""
    };
    let sparse = if matches!(kind, Kind::P99) {
        format!(
            " A second of fewer than {} completions cannot bound its p99: there the line is \
             about the second's slowest attempt, a trend, not a percentile.",
            crate::record::quantile::min_samples(Pct::P99.q())
        )
    } else {
        String::new()
    };
    format!("{}{sparse}{bands}", caption_text(kind))
}

/// A chart inline, with its caption; `png` is the path of its PNG relative to the page.
pub(super) fn figure(h: &mut String, c: &charts::Chart, caption: &str, png: &str) {
    // The namespace is implied inside HTML; dropping it leaves no URL in the page.
    let svg = c.svg.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "");
    let svg = svg.get(svg.find("<svg").unwrap_or(0)..).unwrap_or(&svg);
    let _ = writeln!(
        h,
        "<figure id=\"chart-{}\">\n<h3>{}</h3>\n{}\n<figcaption>{} \
         (<code>{}</code>)</figcaption>\n</figure>",
        c.kind.file(),
        esc(c.kind.title()),
        svg,
        esc(caption),
        esc(png)
    );
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

pub(super) fn secs(t: Option<f64>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("{t:.3}"))
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

/// One row per fault of every run: what it hit, when, how long until served again.
pub(super) fn faults_table(h: &mut String, runs: &[RunData], id: &str) {
    let _ = writeln!(
        h,
        "<div class=\"scroll\"><table id=\"{}\">\n<thead><tr><th>strategy</th><th>fault</th>\
         <th>hit</th><th>started s</th><th>healed s</th><th>first served after start s</th>\
         <th>recovery s</th><th>promotion s</th><th>unavailable s</th><th>note</th></tr>\
         </thead>\n<tbody>",
        esc(id)
    );
    for r in runs {
        for f in &r.summary.faults {
            let _ = writeln!(
                h,
                "<tr class=\"fault\" data-strategy=\"{}\" data-fault=\"{}\" data-started=\"{}\" \
                 data-healed=\"{}\"><td>{}</td><td>{} {}</td><td>{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
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
            let p99 = super::table::latency_cell(&p.latency_us, Pct::P99, |_| false, fmt_ms);
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td>\
                 <td class=\"n\">{:.1}</td><td class=\"n\">{p99}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&p.name),
                p.from_s,
                p.to_s,
                p.sales_per_s,
                p.errors,
                p.unknown,
                p.lock_timeouts
            );
        }
        let _ = writeln!(h, "</tbody>\n</table>");
    }
}

/// The effective workload as TOML, loadable with `--workload` (nulls dropped: TOML has none).
pub fn effective_toml(workload: &serde_json::Value) -> Option<String> {
    fn strip(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(strip).collect()),
            v => v.clone(),
        }
    }
    toml::to_string(&strip(workload)).ok()
}

/// Total memory from /proc/meminfo, e.g. `7.8 GiB`.
fn mem_total() -> Option<String> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
}

/// Shell-quotes one word when it needs it.
pub(super) fn sh(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./,=:+@".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The command line that reproduces the results, with the workload as given.
pub fn reproduce_command(runs: &[RunData], compare: bool, workload: &str) -> String {
    let s = &runs[0].summary;
    let mut cmd = if compare {
        let ids: Vec<&str> = runs.iter().map(|r| r.summary.strategy.as_str()).collect();
        format!("lockbench compare --strategies {}", sh(&ids.join(",")))
    } else {
        format!("lockbench run --strategy {}", sh(&s.strategy))
    };
    let _ = write!(cmd, " --workload {}", sh(workload));
    match (s.provisioner, &s.target_file) {
        (Provisioner::Containers, _) => cmd.push_str(" --provision containers"),
        (Provisioner::Target, Some(t)) => {
            let _ = write!(cmd, " --target {}", sh(t));
        }
        _ => {}
    }
    if let Some(c) = &s.chaos_file {
        let _ = write!(cmd, " --chaos {}", sh(c));
    }
    if s.workers > 0 {
        let _ = write!(cmd, " --workers {}", s.workers);
    }
    cmd
}

/// Where the servers came from, as HTML: numbers from loopback processes, containers and a
/// staging cluster are not comparable, so the page says which these are.
fn servers_origin(runs: &[RunData]) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for r in runs {
        let s = &r.summary;
        let kind = match s.provisioner {
            Provisioner::Local => "local: child processes on loopback".to_string(),
            Provisioner::Containers => {
                let mut images: Vec<&str> = s
                    .servers
                    .iter()
                    .filter_map(|n| n.container.as_ref().map(|c| c.image.as_str()))
                    .collect();
                images.sort_unstable();
                images.dedup();
                format!(
                    "containers on a private Docker network (images <code>{}</code>)",
                    esc(&images.join(", "))
                )
            }
            Provisioner::Target => format!(
                "external target <code>{}</code> (servers that already existed)",
                esc(s.target_file.as_deref().unwrap_or("?"))
            ),
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.join("; ")
}

/// Where and how the runs ran, and the commands that reproduce them; `scope` (HTML, may be
/// empty) says which runs these are when the page holds more than one part.
pub(super) fn environment(
    h: &mut String,
    runs: &[RunData],
    compare: bool,
    exact: Option<&Path>,
    scope: &str,
) {
    environment_table(h, runs, scope);
    servers_table(h, runs);
    reproduce(h, runs, compare, exact);
}

/// The table of versions, machine, seed and files.
fn environment_table(h: &mut String, runs: &[RunData], scope: &str) {
    let s = &runs[0].summary;
    let cores = std::thread::available_parallelism()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "unknown".into());
    let mut versions: Vec<&str> = runs
        .iter()
        .map(|r| r.summary.lockbench_version.as_str())
        .collect();
    versions.dedup();
    let _ = writeln!(
        h,
        "<h2>Environment and reproduction</h2>\n{scope}<table id=\"environment\">\n\
         <tr><th>lockbench</th><td>{} (this report rendered by {}, git {})</td></tr>\n\
         <tr><th>machine</th><td>{} cores, {} memory (the machine that rendered this report)</td></tr>\n\
         <tr><th>seed</th><td>{}</td></tr>\n\
         <tr><th>servers</th><td>{}</td></tr>\n\
         <tr><th>workload file</th><td><code>{}</code></td></tr>\n\
         <tr><th>chaos file</th><td>{}</td></tr>\n\
         <tr><th>client workers</th><td>{}</td></tr>\n</table>",
        esc(&versions.join(", ")),
        env!("CARGO_PKG_VERSION"),
        esc(option_env!("LOCKBENCH_GIT_REV").unwrap_or("unknown")),
        cores,
        mem_total().unwrap_or_else(|| "unknown".into()),
        s.seed,
        servers_origin(runs),
        esc(&s.workload_file),
        s.chaos_file
            .as_deref()
            .map_or_else(|| "none".into(), |c| format!("<code>{}</code>", esc(c))),
        if s.workers == 0 {
            "none (buyers inside lockbench)".to_string()
        } else {
            s.workers.to_string()
        },
    );
}

/// One row per run and server: what ran where, on which version.
fn servers_table(h: &mut String, runs: &[RunData]) {
    let _ = writeln!(
        h,
        "<h3>Runs and servers</h3>\n<table id=\"servers\">\n<thead><tr><th>strategy</th>\
         <th>started at</th><th>duration s</th><th>server</th><th>service</th><th>role</th>\
         <th>address</th><th>version</th><th title=\"where a write is when the server \
         acknowledges it: memory, os (page cache), disk (fsynced)\">durability</th></tr></thead>\n\
         <tbody>"
    );
    for r in runs {
        server_rows(h, &r.summary);
    }
    let _ = writeln!(h, "</tbody>\n</table>");
}

/// The commands that reproduce the runs, and the effective workload.
fn reproduce(h: &mut String, runs: &[RunData], compare: bool, exact: Option<&Path>) {
    let s = &runs[0].summary;
    let toml = effective_toml(&s.workload);
    let same = runs.iter().all(|r| r.summary.workload == s.workload);
    let _ = writeln!(h, "<h3>Reproduce</h3>");
    let _ = writeln!(
        h,
        "<p>As run (the workload file as it is now; summary.json does not record which \
         <code>--set</code> overrides were given, they are folded into the effective workload \
         below):</p>\n<pre id=\"command\">{}</pre>",
        esc(&reproduce_command(runs, compare, &s.workload_file))
    );
    if let (Some(t), Some(path)) = (&toml, exact) {
        let path = path.display().to_string();
        let _ = writeln!(
            h,
            "<p>Exactly (overrides, defaults and seed included), with the effective workload \
             written beside this report as <code>{}</code>:</p>\n<pre id=\"command-exact\">{}</pre>\n\
             <h3>Effective workload (TOML)</h3>\n<pre id=\"workload-toml\">{}</pre>",
            esc(&path),
            esc(&reproduce_command(runs, compare, &path)),
            esc(t)
        );
    }
    if !same {
        let _ = writeln!(
            h,
            "<p class=\"note\">The strategies ran with different effective workloads; the one \
             above is {}'s.</p>",
            esc(&s.strategy)
        );
    }
    let _ = writeln!(
        h,
        "<h3>Effective workload (summary.json)</h3>\n<pre id=\"workload-json\">{}</pre>",
        esc(&serde_json::to_string_pretty(&s.workload).unwrap_or_default())
    );
}

/// The rows of one run: its first cell spans the rows of its servers.
fn server_rows(h: &mut String, s: &Summary) {
    let rows = s.servers.len().max(1);
    let _ = write!(
        h,
        "<tr><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td>\
         <td rowspan=\"{rows}\" class=\"n\">{:.3}</td>",
        // A library names itself and the version it loaded.
        s.library.as_ref().map_or_else(
            || esc(&s.strategy),
            |l| format!(
                "{}<br><small>{} {}</small>",
                esc(&s.strategy),
                esc(&l.library),
                esc(&l.version)
            )
        ),
        esc(&s.started_at),
        s.duration_s
    );
    if s.servers.is_empty() {
        let _ = writeln!(h, "<td colspan=\"6\">no servers</td></tr>");
    }
    for (i, n) in s.servers.iter().enumerate() {
        if i > 0 {
            h.push_str("<tr>");
        }
        let _ = writeln!(
            h,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&n.name),
            n.service,
            n.role,
            n.addr,
            esc(&n.version),
            // Older summaries do not say; a Sentinel keeps no data of the run.
            n.durability
                .as_ref()
                .map_or_else(|| "—".into(), |d| esc(&d.describe()))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ms_is_exact() {
        assert_eq!(fmt_ms(0), "0.000");
        assert_eq!(fmt_ms(7), "0.007");
        assert_eq!(fmt_ms(12_345), "12.345");
        assert_eq!(fmt_ms(4_000_000), "4000.000");
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(sh("workloads/chaos.toml"), "workloads/chaos.toml");
        assert_eq!(sh("my file.toml"), "'my file.toml'");
        assert_eq!(sh("it's"), r"'it'\''s'");
    }

    #[test]
    fn effective_workload_loads_back() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/chaos.toml");
        let w = crate::workload::Workload::load(&file, &["load.clients=5".to_string()]).unwrap();
        let json = serde_json::to_value(&w).unwrap();
        let toml = effective_toml(&json).expect("converts");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.toml");
        std::fs::write(&path, toml).unwrap();
        let back = crate::workload::Workload::load(&path, &[]).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
    }
}

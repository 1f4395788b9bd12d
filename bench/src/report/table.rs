//! The human table printed after a run or a comparison.

use std::io::Write;

use super::Summary;
use super::format::{
    latency_cell, latency_parts, machine, ms_exact, ms_table, or_dash, percent, probe_rtt,
    rate_cell, secs, secs_table, too_few_note,
};
use crate::check::Verdict;
use crate::record::Pct;

/// Left-aligned first column, right-aligned others, a rule under the header.
pub(super) fn render(out: &mut impl Write, lines: &[Vec<String>]) -> std::io::Result<()> {
    let cols = lines[0].len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            writeln!(out, "{}", rule.join("  "))?;
        }
    }
    Ok(())
}

/// Prints one row per fault of every summary that had any: what it hit, when, sales per second
/// and p99 before / during / after it, and how long service took to come back.
pub fn print_faults(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    if rows.iter().all(|s| s.faults.is_empty()) {
        return Ok(());
    }
    let header = [
        "strategy",
        "fault",
        "hit",
        "from s",
        "to s",
        "sales/s before",
        "during",
        "after",
        "p99 ms during",
        "after",
        "recovery s",
        "unavailable s",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    let secs = |t: Option<f64>| or_dash(t, secs_table);
    let mut notes = Vec::new();
    for s in rows {
        for f in &s.faults {
            let during = format!("during {}", f.id);
            let at = s.phases.iter().position(|p| p.name == during);
            let phase = |i: Option<usize>| i.and_then(|i| s.phases.get(i));
            let before = phase(at.and_then(|i| i.checked_sub(1)));
            let after = s
                .phases
                .iter()
                .find(|p| p.name == format!("after {}", f.id));
            let rate = |p: Option<&super::PhaseSummary>| {
                p.map_or_else(|| "-".into(), |p| format!("{:.0}", p.sales_per_s))
            };
            // No attempt ended in the phase: no latency to show (not 0).
            let p99 = |p: Option<&super::PhaseSummary>| {
                p.map_or_else(
                    || "-".into(),
                    |p| latency_cell(&p.latency_us, Pct::P99, |_| false, ms_table),
                )
            };
            let hit: Vec<&str> = f
                .nodes
                .iter()
                .filter(|n| !n.starts_with("cut from "))
                .map(String::as_str)
                .collect();
            lines.push(vec![
                s.strategy.clone(),
                format!("{} {}", f.id, f.label),
                hit.join(","),
                secs(f.started_s),
                secs(f.healed_s),
                rate(before),
                rate(phase(at)),
                rate(after),
                p99(phase(at)),
                p99(after),
                secs(f.recovery_s),
                secs(f.unavailable_s),
            ]);
            notes.extend(fault_notes(s, f));
        }
    }
    writeln!(out)?;
    render(out, &lines)?;
    for n in notes {
        writeln!(out, "{n}")?;
    }
    Ok(())
}

/// The lines printed under the fault table for fault `f` of `s`: its note, its probe.
fn fault_notes(s: &Summary, f: &super::FaultSummary) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(n) = &f.note {
        notes.push(format!("note: {}: fault {}: {n}", s.strategy, f.id));
    }
    if let Some(p) = &f.probe {
        notes.push(format!(
            "probe: {}: fault {} ({}): round trip ms before / during / after: {}",
            s.strategy,
            f.id,
            p.path,
            probe_rtt(p)
        ));
    }
    if let Some(bytes) = f.dropped_bytes {
        notes.push(format!(
            "power loss: {}: fault {}: dropped {bytes} unsynced bytes in {} file(s)",
            s.strategy,
            f.id,
            f.dropped_files.unwrap_or(0)
        ));
    }
    notes
}

/// The `q` quantile (`us`) of every arrival, in ms; `+` when it lands among the arrivals that
/// never started (counted as the whole load: the run cannot say how long they would have
/// waited, only that it was longer than anything it served).
pub fn arrival_ms(s: &Summary, q: f64, us: u64) -> String {
    if s.among_unstarted(q) {
        format!("{}+", ms_exact(us))
    } else {
        ms_exact(us)
    }
}

/// The names of the columns a printed table shares with report.html's headline table: one
/// spelling for both, units in parentheses.
pub mod heading {
    /// Attempts started per second.
    pub const ATTEMPTS: &str = "attempts/s";
    /// Sales per second.
    pub const SALES: &str = "sales/s";
    /// When the stock ran out.
    pub const SOLD_OUT: &str = "sold out (s)";
    /// The share of time some lease was held.
    pub const UTIL: &str = "lock utilization";
    /// The share of scheduled arrivals that started.
    pub const STARTED: &str = "started";
    /// Latency percentiles and the maximum, over every scheduled arrival.
    pub const P50: &str = "p50 (ms)";
    /// The 99th percentile.
    pub const P99: &str = "p99 (ms)";
    /// The 99.9th percentile.
    pub const P999: &str = "p99.9 (ms)";
    /// The slowest arrival.
    pub const MAX: &str = "max (ms)";
    /// Units sold, by the audit.
    pub const SOLD: &str = "sold";
    /// Units left of the initial stock.
    pub const STOCK: &str = "stock left";
    /// Units sold beyond the stock.
    pub const OVERSELL: &str = "oversell";
    /// Writes another writer overwrote.
    pub const LOST: &str = "lost updates";
    /// Leases a later grant of the same key overlapped.
    pub const DOUBLE: &str = "double-grant incidents";
    /// Leases that ended before their holder released them.
    pub const LEASES_LOST: &str = "leases lost";
    /// Writes a fenced store refused.
    pub const STALE: &str = "stale rejected";
    /// Attempts of unknown outcome.
    pub const UNKNOWN: &str = "unknown";
    /// Attempts that failed with an error.
    pub const ERRORS: &str = "errors";
    /// Attempts that gave up waiting for the lock.
    pub const TIMEOUTS: &str = "lock timeouts";
    /// The two halves of the verdict, and the verdict.
    pub const LOCK: &str = "lock";
    /// The store half.
    pub const STORE: &str = "store";
    /// The verdict.
    pub const VERDICT: &str = "verdict";
}

/// How many columns a printed table has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Width {
    /// The figures a first reading needs, within 120 columns; each row's plain-words line
    /// under the table says the rest.
    #[default]
    Compact,
    /// Every column (`--wide`).
    Wide,
}

/// What `run` and `compare` print on stdout: JSON, or the table in a width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printed {
    /// The summaries as JSON (`--json`).
    Json,
    /// The table (`--wide`: every column).
    Table(Width),
}

impl Printed {
    /// From the flags `--json` and `--wide`.
    pub fn of(json: bool, wide: bool) -> Printed {
        match (json, wide) {
            (true, _) => Printed::Json,
            (false, true) => Printed::Table(Width::Wide),
            (false, false) => Printed::Table(Width::Compact),
        }
    }
}

/// [`latency_cell`] of a run's latency over every scheduled arrival, in report.html's ms.
fn arrival_cell(s: &Summary, p: Pct) -> String {
    latency_cell(&s.latency_us, p, |q| s.among_unstarted(q), ms_exact)
}

/// The compact cell of a percentile: the value alone (every percentile of a run is of the same
/// arrivals; the plain-words line gives their count), `(max of N)` kept when N cannot bound it.
fn arrival_value(s: &Summary, p: Pct) -> String {
    let parts = latency_parts(&s.latency_us, p, |q| s.among_unstarted(q), ms_exact);
    or_dash(parts, |(v, of)| {
        if s.latency_us.supports(p) {
            v
        } else {
            format!("{v} ({of})")
        }
    })
}

/// Prints every column of [`print_table_as`] (`--wide`).
pub fn print_table(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    print_table_as(out, rows, Width::Wide)
}

/// Prints one row per summary: throughput, latency (ms, from intended start, over every
/// scheduled arrival) and the two-part verdict, then each row's plain-words line and the
/// notes. Reads per second and torn reads get columns (wide) only when some run had reads
/// (`-` in the rows of runs without). The verdict is always the last column.
pub fn print_table_as(out: &mut impl Write, rows: &[Summary], width: Width) -> std::io::Result<()> {
    let lines = match width {
        Width::Compact => compact_lines(rows),
        Width::Wide => wide_lines(rows),
    };
    print_machines(out, rows)?;
    render(out, &lines)?;
    print_lines(out, rows)?;
    print_notes(out, rows)
}

/// The machines the rows ran on, one line each above the table (one for a command's runs).
fn print_machines(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    let mut said = Vec::new();
    for line in rows.iter().filter_map(|s| s.machine.as_ref()).map(machine) {
        if !said.contains(&line) {
            writeln!(out, "{line}")?;
            said.push(line);
        }
    }
    Ok(())
}

fn compact_lines(rows: &[Summary]) -> Vec<Vec<String>> {
    use heading::*;
    let header = [
        "strategy", SALES, SOLD_OUT, STARTED, P50, P99, ERRORS, VERDICT,
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for s in rows {
        lines.push(vec![
            s.strategy.clone(),
            rate_cell(s.throughput.sales_per_s),
            or_dash(s.sold_out_s, secs),
            percent(s.started_fraction),
            arrival_value(s, Pct::P50),
            arrival_value(s, Pct::P99),
            s.errors.to_string(),
            s.headline().to_string(),
        ]);
    }
    lines
}

fn wide_lines(rows: &[Summary]) -> Vec<Vec<String>> {
    use heading::*;
    let reads = rows.iter().any(Summary::had_reads);
    let mut header = vec![
        "strategy",
        ATTEMPTS,
        SALES,
        SOLD_OUT,
        UTIL,
        STARTED,
        P50,
        P99,
        P999,
        MAX,
        SOLD,
        STOCK,
        OVERSELL,
        LOST,
        DOUBLE,
        LEASES_LOST,
        STALE,
        UNKNOWN,
        ERRORS,
        TIMEOUTS,
        LOCK,
        STORE,
        VERDICT,
    ];
    if reads {
        // After sales/s: reads are the other half of what was served.
        header.splice(3..3, ["reads/s", "torn reads"]);
    }
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for s in rows {
        let mut line = wide_row(s);
        if reads {
            let cells = if s.had_reads() {
                [
                    rate_cell(s.throughput.reads_per_s),
                    s.torn_reads.to_string(),
                ]
            } else {
                ["-".into(), "-".into()]
            };
            line.splice(3..3, cells);
        }
        lines.push(line);
    }
    lines
}

fn wide_row(s: &Summary) -> Vec<String> {
    let timeouts = s.outcomes.get("lock_timeout").copied().unwrap_or(0);
    vec![
        s.strategy.clone(),
        rate_cell(s.throughput.attempts_per_s),
        rate_cell(s.throughput.sales_per_s),
        or_dash(s.sold_out_s, secs),
        s.utilization
            .as_ref()
            .map_or_else(|| "-".into(), |u| u.overall.to_string()),
        percent(s.started_fraction),
        arrival_cell(s, Pct::P50),
        arrival_cell(s, Pct::P99),
        arrival_cell(s, Pct::P999),
        arrival_ms(s, 1.0, s.latency_us.max),
        s.audit.sold.to_string(),
        format!("{}/{}", s.audit.final_stock, s.audit.initial_stock),
        s.audit.oversell.to_string(),
        s.audit.lost_updates.to_string(),
        s.double_grant_incidents.to_string(),
        s.lease_lost.to_string(),
        s.stale_rejected.to_string(),
        s.unknown.to_string(),
        s.errors.to_string(),
        timeouts.to_string(),
        Verdict::lock_text(s.lock_verdict).to_string(),
        Verdict::store_text(s.store_verdict).to_string(),
        s.headline().to_string(),
    ]
}

/// Each row's plain-words line (report.html's words: [`super::model::run_line`]), its sale
/// first when it ran one.
fn print_lines(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    writeln!(out)?;
    for s in rows {
        writeln!(out, "{}: {}", s.strategy, super::model::run_line(s))?;
    }
    Ok(())
}

/// The notes under [`print_table`]: what its cells cannot say by themselves.
fn print_notes(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    if rows
        .iter()
        .any(|s| s.latency_us.count > 0 && !s.latency_us.supports(Pct::P999))
    {
        writeln!(out, "note: {}", too_few_note())?;
    }
    for s in rows {
        if s.not_started > 0 {
            writeln!(
                out,
                "note: {}: {} scheduled attempts never started — the open loop outran the strategy \
                 (raise load.clients or lower load.rate to measure below saturation); they count \
                 in its latency as the whole load ({:.1} s), a `+` marks a percentile among them",
                s.strategy, s.not_started, s.duration_s
            )?;
        }
        if s.stuck_locks > 0 {
            writeln!(
                out,
                "note: {}: {} lock(s) left held with no expiry: buyers of those SKUs stall until \
                 someone deletes the key",
                s.strategy, s.stuck_locks
            )?;
        }
        if let Some(c) = &s.consensus_writes {
            let per_sale = c.per_sale.map_or_else(|| "-".into(), |p| format!("{p:.2}"));
            let ttl = s
                .lease_ttl_granted_s
                .map(|t| format!("; lease TTL granted {t} s"))
                .unwrap_or_default();
            writeln!(
                out,
                "note: {}: {} consensus writes during the load, {per_sale} per sale{ttl}",
                s.strategy, c.writes
            )?;
        }
        if let Some(w) = &s.server_work {
            for (role, sw) in
                (w.lock.iter().map(|x| ("lock", x))).chain(w.store.iter().map(|x| ("store", x)))
            {
                writeln!(
                    out,
                    "note: {}: server work, {role} ({}): {}",
                    s.strategy,
                    sw.service,
                    sw.line()
                )?;
            }
        }
        if let Some(c) = &s.cost {
            writeln!(out, "note: {}: cost: {}", s.strategy, c.line())?;
        }
        if let Some(note) = s.clock_note() {
            writeln!(out, "note: {}: {note}", s.strategy)?;
        }
        let danger = s.danger_window.as_ref();
        if let Some(d) = danger.filter(|d| d.lost + d.unnoticed_overlapped > 0) {
            let figures = super::format::danger_window(d);
            writeln!(out, "note: {}: danger window: {figures}", s.strategy)?;
        }
        if let Some(note) = s.pooler_note() {
            writeln!(out, "note: {}: {note}", s.strategy)?;
        }
        if s.interrupted {
            writeln!(
                out,
                "note: {}: interrupted before the end of the load",
                s.strategy
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(strategy: &str) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = strategy.into();
        s
    }

    fn printed(rows: &[Summary], width: Width) -> String {
        let mut out = Vec::new();
        print_table_as(&mut out, rows, width).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_compact_table_fits_120_columns_and_the_wide_one_has_every_column() {
        // The longest id and the longest verdict, every percentile among unstarted arrivals.
        let mut control = fixture("mysql-atomic-not-idempotent");
        control.claims_safety = false;
        control.not_started = control.attempts * 9;
        control.sold_out_s = Some(12.345);
        let rows = [fixture("redis-setnx-watchdog"), control];
        let compact = printed(&rows, Width::Compact);
        let table: Vec<&str> = compact.lines().take(rows.len() + 2).collect();
        let widest = table.iter().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= 120, "{widest} columns:\n{compact}");
        assert!(
            table[0].contains("p99 (ms)") && !table[0].contains("util"),
            "{compact}"
        );
        assert!(
            table[3].contains('+'),
            "a censored percentile stays marked: {compact}"
        );
        let wide = printed(&rows, Width::Wide);
        let header = wide.lines().next().unwrap();
        for h in [
            heading::ATTEMPTS,
            heading::UTIL,
            heading::DOUBLE,
            heading::STOCK,
            heading::TIMEOUTS,
            heading::P999,
            heading::MAX,
        ] {
            assert!(header.contains(h), "{h} missing: {header}");
            assert!(
                !compact.lines().next().unwrap().contains(h),
                "{h} in compact"
            );
        }
        assert!(wide.lines().next().unwrap().chars().count() > 120);
    }

    /// The README's first run is a sale (its line under the table opens with it), short
    /// enough to answer within a minute of the build.
    #[test]
    fn the_first_runs_workload_is_a_short_sale() {
        let text = include_str!("../../../workloads/first-run.toml");
        let w =
            crate::workload::Workload::parse("workloads/first-run.toml", text, &[]).expect("valid");
        assert!(super::super::sale::is_sale(&w));
        assert_eq!(w.inventory.stocks(), vec![500, 50, 50, 50]);
        assert!(w.load.duration <= std::time::Duration::from_secs(5));
    }

    #[test]
    fn each_row_gets_report_htmls_plain_words_line() {
        let s = fixture("redis-setnx-watchdog");
        let out = printed(std::slice::from_ref(&s), Width::Compact);
        let line = format!(
            "redis-setnx-watchdog: {}",
            crate::report::model::run_line(&s)
        );
        assert!(out.lines().any(|l| l == line), "{line}\n{out}");
        assert!(line.contains(", p99 ") && line.ends_with('.'), "{line}");
        // The same number as the table's p99 cell, to the µs.
        let p99 = arrival_value(&s, Pct::P99);
        assert!(line.contains(&format!("p99 {p99} ms")), "{p99}: {line}");
    }
}

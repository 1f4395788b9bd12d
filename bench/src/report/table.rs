//! The human table printed after a run or a comparison.

use std::io::Write;

use super::Summary;
use super::format::{
    latency_cell, ms_table, or_dash, percent, probe_rtt, secs_table, too_few_note,
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
    notes
}

/// The `q` quantile (`us`) of every arrival, in ms; `+` when it lands among the arrivals that
/// never started (counted as the whole load: the run cannot say how long they would have
/// waited, only that it was longer than anything it served).
pub fn arrival_ms(s: &Summary, q: f64, us: u64) -> String {
    if s.among_unstarted(q) {
        format!("{}+", ms_table(us))
    } else {
        ms_table(us)
    }
}

/// [`latency_cell`] of a run's latency over every scheduled arrival, in the table's ms.
fn arrival_cell(s: &Summary, p: Pct) -> String {
    latency_cell(&s.latency_us, p, |q| s.among_unstarted(q), ms_table)
}

/// Prints one row per summary: throughput, latency (ms, from intended start, over every
/// scheduled arrival) and the two-part verdict. Reads per second and torn reads get columns
/// only when some run had reads (`-` in the rows of runs without).
pub fn print_table(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    let reads = rows.iter().any(Summary::had_reads);
    let mut header = vec![
        "strategy",
        "attempts/s",
        "sales/s",
        "sold out s",
        "util",
        "started",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "sold",
        "stock",
        "oversell",
        "lost",
        "dbl grants",
        "lease lost",
        "stale",
        "unknown",
        "errors",
        "timeouts",
        "lock",
        "store",
        "verdict",
    ];
    if reads {
        // After sales/s: reads are the other half of what was served.
        header.splice(3..3, ["reads/s", "torn reads"]);
    }
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for s in rows {
        let timeouts = s.outcomes.get("lock_timeout").copied().unwrap_or(0);
        let mut line = vec![
            s.strategy.clone(),
            format!("{:.0}", s.throughput.attempts_per_s),
            format!("{:.0}", s.throughput.sales_per_s),
            or_dash(s.sold_out_s, secs_table),
            s.utilization
                .as_ref()
                .map_or_else(|| "-".into(), |u| format!("{:.2}", u.overall)),
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
        ];
        if reads {
            let cells = if s.had_reads() {
                [
                    format!("{:.0}", s.throughput.reads_per_s),
                    s.torn_reads.to_string(),
                ]
            } else {
                ["-".into(), "-".into()]
            };
            line.splice(3..3, cells);
        }
        lines.push(line);
    }
    render(out, &lines)?;
    print_sales(out, rows)?;
    print_notes(out, rows)
}

/// Each sale's outcome in one line, right under the table (runs of a sale workload only).
fn print_sales(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    for s in rows {
        if let Some(sale) = &s.sale {
            writeln!(out, "sale: {}: {}", s.strategy, sale.line())?;
        }
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
        if let Some(note) = s.clock_note() {
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

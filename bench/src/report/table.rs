//! The human table printed after a run or a comparison.

use std::io::Write;

use super::Summary;

fn ms(us: u64) -> String {
    if us >= 100_000 {
        format!("{:.0}", us as f64 / 1000.0)
    } else {
        format!("{:.2}", us as f64 / 1000.0)
    }
}

/// Prints one row per summary: throughput, latency (ms, from intended start) and safety.
pub fn print_table(out: &mut impl Write, rows: &[Summary]) -> std::io::Result<()> {
    let header = [
        "strategy",
        "attempts/s",
        "sales/s",
        "sold out s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "sold",
        "stock",
        "oversell",
        "lost",
        "dbl grants",
        "stale",
        "unknown",
        "errors",
        "timeouts",
        "verdict",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for s in rows {
        let verdict = match (s.safe, s.claims_safety) {
            (true, _) => "safe",
            (false, true) => "UNSAFE",
            (false, false) => "unsafe (control)",
        };
        let timeouts = s.outcomes.get("lock_timeout").copied().unwrap_or(0);
        lines.push(vec![
            s.strategy.clone(),
            format!("{:.0}", s.throughput.attempts_per_s),
            format!("{:.0}", s.throughput.sales_per_s),
            s.sold_out_s
                .map(|t| format!("{t:.2}"))
                .unwrap_or_else(|| "-".into()),
            ms(s.latency_us.p50),
            ms(s.latency_us.p99),
            ms(s.latency_us.p999),
            ms(s.latency_us.max),
            s.audit.sold.to_string(),
            format!("{}/{}", s.audit.final_stock, s.audit.initial_stock),
            s.audit.oversell.to_string(),
            s.audit.lost_updates.to_string(),
            s.double_grants.to_string(),
            s.stale_rejected.to_string(),
            s.unknown.to_string(),
            s.errors.to_string(),
            timeouts.to_string(),
            verdict.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0))
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
            writeln!(
                out,
                "{}",
                widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("  ")
            )?;
        }
    }
    for s in rows {
        if s.not_started > 0 {
            writeln!(
                out,
                "note: {}: {} scheduled attempts never started — the open loop outran the strategy \
                 (raise load.clients or lower load.rate to measure below saturation)",
                s.strategy, s.not_started
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

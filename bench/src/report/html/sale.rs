//! The sale table: what each strategy's flash sale cost (docs/sale.md), one row per run of a
//! sale workload; absent when no run was a sale.

use std::fmt::Write as _;

use super::page::esc;
use crate::record::Pct;
use crate::report::Summary;
use crate::report::format::{latency_cell, or_dash, secs};
use crate::report::saved::RunData;

/// Renders the sale table of `runs` (those with a sale), with a heading of level `head`.
pub(super) fn sale_table(h: &mut String, runs: &[RunData], head: &str) {
    let rows: Vec<(&Summary, &crate::report::sale::Sale)> = runs
        .iter()
        .filter_map(|r| Some((&r.summary, r.summary.sale.as_ref()?)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    let _ = writeln!(
        h,
        "<{head}>The sale</{head}>\n<p>SKU {} of {} units is the hot item; its sell-out ends \
         the surge. Buyers' latency runs from each intended start to the answer; \"within \
         SLO\" counts answers within {} (docs/sale.md). FCFS: the share of the hot SKU's units \
         the store sold to its first <i>stock</i> askers.</p>\n<table id=\"sale\">\n<thead><tr>\
         <th>strategy</th><th>sold</th><th>sold out s (surge)</th><th>p99 surge ms</th>\
         <th>within SLO</th><th>p99 after ms</th><th>sold-out answer p99 ms</th><th>FCFS</th>\
         <th>median winner rank</th><th>in flight peak</th><th>refused at door</th>\
         <th>over limit</th><th>duplicates</th><th>undersell</th></tr></thead>\n<tbody>",
        first.hot_sku,
        first.hot_stock,
        esc(&first.slo)
    );
    for (s, sale) in rows {
        let f = sale.figures.as_ref();
        let hot = sale.hot_sku as usize;
        let p99 = |l: Option<&crate::record::LatencySummary>| {
            or_dash(l, |l| {
                latency_cell(l, Pct::P99, |_| false, crate::report::format::ms_exact)
            })
        };
        let cells = [
            format!("{}/{}", sale.hot_sold, sale.hot_stock),
            or_dash(
                f.and_then(|f| f.sold_out_after_surge_s.get(hot).copied().flatten()),
                secs,
            ),
            p99(f.map(|f| &f.phases.surge.latency_us)),
            or_dash(f.and_then(|f| f.phases.surge.within_slo_share), |x| {
                crate::report::format::percent(x)
            }),
            p99(f.map(|f| &f.phases.after.latency_us)),
            p99(f.map(|f| &f.sold_out_answer_us)),
            or_dash(f.and_then(|f| f.fcfs), |c| {
                format!("{} (n={})", c.score, c.units)
            }),
            or_dash(f.and_then(|f| f.fcfs?.median_winner_rank), |r| {
                r.to_string()
            }),
            or_dash(f.map(|f| f.in_flight_peak), |n| n.to_string()),
            sale.refused_at_door.to_string(),
            sale.limit_violations.to_string(),
            sale.duplicate_orders.to_string(),
            or_dash(f.map(|f| f.undersell), |n| n.to_string()),
        ];
        let tds: String = cells
            .iter()
            .map(|c| format!("<td class=\"n\">{}</td>", esc(c)))
            .collect();
        let _ = writeln!(
            h,
            "<tr data-strategy=\"{0}\"><td>{0}</td>{tds}</tr>",
            esc(&s.strategy)
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sale: bool) -> RunData {
        let mut run = crate::report::saved::fixture_run("mysql-atomic");
        run.summary.sale = sale.then(crate::report::sale::fixture);
        run
    }

    #[test]
    fn a_sale_gets_a_row_and_a_steady_run_no_table() {
        let mut h = String::new();
        sale_table(&mut h, &[run(false)], "h2");
        assert!(h.is_empty(), "{h}");
        sale_table(&mut h, &[run(false), run(true)], "h2");
        assert_contains!(h, "<h2>The sale</h2>");
        assert_eq!(h.matches("<tr data-strategy").count(), 1, "{h}");
        // Sold out; what workers did not measure reads as a dash, not a zero.
        assert_contains!(h, "<td class=\"n\">1000/1000</td>");
        assert_contains!(h, "<td class=\"n\">-</td>");
    }
}

//! Runs of one seed made different ways, totals side by side (`lockbench totals`;
//! scripts/remote.sh: pipe workers, TCP agents in namespaces, `coordinate`). The same seed
//! schedules the same arrivals, so every way of running them must count the same attempts,
//! sales and unstarted arrivals as the first.

use std::io::Write;

use super::Summary;
use super::format::ms_table;
use super::table::render;

/// The totals that must match between runs of one seed.
fn totals(s: &Summary) -> (u64, u64, u64) {
    (s.attempts, s.audit.sold, s.not_started)
}

/// Prints one row per (name, run) and whether every run's totals equal the first's; returns
/// that.
pub fn print_totals(out: &mut impl Write, runs: &[(String, Summary)]) -> std::io::Result<bool> {
    let mut lines = vec![
        ["run", "attempts", "sold", "unstarted", "sales/s", "p99 ms"]
            .into_iter()
            .chain(["worker failures"])
            .map(String::from)
            .collect::<Vec<_>>(),
    ];
    for (name, s) in runs {
        let (attempts, sold, unstarted) = totals(s);
        lines.push(vec![
            name.clone(),
            attempts.to_string(),
            sold.to_string(),
            unstarted.to_string(),
            format!("{:.1}", s.throughput.sales_per_s),
            ms_table(s.latency_us.p99),
            s.worker_failures.len().to_string(),
        ]);
    }
    render(out, &lines)?;
    let Some((first_name, first)) = runs.first() else {
        return Ok(true);
    };
    let same = runs.iter().all(|(_, s)| totals(s) == totals(first));
    writeln!(
        out,
        "totals equal {first_name}'s: {}",
        if same { "yes" } else { "NO" }
    )?;
    Ok(same)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures::summary;

    #[test]
    fn equal_totals_pass_and_a_lost_attempt_fails() {
        let pipe = summary("redis-setnx");
        let mut tcp = pipe.clone();
        tcp.throughput.sales_per_s += 3.0;
        let runs = vec![("pipe".to_string(), pipe.clone()), ("tcp".into(), tcp)];
        let mut out = Vec::new();
        assert!(print_totals(&mut out, &runs).unwrap());
        let text = String::from_utf8(out).unwrap();
        assert_contains!(text, "totals equal pipe's: yes");
        let mut lost = pipe.clone();
        lost.attempts -= 1;
        let runs = vec![("pipe".to_string(), pipe), ("coordinate".into(), lost)];
        let mut out = Vec::new();
        assert!(!print_totals(&mut out, &runs).unwrap());
        assert!(String::from_utf8(out).unwrap().contains(": NO"));
    }
}

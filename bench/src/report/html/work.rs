//! The server-work table of the kit: what the lock service (per grant) and the store (per
//! sale) did for each run's load, as their own counters say (`report::work`).

use std::fmt::Write as _;

use super::page::esc;
use crate::cluster::work::{CPU_US, FSYNCS};
use crate::report::format::{decimals, percent, work_per};
use crate::report::saved::RunData;
use crate::report::work::{Cost, ServiceWork};

/// One row per service of every run that measured its servers' work; nothing when none did.
/// The run's round trips per sale (the buyers', not a service's) are on its first row.
pub(super) fn server_work(h: &mut String, runs: &[RunData]) {
    let rows: Vec<(&str, &str, &ServiceWork, String)> = (runs.iter())
        .filter_map(|r| Some((&r.summary, r.summary.server_work.as_ref()?)))
        .flat_map(|(s, w)| {
            let trips = round_trips(s.cost.as_ref());
            let parts =
                (w.lock.iter().map(|x| ("lock", x))).chain(w.store.iter().map(|x| ("store", x)));
            (parts.enumerate()).map(move |(i, (part, x))| {
                let cell = if i == 0 { trips.clone() } else { String::new() };
                (s.strategy.as_str(), part, x, cell)
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let idle = (runs.iter())
        .find_map(|r| r.summary.server_work.as_ref())
        .map_or(0.0, |w| w.idle_window_s);
    let _ = writeln!(
        h,
        "<h2>Server work</h2>\n<p>What the servers did for the load, as their own counters \
         say: the lock service per grant (per sale for a strategy without a lock), the store \
         per sale. The counters' background rate (replication, Sentinel's pings, sessions, \
         heartbeats) was measured over {} s with no load and subtracted, with the cost of \
         reading them.</p>\n<div class=\"scroll\"><table id=\"server-work\">\n<thead><tr>\
         <th>strategy</th><th>part</th><th>service</th><th>per</th><th>n</th>\
         <th>round trips</th><th>requests</th>\
         <th>bytes in</th><th>bytes out</th><th>fsyncs</th><th>CPU ms</th>\
         <th>most per grant or sale</th><th>background</th><th>note</th></tr></thead>\n<tbody>",
        decimals(idle, 1)
    );
    for (strategy, part, w, trips) in rows {
        let (cells, note) = cells(w);
        let _ = writeln!(
            h,
            "<tr data-strategy=\"{}\"><td>{}</td><td>{part}</td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{trips}</td>{cells}<td>{}</td></tr>",
            esc(strategy),
            esc(strategy),
            w.service,
            esc(&w.per),
            w.samples,
            esc(&note)
        );
    }
    let _ = writeln!(h, "</tbody>\n</table></div>");
    let sources: Vec<String> = {
        let mut v: Vec<String> = (runs.iter())
            .filter_map(|r| r.summary.server_work.as_ref())
            .flat_map(|w| w.lock.iter().chain(w.store.iter()))
            .map(|w| format!("{}: {}", w.service, w.source))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let _ = writeln!(
        h,
        "<p><small>n is the grants (or sales) the work is divided by. Round trips are the \
         buyers' calls per sale (every attempt's, the losers' included), counted by the client \
         wrappers, on a run's first row; - where they were not counted (a library behind an \
         adapter). Sources: {}.</small></p>",
        esc(&sources.join("; "))
    );
}

/// The round trips per sale of a run's cost, `-` where not counted.
fn round_trips(cost: Option<&Cost>) -> String {
    match cost.and_then(|c| c.round_trips_per_sale) {
        Some(v) => work_per(Some(v)),
        None => "-".into(),
    }
}

/// A row's figure cells and its note, or dashes and why there are none.
fn cells(w: &ServiceWork) -> (String, String) {
    match &w.figures {
        Some(f) => (
            format!(
                "<td class=\"n\">{} {}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td>{}</td><td class=\"n\">{}</td>",
                work_per(f.total_per),
                esc(&w.unit),
                work_per(f.bytes_in_per),
                work_per(f.bytes_out_per),
                work_per(f.per(FSYNCS)),
                work_per(f.per(CPU_US).map(|us| us / 1e3)),
                esc(&f.top(6)),
                percent(f.background_share)
            ),
            f.notes.join("; "),
        ),
        None => (
            "<td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td>".to_string(),
            format!(
                "not available: {}",
                w.not_available.as_deref().unwrap_or("")
            ),
        ),
    }
}

//! The contention table: how each lock shared its keys among waiting buyers (summary.json
//! `contention`, from `record::contention`), and the danger window of lease-based locks
//! (`danger_window`, from `record::danger`).

use std::fmt::Write as _;

use super::page::esc;
use crate::record::DangerWindow;
use crate::record::Pct;
use crate::record::contention::Contention;
use crate::report::Summary;
use crate::report::format::{latency_cell, ms_table, or_dash, samples, secs};
use crate::report::model::danger_line;
use crate::report::saved::RunData;

/// One row per run with a lock: acquire wait, give-ups, fairness, barging, missed wake-ups.
pub(super) fn contention_table(h: &mut String, runs: &[RunData]) {
    let rows: Vec<(&Summary, &Contention)> = runs
        .iter()
        .filter_map(|r| Some((&r.summary, r.summary.contention.as_ref()?)))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    let grace = ms_table(first.missed_wakeup_grace_us);
    let _ = writeln!(
        h,
        "<h2>Contention</h2>\n<p>How each lock shared its keys among the buyers waiting for \
         them. <b>Acquire wait</b>: from asking for the lock to holding it, the critical section \
         apart; its maximum is the longest wait that ended in a grant. <b>Fairness</b>: \
         Jain's index over the buyers of a key of each one's share of its attempts that won \
         (1: even; 1/n: one of n won all), beside what equal odds read over the same attempts \
         and the lowest share of a buyer with 5 attempts or more. <b>Barging</b>: handoffs \
         that went back to the buyer that had just released although another had waited since \
         before the release. <b>Missed wake-ups</b>: give-ups during whose wait the key lay \
         free {grace} ms or longer. A queue on the server (ZooKeeper's sequential nodes, etcd's \
         revisions) grants in order by design; a client-side wait (notify or poll) lets \
         whoever asks first after a release win. During a fault an unreachable server also \
         leaves keys free: read missed wake-ups in calm runs.</p>\n\
         <table id=\"contention\">\n<thead><tr><th>strategy</th><th>waits for a busy lock</th>\
         <th>acquire p50 ms</th><th>acquire p99 ms</th><th>longest granted wait ms</th>\
         <th>give-ups</th><th>longest give-up ms</th><th>fairness (Jain)</th>\
         <th>if fair</th><th>lowest share</th><th>barging</th><th>missed wake-ups</th>\
         <th>longest free while waiting ms</th></tr></thead>\n<tbody>"
    );
    for (s, c) in rows {
        row(h, s, c);
    }
    let _ = writeln!(h, "</tbody></table>");
}

fn row(h: &mut String, s: &Summary, c: &Contention) {
    let wait = s
        .lock_wait
        .as_ref()
        .map_or_else(|| "server-side queue".to_string(), |w| w.wait.clone());
    let f = c.fairness.as_ref();
    let cells = [
        wait,
        latency_cell(&c.acquire, Pct::P50, |_| false, ms_table),
        latency_cell(&c.acquire, Pct::P99, |_| false, ms_table),
        if c.acquire.count > 0 {
            ms_table(c.acquire.max)
        } else {
            "-".into()
        },
        c.give_ups.to_string(),
        if c.give_ups > 0 {
            ms_table(c.longest_give_up_us)
        } else {
            "-".into()
        },
        or_dash(f, |f| {
            format!("{:.3} ({} buyers, {} keys)", f.jain, f.buyers, f.keys)
        }),
        or_dash(f, |f| format!("{:.3}", f.jain_if_fair)),
        or_dash(f.and_then(|f| f.lowest_share), |x| format!("{x:.2}")),
        format!("{} of {}", c.barges, c.handoffs_with_waiter),
        format!("{} of {}", c.missed_wakeups, c.give_ups),
        if c.give_ups > 0 {
            ms_table(c.longest_free_while_waiting_us)
        } else {
            "-".into()
        },
    ];
    let tds: String = cells
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let class = if i == 0 { "" } else { " class=\"n\"" };
            format!("<td{class}>{}</td>", esc(v))
        })
        .collect();
    let _ = writeln!(
        h,
        "<tr data-strategy=\"{0}\"><td>{0}</td>{tds}</tr>",
        esc(&s.strategy)
    );
}

/// The danger window (summary.json `danger_window`): one row per run of a lease-based lock,
/// after the contention table. Only when some run has one.
pub(super) fn danger_table(h: &mut String, runs: &[RunData]) {
    let rows: Vec<(&Summary, &DangerWindow)> = runs
        .iter()
        .filter_map(|r| Some((&r.summary, r.summary.danger_window.as_ref()?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<h3>Danger window</h3>\n<p>When a lease ends on the server (its TTL ran out, its \
         session expired), how long its holder went on before it learned: a failed renewal, \
         a session's expiry, a library's LOST, or a release that found the lock not ours, \
         whichever came first. <b>Loss → notice</b>: per lost lease, from the server's end of \
         it to that notice. <b>Writes after the loss</b>: the critical section's store writes \
         sent after the lease had ended, and whether a fence refused them. <b>Loss \
         moment</b>: <code>lease-arithmetic</code> is the last send that (re)started the \
         lease plus its TTL, as the server counts it; <code>observed</code> was seen \
         happen. <b>Never told</b>: leases a later grant overlapped whose holder nothing told \
         of the loss, and how long the longest went on after that grant.</p>\n\
         <table id=\"danger\">\n<thead><tr><th>strategy</th><th>leases lost</th>\
         <th>loss → notice p50 s</th><th>max s</th><th>writes after the loss</th>\
         <th>longest past the loss s</th><th>refused by a fence</th>\
         <th>never told: went on after the next grant s</th><th>loss moment</th>\
         <th>in words</th></tr></thead>\n<tbody>"
    );
    let s_of = |us: Option<u64>| or_dash(us, |u| secs(u as f64 / 1e6));
    for (s, d) in rows {
        let cells = [
            d.lost.to_string(),
            format!("{} ({})", s_of(d.loss_to_notice_p50_us), samples(d.n, true)),
            s_of(d.loss_to_notice_max_us),
            d.writes_after_loss.to_string(),
            s_of(d.write_after_loss_max_us),
            d.refused_by_fence.to_string(),
            format!(
                "{} ({})",
                d.unnoticed_overlapped,
                s_of(d.unnoticed_went_on_max_us)
            ),
            d.source.clone().unwrap_or_else(|| "-".into()),
            danger_line(d).unwrap_or_else(|| "no lease lost".into()),
        ];
        let tds: String = cells
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let class = if i + 2 < cells.len() {
                    " class=\"n\""
                } else {
                    ""
                };
                format!("<td{class}>{}</td>", esc(v))
            })
            .collect();
        let _ = writeln!(
            h,
            "<tr data-strategy=\"{0}\"><td>{0}</td>{tds}</tr>",
            esc(&s.strategy)
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}

//! The page of a `lockbench contend` folder (`contend.json`): how to read it, the contention
//! chart, the Universal Scalability Law per strategy, and every level with its trials'
//! spread and its acquire waits' sample counts.

use std::fmt::Write as _;
use std::path::Path;

use super::page::{caption, esc, figure, machines, note_list, page_end, page_start};
use crate::record::Pct;
use crate::report::charts;
use crate::report::contend::{Contend, ContendEntry, LevelTrial, acquire_cell, jain_cell};
use crate::report::error::ReportError;
use crate::report::usl::{POOR_R2, Usl};

/// Renders the page of the folder `dir` holding `c`.
pub(super) fn render(dir: &Path, c: &Contend) -> Result<String, ReportError> {
    let mut h = String::new();
    page_start(
        &mut h,
        &format!(
            "lockbench: the cost of contention, {} strategies",
            c.entries.len()
        ),
    );
    machines(&mut h, c.machine.as_ref());
    how_to_read(&mut h, c);
    problems(&mut h, c);
    for chart in charts::render_contend(c, &dir.join("charts"))? {
        let png = format!("charts/{}.png", chart.kind.file());
        figure(&mut h, &chart, &caption(chart.kind, &[]), &png);
    }
    fits(&mut h, c);
    levels(&mut h, c);
    page_end(
        &mut h,
        dir,
        "The chart also as SVG and PNG under <code>charts/</code>; every trial's own results \
         (summary.json, history.jsonl) in <code>&lt;strategy&gt;/n&lt;N&gt;/trial-&lt;k&gt;/</code>.",
    );
    Ok(h)
}

fn how_to_read(h: &mut String, c: &Contend) {
    let _ = writeln!(
        h,
        "<p>How to read this page. Each strategy ran closed loops on <b>one key</b>: N buyers, \
         each starting its next attempt when the last ended, at N = {:?}; {} trial(s) of {} s \
         at each level, on one set of servers per strategy (workload <code>{}</code>). \
         <b>grants/s</b> counts attempts granted the lock, over each trial's load; the table \
         gives their mean with a 95&nbsp;% Student's t interval over the trials and the lowest \
         and highest trial. The <b>acquire wait</b> is the time from asking for the lock to \
         holding it (the critical section apart), over every granted attempt of the level's \
         trials, each percentile with its sample count (<code>max of N</code>: too few to \
         bound it, the maximum shown).</p>\n<p>The <b>Universal Scalability Law</b>, X(N) = \
         λN / (1 + σ(N−1) + κN(N−1)), is fitted to every trial: λ is one contender's \
         grants/s; σ (contention) the share of each grant that waits in line — a lock \
         serialises by design, so σ near 1 means grants/s does not grow with contenders; κ \
         (coherency) is what each pair of contenders costs each other — polls that find the \
         lock taken, wake-ups of waiters that lose the race, retries — and makes grants/s \
         fall past the peak N = √((1−σ)/κ). R² below {POOR_R2} reads a poor fit: the \
         coefficients then describe the curve loosely.</p>",
        c.levels,
        c.trials,
        c.trial_s,
        esc(&c.workload_file)
    );
}

fn problems(h: &mut String, c: &Contend) {
    let mut notes: Vec<String> = c
        .entries
        .iter()
        .filter_map(|e| {
            e.error
                .as_ref()
                .map(|w| format!("{}: stopped early: {w}", e.strategy))
        })
        .collect();
    if c.interrupted {
        notes.push("Interrupted (Ctrl-C): the levels shown are what was measured.".into());
    }
    for e in &c.entries {
        let unsafe_trials: Vec<&str> = e
            .levels
            .iter()
            .flat_map(|l| l.trials.iter())
            .filter(|t| !t.safe)
            .map(|t| t.dir.as_str())
            .collect();
        if !unsafe_trials.is_empty() {
            notes.push(format!(
                "{}: the lock or the store broke in {}",
                e.strategy,
                unsafe_trials.join(", ")
            ));
        }
    }
    note_list(h, Some("problems"), &notes);
}

fn fits(h: &mut String, c: &Contend) {
    let _ = writeln!(
        h,
        "<h2 id=\"usl\">Universal Scalability Law</h2>\n<table>\n<thead><tr><th>strategy</th>\
         <th>family</th><th>λ (grants/s)</th><th>σ contention</th><th>κ coherency</th>\
         <th>R²</th><th>peak N</th><th>points</th><th>note</th></tr></thead>\n<tbody>"
    );
    for e in &c.entries {
        let cells = match &e.usl {
            Some(Usl::Fit(f)) => format!(
                "<td class=\"n\">{:.1}</td><td class=\"n\">{:.4}</td><td class=\"n\">{:.6}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td>",
                f.lambda,
                f.sigma,
                f.kappa,
                f.r2.map_or("undefined".into(), |r| format!("{r:.3}")),
                f.peak_n.map_or("none".into(), |n| format!("{n:.1}")),
                f.points,
                esc(&fit_note(e))
            ),
            other => format!(
                "<td colspan=\"7\"></td><td>{}</td>",
                esc(&other.as_ref().map_or("nothing measured".into(), Usl::text))
            ),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td>{cells}</tr>",
            esc(&e.strategy),
            esc(e.family.title())
        );
    }
    let _ = writeln!(h, "</tbody></table>");
}

/// What a fit's numbers mean in words.
fn fit_note(e: &ContendEntry) -> String {
    match &e.usl {
        Some(Usl::Fit(f)) if f.poor => format!("poor fit (R² below {POOR_R2})"),
        Some(Usl::Fit(f)) if f.r2.is_none() => "throughput flat: nothing to explain".into(),
        Some(u) => u.text().rsplit(", ").next().unwrap_or("").to_string(),
        None => String::new(),
    }
}

fn levels(h: &mut String, c: &Contend) {
    let _ = writeln!(
        h,
        "<h2 id=\"levels\">Every level</h2>\n<table>\n<thead><tr><th>strategy</th><th>N</th>\
         <th>grants/s (95% CI)</th><th>trials, lowest–highest</th><th>acquire p50 (trials)</th>\
         <th>acquire p99 (trials)</th><th>Jain's index</th><th>barges / handoffs to a waiter\
         </th><th>lock timeouts</th><th>missed wake-ups</th><th>errors</th></tr></thead>\n<tbody>"
    );
    for e in &c.entries {
        for l in &e.levels {
            let sum = |f: fn(&LevelTrial) -> u64| l.trials.iter().map(f).sum::<u64>();
            let _ = writeln!(
                h,
                "<tr id=\"{}-n{}\"><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{:.0}–{:.0} ({} trials)</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{} / {}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&e.strategy),
                l.contenders,
                esc(&e.strategy),
                l.contenders,
                esc(&l.throughput.text()),
                l.throughput.min,
                l.throughput.max,
                l.throughput.n,
                esc(&acquire_cell(l, Pct::P50)),
                esc(&acquire_cell(l, Pct::P99)),
                esc(&jain_cell(l)),
                sum(|t| t.barges),
                sum(|t| t.handoffs_with_waiter),
                sum(|t| t.lock_timeouts),
                sum(|t| t.missed_wakeups),
                sum(|t| t.errors)
            );
        }
    }
    let _ = writeln!(
        h,
        "</tbody></table>\n<p><small>Acquire waits, fairness, barges and missed wake-ups are \
         the recorder's (each trial's <code>summary.json</code>, <code>contention</code>). A \
         percentile cell is the mean of the trials' figures, their range, and the waits it \
         rests on; <code>max of N</code>: some trial had only N waits, too few to bound it, \
         and gave its maximum. Jain's index is over each buyer's share of its attempts that \
         won the key, beside what equal odds would read over the same attempts (fair).\
         </small></p>"
    );
}

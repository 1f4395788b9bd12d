//! The page of a job folder (`scripts/compare.sh --out`: `sweep/`, `calm/`, `chaos/<scenario>/`)
//! or of a sweep folder alone: what an architecture review reads in a minute. First the
//! plain-words summary (one line per strategy, grouped by family, every number a link to the
//! cell it came from), then the needs advice when `--needs` was given (`needs.rs`), then the
//! capacity at the SLO, the calm run, each chaos scenario, and the environment. Any part may be
//! missing: the page renders what is there and says what was not measured.

use std::fmt::Write as _;

use super::environment as env;
use super::needs::advice;
use super::page::{
    by_family, caption, esc, family_row, figure, machines, note_list, page_end, page_start,
    said_html,
};
use super::tables::{
    Columns, Lead, TableSpec, faults_table, headline_note, headline_table, notes, phases,
    reads_table, utilization,
};
use crate::report::charts;
use crate::report::error::ReportError;
use crate::report::evidence::{Capacity, Claim, ids, offered_rate, unsafe_steps_text};
use crate::report::format::{percent_round, rate, rate_exact, round};
use crate::report::model::{Conclusion, Model, family};
use crate::report::saved::{Job, Part};
use crate::report::sweep::{Bound, Entry, NO_PASS_SHARE, Sweep};
use crate::strategy::Kind;

/// Renders the page of a job.
pub(super) fn render(job: &Job, model: &Model) -> Result<String, ReportError> {
    let mut h = String::new();
    page_start(
        &mut h,
        &format!(
            "lockbench: capacity and the cost of failure, {} strategies",
            model.strategies.len()
        ),
    );
    machines(&mut h, job_machines(job));
    how_to_read(&mut h, job, model.needs.is_some());
    problems(&mut h, job);
    summary(&mut h, &model.strategies);
    if let Some(needs) = &model.needs {
        advice(&mut h, needs, &model.strategies);
    }
    sale(&mut h, job);
    capacity(&mut h, job)?;
    calm(&mut h, job)?;
    chaos(&mut h, job);
    environment(&mut h, job)?;
    page_end(
        &mut h,
        &job.dir,
        "Charts also as SVG and PNG under <code>charts/</code> (the sweep) and \
         <code>calm/charts/</code> (the calm run).",
    );
    Ok(h)
}

/// The machines a job's parts ran on: the sweep's, then every run's (one, for one command).
fn job_machines(job: &Job) -> impl Iterator<Item = &crate::report::Machine> {
    let parts = job.sale.iter().chain(&job.chaos).map(|(_, p)| p);
    let runs = job.calm.iter().chain(parts).flat_map(|p| &p.runs);
    let sweep = job.sweep.as_ref().and_then(|s| s.machine.as_ref());
    sweep
        .into_iter()
        .chain(runs.filter_map(|r| r.summary.machine.as_ref()))
}

fn how_to_read(h: &mut String, job: &Job, needs: bool) {
    let slo = job
        .sweep
        .as_ref()
        .map_or_else(|| "a latency target".to_string(), |s| s.slo.label());
    let _ = writeln!(
        h,
        "<p>How to read this page. Each strategy was measured on real servers in up to three \
         parts: a <b>sweep</b> that finds the highest arrival rate it sustains at {} \
         (its <a href=\"#capacity\">capacity</a>); one <b>calm run</b> of every strategy at one \
         rate they all sustain (<a href=\"#calm\">latency, lock utilization</a>); and one \
         <b>chaos run</b> per fault scenario, each strategy loaded at a share of its own \
         capacity (<a href=\"#chaos\">safety and recovery under faults</a>). The summary \
         below says what each strategy did in plain words; every number in it links to the \
         table cell it came from. <b>safe</b>: the lock held (or there is none) and the audit \
         found the store intact; <b>fenced</b>: the lock broke and the fenced store refused \
         every stale write; <b>UNSAFE</b>: a strategy that claims safety broke it; controls \
         make no claim and read <b>caught</b> or <b>not caught</b>. A capacity that is only a \
         bound reads ≥ N or &lt; N; anything not measured says so.{}</p>",
        esc(&slo),
        if needs {
            ""
        } else {
            " To list the strategies that meet stated needs, render again with <code>lockbench \
             report DIR --needs safe-under-pause,capacity&gt;=500</code> (terms: capacity&gt;=N, \
             safe, safe-under-SCENARIO, recovery&lt;=DURATION, p99&lt;=DURATION, fenced-ok)."
        }
    );
}

fn problems(h: &mut String, job: &Job) {
    let mut missing = Vec::new();
    if job.sweep.is_none() {
        missing.push("the sweep (capacity)");
    }
    if job.calm.is_none() {
        missing.push("the calm run");
    }
    if job.chaos.is_empty() {
        missing.push("chaos scenarios");
    }
    let mut notes = Vec::new();
    if !missing.is_empty() {
        notes.push(format!("Not measured in this job: {}.", missing.join(", ")));
    }
    notes.extend(job.problems.iter().cloned());
    note_list(h, Some("problems"), &notes);
}

fn summary(h: &mut String, strategies: &[Conclusion]) {
    let _ = writeln!(h, "<h2 id=\"summary\">In plain words</h2>");
    for (title, group) in by_family(strategies, |c| c.family) {
        let _ = writeln!(h, "<h3>{}</h3>\n<ul class=\"plain\">", esc(title));
        for c in group {
            let badge = if c.control {
                " <span class=\"badge b-control\">control</span>"
            } else {
                ""
            };
            let _ = writeln!(
                h,
                "<li id=\"{}\"><b>{}</b>{badge} — {}</li>",
                esc(&ids::summary(&c.strategy)),
                esc(&c.strategy),
                said_html(&c.line)
            );
        }
        let _ = writeln!(h, "</ul>");
    }
}

fn bound_text(b: Bound) -> &'static str {
    match b {
        Bound::Found => "found",
        Bound::AtLeastMax => "≥ highest offered",
        Bound::BelowLowest => "< lowest offered",
        Bound::Unbracketed => "budget spent",
        Bound::Incomplete => "search stopped",
        Bound::MachineLimit => "≥, the machine ran out above",
    }
}

fn capacity(h: &mut String, job: &Job) -> Result<(), ReportError> {
    let _ = writeln!(h, "<h2 id=\"capacity\">Capacity (the sweep)</h2>");
    let Some(sweep) = &job.sweep else {
        let _ = writeln!(h, "<p>Not measured: this job has no sweep.</p>");
        return Ok(());
    };
    let s = &sweep.search;
    let _ = writeln!(
        h,
        "<p>Target: <b>{}</b>, over every scheduled arrival (an arrival never started counts \
         as slower than any served one), with the store intact. Each step ran trials at one \
         offered rate until the share of arrivals slower than the target or never served was \
         decided below its goal (pass) or above it (fail) at {}% confidence (one-sided \
         Clopper–Pearson bounds), or {} s ran out (undecided). The search started at {} (up \
         ×{} until a rate failed, down ÷√{} until one passed, then geometric midpoints) \
         within {}–{}/s, until the interval was within ×{} or {} s were spent on a strategy. \
         Workload <code>{}</code>; started {}; took {:.0} s. <b>Capacity</b> is an interval: \
         from the highest rate decided to meet the target to the lowest decided to miss it, \
         widened by how far the machine moved capacities between the search and its revisit \
         (under the table). \
         A step judged unsafe is listed: the sweep is also a safety run.</p>",
        esc(&sweep.slo.label()),
        s.confidence * 100.0,
        s.step_budget_s,
        s.start_per_s.map_or_else(
            || "half the warm-up's throughput".to_string(),
            |r| format!("{}/s", rate(r))
        ),
        s.factor,
        s.factor,
        rate(s.min_per_s),
        rate(s.max_per_s),
        s.goal_width,
        s.budget_s,
        esc(&sweep.workload_file),
        esc(&sweep.started_at),
        sweep.elapsed_s
    );
    for c in &charts::render_sweep(sweep, &job.dir.join("charts"))? {
        figure(
            h,
            c,
            &caption(c.kind, &[]),
            &format!("charts/{}.png", c.kind.file()),
        );
    }
    capacity_table(h, job, sweep);
    Ok(())
}

fn capacity_table(h: &mut String, job: &Job, sweep: &Sweep) {
    let _ = writeln!(
        h,
        "<table id=\"capacity-table\">\n<thead><tr><th>strategy</th><th>capacity /s</th>\
         <th>bound</th><th>first failing /s</th><th>why it failed</th>\
         <th>steps (/s: ✓ met, ✗ missed)</th><th>unsafe steps</th></tr></thead>\n<tbody>"
    );
    let groups = by_family(&sweep.entries, |e| family(job.sweep.as_ref(), &e.strategy));
    for (title, group) in &groups {
        family_row(h, groups.len(), title, 7);
        for e in group {
            capacity_row(h, e, &sweep.slo.percentile_name());
        }
    }
    let _ = writeln!(h, "</tbody>\n</table>");
    if let Some(d) = &sweep.drift {
        let _ = writeln!(h, "<p class=\"note\" id=\"drift\">{}</p>", esc(&d.text()));
    }
}

/// The interval widened by the sweep's drift, where it differs from the measured ends: where
/// another run on this machine lands (docs/capacity.md#between-moments).
fn between_runs(e: &Entry) -> String {
    let measured = Entry::interval(e.capacity_per_s, e.first_failing_per_s).interval;
    if e.capacity_interval_per_s == measured {
        return String::new();
    }
    format!(
        "<br><span class=\"note\">{} between runs</span>",
        esc(&e.capacity_text())
    )
}

fn capacity_row(h: &mut String, e: &Entry, sweep_slo_name: &str) {
    let id = &e.strategy;
    let claim = Claim::of_sweep(e);
    let class = match (&claim, e.kind == Kind::Control) {
        (_, true) => "control",
        (Claim::Unsafe, _) => "unsafe",
        (Claim::Fenced, _) => "fenced",
        _ => "safe",
    };
    let cap = Capacity::of(e).map_or_else(|| "not measured".to_string(), |c| c.text());
    let fail = e.first_failing_per_s.map_or_else(|| "-".to_string(), rate);
    let why = e.first_miss().map_or_else(String::new, |s| esc(&s.why));
    let steps: Vec<String> = e
        .steps
        .iter()
        .map(|s| step_span(s, sweep_slo_name))
        .collect();
    let unsafe_text = match unsafe_steps_text(e) {
        Some(t) => esc(&t),
        None if e.kind == Kind::Control => "none (not caught)".into(),
        None => "none".into(),
    };
    let mut error = e
        .error
        .as_deref()
        .map(|x| format!(": <span class=\"note\">{}</span>", esc(x)))
        .unwrap_or_default();
    if !e.drifted_per_s.is_empty() {
        let rates: Vec<String> = e.drifted_per_s.iter().map(|r| rate(*r)).collect();
        let _ = write!(
            error,
            "; <span class=\"note\">drifted at {}/s: decided both ways, in the search and \
             at its revisit, so the interval holds both moments' capacities</span>",
            rates.join(", ")
        );
    }
    if let Some(note) = e.machine_limit_note() {
        let _ = write!(error, "; <span class=\"note\">{}</span>", esc(&note));
    }
    let badge = if e.kind == Kind::Control {
        "<span class=\"badge b-control\">control</span>"
    } else {
        ""
    };
    let bound = format!("{}{}", bound_text(e.bound), between_runs(e));
    let _ = writeln!(
        h,
        "<tr class=\"{class}\" data-strategy=\"{}\"><td>{}{badge}</td>\
         <td class=\"n\" id=\"{}\" data-value=\"{}\">{}</td><td>{bound}{error}</td>\
         <td class=\"n\" id=\"{}\">{fail}</td><td class=\"why\">{why}</td><td class=\"steps\">{}</td>\
         <td id=\"{}\">{unsafe_text}</td></tr>",
        esc(id),
        esc(id),
        esc(&ids::cap(id, "")),
        e.capacity_per_s,
        esc(&cap),
        esc(&ids::cap(id, "fail")),
        steps.join(" · "),
        esc(&ids::cap(id, "unsafe")),
    );
}

/// One step of a capacity row: its rate and decision, the counts in its tooltip; `again`
/// marks a revisit.
fn step_span(s: &crate::report::sweep::Step, slo_name: &str) -> String {
    format!(
        "<span title=\"{}\">{}{}&nbsp;{}</span>",
        esc(&format!(
            "{} trial(s), {} of {} arrivals missed; {} {:.3} ms{}, {:.1}% served{}",
            s.trials.len(),
            s.tally.misses,
            s.tally.arrivals,
            slo_name,
            s.latency_ms,
            if s.latency_censored { "+" } else { "" },
            s.served_fraction * 100.0,
            if s.why.is_empty() {
                String::new()
            } else {
                format!(": {}", s.why)
            }
        )),
        if s.revisit { "again&nbsp;" } else { "" },
        rate(s.rate_per_s),
        match s.decision {
            crate::stats::Decision::Pass => "✓",
            crate::stats::Decision::Fail => "✗",
            crate::stats::Decision::Undecided => "?",
        }
    )
}

fn rate_lead<'a>() -> Lead<'a> {
    Lead {
        heading: "offered /s",
        short: "rate",
        cell: Box::new(|s| match offered_rate(s) {
            Some(r) => (serde_json::Value::from(r), rate(r)),
            None => (serde_json::Value::Null, "closed loop".into()),
        }),
    }
}

/// The sale part: what each strategy did in the surge, without a fault and under each of the
/// sale's scenarios; each part's own page has its surge chart.
fn sale(h: &mut String, job: &Job) {
    if job.sale.is_empty() {
        return;
    }
    let _ = writeln!(h, "<h2 id=\"sale\">The sale</h2>");
    for (name, part) in &job.sale {
        let title = match name.as_str() {
            crate::report::layout::SALE_CALM => "As the surge comes".to_string(),
            sc => format!("Under chaos/{sc}.toml"),
        };
        let _ = writeln!(h, "<h3 id=\"sale-{}\">{}</h3>", esc(name), esc(&title));
        if let Some(link) = sub_report(job, &part.dir) {
            let _ = writeln!(
                h,
                "<p>{link} (its surge chart: arrivals, sales and buyers in flight per 10 ms)</p>"
            );
        }
        super::sale::sale_table(h, &part.runs, "h4");
        notes(h, &part.runs);
    }
}

fn calm(h: &mut String, job: &Job) -> Result<(), ReportError> {
    let Some(part) = &job.calm else {
        let _ = writeln!(
            h,
            "<h2 id=\"calm\">Calm run</h2>\n<p id=\"{}\">Not measured: this job has no calm run.</p>",
            ids::CALM_RATE
        );
        return Ok(());
    };
    let (rates, heading) = calm_rates(part);
    let _ = writeln!(
        h,
        "<h2 id=\"calm\"><span id=\"{}\">{}</span></h2>",
        ids::CALM_RATE,
        esc(&heading)
    );
    let why = calm_why(job, &rates);
    let _ = writeln!(h, "<p>{why}</p>");
    if let Some(link) = sub_report(job, &part.dir) {
        let _ = writeln!(h, "<p>{link}</p>");
    }
    let cell_id = |strategy: &str, short: &str| ids::calm(strategy, short);
    let fam = |id: &str| family(job.sweep.as_ref(), id);
    headline_table(
        h,
        &part.runs,
        &TableSpec {
            id: "calm-table".into(),
            cell_id: Some(&cell_id),
            lead: vec![rate_lead()],
            // A calm run has no fault to recover from.
            fields: Columns::Except(&["recovery_s"]),
            family: &fam,
        },
    );
    let _ = writeln!(h, "<p><small>{}</small></p>", headline_note());
    reads_table(h, &part.runs);
    super::sale::sale_table(h, &part.runs, "h3");
    notes(h, &part.runs);
    calm_charts(h, job, part)?;
    utilization(h, &part.runs);
    super::contention::contention_table(h, &part.runs);
    super::contention::danger_table(h, &part.runs);
    super::work::server_work(h, &part.runs);
    Ok(())
}

/// The distinct rates the calm runs offered, and the heading that names them.
fn calm_rates(part: &Part) -> (Vec<f64>, String) {
    let mut rates: Vec<f64> = part
        .runs
        .iter()
        .filter_map(|r| offered_rate(&r.summary))
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let heading = match rates.as_slice() {
        [r] => format!("Calm run at {} arrivals/s", rate(*r)),
        [lo, .., hi] => format!("Calm run at {}–{} arrivals/s", rate(*lo), rate(*hi)),
        [] => "Calm run (closed loop)".to_string(),
    };
    (rates, heading)
}

/// Why the calm runs offered their rate: the sweep's common rate, or their own workload's.
fn calm_why(job: &Job, rates: &[f64]) -> String {
    match job.sweep.as_ref().and_then(Sweep::common_rate) {
        Some((floor, by)) => {
            let mut why = format!(
                "Why this rate: {}/s is the lowest capacity among the strategies the sweep saw \
                 safe at every step (set by <a class=\"num\" href=\"#{}\">{}</a>: the lower \
                 end of its interval or, when no rate passed, {} of its lowest rate that \
                 did not; rounded down the 1–2–5 series so that it does not move with that end's \
                 noise; controls do not count), so every one of them sustains it.",
                rate(floor),
                esc(&ids::cap(by, "")),
                esc(by),
                percent_round(NO_PASS_SHARE)
            );
            if rates.iter().any(|r| (r - floor).abs() > 0.05) {
                let _ = write!(
                    why,
                    " The calm runs' workloads offered {} instead (the offered /s column).",
                    esc(&rates
                        .iter()
                        .map(|r| format!("{}/s", rate(*r)))
                        .collect::<Vec<_>>()
                        .join(", "))
                );
            }
            why
        }
        None => "No sweep capacity to derive the rate from: the calm runs offered the rate of \
                 their own workload (the offered /s column)."
            .to_string(),
    }
}

/// The calm part's charts, linked from its folder.
fn calm_charts(h: &mut String, job: &Job, part: &Part) -> Result<(), ReportError> {
    let charts = charts::render_all(&part.runs, &part.dir.join("charts"))?;
    let rel = part
        .dir
        .strip_prefix(&job.dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| part.dir.display().to_string());
    for c in &charts {
        figure(
            h,
            c,
            &caption(c.kind, &part.runs),
            &format!("{rel}/charts/{}.png", c.kind.file()),
        );
    }
    Ok(())
}

/// A link to a part's own report.html, when it has one (relative to the job's page).
fn sub_report(job: &Job, dir: &std::path::Path) -> Option<String> {
    dir.join("report.html").is_file().then(|| {
        let rel = dir
            .strip_prefix(&job.dir)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        format!(
            "This part's own page, with every chart: <a href=\"{0}/report.html\">{0}/report.html</a>.",
            esc(&rel)
        )
    })
}

/// The headline columns a chaos table shows: what a fault cost.
const CHAOS_FIELDS: [&str; 13] = [
    "throughput.sales_per_s",
    "latency_us.p99",
    "oversell",
    "lost_updates",
    "double_grant_incidents",
    "lease_lost",
    "stale_rejected",
    "errors",
    "unknown",
    "recovery_s",
    "lock_verdict",
    "store_verdict",
    "verdict",
];

fn chaos(h: &mut String, job: &Job) {
    let _ = writeln!(h, "<h2 id=\"chaos\">Under faults</h2>");
    if job.chaos.is_empty() {
        let _ = writeln!(h, "<p>Not measured: this job has no chaos scenario.</p>");
        return;
    }
    let _ = writeln!(
        h,
        "<p>One run of every strategy per scenario, each offered a share of its own capacity \
         (the share column: offered rate over the sweep's capacity; ≤ when the capacity is a \
         lower bound). Recovery: from the heal to the first served attempt, the longest over \
         the run's faults.</p>"
    );
    for (name, part) in &job.chaos {
        chaos_scenario(h, job, name, part);
    }
}

/// One chaos scenario: its faults, its table and, folded, every fault and phase.
fn chaos_scenario(h: &mut String, job: &Job, name: &str, part: &Part) {
    let first = &part.runs[0].summary;
    let faults: Vec<String> = first
        .faults
        .iter()
        .map(|f| format!("{} {}", f.id, f.label))
        .collect();
    let _ = writeln!(
        h,
        "<h3 id=\"chaos-{}\">{}</h3>\n<p>Chaos file {}; faults: {}.{}</p>",
        esc(&ids::clean(name)),
        esc(name),
        first.chaos_file.as_deref().map_or_else(
            || "not recorded".to_string(),
            |c| format!("<code>{}</code>", esc(c))
        ),
        esc(&if faults.is_empty() {
            "none recorded".to_string()
        } else {
            faults.join(", ")
        }),
        sub_report(job, &part.dir)
            .map(|l| format!(" {l}"))
            .unwrap_or_default()
    );
    let cell_id = |strategy: &str, short: &str| ids::chaos(name, strategy, short);
    let fam = |id: &str| family(job.sweep.as_ref(), id);
    headline_table(
        h,
        &part.runs,
        &TableSpec {
            id: format!("chaos-table-{}", ids::clean(name)),
            cell_id: Some(&cell_id),
            lead: vec![rate_lead(), share_lead(job), hit_lead()],
            fields: Columns::Only(&CHAOS_FIELDS),
            family: &fam,
        },
    );
    notes(h, &part.runs);
    if part.runs.iter().any(|r| !r.summary.faults.is_empty()) {
        let _ = writeln!(
            h,
            "<details><summary>{}: every fault, and each strategy's phases (before, \
             during, after)</summary>",
            esc(name)
        );
        faults_table(h, &part.runs, &format!("faults-{}", ids::clean(name)));
        phases(h, &part.runs, "h4");
        let _ = writeln!(h, "</details>");
    }
}

/// The column of the offered rate's share of the strategy's swept capacity.
fn share_lead(job: &Job) -> Lead<'_> {
    Lead {
        heading: "share of capacity",
        short: "share",
        cell: Box::new(|s| {
            let cap = job
                .sweep
                .as_ref()
                .and_then(|w| w.entry(&s.strategy))
                .and_then(Capacity::of);
            match (cap, offered_rate(s)) {
                (Some(c), Some(r)) => match c.share(r) {
                    Some(text) => (serde_json::Value::from(round(r / c.per_s(), 3)), text),
                    None => (serde_json::Value::Null, "-".into()),
                },
                (None, _) => (serde_json::Value::Null, "not measured".into()),
                (_, None) => (serde_json::Value::Null, "-".into()),
            }
        }),
    }
}

/// The column of how many of a run's faults took effect.
fn hit_lead<'a>() -> Lead<'a> {
    Lead {
        heading: "faults that took effect",
        short: "hit",
        cell: Box::new(|s| {
            let took = s.faults.iter().filter(|f| f.started_s.is_some()).count();
            (
                serde_json::Value::from(took),
                format!("{took} of {}", s.faults.len()),
            )
        }),
    }
}

fn environment(h: &mut String, job: &Job) -> Result<(), ReportError> {
    // The calm compare is the fullest record of the servers and the workload; else a chaos one.
    let part = job
        .calm
        .as_ref()
        .map(|p| ("the calm run", p))
        .or_else(|| job.chaos.first().map(|(n, p)| (n.as_str(), p)));
    match part {
        Some((name, p)) => {
            let exact = env::write_effective_workload(&p.dir, &p.runs[0].summary)?;
            let scope = format!(
                "<p>Of {} (<code>{}</code>); each part's own report.html has its own, and the \
                 sweep's is below.</p>\n",
                esc(name),
                esc(&p.dir.display().to_string())
            );
            env::environment(h, &p.runs, true, exact.as_deref(), &scope);
        }
        None => {
            let _ = writeln!(h, "<h2>Environment and reproduction</h2>");
        }
    }
    if let Some(s) = &job.sweep {
        sweep_environment(h, s);
    }
    Ok(())
}

fn sweep_environment(h: &mut String, s: &Sweep) {
    let step = s.entries.iter().flat_map(|e| &e.steps).next();
    let _ = writeln!(
        h,
        "<h3>The sweep</h3>\n<table id=\"sweep-environment\">\n\
         <tr><th>lockbench</th><td>{}</td></tr>\n<tr><th>started</th><td>{}</td></tr>\n\
         <tr><th>workload file</th><td><code>{}</code></td></tr>\n\
         <tr><th>seed</th><td>{}</td></tr>\n</table>\n\
         <p>As run (the workload file as it is now; each step's summary.json under \
         <code>sweep/</code> holds its effective workload):</p>\n<pre id=\"command-sweep\">{}</pre>",
        esc(&s.lockbench_version),
        esc(&s.started_at),
        esc(&s.workload_file),
        step.map_or_else(|| "-".to_string(), |st| st.summary.seed.to_string()),
        esc(&sweep_command(s))
    );
}

/// The `lockbench sweep` command line that searches the same rates at the same target.
fn sweep_command(s: &Sweep) -> String {
    let ids: Vec<&str> = s.entries.iter().map(|e| e.strategy.as_str()).collect();
    let q = &s.search;
    // Exact, not the page's rounding: a command must ask for the same rates.
    let exact = rate_exact;
    let start = q
        .start_per_s
        .map_or_else(String::new, |r| format!(" --start {}", exact(r)));
    format!(
        "lockbench sweep --strategies {} --workload {} --slo {}={}ms --min-served {}%{start} \
         --min {} --max {} --factor {} --confidence {}% --goal-width {} --budget {}s \
         --step-budget {}s --trial {}s --max-trial {}s{}{}",
        env::sh(&ids.join(",")),
        env::sh(&s.workload_file),
        s.slo.percentile_name(),
        exact(s.slo.latency_ms),
        exact((s.slo.min_served * 10_000.0).round() / 100.0),
        exact(q.min_per_s),
        exact(q.max_per_s),
        exact(q.factor),
        exact((q.confidence * 10_000.0).round() / 100.0),
        exact(q.goal_width),
        exact(q.budget_s),
        exact(q.step_budget_s),
        exact(q.trial_s),
        exact(q.max_trial_s),
        if q.revisit { "" } else { " --no-revisit" },
        // Sweeps before the revisit had its own budget read 0: theirs was what was left.
        if q.revisit && q.revisit_budget_s > 0.0 {
            format!(" --revisit-budget {}s", exact(q.revisit_budget_s))
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::fixtures::{entry, sweep};

    /// A sweep folder of two strategies: `redis-setnx` found between 640 and 800/s, `zookeeper`
    /// at least the sweep's highest rate, 2000/s.
    fn sweep_job(dir: &std::path::Path) -> Job {
        let found = [
            (320.0, true, true),
            (640.0, true, true),
            (800.0, false, true),
        ];
        Job {
            dir: dir.to_path_buf(),
            sweep: Some(sweep(vec![
                entry("redis-setnx", 640.0, Bound::Found, &found),
                entry(
                    "zookeeper",
                    2000.0,
                    Bound::AtLeastMax,
                    &[(2000.0, true, true)],
                ),
            ])),
            calm: None,
            chaos: Vec::new(),
            sale: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Every `href="#x"` of a page, each of which must name an `id="x"` on it.
    fn dangling_links(page: &str) -> Vec<String> {
        page.split("href=\"#")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .filter(|id| !page.contains(&format!("id=\"{id}\"")))
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_sweep_job_shows_each_strategy_its_capacity_interval_and_the_needs_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let job = sweep_job(dir.path());
        let needs: crate::report::needs::Needs = "capacity>=1000".parse().unwrap();
        let model = Model::of(&job, Some(&needs));
        let page = render(&job, &model).unwrap();
        // report.json is the model the page's summary and needs sections rendered.
        let json = serde_json::to_value(&model).unwrap();
        assert_eq!(json["schema"], "lockbench.report/1");
        assert_eq!(json["strategies"][0]["strategy"], "redis-setnx");
        assert_eq!(json["strategies"][0]["capacity"]["found"], 640.0);
        let line = model.strategies[0].line.text();
        assert!(page.contains("<b>redis-setnx</b> — "), "{line}");
        assert!(line.starts_with("sustains 640 arrivals/s"), "{line}");
        assert_eq!(json["strategies"][0]["text"], line);
        assert_eq!(json["needs"]["judgements"][1]["strategy"], "zookeeper");
        for name in ["<b>redis-setnx</b>", "<b>zookeeper</b>"] {
            assert!(page.contains(name), "{name} missing");
        }
        // The interval: its lower end, how it was bounded, its upper end.
        assert_contains!(
            page,
            "id=\"cap-redis-setnx\" data-value=\"640\">640</td><td>found</td>"
        );
        assert!(page.contains("id=\"cap-redis-setnx-fail\">800</td>"));
        assert!(page.contains(
            "id=\"cap-zookeeper\" data-value=\"2000\">≥ 2000</td><td>≥ highest offered</td>"
        ));
        // The plain words link the number to that cell.
        assert!(page.contains(
            "sustains <a class=\"num\" href=\"#cap-redis-setnx\">640</a> arrivals/s at p99 ≤ \
             100 ms, ≥ 99% served"
        ));
        // 640/s misses 1000/s; a lower bound of 2000/s meets it.
        assert!(page.contains("<h3 id=\"needs-qualify\">Qualify (1)</h3>"));
        assert!(page.contains(
            "<li><a href=\"#sum-zookeeper\"><b>zookeeper</b></a> — capacity&gt;=1000: capacity \
             <a class=\"num\" href=\"#cap-zookeeper\">≥ 2000</a>/s.</li>"
        ));
        assert!(page.contains(
            "<li class=\"gap\"><a href=\"#sum-redis-setnx\"><b>redis-setnx</b></a> — \
             capacity&gt;=1000: not met: capacity <a class=\"num\" href=\"#cap-redis-setnx\">640</a>/s.</li>"
        ));
        assert_eq!(dangling_links(&page), Vec::<String>::new());
        assert!(dir.path().join("charts/capacity.svg").is_file());
    }

    #[test]
    fn the_sweep_command_asks_for_the_same_rates() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = sweep_job(dir.path());
        let command = "lockbench sweep --strategies redis-setnx,zookeeper --workload \
             workloads/flash-sale.toml --slo p99=100ms --min-served 99% --start 50 --min 1 \
             --max 2000 --factor 2 --confidence 95% --goal-width 1.25 --budget 25s \
             --step-budget 15s --trial 1s --max-trial 6s";
        assert_eq!(
            sweep_command(job.sweep.as_ref().unwrap()),
            format!("{command} --revisit-budget 12s")
        );
        // A sweep whose revisit had what its search left (before --revisit-budget) asks for
        // the default.
        job.sweep.as_mut().unwrap().search.revisit_budget_s = 0.0;
        assert_eq!(sweep_command(job.sweep.as_ref().unwrap()), command);
        // A sweep without the revisit (an older sweep.json, or --no-revisit) asks for none.
        job.sweep.as_mut().unwrap().search.revisit = false;
        assert_eq!(
            sweep_command(job.sweep.as_ref().unwrap()),
            format!("{command} --no-revisit")
        );
    }

    #[test]
    fn an_empty_job_says_what_was_not_measured_and_how_to_ask_for_needs() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = sweep_job(dir.path());
        job.sweep = None;
        job.problems.push("calm: no such folder".into());
        let page = render(&job, &Model::of(&job, None)).unwrap();
        assert!(page.contains(
            "<li>Not measured in this job: the sweep (capacity), the calm run, chaos \
             scenarios.</li>\n<li>calm: no such folder</li>"
        ));
        assert!(page.contains("<p>Not measured: this job has no sweep.</p>"));
        assert!(page.contains("Not measured: this job has no calm run."));
        assert!(page.contains("<p>Not measured: this job has no chaos scenario.</p>"));
        // Without --needs, no verdict: the page says how to ask for one.
        assert!(!page.contains("id=\"needs\""));
        assert!(page.contains("render again with <code>lockbench report DIR --needs"));
        assert_eq!(dangling_links(&page), Vec::<String>::new());
    }
}

//! What one strategy measured across a job's parts (the sweep, the calm run, each chaos
//! scenario), read once for both the page's plain-words summary and the needs advice, and the
//! ids of the table cells each number is shown in: every claim on the page links to its number.
//!
//! Truth first: a capacity that is only a bound reads `≥ N` or `< N`; a control is `caught` or
//! `not caught`, never `safe`; a safe verdict counts only from a run that finished (and, under
//! chaos, in which a fault took effect); anything else reads `not measured`.

use super::Summary;
use super::format::{latency_parts, ms_exact, percent_round, rate, round, secs};
use super::sweep::{Bound, Entry, Sweep};
use crate::strategy::Family;

/// The ids of the cells a summary line or a needs reason links to. Stable, so a review can
/// link to them too. Strategy and scenario names pass through [`ids::clean`].
pub mod ids {
    /// Keeps `[A-Za-z0-9._-]`, turns anything else (`lib:curator`'s colon, spaces) into `_`.
    pub fn clean(s: &str) -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// A strategy's line in the plain-words summary.
    pub fn summary(strategy: &str) -> String {
        format!("sum-{}", clean(strategy))
    }

    /// The capacity cell of the sweep table; `field` is `""` for the capacity itself, else
    /// `fail` (first failing rate) or `unsafe` (steps judged unsafe).
    pub fn cap(strategy: &str, field: &str) -> String {
        if field.is_empty() {
            format!("cap-{}", clean(strategy))
        } else {
            format!("cap-{}-{field}", clean(strategy))
        }
    }

    /// A cell of the calm run's table (`field`: a headline short name, e.g. `p99`, `util`).
    pub fn calm(strategy: &str, field: &str) -> String {
        format!("calm-{}-{field}", clean(strategy))
    }

    /// A cell of a chaos scenario's table (`field`: a headline short name, `rate`, `share`).
    pub fn chaos(scenario: &str, strategy: &str, field: &str) -> String {
        format!("chaos-{}-{}-{field}", clean(scenario), clean(strategy))
    }

    /// The heading of the calm section (its rate and why).
    pub const CALM_RATE: &str = "calm-rate";
}

/// How a linked word reads: bad verdicts stand out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tone {
    /// A number or a fine verdict.
    Plain,
    /// UNSAFE, CORRUPTED, a control not caught.
    Bad,
    /// Fenced: the lock broke, the store was saved.
    Warn,
}

/// A piece of a sentence.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Span {
    /// Words.
    Text(String),
    /// The name of a part of the job (`calm run`, `kill-master`), so a long line scans.
    Label(String),
    /// A number or a verdict, linked to the cell it came from.
    Link {
        /// What is shown.
        text: String,
        /// The id of the cell (without `#`).
        anchor: String,
        /// How it reads.
        tone: Tone,
    },
}

/// A sentence whose numbers link to their cells.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Said(pub Vec<Span>);

impl Said {
    /// Appends words.
    pub fn t(mut self, text: impl Into<String>) -> Self {
        self.0.push(Span::Text(text.into()));
        self
    }

    /// Appends the name of a part.
    pub fn label(mut self, text: impl Into<String>) -> Self {
        self.0.push(Span::Label(text.into()));
        self
    }

    /// Appends a number linked to its cell.
    pub fn n(self, text: impl Into<String>, anchor: String) -> Self {
        self.link(text, anchor, Tone::Plain)
    }

    /// Appends a linked word in a tone.
    pub fn link(mut self, text: impl Into<String>, anchor: String, tone: Tone) -> Self {
        self.0.push(Span::Link {
            text: text.into(),
            anchor,
            tone,
        });
        self
    }

    /// Appends another sentence.
    pub fn and(mut self, other: Said) -> Self {
        self.0.extend(other.0);
        self
    }

    /// The words without links (for tests and messages).
    pub fn text(&self) -> String {
        self.0
            .iter()
            .map(|s| match s {
                Span::Text(t) | Span::Label(t) | Span::Link { text: t, .. } => t.as_str(),
            })
            .collect()
    }

    /// Every anchor linked to.
    pub fn anchors(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|s| match s {
            Span::Link { anchor, .. } => Some(anchor.as_str()),
            Span::Text(_) | Span::Label(_) => None,
        })
    }
}

/// Whether a term is met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Met {
    /// Measured and met.
    Yes,
    /// Measured and not met.
    No,
    /// Not measured: no part of the job answers it.
    Unmeasured,
}

/// What one run says about safety.
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// Lock held (or none), store intact, in a run that finished.
    Safe,
    /// The lock broke and the fenced store refused every stale write.
    Fenced,
    /// A strategy that claims safety broke it.
    Unsafe,
    /// A control the checker caught.
    Caught,
    /// A control the checker did not catch (in a run that finished).
    NotCaught,
    /// Nothing to judge, with why.
    NotMeasured(String),
}

impl Claim {
    /// The verdict of one run. A bad verdict always counts; a clean one only from a run that
    /// finished and, under chaos, in which some fault took effect.
    pub fn of(s: &Summary, chaos: bool) -> Claim {
        let claim = match s.headline() {
            "safe" => Claim::Safe,
            "fenced" => Claim::Fenced,
            "UNSAFE" => Claim::Unsafe,
            "caught (control)" => Claim::Caught,
            _ => Claim::NotCaught,
        };
        if !matches!(claim, Claim::Safe | Claim::NotCaught) {
            return claim;
        }
        if s.interrupted {
            return Claim::NotMeasured("interrupted before the end of the load".into());
        }
        if let Some(b) = s.broken.first() {
            return Claim::NotMeasured(format!("the run failed: {b}"));
        }
        if chaos && !s.faults.iter().any(|f| f.started_s.is_some()) {
            let why = s.faults.iter().find_map(|f| f.note.clone());
            return Claim::NotMeasured(match why {
                Some(n) => format!("no fault took effect ({n})"),
                None => "no fault took effect".into(),
            });
        }
        claim
    }

    /// What the sweep's steps say: the worst verdict among its unsafe steps, else safe (a
    /// control: not caught) when any step ran.
    pub fn of_sweep(e: &Entry) -> Claim {
        let claims: Vec<Claim> = e
            .steps
            .iter()
            .map(|st| Claim::of(&st.summary, false))
            .collect();
        let worst = claims
            .iter()
            .filter(|c| matches!(c, Claim::Unsafe | Claim::Fenced | Claim::Caught))
            .min_by_key(|c| match c {
                Claim::Unsafe | Claim::Caught => 0,
                _ => 1,
            });
        let control = e.kind == crate::strategy::Kind::Control;
        if let Some(c) = worst {
            return c.clone();
        }
        // sweep.json's own judgement, when the steps' summaries do not show it.
        if !e.unsafe_steps.is_empty() {
            return if control {
                Claim::Caught
            } else {
                Claim::Unsafe
            };
        }
        // Clean only from a step that finished.
        match claims
            .into_iter()
            .find(|c| matches!(c, Claim::Safe | Claim::NotCaught))
        {
            Some(c) => c,
            None if e.steps.is_empty() => Claim::NotMeasured("no step ran".into()),
            None => Claim::NotMeasured("no step finished".into()),
        }
    }

    /// The verdict as the page says it, in its tone, with the two halves when it is not clean.
    pub fn said(&self, s: Option<&Summary>, anchor: String) -> Said {
        use crate::check::Verdict;
        let halves = s
            .map(|s| {
                let lock = s
                    .lock_verdict
                    .map(|l| format!("lock {}, ", Verdict::lock_text(Some(l))))
                    .unwrap_or_default();
                format!(" ({lock}store {})", Verdict::store_text(s.store_verdict))
            })
            .unwrap_or_default();
        match self {
            Claim::Safe => Said::default().n("safe", anchor),
            Claim::Fenced => Said::default()
                .link("fenced", anchor, Tone::Warn)
                .t(" (the lock broke; fencing refused every stale write)"),
            Claim::Unsafe => Said::default().link("UNSAFE", anchor, Tone::Bad).t(halves),
            Claim::Caught => Said::default().n("caught", anchor).t(halves),
            Claim::NotCaught => Said::default().link("not caught", anchor, Tone::Bad),
            Claim::NotMeasured(why) => Said::default().t(format!("not measured: {why}")),
        }
    }
}

/// One strategy's results in every part of a job.
pub struct Evidence<'a> {
    /// Strategy id.
    pub strategy: &'a str,
    /// Its family (`None`: unknown to this lockbench and absent from the sweep).
    pub family: Option<Family>,
    /// A known-unsafe control (makes no safety claim).
    pub control: bool,
    /// The job's sweep, when it has one.
    pub sweep: Option<&'a Sweep>,
    /// This strategy's entry in it.
    pub entry: Option<&'a Entry>,
    /// Whether the job has a calm part.
    pub calm_part: bool,
    /// This strategy's calm run.
    pub calm: Option<&'a Summary>,
    /// Every chaos scenario of the job, with this strategy's run in it.
    pub chaos: Vec<(&'a str, Option<&'a Summary>)>,
    /// The job's sale part (`calm` first, then its scenarios), with this strategy's run in it.
    pub sale: Vec<(&'a str, Option<&'a Summary>)>,
}

/// What a sweep says a strategy's capacity is.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capacity {
    /// Passed at this rate, failed just above it.
    Found(f64),
    /// At least this rate (the sweep's maximum, or the best before it stopped).
    AtLeast(f64),
    /// Below this rate (the lowest one offered failed).
    Below(f64),
}

impl Capacity {
    /// Reads an entry; `None` when the search stopped before any step passed.
    pub fn of(e: &Entry) -> Option<Capacity> {
        match e.bound {
            Bound::Found => Some(Capacity::Found(e.capacity_per_s)),
            Bound::AtLeastMax | Bound::MachineLimit => Some(Capacity::AtLeast(e.capacity_per_s)),
            Bound::Incomplete | Bound::Unbracketed if e.capacity_per_s > 0.0 => {
                Some(Capacity::AtLeast(e.capacity_per_s))
            }
            Bound::Unbracketed => e.first_failing_per_s.map(Capacity::Below),
            Bound::Incomplete => None,
            Bound::BelowLowest => {
                let lowest = e
                    .first_failing_per_s
                    .or_else(|| e.steps.iter().map(|s| s.rate_per_s).reduce(f64::min))?;
                Some(Capacity::Below(lowest))
            }
        }
    }

    /// The rate the capacity is stated at.
    pub fn per_s(self) -> f64 {
        match self {
            Capacity::Found(x) | Capacity::AtLeast(x) | Capacity::Below(x) => x,
        }
    }

    /// `640`, `≥ 2000`, `< 50`.
    pub fn text(self) -> String {
        match self {
            Capacity::Found(c) => rate(c),
            Capacity::AtLeast(c) => format!("≥ {}", rate(c)),
            Capacity::Below(c) => format!("< {}", rate(c)),
        }
    }

    /// An offered rate as a share of this capacity: `70%`, `≤ 70%` against a lower bound,
    /// `> 140%` against an upper one.
    pub fn share(self, offered: f64) -> Option<String> {
        let pct = |c: f64| (c > 0.0).then(|| percent_round(offered / c));
        match self {
            Capacity::Found(c) => pct(c),
            Capacity::AtLeast(c) => pct(c).map(|p| format!("≤ {p}")),
            Capacity::Below(c) => pct(c).map(|p| format!("> {p}")),
        }
    }
}

/// `at 800, 1600/s`, or `at every step (8)` when `rates` are all of `steps` (more than one).
pub fn at_rates(rates: &[f64], steps: usize) -> String {
    if rates.len() == steps && steps > 1 {
        return format!("at every step ({steps})");
    }
    let list: Vec<String> = rates.iter().map(|r| rate(*r)).collect();
    format!("at {}/s", list.join(", "))
}

/// The sweep's unsafe steps grouped by their verdict, in the order run: `UNSAFE at 800/s`,
/// `caught (control) at every step (8)`. `None` when no step was unsafe.
pub fn unsafe_steps_text(e: &Entry) -> Option<String> {
    if e.unsafe_steps.is_empty() {
        return None;
    }
    let mut groups: Vec<(&str, Vec<f64>)> = Vec::new();
    for r in &e.unsafe_steps {
        // sweep.json's list is the judgement; the step's summary says which verdict.
        let word = e
            .steps
            .iter()
            .find(|s| s.rate_per_s == *r)
            .map_or("unsafe", |s| s.summary.headline());
        match groups.iter_mut().find(|(w, _)| *w == word) {
            Some((_, rates)) => rates.push(*r),
            None => groups.push((word, vec![*r])),
        }
    }
    Some(
        groups
            .iter()
            .map(|(w, rates)| format!("{w} {}", at_rates(rates, e.steps.len())))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// The offered rate of a run (its workload's `load.rate`), when it was an open loop.
pub fn offered_rate(s: &Summary) -> Option<f64> {
    let load = s.workload.get("load")?;
    if load.get("mode").and_then(|m| m.as_str()) == Some("closed") {
        return None;
    }
    load.get("rate")?.as_f64()
}

/// How a run's faults were recovered from.
#[derive(Debug, Clone, PartialEq)]
pub enum Recovery {
    /// Every fault that took effect was healed and served again; the longest.
    Within(f64),
    /// A fault was healed and nothing was served in the `left_s` seconds between its heal and
    /// the end of the load.
    Never {
        /// The fault's id.
        fault: usize,
        /// Seconds of load after its heal.
        left_s: f64,
    },
    /// Not measured, with why: no fault took effect, or one healed after the load ended.
    NotMeasured(String),
}

impl Recovery {
    /// The recovery of a run's faults: the worst fault decides (a partial maximum would be
    /// kinder than what was measured).
    pub fn of(s: &Summary) -> Recovery {
        let mut longest: Option<f64> = None;
        let mut unmeasured: Option<String> = None;
        for f in s.faults.iter().filter(|f| f.started_s.is_some()) {
            match (f.healed_s, f.recovery_s) {
                (Some(_), Some(r)) => longest = Some(longest.map_or(r, |m| m.max(r))),
                (Some(h), None) if h < s.duration_s => {
                    return Recovery::Never {
                        fault: f.id,
                        left_s: round(s.duration_s - h, 3),
                    };
                }
                (Some(_), None) => {
                    unmeasured.get_or_insert(format!("fault {} healed after the load ended", f.id));
                }
                (None, _) => {
                    unmeasured.get_or_insert(format!("fault {} was not healed", f.id));
                }
            }
        }
        match (unmeasured, longest) {
            (Some(why), _) => Recovery::NotMeasured(why),
            (None, Some(r)) => Recovery::Within(r),
            (None, None) => Recovery::NotMeasured("no fault took effect".into()),
        }
    }

    /// The table cell: `2.100`, `none after fault 2`, `-`.
    pub fn cell(&self) -> String {
        match self {
            Recovery::Within(r) => secs(*r),
            Recovery::Never { fault, .. } => format!("none after fault {fault}"),
            Recovery::NotMeasured(_) => "-".into(),
        }
    }
}

impl Evidence<'_> {
    /// The capacity part of the summary line.
    pub fn capacity_said(&self) -> Said {
        let Some(sweep) = self.sweep else {
            return Said::default().t("capacity not measured (no sweep)");
        };
        let Some(e) = self.entry else {
            return Said::default().t("capacity not measured (not in the sweep)");
        };
        let at = format!(" arrivals/s at {}", sweep.slo.label());
        let anchor = ids::cap(self.strategy, "");
        let said = match Capacity::of(e) {
            None => Said::default().t(format!(
                "capacity not measured (the search stopped before any step passed{})",
                e.error
                    .as_deref()
                    .map(|x| format!(": {x}"))
                    .unwrap_or_default()
            )),
            Some(c @ Capacity::Found(_)) => {
                Said::default().t("sustains ").n(c.text(), anchor).t(at)
            }
            Some(c @ Capacity::AtLeast(_)) => {
                let why = if e.bound == Bound::AtLeastMax {
                    "the most the sweep offered".to_string()
                } else if let Some(m) = e.machine_limit.filter(|_| e.bound == Bound::MachineLimit) {
                    format!(
                        "the machine's CPUs ran out at {}/s, {:.0}% busy",
                        super::format::rate_exact(m.at_per_s),
                        m.busy * 100.0
                    )
                } else {
                    format!(
                        "the search stopped early{}",
                        e.error
                            .as_deref()
                            .map(|x| format!(": {x}"))
                            .unwrap_or_default()
                    )
                };
                Said::default()
                    .t("sustains ")
                    .n(c.text(), anchor)
                    .t(format!("{at} ({why})"))
            }
            Some(c @ Capacity::Below(_)) => Said::default()
                .t("sustains ")
                .n(c.text(), anchor)
                .t(format!("{at} (the lowest rate offered failed)")),
        };
        said.and(self.sweep_safety_said(e))
    }

    /// `; UNSAFE at 800/s, 1600/s in the sweep`, or nothing when every step was safe.
    fn sweep_safety_said(&self, e: &Entry) -> Said {
        let anchor = ids::cap(self.strategy, "unsafe");
        let rates = at_rates(&e.unsafe_steps, e.steps.len());
        match Claim::of_sweep(e) {
            Claim::Unsafe => Said::default()
                .t("; ")
                .link("UNSAFE", anchor, Tone::Bad)
                .t(format!(" {rates} in the sweep")),
            Claim::Fenced => Said::default()
                .t("; ")
                .link("fenced", anchor, Tone::Warn)
                .t(format!(
                    " {rates} in the sweep (the lock broke; fencing held)"
                )),
            Claim::Caught => Said::default()
                .t("; ")
                .n("caught", anchor)
                .t(format!(" {rates} in the sweep")),
            Claim::NotCaught => Said::default()
                .t("; ")
                .link("not caught", anchor, Tone::Bad)
                .t(" in the sweep"),
            Claim::Safe | Claim::NotMeasured(_) => Said::default(),
        }
    }

    /// The calm part of the summary line.
    pub fn calm_said(&self) -> Said {
        let Some(s) = self.calm else {
            return Said::default().label("calm run").t(": not measured");
        };
        let id = self.strategy;
        let mut said = Said::default().label("calm run");
        if let Some(r) = offered_rate(s) {
            said = said.t(" at ").n(rate(r), ids::calm(id, "rate")).t("/s");
        }
        said.t(": ").and(self.run_said(s))
    }

    /// What one run without faults says: its verdict, p99 and how busy its lock was (the calm
    /// part of the summary line, and the line under a printed `run` or `compare` table).
    pub fn run_said(&self, s: &Summary) -> Said {
        let id = self.strategy;
        let mut said = Claim::of(s, false).said(Some(s), ids::calm(id, "verdict"));
        // The cell's own text: the p99 with its count, or the maximum when too few.
        let p99 = crate::record::Pct::P99;
        let parts = latency_parts(&s.latency_us, p99, |q| s.among_unstarted(q), ms_exact);
        if let Some((value, of)) = parts {
            let label = if s.latency_us.supports(p99) {
                ", p99 "
            } else {
                ", slowest "
            };
            said = said
                .t(label)
                .n(format!("{value} ms"), ids::calm(id, "p99"))
                .t(format!(" ({of})"));
        }
        // No utilization: a strategy without a lock, or a summary older than the field.
        let locks = crate::strategy::find(id).ok().map(|i| i.locks);
        match (&s.utilization, locks) {
            (Some(u), _) => said
                .t(", lock busy ")
                .n(u.overall.to_string(), ids::calm(id, "util"))
                .t(" of the time"),
            (None, Some(false)) => said.t(", no lock"),
            (None, _) => said.t(", lock utilization not measured"),
        }
    }

    /// One scenario's part of the summary line.
    pub fn chaos_said(&self, scenario: &str, run: Option<&Summary>) -> Said {
        let said = Said::default().label(scenario).t(": ");
        let Some(s) = run else {
            return said.t("not measured");
        };
        let claim = Claim::of(s, true);
        let took = s.faults.iter().filter(|f| f.started_s.is_some()).count();
        if matches!(claim, Claim::NotMeasured(_)) && took == 0 {
            // Link the count of faults that happened, the number this rests on.
            let note = s.faults.iter().find_map(|f| f.note.as_deref());
            return said
                .t("not measured: ")
                .n(
                    format!("{took} of {}", s.faults.len()),
                    ids::chaos(scenario, self.strategy, "hit"),
                )
                .t(" faults took effect")
                .t(note.map(|n| format!(" ({n})")).unwrap_or_default());
        }
        let said = said.and(claim.said(Some(s), ids::chaos(scenario, self.strategy, "verdict")));
        if matches!(claim, Claim::NotMeasured(_)) {
            return said;
        }
        let anchor = ids::chaos(scenario, self.strategy, "recovery");
        let said = match Recovery::of(s) {
            Recovery::Within(r) => said
                .t(", served again ")
                .n(format!("{} s", secs(r)), anchor)
                .t(" after the heal"),
            Recovery::Never { fault, left_s } => said
                .t(", ")
                .link(format!("none after fault {fault}"), anchor, Tone::Bad)
                .t(format!(
                    ": nothing served in the {} s from its heal to the end of the load",
                    secs(left_s)
                )),
            Recovery::NotMeasured(why) => said.t(format!(", recovery not measured ({why})")),
        };
        // Stale tokens while the lock held: no second holder wrote, so the token source went
        // back (a restarted Redis counts again from 1), and the fence refused honest holders
        // until it counted past the store's highest. That, not the server, is the slow part.
        if claim == Claim::Safe && s.stale_rejected > 0 {
            return said
                .t("; its fence refused ")
                .n(
                    s.stale_rejected.to_string(),
                    ids::chaos(scenario, self.strategy, "stale"),
                )
                .t(
                    " writes of buyers that held the lock: its token counter restarted below the \
                     store's highest token, and every sale is refused until it has counted past \
                     it (as many tokens as it issued before the restart: here a few seconds' \
                     worth, in a service that ran for months far more)",
                );
        }
        said
    }

    /// The sale this strategy ran: the sale part's without a fault, else the first other run
    /// with one (the sale part's scenarios, the calm run, a chaos run).
    pub fn sale(&self) -> Option<&super::sale::Sale> {
        let runs = (self.sale.iter().filter_map(|(_, r)| *r))
            .chain(self.calm)
            .chain(self.chaos.iter().filter_map(|(_, r)| *r));
        runs.filter_map(|s| s.sale.as_ref()).next()
    }

    /// The whole plain-words line (without the strategy's name). A part the job does not have
    /// at all is left out (the page says once that it was not measured); a part the job has
    /// and this strategy is missing from reads `not measured`.
    pub fn line(&self) -> Said {
        let mut parts = Vec::new();
        // A sale opens the line: it is the job's headline (docs/sale.md).
        if let Some(sale) = self.sale() {
            parts.push(Said::default().t(format!("in the sale {}", sale.line())));
        }
        if self.sweep.is_some() {
            parts.push(self.capacity_said());
        }
        if self.calm_part {
            parts.push(self.calm_said());
        }
        for (scenario, run) in &self.chaos {
            parts.push(self.chaos_said(scenario, *run));
        }
        let mut said = Said::default();
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 {
                said = said.t("; ");
            }
            said = said.and(p);
        }
        said.t(".")
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Hand-made results for the tests of this module and of `needs`.
    use super::*;
    use crate::report::FaultSummary;
    use crate::report::sweep::{Search, Slo, Step};
    use crate::stats::Decision;
    use crate::strategy::Kind;

    /// The committed fixture summary, renamed, safe, with a lock.
    pub fn summary(strategy: &str) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = strategy.into();
        s.utilization = Some(crate::record::utilization::Utilization {
            overall: 0.62,
            per_sku: Vec::new(),
        });
        s.lock_verdict = Some(crate::check::LockVerdict::Held);
        s
    }

    /// A fault that started at 2 s, healed at 4 s and was served again `recovery` later.
    pub fn fault(id: usize, recovery: Option<f64>) -> FaultSummary {
        FaultSummary {
            id,
            label: "pause holder".into(),
            plan: serde_json::Value::Null,
            nodes: vec!["worker-1".into()],
            started_s: Some(2.0),
            healed_s: Some(4.0),
            first_served_after_start_s: Some(0.1),
            recovery_s: recovery,
            promotion_s: None,
            unavailable_s: Some(0.5),
            note: None,
            probe: None,
            dropped_bytes: None,
            dropped_files: None,
        }
    }

    /// A chaos run: `fixture summary` with one fault recovered in `recovery` seconds.
    pub fn chaos(strategy: &str, recovery: f64) -> Summary {
        let mut s = summary(strategy);
        s.faults = vec![fault(1, Some(recovery))];
        s
    }

    /// A sweep entry: `steps` as (rate, passed, safe).
    pub fn entry(
        strategy: &str,
        capacity: f64,
        bound: Bound,
        steps: &[(f64, bool, bool)],
    ) -> Entry {
        let steps: Vec<Step> = steps
            .iter()
            .map(|&(r, passed, safe)| {
                let mut summary = summary(strategy);
                if !safe {
                    summary.safe = false;
                    summary.lock_verdict = Some(crate::check::LockVerdict::Broken);
                }
                let d = if passed {
                    Decision::Pass
                } else {
                    Decision::Fail
                };
                Step::decided(r, d, 3.0, false, format!("{strategy}/{r}"), summary)
            })
            .collect();
        let fail = steps.iter().find(|s| !s.passed).map(|s| s.rate_per_s);
        let cap = (capacity, bound, fail);
        Entry::new(strategy, Family::RedisSingle, Kind::Lock, cap, steps, None)
    }

    /// A sweep at p99 ≤ 100 ms of `entries`.
    pub fn sweep(entries: Vec<Entry>) -> Sweep {
        Sweep {
            schema: crate::report::sweep::SWEEP_SCHEMA.into(),
            lockbench_version: "0.1.0".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            slo: Slo {
                quantile: 0.99,
                latency_ms: 100.0,
                min_served: 0.99,
            },
            search: Search {
                start_per_s: Some(50.0),
                max_per_s: 2000.0,
                factor: 2.0,
                ..Search::default()
            },
            workload_file: "workloads/flash-sale.toml".into(),
            entries,
            elapsed_s: 60.0,
            machine: None,
            environment: None,
            drift: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    fn evidence<'a>(
        strategy: &'a str,
        sweep: Option<&'a Sweep>,
        calm: Option<&'a Summary>,
        chaos: Vec<(&'a str, Option<&'a Summary>)>,
    ) -> Evidence<'a> {
        Evidence {
            strategy,
            family: Some(Family::RedisSingle),
            control: false,
            sweep,
            entry: sweep.and_then(|s| s.entry(strategy)),
            calm_part: calm.is_some(),
            calm,
            chaos,
            sale: Vec::new(),
        }
    }

    #[test]
    fn a_found_capacity_reads_plainly_and_links_to_its_cell() {
        let sweep = sweep(vec![entry(
            "redis-setnx",
            640.0,
            Bound::Found,
            &[
                (320.0, true, true),
                (640.0, true, true),
                (800.0, false, true),
            ],
        )]);
        let calm = summary("redis-setnx");
        let kill = chaos("redis-setnx", 2.1);
        let ev = evidence(
            "redis-setnx",
            Some(&sweep),
            Some(&calm),
            vec![("kill-master", Some(&kill)), ("pause-holder", None)],
        );
        let line = ev.line();
        assert_eq!(
            line.text(),
            "sustains 640 arrivals/s at p99 ≤ 100 ms, ≥ 99% served; calm run at 400/s: safe, \
             p99 3.007 ms (n=4945), lock busy 0.62 of the time; kill-master: safe, served \
             again 2.100 s after the heal; pause-holder: not measured."
        );
        let anchors: Vec<&str> = line.anchors().collect();
        assert_eq!(
            anchors,
            [
                "cap-redis-setnx",
                "calm-redis-setnx-rate",
                "calm-redis-setnx-verdict",
                "calm-redis-setnx-p99",
                "calm-redis-setnx-util",
                "chaos-kill-master-redis-setnx-verdict",
                "chaos-kill-master-redis-setnx-recovery"
            ]
        );
    }

    #[test]
    fn stale_tokens_while_the_lock_held_are_blamed_on_the_counter_not_a_second_holder() {
        // Nov 26, 2026: redis-setnx-fenced under kill-master, Redis restarted empty; the fence
        // refused 62 writes of honest holders and service came back 1.105 s after the heal.
        let mut kill = chaos("redis-setnx-fenced", 1.105);
        kill.stale_rejected = 62;
        let ev = evidence(
            "redis-setnx-fenced",
            None,
            None,
            vec![("kill-master", Some(&kill))],
        );
        let line = ev.line();
        assert_eq!(
            line.text(),
            "kill-master: safe, served again 1.105 s after the heal; its fence refused 62 writes \
             of buyers that held the lock: its token counter restarted below the store's highest \
             token, and every sale is refused until it has counted past it (as many tokens as it \
             issued before the restart: here a few seconds' worth, in a service that ran for months \
             far more)."
        );
        assert!(
            line.anchors()
                .any(|a| a == "chaos-kill-master-redis-setnx-fenced-stale")
        );
        // A broken lock whose stale writes were refused reads fenced, without that note.
        kill.lock_verdict = Some(crate::check::LockVerdict::Broken);
        let ev = evidence(
            "redis-setnx-fenced",
            None,
            None,
            vec![("kill-master", Some(&kill))],
        );
        assert!(
            !ev.line().text().contains("token counter"),
            "{}",
            ev.line().text()
        );
    }

    #[test]
    fn a_calm_run_too_small_for_a_p99_says_its_slowest() {
        let mut calm = summary("redis-setnx");
        calm.latency_us.count = 42;
        let text = evidence("redis-setnx", None, Some(&calm), vec![])
            .line()
            .text();
        let slowest = format!(
            ", slowest {} ms (max of 42),",
            ms_exact(calm.latency_us.max)
        );
        assert!(text.contains(&slowest) && !text.contains("p99 "), "{text}");
    }

    #[test]
    fn bounds_unsafe_steps_and_missing_parts_are_said() {
        let sweep = sweep(vec![
            entry("a", 2000.0, Bound::AtLeastMax, &[(2000.0, true, true)]),
            entry("b", 0.0, Bound::BelowLowest, &[(50.0, false, true)]),
            entry(
                "c",
                400.0,
                Bound::Found,
                &[(400.0, true, true), (800.0, false, false)],
            ),
        ]);
        let text = |id: &'static str| evidence(id, Some(&sweep), None, vec![]).line().text();
        assert!(
            text("a").starts_with("sustains ≥ 2000 arrivals/s"),
            "{}",
            text("a")
        );
        assert!(text("a").contains("(the most the sweep offered)"));
        assert!(
            text("b").starts_with("sustains < 50 arrivals/s"),
            "{}",
            text("b")
        );
        assert!(
            text("c").ends_with("; UNSAFE at 800/s in the sweep."),
            "{}",
            text("c")
        );
        assert_eq!(text("d"), "capacity not measured (not in the sweep).");
        // The job has a calm part and a scenario; this strategy ran in neither.
        let mut ev = evidence("d", None, None, vec![("kill-master", None)]);
        ev.calm_part = true;
        assert_eq!(
            ev.line().text(),
            "calm run: not measured; kill-master: not measured."
        );
    }

    #[test]
    fn the_line_opens_with_the_sale_when_the_strategy_ran_one() {
        let plain = summary("redis-setnx");
        let mut sold = plain.clone();
        sold.sale = Some(crate::report::sale::fixture());
        let text = |calm| {
            evidence("redis-setnx", None, Some(calm), vec![])
                .line()
                .text()
        };
        assert!(
            text(&sold).starts_with("in the sale sold 1000 of SKU 0"),
            "{}",
            text(&sold)
        );
        assert!(text(&plain).starts_with("calm run "), "{}", text(&plain));
        // A sale run under a fault opens it too, when there is no calm sale.
        let ev = evidence(
            "redis-setnx",
            None,
            None,
            vec![("kill-master", Some(&sold))],
        );
        assert!(
            ev.line().text().starts_with("in the sale "),
            "{}",
            ev.line().text()
        );
    }

    #[test]
    fn a_control_is_caught_or_not_never_safe() {
        let mut s = summary("none");
        s.claims_safety = false;
        assert_eq!(Claim::of(&s, false), Claim::NotCaught);
        let said = Claim::of(&s, false).said(Some(&s), "x".into());
        assert_eq!(said.text(), "not caught");
        s.safe = false;
        s.store_verdict = crate::check::StoreVerdict::Corrupted;
        assert_eq!(Claim::of(&s, false), Claim::Caught);
        assert_eq!(
            Claim::of(&s, false).said(Some(&s), "x".into()).text(),
            "caught (lock held, store CORRUPTED)"
        );
    }

    #[test]
    fn a_clean_verdict_needs_a_finished_run_and_a_fault_that_happened() {
        let mut s = chaos("redis-setnx", 1.0);
        assert_eq!(Claim::of(&s, true), Claim::Safe);
        s.faults[0].started_s = None;
        s.faults[0].note = Some("no holder to pause".into());
        assert_eq!(
            Claim::of(&s, true),
            Claim::NotMeasured("no fault took effect (no holder to pause)".into())
        );
        let mut s = summary("redis-setnx");
        s.interrupted = true;
        assert!(matches!(Claim::of(&s, false), Claim::NotMeasured(_)));
        // A broken lock counts even from an interrupted run.
        s.safe = false;
        s.lock_verdict = Some(crate::check::LockVerdict::Broken);
        assert_eq!(Claim::of(&s, false), Claim::Unsafe);
    }

    #[test]
    fn a_sweep_is_clean_only_from_a_step_that_finished() {
        let mut e = entry("x", 100.0, Bound::Found, &[(100.0, true, true)]);
        assert_eq!(Claim::of_sweep(&e), Claim::Safe);
        e.steps[0].summary.interrupted = true;
        assert_eq!(
            Claim::of_sweep(&e),
            Claim::NotMeasured("no step finished".into())
        );
        e.steps
            .push(entry("x", 0.0, Bound::Found, &[(200.0, false, false)]).steps[0].clone());
        assert_eq!(Claim::of_sweep(&e), Claim::Unsafe);
    }

    #[test]
    fn recovery_is_the_longest_or_never() {
        let mut s = chaos("x", 1.5);
        s.duration_s = 12.0;
        s.faults.push(fault(2, Some(2.5)));
        assert_eq!(Recovery::of(&s), Recovery::Within(2.5));
        assert_eq!(Recovery::of(&s).cell(), "2.500");
        // Healed at 4 s, nothing served until the end at 12 s.
        s.faults.push(fault(3, None));
        assert_eq!(
            Recovery::of(&s),
            Recovery::Never {
                fault: 3,
                left_s: 8.0
            }
        );
        // Healed after the load ended: nobody could have been served.
        s.duration_s = 3.5;
        assert_eq!(
            Recovery::of(&s),
            Recovery::NotMeasured("fault 3 healed after the load ended".into())
        );
        s.faults.clear();
        assert_eq!(
            Recovery::of(&s),
            Recovery::NotMeasured("no fault took effect".into())
        );
    }

    #[test]
    fn shares_of_a_bound_are_bounds() {
        assert_eq!(Capacity::Found(1000.0).share(700.0).unwrap(), "70%");
        assert_eq!(Capacity::AtLeast(1000.0).share(700.0).unwrap(), "≤ 70%");
        assert_eq!(Capacity::Below(50.0).share(35.0).unwrap(), "> 70%");
        assert_eq!(Capacity::Found(0.0).share(35.0), None);
    }

    #[test]
    fn ids_are_clean() {
        assert_eq!(ids::cap("lib:curator", ""), "cap-lib_curator");
        assert_eq!(
            ids::chaos("pause holder", "etcd", "verdict"),
            "chaos-pause_holder-etcd-verdict"
        );
    }
}

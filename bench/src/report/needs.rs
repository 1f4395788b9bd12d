//! `--needs`: what an architect requires of a strategy, e.g.
//! `--needs safe-under-pause,capacity>=500`, judged only from measured fields. A strategy
//! qualifies only when every term is measured and met; each reason links to its number.
//!
//! Terms (comma-separated):
//! - `capacity>=N`: the sweep's capacity is at least N arrivals/s (a lower bound `≥ M` with
//!   M ≥ N counts; `< M` and an exact capacity below N do not), at its lower end widened by
//!   the sweep's drift: the next run on the machine must meet it too.
//! - `safe`: safe in every part that measured the strategy (the sweep's steps, the calm run,
//!   every chaos scenario, the sale and each of its scenarios).
//! - `safe-under-SCENARIO`: safe in every chaos scenario named SCENARIO or `SCENARIO-…`, the
//!   sale's scenarios included (`safe-under-pause` covers `pause-holder` and `pause-master`,
//!   `safe-under-kill-master` the sale's `kill-master-in-surge`); the strategy must have run in
//!   each of them.
//! - `recovery<=DURATION`: every fault of every chaos scenario was served again within
//!   DURATION of its heal (`2s`, `500ms`).
//! - `p99<=DURATION`: the calm run's p99 over every scheduled arrival.
//! - `sold-out<=DURATION`: the sale without a fault sold its hot item out within DURATION of
//!   the surge's start.
//! - `sale-p99<=DURATION`: buyers' p99 in that sale's surge, every arrival counted.
//! - `fcfs>=X`: that sale's first-come-first-served share (0–1) of the hot item's units.
//! - `fenced-ok`: a `fenced` verdict (the lock broke, the fenced store refused every stale
//!   write, the store is intact) meets `safe` terms. Without it only `safe` does: a lock that
//!   broke is reported, not forgiven. A control never meets a `safe` term.

use std::time::Duration;

pub use super::evidence::Met;
use super::evidence::{Capacity, Claim, Evidence, Recovery, Said, Tone, ids};
use super::format::{latency_parts, ms_exact, rate, secs};
use super::layout::SALE_CALM;

/// The forms the parser accepts, for its errors.
pub const FORMS: &str = "capacity>=N (arrivals/s), safe, safe-under-SCENARIO, \
                         recovery<=DURATION, p99<=DURATION, sold-out<=DURATION, \
                         sale-p99<=DURATION (DURATION like 100ms or 2s), fcfs>=X (0 to 1), \
                         fenced-ok";

/// A term of `--needs` that is not one lockbench knows.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{term}`: {why}; expected a comma-separated list of: {FORMS}")]
pub struct NeedsError {
    /// The term as given.
    pub term: String,
    /// What is wrong with it.
    pub why: String,
}

/// One requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum Need {
    /// The sweep's capacity, arrivals/s, at least this.
    Capacity(f64),
    /// Safe in every measured part.
    Safe,
    /// Safe in every chaos scenario with this name or this name followed by `-`.
    SafeUnder(String),
    /// The longest recovery over every fault at most this.
    Recovery(Duration),
    /// The calm run's p99 at most this.
    P99(Duration),
    /// The sale's hot item sold out within this of the surge's start.
    SoldOut(Duration),
    /// Buyers' p99 in the sale's surge at most this.
    SaleP99(Duration),
    /// The sale's FCFS share at least this.
    Fcfs(f64),
}

/// The parsed `--needs` list.
#[derive(Debug, Clone, PartialEq)]
pub struct Needs {
    /// Each term as written, with its meaning, in the order given.
    pub terms: Vec<(String, Need)>,
    /// `fenced-ok` was given: a fenced verdict meets the `safe` terms.
    pub fenced_ok: bool,
    /// The list as given, for the page.
    pub given: String,
}

impl std::str::FromStr for Needs {
    type Err = NeedsError;

    fn from_str(s: &str) -> Result<Needs, NeedsError> {
        let mut needs = Needs {
            terms: Vec::new(),
            fenced_ok: false,
            given: s.trim().to_string(),
        };
        for term in s.split(',').map(str::trim) {
            let bad = |why: &str| NeedsError {
                term: term.to_string(),
                why: why.to_string(),
            };
            if term.is_empty() {
                return Err(bad("an empty term"));
            }
            let duration = |v: &str| {
                humantime::parse_duration(v.trim())
                    .map_err(|_| bad("not a duration"))
                    .and_then(|d| {
                        if d.is_zero() {
                            Err(bad("the duration must be above zero"))
                        } else {
                            Ok(d)
                        }
                    })
            };
            let need = if term == "fenced-ok" {
                needs.fenced_ok = true;
                continue;
            } else if term == "safe" {
                Need::Safe
            } else if let Some(scenario) = term.strip_prefix("safe-under-") {
                if scenario.is_empty() {
                    return Err(bad("no scenario after safe-under-"));
                }
                Need::SafeUnder(scenario.to_string())
            } else if let Some(n) = term.strip_prefix("capacity>=") {
                let n = n.trim().trim_end_matches("/s");
                match n.parse::<f64>() {
                    Ok(n) if n.is_finite() && n > 0.0 => Need::Capacity(n),
                    _ => return Err(bad("the capacity must be a number of arrivals/s above 0")),
                }
            } else if let Some(d) = term.strip_prefix("recovery<=") {
                Need::Recovery(duration(d)?)
            } else if let Some(d) = term.strip_prefix("p99<=") {
                Need::P99(duration(d)?)
            } else if let Some(d) = term.strip_prefix("sold-out<=") {
                Need::SoldOut(duration(d)?)
            } else if let Some(d) = term.strip_prefix("sale-p99<=") {
                Need::SaleP99(duration(d)?)
            } else if let Some(x) = term.strip_prefix("fcfs>=") {
                match x.trim().parse::<f64>() {
                    Ok(x) if (0.0..=1.0).contains(&x) => Need::Fcfs(x),
                    _ => return Err(bad("the FCFS share must be a number from 0 to 1")),
                }
            } else {
                return Err(bad("not a need"));
            };
            needs.terms.push((term.to_string(), need));
        }
        if needs.terms.is_empty() {
            return Err(NeedsError {
                term: s.trim().to_string(),
                why: "no requirement (fenced-ok alone asks for nothing)".into(),
            });
        }
        Ok(needs)
    }
}

/// One term judged for one strategy.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Judged {
    /// The term as written.
    pub term: String,
    /// Whether it is met.
    pub met: Met,
    /// Why, with the numbers linked.
    pub why: Said,
}

/// Every term judged for one strategy.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Judgement {
    /// Strategy id.
    pub strategy: String,
    /// One per term, in the order given.
    pub terms: Vec<Judged>,
}

impl Judgement {
    /// Every term measured and met.
    pub fn qualifies(&self) -> bool {
        self.terms.iter().all(|j| j.met == Met::Yes)
    }

    /// The first term not met or not measured.
    pub fn first_gap(&self) -> Option<&Judged> {
        self.terms.iter().find(|j| j.met != Met::Yes)
    }
}

impl Needs {
    /// Judges one strategy on every term.
    pub fn judge(&self, ev: &Evidence<'_>) -> Judgement {
        Judgement {
            strategy: ev.strategy.to_string(),
            terms: self
                .terms
                .iter()
                .map(|(term, need)| {
                    let (met, why) = match need {
                        Need::Capacity(n) => capacity(ev, *n),
                        Need::Safe => self.safe(ev),
                        Need::SafeUnder(scenario) => self.safe_under(ev, scenario),
                        Need::Recovery(d) => recovery(ev, d.as_secs_f64()),
                        Need::P99(d) => p99(ev, d.as_secs_f64() * 1e6),
                        Need::SoldOut(d) => super::needs_sale::sold_out(ev, d.as_secs_f64()),
                        Need::SaleP99(d) => super::needs_sale::surge_p99(ev, d.as_secs_f64() * 1e6),
                        Need::Fcfs(x) => super::needs_sale::fcfs(ev, *x),
                    };
                    Judged {
                        term: term.clone(),
                        met,
                        why,
                    }
                })
                .collect(),
        }
    }

    /// Whether a claim meets a `safe` term.
    fn counts_as_safe(&self, c: &Claim) -> Met {
        match c {
            Claim::Safe => Met::Yes,
            Claim::Fenced if self.fenced_ok => Met::Yes,
            Claim::NotMeasured(_) => Met::Unmeasured,
            _ => Met::No,
        }
    }

    /// Judges `parts` (name, claim, its cell, its summary) in order: the first one not met
    /// decides; else every one is cited.
    fn all_safe(&self, parts: Vec<(String, Claim, String)>) -> (Met, Said) {
        let mut cited = Said::default();
        for (i, (name, claim, anchor)) in parts.iter().enumerate() {
            let met = self.counts_as_safe(claim);
            let said = Said::default().t(format!("{name}: "));
            let said = match claim {
                // The summary line explains fenced; here the word is enough.
                Claim::Fenced if self.fenced_ok => said.link("fenced", anchor.clone(), Tone::Warn),
                Claim::Fenced => said
                    .link("fenced", anchor.clone(), Tone::Warn)
                    .t(" (the lock broke; fencing saved the store) — add fenced-ok to accept it"),
                _ => said.and(claim.said(None, anchor.clone())),
            };
            if met != Met::Yes {
                return (met, said);
            }
            if i > 0 {
                cited = cited.t(", ");
            }
            cited = cited.and(said);
        }
        (Met::Yes, cited)
    }

    fn safe(&self, ev: &Evidence<'_>) -> (Met, Said) {
        if ev.control {
            return (Met::No, control());
        }
        let mut parts = Vec::new();
        if let Some(e) = ev.entry {
            parts.push((
                "sweep".to_string(),
                Claim::of_sweep(e),
                ids::cap(ev.strategy, "unsafe"),
            ));
        }
        if let Some(s) = ev.calm {
            parts.push((
                "calm run".to_string(),
                Claim::of(s, false),
                ids::calm(ev.strategy, "verdict"),
            ));
        }
        for (scenario, run) in &ev.chaos {
            if let Some(s) = run {
                parts.push((
                    scenario.to_string(),
                    Claim::of(s, true),
                    ids::chaos(scenario, ev.strategy, "verdict"),
                ));
            }
        }
        for (scenario, run) in &ev.sale {
            if let Some(s) = run {
                parts.push(sale_part(scenario, s, ev.strategy));
            }
        }
        if parts.is_empty() {
            return (
                Met::Unmeasured,
                Said::default().t("no part of the job measured it"),
            );
        }
        self.all_safe(parts)
    }

    fn safe_under(&self, ev: &Evidence<'_>, scenario: &str) -> (Met, Said) {
        let named = |name: &str| {
            name == scenario
                || name
                    .strip_prefix(scenario)
                    .is_some_and(|rest| rest.starts_with('-'))
        };
        // (name, its run, whether it is the sale's), the steady scenarios first.
        let sale_scenarios = (ev.sale.iter()).filter(|(name, _)| *name != SALE_CALM);
        let matching: Vec<(&str, Option<&super::Summary>, bool)> = (ev.chaos.iter())
            .map(|(n, r)| (*n, *r, false))
            .chain(sale_scenarios.map(|(n, r)| (*n, *r, true)))
            .filter(|(name, _, _)| named(name))
            .collect();
        if matching.is_empty() {
            return (
                Met::Unmeasured,
                Said::default().t(format!(
                    "no chaos scenario named {scenario} or {scenario}-… was run"
                )),
            );
        }
        if ev.control {
            return (Met::No, control());
        }
        let mut parts = Vec::new();
        for (name, run, sale) in matching {
            let Some(s) = run else {
                return (
                    Met::Unmeasured,
                    Said::default().t(format!("{name}: not measured")),
                );
            };
            parts.push(match sale {
                true => sale_part(name, s, ev.strategy),
                false => (
                    name.to_string(),
                    Claim::of(s, true),
                    ids::chaos(name, ev.strategy, "verdict"),
                ),
            });
        }
        self.all_safe(parts)
    }
}

/// A run of the sale part as a part `all_safe` judges: the sale without a fault, or the sale
/// under `scenario` (which must have taken effect).
fn sale_part(scenario: &str, s: &super::Summary, strategy: &str) -> (String, Claim, String) {
    let (name, chaos) = match scenario {
        SALE_CALM => ("the sale".to_string(), false),
        sc => (format!("the sale under {sc}"), true),
    };
    (name, Claim::of(s, chaos), ids::summary(strategy))
}

fn control() -> Said {
    Said::default().t("a control makes no safety claim (it is there to be caught)")
}

fn capacity(ev: &Evidence<'_>, need: f64) -> (Met, Said) {
    let Some(e) = ev.entry else {
        let why = if ev.sweep.is_some() {
            "capacity not measured (not in the sweep)"
        } else {
            "capacity not measured (no sweep)"
        };
        return (Met::Unmeasured, Said::default().t(why));
    };
    let anchor = ids::cap(ev.strategy, "");
    let Some(c) = Capacity::of(e) else {
        return (
            Met::Unmeasured,
            Said::default().t("capacity not measured (the search stopped before any step passed)"),
        );
    };
    let said = Said::default().t("capacity ").n(c.text(), anchor).t("/s");
    // A need is met only where the next run on this machine would meet it too: at the lower
    // end widened by the sweep's drift (docs/capacity.md#between-moments).
    let widened = e.capacity_interval_per_s[0].unwrap_or(0.0);
    let met = match c {
        Capacity::Found(_) | Capacity::AtLeast(_) if widened >= need => Met::Yes,
        Capacity::Found(x) | Capacity::AtLeast(x) if x >= need => {
            let said = said.t(format!(
                ": {}/s at another moment (between runs)",
                rate(widened)
            ));
            return (
                Met::Unmeasured,
                said.t(format!(", {} /s not shown", rate(need))),
            );
        }
        Capacity::Found(_) => Met::No,
        // `≥ 400` does not say whether 500 holds.
        Capacity::AtLeast(_) => Met::Unmeasured,
        Capacity::Below(x) if x <= need => Met::No,
        // `< 50` does not say whether 30 holds.
        Capacity::Below(_) => Met::Unmeasured,
    };
    let said = match met {
        Met::Unmeasured => said.t(format!(": {} /s not shown either way", rate(need))),
        _ => said,
    };
    (met, said)
}

fn recovery(ev: &Evidence<'_>, max_s: f64) -> (Met, Said) {
    let mut longest: Option<(f64, &str)> = None;
    for (scenario, run) in &ev.chaos {
        let Some(s) = run else { continue };
        let anchor = ids::chaos(scenario, ev.strategy, "recovery");
        match Recovery::of(s) {
            Recovery::Within(r) if longest.is_none_or(|(m, _)| r > m) => {
                longest = Some((r, scenario))
            }
            Recovery::Within(_) => {}
            Recovery::Never { fault, left_s } => {
                let said = Said::default()
                    .t(format!("{scenario}: "))
                    .n(format!("none after fault {fault}"), anchor)
                    .t(format!(" in the {} s of load after its heal", secs(left_s)));
                // Too little load after the heal to tell.
                let met = if left_s > max_s {
                    Met::No
                } else {
                    Met::Unmeasured
                };
                return (met, said);
            }
            Recovery::NotMeasured(why) => {
                return (
                    Met::Unmeasured,
                    Said::default().t(format!("{scenario}: recovery not measured ({why})")),
                );
            }
        }
    }
    let Some((r, scenario)) = longest else {
        return (
            Met::Unmeasured,
            Said::default().t("recovery not measured (no chaos scenario ran it)"),
        );
    };
    let said = Said::default()
        .t("longest recovery ")
        .n(
            format!("{} s", secs(r)),
            ids::chaos(scenario, ev.strategy, "recovery"),
        )
        .t(format!(" ({scenario})"));
    (if r <= max_s { Met::Yes } else { Met::No }, said)
}

fn p99(ev: &Evidence<'_>, max_us: f64) -> (Met, Said) {
    let Some(s) = ev.calm else {
        return (
            Met::Unmeasured,
            Said::default().t("calm p99 not measured (no calm run)"),
        );
    };
    let l = &s.latency_us;
    let p = crate::record::Pct::P99;
    let censored = |q| s.among_unstarted(q);
    let Some((value, of)) = latency_parts(l, p, censored, ms_exact) else {
        return (
            Met::Unmeasured,
            Said::default().t("calm run served nothing"),
        );
    };
    let label = if l.supports(p) {
        "calm p99 "
    } else {
        "calm run's slowest "
    };
    let said = Said::default()
        .t(label)
        .n(format!("{value} ms"), ids::calm(ev.strategy, "p99"))
        .t(format!(" ({of})"));
    if !l.supports(p) {
        // Too few arrivals to bound a p99: only its lower bound can fail the need.
        let lower = l.ci95.map_or(0, |c| c.p99.0);
        let met = if lower as f64 > max_us {
            Met::No
        } else {
            Met::Unmeasured
        };
        return (met, said);
    }
    // A censored p99 is a lower bound: above the need it fails, below it says nothing.
    let met = match (l.p99 as f64 <= max_us, censored(p.q())) {
        (false, _) => Met::No,
        (true, false) => Met::Yes,
        (true, true) => Met::Unmeasured,
    };
    (met, said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Summary;
    use crate::report::evidence::fixtures::*;
    use crate::report::sweep::{Bound, Sweep};
    use crate::strategy::Family;

    #[test]
    fn parses_every_form() {
        let n: Needs = " safe-under-pause , capacity>=500,recovery<=2s,p99<=100ms,safe,fenced-ok"
            .parse()
            .unwrap();
        assert!(n.fenced_ok);
        let needs: Vec<&Need> = n.terms.iter().map(|(_, n)| n).collect();
        assert_eq!(
            needs,
            [
                &Need::SafeUnder("pause".into()),
                &Need::Capacity(500.0),
                &Need::Recovery(Duration::from_secs(2)),
                &Need::P99(Duration::from_millis(100)),
                &Need::Safe,
            ]
        );
        assert_eq!(n.terms[1].0, "capacity>=500");
        assert_eq!(
            "capacity>=750/s".parse::<Needs>().unwrap().terms[0].1,
            Need::Capacity(750.0)
        );
    }

    #[test]
    fn errors_name_the_bad_term_and_the_forms() {
        for (given, term) in [
            ("safe,capacity>500", "capacity>500"),
            ("capacity>=lots", "capacity>=lots"),
            ("capacity>=0", "capacity>=0"),
            ("p99<=fast", "p99<=fast"),
            ("recovery<=0s", "recovery<=0s"),
            ("safe-under-", "safe-under-"),
            ("safe,,p99<=1s", ""),
            ("fenced-ok", "fenced-ok"),
        ] {
            let e = given.parse::<Needs>().unwrap_err();
            assert_eq!(e.term, term, "{given}");
            let msg = e.to_string();
            assert!(msg.contains(&format!("`{term}`")), "{msg}");
            assert!(msg.contains("capacity>=N") && msg.contains("safe-under-SCENARIO"));
        }
    }

    /// A job of four strategies: `fast` (safe everywhere, 800/s), `fenced` (fenced under
    /// pause), `slow` (safe, 200/s), `broken` (UNSAFE under pause-holder).
    struct Job {
        sweep: Sweep,
        calm: Vec<Summary>,
        pause_holder: Vec<Summary>,
        kill: Vec<Summary>,
    }

    fn job() -> Job {
        let safe = [
            (100.0, true, true),
            (200.0, true, true),
            (400.0, false, true),
        ];
        let sweep = sweep(vec![
            entry(
                "fast",
                800.0,
                Bound::Found,
                &[(800.0, true, true), (1600.0, false, true)],
            ),
            entry("fenced", 600.0, Bound::Found, &safe),
            entry("slow", 200.0, Bound::Found, &safe),
            entry("broken", 700.0, Bound::Found, &safe),
        ]);
        let ids = ["fast", "fenced", "slow", "broken"];
        let calm = ids.iter().map(|i| summary(i)).collect();
        let mut pause_holder: Vec<Summary> = ids.iter().map(|i| chaos(i, 0.5)).collect();
        pause_holder[1].safe = false;
        pause_holder[1].lock_verdict = Some(crate::check::LockVerdict::BrokenFenced);
        pause_holder[3].safe = false;
        pause_holder[3].lock_verdict = Some(crate::check::LockVerdict::Broken);
        pause_holder[3].store_verdict = crate::check::StoreVerdict::Corrupted;
        let kill = ids.iter().map(|i| chaos(i, 3.0)).collect();
        Job {
            sweep,
            calm,
            pause_holder,
            kill,
        }
    }

    fn evidence<'a>(job: &'a Job, i: usize) -> Evidence<'a> {
        let id = job.calm[i].strategy.as_str();
        Evidence {
            strategy: id,
            family: Some(Family::RedisSingle),
            control: false,
            sweep: Some(&job.sweep),
            entry: job.sweep.entry(id),
            calm_part: true,
            calm: Some(&job.calm[i]),
            chaos: vec![
                ("kill-master", Some(&job.kill[i])),
                ("pause-holder", Some(&job.pause_holder[i])),
            ],
            sale: Vec::new(),
        }
    }

    fn qualifying(needs: &str, job: &Job) -> Vec<String> {
        let needs: Needs = needs.parse().unwrap();
        (0..4)
            .map(|i| needs.judge(&evidence(job, i)))
            .filter(Judgement::qualifies)
            .map(|j| j.strategy)
            .collect()
    }

    #[test]
    fn terms_filter_on_measured_fields() {
        let job = job();
        assert_eq!(qualifying("safe-under-pause,capacity>=500", &job), ["fast"]);
        assert_eq!(
            qualifying("safe-under-pause,capacity>=500,fenced-ok", &job),
            ["fast", "fenced"]
        );
        assert_eq!(
            qualifying("capacity>=200", &job),
            ["fast", "fenced", "slow", "broken"]
        );
        assert_eq!(qualifying("safe", &job), ["fast", "slow"]);
        assert_eq!(qualifying("recovery<=2s", &job), Vec::<String>::new());
        assert_eq!(qualifying("recovery<=3s,p99<=10ms", &job).len(), 4);
        assert_eq!(qualifying("p99<=1ms", &job), Vec::<String>::new());
    }

    #[test]
    fn a_calm_run_too_small_for_a_p99_cannot_meet_a_p99_need() {
        let mut job = job();
        job.calm[0].latency_us.count = 42;
        let needs: Needs = "p99<=1000s".parse().unwrap();
        let term = &needs.judge(&evidence(&job, 0)).terms[0];
        assert_eq!(term.met, Met::Unmeasured);
        assert!(
            term.why.text().ends_with(" ms (max of 42)"),
            "{}",
            term.why.text()
        );
        // Unless even the p99's lower bound is above the need.
        job.calm[0].latency_us.ci95 = Some(crate::record::Ci95 {
            p99: (5_000, None),
            ..Default::default()
        });
        let needs: Needs = "p99<=1ms".parse().unwrap();
        assert_eq!(needs.judge(&evidence(&job, 0)).terms[0].met, Met::No);
    }

    #[test]
    fn reasons_link_numbers_and_say_the_first_gap() {
        let job = job();
        let needs: Needs = "capacity>=500,safe-under-pause".parse().unwrap();
        let fast = needs.judge(&evidence(&job, 0));
        assert_eq!(fast.terms[0].why.text(), "capacity 800/s");
        assert_eq!(
            fast.terms[0].why.anchors().collect::<Vec<_>>(),
            ["cap-fast"]
        );
        assert_eq!(fast.terms[1].why.text(), "pause-holder: safe");
        let broken = needs.judge(&evidence(&job, 3));
        let gap = broken.first_gap().unwrap();
        assert_eq!(gap.term, "safe-under-pause");
        assert_eq!(gap.met, Met::No);
        assert_eq!(gap.why.text(), "pause-holder: UNSAFE");
        assert_eq!(
            gap.why.anchors().collect::<Vec<_>>(),
            ["chaos-pause-holder-broken-verdict"]
        );
        let fenced = needs.judge(&evidence(&job, 1));
        assert!(
            fenced
                .first_gap()
                .unwrap()
                .why
                .text()
                .contains("add fenced-ok"),
            "{:?}",
            fenced.first_gap()
        );
    }

    #[test]
    fn what_was_not_measured_never_qualifies() {
        let job = job();
        let mut ev = evidence(&job, 0);
        ev.chaos.retain(|(n, _)| *n != "pause-holder");
        let needs: Needs = "safe-under-pause".parse().unwrap();
        let j = needs.judge(&ev);
        assert_eq!(j.terms[0].met, Met::Unmeasured);
        assert!(
            j.terms[0]
                .why
                .text()
                .contains("no chaos scenario named pause")
        );
        // Present in the job but this strategy did not run in it.
        ev.chaos.push(("pause-master", None));
        assert_eq!(needs.judge(&ev).terms[0].met, Met::Unmeasured);
        // A lower bound below the need, and no sweep at all.
        let mut sweep = job.sweep.clone();
        sweep.entries[0].bound = Bound::AtLeastMax;
        let mut ev = evidence(&job, 0);
        ev.entry = sweep.entry("fast");
        let needs: Needs = "capacity>=1000".parse().unwrap();
        assert_eq!(needs.judge(&ev).terms[0].met, Met::Unmeasured);
        let needs: Needs = "capacity>=700".parse().unwrap();
        assert_eq!(needs.judge(&ev).terms[0].met, Met::Yes);
        // The same capacity with the sweep's drift: 700/s is met only if the next run's lower
        // end meets it too.
        let mut drifted = sweep.clone();
        drifted.entries[0].widen(1.2);
        ev.entry = drifted.entry("fast");
        let judged = needs.judge(&ev);
        assert_eq!(judged.terms[0].met, Met::Unmeasured);
        assert!(judged.terms[0].why.text().contains("between runs"));
        let needs: Needs = "capacity>=500".parse().unwrap();
        assert_eq!(needs.judge(&ev).terms[0].met, Met::Yes);
        ev.entry = None;
        ev.sweep = None;
        assert_eq!(needs.judge(&ev).terms[0].met, Met::Unmeasured);
        // A control never meets a safe term.
        let mut ev = evidence(&job, 0);
        ev.control = true;
        let needs: Needs = "safe".parse().unwrap();
        assert_eq!(needs.judge(&ev).terms[0].met, Met::No);
    }
}

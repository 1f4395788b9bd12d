//! The `--needs` terms a sale answers (`sold-out<=`, `sale-p99<=`, `fcfs>=`), judged on the
//! job's sale without a fault only: a sale under a fault answers the `safe-under-` terms.

use super::Summary;
use super::evidence::{Evidence, Met, Said, ids};
use super::format::{latency_parts, ms_exact, secs};
use super::layout::SALE_CALM;
use super::sale::Sale;
use crate::record::Pct;

/// The sale without a fault, with its figures, or why a term cannot be judged.
fn calm_sale<'a>(ev: &Evidence<'a>) -> Result<(&'a Summary, &'a Sale), (Met, Said)> {
    let unmeasured = |why: &str| (Met::Unmeasured, Said::default().t(why.to_string()));
    let Some((_, run)) = ev.sale.iter().find(|(n, _)| *n == SALE_CALM) else {
        return Err(unmeasured("no sale part in the job"));
    };
    let Some(s) = run else {
        return Err(unmeasured("the sale did not run this strategy"));
    };
    let Some(sale) = &s.sale else {
        return Err(unmeasured("the sale's run holds no sale figures"));
    };
    if let Some(why) = &sale.not_measured {
        return Err(unmeasured(&format!("sale figures not measured ({why})")));
    }
    Ok((s, sale))
}

/// The seconds from the surge's start to the load's end, from the run's workload.
fn after_surge_s(s: &Summary) -> Option<f64> {
    let start = s.workload.pointer("/load/start")?.as_str()?;
    let start = humantime::parse_duration(start).ok()?.as_secs_f64();
    Some(s.duration_s - start)
}

/// `sold-out<=DURATION`: the hot item sold out within `max_s` of the surge's start.
pub(super) fn sold_out(ev: &Evidence<'_>, max_s: f64) -> (Met, Said) {
    let (s, sale) = match calm_sale(ev) {
        Ok(x) => x,
        Err(no) => return no,
    };
    let hot = sale.hot_sku as usize;
    let f = sale.figures.as_ref();
    let anchor = ids::summary(ev.strategy);
    match f.and_then(|f| f.sold_out_after_surge_s.get(hot).copied().flatten()) {
        Some(t) => {
            let said = Said::default()
                .t("the sale's hot item sold out ")
                .n(format!("{} s", secs(t)), anchor)
                .t(" after the surge began");
            (if t <= max_s { Met::Yes } else { Met::No }, said)
        }
        None if sale.hot_sold >= sale.hot_stock => (
            Met::Unmeasured,
            Said::default().t("the sale's hot item sold out, its time not measured"),
        ),
        None => {
            let said = Said::default().t(format!(
                "the sale's hot item did not sell out ({} of {} sold",
                sale.hot_sold, sale.hot_stock
            ));
            // A load that ended sooner after the surge than the need says nothing.
            match after_surge_s(s) {
                Some(w) if w >= max_s => (
                    Met::No,
                    said.t(format!(" in the {} s after the surge began)", secs(w))),
                ),
                _ => (
                    Met::Unmeasured,
                    said.t(") before the load ended, sooner than the need"),
                ),
            }
        }
    }
}

/// `sale-p99<=DURATION`: buyers' p99 in the surge, every arrival counted. Arrivals never
/// started stand at their wait until the load's end, a lower bound: below the need they
/// cannot show it was met.
pub(super) fn surge_p99(ev: &Evidence<'_>, max_us: f64) -> (Met, Said) {
    let (_, sale) = match calm_sale(ev) {
        Ok(x) => x,
        Err(no) => return no,
    };
    let Some(f) = &sale.figures else {
        return (Met::Unmeasured, Said::default().t("no sale figures"));
    };
    let l = &f.phases.surge.latency_us;
    let Some((value, of)) = latency_parts(l, Pct::P99, |_| false, ms_exact) else {
        return (
            Met::Unmeasured,
            Said::default().t("no arrival in the sale's surge"),
        );
    };
    let supported = l.supports(Pct::P99);
    let label = if supported {
        "surge p99 "
    } else {
        "surge's slowest "
    };
    let said = Said::default()
        .t(label)
        .n(format!("{value} ms"), ids::summary(ev.strategy))
        .t(format!(" ({of})"));
    let censored = sale.refused_at_door > 0;
    let met = match (l.p99 as f64 <= max_us, supported && !censored) {
        (false, _) => Met::No,
        (true, true) => Met::Yes,
        (true, false) => Met::Unmeasured,
    };
    let said = match (met, censored) {
        (Met::Unmeasured, true) => said.t(format!(
            ", a lower bound: {} arrivals never started",
            sale.refused_at_door
        )),
        _ => said,
    };
    (met, said)
}

/// `fcfs>=X`: the share of the hot item's units the store sold to its first askers.
pub(super) fn fcfs(ev: &Evidence<'_>, min: f64) -> (Met, Said) {
    let (_, sale) = match calm_sale(ev) {
        Ok(x) => x,
        Err(no) => return no,
    };
    let Some(c) = sale.figures.as_ref().and_then(|f| f.fcfs) else {
        return (
            Met::Unmeasured,
            Said::default().t("FCFS not measured (no order of the hot item)"),
        );
    };
    let said = Said::default()
        .t("FCFS ")
        .n(c.score.to_string(), ids::summary(ev.strategy))
        .t(format!(" (n={} units)", c.units));
    (if c.score >= min { Met::Yes } else { Met::No }, said)
}

#[cfg(test)]
mod tests {
    use super::super::needs::{Judgement, Needs};
    use super::*;
    use crate::report::evidence::fixtures::{chaos, summary};
    use crate::strategy::Family;

    /// A sale run of `strategy` as a real one's summary holds it (mysql-atomic, Nov 28, 2026,
    /// its series cut): sold out 0.604 s after the surge, surge p99 54.2 ms of 2,159, FCFS 1.
    fn sold(strategy: &str) -> Summary {
        let mut s = summary(strategy);
        s.workload = serde_json::json!({"load": {"start": "1s"}});
        s.duration_s = 6.0;
        s.sale = Some(
            serde_json::from_str(
                r#"{"hot_sku": 0, "hot_stock": 1000, "hot_sold": 1000, "limit_violations": 0,
                "duplicate_orders": 0, "generator_lag_us": {"n": 3038, "p50_us": 755,
                "p99_us": 1897, "max_us": 2059}, "refused_at_door": 0, "slo": "p99=100ms",
                "sold_out_s": [1.604, 1.1741], "sold_out_after_surge_s": [0.604, 0.1741],
                "phases": {
                "before": {"latency_us": {"p50": 2697, "p90": 3459, "p99": 6607, "p999": 6607,
                  "max": 6607, "mean": 2743.3, "count": 47}, "within_slo": 47},
                "surge": {"latency_us": {"p50": 2931, "p90": 44639, "p99": 54239,
                  "p999": 55263, "max": 55775, "mean": 13801.7, "count": 2159},
                  "within_slo": 2159},
                "after": {"latency_us": {"p50": 1431, "p90": 2173, "p99": 2775, "p999": 4835,
                  "max": 8139, "mean": 1459.1, "count": 6120}, "within_slo": 6120}},
                "sold_out_answer_us": {"p50": 1424, "p90": 2239, "p99": 15871, "p999": 38815,
                  "max": 40415, "mean": 1778.2, "count": 7003},
                "fcfs": {"score": 1.0, "units": 1000, "units_to_earliest": 1000,
                  "stock": 1000, "askers": 2547, "median_winner_rank": 440, "unranked": 0},
                "in_flight_peak": 100, "undersell": 0, "undersell_per_sku": [0, 0],
                "orders_from": "store",
                "series": {"from_s": 0, "step_ms": 10, "arrivals": [], "sales": [],
                  "in_flight": []}}"#,
            )
            .expect("a sale as summary.json holds it"),
        );
        s
    }

    /// A slow lock's sale: not sold out, some arrivals never started, FCFS 0.6.
    fn unsold(strategy: &str) -> Summary {
        let mut s = sold(strategy);
        let sale = s.sale.as_mut().unwrap();
        sale.hot_sold = 800;
        sale.refused_at_door = 30;
        let f = sale.figures.as_mut().unwrap();
        f.sold_out_after_surge_s[0] = None;
        f.fcfs.as_mut().unwrap().score = 0.6;
        s
    }

    fn judge(needs: &str, sale: &[(&str, Option<&Summary>)]) -> Judgement {
        let needs: Needs = needs.parse().unwrap();
        needs.judge(&Evidence {
            strategy: "s",
            family: Some(Family::RedisSingle),
            control: false,
            sweep: None,
            entry: None,
            calm_part: false,
            calm: None,
            chaos: Vec::new(),
            sale: sale.to_vec(),
        })
    }

    fn met(j: &Judgement) -> Vec<Met> {
        j.terms.iter().map(|t| t.met).collect()
    }

    #[test]
    fn a_sale_meets_or_misses_its_terms_on_its_figures() {
        let (a, b) = (sold("s"), unsold("s"));
        let j = judge(
            "sold-out<=1s,sale-p99<=100ms,fcfs>=0.9",
            &[("calm", Some(&a))],
        );
        assert_eq!(met(&j), [Met::Yes; 3], "{j:?}");
        assert_eq!(
            j.terms[0].why.text(),
            "the sale's hot item sold out 0.604 s after the surge began"
        );
        assert_eq!(j.terms[2].why.text(), "FCFS 1 (n=1000 units)");
        let j = judge(
            "sold-out<=500ms,sale-p99<=50ms,fcfs>=1",
            &[("calm", Some(&a))],
        );
        assert_eq!(met(&j), [Met::No, Met::No, Met::Yes], "{j:?}");
        // Not sold out in the 5 s after the surge: a 3 s need is missed, a 9 s one unknown.
        let j = judge("sold-out<=3s,sold-out<=9s,fcfs>=0.9", &[("calm", Some(&b))]);
        assert_eq!(met(&j), [Met::No, Met::Unmeasured, Met::No], "{j:?}");
        // Arrivals never started make the surge's p99 a lower bound: it can only fail.
        let j = judge("sale-p99<=1s,sale-p99<=10ms", &[("calm", Some(&b))]);
        assert_eq!(met(&j), [Met::Unmeasured, Met::No], "{j:?}");
        assert!(j.terms[0].why.text().contains("30 arrivals never started"));
    }

    #[test]
    fn no_sale_no_answer_and_the_sales_verdicts_count_as_safety() {
        let a = sold("s");
        let j = judge("sold-out<=10s", &[]);
        assert_eq!(met(&j), [Met::Unmeasured]);
        let j = judge("fcfs>=0.5", &[("calm", None)]);
        assert_eq!(met(&j), [Met::Unmeasured]);
        // A sale over the limit is not safe, whatever else held.
        let mut over = sold("s");
        over.safe = false;
        over.store_verdict = crate::check::StoreVerdict::Corrupted;
        let j = judge("safe", &[("calm", Some(&over))]);
        assert_eq!(met(&j), [Met::No], "{j:?}");
        assert!(j.terms[0].why.text().starts_with("the sale: UNSAFE"));
        // The sale's kill answers safe-under-kill-master; a fault that never took effect, nothing.
        let mut killed = chaos("s", 0.5);
        killed.sale = a.sale.clone();
        let j = judge(
            "safe,safe-under-kill-master",
            &[("calm", Some(&a)), ("kill-master-in-surge", Some(&killed))],
        );
        assert_eq!(met(&j), [Met::Yes, Met::Yes], "{j:?}");
        assert!(
            j.terms[1]
                .why
                .text()
                .contains("the sale under kill-master-in-surge: safe")
        );
        killed.faults[0].started_s = None;
        let j = judge(
            "safe-under-kill-master",
            &[("kill-master-in-surge", Some(&killed))],
        );
        assert_eq!(met(&j), [Met::Unmeasured], "{j:?}");
    }

    #[test]
    fn bad_sale_terms_are_refused() {
        for t in ["fcfs>=1.5", "fcfs>=x", "sold-out<=0s", "sale-p99<=soon"] {
            let e = t.parse::<Needs>().unwrap_err();
            assert_eq!(e.term, t);
            assert!(e.to_string().contains("fcfs>=X"), "{e}");
        }
    }
}

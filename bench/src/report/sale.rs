//! `summary.json`'s `sale`: what a flash sale cost (docs/sale.md), written only for a sale
//! workload (`[buyers]` or a shape other than `steady`), so steady summaries are unchanged;
//! and its plain-words line, which the printed table and the job's report open with.

use serde::{Deserialize, Serialize};

use super::format::{latency_parts, ms_table, secs_table};
use crate::check::SaleAudit;
use crate::check::{OrderRow, SkuAudit};
use crate::record::sale::{HOT_SKU, SaleFigures, SaleInputs, SaleLog};
use crate::record::{GeneratorLag, LatencySummary, Pct};
use crate::workload::{Shape, Workload};

/// The SLO whose latency the sale's "answered within the SLO" share uses: the sweep's
/// default (`lockbench sweep --slo`).
pub const SLO: &str = super::sweep::DEFAULT_SLO;

/// Whether a workload is a sale: it has buyers as people or a shape other than steady.
pub fn is_sale(w: &Workload) -> bool {
    w.buyers.is_some() || w.load.shape != Shape::Steady
}

/// The sale's outcomes (`summary.json` `sale`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sale {
    /// The hot SKU (0), whose sell-out ends the surge and whose units FCFS judges.
    pub hot_sku: u32,
    /// Its initial stock.
    pub hot_stock: u64,
    /// Units of it the store sold (initial − left).
    pub hot_sold: u64,
    /// Buyers holding more units of a SKU than the limit (the store's audit).
    pub limit_violations: u64,
    /// Orders beyond the first for one request id (the store's audit).
    pub duplicate_orders: u64,
    /// How late the generator started arrivals at the peak (scheduled against started, µs,
    /// with n): lag that is the generator's, not the strategy's.
    pub generator_lag_us: GeneratorLag,
    /// Open-loop arrivals due before the end that no buyer ever started: refused at the door.
    pub refused_at_door: u64,
    /// The SLO whose latency `within_slo` counts against.
    pub slo: String,
    /// Why the figures folded from attempts are absent (`null`: measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
    /// Reserve, then pay (`[pay]`): the store's audit of every reservation, with what the
    /// payers counted (absent without `[pay]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay: Option<crate::check::PayAudit>,
    /// What the attempts, orders and stock say (absent when `not_measured`).
    #[serde(flatten)]
    pub figures: Option<SaleFigures>,
}

/// What a finished sale hands to [`Sale::new`].
pub struct SaleParts<'a> {
    /// The effective workload.
    pub workload: &'a Workload,
    /// The recorder's rows (`None`: not kept).
    pub log: Option<&'a SaleLog>,
    /// The store's orders (`None`: it lists none).
    pub orders: Option<&'a [OrderRow]>,
    /// The store's audit, per SKU.
    pub audits: &'a [SkuAudit],
    /// Arrivals never started.
    pub not_started: u64,
    /// A sale's purchases never started.
    pub unstarted: &'a [crate::record::sale::Unstarted],
    /// What the store's orders show about the limit and the request ids (`None`: no
    /// `[buyers]`, or a store that lists no orders).
    pub audit: Option<&'a SaleAudit>,
    /// The generator's lag in the peak window.
    pub lag: GeneratorLag,
    /// Worker processes the buyers ran in.
    pub workers: u32,
}

impl Sale {
    /// The sale's outcomes; `None` for a workload that is not a sale.
    pub fn new(p: SaleParts<'_>) -> Option<Sale> {
        let w = p.workload;
        if !is_sale(w) {
            return None;
        }
        let initial = w.inventory.stocks();
        let mut left: Vec<i64> = initial.iter().map(|s| *s as i64).collect();
        for a in p.audits {
            if let Some(l) = left.get_mut(a.sku as usize) {
                *l = a.final_stock;
            }
        }
        let hot_stock = initial.get(HOT_SKU as usize).copied().unwrap_or(0);
        let hot_left = left.get(HOT_SKU as usize).copied().unwrap_or(0).max(0) as u64;
        let not_measured = match (p.workers, p.log) {
            (0, Some(_)) => None,
            (0, None) => Some("the recorder kept no row per attempt".to_string()),
            (n, _) => Some(format!(
                "the buyers ran in {n} worker processes, which fold their attempts themselves: \
                 the coordinator never sees them one by one (run without --workers)"
            )),
        };
        let (_, slo_ms) = super::sweep::Slo::parse(SLO).expect("the default SLO parses");
        let figures = (not_measured.is_none()).then(|| {
            SaleFigures::of(SaleInputs {
                rows: p.log.map_or(&[][..], |l| &l.rows),
                unstarted: p.unstarted,
                load_end_us: w.load.duration.as_micros() as u64,
                orders: p.orders,
                initial: &initial,
                left: &left,
                surge_start_us: w.load.shape.surge_start().map(|d| d.as_micros() as u64),
                limit: w.buyers.as_ref().map(|b| b.limit),
                slo_us: (slo_ms * 1000.0) as u64,
            })
        });
        Some(Sale {
            hot_sku: HOT_SKU,
            hot_stock,
            hot_sold: hot_stock.saturating_sub(hot_left),
            limit_violations: p.audit.map_or(0, |a| a.limit_violations),
            duplicate_orders: p.audit.map_or(0, |a| a.duplicate_orders),
            generator_lag_us: p.lag,
            refused_at_door: p.not_started,
            slo: SLO.into(),
            not_measured,
            pay: None,
            figures,
        })
    }

    /// The sale in plain words: "sold 1000 of SKU 0 in 1.90 s from the surge; buyers' p99 in
    /// the surge 420 ms (n=50000); FCFS 0.93 (n=1000); 0 over the limit, 0 duplicates,
    /// undersell 0".
    pub fn line(&self) -> String {
        let mut parts = vec![self.sold_said()];
        if let Some(f) = &self.figures {
            parts.push(format!(
                "buyers' {} in the surge",
                latency_said(&f.phases.surge.latency_us)
            ));
            // Arrivals never started have no buyer on record: FCFS ranks the started ones.
            let among = if self.refused_at_door > 0 {
                ", among started arrivals"
            } else {
                ""
            };
            parts.push(match &f.fcfs {
                Some(c) => format!("FCFS {} (n={}{among})", c.score, c.units),
                None => "FCFS not measured (no order of the hot SKU)".into(),
            });
        }
        let under = self.figures.as_ref().map_or_else(
            || "undersell not measured".into(),
            |f| format!("undersell {}", f.undersell),
        );
        parts.push(format!(
            "{} over the limit, {} duplicates, {under}",
            self.limit_violations, self.duplicate_orders
        ));
        if self.refused_at_door > 0 {
            parts.push(format!(
                "{} arrivals refused at the door",
                self.refused_at_door
            ));
        }
        if let Some(p) = &self.pay {
            parts.push(format!(
                "reservations {}: {} paid, {} expired, {} reserved; {} returned twice, {} paid \
                 and returned, books {}",
                p.reservations,
                p.paid,
                p.expired,
                p.reserved,
                p.returned_twice,
                p.paid_and_returned,
                if p.unbalanced() == 0 {
                    "balance"
                } else {
                    "BROKEN"
                }
            ));
        }
        if let Some(why) = &self.not_measured {
            parts.push(format!("latency and FCFS not measured: {why}"));
        }
        parts.join("; ")
    }

    /// How the hot SKU sold: in how long, or how much of it.
    fn sold_said(&self) -> String {
        let hot = self.hot_sku as usize;
        let f = self.figures.as_ref();
        let from_surge = f.and_then(|f| f.sold_out_after_surge_s.get(hot).copied().flatten());
        let from_start = f.and_then(|f| f.sold_out_s.get(hot).copied().flatten());
        let head = format!("sold {} of SKU {}", self.hot_sold, self.hot_sku);
        match (from_surge, from_start) {
            (Some(s), _) => format!("{head} in {} s from the surge", secs_table(s)),
            (None, Some(s)) => format!("{head} in {} s", secs_table(s)),
            (None, None) if self.hot_sold >= self.hot_stock => format!("{head}: sold out"),
            (None, None) => format!("{head} (of {}: not sold out)", self.hot_stock),
        }
    }
}

/// `p99 420 ms (n=50000)`, `max 3.20 ms (max of 40)`, `no attempts`.
fn latency_said(l: &LatencySummary) -> String {
    match latency_parts(l, Pct::P99, |_| false, ms_table) {
        Some((v, n)) if l.supports(Pct::P99) => format!("p99 {v} ms ({n})"),
        Some((v, n)) => format!("max {v} ms ({n})"),
        None => "latency: no attempts".into(),
    }
}

/// A measured-elsewhere sale of 1,000 units, sold out (tests of the renderers).
#[cfg(test)]
pub(crate) fn fixture() -> Sale {
    Sale {
        hot_sku: HOT_SKU,
        hot_stock: 1000,
        hot_sold: 1000,
        limit_violations: 0,
        duplicate_orders: 0,
        generator_lag_us: GeneratorLag::default(),
        refused_at_door: 0,
        slo: SLO.into(),
        not_measured: Some("the buyers ran in 4 worker processes".into()),
        pay: None,
        figures: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;
    use crate::record::sale::SaleRow;

    fn workload(extra: &str) -> Workload {
        let text = format!("seed = 1\n[inventory]\nskus = 2\nstock = 3\n{extra}");
        Workload::parse("w.toml", &text, &[]).expect("valid")
    }

    fn sold(buyer: u64, t_ms: u64) -> SaleRow {
        SaleRow {
            sku: 0,
            buyer,
            qty: 1,
            outcome: Outcome::Sold,
            intended_us: t_ms * 1000,
            started_us: t_ms * 1000,
            ended_us: t_ms * 1000 + 2_000,
        }
    }

    /// workloads/sale.toml is a sale: a hot SKU of 1,000 and three cold of 100, buyers with a
    /// limit of one, and a surge.
    #[test]
    fn the_shipped_sale_parses_as_a_sale() {
        let text = include_str!("../../../workloads/sale.toml");
        let w = Workload::parse("workloads/sale.toml", text, &[]).expect("valid");
        assert!(is_sale(&w));
        assert_eq!(w.inventory.stocks(), vec![1000, 100, 100, 100]);
        assert_eq!(w.buyers.as_ref().map(|b| b.limit), Some(2));
        assert_eq!(
            w.load.shape.surge_start(),
            Some(std::time::Duration::from_secs(1))
        );
        assert!(
            w.load.duration <= std::time::Duration::from_secs(10),
            "the main job's budget"
        );
    }

    #[test]
    fn a_steady_workload_has_no_sale_and_buyers_make_one() {
        let parts = |w| SaleParts {
            workload: w,
            log: None,
            orders: None,
            audits: &[],
            not_started: 0,
            unstarted: &[],
            workers: 0,
            audit: None,
            lag: GeneratorLag::default(),
        };
        let steady = workload("");
        assert!(Sale::new(parts(&steady)).is_none());
        let w = workload("[buyers]\ncount = 10\n");
        let s = Sale::new(parts(&w)).expect("a sale");
        assert!(s.figures.is_none() && s.not_measured.is_some());
        let json = serde_json::to_value(&s).unwrap();
        assert!(json.get("sold_out_s").is_none(), "{json}");
    }

    #[test]
    fn the_line_says_what_sold_how_fast_and_how_fair() {
        let w = workload("[buyers]\ncount = 10\n");
        let rows: Vec<SaleRow> = (0..3).map(|b| sold(b, 100 * b)).collect();
        let log = SaleLog { rows };
        let orders: Vec<OrderRow> = (0..3)
            .map(|b| OrderRow {
                sku: 0,
                buyer: b,
                request: b,
                qty: 1,
            })
            .collect();
        let audits = [
            SkuAudit {
                sku: 0,
                final_stock: 0,
                sold: 3,
            },
            SkuAudit {
                sku: 1,
                final_stock: 3,
                sold: 0,
            },
        ];
        let s = Sale::new(SaleParts {
            workload: &w,
            log: Some(&log),
            orders: Some(&orders),
            audits: &audits,
            not_started: 4,
            unstarted: &[],
            workers: 0,
            audit: None,
            lag: GeneratorLag::default(),
        })
        .unwrap();
        assert_eq!(
            s.line(),
            "sold 3 of SKU 0 in 0.20 s; buyers' max 2.00 ms (max of 3) in the surge; FCFS 1 \
             (n=3, among started arrivals); 0 over the limit, 0 duplicates, undersell 0; 4 arrivals \
             refused at the door"
        );
        // The keys scripts read: tests/pipeline.rs asserts them in a run's summary.json.
        let json = serde_json::to_value(&s).unwrap();
        let back: Sale = serde_json::from_value(json).unwrap();
        assert_eq!(back, s, "summary.json's sale reads back");
    }
}

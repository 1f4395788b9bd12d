//! What a flash sale cost, folded from its attempts, the store's orders and its final stock:
//! when each SKU sold out, the buyers' latency before, during and after the surge, how fast a
//! "sold out" answer came back, first come first served on the hot SKU, the in-flight peak,
//! undersell (units left while askers went without) and a per-10 ms series of the surge.
//!
//! Only a sale keeps one row per attempt ([`SaleLog`], about 40 bytes each): the phases end
//! where the hot SKU sold out, known only at the end, and FCFS ranks every asker. The rows are
//! those of buyers in this process; attempts in worker processes are folded there and never
//! reach the coordinator one by one, so with workers these figures are not measured (the
//! summary says so). Pure: every figure is a function of its inputs, unit-tested below.

use std::collections::HashMap;
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::stats::{LatencySummary, hist};
use super::{Completion, Outcome};
use crate::check::OrderRow;
use crate::workload::Ask;

/// The SKU the sale is about: SKU 0 (`inventory.hot_stock` seeds it; zipf draws it most).
pub const HOT_SKU: u32 = 0;
/// Width of one bucket of the surge series.
pub const STEP_MS: u64 = 10;
/// The series spans at most this many buckets (30 s), around the surge.
const MAX_BUCKETS: usize = 3_000;
/// The series starts this long before the surge and ends this long after the hot sell-out.
const MARGIN_US: u64 = 500_000;

/// One purchase attempt as the sale's figures need it, its times in µs from the load's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SaleRow {
    /// SKU asked for.
    pub sku: u32,
    /// Buyer who asked.
    pub buyer: u64,
    /// Units asked for.
    pub qty: u32,
    /// What the attempt did.
    pub outcome: Outcome,
    /// When the schedule wanted it to start.
    pub intended_us: u64,
    /// When it started.
    pub started_us: u64,
    /// When it ended.
    pub ended_us: u64,
}

/// A sale's purchase that no buyer started before the load ended (every buyer was busy): an
/// asker refused at the door, its SKU, Ask and intended start (µs from the load's start) from
/// the schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unstarted {
    /// SKU asked for.
    pub sku: u32,
    /// Who asked, for how many units.
    pub ask: Ask,
    /// When the schedule wanted it to start.
    pub intended_us: u64,
}

impl SaleRow {
    /// The row of a completion of a load that started at `start`.
    pub fn of(c: &Completion, start: Instant) -> Self {
        let us = |t: Instant| t.saturating_duration_since(start).as_micros() as u64;
        Self {
            sku: c.sku,
            buyer: c.ask.buyer,
            qty: c.ask.qty,
            outcome: c.outcome,
            intended_us: us(c.intended),
            started_us: us(c.started),
            ended_us: us(c.ended),
        }
    }

    /// The buyer's latency: from the intended start to the answer.
    fn latency_us(&self) -> u64 {
        self.ended_us.saturating_sub(self.intended_us).max(1)
    }
}

/// The rows of a sale's purchase attempts, kept by the recorder (reads are not purchases).
#[derive(Debug, Default, Clone)]
pub struct SaleLog {
    /// One per purchase attempt of a buyer in this process, in completion order.
    pub rows: Vec<SaleRow>,
}

impl SaleLog {
    /// Keeps `c` (a purchase) as a row.
    pub fn push(&mut self, c: &Completion, start: Instant) {
        if !c.read {
            self.rows.push(SaleRow::of(c, start));
        }
    }
}

/// Whether an outcome is an answer a buyer can act on: sold, sold out, or refused by the
/// store (the limit, a repeated request): not a timeout, an error or an unknown.
fn answered(o: Outcome) -> bool {
    !matches!(
        o,
        Outcome::LockTimeout | Outcome::Failed(_) | Outcome::Unknown(_)
    )
}

/// What the sale's figures are computed from.
#[derive(Debug, Clone, Copy)]
pub struct SaleInputs<'a> {
    /// Every purchase attempt of the load (this process's buyers).
    pub rows: &'a [SaleRow],
    /// Purchases due before the end that no buyer started: askers who went without as surely
    /// as a refused one, and a latency censored at the load's end.
    pub unstarted: &'a [Unstarted],
    /// When the load ended, µs from its start: where a never-started arrival's wait is cut.
    pub load_end_us: u64,
    /// The store's orders (`None`: this store cannot list them; client outcomes stand in).
    pub orders: Option<&'a [OrderRow]>,
    /// Each SKU's stock at the start (index = SKU).
    pub initial: &'a [u64],
    /// Each SKU's stock at the end, as the store's audit read it (index = SKU).
    pub left: &'a [i64],
    /// When the surge started, µs from the load's start (`None`: a steady stream, no surge).
    pub surge_start_us: Option<u64>,
    /// Units one buyer may hold of one SKU (`None`: no limit, anonymous arrivals).
    pub limit: Option<u32>,
    /// The SLO's latency bound, µs: the share answered within it is reported per phase.
    pub slo_us: u64,
}

/// Latency of a set of buyers' attempts, and the share answered within the SLO.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseLatency {
    /// From each intended start to its answer, µs (`count` is n).
    pub latency_us: LatencySummary,
    /// Attempts answered (sold, sold out, refused) within the SLO's latency, of `count`.
    pub within_slo: u64,
    /// `within_slo / count` to four decimals (`null` without attempts).
    pub within_slo_share: Option<f64>,
}

impl PhaseLatency {
    /// The latency of `rows`, and of `censored` waits of arrivals never started (counted, never
    /// within the SLO: every arrival counts, so a strategy never shows a better tail by
    /// serving fewer).
    fn of<'r>(
        rows: impl Iterator<Item = &'r SaleRow>,
        censored: impl Iterator<Item = u64>,
        slo_us: u64,
    ) -> Self {
        let mut h: Histogram<u64> = hist(3);
        let mut within = 0;
        for r in rows {
            let l = r.latency_us();
            h.saturating_record(l);
            within += u64::from(answered(r.outcome) && l <= slo_us);
        }
        for l in censored {
            h.saturating_record(l.max(1));
        }
        let n = h.len();
        Self {
            latency_us: LatencySummary::of(&h),
            within_slo: within,
            within_slo_share: (n > 0).then(|| round4(within as f64 / n as f64)),
        }
    }
}

/// The buyers' latency in the sale's three phases, by intended start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    /// Before the surge started (empty for a shape without one).
    pub before: PhaseLatency,
    /// From the surge's start until the hot SKU sold out (until the end if it did not).
    pub surge: PhaseLatency,
    /// After the hot SKU sold out.
    pub after: PhaseLatency,
}

/// First come, first served on the hot SKU: did its earliest askers get its units?
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fcfs {
    /// Share of the hot SKU's units sold to its first `stock` askers (ranked by their first
    /// intended arrival): 1 when the earliest won every unit.
    pub score: f64,
    /// Units of the hot SKU the store holds orders for: the share's n.
    pub units: u64,
    /// Of them, won by the first `stock` askers.
    pub units_to_earliest: u64,
    /// The hot SKU's initial stock: how many askers count as the earliest.
    pub stock: u64,
    /// Distinct buyers who asked for the hot SKU.
    pub askers: u64,
    /// Median arrival rank (1 = first asker) of the winners, one per order (`null` without
    /// any); a FIFO sale of `stock` units scores about `stock / 2`.
    pub median_winner_rank: Option<u64>,
    /// Winners whose buyer this process never saw ask (their orders are counted in `units`).
    pub unranked: u64,
}

/// Units left at the end although buyers who asked for the SKU got nothing.
#[derive(Debug, Clone, PartialEq, Default)]
struct Undersell {
    units: u64,
    per_sku: Vec<u64>,
}

/// The surge, bucket by bucket.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Series {
    /// Start of the first bucket, seconds from the load's start.
    pub from_s: f64,
    /// Width of a bucket, ms.
    pub step_ms: u64,
    /// Arrivals by intended start.
    pub arrivals: Vec<u64>,
    /// Units sold (attempts that ended sold), by their end.
    pub sales: Vec<u64>,
    /// The most attempts in flight (started, not ended) at once within the bucket.
    pub in_flight: Vec<u64>,
}

/// Everything the sale's attempts, orders and stock say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SaleFigures {
    /// Per SKU (index = SKU): seconds from the load's start to the end of the last sale of the
    /// SKU, when the store holds none of it at the end (`null`: it did not sell out).
    pub sold_out_s: Vec<Option<f64>>,
    /// The same from the surge's start (`null` also without a surge).
    pub sold_out_after_surge_s: Vec<Option<f64>>,
    /// The buyers' latency by phase.
    pub phases: Phases,
    /// How fast a "sold out" answer came back (every attempt answered sold out).
    pub sold_out_answer_us: LatencySummary,
    /// First come, first served on the hot SKU (`null` without orders of it).
    pub fcfs: Option<Fcfs>,
    /// The most attempts in flight at once.
    pub in_flight_peak: u64,
    /// Units left at the end although buyers who asked for them got none (summed over the
    /// SKUs): the seller's loss, the mirror of oversell.
    pub undersell: u64,
    /// Per SKU (index = SKU): min(units left, units its unserved askers asked for, each
    /// capped at the limit).
    pub undersell_per_sku: Vec<u64>,
    /// Who got an order, for undersell and FCFS: `store` (its orders) or `clients` (a sold
    /// answer: the store lists no orders).
    pub orders_from: String,
    /// Arrivals, sales and in-flight per 10 ms around the surge.
    pub series: Series,
}

/// `x` to four decimals.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

impl SaleFigures {
    /// The figures of one sale.
    pub fn of(i: SaleInputs<'_>) -> Self {
        let sold_out_us = sold_out_us(i.rows, i.left);
        let seconds = |us: Option<u64>| us.map(|u| round4(u as f64 / 1e6));
        let orders = orders_or_sold(i);
        let hot_out = sold_out_us.get(HOT_SKU as usize).copied().flatten();
        let under = undersell(i.rows, i.unstarted, &orders, i.left, i.limit);
        Self {
            sold_out_s: sold_out_us.iter().map(|u| seconds(*u)).collect(),
            sold_out_after_surge_s: sold_out_us
                .iter()
                .map(|u| seconds(u.zip(i.surge_start_us).map(|(u, s)| u.saturating_sub(s))))
                .collect(),
            phases: phases(&i, hot_out),
            sold_out_answer_us: PhaseLatency::of(
                i.rows.iter().filter(|r| r.outcome == Outcome::SoldOut),
                std::iter::empty(),
                i.slo_us,
            )
            .latency_us,
            fcfs: fcfs(&i, &orders),
            in_flight_peak: in_flight_peak(i.rows),
            undersell: under.units,
            undersell_per_sku: under.per_sku,
            orders_from: if i.orders.is_some() {
                "store"
            } else {
                "clients"
            }
            .into(),
            series: series(i.rows, i.surge_start_us, hot_out),
        }
    }
}

/// The orders of the store, or one per sold answer when it lists none.
fn orders_or_sold(i: SaleInputs<'_>) -> Vec<OrderRow> {
    match i.orders {
        Some(o) => o.to_vec(),
        None => (i.rows.iter())
            .filter(|r| r.outcome == Outcome::Sold)
            .map(|r| OrderRow {
                sku: r.sku,
                buyer: r.buyer,
                request: 0,
                qty: r.qty,
            })
            .collect(),
    }
}

/// Per SKU: the end of its last sold attempt, when the store has none of it left.
fn sold_out_us(rows: &[SaleRow], left: &[i64]) -> Vec<Option<u64>> {
    let mut last = vec![None::<u64>; left.len()];
    for r in rows.iter().filter(|r| r.outcome == Outcome::Sold) {
        if let Some(l) = last.get_mut(r.sku as usize) {
            *l = Some(l.map_or(r.ended_us, |t| t.max(r.ended_us)));
        }
    }
    last.iter()
        .zip(left)
        .map(|(t, left)| t.filter(|_| *left <= 0))
        .collect()
}

/// The three phases by intended start: before the surge, the surge until the hot SKU sold
/// out, after it.
fn phases(i: &SaleInputs<'_>, hot_out: Option<u64>) -> Phases {
    let surge = i.surge_start_us.unwrap_or(0);
    let end = hot_out.unwrap_or(u64::MAX);
    let within = |lo: u64, hi: u64| {
        let inside = move |t: u64| t >= lo && t < hi;
        PhaseLatency::of(
            i.rows.iter().filter(move |r| inside(r.intended_us)),
            (i.unstarted.iter().filter(move |u| inside(u.intended_us)))
                .map(|u| i.load_end_us.saturating_sub(u.intended_us)),
            i.slo_us,
        )
    };
    Phases {
        before: within(0, surge),
        surge: within(surge, end.max(surge)),
        after: within(end.max(surge), u64::MAX),
    }
}

/// Each asker of `sku` ranked by their first intended arrival (1 = first; ties by buyer id).
fn ranks(i: &SaleInputs<'_>, sku: u32) -> HashMap<u64, u64> {
    let mut first: HashMap<u64, u64> = HashMap::new();
    let asks = (i.rows.iter().map(|r| (r.sku, r.buyer, r.intended_us))).chain(
        i.unstarted
            .iter()
            .map(|u| (u.sku, u.ask.buyer, u.intended_us)),
    );
    for (_, buyer, at) in asks.filter(|(s, _, _)| *s == sku) {
        let t = first.entry(buyer).or_insert(at);
        *t = (*t).min(at);
    }
    let mut order: Vec<(u64, u64)> = first.into_iter().map(|(b, t)| (t, b)).collect();
    order.sort_unstable();
    (order.into_iter().enumerate())
        .map(|(i, (_, b))| (b, i as u64 + 1))
        .collect()
}

/// First come, first served on the hot SKU, from the orders the store holds of it.
fn fcfs(i: &SaleInputs<'_>, orders: &[OrderRow]) -> Option<Fcfs> {
    let stock = i.initial.get(HOT_SKU as usize).copied()?;
    let won: Vec<&OrderRow> = orders.iter().filter(|o| o.sku == HOT_SKU).collect();
    if won.is_empty() {
        return None;
    }
    let rank = ranks(i, HOT_SKU);
    let units: u64 = won.iter().map(|o| u64::from(o.qty)).sum();
    let mut early = 0;
    let mut winner_ranks = Vec::new();
    let mut unranked = 0;
    for o in &won {
        match rank.get(&o.buyer) {
            Some(&r) => {
                winner_ranks.push(r);
                early += u64::from(o.qty) * u64::from(r <= stock);
            }
            None => unranked += 1,
        }
    }
    winner_ranks.sort_unstable();
    Some(Fcfs {
        score: round4(early as f64 / units as f64),
        units,
        units_to_earliest: early,
        stock,
        askers: rank.len() as u64,
        median_winner_rank: winner_ranks
            .get(winner_ranks.len().saturating_sub(1) / 2)
            .copied(),
        unranked,
    })
}

/// The most attempts in flight at once: a sweep over starts (+1) and ends (−1), an end before
/// a start at the same µs.
fn in_flight_peak(rows: &[SaleRow]) -> u64 {
    let mut events: Vec<(u64, i8)> = rows
        .iter()
        .flat_map(|r| [(r.started_us, 1), (r.ended_us, -1)])
        .collect();
    events.sort_unstable();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += i64::from(d);
        peak = peak.max(now);
    }
    peak as u64
}

/// Per SKU: min(units left, units asked by buyers who hold none of it, each capped at the
/// limit). A buyer who holds an order was served, whatever their other attempts were told;
/// one whose every arrival went unstarted asked as surely as one refused.
fn undersell(
    rows: &[SaleRow],
    unstarted: &[Unstarted],
    orders: &[OrderRow],
    left: &[i64],
    limit: Option<u32>,
) -> Undersell {
    let served: std::collections::HashSet<(u32, u64)> =
        orders.iter().map(|o| (o.sku, o.buyer)).collect();
    let mut asked: HashMap<(u32, u64), u32> = HashMap::new();
    let asks = (rows.iter().map(|r| (r.sku, r.buyer, r.qty)))
        .chain(unstarted.iter().map(|u| (u.sku, u.ask.buyer, u.ask.qty)));
    for (sku, buyer, qty) in asks.filter(|(s, b, _)| !served.contains(&(*s, *b))) {
        let want = qty.min(limit.unwrap_or(u32::MAX));
        let a = asked.entry((sku, buyer)).or_insert(0);
        *a = (*a).max(want);
    }
    let mut unmet = vec![0u64; left.len()];
    for ((sku, _), qty) in asked {
        if let Some(u) = unmet.get_mut(sku as usize) {
            *u += u64::from(qty);
        }
    }
    let per_sku: Vec<u64> = (unmet.iter().zip(left))
        .map(|(u, l)| (*u).min((*l).max(0) as u64))
        .collect();
    Undersell {
        units: per_sku.iter().sum(),
        per_sku,
    }
}

/// Arrivals, sales and in-flight per [`STEP_MS`], from [`MARGIN_US`] before the surge (the
/// load's start without one) to as long after the hot SKU sold out (the last end if it did
/// not), at most [`MAX_BUCKETS`].
fn series(rows: &[SaleRow], surge: Option<u64>, hot_out: Option<u64>) -> Series {
    let step = STEP_MS * 1000;
    let last = rows.iter().map(|r| r.ended_us).max().unwrap_or(0);
    let from = surge.map_or(0, |s| s.saturating_sub(MARGIN_US)) / step * step;
    let to = hot_out.map_or(last, |t| (t + MARGIN_US).min(last));
    let n = (to.saturating_sub(from) / step + 1).min(MAX_BUCKETS as u64) as usize;
    let bucket = |t: u64| {
        (t >= from)
            .then(|| ((t - from) / step) as usize)
            .filter(|&b| b < n)
    };
    let mut s = Series {
        from_s: from as f64 / 1e6,
        step_ms: STEP_MS,
        arrivals: vec![0; n],
        sales: vec![0; n],
        in_flight: vec![0; n],
    };
    let mut events: Vec<(u64, i8)> = Vec::with_capacity(rows.len() * 2);
    for r in rows {
        if let Some(b) = bucket(r.intended_us) {
            s.arrivals[b] += 1;
        }
        if let Some(b) = bucket(r.ended_us).filter(|_| r.outcome == Outcome::Sold) {
            s.sales[b] += u64::from(r.qty);
        }
        events.extend([(r.started_us, 1), (r.ended_us, -1)]);
    }
    events.sort_unstable();
    // In flight when the series starts, then each bucket's peak from its opening count.
    let at = events.partition_point(|e| e.0 < from);
    let mut now: i64 = events[..at].iter().map(|e| i64::from(e.1)).sum();
    let mut rest = events[at..].iter().peekable();
    for (b, slot) in s.in_flight.iter_mut().enumerate() {
        let end = from + (b as u64 + 1) * step;
        let mut peak = now;
        while let Some((_, d)) = rest.next_if(|e| e.0 < end) {
            now += i64::from(*d);
            peak = peak.max(now);
        }
        *slot = peak.max(0) as u64;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt of `buyer` on `sku`, intended at `t_ms`, answered `lat_ms` later.
    fn row(sku: u32, buyer: u64, t_ms: u64, lat_ms: u64, outcome: Outcome) -> SaleRow {
        SaleRow {
            sku,
            buyer,
            qty: 1,
            outcome,
            intended_us: t_ms * 1000,
            started_us: t_ms * 1000,
            ended_us: (t_ms + lat_ms) * 1000,
        }
    }

    fn order(sku: u32, buyer: u64) -> OrderRow {
        OrderRow {
            sku,
            buyer,
            request: buyer,
            qty: 1,
        }
    }

    fn inputs<'a>(
        rows: &'a [SaleRow],
        orders: &'a [OrderRow],
        initial: &'a [u64],
        left: &'a [i64],
    ) -> SaleInputs<'a> {
        SaleInputs {
            rows,
            unstarted: &[],
            load_end_us: 6_000_000,
            orders: Some(orders),
            initial,
            left,
            surge_start_us: Some(1_000_000),
            limit: Some(1),
            slo_us: 100_000,
        }
    }

    /// Ten askers of the hot SKU, one each 10 ms from 1 s, and three units.
    fn ten_askers() -> Vec<SaleRow> {
        (0..10)
            .map(|b| row(HOT_SKU, b, 1_000 + 10 * b, 5, Outcome::SoldOut))
            .collect()
    }

    #[test]
    fn a_fifo_winner_set_scores_one_and_a_reversed_one_zero() {
        let rows = ten_askers();
        let fifo: Vec<OrderRow> = (0..3).map(|b| order(HOT_SKU, b)).collect();
        let f = fcfs(&inputs(&rows, &[], &[3], &[0]), &fifo).unwrap();
        assert_eq!((f.score, f.units, f.askers), (1.0, 3, 10));
        assert_eq!(f.median_winner_rank, Some(2));
        let last: Vec<OrderRow> = (7..10).map(|b| order(HOT_SKU, b)).collect();
        let f = fcfs(&inputs(&rows, &[], &[3], &[0]), &last).unwrap();
        assert_eq!((f.score, f.units_to_earliest), (0.0, 0));
        assert_eq!(f.median_winner_rank, Some(9));
        // One of three early: a third; a buyer never seen asking is unranked, not early.
        let mixed = [order(HOT_SKU, 0), order(HOT_SKU, 8), order(HOT_SKU, 99)];
        let f = fcfs(&inputs(&rows, &[], &[3], &[0]), &mixed).unwrap();
        assert_eq!((f.score, f.unranked), (0.3333, 1));
        assert!(
            fcfs(&inputs(&rows, &[], &[3], &[0]), &[order(1, 0)]).is_none(),
            "no hot order"
        );
    }

    #[test]
    fn a_buyers_rank_is_their_first_arrival() {
        // Buyer 5 pressed first at 0.5 s, then again: rank 1 by the first press.
        let mut rows = ten_askers();
        rows.push(row(HOT_SKU, 5, 500, 5, Outcome::SoldOut));
        let r = ranks(&inputs(&rows, &[], &[3], &[0]), HOT_SKU);
        assert_eq!((r[&5], r[&0], r.len()), (1, 2, 10));
    }

    #[test]
    fn undersell_is_seen_when_stock_is_left_and_an_asker_went_without() {
        let rows = [
            row(0, 1, 0, 5, Outcome::Sold),
            row(0, 2, 0, 5, Outcome::LockTimeout),
            row(
                0,
                3,
                0,
                5,
                Outcome::Unknown(crate::record::ErrorKind::Timeout),
            ),
            row(1, 4, 0, 5, Outcome::Sold),
        ];
        let orders = [order(0, 1), order(1, 4)];
        // SKU 0: 5 left, buyers 2 and 3 went without: 2 units undersold. SKU 1 sold out.
        let u = undersell(&rows, &[], &orders, &[5, 0], Some(1));
        assert_eq!((u.units, u.per_sku.clone()), (2, vec![2, 0]));
        // One unit left caps it; a buyer holding an order is served whatever else they saw.
        let u = undersell(&rows, &[], &[order(0, 1), order(0, 2)], &[1, 0], Some(1));
        assert_eq!(u.per_sku, vec![1, 0]);
        // A buyer whose arrival never started went without as surely as a refused one.
        let never = Unstarted {
            sku: 0,
            ask: Ask {
                buyer: 77,
                request: 77,
                qty: 1,
            },
            intended_us: 1_500_000,
        };
        let u = undersell(&[], &[never], &[], &[5, 0], Some(1));
        assert_eq!((u.units, u.per_sku.clone()), (1, vec![1, 0]));
        // Nothing left: no undersell, however many went without.
        assert_eq!(undersell(&rows, &[], &orders, &[0, 0], Some(1)).units, 0);
        // Units asked count up to the limit.
        let mut three = row(0, 9, 0, 5, Outcome::SoldOut);
        three.qty = 3;
        assert_eq!(undersell(&[three], &[], &[], &[10], Some(2)).units, 2);
    }

    #[test]
    fn sold_out_is_the_last_sale_of_a_sku_the_store_has_none_of() {
        let rows = [
            row(0, 1, 1_000, 200, Outcome::Sold),
            row(0, 2, 1_100, 400, Outcome::Sold),
            row(0, 3, 1_600, 10, Outcome::SoldOut),
            row(1, 4, 1_000, 50, Outcome::Sold),
        ];
        let f = SaleFigures::of(inputs(
            &rows,
            &[order(0, 1), order(0, 2), order(1, 4)],
            &[2, 5],
            &[0, 4],
        ));
        assert_eq!(f.sold_out_s, vec![Some(1.5), None]);
        assert_eq!(f.sold_out_after_surge_s, vec![Some(0.5), None]);
        assert_eq!(f.undersell, 0, "nobody asked for SKU 1 and went without");
        assert_eq!(f.orders_from, "store");
        assert_eq!(
            (f.sold_out_answer_us.count, f.sold_out_answer_us.max),
            (1, 10_007)
        );
    }

    #[test]
    fn phases_split_at_the_surge_and_the_hot_sell_out() {
        let rows = [
            row(0, 1, 200, 5, Outcome::SoldOut),        // before
            row(0, 2, 1_000, 50, Outcome::Sold),        // surge, within the SLO
            row(0, 3, 1_010, 300, Outcome::Sold),       // surge, over it; sells out at 1.31 s
            row(0, 4, 1_020, 20, Outcome::LockTimeout), // surge, not an answer
            row(0, 5, 1_400, 3, Outcome::SoldOut),      // after
        ];
        let mut i = inputs(&rows, &[], &[3], &[0]);
        let p = phases(&i, Some(1_310_000));
        let n = |l: &PhaseLatency| l.latency_us.count;
        assert_eq!((n(&p.before), n(&p.surge), n(&p.after)), (1, 3, 1));
        assert_eq!(p.surge.within_slo, 1);
        assert_eq!(p.surge.within_slo_share, Some(0.3333));
        assert_eq!(p.before.within_slo_share, Some(1.0));
        // An arrival never started counts in its phase, its wait cut at the load's end, never
        // within the SLO: serving fewer never shows a better tail.
        let door = [Unstarted {
            sku: 0,
            ask: Ask::anonymous(9),
            intended_us: 1_100_000,
        }];
        i.unstarted = &door;
        let p = phases(&i, Some(1_310_000));
        assert_eq!((n(&p.surge), p.surge.within_slo), (4, 1));
        // Its wait to the load's end, 4.9 s, as the histogram's 3 significant digits keep it.
        let cut = (i.load_end_us - 1_100_000) as f64;
        assert!((p.surge.latency_us.max as f64 - cut).abs() <= cut * 1e-3);
        // Without a surge or a sell-out, everything is the surge.
        i.surge_start_us = None;
        i.unstarted = &[];
        let p = phases(&i, None);
        assert_eq!((n(&p.before), n(&p.surge), n(&p.after)), (0, 5, 0));
    }

    #[test]
    fn in_flight_counts_overlaps_and_the_series_buckets_them() {
        let rows = [
            row(0, 1, 1_000, 25, Outcome::Sold),
            row(0, 2, 1_005, 10, Outcome::Sold),
            row(0, 3, 1_012, 30, Outcome::SoldOut),
            row(0, 4, 1_100, 1, Outcome::SoldOut),
        ];
        assert_eq!(in_flight_peak(&rows), 3);
        let s = series(&rows, Some(1_000_000), None);
        assert_eq!((s.from_s, s.step_ms), (0.5, 10));
        let at = |v: &[u64], ms: u64| v[((ms - 500) / 10) as usize];
        assert_eq!((at(&s.arrivals, 1_000), at(&s.arrivals, 1_010)), (2, 1));
        assert_eq!((at(&s.sales, 1_010), at(&s.sales, 1_020)), (1, 1));
        assert_eq!(at(&s.in_flight, 1_010), 3);
        assert_eq!(
            at(&s.in_flight, 1_030),
            1,
            "only buyer 3 is still in flight"
        );
        assert_eq!(at(&s.in_flight, 1_090), 0);
        assert_eq!(s.arrivals.iter().sum::<u64>(), 4);
    }

    #[test]
    fn without_the_stores_orders_sold_answers_stand_in() {
        let rows = ten_askers();
        let mut sold = rows.clone();
        for r in &mut sold[..3] {
            r.outcome = Outcome::Sold;
        }
        let mut i = inputs(&sold, &[], &[3], &[0]);
        i.orders = None;
        let f = SaleFigures::of(i);
        assert_eq!(f.orders_from, "clients");
        assert_eq!(f.fcfs.map(|f| f.score), Some(1.0));
    }
}

//! The sale's people and items: `[buyers]` (who presses "buy", their limit, how many units
//! an order asks for, who presses twice or retries), `[inventory]`'s popularity and the hot
//! item's stock, and the [`Ask`] every arrival carries to the store.
//!
//! A workload without `[buyers]` keeps the anonymous arrivals every steady workload had: each
//! arrival is its own buyer and request, one unit, no limit checked ([`Ask::anonymous`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use super::trace::Trace;

/// Who asks for what: the identity a store enforces the limit and idempotency on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Ask {
    /// The buyer pressing "buy" (an id in `0..buyers.count`; the attempt number without
    /// `[buyers]`).
    pub buyer: u64,
    /// The request id: one per order a buyer means to place. A second press and a retry after
    /// a timeout carry the same id, so an idempotent store places one order.
    pub request: u64,
    /// Units asked for, all or nothing.
    pub qty: u32,
}

impl Ask {
    /// The anonymous arrival of a workload without `[buyers]`: its own buyer and request, one
    /// unit.
    pub fn anonymous(seq: u64) -> Self {
        Self {
            buyer: seq,
            request: seq,
            qty: 1,
        }
    }
}

/// `[buyers]`: buyers as people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Buyers {
    /// Distinct buyer ids an arrival is drawn from.
    pub count: u64,
    /// Units one buyer may hold of one SKU.
    pub limit: u32,
    /// Units per order (all or nothing).
    pub quantity: Quantity,
    /// Share of orders whose buyer presses "buy" twice, a few hundred ms apart (same request).
    pub resubmit: f64,
    /// Share of buyers who try again, with the same request id, after their call timed out.
    pub retry_after_timeout: f64,
}

impl Buyers {
    /// Whether the buyer of `request` tries again, with the same request id, after a call of
    /// theirs timed out: a share `retry_after_timeout` of requests, decided by the request id
    /// and the seed alone, so every process and every run of the seed decides alike.
    pub fn retries(&self, seed: u64, request: u64) -> bool {
        draw(seed, request, 0x7265_7472_7921) < self.retry_after_timeout
    }
}

/// A uniform draw in `[0, 1)` from the seed, a request id and a `stream` of its own: each
/// decision about a request (retry, abandon, when to pay) reads its own stream, so none moves
/// another, and every process decides alike.
pub fn draw(seed: u64, request: u64, stream: u64) -> f64 {
    // splitmix64's finaliser spreads neighbouring ids over the whole range.
    let mut x = seed ^ request.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ stream;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Units per order: `"1"` or a range `"1..3"` (both ends included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    /// Fewest units an order asks for.
    pub min: u32,
    /// Most units an order asks for.
    pub max: u32,
}

impl std::str::FromStr for Quantity {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let whole = |t: &str| t.parse::<u32>().ok().filter(|n| *n > 0);
        let (min, max) = super::span::parse(s, whole)?;
        Ok(Self { min, max })
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::span::write(f, (self.min, self.max), |n| n)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// How demand spreads over the SKUs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Popularity {
    /// Every SKU as likely.
    #[default]
    Uniform,
    /// SKU `k` (0-based) drawn with weight `1 / (k + 1)^s`: SKU 0 is the hot item.
    Zipf(f64),
}

impl std::str::FromStr for Popularity {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim() {
            "uniform" => Ok(Self::Uniform),
            t => {
                let s: f64 = t
                    .strip_prefix("zipf:")
                    .ok_or(())?
                    .trim()
                    .parse()
                    .map_err(|_| ())?;
                if s.is_finite() && s > 0.0 && s <= 10.0 {
                    Ok(Self::Zipf(s))
                } else {
                    Err(())
                }
            }
        }
    }
}

impl std::fmt::Display for Popularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Uniform => f.write_str("uniform"),
            Self::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

impl Serialize for Popularity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The arrivals' shape over time (`[load] shape`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "lowercase", tag = "shape")]
pub enum Shape {
    /// `load.rate` throughout (Poisson or constant gaps): every workload before the sale.
    #[default]
    Steady,
    /// `load.rate` before `start`, a rise to `peak` within `rise`, then a decay with
    /// `half_life` toward `tail`, until `load.duration`.
    Sale {
        /// When the sale opens, from the start of the load.
        #[serde(serialize_with = "super::human::human")]
        start: Duration,
        /// How long the step from the pre-sale rate to the peak takes.
        #[serde(serialize_with = "super::human::human")]
        rise: Duration,
        /// Arrivals per second at the peak.
        peak: f64,
        /// Time for the excess over `tail` to halve after the peak.
        #[serde(serialize_with = "super::human::human")]
        half_life: Duration,
        /// Arrivals per second the decay tends to.
        tail: f64,
    },
    /// Arrivals replayed from a CSV (counts per bucket, or timestamps).
    Trace {
        /// The trace file, absolute (resolved against the workload file's folder when read),
        /// so a worker process reads the same file; written back as `load.trace`.
        #[serde(rename = "trace")]
        path: PathBuf,
        /// Its arrivals, read when the workload was validated.
        #[serde(skip)]
        arrivals: Arc<Trace>,
    },
}

impl Shape {
    /// When the surge starts, from the start of the load; `None` for a steady stream. A
    /// trace's surge is where its rate first reaches half its peak.
    pub fn surge_start(&self) -> Option<Duration> {
        match self {
            Shape::Steady => None,
            Shape::Sale { start, .. } => Some(*start),
            Shape::Trace { arrivals, .. } => arrivals.surge_start(),
        }
    }

    /// The expected arrivals per second at `t` from the start of the load, with `rate` the
    /// steady (or pre-sale) rate: the curve a schedule is drawn from. A trace's is its count
    /// in the bucket holding `t` over the bucket's length.
    pub fn rate_at(&self, rate: f64, t: Duration) -> f64 {
        match self {
            Shape::Steady => rate,
            Shape::Sale { .. } => self.curve(rate).map_or(rate, |c| c.rate(t.as_secs_f64())),
            Shape::Trace { arrivals, .. } => arrivals.rate_at(t),
        }
    }

    /// The sale's rate curve (`None` for the other shapes).
    pub fn curve(&self, rate: f64) -> Option<SaleCurve> {
        match *self {
            Shape::Sale {
                start,
                rise,
                peak,
                half_life,
                tail,
            } => Some(SaleCurve {
                before: rate,
                start: start.as_secs_f64(),
                rise: rise.as_secs_f64(),
                peak,
                half_life: half_life.as_secs_f64(),
                tail,
            }),
            _ => None,
        }
    }
}

/// The `sale` shape's rate as a function of time (seconds from the start of the load):
/// `before` until `start`, linear to `peak` over `rise`, then `tail + (peak - tail) ·
/// 2^(-τ / half_life)`. Its integral has a closed form, so arrivals are drawn by inverting it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SaleCurve {
    /// Arrivals per second before the sale (`load.rate`).
    pub before: f64,
    /// When the rise starts.
    pub start: f64,
    /// How long the rise takes (0: a step).
    pub rise: f64,
    /// Arrivals per second at the peak.
    pub peak: f64,
    /// Half-life of the decay, seconds.
    pub half_life: f64,
    /// Arrivals per second the decay tends to.
    pub tail: f64,
}

impl SaleCurve {
    /// Arrivals per second at `t`.
    pub fn rate(&self, t: f64) -> f64 {
        if t < self.start {
            self.before
        } else if t < self.start + self.rise {
            self.before + (self.peak - self.before) * (t - self.start) / self.rise
        } else {
            let tau = t - self.start - self.rise;
            self.tail + (self.peak - self.tail) * (-tau / self.half_life).exp2()
        }
    }

    /// Expected arrivals in `[0, t)`: the integral of [`Self::rate`].
    pub fn expected(&self, t: f64) -> f64 {
        let before = self.before * t.min(self.start);
        if t <= self.start {
            return before;
        }
        let r = (t - self.start).min(self.rise);
        let rising =
            self.before * r + (self.peak - self.before) * r * r / (2.0 * self.rise.max(1e-300));
        let tau = t - self.start - self.rise;
        if tau <= 0.0 {
            return before + rising;
        }
        let h = self.half_life / std::f64::consts::LN_2;
        before
            + rising
            + self.tail * tau
            + (self.peak - self.tail) * h * (1.0 - (-tau / self.half_life).exp2())
    }

    /// The time at which [`Self::expected`] reaches `target`, searched from `from` (a time at
    /// or before it): Newton's steps kept inside a bracket, which halves when a step leaves
    /// it. The curve's rate is never 0 (validated), so the bracket exists.
    pub fn time_of(&self, target: f64, from: f64) -> f64 {
        let mut lo = from;
        let mut step = ((target - self.expected(lo)) / self.rate(lo)).max(1e-9);
        let mut hi = lo + step;
        while self.expected(hi) < target {
            lo = hi;
            step *= 2.0;
            hi = lo + step;
        }
        let mut t = lo;
        for _ in 0..100 {
            let f = self.expected(t) - target;
            if f.abs() <= 1e-9 * target.max(1.0) || hi - lo <= 1e-12 {
                break;
            }
            if f > 0.0 {
                hi = t;
            } else {
                lo = t;
            }
            let next = t - f / self.rate(t);
            t = if next > lo && next < hi {
                next
            } else {
                (lo + hi) / 2.0
            };
        }
        t
    }
}

/// `[buyers]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuyers {
    pub count: Option<super::number::RawInt>,
    pub limit: Option<super::number::RawInt>,
    pub quantity: Option<QuantityText>,
    pub resubmit: Option<f64>,
    pub retry_after_timeout: Option<f64>,
}

/// A quantity as TOML reads it: `quantity = 1` or `quantity = "1..3"`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum QuantityText {
    Whole(i64),
    Text(String),
}

impl QuantityText {
    pub fn text(&self) -> String {
        match self {
            Self::Whole(n) => n.to_string(),
            Self::Text(t) => t.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_popularities_read_and_print_back() {
        let q: Quantity = "1..3".parse().unwrap();
        assert_eq!((q.min, q.max, q.to_string()), (1, 3, "1..3".to_string()));
        assert_eq!("2".parse::<Quantity>().unwrap().to_string(), "2");
        assert_eq!("1..=3".parse::<Quantity>().unwrap(), q);
        for bad in ["0", "3..1", "x", "1..", "-1", ""] {
            assert!(bad.parse::<Quantity>().is_err(), "{bad}");
        }
        assert_eq!("zipf:1.1".parse::<Popularity>(), Ok(Popularity::Zipf(1.1)));
        assert_eq!("uniform".parse::<Popularity>(), Ok(Popularity::Uniform));
        assert_eq!(Popularity::Zipf(1.1).to_string(), "zipf:1.1");
        for bad in ["zipf:", "zipf:0", "zipf:-1", "pareto", "zipf:nan"] {
            assert!(bad.parse::<Popularity>().is_err(), "{bad}");
        }
    }
}

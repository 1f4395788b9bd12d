//! The sale's people and items: `[buyers]` (who presses "buy", their limit, how many units
//! an order asks for, who presses twice or retries), `[inventory]`'s popularity and the hot
//! item's stock, and the [`Ask`] every arrival carries to the store.
//!
//! A workload without `[buyers]` keeps the anonymous arrivals every steady workload had: each
//! arrival is its own buyer and request, one unit, no limit checked ([`Ask::anonymous`]).

use serde::{Deserialize, Serialize, Serializer};

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
        let whole = |t: &str| t.trim().parse::<u32>().ok().filter(|n| *n > 0);
        let (min, max) = match s.split_once("..") {
            Some((a, b)) => (
                whole(a).ok_or(())?,
                whole(b.trim_start_matches('=')).ok_or(())?,
            ),
            None => (whole(s).ok_or(())?, whole(s).ok_or(())?),
        };
        if min > max {
            return Err(());
        }
        Ok(Self { min, max })
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}..{}", self.min, self.max)
        }
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
        start: std::time::Duration,
        /// How long the step from the pre-sale rate to the peak takes.
        #[serde(serialize_with = "super::human::human")]
        rise: std::time::Duration,
        /// Arrivals per second at the peak.
        peak: f64,
        /// Time for the excess over `tail` to halve after the peak.
        #[serde(serialize_with = "super::human::human")]
        half_life: std::time::Duration,
        /// Arrivals per second the decay tends to.
        tail: f64,
    },
    /// Arrivals replayed from a CSV (counts per bucket, or timestamps).
    Trace {
        /// The trace file, as resolved when the workload was read.
        path: std::path::PathBuf,
    },
}

impl Shape {
    /// When the surge starts, from the start of the load; `None` for a steady stream.
    pub fn surge_start(&self) -> Option<std::time::Duration> {
        match self {
            Shape::Steady => None,
            Shape::Sale { start, .. } => Some(*start),
            // The trace's surge is where its rate first reaches half its peak (wt-gen).
            Shape::Trace { .. } => None,
        }
    }
}

/// `[buyers]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBuyers {
    pub count: Option<i64>,
    pub limit: Option<i64>,
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

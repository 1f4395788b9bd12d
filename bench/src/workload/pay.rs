//! `[pay]`: reserve, then pay. With it, a sale's purchase is a reservation; its buyer pays
//! `pay_after` later, or never (a share `abandon`), and a reservation unpaid after
//! `pay_within` expires: a reaper returns its unit to stock.
//!
//! Whether a request's buyer abandons it and when they pay are drawn from the seed and the
//! request id alone ([`super::sale::draw`], on streams of their own), so every process and
//! every run of the seed decides alike and nothing else in the schedule moves.

use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use super::human::human;
use super::sale::draw;

/// The stream of "does this request's buyer never pay".
const ABANDON_STREAM: u64 = 0x0061_6261_6e64_6f6e; // "abandon"
/// The stream of "how long after the reservation does its buyer pay".
const PAY_AFTER_STREAM: u64 = 0x7061_795f_6166_7465; // "pay_afte"

/// `[pay]`, validated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pay {
    /// Share of reservations never paid.
    pub abandon: f64,
    /// The delay from a reservation to its payment, drawn uniformly in this range.
    pub pay_after: DelayRange,
    /// A reservation unpaid this long after it was made expires.
    #[serde(serialize_with = "human")]
    pub pay_within: Duration,
    /// Reaper tasks (production runs one per app node).
    pub reapers: u32,
    /// How often each reaper looks for expired reservations.
    #[serde(serialize_with = "human")]
    pub reap_every: Duration,
}

impl Pay {
    /// Whether the buyer of `request` never pays.
    pub fn abandons(&self, seed: u64, request: u64) -> bool {
        draw(seed, request, ABANDON_STREAM) < self.abandon
    }

    /// How long after its reservation the buyer of `request` pays.
    pub fn delay(&self, seed: u64, request: u64) -> Duration {
        let DelayRange { min, max } = self.pay_after;
        min + (max - min).mul_f64(draw(seed, request, PAY_AFTER_STREAM))
    }

    /// The longest the last reservation of a load can stay unsettled after the load ends: its
    /// payment's latest time or its expiry, then two reaper rounds.
    pub fn settle_bound(&self) -> Duration {
        self.pay_after.max.max(self.pay_within) + self.reap_every * 2
    }
}

/// A delay drawn in `min..=max`: `"100ms..1500ms"`, or one duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayRange {
    /// Shortest delay.
    pub min: Duration,
    /// Longest delay.
    pub max: Duration,
}

impl std::str::FromStr for DelayRange {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let (min, max) = super::span::parse(s, |t| humantime::parse_duration(t).ok())?;
        Ok(Self { min, max })
    }
}

impl std::fmt::Display for DelayRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::span::write(f, (self.min, self.max), humantime::format_duration)
    }
}

impl Serialize for DelayRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `[pay]` as the file writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPay {
    abandon: Option<f64>,
    pay_after: Option<String>,
    pay_within: Option<String>,
    reapers: Option<i64>,
    reap_every: Option<String>,
}

/// A bad value: its field, the value as written, the expected form.
pub(super) type Bad = (&'static str, String, &'static str);

impl RawPay {
    /// Validates every key (defaults: nobody abandons, pay within 100 ms–1.5 s, expire after
    /// 1 s, 2 reapers every 100 ms).
    pub(super) fn validate(self) -> Result<Pay, Bad> {
        let abandon = self.abandon.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&abandon) {
            return Err((
                "pay.abandon",
                abandon.to_string(),
                "a share from 0 to 1 (e.g. 0.2)",
            ));
        }
        let text = self.pay_after.unwrap_or_else(|| "100ms..1500ms".into());
        let pay_after = text.parse().map_err(|_| {
            (
                "pay.pay_after",
                format!("{text:?}"),
                "a delay or a range of delays such as \"100ms..1500ms\" (shortest first)",
            )
        })?;
        let positive = |field: &'static str, v: Option<String>, default: &str| {
            let text = v.unwrap_or_else(|| default.to_string());
            match humantime::parse_duration(text.trim()) {
                Ok(d) if !d.is_zero() => Ok(d),
                _ => Err((
                    field,
                    format!("{text:?}"),
                    "a positive duration such as \"100ms\" or \"1s\"",
                )),
            }
        };
        let reapers = self.reapers.unwrap_or(2);
        if !(1..=64).contains(&reapers) {
            return Err((
                "pay.reapers",
                reapers.to_string(),
                "a number of reaper tasks from 1 to 64",
            ));
        }
        Ok(Pay {
            abandon,
            pay_after,
            pay_within: positive("pay.pay_within", self.pay_within, "1s")?,
            reapers: reapers as u32,
            reap_every: positive("pay.reap_every", self.reap_every, "100ms")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pay(text: &str) -> Result<Pay, Bad> {
        toml::from_str::<RawPay>(text).unwrap().validate()
    }

    #[test]
    fn defaults_and_values_parse() {
        let p = pay("").unwrap();
        assert_eq!((p.abandon, p.reapers), (0.0, 2));
        assert_eq!(p.pay_within, Duration::from_secs(1));
        assert_eq!(p.reap_every, Duration::from_millis(100));
        assert_eq!(p.pay_after.to_string(), "100ms..1s 500ms");
        let p = pay("abandon = 0.2\npay_after = \"900ms..1100ms\"\npay_within = \"1s\"\nreapers = 3\nreap_every = \"50ms\"").unwrap();
        assert_eq!((p.abandon, p.reapers), (0.2, 3));
        assert_eq!(
            (p.pay_after.min, p.pay_after.max),
            (Duration::from_millis(900), Duration::from_millis(1100))
        );
        let one = pay("pay_after = \"300ms\"").unwrap();
        assert_eq!(one.pay_after.min, one.pay_after.max);
        // What it writes reads back the same.
        let back: DelayRange = p.pay_after.to_string().parse().unwrap();
        assert_eq!(back, p.pay_after);
    }

    #[test]
    fn bad_values_name_the_field_and_the_form() {
        assert_eq!(pay("abandon = 1.5").unwrap_err().0, "pay.abandon");
        let e = pay("pay_after = \"2s..1s\"").unwrap_err();
        assert_eq!(e.0, "pay.pay_after");
        assert!(e.2.contains("100ms..1500ms"), "{e:?}");
        assert_eq!(pay("pay_within = \"0s\"").unwrap_err().0, "pay.pay_within");
        assert_eq!(
            pay("reap_every = \"soon\"").unwrap_err().0,
            "pay.reap_every"
        );
        assert_eq!(pay("reapers = 0").unwrap_err().0, "pay.reapers");
        assert!(toml::from_str::<RawPay>("reaper = 2").is_err());
    }

    #[test]
    fn draws_are_the_seeds_and_spread_over_the_range() {
        let p = pay("abandon = 0.2\npay_after = \"100ms..1100ms\"").unwrap();
        let n = 10_000u64;
        let abandoned = (0..n).filter(|r| p.abandons(7, *r)).count() as f64 / n as f64;
        // 10,000 draws: a share's standard error is 0.004; 0.03 is over 7 of them.
        assert!((abandoned - 0.2).abs() < 0.03, "{abandoned}");
        let delays: Vec<Duration> = (0..n).map(|r| p.delay(7, r)).collect();
        assert!(
            delays
                .iter()
                .all(|d| p.pay_after.min <= *d && *d <= p.pay_after.max)
        );
        let early = delays
            .iter()
            .filter(|d| **d < Duration::from_millis(600))
            .count();
        assert!((early as f64 / n as f64 - 0.5).abs() < 0.03, "{early}");
        // Same seed and request, same answer; the streams are apart.
        assert_eq!(p.delay(7, 42), p.delay(7, 42));
        assert_ne!(p.delay(7, 42), p.delay(8, 42));
    }

    #[test]
    fn a_workload_with_pay_needs_buyers_names_its_file_and_crosses_to_a_worker() {
        use crate::workload::Workload;
        let text = "[buyers]\ncount = 10\n[pay]\nabandon = 0.25\npay_after = \"1s..2s\"\n";
        let w = Workload::parse("w.toml", text, &[]).unwrap();
        assert_eq!(w.pay.as_ref().unwrap().abandon, 0.25);
        let back = Workload::parse("<coordinator>", &toml::to_string(&w).unwrap(), &[]).unwrap();
        assert_eq!(back.pay, w.pay);
        let e = Workload::parse("w.toml", "[pay]\n", &[])
            .unwrap_err()
            .to_string();
        assert_contains!(e, "w.toml: pay = given without [buyers]");
        let e = Workload::parse("w.toml", "[buyers]\n[pay]\nreapers = 0\n", &[]);
        let e = e.unwrap_err().to_string();
        assert_contains!(e, "w.toml: pay.reapers = 0: expected a number of reaper");
        let set = ["pay.abandon=2".to_string()];
        let e = Workload::parse("w.toml", text, &set)
            .unwrap_err()
            .to_string();
        assert_contains!(e, "--set pay.abandon=2: pay.abandon = 2");
    }
}

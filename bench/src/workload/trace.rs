//! An arrival trace (`[load] shape = "trace"`): a CSV replayed exactly, so a user can offer
//! the first minute of their own last sale.
//!
//! Two forms, told apart by the number of columns:
//! - `t_ms,count`: the count of arrivals in each bucket; a bucket runs from its row's time to
//!   the next row's (the last one as long as the one before it). Its arrivals are spread
//!   evenly over the bucket, so the count per bucket is the trace's, exactly.
//! - `t_us`: one arrival per line, at that time (sorted when read).
//!
//! Times count from the first row (epoch stamps work as they are). Blank lines, lines starting
//! with `#` and a header line (a first line that is not a number) are skipped.

use std::path::Path;
use std::time::Duration;

/// The bucket a timestamp trace's rate curve is counted in.
const STAMP_BUCKET_US: u64 = 100_000;

/// A trace's arrivals and its rate curve.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// Every arrival, µs from the start of the load, in order.
    pub times_us: Vec<u64>,
    /// The curve: `(start_us, length_us, count)` per bucket, in order and back to back (the
    /// trace's own buckets, or 100 ms ones for a timestamp trace).
    pub buckets: Vec<(u64, u64, u64)>,
}

impl Trace {
    /// Reads the trace at `path`; the error names the file, the line and the expected form.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the trace: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses a trace's text (see the module's doc for its forms).
    pub fn parse(text: &str) -> Result<Self, String> {
        const FORM: &str = "expected `t_ms,count` per bucket or one `t_us` timestamp per line";
        let mut rows: Vec<(usize, Vec<u64>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Result<Vec<u64>, _> =
                line.split(',').map(|f| f.trim().parse::<u64>()).collect();
            match fields {
                Ok(f) if !f.is_empty() && f.len() <= 2 => rows.push((i + 1, f)),
                // A header: the first line that is not numbers.
                Err(_) if rows.is_empty() && i == first_line(text) => {}
                _ => return Err(format!("line {}: {line:?}: {FORM}", i + 1)),
            }
        }
        let width = rows
            .first()
            .map(|r| r.1.len())
            .ok_or(format!("no rows: {FORM}"))?;
        if let Some((n, _)) = rows.iter().find(|r| r.1.len() != width) {
            return Err(format!(
                "line {n}: not {width} column(s) like the first row: {FORM}"
            ));
        }
        if width == 2 {
            Self::of_counts(&rows)
        } else {
            Ok(Self::of_stamps(rows.iter().map(|r| r.1[0]).collect()))
        }
    }

    /// The `t_ms,count` form.
    fn of_counts(rows: &[(usize, Vec<u64>)]) -> Result<Self, String> {
        if rows.len() < 2 {
            return Err(
                "a count trace needs two rows at least: a bucket runs to the next row".into(),
            );
        }
        let t0 = rows[0].1[0];
        let mut buckets = Vec::with_capacity(rows.len());
        for (k, (n, row)) in rows.iter().enumerate() {
            let start = row[0]
                .checked_sub(t0)
                .filter(|_| k == 0 || row[0] > rows[k - 1].1[0]);
            let start = start.ok_or(format!(
                "line {n}: t_ms = {} is not after the row before",
                row[0]
            ))?;
            let end = match rows.get(k + 1) {
                Some((_, next)) => next[0].saturating_sub(t0),
                // The last bucket is as long as the one before it.
                None => start + (row[0] - rows[k - 1].1[0]),
            };
            buckets.push((start * 1000, (end - start) * 1000, row[1]));
        }
        let mut times_us = Vec::with_capacity(buckets.iter().map(|b| b.2 as usize).sum());
        for &(start, len, count) in &buckets {
            // Evenly over the bucket: the i-th of `count` at start + len·i/count.
            times_us.extend(
                (0..count)
                    .map(|i| start + (u128::from(len) * u128::from(i) / u128::from(count)) as u64),
            );
        }
        Ok(Self { times_us, buckets })
    }

    /// The one-timestamp-per-line form.
    fn of_stamps(mut stamps: Vec<u64>) -> Self {
        stamps.sort_unstable();
        let t0 = stamps[0];
        let times_us: Vec<u64> = stamps.iter().map(|t| t - t0).collect();
        let last = *times_us.last().expect("one row at least");
        let buckets = (0..=last / STAMP_BUCKET_US)
            .map(|b| {
                let start = b * STAMP_BUCKET_US;
                let count = times_us.partition_point(|t| *t < start + STAMP_BUCKET_US)
                    - times_us.partition_point(|t| *t < start);
                (start, STAMP_BUCKET_US, count as u64)
            })
            .collect();
        Self { times_us, buckets }
    }

    /// Arrivals per second at `t`: the count of the bucket holding it over its length; 0
    /// outside the trace.
    pub fn rate_at(&self, t: Duration) -> f64 {
        let t = t.as_micros() as u64;
        let k = self.buckets.partition_point(|b| b.0 <= t);
        match k.checked_sub(1).map(|k| self.buckets[k]) {
            Some((start, len, count)) if t < start + len && len > 0 => {
                count as f64 * 1e6 / len as f64
            }
            _ => 0.0,
        }
    }

    /// Where the rate first reaches half its peak (the start of that bucket).
    pub fn surge_start(&self) -> Option<Duration> {
        let rate = |b: &(u64, u64, u64)| b.2 as f64 / b.1.max(1) as f64;
        let peak = self.buckets.iter().map(rate).fold(0.0, f64::max);
        let b = self
            .buckets
            .iter()
            .find(|b| peak > 0.0 && rate(b) >= peak / 2.0)?;
        Some(Duration::from_micros(b.0))
    }
}

/// The index of the first line that is neither blank nor a comment.
fn first_line(text: &str) -> usize {
    text.lines()
        .position(|l| !(l.trim().is_empty() || l.trim().starts_with('#')))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_trace_spreads_each_bucket_evenly_and_keeps_its_count() {
        let t = Trace::parse("t_ms,count\n1000,4\n1010,0\n1020,2\n").unwrap();
        assert_eq!(t.times_us, vec![0, 2500, 5000, 7500, 20_000, 25_000]);
        assert_eq!(
            t.buckets,
            vec![(0, 10_000, 4), (10_000, 10_000, 0), (20_000, 10_000, 2)]
        );
        assert_eq!(t.rate_at(Duration::from_millis(5)), 400.0);
        assert_eq!(t.rate_at(Duration::from_millis(35)), 0.0);
        assert_eq!(t.surge_start(), Some(Duration::ZERO));
    }

    #[test]
    fn a_stamp_trace_is_sorted_and_counted_in_100ms_buckets() {
        let t = Trace::parse("# stamps\n1000250000\n1000000000\n1000050000\n").unwrap();
        assert_eq!(t.times_us, vec![0, 50_000, 250_000]);
        assert_eq!(
            t.buckets,
            vec![
                (0, 100_000, 2),
                (100_000, 100_000, 0),
                (200_000, 100_000, 1)
            ]
        );
        assert_eq!(t.surge_start(), Some(Duration::ZERO));
    }

    #[test]
    fn the_surge_is_where_the_rate_first_reaches_half_its_peak() {
        let t = Trace::parse("0,10\n100,40\n200,100\n300,60\n400,10\n").unwrap();
        assert_eq!(t.surge_start(), Some(Duration::from_millis(200)));
    }

    #[test]
    fn bad_traces_name_the_line_and_the_form() {
        for (text, says) in [
            ("0,1\n10,x\n", "line 2: \"10,x\""),
            ("0,1\n10\n", "line 2: not 2 column(s)"),
            ("0,1\n0,2\n", "line 2: t_ms = 0 is not after"),
            ("0,1\n", "two rows at least"),
            ("", "no rows"),
            ("0,1,2\n", "line 1"),
        ] {
            let e = Trace::parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_shipped_example_reads_with_its_surge_at_the_sales_start() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/traces/example.csv");
        let t = Trace::read(&path).unwrap();
        assert_eq!((t.times_us.len(), t.buckets.len()), (16_867, 400));
        assert_eq!(t.surge_start(), Some(Duration::from_millis(1010)));
    }
}

//! Acquire waits read back from a run's `history.jsonl`: for each attempt that was granted the
//! lock, the time from the attempt's start to acquire returning (`lease.acquired − started`),
//! apart from the critical section. `lockbench contend` uses it until the recorder keeps an
//! acquire-wait histogram of its own (then this reader is swapped for that one); it needs
//! the run's history, so the run must write it.

use std::path::Path;

use hdrhistogram::Histogram;

use super::{hist, read_history};

/// The acquire waits of one or more runs' histories.
pub struct AcquireWaits {
    /// Wait of every granted attempt, µs (3 significant digits, as the run's latencies).
    pub hist: Histogram<u64>,
    /// Granted attempts: those whose line holds a lease.
    pub grants: u64,
}

impl Default for AcquireWaits {
    fn default() -> Self {
        Self {
            hist: hist(3),
            grants: 0,
        }
    }
}

impl AcquireWaits {
    /// Adds every granted attempt of the history at `path`.
    pub fn add_history(&mut self, path: &Path) -> std::io::Result<()> {
        for line in read_history(path)? {
            let line = line?;
            if let Some(lease) = &line.lease {
                self.grants += 1;
                // Both times are µs on the run's one clock; a lease never precedes its start.
                let wait = lease.acquired_us.saturating_sub(line.start_us);
                super::stats::put(&mut self.hist, wait);
            }
        }
        Ok(())
    }

    /// The waits of one history.
    pub fn of_history(path: &Path) -> std::io::Result<Self> {
        let mut w = Self::default();
        w.add_history(path)?;
        Ok(w)
    }

    /// Adds another's waits.
    pub fn merge(&mut self, other: &AcquireWaits) {
        // Both come from `hist(3)`, which grows: adding never runs out of range.
        let _ = self.hist.add(&other.hist);
        self.grants += other.grants;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::LatencySummary;

    #[test]
    fn waits_are_acquired_minus_started_for_granted_attempts_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let lines = [
            r#"{"seq":0,"client":0,"sku":0,"outcome":"sold","intended_us":0,"start_us":100,"end_us":5000,"lease":{"key":"k","token":"a","acquired_us":1100,"released_us":4000}}"#,
            r#"{"seq":1,"client":1,"sku":0,"outcome":"lock_timeout","intended_us":0,"start_us":200,"end_us":2000200}"#,
            r#"{"seq":2,"client":1,"sku":0,"outcome":"sold","intended_us":0,"start_us":5000,"end_us":9000,"lease":{"key":"k","token":"b","acquired_us":8000,"released_us":8900}}"#,
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let w = AcquireWaits::of_history(&path).unwrap();
        assert_eq!(w.grants, 2);
        let s = LatencySummary::of(&w.hist);
        assert_eq!(s.count, 2);
        assert_eq!((s.p50, s.max), (1000, 3001));
        let mut both = AcquireWaits::default();
        both.merge(&w);
        both.merge(&w);
        assert_eq!((both.grants, both.hist.len()), (4, 4));
        assert!(AcquireWaits::of_history(&dir.path().join("missing")).is_err());
    }
}

//! The event history as JSON lines, streamed to disk (never held in memory).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use std::borrow::Cow;
use std::io::BufRead;

use serde::{Deserialize, Serialize};

use super::Completion;

/// Writes one JSON object per completion; times are µs since the run started.
pub struct HistoryWriter {
    out: BufWriter<File>,
    start: Instant,
}

/// One line of `history.jsonl`: borrowed when written, owned when read back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistoryLine<'a> {
    /// Attempt number.
    pub seq: u64,
    /// Buyer.
    pub client: u32,
    /// Item.
    pub sku: u32,
    /// The attempt was a read (`load.read_fraction`), whatever its outcome.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read: bool,
    /// Outcome class name.
    pub outcome: Cow<'a, str>,
    /// The stock a read saw (`read` and `torn_read` outcomes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock: Option<i64>,
    /// The stock a torn read saw at the end of its hold (it differed from `stock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_later: Option<i64>,
    /// Error kind of failed / unknown outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Cow<'a, str>>,
    /// Intended start, µs since the start of the load.
    pub intended_us: u64,
    /// Actual start.
    pub start_us: u64,
    /// End.
    pub end_us: u64,
    /// The release failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub release_failed: bool,
    /// The lease held, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<HistoryLease<'a>>,
}

/// A lease in `history.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistoryLease<'a> {
    /// Lock key.
    pub key: Cow<'a, str>,
    /// Owner token.
    pub token: Cow<'a, str>,
    /// Fencing token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// When acquire returned, µs.
    pub acquired_us: u64,
    /// When release was sent, µs.
    pub released_us: u64,
    /// The lease ended before its holder released it.
    #[serde(default)]
    pub lost: bool,
    /// A read lease of a read–write lock (others may share the key).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// Reads `history.jsonl` back, one line at a time (never the whole file in memory).
pub fn read_history(
    path: &Path,
) -> std::io::Result<impl Iterator<Item = std::io::Result<HistoryLine<'static>>>> {
    let file = std::io::BufReader::new(File::open(path)?);
    Ok(file
        .lines()
        .map(|l| serde_json::from_str::<HistoryLine<'static>>(&l?).map_err(std::io::Error::other)))
}

/// The most shared leases ([`HistoryLease::shared`]) of one key held at one moment in the
/// history at `path`: above 1, readers really shared a key. Holds every shared lease's two
/// ends in memory: for tests and inspection of a saved run, never for the recorder.
pub fn max_shared_holders(path: &Path) -> std::io::Result<u64> {
    // (key, time, +1 acquire / -1 release); at one time a release sorts first: touching leases
    // are not held at once.
    let mut ends: Vec<(String, u64, i64)> = Vec::new();
    for line in read_history(path)? {
        if let Some(l) = line?.lease.filter(|l| l.shared) {
            ends.push((l.key.to_string(), l.acquired_us, 1));
            ends.push((l.key.into_owned(), l.released_us, -1));
        }
    }
    ends.sort();
    let (mut most, mut held, mut key) = (0i64, 0i64, None::<String>);
    for (k, _, delta) in ends {
        if key.as_ref() != Some(&k) {
            (held, key) = (0, Some(k));
        }
        held += delta;
        most = most.max(held);
    }
    Ok(most as u64)
}

impl HistoryWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path, start: Instant) -> std::io::Result<Self> {
        Ok(Self {
            out: BufWriter::with_capacity(1 << 16, File::create(path)?),
            start,
        })
    }

    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_micros() as u64
    }

    /// Appends one completion.
    pub fn write(&mut self, c: &Completion) -> std::io::Result<()> {
        let seen = c.outcome.stock_seen();
        let line = HistoryLine {
            seq: c.seq,
            client: c.client,
            sku: c.sku,
            read: c.read,
            outcome: Cow::Borrowed(c.outcome.name()),
            stock: seen.map(|s| s.0),
            stock_later: seen.and_then(|s| s.1),
            error: c.outcome.error().map(|k| Cow::Borrowed(k.name())),
            intended_us: self.us(c.intended),
            start_us: self.us(c.started),
            end_us: self.us(c.ended),
            release_failed: c.release_failed,
            lease: c.lease.as_ref().map(|l| HistoryLease {
                key: Cow::Borrowed(&l.key),
                token: Cow::Borrowed(&l.token),
                fence: l.fence,
                acquired_us: self.us(l.acquired),
                released_us: self.us(l.released),
                lost: l.lost,
                shared: l.shared,
            }),
        };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    /// Flushes to disk.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::record::{ErrorKind, LeaseSpan, Outcome};

    #[test]
    fn lines_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let start = Instant::now();
        let at = |us| start + Duration::from_micros(us);
        let mut w = HistoryWriter::create(&path, start).unwrap();
        let mut c = Completion {
            ask: Default::default(),
            seq: 1,
            client: 2,
            sku: 3,
            read: false,
            outcome: Outcome::Unknown(ErrorKind::Timeout),
            intended: at(10),
            started: at(20),
            ended: at(90),
            release_failed: true,
            lease: Some(LeaseSpan {
                key: "k".into(),
                token: "t".into(),
                fence: Some(7),
                acquired: at(30),
                released: at(80),
                lost: false,
                shared: false,
                loss: None,
            }),
        };
        w.write(&c).unwrap();
        c.lease = None;
        c.outcome = Outcome::Sold;
        w.write(&c).unwrap();
        c.read = true;
        c.outcome = Outcome::TornRead { stock: 5, later: 4 };
        c.lease = Some(LeaseSpan {
            key: "k".into(),
            token: "r".into(),
            fence: None,
            acquired: at(30),
            released: at(80),
            lost: false,
            shared: true,
            loss: None,
        });
        w.write(&c).unwrap();
        c.outcome = Outcome::Read { stock: 4 };
        w.write(&c).unwrap();
        w.finish().unwrap();
        let lines: Vec<HistoryLine> = read_history(&path).unwrap().map(Result::unwrap).collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(
            (lines[0].outcome.as_ref(), lines[0].error.as_deref()),
            ("unknown", Some("timeout"))
        );
        let l = lines[0].lease.as_ref().unwrap();
        assert_eq!((l.fence, l.acquired_us, l.released_us), (Some(7), 30, 80));
        assert_eq!((lines[1].lease.is_none(), lines[1].end_us), (true, 90));
        assert_eq!((lines[1].read, lines[1].stock), (false, None));
        let torn = &lines[2];
        assert_eq!(
            (
                torn.read,
                torn.outcome.as_ref(),
                torn.stock,
                torn.stock_later
            ),
            (true, "torn_read", Some(5), Some(4))
        );
        assert!(torn.lease.as_ref().unwrap().shared);
        assert_eq!(
            (
                lines[3].outcome.as_ref(),
                lines[3].stock,
                lines[3].stock_later
            ),
            ("read", Some(4), None)
        );
    }
}

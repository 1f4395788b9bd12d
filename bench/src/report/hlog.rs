//! `latency.hlog` read back: each outcome class's histogram, or all of them merged.

use std::path::Path;

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

use super::error::{ReportError, read};

/// Reads `latency.hlog` and merges its histograms (one per outcome class) into one.
pub fn read_hlog(path: &Path) -> Result<Histogram<u64>, ReportError> {
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    all.auto(true);
    for (_, h) in read_hlog_classes(path)? {
        all.add(&h).map_err(|e| ReportError::Parse {
            path: path.to_path_buf(),
            msg: format!("histogram: {e:?}"),
        })?;
    }
    Ok(all)
}

/// Reads `latency.hlog`: each outcome class's histogram, by its tag.
pub fn read_hlog_classes(path: &Path) -> Result<Vec<(String, Histogram<u64>)>, ReportError> {
    let bytes = read(path)?;
    let bad = |msg: String| ReportError::Parse {
        path: path.to_path_buf(),
        msg,
    };
    let mut out = Vec::new();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        match entry.map_err(|e| bad(format!("{e:?}")))? {
            LogEntry::Interval(h) => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(h.encoded_histogram())
                    .map_err(|e| bad(format!("histogram is not base64: {e}")))?;
                let hist: Histogram<u64> = de
                    .deserialize(&mut raw.as_slice())
                    .map_err(|e| bad(format!("histogram: {e:?}")))?;
                let tag = h.tag().map_or_else(String::new, |t| t.as_str().to_string());
                out.push((tag, hist));
            }
            LogEntry::StartTime(_) | LogEntry::BaseTime(_) => {}
        }
    }
    Ok(out)
}

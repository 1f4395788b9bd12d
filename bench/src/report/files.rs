//! The files of a results folder.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};

use super::Summary;
use crate::record::{Outcome, Stats};

/// Writes what was measured: `timeline.csv` (one row per second) and `latency.hlog` (one
/// HdrHistogram per outcome class, readable by HdrHistogram's log tools). Called as soon as the
/// load ends, before the audit, so a failing audit cannot lose the measurements.
///
/// `faults` are fault windows `(id, from_s, to_s)`: the `faults` column lists the ids active
/// during each second (`1+2`), so charts can shade them.
pub fn write_results(
    out: &Path,
    stats: &Stats,
    faults: &[(usize, f64, f64)],
) -> std::io::Result<()> {
    let mut csv = BufWriter::new(File::create(out.join("timeline.csv"))?);
    write!(csv, "second")?;
    for name in Outcome::CLASS_NAMES {
        write!(csv, ",{name}")?;
    }
    writeln!(csv, ",attempts,p50_us,p99_us,max_us,faults")?;
    for (i, s) in stats.timeline.iter().enumerate() {
        write!(csv, "{i}")?;
        for n in s.counts {
            write!(csv, ",{n}")?;
        }
        let (p50, p99, max) = if s.latency.is_empty() {
            (0, 0, 0)
        } else {
            (
                s.latency.value_at_quantile(0.5),
                s.latency.value_at_quantile(0.99),
                s.latency.max(),
            )
        };
        let (a, b) = (i as f64, i as f64 + 1.0);
        let active: Vec<String> = faults
            .iter()
            .filter(|(_, from, to)| *from < b && *to > a)
            .map(|(id, _, _)| id.to_string())
            .collect();
        writeln!(
            csv,
            ",{},{p50},{p99},{max},{}",
            s.counts.iter().sum::<u64>(),
            active.join("+")
        )?;
    }
    csv.flush()?;

    let mut log = BufWriter::new(File::create(out.join("latency.hlog"))?);
    let mut serializer = V2DeflateSerializer::new();
    let mut writer = IntervalLogWriterBuilder::new()
        .add_comment(
            "lockbench latency from intended start, microseconds; one histogram per outcome",
        )
        .with_start_time(std::time::SystemTime::now())
        .begin_log_with(&mut log, &mut serializer)?;
    let span = Duration::from_secs(stats.timeline.len() as u64);
    for (i, h) in stats.latency.iter().enumerate() {
        if h.is_empty() {
            continue;
        }
        writer
            .write_histogram(h, Duration::ZERO, span, Tag::new(Outcome::CLASS_NAMES[i]))
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    }
    drop(writer);
    log.flush()
}

/// Reads a saved record: `path/name`, or `path` itself when it names the file. Returns it
/// with the file it came from (for the caller's schema check).
pub fn read_saved<T: serde::de::DeserializeOwned>(
    path: &Path,
    name: &str,
) -> anyhow::Result<(T, PathBuf)> {
    use anyhow::Context;
    let file = if path.is_dir() {
        path.join(name)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read(&file).with_context(|| format!("read {}", file.display()))?;
    let value = serde_json::from_slice(&text)
        .with_context(|| format!("{}: not a {name}", file.display()))?;
    Ok((value, file))
}

/// Writes a record to `dir/name` whole, through `dir/name.tmp` and a rename, so an interrupted
/// write never leaves half a file; returns the path written.
pub fn write_saved<T: serde::Serialize>(
    dir: &Path,
    name: &str,
    value: &T,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Writes `summary.json` atomically (a reader never sees half a file).
pub fn write_summary(out: &Path, summary: &Summary) -> std::io::Result<()> {
    let tmp = out.join(".summary.json.tmp");
    // Private: it names the servers' addresses.
    let mut f = BufWriter::new(crate::logging::create_private(&tmp)?);
    serde_json::to_writer_pretty(&mut f, summary)?;
    f.write_all(b"\n")?;
    f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(tmp, out.join("summary.json"))
}

//! Disk faults (power-loss, slow-disk) in the runner: the filesystem that keeps unsynced
//! writes apart and slows fsync is the cluster's (`cluster::lazyfs`); this file adds the slow
//! disk's probe, as `network.rs` does for the links: fdatasync after a small write in the
//! node's data directory, before the fault, during it and after its heal, so the report shows
//! what the delay really was.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::network::{During, LinkProbe};
use crate::cluster::OwnedCluster;
use crate::cluster::netem::ProbeSamples;

/// The probe's file in the node's data directory, removed after each series.
const PROBE_FILE: &str = ".lockbench-fsync-probe";
/// Bytes before each fdatasync: about one WAL entry, as the machine fingerprint's disk probe.
const WRITE_BYTES: usize = 2300;
/// fdatasyncs before the fault and after its heal, and their spacing.
const CALM_SAMPLES: (usize, Duration) = (5, Duration::from_millis(10));
/// Most fdatasyncs during the fault, and their spacing (the heal ends them sooner).
const DURING_SAMPLES: (usize, Duration) = (10, Duration::from_millis(100));

/// `n` fdatasyncs in `dir`, `gap` apart, until `stop`; each time in ms (in `rtt_ms`: a round
/// trip to the disk). One that straddled the stop is discarded.
pub(super) fn series(
    dir: &Path,
    n: usize,
    gap: Duration,
    stop: &AtomicBool,
) -> Result<ProbeSamples, String> {
    let path = dir.join(PROBE_FILE);
    let mut f: File = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| format!("open {}: {e}", path.display()))?;
    let block = [b'p'; WRITE_BYTES];
    let mut out = ProbeSamples::spaced(n, gap, stop, |out| {
        let t = Instant::now();
        let r = f.write_all(&block).and_then(|()| f.sync_data());
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match r {
            Ok(()) if !stop.load(Ordering::SeqCst) => out.rtt_ms.push(ms),
            Ok(()) => {}
            Err(_) => out.failed += 1,
        }
        ControlFlow::Continue(())
    });
    let _ = std::fs::remove_file(&path);
    out.median_ms = out.median();
    Ok(out)
}

/// The calm probe of `node`'s disk: before the fault or after its heal.
async fn calm(dir: PathBuf) -> ProbeSamples {
    let (n, gap) = CALM_SAMPLES;
    let never = AtomicBool::new(false);
    tokio::task::spawn_blocking(move || series(&dir, n, gap, &never))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}

/// Before a slow disk: the calm probe of the first node's data directory.
pub async fn before(cluster: &OwnedCluster, nodes: &[String]) -> Result<LinkProbe, String> {
    let node = nodes.first().ok_or("no node to slow")?;
    let (dir, _) = cluster.disk(node).map_err(|e| e.to_string())?;
    Ok(LinkProbe {
        path: format!("fdatasync in {node}'s data directory"),
        before: calm(dir).await,
        ..LinkProbe::default()
    })
}

/// Starts probing the first node's slowed disk until the heal stops it.
pub fn start_during(cluster: &OwnedCluster, nodes: &[String]) -> Option<Arc<During>> {
    let (dir, _) = cluster.disk(nodes.first()?).ok()?;
    let (n, gap) = DURING_SAMPLES;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("disk-probe".into())
        .spawn(move || series(&dir, n, gap, &flag))
        .ok()?;
    Some(During::of_thread(stop, thread))
}

/// After the heal: what the probe saw while the fault was in force, then the calm disk.
pub async fn after_heal(
    cluster: &OwnedCluster,
    nodes: &[String],
    during: Option<Arc<During>>,
    probe: &mut LinkProbe,
) {
    if let Some(d) = during {
        probe.during = d.samples().await;
    }
    if let Some(Ok((dir, _))) = nodes.first().map(|n| cluster.disk(n)) {
        probe.after = calm(dir).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_times_each_fdatasync_and_leaves_no_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let s = series(dir.path(), 3, Duration::ZERO, &AtomicBool::new(false)).expect("series");
        assert_eq!((s.rtt_ms.len(), s.failed), (3, 0));
        assert!(s.median_ms.is_some());
        assert!(!dir.path().join(PROBE_FILE).exists());
        let stopped =
            series(dir.path(), 3, Duration::ZERO, &AtomicBool::new(true)).expect("series");
        assert!(stopped.rtt_ms.is_empty(), "a stopped probe takes no sample");
    }
}

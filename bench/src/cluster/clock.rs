//! The wall clock of a Redis node, moved at run time through the clock shim
//! (`src/chaos/clockshim.c`, preloaded into the server): the harness rewrites a small control
//! file that the shim maps into the server's memory.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::ClusterError;

/// The shim, built by build.rs and embedded so the binary needs no file next to it.
const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libclockshim.so"));

/// Writes the shim into `dir` and returns its path (for `LD_PRELOAD`).
pub(super) fn install_shim(dir: &Path) -> Result<PathBuf, ClusterError> {
    let path = dir.join("libclockshim.so");
    std::fs::write(&path, SHIM)
        .map_err(|e| ClusterError::io(format!("write {}", path.display()), e))?;
    Ok(path)
}

/// Creates the control file of a node in `dir` (all zero: real time) and returns its path.
pub(super) fn create_control(dir: &Path) -> Result<PathBuf, ClusterError> {
    let path = control_path(dir);
    std::fs::write(&path, [0u8; 32])
        .map_err(|e| ClusterError::io(format!("write {}", path.display()), e))?;
    Ok(path)
}

/// Where [`create_control`] puts the control file of the node whose data lives in `dir`.
pub(super) fn control_path(dir: &Path) -> PathBuf {
    dir.join("clock")
}

/// Moves the clock behind `control`: from now on it reads real time + `jump_ms`, running at
/// `rate` × real speed. `None` puts it back on real time.
pub(super) fn set(control: &Path, change: Option<(i64, f64)>) -> std::io::Result<()> {
    let f = File::options().read(true).write(true).open(control)?;
    let mut seq = [0u8; 8];
    f.read_exact_at(&mut seq, 0)?;
    let seq = i64::from_le_bytes(seq);
    let (anchor, offset_ns, ppm) = match change {
        Some((jump_ms, rate)) => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_err(std::io::Error::other)?
                .as_nanos() as i64;
            (now, jump_ms * 1_000_000, (rate * 1e6).round() as i64)
        }
        None => (0, 0, 0),
    };
    // A seqlock: odd while writing, so the shim never reads half an update.
    f.write_all_at(&(seq | 1).to_le_bytes(), 0)?;
    let mut body = Vec::with_capacity(24);
    for v in [anchor, offset_ns, ppm] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    f.write_all_at(&body, 8)?;
    f.write_all_at(&((seq | 1) + 1).to_le_bytes(), 0)
}

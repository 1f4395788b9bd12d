//! Why a report could not be written or read, shared by every file that reads results back.

use std::path::{Path, PathBuf};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The folder holds no `summary.json`, `compare.json` or `sweep.json`, and no part of a
    /// job (`sweep/`, `calm/`, `chaos/`).
    #[error(
        "{}: no summary.json, compare.json or sweep.json here, and no sweep/, calm/ or chaos/ \
         folder: not a lockbench results folder (give the --out folder of `lockbench run`, \
         `lockbench compare`, `lockbench sweep` or scripts/compare.sh)",
        dir.display()
    )]
    NotResults {
        /// The folder given.
        dir: PathBuf,
    },
    /// `--needs` was given for a folder that cannot answer it.
    #[error(
        "{}: --needs judges a sweep or a job folder (capacity, calm and chaos parts); this is \
         {what}",
        dir.display()
    )]
    NeedsJob {
        /// The folder given.
        dir: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The folder does not exist.
    #[error("{}: no such folder", dir.display())]
    NoFolder {
        /// The folder given.
        dir: PathBuf,
    },
    /// A file could not be read.
    #[error("read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not what lockbench writes.
    #[error("{}: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// plotters failed to draw a chart.
    #[error("chart {name}: {msg}")]
    Chart {
        /// The chart's file stem.
        name: &'static str,
        /// plotters' error.
        msg: String,
    },
    /// An output file could not be written.
    #[error("write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Reads a whole file, naming it in the error.
pub(super) fn read(path: &Path) -> Result<Vec<u8>, ReportError> {
    std::fs::read(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `text` to `dir/name` through `dir/.name.tmp` and a rename, so a reader never sees
/// half a page; returns the path written.
pub(super) fn write_whole(dir: &Path, name: &str, text: &[u8]) -> Result<PathBuf, ReportError> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
    Ok(path)
}

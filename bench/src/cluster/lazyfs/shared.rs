//! What a mount's owner shares with its FUSE threads: the inode table, each file's unsynced
//! writes, the open handles, the slow disk and the counters. A leaf below `fs` (the FUSE
//! handlers) and the mount guard (`mod.rs`).

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fuser::INodeNo;
use rand::RngExt;
use rand::rngs::ChaCha8Rng;

use super::overlay::Overlay;

/// A slow disk: each fsync (and write, with `writes`) sleeps `delay ± jitter`, drawn from a
/// generator of its own seeded with `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowDisk {
    pub delay: Duration,
    pub jitter: Duration,
    pub writes: bool,
    pub seed: u64,
}

pub(super) struct Slow {
    pub disk: SlowDisk,
    pub rng: ChaCha8Rng,
}

impl Slow {
    pub fn draw(&mut self) -> Duration {
        let j = self.disk.jitter.as_secs_f64();
        let off = if j > 0.0 {
            self.rng.random_range(-j..=j)
        } else {
            0.0
        };
        Duration::from_secs_f64((self.disk.delay.as_secs_f64() + off).max(0.0))
    }
}

/// What a mount's owner shares with its FUSE threads.
pub(super) struct Shared {
    pub backing: PathBuf,
    pub inodes: Mutex<Inodes>,
    pub files: Mutex<HashMap<u64, Arc<Mutex<FileState>>>>,
    pub handles: Mutex<HashMap<u64, Arc<File>>>,
    pub next_fh: AtomicU64,
    pub slow: Mutex<Option<Slow>>,
    pub counts: Counts,
}

/// One file's unsynced writes and the backing handle an fsync writes them through.
#[derive(Default)]
pub(super) struct FileState {
    pub overlay: Overlay,
    pub writer: Option<Arc<File>>,
}

impl FileState {
    /// Writes the unsynced extents to the backing file through the handle that wrote them;
    /// returns that handle (to sync it), if any write waited, and the bytes written.
    pub fn write_back(&mut self) -> io::Result<(Option<Arc<File>>, u64)> {
        let extents = self.overlay.take();
        let Some(file) = self.writer.take() else {
            return Ok((None, 0));
        };
        let mut bytes = 0;
        for (off, data) in &extents {
            file.write_all_at(data, *off)?;
            bytes += data.len() as u64;
        }
        Ok((Some(file), bytes))
    }

    /// [`FileState::write_back`], then the backing file's data synced; the bytes written.
    pub fn flush(&mut self) -> io::Result<u64> {
        let (file, bytes) = self.write_back()?;
        if let Some(f) = file {
            f.sync_data()?;
        }
        Ok(bytes)
    }
}

/// Inode numbers by path relative to the backing folder (the root is the empty path).
#[derive(Default)]
pub(super) struct Inodes {
    pub paths: HashMap<u64, PathBuf>,
    pub by_path: HashMap<PathBuf, u64>,
    last: u64,
}

impl Inodes {
    pub fn new() -> Self {
        let mut i = Inodes::default();
        i.paths.insert(INodeNo::ROOT.0, PathBuf::new());
        i.by_path.insert(PathBuf::new(), INodeNo::ROOT.0);
        i.last = INodeNo::ROOT.0;
        i
    }

    pub fn ino(&mut self, rel: &Path) -> u64 {
        if let Some(&ino) = self.by_path.get(rel) {
            return ino;
        }
        self.last += 1;
        let ino = self.last;
        self.paths.insert(ino, rel.to_path_buf());
        self.by_path.insert(rel.to_path_buf(), ino);
        ino
    }

    pub fn forget(&mut self, rel: &Path) {
        if let Some(ino) = self.by_path.remove(rel) {
            self.paths.remove(&ino);
        }
    }

    /// Moves `from` and everything below it to `to`; what `to` named before is gone.
    pub fn rename(&mut self, from: &Path, to: &Path) {
        self.forget(to);
        let moved: Vec<(u64, PathBuf)> = self
            .paths
            .iter()
            .filter_map(|(&ino, p)| {
                let rest = p.strip_prefix(from).ok()?;
                Some((
                    ino,
                    if rest.as_os_str().is_empty() {
                        to.to_path_buf()
                    } else {
                        to.join(rest)
                    },
                ))
            })
            .collect();
        for (ino, new) in moved {
            let old = self.paths.insert(ino, new.clone()).expect("listed above");
            self.by_path.remove(&old);
            self.by_path.insert(new, ino);
        }
    }
}

/// Counters every handler adds to (relaxed: they are totals, read after the fact).
#[derive(Default)]
pub(super) struct Counts {
    pub fsyncs: AtomicU64,
    pub bytes_synced: AtomicU64,
    pub bytes_dropped: AtomicU64,
    pub files_dropped: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_folder_takes_its_children_and_replaces_its_target() {
        let mut i = Inodes::new();
        let a = i.ino(Path::new("a"));
        let ab = i.ino(Path::new("a/b"));
        let c = i.ino(Path::new("c"));
        i.rename(Path::new("a"), Path::new("c"));
        assert_eq!(i.ino(Path::new("c")), a);
        assert_eq!(i.ino(Path::new("c/b")), ab);
        assert!(!i.paths.contains_key(&c), "the replaced entry is forgotten");
        assert_ne!(i.ino(Path::new("a")), a, "the old name is a new entry");
    }
}

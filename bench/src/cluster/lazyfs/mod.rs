//! lazyfs: a FUSE filesystem for one node's data directory that keeps every write no fsync
//! covered apart, as Jepsen's LazyFS does, so a "power loss" can drop exactly those writes.
//!
//! A passthrough over a backing folder (`fs`, over `shared`: what the FUSE threads and this
//! guard share): a file's writes wait in an in-memory overlay (`overlay`) that reads see, and
//! reach the backing file only on fsync or fdatasync of that file. Metadata (create, unlink, rename, mkdir, truncate) is applied at once: the model's
//! simplification (LazyFS keeps those too). [`LazyMount::crash`] drops every overlay; a
//! slow disk ([`LazyMount::slow`]) makes fsync (and, if asked, write) sleep before answering.
//!
//! It runs in this process (fuser's threads) and mounts through /dev/fuse as root; the mount
//! is this guard's: dropping it unmounts, and `leftovers` lazily unmounts a dead owner's.

mod fs;
mod overlay;
mod shared;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;

use fs::LazyFs;
pub use shared::SlowDisk;
use shared::{Counts, FileState, Inodes, Shared, Slow};

/// The mount's name in /proc/self/mountinfo, which `leftovers` looks for.
pub const FS_NAME: &str = "lockbench-lazyfs";

/// FUSE request threads: a slow fsync on one file must not stall reads of another.
const THREADS: usize = 4;

/// A mount's totals since it was mounted: fsync and fdatasync calls, the bytes they made
/// durable, and what crashes dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SyncCounts {
    pub fsyncs: u64,
    pub bytes_synced: u64,
    pub bytes_dropped: u64,
    pub files_dropped: u64,
}

/// What one crash dropped: unsynced bytes, and the files that had any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    pub bytes: u64,
    pub files: u64,
}

/// Why lazyfs cannot mount here, or `None` when it can (/dev/fuse and root).
pub fn unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some(
            "/dev/fuse is missing (the kernel has no FUSE, or the container hides it)".into(),
        );
    }
    if !nix::unistd::geteuid().is_root() {
        return Some("lockbench is not root, and mounts /dev/fuse itself only as root".into());
    }
    None
}

/// A mounted lazyfs; dropping it unmounts.
pub struct LazyMount {
    shared: Arc<Shared>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

impl std::fmt::Debug for LazyMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyMount")
            .field("mountpoint", &self.mountpoint)
            .field("backing", &self.shared.backing)
            .finish()
    }
}

impl LazyMount {
    /// Mounts `backing` at `mountpoint` (both existing folders).
    pub fn mount(backing: &Path, mountpoint: &Path) -> io::Result<LazyMount> {
        if let Some(why) = unavailable() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, why));
        }
        let shared = Arc::new(Shared {
            backing: backing.canonicalize()?,
            inodes: Mutex::new(Inodes::new()),
            files: Mutex::default(),
            handles: Mutex::default(),
            next_fh: AtomicU64::new(1),
            slow: Mutex::new(None),
            counts: Counts::default(),
        });
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName(FS_NAME.into()),
            fuser::MountOption::DefaultPermissions,
        ];
        // Servers that run as their own user (PostgreSQL) reach it too.
        config.acl = fuser::SessionACL::All;
        config.n_threads = Some(THREADS);
        let session = fuser::spawn_mount(LazyFs(shared.clone()), mountpoint, &config)?;
        Ok(LazyMount {
            shared,
            session: Some(session),
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// Drops every unsynced write (the node's processes should be dead by now).
    pub fn crash(&self) -> Dropped {
        let files = self.shared.files.lock().expect("files");
        let mut dropped = Dropped::default();
        for state in files.values() {
            let mut st = state.lock().expect("file");
            let bytes = st.overlay.bytes();
            if bytes > 0 {
                dropped.bytes += bytes;
                dropped.files += 1;
            }
            *st = FileState::default();
        }
        let c = &self.shared.counts;
        c.bytes_dropped.fetch_add(dropped.bytes, Ordering::Relaxed);
        c.files_dropped.fetch_add(dropped.files, Ordering::Relaxed);
        dropped
    }

    /// Makes every unsynced write durable, as `sync(1)` would; not counted as the server's
    /// fsyncs. Returns the bytes written.
    pub fn sync_all(&self) -> io::Result<u64> {
        let files = self.shared.files.lock().expect("files");
        let mut bytes = 0;
        for state in files.values() {
            bytes += state.lock().expect("file").flush()?;
        }
        Ok(bytes)
    }

    /// Sets the slow disk, or heals it with `None`.
    pub fn slow(&self, disk: Option<SlowDisk>) {
        *self.shared.slow.lock().expect("slow") = disk.map(|disk| Slow {
            disk,
            rng: ChaCha8Rng::seed_from_u64(disk.seed),
        });
    }

    pub fn counts(&self) -> SyncCounts {
        let c = &self.shared.counts;
        SyncCounts {
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            bytes_synced: c.bytes_synced.load(Ordering::Relaxed),
            bytes_dropped: c.bytes_dropped.load(Ordering::Relaxed),
            files_dropped: c.files_dropped.load(Ordering::Relaxed),
        }
    }
}

/// Detaches a FUSE mount even while something holds it open, or its server is gone
/// ("Transport endpoint is not connected"): `umount -l`.
pub fn lazy_unmount(path: &Path) -> io::Result<()> {
    nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH).map_err(io::Error::from)
}

impl Drop for LazyMount {
    fn drop(&mut self) {
        if let Err(e) = lazy_unmount(&self.mountpoint) {
            tracing::warn!("unmounting lazyfs at {}: {e}", self.mountpoint.display());
        }
        // The session thread ends once the kernel lets go of the detached mount; wait a
        // little for it, never for ever (a process still inside the mount keeps it).
        if let Some(session) = self.session.take() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while !session.guard.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if session.guard.is_finished() {
                let _ = session.join();
            }
        }
    }
}

#[cfg(test)]
mod tests;

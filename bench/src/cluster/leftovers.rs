//! What runs that died without cleaning up (SIGKILL, a second Ctrl-C) left on the machine,
//! removed at every lockbench start: temp folders and private networks whose owner
//! ([`Owner`]) no longer runs. What has no owner recorded, or a live one, is left alone:
//! another run (of any build) may be using it. A dead run's lazyfs mounts (its nodes' data
//! on FUSE, "Transport endpoint is not connected" once their server died) are detached
//! first, or its folder could not be removed.

use std::path::{Path, PathBuf};

use super::lazyfs;
use super::net;
use super::owner::Owner;

/// The prefixes of a run's temp folders: its data ([`super::local`]) and a PostgreSQL
/// node's own folder under `/tmp`.
pub const PREFIXES: [&str; 2] = ["lockbench-run-", "lockbench-postgres-"];

/// Removes every leftover of a dead run: its temp folders, then its network.
pub fn sweep() {
    let tmp = std::env::temp_dir();
    sweep_folders(&tmp);
    if tmp != Path::new("/tmp") {
        sweep_folders(Path::new("/tmp"));
    }
    net::reap_stale();
}

/// Removes the run folders in `dir` whose recorded owner is gone; returns them.
pub fn sweep_folders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let ours = PREFIXES
            .iter()
            .any(|p| name.to_string_lossy().starts_with(p));
        let path = e.path();
        if !ours || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some(owner) = Owner::of_folder(&path) else {
            continue;
        };
        if owner.alive() {
            continue;
        }
        unmount_under(&path);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::info!(folder = %path.display(), %owner, "removed the temp folder of a dead lockbench run");
                removed.push(path);
            }
            Err(err) => tracing::warn!(
                folder = %path.display(), %owner, %err,
                "could not remove the temp folder of a dead lockbench run"
            ),
        }
    }
    removed
}

/// Lazily unmounts every lazyfs mount below `dir`.
fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    for mnt in lazyfs_mounts_under(&info, dir) {
        match lazyfs::lazy_unmount(&mnt) {
            Ok(()) => {
                tracing::info!(mount = %mnt.display(), "unmounted a dead lockbench run's lazyfs")
            }
            Err(err) => {
                tracing::warn!(mount = %mnt.display(), %err, "could not unmount a dead run's lazyfs")
            }
        }
    }
}

/// The mount points of lazyfs (by its source name) below `dir`, deepest first, from
/// /proc/self/mountinfo's text (mount point: 5th field, octal escapes; source: after " - ").
fn lazyfs_mounts_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let source = right.split(' ').nth(1)?;
            let point = PathBuf::from(unescape(left.split(' ').nth(4)?));
            (source == lazyfs::FS_NAME && point.starts_with(dir)).then_some(point)
        })
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (b[i], oct) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lazyfs_mounts_below_a_folder_are_found_and_others_are_not() {
        let info = "\
36 25 0:40 / /tmp/lockbench-run-x/redis-1 rw - fuse lockbench-lazyfs rw,user_id=0
37 25 0:41 / /tmp/lockbench-run-x/a\\040b rw - fuse lockbench-lazyfs rw
38 25 0:42 / /tmp/lockbench-run-y/redis-1 rw - fuse lockbench-lazyfs rw
39 25 0:43 / /tmp/lockbench-run-x/other rw - fuse sshfs rw
";
        let found = lazyfs_mounts_under(info, Path::new("/tmp/lockbench-run-x"));
        assert_eq!(
            found,
            vec![
                PathBuf::from("/tmp/lockbench-run-x/redis-1"),
                PathBuf::from("/tmp/lockbench-run-x/a b")
            ]
        );
    }

    #[test]
    fn a_dead_owners_folder_goes_and_a_live_or_unknown_owners_stays() {
        let tmp = tempfile::tempdir().unwrap();
        let folder = |name: &str, owner: Option<&str>| {
            let p = tmp.path().join(name);
            std::fs::create_dir_all(p.join("redis-1")).unwrap();
            std::fs::write(p.join("redis-1/dump.rdb"), "x").unwrap();
            if let Some(o) = owner {
                std::fs::write(p.join(super::super::owner::OWNER_FILE), o).unwrap();
            }
            p
        };
        let me = Owner::me();
        let live = folder("lockbench-run-live", Some(&me.to_string()));
        let reused = Owner {
            start: me.start.map(|s| s + 1),
            ..me
        };
        let dead = folder("lockbench-run-dead", Some(&reused.to_string()));
        let pg = folder("lockbench-postgres-dead", Some(&reused.to_string()));
        let unmarked = folder("lockbench-run-unmarked", None);
        let other = folder("someone-else", Some(&reused.to_string()));
        let mut removed = sweep_folders(tmp.path());
        removed.sort();
        assert_eq!(removed, vec![pg.clone(), dead.clone()]);
        assert!(!dead.exists() && !pg.exists());
        assert!(live.exists() && unmarked.exists() && other.exists());
    }
}

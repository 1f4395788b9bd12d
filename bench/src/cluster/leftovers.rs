//! What runs that died without cleaning up (SIGKILL, a second Ctrl-C) left on the machine,
//! removed at every lockbench start: temp folders and private networks whose owner
//! ([`Owner`]) no longer runs. What has no owner recorded, or a live one, is left alone:
//! another run (of any build) may be using it.

use std::path::{Path, PathBuf};

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

#[cfg(test)]
mod tests {
    use super::*;

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

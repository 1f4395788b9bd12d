//! Initialised datadirs kept for reuse. `mariadb-install-db` writes the same files every time
//! for one build, one set of flags and one user, yet takes about 2 s (more on a busy machine),
//! and every run of every strategy paid it. The first initialisation of a build keeps a copy
//! under the cache; later ones copy that (about 30 ms for MariaDB's 26 MB). Nothing secret is
//! in it: the run's passwords are set after the server starts.
//!
//! Where: `$LOCKBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/lockbench`, else `~/.cache/lockbench`,
//! under `datadirs/`; `LOCKBENCH_CACHE_DIR=off` initialises every datadir afresh. A copy is
//! entered whole or not at all (written aside, then renamed), so runs side by side never read
//! half of one; a failure to keep one is logged and costs only the next run's time.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::ClusterError;

/// The cache's root, or `off`.
pub const CACHE_ENV: &str = "LOCKBENCH_CACHE_DIR";
/// The file whose presence marks a complete copy.
const COMPLETE: &str = "complete";

/// Where copies of initialised datadirs live; `None` when the cache is off or no home is known.
fn root() -> Option<PathBuf> {
    let base = match std::env::var_os(CACHE_ENV) {
        Some(v) if v == "off" => return None,
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(x) => PathBuf::from(x).join("lockbench"),
            None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/lockbench"),
        },
    };
    Some(base.join("datadirs"))
}

/// The name of the copy for `kind` made by `programs` with `args` as this user: a different
/// build (path, size or modification time of any program: the install script and the server it
/// bootstraps), flag or user is another copy.
pub fn key(kind: &str, programs: &[&Path], args: &[&str]) -> String {
    let mut h = Sha256::new();
    for program in programs {
        h.update(program.as_os_str().as_encoded_bytes());
        if let Ok(m) = std::fs::metadata(program) {
            h.update(m.len().to_le_bytes());
            if let Ok(t) = m.modified() {
                let since = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                h.update(since.as_nanos().to_le_bytes());
            }
        }
    }
    for a in args {
        h.update([0]);
        h.update(a.as_bytes());
    }
    h.update(nix::unistd::geteuid().as_raw().to_le_bytes());
    let digest = h.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{kind}-{hex}")
}

/// Fills the empty directory `dest` from the copy named `key`, or runs `init` on it and keeps a
/// copy of the result. Returns whether the copy was used.
pub async fn init_or_copy<F>(key: &str, dest: &Path, init: F) -> Result<bool, ClusterError>
where
    F: Future<Output = Result<(), ClusterError>>,
{
    init_or_copy_in(root(), key, dest, init).await
}

/// [`init_or_copy`] with the cache at `root` (`None`: off).
async fn init_or_copy_in<F>(
    root: Option<PathBuf>,
    key: &str,
    dest: &Path,
    init: F,
) -> Result<bool, ClusterError>
where
    F: Future<Output = Result<(), ClusterError>>,
{
    let Some(root) = root else {
        init.await?;
        return Ok(false);
    };
    let kept = root.join(key);
    if kept.join(COMPLETE).exists() {
        match copy_tree(&kept.join("data"), dest).await {
            Ok(()) => return Ok(true),
            // A copy that cannot be read (removed under us): initialise as if there were none.
            Err(e) => {
                tracing::warn!("datadir cache {}: {e}; initialising afresh", kept.display());
                empty(dest)?;
            }
        }
    }
    init.await?;
    if let Err(e) = keep(&root, &kept, dest).await {
        tracing::warn!("datadir cache {}: not kept: {e}", kept.display());
    }
    Ok(false)
}

/// Copies `from`'s contents into the existing directory `to`, owners and modes kept.
async fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let out = tokio::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .output()
        .await
        .map_err(|e| format!("cp: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cp -a {} {}: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Removes whatever a failed copy left in `dest`, keeping `dest` itself.
fn empty(dest: &Path) -> Result<(), ClusterError> {
    let what = || format!("empty {}", dest.display());
    for entry in std::fs::read_dir(dest).map_err(|e| ClusterError::io(what(), e))? {
        let p = entry.map_err(|e| ClusterError::io(what(), e))?.path();
        let gone = if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        gone.map_err(|e| ClusterError::io(what(), e))?;
    }
    Ok(())
}

/// Keeps a copy of the freshly initialised `dest` as `kept`: written aside under `root`, marked
/// complete, then renamed into place (another run that got there first wins; ours goes).
async fn keep(root: &Path, kept: &Path, dest: &Path) -> Result<(), String> {
    std::fs::create_dir_all(root).map_err(|e| format!("create {}: {e}", root.display()))?;
    let aside = root.join(format!(
        ".new-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let data = aside.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("create {}: {e}", data.display()))?;
    let made = async {
        copy_tree(dest, &data).await?;
        std::fs::write(aside.join(COMPLETE), b"").map_err(|e| format!("mark: {e}"))?;
        std::fs::rename(&aside, kept).map_err(|e| format!("rename: {e}"))
    }
    .await;
    if made.is_err() || aside.exists() {
        let _ = std::fs::remove_dir_all(&aside);
    }
    // Lost a race to another run: its copy is as good as ours.
    if kept.join(COMPLETE).exists() {
        return Ok(());
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_the_build_and_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("install");
        std::fs::write(&bin, b"v1").unwrap();
        let a = key("mariadb", &[&bin], &["--x"]);
        assert_eq!(a, key("mariadb", &[&bin], &["--x"]), "stable");
        assert_ne!(a, key("mariadb", &[&bin], &["--y"]), "flags");
        assert_ne!(a, key("mariadb", &[&bin], &["--x", ""]), "flag boundaries");
        std::fs::write(&bin, b"v2 longer").unwrap();
        assert_ne!(a, key("mariadb", &[&bin], &["--x"]), "another build");
        let server = dir.path().join("server");
        std::fs::write(&server, b"s").unwrap();
        let with_server = key("mariadb", &[&bin, &server], &["--x"]);
        std::fs::write(&server, b"s2").unwrap();
        assert_ne!(
            with_server,
            key("mariadb", &[&bin, &server], &["--x"]),
            "another server"
        );
        assert!(a.starts_with("mariadb-"), "{a}");
    }

    #[tokio::test]
    async fn the_first_init_is_kept_and_later_ones_copy_it() {
        let cache = tempfile::tempdir().unwrap();
        let root = || Some(cache.path().join("datadirs"));
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let init = |d: PathBuf| async move {
            std::fs::create_dir_all(d.join("mysql")).unwrap();
            std::fs::write(d.join("mysql/user.frm"), b"made").unwrap();
            Ok(())
        };
        let k = "test-0001";
        let first = init_or_copy_in(root(), k, one.path(), init(one.path().into())).await;
        assert!(!first.unwrap(), "nothing kept yet: initialised");
        assert!(
            cache
                .path()
                .join("datadirs")
                .join(k)
                .join(COMPLETE)
                .exists()
        );
        let never = async { panic!("the kept copy should have been used") };
        // Off: always initialised.
        let off = tempfile::tempdir().unwrap();
        let fresh = init_or_copy_in(None, k, off.path(), init(off.path().into())).await;
        assert!(!fresh.unwrap());
        assert!(init_or_copy_in(root(), k, two.path(), never).await.unwrap());
        let copied = std::fs::read(two.path().join("mysql/user.frm")).unwrap();
        assert_eq!(copied, b"made");
        // Nothing is left aside.
        let names: Vec<_> = std::fs::read_dir(cache.path().join("datadirs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec![k.to_string()]);
    }
}

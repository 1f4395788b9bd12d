//! Where the server binaries of local nodes are: PATH, then the sbin directories where
//! Debian puts daemons. A missing one names the package to install.

use std::path::{Path, PathBuf};

use super::error::ClusterError;

/// Finds `binary` on PATH or in the sbin directories where Debian puts daemons.
pub(super) fn find_binary(binary: &str, package: &str) -> Result<PathBuf, ClusterError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(binary))
        .find(|p| is_executable(p))
        .ok_or_else(|| ClusterError::MissingBinary {
            binary: binary.to_string(),
            package: package.to_string(),
        })
}

pub(super) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

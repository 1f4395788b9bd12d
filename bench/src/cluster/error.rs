//! What can go wrong while provisioning or talking to the servers of a run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::model::Service;

/// Errors while provisioning or talking to the servers of a run.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A server binary is not installed.
    #[error(
        "`{binary}` not found (looked in PATH, /usr/sbin, /sbin): install the Debian package \
         `{package}` (apt-get install {package}) or run scripts/install-deps.sh"
    )]
    MissingBinary { binary: String, package: String },
    /// A file a server needs (a jar, not a binary on PATH) is not installed.
    #[error(
        "`{}` not found: install the Debian package `{package}` (apt-get install {package}) \
         or run scripts/install-deps.sh", path.display()
    )]
    MissingFile { path: PathBuf, package: String },
    /// A server build the run chose (`[servers]`) is not installed in its private prefix.
    #[error("`{}` not found: install that build with `{install}`", path.display())]
    MissingBuild { path: PathBuf, install: String },
    /// A port the run needs is taken.
    #[error(
        "port {addr} for {node} is already in use: pick another --base-port, or omit \
         --base-port to let lockbench choose free ports"
    )]
    PortBusy { addr: SocketAddr, node: String },
    /// The process could not be spawned.
    #[error("could not start {node} ({program}): {source}")]
    Spawn {
        node: String,
        program: String,
        source: std::io::Error,
    },
    /// The process exited while starting.
    #[error("{node} exited during startup ({status}); log {}:\n{tail}", log.display())]
    Died {
        node: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    /// The server did not answer in time.
    #[error("{node} was not ready after {waited:?} (last error: {last}); log: {}", log.display())]
    NotReady {
        node: String,
        waited: Duration,
        last: String,
        log: PathBuf,
    },
    /// A setup step failed.
    #[error("{node}: {what}: {detail}")]
    Setup {
        node: String,
        what: String,
        detail: String,
    },
    /// The servers of a replicated service could not say which node leads.
    #[error("which {service:?} node leads: {detail}")]
    Leader { service: Service, detail: String },
    /// A target file is malformed or lacks what a strategy needs.
    #[error("{file}: {field}: {problem}")]
    Target {
        file: String,
        field: String,
        problem: String,
    },
    /// The prefix on an external target holds data lockbench did not create.
    #[error(
        "{service}: prefix `{prefix}` already holds data lockbench did not create ({found}); \
         refusing to touch it: choose another `prefix` in the target file, or remove that data"
    )]
    PrefixTaken {
        service: String,
        prefix: String,
        found: String,
    },
    /// No Docker daemon answers (containers provisioner).
    #[error(
        "no Docker daemon answers at {host} ({detail}): start one and set DOCKER_HOST, e.g. \
         `export $(sudo scripts/container-images.sh)` starts a private dockerd with local \
         images; or use --provision local"
    )]
    NoDocker { host: String, detail: String },
    /// An image the containers provisioner needs is not on the Docker host.
    #[error(
        "image `{image}` is not on the Docker host, and lockbench never pulls (a pull leaves \
         this machine): `docker pull {image}`, or build local images with \
         scripts/container-images.sh and name them in {var}"
    )]
    MissingImage { image: String, var: String },
    /// A Docker API call failed.
    #[error("docker: {what}: {detail}")]
    Docker { what: String, detail: String },
    /// A file system operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl ClusterError {
    pub(super) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

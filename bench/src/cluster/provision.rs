//! Which backend serves a run's nodes, and how a service module reaches it. The backends
//! implement [`Backend`] and `NodeServer` (`backend.rs`, `node.rs`, which name no backend);
//! this file is the one that names both backends, so nothing below points back at it.

use super::backend::Backend;
use super::containers::Containers;
use super::local::Local;

/// The backend a run's nodes live on, owned by the cluster (dropped after its nodes).
#[derive(Debug)]
pub(super) enum Provisioned {
    /// Child processes (`--provision local`).
    Local(Local),
    /// Containers (`--provision containers`).
    Containers(Containers),
}

impl Provisioned {
    /// How the service modules start nodes here.
    pub(super) fn launcher(&self) -> Launcher<'_> {
        match self {
            Self::Local(l) => Launcher::Local(l),
            Self::Containers(c) => Launcher::Containers(c),
        }
    }

    /// The local backend, if it is the one (lazyfs mounts exist only there).
    pub(super) fn local(&self) -> Option<&Local> {
        match self {
            Self::Local(l) => Some(l),
            Self::Containers(_) => None,
        }
    }

    /// What the nodes share, and what spans nodes (a partition).
    pub(super) fn backend(&self) -> &dyn Backend {
        match self {
            Self::Local(l) => l,
            Self::Containers(c) => c,
        }
    }
}

/// How a service module makes its nodes: the one point where it says which process or which
/// container serves them.
#[derive(Clone, Copy)]
pub(super) enum Launcher<'a> {
    /// Child processes on reserved addresses.
    Local(&'a Local),
    /// Containers on the run's Docker network.
    Containers(&'a Containers),
}

//! The containers provisioner (`--provision containers`): the same topologies as local mode,
//! each server in a container of its own on a private Docker network of the run.
//!
//! testcontainers creates and starts every container ([`GenericImage`] with explicit
//! commands, because the official images and the local ones built by
//! `scripts/container-images.sh` have different entrypoints) and force-removes it when its
//! guard drops. The network and the faults go through bollard (testcontainers' re-export):
//! SIGKILL + start, pause / unpause (cgroup freezer), disconnect / connect.
//!
//! The host reaches each container at its address on that network; no port is published.
//! Addresses stay fixed for the run: a container is reconnected with its first address pinned
//! before it starts again or rejoins the network (Docker would hand out a new one otherwise),
//! which is why the network is created with an explicit subnet.
//!
//! lockbench never pulls an image: a pull reaches a registry outside this machine. Missing
//! images are named in the error. Containers and networks carry labels with the owning
//! process, so a later run removes what a killed lockbench left behind.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use testcontainers::bollard::models::{
    EndpointIpamConfig, EndpointSettings, Ipam, IpamConfig, NetworkConnectRequest,
    NetworkCreateRequest, NetworkDisconnectRequest,
};
use testcontainers::bollard::query_parameters::{
    KillContainerOptionsBuilder, ListContainersOptionsBuilder, ListNetworksOptionsBuilder,
    LogsOptionsBuilder, RemoveContainerOptionsBuilder,
};
use testcontainers::bollard::{self, Docker};
use testcontainers::core::WaitFor;
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::io::AsyncWriteExt;

use async_trait::async_trait;

use super::backend::Backend;
use super::builds::MysqlBuild;
use super::error::ClusterError;
use super::model::{ContainerInfo, Provisioner};
use super::node::{Node, NodeServer};

/// A bound on one Docker API call (pulls are never made, so every call is short).
const API_TIMEOUT: Duration = Duration::from_secs(30);
/// Label naming the lockbench process that owns a container or network.
const LABEL_PID: &str = "lockbench.pid";
/// Label naming the host of that process (pids are only meaningful there).
const LABEL_HOST: &str = "lockbench.host";

/// A container image a service runs: the official one, as published on Docker Hub or quay.io,
/// unless its variable (`LOCKBENCH_IMAGE_<NAME>`) names another. Each service names its own
/// in its folder (`ServiceKind::images`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    /// The environment variable that overrides it.
    pub var: &'static str,
    /// The official image.
    pub official: &'static str,
}

/// The images of a run, each read from its variable once, by variable, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Images(Vec<(&'static str, String)>);

impl Images {
    /// Each of `images` as its variable names it now (set and not blank), else the official.
    pub fn from_env(images: impl IntoIterator<Item = Image>) -> Self {
        Self::picked(images, |i| {
            std::env::var(i.var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| i.official.to_string())
        })
    }

    /// Each of `images` as published, whatever the environment says.
    #[cfg(test)]
    pub(super) fn official(images: impl IntoIterator<Item = Image>) -> Self {
        Self::picked(images, |i| i.official.to_string())
    }

    /// Each of `images` once, as `pick` names it.
    fn picked(images: impl IntoIterator<Item = Image>, pick: impl Fn(Image) -> String) -> Self {
        let mut out: Vec<(&'static str, String)> = Vec::new();
        for i in images {
            if !out.iter().any(|(v, _)| *v == i.var) {
                out.push((i.var, pick(i)));
            }
        }
        Self(out)
    }

    /// The image `image` stands for in this run (the official one if it was not read).
    pub fn get(&self, image: Image) -> &str {
        (self.0.iter())
            .find(|(v, _)| *v == image.var)
            .map_or(image.official, |(_, i)| i.as_str())
    }

    /// Every image, with the variable that overrides it.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'static str)> {
        self.0.iter().map(|(v, i)| (i.as_str(), *v))
    }
}

/// `repo[:tag]` split at the tag's colon (a registry's `host:port/` is not a tag).
fn split_image(image: &str) -> (&str, &str) {
    match image.rfind(':') {
        Some(i) if !image[i..].contains('/') => (&image[..i], &image[i + 1..]),
        _ => (image, "latest"),
    }
}

/// Where the Docker daemon is, as the clients will look for it.
fn docker_host() -> String {
    std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into())
}

fn docker_error(what: impl Into<String>, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Docker {
        what: what.into(),
        detail: e.to_string(),
    }
}

/// Runs one Docker API call with [`API_TIMEOUT`].
async fn api<T, E: std::fmt::Display>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, ClusterError> {
    match tokio::time::timeout(API_TIMEOUT, call).await {
        Ok(r) => r.map_err(|e| docker_error(what, e)),
        Err(_) => Err(docker_error(what, format!("no answer in {API_TIMEOUT:?}"))),
    }
}

/// Connects to the daemon and checks that it answers and has every image `needs` uses.
async fn connect(images: &Images) -> Result<Docker, ClusterError> {
    let unreachable = |detail: String| ClusterError::NoDocker {
        host: docker_host(),
        detail,
    };
    let docker = Docker::connect_with_defaults().map_err(|e| unreachable(e.to_string()))?;
    match tokio::time::timeout(Duration::from_secs(5), docker.ping()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Err(_) => return Err(unreachable("no answer in 5s".into())),
    }
    for (image, var) in images.iter() {
        match docker.inspect_image(image).await {
            Ok(_) => {}
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                return Err(ClusterError::MissingImage {
                    image: image.to_string(),
                    var: var.to_string(),
                });
            }
            Err(e) => return Err(docker_error(format!("inspect image {image}"), e)),
        }
    }
    Ok(docker)
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Labels every container and network of this run carries.
fn labels(run: &str) -> HashMap<String, String> {
    HashMap::from([
        ("lockbench.run".to_string(), run.to_string()),
        (LABEL_PID.to_string(), std::process::id().to_string()),
        (LABEL_HOST.to_string(), hostname()),
    ])
}

/// Whether the labels name a lockbench process of this host that is gone.
fn owner_gone(labels: Option<&HashMap<String, String>>) -> bool {
    let Some(l) = labels else { return false };
    if l.get(LABEL_HOST) != Some(&hostname()) {
        return false;
    }
    match l.get(LABEL_PID).and_then(|p| p.parse::<i32>().ok()) {
        Some(pid) => {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
                == Err(nix::errno::Errno::ESRCH)
        }
        None => false,
    }
}

/// Removes containers and networks that a lockbench of this host, now dead, left behind (a
/// second Ctrl-C or a SIGKILL skips the guards). Failures only warn.
async fn reap_stale(docker: &Docker) {
    let filters = HashMap::from([("label".to_string(), vec![LABEL_PID.to_string()])]);
    let opts = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    if let Ok(Ok(list)) =
        tokio::time::timeout(API_TIMEOUT, docker.list_containers(Some(opts))).await
    {
        for c in list.iter().filter(|c| owner_gone(c.labels.as_ref())) {
            let id = c.id.clone().unwrap_or_default();
            tracing::warn!(container = %id, "removing a container a dead lockbench left behind");
            let rm = RemoveContainerOptionsBuilder::new().force(true).build();
            if let Err(e) = api("remove", docker.remove_container(&id, Some(rm))).await {
                tracing::warn!("{e}");
            }
        }
    }
    let opts = ListNetworksOptionsBuilder::new().filters(&filters).build();
    if let Ok(Ok(list)) = tokio::time::timeout(API_TIMEOUT, docker.list_networks(Some(opts))).await
    {
        for n in list.iter().filter(|n| owner_gone(n.labels.as_ref())) {
            let name = n.name.clone().unwrap_or_default();
            tracing::warn!(network = %name, "removing a network a dead lockbench left behind");
            if let Err(e) = api("remove network", docker.remove_network(&name)).await {
                tracing::warn!("{e}");
            }
        }
    }
}

/// The run's private network: removed when dropped (after the containers, which the cluster
/// drops first).
#[derive(Debug)]
pub struct DockerNetwork {
    /// Network name, also the prefix of every container name of the run.
    pub name: String,
    /// Run id in the labels.
    run: String,
    /// The bridge's address on the network; containers get the next ones.
    gateway: Ipv4Addr,
}

impl DockerNetwork {
    /// Creates a bridge network with an explicit subnet (so container addresses can be
    /// pinned): the daemon picks a free subnet from its pool for a probe network, which is
    /// then recreated with that subnet spelled out. Another run may take the subnet in
    /// between; then it probes again.
    async fn create(docker: &Docker) -> Result<Self, ClusterError> {
        let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        let name = format!("lockbench-{run}");
        let mut guard = Self {
            name: name.clone(),
            run: run.clone(),
            gateway: Ipv4Addr::UNSPECIFIED,
        };
        let request = |ipam: Option<Ipam>| NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            ipam,
            labels: Some(labels(&run)),
            ..Default::default()
        };
        let mut tries = 0;
        loop {
            api("create network", docker.create_network(request(None))).await?;
            let inspect = api(
                "inspect network",
                docker.inspect_network(
                    &name,
                    None::<bollard::query_parameters::InspectNetworkOptions>,
                ),
            )
            .await?;
            let config = inspect
                .ipam
                .and_then(|i| i.config)
                .and_then(|c| {
                    c.into_iter()
                        .find(|c| c.subnet.as_deref().is_some_and(|s| s.contains('.')))
                })
                .ok_or_else(|| {
                    docker_error("inspect network", "the daemon gave it no IPv4 subnet")
                })?;
            guard.gateway = config
                .gateway
                .as_deref()
                .and_then(|g| g.parse().ok())
                .ok_or_else(|| {
                    docker_error("inspect network", "the daemon gave it no IPv4 gateway")
                })?;
            api("remove probe network", docker.remove_network(&name)).await?;
            let ipam = Ipam {
                config: Some(vec![IpamConfig {
                    subnet: config.subnet,
                    gateway: config.gateway,
                    ..Default::default()
                }]),
                ..Default::default()
            };
            match api("create network", docker.create_network(request(Some(ipam)))).await {
                Ok(_) => return Ok(guard),
                Err(e) if tries < 5 => {
                    tracing::debug!("subnet taken meanwhile, probing again: {e}");
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for DockerNetwork {
    fn drop(&mut self) {
        // On a thread of its own with a fresh client: drop runs in any runtime context, and
        // the run's client belongs to the run's runtime. Containers of the run that no guard
        // owns (created by a start that failed or was cancelled half-way) go first: a network
        // with endpoints cannot be removed.
        let (name, run) = (self.name.clone(), self.run.clone());
        let removed = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let docker = Docker::connect_with_defaults().map_err(|e| e.to_string())?;
                let filters =
                    HashMap::from([("label".to_string(), vec![format!("lockbench.run={run}")])]);
                let opts = ListContainersOptionsBuilder::new()
                    .all(true)
                    .filters(&filters)
                    .build();
                let strays = api("list containers", docker.list_containers(Some(opts)))
                    .await
                    .unwrap_or_default();
                for c in strays {
                    let id = c.id.unwrap_or_default();
                    let rm = RemoveContainerOptionsBuilder::new().force(true).build();
                    let _ = api("remove", docker.remove_container(&id, Some(rm))).await;
                }
                api("remove network", docker.remove_network(&name))
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        match removed {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(network = %self.name, "{e}"),
            Err(_) => tracing::warn!(network = %self.name, "removing the network panicked"),
        }
    }
}

/// One server's container. Dropping it force-removes the container (testcontainers).
pub struct Container {
    /// Always `Some` until dropped.
    inner: Option<ContainerAsync<GenericImage>>,
    id: String,
    docker: Docker,
    network: String,
    ip: Ipv4Addr,
    image: String,
    log: PathBuf,
    pid: u32,
    paused: bool,
    /// Off the network (a partition fault).
    disconnected: bool,
}

impl Drop for Container {
    fn drop(&mut self) {
        // testcontainers removes the container in its own drop, which needs a tokio runtime;
        // outside one, give it one on a thread of its own.
        if tokio::runtime::Handle::try_current().is_err()
            && let Some(inner) = self.inner.take()
        {
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    rt.block_on(async move { drop(inner) });
                }
            })
            .join();
        }
    }
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("id", &self.id)
            .field("image", &self.image)
            .field("ip", &self.ip)
            .finish()
    }
}

impl Container {
    /// Container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// For results.
    pub fn info(&self) -> ContainerInfo {
        ContainerInfo {
            id: self.id().to_string(),
            image: self.image.clone(),
            network: self.network.clone(),
        }
    }

    /// Its address on the run's network, at `port`.
    pub(super) fn addr(&self, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.ip), port)
    }

    /// Takes it off the run's network: it runs on, but nothing reaches it and it reaches
    /// nothing. Idempotent.
    pub async fn disconnect(&mut self) -> Result<(), ClusterError> {
        if !self.disconnected {
            self.detach().await?;
            self.disconnected = true;
        }
        Ok(())
    }

    /// Puts it back on the network at its first address. Idempotent.
    pub async fn reconnect(&mut self) -> Result<(), ClusterError> {
        if self.disconnected {
            self.attach().await?;
            self.disconnected = false;
        }
        Ok(())
    }

    async fn detach(&self) -> Result<(), ClusterError> {
        let req = NetworkDisconnectRequest {
            container: self.id().to_string(),
            force: Some(true),
        };
        api(
            "disconnect",
            self.docker.disconnect_network(&self.network, req),
        )
        .await
    }

    async fn attach(&self) -> Result<(), ClusterError> {
        let req = NetworkConnectRequest {
            container: self.id().to_string(),
            endpoint_config: Some(EndpointSettings {
                ipam_config: Some(EndpointIpamConfig {
                    ipv4_address: Some(self.ip.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        };
        api("connect", self.docker.connect_network(&self.network, req)).await
    }

    /// Appends the container's output from now on to its log file, until it stops.
    fn follow_logs(&self) {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i32);
        spawn_log_follower(
            self.docker.clone(),
            self.id().to_string(),
            self.log.clone(),
            since,
        );
    }
}

#[async_trait]
impl NodeServer for Container {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn log(&self) -> &Path {
        &self.log
    }

    fn container(&self) -> Option<ContainerInfo> {
        Some(self.info())
    }

    /// An error if the container is no longer running (with the tail of its log).
    async fn check_running(&mut self, name: &str) -> Result<(), ClusterError> {
        let state = api("inspect", self.docker.inspect_container(self.id(), None))
            .await?
            .state
            .unwrap_or_default();
        if state.running == Some(true) {
            return Ok(());
        }
        // Let the log follower write the last lines.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Err(ClusterError::Died {
            node: name.to_string(),
            status: format!(
                "container exited with code {}",
                state.exit_code.unwrap_or(-1)
            ),
            log: self.log.clone(),
            tail: super::process::tail(&self.log, 12),
        })
    }

    /// SIGKILL to the container's main process (a crash).
    async fn kill(&mut self) -> Result<(), ClusterError> {
        let opts = KillContainerOptionsBuilder::new().signal("SIGKILL").build();
        api("kill", self.docker.kill_container(self.id(), Some(opts))).await?;
        self.paused = false;
        Ok(())
    }

    /// Starts a killed container again at its first address, on the data it left. Returns
    /// whether clients can reach it: not while a partition keeps it off the network.
    async fn restart(&mut self) -> Result<bool, ClusterError> {
        // Reconnected with the address pinned, so that it keeps it when it starts (a plain
        // start may hand out another); a partitioned one goes off the network again after.
        if !self.disconnected {
            self.detach().await?;
        }
        self.attach().await?;
        api("start", self.docker.start_container(self.id(), None)).await?;
        self.follow_logs();
        if self.disconnected {
            self.detach().await?;
        }
        Ok(!self.disconnected)
    }

    /// Freezes every process of the container (cgroup freezer).
    async fn pause(&mut self) -> Result<(), ClusterError> {
        api("pause", self.docker.pause_container(self.id())).await?;
        self.paused = true;
        Ok(())
    }

    /// Thaws it after [`NodeServer::pause`]. Idempotent.
    async fn resume(&mut self) -> Result<(), ClusterError> {
        if self.paused {
            api("unpause", self.docker.unpause_container(self.id())).await?;
            self.paused = false;
        }
        Ok(())
    }
}

/// The container serving `node` (every node of this backend is one).
fn container_of(node: &mut Node) -> &mut Container {
    let server: &mut dyn std::any::Any = &mut *node.server;
    server
        .downcast_mut::<Container>()
        .expect("the containers backend starts containers only")
}

#[async_trait]
impl Backend for Containers {
    fn provisioner(&self) -> Provisioner {
        Provisioner::Containers
    }

    /// Off the Docker network: cut from every node and every client, whatever `clients`
    /// asks (the chaos plan was checked to say `clients = "all"`).
    async fn partition(
        &self,
        nodes: &mut [&mut Node],
        _clients: &[usize],
        workers: usize,
    ) -> Result<Vec<usize>, ClusterError> {
        for n in nodes.iter_mut() {
            container_of(n).disconnect().await?;
        }
        Ok((0..workers).collect())
    }

    async fn heal(&self, node: &mut Node) -> Result<(), ClusterError> {
        container_of(node).reconnect().await
    }
}

fn spawn_log_follower(docker: Docker, id: String, log: PathBuf, since: i32) {
    tokio::spawn(async move {
        let Ok(mut file) = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .await
        else {
            return;
        };
        let opts = LogsOptionsBuilder::new()
            .follow(true)
            .stdout(true)
            .stderr(true)
            .since(since)
            .build();
        let mut stream = docker.logs(&id, Some(opts));
        while let Some(Ok(chunk)) = stream.next().await {
            if file.write_all(&chunk.into_bytes()).await.is_err() {
                break;
            }
            let _ = file.flush().await;
        }
    });
}

/// A container to start: one node.
pub(super) struct Spec<'a> {
    /// Node name (also the container's host name).
    pub name: String,
    /// Image to run.
    pub image: &'a str,
    /// Command line (the image's entrypoint stays).
    pub cmd: Vec<String>,
    /// Environment (configuration files travel in variables).
    pub env: Vec<(&'static str, String)>,
}

/// The containers backend: what a run's containers share. Dropped after them, it removes
/// their network.
#[derive(Debug)]
pub(super) struct Containers {
    docker: Docker,
    /// The image of each service the run starts.
    pub images: Images,
    /// The database server's build.
    pub mysql: MysqlBuild,
    network: DockerNetwork,
    log_dir: PathBuf,
    /// Host number (after the gateway's) the next container gets.
    next: tokio::sync::Mutex<u32>,
}

impl Containers {
    /// Connects to the Docker daemon, checks that it has every one of `images` (the run's),
    /// removes what a dead lockbench left behind and creates the run's network.
    pub(super) async fn prepare(
        images: Images,
        mysql: MysqlBuild,
        log_dir: &Path,
    ) -> Result<Self, ClusterError> {
        std::fs::create_dir_all(log_dir)
            .map_err(|e| ClusterError::io(format!("create {}", log_dir.display()), e))?;
        let docker = connect(&images).await?;
        reap_stale(&docker).await;
        let network = DockerNetwork::create(&docker).await?;
        Ok(Self {
            docker,
            images,
            mysql,
            network,
            log_dir: log_dir.to_path_buf(),
            next: tokio::sync::Mutex::new(1),
        })
    }

    /// Starts containers that must know each other's addresses before they start (an
    /// ensemble): `specs` gets the `n` addresses and returns the containers to start there.
    ///
    /// Members name each other by address, not by container name: Docker's DNS drops the
    /// name of a stopped or disconnected container and forwards the query to the host's
    /// resolver, whose timeouts stall the survivors' dials for seconds. Docker assigns
    /// addresses of a fresh network one after another, and launches hold a lock, so the
    /// next `n` are known; each is checked after start.
    pub(super) async fn launch_group<'i>(
        &self,
        n: u32,
        specs: impl FnOnce(&[Ipv4Addr]) -> Vec<Spec<'i>>,
    ) -> Result<Vec<(String, Container)>, ClusterError> {
        let mut next = self.next.lock().await;
        let base = u32::from(self.network.gateway);
        let ips: Vec<Ipv4Addr> = (0..n).map(|i| Ipv4Addr::from(base + *next + i)).collect();
        let mut out = Vec::new();
        for (spec, ip) in specs(&ips).into_iter().zip(&ips) {
            *next += 1;
            let (name, c) = self.launch(spec).await?;
            if c.ip != *ip {
                return Err(docker_error(
                    format!("start container for {name}"),
                    format!(
                        "Docker gave it {}, expected {ip} (the next free address)",
                        c.ip
                    ),
                ));
            }
            out.push((name, c));
        }
        Ok(out)
    }

    /// [`Containers::launch_group`] of one container that needs no address in advance.
    pub(super) async fn launch_one(&self, spec: Spec<'_>) -> Result<Container, ClusterError> {
        let mut started = self.launch_group(1, |_| vec![spec]).await?;
        Ok(started.remove(0).1)
    }

    /// Creates and starts one container; returns as soon as it runs (readiness is the
    /// caller's: each service has its own).
    async fn launch(&self, spec: Spec<'_>) -> Result<(String, Container), ClusterError> {
        let (repo, tag) = split_image(spec.image);
        let net = &self.network;
        let mut request = GenericImage::new(repo, tag)
            .with_wait_for(WaitFor::Nothing)
            .with_container_name(format!("{}-{}", net.name, spec.name))
            .with_hostname(spec.name.clone())
            .with_network(net.name.clone())
            .with_labels(labels(&net.run))
            .with_cmd(spec.cmd)
            // Nothing is published on the host: clients use the container's own address.
            .with_host_config_modifier(|h| h.publish_all_ports = Some(false));
        for (k, v) in spec.env {
            request = request.with_env_var(k, v);
        }
        let inner = request
            .start()
            .await
            .map_err(|e| docker_error(format!("start container for {}", spec.name), e))?;
        let docker = self.docker.clone();
        let inspect = api("inspect", docker.inspect_container(inner.id(), None)).await?;
        let pid = inspect
            .state
            .as_ref()
            .and_then(|s| s.pid)
            .unwrap_or_default() as u32;
        let ip = inspect
            .network_settings
            .and_then(|s| s.networks)
            .and_then(|n| n.get(&self.network.name).cloned())
            .and_then(|e| e.ip_address)
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            .ok_or_else(|| {
                docker_error(
                    format!("start container for {}", spec.name),
                    "it has no address on the run's network",
                )
            })?;
        let log = self.log_dir.join(format!("{}.log", spec.name));
        let c = Container {
            id: inner.id().to_string(),
            inner: Some(inner),
            docker,
            network: self.network.name.clone(),
            ip,
            image: spec.image.to_string(),
            log,
            pid,
            paused: false,
            disconnected: false,
        };
        spawn_log_follower(c.docker.clone(), c.id().to_string(), c.log.clone(), 0);
        Ok((spec.name, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_split_at_the_tag_not_at_a_registry_port() {
        assert_eq!(split_image("redis:7.0"), ("redis", "7.0"));
        assert_eq!(
            split_image("quay.io/coreos/etcd:v3.4.23"),
            ("quay.io/coreos/etcd", "v3.4.23")
        );
        assert_eq!(
            split_image("localhost:5000/redis"),
            ("localhost:5000/redis", "latest")
        );
        assert_eq!(split_image("redis"), ("redis", "latest"));
    }

    #[test]
    fn only_a_dead_owner_on_this_host_marks_leftovers() {
        let mine = labels("r");
        assert!(!owner_gone(Some(&mine)), "this process is alive");
        let mut dead = mine.clone();
        // Pids are below 2^22 on Linux.
        dead.insert(LABEL_PID.into(), "99999999".into());
        assert!(owner_gone(Some(&dead)));
        dead.insert(LABEL_HOST.into(), "another-host".into());
        assert!(
            !owner_gone(Some(&dead)),
            "another host's pids mean nothing here"
        );
        assert!(!owner_gone(None));
    }
}

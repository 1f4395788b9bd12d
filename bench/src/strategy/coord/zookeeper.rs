//! `zookeeper`: the ZooKeeper lock recipe (Curator's `InterProcessMutex` layout), fair and
//! without a herd: each waiter watches only its predecessor.
//!
//! Acquire creates an ephemeral sequential node `/<prefix>/locks/<key>/_c_<uuid>-lock-<seq>`
//! and holds the lock once its node has the lowest sequence number; until then it watches the
//! node just before its own. Release deletes the node. The node is ephemeral: when the
//! session that created it expires (the holder stalled or was cut off for longer than the
//! session timeout), ZooKeeper deletes it and the next waiter gets the lock. The fencing token
//! is the node's creation zxid, which grows with every write to the ensemble, so it grows
//! with each new holder of a key.
//!
//! `zookeeper-rwlock` is Curator's `InterProcessReadWriteLock` on the same machinery: the node
//! names carry a read or write marker (`__READ__`, `__WRIT__`) and contenders are ordered by
//! sequence number whatever their marker. A writer holds once its node is the lowest of all and
//! watches the node just before its own; a reader holds once no write node precedes it and
//! watches the first write node before its own. Readers therefore share the key, and a reader
//! that arrives after a waiting writer queues behind it (Curator's recipe is fair to writers).
//!
//! Why not the crate's `Client::lock`: it is Curator-compatible, but its retries on connection
//! loss are unbounded and its clean-up after a cancelled acquire runs unawaited in the
//! background; here every call is bounded and the clean-up is part of the attempt.
//!
//! A node we failed to delete (or may have created) is an orphan: it blocks its key until
//! deleted. As Curator does (its guaranteed delete and protected-mode find-and-delete), the
//! next acquire on a connected session deletes it, whoever's node it was. Retiring the session
//! that owns it is not enough: after a paused leader resumes, it can answer that session's
//! reconnect with "session expired" (it marked the session closing while deposed) although the
//! new quorum keeps it, and its nodes, for a whole session timeout.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError, SessionState};

use crate::cluster::Prefix;
use crate::record::ErrorKind;
use crate::record::trips::one;
use crate::strategy::{AcquireError, Acquired, KeepAlive, Lease, Lock, StrategyError, within};
use crate::workload::Workload;

use crate::strategy::entry::needs::MARIADB_ZOOKEEPER;
use crate::strategy::entry::{Built, Kind, Setup, StrategyInfo};

/// `zookeeper`.
pub const ZOOKEEPER: StrategyInfo = StrategyInfo {
    id: "zookeeper",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: Some("lock node czxid"),
    needs: MARIADB_ZOOKEEPER,
    wait: None,
    about: "ZooKeeper ephemeral sequential node, watch the predecessor (fair); czxid fence",
    build: |s| Box::pin(build(s, false)),
};

/// `zookeeper-rwlock`.
pub const ZOOKEEPER_RWLOCK: StrategyInfo = StrategyInfo {
    id: "zookeeper-rwlock",
    about: "ZooKeeper read-write lock (Curator InterProcessReadWriteLock): __READ__ / __WRIT__ \
            sequential nodes; readers share, a writer waits for every node before it",
    build: |s| Box::pin(build(s, true)),
    ..ZOOKEEPER
};

/// `zookeeper-fenced`.
pub const ZOOKEEPER_FENCED: StrategyInfo = StrategyInfo {
    id: "zookeeper-fenced",
    fenced: true,
    about: "zookeeper with the lock node's czxid as fencing token; stale writes refused",
    ..ZOOKEEPER
};

/// The ZooKeeper lock (its read–write recipe when `read_write`) around the critical section.
async fn build(s: Setup<'_>, read_write: bool) -> Result<Built, StrategyError> {
    let store = s.mariadb().await?;
    let addrs = s.members(&s.ep.zookeeper, "ZooKeeper")?;
    let auth = s.ep.zookeeper_auth.as_ref();
    let lock = ZkLock::connect(&addrs, auth, &s.ep.prefix, s.w).await?;
    Ok(s.locked(if read_write { lock.read_write() } else { lock }, store))
}

/// What a contender's node stands for, and so which nodes it waits behind (Curator's lock
/// drivers). The node's name carries the role's marker; the sequence number follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `InterProcessMutex`: waits for every node before its own.
    Mutex,
    /// The write lock of `InterProcessReadWriteLock`: waits for every node before its own.
    Write,
    /// Its read lock: waits only for write nodes before its own.
    Read,
}

impl Role {
    const ALL: [Role; 3] = [Role::Mutex, Role::Write, Role::Read];

    /// Curator's lock-node names (the two of the read–write lock have the same length).
    fn marker(self) -> &'static str {
        match self {
            Role::Mutex => "lock-",
            Role::Write => "__WRIT__",
            Role::Read => "__READ__",
        }
    }

    /// The node a contender with sequence `mine` must wait for among `children`, or `None`
    /// once it holds the lock: the node just before its own (mutex, writer), or the first
    /// write node before its own (reader).
    fn blocker<'a>(self, children: &'a [String], mine: &str) -> Option<&'a String> {
        let before = children
            .iter()
            .filter_map(|c| sequence(c).map(|s| (s, c)))
            .filter(|(s, _)| *s < mine);
        match self {
            Role::Mutex | Role::Write => before.max_by_key(|(s, _)| *s),
            Role::Read => before
                .filter(|(_, c)| c.contains(Role::Write.marker()))
                .min_by_key(|(s, _)| *s),
        }
        .map(|(_, c)| c)
    }
}

/// At most this many sessions; buyers beyond it share one (the unique `_c_<uuid>` prefix of
/// each node keeps contenders on one session apart, as in Curator).
const MAX_SESSIONS: u32 = 128;

/// At most this many orphans wait for deletion; beyond it the oldest is left to its session's
/// expiry.
const MAX_ORPHANS: usize = 1024;

/// A lock node of ours that may still be in its queue, to delete from any session.
#[derive(Debug, Clone)]
enum Orphan {
    /// A node whose delete failed or whose session was reported expired.
    Node(String),
    /// A create whose outcome is unknown: the child of `parent` named with `protected`, if any.
    Protected { parent: String, protected: String },
}

/// A held lock: what release needs besides the [`Lease`].
struct Held {
    /// Full path of our lock node.
    path: String,
    /// The session that owns the node (the lock lives and dies with it).
    session: Client,
}

/// The ZooKeeper lock strategy.
pub struct ZkLock {
    /// `host:port,host:port,…` of the ensemble.
    connect: String,
    /// `user:password` for the digest scheme, when the ensemble asks for a login.
    digest: Option<Vec<u8>>,
    /// Requested session timeout: `lock.ttl`; the servers clamp it to 2–20 ticks (0.4–4 s).
    session_timeout: Duration,
    /// One session per buyer up to [`MAX_SESSIONS`]; `None` after a session was retired.
    sessions: Vec<tokio::sync::Mutex<Option<Client>>>,
    acquire_timeout: Duration,
    timeout: Duration,
    /// Locks currently held, by owner token (at most one per buyer in flight).
    held: Mutex<HashMap<String, Held>>,
    /// Nodes to delete at the next acquire on a connected session, oldest first.
    orphans: Mutex<Vec<Orphan>>,
    /// Parent of every lock's directory: `/<prefix>/locks`.
    root: String,
    /// Curator's read–write recipe: writes take write nodes, reads read nodes (else every
    /// acquire is the mutex's).
    read_write: bool,
}

/// Classifies a ZooKeeper error: an error reply is definite; a lost connection or session is
/// not (the server may have applied the request).
pub fn classify(e: &ZkError) -> ErrorKind {
    match e {
        ZkError::Timeout => ErrorKind::Timeout,
        ZkError::ConnectionLoss
        | ZkError::SessionExpired
        | ZkError::SessionMoved
        | ZkError::ClientClosed
        | ZkError::NoHosts => ErrorKind::Connection,
        _ => ErrorKind::Server,
    }
}

/// The sequence part of a lock node's name, after its marker (Curator sorts contenders by it).
fn sequence(name: &str) -> Option<&str> {
    Role::ALL
        .iter()
        .find_map(|r| name.rsplit_once(r.marker()).map(|(_, seq)| seq))
}

/// Pause between attempts to open a session at setup.
const SETUP_RETRY: Duration = Duration::from_millis(250);

impl ZkLock {
    /// Opens one session per buyer (bounded) to the ensemble at `addrs`.
    /// Lock nodes live under `/<prefix>/locks`.
    pub async fn connect(
        addrs: &[SocketAddr],
        auth: Option<&crate::cluster::Auth>,
        prefix: &Prefix,
        w: &Workload,
    ) -> Result<Self, StrategyError> {
        let connect = addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let n = w.load.clients.clamp(1, MAX_SESSIONS);
        let mut lock = Self {
            connect,
            digest: auth.map(crate::cluster::Auth::digest),
            session_timeout: w.lock.ttl,
            sessions: Vec::new(),
            acquire_timeout: w.lock.acquire_timeout,
            timeout: w.load.timeout,
            held: Mutex::new(HashMap::new()),
            orphans: Mutex::new(Vec::new()),
            root: format!("{}/locks", prefix.zk_root()),
            read_write: false,
        };
        // The client gives up on a session the ensemble does not establish within the session
        // timeout (the lock ttl, 2 s in the chaos workloads): a starved JVM can take longer.
        // Retry until the setup bound, as Curator's connection retry policy does.
        let open = |_| async {
            let deadline = tokio::time::Instant::now() + crate::strategy::SETUP_TIMEOUT;
            let mut last = None;
            loop {
                let connector = lock
                    .connector()
                    .with_connection_timeout(crate::strategy::SETUP_TIMEOUT);
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                match tokio::time::timeout(left, connector.connect(&lock.connect)).await {
                    Ok(Ok(client)) => return Ok(client),
                    Ok(Err(e)) if tokio::time::Instant::now() + SETUP_RETRY < deadline => {
                        last = Some(e);
                        tokio::time::sleep(SETUP_RETRY).await
                    }
                    Ok(Err(e)) => return Err(StrategyError::Zookeeper(e)),
                    // The last refusal says more than the timeout (no quorum, a lost session…).
                    Err(_) => {
                        return Err(last.map_or(
                            StrategyError::Timeout("connect to zookeeper"),
                            StrategyError::Zookeeper,
                        ));
                    }
                }
            }
        };
        let opened = futures::future::try_join_all((0..n).map(open)).await?;
        lock.sessions = opened
            .into_iter()
            .map(|c| tokio::sync::Mutex::new(Some(c)))
            .collect();
        Ok(lock)
    }

    /// The read–write lock (`zookeeper-rwlock`) on the same sessions.
    pub fn read_write(mut self) -> Self {
        self.read_write = true;
        self
    }

    fn connector(&self) -> zookeeper_client::Connector {
        let c = Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_connection_timeout(self.timeout);
        match &self.digest {
            Some(d) => c.with_auth("digest", d),
            None => c,
        }
    }

    /// A new session, bounded by `load.timeout`.
    async fn open(&self) -> Result<Client, ErrorKind> {
        within(
            self.timeout,
            // A new session counts as one, though its handshake may take more.
            one(self.connector().connect(&self.connect)),
            classify,
        )
        .await
    }

    /// The session of buyer `client`, replacing one that expired or was retired.
    async fn session(&self, client: u32) -> Result<Client, ErrorKind> {
        let mut slot = self.sessions[client as usize % self.sessions.len()]
            .lock()
            .await;
        if let Some(s) = slot.as_ref()
            && !s.state().is_terminated()
        {
            return Ok(s.clone());
        }
        // An expired session is terminal: only a new one serves this buyer again.
        let s = self.open().await?;
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Stops handing out `session`: once the attempts using it finish, its last handle drops,
    /// the client closes the session and ZooKeeper deletes its ephemeral nodes. This is the
    /// bounded clean-up for a node we could not delete (or do not know we created).
    async fn retire(&self, client: u32, session: &Client) {
        let mut slot = self.sessions[client as usize % self.sessions.len()]
            .lock()
            .await;
        if slot
            .as_ref()
            .is_some_and(|s| s.session_id() == session.session_id())
        {
            *slot = None;
        }
    }

    /// Creates our ephemeral sequential node under `parent`, creating the parent on first use.
    /// Returns its path and creation zxid.
    async fn create_node(
        &self,
        client: u32,
        zk: &Client,
        parent: &str,
        prefix: &str,
        token: &str,
    ) -> Result<(String, i64), ErrorKind> {
        let node = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
        let dir = CreateMode::Persistent.with_acls(Acls::anyone_all());
        // Twice at most: the second try follows the creation of a missing parent.
        for _ in 0..2 {
            let created = tokio::time::timeout(
                self.timeout,
                one(zk.create(prefix, token.as_bytes(), &node)),
            )
            .await;
            match created {
                Ok(Ok((stat, seq))) => return Ok((format!("{prefix}{seq}"), stat.czxid)),
                Ok(Err(ZkError::NoNode)) => {
                    within(self.timeout, one(zk.mkdir(parent, &dir)), classify).await?;
                }
                Ok(Err(ZkError::ConnectionLoss)) | Err(_) => {
                    // The create may have been applied: look for our unique prefix (Curator's
                    // "protected" mode). If even that fails, retire the session so that any
                    // node we made goes with it.
                    return match self.find_node(zk, parent, prefix).await {
                        Ok(Some(found)) => Ok(found),
                        Ok(None) => Err(ErrorKind::Connection),
                        Err(k) => {
                            let (_, protected) = prefix.rsplit_once('/').expect("a path");
                            self.orphan(Orphan::Protected {
                                parent: parent.to_string(),
                                protected: protected.to_string(),
                            });
                            self.retire(client, zk).await;
                            Err(k)
                        }
                    };
                }
                Ok(Err(e)) => return Err(classify(&e)),
            }
        }
        Err(ErrorKind::Server)
    }

    /// Our node under `parent` after a create with an unknown outcome, with its czxid.
    async fn find_node(
        &self,
        zk: &Client,
        parent: &str,
        prefix: &str,
    ) -> Result<Option<(String, i64)>, ErrorKind> {
        let (_, protected) = prefix.rsplit_once('/').expect("prefix is a path");
        let children = within(self.timeout, one(zk.list_children(parent)), classify).await?;
        let Some(name) = children.into_iter().find(|c| c.starts_with(protected)) else {
            return Ok(None);
        };
        let path = format!("{parent}/{name}");
        match within(self.timeout, one(zk.check_stat(&path)), classify).await? {
            Some(stat) => Ok(Some((path, stat.czxid))),
            None => Ok(None),
        }
    }

    /// Deletes our node after a failed or abandoned acquire. If that fails, the node is an
    /// orphan; if the delete's outcome is unknown, the session is retired as well, so the node
    /// cannot outlive it.
    async fn abandon(&self, client: u32, zk: &Client, path: &str) {
        match tokio::time::timeout(self.timeout, one(zk.delete(path, None))).await {
            Ok(Ok(())) | Ok(Err(ZkError::NoNode)) => {}
            // Maybe not expired for the quorum (see the module's doc).
            Ok(Err(ZkError::SessionExpired)) => self.orphan(Orphan::Node(path.to_string())),
            _ => {
                self.orphan(Orphan::Node(path.to_string()));
                self.retire(client, zk).await;
            }
        }
    }

    /// Remembers a node to delete later.
    fn orphan(&self, orphan: Orphan) {
        let mut orphans = self.orphans.lock().expect("orphans lock poisoned");
        if orphans.len() == MAX_ORPHANS {
            orphans.remove(0);
        }
        orphans.push(orphan);
    }

    /// Deletes the orphans through `zk`, if it is connected; those it could not delete stay.
    /// All at once, bounded by two calls (a listing and a delete).
    async fn delete_orphans(&self, zk: &Client) {
        if zk.state() != SessionState::SyncConnected {
            return;
        }
        let orphans = std::mem::take(&mut *self.orphans.lock().expect("orphans lock poisoned"));
        if orphans.is_empty() {
            return;
        }
        let deleted = futures::future::join_all(orphans.iter().map(|o| self.delete_orphan(zk, o)));
        let done = tokio::time::timeout(crate::strategy::calls(2, self.timeout), deleted)
            .await
            .unwrap_or_default();
        let mut left = self.orphans.lock().expect("orphans lock poisoned");
        for (i, o) in orphans.into_iter().enumerate() {
            if !done.get(i).copied().unwrap_or(false) && left.len() < MAX_ORPHANS {
                left.push(o);
            }
        }
    }

    /// Whether `orphan` is gone now.
    async fn delete_orphan(&self, zk: &Client, orphan: &Orphan) -> bool {
        let path = match orphan {
            Orphan::Node(path) => path.clone(),
            Orphan::Protected { parent, protected } => match one(zk.list_children(parent)).await {
                Ok(children) => match children.iter().find(|c| c.starts_with(protected.as_str())) {
                    Some(name) => format!("{parent}/{name}"),
                    None => return true,
                },
                Err(ZkError::NoNode) => return true,
                Err(_) => return false,
            },
        };
        matches!(
            one(zk.delete(&path, None)).await,
            Ok(()) | Err(ZkError::NoNode)
        )
    }

    /// Closes every session and waits until the ensemble confirmed the closes (their nodes
    /// gone): sessions left open would outlive the servers of the run, reconnecting to nothing
    /// until they expire. Bounded by the session timeout, past which the ensemble has expired
    /// any session it did not close.
    async fn close_sessions(&self) {
        let mut watchers = Vec::new();
        for slot in &self.sessions {
            if let Some(s) = slot.lock().await.take() {
                watchers.push(s.state_watcher());
            }
        }
        self.held.lock().expect("held-locks lock poisoned").clear();
        let closed = futures::future::join_all(watchers.into_iter().map(|mut w| async move {
            let mut state = w.state();
            while !state.is_terminated() {
                state = w.changed().await;
            }
        }));
        let _ = tokio::time::timeout(self.session_timeout.max(self.timeout), closed).await;
    }

    /// Waits until no node under `parent` blocks ours ([`Role::blocker`]), watching only the
    /// one that does. `Ok(false)`: `deadline` passed first.
    async fn wait_turn(
        &self,
        zk: &Client,
        parent: &str,
        path: &str,
        role: Role,
        deadline: tokio::time::Instant,
    ) -> Result<bool, ErrorKind> {
        let me = path.rsplit_once('/').map(|(_, n)| n).unwrap_or(path);
        let my_seq = sequence(me).ok_or(ErrorKind::Server)?;
        // Each round ends with the blocker gone or the deadline passed; a blocker can only be
        // replaced by an older node, so the rounds are bounded by the queue ahead.
        loop {
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            let children = within(self.timeout, one(zk.list_children(parent)), classify).await?;
            let predecessor = role
                .blocker(&children, my_seq)
                .map(|c| format!("{parent}/{c}"));
            if !children.iter().any(|c| c == me) {
                // Our ephemeral node is gone: the session expired while we queued.
                return Err(ErrorKind::Connection);
            }
            let Some(predecessor) = predecessor else {
                return Ok(true);
            };
            let watch =
                tokio::time::timeout(self.timeout, one(zk.get_and_watch_data(&predecessor)));
            let watcher = match watch.await {
                Ok(Ok((_, _, w))) => w,
                // Gone between the listing and the watch: look again.
                Ok(Err(ZkError::NoNode)) => continue,
                Ok(Err(e)) => return Err(classify(&e)),
                Err(_) => return Err(ErrorKind::Timeout),
            };
            match tokio::time::timeout_at(deadline, watcher.changed()).await {
                Ok(event) if event.session_state.is_terminated() => {
                    return Err(ErrorKind::Connection);
                }
                Ok(_) => {}
                Err(_) => return Ok(false),
            }
        }
    }

    /// Takes the lock on `key` in `role`: creates our node, waits for our turn, remembers it.
    async fn take(&self, client: u32, key: &str, token: &str, role: Role) -> Acquired {
        let deadline = tokio::time::Instant::now() + self.acquire_timeout;
        let zk = self.session(client).await.map_err(AcquireError::Failed)?;
        self.delete_orphans(&zk).await;
        let parent = format!("{}/{key}", self.root);
        let prefix = format!("{parent}/_c_{}-{}", uuid::Uuid::new_v4(), role.marker());
        let (path, czxid) = self
            .create_node(client, &zk, &parent, &prefix, token)
            .await
            .map_err(AcquireError::Failed)?;
        match self.wait_turn(&zk, &parent, &path, role, deadline).await {
            Ok(true) => {}
            Ok(false) => {
                self.abandon(client, &zk, &path).await;
                return Err(AcquireError::Busy);
            }
            Err(k) => {
                self.abandon(client, &zk, &path).await;
                return Err(AcquireError::Failed(k));
            }
        }
        // The session's last contact was the listing that granted it: the server expires the
        // session (and our node) a session timeout after the last it heard from us.
        let mut lease = Lease::new(key, token).expiring(zk.session_timeout());
        lease.fence = Some(czxid as u64);
        lease.shared = role == Role::Read;
        lease.keepalive = Some(session_ended(&zk));
        self.held
            .lock()
            .expect("held-locks lock poisoned")
            .insert(token.to_string(), Held { path, session: zk });
        Ok(lease)
    }
}

/// The holder's notice of a session that ended (expired, or closed) while it held a lock:
/// the client's session state, as Curator's connection state LOST tells an application.
fn session_ended(zk: &Client) -> KeepAlive {
    let mut states = zk.state_watcher();
    KeepAlive::spawn(async move {
        while !states.changed().await.is_terminated() {}
        true
    })
}

#[async_trait]
impl Lock for ZkLock {
    async fn acquire(&self, client: u32, key: &str, token: &str) -> Acquired {
        let role = if self.read_write {
            Role::Write
        } else {
            Role::Mutex
        };
        self.take(client, key, token, role).await
    }

    async fn acquire_read(&self, client: u32, key: &str, token: &str) -> Acquired {
        if self.read_write {
            self.take(client, key, token, Role::Read).await
        } else {
            self.acquire(client, key, token).await
        }
    }

    /// The session (a connect), deleting orphans (a listing and a delete) and the node
    /// (create, mkdir, create again; or create then a listing and a stat to find it) may use
    /// up the whole wait; a last round of waiting may start just before the deadline (listing
    /// + watch); then abandoning (a delete): 9 calls.
    fn acquire_bound(&self) -> Duration {
        self.acquire_timeout + crate::strategy::calls(9, self.timeout)
    }

    /// One delete.
    fn release_bound(&self) -> Duration {
        self.timeout
    }

    async fn release(&self, client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        let Some(held) = self
            .held
            .lock()
            .expect("held-locks lock poisoned")
            .remove(&lease.token)
        else {
            return Ok(false);
        };
        match tokio::time::timeout(self.timeout, one(held.session.delete(&held.path, None))).await {
            Ok(Ok(())) => Ok(true),
            // The session expired while we held the lock: ZooKeeper already deleted the node
            // and someone else may have had the lock since.
            Ok(Err(ZkError::NoNode)) => Ok(false),
            // The same, unless the expiry came from a deposed leader (see the module's doc).
            Ok(Err(ZkError::SessionExpired)) => {
                self.orphan(Orphan::Node(held.path));
                Ok(false)
            }
            failed => {
                self.orphan(Orphan::Node(held.path));
                self.retire(client, &held.session).await;
                Err(match failed {
                    Ok(Err(e)) => classify(&e),
                    _ => ErrorKind::Timeout,
                })
            }
        }
    }

    async fn close(&self) {
        self.close_sessions().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn writers_wait_for_the_node_before_readers_for_the_first_writer_before() {
        // Listing order is arbitrary; only the sequence after the marker counts.
        let children = names(&[
            "_c_b-__WRIT__0000000004",
            "_c_a-__READ__0000000001",
            "_c_d-__READ__0000000005",
            "_c_c-__WRIT__0000000003",
            "_c_e-__READ__0000000002",
        ]);
        let blocker = |role: Role, seq| role.blocker(&children, seq).map(String::as_str);
        // Readers before any writer hold together.
        assert_eq!(blocker(Role::Read, "0000000001"), None);
        assert_eq!(blocker(Role::Read, "0000000002"), None);
        // A reader behind writers watches the first of them.
        assert_eq!(
            blocker(Role::Read, "0000000005"),
            Some("_c_c-__WRIT__0000000003")
        );
        // A writer watches the node just before its own, reader or writer.
        assert_eq!(
            blocker(Role::Write, "0000000003"),
            Some("_c_e-__READ__0000000002")
        );
        assert_eq!(
            blocker(Role::Write, "0000000004"),
            Some("_c_c-__WRIT__0000000003")
        );
        // The mutex's nodes sort the same way.
        let mutex = names(&["_c_x-lock-0000000007", "_c_y-lock-0000000006"]);
        assert_eq!(
            Role::Mutex
                .blocker(&mutex, "0000000007")
                .map(String::as_str),
            Some("_c_y-lock-0000000006")
        );
        assert_eq!(Role::Mutex.blocker(&mutex, "0000000006"), None);
    }
}

//! Jepsen's etcd 3.4.3 lock analysis (jepsen.io/analyses/etcd-3.4.3, §3.2 "Locks Aren't
//! Real"; jepsen-io/etcd `src/jepsen/etcd/lock.clj`, the `lock-set` workload): clients guard
//! read–sleep–write updates of an in-memory set with etcd's lock, while a nemesis pauses etcd
//! server processes. Published: with 2 s lease TTLs, five concurrent processes and pauses every
//! five seconds, about 18 % of acknowledged adds were lost.
//!
//! What runs here, on a 3-member cluster of the chosen build, with bare `etcd-client` calls:
//! - [`BUYERS`] closed-loop clients per variant, each on its own connection to one member
//!   (client `i` to member `i mod 3`, as each Jepsen client talked to one node). Each add, as
//!   `lock.clj`'s `acquire!` does: grant a lease of [`TTL`] s, keep it alive beside the call
//!   (every TTL/3), take the lock with the v3 `Lock` RPC on that lease and trust the grant (no
//!   re-read of its key: the 3.4-era client); read the set, sleep 0–2 s, write back the set
//!   with its element; then unlock and revoke the lease. An add is acknowledged once its write
//!   is done, whatever the unlock answers.
//! - The pause nemesis of jepsen-io/etcd (`:pause` with targets `:primaries` and `:all`,
//!   interval 5 s): every [`INTERVAL`] it either SIGSTOPs etcd or SIGCONTs every member; the
//!   pauses alternate between every member and the leader (Jepsen picked one of the two at
//!   random).
//! - Two variants at once, on two locks, under the same pauses: `trusting` (the set takes any
//!   access) and `fenced` (the set remembers the highest token it was accessed with and
//!   refuses a read or a write with a lower one; the token is the revision of the grant's
//!   header, ties broken by client).
//!
//! The set is read after the last add: an acknowledged element missing from it is a lost
//! update.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, LockOptions};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior, sleep, timeout};
use tokio_util::sync::CancellationToken;

use super::etcd_lease::{CALL, call};
use crate::cluster::{Endpoints, OwnedCluster, Service, etcd};

/// Lease TTL in seconds (`lock.clj`'s `lease-ttl`).
pub const TTL: i64 = 2;
/// Concurrent clients per variant (the analysis: five concurrent processes).
pub const BUYERS: usize = 5;
/// Between nemesis operations (jepsen-io/etcd's `:interval 5`): a pause lasts this long, and
/// so does the calm after it.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// One round: one pause and one calm.
pub const ROUND: Duration = Duration::from_secs(10);
/// The longest sleep between read and write (`lock.clj`: up to twice its 1000 ms latency).
const HOLD_MAX_MS: u64 = 2_000;
/// Bound of one `Lock` call (a waiter may wait out a pause and four holders).
const LOCK_WAIT: Duration = Duration::from_secs(15);
/// Seed of the clients' sleeps.
const SEED: u64 = 0x6a65_7073_656e;

/// A fencing token: the grant's header revision, then the client.
type Token = (i64, usize);

/// The guarded resource: `lock.clj`'s in-memory set, with an optional fence.
#[derive(Debug, Default)]
struct Guarded {
    elems: Vec<u64>,
    /// The highest token any access carried (fenced variant only).
    fence: Option<Token>,
}

impl Guarded {
    /// Whether an access with `token` is let through; a fenced one raises the fence.
    fn admit(&mut self, token: Option<Token>) -> bool {
        let Some(t) = token else { return true };
        if self.fence.is_some_and(|f| t < f) {
            return false;
        }
        self.fence = Some(t);
        true
    }
}

/// What one variant measured.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Adds whose write was done.
    pub acked: u64,
    /// Acknowledged adds missing from the final set.
    pub lost: u64,
    /// Adds refused by the fence (a read or a write).
    pub refused: u64,
    /// Adds that never got the lock (error or no grant within 15 s), and the first reason.
    pub failed: u64,
    pub first_failure: Option<String>,
}

/// Both variants and the faults they ran under.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub trusting: Tally,
    pub fenced: Tally,
    /// Pauses of every member, and of the leader alone.
    pub paused_all: u32,
    pub paused_leader: u32,
    /// What went wrong pausing or resuming, if anything.
    pub nemesis_errors: Vec<String>,
    /// How long the clients started adds.
    pub duration: Duration,
}

/// How one add ended.
enum Add {
    Acked(u64),
    Refused,
    Failed(String),
}

/// One client's context.
struct Buyer {
    id: usize,
    client: Client,
    lock: &'static str,
    set: Arc<Mutex<Guarded>>,
    fenced: bool,
    until: Instant,
}

/// `rounds` rounds ([`ROUND`] each) of both variants on `cluster`, under the pause nemesis.
pub async fn run(
    cluster: &mut OwnedCluster,
    rounds: u32,
    cancel: &CancellationToken,
) -> Result<Outcome, String> {
    let duration = ROUND * rounds;
    let until = Instant::now() + duration;
    let members: Vec<String> = (cluster.nodes().iter())
        .filter(|n| n.service == Service::Etcd)
        .map(|n| format!("http://{}", n.addr))
        .collect();
    let trusting = Arc::new(Mutex::new(Guarded::default()));
    let fenced = Arc::new(Mutex::new(Guarded::default()));
    // Every client connects before any starts, so a failed connection leaves no task behind.
    let mut clients = Vec::new();
    for id in 0..2 * BUYERS {
        let url = members[id % members.len()].clone();
        clients.push(connect(cluster.endpoints(), url).await?);
    }
    let mut tasks = Vec::new();
    for (id, client) in clients.into_iter().enumerate() {
        let is_fenced = id >= BUYERS;
        tasks.push(tokio::spawn(buy(Buyer {
            id,
            client,
            lock: if is_fenced {
                FENCED_LOCK
            } else {
                TRUSTING_LOCK
            },
            set: Arc::clone(if is_fenced { &fenced } else { &trusting }),
            fenced: is_fenced,
            until,
        })));
    }
    let mut out = nemesis(cluster, until, cancel).await;
    out.duration = duration;
    let mut adds = Vec::new();
    for t in tasks {
        adds.push(t.await.map_err(|e| format!("client task: {e}"))?);
    }
    let (t, f) = adds.split_at(BUYERS);
    out.trusting = tally(t, &trusting);
    out.fenced = tally(f, &fenced);
    Ok(out)
}

const TRUSTING_LOCK: &str = "lockbench/repro/jepsen-etcd-lock/trusting";
const FENCED_LOCK: &str = "lockbench/repro/jepsen-etcd-lock/fenced";

/// A client of the one member at `url`.
async fn connect(endpoints: &Endpoints, url: String) -> Result<Client, String> {
    let opts = etcd::options(endpoints.etcd_auth.as_ref()).with_connect_timeout(CALL);
    Client::connect([url.clone()], Some(opts))
        .await
        .map_err(|e| format!("connect {url}: {e}"))
}

/// Adds in a closed loop until `b.until`; every add's end.
async fn buy(b: Buyer) -> Vec<Add> {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED ^ b.id as u64);
    let mut ends = Vec::new();
    let mut n = 0;
    while Instant::now() < b.until {
        let value = (b.id as u64) * 1_000_000 + n;
        n += 1;
        let hold = Duration::from_millis(rng.random_range(0..HOLD_MAX_MS));
        ends.push(add(&b, value, hold).await);
    }
    ends
}

/// One add: lease, keep-alive, `Lock`, read–sleep–write, unlock, revoke.
async fn add(b: &Buyer, value: u64, hold: Duration) -> Add {
    let mut c = b.client.clone();
    let lease = match call(c.lease_grant(TTL, None)).await {
        Ok(l) => l.id(),
        Err(e) => return Add::Failed(format!("lease grant: {e}")),
    };
    let keeper = Abort(tokio::spawn(keep_alive(c.clone(), lease)));
    let opts = LockOptions::new().with_lease(lease);
    let end = match timeout(LOCK_WAIT, c.lock(b.lock, Some(opts))).await {
        Ok(Ok(granted)) => {
            // Trusted: no read of the key. The fenced variant carries the grant's revision.
            let rev = granted.header().map_or(0, |h| h.revision());
            let end = section(b, rev, value, hold).await;
            let _ = call(c.unlock(granted.key().to_vec())).await;
            end
        }
        Ok(Err(e)) => Add::Failed(format!("lock: {e}")),
        Err(_) => Add::Failed(format!("lock: no grant within {LOCK_WAIT:?}")),
    };
    drop(keeper);
    let _ = call(c.lease_revoke(lease)).await;
    end
}

/// The critical section of `lock.clj`'s set client: read, sleep, write back with `value`.
async fn section(b: &Buyer, rev: i64, value: u64, hold: Duration) -> Add {
    let token = b.fenced.then_some((rev, b.id));
    let seen = {
        let mut s = b.set.lock().expect("set lock");
        if !s.admit(token) {
            return Add::Refused;
        }
        s.elems.clone()
    };
    sleep(hold).await;
    let mut s = b.set.lock().expect("set lock");
    if !s.admit(token) {
        return Add::Refused;
    }
    s.elems = seen;
    s.elems.push(value);
    Add::Acked(value)
}

/// Aborts its task when dropped (the keep-alive ends with its add, on every path).
struct Abort(JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews `lease` every TTL/3 until aborted, as a client library's keep-alive loop does;
/// reopens the stream after an error. Every send and receive is bounded by a tick.
async fn keep_alive(mut c: Client, lease: i64) {
    let tick = Duration::from_millis(TTL as u64 * 1_000 / 3);
    let mut every = tokio::time::interval(tick);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut stream = None;
    loop {
        every.tick().await;
        if stream.is_none() {
            stream = timeout(tick, c.lease_keep_alive(lease))
                .await
                .ok()
                .and_then(Result::ok);
        }
        let Some((keeper, answers)) = stream.as_mut() else {
            continue;
        };
        let sent = timeout(tick, keeper.keep_alive()).await;
        let heard = timeout(tick, answers.message()).await;
        if matches!(sent, Ok(Err(_))) || matches!(heard, Ok(Err(_)) | Ok(Ok(None))) {
            stream = None;
        }
    }
}

/// One variant's tally from its clients' adds and its final set.
fn tally(clients: &[Vec<Add>], set: &Mutex<Guarded>) -> Tally {
    let kept = set.lock().expect("set lock").elems.clone();
    let mut t = Tally::default();
    for a in clients.iter().flatten() {
        match a {
            Add::Acked(v) => {
                t.acked += 1;
                t.lost += u64::from(!kept.contains(v));
            }
            Add::Refused => t.refused += 1,
            Add::Failed(e) => {
                t.failed += 1;
                t.first_failure.get_or_insert_with(|| e.clone());
            }
        }
    }
    t
}

/// Every [`INTERVAL`] until `until`: pause (every member, then the leader, in turn), then
/// resume. Whatever a pause did is resumed before the next step, on every path; a panic drops
/// the cluster, whose guard SIGKILLs paused members too.
async fn nemesis(
    cluster: &mut OwnedCluster,
    until: Instant,
    cancel: &CancellationToken,
) -> Outcome {
    let mut out = Outcome::default();
    let mut all = true;
    loop {
        if !wait(Instant::now() + INTERVAL, until, cancel).await {
            break;
        }
        let names = targets(cluster, all).await;
        if all {
            out.paused_all += 1;
        } else {
            out.paused_leader += 1;
        }
        all = !all;
        let mut paused = Vec::new();
        for n in &names {
            match cluster.pause(n).await {
                Ok(()) => paused.push(n.clone()),
                Err(e) => out.nemesis_errors.push(format!("pause {n}: {e}")),
            }
        }
        wait(Instant::now() + INTERVAL, until, cancel).await;
        for n in &paused {
            if let Err(e) = cluster.resume(n).await {
                out.nemesis_errors.push(format!("resume {n}: {e}"));
            }
        }
    }
    out
}

/// Sleeps until `at`; false (at once) if `at` is past `until` or when cancelled.
async fn wait(at: Instant, until: Instant, cancel: &CancellationToken) -> bool {
    let end = at.min(until);
    tokio::select! {
        _ = tokio::time::sleep_until(end) => at <= until,
        _ = cancel.cancelled() => false,
    }
}

/// The members a pause stops: every one, or the leader (every one when none leads).
async fn targets(cluster: &OwnedCluster, all: bool) -> Vec<String> {
    let every = || {
        (cluster.nodes().iter())
            .filter(|n| n.service == Service::Etcd)
            .map(|n| n.name.clone())
            .collect()
    };
    if all {
        return every();
    }
    match cluster.leader(Service::Etcd).await {
        Ok(Some(n)) => vec![n.name.clone()],
        _ => every(),
    }
}

/// The verdict on one build and what was measured, with counts: reproduced when the trusting
/// clients lost an acknowledged add.
pub fn judge(o: &Outcome) -> (&'static str, String) {
    let t = &o.trusting;
    let f = &o.fenced;
    let mut said = vec![format!(
        "trusting clients: {} of {} acknowledged adds lost ({}){}",
        t.lost,
        t.acked,
        share(t.lost, t.acked),
        failures(t)
    )];
    said.push(format!(
        "fenced: {} of {} lost, {} stale accesses refused{}",
        f.lost,
        f.acked,
        f.refused,
        failures(f)
    ));
    said.push(format!(
        "{} s with {} s pauses: {} of every member, {} of the leader",
        o.duration.as_secs(),
        INTERVAL.as_secs(),
        o.paused_all,
        o.paused_leader
    ));
    if !o.nemesis_errors.is_empty() {
        said.push(format!("nemesis: {}", o.nemesis_errors.join("; ")));
    }
    let verdict = if t.lost > 0 {
        "reproduced"
    } else if t.acked == 0 {
        "undecided"
    } else {
        "not reproduced"
    };
    (verdict, said.join("; "))
}

/// `k` of `n` as a percentage with its two-sided 95 % interval.
fn share(k: u64, n: u64) -> String {
    if n == 0 {
        return "no sample".into();
    }
    let (lo, hi) = crate::stats::clopper_pearson(n, k, 0.975);
    let pct = |x: f64| format!("{:.0}", 100.0 * x);
    format!(
        "{:.1} %, 95 % interval {}–{} %, n={n}",
        100.0 * k as f64 / n as f64,
        pct(lo),
        pct(hi)
    )
}

fn failures(t: &Tally) -> String {
    match &t.first_failure {
        Some(e) => format!(", {} adds without the lock (first: {e})", t.failed),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(acked: u64, lost: u64) -> Outcome {
        Outcome {
            trusting: Tally {
                acked,
                lost,
                ..Tally::default()
            },
            fenced: Tally {
                acked: 30,
                refused: 4,
                ..Tally::default()
            },
            paused_all: 2,
            paused_leader: 1,
            duration: Duration::from_secs(30),
            ..Outcome::default()
        }
    }

    #[test]
    fn reproduced_only_when_the_trusting_clients_lost_an_acknowledged_add() {
        let (v, said) = judge(&outcome(40, 7));
        assert_eq!(v, "reproduced");
        assert_contains!(said, "7 of 40 acknowledged adds lost (17.5 %");
        assert_contains!(said, "n=40");
        assert_contains!(said, "fenced: 0 of 30 lost, 4 stale accesses refused");
        assert_contains!(
            said,
            "30 s with 5 s pauses: 2 of every member, 1 of the leader"
        );
        assert_eq!(judge(&outcome(40, 0)).0, "not reproduced");
        // Nothing acknowledged tests nothing.
        assert_eq!(judge(&outcome(0, 0)).0, "undecided");
    }

    #[test]
    fn the_fence_refuses_an_older_token_and_raises_on_a_newer_one() {
        let mut g = Guarded::default();
        assert!(g.admit(Some((10, 1))));
        assert!(g.admit(Some((12, 0))));
        // The holder of revision 10 read before 12 did: its write is refused.
        assert!(!g.admit(Some((10, 1))));
        // Same revision, another client: ordered by client.
        assert!(!g.admit(Some((11, 4))));
        assert!(g.admit(Some((12, 0))));
        // Unfenced accesses always pass.
        assert!(g.admit(None));
    }
}

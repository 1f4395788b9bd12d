//! Network impairments on the links of one host of the run's private network ([`net`]): delay
//! with jitter, packet loss, a bandwidth limit, and connection resets — the chaos faults of
//! those names — and the probe that measures what a link's round trip really was.
//!
//! `tc netem` is not available here (the kernel has no `sch_netem`); NFQUEUE is. iptables rules
//! in the host's namespace send every packet it sends to the chosen peers to a netlink queue,
//! and a thread of lockbench, inside that namespace, holds each packet's verdict for its delay,
//! drops a share of them, or paces them to a bandwidth. The packets are the real ones: the
//! kernel's TCP retransmits what was lost and backs off as it would, and links between server
//! nodes are impaired as easily as links to clients, with nothing re-addressed. A reset needs no
//! queue: `REJECT --reject-with tcp-reset` for the window.
//!
//! Only the host's outgoing packets are touched, as netem on its interface would: a delay `d`
//! adds `d` to each round trip through it. Rules carry `--queue-bypass`, so packets pass, never
//! pile up, if the thread is gone. A [`Link`] is healed in this order on every way out (`stop`
//! or drop): its rules are deleted, then every held packet is released, then the queue closes.
//! Deleting the namespace deletes rules and queue with it, so nothing outlives the network.
//!
//! [`net`]: super::net

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::net::{Host, run};

/// What a network fault does to the packets a host sends to its peers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Impairment {
    /// Each packet waits `delay` ± up to `jitter` (uniform); within one flow (addresses,
    /// protocol and ports) a later packet never overtakes an earlier one, so TCP sees no
    /// reordering, while flows do not wait for each other.
    Delay { delay: Duration, jitter: Duration },
    /// This share of packets (0..=1) is dropped, each independently.
    Loss { share: f64 },
    /// Packets leave no faster than this many bits per second; a packet that would wait more
    /// than [`BACKLOG_LIMIT`] behind the others is dropped (a full buffer).
    Bandwidth { bits_per_s: u64 },
    /// Every TCP packet from the peers is answered with a reset.
    Reset,
}

/// Longest a paced packet may wait behind the others before it is dropped instead.
pub const BACKLOG_LIMIT: Duration = Duration::from_secs(1);
/// Most packets held at once, in the kernel's queue and in ours; more are dropped.
const HELD_MAX: u32 = 4096;
/// How often the queue thread wakes when nothing is due sooner: the precision of a delay.
const TICK: Duration = Duration::from_millis(1);
/// Bytes of each packet copied to the thread: headers only (the length comes apart).
const COPY_BYTES: u16 = 64;

/// What becomes of one packet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Decision {
    Drop,
    /// Released (accepted) at this moment.
    At(Instant),
}

/// The pure part of an impairment: when each packet goes, or whether it is dropped.
#[derive(Debug)]
pub struct Pacer {
    imp: Impairment,
    rng: ChaCha8Rng,
    /// The latest release given to each flow (a delay's), or to the link (a bandwidth's):
    /// releases never go back in time, so packets stay in order.
    last: HashMap<u64, Instant>,
}

/// Flows remembered before the ones whose last release has passed are forgotten.
const FLOWS_KEPT: usize = 1024;

/// A packet's flow, from its IPv4 header: addresses, protocol and (TCP / UDP) ports.
pub fn flow_of(header: &[u8]) -> u64 {
    let ihl = header.first().map_or(20, |b| usize::from(b & 0x0f) * 4);
    let mut key = [0u8; 13];
    for (k, i) in (12..20).chain([9]).enumerate() {
        key[k] = header.get(i).copied().unwrap_or(0);
    }
    for (k, i) in (ihl..ihl + 4).enumerate() {
        key[9 + k] = header.get(i).copied().unwrap_or(0);
    }
    // FNV-1a: a stable, cheap hash of 13 bytes.
    key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

impl Pacer {
    /// A pacer drawing jitter and losses from `seed`.
    pub fn new(imp: Impairment, seed: u64) -> Self {
        Self {
            imp,
            rng: ChaCha8Rng::seed_from_u64(seed),
            last: HashMap::new(),
        }
    }

    /// The fate of a packet of `len` bytes of flow `flow` ([`flow_of`]) that arrives at `now`.
    pub fn decide(&mut self, now: Instant, len: usize, flow: u64) -> Decision {
        // A bandwidth paces the whole link; a delay keeps each flow in order.
        let key = match self.imp {
            Impairment::Bandwidth { .. } => 0,
            _ => flow,
        };
        if self.last.len() > FLOWS_KEPT {
            self.last.retain(|_, at| *at > now);
        }
        let last = self.last.get(&key).copied();
        let at = match self.imp {
            Impairment::Delay { delay, jitter } => {
                let j = jitter.as_secs_f64() * (2.0 * self.rng.random::<f64>() - 1.0);
                now + Duration::from_secs_f64((delay.as_secs_f64() + j).max(0.0))
            }
            Impairment::Loss { share } => {
                if self.rng.random::<f64>() < share {
                    return Decision::Drop;
                }
                now
            }
            Impairment::Bandwidth { bits_per_s } => {
                let start = last.map_or(now, |l| l.max(now));
                let wire = Duration::from_secs_f64(len as f64 * 8.0 / bits_per_s.max(1) as f64);
                if start + wire > now + BACKLOG_LIMIT {
                    return Decision::Drop;
                }
                start + wire
            }
            Impairment::Reset => now,
        };
        let at = last.map_or(at, |l| l.max(at));
        self.last.insert(key, at);
        Decision::At(at)
    }
}

/// What a link's queue thread saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkCounts {
    /// Packets that went through the queue.
    pub packets: u64,
    /// Of which dropped (loss, a full backlog).
    pub dropped: u64,
}

/// Queue numbers, unique within this process (each link has its own).
static NEXT_QUEUE: AtomicU16 = AtomicU16::new(100);

/// An impairment in force on one host's links to some peers; healed by [`Link::stop`] or drop.
#[derive(Debug)]
pub struct Link {
    /// The host's namespace; `None`: the root namespace (this process's own packets).
    netns: Option<String>,
    /// The iptables rules added, each as its arguments after `-A` / `-D`.
    rules: Vec<Vec<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<LinkCounts>>,
}

impl Link {
    /// Impairs what `host` sends to `peers` (a reset: what it receives from them). The queue
    /// thread gives up by itself after `lifetime` (a backstop: the rules then let packets
    /// pass); `seed` draws jitter and losses.
    pub fn start(
        host: &Host,
        peers: &[IpAddr],
        imp: Impairment,
        seed: u64,
        lifetime: Duration,
    ) -> Result<Self, String> {
        let queue = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
        // One rule for every peer (iptables expands the list): one call to add, one to delete.
        let p: Vec<String> = peers.iter().map(IpAddr::to_string).collect();
        let p = p.join(",");
        let rule: Vec<String> = match imp {
            Impairment::Reset => ["INPUT", "-s", &p, "-p", "tcp", "-j", "REJECT"]
                .into_iter()
                .chain(["--reject-with", "tcp-reset"])
                .map(String::from)
                .collect(),
            _ => ["OUTPUT", "-d", &p].into_iter().map(String::from).collect(),
        };
        let rules = if peers.is_empty() { vec![] } else { vec![rule] };
        Self::open(Some(&host.netns), queue, rules, imp, seed, lifetime)
    }

    /// Delays by `delay` every packet that namespace `netns` (`None`: the root namespace)
    /// sends and one of `matches` selects (each the arguments of an OUTPUT rule before its
    /// target: `-d 10.213.0.1,10.213.0.2`, or with `-p tcp --dport 3306`), until healed.
    /// `queue`: the NFQUEUE number, which in the root namespace must be unique on the machine.
    /// Each rule carries `tag` as its comment, by which a dead run's root rules are found.
    pub fn delay(
        netns: Option<&str>,
        queue: u16,
        matches: &[Vec<String>],
        delay: Duration,
        tag: &str,
    ) -> Result<Self, String> {
        let imp = Impairment::Delay {
            delay,
            jitter: Duration::ZERO,
        };
        let comment = ["-m", "comment", "--comment", tag].map(String::from);
        let rules = (matches.iter())
            .map(|m| ["OUTPUT".to_string()].into_iter().chain(m.iter().cloned()))
            .map(|r| r.chain(comment.iter().cloned()).collect())
            .collect();
        // A week: the run's guard heals it long before (the queue thread's backstop only).
        let lifetime = Duration::from_secs(7 * 24 * 3600);
        Self::open(netns, queue, rules, imp, 0, lifetime)
    }

    /// Binds queue `queue` in `netns` to a thread that applies `imp` (a reset needs none), then
    /// adds `rules` (OUTPUT rules get the queue as their target).
    fn open(
        netns: Option<&str>,
        queue: u16,
        mut rules: Vec<Vec<String>>,
        imp: Impairment,
        seed: u64,
        lifetime: Duration,
    ) -> Result<Self, String> {
        let mut link = Self {
            netns: netns.map(String::from),
            rules: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
        };
        let place = netns.unwrap_or("the root namespace").to_string();
        if imp != Impairment::Reset {
            let (tx, rx) = std::sync::mpsc::channel();
            let ns = netns.map(|n| PathBuf::from(format!("/run/netns/{n}")));
            let stop = link.stop.clone();
            let thread = std::thread::Builder::new()
                .name(format!("netem-{queue}"))
                .spawn(move || serve(ns.as_deref(), queue, imp, seed, &stop, lifetime, tx))
                .map_err(|e| format!("start the queue thread: {e}"))?;
            link.thread = Some(thread);
            // Bound: the thread answers once its queue is bound, or fails.
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(format!("NFQUEUE {queue} in {place}: {e}")),
                Err(_) => return Err(format!("NFQUEUE {queue}: the thread never bound it")),
            }
            for r in rules.iter_mut().filter(|r| r[0] == "OUTPUT") {
                let target = ["-j", "NFQUEUE", "--queue-bypass", "--queue-num"];
                r.extend(
                    target
                        .map(String::from)
                        .into_iter()
                        .chain([queue.to_string()]),
                );
            }
        }
        for rule in rules {
            link.iptables("-A", &rule)?;
            link.rules.push(rule);
        }
        Ok(link)
    }

    fn iptables(&self, op: &str, rule: &[String]) -> Result<(), String> {
        let mut args = match &self.netns {
            Some(ns) => vec!["ip", "netns", "exec", ns.as_str(), "iptables", "-w", op],
            None => vec!["iptables", "-w", op],
        };
        args.extend(rule.iter().map(String::as_str));
        run(&args)
    }

    /// Heals: deletes the rules, then releases every held packet, then closes the queue.
    pub fn stop(mut self) -> Result<LinkCounts, String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<LinkCounts, String> {
        let mut errors = Vec::new();
        for rule in std::mem::take(&mut self.rules) {
            // A rule already gone is healed too (its namespace deleted under it).
            if let Err(e) = self.iptables("-D", &rule)
                && self.iptables("-C", &rule).is_ok()
            {
                errors.push(e);
            }
        }
        self.stop.store(true, Ordering::SeqCst);
        let counts = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(c)) => c,
            Some(Err(_)) => {
                errors.push("the queue thread panicked".into());
                LinkCounts::default()
            }
            None => LinkCounts::default(),
        };
        if errors.is_empty() {
            Ok(counts)
        } else {
            Err(errors.join("; "))
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            let netns = self.netns.as_deref().unwrap_or("root");
            tracing::warn!(netns, "healing a network fault: {e}");
        }
    }
}

/// The links of a steady delay (a workload's `[environment] rtt`) over `net`, in force until
/// dropped. Every round trip between a client and a server is lengthened by `rtt`: what a
/// client host, or this process in the root namespace, sends to the server hosts at
/// `servers` or to the store's `store_ports` on the gateway (MariaDB, in the root namespace)
/// waits `rtt`, and the server's answer does not wait. Every round trip between two server
/// hosts is lengthened by `rtt` too: both ends send through a delayed host, so each host's
/// packets to the others wait `rtt / 2`.
pub fn steady_delay(
    net: &super::net::Network,
    servers: &[IpAddr],
    store_ports: &[u16],
    rtt: Duration,
) -> Result<Vec<Link>, String> {
    let list = |ips: &[IpAddr]| ips.iter().map(IpAddr::to_string).collect::<Vec<_>>();
    let to = |ips: &[IpAddr]| vec!["-d".to_string(), list(ips).join(",")];
    let mut to_servers = Vec::new();
    if !servers.is_empty() {
        to_servers.push(to(servers));
    }
    for port in store_ports {
        let (gw, port) = (net.gateway.to_string(), port.to_string());
        to_servers.push(
            ["-d", &gw, "-p", "tcp", "--dport", &port]
                .map(String::from)
                .to_vec(),
        );
    }
    let tag = net.tag();
    let queue = || NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
    let mut links = vec![Link::delay(None, net.root_queue(), &to_servers, rtt, &tag)?];
    for h in &net.clients {
        links.push(Link::delay(
            Some(&h.netns),
            queue(),
            &to_servers,
            rtt,
            &tag,
        )?);
    }
    for h in net.servers.iter().filter(|h| servers.contains(&h.ip)) {
        let others: Vec<IpAddr> = servers.iter().filter(|ip| **ip != h.ip).copied().collect();
        if !others.is_empty() {
            let peers = [to(&others)];
            links.push(Link::delay(Some(&h.netns), queue(), &peers, rtt / 2, &tag)?);
        }
    }
    Ok(links)
}

/// Enters the network namespace at `netns` for the rest of this thread's life.
pub(super) fn enter(netns: &Path) -> std::io::Result<()> {
    let f = std::fs::File::open(netns)?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
}

fn open_queue(netns: Option<&Path>, num: u16) -> std::io::Result<nfq::Queue> {
    if let Some(ns) = netns {
        enter(ns)?;
    }
    let mut q = nfq::Queue::open()?;
    q.bind(num)?;
    q.set_copy_range(num, COPY_BYTES)?;
    q.set_queue_max_len(num, HELD_MAX)?;
    q.set_nonblocking(true);
    Ok(q)
}

/// The queue thread: binds queue `num` in `netns`, says so on `ready`, then decides every
/// packet until `stop` (or `lifetime` passes); then releases what it holds and closes.
fn serve(
    netns: Option<&Path>,
    num: u16,
    imp: Impairment,
    seed: u64,
    stop: &AtomicBool,
    lifetime: Duration,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) -> LinkCounts {
    let mut q = match open_queue(netns, num) {
        Ok(q) => q,
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return LinkCounts::default();
        }
    };
    let _ = ready.send(Ok(()));
    let mut pacer = Pacer::new(imp, seed);
    let mut held = BinaryHeap::new();
    let mut counts = LinkCounts::default();
    let deadline = Instant::now() + lifetime;
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        take(&mut q, &mut pacer, &mut held, &mut counts);
        let now = Instant::now();
        while held
            .peek()
            .is_some_and(|Reverse(h): &Reverse<Held>| h.at <= now)
        {
            let Reverse(h) = held.pop().expect("checked above");
            accept(&mut q, h.msg);
        }
        let next = (held.peek()).map_or(TICK, |Reverse(h)| h.at.saturating_duration_since(now));
        std::thread::sleep(next.min(TICK));
    }
    // The rules are gone (teardown deletes them first): release what is held, then whatever
    // was queued before they went, then close.
    for Reverse(h) in held.drain() {
        accept(&mut q, h.msg);
    }
    for _ in 0..HELD_MAX {
        match q.recv() {
            Ok(m) => accept(&mut q, m),
            Err(_) => break,
        }
    }
    let _ = q.unbind(num);
    counts
}

/// A packet held until `at` (`seq`: arrival order, for equal times).
struct Held {
    at: Instant,
    seq: u64,
    msg: nfq::Message,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Takes every packet waiting in the kernel's queue (at most [`HELD_MAX`]): drops the ones the
/// pacer drops, holds the others.
fn take(
    q: &mut nfq::Queue,
    pacer: &mut Pacer,
    held: &mut BinaryHeap<Reverse<Held>>,
    counts: &mut LinkCounts,
) {
    for _ in 0..HELD_MAX {
        let Ok(mut m) = q.recv() else {
            return; // nothing waiting (or the queue failed: the rules bypass it)
        };
        counts.packets += 1;
        let full = held.len() >= HELD_MAX as usize;
        let flow = flow_of(m.get_payload());
        match pacer.decide(Instant::now(), m.get_original_len(), flow) {
            Decision::At(at) if !full => held.push(Reverse(Held {
                at,
                seq: counts.packets,
                msg: m,
            })),
            _ => {
                counts.dropped += 1;
                m.set_verdict(nfq::Verdict::Drop);
                let _ = q.verdict(m);
            }
        }
    }
}

fn accept(q: &mut nfq::Queue, mut m: nfq::Message) {
    m.set_verdict(nfq::Verdict::Accept);
    let _ = q.verdict(m);
}

/// Round trips measured by a probe: TCP connects through one path, in ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeSamples {
    /// Each completed connect's time (SYN → SYN-ACK), ms.
    pub rtt_ms: Vec<f64>,
    /// Connects that failed or timed out.
    pub failed: usize,
    /// The median of `rtt_ms`.
    pub median_ms: Option<f64>,
}

impl ProbeSamples {
    /// The median round trip, if any connect completed.
    pub fn median(&self) -> Option<f64> {
        let mut v = self.rtt_ms.clone();
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    }

    /// Up to `n` samples, `gap` apart, none started once `stop` is set: `sample` takes one,
    /// adds it to the samples it is given, and breaks off the series when it straddled the stop.
    pub fn spaced(
        n: usize,
        gap: Duration,
        stop: &AtomicBool,
        mut sample: impl FnMut(&mut Self) -> ControlFlow<()>,
    ) -> Self {
        let mut out = Self::default();
        for i in 0..n {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if i > 0 {
                std::thread::sleep(gap);
            }
            if sample(&mut out).is_break() {
                break;
            }
        }
        out
    }
}

/// `samples` TCP connects from namespace `from` to `to`, `gap` apart, each bounded by
/// `timeout`, in a thread of their own (entering a namespace changes the calling thread for
/// good). A connect still running when `stop` is set is discarded: it straddled a heal.
pub fn probe(
    from: PathBuf,
    to: SocketAddr,
    samples: usize,
    gap: Duration,
    timeout: Duration,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Result<ProbeSamples, String>> {
    std::thread::spawn(move || {
        enter(&from).map_err(|e| format!("enter {}: {e}", from.display()))?;
        Ok(ProbeSamples::spaced(samples, gap, &stop, |out| {
            let t = Instant::now();
            let res = std::net::TcpStream::connect_timeout(&to, timeout);
            let took = t.elapsed();
            if stop.load(Ordering::SeqCst) {
                return ControlFlow::Break(());
            }
            match res {
                Ok(_) => out.rtt_ms.push((took.as_secs_f64() * 1e5).round() / 100.0),
                Err(_) => out.failed += 1,
            }
            ControlFlow::Continue(())
        }))
    })
}

/// What is left in `netns` of network faults: NFQUEUE or REJECT rules, and bound queues (one
/// line each). Empty after every heal.
pub fn residue(netns: &str) -> Result<Vec<String>, String> {
    let out = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(["netns", "exec", netns])
            .args(args)
            .output()
            .map_err(|e| format!("{}: {e}", args.join(" ")))
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let rules = out(&["iptables", "-w", "-S"])?;
    let queues = out(&["cat", "/proc/net/netfilter/nfnetlink_queue"])?;
    Ok(rules
        .lines()
        .filter(|l| l.contains("NFQUEUE") || l.contains("tcp-reset"))
        .chain(queues.lines().map(str::trim).filter(|l| !l.is_empty()))
        .map(String::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }

    #[test]
    fn delays_stay_within_the_jitter_and_in_order_within_a_flow() {
        let imp = Impairment::Delay {
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(20),
        };
        let mut p = Pacer::new(imp, 7);
        let t0 = Instant::now();
        let mut last = t0;
        let mut waits = Vec::new();
        for i in 0..1000 {
            let now = t0 + Duration::from_millis(i);
            let Decision::At(at) = p.decide(now, 100, 1) else {
                panic!("a delay drops nothing");
            };
            assert!(at >= last, "packet {i} overtook the one before");
            last = at;
            waits.push(ms(at - now));
        }
        // In order: a packet may wait behind an earlier one, never less than delay - jitter.
        let in_range = |w: &f64| (80.0..=120.0 + 1e-6).contains(w);
        assert!(waits.iter().all(in_range), "{waits:?}");
        // Packets of different flows wait for nobody: their waits spread over the whole ± 20 ms,
        // centred on the delay.
        let mut p = Pacer::new(imp, 7);
        let mut waits: Vec<f64> = (0..1000)
            .map(|flow| match p.decide(t0, 100, flow) {
                Decision::At(at) => ms(at - t0),
                Decision::Drop => panic!("a delay drops nothing"),
            })
            .collect();
        waits.sort_by(f64::total_cmp);
        assert!(waits.iter().all(in_range));
        assert!((waits[0] < 82.0) && (waits[999] > 118.0), "{waits:?}");
        assert!((97.0..103.0).contains(&waits[500]), "median {}", waits[500]);
        // The same seed draws the same waits; another seed, others.
        let first = |seed| Pacer::new(imp, seed).decide(t0, 1, 1);
        assert_eq!(first(7), first(7));
        assert_ne!(first(8), first(7));
    }

    #[test]
    fn flows_are_told_apart_by_addresses_protocol_and_ports() {
        // IPv4, IHL 5, TCP, 10.213.0.1 → 10.213.0.2, ports 40000 → 6379.
        let mut h = [0u8; 24];
        h[0] = 0x45;
        h[9] = 6;
        h[12..16].copy_from_slice(&[10, 213, 0, 1]);
        h[16..20].copy_from_slice(&[10, 213, 0, 2]);
        h[20..24].copy_from_slice(&[0x9c, 0x40, 0x18, 0xeb]);
        let other_port = {
            let mut o = h;
            o[21] = 0x41;
            o
        };
        let other_host = {
            let mut o = h;
            o[15] = 3;
            o
        };
        assert_eq!(flow_of(&h), flow_of(&h.clone()));
        assert_ne!(flow_of(&h), flow_of(&other_port));
        assert_ne!(flow_of(&h), flow_of(&other_host));
        // A truncated header is a flow too, not a panic.
        assert_eq!(flow_of(&h[..3]), flow_of(&h[..3]));
    }

    #[test]
    fn losses_match_their_share() {
        let mut p = Pacer::new(Impairment::Loss { share: 0.3 }, 1);
        let t0 = Instant::now();
        let dropped = (0..10_000)
            .filter(|_| p.decide(t0, 100, 0) == Decision::Drop)
            .count();
        // 3000 expected; 4 standard deviations (46 each) either side.
        assert!((2816..3184).contains(&dropped), "{dropped}");
        let mut none = Pacer::new(Impairment::Loss { share: 0.0 }, 1);
        assert_eq!(none.decide(t0, 1, 0), Decision::At(t0));
        let mut all = Pacer::new(Impairment::Loss { share: 1.0 }, 1);
        assert_eq!(all.decide(t0, 1, 0), Decision::Drop);
    }

    #[test]
    fn bandwidth_paces_bytes_and_drops_past_the_backlog() {
        // 1 Mbit/s: a 1250-byte packet takes 10 ms on the wire.
        let mut p = Pacer::new(
            Impairment::Bandwidth {
                bits_per_s: 1_000_000,
            },
            1,
        );
        let t0 = Instant::now();
        let times: Vec<_> = (0..3).map(|_| p.decide(t0, 1250, 0)).collect();
        let want: Vec<_> = (1..=3)
            .map(|k| Decision::At(t0 + Duration::from_millis(10 * k)))
            .collect();
        assert_eq!(times, want);
        // A burst of any flows fills 1 s of backlog (100 packets in all), then is dropped.
        let sent = (0..200)
            .filter(|i| matches!(p.decide(t0, 1250, *i), Decision::At(_)))
            .count();
        assert_eq!(sent, 97);
        // Once the backlog has drained, packets go at once again.
        let later = t0 + Duration::from_secs(5);
        assert_eq!(
            p.decide(later, 1250, 9),
            Decision::At(later + Duration::from_millis(10))
        );
    }
}

//! `lockbench adapter-check`: runs an adapter through every rule of adapters/PROTOCOL.md on
//! real servers and says which rule failed, with the offending line. Any adapter, in any
//! language, can be checked before it is benchmarked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::process::{AdapterProcess, Answer, Bounds, CallError, InitArgs};
use super::wire::{InitEndpoints, Reply, Request};
use crate::clock::monotonic_ns;

/// How the check drives the adapter.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Servers to hand the adapter.
    pub endpoints: InitEndpoints,
    /// The lease asked for.
    pub ttl: Duration,
    /// How long one acquire may wait.
    pub acquire_timeout: Duration,
    /// A bound for one network call.
    pub call_timeout: Duration,
    /// Concurrent buyers in the contention rule.
    pub clients: u32,
    /// Acquire/release cycles per buyer in the contention rule.
    pub cycles: u32,
    /// How long the adapter may take to answer `init`.
    pub init_timeout: Duration,
}

/// One rule's result.
#[derive(Debug, Clone)]
pub struct RuleResult {
    /// Short name.
    pub rule: &'static str,
    /// `Ok(what was seen)` or `Err(why it failed)`.
    pub result: Result<String, String>,
}

/// Every rule's result, in order; the check passed when none failed.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// The rules run.
    pub rules: Vec<RuleResult>,
}

impl CheckReport {
    /// Whether every rule passed.
    pub fn passed(&self) -> bool {
        self.rules.iter().all(|r| r.result.is_ok())
    }

    fn push(&mut self, rule: &'static str, result: Result<String, String>) -> bool {
        let ok = result.is_ok();
        self.rules.push(RuleResult { rule, result });
        ok
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for r in &self.rules {
            match &r.result {
                Ok(s) => writeln!(f, "ok    {:<22} {s}", r.rule)?,
                Err(e) => writeln!(f, "FAIL  {:<22} {e}", r.rule)?,
            }
        }
        let failed = self.rules.iter().filter(|r| r.result.is_err()).count();
        if failed == 0 {
            write!(f, "adapter-check: all {} rules passed", self.rules.len())
        } else {
            write!(
                f,
                "adapter-check: {failed} of {} rules failed",
                self.rules.len()
            )
        }
    }
}

/// The key every rule uses (under the prefix lockbench's own keys use).
const KEY: &str = "lockbench:adapter-check:sku:0";

/// Runs every rule against `argv`; later rules are skipped once the adapter is broken.
pub async fn check(name: &str, argv: &[String], o: &CheckOptions) -> CheckReport {
    let mut report = CheckReport::default();
    let init = InitArgs {
        endpoints: o.endpoints.clone(),
        ttl: o.ttl,
        acquire_timeout: o.acquire_timeout,
        call_timeout: o.call_timeout,
        clients: o.clients,
    };
    let hang = Bounds::new(o.acquire_timeout, o.call_timeout).hang;
    let p = match AdapterProcess::start(name, argv, &init, o.init_timeout, hang).await {
        Ok(p) => Arc::new(p),
        Err(e) => {
            report.push("init", Err(e));
            return report;
        }
    };
    let h = p.hello().clone();
    let hello_ok = if h.library.is_empty() || h.version.is_empty() {
        Err(format!("init_ok names no library or version: {h:?}"))
    } else {
        Ok(format!(
            "{} {} (fencing: {}, renews: {})",
            h.library, h.version, h.fencing, h.renews
        ))
    };
    if !report.push("init", hello_ok) {
        return report;
    }
    type Rule = fn(Arc<AdapterProcess>, CheckOptions) -> RuleFuture;
    let rules: [(&'static str, Rule); 5] = [
        ("acquire-release", |p, o| Box::pin(acquire_release(p, o))),
        ("mutual-exclusion", |p, o| Box::pin(mutual_exclusion(p, o))),
        ("busy-after-timeout", |p, o| Box::pin(busy(p, o))),
        ("release-twice", |p, o| Box::pin(release_twice(p, o))),
        ("unknown-request", |p, o| Box::pin(unknown_request(p, o))),
    ];
    for (rule, run) in rules {
        let result = run(p.clone(), o.clone()).await;
        let result = match (result, p.broken()) {
            (_, Some(b)) => Err(b),
            (r, None) => r,
        };
        if !report.push(rule, result) {
            return report;
        }
    }
    let shutdown = p
        .shutdown(Duration::from_secs(5))
        .await
        .map(|()| "shutdown_ok, then exit 0".to_string());
    if !report.push("shutdown", shutdown) {
        return report;
    }
    // A second instance, for the rule a shutdown cannot show.
    let eof = match AdapterProcess::start(name, argv, &init, o.init_timeout, hang).await {
        Ok(p) => p
            .close_stdin(Duration::from_secs(5))
            .await
            .map(|()| "exits 0 within 5 s of stdin's end".to_string()),
        Err(e) => Err(e),
    };
    report.push("exit-on-eof", eof);
    report
}

type RuleFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>>;

/// A held lease, as the check sees it.
struct Held {
    lease: String,
    fence: Option<u64>,
    granted_ns: u64,
}

async fn acquire(
    p: &AdapterProcess,
    client: u32,
    key: &str,
    bound: Duration,
) -> Result<Answer, String> {
    p.request(
        |msg_id| Request::Acquire {
            msg_id,
            client,
            key,
        },
        bound,
    )
    .await
    .map_err(|e| call_error("acquire", e))
}

fn call_error(what: &str, e: CallError) -> String {
    match e {
        CallError::Timeout => format!("no answer to {what} within its bound"),
        CallError::Broken(b) => b,
    }
}

fn granted(a: Answer, fencing: bool) -> Result<Held, String> {
    match a.reply {
        Reply::AcquireOk {
            lease,
            fence,
            granted_ns,
            ..
        } => {
            if fencing && fence.is_none() {
                return Err(format!(
                    "init_ok said fencing, yet acquire_ok {lease} has no fence"
                ));
            }
            Ok(Held {
                lease,
                fence,
                granted_ns,
            })
        }
        Reply::Error { code, text, .. } => Err(format!("acquire answered error {code}: {text}")),
        other => Err(format!("acquire answered {}", other.kind())),
    }
}

async fn release(p: &AdapterProcess, lease: &str, bound: Duration) -> Result<bool, String> {
    let a = p
        .request(|msg_id| Request::Release { msg_id, lease }, bound)
        .await
        .map_err(|e| call_error("release", e))?;
    p.forget_lease(lease);
    match a.reply {
        Reply::ReleaseOk { was_held, .. } => Ok(was_held),
        Reply::Error { code, text, .. } => Err(format!("release answered error {code}: {text}")),
        other => Err(format!("release answered {}", other.kind())),
    }
}

/// The acquire and release bounds a run would use.
fn bounds(o: &CheckOptions) -> (Duration, Duration) {
    let b = Bounds::new(o.acquire_timeout, o.call_timeout);
    (b.acquire, b.release)
}

async fn acquire_release(p: Arc<AdapterProcess>, o: CheckOptions) -> Result<String, String> {
    let (ab, rb) = bounds(&o);
    let fencing = p.hello().fencing;
    let a = acquire(&p, 0, KEY, ab).await?;
    let took = Duration::from_nanos(a.received_ns - a.sent_ns);
    let h = granted(a, fencing)?;
    if !release(&p, &h.lease, rb).await? {
        return Err(format!(
            "release of {} said was_held: false on a calm key",
            h.lease
        ));
    }
    Ok(format!("one cycle; acquire answered in {took:?}"))
}

/// `clients` buyers take one key `cycles` times each, holding 2 ms: no two leases of the key
/// overlap ([granted_ns, release sent]), every release finds its lock held, and fences grow
/// with every new holder.
async fn mutual_exclusion(p: Arc<AdapterProcess>, o: CheckOptions) -> Result<String, String> {
    let (ab, rb) = bounds(&o);
    let fencing = p.hello().fencing;
    let started = Instant::now();
    let mut buyers = tokio::task::JoinSet::new();
    for client in 0..o.clients {
        let (p, cycles) = (p.clone(), o.cycles);
        buyers.spawn(async move {
            let mut spans = Vec::new();
            let mut busy = 0u32;
            for _ in 0..cycles {
                let a = acquire(&p, client, KEY, ab).await?;
                if matches!(&a.reply, Reply::Error { code, .. } if code == "busy") {
                    busy += 1;
                    continue;
                }
                let h = granted(a, fencing)?;
                tokio::time::sleep(Duration::from_millis(2)).await;
                let released_ns = monotonic_ns();
                let was_held = release(&p, &h.lease, rb).await?;
                spans.push((h.granted_ns, released_ns, h.fence, was_held, client));
            }
            Ok::<_, String>((spans, busy))
        });
    }
    let mut spans = Vec::new();
    let mut busy = 0;
    while let Some(j) = buyers.join_next().await {
        let (s, b) = j.map_err(|e| format!("buyer task: {e}"))??;
        spans.extend(s);
        busy += b;
    }
    if spans.is_empty() {
        return Err(format!("no acquire succeeded ({busy} answered busy)"));
    }
    spans.sort_by_key(|s| s.0);
    for w in spans.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.0 < a.1 {
            return Err(format!(
                "two holders at once: client {} held from {} to {} ns, client {} was granted at \
                 {} ns",
                a.4, a.0, a.1, b.4, b.0
            ));
        }
        if let (Some(fa), Some(fb)) = (a.2, b.2)
            && fb <= fa
        {
            return Err(format!(
                "fence did not grow: {fa} then {fb} for the next holder (client {})",
                b.4
            ));
        }
    }
    if let Some(s) = spans.iter().find(|s| !s.3) {
        return Err(format!(
            "client {}'s release said was_held: false, with no fault",
            s.4
        ));
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "{} grants to {} clients, none overlapping, {busy} busy; {:.0} cycles/s",
        spans.len(),
        o.clients,
        spans.len() as f64 / secs
    ))
}

/// A key held by one client: another's acquire waits about the acquire timeout, then answers
/// `busy`.
async fn busy(p: Arc<AdapterProcess>, o: CheckOptions) -> Result<String, String> {
    let (ab, rb) = bounds(&o);
    let fencing = p.hello().fencing;
    let h = granted(acquire(&p, 0, KEY, ab).await?, fencing)?;
    let started = Instant::now();
    let other = acquire(&p, 1, KEY, ab).await;
    let waited = started.elapsed();
    let release_held = release(&p, &h.lease, rb).await;
    let a = other?;
    match &a.reply {
        Reply::Error { code, definite, .. } if code == "busy" => {
            release_held?;
            if waited < o.acquire_timeout / 2 {
                return Err(format!(
                    "answered busy after {waited:?}, well before the {:?} acquire timeout",
                    o.acquire_timeout
                ));
            }
            if !definite {
                return Err("busy must be definite (no lock was taken)".into());
            }
            Ok(format!(
                "busy after {waited:?} (acquire timeout {:?})",
                o.acquire_timeout
            ))
        }
        Reply::AcquireOk { lease, .. } => {
            let lease = lease.clone();
            let _ = release(&p, &lease, rb).await;
            Err(format!(
                "granted {lease} to client 1 while client 0 held the key (after {waited:?})"
            ))
        }
        r => Err(format!("answered {} instead of error busy", r.kind())),
    }
}

async fn release_twice(p: Arc<AdapterProcess>, o: CheckOptions) -> Result<String, String> {
    let (ab, rb) = bounds(&o);
    let fencing = p.hello().fencing;
    let h = granted(acquire(&p, 0, KEY, ab).await?, fencing)?;
    let first = release(&p, &h.lease, rb).await?;
    let second = release(&p, &h.lease, rb).await?;
    match (first, second) {
        (true, false) => Ok("the second release says was_held: false".into()),
        _ => Err(format!(
            "releases of {} said was_held {first} then {second}; expected true then false",
            h.lease
        )),
    }
}

async fn unknown_request(p: Arc<AdapterProcess>, o: CheckOptions) -> Result<String, String> {
    let a = p
        .request(|msg_id| Request::Frobnicate { msg_id }, o.call_timeout * 4)
        .await
        .map_err(|e| call_error("an unknown request", e))?;
    match a.reply {
        Reply::Error { code, .. } if code == "not_supported" => {
            Ok("error not_supported".to_string())
        }
        r => Err(format!(
            "answered an unknown request type with {}",
            r.kind()
        )),
    }
}

//! One adapter process and the protocol spoken with it: requests in flight by id, replies
//! matched to them, `lost` events routed to their lease, and every way an adapter can
//! misbehave turned into one message naming it and the offending line (the adapter is then
//! *broken*: every later call fails at once).

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::wire::{InitEndpoints, PROTOCOL, Reply, Request};
use crate::clock::monotonic_ns;

/// Whether adapters join this process's group: set in worker processes, so a chaos pause of
/// the worker's group stops its adapter too. Elsewhere (a run's coordinator, `adapter-check`)
/// an adapter gets a group of its own, so a Ctrl-C in the terminal reaches lockbench, which
/// ends the run, and not the adapter under it.
pub static JOIN_PROCESS_GROUP: AtomicBool = AtomicBool::new(false);

/// Lines of the adapter's stderr kept to explain a failure.
const STDERR_TAIL: usize = 12;

/// How long lockbench waits for an adapter's answers, from the workload's acquire timeout and
/// call timeout: the library's wait, then one more call it may start before giving up, and
/// the pipe crossed twice.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// For an `acquire`.
    pub acquire: Duration,
    /// For a `release` (Redlock's deletes go to every master at once).
    pub release: Duration,
    /// Silence, while a request waits, that makes the adapter hung: a lone waiter may be quiet
    /// for its whole bound.
    pub hang: Duration,
}

impl Bounds {
    /// The bounds for these timeouts.
    pub fn new(acquire_timeout: Duration, call_timeout: Duration) -> Self {
        let acquire = acquire_timeout + 2 * call_timeout;
        Self {
            acquire,
            release: 2 * call_timeout,
            hang: 2 * acquire + Duration::from_secs(1),
        }
    }
}

/// What `init` tells the adapter.
#[derive(Debug, Clone)]
pub struct InitArgs {
    /// The servers.
    pub endpoints: InitEndpoints,
    /// The lock's lease.
    pub ttl: Duration,
    /// How long one acquire may wait.
    pub acquire_timeout: Duration,
    /// A bound for one network call.
    pub call_timeout: Duration,
    /// Buyers in this process.
    pub clients: u32,
}

/// What the adapter said of itself in `init_ok`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hello {
    /// The library's own name.
    pub library: String,
    /// The version it loaded.
    pub version: String,
    /// Whether its grants carry a fencing token.
    pub fencing: bool,
    /// Whether it keeps a held lock alive by itself.
    pub renews: bool,
}

/// Why a call got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No answer within the call's bound (a late one is ignored, a late grant released).
    Timeout,
    /// The adapter misbehaved or died: the message says how.
    Broken(String),
}

/// A reply, with the lost flag of the lease it grants (for `acquire_ok`).
pub struct Answer {
    /// The reply line, parsed.
    pub reply: Reply,
    /// Set when the adapter reports the lease granted here lost.
    pub lost: Option<watch::Receiver<bool>>,
    /// CLOCK_MONOTONIC ns when the request was written.
    pub sent_ns: u64,
    /// CLOCK_MONOTONIC ns when the reply was read.
    pub received_ns: u64,
}

struct Pending {
    /// The reply type that answers it.
    answer: &'static str,
    /// Its `type`, for messages.
    kind: &'static str,
    tx: oneshot::Sender<Answer>,
    sent_ns: u64,
}

/// State shared by the callers, the stdout reader and the watchdog.
struct Shared {
    /// `adapter lib:x (command)`: how messages name it.
    name: String,
    pending: Mutex<HashMap<u64, Pending>>,
    /// Ids whose caller gave up: a late answer is ignored (a late grant is released).
    abandoned: Mutex<HashSet<u64>>,
    /// Lost flags of the leases held, by adapter lease id.
    lost: Mutex<HashMap<String, watch::Sender<bool>>>,
    broken: Mutex<Option<String>>,
    broke: CancellationToken,
    stderr: Mutex<VecDeque<String>>,
    /// Lines read so far (the watchdog's sign of life).
    lines: AtomicU64,
    /// Requests sent after `init`, and answers read to them.
    sent: AtomicU64,
    answered: AtomicU64,
    /// Set once `shutdown` was sent: the exit that follows is expected.
    closing: AtomicBool,
}

impl Shared {
    /// Marks the adapter broken (the first reason wins) and wakes every caller.
    fn break_with(&self, why: String) {
        let mut b = self.broken.lock().expect("broken lock");
        if b.is_none() {
            let tail = self.stderr_tail();
            let msg = if tail.is_empty() {
                format!("{}: {why}", self.name)
            } else {
                format!("{}: {why}\n  its stderr ended with:\n{tail}", self.name)
            };
            tracing::debug!("{msg}");
            *b = Some(msg);
        }
        drop(b);
        self.broke.cancel();
    }

    fn broken(&self) -> Option<String> {
        self.broken.lock().expect("broken lock").clone()
    }

    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().expect("stderr lock");
        tail.iter()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The adapter's stdin, shared by the callers and the reader (which releases late grants).
/// `None` once closed.
type Stdin = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

/// Ids of releases the reader sends for grants whose caller gave up (far from the callers').
/// Below 2^53, like every id: a JavaScript number holds integers exactly only up to there, a
/// Java `long` up to 2^63 − 1 (ids from u64::MAX / 2 on overflowed the Curator adapter's
/// `asLong()` and broke `lib:curator-fenced` in CI).
const LATE_IDS: u64 = 1 << 52;

/// A running adapter.
pub struct AdapterProcess {
    shared: Arc<Shared>,
    stdin: Stdin,
    next_id: AtomicU64,
    /// Killed on drop (and by the kernel if this process dies: PR_SET_PDEATHSIG).
    child: Arc<tokio::sync::Mutex<Child>>,
    hello: Hello,
}

impl AdapterProcess {
    /// Starts `argv` and sends `init`; fails with a message naming the adapter when it is not
    /// found, exits, speaks another protocol version or says nothing within `init_timeout`.
    /// `hang_after`: a request unanswered that long, with no line from the adapter either,
    /// breaks it.
    pub async fn start(
        name: &str,
        argv: &[String],
        init: &InitArgs,
        init_timeout: Duration,
        hang_after: Duration,
    ) -> Result<Self, String> {
        let name = format!("adapter {name} ({})", argv.join(" "));
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| format!("{name}: empty command"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .envs(init.endpoints.env())
            .kill_on_drop(true);
        if !JOIN_PROCESS_GROUP.load(Ordering::SeqCst) {
            cmd.process_group(0);
        }
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!("{name}: `{program}` not found ({e})")
            } else {
                format!("{name}: cannot start `{program}`: {e}")
            }
        })?;
        let (stdin, stdout, stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let shared = Arc::new(Shared {
            name,
            pending: Mutex::default(),
            abandoned: Mutex::default(),
            lost: Mutex::default(),
            broken: Mutex::default(),
            broke: CancellationToken::new(),
            stderr: Mutex::default(),
            lines: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        });
        let child = Arc::new(tokio::sync::Mutex::new(child));
        let stdin: Stdin = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        let mut p = Self {
            shared: shared.clone(),
            stdin: stdin.clone(),
            next_id: AtomicU64::new(1),
            child: child.clone(),
            hello: Hello {
                library: String::new(),
                version: String::new(),
                fencing: false,
                renews: false,
            },
        };
        tokio::spawn(read_stderr(shared.clone(), stderr));
        tokio::spawn(read_stdout(shared.clone(), stdout, child, stdin));
        tokio::spawn(watchdog(shared.clone(), hang_after));
        p.hello = p.init(init, init_timeout).await?;
        Ok(p)
    }

    /// What the adapter said of itself.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Why the adapter is broken, once it is. An adapter that answered none of the requests
    /// sent since `init` counts as hung (asked at the end of a load shorter than the watchdog's
    /// patience).
    pub fn broken(&self) -> Option<String> {
        let sent = self.shared.sent.load(Ordering::SeqCst);
        if sent > 0 && self.shared.answered.load(Ordering::SeqCst) == 0 {
            self.shared.break_with(format!(
                "hung: answered none of the {sent} requests sent after init"
            ));
        }
        self.shared.broken()
    }

    /// A description naming the adapter and its command.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    async fn init(&self, init: &InitArgs, limit: Duration) -> Result<Hello, String> {
        let req = Request::Init {
            msg_id: self.id(),
            protocol: PROTOCOL,
            endpoints: &init.endpoints,
            ttl_ms: init.ttl.as_millis() as u64,
            acquire_timeout_ms: init.acquire_timeout.as_millis() as u64,
            call_timeout_ms: init.call_timeout.as_millis() as u64,
            clients: init.clients,
        };
        let name = &self.shared.name;
        let answer = match self.call(&req, limit).await {
            Ok(a) => a,
            Err(CallError::Broken(b)) => return Err(b),
            Err(CallError::Timeout) => {
                let why = format!("did not answer init within {limit:?}");
                self.shared.break_with(why);
                return Err(self.shared.broken().expect("just broken"));
            }
        };
        match answer.reply {
            Reply::InitOk {
                protocol: PROTOCOL,
                library,
                version,
                fencing,
                renews,
                ..
            } => Ok(Hello {
                library,
                version,
                fencing,
                renews,
            }),
            Reply::InitOk { protocol, .. } => {
                let why = format!(
                    "speaks protocol version {protocol}; this lockbench speaks {PROTOCOL} \
                     (adapters/PROTOCOL.md)"
                );
                self.shared.break_with(why);
                Err(self.shared.broken().expect("just broken"))
            }
            Reply::Error { code, text, .. } => Err(format!("{name}: init failed: {code}: {text}")),
            other => unreachable!("the reader lets only init_ok or error answer init: {other:?}"),
        }
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a request built with a fresh id and waits at most `limit` for its answer.
    pub async fn request<'a>(
        &self,
        make: impl FnOnce(u64) -> Request<'a>,
        limit: Duration,
    ) -> Result<Answer, CallError> {
        let req = make(self.id());
        self.call(&req, limit).await
    }

    async fn call(&self, req: &Request<'_>, limit: Duration) -> Result<Answer, CallError> {
        if let Some(b) = self.shared.broken() {
            return Err(CallError::Broken(b));
        }
        let id = req.msg_id();
        if req.kind() != "init" {
            self.shared.sent.fetch_add(1, Ordering::SeqCst);
        }
        let (tx, rx) = oneshot::channel();
        let sent_ns = monotonic_ns();
        let kind = req.answer();
        self.shared.pending.lock().expect("pending lock").insert(
            id,
            Pending {
                answer: kind,
                kind: req.kind(),
                tx,
                sent_ns,
            },
        );
        let mut line = serde_json::to_vec(req).expect("requests serialise");
        line.push(b'\n');
        let written = {
            let mut stdin = self.stdin.lock().await;
            match stdin.as_mut() {
                Some(s) => match s.write_all(&line).await {
                    Ok(()) => s.flush().await,
                    Err(e) => Err(e),
                },
                None => Err(std::io::Error::other("stdin already closed")),
            }
        };
        if let Err(e) = written {
            self.shared
                .pending
                .lock()
                .expect("pending lock")
                .remove(&id);
            // The reader usually explains better (the exit status): give it a moment.
            let _ =
                tokio::time::timeout(Duration::from_secs(2), self.shared.broke.cancelled()).await;
            self.shared
                .break_with(format!("stopped reading its stdin ({e})"));
            return Err(CallError::Broken(
                self.shared.broken().expect("just broken"),
            ));
        }
        tokio::select! {
            r = rx => match r {
                Ok(a) => Ok(a),
                Err(_) => Err(CallError::Broken(self.shared.broken().unwrap_or_else(|| {
                    format!("{}: dropped a request", self.shared.name)
                }))),
            },
            () = tokio::time::sleep(limit) => {
                if self.shared.pending.lock().expect("pending lock").remove(&id).is_some() {
                    self.shared.abandoned.lock().expect("abandoned lock").insert(id);
                }
                Err(CallError::Timeout)
            }
            () = self.shared.broke.cancelled() => {
                Err(CallError::Broken(self.shared.broken().expect("cancelled when broken")))
            }
        }
    }

    /// Stops tracking a released lease's lost flag.
    pub fn forget_lease(&self, lease: &str) {
        self.shared.lost.lock().expect("lost lock").remove(lease);
    }

    /// Sends `shutdown` and waits (bounded) for `shutdown_ok` and the exit; returns what went
    /// wrong, if anything.
    pub async fn shutdown(&self, limit: Duration) -> Result<(), String> {
        self.shared.closing.store(true, Ordering::SeqCst);
        let answer = self
            .request(|msg_id| Request::Shutdown { msg_id }, limit)
            .await;
        match answer {
            Ok(Answer {
                reply: Reply::ShutdownOk { .. },
                ..
            }) => {}
            Ok(a) => return Err(format!("answered shutdown with {}", a.reply.kind())),
            Err(CallError::Timeout) => {
                return Err(format!("did not answer shutdown within {limit:?}"));
            }
            Err(CallError::Broken(b)) => return Err(b),
        }
        self.wait_exit(limit).await
    }

    /// Closes the adapter's stdin and waits (bounded) for it to exit 0.
    pub async fn close_stdin(&self, limit: Duration) -> Result<(), String> {
        self.shared.closing.store(true, Ordering::SeqCst);
        // Dropped, so the adapter reads end-of-file.
        drop(self.stdin.lock().await.take());
        self.wait_exit(limit).await
    }

    async fn wait_exit(&self, limit: Duration) -> Result<(), String> {
        let mut child = self.child.lock().await;
        match tokio::time::timeout(limit, child.wait()).await {
            Ok(Ok(s)) if s.success() => Ok(()),
            Ok(Ok(s)) => Err(format!("exited with {s}")),
            Ok(Err(e)) => Err(format!("cannot wait for it: {e}")),
            Err(_) => {
                let _ = child.start_kill();
                Err(format!("still running {limit:?} later (killed)"))
            }
        }
    }
}

async fn read_stderr(shared: Arc<Shared>, stderr: tokio::process::ChildStderr) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(l)) = lines.next_line().await {
        tracing::debug!(target: "adapter", "{}: {l}", shared.name);
        let mut tail = shared.stderr.lock().expect("stderr lock");
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(l);
    }
}

/// Reads the adapter's stdout: answers go to their callers, `lost` to its lease; a line that
/// breaks the protocol breaks the adapter. At the end of stdout, the exit is reported.
async fn read_stdout(
    shared: Arc<Shared>,
    stdout: tokio::process::ChildStdout,
    child: Arc<tokio::sync::Mutex<Child>>,
    stdin: Stdin,
) {
    let mut lines = BufReader::new(stdout).lines();
    let mut late_id = LATE_IDS;
    loop {
        let line = match lines.next_line().await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                shared.break_with(format!("wrote unreadable output ({e})"));
                break;
            }
        };
        let received_ns = monotonic_ns();
        shared.lines.fetch_add(1, Ordering::SeqCst);
        if line.trim().is_empty() {
            continue;
        }
        let flow = on_line(&shared, &stdin, &line, received_ns, &mut late_id).await;
        if flow.is_break() {
            break;
        }
    }
    report_exit(&shared, &child).await;
}

/// Handles one line of the adapter's stdout; breaks when the line breaks the protocol.
async fn on_line(
    shared: &Shared,
    stdin: &Stdin,
    line: &str,
    received_ns: u64,
    late_id: &mut u64,
) -> ControlFlow<()> {
    let reply: Reply = match serde_json::from_str(line) {
        Ok(r) => r,
        Err(e) => {
            shared.break_with(format!("wrote a line that is not a message ({e}): {line}"));
            return ControlFlow::Break(());
        }
    };
    if let Reply::Lost { lease, reason } = &reply {
        mark_lost(shared, lease, reason, line);
        return ControlFlow::Continue(());
    }
    let id = reply
        .in_reply_to()
        .expect("every other reply answers a request");
    let pending = shared.pending.lock().expect("pending lock").remove(&id);
    let Some(p) = pending else {
        if shared.abandoned.lock().expect("abandoned lock").remove(&id) {
            // Its caller gave up; a grant nobody will use is released at once.
            if let Reply::AcquireOk { lease, .. } = reply {
                *late_id += 1;
                release_late(shared, stdin, &lease, *late_id).await;
            }
            return ControlFlow::Continue(());
        }
        shared.break_with(format!(
            "answered msg_id {id}, which no request is waiting for: {line}"
        ));
        return ControlFlow::Break(());
    };
    answer(shared, p, reply, id, received_ns, line)
}

/// Raises the lost flag of `lease`, if it is held.
fn mark_lost(shared: &Shared, lease: &str, reason: &str, line: &str) {
    match shared.lost.lock().expect("lost lock").get(lease) {
        Some(flag) => {
            tracing::debug!("{}: lease {lease} lost: {reason}", shared.name);
            flag.send_replace(true);
        }
        None => tracing::debug!("{}: lost of a lease not held: {line}", shared.name),
    }
}

/// Checks `reply` against the request `p` it answers, then hands it to the caller; breaks
/// when it is not an answer to that request.
fn answer(
    shared: &Shared,
    p: Pending,
    reply: Reply,
    id: u64,
    received_ns: u64,
    line: &str,
) -> ControlFlow<()> {
    if p.kind != "init" {
        shared.answered.fetch_add(1, Ordering::SeqCst);
    }
    let kind = reply.kind();
    if kind != p.answer && kind != "error" {
        shared.break_with(format!("answered {} {id} with {kind}: {line}", p.kind));
        return ControlFlow::Break(());
    }
    if let Reply::AcquireOk { granted_ns, .. } = reply
        && (granted_ns < p.sent_ns || granted_ns > received_ns)
    {
        shared.break_with(format!(
            "granted_ns {granted_ns} is not CLOCK_MONOTONIC nanoseconds between the \
             request ({}) and the answer ({received_ns}): {line}",
            p.sent_ns
        ));
        return ControlFlow::Break(());
    }
    let lost = match &reply {
        Reply::AcquireOk { lease, .. } => {
            let (tx, rx) = watch::channel(false);
            shared
                .lost
                .lock()
                .expect("lost lock")
                .insert(lease.clone(), tx);
            Some(rx)
        }
        _ => None,
    };
    let _ = p.tx.send(Answer {
        reply,
        lost,
        sent_ns: p.sent_ns,
        received_ns,
    });
    ControlFlow::Continue(())
}

/// At the end of stdout: kills a broken adapter, else reports how it exited (unless it was
/// being closed).
async fn report_exit(shared: &Shared, child: &tokio::sync::Mutex<Child>) {
    if shared.broken().is_some() {
        let _ = child.lock().await.start_kill();
        return;
    }
    let status = {
        let mut c = child.lock().await;
        tokio::time::timeout(Duration::from_secs(2), c.wait()).await
    };
    if shared.closing.load(Ordering::SeqCst) {
        return;
    }
    // Give stderr's reader a moment to collect the last words.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let why = match status {
        Ok(Ok(s)) => format!("exited ({s})"),
        _ => "closed its stdout".to_string(),
    };
    shared.break_with(why);
}

/// Releases a grant that arrived after its caller gave up (its answer is ignored).
async fn release_late(shared: &Shared, stdin: &Stdin, lease: &str, msg_id: u64) {
    shared
        .abandoned
        .lock()
        .expect("abandoned lock")
        .insert(msg_id);
    let mut line =
        serde_json::to_vec(&Request::Release { msg_id, lease }).expect("requests serialise");
    line.push(b'\n');
    if let Some(stdin) = stdin.lock().await.as_mut() {
        let _ = stdin.write_all(&line).await;
        let _ = stdin.flush().await;
    }
}

/// Breaks an adapter that leaves a request unanswered for `hang_after` while writing nothing
/// at all. Silence is counted in ticks this task actually ran, so a chaos pause of the worker
/// (which stops the adapter and this task together, but not the clock) adds one tick, not its
/// length.
async fn watchdog(shared: Arc<Shared>, hang_after: Duration) {
    const TICK: Duration = Duration::from_millis(250);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let patience = (hang_after.as_millis() / TICK.as_millis()).max(1) as u32;
    let (mut quiet, mut seen) = (0u32, 0u64);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shared.broke.cancelled() => return,
        }
        let lines = shared.lines.load(Ordering::SeqCst);
        // `init` has its own, longer bound (a JVM starting beside four others).
        let waiting =
            (shared.pending.lock().expect("pending lock").values()).any(|p| p.kind != "init");
        if lines != seen || !waiting {
            (quiet, seen) = (0, lines);
            continue;
        }
        quiet += 1;
        if quiet >= patience {
            let oldest = {
                let pending = shared.pending.lock().expect("pending lock");
                pending
                    .iter()
                    .filter(|(_, p)| p.kind != "init")
                    .min_by_key(|(id, _)| **id)
                    .map(|(id, p)| (*id, p.kind))
            };
            let (id, kind) = oldest.unwrap_or((0, "?"));
            shared.break_with(format!(
                "hung: no answer to {kind} msg_id {id}, and no line at all, for {hang_after:?}"
            ));
            return;
        }
    }
}

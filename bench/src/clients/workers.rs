//! The coordinator's side of workers: start them, forward their results to the recorder, and
//! pause, resume or arm them for the chaos runner ([`crate::chaos::ClientProcesses`]).
//!
//! A worker is reached one of two ways, with the same messages ([`super::protocol`]):
//! - over pipes: the load process is this process's child (each in its client host's network
//!   namespace when the run has a private network), paused by signals to its process group;
//! - over TCP ([`super::link`]): an agent (`lockbench worker --connect`) that this process
//!   started or that connected from another host runs the load process and pauses it when
//!   told. The coordinator estimates its clock offset by ping ([`super::clock`]).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::clock::{self, ClockTrack, Sample, WorkerClock};
use super::link::{self, Challenge, Hello, Verdict};
use super::protocol::{Control, Event, Finished, Job, ns};
use crate::chaos::ClientProcesses;
use crate::chaos::holder::Point;
use crate::check::{COORDINATOR, ClockTable};
use crate::clock::monotonic_ns;
use crate::record::phases::Boundaries;
use crate::record::{DriveReport, Input};
use crate::workload::pacing::Part;

/// How long workers may take to connect to the servers.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection may take to prove itself.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pings at ready; the one with the shortest round trip bounds the offset best.
const READY_PINGS: u64 = 16;
/// A round of pings during the load (the offset may drift): its tightest answer counts, so
/// one delayed answer does not widen the bound.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Pings per round, sent back to back.
const PINGS_PER_ROUND: u64 = 3;
/// After the load's bound, how long workers get to send what they have after a Stop.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A load process started by this process (or by an agent), spoken to over its stdin.
pub(super) struct LoadProcess {
    /// Its pid, which leads its process group.
    pub pid: Pid,
    stdin: Mutex<std::fs::File>,
}

impl LoadProcess {
    /// Writes one line (a few bytes into a pipe: never blocks, even when it is stopped).
    pub fn send_line(&self, line: &[u8]) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().expect("stdin lock is never poisoned");
        stdin.write_all(line)?;
        stdin.write_all(b"\n")
    }
}

/// How the coordinator reaches one worker.
enum Reach {
    /// A child load process: controls into its stdin, pauses by signal.
    Pipe(LoadProcess),
    /// An agent over TCP: everything is a message, which its writer task sends.
    Tcp(mpsc::UnboundedSender<Vec<u8>>),
    /// A worker that runs as a task of this process, over an in-memory pipe: it cannot be
    /// paused (a stop would stop the coordinator too).
    Task(mpsc::UnboundedSender<Vec<u8>>),
}

/// The coordinator's grip on running workers, shared with the chaos runner.
pub struct WorkerControl {
    workers: Vec<Reach>,
    paused_tx: mpsc::UnboundedSender<usize>,
    /// Per TCP worker, the pings in flight: (id, sent at).
    pings: Mutex<Vec<Vec<(u64, u64)>>>,
}

impl WorkerControl {
    fn send(&self, k: usize, c: Control) -> std::io::Result<()> {
        let line = serde_json::to_vec(&c).map_err(std::io::Error::other)?;
        match &self.workers[k] {
            Reach::Pipe(p) => p.send_line(&line),
            Reach::Tcp(tx) | Reach::Task(tx) => {
                let mut line = line;
                line.push(b'\n');
                tx.send(line)
                    .map_err(|_| std::io::Error::other("the link to this worker is closed"))
            }
        }
    }

    fn signal(&self, k: usize, sig: Signal) -> std::io::Result<()> {
        match &self.workers[k] {
            Reach::Pipe(p) => Ok(killpg(p.pid, sig)?),
            Reach::Tcp(_) => self.send(
                k,
                if sig == Signal::SIGSTOP {
                    Control::Pause
                } else {
                    Control::Resume
                },
            ),
            Reach::Task(_) => Err(std::io::Error::other(
                "a worker in the coordinator's own process cannot be paused",
            )),
        }
    }

    fn resume_all(&self) {
        for k in 0..self.workers.len() {
            let _ = self.signal(k, Signal::SIGCONT);
        }
    }

    /// Sends a ping to every TCP worker, remembering when.
    fn ping_all(&self, id: u64) {
        let mut pings = self.pings.lock().expect("pings lock is never poisoned");
        for k in 0..self.workers.len() {
            if matches!(self.workers[k], Reach::Tcp(_))
                && self.send(k, Control::Ping { id }).is_ok()
            {
                pings[k].push((id, monotonic_ns()));
            }
        }
    }

    /// The ping `id` of worker `k` came back: (sent, now).
    fn pong(&self, k: usize, id: u64) -> Option<(u64, u64)> {
        let now = monotonic_ns();
        let mut pings = self.pings.lock().expect("pings lock is never poisoned");
        let i = pings[k].iter().position(|p| p.0 == id)?;
        Some((pings[k].swap_remove(i).1, now))
    }
}

impl ClientProcesses for WorkerControl {
    fn len(&self) -> usize {
        self.workers.len()
    }

    /// The worker's whole process group: a library's adapter stops with it.
    fn pause(&self, k: usize) -> std::io::Result<()> {
        self.signal(k, Signal::SIGSTOP)
    }

    fn resume(&self, k: usize) -> std::io::Result<()> {
        self.signal(k, Signal::SIGCONT)
    }

    fn arm_holder_pause(&self, k: usize, point: Option<Point>) -> std::io::Result<()> {
        self.send(k, Control::ArmHolderPause(point))
    }
}

/// Lines from one worker: a child's stdout or a TCP link.
type Lines = tokio::io::Lines<Box<dyn AsyncBufRead + Send + Unpin>>;

/// Running workers. Dropping it kills the processes this process started (and a coordinator
/// that dies takes them along: they have PR_SET_PDEATHSIG; remote agents see their link close).
pub struct WorkerSet {
    children: Vec<tokio::process::Child>,
    outputs: Vec<Lines>,
    control: Arc<WorkerControl>,
    /// Which worker stopped itself (holder pause) or was stopped.
    pub paused: Option<mpsc::UnboundedReceiver<usize>>,
    /// Each worker's clock, as the pings measured it.
    clocks: Arc<Mutex<Vec<ClockTrack>>>,
    /// Each remote worker's uncertainty, live, for the double-grant check.
    table: Arc<ClockTable>,
    /// Connections refused after the start (late, a second one with an index, bad token).
    refused: Arc<Mutex<Vec<String>>>,
    acceptor: Option<tokio::task::JoinHandle<()>>,
    /// Workers that run as tasks of this process.
    tasks: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Drop for WorkerSet {
    fn drop(&mut self) {
        if let Some(a) = self.acceptor.take() {
            a.abort();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Errors starting workers.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The process could not be started or talked to.
    #[error("worker {index}: {what}: {detail}")]
    Io {
        index: usize,
        what: &'static str,
        detail: String,
    },
    /// Not every worker connected in time.
    #[error("workers {missing:?} of {count} did not connect within {waited:?}{refused}")]
    Missing {
        missing: Vec<u32>,
        count: u32,
        waited: Duration,
        /// Connections refused meanwhile, if any (": …").
        refused: String,
    },
}

/// Where the load processes of a TCP run come from.
pub enum Agents<'a> {
    /// This process starts them: `lockbench worker --connect` on this host, worker K in network
    /// namespace `netns[K]` when given, stderr into `log_dir/worker-K.log`.
    Local {
        log_dir: &'a Path,
        netns: &'a [PathBuf],
    },
    /// They connect from elsewhere (`lockbench coordinate`), within `wait`.
    Remote { wait: Duration },
}

impl WorkerSet {
    /// Starts `count` load processes over pipes running `job`'s parts (stderr into
    /// `log_dir/worker-K.log`) and waits until each is connected to the servers. Worker K runs
    /// in network namespace `netns[K]` when given (a client host of the run's private network).
    pub async fn start(
        job: &Job,
        count: u32,
        log_dir: &Path,
        netns: &[PathBuf],
    ) -> Result<Self, WorkerError> {
        let exe = own_exe().map_err(|e| io_err(0, "find own executable", e))?;
        let mut children = Vec::new();
        let mut outputs = Vec::new();
        let mut reach = Vec::new();
        for k in 0..count {
            let io = |what| move |e| io_err(k as usize, what, e);
            let log = crate::logging::create_private(&log_dir.join(format!("worker-{k}.log")))
                .map_err(io("create log"))?;
            let ns = netns.get(k as usize).map(PathBuf::as_path);
            let (child, stdout, handle) = spawn_load(&exe, log.into(), ns).map_err(io("spawn"))?;
            let line =
                serde_json::to_vec(&part_of(job, k, count)).map_err(|e| io("job")(e.into()))?;
            handle.send_line(&line).map_err(io("send job"))?;
            children.push(child);
            let stdout: Box<dyn AsyncBufRead + Send + Unpin> = Box::new(BufReader::new(stdout));
            outputs.push(stdout.lines());
            reach.push(Reach::Pipe(handle));
        }
        Self::on_this_host(children, outputs, reach).await
    }

    /// Starts `count` workers as tasks of this process, each over an in-memory pipe with the
    /// same messages as a load process, all running `strategy` (built by the caller: the
    /// simulated one, whose memory a process of its own could not share). For testing the
    /// harness; they cannot be paused.
    pub async fn start_in_process(
        job: &Job,
        count: u32,
        strategy: Arc<dyn crate::strategy::Strategy>,
    ) -> Result<Self, WorkerError> {
        let (mut outputs, mut reach, mut tasks) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..count {
            let (ours, theirs) = tokio::io::duplex(1 << 16);
            let (our_rd, our_wr) = tokio::io::split(ours);
            let (their_rd, their_wr) = tokio::io::split(theirs);
            let to_worker = spawn_writer(our_wr);
            let mut line = serde_json::to_vec(&part_of(job, k, count))
                .map_err(|e| io_err(k as usize, "job", e.into()))?;
            line.push(b'\n');
            let _ = to_worker.send(line);
            let out = super::worker::Out::Channel(spawn_writer(their_wr));
            let lines = BufReader::new(their_rd).lines();
            tasks.push(tokio::spawn(super::worker::serve(
                lines,
                out,
                Some(strategy.clone()),
            )));
            let rd: Box<dyn AsyncBufRead + Send + Unpin> = Box::new(BufReader::new(our_rd));
            outputs.push(rd.lines());
            reach.push(Reach::Task(to_worker));
        }
        let mut set = Self::on_this_host(Vec::new(), outputs, reach).await?;
        set.tasks = tasks;
        Ok(set)
    }

    /// The set of workers on this host (processes over pipes, or tasks) once each is ready:
    /// their clocks are this host's.
    async fn on_this_host(
        children: Vec<tokio::process::Child>,
        mut outputs: Vec<Lines>,
        reach: Vec<Reach>,
    ) -> Result<Self, WorkerError> {
        for (k, out) in outputs.iter_mut().enumerate() {
            await_ready(k, out).await?;
        }
        let clocks = (0..reach.len()).map(|_| ClockTrack::same_host()).collect();
        Ok(Self::assemble(children, outputs, reach, clocks, None))
    }

    /// Waits on `listener` for `count` agents — started here or connecting from other hosts
    /// (see [`Agents`]) — that prove they know `token`; measures each one's clock, sends it its
    /// part of `job` (without passwords: each worker reads them from its environment) and waits
    /// until it is connected to the servers. Connections after that are refused and reported.
    pub async fn start_tcp(
        listener: TcpListener,
        job: &Job,
        count: u32,
        token: String,
        agents: Agents<'_>,
    ) -> Result<Self, WorkerError> {
        let addr = listener.local_addr().map_err(|e| io_err(0, "listen", e))?;
        let (children, wait) = launch_agents(agents, addr, count, &token, job)?;
        let state = Arc::new(Mutex::new(Admission {
            taken: vec![false; count as usize],
            started: false,
        }));
        let refused = Arc::new(Mutex::new(Vec::new()));
        let (links_tx, links_rx) = mpsc::unbounded_channel();
        let acceptor = tokio::spawn(accept(
            listener,
            token,
            state.clone(),
            refused.clone(),
            links_tx,
        ));
        let job = Job {
            endpoints: job.endpoints.clone().without_passwords(),
            passwords_from_env: true,
            ..job.clone()
        };
        let (slots, connected) = prepare_all(links_rx, &job, count, wait).await?;
        if connected < count {
            acceptor.abort();
            return Err(missing(&slots, count, wait, &refused));
        }
        state.lock().expect("never poisoned").started = true;
        let (mut outputs, mut reach, mut clocks) = (Vec::new(), Vec::new(), Vec::new());
        for (lines, r, c) in slots.into_iter().flatten() {
            outputs.push(lines);
            reach.push(r);
            clocks.push(c);
        }
        let mut set = Self::assemble(children, outputs, reach, clocks, Some(acceptor));
        set.refused = refused;
        Ok(set)
    }

    fn assemble(
        children: Vec<tokio::process::Child>,
        outputs: Vec<Lines>,
        reach: Vec<Reach>,
        clocks: Vec<ClockTrack>,
        acceptor: Option<tokio::task::JoinHandle<()>>,
    ) -> Self {
        let (paused_tx, paused_rx) = mpsc::unbounded_channel();
        let n = reach.len();
        let table = Arc::new(ClockTable::new(n as u32 + 1));
        for (k, c) in clocks.iter().enumerate() {
            if !c.is_same_host() {
                table.set_uncertainty_ns(k as u32 + 1, c.uncertainty_ns());
            }
        }
        Self {
            children,
            outputs,
            control: Arc::new(WorkerControl {
                workers: reach,
                paused_tx,
                pings: Mutex::new(vec![Vec::new(); n]),
            }),
            paused: Some(paused_rx),
            clocks: Arc::new(Mutex::new(clocks)),
            table,
            refused: Arc::new(Mutex::new(Vec::new())),
            acceptor,
            tasks: Vec::new(),
        }
    }

    /// The handle the chaos runner uses.
    pub fn control(&self) -> Arc<WorkerControl> {
        self.control.clone()
    }

    /// Each worker's clock so far, for summary.json.
    pub fn clocks(&self) -> Vec<WorkerClock> {
        let clocks = self.clocks.lock().expect("never poisoned");
        (0..clocks.len())
            .map(|k| clocks[k].summary(k as u32))
            .collect()
    }

    /// The uncertainty of each clock domain, updated as pings come back.
    pub fn clock_table(&self) -> Arc<ClockTable> {
        self.table.clone()
    }

    /// The clock domain of worker `k`'s leases: 0 (the coordinator's clock) for a worker on
    /// this host, its own for a worker elsewhere.
    pub fn domains(&self) -> Vec<u32> {
        let clocks = self.clocks.lock().expect("never poisoned");
        (0..clocks.len())
            .map(|k| {
                if clocks[k].is_same_host() {
                    COORDINATOR
                } else {
                    k as u32 + 1
                }
            })
            .collect()
    }

    /// Starts the load at `start`, tells the workers of each fault boundary marked in
    /// `boundaries`, and forwards what they measured to `sink` until all of them finished, or
    /// `limit` after the start (then they are stopped, and cut `STOP_GRACE` later). A worker
    /// that dies, disconnects or does not finish is reported in the failures (its results until
    /// then are kept), as is every connection refused.
    pub async fn drive(
        mut self,
        start: Instant,
        sink: mpsc::Sender<Input>,
        boundaries: Arc<Boundaries>,
        cancel: CancellationToken,
        limit: Duration,
    ) -> (DriveReport, Vec<String>, Vec<WorkerClock>) {
        let mut failures = self.send_start(start);
        let forward = tokio::spawn(forward_boundaries(
            boundaries.subscribe(),
            self.control.clone(),
            start,
        ));
        let readers = self.spawn_readers(start, sink);
        let stop = tokio::spawn(stop_on_cancel(self.control.clone(), cancel));
        let pinger = tokio::spawn(ping_forever(self.control.clone()));
        let report = self.collect(readers, start, limit, &mut failures).await;
        stop.abort();
        pinger.abort();
        forward.abort();
        self.reap(&mut failures).await;
        failures.extend(self.refused.lock().expect("never poisoned").drain(..));
        (report, failures, self.clocks())
    }

    /// Tells each worker the start, on its own clock; returns the workers that could not be told.
    fn send_start(&self, start: Instant) -> Vec<String> {
        let origin_ns = crate::clock::monotonic_at(start);
        let mut failures = Vec::new();
        let offsets: Vec<i64> = {
            let clocks = self.clocks.lock().expect("never poisoned");
            clocks.iter().map(ClockTrack::offset_ns).collect()
        };
        for (k, offset) in offsets.iter().enumerate() {
            // The start on the worker's own clock.
            let origin_ns = origin_ns.saturating_add_signed(*offset);
            if let Err(e) = self.control.send(k, Control::Start { origin_ns }) {
                failures.push(format!("worker {k}: start: {e}"));
            }
        }
        failures
    }

    /// One reader per worker, forwarding its results to `sink`.
    fn spawn_readers(&mut self, start: Instant, sink: mpsc::Sender<Input>) -> Readers {
        let mut readers = tokio::task::JoinSet::new();
        for (k, out) in self.outputs.drain(..).enumerate() {
            let reader = Reader {
                k,
                start,
                sink: sink.clone(),
                control: self.control.clone(),
                clocks: self.clocks.clone(),
                table: self.table.clone(),
            };
            readers.spawn(reader.run(out));
        }
        readers
    }

    /// Joins the readers until all returned; at `limit` after `start` stops the workers still
    /// running, and cuts them `STOP_GRACE` later.
    async fn collect(
        &self,
        mut readers: Readers,
        start: Instant,
        limit: Duration,
        failures: &mut Vec<String>,
    ) -> DriveReport {
        let mut tally = Tally::new(self.control.len());
        let stop_at = tokio::time::Instant::from_std(start + limit);
        let mut cut_at = None;
        loop {
            let joined = tokio::select! {
                j = readers.join_next() => match j { Some(j) => j, None => break },
                _ = tokio::time::sleep_until(stop_at), if cut_at.is_none() => {
                    // Past the bound of the load: ask for what they have, then cut.
                    for k in tally.running() {
                        let _ = self.control.send(k, Control::Stop);
                        let _ = self.control.signal(k, Signal::SIGCONT);
                    }
                    cut_at = Some(tokio::time::Instant::now() + STOP_GRACE);
                    continue;
                }
                _ = tokio::time::sleep_until(cut_at.unwrap_or(stop_at)), if cut_at.is_some() => {
                    readers.abort_all();
                    tally.elapsed = None;
                    for k in tally.running() {
                        failures.push(format!(
                            "worker {k}: did not finish within {:?} of the start (cut; its \
                             results until then are counted)",
                            limit + STOP_GRACE
                        ));
                    }
                    break;
                }
            };
            tally.add(joined, failures);
        }
        let mut report = tally.report;
        report.elapsed = tally.elapsed.unwrap_or_else(|| start.elapsed());
        report
    }

    /// Waits a moment for each child (or task) to exit; kills those that do not.
    async fn reap(&mut self, failures: &mut Vec<String>) {
        for (k, task) in self.tasks.iter_mut().enumerate() {
            match tokio::time::timeout(Duration::from_secs(5), task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => failures.push(format!("worker {k} failed: {e}")),
                Ok(Err(e)) => failures.push(format!("worker {k}: {e}")),
                Err(_) => failures.push(format!("worker {k} did not end; aborted")),
            }
        }
        for (k, child) in self.children.iter_mut().enumerate() {
            match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(Ok(status)) if status.success() => {}
                Ok(Ok(status)) => failures.push(format!("worker {k} exited with {status}")),
                _ => {
                    let _ = child.start_kill();
                    failures.push(format!("worker {k} did not exit; killed"));
                }
            }
        }
    }
}

/// The workers' readers, each returning its worker's index and how it finished.
type Readers = tokio::task::JoinSet<(usize, Result<Finished, String>)>;

/// What the readers returned so far.
struct Tally {
    report: DriveReport,
    /// From the workers' last attempts: each waits a moment before its last interval.
    elapsed: Option<Duration>,
    done: Vec<bool>,
}

impl Tally {
    fn new(count: usize) -> Self {
        Self {
            report: DriveReport {
                elapsed: Duration::ZERO,
                not_started: 0,
                cancelled: false,
                broken: Vec::new(),
                generator_lag: Default::default(),
                unstarted: Vec::new(),
                round_trips: Some(Default::default()),
            },
            elapsed: Some(Duration::ZERO),
            done: vec![false; count],
        }
    }

    /// The workers whose reader has not returned.
    fn running(&self) -> Vec<usize> {
        (0..self.done.len()).filter(|k| !self.done[*k]).collect()
    }

    /// Counts one reader's return.
    fn add(
        &mut self,
        joined: Result<(usize, Result<Finished, String>), tokio::task::JoinError>,
        failures: &mut Vec<String>,
    ) {
        match joined {
            Ok((k, Ok(f))) => {
                self.done[k] = true;
                self.elapsed = self
                    .elapsed
                    .zip(f.elapsed_ns)
                    .map(|(e, n)| e.max(Duration::from_nanos(n)));
                self.report.not_started += f.not_started;
                self.report.cancelled |= f.cancelled;
                self.report.generator_lag = self.report.generator_lag.merge(f.generator_lag);
                let trips = self.report.round_trips.zip(f.round_trips);
                self.report.round_trips = trips.map(|(a, b)| a.merge(b));
                if let Some(b) = f.broken {
                    self.report.broken.push(format!("worker {k}: {b}"));
                }
            }
            Ok((k, Err(e))) => {
                self.done[k] = true;
                self.elapsed = None;
                self.report.round_trips = None;
                failures.push(format!("worker {k}: {e}"));
            }
            Err(e) if e.is_cancelled() => {}
            Err(e) => {
                self.elapsed = None;
                self.report.round_trips = None;
                failures.push(format!("worker reader: {e}"));
            }
        }
    }
}

/// Once `cancel` fires, stops every worker.
async fn stop_on_cancel(control: Arc<WorkerControl>, cancel: CancellationToken) {
    cancel.cancelled().await;
    for k in 0..control.len() {
        let _ = control.send(k, Control::Stop);
    }
    // A stopped worker cannot read its Stop.
    control.resume_all();
}

/// Pings every worker each `PING_EVERY`, to follow its clock.
async fn ping_forever(control: Arc<WorkerControl>) {
    for round in 1.. {
        tokio::time::sleep(PING_EVERY).await;
        for i in 0..PINGS_PER_ROUND {
            control.ping_all(round * PINGS_PER_ROUND + i);
        }
    }
}

/// Reads one worker's lines: its measurements to the recorder, its pauses to the chaos
/// runner, its pongs into its clock.
struct Reader {
    k: usize,
    start: Instant,
    sink: mpsc::Sender<Input>,
    control: Arc<WorkerControl>,
    clocks: Arc<Mutex<Vec<ClockTrack>>>,
    table: Arc<ClockTable>,
}

impl Reader {
    async fn run(self, mut out: Lines) -> (usize, Result<Finished, String>) {
        let k = self.k;
        let mut finished = None;
        let mut round: Vec<Sample> = Vec::new();
        // A worker killed with unread input resets its link instead of closing it: the same
        // death as a close, so both end the same way.
        let mut reset = None;
        loop {
            let line = match out.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    reset = Some(e);
                    break;
                }
            };
            let input = match serde_json::from_str::<Event>(&line) {
                Ok(Event::Interval(i)) => match i.decode(self.start, k) {
                    Ok(batch) => Input::Batch(Box::new(batch)),
                    Err(e) => return (k, Err(format!("undecodable interval: {e}"))),
                },
                Ok(Event::Done(c)) => Input::History(c.into_completion(self.start)),
                Ok(Event::Paused) => {
                    let _ = self.control.paused_tx.send(k);
                    continue;
                }
                Ok(Event::Pong { id, t_ns }) => {
                    if let Some((sent, got)) = self.control.pong(k, id) {
                        round.extend(Sample::new(sent, t_ns, got));
                    }
                    // A round's last answer: its tightest sample moves the bound.
                    if id % PINGS_PER_ROUND == PINGS_PER_ROUND - 1 {
                        self.observe(&round);
                        round.clear();
                    }
                    continue;
                }
                Ok(Event::Finished(f)) => {
                    finished = Some(f);
                    continue;
                }
                Ok(Event::Failed(e)) => return (k, Err(e)),
                Ok(Event::Ready) | Err(_) => continue,
            };
            if self.sink.send(input).await.is_err() {
                break;
            }
        }
        let how = reset.map_or(String::new(), |e| format!(", link broken: {e}"));
        let finished = finished.ok_or_else(|| {
            format!("disconnected before finishing{how} (its results until then are counted)")
        });
        (k, finished)
    }

    fn observe(&self, round: &[Sample]) {
        let mut clocks = self.clocks.lock().expect("never poisoned");
        let c = &mut clocks[self.k];
        c.observe(round);
        if !c.is_same_host() {
            self.table
                .set_uncertainty_ns(self.k as u32 + 1, c.uncertainty_ns());
        }
    }
}

fn io_err(index: usize, what: &'static str, e: std::io::Error) -> WorkerError {
    WorkerError::Io {
        index,
        what,
        detail: e.to_string(),
    }
}

/// Tells every worker of each boundary marked in `marks` (ns since `start`), in order.
async fn forward_boundaries(
    mut marks: tokio::sync::watch::Receiver<Vec<Instant>>,
    control: Arc<WorkerControl>,
    start: Instant,
) {
    let mut sent = 0;
    loop {
        let new: Vec<Instant> = marks.borrow_and_update()[sent..].to_vec();
        for b in &new {
            for k in 0..control.len() {
                // A worker that is gone is reported by its reader.
                let _ = control.send(
                    k,
                    Control::Boundary {
                        at_ns: ns(*b, start),
                    },
                );
            }
        }
        sent += new.len();
        if marks.changed().await.is_err() {
            return;
        }
    }
}

/// Worker `index`'s copy of `job`: its part of `count`.
fn part_of(job: &Job, index: u32, count: u32) -> Job {
    Job {
        part: Part { index, count },
        ..job.clone()
    }
}

/// Waits for a worker's first line: ready, or why not.
async fn await_ready(k: usize, out: &mut Lines) -> Result<(), WorkerError> {
    let err = |detail: String| WorkerError::Io {
        index: k,
        what: "connect to the servers",
        detail,
    };
    let line = tokio::time::timeout(READY_TIMEOUT, out.next_line())
        .await
        .map_err(|_| err(format!("not ready after {READY_TIMEOUT:?}")))?
        .map_err(|e| err(e.to_string()))?
        .ok_or_else(|| err("exited (see its log)".into()))?;
    match serde_json::from_str::<Event>(&line) {
        Ok(Event::Ready) => Ok(()),
        Ok(Event::Failed(e)) => Err(err(e)),
        _ => Err(err(format!("unexpected first line {line:?}"))),
    }
}

/// A connected agent's output, how to reach it and its clock.
type Slot = (Lines, Reach, ClockTrack);

/// Starts the agents that run on this host; returns them and how long to wait for all agents.
fn launch_agents(
    agents: Agents<'_>,
    addr: std::net::SocketAddr,
    count: u32,
    token: &str,
    job: &Job,
) -> Result<(Vec<tokio::process::Child>, Duration), WorkerError> {
    let mut children = Vec::new();
    let wait = match agents {
        Agents::Local { log_dir, netns } => {
            let exe = own_exe().map_err(|e| io_err(0, "find own executable", e))?;
            for k in 0..count {
                let ns = netns.get(k as usize).map(PathBuf::as_path);
                let child = spawn_agent(&exe, addr, k, token, job, log_dir, ns)
                    .map_err(|e| io_err(k as usize, "spawn", e))?;
                children.push(child);
            }
            READY_TIMEOUT
        }
        Agents::Remote { wait } => wait,
    };
    Ok((children, wait))
}

/// Prepares each agent admitted on `links` with its part of `job`, until `count` are ready or
/// `wait` passed; returns them by index, and how many are ready.
async fn prepare_all(
    mut links: mpsc::UnboundedReceiver<Link>,
    job: &Job,
    count: u32,
    wait: Duration,
) -> Result<(Vec<Option<Slot>>, u32), WorkerError> {
    let mut slots: Vec<Option<Slot>> = (0..count).map(|_| None).collect();
    let deadline = tokio::time::Instant::now() + wait;
    let mut pending = tokio::task::JoinSet::new();
    let mut connected = 0;
    while connected < count {
        tokio::select! {
            link = links.recv() => {
                let Some(link) = link else { break };
                let job = part_of(job, link.index, count);
                pending.spawn(prepare(link, job));
            }
            done = pending.join_next(), if !pending.is_empty() => {
                match done.expect("not empty") {
                    Ok(Ok((k, lines, reach, clock))) => {
                        slots[k as usize] = Some((lines, reach, clock));
                        connected += 1;
                    }
                    Ok(Err(e)) => return Err(e),
                    Err(e) => return Err(io_err(0, "prepare", std::io::Error::other(e))),
                }
            }
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    Ok((slots, connected))
}

/// The error for agents that did not get ready within `wait`.
fn missing(
    slots: &[Option<Slot>],
    count: u32,
    wait: Duration,
    refused: &Mutex<Vec<String>>,
) -> WorkerError {
    let missing = (0..count)
        .filter(|k| slots[*k as usize].is_none())
        .collect();
    let refused = refused.lock().expect("never poisoned").join("; ");
    WorkerError::Missing {
        missing,
        count,
        waited: wait,
        refused: if refused.is_empty() {
            String::new()
        } else {
            format!(" (refused: {refused})")
        },
    }
}

/// Which indices are connected, and whether the load started.
struct Admission {
    taken: Vec<bool>,
    started: bool,
}

/// A connection that proved itself and claimed a free index.
struct Link {
    index: u32,
    hello: Hello,
    rd: BufReader<tokio::net::tcp::OwnedReadHalf>,
    wr: tokio::net::tcp::OwnedWriteHalf,
}

/// Accepts connections for as long as the set lives: admits the first agent of each index
/// before the start; refuses (and reports) every other.
async fn accept(
    listener: TcpListener,
    token: String,
    state: Arc<Mutex<Admission>>,
    refused: Arc<Mutex<Vec<String>>>,
    links: mpsc::UnboundedSender<Link>,
) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let (token, state, refused, links) =
            (token.clone(), state.clone(), refused.clone(), links.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let (rd, wr) = stream.into_split();
            let verdict =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(rd, wr, &token, &state)).await;
            match verdict {
                Ok(Ok(link)) => {
                    let _ = links.send(link);
                }
                Ok(Err(why)) => refused
                    .lock()
                    .expect("never poisoned")
                    .push(format!("connection from {peer} refused: {why}")),
                Err(_) => refused.lock().expect("never poisoned").push(format!(
                    "connection from {peer} refused: no handshake within {HANDSHAKE_TIMEOUT:?}"
                )),
            }
        });
    }
}

/// The coordinator's side of the handshake; `Err` says why the connection was refused.
async fn handshake(
    rd: tokio::net::tcp::OwnedReadHalf,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    token: &str,
    state: &Mutex<Admission>,
) -> Result<Link, String> {
    let mut rd = BufReader::new(rd);
    let nonce = link::nonce();
    let challenge = Challenge {
        version: link::PROTOCOL_VERSION,
        nonce: nonce.clone(),
    };
    link::send(&mut wr, &challenge)
        .await
        .map_err(|e| e.to_string())?;
    let hello: Hello = link::recv(&mut rd).await.map_err(|e| e.to_string())?;
    let verdict = if hello.version != link::PROTOCOL_VERSION {
        Err(format!(
            "protocol {} (this coordinator speaks {}): run the same lockbench build",
            hello.version,
            link::PROTOCOL_VERSION
        ))
    } else if !link::verify_worker(token, &nonce, hello.index, &hello.mac) {
        Err(format!(
            "worker {} does not know {}",
            hello.index,
            link::TOKEN_ENV
        ))
    } else {
        let mut s = state.lock().expect("never poisoned");
        let k = hello.index as usize;
        if s.started {
            Err(format!("worker {k} connected late: the load had started"))
        } else if k >= s.taken.len() {
            Err(format!(
                "worker index {k} is out of range (0..{})",
                s.taken.len()
            ))
        } else if s.taken[k] {
            Err(format!(
                "worker {k} connected twice: the second connection is refused, the first kept"
            ))
        } else {
            s.taken[k] = true;
            Ok(())
        }
    };
    match verdict {
        Ok(()) => {
            let welcome = Verdict::Welcome {
                mac: link::coordinator_mac(token, &hello.nonce),
            };
            link::send(&mut wr, &welcome)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Link {
                index: hello.index,
                hello,
                rd,
                wr,
            })
        }
        Err(reason) => {
            let _ = link::send(
                &mut wr,
                &Verdict::Rejected {
                    reason: reason.clone(),
                },
            )
            .await;
            Err(reason)
        }
    }
}

/// Measures an admitted agent's clock, sends it its job and waits until it is ready; then
/// hands its link to a writer task.
async fn prepare(mut link: Link, job: Job) -> Result<(u32, Lines, Reach, ClockTrack), WorkerError> {
    let k = link.index;
    let io = |what| move |e| io_err(k as usize, what, e);
    let mut samples = Vec::new();
    for id in 0..READY_PINGS {
        let sent = monotonic_ns();
        link::send(&mut link.wr, &Control::Ping { id })
            .await
            .map_err(io("ping"))?;
        match link::recv::<Event>(&mut link.rd)
            .await
            .map_err(io("ping"))?
        {
            Event::Pong { id: got, t_ns } if got == id => {
                samples.extend(Sample::new(sent, t_ns, monotonic_ns()));
            }
            other => {
                return Err(io("ping")(std::io::Error::other(format!(
                    "answered {other:?}"
                ))));
            }
        }
    }
    let same_host = clock::same_host(&link.hello.boot_id);
    let clock = ClockTrack::at_ready(same_host, &samples)
        .ok_or_else(|| io("ping")(std::io::Error::other("no ping came back")))?;
    tracing::info!(
        worker = k,
        host = link.hello.host,
        same_host,
        offset_ns = clock.offset_ns(),
        uncertainty_ns = clock.uncertainty_ns(),
        "worker admitted"
    );
    link::send(&mut link.wr, &job)
        .await
        .map_err(io("send job"))?;
    let rd: Box<dyn AsyncBufRead + Send + Unpin> = Box::new(link.rd);
    let mut lines = rd.lines();
    await_ready(k as usize, &mut lines).await?;
    Ok((k, lines, Reach::Tcp(spawn_writer(link.wr)), clock))
}

/// A task that writes what the returned sender gets to `wr`, in order, until either side
/// closes.
fn spawn_writer<W>(mut wr: W) -> mpsc::UnboundedSender<Vec<u8>>
where
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(l) = rx.recv().await {
            if wr.write_all(&l).await.is_err() || wr.flush().await.is_err() {
                break;
            }
        }
    });
    tx
}

/// This very build: on Linux, /proc/self/exe is it even when the file was replaced or removed
/// since it started (a rebuild, an upgrade mid-run); its path would then name another build.
pub(super) fn own_exe() -> std::io::Result<PathBuf> {
    let own = Path::new("/proc/self/exe");
    if own.exists() {
        Ok(own.to_path_buf())
    } else {
        std::env::current_exe()
    }
}

/// Starts a load process (`lockbench worker`, speaking over its stdin and stdout) in a process
/// group of its own, in network namespace `netns` when given.
pub(super) fn spawn_load(
    exe: &Path,
    stderr: Stdio,
    netns: Option<&Path>,
) -> std::io::Result<(
    tokio::process::Child,
    tokio::process::ChildStdout,
    LoadProcess,
)> {
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0("lockbench")
        .arg("worker")
        // An Indexed Job's index is the agent's, not an argument of the load process.
        .env_remove("JOB_COMPLETION_INDEX")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr);
    in_own_group(&mut cmd, netns)?;
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stdin = std::fs::File::from(stdin.into_owned_fd()?);
    let handle = LoadProcess {
        pid: Pid::from_raw(child.id().expect("just spawned") as i32),
        stdin: Mutex::new(stdin),
    };
    Ok((child, stdout, handle))
}

/// Starts the agent of worker `k` on this host, connecting to `addr` with `token`; the job's
/// passwords go into its environment, never over the link.
fn spawn_agent(
    exe: &Path,
    addr: std::net::SocketAddr,
    k: u32,
    token: &str,
    job: &Job,
    log_dir: &Path,
    netns: Option<&Path>,
) -> std::io::Result<tokio::process::Child> {
    let log = crate::logging::create_private(&log_dir.join(format!("worker-{k}.log")))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0("lockbench")
        .args([
            "worker",
            "--connect",
            &addr.to_string(),
            "--index",
            &k.to_string(),
        ])
        .env(link::TOKEN_ENV, token)
        .envs(job.endpoints.password_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    in_own_group(&mut cmd, netns)?;
    tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
}

/// Its own process group (a Ctrl-C in the terminal reaches the coordinator only, which then
/// stops the workers in order), in `netns` when given, and killed when its parent dies.
fn in_own_group(cmd: &mut std::process::Command, netns: Option<&Path>) -> std::io::Result<()> {
    cmd.process_group(0);
    let ns = netns.map(std::fs::File::open).transpose()?;
    // SAFETY: setns and prctl are plain syscalls on memory the child owns (the fd was opened
    // before fork).
    unsafe {
        cmd.pre_exec(move || {
            if let Some(ns) = &ns {
                nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
    Ok(())
}

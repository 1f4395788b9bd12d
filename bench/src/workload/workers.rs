//! Buyers in worker processes (`lockbench worker`), so a chaos fault can stop one client
//! process the way a long GC pause would: everything in it freezes, its watchdog and lease
//! keep-alive included.
//!
//! Protocol, one JSON value per line. Coordinator → worker (stdin): a [`Job`], then
//! [`Control`] messages. Worker → coordinator (stdout): `Event`s — `Ready` once connected,
//! one `Done` (the completion) per attempt, `Paused` just before it stops itself, `Finished`
//! at the end. Times cross the process boundary as nanoseconds since the start of the load,
//! which both sides derive from CLOCK_MONOTONIC (system-wide on Linux), so leases of different
//! processes stay comparable for the double-grant check.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Workload;
use super::driver::{self, DriveReport};
use super::pacing::Part;
use crate::cluster::EndpointsFile;
use crate::record::{Completion, LeaseSpan, Outcome};

/// How long workers may take to connect to the servers.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What a worker runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// Strategy id.
    pub strategy: String,
    /// The effective workload as TOML (parsed again by the worker).
    pub workload: String,
    /// Where the servers are.
    pub endpoints: EndpointsFile,
    /// This worker's share of clients and arrivals.
    pub part: Part,
    /// Added to the bound of an attempt (longest planned pause of a client).
    pub extra_bound_ms: u64,
}

/// Coordinator → worker.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Control {
    /// Start the load; the load's start is this CLOCK_MONOTONIC reading.
    Start { origin_ns: u64 },
    /// Stop (SIGSTOP) when a lock holder next reaches this point, or no longer (`None`).
    ArmHolderPause(Option<crate::chaos::holder::Point>),
    /// End the load now (Ctrl-C).
    Stop,
}

/// A lease on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WireLease {
    key: String,
    token: String,
    fence: Option<u64>,
    acquired: u64,
    released: u64,
    lost: bool,
}

/// A completion on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct WireCompletion {
    seq: u64,
    client: u32,
    sku: u32,
    outcome: Outcome,
    intended: u64,
    started: u64,
    ended: u64,
    release_failed: bool,
    lease: Option<WireLease>,
}

/// Worker → coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Event {
    Ready,
    Done(WireCompletion),
    Paused,
    Finished { not_started: u64, cancelled: bool },
    Failed(String),
}

fn monotonic_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always there");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn ns(t: Instant, start: Instant) -> u64 {
    t.saturating_duration_since(start).as_nanos() as u64
}

impl WireCompletion {
    /// Takes the completion by value: its key and token move, no copy per attempt.
    fn from(c: Completion, start: Instant) -> Self {
        Self {
            seq: c.seq,
            client: c.client,
            sku: c.sku,
            outcome: c.outcome,
            intended: ns(c.intended, start),
            started: ns(c.started, start),
            ended: ns(c.ended, start),
            release_failed: c.release_failed,
            lease: c.lease.map(|l| WireLease {
                key: l.key,
                token: l.token,
                fence: l.fence,
                acquired: ns(l.acquired, start),
                released: ns(l.released, start),
                lost: l.lost,
            }),
        }
    }

    fn into_completion(self, start: Instant) -> Completion {
        let at = |n: u64| start + Duration::from_nanos(n);
        Completion {
            seq: self.seq,
            client: self.client,
            sku: self.sku,
            outcome: self.outcome,
            intended: at(self.intended),
            started: at(self.started),
            ended: at(self.ended),
            release_failed: self.release_failed,
            lease: self.lease.map(|l| LeaseSpan {
                key: l.key,
                token: l.token,
                fence: l.fence,
                acquired: at(l.acquired),
                released: at(l.released),
                lost: l.lost,
            }),
        }
    }
}

fn emit(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, e)?;
    out.write_all(b"\n")
}

/// `lockbench worker`: runs one part of the load as the coordinator on stdin tells it.
pub async fn worker_main() -> anyhow::Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let job: Job = serde_json::from_str(&lines.next_line().await?.unwrap_or_default())?;
    let fail = |e: String| {
        let _ = emit(&mut std::io::stdout().lock(), &Event::Failed(e.clone()));
        anyhow::anyhow!(e)
    };
    let w =
        Workload::parse("<coordinator>", &job.workload, &[]).map_err(|e| fail(e.to_string()))?;
    let mut file = job.endpoints;
    file.restore_passwords();
    let endpoints = file.endpoints;
    let built = crate::strategy::build(&job.strategy, &endpoints, &w)
        .await
        .map_err(|e| fail(e.to_string()))?;
    // The holder pause: announce it (synchronously, so the line is out before the stop), then
    // stop this whole process until the coordinator sends SIGCONT.
    crate::chaos::holder::set_hook(Box::new(|| {
        let mut out = std::io::stdout().lock();
        let _ = emit(&mut out, &Event::Paused).and_then(|()| out.flush());
        let _ = nix::sys::signal::raise(Signal::SIGSTOP);
    }));
    emit(&mut std::io::stdout().lock(), &Event::Ready)?;
    std::io::stdout().flush()?;

    let origin_ns = loop {
        match lines.next_line().await? {
            Some(l) => match serde_json::from_str(&l)? {
                Control::Start { origin_ns } => break origin_ns,
                Control::Stop => return Ok(()),
                Control::ArmHolderPause(_) => {}
            },
            None => return Ok(()), // the coordinator is gone
        }
    };
    let start = Instant::now() - Duration::from_nanos(monotonic_ns().saturating_sub(origin_ns));
    let cancel = CancellationToken::new();
    let control = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            while let Ok(Some(l)) = lines.next_line().await {
                match serde_json::from_str(&l) {
                    Ok(Control::ArmHolderPause(on)) => crate::chaos::holder::arm(on),
                    Ok(Control::Stop) => break,
                    _ => {}
                }
            }
            // Stop, or the coordinator closed our stdin (it is gone): end the load.
            cancel.cancel();
        })
    };
    let (tx, mut rx) = mpsc::channel::<Completion>(4096);
    let writer = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(256);
        let mut buf = Vec::with_capacity(1 << 16);
        while rx.recv_many(&mut batch, 256).await > 0 {
            buf.clear();
            for c in batch.drain(..) {
                emit(&mut buf, &Event::Done(WireCompletion::from(c, start)))?;
            }
            let mut out = std::io::stdout().lock();
            out.write_all(&buf)?;
            out.flush()?;
        }
        std::io::Result::Ok(())
    });
    let extra = Duration::from_millis(job.extra_bound_ms);
    let report = driver::drive_part(
        built.strategy.clone(),
        &w,
        job.part,
        extra,
        start,
        tx,
        cancel,
    )
    .await;
    writer.await??;
    control.abort();
    let mut out = std::io::stdout().lock();
    emit(
        &mut out,
        &Event::Finished {
            not_started: report.not_started,
            cancelled: report.cancelled,
        },
    )?;
    out.flush()?;
    Ok(())
}

struct Handle {
    pid: Pid,
    stdin: Mutex<std::fs::File>,
}

/// The coordinator's grip on running workers, shared with the chaos runner.
pub struct WorkerControl {
    workers: Vec<Handle>,
    paused_tx: mpsc::UnboundedSender<usize>,
}

impl WorkerControl {
    /// Number of workers.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    fn send(&self, k: usize, c: Control) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&c).map_err(std::io::Error::other)?;
        line.push(b'\n');
        // A few bytes into a pipe: never blocks, even when the worker is stopped.
        self.workers[k]
            .stdin
            .lock()
            .expect("stdin lock is never poisoned")
            .write_all(&line)
    }

    /// Arms worker `k`'s holder pause at `point`, or disarms it (`None`).
    pub fn arm_holder_pause(
        &self,
        k: usize,
        point: Option<crate::chaos::holder::Point>,
    ) -> std::io::Result<()> {
        self.send(k, Control::ArmHolderPause(point))
    }

    /// SIGSTOPs worker `k`.
    pub fn pause(&self, k: usize) -> std::io::Result<()> {
        Ok(kill(self.workers[k].pid, Signal::SIGSTOP)?)
    }

    /// SIGCONTs worker `k`.
    pub fn resume(&self, k: usize) -> std::io::Result<()> {
        Ok(kill(self.workers[k].pid, Signal::SIGCONT)?)
    }

    fn resume_all(&self) {
        for w in &self.workers {
            let _ = kill(w.pid, Signal::SIGCONT);
        }
    }
}

/// Running worker processes. Dropping it kills them (and a coordinator that dies takes them
/// along: they have PR_SET_PDEATHSIG).
pub struct WorkerSet {
    children: Vec<tokio::process::Child>,
    outputs: Vec<tokio::io::Lines<BufReader<tokio::process::ChildStdout>>>,
    control: Arc<WorkerControl>,
    /// Which worker stopped itself (holder pause) or was stopped.
    pub paused: Option<mpsc::UnboundedReceiver<usize>>,
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
}

impl WorkerSet {
    /// Starts `count` workers running `job`'s parts (stderr into `log_dir/worker-K.log`) and
    /// waits until each is connected to the servers. Worker K runs in network namespace
    /// `netns[K]` when given (a client host of the run's private network).
    pub async fn start(
        job: &Job,
        count: u32,
        log_dir: &Path,
        netns: &[PathBuf],
    ) -> Result<Self, WorkerError> {
        // Workers must speak this build's protocol: on Linux, /proc/self/exe is this very
        // build even when the file was replaced or removed since it started (a rebuild, an
        // upgrade mid-run); its path would then name another build or nothing.
        let own = Path::new("/proc/self/exe");
        let exe = if own.exists() {
            own.to_path_buf()
        } else {
            std::env::current_exe().map_err(|e| WorkerError::Io {
                index: 0,
                what: "find own executable",
                detail: e.to_string(),
            })?
        };
        let (paused_tx, paused_rx) = mpsc::unbounded_channel();
        let mut children = Vec::new();
        let mut outputs = Vec::new();
        let mut handles = Vec::new();
        for k in 0..count {
            let io = |what: &'static str| {
                move |e: std::io::Error| WorkerError::Io {
                    index: k as usize,
                    what,
                    detail: e.to_string(),
                }
            };
            let log = std::fs::File::create(log_dir.join(format!("worker-{k}.log")))
                .map_err(io("create log"))?;
            let mut cmd = std::process::Command::new(&exe);
            cmd.arg0("lockbench")
                .arg("worker")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(log)
                // Its own group: a Ctrl-C in the terminal reaches the coordinator only, which
                // then stops the workers in order.
                .process_group(0);
            let ns = netns
                .get(k as usize)
                .map(std::fs::File::open)
                .transpose()
                .map_err(io("open its network namespace"))?;
            // SAFETY: setns and prctl are plain syscalls on memory the child owns (the fd was
            // opened before fork).
            unsafe {
                cmd.pre_exec(move || {
                    if let Some(ns) = &ns {
                        nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)?;
                    }
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
                });
            }
            let mut child = tokio::process::Command::from(cmd)
                .kill_on_drop(true)
                .spawn()
                .map_err(io("spawn"))?;
            let stdin = child.stdin.take().expect("piped");
            let stdout = child.stdout.take().expect("piped");
            let stdin = std::fs::File::from(stdin.into_owned_fd().map_err(io("stdin"))?);
            let pid = Pid::from_raw(child.id().expect("just spawned") as i32);
            let mut part_job = job.clone();
            part_job.part = Part { index: k, count };
            let handle = Handle {
                pid,
                stdin: Mutex::new(stdin),
            };
            let mut line =
                serde_json::to_vec(&part_job).map_err(|e| io("job")(std::io::Error::other(e)))?;
            line.push(b'\n');
            handle
                .stdin
                .lock()
                .expect("fresh")
                .write_all(&line)
                .map_err(io("send job"))?;
            children.push(child);
            outputs.push(BufReader::new(stdout).lines());
            handles.push(handle);
        }
        for (k, out) in outputs.iter_mut().enumerate() {
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
                Ok(Event::Ready) => {}
                Ok(Event::Failed(e)) => return Err(err(e)),
                _ => return Err(err(format!("unexpected first line {line:?}"))),
            }
        }
        Ok(Self {
            children,
            outputs,
            control: Arc::new(WorkerControl {
                workers: handles,
                paused_tx,
            }),
            paused: Some(paused_rx),
        })
    }

    /// The handle the chaos runner uses.
    pub fn control(&self) -> Arc<WorkerControl> {
        self.control.clone()
    }

    /// Starts the load at `start` and forwards every completion to `sink` until all workers
    /// finished. A worker that dies is reported in `failures`, not waited for.
    pub async fn drive(
        mut self,
        start: Instant,
        sink: mpsc::Sender<Completion>,
        cancel: CancellationToken,
    ) -> (DriveReport, Vec<String>) {
        let origin_ns = monotonic_ns() - ns(Instant::now(), start);
        let mut failures = Vec::new();
        for k in 0..self.control.len() {
            if let Err(e) = self.control.send(k, Control::Start { origin_ns }) {
                failures.push(format!("worker {k}: start: {e}"));
            }
        }
        let mut readers = tokio::task::JoinSet::new();
        for (k, mut out) in self.outputs.drain(..).enumerate() {
            let (sink, paused) = (sink.clone(), self.control.paused_tx.clone());
            readers.spawn(async move {
                let mut finished = None;
                while let Ok(Some(line)) = out.next_line().await {
                    match serde_json::from_str::<Event>(&line) {
                        Ok(Event::Done(c)) => {
                            if sink.send(c.into_completion(start)).await.is_err() {
                                break;
                            }
                        }
                        Ok(Event::Paused) => {
                            let _ = paused.send(k);
                        }
                        Ok(Event::Finished {
                            not_started,
                            cancelled,
                        }) => finished = Some((not_started, cancelled)),
                        Ok(Event::Failed(e)) => return (k, Err(e)),
                        Ok(Event::Ready) | Err(_) => {}
                    }
                }
                (
                    k,
                    finished.ok_or_else(|| "ended without finishing".to_string()),
                )
            });
        }
        drop(sink);
        let stop = {
            let control = self.control.clone();
            tokio::spawn(async move {
                cancel.cancelled().await;
                for k in 0..control.len() {
                    let _ = control.send(k, Control::Stop);
                }
                // A stopped worker cannot read its Stop.
                control.resume_all();
            })
        };
        let collect = async {
            let mut report = DriveReport {
                elapsed: Duration::ZERO,
                not_started: 0,
                cancelled: false,
            };
            while let Some(joined) = readers.join_next().await {
                match joined {
                    Ok((_, Ok((not_started, cancelled)))) => {
                        report.not_started += not_started;
                        report.cancelled |= cancelled;
                    }
                    Ok((k, Err(e))) => failures.push(format!("worker {k}: {e}")),
                    Err(e) => failures.push(format!("worker reader: {e}")),
                }
            }
            report
        };
        let mut report = collect.await;
        stop.abort();
        report.elapsed = start.elapsed();
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
        (report, failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_crosses_to_a_worker_unchanged() {
        let w = Workload::parse(
            "w.toml",
            "seed = 5\n[load]\nmax_attempts = 7\nduration = \"1m 500ms\"\n[lock]\nttl = \"1500ms\"",
            &[],
        )
        .expect("valid");
        let text = toml::to_string(&w).expect("serialises");
        let back = Workload::parse("<coordinator>", &text, &[]).expect("parses back");
        assert_eq!(
            serde_json::to_value(&w).unwrap(),
            serde_json::to_value(&back).unwrap()
        );
    }

    #[test]
    fn completions_keep_their_times_across_the_pipe() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let c = Completion {
            seq: 3,
            client: 1,
            sku: 2,
            outcome: Outcome::Failed(crate::record::ErrorKind::StaleToken),
            intended: at(1),
            started: at(2),
            ended: at(9),
            release_failed: true,
            lease: Some(LeaseSpan {
                key: "k".into(),
                token: "t".into(),
                fence: Some(4),
                acquired: at(3),
                released: at(8),
                lost: true,
            }),
        };
        let line =
            serde_json::to_string(&Event::Done(WireCompletion::from(c.clone(), start))).unwrap();
        let Event::Done(back) = serde_json::from_str(&line).unwrap() else {
            panic!("not a completion: {line}");
        };
        let back = back.into_completion(start);
        assert_eq!(
            (back.outcome, back.ended, back.seq),
            (c.outcome, c.ended, 3)
        );
        let (l, b) = (c.lease.unwrap(), back.lease.unwrap());
        assert_eq!(
            (l.acquired, l.released, l.fence, l.lost),
            (b.acquired, b.released, b.fence, b.lost)
        );
    }
}

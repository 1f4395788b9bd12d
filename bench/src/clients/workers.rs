//! The coordinator's side of worker processes: start them (each in its client host's network
//! namespace when the run has a private network), forward their completions to the recorder,
//! and pause, resume or arm them for the chaos runner ([`crate::chaos::ClientProcesses`]).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::protocol::{Control, Event, Job, monotonic_ns, ns};
use crate::chaos::ClientProcesses;
use crate::chaos::holder::Point;
use crate::record::phases::Boundaries;
use crate::record::{DriveReport, Input};
use crate::workload::pacing::Part;

/// How long workers may take to connect to the servers.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

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

    fn resume_all(&self) {
        for w in &self.workers {
            let _ = killpg(w.pid, Signal::SIGCONT);
        }
    }
}

impl ClientProcesses for WorkerControl {
    fn len(&self) -> usize {
        self.workers.len()
    }

    /// The worker's whole process group: a library's adapter stops with it.
    fn pause(&self, k: usize) -> std::io::Result<()> {
        Ok(killpg(self.workers[k].pid, Signal::SIGSTOP)?)
    }

    fn resume(&self, k: usize) -> std::io::Result<()> {
        Ok(killpg(self.workers[k].pid, Signal::SIGCONT)?)
    }

    fn arm_holder_pause(&self, k: usize, point: Option<Point>) -> std::io::Result<()> {
        self.send(k, Control::ArmHolderPause(point))
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
            let (child, stdout, handle) =
                spawn(&exe, job, Part { index: k, count }, log_dir, netns)?;
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

    /// Starts the load at `start`, tells the workers of each fault boundary marked in
    /// `boundaries`, and forwards what they measured to `sink` until all of them finished. A
    /// worker that dies is reported in `failures`, not waited for.
    pub async fn drive(
        mut self,
        start: Instant,
        sink: mpsc::Sender<Input>,
        boundaries: Arc<Boundaries>,
        cancel: CancellationToken,
    ) -> (DriveReport, Vec<String>) {
        let origin_ns = monotonic_ns() - ns(Instant::now(), start);
        let mut failures = Vec::new();
        for k in 0..self.control.len() {
            if let Err(e) = self.control.send(k, Control::Start { origin_ns }) {
                failures.push(format!("worker {k}: start: {e}"));
            }
        }
        let forward = tokio::spawn(forward_boundaries(
            boundaries.subscribe(),
            self.control.clone(),
            start,
        ));
        let mut readers = tokio::task::JoinSet::new();
        for (k, mut out) in self.outputs.drain(..).enumerate() {
            let (sink, paused) = (sink.clone(), self.control.paused_tx.clone());
            readers.spawn(async move {
                let mut finished = None;
                while let Ok(Some(line)) = out.next_line().await {
                    let input = match serde_json::from_str::<Event>(&line) {
                        Ok(Event::Interval(i)) => match i.decode(start, k) {
                            Ok(batch) => Input::Batch(Box::new(batch)),
                            Err(e) => return (k, Err(format!("undecodable interval: {e}"))),
                        },
                        Ok(Event::Done(c)) => Input::History(c.into_completion(start)),
                        Ok(Event::Paused) => {
                            let _ = paused.send(k);
                            continue;
                        }
                        Ok(Event::Finished {
                            not_started,
                            cancelled,
                            broken,
                            elapsed_ns,
                        }) => {
                            finished = Some((not_started, cancelled, broken, elapsed_ns));
                            continue;
                        }
                        Ok(Event::Failed(e)) => return (k, Err(e)),
                        Ok(Event::Ready) | Err(_) => continue,
                    };
                    if sink.send(input).await.is_err() {
                        break;
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
                broken: Vec::new(),
            };
            // From the workers' last attempts: each waits a moment before its last interval.
            let mut elapsed = Some(Duration::ZERO);
            while let Some(joined) = readers.join_next().await {
                match joined {
                    Ok((k, Ok((not_started, cancelled, broken, elapsed_ns)))) => {
                        elapsed = elapsed
                            .zip(elapsed_ns)
                            .map(|(e, n)| e.max(Duration::from_nanos(n)));
                        report.not_started += not_started;
                        report.cancelled |= cancelled;
                        if let Some(b) = broken {
                            report.broken.push(format!("worker {k}: {b}"));
                        }
                    }
                    Ok((k, Err(e))) => {
                        elapsed = None;
                        failures.push(format!("worker {k}: {e}"))
                    }
                    Err(e) => {
                        elapsed = None;
                        failures.push(format!("worker reader: {e}"))
                    }
                }
            }
            report.elapsed = elapsed.unwrap_or_else(|| start.elapsed());
            report
        };
        let report = collect.await;
        stop.abort();
        forward.abort();
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

type Output = tokio::process::ChildStdout;

/// Starts worker `part.index` (stderr into `log_dir/worker-K.log`, in network namespace
/// `netns[K]` when given) and sends it its job.
fn spawn(
    exe: &Path,
    job: &Job,
    part: Part,
    log_dir: &Path,
    netns: &[PathBuf],
) -> Result<(tokio::process::Child, Output, Handle), WorkerError> {
    let k = part.index;
    let io = |what: &'static str| {
        move |e: std::io::Error| WorkerError::Io {
            index: k as usize,
            what,
            detail: e.to_string(),
        }
    };
    let log =
        std::fs::File::create(log_dir.join(format!("worker-{k}.log"))).map_err(io("create log"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0("lockbench")
        .arg("worker")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        // Its own group: a Ctrl-C in the terminal reaches the coordinator only, which then
        // stops the workers in order.
        .process_group(0);
    let ns = netns
        .get(k as usize)
        .map(std::fs::File::open)
        .transpose()
        .map_err(io("open its network namespace"))?;
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
    let mut child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .map_err(io("spawn"))?;
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let stdin = std::fs::File::from(stdin.into_owned_fd().map_err(io("stdin"))?);
    let handle = Handle {
        pid: Pid::from_raw(child.id().expect("just spawned") as i32),
        stdin: Mutex::new(stdin),
    };
    let part_job = Job {
        part,
        ..job.clone()
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
    Ok((child, stdout, handle))
}

//! `lockbench worker`: a process that runs one part of the load as its coordinator tells it
//! (see [`super::protocol`]), so a chaos fault can stop one client process the way a long GC
//! pause would: everything in it freezes, its watchdog and lease keep-alive included.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::driver;
use super::protocol::{Control, Event, Finished, Job, WireCompletion, emit};
use crate::record::Completion;
use crate::record::partial::{FLUSH, WorkerFold};
use crate::record::phases::Boundaries;
use crate::strategy::{Built, Strategy};
use crate::workload::Workload;

/// `lockbench worker`: runs one part of the load as the coordinator on stdin tells it.
pub async fn worker_main() -> anyhow::Result<()> {
    serve(
        BufReader::new(tokio::io::stdin()).lines(),
        Out::Stdout,
        None,
    )
    .await
}

/// Where a worker's events go: stdout for a load process, a channel for a worker that runs as
/// a task of the coordinator's own process (the simulated pipeline's tests).
#[derive(Clone)]
pub(super) enum Out {
    Stdout,
    Channel(mpsc::UnboundedSender<Vec<u8>>),
}

impl Out {
    /// Sends what `buf` holds (and empties it).
    fn send(&self, buf: &mut Vec<u8>) -> std::io::Result<()> {
        match self {
            Out::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(buf)?;
                buf.clear();
                out.flush()
            }
            Out::Channel(tx) => tx
                .send(std::mem::take(buf))
                .map_err(|_| std::io::Error::other("the coordinator is gone")),
        }
    }

    fn event(&self, e: &Event) -> std::io::Result<()> {
        let mut buf = Vec::new();
        emit(&mut buf, e)?;
        self.send(&mut buf)
    }
}

/// A worker's whole life on `lines` (the coordinator's messages) and `out`: the job, the
/// strategy (`given`, or built here from the job as a load process does), ready, the start,
/// the load, finished.
pub(super) async fn serve<R>(
    mut lines: Lines<R>,
    out: Out,
    given: Option<Arc<dyn Strategy>>,
) -> anyhow::Result<()>
where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    let job: Job = serde_json::from_str(&lines.next_line().await?.unwrap_or_default())?;
    let fail = |e: String| {
        let _ = out.event(&Event::Failed(e.clone()));
        anyhow::anyhow!(e)
    };
    let w =
        Workload::parse("<coordinator>", &job.workload, &[]).map_err(|e| fail(e.to_string()))?;
    // The built strategy's store and connections live as long as the load.
    let (strategy, _built) = match given {
        Some(s) => (s, None),
        None => {
            let built = build_here(&job, &w).await.map_err(fail)?;
            (built.strategy.clone(), Some(built))
        }
    };
    out.event(&Event::Ready)?;

    let Some(origin_ns) = await_start(&mut lines).await? else {
        return Ok(());
    };
    let start = crate::clock::instant_at(origin_ns);
    let cancel = CancellationToken::new();
    let boundaries = Arc::new(Boundaries::default());
    let control = tokio::spawn(follow_control(
        lines,
        start,
        cancel.clone(),
        boundaries.clone(),
    ));
    let (tx, rx) = mpsc::channel::<Completion>(4096);
    let writer = tokio::spawn(write_intervals(
        rx,
        start,
        boundaries,
        job.history,
        out.clone(),
    ));
    let extra = Duration::from_millis(job.extra_bound_ms);
    let report = driver::drive_part(strategy, &w, job.part, extra, start, tx, cancel).await;
    writer.await??;
    control.abort();
    out.event(&Event::Finished(Finished {
        not_started: report.not_started,
        cancelled: report.cancelled,
        broken: report.broken.into_iter().next(),
        elapsed_ns: Some(report.elapsed.as_nanos() as u64),
        generator_lag: report.generator_lag,
        round_trips: report.round_trips,
    }))?;
    Ok(())
}

/// A load process's strategy, built from the job's registered entry, with the holder pause
/// that stops this whole process.
async fn build_here(job: &Job, w: &Workload) -> Result<Built, String> {
    let mut file = job.endpoints.clone();
    if job.passwords_from_env {
        file.passwords_from_env();
    }
    file.restore_passwords();
    // A library's adapter stops with this process when the chaos plan pauses it.
    crate::strategy::adapter::process::JOIN_PROCESS_GROUP
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let built = crate::strategy::build(&job.strategy, &file.endpoints, w)
        .await
        .map_err(|e| e.to_string())?;
    set_holder_hook();
    Ok(built)
}

/// The coordinator's messages.
type Lines<R> = tokio::io::Lines<R>;

/// The holder pause: announce it (synchronously, so the line is out before the stop), then
/// stop this whole process group (a library's adapter with it) until the coordinator sends
/// SIGCONT. The worker leads its group.
fn set_holder_hook() {
    crate::chaos::holder::set_hook(Box::new(|| {
        let mut out = std::io::stdout().lock();
        let _ = emit(&mut out, &Event::Paused).and_then(|()| out.flush());
        let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), Signal::SIGSTOP);
    }));
}

/// Waits for the start, on this host's monotonic clock; `None` when the coordinator stopped
/// the run or went away first.
async fn await_start<R: AsyncBufRead + Unpin>(lines: &mut Lines<R>) -> anyhow::Result<Option<u64>> {
    loop {
        match lines.next_line().await? {
            Some(l) => match serde_json::from_str(&l)? {
                Control::Start { origin_ns } => return Ok(Some(origin_ns)),
                Control::Stop => return Ok(None),
                _ => {}
            },
            None => return Ok(None), // the coordinator is gone
        }
    }
}

/// Follows the coordinator during the load: holder pauses, fault boundaries, the stop.
async fn follow_control<R: AsyncBufRead + Unpin>(
    mut lines: Lines<R>,
    start: Instant,
    cancel: CancellationToken,
    boundaries: Arc<Boundaries>,
) {
    while let Ok(Some(l)) = lines.next_line().await {
        match serde_json::from_str(&l) {
            Ok(Control::ArmHolderPause(on)) => crate::chaos::holder::arm(on),
            Ok(Control::Boundary { at_ns }) => {
                boundaries.push(start + Duration::from_nanos(at_ns));
            }
            // Boundaries may still come while the last interval waits.
            Ok(Control::Stop) => cancel.cancel(),
            _ => {}
        }
    }
    // The coordinator closed our stdin (it is gone): end the load.
    cancel.cancel();
}

/// Folds the completions from `rx` and writes an interval every [`FLUSH`] (with `history`,
/// also each completion as it comes); the last one once every completion is
/// [`crate::record::partial::LAG`] old, so a boundary marked just before the end still reaches
/// the fold in time.
async fn write_intervals(
    mut rx: mpsc::Receiver<Completion>,
    start: Instant,
    boundaries: Arc<Boundaries>,
    history: bool,
    out: Out,
) -> std::io::Result<()> {
    let mut fold = WorkerFold::new(start, boundaries);
    let mut tick = tokio::time::interval(FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut batch = Vec::with_capacity(256);
    let mut buf = Vec::with_capacity(1 << 16);
    let send = |buf: &mut Vec<u8>| out.send(buf);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, 256) => {
                if n == 0 {
                    break;
                }
                for c in batch.drain(..) {
                    if history {
                        emit(&mut buf, &Event::Done(WireCompletion::from(c.clone(), start)))?;
                    }
                    fold.push(c);
                }
                if !buf.is_empty() {
                    send(&mut buf)?;
                }
            }
            // Sent even when empty: it tells the recorder how far this worker's leases came.
            _ = tick.tick() => {
                emit(&mut buf, &Event::Interval(Box::new(fold.flush(Instant::now()))))?;
                send(&mut buf)?;
            }
        }
    }
    if let Some(ripe) = fold.ripe_at() {
        tokio::time::sleep_until(ripe.into()).await;
    }
    emit(
        &mut buf,
        &Event::Interval(Box::new(fold.finish(Instant::now()))),
    )?;
    send(&mut buf)
}

//! `lockbench worker`: a process that runs one part of the load as its coordinator tells it
//! (see [`super::protocol`]), so a chaos fault can stop one client process the way a long GC
//! pause would: everything in it freezes, its watchdog and lease keep-alive included.

use std::io::Write;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::driver;
use super::protocol::{Control, Event, Job, WireCompletion, emit};
use crate::clock::monotonic_ns;
use crate::record::Completion;
use crate::record::partial::{FLUSH, WorkerFold};
use crate::record::phases::Boundaries;
use crate::workload::Workload;

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
    if job.passwords_from_env {
        file.passwords_from_env();
    }
    file.restore_passwords();
    let endpoints = file.endpoints;
    // A library's adapter stops with this process when the chaos plan pauses it.
    crate::strategy::adapter::process::JOIN_PROCESS_GROUP
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let built = crate::strategy::build(&job.strategy, &endpoints, &w)
        .await
        .map_err(|e| fail(e.to_string()))?;
    set_holder_hook();
    emit(&mut std::io::stdout().lock(), &Event::Ready)?;
    std::io::stdout().flush()?;

    let Some(origin_ns) = await_start(&mut lines).await? else {
        return Ok(());
    };
    let start = Instant::now() - Duration::from_nanos(monotonic_ns().saturating_sub(origin_ns));
    let cancel = CancellationToken::new();
    let boundaries = std::sync::Arc::new(Boundaries::default());
    let control = tokio::spawn(follow_control(
        lines,
        start,
        cancel.clone(),
        boundaries.clone(),
    ));
    let (tx, rx) = mpsc::channel::<Completion>(4096);
    let writer = tokio::spawn(write_intervals(rx, start, boundaries, job.history));
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
            broken: report.broken.into_iter().next(),
            elapsed_ns: Some(report.elapsed.as_nanos() as u64),
        },
    )?;
    out.flush()?;
    Ok(())
}

/// The coordinator's messages on stdin.
type ControlLines = tokio::io::Lines<BufReader<tokio::io::Stdin>>;

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
async fn await_start(lines: &mut ControlLines) -> anyhow::Result<Option<u64>> {
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
async fn follow_control(
    mut lines: ControlLines,
    start: Instant,
    cancel: CancellationToken,
    boundaries: std::sync::Arc<Boundaries>,
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
    boundaries: std::sync::Arc<Boundaries>,
    history: bool,
) -> std::io::Result<()> {
    let mut fold = WorkerFold::new(start, boundaries);
    let mut tick = tokio::time::interval(FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut batch = Vec::with_capacity(256);
    let mut buf = Vec::with_capacity(1 << 16);
    let send = |buf: &mut Vec<u8>| {
        let mut out = std::io::stdout().lock();
        out.write_all(buf)?;
        buf.clear();
        out.flush()
    };
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

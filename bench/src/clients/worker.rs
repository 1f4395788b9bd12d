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
use super::protocol::{Control, Event, Job, WireCompletion, emit, monotonic_ns};
use crate::record::Completion;
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
    // The holder pause: announce it (synchronously, so the line is out before the stop), then
    // stop this whole process group (a library's adapter with it) until the coordinator sends
    // SIGCONT. The worker leads its group.
    crate::chaos::holder::set_hook(Box::new(|| {
        let mut out = std::io::stdout().lock();
        let _ = emit(&mut out, &Event::Paused).and_then(|()| out.flush());
        let _ = nix::sys::signal::killpg(nix::unistd::getpgrp(), Signal::SIGSTOP);
    }));
    emit(&mut std::io::stdout().lock(), &Event::Ready)?;
    std::io::stdout().flush()?;

    let origin_ns = loop {
        match lines.next_line().await? {
            Some(l) => match serde_json::from_str(&l)? {
                Control::Start { origin_ns } => break origin_ns,
                Control::Stop => return Ok(()),
                _ => {}
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
            broken: report.broken.into_iter().next(),
        },
    )?;
    out.flush()?;
    Ok(())
}

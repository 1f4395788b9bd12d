//! `lockbench worker --connect ADDR --index I`: the agent of a worker on a TCP link.
//!
//! It connects to the coordinator, proves it knows the token ([`super::link`]), answers clock
//! pings, and on the job starts the load process — the same `lockbench worker` a local run
//! drives over pipes — in a process group of its own. It relays the load process's lines
//! verbatim and stops or resumes its group when told: a paused load process cannot read a
//! resume, so something outside its group must, on every host.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::link::{self, Challenge, Hello, Verdict};
use super::protocol::{Control, Event, Job};
use super::workers::{LoadProcess, spawn_load};
use crate::clock::monotonic_ns;

/// How long an agent keeps trying to reach its coordinator (a Pod may start before the
/// coordinator's Pod listens).
pub const CONNECT_FOR: Duration = Duration::from_secs(120);

/// Runs the agent until its load process finished and its results are sent.
pub async fn agent_main(addr: &str, index: u32) -> anyhow::Result<()> {
    let token = link::token_from_env().map_err(anyhow::Error::msg)?;
    let stream = connect(addr).await?;
    stream.set_nodelay(true)?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let challenge: Challenge = link::recv(&mut rd).await?;
    if challenge.version != link::PROTOCOL_VERSION {
        anyhow::bail!(
            "the coordinator at {addr} speaks protocol {}, this worker {}: run the same \
             lockbench build on both",
            challenge.version,
            link::PROTOCOL_VERSION
        );
    }
    let nonce = link::nonce();
    let hello = Hello {
        version: link::PROTOCOL_VERSION,
        index,
        mac: link::worker_mac(&token, &challenge.nonce, index),
        nonce: nonce.clone(),
        boot_id: link::reported_boot_id(),
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    link::send(&mut wr, &hello).await?;
    match link::recv::<Verdict>(&mut rd).await? {
        Verdict::Welcome { mac } if link::verify_coordinator(&token, &nonce, &mac) => {}
        Verdict::Welcome { .. } => {
            anyhow::bail!(
                "the coordinator at {addr} does not know {}",
                link::TOKEN_ENV
            )
        }
        Verdict::Rejected { reason } => anyhow::bail!("coordinator {addr} refused: {reason}"),
    }
    tracing::info!(index, addr, "connected");
    relay(rd, wr).await
}

async fn connect(addr: &str) -> anyhow::Result<TcpStream> {
    let deadline = Instant::now() + CONNECT_FOR;
    loop {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                anyhow::bail!("cannot reach the coordinator at {addr} for {CONNECT_FOR:?}: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// Answers pings, starts the load process on the job, and relays until it is done.
async fn relay(
    mut rd: BufReader<tokio::net::tcp::OwnedReadHalf>,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let job = await_job(&mut rd, &mut wr).await?;
    let exe = super::workers::own_exe()?;
    let (mut child, stdout, handle) = spawn_load(&exe, std::process::Stdio::inherit(), None)?;
    handle.send_line(&serde_json::to_vec(&job)?)?;
    let pgid = handle.pid;
    let writer = tokio::spawn(async move {
        while let Some(l) = rx.recv().await {
            wr.write_all(&l).await?;
        }
        wr.shutdown().await
    });
    // The load process's lines, verbatim.
    let upstream = tokio::spawn(forward_lines(stdout, tx.clone()));
    let coordinator_alive = tokio::select! {
        alive = downstream(&mut rd, &tx, &handle) => alive,
        _ = child.wait() => true,
    };
    if !coordinator_alive {
        // Nobody is left to take the results or resume a pause: stop the load.
        let _ = killpg(pgid, Signal::SIGCONT);
        let _ = killpg(pgid, Signal::SIGKILL);
        anyhow::bail!("the coordinator closed the link during the load");
    }
    let status = child.wait().await?;
    let _ = upstream.await;
    drop(tx);
    writer.await??;
    if !status.success() {
        anyhow::bail!("the load process exited with {status}");
    }
    Ok(())
}

/// A pong line answering ping `id`, stamped with this host's clock.
fn pong(id: u64) -> Vec<u8> {
    let mut l = serde_json::to_vec(&Event::Pong {
        id,
        t_ns: monotonic_ns(),
    })
    .expect("serialises");
    l.push(b'\n');
    l
}

/// Reads the job; before it only pings come (the coordinator measures the clock offset at
/// ready), and are answered.
async fn await_job(
    rd: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
) -> anyhow::Result<Job> {
    let mut line = String::new();
    loop {
        line.clear();
        if rd.read_line(&mut line).await? == 0 {
            anyhow::bail!("the coordinator closed the link before sending a job");
        }
        if let Ok(Control::Ping { id }) = serde_json::from_str(line.trim_end()) {
            wr.write_all(&pong(id)).await?;
            continue;
        }
        return Ok(serde_json::from_str(line.trim_end())?);
    }
}

/// Sends the load process's lines to the coordinator, each as it was written.
async fn forward_lines(stdout: tokio::process::ChildStdout, tx: mpsc::UnboundedSender<Vec<u8>>) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(l)) = lines.next_line().await {
        let mut l = l.into_bytes();
        l.push(b'\n');
        if tx.send(l).is_err() {
            break;
        }
    }
}

/// Answers pings, pauses and resumes the load process, and passes it the other messages;
/// returns whether the coordinator is still there.
async fn downstream(
    rd: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
    tx: &mpsc::UnboundedSender<Vec<u8>>,
    handle: &LoadProcess,
) -> bool {
    let pgid = handle.pid;
    let mut line = String::new();
    loop {
        line.clear();
        if rd.read_line(&mut line).await.unwrap_or(0) == 0 {
            return false; // the coordinator is gone
        }
        match serde_json::from_str::<Control>(line.trim_end()) {
            Ok(Control::Ping { id }) => {
                let _ = tx.send(pong(id));
            }
            Ok(Control::Pause) => {
                let _ = killpg(pgid, Signal::SIGSTOP);
            }
            Ok(Control::Resume) => {
                let _ = killpg(pgid, Signal::SIGCONT);
            }
            _ => {
                if handle.send_line(line.trim_end().as_bytes()).is_err() {
                    return true; // the load process is gone; its exit tells the rest
                }
            }
        }
    }
}

//! The `server work` step around the load: the lock service's and the store's own counters,
//! read twice back to back and after an idle window before the load, and once after it
//! (`report::work` turns the readings into work per grant and per sale). A counter that cannot
//! be read is a warning and an absent figure, never a failed run.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::Servers;
use crate::cluster::work::{self, CPU_US, Meter, Reading};
use crate::cluster::{NodeInfo, Service, procfs};
use crate::report::work::{Readings, ServerWork, ServiceWork};

/// How long the counters are watched with no load to measure their background rate: long
/// enough for a Sentinel's hello (every 2 s per sentinel, three sentinels) to show, short
/// enough not to lengthen every run much.
pub const IDLE_WINDOW: Duration = Duration::from_secs(1);

/// One service watched: whether its figures are the lock's or the store's.
struct Watched {
    service: Service,
    meter: Meter,
    lock: bool,
    /// First, second (back to back) and before-the-load readings, or why there are none.
    before: Result<[Stamped; 3], String>,
}

type Stamped = (Reading, Instant);

/// The services watched and their readings before the load.
pub(super) struct Watch {
    watched: Vec<Watched>,
}

/// The services whose work a strategy that `needs` these makes: the lock's (MariaDB when the
/// lock is the store's own) and the store apart, each with its meter.
fn services(needs: crate::cluster::Needs) -> Vec<(Service, Meter, bool)> {
    let mut lock = work::lock_services(needs);
    let mut store = work::store_service(needs);
    if lock.is_empty() {
        lock.extend(store.take());
    }
    let with_meter = |s: Service, is_lock| work::meter(s).map(|m| (s, m, is_lock));
    (lock.into_iter().filter_map(|s| with_meter(s, true)))
        .chain(store.and_then(|s| with_meter(s, false)))
        .collect()
}

/// One reading of each of `services`, stamped when it arrived, with the CPU their nodes'
/// processes used so far (every node of the service, replicas included: their work is the
/// lock's too; none where lockbench sees no process, as on an external target).
async fn read_all(services: &[Service], servers: &Servers) -> Vec<Result<Stamped, String>> {
    let (nodes, procs) = (servers.nodes_now(), procfs::all());
    let reads = services.iter().map(|s| {
        let cpu = cpu_us(*s, &nodes, &procs);
        async move {
            let mut r = work::read(*s, &servers.endpoints).await?;
            if let Some(cpu) = cpu {
                r.counters.insert(CPU_US.to_string(), cpu);
            }
            Ok((r, Instant::now()))
        }
    });
    futures::future::join_all(reads).await
}

/// The CPU, µs, of `service`'s node processes in `nodes`; `None` when one cannot be read.
fn cpu_us(service: Service, nodes: &[NodeInfo], procs: &[(u32, procfs::Stat)]) -> Option<u64> {
    let mut of = nodes.iter().filter(|n| n.service == service).peekable();
    of.peek()?;
    of.map(|n| {
        (n.pid > 0)
            .then(|| procfs::tree_cpu(n.pid, procs))
            .flatten()
    })
    .map(|d| d.map(|d| d.as_micros() as u64))
    .sum()
}

/// Reads the counters of the services a strategy that `needs` these uses (`None`: none read)
/// before the load: back to back, then after [`IDLE_WINDOW`] (cut short by `cancel`). Nothing
/// to read: no wait.
pub(super) async fn before_load(
    needs: Option<crate::cluster::Needs>,
    servers: &Servers,
    cancel: &CancellationToken,
) -> Watch {
    let list = needs.map(services).unwrap_or_default();
    if list.is_empty() {
        return Watch {
            watched: Vec::new(),
        };
    }
    let names: Vec<Service> = list.iter().map(|(s, _, _)| *s).collect();
    let first = read_all(&names, servers).await;
    let second = read_all(&names, servers).await;
    tokio::select! {
        () = tokio::time::sleep(IDLE_WINDOW) => {}
        () = cancel.cancelled() => {}
    }
    let third = read_all(&names, servers).await;
    let watched = (list.into_iter().zip(first).zip(second).zip(third))
        .map(|((((service, meter, lock), a), b), c)| Watched {
            service,
            meter,
            lock,
            before: (|| Ok([a?, b?, c?]))(),
        })
        .collect();
    Watch { watched }
}

/// The readings before and after the load, to be made into figures once the audit has
/// counted the sales.
pub(super) struct Finished {
    watched: Vec<Watched>,
    after: Vec<Result<Stamped, String>>,
}

impl Watch {
    /// Reads the counters again, right after the load (before the audit adds its own queries).
    pub(super) async fn finish(self, servers: &Servers) -> Finished {
        let names: Vec<Service> = self.watched.iter().map(|w| w.service).collect();
        let after = match names.is_empty() {
            true => Vec::new(),
            false => read_all(&names, servers).await,
        };
        Finished {
            watched: self.watched,
            after,
        }
    }
}

impl Finished {
    /// The figures: the lock's per grant (`grants`, or per sale for a strategy without a
    /// lock), the store's per `sold` sale. `None` when the strategy's servers keep no counters
    /// lockbench reads.
    pub(super) fn figures(self, locks: bool, grants: u64, sold: u64) -> Option<ServerWork> {
        if self.watched.is_empty() {
            return None;
        }
        let mut out = ServerWork {
            lock: Vec::new(),
            store: None,
            idle_window_s: IDLE_WINDOW.as_secs_f64(),
        };
        for (w, after) in self.watched.into_iter().zip(self.after) {
            let readings = w.before.and_then(|[a, b, c]| {
                let (d, end) = after?;
                Ok(Readings {
                    idle_s: c.1.duration_since(b.1).as_secs_f64(),
                    load_s: end.duration_since(c.1).as_secs_f64(),
                    first: a.0,
                    second: b.0,
                    before_load: c.0,
                    after_load: d,
                })
            });
            if let Err(e) = &readings {
                tracing::warn!("server work not measured: {e}");
                eprintln!("lockbench: warning: server work not measured: {e}");
            }
            let (per, samples) = match (w.lock, locks) {
                (true, true) => ("grant", grants),
                _ => ("sale", sold),
            };
            let figures = ServiceWork::new(w.service, w.meter, per, samples, readings);
            if w.lock {
                out.lock.push(figures);
            } else {
                out.store = Some(figures);
            }
        }
        Some(out)
    }
}

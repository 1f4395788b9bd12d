//! Server work: what the servers did for a run's load, as their own counters say (Redis's
//! commands, etcd's gRPC messages, ZooKeeper's packets, MariaDB's statements and row-lock
//! waits), per grant for the lock service and per sale for the store.
//!
//! Four readings make one figure: two back to back (the cost of a reading itself), one after
//! an idle window (the background rate: replication, Sentinel's pings and hellos, ZooKeeper's
//! and etcd's heartbeats and sessions), one after the load. The load's work is its counters'
//! rise less that background for as long as the load lasted and less one reading.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::format::{decimals, round, work_per};
use crate::cluster::Service;
use crate::cluster::work::{BYTES_IN, BYTES_OUT, CPU_US, FSYNCS, Meter, Reading, TOTAL};
use crate::record::trips::RoundTrips;

/// Outcome classes whose attempt held the lock: they are its grants.
pub const GRANT_CLASSES: [&str; 5] = ["sold", "sold_out", "locked", "read", "torn_read"];

/// What the lock service and the store did for the load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServerWork {
    /// The lock service's work (one entry per service the lock lives on; MariaDB when the
    /// lock is the store's own, then the store's work is in it).
    pub lock: Vec<ServiceWork>,
    /// The store's (MariaDB's) work per sale, apart from the lock's; `null` when the lock lives
    /// in the store or there is no store.
    #[serde(default)]
    pub store: Option<ServiceWork>,
    /// Seconds the counters were watched with no load, to measure their background rate.
    pub idle_window_s: f64,
}

/// One service's work during the load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServiceWork {
    /// The service counted.
    pub service: Service,
    /// What its `total` counts: `commands`, `statements`, `requests`, `packets`.
    pub unit: String,
    /// What the figures are per: `grant` (the lock service of a lock) or `sale`.
    pub per: String,
    /// How many grants (or sales) the work is divided by: the figures' sample count.
    pub samples: u64,
    /// Where the counters come from.
    pub source: String,
    /// The figures; `null` when the counters could not be read (see `not_available`).
    #[serde(default)]
    pub figures: Option<WorkFigures>,
    /// Why there are no figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_available: Option<String>,
}

/// The figures of one service's work.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkFigures {
    /// Nodes whose counters were summed.
    pub nodes: usize,
    /// Seconds between the readings around the load.
    pub load_s: f64,
    /// `total` per grant (or sale), background subtracted.
    pub total_per: Option<f64>,
    /// Client bytes received per grant (or sale), background subtracted.
    pub bytes_in_per: Option<f64>,
    /// Client bytes sent per grant (or sale), background subtracted.
    pub bytes_out_per: Option<f64>,
    /// Every counter that rose during the load.
    pub counters: BTreeMap<String, Counted>,
    /// Of `total`'s rise during the load, the share that was background.
    pub background_share: f64,
    /// What the reader must know: background dominated, a node restarted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One counter over the load.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Counted {
    /// Its rise between the readings around the load.
    pub raw: u64,
    /// Of that, background (idle rate × load time) and one reading's own cost.
    pub background: f64,
    /// `raw − background`, at least 0: the load's.
    pub net: f64,
    /// `net` per grant (or sale); `null` with none.
    pub per: Option<f64>,
}

/// The four readings of one service (see the module's header), with their spacing.
#[derive(Debug, Clone)]
pub struct Readings {
    /// Before the idle window.
    pub first: Reading,
    /// Right after `first`: their difference is one reading's own cost.
    pub second: Reading,
    /// After the idle window, just before the load.
    pub before_load: Reading,
    /// Right after the load.
    pub after_load: Reading,
    /// Seconds from `second` to `before_load`.
    pub idle_s: f64,
    /// Seconds from `before_load` to `after_load`.
    pub load_s: f64,
}

impl ServiceWork {
    /// The work of `service` from `readings` (or why it could not be read), per `samples`
    /// grants or sales (`per`).
    pub fn new(
        service: Service,
        meter: Meter,
        per: &str,
        samples: u64,
        readings: Result<Readings, String>,
    ) -> Self {
        let (figures, not_available) = match readings.and_then(|r| figures(&r, samples)) {
            Ok(f) => (Some(f), None),
            Err(e) => (None, Some(e)),
        };
        Self {
            service,
            unit: meter.unit.into(),
            per: per.into(),
            samples,
            source: meter.source.into(),
            figures,
            not_available,
        }
    }

    /// `2.31 commands, 180 B in, 95 B out per grant (n=1200)`, or why there is none.
    pub fn line(&self) -> String {
        let Some(f) = &self.figures else {
            return format!(
                "not available: {}",
                self.not_available.as_deref().unwrap_or("not read")
            );
        };
        let n = work_per;
        let mut s = format!(
            "{} {}, {} B in, {} B out per {} (n={})",
            n(f.total_per),
            self.unit,
            n(f.bytes_in_per),
            n(f.bytes_out_per),
            self.per,
            self.samples
        );
        if let Some(v) = f.per(FSYNCS) {
            s.push_str(&format!(", {} fsyncs", n(Some(v))));
        }
        if let Some(us) = f.per(CPU_US) {
            s.push_str(&format!(", {} ms CPU", n(Some(us / 1e3))));
        }
        let top = f.top(4);
        if !top.is_empty() {
            s.push_str(&format!("; {top}"));
        }
        s
    }
}

impl WorkFigures {
    /// Counter `key`'s net work per grant (or sale); `None` where it was not counted.
    pub fn per(&self, key: &str) -> Option<f64> {
        self.counters.get(key)?.per
    }

    /// The `n` counters other than the totals with the most net work per grant, as
    /// `publish 1.02, evalsha 2.1`.
    pub fn top(&self, n: usize) -> String {
        let mut v: Vec<(&str, f64)> = (self.counters.iter())
            .filter(|(k, _)| ![TOTAL, BYTES_IN, BYTES_OUT, FSYNCS, CPU_US].contains(&k.as_str()))
            .filter_map(|(k, c)| Some((k.strip_prefix("cmd.").unwrap_or(k), c.per?)))
            .filter(|(_, p)| *p >= 0.01)
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        let cells: Vec<String> = (v.iter().take(n))
            .map(|(k, p)| format!("{k} {}", work_per(Some(*p))))
            .collect();
        cells.join(", ")
    }
}

/// The figures of `r` over `samples`; an error when the readings are not comparable.
fn figures(r: &Readings, samples: u64) -> Result<WorkFigures, String> {
    let all = [&r.first, &r.second, &r.before_load, &r.after_load];
    if all.iter().any(|x| x.nodes != r.first.nodes) {
        return Err("the nodes read changed during the run (a failover moved the master?)".into());
    }
    let mut notes = Vec::new();
    let mut counters = BTreeMap::new();
    for (key, &after) in &r.after_load.counters {
        let at = |x: &Reading| x.counters.get(key).copied().unwrap_or(0);
        let before = at(&r.before_load);
        if after < before && !notes.iter().any(|n: &String| n.contains("went back")) {
            notes.push(
                "a counter went back during the load (a node restarted): the figures \
                        are a lower bound"
                    .into(),
            );
        }
        let raw = after.saturating_sub(before);
        let cost = at(&r.second).saturating_sub(at(&r.first)) as f64;
        let idle = (at(&r.before_load).saturating_sub(at(&r.second)) as f64 - cost).max(0.0);
        let rate = if r.idle_s > 0.0 { idle / r.idle_s } else { 0.0 };
        let background = rate * r.load_s + cost;
        let net = (raw as f64 - background).max(0.0);
        // A cost counter that stayed at 0 is a figure (no fsync), not a counter to leave out.
        if raw == 0 && ![TOTAL, FSYNCS, CPU_US].contains(&key.as_str()) {
            continue;
        }
        let per = (samples > 0).then(|| round(net / samples as f64, 3));
        let c = Counted {
            raw,
            background: round(background, 1),
            net: round(net, 1),
            per,
        };
        counters.insert(key.clone(), c);
    }
    let total = counters.get(TOTAL);
    let background_share = total.map_or(0.0, |c| {
        if c.raw == 0 {
            0.0
        } else {
            round((c.background / c.raw as f64).min(1.0), 3)
        }
    });
    if background_share > 0.5 {
        notes.push(format!(
            "background dominates: {}% of the {} counted during the load was there without it",
            decimals(background_share * 100.0, 0),
            TOTAL
        ));
    }
    let per = |k: &str| counters.get(k).and_then(|c| c.per);
    Ok(WorkFigures {
        nodes: r.after_load.nodes.len(),
        load_s: round(r.load_s, 3),
        total_per: per(TOTAL),
        bytes_in_per: per(BYTES_IN),
        bytes_out_per: per(BYTES_OUT),
        background_share,
        notes,
        counters,
    })
}

/// What a sale cost the servers (summary.json's `cost`): fsyncs and CPU per sale, the lock's
/// services and the store together, each background subtracted as the rest of their work; and
/// the round trips a sale cost the buyers, counted by the client wrappers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cost {
    /// The sales the costs are divided by: their sample count.
    pub sales: u64,
    /// fsync/fdatasync calls per sale, on every node of every service; `null` when a service's
    /// servers do not count theirs (see `services`).
    pub fsyncs_per_sale: Option<f64>,
    /// Server CPU per sale, ms, every node process of every service; `null` when lockbench
    /// saw no server process (an external target).
    pub cpu_ms_per_sale: Option<f64>,
    /// How far `cpu_ms_per_sale` may be off, ± ms: `/proc` counts CPU in 10 ms ticks, and
    /// the background rate comes from a short idle window (see [`cpu_resolution_ms`]).
    #[serde(default)]
    pub cpu_ms_per_sale_pm: Option<f64>,
    /// Round trips to the servers per sale: those of every attempt of the load (losers, their
    /// polls and failed attempts included) over the sales; `null` where the calls were not
    /// counted (a library behind an adapter makes them in its own process) or a worker's count
    /// was lost. A client-side count: no background to subtract.
    #[serde(default)]
    pub round_trips_per_sale: Option<f64>,
    /// What `round_trips_per_sale` divides: the load's attempts and their round trips.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips: Option<RoundTrips>,
    /// Each service's part.
    pub services: Vec<ServiceCost>,
}

/// One service's part of a sale's cost.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServiceCost {
    /// The service.
    pub service: Service,
    /// `lock` or `store`.
    pub part: String,
    /// Its nodes counted.
    pub nodes: usize,
    /// Its fsyncs per sale; `null` where it counts none.
    pub fsyncs_per_sale: Option<f64>,
    /// Its CPU per sale, ms; `null` where not read.
    pub cpu_ms_per_sale: Option<f64>,
    /// How far that may be off, ± ms.
    #[serde(default)]
    pub cpu_ms_per_sale_pm: Option<f64>,
}

/// The CPU `/proc` shows a process in: a tick of USER_HZ (100 on Linux).
const CPU_TICK_MS: f64 = 10.0;

/// How far one service's CPU over a load may be off, ms: each of the four readings may miss up
/// to a tick of user and one of system time per node, and the idle window's error is scaled
/// up to the load's length when the background is subtracted.
pub fn cpu_resolution_ms(nodes: usize, load_s: f64, idle_s: f64) -> f64 {
    let scale = if idle_s > 0.0 { load_s / idle_s } else { 0.0 };
    2.0 * CPU_TICK_MS * nodes as f64 * (2.0 + 2.0 * scale)
}

impl ServerWork {
    /// The cost of each of `sales` sales, with the load's round `trips` where they were
    /// counted; `None` with no sale or no figures.
    pub fn cost(&self, sales: u64, trips: Option<RoundTrips>) -> Option<Cost> {
        let parts =
            (self.lock.iter().map(|w| ("lock", w))).chain(self.store.iter().map(|w| ("store", w)));
        let services: Vec<ServiceCost> = parts
            .filter_map(|(part, w)| {
                let f = w.figures.as_ref()?;
                let per = |k: &str, scale: f64| {
                    let c = f.counters.get(k)?;
                    (sales > 0).then(|| round(c.net * scale / sales as f64, 4))
                };
                let cpu = per(CPU_US, 1e-3);
                let pm = cpu_resolution_ms(f.nodes, f.load_s, self.idle_window_s);
                Some(ServiceCost {
                    service: w.service,
                    part: part.into(),
                    nodes: f.nodes,
                    fsyncs_per_sale: per(FSYNCS, 1.0),
                    cpu_ms_per_sale: cpu,
                    cpu_ms_per_sale_pm: cpu.map(|_| round(pm / sales.max(1) as f64, 4)),
                })
            })
            .collect();
        if sales == 0 || services.is_empty() {
            return None;
        }
        let sum = |f: fn(&ServiceCost) -> Option<f64>| {
            (services.iter().map(f).sum::<Option<f64>>()).map(|v| round(v, 4))
        };
        Some(Cost {
            sales,
            fsyncs_per_sale: sum(|s| s.fsyncs_per_sale),
            cpu_ms_per_sale: sum(|s| s.cpu_ms_per_sale),
            cpu_ms_per_sale_pm: sum(|s| s.cpu_ms_per_sale_pm),
            round_trips_per_sale: trips.map(|t| round(t.round_trips as f64 / sales as f64, 3)),
            round_trips: trips,
            services,
        })
    }
}

impl Cost {
    /// The round trips of `sales` sales alone, for a run whose servers' work was not read (a
    /// trial of a sweep or a contend: the client's count needs no idle window); `None` with no
    /// sale.
    pub fn of_round_trips(sales: u64, trips: RoundTrips) -> Option<Cost> {
        (sales > 0).then(|| Cost {
            sales,
            fsyncs_per_sale: None,
            cpu_ms_per_sale: None,
            cpu_ms_per_sale_pm: None,
            round_trips_per_sale: Some(round(trips.round_trips as f64 / sales as f64, 3)),
            round_trips: Some(trips),
            services: Vec::new(),
        })
    }

    /// `4 round trips, 0.02 fsyncs, 0.31 ± 0.05 ms of server CPU per sale (n=1200)`.
    pub fn line(&self) -> String {
        let trips = match self.round_trips_per_sale {
            Some(v) => format!("{} round trips", work_per(Some(v))),
            None => "round trips not counted".into(),
        };
        if self.services.is_empty() {
            return format!(
                "{trips} per sale (n={}); the servers' work was not read",
                self.sales
            );
        }
        let fsyncs = match self.fsyncs_per_sale {
            Some(v) => format!("{} fsyncs", work_per(Some(v))),
            None => "fsyncs not counted".into(),
        };
        let cpu = match (self.cpu_ms_per_sale, self.cpu_ms_per_sale_pm) {
            (Some(v), Some(pm)) => format!(
                "{} ± {} ms of server CPU",
                work_per(Some(v)),
                work_per(Some(pm))
            ),
            (Some(v), None) => format!("{} ms of server CPU", work_per(Some(v))),
            (None, _) => "server CPU not read".into(),
        };
        format!("{trips}, {fsyncs}, {cpu} per sale (n={})", self.sales)
    }
}

/// Grants of a run: its attempts that ended holding the lock, by outcome class.
pub fn grants(outcomes: &BTreeMap<String, u64>) -> u64 {
    GRANT_CLASSES.iter().filter_map(|c| outcomes.get(*c)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn reading(total: u64, publish: u64) -> Reading {
        let addr: SocketAddr = "127.0.0.1:6379".parse().unwrap();
        let mut r = Reading::default();
        r.add(
            addr,
            BTreeMap::from([
                (TOTAL.to_string(), total),
                ("cmd.publish".to_string(), publish),
                (BYTES_IN.to_string(), total * 10),
            ]),
        );
        r
    }

    const METER: Meter = Meter {
        unit: "commands",
        source: "test",
    };

    #[test]
    fn background_and_the_readings_own_cost_are_subtracted() {
        // A reading costs 2 commands; idle adds 4/s besides; the 10 s load adds 1000 + 40 + 2.
        let r = Readings {
            first: reading(100, 0),
            second: reading(102, 0),
            before_load: reading(108, 0),
            after_load: reading(1150, 300),
            idle_s: 1.0,
            load_s: 10.0,
        };
        let w = ServiceWork::new(Service::Redis, METER, "grant", 500, Ok(r));
        let f = w.figures.as_ref().unwrap();
        assert_eq!(f.counters[TOTAL].raw, 1042);
        assert_eq!(f.counters[TOTAL].background, 42.0);
        assert_eq!(f.total_per, Some(2.0));
        assert_eq!(f.counters["cmd.publish"].per, Some(0.6));
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        assert!(w.line().starts_with("2 commands,"), "{}", w.line());
        assert!(w.line().contains("publish 0.6"), "{}", w.line());
    }

    #[test]
    fn background_that_dominates_is_said() {
        let r = Readings {
            first: reading(0, 0),
            second: reading(1, 0),
            before_load: reading(101, 0),
            after_load: reading(1200, 0),
            idle_s: 1.0,
            load_s: 10.0,
        };
        let w = ServiceWork::new(Service::Redis, METER, "grant", 10, Ok(r));
        let f = w.figures.unwrap();
        assert_eq!(f.total_per, Some(10.8));
        assert!(
            f.notes[0].starts_with("background dominates"),
            "{:?}",
            f.notes
        );
    }

    #[test]
    fn other_nodes_or_no_reading_give_no_figures() {
        let mut moved = reading(10, 0);
        moved.nodes = vec!["127.0.0.1:1".parse().unwrap()];
        let r = Readings {
            first: reading(0, 0),
            second: reading(1, 0),
            before_load: reading(2, 0),
            after_load: moved,
            idle_s: 1.0,
            load_s: 1.0,
        };
        let w = ServiceWork::new(Service::Redis, METER, "grant", 10, Ok(r));
        assert!(w.figures.is_none() && w.not_available.unwrap().contains("nodes"));
        let w = ServiceWork::new(Service::Redis, METER, "grant", 1, Err("no login".into()));
        assert_eq!(w.line(), "not available: no login");
    }

    #[test]
    fn a_sale_s_cost_sums_the_lock_and_the_store_and_keeps_a_zero() {
        let counted = |fsyncs: Option<u64>, cpu: u64| {
            let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
            let mut r = Reading::default();
            let mut c = BTreeMap::from([(TOTAL.to_string(), 0), (CPU_US.to_string(), cpu)]);
            c.extend(fsyncs.map(|f| (FSYNCS.to_string(), f)));
            r.add(addr, c);
            r
        };
        let work = |fsyncs: [Option<u64>; 2], cpu: [u64; 2]| {
            let r = Readings {
                first: counted(fsyncs[0], cpu[0]),
                second: counted(fsyncs[0], cpu[0]),
                before_load: counted(fsyncs[0], cpu[0]),
                after_load: counted(fsyncs[1], cpu[1]),
                idle_s: 1.0,
                load_s: 2.0,
            };
            ServiceWork::new(Service::Redis, METER, "grant", 100, Ok(r))
        };
        // The lock: no fsync at all, 20 ms of CPU; the store: 50 fsyncs, 30 ms.
        let w = ServerWork {
            lock: vec![work([Some(7), Some(7)], [1_000, 21_000])],
            store: Some(work([Some(10), Some(60)], [0, 30_000])),
            idle_window_s: 1.0,
        };
        let trips = RoundTrips {
            attempts: 150,
            round_trips: 450,
        };
        let c = w.cost(100, Some(trips)).unwrap();
        assert_eq!(
            c.services[0].fsyncs_per_sale,
            Some(0.0),
            "a zero stays a figure"
        );
        assert_eq!(
            (c.fsyncs_per_sale, c.cpu_ms_per_sale),
            (Some(0.5), Some(0.5))
        );
        // Per service, 2 kinds of tick × 10 ms × 1 node × (2 + 2 × 2 s load / 1 s idle) = 120 ms.
        assert_eq!(c.cpu_ms_per_sale_pm, Some(2.4));
        // The losers' 50 attempts' round trips are in the 4.5 per sale.
        assert_eq!(
            (c.round_trips_per_sale, c.round_trips),
            (Some(4.5), Some(trips))
        );
        assert_eq!(
            c.line(),
            "4.5 round trips, 0.5 fsyncs, 0.5 ± 2.4 ms of server CPU per sale (n=100)"
        );
        // A lock whose servers count no fsync: the total is not counted either.
        let w = ServerWork {
            lock: vec![work([None, None], [0, 100])],
            ..w
        };
        let c = w.cost(100, None).unwrap();
        assert_eq!((c.fsyncs_per_sale, c.round_trips_per_sale), (None, None));
        assert!(
            c.line()
                .starts_with("round trips not counted, fsyncs not counted")
        );
        assert_eq!(w.cost(0, Some(trips)), None);
        // Without the servers' readings, the round trips alone.
        let c = Cost::of_round_trips(100, trips).unwrap();
        assert_eq!(
            (c.round_trips_per_sale, c.fsyncs_per_sale),
            (Some(4.5), None)
        );
        assert_eq!(
            c.line(),
            "4.5 round trips per sale (n=100); the servers' work was not read"
        );
        assert_eq!(Cost::of_round_trips(0, trips), None);
    }

    #[test]
    fn grants_are_the_attempts_that_held_the_lock() {
        let o = BTreeMap::from([
            ("sold".to_string(), 5),
            ("sold_out".to_string(), 2),
            ("lock_timeout".to_string(), 9),
        ]);
        assert_eq!(grants(&o), 7);
    }
}

//! The machine's pressure over a span of time, from Linux PSI (`/proc/pressure/{cpu,io}`):
//! how long tasks stalled waiting for a CPU or for I/O. Cheap evidence that a slow stretch was
//! the machine's doing (another tenant, an fsync of the shared disk), recorded beside every
//! capacity trial so a reader can weigh it.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::cluster::procfs;

/// Stall shares over a span (0..1 of its wall time), and the load average at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    /// Share of the time at least one runnable task waited for a CPU. The harness's own load
    /// raises it: compare steps at similar rates, not with zero.
    pub cpu_some: f64,
    /// Share of the time at least one task waited for I/O.
    pub io_some: f64,
    /// Share of the time every non-idle task waited for I/O at once (the disk stalled all).
    pub io_full: f64,
    /// 1-minute load average at the end.
    pub load1: f64,
    /// Share of all CPUs' time spent busy (`/proc/stat`: neither idle nor waiting for I/O),
    /// whoever ran: near 1, the machine had no CPU left for the harness or the servers.
    /// Absent (0) in sweeps written before it was recorded.
    #[serde(default)]
    pub cpu_busy: f64,
    /// Of all CPUs' time, the share lockbench used: this process and its worker processes,
    /// the load generator. Absent (0) in older sweeps.
    #[serde(default)]
    pub cpu_harness: f64,
    /// Of all CPUs' time, the share the servers lockbench started used (the processes below
    /// it running other programs; not a container's or a `serve`'s). The rest of
    /// `cpu_busy` was other processes'. Absent (0) in older sweeps.
    #[serde(default)]
    pub cpu_servers: f64,
    /// Whether PSI was readable (false: the other fields are 0, not measured).
    pub measured: bool,
}

impl Pressure {
    /// Wall-time-weighted mean of spans `(seconds, pressure)`; the load average of the last.
    pub fn over(spans: impl IntoIterator<Item = (f64, Pressure)>) -> Pressure {
        let mut sum = Pressure::default();
        let mut total = 0.0;
        let mut measured = true;
        for (s, p) in spans {
            sum.cpu_some += s * p.cpu_some;
            sum.io_some += s * p.io_some;
            sum.io_full += s * p.io_full;
            sum.cpu_busy += s * p.cpu_busy;
            sum.cpu_harness += s * p.cpu_harness;
            sum.cpu_servers += s * p.cpu_servers;
            sum.load1 = p.load1;
            measured &= p.measured;
            total += s;
        }
        if total <= 0.0 || !measured {
            return Pressure::default();
        }
        Pressure {
            cpu_some: round3(sum.cpu_some / total),
            io_some: round3(sum.io_some / total),
            io_full: round3(sum.io_full / total),
            cpu_busy: round3(sum.cpu_busy / total),
            cpu_harness: round3(sum.cpu_harness / total),
            cpu_servers: round3(sum.cpu_servers / total),
            load1: sum.load1,
            measured,
        }
    }
}

/// The PSI totals at one moment; [`Mark::since`] turns two into a [`Pressure`].
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    at: Instant,
    /// cpu some, io some, io full: µs stalled since boot (`None` without PSI).
    totals: Option<[u64; 3]>,
    /// `/proc/stat`'s busy and total CPU time since boot, in ticks (`None` without it).
    cpu: Option<[u64; 2]>,
    /// The ticks lockbench's processes and the servers below it used
    /// ([`procfs::own_tree_ticks`]).
    own: [u64; 2],
}

impl Mark {
    /// Reads the totals now.
    pub fn now() -> Mark {
        Mark {
            at: Instant::now(),
            totals: read_totals(),
            cpu: read_cpu(),
            own: procfs::own_tree_ticks(&procfs::all()),
        }
    }

    /// The pressure from this mark until now.
    pub fn since(&self) -> Pressure {
        let wall_us = self.at.elapsed().as_micros().max(1) as f64;
        let (Some(before), Some(after)) = (self.totals, read_totals()) else {
            return Pressure::default();
        };
        let share = |i: usize| round3(after[i].saturating_sub(before[i]) as f64 / wall_us);
        let own = procfs::own_tree_ticks(&procfs::all());
        let [cpu_busy, cpu_harness, cpu_servers] = match (self.cpu, read_cpu()) {
            (Some([b0, t0]), Some([b1, t1])) if t1 > t0 => {
                let of_all = |d: u64| round3(d as f64 / (t1 - t0) as f64).min(1.0);
                [
                    of_all(b1.saturating_sub(b0)),
                    of_all(own[0].saturating_sub(self.own[0])),
                    of_all(own[1].saturating_sub(self.own[1])),
                ]
            }
            _ => [0.0; 3],
        };
        Pressure {
            cpu_some: share(0).min(1.0),
            io_some: share(1).min(1.0),
            io_full: share(2).min(1.0),
            cpu_busy,
            cpu_harness,
            cpu_servers,
            load1: load1().unwrap_or(0.0),
            measured: true,
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn read_totals() -> Option<[u64; 3]> {
    let cpu = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let io = std::fs::read_to_string("/proc/pressure/io").ok()?;
    Some([
        total(&cpu, "some")?,
        total(&io, "some")?,
        total(&io, "full")?,
    ])
}

/// The `total=` of the `some` or `full` line of a PSI file.
fn total(text: &str, which: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(which))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

fn read_cpu() -> Option<[u64; 2]> {
    cpu_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy and total ticks of `/proc/stat`'s first line (every CPU): busy is all but idle and
/// iowait.
fn cpu_ticks(stat: &str) -> Option<[u64; 2]> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).unwrap_or(&0);
    Some([total.saturating_sub(idle), total])
}

fn load1() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_lines_give_their_totals() {
        let text = "some avg10=1.46 avg60=4.93 avg300=4.16 total=22895002\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=17\n";
        assert_eq!(total(text, "some"), Some(22_895_002));
        assert_eq!(total(text, "full"), Some(17));
        assert_eq!(total("garbage", "some"), None);
    }

    #[test]
    fn proc_stat_gives_busy_and_total_ticks() {
        let stat = "cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n";
        assert_eq!(cpu_ticks(stat), Some([160, 1000]));
        assert_eq!(cpu_ticks("intr 1 2"), None);
    }

    #[test]
    fn spans_weigh_by_their_time() {
        let p = |cpu: f64| Pressure {
            cpu_some: cpu,
            measured: true,
            ..Pressure::default()
        };
        let all = Pressure::over([(1.0, p(0.1)), (3.0, p(0.5))]);
        assert!((all.cpu_some - 0.4).abs() < 1e-9, "{all:?}");
        // One span without PSI makes the whole unmeasured, never a silent 0.
        let none = Pressure::over([(1.0, p(0.1)), (1.0, Pressure::default())]);
        assert!(!none.measured);
    }
}

//! The machine a command ran on, measured once at its start ([`at_start`]): CPU model and
//! cores, a fixed CPU score, the fdatasync latency of the disk under the servers' data
//! folders, the loopback round trip and the pressure at rest. A figure from one machine does
//! not travel to another; this says which machine it came from (docs/results.md, "The machine
//! fingerprint"). A probe that cannot run says why in [`Machine::unmeasured`]; it never fails
//! the run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Iterations of [`cpu_chain`] in one round of the CPU score.
pub const CPU_ROUND: u64 = 1 << 21;
/// Bytes written before each fdatasync: etcd's hardware guide runs fio with `--bs=2300`
/// (about one WAL entry) and `--fdatasync=1`.
pub const FSYNC_WRITE_BYTES: usize = 2300;

/// How long each probe may take, and how many samples it stops at.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// CPU score: rounds of [`CPU_ROUND`] iterations, at least one, until this time.
    pub cpu: Duration,
    /// CPU score: at most this many rounds.
    pub cpu_rounds: u32,
    /// fdatasync: writes until this time …
    pub fsync: Duration,
    /// … or this many (fio's `--size=22m` of 2300-byte writes).
    pub fsync_count: u32,
    /// Loopback: round trips until this time …
    pub loopback: Duration,
    /// … or this many.
    pub loopback_count: u32,
}

impl Budget {
    /// A command's probe: about 2.5 s in all, 2 s of it the disk's.
    pub const FULL: Budget = Budget {
        cpu: Duration::from_millis(250),
        cpu_rounds: 16,
        fsync: Duration::from_secs(2),
        fsync_count: 10_000,
        loopback: Duration::from_millis(300),
        loopback_count: 5_000,
    };
}

/// The fingerprint (`machine` in summary.json, sweep.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// `model name` of /proc/cpuinfo (or what an ARM kernel calls it); `unknown` without.
    pub cpu_model: String,
    /// Logical CPUs in /proc/cpuinfo (0: unreadable).
    pub cores: u32,
    /// CPUs this process may run on (affinity, cgroup quota): fewer than `cores` in a
    /// container or a pinned run.
    pub usable_cores: u32,
    /// The CPU score; `null` when it could not run.
    pub cpu_score: Option<CpuScore>,
    /// fdatasync after each small write in the servers' data folder; `null`: see `unmeasured`.
    pub fdatasync: Option<DiskSync>,
    /// TCP round trips of one byte on 127.0.0.1; `null`: see `unmeasured`.
    pub loopback: Option<Latency>,
    /// Pressure at rest (PSI avg10) when the probe began; `null` without /proc/pressure.
    pub psi: Option<Psi>,
    /// Why a figure is missing, one line each (empty: all measured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<String>,
    /// Seconds the whole probe took.
    pub probe_s: f64,
}

/// Iterations per second of a fixed, deterministic loop on one thread ([`cpu_chain`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuScore {
    /// Millions of iterations per second in the fastest round (the machine's speed when
    /// nothing interrupted it).
    pub m_per_s: f64,
    /// Rounds run, [`CPU_ROUND`] iterations each.
    pub rounds: u32,
    /// Whether lockbench was built optimised: a debug build scores far lower, not comparable.
    pub optimized: bool,
}

/// Latency percentiles of a probe, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Samples.
    pub n: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs (the maximum below [`crate::record::quantile::min_samples`]).
    pub p99_us: f64,
    /// Slowest, µs.
    pub max_us: f64,
}

/// The disk probe: where it wrote, on what filesystem, and the fdatasync latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskSync {
    /// The folder written in (where each run's servers keep their data).
    pub path: String,
    /// Its filesystem type from /proc/self/mountinfo (`tmpfs`: fsync costs nothing).
    pub fs: Option<String>,
    /// Bytes written before each fdatasync.
    pub write_bytes: u32,
    /// The fdatasync calls' latency.
    #[serde(flatten)]
    pub latency: Latency,
}

/// PSI `some avg10` at the start, percent of the last 10 s some task stalled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    /// Waiting for a CPU.
    pub cpu_pct: f64,
    /// Waiting for I/O (`null`: no /proc/pressure/io).
    pub io_pct: Option<f64>,
    /// Waiting for memory (`null`: no /proc/pressure/memory).
    pub memory_pct: Option<f64>,
}

static TAKEN: OnceLock<Machine> = OnceLock::new();

/// This process's fingerprint: measured by the first caller (a command's start, before any
/// server starts) with [`Budget::FULL`], its disk in [`data_folder`] when the servers are
/// `local` (not a target's, elsewhere), the same one for every later run of the command.
/// Blocks for the probe: call it off the async runtime's workers.
pub fn at_start(local: bool) -> &'static Machine {
    let folder = data_folder();
    TAKEN.get_or_init(|| probe(&Budget::FULL, local.then_some(folder.as_path())))
}

/// The fingerprint [`at_start`] took, if a caller of this process did.
pub fn taken() -> Option<&'static Machine> {
    TAKEN.get()
}

/// Where a run's servers keep their data: `cluster::local` makes each run's folder with
/// `tempfile`, in the system's temp folder (`TMPDIR`, else /tmp).
pub fn data_folder() -> std::path::PathBuf {
    std::env::temp_dir()
}

/// Measures the machine: the PSI first (at rest, before the probe's own load), then the CPU,
/// the loopback and the disk in `dir` (none: the servers' disks are not this machine's).
pub fn probe(budget: &Budget, dir: Option<&Path>) -> Machine {
    let began = Instant::now();
    let mut unmeasured = Vec::new();
    let psi = kept(&mut unmeasured, "psi", read_psi());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_score = Some(cpu_score(budget));
    let loopback = kept(&mut unmeasured, "loopback", loopback(budget));
    let disk = dir.ok_or_else(|| "the servers are a target's, not on this machine".to_string());
    let fdatasync = kept(
        &mut unmeasured,
        "fdatasync",
        disk.and_then(|d| disk_sync(budget, d)),
    );
    Machine {
        cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
        cores: cores(&cpuinfo),
        usable_cores: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        cpu_score,
        fdatasync,
        loopback,
        psi,
        unmeasured,
        probe_s: round(began.elapsed().as_secs_f64(), 2),
    }
}

/// A probe's figure, or `None` with why added to `unmeasured`.
fn kept<T>(unmeasured: &mut Vec<String>, what: &str, r: Result<T, String>) -> Option<T> {
    r.map_err(|e| unmeasured.push(format!("{what}: {e}"))).ok()
}

/// The CPU model a /proc/cpuinfo names: x86's `model name`, else an ARM kernel's names.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Hardware", "cpu model", "Processor", "uarch"]
        .iter()
        .find_map(|key| field(cpuinfo, key))
        .filter(|v| !v.is_empty())
}

/// Logical CPUs: the `processor` entries of /proc/cpuinfo.
pub fn cores(cpuinfo: &str) -> u32 {
    cpuinfo
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count() as u32
}

/// The value of the first `key : value` line.
fn field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// The stated loop of the CPU score: `n` steps of `x = splitmix64's finaliser(x + γ)` from
/// `seed`, each step waiting on the last (a chain of two multiplies and three shift-xors: it
/// measures one core's speed, not its width).
pub fn cpu_chain(seed: u64, n: u64) -> u64 {
    let mut x = seed;
    for _ in 0..n {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
    }
    x
}

fn cpu_score(budget: &Budget) -> CpuScore {
    let began = Instant::now();
    let (mut best, mut rounds) = (0.0f64, 0);
    while rounds < budget.cpu_rounds.max(1) && (rounds == 0 || began.elapsed() < budget.cpu) {
        let t = Instant::now();
        std::hint::black_box(cpu_chain(std::hint::black_box(rounds as u64), CPU_ROUND));
        best = best.max(CPU_ROUND as f64 / t.elapsed().as_secs_f64().max(1e-9));
        rounds += 1;
    }
    CpuScore {
        m_per_s: round(best / 1e6, 1),
        rounds,
        optimized: !cfg!(debug_assertions),
    }
}

/// One-byte round trips over TCP on 127.0.0.1 (Nagle off), an echo thread on the other end.
fn loopback(budget: &Budget) -> Result<Latency, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Connected before the accept, so the accept cannot wait for a client that never came.
    let mut client = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    let (mut server, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    let timeout = Some(Duration::from_secs(2));
    for s in [&client, &server] {
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_read_timeout(timeout).map_err(|e| e.to_string())?;
    }
    let echo = std::thread::spawn(move || {
        let mut b = [0u8; 1];
        while server.read_exact(&mut b).is_ok() && server.write_all(&b).is_ok() {}
    });
    let mut hist = histogram();
    let began = Instant::now();
    let mut b = [7u8; 1];
    let mut failed = None;
    while hist.len() < budget.loopback_count as u64 && began.elapsed() < budget.loopback {
        let t = Instant::now();
        if let Err(e) = client
            .write_all(&b)
            .and_then(|()| client.read_exact(&mut b))
        {
            failed = Some(format!("round trip: {e}"));
            break;
        }
        let _ = hist.record(t.elapsed().as_nanos() as u64);
    }
    drop(client);
    let _ = echo.join();
    match failed {
        Some(e) => Err(e),
        None => summarise(&hist).ok_or_else(|| "no round trip in time".into()),
    }
}

/// Small sequential writes to a new file in `dir`, each followed by fdatasync (fio's
/// `--ioengine=sync --fdatasync=1 --bs=2300`); the file is removed after.
fn disk_sync(budget: &Budget, dir: &Path) -> Result<DiskSync, String> {
    // In a run folder of its own, marked with this process: one left by a killed probe is
    // removed at the next start, as a killed run's are (`cluster::leftovers`).
    let folder = tempfile::Builder::new()
        .prefix("lockbench-run-probe-")
        .tempdir_in(dir)
        .map_err(|e| format!("create a folder in {}: {e}", dir.display()))?;
    crate::cluster::owner::Owner::mark(folder.path())
        .map_err(|e| format!("mark {}: {e}", folder.path().display()))?;
    let mut file = tempfile::Builder::new()
        .prefix("fsync-probe-")
        .tempfile_in(folder.path())
        .map_err(|e| format!("create a file in {}: {e}", dir.display()))?;
    let block = [0x5au8; FSYNC_WRITE_BYTES];
    let mut hist = histogram();
    let began = Instant::now();
    while hist.len() < budget.fsync_count as u64 && began.elapsed() < budget.fsync {
        let f = file.as_file_mut();
        f.write_all(&block)
            .map_err(|e| format!("write {}: {e}", dir.display()))?;
        let t = Instant::now();
        f.sync_data()
            .map_err(|e| format!("fdatasync in {}: {e}", dir.display()))?;
        let _ = hist.record(t.elapsed().as_nanos() as u64);
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    Ok(DiskSync {
        path: dir.display().to_string(),
        fs: fs_type(&mountinfo, &real),
        write_bytes: FSYNC_WRITE_BYTES as u32,
        latency: summarise(&hist).ok_or("no fdatasync in time")?,
    })
}

/// The filesystem type of the mount holding `path`: the longest mount point of
/// /proc/self/mountinfo that contains it (`<id> <parent> <dev> <root> <mount point> … - <type>`).
pub fn fs_type(mountinfo: &str, path: &Path) -> Option<String> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let point = l.split_whitespace().nth(4)?.replace("\\040", " ");
            let fs = l.split(" - ").nth(1)?.split_whitespace().next()?;
            path.starts_with(&point)
                .then(|| (point.len(), fs.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fs)| fs)
}

/// PSI `some avg10` of cpu (required), io and memory.
fn read_psi() -> Result<Psi, String> {
    let read = |r: &str| std::fs::read_to_string(format!("/proc/pressure/{r}")).ok();
    let cpu = read("cpu").ok_or("no /proc/pressure/cpu (a kernel without PSI)")?;
    Ok(Psi {
        cpu_pct: some_avg10(&cpu).ok_or("/proc/pressure/cpu: no `some avg10=`")?,
        io_pct: read("io").as_deref().and_then(some_avg10),
        memory_pct: read("memory").as_deref().and_then(some_avg10),
    })
}

/// The `avg10=` of a PSI file's `some` line, percent.
pub fn some_avg10(text: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with("some"))?
        .split_whitespace()
        .find_map(|f| f.strip_prefix("avg10="))?
        .parse()
        .ok()
}

/// ns from 1 ns to 100 s, three significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds")
}

/// n, p50, p99 (the maximum when n cannot bound it) and the maximum, µs; `None` when empty.
pub fn summarise(h: &Histogram<u64>) -> Option<Latency> {
    let n = h.len();
    if n == 0 {
        return None;
    }
    let us = |ns: u64| round(ns as f64 / 1_000.0, 1);
    let p99 = if crate::record::quantile::supported(0.99, n) {
        h.value_at_quantile(0.99)
    } else {
        h.max()
    };
    Some(Latency {
        n,
        p50_us: us(h.value_at_quantile(0.5)),
        p99_us: us(p99),
        max_us: us(h.max()),
    })
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\
                       \nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
    const ARM: &str = "processor\t: 0\nBogoMIPS\t: 108.00\nCPU part\t: 0xd0c\n\nprocessor\t: 1\n\
                       BogoMIPS\t: 108.00\n\nprocessor\t: 2\n\nprocessor\t: 3\n\
                       Hardware\t: BCM2835\n";

    #[test]
    fn cpuinfo_gives_the_model_and_the_cores() {
        assert_eq!(cpu_model(X86).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cores(X86), 2);
        assert_eq!(cpu_model(ARM).as_deref(), Some("BCM2835"));
        assert_eq!(cores(ARM), 4);
        assert_eq!((cpu_model(""), cores("")), (None, 0));
        // An ARM kernel that names nothing: unknown, never a field of another name.
        assert_eq!(cpu_model("processor\t: 0\nBogoMIPS\t: 50\n"), None);
    }

    #[test]
    fn psi_some_avg10_is_read_and_garbage_is_none() {
        let cpu = "some avg10=57.57 avg60=32.47 avg300=12.17 total=17432587970\n\
                   full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(some_avg10(cpu), Some(57.57));
        assert_eq!(some_avg10("full avg10=1.00 total=3\n"), None);
        assert_eq!(some_avg10("some avg10=x"), None);
    }

    #[test]
    fn the_filesystem_is_the_longest_mount_point_holding_the_path() {
        let info = "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    30 22 0:27 / /tmp rw,nosuid shared:9 - tmpfs tmpfs rw\n\
                    31 22 0:28 / /tmpdata rw shared:10 - xfs /dev/vdb rw\n\
                    32 22 0:29 / /my\\040disk rw - btrfs /dev/vdc rw\n";
        let fs = |p: &str| fs_type(info, Path::new(p));
        assert_eq!(fs("/tmp/lockbench-run-x").as_deref(), Some("tmpfs"));
        // A path prefix is not a mount point: /tmpdata is its own.
        assert_eq!(fs("/tmpdata/x").as_deref(), Some("xfs"));
        assert_eq!(fs("/var/tmp").as_deref(), Some("ext4"));
        assert_eq!(fs("/my disk/a").as_deref(), Some("btrfs"));
        assert_eq!(fs_type("", Path::new("/tmp")), None);
    }

    #[test]
    fn the_cpu_loop_is_the_stated_one() {
        // splitmix64's outputs from seed 0: the loop is the published generator.
        assert_eq!(cpu_chain(0, 1), 0xe220_a839_7b1d_cdaf);
        assert_ne!(cpu_chain(0, 2), cpu_chain(0, 1));
        assert_eq!(cpu_chain(5, 0), 5);
    }

    #[test]
    fn a_summary_says_its_count_and_falls_back_to_the_maximum() {
        let mut h = histogram();
        assert_eq!(summarise(&h), None);
        for ns in 1..=1000u64 {
            h.record(ns * 1_000).unwrap();
        }
        let s = summarise(&h).unwrap();
        assert_eq!(s.n, 1000);
        assert!((s.p50_us - 500.0).abs() <= 1.0, "{s:?}");
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{s:?}");
        // 100 samples cannot bound a p99 (299 can): the maximum stands for it.
        let mut few = histogram();
        (1..=100u64).for_each(|ns| few.record(ns * 1_000).unwrap());
        let s = summarise(&few).unwrap();
        assert_eq!((s.n, s.p99_us), (100, s.max_us));
    }

    #[test]
    fn a_short_probe_measures_everything_here_and_says_why_not_elsewhere() {
        let short = Budget {
            cpu: Duration::from_millis(20),
            cpu_rounds: 2,
            fsync: Duration::from_millis(100),
            fsync_count: 20,
            loopback: Duration::from_millis(50),
            loopback_count: 50,
        };
        let dir = tempfile::tempdir().unwrap();
        let m = probe(&short, Some(dir.path()));
        assert!(
            m.cpu_score.as_ref().is_some_and(|c| c.m_per_s > 0.0),
            "{m:?}"
        );
        let disk = m.fdatasync.as_ref().expect("a temp folder takes writes");
        assert!(disk.latency.n > 0 && disk.latency.n <= 20, "{disk:?}");
        let lo = m.loopback.as_ref().expect("loopback");
        assert!(
            lo.n > 0 && lo.p50_us > 0.0 && lo.p50_us <= lo.max_us,
            "{lo:?}"
        );
        assert!(m.cores >= 1 && m.usable_cores >= 1, "{m:?}");
        // The probe's folder and file are gone; a folder that cannot take one is said, not fatal.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let m = probe(&short, Some(Path::new("/nonexistent/lockbench")));
        assert!(m.fdatasync.is_none());
        assert!(
            m.unmeasured
                .iter()
                .any(|u| u.starts_with("fdatasync: create a folder in /nonexistent/lockbench")),
            "{:?}",
            m.unmeasured
        );
        // A target's servers write to their own disks: this one's is not theirs.
        let m = probe(&short, None);
        assert!(m.fdatasync.is_none() && m.loopback.is_some());
        assert!(
            (m.unmeasured.iter())
                .any(|u| u == "fdatasync: the servers are a target's, not on this machine"),
            "{:?}",
            m.unmeasured
        );
    }
}

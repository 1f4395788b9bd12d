//! How many completions per second can the coordinator take in from 8 workers? Side by side on
//! the same seeded completions: one JSON `Done` line per attempt (read, decoded, recorded) and
//! the workers' intervals (read, decoded, merged). The streams are encoded before the clock
//! starts, so what is timed is the coordinator's work; the workers' side (encoding a `Done`
//! line, or folding into intervals) is timed apart, per completion: that work moved to the
//! workers, and the ratio is only honest beside it. scripts/bench-ingest.sh runs it.
//!
//! Two mixes: `locks` (a lock strategy's run: every attempt that got the lock has a lease,
//! hot SKUs, sales then sold-outs, reads, lock timeouts, a few errors) and `lock-free` (no
//! leases). Both recordings are checked equal before anything is printed.
//!
//! Usage: ingest [completions = 1000000] [rounds = 3] [attempts/s over all workers = 20000]

use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockbench::clients::protocol::{Event, WireCompletion, emit};
use lockbench::record::partial::{FLUSH, LAG};
use lockbench::record::phases::Boundaries;
use lockbench::record::{
    Completion, ErrorKind, Ingest, LeaseSpan, Live, Outcome, Recording, WorkerFold,
};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

const WORKERS: usize = 8;
const SKUS: usize = 100;
const STOCK: u32 = 2_000;
const HOLD_US: u64 = 1_000;
const ACQUIRE_TIMEOUT_US: u64 = 100_000;
const HORIZON: Duration = Duration::from_secs(2);

#[derive(Clone, Copy, PartialEq)]
enum Mix {
    Locks,
    LockFree,
}

/// A seeded run of `n` attempts, `rate` a second over all workers: per worker, its
/// completions in end order.
fn generate(mix: Mix, n: u64, rate: f64, start: Instant) -> Vec<Vec<Completion>> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let at = |us: u64| start + Duration::from_micros(us);
    let mut free_at = [0u64; SKUS];
    let mut stock = [STOCK; SKUS];
    let mut t_us = 0.0f64;
    let mut workers = vec![Vec::new(); WORKERS];
    for seq in 0..n {
        t_us += -(1.0 - rng.random::<f64>()).ln() * 1e6 / rate;
        let intended = t_us as u64;
        let started = intended + rng.random_range(0..200);
        let sku = rng.random_range(0..SKUS);
        let client = (seq % 512) as u32;
        let read = rng.random_bool(0.1);
        let roll = rng.random_range(0..1000);
        let (outcome, ended, lease) = if mix == Mix::LockFree {
            let ended = started + rng.random_range(500..3_000);
            let outcome = match roll {
                0..5 => Outcome::Failed(ErrorKind::Timeout),
                5..7 => Outcome::Unknown(ErrorKind::Connection),
                _ if read => Outcome::Read {
                    stock: stock[sku] as i64,
                },
                _ if stock[sku] == 0 => Outcome::SoldOut,
                _ => {
                    stock[sku] -= 1;
                    Outcome::Sold
                }
            };
            (outcome, ended, None)
        } else {
            let acquired = (started + 100).max(free_at[sku]);
            if acquired - started > ACQUIRE_TIMEOUT_US {
                (
                    Outcome::LockTimeout,
                    started + ACQUIRE_TIMEOUT_US,
                    None::<LeaseSpan>,
                )
            } else {
                let released = acquired + HOLD_US + rng.random_range(0..300);
                free_at[sku] = released + 50;
                let outcome = match roll {
                    0..5 => Outcome::Failed(ErrorKind::Timeout),
                    5..7 => Outcome::Unknown(ErrorKind::Connection),
                    _ if read => Outcome::Read {
                        stock: stock[sku] as i64,
                    },
                    _ if stock[sku] == 0 => Outcome::SoldOut,
                    _ => {
                        stock[sku] -= 1;
                        Outcome::Sold
                    }
                };
                let worker = client as usize % WORKERS;
                let lease = LeaseSpan {
                    key: format!("lockbench:lock:{sku}"),
                    token: format!("{:08x}-{seq}", 0x5eed_0000 + worker),
                    fence: None,
                    acquired: at(acquired),
                    released: at(released),
                    lost: false,
                    shared: false,
                    loss: None,
                };
                (outcome, released + 100, Some(lease))
            }
        };
        workers[client as usize % WORKERS].push(Completion {
            ask: Default::default(),
            seq,
            client,
            sku: sku as u32,
            read,
            outcome,
            intended: at(intended),
            started: at(started),
            ended: at(ended),
            release_failed: false,
            lease,
        });
    }
    for w in &mut workers {
        w.sort_by_key(|c| c.ended);
    }
    workers
}

/// What the coordinator receives: each worker's byte stream, and the order its lines arrive
/// in (worker indices).
struct Streams {
    bytes: Vec<Vec<u8>>,
    order: Vec<usize>,
}

impl Streams {
    fn from_lines(mut lines: Vec<(Instant, usize, Vec<u8>)>) -> Self {
        lines.sort_by_key(|l| l.0);
        let mut bytes = vec![Vec::new(); WORKERS];
        let order = lines
            .into_iter()
            .map(|(_, k, line)| {
                bytes[k].extend_from_slice(&line);
                k
            })
            .collect();
        Self { bytes, order }
    }

    fn len(&self) -> usize {
        self.bytes.iter().map(Vec::len).sum()
    }
}

/// Today's worker: one `Done` line per completion, written as it ends. Returns the streams
/// and the time spent encoding.
fn per_attempt(workers: &[Vec<Completion>], start: Instant) -> (Streams, Duration) {
    let mut lines = Vec::new();
    let mut spent = Duration::ZERO;
    for (k, w) in workers.iter().enumerate() {
        for c in w {
            let c = c.clone();
            let ended = c.ended;
            let t = Instant::now();
            let mut line = Vec::with_capacity(320);
            emit(&mut line, &Event::Done(WireCompletion::from(c, start))).unwrap();
            spent += t.elapsed();
            lines.push((ended, k, line));
        }
    }
    (Streams::from_lines(lines), spent)
}

/// The new worker: completions folded, an `Interval` line every [`FLUSH`], boundaries told as
/// they are marked. Returns the streams and the time spent folding and encoding.
fn batched(workers: &[Vec<Completion>], start: Instant, marks: &[Instant]) -> (Streams, Duration) {
    let mut lines = Vec::new();
    let mut spent = Duration::ZERO;
    let end = workers
        .iter()
        .filter_map(|w| w.last())
        .map(|c| c.ended)
        .max()
        .unwrap_or(start);
    for (k, w) in workers.iter().enumerate() {
        let told = Arc::new(Boundaries::default());
        let mut fold = WorkerFold::new(start, told.clone());
        let (mut next, mut marked) = (0, 0);
        let mut now = start;
        while now < end + LAG {
            now += FLUSH;
            while marked < marks.len() && marks[marked] <= now {
                told.push(marks[marked]);
                marked += 1;
            }
            let from = next;
            while next < w.len() && w[next].ended <= now {
                next += 1;
            }
            // Copied before the clock starts: a worker's fold gets its completions moved in.
            let ripe = w[from..next].to_vec();
            let t = Instant::now();
            for c in ripe {
                fold.push(c);
            }
            let mut line = Vec::new();
            let interval = if now < end + LAG {
                fold.flush(now)
            } else {
                fold.finish(now)
            };
            emit(&mut line, &Event::Interval(Box::new(interval))).unwrap();
            spent += t.elapsed();
            lines.push((now, k, line));
        }
    }
    (Streams::from_lines(lines), spent)
}

fn ingest(start: Instant, marks: &[Instant]) -> Ingest {
    let b = Arc::new(Boundaries::default());
    for m in marks {
        b.push(*m);
    }
    let mut i = Ingest::new(start, None, HORIZON, Arc::new(Live::default()), b);
    i.refresh();
    i
}

/// Where the batched path's time goes, ns per completion: JSON, decoding the interval,
/// merging it (the lease checks included).
fn breakdown(s: &Streams, start: Instant, marks: &[Instant], n: u64) -> [f64; 3] {
    let mut recorder = ingest(start, marks);
    let mut spent = [Duration::ZERO; 3];
    let mut readers: Vec<&[u8]> = s.bytes.iter().map(Vec::as_slice).collect();
    for &k in &s.order {
        let mut line = String::new();
        readers[k].read_line(&mut line).unwrap();
        let t0 = Instant::now();
        let Event::Interval(i) = serde_json::from_str::<Event>(&line).unwrap() else {
            unreachable!("only intervals were written")
        };
        let t1 = Instant::now();
        let b = i.decode(start, k).unwrap();
        let t2 = Instant::now();
        recorder.batch(b).unwrap();
        spent[0] += t1 - t0;
        spent[1] += t2 - t1;
        spent[2] += t2.elapsed();
    }
    let t = Instant::now();
    recorder.finish(start + Duration::from_secs(3600)).unwrap();
    spent[2] += t.elapsed(); // the leases still held back
    spent.map(|d| d.as_nanos() as f64 / n as f64)
}

/// The coordinator: reads each line as it arrives (a fresh `String` per line, as its readers
/// do), decodes it and records it. Returns the recording and the time it took.
fn coordinate(s: &Streams, start: Instant, marks: &[Instant]) -> (Recording, Duration) {
    let mut recorder = ingest(start, marks);
    let t = Instant::now();
    let mut readers: Vec<&[u8]> = s.bytes.iter().map(Vec::as_slice).collect();
    for (n, &k) in s.order.iter().enumerate() {
        let mut line = String::new();
        readers[k].read_line(&mut line).unwrap();
        if n % 256 == 0 {
            recorder.refresh();
        }
        match serde_json::from_str::<Event>(&line).unwrap() {
            Event::Done(c) => recorder.completion(&c.into_completion(start)).unwrap(),
            Event::Interval(i) => recorder.batch(i.decode(start, k).unwrap()).unwrap(),
            _ => unreachable!("only completions and intervals were written"),
        }
    }
    let recording = recorder.finish(start + Duration::from_secs(3600)).unwrap();
    (recording, t.elapsed())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("completions"));
    let rounds: usize = args.next().map_or(3, |a| a.parse().expect("rounds"));
    let rate: f64 = args.next().map_or(20_000.0, |a| a.parse().expect("rate"));
    println!(
        "{n} completions from {WORKERS} workers, {rate} attempts/s in all, an interval every \
         {FLUSH:?}; coordinator: best of {rounds} rounds, one thread"
    );
    println!(
        "{:<10} {:>15} {:>15} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "mix",
        "per-attempt/s",
        "batched/s",
        "ratio",
        "B/attempt",
        "B/batched",
        "worker:",
        "worker:"
    );
    println!(
        "{:<10} {:>15} {:>15} {:>7} {:>10} {:>10} {:>10} {:>10}",
        "", "", "", "", "", "", "json ns", "fold ns"
    );
    let mut notes = Vec::new();
    for (name, mix) in [("locks", Mix::Locks), ("lock-free", Mix::LockFree)] {
        let start = Instant::now();
        let workers = generate(mix, n, rate, start);
        let last = workers
            .iter()
            .filter_map(|w| w.last())
            .map(|c| c.ended)
            .max();
        let span = last.map_or(Duration::ZERO, |e| e - start);
        let marks = [start + span / 3, start + span * 2 / 3];
        let (json, json_cost) = per_attempt(&workers, start);
        let (batches, fold_cost) = batched(&workers, start, &marks);
        let (mut best_json, mut best_batch) = (Duration::MAX, Duration::MAX);
        for _ in 0..rounds {
            let (a, ta) = coordinate(&json, start, &marks);
            let (b, tb) = coordinate(&batches, start, &marks);
            assert_eq!(a.stats.attempts(), n);
            assert_eq!(b.stats.attempts(), n);
            assert_eq!(
                a.stats.latency, b.stats.latency,
                "{name}: the same latencies"
            );
            assert_eq!(a.double_grants, b.double_grants, "{name}: the same leases");
            assert_eq!(a.coverage, b.coverage, "{name}: the same coverage");
            best_json = best_json.min(ta);
            best_batch = best_batch.min(tb);
        }
        let per_s = |d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "{:<10} {:>15.0} {:>15.0} {:>6.1}x {:>10.1} {:>10.1} {:>10.0} {:>10.0}",
            name,
            per_s(best_json),
            per_s(best_batch),
            best_json.as_secs_f64() / best_batch.as_secs_f64(),
            json.len() as f64 / n as f64,
            batches.len() as f64 / n as f64,
            json_cost.as_nanos() as f64 / n as f64,
            fold_cost.as_nanos() as f64 / n as f64,
        );
        let [j, d, m] = breakdown(&batches, start, &marks, n);
        notes.push(format!(
            "{name}: batched, ns per completion: JSON {j:.1}, decoding {d:.1}, merging {m:.1} \
             (lease checks included); {} intervals",
            batches.order.len()
        ));
    }
    for note in notes {
        println!("{note}");
    }
}

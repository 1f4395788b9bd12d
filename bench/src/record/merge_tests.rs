//! The recorder's merge of worker intervals equals one recorder that saw every completion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use super::partial::{Interval, LAG, WorkerFold};
use super::phases::Boundaries;
use super::{Completion, ErrorKind, Ingest, LeaseSpan, Live, Outcome, Recording, Refusal};

const WORKERS: usize = 8;
const HORIZON: Duration = Duration::from_secs(5);

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

/// Stretches in which nothing is served (only errors end there): gaps the merge must find.
const DEAD: [(u64, u64); 2] = [(2_000, 2_400), (4_500, 4_520)];

/// A seeded mix of every outcome class, reads, leases (overlapping ones among them: their times
/// are random, so a key is often held twice), fences, tokens of every shape, sold-outs, and
/// stretches with nothing served; each completion with the worker that ran it.
fn completions(seed: u64, n: u64, start: Instant) -> Vec<(usize, Completion)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let at = |ns: u64| start + Duration::from_nanos(ns);
    (0..n)
        .map(|seq| {
            let end_ns = rng.random_range(1_000_000..6_000_000_000u64);
            let dead = DEAD
                .iter()
                .any(|(a, b)| end_ns >= a * 1_000_000 && end_ns < b * 1_000_000);
            let latency_ns = if rng.random_bool(0.02) {
                rng.random_range(0..end_ns.min(3_000_000_000))
            } else {
                rng.random_range(0..end_ns.min(50_000_000))
            };
            let kind = ErrorKind::ALL[rng.random_range(0..ErrorKind::ALL.len())];
            let outcome = match rng.random_range(0..100) {
                _ if dead => [
                    Outcome::LockTimeout,
                    Outcome::Failed(kind),
                    Outcome::Unknown(kind),
                ][rng.random_range(0..3)],
                0..40 => Outcome::Sold,
                40..55 => Outcome::SoldOut,
                55..63 => Outcome::LockTimeout,
                63..69 => Outcome::Failed(kind),
                69..75 => Outcome::Unknown(kind),
                75..80 => Outcome::Locked,
                80..91 => Outcome::Read { stock: 3 },
                91..94 => Outcome::Refused(Refusal::Limit),
                94..97 => Outcome::Refused(Refusal::Duplicate),
                _ => Outcome::TornRead { stock: 3, later: 2 },
            };
            let read = matches!(outcome, Outcome::Read { .. } | Outcome::TornRead { .. })
                || rng.random_bool(0.05);
            let intended_ns = end_ns - latency_ns;
            let started_ns = intended_ns + rng.random_range(0..=latency_ns / 4);
            let client = rng.random_range(0..64u32);
            let worker = client as usize % WORKERS;
            let sku = rng.random_range(0..6u32);
            let leased = outcome != Outcome::LockTimeout
                && !(matches!(outcome, Outcome::Failed(_)) && rng.random_bool(0.5));
            let lease = leased.then(|| {
                let acquired = rng.random_range(started_ns..=end_ns);
                let released = rng.random_range(acquired..=end_ns);
                LeaseSpan {
                    key: format!("lockbench:lock:{sku}"),
                    token: match worker % 4 {
                        0 => format!("{:08x}-{seq}", 0xbeef + worker),
                        1 => format!("b{seq}"),
                        2 => format!("lock-{seq:010}"),
                        _ => format!("{seq}-tok"),
                    },
                    fence: rng.random_bool(0.3).then_some(seq),
                    acquired: at(acquired),
                    released: at(released),
                    lost: rng.random_bool(0.05),
                    shared: read && rng.random_bool(0.8),
                    loss: None,
                }
            });
            let c = Completion {
                ask: Default::default(),
                seq,
                client,
                sku,
                read,
                outcome,
                intended: at(intended_ns),
                started: at(started_ns),
                ended: at(end_ns),
                release_failed: rng.random_bool(0.03),
                lease,
            };
            (worker, c)
        })
        .collect()
}

fn boundaries(marks: &[Instant]) -> Arc<Boundaries> {
    let b = Arc::new(Boundaries::default());
    for m in marks {
        b.push(*m);
    }
    b
}

/// What one recorder makes of every completion, in end order.
fn reference(
    all: &[(usize, Completion)],
    start: Instant,
    marks: &[Instant],
    end: Instant,
) -> (Recording, Arc<Live>) {
    let live = Arc::new(Live::default());
    let mut one = Ingest::new(start, None, HORIZON, live.clone(), boundaries(marks));
    one.refresh();
    let mut sorted: Vec<&Completion> = all.iter().map(|(_, c)| c).collect();
    sorted.sort_by_key(|c| c.ended);
    for c in sorted {
        one.completion(c).unwrap();
    }
    (one.finish(end).unwrap(), live)
}

/// Through the wire: JSON and back, then decoded as worker `k`'s.
fn cross(i: Interval, start: Instant, k: usize) -> super::Batch {
    let line = serde_json::to_string(&i).unwrap();
    let back: Interval = serde_json::from_str(&line).unwrap();
    assert_eq!(back, i, "an interval crosses the wire unchanged");
    back.decode(start, k).unwrap()
}

fn assert_hist_eq(a: &Histogram<u64>, b: &Histogram<u64>, what: &str) {
    let buckets = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
        h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    };
    assert_eq!(
        (a.len(), a.min_nz(), a.max(), a.sigfig()),
        (b.len(), b.min_nz(), b.max(), b.sigfig()),
        "{what}"
    );
    assert_eq!(buckets(a), buckets(b), "{what}: bucket for bucket");
}

fn assert_recordings_eq(merged: &Recording, one: &Recording) {
    let (m, o) = (&merged.stats, &one.stats);
    for (i, name) in Outcome::CLASS_NAMES.iter().enumerate() {
        assert_hist_eq(&m.latency[i], &o.latency[i], &format!("latency {name}"));
    }
    assert_hist_eq(&m.service, &o.service, "service");
    assert_eq!(
        (
            m.failed,
            m.unknown,
            m.release_failed,
            m.lease_lost,
            m.last_sale
        ),
        (
            o.failed,
            o.unknown,
            o.release_failed,
            o.lease_lost,
            o.last_sale
        )
    );
    assert_eq!(m.timeline.len(), o.timeline.len());
    for (i, (a, b)) in m.timeline.iter().zip(&o.timeline).enumerate() {
        assert_eq!(a.counts, b.counts, "second {i}");
        assert_hist_eq(&a.latency, &b.latency, &format!("second {i}"));
    }
    let (mp, op) = (&merged.phases, &one.phases);
    assert_eq!(mp.boundaries, op.boundaries);
    assert_eq!(mp.segments.len(), op.segments.len());
    for (i, (a, b)) in mp.segments.iter().zip(&op.segments).enumerate() {
        assert_eq!(a.counts, b.counts, "segment {i}");
        assert_hist_eq(&a.latency, &b.latency, &format!("segment {i}"));
    }
    assert_eq!(mp.first_served, op.first_served);
    assert_eq!(mp.gaps, op.gaps);
    assert_eq!((mp.misfiled, op.misfiled), (0, 0));
    let (md, od) = (&merged.double_grants, &one.double_grants);
    assert_eq!((md.count, md.incidents), (od.count, od.incidents));
    assert_eq!(merged.coverage, one.coverage);
}

#[test]
fn merged_worker_intervals_equal_one_recorder_of_every_completion() {
    for seed in [1, 2, 3] {
        let start = Instant::now();
        let all = completions(seed, 20_000, start);
        let marks: Vec<Instant> = [1_500, 2_000, 2_400, 4_000]
            .map(|m| start + ms(m) + Duration::from_nanos(seed * 7))
            .to_vec();
        let end = start + ms(6_500);
        let (one, one_live) = reference(&all, start, &marks, end);

        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        // Each worker's completions in end order, a few swapped (buyers race to the channel).
        let mut queues: Vec<Vec<Completion>> = vec![Vec::new(); WORKERS];
        for (k, c) in &all {
            queues[*k].push(c.clone());
        }
        for q in &mut queues {
            q.sort_by_key(|c| c.ended);
            for _ in 0..q.len() / 50 {
                let i = rng.random_range(1..q.len());
                q.swap(i - 1, i);
            }
        }
        // Each boundary reaches each worker within LAG of being marked.
        let delays: Vec<Vec<Duration>> = (0..WORKERS)
            .map(|_| {
                marks
                    .iter()
                    .map(|_| Duration::from_nanos(rng.random_range(0..LAG.as_nanos() as u64)))
                    .collect()
            })
            .collect();
        let told: Vec<Arc<Boundaries>> = (0..WORKERS).map(|_| boundaries(&[])).collect();
        let mut folds: Vec<WorkerFold> = told
            .iter()
            .map(|b| WorkerFold::new(start, b.clone()))
            .collect();
        let live = Arc::new(Live::default());
        let mut merged = Ingest::new(start, None, HORIZON, live.clone(), boundaries(&marks));
        merged.refresh();
        let (mut pushed, mut delivered) = (vec![0; WORKERS], vec![0; WORKERS]);
        let mut now = start;
        let mut intervals = 0;
        while now < end {
            now += ms(rng.random_range(5..400));
            for k in 0..WORKERS {
                let q = &queues[k];
                while pushed[k] < q.len() && q[pushed[k]].ended <= now {
                    folds[k].push(q[pushed[k]].clone());
                    pushed[k] += 1;
                }
                while delivered[k] < marks.len()
                    && marks[delivered[k]] + delays[k][delivered[k]] <= now
                {
                    told[k].push(marks[delivered[k]]);
                    delivered[k] += 1;
                }
                // Flushed at arbitrary points.
                if rng.random_bool(0.5) {
                    merged.batch(cross(folds[k].flush(now), start, k)).unwrap();
                    intervals += 1;
                }
            }
        }
        for (k, fold) in folds.iter_mut().enumerate() {
            assert_eq!(pushed[k], queues[k].len());
            merged.batch(cross(fold.finish(end), start, k)).unwrap();
        }
        assert!(intervals > 50, "{intervals} intervals");
        let merged = merged.finish(end).unwrap();

        assert_recordings_eq(&merged, &one);
        // The scenario has what it claims.
        assert_eq!(merged.stats.attempts(), 20_000);
        assert!(
            Outcome::CLASS_NAMES
                .iter()
                .enumerate()
                .all(|(i, _)| merged.stats.count(i) > 0)
        );
        assert!(
            merged.double_grants.count > 100,
            "{:?}",
            merged.double_grants.count
        );
        let gaps = &merged.phases.gaps;
        assert!(gaps.iter().any(|(a, b)| *b - *a >= ms(390)), "{gaps:?}");
        assert!(merged.phases.segments.iter().all(|s| s.attempts() > 0));
        use std::sync::atomic::Ordering::Relaxed;
        assert_eq!(live.attempts.load(Relaxed), one_live.attempts.load(Relaxed));
        assert_eq!(live.sold.load(Relaxed), one_live.sold.load(Relaxed));
    }
}

#[test]
fn a_boundary_that_reaches_a_worker_late_is_reported() {
    let start = Instant::now();
    let told = boundaries(&[]);
    let mut fold = WorkerFold::new(start, told.clone());
    // One sale every ms for 2 s.
    for m in 0..2_000 {
        let t = start + ms(m);
        fold.push(Completion {
            seq: m,
            ..Completion::fixture(Outcome::Sold, t, Duration::ZERO)
        });
    }
    let mark = start + ms(1_000);
    let late = fold.flush(start + ms(1_500)); // folds what ended by 1 250 ms
    assert_eq!(late.misfiled, 0, "not yet known");
    told.push(mark); // 500 ms after it was marked: 251 sales (1 000 ..= 1 250 ms) misfiled
    let rest = fold.finish(start + ms(2_500));
    assert_eq!(rest.misfiled, 251);

    let live = Arc::new(Live::default());
    let mut merged = Ingest::new(start, None, HORIZON, live, boundaries(&[mark]));
    merged.refresh();
    for i in [late, rest] {
        merged.batch(cross(i, start, 0)).unwrap();
    }
    let r = merged.finish(start + ms(2_500)).unwrap();
    assert_eq!(r.phases.misfiled, 251);
    // Filed as the worker knew them: 251 of the 1 000 after the boundary came before it.
    let counts: Vec<u64> = r.phases.segments.iter().map(|s| s.attempts()).collect();
    assert_eq!(counts, [1_251, 749]);
}

//! The harness's own hot paths, so a slower harness is caught like a slower lock:
//! recording one completion, merging two runs' statistics, the double-grant checker over a
//! million leases, and reading a history file back.
//!
//! `cargo bench -p lockbench` (criterion; reports in target/criterion/).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use lockbench::check::{DoubleGrantChecker, Mode};
use lockbench::record::{Completion, HistoryWriter, LeaseSpan, Outcome, Stats, read_history};

fn completion(start: Instant, i: u64) -> Completion {
    let t = start + Duration::from_micros(i * 500);
    Completion {
        ask: Default::default(),
        seq: i,
        client: (i % 64) as u32,
        sku: (i % 4) as u32,
        outcome: if i.is_multiple_of(10) {
            Outcome::SoldOut
        } else {
            Outcome::Sold
        },
        intended: t,
        started: t + Duration::from_micros(i % 700),
        ended: t + Duration::from_micros(2000 + (i * 7919) % 50_000),
        release_failed: false,
        read: false,
        lease: Some(LeaseSpan {
            key: format!("lockbench:lock:{}", i % 4),
            token: format!("0000beef-{i}"),
            fence: None,
            acquired: t + Duration::from_micros(800),
            released: t + Duration::from_micros(1800),
            lost: false,
            shared: false,
            loss: None,
        }),
    }
}

fn record(c: &mut Criterion) {
    let start = Instant::now();
    let events: Vec<Completion> = (0..10_000).map(|i| completion(start, i)).collect();
    let mut g = c.benchmark_group("record");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("10k completions into Stats", |b| {
        b.iter_batched(
            Stats::new,
            |mut stats| {
                for e in &events {
                    stats.record(black_box(e), start);
                }
                stats
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn merge(c: &mut Criterion) {
    let start = Instant::now();
    let mut a = Stats::new();
    let mut b = Stats::new();
    for i in 0..100_000 {
        a.record(&completion(start, i), start);
        b.record(&completion(start, i + 7), start);
    }
    c.bench_function(
        "merge two 100k-completion Stats (50 s timelines)",
        |bench| {
            bench.iter_batched(
                || a.clone(),
                |mut x| {
                    x.merge(black_box(&b));
                    x
                },
                BatchSize::LargeInput,
            )
        },
    );
}

fn double_grants(c: &mut Criterion) {
    const N: u64 = 1_000_000;
    let t0 = Instant::now();
    // 16 keys, back-to-back leases with a small overlap every 1000th: the checker's real shape.
    let leases: Vec<(String, String, Instant, Instant)> = (0..N)
        .map(|i| {
            let a = t0 + Duration::from_micros(i * 100);
            let len = if i.is_multiple_of(1000) { 1700 } else { 1500 };
            (
                format!("k{}", i % 16),
                format!("t{i}"),
                a,
                a + Duration::from_micros(len),
            )
        })
        .collect();
    let mut g = c.benchmark_group("double_grant");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N));
    g.bench_function("1M leases", |b| {
        b.iter(|| {
            let mut checker =
                DoubleGrantChecker::new(Duration::from_secs(5), Duration::from_secs(1));
            for (k, t, a, r) in &leases {
                checker.observe(k, t, (*a, *r), Mode::Exclusive, *r);
            }
            black_box(checker.finish())
        })
    });
    // Readers of a read–write lock: 4 keys, 5 ms leases, ~12 readers holding each key at once
    // (every pair overlapping, none a double grant). Must cost what exclusive leases cost.
    let shared: Vec<(String, String, Instant, Instant)> = (0..N)
        .map(|i| {
            let a = t0 + Duration::from_micros(i * 100);
            (
                format!("k{}", i % 4),
                format!("t{i}"),
                a,
                a + Duration::from_micros(5000),
            )
        })
        .collect();
    g.bench_function("1M shared leases, 12 readers per key at once", |b| {
        b.iter(|| {
            let mut checker =
                DoubleGrantChecker::new(Duration::from_secs(5), Duration::from_secs(1));
            for (k, t, a, r) in &shared {
                checker.observe(k, t, (*a, *r), Mode::Shared, *r);
            }
            let found = checker.finish();
            assert_eq!(found.count, 0);
            black_box(found)
        })
    });
    g.finish();
}

fn history(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");
    let start = Instant::now();
    let mut w = HistoryWriter::create(&path, start).expect("create history");
    const N: u64 = 100_000;
    for i in 0..N {
        w.write(&completion(start, i)).expect("write");
    }
    w.finish().expect("flush");
    let mut g = c.benchmark_group("history");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N));
    g.bench_function("parse 100k lines", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for line in read_history(&path).expect("open") {
                black_box(line.expect("valid line"));
                n += 1;
            }
            assert_eq!(n, N);
        })
    });
    g.finish();
}

criterion_group!(benches, record, merge, double_grants, history);
criterion_main!(benches);

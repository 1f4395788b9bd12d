//! The harness's own pipeline, without servers: the real run's wiring (plan → buyers, in this
//! process or in workers over the worker protocol, with the chaos runner beside them, each
//! attempt cut at its bound → recorder → audit → checker → summary and its files), run on the
//! in-memory sim ([`lockbench::sim`]) with one fault injected at a time. The checker must
//! catch exactly what was injected, and nothing when nothing was. These runs test lockbench,
//! never a lock.

use std::path::Path;
use std::time::{Duration, Instant};

use lockbench::chaos::ChaosPlan;
use lockbench::check::{LockVerdict, Mode, StoreVerdict};
use lockbench::record::pressure::Pressure;
use lockbench::record::{max_shared_holders, read_history};
use lockbench::report::Summary;
use lockbench::report::contend::Contend;
use lockbench::report::layout::JobLayout;
use lockbench::report::sweep::{self, Search, Slo, Sweep};
use lockbench::run::contend::{ContendOptions, contend_on};
use lockbench::run::job::{Ended, JobOptions, job_on};
use lockbench::run::sweep::{Probe, SweepOptions, sweep_on};
use lockbench::sim::{self, Sim, SimFault};
use lockbench::workload::Workload;
use tokio_util::sync::CancellationToken;

/// 4 buyers in a closed loop on `skus` SKUs, 120 attempts, 1 ms hold: contention on every key,
/// the stock sells out, and a run takes about a tenth of a second.
fn workload(skus: u32) -> Workload {
    let text = format!(
        "seed = 13\n\
         [inventory]\nskus = {skus}\nstock = 25\n\
         [load]\nmode = \"closed\"\nclients = 4\nduration = \"10s\"\nmax_attempts = 120\n\
         [critical_section]\nhold = \"1ms\"\n"
    );
    Workload::parse("pipeline.toml", &text, &[]).expect("valid workload")
}

/// Runs `sim` on `w` with results in `dir`.
async fn run_in(sim: Sim, w: &Workload, dir: &Path, history: bool) -> Summary {
    let opts = sim::options(w, dir.to_path_buf(), history);
    sim::run(sim, &opts).await.expect("the sim never fails")
}

/// A run's two verdicts, lock and store, and its headline.
fn verdicts(s: &Summary) -> (Option<LockVerdict>, StoreVerdict, &'static str) {
    (s.lock_verdict, s.store_verdict, s.headline())
}

async fn run(sim: Sim, skus: u32) -> Summary {
    let dir = tempfile::tempdir().expect("temp dir");
    let s = run_in(sim, &workload(skus), dir.path(), false).await;
    // The run wrote its results as a real one does.
    for f in ["summary.json", "latency.hlog", "timeline.csv"] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    s
}

#[tokio::test(flavor = "current_thread")]
async fn clean_sim_is_judged_safe() {
    let s = run(Sim::new(SimFault::None), 2).await;
    assert_eq!(s.attempts, 120);
    assert_eq!(
        (s.lock_verdict, s.store_verdict),
        (Some(LockVerdict::Held), StoreVerdict::Intact),
        "{s:#?}"
    );
    assert!(s.safe);
    assert_eq!(s.headline(), "safe");
    assert_eq!((s.double_grants, s.lease_lost, s.stuck_locks), (0, 0, 0));
    // Sold out exactly: every unit once, none twice.
    assert_eq!((s.audit.sold, s.audit.final_stock), (50, 0));
    assert_eq!(s.outcomes["sold"], 50);
}

#[tokio::test(flavor = "current_thread")]
async fn a_warm_up_sells_out_and_the_measured_load_starts_on_the_whole_stock_again() {
    let mut w = workload(2);
    // Far longer than selling out 50 units takes (4 buyers, 1 ms hold).
    w.load.warmup = std::time::Duration::from_millis(400);
    let dir = tempfile::tempdir().expect("temp dir");
    let s = run_in(Sim::new(SimFault::None), &w, dir.path(), false).await;
    // Only the measured load counts: its 120 attempts, and the whole stock sold once more
    // (without the store prepared again, everything would read sold out).
    assert_eq!(s.attempts, 120);
    assert_eq!(
        (s.audit.sold, s.audit.final_stock),
        (50, 0),
        "{:?}",
        s.audit
    );
    assert_eq!(s.outcomes["sold"], 50);
    assert!(s.safe);
    assert_eq!(s.workload["load"]["warmup"], "400ms");
}

#[tokio::test(flavor = "current_thread")]
async fn grant_twice_breaks_the_lock_and_corrupts_the_store() {
    let s = run(Sim::new(SimFault::GrantTwice { every: 5 }), 1).await;
    assert_eq!(s.lock_verdict, Some(LockVerdict::Broken), "{s:#?}");
    assert_eq!(s.store_verdict, StoreVerdict::Corrupted);
    assert!(s.double_grant_incidents > 0 && s.double_grants >= s.double_grant_incidents);
    // Two holders read the same stock: one decrement vanished, and the sold-out store sold
    // more than it had.
    assert!(
        s.audit.lost_updates > 0 && s.audit.oversell > 0,
        "{:?}",
        s.audit
    );
    // Nothing expired: the lock never knew it let two in.
    assert_eq!((s.lease_lost, s.stuck_locks), (0, 0));
    assert!(!s.safe);
    assert_eq!(s.headline(), "UNSAFE");
}

#[tokio::test(flavor = "current_thread")]
async fn early_expiry_is_a_lost_lease_and_a_double_grant() {
    let s = run(Sim::new(SimFault::ExpireEarly { every: 7 }), 1).await;
    assert_eq!(s.lock_verdict, Some(LockVerdict::Broken), "{s:#?}");
    assert!(s.lease_lost > 0);
    assert!(s.double_grant_incidents > 0, "the next waiter got the key");
    assert_eq!(s.store_verdict, StoreVerdict::Corrupted);
    assert!(s.audit.lost_updates > 0);
    assert_eq!(s.stuck_locks, 0);
    assert_eq!(s.headline(), "UNSAFE");
}

#[tokio::test(flavor = "current_thread")]
async fn a_lost_write_corrupts_the_store_while_the_lock_holds() {
    let s = run(Sim::new(SimFault::LoseWrite { every: 4 }), 1).await;
    assert_eq!(s.lock_verdict, Some(LockVerdict::Held), "{s:#?}");
    assert_eq!((s.double_grants, s.lease_lost), (0, 0));
    assert_eq!(s.store_verdict, StoreVerdict::Corrupted);
    assert!(s.audit.lost_updates > 0 && s.audit.inconsistent_skus == 1);
    assert!(!s.safe);
    assert_eq!(s.headline(), "UNSAFE");
}

#[tokio::test(flavor = "current_thread")]
async fn controls_read_caught_or_not_caught_never_safe() {
    let no_lock = run(Sim::new(SimFault::NoLock).control(), 1).await;
    assert_eq!(no_lock.lock_verdict, None, "no lock, no lock verdict");
    assert_eq!(no_lock.store_verdict, StoreVerdict::Corrupted);
    assert!(!no_lock.claims_safety);
    assert_eq!(no_lock.headline(), "caught (control)");

    let broken = run(Sim::new(SimFault::GrantTwice { every: 5 }).control(), 1).await;
    assert_eq!(broken.headline(), "caught (control)");

    // A control the checker saw nothing wrong with is reported as such, not as safe.
    let clean = run(Sim::new(SimFault::None).control(), 1).await;
    assert!(clean.safe);
    assert_eq!(clean.headline(), "not caught (control)");
}

#[tokio::test(flavor = "current_thread")]
async fn the_history_holds_every_attempt_and_its_overlapping_leases() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");
    let s = run_in(
        Sim::new(SimFault::GrantTwice { every: 5 }),
        &workload(1),
        dir.path(),
        true,
    )
    .await;
    let lines: Vec<_> = read_history(&path)
        .expect("history written")
        .collect::<Result<_, _>>()
        .expect("every line parses");
    assert_eq!(lines.len() as u64, s.attempts);
    let leases: Vec<_> = lines.iter().filter_map(|l| l.lease.as_ref()).collect();
    assert_eq!(leases.len(), lines.len(), "every attempt held a lease");
    // The streaming checker's overlaps, found again by brute force in the file. Times there
    // are whole µs, so an overlap shorter than 1 µs may vanish: at most as many.
    let mut pairs = 0;
    for (i, a) in leases.iter().enumerate() {
        for b in &leases[i + 1..] {
            let overlap = a.acquired_us.max(b.acquired_us) < a.released_us.min(b.released_us);
            pairs += u64::from(a.key == b.key && overlap);
        }
    }
    assert!(
        pairs > 0 && pairs <= s.double_grants,
        "{pairs} vs {}",
        s.double_grants
    );
}

/// [`workload`] with 90% reads: 8 buyers, 400 attempts on one SKU with stock to spare, so
/// writers keep writing among the readers all run long.
fn read_workload() -> Workload {
    let text = "seed = 13\n\
         [inventory]\nskus = 1\nstock = 1000\n\
         [load]\nmode = \"closed\"\nclients = 8\nduration = \"10s\"\nmax_attempts = 400\n\
         read_fraction = 0.9\n\
         [critical_section]\nhold = \"1ms\"\n";
    Workload::parse("reads.toml", text, &[]).expect("valid workload")
}

/// Runs `sim` on [`read_workload`]; returns the summary and the most readers that held the
/// key at once (from the history).
async fn run_reads(sim: Sim) -> (Summary, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("history.jsonl");
    let s = run_in(sim, &read_workload(), dir.path(), true).await;
    let lines: Vec<_> = read_history(&path)
        .expect("history written")
        .collect::<Result<_, _>>()
        .expect("every line parses");
    // Every read is marked, and every answered read carries the stock it saw.
    let reads = lines.iter().filter(|l| l.read).count() as u64;
    assert!(
        reads > 300 && reads < s.attempts,
        "{reads} of {}",
        s.attempts
    );
    for l in lines
        .iter()
        .filter(|l| l.outcome == "read" || l.outcome == "torn_read")
    {
        assert!(l.read && l.stock.is_some(), "{l:?}");
        assert_eq!(l.stock_later.is_some(), l.outcome == "torn_read", "{l:?}");
    }
    (s, max_shared_holders(&path).expect("history readable"))
}

/// The reads every read-heavy run must show: answered, as many as the history marked.
fn assert_reads_answered(s: &Summary) {
    assert_eq!(s.reads, s.outcomes["read"] + s.outcomes["torn_read"]);
    assert!(s.reads > 300, "{:?}", s.outcomes);
    assert!(
        s.outcomes["sold"] > 10,
        "writers wrote too: {:?}",
        s.outcomes
    );
    assert!(s.throughput.reads_per_s > 0.0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_read_write_lock_lets_readers_share_and_is_judged_safe() {
    let (s, shared) = run_reads(Sim::new(SimFault::None).rwlock()).await;
    assert_reads_answered(&s);
    assert!(
        shared > 1,
        "readers held the key together: {shared} at most"
    );
    assert_eq!(
        (s.double_grants, s.torn_reads, s.lease_lost),
        (0, 0, 0),
        "{s:#?}"
    );
    assert_eq!(
        verdicts(&s),
        (Some(LockVerdict::Held), StoreVerdict::Intact, "safe"),
        "{s:#?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_plain_lock_serves_reads_exclusively_and_is_judged_safe() {
    let (s, shared) = run_reads(Sim::new(SimFault::None)).await;
    assert_reads_answered(&s);
    assert_eq!(shared, 0, "a plain lock grants no shared lease");
    assert_eq!((s.double_grants, s.torn_reads), (0, 0), "{s:#?}");
    assert_eq!(s.headline(), "safe");
}

#[tokio::test(flavor = "current_thread")]
async fn a_reader_that_ignores_writers_is_caught_by_overlaps_and_torn_reads() {
    let leaky = Sim::new(SimFault::ReaderIgnoresWriters { every: 1 }).control();
    let (s, _) = run_reads(leaky).await;
    assert_reads_answered(&s);
    assert!(
        s.torn_reads > 0,
        "a writer changed the stock under a read lock"
    );
    assert!(s.double_grant_incidents > 0);
    assert!(
        s.double_grant_examples
            .iter()
            .any(|o| o.first_mode != o.second_mode),
        "reader–writer pairs among the examples: {:?}",
        s.double_grant_examples
    );
    assert!(
        s.double_grant_examples
            .iter()
            .all(|o| (o.first_mode, o.second_mode) != (Mode::Shared, Mode::Shared)),
        "reader–reader pairs are never double grants"
    );
    // Reads write nothing: the lock broke, the store is intact.
    assert_eq!(
        verdicts(&s),
        (
            Some(LockVerdict::Broken),
            StoreVerdict::Intact,
            "caught (control)"
        ),
        "{s:#?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_small_run_shows_the_maximum_where_its_count_cannot_bound_a_percentile() {
    // 120 arrivals: enough for a p50 (5), too few for a p99 (299) or a p99.9 (2995).
    let s = run(Sim::new(SimFault::None), 2).await;
    let l = &s.latency_us;
    assert_eq!(l.count, 120);
    let ci = l.ci95.expect("intervals of a run with samples");
    assert!(ci.p50.0 <= l.p50 && l.p50 <= ci.p50.1.unwrap(), "{ci:?}");
    assert_eq!((ci.p99.1, ci.p999.1), (None, None), "no upper end: {ci:?}");

    let mut out = Vec::new();
    lockbench::report::print_table(&mut out, std::slice::from_ref(&s)).unwrap();
    let table = String::from_utf8(out).unwrap();
    let row = table.lines().nth(2).expect("one row");
    let ms = lockbench::report::format::ms_exact;
    assert!(row.contains(&format!("{} (n=120)", ms(l.p50))), "{table}");
    assert_eq!(
        row.matches(&format!("{} (max of 120)", ms(l.max))).count(),
        2,
        "{table}"
    );
    assert!(table.contains("note: (max of N)"), "{table}");
}

/// The chaos runner runs beside the buyers as in a real run: a `command` fault (the kind that
/// needs no server) is injected and healed while the load runs, and recorded in the summary.
#[tokio::test(flavor = "current_thread")]
async fn the_chaos_runner_injects_and_heals_beside_the_buyers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = "seed = 13\n\
         [inventory]\nskus = 2\nstock = 1000\n\
         [load]\nmode = \"closed\"\nclients = 4\nduration = \"400ms\"\n\
         [critical_section]\nhold = \"1ms\"\n";
    let w = Workload::parse("chaos.toml", text, &[]).expect("valid workload");
    let marks = dir.path().join("marks");
    let chaos = format!(
        "[[fault]]\nkind = \"command\"\nat = \"100ms\"\nduration = \"100ms\"\n\
         run = \"echo injected >> {m}\"\nheal = \"echo healed >> {m}\"\n",
        m = marks.display()
    );
    let mut opts = sim::options(&w, dir.path().join("out"), false);
    opts.chaos = Some(ChaosPlan::parse("c.toml", &chaos, &w).expect("valid chaos file"));
    let s = sim::run(Sim::new(SimFault::None), &opts)
        .await
        .expect("runs");
    assert_eq!(
        std::fs::read_to_string(&marks).expect("the fault ran"),
        "injected\nhealed\n"
    );
    assert_eq!(s.faults.len(), 1, "{:?}", s.faults);
    let f = &s.faults[0];
    assert!(f.note.is_none(), "{f:?}");
    let (at, healed) = (f.started_s.expect("injected"), f.healed_s.expect("healed"));
    assert!(0.1 <= at && at < healed, "{at} .. {healed}");
    assert!(s.safe && s.attempts > 0, "{s:#?}");
}

/// An acquire that never answers is cut at the strategy's bound, as a real run's driver cuts
/// it: its outcome is unknown, never a sale or a lock timeout, and the run ends.
#[tokio::test(flavor = "current_thread")]
async fn an_attempt_that_never_answers_is_cut_at_its_bound_as_unknown() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = "seed = 13\n\
         [inventory]\nskus = 2\nstock = 25\n\
         [load]\nmode = \"closed\"\nclients = 4\nduration = \"10s\"\nmax_attempts = 120\n\
         timeout = \"50ms\"\n\
         [lock]\nacquire_timeout = \"150ms\"\n\
         [critical_section]\nhold = \"1ms\"\n";
    let w = Workload::parse("silent.toml", text, &[]).expect("valid workload");
    let s = run_in(
        Sim::new(SimFault::Silent { every: 40 }),
        &w,
        dir.path(),
        false,
    )
    .await;
    assert_eq!(s.attempts, 120, "{:?}", s.outcomes);
    assert_eq!(
        s.outcomes["unknown"], 3,
        "the 40th, 80th and 120th: {:?}",
        s.outcomes
    );
    assert_eq!(
        s.outcomes["sold"] + s.outcomes["sold_out"],
        117,
        "{:?}",
        s.outcomes
    );
    assert_eq!((s.double_grants, s.audit.oversell), (0, 0));
}

/// The driver on the sim with [buyers]: every attempt sent to the recorder, in one list.
/// Also returns the load's start.
async fn drive_sim(
    sim: Sim,
    w: &Workload,
) -> (
    lockbench::record::DriveReport,
    Vec<lockbench::record::Completion>,
    Instant,
) {
    let built = sim.build(w);
    lockbench::run::prepare(&built, w)
        .await
        .expect("the sim prepares");
    let (tx, mut rx) = tokio::sync::mpsc::channel(4096);
    let cancel = CancellationToken::new();
    let start = Instant::now();
    let report = lockbench::clients::driver::drive(built.strategy, w, start, tx, cancel).await;
    let mut all = Vec::new();
    while let Some(c) = rx.recv().await {
        all.push(c);
    }
    (report, all, start)
}

/// The generator's lag is measured on arrivals released to idle buyers in the second after
/// the surge starts: a sale at 2,000/s on a sim that answers at once leaves most buyers idle,
/// so most of that second's arrivals are measured, and none outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generators_lag_is_measured_in_the_second_after_the_surge() {
    let text = "seed = 13\n[inventory]\nskus = 2\nstock = 100000\n\
         [load]\nrate = 100\nclients = 64\nduration = \"2s\"\nshape = \"sale\"\n\
         start = \"500ms\"\npeak = 2000\nhalf_life = \"10s\"\n\
         [critical_section]\nhold = \"0ms\"\n";
    let w = Workload::parse("lag.toml", text, &[]).expect("valid workload");
    let (report, all, start) = drive_sim(Sim::new(SimFault::NoLock), &w).await;
    let lag = report.generator_lag;
    let window = all
        .iter()
        .filter(|c| (500_000..1_500_000).contains(&(c.intended - start).as_micros()))
        .count() as u64;
    // ~2,000 arrivals in the window (1,950 expected from the curve).
    assert!(window > 1_500, "{window}");
    assert!(lag.n <= window && lag.n * 2 > window, "{lag:?} of {window}");
    assert!(
        lag.p50_us <= lag.p99_us && lag.p99_us <= lag.max_us,
        "{lag:?}"
    );
}

/// The end of the load is the harness's, not the buyers': arrivals due before it that waited
/// for a free buyer are still started during the drain, and only those still waiting after it
/// count as never started. 2 buyers holding 10 ms each serve at most 200/s of the 250/s offered
/// for 0.4 s, so at least 20 of the 100 arrivals wait at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrivals_waiting_at_the_end_are_started_in_the_drain_and_only_then_count_unstarted() {
    let with = |drain: &str| {
        let text = format!(
            "seed = 13\n[inventory]\nskus = 2\nstock = 100000\n\
             [load]\nrate = 250\narrival = \"constant\"\nclients = 2\nduration = \"400ms\"\n\
             drain = \"{drain}\"\n[critical_section]\nhold = \"10ms\"\n"
        );
        Workload::parse("drain.toml", &text, &[]).expect("valid workload")
    };
    let (cut, cut_all, _) = drive_sim(Sim::new(SimFault::NoLock), &with("0s")).await;
    assert!(cut.not_started >= 20, "no drain: {}", cut.not_started);
    let (drained, all, start) = drive_sim(Sim::new(SimFault::NoLock), &with("5s")).await;
    assert_eq!(drained.not_started, 0, "{} unstarted", drained.not_started);
    // The same schedule: every arrival the cut run left unstarted was served.
    assert_eq!(all.len() as u64, cut_all.len() as u64 + cut.not_started);
    let end = start + std::time::Duration::from_millis(400);
    // Started after the end, their latency counts from their intended start, before it.
    let late: Vec<_> = all.iter().filter(|c| c.started > end).collect();
    assert!(late.len() >= 20, "{} started after the end", late.len());
    assert!(
        late.iter()
            .all(|c| c.intended < end && c.ended - c.intended > c.ended - c.started)
    );
    // A short drain starts some of them: the rest waited at least as long as it.
    let (short, all, start) = drive_sim(Sim::new(SimFault::NoLock), &with("30ms")).await;
    let stop = start + std::time::Duration::from_millis(430);
    assert!(short.not_started > 0 && short.not_started < cut.not_started + 20);
    assert!(
        all.iter()
            .all(|c| c.started < stop + std::time::Duration::from_millis(50))
    );
}

/// A purchase that timed out is tried again once, at once, with the same Ask (buyer, request
/// id, units) by a buyer who retries; its number lies past the schedule's. The sim's silent
/// acquire times an attempt out at its bound.
#[tokio::test(flavor = "current_thread")]
async fn a_retry_after_a_timeout_asks_again_with_the_same_ask_once() {
    use lockbench::clients::driver::RETRY_SEQ;
    use lockbench::record::{ErrorKind, Outcome};
    let text = |share: f64| {
        format!(
            "seed = 13\n[inventory]\nskus = 2\nstock = 1000\n\
             [load]\nmode = \"closed\"\nclients = 4\nduration = \"10s\"\nmax_attempts = 120\n\
             timeout = \"50ms\"\n[lock]\nacquire_timeout = \"150ms\"\n\
             [critical_section]\nhold = \"1ms\"\n\
             [buyers]\ncount = 50\nquantity = \"1..3\"\nretry_after_timeout = {share}\n"
        )
    };
    let w = Workload::parse("retry.toml", &text(1.0), &[]).expect("valid workload");
    let (_, all, _) = drive_sim(Sim::new(SimFault::Silent { every: 40 }), &w).await;
    let timed_out = |c: &&lockbench::record::Completion| {
        c.seq < RETRY_SEQ && c.outcome == Outcome::Unknown(ErrorKind::Timeout)
    };
    let firsts: Vec<_> = all.iter().filter(timed_out).collect();
    let retries: Vec<_> = all.iter().filter(|c| c.seq >= RETRY_SEQ).collect();
    assert_eq!(all.len() - retries.len(), 120);
    assert!(!firsts.is_empty(), "the sim's silent acquires time out");
    assert_eq!(
        retries.len(),
        firsts.len(),
        "one retry per timed-out request"
    );
    for r in &retries {
        let first = firsts
            .iter()
            .find(|c| c.seq == r.seq - RETRY_SEQ)
            .expect("a retry follows a timeout");
        assert_eq!(
            (r.ask, r.sku, r.client),
            (first.ask, first.sku, first.client)
        );
        assert!(
            r.started >= first.ended && r.intended >= first.ended,
            "at once, after it"
        );
    }
    // Nobody retries at share 0.
    let w = Workload::parse("retry.toml", &text(0.0), &[]).expect("valid workload");
    let (_, all, _) = drive_sim(Sim::new(SimFault::Silent { every: 40 }), &w).await;
    assert!(all.iter().all(|c| c.seq < RETRY_SEQ) && all.len() == 120);
}

/// The plan's checks hold for the sim too: an option a run without servers cannot honour is
/// refused before anything runs.
#[tokio::test(flavor = "current_thread")]
async fn the_sim_goes_through_the_plan_and_its_checks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut opts = sim::options(&workload(1), dir.path().join("out"), false);
    opts.workers = 2;
    let err = sim::run(Sim::new(SimFault::None), &opts)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("worker processes"), "{err}");
    assert!(!dir.path().join("out").exists(), "nothing ran");
}

/// `opts` with its buyers in two workers that are tasks of this process: the same messages,
/// part split, forwarding, fault boundaries and stop as worker processes, over in-memory pipes.
fn in_two_workers(mut opts: lockbench::run::RunOptions) -> lockbench::run::RunOptions {
    opts.workers = 2;
    opts.worker_link = lockbench::clients::WorkerLink::InProcess;
    opts
}

/// Through workers, the load is split and merged back whole: every attempt counted once, the
/// stock sold out exactly, each worker's clock in the summary.
#[tokio::test(flavor = "current_thread")]
async fn workers_split_the_load_and_their_results_merge_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = in_two_workers(sim::options(&workload(2), dir.path().to_path_buf(), true));
    let s = sim::run(Sim::new(SimFault::None), &opts)
        .await
        .expect("runs");
    assert_eq!(s.attempts, 120, "{:?}", s.outcomes);
    assert_eq!(s.clocks.len(), 2, "{:?}", s.clocks);
    assert_eq!((s.audit.sold, s.audit.final_stock), (50, 0));
    assert_eq!(s.outcomes["sold"], 50);
    assert!(s.safe, "{s:#?}");
    let path = dir.path().join("history.jsonl");
    assert_eq!(read_history(&path).expect("history").count(), 120);
}

/// A lapse between two workers' buyers is caught as one within a process is: the checker sees
/// both workers' leases on one clock.
#[tokio::test(flavor = "current_thread")]
async fn workers_double_grants_are_caught_across_workers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = in_two_workers(sim::options(&workload(1), dir.path().to_path_buf(), false));
    let s = sim::run(Sim::new(SimFault::GrantTwice { every: 3 }), &opts)
        .await
        .expect("runs");
    assert!(s.double_grants > 0, "{s:#?}");
    assert_eq!(s.lock_verdict, Some(LockVerdict::Broken), "{s:#?}");
    assert!(!s.safe);
}

/// The chaos runner's fault reaches workers as a boundary, and an attempt that never answers
/// is cut at its bound inside a worker as in the coordinator: unknown, and the run ends.
#[tokio::test(flavor = "current_thread")]
async fn workers_take_the_faults_boundaries_and_cut_silent_attempts_at_their_bound() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = "seed = 13\n\
         [inventory]\nskus = 2\nstock = 1000\n\
         [load]\nmode = \"closed\"\nclients = 4\nduration = \"250ms\"\n\
         timeout = \"50ms\"\n\
         [lock]\nacquire_timeout = \"150ms\"\n\
         [critical_section]\nhold = \"1ms\"\n";
    let w = Workload::parse("chaos.toml", text, &[]).expect("valid workload");
    let marks = dir.path().join("marks");
    let chaos = format!(
        "[[fault]]\nkind = \"command\"\nat = \"60ms\"\nduration = \"80ms\"\n\
         run = \"echo injected >> {m}\"\nheal = \"echo healed >> {m}\"\n",
        m = marks.display()
    );
    let mut opts = in_two_workers(sim::options(&w, dir.path().join("out"), false));
    opts.chaos = Some(ChaosPlan::parse("c.toml", &chaos, &w).expect("valid chaos file"));
    let s = sim::run(Sim::new(SimFault::Silent { every: 25 }), &opts)
        .await
        .expect("runs");
    assert_eq!(
        std::fs::read_to_string(&marks).expect("the fault ran"),
        "injected\nhealed\n"
    );
    let f = &s.faults[0];
    assert!(f.note.is_none() && f.healed_s.is_some(), "{f:?}");
    // Before, during and after the fault: the workers' results fell into all three phases.
    assert_eq!(s.phases.len(), 3, "{:?}", s.phases);
    assert!(s.phases.iter().all(|p| p.attempts > 0), "{:?}", s.phases);
    assert!(s.outcomes["unknown"] > 0, "{:?}", s.outcomes);
    assert_eq!(s.outcomes.get("lock_timeout").copied().unwrap_or(0), 0);
    assert_eq!((s.double_grants, s.audit.oversell), (0, 0));
}

/// The summary.json of the run in `dir`.
fn read_summary(dir: &Path) -> Summary {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    serde_json::from_str(&text).expect("a summary")
}

/// A sweep's options on the sim: `search`, SLO p99 ≤ 250 ms (the sim answers in
/// microseconds; a loaded machine's scheduling may add tens of ms), trials of 50–200 ms,
/// results in `out`.
fn sim_sweep_options(w: &Workload, search: Search, out: &Path) -> SweepOptions {
    SweepOptions {
        strategies: vec!["sim".into()],
        workload: w.clone(),
        workload_file: "sim".into(),
        // A healthy sim serves in microseconds; a generous target keeps a stall of the busy
        // test machine (hundreds of ms under a CPU hog) from reading as the sim's miss.
        slo: Slo {
            quantile: 0.99,
            latency_ms: 2000.0,
            min_served: 0.99,
        },
        search: Search {
            trial_s: 0.05,
            max_trial_s: 0.2,
            revisit: false,
            ..search
        },
        out: out.to_path_buf(),
        servers: Default::default(),
        probe: Probe::Machine,
    }
}

/// Open-loop buyers on 64 SKUs with a 1 ms hold: a sim lock serves far more than the rates
/// the sweeps below offer. `timeout`: a call's and an acquire's (short, so an attempt that
/// never answers is cut soon; well over a loaded machine's stalls, so a healthy sim is never
/// cut by one: at a load of 10 on 2 cores, 20 ms left 1 of 322 arrivals unserved).
fn sweep_workload(timeout: &str) -> Workload {
    let text = format!(
        "seed = 13\n\
         [inventory]\nskus = 64\nstock = 100000\n\
         [load]\nclients = 64\nrate = 100.0\nduration = \"1s\"\ntimeout = \"{timeout}\"\n\
         [lock]\nacquire_timeout = \"{timeout}\"\n\
         [critical_section]\nhold = \"1ms\"\n"
    );
    Workload::parse("sweep.toml", &text, &[]).expect("valid workload")
}

/// A sweep is a loop over one session: the sim's healthy lock passes the rates it is offered,
/// each step judged on the histograms its trials returned in memory, and every trial writes
/// the folder a real one does.
#[tokio::test(flavor = "current_thread")]
async fn a_sweep_on_a_healthy_sim_passes_a_low_rate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let search = Search {
        start_per_s: Some(2000.0),
        min_per_s: 500.0,
        max_per_s: 4000.0,
        factor: 2.0,
        budget_s: 3.0,
        step_budget_s: 1.0,
        ..sweep::DEFAULTS
    };
    let opts = sim_sweep_options(&sweep_workload("1500ms"), search, dir.path());
    let mut log = Vec::new();
    let source = sim::source(Sim::new(SimFault::None));
    let round = Duration::from_millis(20);
    let began = Instant::now();
    let s = sweep_on(&opts, &source, round, &CancellationToken::new(), &mut log)
        .await
        .expect("the sweep runs");
    let took = began.elapsed();
    let log = String::from_utf8(log).unwrap();
    let e = s.entry("sim").expect("the sim's entry");
    assert_eq!(e.error, None, "{log}");
    assert_eq!(e.bound, sweep::Bound::AtLeastMax, "{log}");
    assert_eq!(e.capacity_per_s, 4000.0, "{log}");
    assert!(e.steps.iter().all(|s| s.passed && s.safe), "{log}");
    // The warm-up went through the session too, and is not a step.
    assert!(log.contains("round(s) of 0.02 s in a closed loop"), "{log}");
    assert!(
        dir.path()
            .join("sim/warm-up/round-1/summary.json")
            .is_file()
    );
    for t in e.steps.iter().flat_map(|s| &s.trials) {
        // Counted from memory, as the files say: every scheduled arrival of the trial.
        let saved = read_summary(&dir.path().join(&t.dir));
        assert_eq!(t.arrivals, saved.attempts + saved.not_started, "{}", t.dir);
        assert!(dir.path().join(&t.dir).join("latency.hlog").is_file());
        assert!(t.load_s >= 0.05 && t.load_s <= 0.2, "{}", t.load_s);
    }
    assert_eq!(Sweep::read(dir.path()).unwrap().entries.len(), 1);
    eprintln!("healthy sim sweep: {took:?}");
}

/// A rate that failed while every CPU was busy bounds the machine, not the lock: recorded as
/// the machine's limit in sweep.json and said under the table. A rate that failed with CPU to
/// spare is not, nor a saturated rate that passed (the readings are fixed: the test machine's
/// own load varies). Found intervals opening above are `report::sweep`'s unit tests.
#[tokio::test(flavor = "current_thread")]
async fn a_rate_that_failed_on_a_saturated_machine_is_marked_machine_bound_and_not_otherwise() {
    let search = Search {
        start_per_s: Some(1000.0),
        min_per_s: 1000.0,
        max_per_s: 1000.0,
        budget_s: 3.0,
        step_budget_s: 2.0,
        max_trial_s: 0.05,
        ..sweep::DEFAULTS
    };
    let reading = |busy: f64| Pressure {
        cpu_busy: busy,
        cpu_harness: busy / 2.0,
        cpu_servers: busy / 2.0,
        measured: true,
        ..Pressure::default()
    };
    let cases = [
        (SimFault::Silent { every: 1 }, 0.97, true),
        (SimFault::Silent { every: 1 }, 0.6, false),
        (SimFault::None, 0.97, false),
    ];
    for (fault, busy, marked) in cases {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut opts = sim_sweep_options(&sweep_workload("20ms"), search, dir.path());
        opts.probe = Probe::Fixed(reading(busy));
        let (mut log, mut table) = (Vec::new(), Vec::new());
        let source = sim::source(Sim::new(fault));
        let s = sweep_on(
            &opts,
            &source,
            Duration::ZERO,
            &CancellationToken::new(),
            &mut log,
        )
        .await
        .expect("the sweep runs");
        let log = String::from_utf8(log).unwrap();
        let e = s.entry("sim").expect("the sim's entry");
        let limit = e.machine_limit.map(|m| (m.at_per_s, m.busy));
        assert_eq!(limit, marked.then_some((1000.0, busy)), "{log}");
        let saved = Sweep::read(dir.path()).expect("sweep.json");
        assert_eq!(saved.entries[0].machine_limit, e.machine_limit);
        sweep::print_capacity(&mut table, &s).unwrap();
        let table = String::from_utf8(table).unwrap();
        assert_eq!(
            table.contains("sim: machine-bound: at 1000/s the CPUs were 97% busy"),
            marked,
            "{table}"
        );
    }
}

/// A lock that never answers sustains nothing: every arrival is cut at its bound as unknown,
/// the lowest rate fails on two trials, and the capacity is below it.
#[tokio::test(flavor = "current_thread")]
async fn a_sweep_on_a_sim_that_never_answers_finds_no_capacity() {
    let dir = tempfile::tempdir().expect("temp dir");
    let search = Search {
        start_per_s: Some(1000.0),
        min_per_s: 1000.0,
        max_per_s: 4000.0,
        budget_s: 3.0,
        step_budget_s: 2.0,
        ..sweep::DEFAULTS
    };
    let mut opts = sim_sweep_options(&sweep_workload("20ms"), search, dir.path());
    opts.search.max_trial_s = 0.05;
    let mut log = Vec::new();
    let source = sim::source(Sim::new(SimFault::Silent { every: 1 }));
    let began = Instant::now();
    let s = sweep_on(
        &opts,
        &source,
        Duration::ZERO,
        &CancellationToken::new(),
        &mut log,
    )
    .await
    .expect("the sweep runs");
    let took = began.elapsed();
    let log = String::from_utf8(log).unwrap();
    let e = s.entry("sim").expect("the sim's entry");
    assert_eq!(e.error, None, "{log}");
    assert_eq!(e.bound, sweep::Bound::BelowLowest, "{log}");
    assert_eq!(
        (e.capacity_per_s, e.first_failing_per_s),
        (0.0, Some(1000.0))
    );
    let step = &e.steps[0];
    // A trial the machine's load spoiled is left out and run again (seen once beside a full
    // build): the fail must be seen twice in the trials kept.
    let kept: Vec<_> = step
        .trials
        .iter()
        .filter(|t| t.discarded.is_none())
        .collect();
    assert_eq!(kept.len(), 2, "a fail is seen twice: {log}");
    assert!(
        kept.iter()
            .all(|t| t.unserved == t.arrivals && t.arrivals > 0)
    );
    assert_eq!(step.summary.outcomes["unknown"], step.summary.attempts);
    eprintln!("silent sim sweep: {took:?}");
}

/// Contend is a loop over sessions, one per strategy: one level per level asked for, each
/// with its trials counted from the grants the recorder saw.
#[tokio::test(flavor = "current_thread")]
async fn contend_on_the_sim_measures_every_level_it_was_asked_for() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = ContendOptions {
        strategies: vec!["sim".into()],
        workload: workload(1),
        workload_file: "sim".into(),
        levels: vec![1, 2],
        trials: 2,
        trial: Duration::from_millis(60),
        warm_up: Duration::from_millis(30),
        budget: Duration::from_secs(10),
        out: dir.path().to_path_buf(),
        servers: Default::default(),
        lock_free_sales: false,
    };
    let mut log = Vec::new();
    let source = sim::source(Sim::new(SimFault::None));
    let began = Instant::now();
    let c = contend_on(&opts, &source, &CancellationToken::new(), &mut log)
        .await
        .expect("contend runs");
    let took = began.elapsed();
    let log = String::from_utf8(log).unwrap();
    assert_eq!(c.entries.len(), 1);
    let e = &c.entries[0];
    assert_eq!(e.error, None, "{log}");
    let counts: Vec<u32> = e.levels.iter().map(|l| l.contenders).collect();
    assert_eq!(counts, [1, 2], "{log}");
    for l in &e.levels {
        assert_eq!(l.trials.len(), 2, "N={}", l.contenders);
        let grants: u64 = l.trials.iter().map(|t| t.grants).sum();
        assert!(grants > 0 && l.acquire_count == grants, "{l:?}");
        assert!(
            l.trials.iter().all(|t| t.safe && t.grants_per_s > 0.0),
            "{l:?}"
        );
        for t in &l.trials {
            assert!(dir.path().join(&t.dir).join("summary.json").is_file());
        }
    }
    assert!(dir.path().join("sim/warm-up/summary.json").is_file());
    assert_eq!(Contend::read(dir.path()).unwrap().entries.len(), 1);
    eprintln!("sim contend: {took:?}");
}

/// A run with `[buyers]` writes the sale's keys (docs/sale.md) and a steady run does not: its
/// summary.json stays as it was. The sim sells both SKUs out, so each has a sell-out time and
/// nothing is undersold; with worker processes the figures folded from attempts say they were
/// not measured.
#[tokio::test(flavor = "current_thread")]
async fn a_run_with_buyers_writes_the_sale_and_a_steady_run_does_not() {
    let json = |dir: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
    };
    let steady = tempfile::tempdir().expect("temp dir");
    let s = run_in(Sim::new(SimFault::None), &workload(2), steady.path(), false).await;
    assert!(s.sale.is_none() && json(steady.path()).get("sale").is_none());

    let mut w = workload(2);
    w.buyers = Workload::parse("b.toml", "[buyers]\ncount = 1000\n", &[])
        .expect("valid")
        .buyers;
    let dir = tempfile::tempdir().expect("temp dir");
    run_in(Sim::new(SimFault::None), &w, dir.path(), false).await;
    let sale = &json(dir.path())["sale"];
    for key in [
        "sold_out_s",
        "limit_violations",
        "duplicate_orders",
        "undersell",
        "fcfs",
        "generator_lag_us",
        "phases",
        "sold_out_answer_us",
        "in_flight_peak",
        "refused_at_door",
    ] {
        assert!(sale.get(key).is_some(), "{key}: {sale:#}");
    }
    assert!(sale["sold_out_s"][0].as_f64().is_some() && sale["sold_out_s"][1].is_number());
    assert_eq!(
        (sale["undersell"].as_u64(), sale["hot_sold"].as_u64()),
        (Some(0), Some(25))
    );
    let fcfs = sale["fcfs"]["score"].as_f64().expect("an FCFS score");
    assert!((0.0..=1.0).contains(&fcfs), "{fcfs}");
    let peak = sale["in_flight_peak"].as_u64().unwrap();
    assert!((1..=4).contains(&peak), "4 closed-loop buyers: {peak}");
    let n = |phase: &str| {
        sale["phases"][phase]["latency_us"]["count"]
            .as_u64()
            .unwrap()
    };
    // A steady shape has no "before"; the hot SKU's sell-out splits the rest.
    assert_eq!((n("before"), n("surge") + n("after")), (0, 120), "{sale:#}");

    let workers = tempfile::tempdir().expect("temp dir");
    let opts = in_two_workers(sim::options(&w, workers.path().to_path_buf(), false));
    let s = sim::run(Sim::new(SimFault::None), &opts)
        .await
        .expect("runs");
    let sale = s.sale.expect("a sale");
    assert!(
        sale.figures.is_none() && sale.not_measured.is_some(),
        "{sale:?}"
    );
}

/// A job on the sim in `dir`, its knobs and files: the workload of [`sweep_workload`] (1.5 s
/// timeouts) on 32 SKUs (contended enough at the rates below that a lock granting twice is seen to), one
/// chaos scenario `command` (a fault that needs no server, injected 10 ms in for 20 ms,
/// marking `marks`), one sweep step at 16000/s of trials up to 25 ms (the 322 arrivals a pass
/// needs take 20 ms), a calm run of 20 ms,
/// chaos runs of 40 ms and a sale of 40 ms (its surge 5 ms in, 4000/s at its peak).
fn sim_job(dir: &Path) -> JobOptions {
    let workload_file = dir.join("job.toml");
    let text = "seed = 13\n\
         [inventory]\nskus = 32\nstock = 100000\n\
         [load]\nclients = 64\nrate = 100.0\nduration = \"1s\"\ntimeout = \"1500ms\"\n\
         [lock]\nacquire_timeout = \"1500ms\"\n\
         [critical_section]\nhold = \"1ms\"\n";
    std::fs::write(&workload_file, text).expect("workload written");
    // The sale part's: a surge 5 ms in, buyers who press twice, a hot SKU of 20.
    let sale_file = dir.join("sale.toml");
    let sale = "seed = 39\n\
         [inventory]\nskus = 2\nstock = 10\nhot_stock = 20\npopularity = \"zipf:1.1\"\n\
         [buyers]\ncount = 40\nlimit = 1\nresubmit = 0.3\n\
         [load]\nshape = \"sale\"\nrate = 100\nstart = \"5ms\"\nrise = \"5ms\"\npeak = 4000\n\
         half_life = \"10ms\"\ntail = 200\nduration = \"40ms\"\nclients = 16\n\
         timeout = \"1500ms\"\n[lock]\nacquire_timeout = \"1500ms\"\n\
         [critical_section]\nhold = \"1ms\"\n";
    std::fs::write(&sale_file, sale).expect("sale written");
    let scenario_dir = dir.join("chaos");
    std::fs::create_dir_all(&scenario_dir).expect("chaos folder");
    let marks = dir.join("marks");
    let chaos = format!(
        "[[fault]]\nkind = \"command\"\nat = \"10ms\"\nduration = \"20ms\"\n\
         run = \"echo injected >> {m}\"\nheal = \"echo healed >> {m}\"\n",
        m = marks.display()
    );
    std::fs::write(scenario_dir.join("command.toml"), chaos).expect("scenario written");
    let w = Workload::load(&workload_file, &[]).expect("valid workload");
    // A single rate, so each strategy's capacity is decided by one step.
    let search = Search {
        start_per_s: Some(16000.0),
        min_per_s: 16000.0,
        max_per_s: 16000.0,
        factor: 2.0,
        budget_s: 1.0,
        step_budget_s: 0.5,
        max_trial_s: 0.025,
        ..sweep::DEFAULTS
    };
    let sweep = sim_sweep_options(&w, search, &dir.join("job"));
    JobOptions {
        out: dir.join("job"),
        strategies: Some(vec!["sim".into(), "sim-control".into()]),
        workload_file,
        sale_workload: Some(sale_file),
        sale_scenarios: vec!["command".into()],
        sets: Vec::new(),
        slo: sweep.slo,
        search: sweep.search,
        chaos_share: 0.5,
        scenarios: vec!["command".into()],
        scenario_dir,
        calm_duration: "20ms".into(),
        chaos_duration: "40ms".into(),
        needs: None,
        servers: Default::default(),
    }
}

/// The offered rate a run's summary recorded.
fn offered(s: &Summary) -> f64 {
    s.workload["load"]["rate"].as_f64().expect("a rate")
}

/// The whole main job on the sim — sweep, calm, one chaos part, the report — in the folders
/// `JobLayout` names, each read back: the calm rate is the lowest safe capacity (the correct
/// sim's; the control never counts), each chaos run is offered its share of its own capacity,
/// and the chaos part's verdicts are the sims': the correct lock intact, the control that
/// grants twice caught.
#[tokio::test(flavor = "current_thread")]
async fn the_main_job_runs_on_the_sim_and_its_folders_read_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = sim_job(dir.path());
    let source = sim::sources(&[
        Sim::new(SimFault::None),
        Sim::new(SimFault::GrantTwice { every: 1 }).control(),
    ]);
    let (mut out, mut log) = (Vec::new(), Vec::new());
    let began = Instant::now();
    let ended = job_on(
        &opts,
        &source,
        Duration::ZERO,
        &CancellationToken::new(),
        &mut out,
        &mut log,
    )
    .await
    .expect("the job runs");
    let took = began.elapsed();
    let (out, log) = (
        String::from_utf8(out).unwrap(),
        String::from_utf8(log).unwrap(),
    );
    assert_eq!(ended, Ended::Done, "{out}\n{log}");
    let layout = JobLayout::new(&opts.out);

    // Capacity: both swept to the end (on an idle machine both pass the one rate offered; on a
    // loaded one a step may stay undecided), only the correct sim safe.
    let swept = Sweep::read(&layout.sweep_json()).expect("sweep.json");
    let (lock, control) = (
        swept.entry("sim").unwrap(),
        swept.entry("sim-control").unwrap(),
    );
    for e in [lock, control] {
        assert!(
            e.error.is_none() && e.bound != sweep::Bound::Incomplete,
            "{log}"
        );
    }
    assert!(lock.safe && !control.safe, "{log}");
    assert!(!control.unsafe_steps.is_empty(), "the sweep caught it too");

    // Calm: every strategy at the one rate set by the lowest safe capacity (16000/s rounded
    // down 1-2-5 when it passed), the correct sim's, whatever the control sustained.
    let (common, whose) = swept.common_rate().expect("a safe capacity");
    assert!(
        whose == "sim" && common > 0.0 && common <= 10000.0,
        "{common} {whose}"
    );
    let calm = lockbench::report::summaries(&layout.calm()).expect("calm/compare.json");
    let ids: Vec<&str> = calm.iter().map(|s| s.strategy.as_str()).collect();
    assert_eq!(ids, ["sim", "sim-control"]);
    assert!(calm.iter().all(|s| offered(s) == common), "{log}");
    for id in ids {
        assert!(
            layout.calm().join(id).join("summary.json").is_file(),
            "{id}"
        );
    }

    // Chaos: each at half its own capacity (as its sweep bounds it), the fault injected and
    // healed in each run, and each verdict the sim's.
    let chaos = lockbench::report::summaries(&layout.chaos("command")).expect("compare.json");
    assert_eq!(chaos.len(), 2, "{log}");
    for s in &chaos {
        let (rate, _) = swept.rate_for(&s.strategy, 0.5).expect("a rate");
        assert_eq!(offered(s), rate, "{}", s.strategy);
        assert_eq!(s.faults.len(), 1, "{:?}", s.faults);
        assert!(s.faults[0].healed_s.is_some(), "{:?}", s.faults);
    }
    let (lock, control) = (&chaos[0], &chaos[1]);
    assert_eq!(
        verdicts(lock),
        (Some(LockVerdict::Held), StoreVerdict::Intact, "safe"),
        "{lock:#?}"
    );
    assert_eq!(
        control.lock_verdict,
        Some(LockVerdict::Broken),
        "{control:#?}"
    );
    assert!(control.double_grants > 0);
    assert_eq!(control.headline(), "caught (control)");
    let marks = std::fs::read_to_string(dir.path().join("marks")).expect("the faults ran");
    // Two runs under the chaos part's scenario, two under the sale's.
    assert_eq!(marks, "injected\nhealed\n".repeat(4));

    // The sale, first: both strategies on one seed, without a fault and under the scenario;
    // the correct sim keeps the buyers' rules, the control that grants twice is caught.
    let sales: Vec<String> = layout.sales().into_iter().map(|(n, _)| n).collect();
    assert_eq!(sales, ["calm", "command"]);
    let sale = lockbench::report::summaries(&layout.sale("calm")).expect("sale compare.json");
    let (lock, control) = (&sale[0], &sale[1]);
    let figures = lock.sale.as_ref().expect("the sale's figures");
    assert_eq!((figures.limit_violations, figures.duplicate_orders), (0, 0));
    assert_eq!(lock.headline(), "safe", "{lock:#?}");
    assert_eq!(control.headline(), "caught (control)", "{control:#?}");

    // The report, rendered from the folders as read back: both strategies, nothing missing.
    assert!(layout.report().is_file());
    let model: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(layout.root().join("report.json")).expect("report.json"),
    )
    .expect("a model");
    assert_eq!(
        model["strategies"].as_array().map(Vec::len),
        Some(2),
        "{model}"
    );
    assert_eq!(model["problems"], serde_json::json!([]), "{model}");
    let line = model["strategies"][0]["text"].as_str().unwrap_or_default();
    assert!(line.starts_with("in the sale sold"), "{line}");
    // A waiting bug (a 1 s warm-up round, an idle window) would take seconds.
    eprintln!("sim job: {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// The danger window, end to end: a lease the sim expires at once (its loss observed) is
/// noticed at release, a hold later, after the holder wrote; folded alike by the recorder and
/// by workers.
#[tokio::test(flavor = "current_thread")]
async fn an_early_expiry_is_a_danger_window_noticed_at_release_after_the_write() {
    // Stock for every attempt: each lost holder holds and writes.
    let text = "seed = 13\n\
         [inventory]\nskus = 1\nstock = 1000\n\
         [load]\nmode = \"closed\"\nclients = 4\nduration = \"10s\"\nmax_attempts = 120\n\
         [critical_section]\nhold = \"1ms\"\n";
    let w = Workload::parse("danger.toml", text, &[]).expect("valid workload");
    for workers in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut opts = sim::options(&w, dir.path().to_path_buf(), false);
        if workers {
            opts = in_two_workers(opts);
        }
        let s = sim::run(Sim::new(SimFault::ExpireEarly { every: 7 }), &opts)
            .await
            .expect("runs");
        let d = s.danger_window.clone().expect("a lock that lost leases");
        assert!(s.lease_lost > 0, "{s:#?}");
        assert_eq!((d.n, d.lost), (s.lease_lost, s.lease_lost), "{d:?}");
        assert_eq!((d.unnoticed, d.no_loss_moment), (0, 0), "{d:?}");
        assert_eq!(d.source.as_deref(), Some("observed"));
        // Noticed only at release, after the 1 ms hold (far below a second, even when busy).
        let p50 = d.loss_to_notice_p50_us.expect("n > 0");
        assert!((900..1_000_000).contains(&p50), "{d:?}");
        assert!(d.loss_to_notice_max_us >= Some(p50));
        // Every holder wrote after its lease had ended; nothing fenced.
        assert_eq!(d.writes_after_loss, d.n, "{d:?}");
        assert!(
            d.write_after_loss_max_us <= d.loss_to_notice_max_us,
            "{d:?}"
        );
        assert_eq!(d.refused_by_fence, 0);
    }
    // And the other direction: a lock that lost nothing, not lease-based, reports no window.
    let clean = run(Sim::new(SimFault::None), 1).await;
    assert_eq!(clean.danger_window, None);
}

/// A holder nothing told: a lock that grants a held key again never tells its first holder,
/// whose window the double-grant check still reports (never told, and how long it went on).
#[tokio::test(flavor = "current_thread")]
async fn a_holder_never_told_of_a_second_grant_is_in_the_danger_window() {
    // In this process, and through workers (the lease rows carry whether a holder was told).
    for workers in [false, true] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut opts = sim::options(&workload(1), dir.path().to_path_buf(), false);
        if workers {
            opts = in_two_workers(opts);
        }
        let s = sim::run(Sim::new(SimFault::GrantTwice { every: 5 }), &opts)
            .await
            .expect("runs");
        let d = s
            .danger_window
            .clone()
            .expect("a lock whose holders were overlapped");
        assert_eq!((d.lost, d.n), (0, 0), "nothing told any holder: {d:?}");
        assert_eq!(d.unnoticed_overlapped, s.double_grant_incidents, "{d:?}");
        assert!(d.unnoticed_overlapped > 0);
        assert!(
            d.unnoticed_went_on_max_us.is_some_and(|us| us < 1_000_000),
            "{d:?}"
        );
    }
}

//! A simulated lock and store, in memory, for testing lockbench itself.
//!
//! **This exists only to test the harness's own pipeline** (driver → recorder → audit →
//! checker → summary) without servers, in milliseconds: a fault is injected on purpose
//! ([`SimFault`]) and the test asserts the checker catches exactly that. It is never registered
//! as a strategy (it is not in [`crate::strategy::ALL`]), never reachable from the command line,
//! and a clean sim being judged safe says nothing about any real lock.
//!
//! The shape is the one [`crate::strategy::Locked`] runs around a real lock: acquire → read the
//! stock → hold for `critical_section.hold` → blind-write `read - 1` and insert the order →
//! release, with the lease recorded into [`Purchase::lease`] the way `Locked` records it. So a
//! lapse of mutual exclusion shows up as double grants and as lost updates in the audit.
//! Reads (`load.read_fraction`) run the store's read section under the lock's read lease: a
//! plain sim lock serves them exclusively, a read–write one ([`Sim::rwlock`]) lets readers
//! share the key, and [`SimFault::ReaderIgnoresWriters`] breaks that on purpose.
//!
//! Deterministic where it can be: tokens come from the attempt number, faults fire on every
//! n-th event, the schedule comes from the workload's seed. Time is real (the driver and the
//! leases use `std::time::Instant`), so keep holds around a millisecond.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::check::{OrderRow, SkuAudit};
use crate::cluster::Needs;
use crate::record::{ErrorKind, Outcome};
use crate::report::Summary;
use crate::run::{InProcess, RunError, RunOptions, Source};
use crate::strategy::{
    AcquireError, Acquired, Attempt, Built, CriticalSection, Expiry, Kind, Lease, Lock, Locked,
    Purchase, Rules, Store, Strategy, StrategyError, StrategyInfo, read_outcome,
};
use crate::workload::{Ask, Workload};

/// What the simulation breaks on purpose. `every` counts from 1: `every: 3` fires on the 3rd,
/// 6th, 9th… event of its kind (0 is taken as 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimFault {
    /// Nothing: the lock excludes, the store applies every write.
    None,
    /// No lock at all (like the `none` control): buyers run the critical section unguarded.
    NoLock,
    /// Every n-th acquire that finds the key held is granted anyway: two holders at once
    /// (double grants; two buyers read the same stock, so lost updates and oversell).
    GrantTwice { every: u64 },
    /// Every n-th grant expires at once, server-side, while its holder goes on working: the
    /// next waiter gets the key (double grant) and the holder's release finds the lease gone
    /// (lease lost).
    ExpireEarly { every: u64 },
    /// Every n-th write loses its decrement while its order row is written: the lock holds,
    /// the store is corrupted (lost updates).
    LoseWrite { every: u64 },
    /// A read–write lock whose every n-th read lease ignores writers: granted at once, without
    /// waiting for a writer and without keeping one out (reader–writer double grants; a
    /// writer's change under the read lease is a torn read). The store stays intact.
    ReaderIgnoresWriters { every: u64 },
    /// Every n-th acquire never answers, as a server that took the command and went silent:
    /// only the attempt's bound ends it, and its outcome is unknown.
    Silent { every: u64 },
}

/// Permits of a key's semaphore: a reader takes one, a writer all of them.
const PERMITS: u32 = 1 << 16;

/// Counts events and says whether this one is an `every`-th.
#[derive(Debug, Default)]
struct Every(AtomicU64);

impl Every {
    fn fires(&self, every: u64) -> bool {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_multiple_of(every.max(1))
    }
}

/// One SKU of the simulated store.
#[derive(Debug, Clone, Default)]
struct Row {
    qty: i64,
    /// Units sold (one per order row without `[buyers]`).
    orders: u64,
    /// The sale's books, with `[buyers]`.
    sale: Option<Book>,
}

/// A SKU's orders, its buyers' holdings and the request ids seen: what the sale's rules read.
#[derive(Debug, Clone, Default)]
struct Book {
    orders: Vec<OrderRow>,
    held: HashMap<u64, u64>,
    seen: HashSet<u64>,
}

/// The in-memory stock and orders. `audit` returns what is really there, never a counter of
/// what clients believe.
#[derive(Debug)]
pub struct SimStore {
    rows: Mutex<Vec<Row>>,
    /// Set for [`SimFault::LoseWrite`].
    lose_every: Option<u64>,
    writes: Every,
    /// The sale's rules, checked inside the critical section (so under the lock).
    rules: Option<Rules>,
}

impl SimStore {
    /// An empty store (seeded by [`Store::prepare`]); `fault` applies if it is a store fault;
    /// with `rules`, every order goes through them and lands in its SKU's book.
    pub fn new(fault: SimFault, rules: Option<Rules>) -> Self {
        Self {
            rows: Mutex::new(Vec::new()),
            lose_every: match fault {
                SimFault::LoseWrite { every } => Some(every),
                _ => None,
            },
            writes: Every::default(),
            rules,
        }
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, Vec<Row>> {
        self.rows.lock().expect("sim store lock is never poisoned")
    }

    /// The stock of `sku` (no lock of the store's own, like the shared critical section's read).
    pub fn read(&self, sku: u32) -> i64 {
        self.rows()[sku as usize].qty
    }

    /// What the sale's rules answer `p` seeing `stock` (read apart from the write, as the
    /// stock is: only the lock keeps two buyers from both passing); `None` without rules or
    /// when the units may be taken.
    fn refusal(&self, p: &Purchase<'_>, stock: i64) -> Option<Outcome> {
        let rules = self.rules?;
        let rows = self.rows();
        let book = rows[p.sku as usize].sale.as_ref()?;
        let held = book.held.get(&p.ask.buyer).copied().unwrap_or(0);
        rules.refuse(&p.ask, book.seen.contains(&p.ask.request), held, stock)
    }

    /// The blind write: `qty = new_qty` and one order row, unless the fault drops the
    /// decrement (the order is written anyway).
    pub fn write(&self, sku: u32, new_qty: i64) {
        self.write_order(sku, new_qty, None);
    }

    /// [`Self::write`], and with the sale's rules the order of `ask` in the SKU's book.
    fn write_order(&self, sku: u32, new_qty: i64, ask: Option<&Ask>) {
        let lose = self.lose_every.is_some_and(|n| self.writes.fires(n));
        let mut rows = self.rows();
        let row = &mut rows[sku as usize];
        if !lose {
            row.qty = new_qty;
        }
        let (Some(book), Some(ask)) = (row.sale.as_mut(), ask) else {
            row.orders += 1;
            return;
        };
        row.orders += u64::from(ask.qty);
        *book.held.entry(ask.buyer).or_default() += u64::from(ask.qty);
        book.seen.insert(ask.request);
        book.orders.push(OrderRow {
            sku,
            buyer: ask.buyer,
            request: ask.request,
            qty: ask.qty,
        });
    }
}

#[async_trait]
impl Store for SimStore {
    async fn prepare(&self, stock: &[u64]) -> Result<(), StrategyError> {
        *self.rows() = stock
            .iter()
            .map(|&qty| Row {
                qty: qty as i64,
                orders: 0,
                sale: self.rules.map(|_| Book::default()),
            })
            .collect();
        Ok(())
    }

    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
        let rows = self.rows();
        Ok((0..skus)
            .map(|sku| {
                let row = rows.get(sku as usize).cloned().unwrap_or_default();
                SkuAudit {
                    sku,
                    final_stock: row.qty,
                    sold: row.orders,
                }
            })
            .collect())
    }

    async fn orders(&self) -> Result<Option<Vec<OrderRow>>, StrategyError> {
        let rows = self.rows();
        Ok(self.rules.map(|_| {
            rows.iter()
                .filter_map(|r| r.sale.as_ref())
                .flat_map(|b| b.orders.iter().copied())
                .collect()
        }))
    }
}

/// An in-memory lock: one FIFO semaphore of one permit per key, so waiters are served in
/// order and nothing depends on random backoff.
#[derive(Debug)]
pub struct SimLock {
    fault: SimFault,
    /// Readers share the key ([`Lock::acquire_read`]); otherwise reads take it exclusively.
    rwlock: bool,
    keys: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Leases the lock still knows, by token: the permit, or `None` for a holder it let in
    /// twice (it does not know it did).
    held: Mutex<HashMap<String, Option<OwnedSemaphorePermit>>>,
    acquire_timeout: Duration,
    /// Nominal bound of a release (the sim's calls take no time).
    timeout: Duration,
    contended: Every,
    grants: Every,
    reads: Every,
    acquires: Every,
}

impl SimLock {
    /// A lock with `w`'s acquire timeout; `fault` applies if it is a lock fault; `rwlock`:
    /// readers share the key.
    pub fn new(fault: SimFault, rwlock: bool, w: &Workload) -> Self {
        Self {
            fault,
            rwlock,
            keys: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            acquire_timeout: w.lock.acquire_timeout,
            timeout: w.load.timeout,
            contended: Every::default(),
            grants: Every::default(),
            reads: Every::default(),
            acquires: Every::default(),
        }
    }

    fn key(&self, key: &str) -> Arc<Semaphore> {
        let mut keys = self.keys.lock().expect("sim lock map is never poisoned");
        keys.entry(key.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(PERMITS as usize)))
            .clone()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<OwnedSemaphorePermit>>> {
        self.held.lock().expect("sim lease map is never poisoned")
    }

    /// Whether anyone holds `sem`'s key.
    fn is_held(sem: &Semaphore) -> bool {
        sem.available_permits() < PERMITS as usize
    }

    /// Frees `token`'s lease; false if the lock no longer knew it (it expired). Synchronous, so
    /// a cut attempt's guard can release on drop.
    fn release_now(&self, token: &str) -> bool {
        self.held().remove(token).is_some()
    }
}

#[async_trait]
impl Lock for SimLock {
    async fn acquire(&self, _client: u32, key: &str, token: &str) -> Acquired {
        if let SimFault::Silent { every } = self.fault
            && self.acquires.fires(every)
        {
            std::future::pending::<()>().await;
        }
        let sem = self.key(key);
        if let SimFault::GrantTwice { every } = self.fault
            && Self::is_held(&sem)
            && self.contended.fires(every)
        {
            self.held().insert(token.to_string(), None);
            return Ok(Lease::new(key, token));
        }
        let permit = tokio::time::timeout(self.acquire_timeout, sem.acquire_many_owned(PERMITS))
            .await
            .map_err(|_| AcquireError::Busy)?
            .expect("sim semaphores are never closed");
        let mut lease = Lease::new(key, token);
        match self.fault {
            // Expired at once: the key is free again while the holder believes it holds it.
            SimFault::ExpireEarly { every } if self.grants.fires(every) => {
                drop(permit);
                lease.expiry = Some(Expiry::Observed(Instant::now()));
            }
            _ => {
                self.held().insert(token.to_string(), Some(permit));
            }
        }
        Ok(lease)
    }

    /// A shared lease (one permit) when the lock is a read–write one; the exclusive lock
    /// otherwise.
    async fn acquire_read(&self, client: u32, key: &str, token: &str) -> Acquired {
        if !self.rwlock {
            return self.acquire(client, key, token).await;
        }
        let shared = |key, token| Lease {
            shared: true,
            ..Lease::new(key, token)
        };
        if let SimFault::ReaderIgnoresWriters { every } = self.fault
            && self.reads.fires(every)
        {
            self.held().insert(token.to_string(), None);
            return Ok(shared(key, token));
        }
        let sem = self.key(key);
        let permit = tokio::time::timeout(self.acquire_timeout, sem.acquire_owned())
            .await
            .map_err(|_| AcquireError::Busy)?
            .expect("sim semaphores are never closed");
        self.held().insert(token.to_string(), Some(permit));
        Ok(shared(key, token))
    }

    async fn release(&self, _client: u32, lease: &Lease) -> Result<bool, ErrorKind> {
        Ok(self.release_now(&lease.token))
    }

    fn acquire_bound(&self) -> Duration {
        self.acquire_timeout
    }

    fn release_bound(&self) -> Duration {
        self.timeout
    }

    async fn stuck_locks(&self, _skus: u32) -> Result<u64, StrategyError> {
        let keys = self.keys.lock().expect("sim lock map is never poisoned");
        Ok(keys.values().filter(|s| Self::is_held(s)).count() as u64)
    }
}

impl CriticalSection for SimStore {
    fn lock_key(&self, sku: u32) -> String {
        format!("sim:lock:{sku}")
    }

    /// Read → hold → blind write `read - 1` with the order, as the MariaDB store does; with
    /// the sale's rules, read the book too and write `read - qty`.
    async fn critical_section(
        &self,
        p: &Purchase<'_>,
        _token: &str,
        _fence: Option<u64>,
        hold: Duration,
    ) -> Outcome {
        let qty = self.read(p.sku);
        if self.rules.is_some() {
            if let Some(refused) = self.refusal(p, qty) {
                return refused;
            }
            tokio::time::sleep(hold).await;
            p.lease.wrote();
            self.write_order(p.sku, qty - i64::from(p.ask.qty), Some(&p.ask));
            return Outcome::Sold;
        }
        if qty <= 0 {
            return Outcome::SoldOut;
        }
        tokio::time::sleep(hold).await;
        p.lease.wrote();
        self.write(p.sku, qty - 1);
        Outcome::Sold
    }

    fn critical_section_bound(&self, hold: Duration) -> Duration {
        hold + Duration::from_millis(100)
    }

    /// Stock, hold, stock again, as the MariaDB store does (the sim has no price).
    async fn read_section(&self, p: &Purchase<'_>, hold: Duration) -> Outcome {
        let stock = self.read(p.sku);
        tokio::time::sleep(hold).await;
        read_outcome(stock, self.read(p.sku))
    }

    fn read_section_bound(&self, hold: Duration) -> Duration {
        hold + Duration::from_millis(100)
    }
}

/// [`SimFault::NoLock`]: the critical section with no lock at all, like the `none` control.
struct SimNoLock {
    store: Arc<SimStore>,
    hold: Duration,
}

#[async_trait]
impl Strategy for SimNoLock {
    fn bound(&self) -> Duration {
        self.store.critical_section_bound(self.hold)
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        if p.read {
            return self.store.read_section(p, self.hold).await.into();
        }
        self.store
            .critical_section(p, "", None, self.hold)
            .await
            .into()
    }
}

/// One simulated strategy: a fault, and whether it is declared a control (known unsafe: the
/// checker must catch it, and it is never called safe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sim {
    /// What is broken on purpose.
    pub fault: SimFault,
    /// Declared a control.
    pub control: bool,
    /// A read–write lock: readers share a key (implied by [`SimFault::ReaderIgnoresWriters`]).
    pub rwlock: bool,
}

impl Sim {
    /// A sim with `fault`, not declared a control.
    pub fn new(fault: SimFault) -> Self {
        Self {
            fault,
            control: false,
            rwlock: matches!(fault, SimFault::ReaderIgnoresWriters { .. }),
        }
    }

    /// The same sim with a read–write lock: readers share a key, writers have it alone.
    pub fn rwlock(self) -> Self {
        Self {
            rwlock: true,
            ..self
        }
    }

    /// The same sim declared a control.
    pub fn control(self) -> Self {
        Self {
            control: true,
            ..self
        }
    }

    /// How the report sees it: a lock (or a lock-free deduction for [`SimFault::NoLock`]), or a
    /// control; no servers, no fencing.
    pub fn info(&self) -> &'static StrategyInfo {
        let locks = self.fault != SimFault::NoLock;
        match (self.control, locks) {
            (true, true) => &SIM_CONTROL,
            (true, false) => &SIM_CONTROL_NO_LOCK,
            (false, true) => &SIM_LOCK,
            (false, false) => &SIM_NO_LOCK,
        }
    }

    /// The strategy and its store, for workload `w`.
    pub fn build(&self, w: &Workload) -> Built {
        let store = Arc::new(SimStore::new(self.fault, Rules::of(w)));
        // Every lock runs through the real `Locked` adapter: its lease bookkeeping and holder
        // hook are part of what the sim tests.
        let strategy: Arc<dyn Strategy> = if self.fault == SimFault::NoLock {
            Arc::new(SimNoLock {
                store: store.clone(),
                hold: w.critical_section.hold,
            })
        } else {
            let lock = SimLock::new(self.fault, self.rwlock, w);
            Arc::new(Locked::new(lock, store.clone(), w))
        };
        Built {
            strategy,
            store,
            lock: None,
        }
    }
}

/// The sim's entries (a run's plan holds `&'static` entries, as the registry's are).
const fn sim_entry(id: &'static str, kind: Kind, locks: bool) -> StrategyInfo {
    StrategyInfo {
        id,
        kind,
        locks,
        fenced: false,
        needs: Needs::NONE,
        fence_token: None,
        wait: None,
        about: "in-memory lock and store for lockbench's own tests; never a real strategy",
        // Never connected to servers: built by [`Sim::build`] alone.
        build: |s| {
            Box::pin(async move {
                Err(StrategyError::Unsupported {
                    id: s.info.id.into(),
                    what: "servers (the sim is built in memory by Sim::build)",
                })
            })
        },
    }
}

static SIM_LOCK: StrategyInfo = sim_entry("sim", Kind::Lock, true);
static SIM_NO_LOCK: StrategyInfo = sim_entry("sim", Kind::LockFree, false);
static SIM_CONTROL: StrategyInfo = sim_entry("sim-control", Kind::Control, true);
static SIM_CONTROL_NO_LOCK: StrategyInfo = sim_entry("sim-control", Kind::Control, false);

/// Options for a simulated run of `w` with results in `out` (`summary.json`, the histograms,
/// the timeline, and `history.jsonl` when `history`): buyers in this process, no servers.
pub fn options(w: &Workload, out: PathBuf, history: bool) -> RunOptions {
    RunOptions {
        history,
        ..RunOptions::new("sim", w.clone(), None, "sim", out)
    }
}

/// Where a sweep's, a contend's, a comparison's or a job's sessions get `sim`
/// ([`crate::run::sweep::sweep_on`], [`crate::run::contend::contend_on`],
/// [`crate::run::compare::compare_on`], [`crate::run::job::job_on`]): no servers, the sim built
/// afresh for every trial, as a real strategy is connected afresh; its id is `sim.info().id`.
pub fn source(sim: Sim) -> Source {
    sources(&[sim])
}

/// [`source`] of several sims, told apart by their ids (`sim`, `sim-control`): a job of a
/// correct lock beside a broken control. Panics when two share an id (a test's mistake).
pub fn sources(sims: &[Sim]) -> Source {
    let mut ids: Vec<&str> = sims.iter().map(|s| s.info().id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), sims.len(), "one sim per id: {ids:?}");
    Source::InProcess(
        sims.iter()
            .map(|&sim| InProcess {
                info: sim.info(),
                build: Arc::new(move |w: &Workload| sim.build(w)),
            })
            .collect(),
    )
}

/// Runs `sim` as `opts` say through the real run's wiring ([`crate::run::run_on`], a session
/// of one trial on no servers): its plan's checks, the buyers with the chaos plan's faults
/// beside them, each attempt cut at its bound, the audit (`Safety::judge`) and the summary
/// whose verdict and headline the tables print.
pub async fn run(sim: Sim, opts: &RunOptions) -> Result<Summary, RunError> {
    let source = source(sim);
    // The sim's own id, whatever `opts` name (`sim::options` names `sim`, controls too).
    let opts = RunOptions {
        strategy: sim.info().id.into(),
        ..opts.clone()
    };
    let plan = source.plan(&opts)?;
    crate::run::run_on(&plan, &source, &CancellationToken::new()).await
}

/// A sale's asks crafted for tests until the generator draws them: `buyers` buyers each place
/// `requests` orders of 1 to 3 units over `skus` SKUs, and every order is pressed twice (the
/// same request id), the second press right behind the first.
pub fn crafted_asks(buyers: u64, requests: u64, skus: u32) -> Vec<(u32, Ask)> {
    let mut out = Vec::new();
    for buyer in 0..buyers {
        for r in 0..requests {
            let ask = Ask {
                buyer,
                request: buyer * requests + r,
                qty: 1 + ((buyer + r) % 3) as u32,
            };
            let sku = ((buyer + r) % u64::from(skus)) as u32;
            out.extend([(sku, ask), (sku, ask)]);
        }
    }
    out
}

/// Attempts every `(sku, ask)` purchase on `strategy` at once (buyer loop `i % clients`), and
/// returns their outcomes in order.
pub async fn press_all(strategy: &dyn Strategy, asks: &[(u32, Ask)], clients: u32) -> Vec<Outcome> {
    let slots: Vec<crate::strategy::LeaseSlot> = asks.iter().map(|_| Default::default()).collect();
    let attempts = asks
        .iter()
        .zip(&slots)
        .enumerate()
        .map(|(i, (&(sku, ask), lease))| {
            let p = Purchase {
                seq: i as u64,
                client: i as u32 % clients.max(1),
                sku,
                read: false,
                ask,
                lease,
            };
            async move { strategy.attempt(&p).await.outcome }
        });
    futures::future::join_all(attempts).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Refusal;

    const SALE: &str = "[inventory]\nskus = 2\nstock = 15\n[critical_section]\nhold = \"1ms\"\n\
                        [buyers]\ncount = 10\nlimit = 3\nquantity = \"1..3\"\n";

    /// (pairs of buyer and SKU over `limit`, orders beyond the first per request, units sold
    /// per SKU) of `orders`.
    fn books(orders: &[OrderRow], limit: u32) -> (usize, usize, Vec<u64>) {
        let mut held: HashMap<(u64, u32), u64> = HashMap::new();
        let mut requests: HashMap<u64, usize> = HashMap::new();
        let mut sold = vec![0; 2];
        for o in orders {
            *held.entry((o.buyer, o.sku)).or_default() += u64::from(o.qty);
            *requests.entry(o.request).or_default() += 1;
            sold[o.sku as usize] += u64::from(o.qty);
        }
        let over = held.values().filter(|&&u| u > u64::from(limit)).count();
        let dups = requests.values().map(|n| n - 1).sum();
        (over, dups, sold)
    }

    /// Presses the crafted asks on `sim`: its outcomes, (over the limit, duplicates) and whether
    /// every SKU balances (units sold + left = 15, none below zero).
    async fn sale(sim: Sim) -> (Vec<Outcome>, (usize, usize), bool) {
        let w = Workload::parse("w.toml", SALE, &[]).unwrap();
        let built = sim.build(&w);
        built.store.prepare(&w.inventory.stocks()).await.unwrap();
        let outcomes = press_all(&*built.strategy, &crafted_asks(10, 3, 2), 8).await;
        let orders = built
            .store
            .orders()
            .await
            .unwrap()
            .expect("a sale lists its orders");
        let audits = built.store.audit(2).await.unwrap();
        let (over, dups, sold) = books(&orders, 3);
        let balanced = audits
            .iter()
            .all(|a| a.final_stock >= 0 && sold[a.sku as usize] as i64 + a.final_stock == 15);
        let counted = audits.iter().map(|a| a.sold).collect::<Vec<_>>();
        assert_eq!(counted, sold, "the audit counts units, as the orders do");
        (outcomes, (over, dups), balanced)
    }

    #[tokio::test]
    async fn a_lock_keeps_the_limit_and_one_order_per_request() {
        let (outcomes, faults, balanced) = sale(Sim::new(SimFault::None)).await;
        assert_eq!(faults, (0, 0), "{outcomes:?}");
        assert!(balanced);
        let count = |o: Outcome| outcomes.iter().filter(|&&x| x == o).count();
        // Every order pressed twice: each second press of a sold order is a duplicate.
        assert_eq!(
            count(Outcome::Sold),
            count(Outcome::Refused(Refusal::Duplicate))
        );
        assert!(
            count(Outcome::Sold) > 0 && count(Outcome::SoldOut) > 0,
            "{outcomes:?}"
        );
    }

    #[tokio::test]
    async fn a_lock_that_grants_twice_and_no_lock_break_the_sale_rules() {
        for sim in [
            Sim::new(SimFault::GrantTwice { every: 1 }),
            Sim::new(SimFault::NoLock),
        ] {
            let (outcomes, (over, dups), _) = sale(sim).await;
            assert!(
                over > 0 && dups > 0,
                "{sim:?}: {over} over, {dups} dups, {outcomes:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_sold_out_answer_sets_the_flag_and_later_buyers_skip_the_lock() {
        let text =
            "[inventory]\nstock = 1\n[critical_section]\nhold = \"0ms\"\nprecheck = \"flag\"\n";
        let w = Workload::parse("w.toml", text, &[]).unwrap();
        let built = Sim::new(SimFault::None).build(&w);
        built.store.prepare(&[1]).await.unwrap();
        // (outcome, whether the attempt held a lease) of one purchase.
        let attempt = |seq: u64, read: bool| {
            let strategy = built.strategy.clone();
            async move {
                let lease = crate::strategy::LeaseSlot::default();
                let p = Purchase {
                    seq,
                    client: 0,
                    sku: 0,
                    read,
                    ask: Ask::anonymous(seq),
                    lease: &lease,
                };
                let outcome = strategy.attempt(&p).await.outcome;
                (outcome, lease.take().is_some())
            }
        };
        assert_eq!(attempt(1, false).await, (Outcome::Sold, true));
        assert_eq!(
            attempt(2, false).await,
            (Outcome::SoldOut, true),
            "saw stock 0"
        );
        for seq in 3..6 {
            assert_eq!(
                attempt(seq, false).await,
                (Outcome::SoldOut, false),
                "no lock"
            );
        }
        let (read, leased) = attempt(6, true).await;
        assert!(
            leased && matches!(read, Outcome::Read { stock: 0 }),
            "a read still locks"
        );
        // Off (the default): every buyer goes to the lock.
        let w = Workload::parse("w.toml", &text.replace("flag", "off"), &[]).unwrap();
        let off = Sim::new(SimFault::None).build(&w);
        off.store.prepare(&[0]).await.unwrap();
        for seq in 0..3 {
            let lease = crate::strategy::LeaseSlot::default();
            let p = Purchase {
                seq,
                client: 0,
                sku: 0,
                read: false,
                ask: Ask::anonymous(seq),
                lease: &lease,
            };
            assert_eq!(off.strategy.attempt(&p).await.outcome, Outcome::SoldOut);
            assert!(lease.take().is_some());
        }
    }
}

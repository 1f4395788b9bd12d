//! A worker's leases on the wire, and their merge in end order at the recorder.
//!
//! The double-grant check and the utilization compare leases across workers, so every lease
//! still crosses, compactly: per interval a table of keys and of token prefixes, then one
//! binary row per lease ([`WireLeases`]). A worker sends its leases in end order, an interval
//! at a time; the recorder merges the workers' rows back into one stream in end order
//! ([`LeaseMerge`]) before the checks see them. Fed a whole interval of one worker after
//! another's, the checker would walk back over every later lease of the key and insert in the
//! middle of its queue: on a hot key, work that grows with the key's rate times the interval.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Instant;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::wire::{BatchError, at, ns};
use super::{Completion, LeaseSpan, Outcome};

/// How long the merge waits for a worker that sends nothing (paused, or slow) before it lets
/// the others' leases through without it: bounds the leases it holds. The checks take leases
/// out of order up to their slack; a worker paused longer is within the attempt bound (a
/// planned pause lengthens it).
const MAX_WAIT_NS: u64 = 2_000_000_000;

/// Leases in one interval: a table of keys and of token prefixes, then one binary row per lease
/// (base64), each field a LEB128 varint unless said otherwise:
///
/// | field | |
/// |---|---|
/// | flags | one byte: 1 lost, 2 shared, 4 sold, 8 its attempt found the SKU sold out, 16 has a fence, 32 the token ends in a number |
/// | key | index into `keys` |
/// | sku | |
/// | ended | ns since the start, zigzag delta from the previous row's |
/// | ended − released | zigzag |
/// | released − acquired | zigzag |
/// | fence | if flagged |
/// | token | index into `tokens`: the token, or what precedes its trailing digits |
/// | number, digits | if flagged: the trailing digits as a number, and their count (one byte; leading zeros) |
/// | client | the buyer |
/// | acquired − started | its wait for the lock |
///
/// A give-up (an exclusive wait that ended at `lock.acquire_timeout`, flag 64) is a row too, so
/// the contention check sees every wait in end order: no lease (empty key and token, released
/// and acquired at its end), its wait in the last field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireLeases {
    /// Lock keys.
    pub keys: Vec<String>,
    /// Tokens, or their parts before trailing digits.
    pub tokens: Vec<String>,
    /// How many rows.
    pub count: u32,
    /// The rows, base64.
    pub rows: String,
}

impl WireLeases {
    /// No lease.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// The double-grant check tells stale holders that learned of their loss from those never told.
const LOST: u8 = 1;
const SHARED: u8 = 2;
const SOLD: u8 = 4;
const FOUND_SOLD_OUT: u8 = 8;
const FENCE: u8 = 16;
const NUMBERED: u8 = 32;
const GAVE_UP: u8 = 64;

/// Builds a [`WireLeases`].
#[derive(Default)]
pub(super) struct LeaseWriter {
    keys: Table,
    tokens: Table,
    rows: Vec<u8>,
    count: u32,
    last_end: u64,
}

/// Strings by first appearance, for indexing.
#[derive(Default)]
struct Table {
    index: HashMap<String, u32>,
    list: Vec<String>,
}

impl Table {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = self.list.len() as u32;
        self.index.insert(s.to_string(), i);
        self.list.push(s.to_string());
        i
    }

    fn take(&mut self) -> Vec<String> {
        self.index.clear();
        std::mem::take(&mut self.list)
    }
}

/// A token split into the part before its trailing digits and those digits (at most 19, so
/// they fit a u64; their count keeps leading zeros).
fn split_token(token: &str) -> (&str, Option<(u64, u8)>) {
    let digits = token
        .bytes()
        .rev()
        .take_while(u8::is_ascii_digit)
        .count()
        .min(19);
    if digits == 0 {
        return (token, None);
    }
    let (head, tail) = token.split_at(token.len() - digits);
    (
        head,
        Some((tail.parse().expect("ASCII digits"), digits as u8)),
    )
}

impl LeaseWriter {
    /// Appends the lease `l` of `c`.
    pub(super) fn push(&mut self, c: &Completion, l: &LeaseSpan, start: Instant) {
        let (head, number) = split_token(&l.token);
        let flags = (if l.lost { LOST } else { 0 })
            | (if l.shared { SHARED } else { 0 })
            | (if c.outcome == Outcome::Sold { SOLD } else { 0 })
            | (if c.outcome == Outcome::SoldOut {
                FOUND_SOLD_OUT
            } else {
                0
            })
            | (if l.fence.is_some() { FENCE } else { 0 })
            | (if number.is_some() { NUMBERED } else { 0 });
        let (ended, released, acquired) = (
            ns(c.ended, start),
            ns(l.released, start),
            ns(l.acquired, start),
        );
        let out = &mut self.rows;
        out.push(flags);
        let key = self.keys.id(&l.key);
        varint(out, u64::from(key));
        varint(out, u64::from(c.sku));
        varint(out, zigzag(ended.wrapping_sub(self.last_end) as i64));
        varint(out, zigzag(ended.wrapping_sub(released) as i64));
        varint(out, zigzag(released.wrapping_sub(acquired) as i64));
        if let Some(f) = l.fence {
            varint(out, f);
        }
        let head = self.tokens.id(head);
        varint(&mut self.rows, u64::from(head));
        if let Some((n, digits)) = number {
            varint(&mut self.rows, n);
            self.rows.push(digits);
        }
        varint(&mut self.rows, u64::from(c.client));
        varint(
            &mut self.rows,
            acquired.saturating_sub(ns(c.started, start)),
        );
        self.last_end = ended;
        self.count += 1;
    }

    /// Appends the give-up `c` (an exclusive wait that timed out).
    pub(super) fn push_give_up(&mut self, c: &Completion, start: Instant) {
        let ended = ns(c.ended, start);
        let out = &mut self.rows;
        out.push(GAVE_UP);
        varint(out, u64::from(self.keys.id("")));
        varint(out, u64::from(c.sku));
        varint(out, zigzag(ended.wrapping_sub(self.last_end) as i64));
        varint(out, 0);
        varint(out, 0);
        varint(out, u64::from(self.tokens.id("")));
        varint(&mut self.rows, u64::from(c.client));
        varint(&mut self.rows, ended.saturating_sub(ns(c.started, start)));
        self.last_end = ended;
        self.count += 1;
    }

    /// Every lease pushed since the last call.
    pub(super) fn take(&mut self) -> WireLeases {
        let rows = base64::engine::general_purpose::STANDARD.encode(&self.rows);
        self.rows.clear();
        self.last_end = 0;
        WireLeases {
            keys: self.keys.take(),
            tokens: self.tokens.take(),
            count: std::mem::take(&mut self.count),
            rows,
        }
    }
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// Decoded lease rows of one interval.
#[derive(Debug, Clone, Default)]
pub(super) struct Leases {
    keys: Vec<String>,
    tokens: Vec<String>,
    count: u32,
    rows: Vec<u8>,
}

impl Leases {
    /// The rows of `wire`, base64 decoded (read as the merge needs them).
    pub(super) fn decode(wire: WireLeases) -> Result<Self, BatchError> {
        Ok(Self {
            rows: base64::engine::general_purpose::STANDARD
                .decode(&wire.rows)
                .map_err(|e| BatchError::Leases(e.to_string()))?,
            keys: wire.keys,
            tokens: wire.tokens,
            count: wire.count,
        })
    }
}

/// One lease, as the checks see it.
pub(super) struct LeaseRow<'a> {
    pub key: &'a str,
    pub token: &'a str,
    pub sku: u32,
    pub acquired: Instant,
    pub released: Instant,
    pub ended: Instant,
    pub shared: bool,
    pub sold: bool,
    pub found_sold_out: bool,
    /// Its holder learned it was lost.
    pub lost: bool,
    pub client: u32,
    /// When it asked for the lock.
    pub started: Instant,
    /// No lease: the wait ended in a give-up at `ended`.
    pub gave_up: bool,
}

/// A row read, its strings still indices into its interval's tables; times ns.
#[derive(Debug, Clone, Copy)]
struct Row {
    flags: u8,
    key: u32,
    sku: u32,
    ended: u64,
    released: u64,
    acquired: u64,
    head: u32,
    number: Option<(u64, u8)>,
    client: u32,
    waited: u64,
}

/// Reads an interval's rows one at a time.
#[derive(Debug)]
struct Cursor {
    leases: Leases,
    at: usize,
    left: u32,
    last_end: u64,
}

impl Cursor {
    fn new(leases: Leases) -> Self {
        let left = leases.count;
        Self {
            leases,
            at: 0,
            left,
            last_end: 0,
        }
    }

    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = *self
            .leases
            .rows
            .get(self.at)
            .ok_or_else(|| BatchError::Leases("cut short".into()))?;
        self.at += 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<u64, BatchError> {
        let rest = self.leases.rows.get(self.at..).unwrap_or_default();
        let mut n = 0u64;
        for (i, b) in rest.iter().take(10).enumerate() {
            n |= u64::from(b & 0x7f) << (7 * i);
            if *b < 0x80 {
                self.at += i + 1;
                return Ok(n);
            }
        }
        Err(BatchError::Leases("cut short in a varint".into()))
    }

    fn index(&mut self, len: usize) -> Result<u32, BatchError> {
        let i = self.varint()?;
        if i as usize >= len {
            return Err(BatchError::Leases(format!("index {i} outside its table")));
        }
        Ok(i as u32)
    }

    /// The next row, `None` after the last.
    fn next(&mut self) -> Result<Option<Row>, BatchError> {
        if self.left == 0 {
            if self.at != self.leases.rows.len() {
                return Err(BatchError::Leases("bytes left after the last row".into()));
            }
            return Ok(None);
        }
        self.left -= 1;
        let flags = self.byte()?;
        let key = self.index(self.leases.keys.len())?;
        let sku = self.varint()? as u32;
        let ended = self.last_end.wrapping_add(unzigzag(self.varint()?) as u64);
        let released = ended.wrapping_sub(unzigzag(self.varint()?) as u64);
        let acquired = released.wrapping_sub(unzigzag(self.varint()?) as u64);
        self.last_end = ended;
        if flags & FENCE != 0 {
            self.varint()?; // the checks need no fence (the history shows it)
        }
        let head = self.index(self.leases.tokens.len())?;
        let number = if flags & NUMBERED != 0 {
            Some((self.varint()?, self.byte()?))
        } else {
            None
        };
        let client = self.varint()? as u32;
        let waited = self.varint()?;
        Ok(Some(Row {
            flags,
            key,
            sku,
            ended,
            released,
            acquired,
            head,
            number,
            client,
            waited,
        }))
    }

    /// `row` (read from this cursor) with its strings; `token` is scratch space.
    fn lease<'a>(&'a self, row: &Row, start: Instant, token: &'a mut String) -> LeaseRow<'a> {
        token.clear();
        token.push_str(&self.leases.tokens[row.head as usize]);
        if let Some((n, digits)) = row.number {
            push_digits(token, n, digits);
        }
        LeaseRow {
            key: &self.leases.keys[row.key as usize],
            token,
            sku: row.sku,
            acquired: at(start, row.acquired),
            released: at(start, row.released),
            ended: at(start, row.ended),
            shared: row.flags & SHARED != 0,
            sold: row.flags & SOLD != 0,
            found_sold_out: row.flags & FOUND_SOLD_OUT != 0,
            lost: row.flags & LOST != 0,
            client: row.client,
            started: at(start, row.acquired.saturating_sub(row.waited)),
            gave_up: row.flags & GAVE_UP != 0,
        }
    }
}

/// Appends `n` in decimal, zero-padded to `digits`.
fn push_digits(out: &mut String, mut n: u64, digits: u8) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let from = (buf.len() - usize::from(digits).max(1)).min(i);
    out.push_str(std::str::from_utf8(&buf[from..]).expect("ASCII digits"));
}

/// One worker's leases not yet observed.
#[derive(Debug, Default)]
struct Pending {
    intervals: VecDeque<Cursor>,
    /// Its next row (read from the front interval), in the merge's heap.
    head: Option<Row>,
    /// Every lease of the worker that ended before this (ns) has arrived; `u64::MAX`: all.
    watermark: u64,
}

/// The workers' leases in end order: a lease is let through once every worker has sent all
/// its leases that ended before it (or one stayed silent for [`MAX_WAIT_NS`]).
#[derive(Debug, Default)]
pub(super) struct LeaseMerge {
    workers: Vec<Option<Pending>>,
    /// (end, worker) of each worker's head row.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    token: String,
}

impl LeaseMerge {
    /// Worker `k`'s leases of one interval; it has sent every lease that ended before
    /// `folded_to` (ns).
    pub(super) fn add(
        &mut self,
        k: usize,
        leases: Leases,
        folded_to: u64,
    ) -> Result<(), BatchError> {
        if self.workers.len() <= k {
            self.workers.resize_with(k + 1, || None);
        }
        let p = self.workers[k].get_or_insert_with(Pending::default);
        p.watermark = p.watermark.max(folded_to);
        p.intervals.push_back(Cursor::new(leases));
        if p.head.is_none() {
            self.advance(k)?;
        }
        Ok(())
    }

    /// Reads worker `k`'s next row into its head.
    fn advance(&mut self, k: usize) -> Result<(), BatchError> {
        let p = self.workers[k].as_mut().expect("a worker that sent leases");
        while let Some(c) = p.intervals.front_mut() {
            if let Some(row) = c.next()? {
                p.head = Some(row);
                self.heads.push(Reverse((row.ended, k)));
                return Ok(());
            }
            p.intervals.pop_front();
        }
        p.head = None;
        Ok(())
    }

    /// Up to when every lease has arrived: the slowest worker's watermark, but at most
    /// [`MAX_WAIT_NS`] behind the fastest still running.
    fn watermark(&self) -> u64 {
        let marks = self.workers.iter().flatten().map(|p| p.watermark);
        let slowest = marks.clone().min().unwrap_or(u64::MAX);
        match marks.filter(|w| *w != u64::MAX).max() {
            Some(fastest) => slowest.max(fastest.saturating_sub(MAX_WAIT_NS)),
            None => u64::MAX,
        }
    }

    /// Calls `f` with each lease that may go through now (every one with `all`), in end
    /// order, with its worker; times from `start`.
    pub(super) fn release(
        &mut self,
        all: bool,
        start: Instant,
        mut f: impl FnMut(usize, LeaseRow<'_>),
    ) -> Result<(), BatchError> {
        let through = if all { u64::MAX } else { self.watermark() };
        while let Some(&Reverse((ended, k))) = self.heads.peek() {
            if ended > through {
                break;
            }
            self.heads.pop();
            let p = self.workers[k].as_mut().expect("a worker that sent leases");
            let row = p.head.take().expect("a head per heap entry");
            let cursor = p.intervals.front().expect("the head's interval");
            f(k, cursor.lease(&row, start, &mut self.token));
            self.advance(k)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn tokens_split_and_join_back_exactly() {
        for token in [
            "b0",
            "b10",
            "0000beef-123456",
            "lock-0000000012",
            "x-00",
            "007",
            "tok",
            "",
            "12345678901234567890123",
            "a-18446744073709551615",
        ] {
            let (head, number) = split_token(token);
            let mut back = head.to_string();
            if let Some((n, digits)) = number {
                push_digits(&mut back, n, digits);
            }
            assert_eq!(back, token);
        }
        assert_eq!(split_token("b10"), ("b", Some((10, 2))));
        assert_eq!(split_token("tok"), ("tok", None));
    }

    #[test]
    fn lease_rows_read_back_as_written() {
        let start = Instant::now();
        let at = |us: u64| start + Duration::from_micros(us);
        let mut w = LeaseWriter::default();
        let mut written = Vec::new();
        for i in 0..300u64 {
            // Out of end order now and then: deltas go negative.
            let end = 1_000 + (i * 37) % 500 + i * 10;
            let outcome = [Outcome::Sold, Outcome::SoldOut, Outcome::Locked][i as usize % 3];
            let c = Completion {
                ask: Default::default(),
                seq: i,
                client: 0,
                sku: (i % 7) as u32,
                read: false,
                outcome,
                intended: at(end - 900),
                started: at(end - 800),
                ended: at(end),
                release_failed: false,
                lease: Some(LeaseSpan {
                    key: format!("k{}", i % 5),
                    token: [format!("b{i}"), format!("n-{i:06}"), "plain".into()][i as usize % 3]
                        .clone(),
                    fence: (i % 2 == 0).then_some(i * 1_000_000_007),
                    acquired: at(end - 700 + i % 3),
                    released: at(end - 10),
                    lost: i % 11 == 0,
                    shared: i % 4 == 0,
                    loss: None,
                }),
            };
            w.push(&c, c.lease.as_ref().unwrap(), start);
            written.push(c);
        }
        let wire = w.take();
        assert_eq!((wire.keys.len(), wire.tokens.len()), (5, 3));
        let mut merge = LeaseMerge::default();
        merge
            .add(0, Leases::decode(wire.clone()).unwrap(), 0)
            .unwrap();
        let mut read = 0;
        merge
            .release(true, start, |k, l| {
                let c = &written[read];
                let lease = c.lease.as_ref().unwrap();
                assert_eq!(k, 0);
                assert_eq!((l.key, l.token), (lease.key.as_str(), lease.token.as_str()));
                assert_eq!(
                    (l.sku, l.acquired, l.released, l.ended),
                    (c.sku, lease.acquired, lease.released, c.ended)
                );
                assert_eq!(
                    (l.shared, l.sold, l.found_sold_out),
                    (
                        lease.shared,
                        c.outcome == Outcome::Sold,
                        c.outcome == Outcome::SoldOut
                    )
                );
                read += 1;
            })
            .unwrap();
        assert_eq!(read, 300, "a worker's rows come in the order it wrote them");
        let mut cut = Leases::decode(wire).unwrap();
        cut.rows.pop();
        let mut merge = LeaseMerge::default();
        let read = merge
            .add(0, cut, 0)
            .and_then(|()| merge.release(true, start, |_, _| {}));
        assert!(read.is_err(), "a cut row is an error");
    }

    /// Worker `k`'s interval of leases ending at `ends_ms`.
    fn interval(start: Instant, k: usize, ends_ms: &[u64]) -> Leases {
        let mut w = LeaseWriter::default();
        for &e in ends_ms {
            let t = start + Duration::from_millis(e);
            let c = Completion {
                seq: e,
                client: k as u32,
                lease: Some(LeaseSpan::fixture("k", &format!("w{k}-{e}"), t, t)),
                ..Completion::fixture(Outcome::Sold, t, Duration::ZERO)
            };
            w.push(&c, c.lease.as_ref().unwrap(), start);
        }
        Leases::decode(w.take()).unwrap()
    }

    #[test]
    fn the_merge_lets_leases_through_in_end_order_once_every_worker_is_past_them() {
        let start = Instant::now();
        let ms = |m: u64| m * 1_000_000;
        let mut merge = LeaseMerge::default();
        let mut seen: Vec<(u64, usize)> = Vec::new();
        let mut release = |merge: &mut LeaseMerge, all: bool| {
            merge
                .release(all, start, |k, l| {
                    seen.push(((l.ended - start).as_millis() as u64, k));
                })
                .unwrap();
            seen.clone()
        };
        // Three workers, ends interleaved (worker k ends at k, k + 3, …), one interval each
        // covering the first 300 ms; worker 2's comes last.
        let ends = |k: u64, from: u64, to: u64| -> Vec<u64> {
            (from..to).filter(|e| e % 3 == k).collect()
        };
        merge
            .add(0, interval(start, 0, &ends(0, 0, 300)), ms(300))
            .unwrap();
        merge
            .add(1, interval(start, 1, &ends(1, 0, 300)), ms(300))
            .unwrap();
        let early = release(&mut merge, false);
        assert!(
            early.windows(2).all(|w| w[0].0 <= w[1].0),
            "in end order: {early:?}"
        );
        merge
            .add(2, interval(start, 2, &ends(2, 0, 300)), ms(300))
            .unwrap();
        let now = release(&mut merge, false);
        assert_eq!(now.len(), 300, "all three are past 300 ms");
        // Worker 2 falls silent; the others go on to 2.5 s: it holds them back 2 s at most.
        merge
            .add(0, interval(start, 0, &ends(0, 300, 2_500)), ms(2_500))
            .unwrap();
        merge
            .add(1, interval(start, 1, &ends(1, 300, 2_500)), ms(2_500))
            .unwrap();
        let waited = release(&mut merge, false);
        let last = waited.last().unwrap().0;
        assert!((498..=500).contains(&last), "up to 2.5 s - 2 s: {last}");
        // Its last interval (all it had): everything, in end order.
        merge
            .add(2, interval(start, 2, &ends(2, 300, 2_500)), u64::MAX)
            .unwrap();
        let all = release(&mut merge, true);
        assert_eq!(all.len(), 2_500);
        let late = all
            .iter()
            .filter(|(e, k)| *k == 2 && *e >= 300 && *e <= last)
            .count();
        assert!(
            late > 0,
            "worker 2's leases before the wait were let through late"
        );
        let rest = &all[waited.len()..];
        assert!(rest.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}

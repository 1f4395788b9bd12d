use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Grants of (client, asked, held from, held to) in ms from `t0`, each attempt ending at its
/// release.
fn grants(c: &mut ContentionTracker, t0: Instant, sku: u32, list: &[(u32, u64, u64, u64)]) {
    for &(client, asked, a, r) in list {
        c.grant(
            sku,
            client,
            t0 + ms(asked),
            (t0 + ms(a), t0 + ms(r)),
            t0 + ms(r),
            false,
        );
    }
}

/// The contention of `grants` on key 0 alone, each attempt granted.
fn of_one_key(t0: Instant, list: &[(u32, u64, u64, u64)]) -> Contention {
    let mut c = ContentionTracker::new(ms(1000), ms(10));
    grants(&mut c, t0, 0, list);
    c.finish().expect("a lock run")
}

#[test]
fn acquire_waits_and_give_ups_are_measured_apart_from_the_hold() {
    let t0 = Instant::now();
    let mut c = ContentionTracker::new(ms(1000), ms(10));
    // Waited 5 ms then held 100 ms; waited 40 ms then held 1 ms.
    grants(&mut c, t0, 0, &[(1, 0, 5, 105), (2, 65, 105, 106)]);
    c.give_up(0, 3, t0, t0 + ms(300));
    let r = c.finish().expect("a lock run");
    assert_eq!(r.acquire.count, 2);
    assert!(
        (39_000..=40_100).contains(&r.acquire.max),
        "{}",
        r.acquire.max
    );
    assert!(r.acquire.p50 < 5_100, "{}", r.acquire.p50);
    assert_eq!((r.give_ups, r.longest_give_up_us), (1, 300_000));
}

#[test]
fn a_give_up_while_the_key_lay_free_is_a_missed_wake_up() {
    let t0 = Instant::now();
    let mut c = ContentionTracker::new(ms(1000), ms(10));
    // Key 0: held back to back (1 ms handoffs) over the whole wait: not missed.
    grants(
        &mut c,
        t0,
        0,
        &[(1, 0, 0, 50), (2, 0, 51, 100), (4, 0, 101, 200)],
    );
    c.give_up(0, 3, t0 + ms(10), t0 + ms(190));
    // Key 1: free from 50 to 80 ms while buyer 3 waited: missed.
    grants(&mut c, t0, 1, &[(1, 0, 0, 50), (2, 0, 80, 200)]);
    c.give_up(1, 3, t0 + ms(10), t0 + ms(190));
    let r = c.finish().expect("a lock run");
    assert_eq!(r.missed_wakeups, 1);
    assert_eq!(r.longest_free_while_waiting_us, 30_000);
    assert_eq!(r.missed_wakeup_grace_us, 25_000);
}

#[test]
fn a_holder_that_takes_the_key_back_past_a_waiter_barges() {
    let t0 = Instant::now();
    // Barging: buyer 1 releases at 10 and takes the key again at 11 though buyer 2 has waited
    // since 5; then buyer 2 gets it. Two handoffs with a waiter, one barge.
    let r = of_one_key(t0, &[(1, 0, 0, 10), (1, 10, 11, 20), (2, 5, 22, 30)]);
    assert_eq!((r.handoffs_with_waiter, r.barges), (2, 1));
    // In order: buyer 2 (waiting since 5) gets it at 11, buyer 1 (back at 12) at 21.
    let r = of_one_key(t0, &[(1, 0, 0, 10), (2, 5, 11, 20), (1, 12, 21, 30)]);
    assert_eq!((r.handoffs_with_waiter, r.barges), (2, 0));
    // Nobody waiting: a buyer taking the key again is no barge, and no handoff counts.
    let r = of_one_key(t0, &[(1, 0, 0, 10), (1, 15, 15, 20)]);
    assert_eq!((r.handoffs_with_waiter, r.barges), (0, 0));
}

#[test]
fn fairness_compares_each_buyers_share_with_what_equal_odds_give() {
    let t0 = Instant::now();
    let mut c = ContentionTracker::new(ms(1000), ms(10));
    // Key 0: buyer 1 wins 10 of 10, buyer 2 none of 10.
    for i in 0..10u64 {
        grants(&mut c, t0, 0, &[(1, 10 * i, 10 * i, 10 * i + 5)]);
        c.give_up(0, 2, t0 + ms(10 * i), t0 + ms(10 * i + 9));
    }
    let f = c
        .finish()
        .expect("a lock run")
        .fairness
        .expect("two buyers");
    assert_eq!((f.jain, f.keys, f.buyers), (0.5, 1, 2));
    // Equal odds (1/2) over 10 attempts each: 0.5 / (2 × (0.25 + 0.025)) = 0.909.
    assert_eq!(f.jain_if_fair, 0.909);
    assert_eq!(f.lowest_share, Some(0.0));
    // Each wins 5 of 10: perfectly even.
    let mut c = ContentionTracker::new(ms(1000), ms(10));
    for i in 0..10u64 {
        let (winner, loser) = if i % 2 == 0 { (1, 2) } else { (2, 1) };
        grants(&mut c, t0, 0, &[(winner, 10 * i, 10 * i, 10 * i + 5)]);
        c.give_up(0, loser, t0 + ms(10 * i), t0 + ms(10 * i + 9));
    }
    let f = c
        .finish()
        .expect("a lock run")
        .fairness
        .expect("two buyers");
    assert_eq!(f.jain, 1.0);
    // One buyer alone on its key: nothing to be fair about.
    assert_eq!(of_one_key(t0, &[(1, 0, 0, 5)]).fairness, None);
}

#[test]
fn streaming_counts_what_one_pass_at_the_end_counts() {
    let t0 = Instant::now();
    // Two buyers alternating on one key with 1 ms handoffs, each asking before the other's
    // release; every 7th grant goes back to the releasing buyer while buyer 8 waits (a barge),
    // and every 50th comes after a 30 ms free stretch over which buyer 9 gave up (missed):
    // thousands of attempts, compacted on the way (40 ms horizon) or only at the end (an hour).
    let feed = |c: &mut ContentionTracker| {
        let (mut at, mut client) = (10u64, 0u32);
        for i in 0..5_000u64 {
            if i % 7 != 0 {
                client = 1 - client;
            }
            let gap = if i % 50 == 0 { 30 } else { 1 };
            if i % 50 == 0 {
                c.give_up(0, 9, t0 + ms(at), t0 + ms(at + gap));
            }
            at += gap;
            let held = (t0 + ms(at), t0 + ms(at + 1));
            c.grant(0, client, t0 + ms(at - 2), held, held.1, false);
            if i % 7 == 0 && gap == 1 {
                c.give_up(0, 8, t0 + ms(at - 3), t0 + ms(at + 1));
            }
            at += 1;
        }
    };
    let mut streamed = ContentionTracker::new(ms(40), ms(1));
    feed(&mut streamed);
    let pending = streamed.keys[&0].grants.len();
    assert!(pending < 2_000, "memory stays bounded: {pending}");
    let mut whole = ContentionTracker::new(ms(3_600_000), ms(1));
    feed(&mut whole);
    let (s, w) = (streamed.finish().unwrap(), whole.finish().unwrap());
    assert_eq!(s, w);
    assert_eq!(s.missed_wakeups, 100);
    // Every 7th grant, except those after a free stretch (every 350th), barged.
    assert_eq!(s.barges, 5_000 / 7 + 1 - 5_000 / 350 - 1);
    assert_eq!(s.handoffs_with_waiter, 4_999 - 100 + 1);
}

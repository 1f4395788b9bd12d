//! The "holder" pause: a worker process armed by the coordinator stops itself (SIGSTOP) at a
//! chosen point of a lock holder's attempt, freezing its watchdog and keep-alive tasks with it,
//! like a long GC pause.
//!
//! By default the point is [`Point::AfterRead`]: between the holder's read of the stock and
//! its write, where the GC pause falls in Kleppmann's example. A holder paused there past its
//! lease writes a stock value read before another holder's sale, so an unfenced expiring lock
//! loses an update every time, not by luck; a fenced store refuses the write every time.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use crate::names::enum_names;

/// Where in a lock holder's attempt the pause lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Right after acquire returned, before the critical section reads anything: the resumed
    /// holder reads fresh stock, so whether its write costs a unit is luck.
    AfterAcquire,
    /// Between the read of the stock and the write (the critical section's hold).
    AfterRead,
    /// After the write, before the release is sent.
    BeforeRelease,
}

// In attempt order; the names of chaos files (`point = "after-read"`).
enum_names!(Point {
    AfterAcquire = "after-acquire",
    AfterRead = "after-read",
    BeforeRelease = "before-release",
});

impl Point {
    fn code(self) -> u8 {
        self as u8 + 1
    }
}

/// 0: disarmed; else [`Point::code`] of the armed point.
static ARMED: AtomicU8 = AtomicU8::new(0);
static HOOK: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Installs what to do when the armed point is reached (the worker: tell the coordinator, then
/// stop). Without a hook, arming does nothing.
pub fn set_hook(hook: Box<dyn Fn() + Send + Sync>) {
    let _ = HOOK.set(hook);
}

/// Arms the pause at `point` (or disarms it with `None`): the next lock holder in this process
/// that reaches it triggers the hook once.
pub fn arm(point: Option<Point>) {
    ARMED.store(point.map_or(0, Point::code), Ordering::SeqCst);
}

/// Called by a lock holder at `point`; one relaxed load when nothing is armed.
pub fn reached(point: Point) {
    let code = point.code();
    if ARMED.load(Ordering::Relaxed) == code
        && ARMED
            .compare_exchange(code, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        && let Some(hook) = HOOK.get()
    {
        hook();
    }
}

/// Called by a holder whose one call took the lock and read the stock (a locking read, or a
/// transaction's lock and read sent together): both points are there.
pub fn reached_by_locking_read() {
    reached(Point::AfterAcquire);
    reached(Point::AfterRead);
}

/// Whether the reapers of reserve-then-pay are paused (`target = "reaper"`): the same kind of
/// process-wide switch as the holder's, but the reapers run in the coordinator beside the
/// buyers, so they wait in place instead of stopping the process.
static REAPERS_PAUSED: AtomicBool = AtomicBool::new(false);

/// The longest a reaper waits at a pause whose heal never came (a run cut short).
pub const REAPER_PAUSE_MAX: Duration = Duration::from_secs(60);

/// Pauses (`true`) or resumes the reapers; the chaos runner's inject and heal.
pub fn pause_reapers(on: bool) {
    REAPERS_PAUSED.store(on, Ordering::SeqCst);
}

/// Called by a reaper between its select of expired reservations and their update: waits
/// while the reapers are paused (at most [`REAPER_PAUSE_MAX`]). Returns at once otherwise.
pub async fn reaper_selected() {
    let deadline = tokio::time::Instant::now() + REAPER_PAUSE_MAX;
    while REAPERS_PAUSED.load(Ordering::SeqCst) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_have_distinct_codes_and_names() {
        let codes: std::collections::BTreeSet<u8> = Point::ALL.iter().map(|p| p.code()).collect();
        assert_eq!(codes.len(), 3);
        assert!(!codes.contains(&0), "0 means disarmed");
        for &p in Point::ALL {
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{p}\""));
            assert_eq!(serde_json::from_str::<Point>(&json).unwrap(), p);
        }
    }
}

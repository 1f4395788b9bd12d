//! The progress bar of a run: the part of the command it belongs to, the strategy, its load
//! so far (attempts, sales) and the time left. Drawn on stderr only when stderr is a terminal
//! (indicatif hides it otherwise), so CI logs and pipes stay clean.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::record::Live;

/// The job's part now running (`job 2/4 capacity`), set by `lockbench job`.
static JOB: Mutex<Option<String>> = Mutex::new(None);
/// The parts the runs now belong to, outermost first: a comparison's run `i/n`, a sweep's
/// strategy, each with when it expects to end.
static PARTS: Mutex<Vec<Part>> = Mutex::new(Vec::new());

struct Part {
    id: u64,
    name: String,
    ends: Option<Instant>,
}

/// The next part's id (its guard removes it by id: parallel tests share the list).
static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Names the job's part every later run's bar shows (`None` when the job ends).
pub(super) fn job_part(name: Option<String>) {
    *JOB.lock().unwrap_or_else(|e| e.into_inner()) = name;
}

/// A part of a command (a comparison's run, a sweep's strategy), shown by every run's bar
/// until the guard drops; `left`: how long the part is expected to take from now, when known.
pub(super) fn part(name: String, left: Option<Duration>) -> PartGuard {
    let ends = left.map(|l| Instant::now() + l);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    parts.push(Part { id, name, ends });
    PartGuard(id)
}

/// Removes its part when dropped.
pub(super) struct PartGuard(u64);

impl Drop for PartGuard {
    fn drop(&mut self) {
        let mut parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
        parts.retain(|p| p.id != self.0);
    }
}

/// The bar's prefix: the job's part, the command's parts, the strategy.
fn prefix(strategy: &str) -> String {
    let job = JOB.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    job.into_iter()
        .chain(parts.iter().map(|p| p.name.clone()))
        .chain(std::iter::once(strategy.to_string()))
        .collect::<Vec<_>>()
        .join(" › ")
}

/// When the outermost part that knows expects to end.
fn part_ends() -> Option<Instant> {
    let parts = PARTS.lock().unwrap_or_else(|e| e.into_inner());
    parts.iter().find_map(|p| p.ends)
}

/// What the runs `left` should take, for the progress bar: each as long as the `done` before
/// took on average, or, before any ended, its load and a guess of 10 s for its servers.
pub(super) fn time_left(left: &[super::Plan], done: usize, took: Duration) -> Duration {
    if done > 0 {
        return took / done as u32 * left.len() as u32;
    }
    let servers = Duration::from_secs(10);
    left.iter()
        .map(|p| p.opts.workload.load.duration + servers)
        .sum()
}

/// `45 s`, `3 min 20 s`.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}

/// A ticking bar, cleared when dropped.
pub(super) struct Bar {
    bar: ProgressBar,
    ticker: tokio::task::JoinHandle<()>,
}

impl Bar {
    /// Starts a bar for runs longer than a couple of seconds (hidden anyway when stderr is not
    /// a terminal).
    pub(super) fn start(
        enabled: bool,
        id: &str,
        duration: Duration,
        live: Arc<Live>,
        cancel: &CancellationToken,
    ) -> Option<Bar> {
        if !enabled || duration < Duration::from_secs(1) {
            return None;
        }
        let bar = ProgressBar::new(duration.as_millis() as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:24}] {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(prefix(id));
        let start = Instant::now();
        let ends = part_ends();
        let (ticking, cancel) = (bar.clone(), cancel.clone());
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                let done = start.elapsed().min(duration);
                ticking.set_position(done.as_millis() as u64);
                let n = live.attempts.load(Ordering::Relaxed);
                let sold = live.sold.load(Ordering::Relaxed);
                // The part's end when it has one (a comparison's last run), else this load's.
                let left = ends.map_or(duration - done, |e| {
                    e.saturating_duration_since(Instant::now())
                        .max(duration - done)
                });
                ticking.set_message(format!(
                    "{}/{} s, {n} attempts, {sold} sold, about {} left",
                    done.as_secs(),
                    duration.as_secs(),
                    span(left)
                ));
                if done >= duration || cancel.is_cancelled() {
                    return;
                }
            }
        });
        Some(Bar { bar, ticker })
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.ticker.abort();
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_names_the_job_part_the_command_part_and_the_strategy() {
        // Other tests' comparisons may run beside this one: only this part is asserted.
        let outer = part("compare 2/3 (test)".into(), Some(Duration::from_secs(90)));
        let shown = prefix("zookeeper");
        assert!(shown.contains("compare 2/3 (test) › ") && shown.ends_with("› zookeeper"));
        assert!(part_ends().is_some());
        drop(outer);
        assert!(!prefix("zookeeper").contains("compare 2/3 (test)"));
        assert_eq!(span(Duration::from_secs(200)), "3 min 20 s");
        assert_eq!(span(Duration::from_secs(42)), "42 s");
    }
}

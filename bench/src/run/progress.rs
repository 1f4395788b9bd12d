//! The progress bar of a run: elapsed load time, attempts and sales so far.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio_util::sync::CancellationToken;

use crate::record::Live;

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
        if !enabled || duration < Duration::from_secs(2) {
            return None;
        }
        let bar = ProgressBar::new(duration.as_millis() as u64);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{prefix:>18}} [{{bar:30}}] {{elapsed:>3}}/{}s {{msg}}",
                duration.as_secs()
            ))
            .expect("valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(id.to_string());
        let start = Instant::now();
        let (ticking, cancel) = (bar.clone(), cancel.clone());
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                let done = start.elapsed().min(duration);
                ticking.set_position(done.as_millis() as u64);
                let n = live.attempts.load(Ordering::Relaxed);
                let sold = live.sold.load(Ordering::Relaxed);
                ticking.set_message(format!("{n} attempts, {sold} sold"));
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

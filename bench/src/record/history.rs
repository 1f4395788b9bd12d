//! The event history as JSON lines, streamed to disk (never held in memory).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::Completion;

/// Writes one JSON object per completion; times are µs since the run started.
pub struct HistoryWriter {
    out: BufWriter<File>,
    start: Instant,
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    client: u32,
    sku: u32,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    intended_us: u64,
    start_us: u64,
    end_us: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    release_failed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<Lease<'a>>,
}

#[derive(Serialize)]
struct Lease<'a> {
    key: &'a str,
    token: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    fence: Option<u64>,
    acquired_us: u64,
    released_us: u64,
}

impl HistoryWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path, start: Instant) -> std::io::Result<Self> {
        Ok(Self {
            out: BufWriter::with_capacity(1 << 16, File::create(path)?),
            start,
        })
    }

    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_micros() as u64
    }

    /// Appends one completion.
    pub fn write(&mut self, c: &Completion) -> std::io::Result<()> {
        let line = Line {
            seq: c.seq,
            client: c.client,
            sku: c.sku,
            outcome: c.outcome.name(),
            error: c.outcome.error().map(|k| k.name()),
            intended_us: self.us(c.intended),
            start_us: self.us(c.started),
            end_us: self.us(c.ended),
            release_failed: c.release_failed,
            lease: c.lease.as_ref().map(|l| Lease {
                key: &l.key,
                token: &l.token,
                fence: l.fence,
                acquired_us: self.us(l.acquired),
                released_us: self.us(l.released),
            }),
        };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    /// Flushes to disk.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

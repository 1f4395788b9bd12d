//! The chart of `lockbench contend` (`contend.json`): two panels on shared contender axes,
//! every strategy in each. Above, grants/s against contenders: the mean of a level's trials
//! with a whisker from the lowest to the highest, and the Universal Scalability Law fitted to
//! them as a line (dashed through the means when there is no fit). Below, the acquire p99:
//! a ring where too few waits bound a p99 and the point is their maximum.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::frame::{self, Frame, Legend, Mark, PANEL_MIN_H, PanelArea, err};
use super::palette::Ink;
use super::{Chart, Draw, Kind};
use crate::record::Pct;
use crate::report::contend::{Contend, ContendEntry};
use crate::report::error::ReportError;
use crate::report::format::{ms_axis, rate_axis};
use crate::report::usl::Usl;

/// Grey of the key's marks (their shape is the meaning).
const KEY_GREY: RGBColor = RGBColor(110, 110, 110);

/// Draws `charts_dir/contention.svg` and `.png` and returns the SVG.
pub fn render_contend(c: &Contend, charts_dir: &Path) -> Result<Vec<Chart>, ReportError> {
    let chart = ContentionChart::new(c);
    Ok(vec![super::render(Kind::Contention, &chart, charts_dir)?])
}

struct ContentionChart<'a> {
    c: &'a Contend,
    frame: Frame,
    /// Contender axis, and the two value axes: grants/s and acquire p99 in ms.
    x: (f64, f64),
    rate: (f64, f64),
    p99: (f64, f64),
}

/// `(lo, hi)` of positive `values` padded for a log axis; `fallback` without any.
fn log_range(values: impl Iterator<Item = f64>, pad: f64, fallback: (f64, f64)) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi > 0.0 {
        (lo / pad, hi * pad)
    } else {
        fallback
    }
}

impl<'a> ContentionChart<'a> {
    fn new(c: &'a Contend) -> Self {
        let levels = || c.entries.iter().flat_map(|e| e.levels.iter());
        let top = levels().map(|l| l.contenders).max().unwrap_or(1).max(2);
        let x = (0.8, f64::from(top) * 1.25);
        let fits = c.entries.iter().filter_map(|e| fit_of(e)).flat_map(|f| {
            let n = f.peak_n.unwrap_or(1.0).clamp(1.0, f64::from(top));
            [f.at(1.0), f.at(n), f.at(f64::from(top))]
        });
        let trials = levels().flat_map(|l| [l.throughput.min, l.throughput.max]);
        let rate = log_range(trials.chain(fits), 1.6, (1.0, 10.0));
        let p99 = log_range(
            levels()
                .filter(|l| l.acquire_count > 0)
                .flat_map(|l| [l.acquire_p99_us.min / 1000.0, l.acquire_p99_us.max / 1000.0]),
            2.0,
            (0.1, 10.0),
        );
        let grey = Ink {
            color: KEY_GREY,
            ..Ink::nth(0)
        };
        let key = vec![
            (
                "mean of a level's trials (whisker: lowest to highest)".to_string(),
                Mark::Dot(KEY_GREY),
            ),
            ("USL fit".to_string(), Mark::Stroke(grey)),
            (
                "no fit: the means joined".to_string(),
                Mark::Dashed(KEY_GREY),
            ),
            (
                "ring: a trial had too few waits for a p99 (its maximum)".to_string(),
                Mark::Ring(KEY_GREY),
            ),
        ];
        let n = c.entries.len();
        let frame = Frame::new(Kind::Contention.title(), key, &[n, n], 1, 220, PANEL_MIN_H);
        Self {
            c,
            frame,
            x,
            rate,
            p99,
        }
    }
}

fn fit_of(e: &ContendEntry) -> Option<&crate::report::usl::UslFit> {
    match &e.usl {
        Some(Usl::Fit(f)) => Some(f),
        _ => None,
    }
}

/// A level's acquire p99 in ms, the mean of its trials' (a trial's maximum when too few
/// waits bound it).
fn p99_ms(l: &crate::report::contend::Level) -> f64 {
    l.acquire_p99_us.mean / 1000.0
}

impl Draw for ContentionChart<'_> {
    fn size(&self) -> (u32, u32) {
        self.frame.size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let titles = [
            "grants/s against contenders, with the USL fit",
            "acquire wait p99 against contenders",
        ];
        self.frame.draw(root, &titles, |i, p| {
            if i == 0 {
                self.throughput(p)
            } else {
                self.acquire(p)
            }
        })
    }
}

/// Contenders across and a rate or a wait up, both on log scales.
type LogLog = Cartesian2d<LogCoord<f64>, LogCoord<f64>>;

impl ContentionChart<'_> {
    fn legend(&self) -> Legend {
        (0..self.c.entries.len())
            .map(|i| (self.c.entries[i].strategy.clone(), Mark::Line(Ink::nth(i))))
            .collect()
    }

    /// The log–log axes both panels draw on: contenders across, `y` (its range, description
    /// and tick labels) up.
    fn axes<'a, DB: DrawingBackend>(
        &self,
        p: &'a PanelArea<DB>,
        y: (f64, f64),
        y_desc: &str,
        y_label: fn(f64) -> String,
    ) -> Result<ChartContext<'a, DB, LogLog>, String> {
        let mut chart = p
            .builder()
            .build_cartesian_2d((self.x.0..self.x.1).log_scale(), (y.0..y.1).log_scale())
            .map_err(err)?;
        p.draw_mesh(
            chart
                .configure_mesh()
                .x_desc("contenders on one key (log scale)")
                .y_desc(y_desc)
                .x_label_formatter(&|v| rate_axis(*v))
                .y_label_formatter(&|v| y_label(*v)),
        )?;
        Ok(chart)
    }

    fn throughput<DB: DrawingBackend>(&self, p: &PanelArea<DB>) -> Result<Legend, String> {
        let mut chart = self.axes(p, self.rate, "grants/s (log scale)", rate_axis)?;
        for (i, e) in self.c.entries.iter().enumerate() {
            let ink = Ink::nth(i);
            let means: Vec<(f64, f64)> = e
                .levels
                .iter()
                .filter(|l| l.throughput.mean > 0.0)
                .map(|l| (f64::from(l.contenders), l.throughput.mean))
                .collect();
            match fit_of(e) {
                Some(f) => {
                    let top = means.last().map_or(1.0, |m| m.0).max(1.0);
                    // 60 points evenly spaced on the log axis.
                    let curve = (0..=60)
                        .map(|k| top.powf(f64::from(k) / 60.0))
                        .map(|n| (n, f.at(n)))
                        .collect();
                    frame::draw_line(
                        &mut chart,
                        curve,
                        Ink {
                            dashed: false,
                            ..ink
                        },
                        None,
                    )?;
                }
                None => frame::draw_line(
                    &mut chart,
                    means.clone(),
                    Ink {
                        dashed: true,
                        ..ink
                    },
                    None,
                )?,
            }
            for l in e.levels.iter().filter(|l| l.throughput.max > 0.0) {
                let n = f64::from(l.contenders);
                let lo = l.throughput.min.max(self.rate.0);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(n, lo), (n, l.throughput.max)],
                        ink.color.stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            chart
                .draw_series(means.iter().map(|&m| Circle::new(m, 4, ink.color.filled())))
                .map_err(err)?;
        }
        Ok(self.legend())
    }

    fn acquire<DB: DrawingBackend>(&self, p: &PanelArea<DB>) -> Result<Legend, String> {
        let mut chart = self.axes(p, self.p99, "acquire wait p99 (ms, log scale)", ms_axis)?;
        for (i, e) in self.c.entries.iter().enumerate() {
            let ink = Ink::nth(i);
            let levels: Vec<_> = e.levels.iter().filter(|l| l.acquire_count > 0).collect();
            let points: Vec<(f64, f64)> = levels
                .iter()
                .map(|l| (f64::from(l.contenders), p99_ms(l).max(self.p99.0)))
                .collect();
            frame::draw_line(&mut chart, points.clone(), ink, None)?;
            for (l, at) in levels.iter().zip(points) {
                // The trials' range, as on the throughput panel.
                let (lo, hi) = (l.acquire_p99_us.min / 1000.0, l.acquire_p99_us.max / 1000.0);
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(at.0, lo.max(self.p99.0)), (at.0, hi.max(self.p99.0))],
                        ink.color.stroke_width(2),
                    )))
                    .map_err(err)?;
                let style = if l.supports(Pct::P99) {
                    ink.color.filled()
                } else {
                    ink.color.stroke_width(2)
                };
                chart
                    .draw_series(std::iter::once(Circle::new(at, 5, style)))
                    .map_err(err)?;
            }
        }
        Ok(self.legend())
    }
}

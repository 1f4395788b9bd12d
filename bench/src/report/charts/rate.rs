//! The latency–throughput chart of a sweep: the SLO percentile over every arrival against the
//! offered rate, one line per strategy, one panel per family, the SLO drawn and named.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::frame::{
    self, Axis, FONT, Frame, Legend, Mark, PANEL_MIN_H, PanelArea, UNSAFE_RED, err, text_size,
};
use super::layout::{self, Rect};
use super::palette::{Ink, Panel};
use super::{Draw, Kind};
use crate::report::format::{ms_axis, rate_axis};
use crate::report::sweep::{Entry, Slo, Step, Sweep};

/// Neutral grey for the marks of the key (their shape is the meaning).
const KEY_GREY: RGBColor = RGBColor(110, 110, 110);

/// `p99 ≤ 100 ms`.
fn slo_short(slo: &Slo) -> String {
    format!("{} ≤ {} ms", slo.percentile_name(), ms_axis(slo.latency_ms))
}

/// A step's latency on a log axis: a zero (nothing measured) sits at the axis floor.
fn latency_of(ms: f64, floor: f64) -> f64 {
    if ms > 0.0 { ms } else { floor }
}

/// The latency–throughput chart.
pub(super) struct LatencyVsRate<'a> {
    sweep: &'a Sweep,
    panels: &'a [Panel],
    frame: Frame,
    /// `(lo, hi)` of the rate axis and of the latency axis.
    x: (f64, f64),
    y: (f64, f64),
}

impl<'a> LatencyVsRate<'a> {
    pub(super) fn new(sweep: &'a Sweep, panels: &'a [Panel]) -> Self {
        let steps = || sweep.entries.iter().flat_map(|e| e.steps.iter());
        let (rlo, rhi) = steps()
            .map(|s| s.rate_per_s)
            .filter(|r| *r > 0.0)
            .fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let x = if rhi > 0.0 {
            (rlo / 1.4, rhi * 1.4)
        } else {
            (1.0, 10.0)
        };
        let slo = sweep.slo.latency_ms;
        let (llo, lhi) = steps()
            .map(|s| s.latency_ms)
            .filter(|v| *v > 0.0)
            .fold((slo, slo), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let y = (llo / 2.0, lhi * 2.5);
        let key = rate_key(
            &sweep.slo,
            sweep.entries.iter().any(|e| !e.unsafe_steps.is_empty()),
        );
        let rows: Vec<usize> = panels.iter().map(|p| p.members.len()).collect();
        let frame = Frame::new(Kind::LatencyVsRate.title(), key, &rows, 2, 190, PANEL_MIN_H);
        LatencyVsRate {
            sweep,
            panels,
            frame,
            x,
            y,
        }
    }
}

/// What the marks of the latency chart mean.
fn rate_key(slo: &Slo, any_unsafe: bool) -> Legend {
    let mut key = vec![
        (format!("SLO {}", slo.label()), Mark::Dashed(UNSAFE_RED)),
        ("met the SLO".to_string(), Mark::Dot(KEY_GREY)),
        ("missed it".to_string(), Mark::Ring(KEY_GREY)),
        (
            "at least (arrivals never served)".to_string(),
            Mark::Up(KEY_GREY),
        ),
        ("capacity".to_string(), Mark::Capacity),
    ];
    if any_unsafe {
        key.push(("unsafe step".to_string(), Mark::Cross(UNSAFE_RED)));
    }
    key
}

impl Draw for LatencyVsRate<'_> {
    fn size(&self) -> (u32, u32) {
        self.frame.size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let titles: Vec<&str> = self.panels.iter().map(|p| p.group.title()).collect();
        self.frame.draw(root, &titles, |i, p| {
            let members: Vec<(&Entry, Ink)> = self.panels[i]
                .members
                .iter()
                .map(|&(j, ink)| (&self.sweep.entries[j], ink))
                .collect();
            self.panel(p, &members)
        })
    }
}

impl LatencyVsRate<'_> {
    /// Names the SLO line, above or below it, where the label hides the fewest steps and
    /// lines of the panel.
    fn slo_label<DB: DrawingBackend, X: Axis, Y: Axis>(
        &self,
        p: &PanelArea<DB>,
        chart: &ChartContext<'_, DB, Cartesian2d<X, Y>>,
        members: &[(&Entry, Ink)],
    ) -> Result<(), String> {
        let slo = &self.sweep.slo;
        let label = format!("SLO {}", slo_short(slo));
        let (w, h) = text_size(&label, 13);
        let mut points = Vec::new();
        let mut segments = Vec::new();
        for (e, _) in members {
            let mut steps: Vec<(i32, i32)> = e
                .decisive_steps()
                .into_iter()
                .map(|s| (s.rate_per_s, latency_of(s.latency_ms, self.y.0)))
                .map(|(r, l)| (r, l, chart.backend_coord(&(r, l))))
                .map(|(_, _, px)| px)
                .collect();
            steps.sort();
            segments.extend(steps.windows(2).map(|w| (w[0], w[1])));
            points.extend(steps);
        }
        let (xs, _) = chart.plotting_area().get_pixel_range();
        let line_y = chart.backend_coord(&(self.x.0, slo.latency_ms)).1;
        let candidates: Vec<Rect> = (0..)
            .map(|k| xs.start + 6 + k * 30)
            .take_while(|x| x + w + 6 <= xs.end)
            .flat_map(|x| {
                [
                    Rect::new(x - 2, line_y - h - 3, w + 4, h),
                    Rect::new(x - 2, line_y + 3, w + 4, h),
                ]
            })
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        let at = candidates[layout::least_covered(&candidates, &points, &segments)];
        let (bx, by) = p.whole.get_base_pixel();
        let (x, y) = (at.x - bx, at.y - by);
        p.whole
            .draw(&Rectangle::new(
                [(x, y), (x + at.w, y + at.h)],
                WHITE.filled(),
            ))
            .map_err(err)?;
        p.whole
            .draw(&Text::new(
                label,
                (x + 2, y + 1),
                (FONT, 13).into_font().color(&UNSAFE_RED),
            ))
            .map_err(err)
    }

    fn panel<DB: DrawingBackend>(
        &self,
        p: &PanelArea<DB>,
        members: &[(&Entry, Ink)],
    ) -> Result<Legend, String> {
        let slo = &self.sweep.slo;
        let ((xlo, xhi), (ylo, yhi)) = (self.x, self.y);
        let mut chart = p
            .builder()
            .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
            .map_err(err)?;
        p.draw_mesh(
            chart
                .configure_mesh()
                .x_desc("offered rate (arrivals/s, log scale)")
                .y_desc(format!(
                    "{} over every arrival (ms, log)",
                    slo.percentile_name()
                ))
                .x_label_formatter(&|v| rate_axis(*v))
                .y_label_formatter(&|v| ms_axis(*v)),
        )?;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(xlo, slo.latency_ms), (xhi, slo.latency_ms)],
                8,
                5,
                UNSAFE_RED.stroke_width(2),
            ))
            .map_err(err)?;
        for (e, ink) in members {
            let steps = e.decisive_steps();
            let point = |s: &Step| (s.rate_per_s, latency_of(s.latency_ms, ylo));
            frame::draw_line(
                &mut chart,
                steps.iter().map(|s| point(s)).collect(),
                *ink,
                None,
            )?;
            for s in &steps {
                step_marks(&mut chart, e, s, point(s), ink.color)?;
            }
        }
        self.slo_label(p, &chart, members)?;
        Ok(members
            .iter()
            .map(|(e, ink)| (e.strategy.clone(), Mark::Stroke(*ink)))
            .collect())
    }
}

/// The marks of one step at `at`: an open triangle for a latency that is a lower bound, a dot
/// (filled when the step passed), a ring at the capacity, a cross on an unsafe step.
fn step_marks<DB: DrawingBackend, X: Axis, Y: Axis>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    e: &Entry,
    s: &Step,
    at: (f64, f64),
    c: RGBColor,
) -> Result<(), String> {
    if s.latency_censored {
        // A lower bound: an open triangle pointing up.
        chart
            .draw_series(std::iter::once(
                EmptyElement::at(at)
                    + PathElement::new(vec![(-6, 5), (0, -7), (6, 5), (-6, 5)], c.stroke_width(2)),
            ))
            .map_err(err)?;
    } else if s.passed {
        chart
            .draw_series(std::iter::once(Circle::new(at, 5, c.filled())))
            .map_err(err)?;
    } else {
        chart
            .draw_series(std::iter::once(Circle::new(at, 5, c.stroke_width(2))))
            .map_err(err)?;
    }
    if s.passed && s.rate_per_s == e.capacity_per_s && e.capacity_per_s > 0.0 {
        chart
            .draw_series(std::iter::once(Circle::new(at, 10, BLACK.stroke_width(2))))
            .map_err(err)?;
    }
    if e.unsafe_steps.contains(&s.rate_per_s) {
        chart
            .draw_series(std::iter::once(Cross::new(
                at,
                7,
                UNSAFE_RED.stroke_width(3),
            )))
            .map_err(err)?;
    }
    Ok(())
}

//! The charts of `report.html`, drawn with plotters into an SVG string (inlined in the page)
//! and a PNG beside it. Text is laid out with an embedded DejaVu Sans, so the charts look the
//! same on any machine and need no system fonts.
//!
//! A comparison of thirty strategies stays readable because every chart with one line or point
//! per strategy is drawn as small multiples: one panel per family (`palette`), on shared axes,
//! each with its legend beside it, never over the data; colours only need to be distinct
//! within a panel. A run of one family is one panel, drawn as a single chart.

mod capacity;
mod contend;
mod frame;
mod layout;
mod palette;
mod rate;
mod safety;
mod surge;
mod time;
mod tradeoff;

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

pub use capacity::render_sweep;
pub use contend::render_contend;
use frame::{Frame, PANEL_LEGEND_W, PANEL_MIN_H, register_font, text_size};
use layout::Placed;
use palette::{Group, Ink, Panel};
use safety::{safety, safety_size};
use time::{
    fault_entries, p99, p99_range, spectrum, spectrum_ranges, throughput, throughput_top,
    timeline_end,
};
use tradeoff::{SWATCH_W, TRADEOFF_MIN_H, tradeoff, tradeoff_key, tradeoff_label, tradeoff_ranges};

use super::error::ReportError;
use super::saved::RunData;

/// One chart of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Sales per second over time, fault windows shaded.
    Throughput,
    /// p99 latency per second over time, fault windows shaded.
    P99,
    /// HdrHistogram-style percentile spectrum.
    Spectrum,
    /// Sales/s against p99: the trade-off map.
    Tradeoff,
    /// Oversell, lost updates and double grants per strategy.
    Safety,
    /// A sweep's SLO percentile against the offered rate, per strategy.
    LatencyVsRate,
    /// A sweep's capacity at the SLO, one bar per strategy.
    Capacity,
    /// `contend`: grants/s with the USL fit, and the acquire p99, against contenders.
    Contention,
    /// A sale's arrivals, sales and in-flight per 10 ms, every strategy on one time axis.
    Surge,
}

impl Kind {
    /// Every chart of a run or a comparison, in page order ([`render_all`]).
    pub const ALL: [Kind; 5] = [
        Kind::Throughput,
        Kind::P99,
        Kind::Spectrum,
        Kind::Tradeoff,
        Kind::Safety,
    ];

    /// The charts of a sweep, in page order ([`render_sweep`]).
    pub const SWEEP: [Kind; 2] = [Kind::LatencyVsRate, Kind::Capacity];

    /// File stem under `charts/`.
    pub fn file(self) -> &'static str {
        match self {
            Kind::Throughput => "throughput",
            Kind::P99 => "p99-over-time",
            Kind::Spectrum => "latency-spectrum",
            Kind::Tradeoff => "throughput-vs-p99",
            Kind::Safety => "safety",
            Kind::LatencyVsRate => "latency-vs-rate",
            Kind::Capacity => "capacity",
            Kind::Contention => "contention",
            Kind::Surge => "surge",
        }
    }

    /// Heading in the page.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Throughput => "Sales per second over time",
            Kind::P99 => "p99 latency over time",
            Kind::Spectrum => "Latency by percentile",
            Kind::Tradeoff => "Throughput vs p99 latency",
            Kind::Safety => "Safety violations",
            Kind::LatencyVsRate => "Latency against offered rate",
            Kind::Capacity => "Capacity at the latency target",
            Kind::Contention => "The cost of contention",
            Kind::Surge => "The sale's surge",
        }
    }
}

/// A rendered chart: its kind and its SVG text.
pub struct Chart {
    /// Which chart.
    pub kind: Kind,
    /// The SVG document plotters produced.
    pub svg: String,
}

/// A chart ready to draw on any plotters backend, at a size it knows before drawing.
pub(super) trait Draw {
    /// Its size in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws it on `root` (of [`Draw::size`]).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Draws every chart into `charts_dir` (`<name>.svg` and `<name>.png`) and returns the SVGs;
/// the surge's too when a run measured a sale.
pub fn render_all(runs: &[RunData], charts_dir: &Path) -> Result<Vec<Chart>, ReportError> {
    let set = RunCharts::new(runs);
    let mut charts: Vec<Chart> = Kind::ALL
        .iter()
        .map(|&kind| render(kind, &set.chart(kind), charts_dir))
        .collect::<Result<_, _>>()?;
    if let Some(surge) = surge::SurgeChart::new(runs) {
        charts.push(render(Kind::Surge, &surge, charts_dir)?);
    }
    Ok(charts)
}

/// Draws `chart` as `charts_dir/<kind>.svg` and `.png`.
pub(super) fn render(
    kind: Kind,
    chart: &impl Draw,
    charts_dir: &Path,
) -> Result<Chart, ReportError> {
    register_font();
    std::fs::create_dir_all(charts_dir).map_err(|source| ReportError::Write {
        path: charts_dir.to_path_buf(),
        source,
    })?;
    let chart_err = |msg: String| ReportError::Chart {
        name: kind.file(),
        msg,
    };
    let size = chart.size();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        chart.draw(&root).map_err(chart_err)?;
        root.present().map_err(|e| chart_err(e.to_string()))?;
    }
    let svg_path = charts_dir.join(format!("{}.svg", kind.file()));
    std::fs::write(&svg_path, &svg).map_err(|source| ReportError::Write {
        path: svg_path,
        source,
    })?;
    let png_path = charts_dir.join(format!("{}.png", kind.file()));
    {
        let root = BitMapBackend::new(&png_path, size).into_drawing_area();
        chart.draw(&root).map_err(chart_err)?;
        root.present().map_err(|e| chart_err(e.to_string()))?;
    }
    Ok(Chart { kind, svg })
}

/// A strategy of a panel: its run and its ink.
type Member<'a> = (&'a RunData, Ink);

/// The charts of a run or comparison: the runs and their panels.
struct RunCharts<'a> {
    runs: &'a [RunData],
    panels: Vec<Panel>,
}

/// One chart of a [`RunCharts`].
struct RunChart<'s, 'a> {
    kind: Kind,
    set: &'s RunCharts<'a>,
    frame: Frame,
}

impl<'a> RunCharts<'a> {
    fn new(runs: &'a [RunData]) -> Self {
        let groups: Vec<Group> = runs
            .iter()
            .map(|r| Group::of(&r.summary.strategy, r.summary.claims_safety))
            .collect();
        RunCharts {
            runs,
            panels: palette::panels(&groups),
        }
    }

    fn members(&self, panel: &Panel) -> Vec<Member<'a>> {
        panel
            .members
            .iter()
            .map(|&(i, ink)| (&self.runs[i], ink))
            .collect()
    }

    fn titles(&self) -> Vec<&'static str> {
        self.panels.iter().map(|p| p.group.title()).collect()
    }

    fn chart(&self, kind: Kind) -> RunChart<'_, 'a> {
        let rows: Vec<usize> = self.panels.iter().map(|p| p.members.len()).collect();
        let frame = match kind {
            Kind::Throughput | Kind::P99 => {
                let faults = fault_entries(self.runs);
                Frame::new(kind.title(), faults, &rows, 2, PANEL_LEGEND_W, PANEL_MIN_H)
            }
            Kind::Tradeoff => {
                // One panel per row: labels need the width. No legend: every point is
                // labelled, the column beside the plot takes the labels that do not fit.
                let width = self
                    .runs
                    .iter()
                    .map(|r| text_size(&tradeoff_label(r).0, 13).0 + SWATCH_W)
                    .max()
                    .unwrap_or(100);
                let rows: Vec<usize> = rows.iter().map(|&n| n.max(6)).collect();
                Frame::new(
                    kind.title(),
                    tradeoff_key(self.runs, self.panels.len() > 1),
                    &rows,
                    1,
                    (width as u32 + 24).clamp(160, 360),
                    TRADEOFF_MIN_H,
                )
            }
            _ => Frame::new(
                kind.title(),
                Vec::new(),
                &rows,
                2,
                PANEL_LEGEND_W,
                PANEL_MIN_H,
            ),
        };
        RunChart {
            kind,
            set: self,
            frame,
        }
    }
}

impl Draw for RunChart<'_, '_> {
    fn size(&self) -> (u32, u32) {
        match self.kind {
            Kind::Safety => safety_size(&self.set.panels),
            _ => self.frame.size(),
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let set = self.set;
        let runs = set.runs;
        let titles = set.titles();
        let members = |i: usize| set.members(&set.panels[i]);
        match self.kind {
            Kind::Throughput => {
                let (x_end, top) = (timeline_end(runs), throughput_top(runs));
                self.frame
                    .draw(root, &titles, |i, p| throughput(p, &members(i), x_end, top))
            }
            Kind::P99 => {
                let (x_end, range) = (timeline_end(runs), p99_range(runs));
                self.frame
                    .draw(root, &titles, |i, p| p99(p, &members(i), x_end, range))
            }
            Kind::Spectrum => {
                let ranges = spectrum_ranges(runs);
                self.frame
                    .draw(root, &titles, |i, p| spectrum(p, &members(i), ranges))
            }
            Kind::Tradeoff => self.draw_tradeoff(root).map(|_| ()),
            Kind::Safety => safety(root, runs, &set.panels),
            Kind::LatencyVsRate | Kind::Capacity | Kind::Contention | Kind::Surge => {
                Err("a sweep, contend or surge chart, not one of every run's".into())
            }
        }
    }
}

impl RunChart<'_, '_> {
    /// Draws the trade-off map and returns where each panel's labels went.
    fn draw_tradeoff<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<Vec<Vec<Placed>>, String> {
        let set = self.set;
        let ranges = tradeoff_ranges(set.runs);
        let mut placed = Vec::new();
        self.frame.draw(root, &set.titles(), |i, p| {
            let members = set.members(&set.panels[i]);
            let ghosts: Vec<&RunData> = set
                .runs
                .iter()
                .filter(|r| !members.iter().any(|m| std::ptr::eq(m.0, *r)))
                .collect();
            placed.push(tradeoff(p, &members, &ghosts, ranges)?);
            Ok(Vec::new())
        })?;
        Ok(placed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::charts::layout::Rect;
    use plotters::prelude::SVGBackend;

    fn run(strategy: &str, p99_us: u64, sales_per_s: f64) -> RunData {
        let mut run = crate::report::saved::fixture_run(strategy);
        run.summary.latency_us.p99 = p99_us;
        run.summary.throughput.sales_per_s = sales_per_s;
        run
    }

    /// Every placed label of the map, with the image it must stay in.
    fn map_labels(runs: &[RunData]) -> (Vec<Vec<Placed>>, (u32, u32)) {
        register_font();
        let set = RunCharts::new(runs);
        let chart = set.chart(Kind::Tradeoff);
        let size = chart.size();
        let mut svg = String::new();
        let placed = {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            let placed = chart.draw_tradeoff(&root).unwrap();
            root.present().unwrap();
            placed
        };
        for r in runs {
            assert!(
                svg.contains(&r.summary.strategy),
                "{} labelled",
                r.summary.strategy
            );
        }
        (placed, size)
    }

    /// The SVG text of one chart of every run.
    fn svg_of(runs: &[RunData], kind: Kind) -> String {
        register_font();
        let set = RunCharts::new(runs);
        let chart = set.chart(kind);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, chart.size()).into_drawing_area();
            chart.draw(&root).unwrap();
            root.present().unwrap();
        }
        svg
    }

    #[test]
    fn a_sell_out_is_marked_on_every_time_chart_and_only_where_it_happened() {
        // A run whose sales stop at 2 s, sold out at 1.8 s or not.
        let made = |id: &str, sold_out_s: Option<f64>| {
            let mut r = run(id, 2_000, 300.0);
            r.timeline = (0..4)
                .map(|second| crate::report::saved::TimelineRow {
                    second,
                    sold: if second < 2 { 300 } else { 0 },
                    attempts: 300,
                    p99_us: 2_000,
                    faults: String::new(),
                })
                .collect();
            r.summary.sold_out_s = sold_out_s;
            r
        };
        for kind in [Kind::Throughput, Kind::P99] {
            let both = [made("mysql-atomic", Some(1.8)), made("redis-setnx", None)];
            assert_eq!(
                svg_of(&both, kind).matches("sold out").count(),
                1,
                "{kind:?}"
            );
            assert!(!svg_of(&[made("redis-setnx", None)], kind).contains("sold out"));
        }
    }

    fn assert_apart(placed: &[Placed], (w, h): (u32, u32)) {
        let image = Rect::new(0, 0, w as i32, h as i32);
        for (i, a) in placed.iter().enumerate() {
            assert!(a.rect.inside(&image), "{a:?} outside the {w}x{h} image");
            for b in &placed[i + 1..] {
                assert!(!a.rect.overlaps(&b.rect), "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn twenty_six_points_on_one_spot_get_labels_that_never_collide() {
        // One family, one spot: the worst case of the old map (a dozen labels on one point).
        let runs: Vec<RunData> = (0..26)
            .map(|i| run(&format!("lib:clustered-{i}"), 8_000_000 + i * 1000, 700.0))
            .collect();
        let (panels, size) = map_labels(&runs);
        assert_eq!(panels.len(), 1, "one family, one panel");
        assert_eq!(panels[0].len(), 26);
        assert_apart(&panels[0], size);
        assert!(panels[0].iter().any(|p| p.leader.is_some()));
    }

    #[test]
    fn clustered_points_of_several_families_get_labels_that_never_collide() {
        let mut runs = Vec::new();
        for id in [
            "mysql-for-update",
            "mysql-optimistic",
            "mysql-lock-table",
            "mysql-lock-table-fenced",
            "redis-setnx",
            "redis-setnx-watchdog",
            "redis-setnx-fenced",
            "redis-reentrant",
            "redlock",
            "redis-sentinel",
            "zookeeper",
            "etcd",
            "zookeeper-fenced",
            "etcd-fenced",
        ] {
            runs.push(run(id, 8_000_000, 600.0 + runs.len() as f64));
        }
        for i in 0..12 {
            runs.push(run(&format!("lib:l{i}"), 8_100_000, 650.0));
        }
        assert!(runs.len() >= 25);
        let (panels, size) = map_labels(&runs);
        assert_eq!(panels.len(), 5);
        // Panels are stacked: labels of different panels cannot meet, but check all anyway.
        let all: Vec<Placed> = panels.into_iter().flatten().collect();
        assert_eq!(all.len(), runs.len());
        assert_apart(&all, size);
    }
}

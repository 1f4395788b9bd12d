//! The five charts of `report.html`, drawn with plotters into an SVG string (inlined in the
//! page) and a PNG beside it. Text is laid out with an embedded DejaVu Sans, so the charts look
//! the same on any machine and need no system fonts.

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::saved::{ReportError, RunData};

/// Pixel size of every chart: wide enough for a legend column beside the plot.
const SIZE: (u32, u32) = (1000, 480);
/// Width of the legend column on the right.
const LEGEND_W: u32 = 210;
const FONT: &str = "sans-serif";

/// Twenty distinguishable colours (Tableau 20: the ten strong ones first, then their light
/// pairs, so a comparison of every strategy repeats none); strategies keep theirs across every
/// chart.
const PALETTE: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(214, 39, 40),
    RGBColor(174, 199, 232),
    RGBColor(255, 187, 120),
    RGBColor(152, 223, 138),
    RGBColor(197, 176, 213),
    RGBColor(196, 156, 148),
    RGBColor(247, 182, 210),
    RGBColor(199, 199, 199),
    RGBColor(219, 219, 141),
    RGBColor(158, 218, 229),
    RGBColor(255, 152, 150),
];
const UNSAFE_RED: RGBColor = RGBColor(200, 0, 0);
/// Labels of strategies whose lock broke while fencing kept the store intact.
const FENCED_AMBER: RGBColor = RGBColor(176, 112, 0);

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Registers the embedded font once: plotters' ab_glyph backend never looks at system fonts.
fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // The font is compiled in and known good; a failure here is a build defect.
        if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_err() {
            panic!("embedded DejaVuSans.ttf is not a valid font");
        }
    });
}

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
}

impl Kind {
    /// Every chart, in page order.
    pub const ALL: [Kind; 5] = [
        Kind::Throughput,
        Kind::P99,
        Kind::Spectrum,
        Kind::Tradeoff,
        Kind::Safety,
    ];

    /// File stem under `charts/`.
    pub fn file(self) -> &'static str {
        match self {
            Kind::Throughput => "throughput",
            Kind::P99 => "p99-over-time",
            Kind::Spectrum => "latency-spectrum",
            Kind::Tradeoff => "throughput-vs-p99",
            Kind::Safety => "safety",
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
        }
    }

    fn draw<DB: DrawingBackend>(
        self,
        root: &DrawingArea<DB, Shift>,
        runs: &[RunData],
    ) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_W);
        let entries = match self {
            Kind::Throughput => throughput(&plot, runs)?,
            Kind::P99 => p99(&plot, runs)?,
            Kind::Spectrum => spectrum(&plot, runs)?,
            Kind::Tradeoff => tradeoff(&plot, runs)?,
            Kind::Safety => safety(&plot, runs)?,
        };
        draw_legend(&legend, &entries)
    }
}

/// A rendered chart: its kind and its SVG text.
pub struct Chart {
    /// Which chart.
    pub kind: Kind,
    /// The SVG document plotters produced.
    pub svg: String,
}

/// Draws every chart into `charts_dir` (`<name>.svg` and `<name>.png`) and returns the SVGs.
pub fn render_all(runs: &[RunData], charts_dir: &Path) -> Result<Vec<Chart>, ReportError> {
    register_font();
    std::fs::create_dir_all(charts_dir).map_err(|source| ReportError::Write {
        path: charts_dir.to_path_buf(),
        source,
    })?;
    Kind::ALL
        .iter()
        .map(|&kind| {
            let chart_err = |msg: String| ReportError::Chart {
                name: kind.file(),
                msg,
            };
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
                kind.draw(&root, runs).map_err(chart_err)?;
                root.present().map_err(|e| chart_err(e.to_string()))?;
            }
            let svg_path = charts_dir.join(format!("{}.svg", kind.file()));
            std::fs::write(&svg_path, &svg).map_err(|source| ReportError::Write {
                path: svg_path,
                source,
            })?;
            let png_path = charts_dir.join(format!("{}.png", kind.file()));
            {
                let root = BitMapBackend::new(&png_path, SIZE).into_drawing_area();
                kind.draw(&root, runs).map_err(chart_err)?;
                root.present().map_err(|e| chart_err(e.to_string()))?;
            }
            Ok(Chart { kind, svg })
        })
        .collect()
}

/// The sweep's charts (latency against offered rate, capacity bars).
// STUB (wt-page): the charts branch (wt-charts) draws them; this keeps the page building until
// it lands, and the page says "no charts" meanwhile. The lead keeps the charts branch's body.
pub fn render_sweep(
    _sweep: &super::sweep::Sweep,
    _charts_dir: &Path,
) -> Result<Vec<Chart>, ReportError> {
    Ok(Vec::new())
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// How a legend entry is drawn.
enum Mark {
    Line(RGBColor),
    Dot(RGBColor),
    Cross(RGBColor),
    Box(RGBAColor),
}

/// The legend, in its own column so it never hides data.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, Mark)],
) -> Result<(), String> {
    let mut y = 50;
    for (label, mark) in entries {
        let (x0, x1, cy) = (8, 30, y + 8);
        match mark {
            Mark::Line(c) => area
                .draw(&PathElement::new(
                    vec![(x0, cy), (x1, cy)],
                    c.stroke_width(3),
                ))
                .map_err(err)?,
            Mark::Dot(c) => area
                .draw(&Circle::new(((x0 + x1) / 2, cy), 5, c.filled()))
                .map_err(err)?,
            Mark::Cross(c) => area
                .draw(&Cross::new(((x0 + x1) / 2, cy), 6, c.stroke_width(3)))
                .map_err(err)?,
            Mark::Box(c) => area
                .draw(&Rectangle::new([(x0, y + 1), (x1, y + 15)], c.filled()))
                .map_err(err)?,
        }
        // Long labels are cut rather than drawn over the edge.
        let text: String = if label.chars().count() > 26 {
            label.chars().take(25).chain(std::iter::once('…')).collect()
        } else {
            label.clone()
        };
        area.draw(&Text::new(text, (x1 + 8, y + 1), (FONT, 14)))
            .map_err(err)?;
        y += 22;
    }
    Ok(())
}

fn strategy_entries(runs: &[RunData], mark: fn(RGBColor) -> Mark) -> Vec<(String, Mark)> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| (r.summary.strategy.clone(), mark(color(i))))
        .collect()
}

/// Fault windows of every run: `(run, fault id, from, to)`; an unhealed fault lasts to `end`.
fn fault_windows(runs: &[RunData], end: f64) -> Vec<(usize, usize, f64, f64)> {
    runs.iter()
        .enumerate()
        .flat_map(|(i, r)| {
            r.summary.faults.iter().filter_map(move |f| {
                let from = f.started_s?;
                Some((i, f.id, from, f.healed_s.unwrap_or(end).min(end)))
            })
        })
        .collect()
}

/// Legend entries for the fault bands, one per distinct fault.
fn fault_entries(runs: &[RunData]) -> Vec<(String, Mark)> {
    let mut seen: Vec<(usize, String)> = Vec::new();
    for r in runs {
        for f in &r.summary.faults {
            if f.started_s.is_some() && !seen.iter().any(|(id, l)| *id == f.id && *l == f.label) {
                seen.push((f.id, f.label.clone()));
            }
        }
    }
    seen.into_iter()
        .map(|(id, label)| (format!("fault {id}: {label}"), Mark::Box(band_color(1))))
        .collect()
}

/// Translucent grey (`#5A5A5A`), Jepsen style; overlapping windows of several runs darken where
/// they agree.
fn band_color(runs_with_faults: usize) -> RGBAColor {
    let alpha = (0.3 / runs_with_faults.max(1) as f64).max(0.08);
    RGBColor(90, 90, 90).mix(alpha)
}

/// Shades the fault windows over the whole height `[lo, hi]` and names each fault once.
fn draw_bands<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    runs: &[RunData],
    x_end: f64,
    (lo, hi): (f64, f64),
) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64>,
{
    let windows = fault_windows(runs, x_end);
    let with_faults = runs
        .iter()
        .filter(|r| r.summary.faults.iter().any(|f| f.started_s.is_some()))
        .count();
    let fill = band_color(with_faults).filled();
    chart
        .draw_series(
            windows
                .iter()
                .map(|&(_, _, from, to)| Rectangle::new([(from, lo), (to, hi)], fill)),
        )
        .map_err(err)?;
    let mut named = Vec::new();
    for &(_, id, from, _) in &windows {
        if !named.contains(&id) {
            named.push(id);
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((from, hi))
                        + Text::new(
                            format!("fault {id}"),
                            (4, 4),
                            (FONT, 13).into_font().color(&BLACK.mix(0.7)),
                        ),
                ))
                .map_err(err)?;
        }
    }
    Ok(())
}

fn timeline_end(runs: &[RunData]) -> f64 {
    runs.iter()
        .map(|r| (r.timeline.len() as f64).max(r.summary.duration_s))
        .fold(1.0, f64::max)
        .ceil()
}

fn throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData],
) -> Result<Vec<(String, Mark)>, String> {
    let x_end = timeline_end(runs);
    // The last second is usually partial: plotted as a count it would show as a drop, so it
    // becomes a rate over the part that ran, or is left out when under half a second.
    let series: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|r| {
            let end = r.summary.duration_s;
            r.timeline
                .iter()
                .filter_map(|t| {
                    let covered = if end > 0.0 {
                        (end - t.second as f64).min(1.0)
                    } else {
                        1.0
                    };
                    (covered >= 0.5).then(|| (t.second as f64 + 0.5, t.sold as f64 / covered))
                })
                .collect()
        })
        .collect();
    let top = series.iter().flatten().map(|p| p.1).fold(1.0, f64::max) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(Kind::Throughput.title(), (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_end, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the start of the load (s)")
        .x_label_formatter(&|v| fmt_secs(*v))
        .y_desc("sales completed (units/s)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    draw_bands(&mut chart, runs, x_end, (0.0, top))?;
    for (i, points) in series.into_iter().enumerate() {
        chart
            .draw_series(LineSeries::new(points, color(i).stroke_width(2)))
            .map_err(err)?;
    }
    let mut entries = strategy_entries(runs, Mark::Line);
    entries.extend(fault_entries(runs));
    Ok(entries)
}

fn p99<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData],
) -> Result<Vec<(String, Mark)>, String> {
    let x_end = timeline_end(runs);
    let values = runs
        .iter()
        .flat_map(|r| r.timeline.iter().filter(|t| t.attempts > 0))
        .map(|t| t.p99_us.max(1) as f64 / 1000.0);
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 {
        (lo / 1.5, hi * 2.0)
    } else {
        (0.1, 10.0)
    };
    // Log scale: a pause's seconds-long tail and a healthy millisecond both stay readable.
    let mut chart = ChartBuilder::on(area)
        .caption(Kind::P99.title(), (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_end, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the start of the load (s)")
        .x_label_formatter(&|v| fmt_secs(*v))
        .y_desc("p99 latency per second (ms, log scale)")
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .y_label_formatter(&|v| fmt_ms(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    draw_bands(&mut chart, runs, x_end, (lo, hi))?;
    for (i, r) in runs.iter().enumerate() {
        // Seconds without completions have no latency: the line breaks there.
        let mut segment: Vec<(f64, f64)> = Vec::new();
        let mut segments = Vec::new();
        for t in &r.timeline {
            if t.attempts == 0 {
                segments.push(std::mem::take(&mut segment));
            } else {
                segment.push((t.second as f64 + 0.5, t.p99_us.max(1) as f64 / 1000.0));
            }
        }
        segments.push(segment);
        for s in segments.into_iter().filter(|s| !s.is_empty()) {
            if s.len() == 1 {
                chart
                    .draw_series(s.iter().map(|&p| Circle::new(p, 3, color(i).filled())))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(s, color(i).stroke_width(2)))
                    .map_err(err)?;
            }
        }
    }
    let mut entries = strategy_entries(runs, Mark::Line);
    entries.extend(fault_entries(runs));
    Ok(entries)
}

/// `1/(1-p)` → the percentile it stands for, e.g. 1000 → `99.9%`.
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    let s = format!("{p:.5}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// Points `(1/(1-p), ms)` of a histogram, 20 per decade, ending at its maximum.
fn spectrum_points(h: &Histogram<u64>, x_end: f64) -> Vec<(f64, f64)> {
    let n = h.len() as f64;
    let mut points = Vec::new();
    for k in 0.. {
        let x = 10f64.powf(k as f64 / 20.0);
        // Beyond 1/n there is no data: one more sample would move the percentile.
        if x > n || x > x_end {
            break;
        }
        let q = 1.0 - 1.0 / x;
        points.push((x, h.value_at_quantile(q).max(1) as f64 / 1000.0));
    }
    points.push((n.clamp(1.0, x_end), h.max().max(1) as f64 / 1000.0));
    points
}

fn spectrum<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData],
) -> Result<Vec<(String, Mark)>, String> {
    let max_n = runs
        .iter()
        .filter_map(|r| r.latency.as_ref().map(|h| h.len()))
        .max()
        .unwrap_or(1)
        .max(100) as f64;
    // Up to the decade that holds the rarest measured percentile, at most 99.999%.
    let x_end = 10f64.powf(max_n.log10().ceil()).min(1e5);
    let series: Vec<(usize, Vec<(f64, f64)>)> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let h = r.latency.as_ref().filter(|h| !h.is_empty())?;
            Some((i, spectrum_points(h, x_end)))
        })
        .collect();
    let (lo, hi) = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.1))
        .fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 {
        (lo / 1.5, hi * 2.0)
    } else {
        (0.1, 10.0)
    };
    let mut keys = vec![1.0, 2.0];
    let mut k = 10.0;
    while k <= x_end {
        keys.push(k);
        k *= 10.0;
    }
    let mut chart = ChartBuilder::on(area)
        .caption(Kind::Spectrum.title(), (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (1f64..x_end).log_scale().with_key_points(keys),
            (lo..hi).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1/(1-p))")
        .y_desc("latency from intended start (ms, log scale)")
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|v| fmt_ms(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    for (i, points) in series {
        chart
            .draw_series(LineSeries::new(points, color(i).stroke_width(2)))
            .map_err(err)?;
    }
    Ok(strategy_entries(runs, Mark::Line))
}

/// Claims safety and broke it: the store was corrupted or the lock broke unfenced (a lock
/// that broke while fencing kept the store intact is not marked).
fn is_unsafe(r: &RunData) -> bool {
    r.summary.claims_safety && r.summary.headline() == "UNSAFE"
}

fn tradeoff<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData],
) -> Result<Vec<(String, Mark)>, String> {
    let points: Vec<(f64, f64)> = runs
        .iter()
        .map(|r| {
            (
                r.summary.latency_us.p99.max(1) as f64 / 1000.0,
                r.summary.throughput.sales_per_s,
            )
        })
        .collect();
    let (lo, hi) = points
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (lo, hi) = if hi > 0.0 {
        (lo / 2.0, hi * 3.0)
    } else {
        (0.1, 10.0)
    };
    let top = points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(Kind::Tradeoff.title(), (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("p99 latency from intended start (ms, log scale; left is better)")
        .y_desc("sales (units/s; up is better)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .x_label_formatter(&|v| fmt_ms(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    for (i, (r, &p)) in runs.iter().zip(&points).enumerate() {
        let c = color(i);
        if is_unsafe(r) {
            chart
                .draw_series(std::iter::once(Cross::new(p, 7, c.stroke_width(3))))
                .map_err(err)?;
        } else {
            chart
                .draw_series(std::iter::once(Circle::new(p, 6, c.filled())))
                .map_err(err)?;
        }
        // Alternate the label above / below the point: neighbours rarely collide.
        let dy = if i % 2 == 0 { -22 } else { 8 };
        // A lock that broke says so even when fencing kept the store intact.
        let (name, ink) = match r.summary.headline() {
            "UNSAFE" if r.summary.claims_safety => {
                (format!("{} (UNSAFE)", r.summary.strategy), &UNSAFE_RED)
            }
            "fenced" => (
                format!("{} (lock broke, fenced)", r.summary.strategy),
                &FENCED_AMBER,
            ),
            _ => (r.summary.strategy.clone(), &BLACK),
        };
        let style = (FONT, 13).into_font().color(ink);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at(p) + Text::new(name, (8, dy), style),
            ))
            .map_err(err)?;
    }
    let mut entries: Vec<(String, Mark)> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mark = if is_unsafe(r) {
                Mark::Cross(color(i))
            } else {
                Mark::Dot(color(i))
            };
            (r.summary.strategy.clone(), mark)
        })
        .collect();
    if runs.iter().any(is_unsafe) {
        entries.push(("✕ = unsafe (claims safety)".into(), Mark::Cross(UNSAFE_RED)));
    }
    Ok(entries)
}

fn safety<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData],
) -> Result<Vec<(String, Mark)>, String> {
    const BARS: [(&str, RGBColor); 4] = [
        ("oversell (units)", RGBColor(214, 39, 40)),
        ("lost updates", RGBColor(255, 127, 14)),
        ("double-grant incidents", RGBColor(148, 103, 189)),
        ("leases lost while held", RGBColor(140, 86, 75)),
    ];
    let values = |r: &RunData| {
        [
            r.summary.audit.oversell,
            r.summary.audit.lost_updates,
            r.summary.double_grant_incidents,
            r.summary.lease_lost,
        ]
    };
    let top = runs
        .iter()
        .flat_map(|r| values(r).into_iter())
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.2;
    let n = runs.len().max(1);
    let names: Vec<String> = runs.iter().map(|r| r.summary.strategy.clone()).collect();
    let mut faults: Vec<String> = Vec::new();
    for r in runs {
        for f in &r.summary.faults {
            let l = format!("{} {}", f.id, f.label);
            if !faults.contains(&l) {
                faults.push(l);
            }
        }
    }
    let x_desc = if faults.is_empty() {
        "strategy (no faults injected)".to_string()
    } else {
        format!("strategy, under faults: {}", faults.join(", "))
    };
    let caption = if faults.is_empty() {
        "Safety violations per strategy".to_string()
    } else {
        "Safety violations per strategy under faults".to_string()
    };
    let label_size = if n > 6 { 11 } else { 13 };
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("count (audited store / lease log)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .axis_desc_style((FONT, 15))
        .label_style((FONT, label_size))
        // At most n ticks over a range n wide: plotters puts them on the integers, the groups.
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            names.get(i as usize).cloned().unwrap_or_default()
        })
        .disable_x_mesh()
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    let width = 0.8 / BARS.len() as f64;
    for (i, r) in runs.iter().enumerate() {
        for (j, (v, (_, c))) in values(r).into_iter().zip(BARS).enumerate() {
            let x0 = i as f64 - 0.4 + j as f64 * width;
            let x1 = x0 + width * 0.9;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, 0.0), (x1, v as f64)],
                    c.filled(),
                )))
                .map_err(err)?;
            // Every bar is labelled: a count of 1 beside one of 400 is invisible otherwise.
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x0, v as f64))
                        + Text::new(v.to_string(), (0, -16), (FONT, 12)),
                ))
                .map_err(err)?;
        }
    }
    Ok(BARS
        .iter()
        .map(|(l, c)| (l.to_string(), Mark::Box(c.mix(1.0))))
        .collect())
}

/// Seconds for an axis: whole seconds without a decimal.
fn fmt_secs(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Milliseconds for an axis: no trailing zeros, enough digits for sub-ms values.
fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        let s = format!("{v:.1}");
        s.trim_end_matches(".0").to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels() {
        assert_eq!(percentile_label(1.0), "0%");
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(10000.0), "99.99%");
        assert_eq!(percentile_label(100000.0), "99.999%");
    }

    #[test]
    fn spectrum_ends_at_the_max() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let p = spectrum_points(&h, 1e5);
        assert_eq!(p.first().unwrap().0, 1.0);
        let last = p.last().unwrap();
        assert_eq!(last.0, 1000.0);
        assert!((last.1 - 1000.0).abs() < 1.0, "{last:?}");
        assert!(p.windows(2).all(|w| w[0].1 <= w[1].1), "monotone: {p:?}");
    }
}

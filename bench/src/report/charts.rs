//! The charts of `report.html`, drawn with plotters into an SVG string (inlined in the page)
//! and a PNG beside it. Text is laid out with an embedded DejaVu Sans, so the charts look the
//! same on any machine and need no system fonts.
//!
//! A comparison of thirty strategies stays readable because every chart with one line or point
//! per strategy is drawn as small multiples: one panel per family (`palette`), on shared axes,
//! each with its legend beside it, never over the data; colours only need to be distinct
//! within a panel. A run of one family is one panel, drawn as a single chart.

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

pub use super::capacity_charts::render_sweep;
use super::layout::{self, Placed, Rect};
use super::palette::{self, Group, Ink, Panel, Shape};
use super::saved::{ReportError, RunData};

/// Pixel size of a chart of one panel: wide enough for a legend column beside the plot.
const SIZE: (u32, u32) = (1000, 480);
/// Width of the legend column of a one-panel chart.
const LEGEND_W: u32 = 210;
/// Width of a chart of several panels: the page's width, so its text is not scaled down.
pub(super) const GRID_W: i32 = 1100;
/// Width of the legend column of one panel among several.
const PANEL_LEGEND_W: u32 = 190;
/// Least height of a panel among several.
pub(super) const PANEL_MIN_H: i32 = 300;
/// Least height of a panel of the trade-off map (full width: it need not be as tall).
const TRADEOFF_MIN_H: i32 = 260;
pub(super) const FONT: &str = "sans-serif";

pub(super) const UNSAFE_RED: RGBColor = RGBColor(200, 0, 0);
/// Labels of strategies whose lock broke while fencing kept the store intact.
const FENCED_AMBER: RGBColor = RGBColor(176, 112, 0);
/// The other families' points behind a panel of the trade-off map.
const GHOST: RGBColor = RGBColor(150, 150, 150);

/// Registers the embedded font once: plotters' ab_glyph backend never looks at system fonts.
pub(super) fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // The font is compiled in and known good; a failure here is a build defect.
        if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_err() {
            panic!("embedded DejaVuSans.ttf is not a valid font");
        }
    });
}

/// Width and height in pixels of `text` at `size` in the embedded font (the height is the
/// line's, the same for every text of a size).
pub(super) fn text_size(text: &str, size: u32) -> (i32, i32) {
    register_font();
    let font = FontDesc::new(FontFamily::Name(FONT), size as f64, FontStyle::Normal);
    let w = font
        .box_size(text)
        .map(|(w, _)| w as i32)
        .unwrap_or((text.chars().count() as f64 * size as f64 * 0.62) as i32);
    (w, (size as f64 * 1.25).ceil() as i32)
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
    /// A sweep's SLO percentile against the offered rate, per strategy.
    LatencyVsRate,
    /// A sweep's capacity at the SLO, one bar per strategy.
    Capacity,
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

/// Draws every chart into `charts_dir` (`<name>.svg` and `<name>.png`) and returns the SVGs.
pub fn render_all(runs: &[RunData], charts_dir: &Path) -> Result<Vec<Chart>, ReportError> {
    let set = RunCharts::new(runs);
    Kind::ALL
        .iter()
        .map(|&kind| render(kind, &set.chart(kind), charts_dir))
        .collect()
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

pub(super) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// How a legend or key entry is drawn.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    /// A line in a strategy's ink.
    Line(Ink),
    /// A filled dot.
    Dot(RGBColor),
    /// An open ring.
    Ring(RGBColor),
    /// A cross.
    Cross(RGBColor),
    /// A filled box.
    Box(RGBAColor),
    /// An open triangle pointing up: a lower bound.
    Up(RGBColor),
    /// A dashed line.
    Dashed(RGBColor),
    /// A grey dot in a black ring: a sweep's capacity point.
    Capacity,
    /// A line in a strategy's ink without its marker (a chart whose markers mean something
    /// else).
    Stroke(Ink),
}

impl Mark {
    /// Draws the mark in the 22 × 16 pixel box at `(x, y)`.
    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (x, y): (i32, i32),
    ) -> Result<(), String> {
        let (x0, x1, cy, cx) = (x, x + 22, y + 8, x + 11);
        match *self {
            Mark::Line(ink) if ink.dashed => area
                .draw(&DashedPathElement::new(
                    vec![(x0, cy), (x1, cy)],
                    6,
                    4,
                    ink.color.stroke_width(3),
                ))
                .and_then(|()| legend_marker(area, (cx, cy), ink)),
            Mark::Line(ink) => area
                .draw(&PathElement::new(
                    vec![(x0, cy), (x1, cy)],
                    ink.color.stroke_width(3),
                ))
                .and_then(|()| legend_marker(area, (cx, cy), ink)),
            Mark::Stroke(ink) if ink.dashed => area.draw(&DashedPathElement::new(
                vec![(x0, cy), (x1, cy)],
                6,
                4,
                ink.color.stroke_width(3),
            )),
            Mark::Stroke(ink) => area.draw(&PathElement::new(
                vec![(x0, cy), (x1, cy)],
                ink.color.stroke_width(3),
            )),
            Mark::Dashed(c) => area.draw(&DashedPathElement::new(
                vec![(x0, cy), (x1, cy)],
                5,
                3,
                c.stroke_width(2),
            )),
            Mark::Dot(c) => area.draw(&Circle::new((cx, cy), 5, c.filled())),
            Mark::Ring(c) => area.draw(&Circle::new((cx, cy), 5, c.stroke_width(2))),
            Mark::Cross(c) => area.draw(&Cross::new((cx, cy), 6, c.stroke_width(3))),
            Mark::Box(c) => area.draw(&Rectangle::new([(x0, y + 1), (x1, y + 15)], c.filled())),
            Mark::Capacity => area
                .draw(&Circle::new((cx, cy), 4, RGBColor(110, 110, 110).filled()))
                .and_then(|()| area.draw(&Circle::new((cx, cy), 8, BLACK.stroke_width(2)))),
            Mark::Up(c) => area.draw(&PathElement::new(
                vec![
                    (cx - 6, cy + 5),
                    (cx, cy - 6),
                    (cx + 6, cy + 5),
                    (cx - 6, cy + 5),
                ],
                c.stroke_width(2),
            )),
        }
        .map_err(err)
    }
}

/// The member's marker in a legend entry.
fn legend_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    ink: Ink,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let fill = ink.color.filled();
    match ink.shape {
        Shape::Circle => area.draw(&Circle::new((x, y), 4, fill)),
        Shape::Square => area.draw(&Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], fill)),
        Shape::Triangle => area.draw(&Polygon::new(
            vec![(x, y - 5), (x + 5, y + 4), (x - 5, y + 4)],
            fill,
        )),
        Shape::Diamond => area.draw(&Polygon::new(
            vec![(x, y - 5), (x + 5, y), (x, y + 5), (x - 5, y)],
            fill,
        )),
    }
}

/// A legend: one entry per row from `top`, in a column of its own so it never hides data.
/// Labels longer than the column are cut with an ellipsis.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, Mark)],
    top: i32,
    (font, row_h): (u32, i32),
) -> Result<(), String> {
    let width = area.dim_in_pixel().0 as i32 - 40;
    let mut y = top;
    for (label, mark) in entries {
        mark.draw(area, (8, y))?;
        let text = fit(label, font, width);
        area.draw(&Text::new(text, (38, y + 1), (FONT, font)))
            .map_err(err)?;
        y += row_h;
    }
    Ok(())
}

/// `text`, cut with an ellipsis to fit `width` pixels at `font`.
pub(super) fn fit(text: &str, font: u32, width: i32) -> String {
    if text_size(text, font).0 <= width {
        return text.to_string();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let cut: String = chars.iter().chain(std::iter::once(&'…')).collect();
        if text_size(&cut, font).0 <= width {
            return cut;
        }
    }
    "…".into()
}

/// Legend of one panel: `(font, row height)`.
const PANEL_LEGEND: (u32, i32) = (13, 20);
/// Legend of a one-panel chart.
const SINGLE_LEGEND: (u32, i32) = (14, 22);
/// Top of the legend of a one-panel chart (below its caption).
const SINGLE_LEGEND_TOP: i32 = 50;
/// Top of a panel's legend (level with the top of its plot).
const PANEL_LEGEND_TOP: i32 = 40;

/// The layout of a chart of panels. One panel is the whole chart, its caption the chart's
/// title and its legend the key too. Several form a grid under a header holding the title
/// and the key every panel shares (fault bands, marker meanings), each panel captioned with
/// its family and carrying its own legend.
pub(super) struct Frame {
    title: String,
    key: Vec<(String, Mark)>,
    /// Entries of the key on each header line (several panels only).
    key_lines: Vec<Vec<usize>>,
    single: bool,
    legend_w: u32,
    size: (u32, u32),
    boxes: Vec<Rect>,
}

/// What a panel is drawn in.
pub(super) struct PanelArea<DB: DrawingBackend> {
    /// The whole panel.
    pub whole: DrawingArea<DB, Shift>,
    /// Left of the legend column: the chart with its axes.
    pub plot: DrawingArea<DB, Shift>,
    /// The legend column.
    pub side: DrawingArea<DB, Shift>,
    /// Its caption: the chart's title, or the family's.
    pub caption: String,
    /// Whether it is the chart's only panel.
    pub single: bool,
    /// Pixels at the top of the side column taken by the key (one panel) or the caption.
    pub side_top: i32,
}

impl<DB: DrawingBackend> PanelArea<DB> {
    /// A chart builder with the panel's caption and margins.
    pub fn builder(&self) -> ChartBuilder<'_, '_, DB> {
        let (caption, margin, x_area, y_area) = if self.single {
            (22, 14, 48, 70)
        } else {
            (17, 10, 44, 64)
        };
        let mut b = ChartBuilder::on(&self.plot);
        b.caption(&self.caption, (FONT, caption))
            .margin(margin)
            .x_label_area_size(x_area)
            .y_label_area_size(y_area);
        b
    }

    /// `(axis description, tick label)` font sizes.
    pub fn fonts(&self) -> (u32, u32) {
        if self.single { (15, 13) } else { (14, 12) }
    }
}

impl Frame {
    /// A frame of one panel per entry of `legend_rows` (the rows its legend needs), at most
    /// `columns` side by side, each with a legend column `legend_w` wide and at least `min_h`
    /// tall (one panel: the classic [`SIZE`] with its wider legend).
    pub fn new(
        title: &str,
        key: Vec<(String, Mark)>,
        legend_rows: &[usize],
        columns: usize,
        legend_w: u32,
        min_h: i32,
    ) -> Frame {
        if legend_rows.len() <= 1 {
            let rows = legend_rows.first().copied().unwrap_or(0) + key.len();
            let h = (SINGLE_LEGEND_TOP + rows as i32 * SINGLE_LEGEND.1 + 20).max(SIZE.1 as i32);
            return Frame {
                title: title.into(),
                key,
                key_lines: Vec::new(),
                single: true,
                legend_w: LEGEND_W.max(legend_w),
                size: (SIZE.0, h as u32),
                boxes: vec![Rect::new(0, 0, SIZE.0 as i32, h)],
            };
        }
        let key_lines = wrap_key(&key, GRID_W - 40);
        let header_h = 44 + key_lines.len() as i32 * 22;
        let heights: Vec<i32> = legend_rows
            .iter()
            .map(|&n| (PANEL_LEGEND_TOP + n as i32 * PANEL_LEGEND.1 + 60).max(min_h))
            .collect();
        let columns = layout::grid_columns(legend_rows.len(), columns);
        let (boxes, total) = layout::grid(GRID_W, header_h, columns, &heights);
        Frame {
            title: title.into(),
            key,
            key_lines,
            single: false,
            legend_w,
            size: (GRID_W as u32, total as u32 + 8),
            boxes,
        }
    }

    /// Its size in pixels.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Draws the header and each panel: `panel(i, area)` draws panel `i` and returns its
    /// legend entries.
    pub fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        titles: &[&str],
        mut panel: impl FnMut(usize, &PanelArea<DB>) -> Result<Vec<(String, Mark)>, String>,
    ) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        if !self.single {
            self.header(root)?;
        }
        for (i, rect) in self.boxes.iter().enumerate() {
            let whole = root
                .clone()
                .shrink((rect.x, rect.y), (rect.w as u32, rect.h as u32));
            let (plot, side) = whole.split_horizontally(rect.w - self.legend_w as i32);
            let (caption, side_top) = if self.single {
                let key_h = self.key.len() as i32 * SINGLE_LEGEND.1;
                (self.title.clone(), SINGLE_LEGEND_TOP + key_h + 8)
            } else {
                (
                    titles.get(i).copied().unwrap_or("").to_string(),
                    PANEL_LEGEND_TOP,
                )
            };
            let area = PanelArea {
                whole: whole.clone(),
                plot,
                side,
                caption,
                single: self.single,
                side_top,
            };
            let entries = panel(i, &area)?;
            if self.single {
                // The key first, then the strategies: a panel that labels its points itself
                // (the trade-off map) returns none and uses the rest of the column.
                let mut all = self.key.clone();
                all.extend(entries);
                draw_legend(&area.side, &all, SINGLE_LEGEND_TOP, SINGLE_LEGEND)?;
            } else {
                draw_legend(&area.side, &entries, PANEL_LEGEND_TOP, PANEL_LEGEND)?;
            }
        }
        Ok(())
    }

    /// The title and the shared key of a chart of several panels.
    fn header<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (w, _) = text_size(&self.title, 22);
        root.draw(&Text::new(
            self.title.clone(),
            ((GRID_W - w) / 2, 10),
            (FONT, 22),
        ))
        .map_err(err)?;
        for (line, entries) in self.key_lines.iter().enumerate() {
            let y = 42 + line as i32 * 22;
            let mut x = 20;
            for &k in entries {
                let (label, mark) = &self.key[k];
                mark.draw(root, (x, y))?;
                root.draw(&Text::new(label.clone(), (x + 28, y + 1), (FONT, 13)))
                    .map_err(err)?;
                x += key_entry_w(label);
            }
        }
        Ok(())
    }
}

fn key_entry_w(label: &str) -> i32 {
    28 + text_size(label, 13).0 + 24
}

/// Key entries in lines of at most `width` pixels.
fn wrap_key(key: &[(String, Mark)], width: i32) -> Vec<Vec<usize>> {
    let mut lines: Vec<Vec<usize>> = Vec::new();
    let mut used = width;
    for (i, (label, _)) in key.iter().enumerate() {
        let w = key_entry_w(label);
        if used + w > width || lines.is_empty() {
            lines.push(Vec::new());
            used = 0;
        }
        if let Some(line) = lines.last_mut() {
            line.push(i);
        }
        used += w;
    }
    lines
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
            Kind::LatencyVsRate | Kind::Capacity => Err("a sweep chart, not a run's".into()),
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

fn strategy_entries(members: &[Member<'_>], mark: fn(Ink) -> Mark) -> Vec<(String, Mark)> {
    members
        .iter()
        .map(|(r, ink)| (r.summary.strategy.clone(), mark(*ink)))
        .collect()
}

/// Fault windows of these runs: `(fault id, from, to)`; an unhealed fault lasts to `end`.
fn fault_windows(runs: &[&RunData], end: f64) -> Vec<(usize, f64, f64)> {
    runs.iter()
        .flat_map(|r| {
            r.summary.faults.iter().filter_map(move |f| {
                let from = f.started_s?;
                Some((f.id, from, f.healed_s.unwrap_or(end).min(end)))
            })
        })
        .collect()
}

/// Key entries for the fault bands, one per distinct fault.
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

type Chart2d<'a, DB, Y> =
    ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>;

/// Shades the fault windows of `members` over the whole height `[lo, hi]` and names each
/// fault once.
fn draw_bands<DB, Y>(
    chart: &mut Chart2d<'_, DB, Y>,
    members: &[Member<'_>],
    x_end: f64,
    (lo, hi): (f64, f64),
) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64>,
{
    let runs: Vec<&RunData> = members.iter().map(|m| m.0).collect();
    let windows = fault_windows(&runs, x_end);
    let with_faults = runs
        .iter()
        .filter(|r| r.summary.faults.iter().any(|f| f.started_s.is_some()))
        .count();
    let fill = band_color(with_faults).filled();
    chart
        .draw_series(
            windows
                .iter()
                .map(|&(_, from, to)| Rectangle::new([(from, lo), (to, hi)], fill)),
        )
        .map_err(err)?;
    let mut named = Vec::new();
    for &(id, from, _) in &windows {
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

/// Which points of a line carry its marker: member `k` of `n` in its panel marks every
/// `stride`-th point from its own phase, so where the lines of a panel coincide their
/// markers alternate along the shared line instead of hiding each other.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stagger {
    /// The member's place in its panel.
    pub k: usize,
    /// Members of the panel.
    pub n: usize,
}

impl Stagger {
    /// Indices of the points of a line of `len` points that carry a marker (about eight).
    fn marked(self, len: usize) -> Vec<usize> {
        if len == 0 {
            return Vec::new();
        }
        let stride = self.n.max(len.div_ceil(8)).max(1);
        let phase = self.k % self.n.max(1) * stride / self.n.max(1);
        let marked: Vec<usize> = (0..len).filter(|i| i % stride == phase).collect();
        if marked.is_empty() {
            vec![phase.min(len - 1)]
        } else {
            marked
        }
    }
}

/// A line in `ink`: solid, or dashed for a member whose colour repeats in its panel; with its
/// staggered markers when `stagger` is given.
pub(super) fn draw_line<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    points: Vec<(f64, f64)>,
    ink: Ink,
    stagger: Option<Stagger>,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let style = ink.color.stroke_width(2);
    let marked: Vec<(f64, f64)> = stagger
        .map(|st| {
            st.marked(points.len())
                .into_iter()
                .map(|i| points[i])
                .collect()
        })
        .unwrap_or_default();
    if ink.dashed {
        chart
            .draw_series(DashedLineSeries::new(points, 8, 5, style))
            .map_err(err)?;
    } else {
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(err)?;
    }
    for at in marked {
        draw_marker(chart, at, ink)?;
    }
    Ok(())
}

/// The member's marker shape at `at`, in its colour.
fn draw_marker<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    at: (f64, f64),
    ink: Ink,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let fill = ink.color.filled();
    let e = EmptyElement::at(at);
    match ink.shape {
        Shape::Circle => chart.draw_series(std::iter::once(e + Circle::new((0, 0), 4, fill))),
        Shape::Square => chart.draw_series(std::iter::once(
            e + Rectangle::new([(-4, -4), (4, 4)], fill),
        )),
        Shape::Triangle => chart.draw_series(std::iter::once(
            e + Polygon::new(vec![(0, -5), (5, 4), (-5, 4)], fill),
        )),
        Shape::Diamond => chart.draw_series(std::iter::once(
            e + Polygon::new(vec![(0, -5), (5, 0), (0, 5), (-5, 0)], fill),
        )),
    }
    .map(|_| ())
    .map_err(err)
}

fn timeline_end(runs: &[RunData]) -> f64 {
    runs.iter()
        .map(|r| (r.timeline.len() as f64).max(r.summary.duration_s))
        .fold(1.0, f64::max)
        .ceil()
}

/// Sales per second of a run. The last second is usually partial: plotted as a count it would
/// show as a drop, so it becomes a rate over the part that ran, or is left out when under half
/// a second.
fn throughput_series(r: &RunData) -> Vec<(f64, f64)> {
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
}

/// The top of the sales axis, the same in every panel.
fn throughput_top(runs: &[RunData]) -> f64 {
    runs.iter()
        .flat_map(throughput_series)
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.15
}

fn throughput<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    x_end: f64,
    top: f64,
) -> Result<Vec<(String, Mark)>, String> {
    let (desc, labels) = p.fonts();
    let mut chart = p
        .builder()
        .build_cartesian_2d(0f64..x_end, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the start of the load (s)")
        .x_label_formatter(&|v| fmt_secs(*v))
        .y_desc("sales completed (units/s)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .axis_desc_style((FONT, desc))
        .label_style((FONT, labels))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    draw_bands(&mut chart, members, x_end, (0.0, top))?;
    let n = members.len();
    for (k, (r, ink)) in members.iter().enumerate() {
        draw_line(
            &mut chart,
            throughput_series(r),
            *ink,
            Some(Stagger { k, n }),
        )?;
    }
    Ok(strategy_entries(members, Mark::Line))
}

/// The p99 axis, the same in every panel.
fn p99_range(runs: &[RunData]) -> (f64, f64) {
    let values = runs
        .iter()
        .flat_map(|r| r.timeline.iter().filter(|t| t.attempts > 0))
        .map(|t| t.p99_us.max(1) as f64 / 1000.0);
    let (lo, hi) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi > 0.0 {
        (lo / 1.5, hi * 2.0)
    } else {
        (0.1, 10.0)
    }
}

fn p99<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    x_end: f64,
    (lo, hi): (f64, f64),
) -> Result<Vec<(String, Mark)>, String> {
    let (desc, labels) = p.fonts();
    // Log scale: a pause's seconds-long tail and a healthy millisecond both stay readable.
    let mut chart = p
        .builder()
        .build_cartesian_2d(0f64..x_end, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since the start of the load (s)")
        .x_label_formatter(&|v| fmt_secs(*v))
        .y_desc("p99 per second (ms, log scale)")
        .axis_desc_style((FONT, desc))
        .label_style((FONT, labels))
        .y_label_formatter(&|v| fmt_ms(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    draw_bands(&mut chart, members, x_end, (lo, hi))?;
    let n = members.len();
    for (k, (r, ink)) in members.iter().enumerate() {
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
                    .draw_series(s.iter().map(|&p| Circle::new(p, 3, ink.color.filled())))
                    .map_err(err)?;
            } else {
                draw_line(&mut chart, s, *ink, Some(Stagger { k, n }))?;
            }
        }
    }
    Ok(strategy_entries(members, Mark::Line))
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

/// The spectrum's axes, the same in every panel: `(x_end, (lo, hi))`.
fn spectrum_ranges(runs: &[RunData]) -> (f64, (f64, f64)) {
    let max_n = runs
        .iter()
        .filter_map(|r| r.latency.as_ref().map(|h| h.len()))
        .max()
        .unwrap_or(1)
        .max(100) as f64;
    // Up to the decade that holds the rarest measured percentile, at most 99.999%.
    let x_end = 10f64.powf(max_n.log10().ceil()).min(1e5);
    let (lo, hi) = runs
        .iter()
        .filter_map(|r| r.latency.as_ref().filter(|h| !h.is_empty()))
        .flat_map(|h| spectrum_points(h, x_end).into_iter().map(|p| p.1))
        .fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let range = if hi > 0.0 {
        (lo / 1.5, hi * 2.0)
    } else {
        (0.1, 10.0)
    };
    (x_end, range)
}

fn spectrum<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    (x_end, (lo, hi)): (f64, (f64, f64)),
) -> Result<Vec<(String, Mark)>, String> {
    // 50% sits a third of a decade from 0%: only a one-panel chart has room for both labels.
    let mut keys = if p.single { vec![1.0, 2.0] } else { vec![1.0] };
    let mut k = 10.0;
    while k <= x_end {
        keys.push(k);
        k *= 10.0;
    }
    let (desc, labels) = p.fonts();
    let mut chart = p
        .builder()
        .build_cartesian_2d(
            (1f64..x_end).log_scale().with_key_points(keys),
            (lo..hi).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1/(1-p))")
        .y_desc("latency from intended start (ms, log)")
        .axis_desc_style((FONT, desc))
        .label_style((FONT, labels))
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|v| fmt_ms(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    let n = members.len();
    for (k, (r, ink)) in members.iter().enumerate() {
        if let Some(h) = r.latency.as_ref().filter(|h| !h.is_empty()) {
            let points = spectrum_points(h, x_end);
            draw_line(&mut chart, points, *ink, Some(Stagger { k, n }))?;
        }
    }
    Ok(strategy_entries(members, Mark::Line))
}

/// Claims safety and broke it: the store was corrupted or the lock broke unfenced (a lock
/// that broke while fencing kept the store intact is not marked).
fn is_unsafe(r: &RunData) -> bool {
    r.summary.claims_safety && r.summary.headline() == "UNSAFE"
}

/// A run's point on the map: `(p99 ms, sales/s)`.
fn tradeoff_point(r: &RunData) -> (f64, f64) {
    (
        r.summary.latency_us.p99.max(1) as f64 / 1000.0,
        r.summary.throughput.sales_per_s,
    )
}

/// A run's label on the map and its colour: a lock that broke says so even when fencing kept
/// the store intact.
fn tradeoff_label(r: &RunData) -> (String, RGBColor) {
    match r.summary.headline() {
        "UNSAFE" if r.summary.claims_safety => {
            (format!("{} (UNSAFE)", r.summary.strategy), UNSAFE_RED)
        }
        "fenced" => (
            format!("{} (lock broke, fenced)", r.summary.strategy),
            FENCED_AMBER,
        ),
        _ => (r.summary.strategy.clone(), BLACK),
    }
}

/// What the map's marks mean.
fn tradeoff_key(runs: &[RunData], panels: bool) -> Vec<(String, Mark)> {
    let mut key = Vec::new();
    if runs.iter().any(is_unsafe) {
        key.push((
            "✕ claims safety and broke it".into(),
            Mark::Cross(UNSAFE_RED),
        ));
    }
    if panels {
        key.push(("other families, for reference".into(), Mark::Dot(GHOST)));
    }
    key
}

/// The map's axes, the same in every panel: `((lo, hi) ms, top sales/s)`.
fn tradeoff_ranges(runs: &[RunData]) -> ((f64, f64), f64) {
    let points: Vec<(f64, f64)> = runs.iter().map(tradeoff_point).collect();
    let (lo, hi) = points
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let x = if hi > 0.0 {
        (lo / 2.0, hi * 3.0)
    } else {
        (0.1, 10.0)
    };
    (x, points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.2)
}

/// Radius of a point on the map, in pixels.
const POINT_R: i32 = 6;
/// Width of the swatch (a bar of the point's colour) that starts each label of the map: in a
/// cluster it says which point a label names.
const SWATCH_W: i32 = 12;

/// A point of the map: a cross for a strategy that claims safety and broke it, a ring for a
/// member whose colour repeats in its panel, else a disc with a white rim (so a smaller point
/// drawn on it stays apart).
fn map_point<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    at: (i32, i32),
    ink: Ink,
    broke: bool,
    r: i32,
) -> Result<(), String> {
    if broke {
        area.draw(&Cross::new(at, r + 1, ink.color.stroke_width(3)))
    } else if ink.dashed {
        area.draw(&Circle::new(at, r - 1, ink.color.stroke_width(3)))
    } else {
        area.draw(&Circle::new(at, r, ink.color.filled()))
            .and_then(|()| area.draw(&Circle::new(at, r, WHITE.stroke_width(1))))
    }
    .map_err(err)
}

/// One panel of the map: the family's points, labelled where they do not collide (else in the
/// column beside the plot, with a leader line), over the other families' points in grey.
fn tradeoff<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    ghosts: &[&RunData],
    ((lo, hi), top): ((f64, f64), f64),
) -> Result<Vec<Placed>, String> {
    let (desc, labels) = p.fonts();
    let mut chart = p
        .builder()
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("p99 latency from intended start (ms, log scale; left is better)")
        .y_desc("sales (units/s; up is better)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .axis_desc_style((FONT, desc))
        .label_style((FONT, labels))
        .x_label_formatter(&|v| fmt_ms(*v))
        .light_line_style(WHITE)
        .draw()
        .map_err(err)?;
    if !p.single {
        chart
            .draw_series(
                ghosts
                    .iter()
                    .map(|r| Circle::new(tradeoff_point(r), 4, GHOST.mix(0.45).filled())),
            )
            .map_err(err)?;
    }
    let (bx, by) = p.whole.get_base_pixel();
    let points: Vec<(i32, i32)> = members
        .iter()
        .map(|(r, _)| chart.backend_coord(&tradeoff_point(r)))
        .collect();
    let radii = layout::stacked_radii(&points, POINT_R);
    for (((r, ink), &(x, y)), &radius) in members.iter().zip(&points).zip(&radii) {
        map_point(&p.whole, (x - bx, y - by), *ink, is_unsafe(r), radius)?;
    }
    let texts: Vec<(String, RGBColor)> = members.iter().map(|(r, _)| tradeoff_label(r)).collect();
    let sizes: Vec<(i32, i32)> = texts
        .iter()
        .map(|(t, _)| {
            let (w, h) = text_size(t, 13);
            (w + SWATCH_W, h)
        })
        .collect();
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let plot = Rect::new(xs.start, ys.start, xs.end - xs.start, ys.end - ys.start);
    let (cx, cy) = p.side.get_pixel_range();
    let column = Rect::new(
        cx.start,
        cy.start + p.side_top,
        cx.end - cx.start,
        cy.end - cy.start - p.side_top,
    );
    let radii: Vec<i32> = radii.iter().map(|r| r + 1).collect();
    let placed = layout::place_labels(&points, &sizes, &radii, plot, column);
    for (((q, (text, color)), (_, ink)), &(px, _)) in
        placed.iter().zip(&texts).zip(members).zip(&points)
    {
        if let Some(((x0, y0), (x1, y1))) = q.leader {
            p.whole
                .draw(&PathElement::new(
                    vec![(x0 - bx, y0 - by), (x1 - bx, y1 - by)],
                    BLACK.mix(0.35).stroke_width(1),
                ))
                .map_err(err)?;
        }
        let (x, y) = (q.rect.x - bx, q.rect.y - by);
        // A bar of the point's colour, not a mark (it must not read as one more point), at
        // the end of the label nearest the point.
        let left_of_point = q.rect.x + q.rect.w / 2 < px;
        let (bar_x, text_x) = if left_of_point {
            (x + q.rect.w - SWATCH_W + 5, x)
        } else {
            (x + 2, x + SWATCH_W)
        };
        let bar = ink.color.mix(if ink.dashed { 0.5 } else { 1.0 });
        p.whole
            .draw(&Rectangle::new(
                [(bar_x, y + 2), (bar_x + 5, y + q.rect.h - 2)],
                bar.filled(),
            ))
            .map_err(err)?;
        p.whole
            .draw(&Text::new(
                text.clone(),
                (text_x, y + 1),
                (FONT, 13).into_font().color(color),
            ))
            .map_err(err)?;
    }
    Ok(placed)
}

/// The four counts of the safety chart, each a column of its own scale.
const SAFETY: [(&str, RGBColor); 4] = [
    ("oversell (units)", RGBColor(214, 39, 40)),
    ("lost updates", RGBColor(255, 127, 14)),
    ("double-grant incidents", RGBColor(148, 103, 189)),
    ("leases lost while held", RGBColor(140, 86, 75)),
];
/// Height of a strategy's row and of a family's heading, in the row charts.
pub(super) const ROW_H: i32 = 22;
pub(super) const HEADING_H: i32 = 28;
/// Width of the strategy names' column of the row charts.
pub(super) const NAMES_W: i32 = 230;
/// Top of the first row of the safety chart (title, fault line, column headings above).
const SAFETY_TOP: i32 = 96;

fn safety_size(panels: &[Panel]) -> (u32, u32) {
    let rows: usize = panels.iter().map(|p| p.members.len()).sum();
    let h = SAFETY_TOP + panels.len() as i32 * HEADING_H + rows as i32 * ROW_H + 16;
    (SIZE.0, h.max(200) as u32)
}

fn safety_values(r: &RunData) -> [u64; 4] {
    [
        r.summary.audit.oversell,
        r.summary.audit.lost_updates,
        r.summary.double_grant_incidents,
        r.summary.lease_lost,
    ]
}

/// One row per strategy, grouped by family, and one column per count, each on its own scale
/// (oversell in units and double grants in incidents share no axis); every bar carries its
/// value, so a count of 1 beside one of 400 still shows.
fn safety<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData],
    panels: &[Panel],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let mut faults: Vec<String> = Vec::new();
    for r in runs {
        for f in &r.summary.faults {
            let l = format!("{} {}", f.id, f.label);
            if !faults.contains(&l) {
                faults.push(l);
            }
        }
    }
    let (caption, sub) = if faults.is_empty() {
        (
            "Safety violations per strategy".to_string(),
            "no faults injected; counts from the audited store and the lease log".to_string(),
        )
    } else {
        (
            "Safety violations per strategy under faults".to_string(),
            format!("under faults: {}", faults.join(", ")),
        )
    };
    let width = SIZE.0 as i32;
    let (cw, _) = text_size(&caption, 22);
    root.draw(&Text::new(caption, ((width - cw) / 2, 10), (FONT, 22)))
        .map_err(err)?;
    let sub = fit(&sub, 13, width - 40);
    let (sw, _) = text_size(&sub, 13);
    root.draw(&Text::new(
        sub,
        ((width - sw) / 2, 40),
        (FONT, 13).into_font().color(&BLACK.mix(0.7)),
    ))
    .map_err(err)?;
    let col_w = (width - NAMES_W - 10) / SAFETY.len() as i32;
    let tops: Vec<u64> = (0..SAFETY.len())
        .map(|k| runs.iter().map(|r| safety_values(r)[k]).max().unwrap_or(0))
        .collect();
    for (k, (name, color)) in SAFETY.iter().enumerate() {
        let x = NAMES_W + k as i32 * col_w;
        root.draw(&Text::new(
            name.to_string(),
            (x + 4, SAFETY_TOP - 26),
            (FONT, 13).into_font().color(color),
        ))
        .map_err(err)?;
    }
    let mut y = SAFETY_TOP;
    for panel in panels {
        heading(root, panel.group, y, width)?;
        y += HEADING_H;
        for &(i, _) in &panel.members {
            let r = &runs[i];
            let ink = if is_unsafe(r) { UNSAFE_RED } else { BLACK };
            name_cell(root, &r.summary.strategy, y, ink)?;
            for (k, v) in safety_values(r).into_iter().enumerate() {
                let x = NAMES_W + k as i32 * col_w;
                let room = col_w - 56;
                let len = if tops[k] == 0 {
                    0
                } else {
                    ((v as f64 / tops[k] as f64) * room as f64).round() as i32
                };
                if v > 0 {
                    root.draw(&Rectangle::new(
                        [(x + 4, y + 4), (x + 4 + len.max(2), y + ROW_H - 4)],
                        SAFETY[k].1.filled(),
                    ))
                    .map_err(err)?;
                }
                let ink = if v > 0 {
                    BLACK
                } else {
                    RGBColor(150, 150, 150)
                };
                root.draw(&Text::new(
                    v.to_string(),
                    (x + 10 + len, y + 3),
                    (FONT, 13).into_font().color(&ink),
                ))
                .map_err(err)?;
            }
            y += ROW_H;
        }
    }
    Ok(())
}

/// A family's heading across a row chart, with a rule: controls are called what they are.
pub(super) fn heading<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    group: Group,
    y: i32,
    width: i32,
) -> Result<(), String> {
    let title = if group.is_controls() {
        "controls (known unsafe: the checker must catch them)".to_string()
    } else {
        group.title().to_string()
    };
    let (w, _) = text_size(&title, 14);
    root.draw(&PathElement::new(
        vec![(26 + w, y + 11), (width - 10, y + 11)],
        BLACK.mix(0.25).stroke_width(1),
    ))
    .map_err(err)?;
    root.draw(&Text::new(title, (18, y + 3), (FONT, 14)))
        .map_err(err)
}

/// A strategy's name, right-aligned against the bars.
pub(super) fn name_cell<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    name: &str,
    y: i32,
    ink: RGBColor,
) -> Result<(), String> {
    let text = fit(name, 13, NAMES_W - 24);
    let (w, _) = text_size(&text, 13);
    root.draw(&Text::new(
        text,
        (NAMES_W - 8 - w, y + 3),
        (FONT, 13).into_font().color(&ink),
    ))
    .map_err(err)
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
pub(super) fn fmt_ms(v: f64) -> String {
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
    use crate::report::Summary;

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

    fn run(strategy: &str, p99_us: u64, sales_per_s: f64) -> RunData {
        let mut summary: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        summary.strategy = strategy.into();
        summary.latency_us.p99 = p99_us;
        summary.throughput.sales_per_s = sales_per_s;
        RunData {
            summary,
            timeline: Vec::new(),
            latency: None,
            problems: Vec::new(),
        }
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

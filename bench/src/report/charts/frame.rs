//! What every chart is drawn with: the embedded font, legends and keys, the frame of small
//! multiples (one panel per family, or one panel drawn as a classic chart), lines with
//! staggered markers, and the rows of the bar charts.

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::layout::{self, Rect};
use super::palette::{Group, Ink, Shape};

/// Pixel size of a chart of one panel: wide enough for a legend column beside the plot.
const SIZE: (u32, u32) = (1000, 480);

/// Width of the legend column of a one-panel chart.
const LEGEND_W: u32 = 210;

/// Width of a chart of several panels: the page's width, so its text is not scaled down.
pub(super) const GRID_W: i32 = 1100;

/// Width of the legend column of one panel among several.
pub(super) const PANEL_LEGEND_W: u32 = 190;

/// Least height of a panel among several.
pub(super) const PANEL_MIN_H: i32 = 300;

pub(super) const FONT: &str = "sans-serif";

pub(super) const UNSAFE_RED: RGBColor = RGBColor(200, 0, 0);

/// Registers the embedded font once: plotters' ab_glyph backend never looks at system fonts.
pub(super) fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../../assets/DejaVuSans.ttf");
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

pub(super) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// A legend's or key's entries: each label with its mark.
pub(super) type Legend = Vec<(String, Mark)>;

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
    key: Legend,
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

    /// Draws `mesh` (its axes described, their ticks formatted) in the house style: both in
    /// [`FONT`] at the panel's [`Self::fonts`], no light grid lines.
    pub fn draw_mesh<X, Y, XT, YT>(
        &self,
        mesh: &mut MeshStyle<'_, '_, X, Y, DB>,
    ) -> Result<(), String>
    where
        X: Ranged<ValueType = XT> + ValueFormatter<XT>,
        Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    {
        let (desc, labels) = self.fonts();
        mesh.axis_desc_style((FONT, desc))
            .label_style((FONT, labels))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)
    }
}

impl Frame {
    /// A frame of one panel per entry of `legend_rows` (the rows its legend needs), at most
    /// `columns` side by side, each with a legend column `legend_w` wide and at least `min_h`
    /// tall (one panel: the classic [`SIZE`] with its wider legend).
    pub fn new(
        title: &str,
        key: Legend,
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
        mut panel: impl FnMut(usize, &PanelArea<DB>) -> Result<Legend, String>,
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
        titles(root, GRID_W, &self.title, None)?;
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
    /// Indices of the points of a line of `len` points that carry a marker (about eight);
    /// none when the line is alone in its panel.
    fn marked(self, len: usize) -> Vec<usize> {
        if len == 0 || self.n < 2 {
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

/// An axis of `f64` values, as every chart here plots on both.
pub(super) trait Axis: Ranged<ValueType = f64> {}

impl<T: Ranged<ValueType = f64>> Axis for T {}

/// A line in `ink`: solid, or dashed for a member whose colour repeats in its panel; with its
/// staggered markers when `stagger` is given.
pub(super) fn draw_line<DB: DrawingBackend, X: Axis, Y: Axis>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    points: Vec<(f64, f64)>,
    ink: Ink,
    stagger: Option<Stagger>,
) -> Result<(), String> {
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
fn draw_marker<DB: DrawingBackend, X: Axis, Y: Axis>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    at: (f64, f64),
    ink: Ink,
) -> Result<(), String> {
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

/// Height of a strategy's row and of a family's heading, in the row charts.
pub(super) const ROW_H: i32 = 22;

pub(super) const HEADING_H: i32 = 28;

/// Width of the strategy names' column of the row charts.
pub(super) const NAMES_W: i32 = 230;

/// A chart's title, centred across `width` at the top; under it at `sub.1`, its subtitle
/// `sub.0`, greyed and cut to fit.
pub(super) fn titles<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    width: i32,
    title: &str,
    sub: Option<(&str, i32)>,
) -> Result<(), String> {
    let (w, _) = text_size(title, 22);
    root.draw(&Text::new(
        title.to_string(),
        ((width - w) / 2, 10),
        (FONT, 22),
    ))
    .map_err(err)?;
    let Some((sub, y)) = sub else {
        return Ok(());
    };
    let sub = fit(sub, 13, width - 40);
    let (w, _) = text_size(&sub, 13);
    let grey = (FONT, 13).into_font().color(&BLACK.mix(0.7));
    root.draw(&Text::new(sub, ((width - w) / 2, y), grey))
        .map_err(err)
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
        (NAMES_W - 8 - w, y + 5),
        (FONT, 13).into_font().color(&ink),
    ))
    .map_err(err)
}

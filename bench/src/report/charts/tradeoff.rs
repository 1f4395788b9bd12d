//! The throughput-vs-p99 map: one panel per family on shared axes, the other families'
//! points in grey behind, every point labelled where the label collides with nothing.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::Member;
use super::frame::{FONT, Legend, Mark, PanelArea, UNSAFE_RED, err, text_size};
use super::layout::{self, Placed, Rect};
use super::palette::Ink;
use crate::report::format::ms_axis;
use crate::report::saved::RunData;

/// Least height of a panel of the trade-off map (full width: it need not be as tall).
pub(super) const TRADEOFF_MIN_H: i32 = 260;

/// Labels of strategies whose lock broke while fencing kept the store intact.
const FENCED_AMBER: RGBColor = RGBColor(176, 112, 0);

/// The other families' points behind a panel of the trade-off map.
const GHOST: RGBColor = RGBColor(150, 150, 150);

/// Claims safety and broke it: the store was corrupted or the lock broke unfenced (a lock
/// that broke while fencing kept the store intact is not marked).
pub(super) fn is_unsafe(r: &RunData) -> bool {
    r.summary.claims_safety && r.summary.headline() == "UNSAFE"
}

/// A run's point on the map: `(p99 ms, sales/s)`; the slowest arrival when too few arrivals
/// bound a p99, as its table cell shows.
fn tradeoff_point(r: &RunData) -> (f64, f64) {
    let p99 = r.summary.latency_us.shown(crate::record::Pct::P99);
    (p99.max(1) as f64 / 1000.0, r.summary.throughput.sales_per_s)
}

/// A run's label on the map and its colour: a lock that broke says so even when fencing kept
/// the store intact.
pub(super) fn tradeoff_label(r: &RunData) -> (String, RGBColor) {
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
pub(super) fn tradeoff_key(runs: &[RunData], panels: bool) -> Legend {
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
pub(super) fn tradeoff_ranges(runs: &[RunData]) -> ((f64, f64), f64) {
    let points: Vec<(f64, f64)> = runs.iter().map(tradeoff_point).collect();
    let (lo, hi) = points
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    // From a power of ten: a log axis spanning no whole decade would have no tick label.
    let x = if hi > 0.0 {
        (10f64.powf((lo / 2.0).log10().floor()), hi * 3.0)
    } else {
        (0.1, 10.0)
    };
    (x, points.iter().map(|p| p.1).fold(1.0, f64::max) * 1.2)
}

/// Radius of a point on the map, in pixels.
const POINT_R: i32 = 6;

/// Width of the swatch (a bar of the point's colour) that starts each label of the map: in a
/// cluster it says which point a label names.
pub(super) const SWATCH_W: i32 = 12;

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
pub(super) fn tradeoff<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    ghosts: &[&RunData],
    ((lo, hi), top): ((f64, f64), f64),
) -> Result<Vec<Placed>, String> {
    let mut chart = p
        .builder()
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..top)
        .map_err(err)?;
    p.draw_mesh(
        chart
            .configure_mesh()
            .x_desc(
                "p99 latency from intended start (ms, log scale; max if too few; left is better)",
            )
            .y_desc("sales (units/s; up is better)")
            .y_label_formatter(&|v| format!("{v:.0}"))
            .x_label_formatter(&|v| ms_axis(*v)),
    )?;
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
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let plot = Rect::new(xs.start, ys.start, xs.end - xs.start, ys.end - ys.start);
    let placed = place(p, &points, &texts, &radii, plot);
    for (((q, (text, color)), (_, ink)), &(px, _)) in
        placed.iter().zip(&texts).zip(members).zip(&points)
    {
        draw_label(p, q, text, *color, *ink, px)?;
    }
    Ok(placed)
}

/// Where each label goes: beside its point in `plot` when it fits there, else in the side
/// column.
fn place<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    points: &[(i32, i32)],
    texts: &[(String, RGBColor)],
    radii: &[i32],
    plot: Rect,
) -> Vec<Placed> {
    let sizes: Vec<(i32, i32)> = texts
        .iter()
        .map(|(t, _)| {
            let (w, h) = text_size(t, 13);
            (w + SWATCH_W, h)
        })
        .collect();
    let (cx, cy) = p.side.get_pixel_range();
    let column = Rect::new(
        cx.start,
        cy.start + p.side_top,
        cx.end - cx.start,
        cy.end - cy.start - p.side_top,
    );
    let radii: Vec<i32> = radii.iter().map(|r| r + 1).collect();
    layout::place_labels(points, &sizes, &radii, plot, column)
}

/// One placed label, with its leader line when it sits away from its point (at `px`).
fn draw_label<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    q: &Placed,
    text: &str,
    color: RGBColor,
    ink: Ink,
    px: i32,
) -> Result<(), String> {
    let (bx, by) = p.whole.get_base_pixel();
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
            text.to_string(),
            (text_x, y + 1),
            (FONT, 13).into_font().color(&color),
        ))
        .map_err(err)?;
    Ok(())
}

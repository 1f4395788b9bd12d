//! The charts of a sweep (`sweep.json`): [`render_sweep`] draws the latency–throughput chart
//! (`rate`) and the capacity bars here, one bar per strategy grouped by family. Every number
//! drawn is one the sweep saved.

use std::path::Path;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::frame::{
    self, FONT, GRID_W, HEADING_H, NAMES_W, ROW_H, UNSAFE_RED, err, fit, text_size, titles,
};
use super::palette::{self, Group, Ink, Panel};
use super::{Chart, Draw, Kind};
use crate::report::error::ReportError;
use crate::report::format::{rate_axis, rate_label};
use crate::report::sweep::{Bound, Entry, Sweep};

/// Draws the sweep's charts into `charts_dir` (`latency-vs-rate` and `capacity`, each `.svg`
/// and `.png`) and returns their SVGs, in [`Kind::SWEEP`] order.
pub fn render_sweep(sweep: &Sweep, charts_dir: &Path) -> Result<Vec<Chart>, ReportError> {
    let groups: Vec<Group> = sweep
        .entries
        .iter()
        .map(|e| Group::Family(e.family))
        .collect();
    let panels = palette::panels(&groups);
    let rate = super::rate::LatencyVsRate::new(sweep, &panels);
    let bars = CapacityBars {
        sweep,
        panels: &panels,
    };
    Ok(vec![
        super::render(Kind::LatencyVsRate, &rate, charts_dir)?,
        super::render(Kind::Capacity, &bars, charts_dir)?,
    ])
}

/// Bars of the controls: apart from every colour a real strategy gets.
const CONTROL_GREY: RGBColor = RGBColor(170, 170, 170);

/// The capacity bars.
struct CapacityBars<'a> {
    sweep: &'a Sweep,
    panels: &'a [Panel],
}

/// Width of the capacity chart.
const BARS_W: i32 = GRID_W;
/// Room right of the longest bar for its value label and flags.
const LABEL_ROOM: i32 = 300;
/// Top of the first row (title and subtitle above).
const BARS_TOP: i32 = 84;
/// Height of the axis under the rows.
const AXIS_H: i32 = 56;

/// What a bar says: the value label, and whether the bar is drawn and open-ended.
#[derive(Debug, PartialEq)]
struct BarText {
    /// `1250/s`, `≥ 5000/s`, `< 50/s`.
    value: String,
    /// Grey detail after it: where it failed, why it stopped.
    detail: String,
    /// The length of the bar, in arrivals/s (`None`: no bar).
    bar: Option<f64>,
    /// The capacity is a lower bound: the bar has an open end.
    open: bool,
    /// The interval's upper end (the lowest rate decided failing): an error bar from the
    /// bar's end to it.
    upper: Option<f64>,
}

/// The label of an entry's bar, from its bound.
fn bar_text(e: &Entry) -> BarText {
    let lowest = e
        .steps
        .iter()
        .map(|s| s.rate_per_s)
        .fold(f64::INFINITY, f64::min);
    // The interval as the tables print it: widened by the sweep's drift, when it had one.
    let [lower, upper] = e.capacity_interval_per_s;
    let c = lower.unwrap_or(0.0);
    match e.bound {
        Bound::Found => BarText {
            value: format!("{}–{}/s", rate_label(c), rate_label(upper.unwrap_or(c))),
            detail: e
                .interval_width
                .map(|w| format!("×{w:.2} wide"))
                .unwrap_or_default(),
            bar: Some(c),
            open: false,
            upper,
        },
        Bound::AtLeastMax | Bound::MachineLimit => BarText {
            value: format!("≥ {}/s", rate_label(c)),
            detail: if e.bound == Bound::AtLeastMax {
                "the highest rate offered"
            } else {
                "the machine's CPUs ran out above"
            }
            .into(),
            bar: Some(c),
            open: true,
            upper: None,
        },
        Bound::Unbracketed => BarText {
            value: e.capacity_text(),
            detail: "the strategy's time budget ran out".into(),
            bar: (c > 0.0).then_some(c),
            open: c > 0.0,
            upper,
        },
        Bound::BelowLowest => BarText {
            value: if lowest.is_finite() {
                format!("< {}/s", rate_label(lowest))
            } else {
                "no step ran".into()
            },
            detail: "failed at the lowest rate".into(),
            bar: None,
            open: false,
            upper: None,
        },
        Bound::Incomplete => BarText {
            value: if c > 0.0 {
                format!("≥ {}/s", rate_label(c))
            } else {
                "none passed".into()
            },
            detail: match &e.error {
                Some(why) => format!("stopped early: {why}"),
                None => "stopped early".into(),
            },
            bar: (c > 0.0).then_some(c),
            open: true,
            upper: None,
        },
    }
}

/// Members of a panel by capacity, highest first (ties by name: the order is stable).
fn by_capacity<'e>(sweep: &'e Sweep, panel: &Panel) -> Vec<(&'e Entry, Ink)> {
    let mut members: Vec<(&Entry, Ink)> = panel
        .members
        .iter()
        .map(|&(i, ink)| (&sweep.entries[i], ink))
        .collect();
    members.sort_by(|a, b| {
        b.0.capacity_per_s
            .total_cmp(&a.0.capacity_per_s)
            .then_with(|| a.0.strategy.cmp(&b.0.strategy))
    });
    members
}

/// Ticks of a linear axis from 0 to `max`: about six, at 1, 2 or 5 × 10^k.
fn ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 {
        return vec![0.0];
    }
    let raw = max / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (0..)
        .map(|k| k as f64 * step)
        .take_while(|v| *v <= max * 1.0001)
        .collect()
}

/// The value axis of the bars: linear from 0, or logarithmic from a power of ten when the
/// capacities span more than [`LOG_SPREAD`]× (a 12/s bar beside a 1600/s one would be
/// invisible on a linear axis; its label would be all that shows).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scale {
    /// From 0 to `max`.
    Linear { max: f64 },
    /// From `lo` to `hi`, both powers of ten.
    Log { lo: f64, hi: f64 },
}

/// Spread of the capacities beyond which the axis is logarithmic.
const LOG_SPREAD: f64 = 50.0;

impl Scale {
    /// The axis for bars of these lengths.
    fn for_values(values: &[f64]) -> Scale {
        let positive = values.iter().copied().filter(|v| *v > 0.0 && v.is_finite());
        let (lo, hi) = positive.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if hi <= 0.0 {
            return Scale::Linear { max: 1.0 };
        }
        if hi / lo > LOG_SPREAD {
            Scale::Log {
                lo: 10f64.powf(lo.log10().floor()),
                hi: 10f64.powf(hi.log10().ceil()),
            }
        } else {
            let t = ticks(hi);
            Scale::Linear {
                max: t.last().copied().unwrap_or(hi).max(hi),
            }
        }
    }

    /// Where `v` falls, from 0 (the axis start) to 1 (its end).
    fn fraction(self, v: f64) -> f64 {
        match self {
            Scale::Linear { max } => (v / max).clamp(0.0, 1.0),
            Scale::Log { lo, hi } => ((v.max(lo) / lo).log10() / (hi / lo).log10()).clamp(0.0, 1.0),
        }
    }

    /// The labelled ticks.
    fn ticks(self) -> Vec<f64> {
        match self {
            Scale::Linear { max } => ticks(max),
            Scale::Log { lo, hi } => {
                let decades = (hi / lo).log10().round() as i32;
                // Few decades: 2 and 5 too, so the axis still reads.
                let steps: &[f64] = if decades <= 2 {
                    &[1.0, 2.0, 5.0]
                } else {
                    &[1.0]
                };
                (0..=decades)
                    .flat_map(|d| steps.iter().map(move |m| lo * 10f64.powi(d) * m))
                    .filter(|v| *v <= hi * 1.0001)
                    .collect()
            }
        }
    }

    /// The axis description's note.
    fn note(self) -> &'static str {
        match self {
            Scale::Linear { .. } => "",
            Scale::Log { .. } => " (log scale)",
        }
    }
}

impl Draw for CapacityBars<'_> {
    fn size(&self) -> (u32, u32) {
        let rows: usize = self.panels.iter().map(|p| p.members.len()).sum();
        let h = BARS_TOP + self.panels.len() as i32 * HEADING_H + rows as i32 * ROW_H + AXIS_H;
        (BARS_W as u32, h.max(200) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let slo = &self.sweep.slo;
        let title = format!("Capacity at {}", slo.label());
        let sub = format!(
            "bar: highest rate decided to meet the SLO; whisker: lowest decided to miss it \
             (each at {}% confidence; safety judged apart: ✕ marks an unsafe step)",
            rate_label(self.sweep.search.confidence * 100.0)
        );
        titles(root, BARS_W, &title, Some((&sub, 42)))?;

        let lengths: Vec<f64> = self
            .sweep
            .entries
            .iter()
            .filter_map(|e| {
                let t = bar_text(e);
                t.upper.or(t.bar)
            })
            .collect();
        let scale = Scale::for_values(&lengths);
        let x0 = NAMES_W;
        let span = BARS_W - NAMES_W - LABEL_ROOM;
        let px = |v: f64| x0 + (scale.fraction(v) * span as f64).round() as i32;
        let x_end = x0 + span;

        let mut y = BARS_TOP;
        let first_row = y;
        for panel in self.panels {
            frame::heading(root, panel.group, y, BARS_W)?;
            y += HEADING_H;
            for (e, ink) in by_capacity(self.sweep, panel) {
                self.row(root, e, ink, panel.group.is_controls(), y, &px)?;
                y += ROW_H;
            }
        }
        // The axis: ticks under the rows, faint gridlines through them.
        let axis_y = y + 4;
        root.draw(&PathElement::new(
            vec![(x0, axis_y), (x_end, axis_y)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
        for t in scale.ticks() {
            let x = px(t);
            root.draw(&PathElement::new(
                vec![(x, first_row), (x, axis_y)],
                BLACK.mix(0.08).stroke_width(1),
            ))
            .map_err(err)?;
            root.draw(&PathElement::new(
                vec![(x, axis_y), (x, axis_y + 5)],
                BLACK.stroke_width(1),
            ))
            .map_err(err)?;
            let label = rate_axis(t);
            let (w, _) = text_size(&label, 12);
            root.draw(&Text::new(label, (x - w / 2, axis_y + 8), (FONT, 12)))
                .map_err(err)?;
        }
        let desc = format!("arrivals/s sustained at {}{}", slo.label(), scale.note());
        let (w, _) = text_size(&desc, 14);
        root.draw(&Text::new(
            desc,
            (x0 + (x_end - x0 - w) / 2, axis_y + 28),
            (FONT, 14),
        ))
        .map_err(err)
    }
}

/// `unsafe at 25, 100/s`; more than three rates as a count and a range.
fn unsafe_flag(rates: &[f64]) -> String {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.as_slice() {
        [] => String::new(),
        [a, .., b] if sorted.len() > 3 => format!(
            "unsafe at {} steps, {}–{}/s",
            sorted.len(),
            rate_label(*a),
            rate_label(*b)
        ),
        _ => {
            let list: Vec<String> = sorted.iter().map(|r| rate_label(*r)).collect();
            format!("unsafe at {}/s", list.join(", "))
        }
    }
}

/// The interval: a whisker from the bar's end `from` (its lower end) to `to` (the lowest
/// failing rate), across the bar's height (`top`, `bottom`); returns where it ends.
fn whisker<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    from: i32,
    to: i32,
    (top, bottom): (i32, i32),
) -> Result<i32, String> {
    let mid = (top + bottom) / 2;
    for w in [
        vec![(from, mid), (to, mid)],
        vec![(to, top + 2), (to, bottom - 2)],
    ] {
        root.draw(&PathElement::new(w, BLACK.mix(0.8).stroke_width(2)))
            .map_err(err)?;
    }
    Ok(to)
}

impl CapacityBars<'_> {
    /// One strategy's row: name, bar, value, and its unsafe steps flagged.
    fn row<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        e: &Entry,
        ink: Ink,
        control: bool,
        y: i32,
        px: &dyn Fn(f64) -> i32,
    ) -> Result<(), String> {
        let unsafe_ink = !control && !e.unsafe_steps.is_empty();
        frame::name_cell(
            root,
            &e.strategy,
            y,
            if unsafe_ink { UNSAFE_RED } else { BLACK },
        )?;
        let t = bar_text(e);
        let color = if control { CONTROL_GREY } else { ink.color };
        let x0 = NAMES_W;
        let mut end = x0;
        if let Some(v) = t.bar {
            end = px(v).max(x0 + 2);
            let (top, bottom) = (y + 4, y + ROW_H - 4);
            root.draw(&Rectangle::new([(x0, top), (end, bottom)], color.filled()))
                .map_err(err)?;
            if let Some(u) = t.upper.filter(|u| *u > v) {
                end = whisker(root, end, px(u).max(end + 3), (top, bottom))?;
            }
            if t.open {
                end = open_end(root, end, (top, bottom), color)?;
            }
        }
        let mut x = end + 6;
        root.draw(&Text::new(t.value.clone(), (x, y + 5), (FONT, 13)))
            .map_err(err)?;
        x += text_size(&t.value, 13).0 + 8;
        let mut detail = t.detail;
        if !e.unsafe_steps.is_empty() {
            x = unsafe_mark(root, &e.unsafe_steps, x, y)?;
            // The safety flag matters more than the detail: the detail yields the room.
            if x > BARS_W - 60 {
                detail.clear();
            }
        }
        if !detail.is_empty() {
            let detail = fit(&detail, 12, BARS_W - x - 10);
            root.draw(&Text::new(
                detail,
                (x, y + 6),
                (FONT, 12).into_font().color(&BLACK.mix(0.55)),
            ))
            .map_err(err)?;
        }
        Ok(())
    }
}

/// An open end: the bar (of height `top` to `bottom`) fades into a dashed arrow, the capacity
/// is higher. Returns where the arrow ends.
fn open_end<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    end: i32,
    (top, bottom): (i32, i32),
    color: RGBColor,
) -> Result<i32, String> {
    root.draw(&DashedPathElement::new(
        vec![(end, (top + bottom) / 2), (end + 22, (top + bottom) / 2)],
        4,
        3,
        color.stroke_width(3),
    ))
    .map_err(err)?;
    root.draw(&PathElement::new(
        vec![
            (end + 18, top + 1),
            (end + 24, (top + bottom) / 2),
            (end + 18, bottom - 1),
        ],
        color.stroke_width(2),
    ))
    .map_err(err)?;
    Ok(end + 26)
}

/// The cross and list of a row's unsafe steps at `x`; returns where the text after it goes.
fn unsafe_mark<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    steps: &[f64],
    x: i32,
    y: i32,
) -> Result<i32, String> {
    let flag = unsafe_flag(steps);
    root.draw(&Cross::new(
        (x + 5, y + ROW_H / 2),
        5,
        UNSAFE_RED.stroke_width(2),
    ))
    .map_err(err)?;
    let flag = fit(&flag, 13, BARS_W - x - 20);
    let w = text_size(&flag, 13).0;
    root.draw(&Text::new(
        flag,
        (x + 14, y + 5),
        (FONT, 13).into_font().color(&UNSAFE_RED),
    ))
    .map_err(err)?;
    Ok(x + 14 + w + 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unsafe_flag_lists_few_steps_and_spans_many() {
        assert_eq!(unsafe_flag(&[400.0, 25.0]), "unsafe at 25, 400/s");
        assert_eq!(
            unsafe_flag(&[25.0, 6400.0, 100.0, 1900.0]),
            "unsafe at 4 steps, 25–6400/s"
        );
    }

    #[test]
    fn a_wide_spread_of_capacities_gets_a_log_axis() {
        assert_eq!(
            Scale::for_values(&[1.56, 12.5, 1600.0]),
            Scale::Log {
                lo: 1.0,
                hi: 10000.0
            }
        );
        let log = Scale::for_values(&[1.56, 1600.0]);
        assert_eq!(log.ticks(), [1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert!((log.fraction(100.0) - 0.5).abs() < 1e-9);
        assert_eq!(
            Scale::for_values(&[141.0, 6400.0]),
            Scale::Linear { max: 6400.0 }
        );
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(1000.0), [0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        assert_eq!(ticks(4300.0).last(), Some(&4000.0));
        assert_eq!(ticks(7.0), [0.0, 2.0, 4.0, 6.0]);
    }
}

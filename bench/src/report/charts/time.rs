//! The charts over time (sales per second, p99 per second, fault windows shaded) and the
//! latency spectrum, one panel per family.

use hdrhistogram::Histogram;
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::Member;
use super::frame::{Axis, FONT, Legend, Mark, PanelArea, Stagger, draw_line, err, text_size};
use super::layout::Rect;
use crate::report::format::{decimals, ms_axis, secs_axis};
use crate::report::saved::RunData;

/// The load's seconds across a panel over time.
fn over_time<'m, 'a, 'b, Y, YT, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, RangedCoordf64, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, RangedCoordf64, Y, DB>
where
    Y: Ranged<ValueType = YT> + ValueFormatter<YT>,
    DB: DrawingBackend,
{
    let secs: &dyn Fn(&f64) -> String = &|v| secs_axis(*v);
    mesh.x_desc("time since the start of the load (s)")
        .x_label_formatter(secs)
}

/// Legend entries of a panel's lines: with their markers when the panel has several.
fn strategy_entries(members: &[Member<'_>]) -> Legend {
    let several = members.len() > 1;
    members
        .iter()
        .map(|(r, ink)| {
            let mark = if several {
                Mark::Line(*ink)
            } else {
                Mark::Stroke(*ink)
            };
            (r.summary.strategy.clone(), mark)
        })
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
pub(super) fn fault_entries(runs: &[RunData]) -> Legend {
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

type Chart2d<'a, DB, Y> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>;

/// Shades the fault windows of `members` over the whole height `[lo, hi]` and names each
/// fault once.
fn draw_bands<DB: DrawingBackend, Y: Axis>(
    chart: &mut Chart2d<'_, DB, Y>,
    members: &[Member<'_>],
    x_end: f64,
    (lo, hi): (f64, f64),
) -> Result<(), String> {
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
    // Each fault named once at the top of its first band; a name that would run into an
    // earlier one (faults a moment apart) goes a line lower.
    let mut named: Vec<usize> = Vec::new();
    let mut taken: Vec<Rect> = Vec::new();
    for &(id, from, _) in &windows {
        if named.contains(&id) {
            continue;
        }
        named.push(id);
        let text = format!("fault {id}");
        let dy = free_line(
            &mut taken,
            chart.backend_coord(&(from, hi)),
            (4, 4),
            &text,
            13,
        );
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((from, hi))
                    + Text::new(text, (4, dy), (FONT, 13).into_font().color(&BLACK.mix(0.7))),
            ))
            .map_err(err)?;
    }
    Ok(())
}

/// The offset below `at` (`(dx, first dy)`) of the first line where `text` overlaps no label
/// already `taken`, which it joins: labels a moment apart stack instead of running together.
fn free_line(
    taken: &mut Vec<Rect>,
    (x, y): (i32, i32),
    (dx, mut dy): (i32, i32),
    text: &str,
    size: u32,
) -> i32 {
    let (w, h) = text_size(text, size);
    while taken
        .iter()
        .any(|t| t.overlaps(&Rect::new(x + dx, y + dy, w, h)))
    {
        dy += h;
    }
    taken.push(Rect::new(x + dx, y + dy, w, h));
    dy
}

/// Marks each member's sell-out (the moment its stock ran out, `summary.sold_out_s`) with a
/// dashed vertical line in its colour and the words "sold out" at its top, so a line that falls
/// to zero reads as the stock ending, not as an outage. Labels that would overlap go a line
/// lower.
fn draw_sold_out<DB: DrawingBackend, Y: Axis>(
    chart: &mut Chart2d<'_, DB, Y>,
    members: &[Member<'_>],
    (lo, hi): (f64, f64),
) -> Result<(), String> {
    let mut taken: Vec<Rect> = Vec::new();
    for (r, ink) in members {
        let Some(t) = r.summary.sold_out_s else {
            continue;
        };
        let style = ink.color.stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new(vec![(t, lo), (t, hi)], 4, 4, style))
            .map_err(err)?;
        let text = "sold out";
        let dy = free_line(&mut taken, chart.backend_coord(&(t, hi)), (3, 18), text, 12);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((t, hi))
                    + Text::new(text, (3, dy), (FONT, 12).into_font().color(&ink.color)),
            ))
            .map_err(err)?;
    }
    Ok(())
}

pub(super) fn timeline_end(runs: &[RunData]) -> f64 {
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
pub(super) fn throughput_top(runs: &[RunData]) -> f64 {
    runs.iter()
        .flat_map(throughput_series)
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.15
}

pub(super) fn throughput<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    x_end: f64,
    top: f64,
) -> Result<Legend, String> {
    let mut chart = p
        .builder()
        .build_cartesian_2d(0f64..x_end, 0f64..top)
        .map_err(err)?;
    p.draw_mesh(
        over_time(&mut chart.configure_mesh())
            .y_desc("sales completed (units/s)")
            .y_label_formatter(&|v| format!("{v:.0}")),
    )?;
    draw_bands(&mut chart, members, x_end, (0.0, top))?;
    draw_sold_out(&mut chart, members, (0.0, top))?;
    let n = members.len();
    for (k, (r, ink)) in members.iter().enumerate() {
        draw_line(
            &mut chart,
            throughput_series(r),
            *ink,
            Some(Stagger { k, n }),
        )?;
    }
    Ok(strategy_entries(members))
}

/// The p99 axis, the same in every panel.
pub(super) fn p99_range(runs: &[RunData]) -> (f64, f64) {
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

pub(super) fn p99<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    x_end: f64,
    (lo, hi): (f64, f64),
) -> Result<Legend, String> {
    // Log scale: a pause's seconds-long tail and a healthy millisecond both stay readable.
    let mut chart = p
        .builder()
        .build_cartesian_2d(0f64..x_end, (lo..hi).log_scale())
        .map_err(err)?;
    p.draw_mesh(
        over_time(&mut chart.configure_mesh())
            .y_desc(format!(
                "p99 per second (ms, log scale; ~max of a second < {})",
                crate::record::quantile::min_samples(crate::record::Pct::P99.q())
            ))
            .y_label_formatter(&|v| ms_axis(*v)),
    )?;
    draw_bands(&mut chart, members, x_end, (lo, hi))?;
    draw_sold_out(&mut chart, members, (lo, hi))?;
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
    Ok(strategy_entries(members))
}

/// `1/(1-p)` → the percentile it stands for, e.g. 1000 → `99.9%`.
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    format!("{}%", decimals(p, 5))
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
pub(super) fn spectrum_ranges(runs: &[RunData]) -> (f64, (f64, f64)) {
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

pub(super) fn spectrum<DB: DrawingBackend>(
    p: &PanelArea<DB>,
    members: &[Member<'_>],
    (x_end, (lo, hi)): (f64, (f64, f64)),
) -> Result<Legend, String> {
    // 50% sits a third of a decade from 0%: only a one-panel chart has room for both labels.
    let mut keys = if p.single { vec![1.0, 2.0] } else { vec![1.0] };
    let mut k = 10.0;
    while k <= x_end {
        keys.push(k);
        k *= 10.0;
    }
    let mut chart = p
        .builder()
        .build_cartesian_2d(
            (1f64..x_end).log_scale().with_key_points(keys),
            (lo..hi).log_scale(),
        )
        .map_err(err)?;
    p.draw_mesh(
        chart
            .configure_mesh()
            .x_desc("percentile (log scale of 1/(1-p))")
            .y_desc("latency from intended start (ms, log)")
            .x_label_formatter(&|x| percentile_label(*x))
            .y_label_formatter(&|v| ms_axis(*v)),
    )?;
    let n = members.len();
    for (k, (r, ink)) in members.iter().enumerate() {
        if let Some(h) = r.latency.as_ref().filter(|h| !h.is_empty()) {
            let points = spectrum_points(h, x_end);
            draw_line(&mut chart, points, *ink, Some(Stagger { k, n }))?;
        }
    }
    Ok(strategy_entries(members))
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

//! The safety chart: one row per strategy, grouped by family, one column per count.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::frame::{
    FONT, GRID_W, HEADING_H, NAMES_W, ROW_H, UNSAFE_RED, err, heading, name_cell, titles,
};
use super::palette::Panel;
use super::tradeoff::is_unsafe;
use crate::report::saved::RunData;

/// The four counts of the safety chart, each a column of its own scale.
const SAFETY: [(&str, RGBColor); 4] = [
    ("oversell (units)", RGBColor(214, 39, 40)),
    ("lost updates", RGBColor(255, 127, 14)),
    ("double-grant incidents", RGBColor(148, 103, 189)),
    ("leases lost while held", RGBColor(140, 86, 75)),
];

/// Top of the first row of the safety chart (title, fault line, column headings above).
const SAFETY_TOP: i32 = 96;

pub(super) fn safety_size(panels: &[Panel]) -> (u32, u32) {
    let rows: usize = panels.iter().map(|p| p.members.len()).sum();
    let h = SAFETY_TOP + panels.len() as i32 * HEADING_H + rows as i32 * ROW_H + 16;
    (GRID_W as u32, h as u32)
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
pub(super) fn safety<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData],
    panels: &[Panel],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let (caption, sub) = safety_caption(runs);
    let width = GRID_W;
    titles(root, width, &caption, Some((&sub, 40)))?;
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
                count_bar(root, k, v, tops[k], (x, y), col_w)?;
            }
            y += ROW_H;
        }
    }
    Ok(())
}

/// The chart's title and subtitle: which faults the runs saw, if any.
fn safety_caption(runs: &[RunData]) -> (String, String) {
    let mut faults: Vec<String> = Vec::new();
    for r in runs {
        for f in &r.summary.faults {
            let l = format!("{} {}", f.id, f.label);
            if !faults.contains(&l) {
                faults.push(l);
            }
        }
    }
    if faults.is_empty() {
        (
            "Safety violations per strategy".to_string(),
            "no faults injected; counts from the audited store and the lease log".to_string(),
        )
    } else {
        (
            "Safety violations per strategy under faults".to_string(),
            format!("under faults: {}", faults.join(", ")),
        )
    }
}

/// Count `v` of column `k` as a bar scaled to the column's `top`, then its value (grey when 0).
fn count_bar<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    k: usize,
    v: u64,
    top: u64,
    (x, y): (i32, i32),
    col_w: i32,
) -> Result<(), String> {
    let room = col_w - 56;
    let len = if top == 0 {
        0
    } else {
        ((v as f64 / top as f64) * room as f64).round() as i32
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
        (x + 10 + len, y + 5),
        (FONT, 13).into_font().color(&ink),
    ))
    .map_err(err)?;
    Ok(())
}

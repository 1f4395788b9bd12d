//! The sale's surge: arrivals, units sold and attempts in flight per 10 ms (summary.json's
//! `sale.series`), every strategy of the page on one time axis, one panel per quantity.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::frame::{
    FONT, Frame, Mark, PANEL_LEGEND_W, PANEL_MIN_H, PanelArea, Stagger, draw_line, err,
};
use super::palette::Ink;
use super::{Draw, Kind};
use crate::record::sale::Series;
use crate::report::format::secs_axis;
use crate::report::saved::RunData;

/// One quantity of a series, per bucket.
type Values = fn(&Series) -> &[u64];

/// The three panels: their titles, the y axis's words, and each series' values.
const PANELS: [(&str, &str, Values); 3] = [
    ("arrivals per 10 ms", "started, by intended start", |s| {
        &s.arrivals
    }),
    ("units sold per 10 ms", "units sold", |s| &s.sales),
    ("attempts in flight", "most in flight within 10 ms", |s| {
        &s.in_flight
    }),
];

/// The surge chart of the runs whose sale measured a series.
pub(super) struct SurgeChart<'a> {
    series: Vec<(&'a str, &'a Series)>,
    frame: Frame,
    /// The time axis, seconds from the load's start.
    x: (f64, f64),
}

impl<'a> SurgeChart<'a> {
    /// `None` when no run measured a sale's series.
    pub fn new(runs: &'a [RunData]) -> Option<Self> {
        let series: Vec<(&str, &Series)> = runs
            .iter()
            .filter_map(|r| {
                let s = &r.summary.sale.as_ref()?.figures.as_ref()?.series;
                (!s.arrivals.is_empty()).then_some((r.summary.strategy.as_str(), s))
            })
            .collect();
        if series.is_empty() {
            return None;
        }
        let end = |s: &Series| s.from_s + (s.arrivals.len() as u64 * s.step_ms) as f64 / 1000.0;
        let lo = series
            .iter()
            .map(|(_, s)| s.from_s)
            .fold(f64::MAX, f64::min);
        let hi = series.iter().map(|(_, s)| end(s)).fold(lo + 0.1, f64::max);
        let n = series.len();
        let frame = Frame::new(
            Kind::Surge.title(),
            Vec::new(),
            &[n, n, n],
            1,
            PANEL_LEGEND_W,
            PANEL_MIN_H,
        );
        Some(Self {
            series,
            frame,
            x: (lo, hi),
        })
    }

    fn panel<DB: DrawingBackend>(
        &self,
        p: &PanelArea<DB>,
        (y_desc, values): (&str, Values),
    ) -> Result<Vec<(String, Mark)>, String> {
        let (desc, labels) = p.fonts();
        let top = (self.series.iter())
            .flat_map(|(_, s)| values(s).iter().copied())
            .max()
            .unwrap_or(0)
            .max(1) as f64
            * 1.15;
        let mut chart = p
            .builder()
            .build_cartesian_2d(self.x.0..self.x.1, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time since the start of the load (s)")
            .x_label_formatter(&|v| secs_axis(*v))
            .y_desc(y_desc)
            .y_label_formatter(&|v| format!("{v:.0}"))
            .axis_desc_style((FONT, desc))
            .label_style((FONT, labels))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        let n = self.series.len();
        let mut legend = Vec::new();
        for (k, (id, s)) in self.series.iter().enumerate() {
            let step_s = s.step_ms as f64 / 1000.0;
            let points = (values(s).iter().enumerate())
                .map(|(b, v)| (s.from_s + (b as f64 + 0.5) * step_s, *v as f64))
                .collect();
            draw_line(&mut chart, points, Ink::nth(k), Some(Stagger { k, n }))?;
            legend.push((id.to_string(), Mark::Line(Ink::nth(k))));
        }
        Ok(legend)
    }
}

impl Draw for SurgeChart<'_> {
    fn size(&self) -> (u32, u32) {
        self.frame.size()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let titles = PANELS.map(|p| p.0);
        self.frame.draw(root, &titles, |i, p| {
            self.panel(p, (PANELS[i].1, PANELS[i].2))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Outcome;
    use crate::record::sale::{SaleFigures, SaleInputs, SaleRow};

    /// A run whose sale sold `n` units, one each 20 ms from 1 s.
    fn sale_run(strategy: &str, n: u64) -> RunData {
        let rows: Vec<SaleRow> = (0..n)
            .map(|b| SaleRow {
                sku: 0,
                buyer: b,
                qty: 1,
                outcome: Outcome::Sold,
                intended_us: 1_000_000 + b * 20_000,
                started_us: 1_000_000 + b * 20_000,
                ended_us: 1_005_000 + b * 20_000,
            })
            .collect();
        let mut run = crate::report::saved::fixture_run(strategy);
        let mut sale = crate::report::sale::fixture();
        sale.figures = Some(SaleFigures::of(SaleInputs {
            unstarted: &[],
            load_end_us: 6_000_000,
            rows: &rows,
            orders: None,
            initial: &[n],
            left: &[0],
            surge_start_us: Some(1_000_000),
            limit: Some(1),
            slo_us: 100_000,
        }));
        run.summary.sale = Some(sale);
        run
    }

    #[test]
    fn every_sale_is_drawn_on_one_time_axis_and_a_steady_page_has_no_surge() {
        let mut steady = sale_run("steady", 1);
        steady.summary.sale = None;
        assert!(SurgeChart::new(std::slice::from_ref(&steady)).is_none());
        let runs = [
            sale_run("zookeeper", 20),
            sale_run("redis-setnx", 40),
            steady,
        ];
        let chart = SurgeChart::new(&runs).expect("two sales");
        assert_eq!(chart.series.len(), 2);
        // From 0.5 s before the surge to the bucket of the later sell-out (1.785 s), the last
        // attempt's end (the series stops there, short of half a second after it).
        assert_eq!(chart.x.0, 0.5);
        assert!((1.78..1.80).contains(&chart.x.1), "{:?}", chart.x);
        super::super::frame::register_font();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, chart.size()).into_drawing_area();
            chart.draw(&root).unwrap();
            root.present().unwrap();
        }
        for text in [
            "zookeeper",
            "redis-setnx",
            "arrivals per 10 ms",
            "attempts in flight",
        ] {
            assert!(svg.contains(text), "{text}");
        }
    }
}

//! The page of a `lockbench calibrate` folder (`model.json`): each lock's time per grant split
//! into its serial round trips and fsyncs, with their intervals and what was counted, and the
//! held-out points predicted against measured.

use std::fmt::Write as _;
use std::path::Path;

use super::page::{esc, machines, page_end, page_start};
use crate::report::format::decimals;
use crate::report::predict::{CHECK_TOLERANCE, Coef, Model, Point, interval};

/// Renders the page of the folder `dir` holding `m`.
pub(super) fn render(dir: &Path, m: &Model) -> String {
    let mut h = String::new();
    page_start(
        &mut h,
        &format!("lockbench: what a grant costs, {} strategies", m.fits.len()),
    );
    machines(&mut h, m.machine.as_ref());
    let _ = writeln!(
        h,
        "<p>How to read this page. Each strategy ran {} buyers in a closed loop on one key, {} \
         trial(s) of {} s a point, with every round trip and every fsync made slower by what \
         each point adds (<code>[environment]</code>). Its time per grant is fitted as \
         <b>base + serial round trips × rtt + serial fsyncs × fsync</b>, each term with its \
         95&nbsp;% interval; a term whose interval holds 0 is one the lock does not pay. Beside \
         them, what the client wrappers counted per sale (serial ones are at most those, peers' \
         aside). Then the points held out of the fit: predicted, then measured (within \
         ±{}&nbsp;% passes). docs/predict.md says more.</p>",
        m.contenders,
        m.trials,
        decimals(m.trial_s, 1),
        decimals(CHECK_TOLERANCE * 100.0, 0)
    );
    fits(&mut h, m);
    checks(&mut h, m);
    page_end(
        &mut h,
        dir,
        "Every point's own contend folder is in <code>&lt;strategy&gt;/rtt…-fsync…/</code>; \
         the fit and its points in <code>model.json</code>.",
    );
    h
}

fn coef(c: &Coef) -> String {
    format!(
        "{} <small>({}–{})</small>",
        decimals(c.value, 2),
        decimals(c.lo, 2),
        decimals(c.hi, 2)
    )
}

fn fits(h: &mut String, m: &Model) {
    h.push_str(
        "<h2>Time per grant</h2>\n<table>\n<tr><th>strategy</th><th>trials</th>\
         <th>base ms/grant</th><th>serial round trips</th><th>serial fsyncs</th>\
         <th>scatter</th><th>R²</th><th>counted round trips per sale</th></tr>\n",
    );
    for f in &m.fits {
        let counted = (m.points.iter())
            .find(|p: &&Point| p.strategy == f.strategy && !p.held_out)
            .and_then(|p| p.round_trips_per_sale)
            .map_or("-".into(), |v| decimals(v, 2));
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}&nbsp;%</td>\
             <td>{}</td><td>{counted}</td></tr>",
            esc(&f.strategy),
            f.trials,
            coef(&f.base_ms),
            coef(&f.per_rtt),
            coef(&f.per_fsync),
            decimals(f.scatter_pct, 1),
            f.r2.map_or("-".into(), |r| decimals(r, 2)),
        );
    }
    h.push_str("</table>\n");
    for (id, e) in &m.errors {
        let _ = writeln!(h, "<p>{}: stopped: {}</p>", esc(id), esc(e));
    }
}

fn checks(h: &mut String, m: &Model) {
    if m.checks.is_empty() {
        return;
    }
    h.push_str(
        "<h2>Predicted against measured, at points the fit did not see</h2>\n<table>\n\
         <tr><th>strategy</th><th>at</th><th>predicted grants/s</th><th>measured</th>\
         <th>error</th><th>verdict</th></tr>\n",
    );
    for c in &m.checks {
        let verdict = if c.within {
            "within".to_string()
        } else {
            format!("MISSED: {}", c.missing.as_deref().unwrap_or(""))
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{} {}</td><td>{} <small>(n={})</small></td>\
             <td>{:+.1}&nbsp;%</td><td>{}</td></tr>",
            esc(&c.strategy),
            esc(&c.at.text()),
            decimals(c.predicted.grants_per_s, 0),
            interval(&c.predicted),
            decimals(c.measured, 0),
            c.measured_n,
            c.error * 100.0,
            esc(&verdict)
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::predict::fixture_point;

    #[test]
    fn the_page_shows_each_term_and_each_held_out_verdict() {
        let mut m = Model::empty("w.toml", (8, 3, 2.0), None);
        let at = |rtt: f64, fsync: f64, held_out: bool| Point {
            round_trips_per_sale: Some(10.0),
            ..fixture_point("zookeeper", (rtt, fsync), held_out, 2.0 + 3.0 * rtt + fsync)
        };
        m.points = vec![
            at(0.0, 0.0, false),
            at(2.0, 0.0, false),
            at(0.0, 4.0, false),
        ];
        m.points.push(at(1.0, 2.0, true));
        m.conclude();
        let dir = tempfile::tempdir().unwrap();
        let page = render(dir.path(), &m);
        assert_contains!(page, "<td>zookeeper</td><td>9</td>");
        assert!(
            page.contains("<td>3 <small>"),
            "the round trips' term: {page}"
        );
        assert!(
            page.contains("<td>10</td>"),
            "the counted round trips: {page}"
        );
        assert_contains!(page, "rtt 1 ms, fsync 2 ms", "within");
    }
}

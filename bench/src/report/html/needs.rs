//! The needs section of the job page (`lockbench report DIR --needs ...`): the strategies that
//! meet every term, with the reasons, then the others with their first gap.

use std::fmt::Write as _;

use super::page::{by_family, esc, said_html};
use crate::report::evidence::ids;
use crate::report::model::{Conclusion, NeedsAnswer};
use crate::report::needs::{Judgement, Met};

/// The section of the job page that lists which strategies meet the needs and why, in the
/// summary's order (by family); every reason links to its number. `needs` judges
/// `strategies`, one judgement each, in their order.
pub(super) fn advice(h: &mut String, needs: &NeedsAnswer, strategies: &[Conclusion]) {
    let pairs: Vec<(&Conclusion, &Judgement)> = strategies.iter().zip(&needs.judgements).collect();
    let judged: Vec<&Judgement> = by_family(&pairs, |(c, _)| c.family)
        .into_iter()
        .flat_map(|(_, g)| g)
        .map(|(_, j)| *j)
        .collect();
    let (yes, no): (Vec<&Judgement>, Vec<&Judgement>) =
        judged.into_iter().partition(|j| j.qualifies());
    let _ = writeln!(
        h,
        "<h2 id=\"needs\">Which strategies meet your needs</h2>\n<p>Needs: <code>{}</code>. A \
         strategy qualifies only when every term is measured and met; the reasons link to the \
         numbers.{}</p>",
        esc(&needs.given),
        if needs.fenced_ok {
            " With fenced-ok, a fenced verdict (the lock broke, fencing refused every stale \
             write, the store intact) counts as safe."
        } else {
            " A fenced verdict (the lock broke, fencing saved the store) does not count as safe \
             unless fenced-ok is given."
        }
    );
    let _ = writeln!(
        h,
        "<h3 id=\"needs-qualify\">Qualify ({})</h3>\n<ul class=\"plain\">",
        yes.len()
    );
    if yes.is_empty() {
        let _ = writeln!(h, "<li>None of the strategies measured here.</li>");
    }
    for j in &yes {
        let reasons: Vec<String> = j
            .terms
            .iter()
            .map(|t| format!("{}: {}", esc(&t.term), said_html(&t.why)))
            .collect();
        let _ = writeln!(
            h,
            "<li><a href=\"#{}\"><b>{}</b></a> — {}.</li>",
            esc(&ids::summary(&j.strategy)),
            esc(&j.strategy),
            reasons.join("; ")
        );
    }
    let _ = writeln!(
        h,
        "</ul>\n<h3 id=\"needs-other\">Do not qualify, or not measured ({})</h3>\n<ul class=\"plain\">",
        no.len()
    );
    for j in &no {
        let Some(gap) = j.first_gap() else { continue };
        let word = match gap.met {
            Met::No => "not met",
            Met::Unmeasured => "not measured",
            Met::Yes => unreachable!("a gap is not met"),
        };
        let _ = writeln!(
            h,
            "<li class=\"gap\"><a href=\"#{}\"><b>{}</b></a> — {}: {word}: {}.</li>",
            esc(&ids::summary(&j.strategy)),
            esc(&j.strategy),
            esc(&gap.term),
            said_html(&gap.why)
        );
    }
    let _ = writeln!(h, "</ul>");
}

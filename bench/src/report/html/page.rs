//! The kit every page is built from: the head and its style, escaping, the end line, a chart
//! as a figure with its caption, a sentence whose numbers link to their cells, and grouping by
//! strategy family.

use std::fmt::Write as _;
use std::path::Path;

use crate::record::Pct;
use crate::report::charts::{self, Kind};
use crate::report::evidence::{Said, Span, Tone};
use crate::report::saved::RunData;
use crate::strategy::Family;

/// Escapes text for HTML content and attribute values.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = "
body{font-family:'DejaVu Sans',Verdana,sans-serif;margin:2em auto;max-width:1320px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
table.runs{font-size:.8em}table.runs td,table.runs th{padding:.2em .3em}
td.why{font-size:.85em;color:#555}td.steps{min-width:18em}.part{font-weight:bold;color:#356;white-space:nowrap}
th,td{border:1px solid #ccc;padding:.25em .5em}td.n{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
thead th{position:sticky;top:0;z-index:1}
.scroll{overflow-x:auto}
tr.family th{background:#e4e9f0;text-align:left;font-size:1.05em}
tr.unsafe td{background:#fdd;color:#900;font-weight:bold}
tr.fenced td{background:#fff3d6;color:#7a4b00}
tr.control td{color:#666;font-style:italic}
.badge{font-size:.75em;border-radius:3px;padding:0 .35em;margin-left:.4em;font-style:normal}
.b-control{background:#ddd;color:#444}.b-unsafe{background:#c00;color:#fff}
.b-fenced{background:#e9a100;color:#fff}
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:.85em}
.note{color:#a60}
ul.plain{padding-left:1.2em;overflow-wrap:anywhere}ul.plain li{margin:.3em 0}
a.num{color:inherit;text-decoration:underline dotted}
a.bad,td.bad{color:#c00;font-weight:bold}a.warn{color:#a06000;font-weight:bold}
.gap{color:#555}
:target{outline:2px solid #e9a100;background:#fff7d6}
";

/// The page's head, its style and its title.
pub(super) fn page_start(h: &mut String, title: &str) {
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        esc(title),
        esc(title)
    );
}

/// The machines the page's results ran on, one line each under the title (one for the runs of
/// one command; none for results older than the fingerprint).
pub(super) fn machines<'a>(
    h: &mut String,
    all: impl IntoIterator<Item = &'a crate::report::Machine>,
) {
    let mut said = Vec::new();
    for line in all.into_iter().map(crate::report::format::machine) {
        if !said.contains(&line) {
            let _ = writeln!(h, "<p class=\"machine\" id=\"machine\">{}</p>", esc(&line));
            said.push(line);
        }
    }
}

/// The page's end: what rendered it and how to render it again (`extra` is HTML).
pub(super) fn page_end(h: &mut String, dir: &Path, extra: &str) {
    let _ = writeln!(
        h,
        "<p><small>Rendered by lockbench {} from the saved results; re-render with \
         <code>lockbench report {}</code>. {extra}</small></p>\n</body>\n</html>",
        env!("CARGO_PKG_VERSION"),
        esc(&dir.display().to_string())
    );
}

/// The family a report groups a strategy in (`None`: unknown to this lockbench).
pub(super) fn family_of(strategy: &str) -> Option<Family> {
    crate::strategy::find(strategy).ok().map(|i| i.family())
}

/// Items grouped by family in [`Family::ALL`] order, unknown families last as `other`; the
/// order within a group is kept.
pub(super) fn by_family<T>(
    items: &[T],
    family: impl Fn(&T) -> Option<Family>,
) -> Vec<(&'static str, Vec<&T>)> {
    let mut groups: Vec<(&'static str, Vec<&T>)> = Family::ALL
        .iter()
        .map(|f| {
            let of: Vec<&T> = items.iter().filter(|i| family(i) == Some(*f)).collect();
            (f.title(), of)
        })
        .collect();
    groups.push((
        "other",
        items.iter().filter(|i| family(i).is_none()).collect(),
    ));
    groups.retain(|(_, v)| !v.is_empty());
    groups
}

/// A list of notes (`<ul class="note">`, with `id` when given); nothing without notes.
pub(super) fn note_list(h: &mut String, id: Option<&str>, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    let id = id
        .map(|i| format!(" id=\"{}\"", esc(i)))
        .unwrap_or_default();
    let _ = writeln!(h, "<ul class=\"note\"{id}>");
    for n in notes {
        let _ = writeln!(h, "<li>{}</li>", esc(n));
    }
    let _ = writeln!(h, "</ul>");
}

/// A family's heading row across `columns` columns, when a table has more than one family.
pub(super) fn family_row(h: &mut String, groups: usize, title: &str, columns: usize) {
    if groups > 1 {
        let _ = writeln!(
            h,
            "<tr class=\"family\"><th colspan=\"{columns}\">{}</th></tr>",
            esc(title)
        );
    }
}

/// A sentence as HTML: numbers and verdicts become links to their cells.
pub(super) fn said_html(said: &Said) -> String {
    said.0
        .iter()
        .map(|span| match span {
            Span::Text(t) => esc(t),
            Span::Label(t) => format!("<span class=\"part\">{}</span>", esc(t)),
            Span::Link { text, anchor, tone } => {
                let class = match tone {
                    Tone::Plain => "num",
                    Tone::Bad => "num bad",
                    Tone::Warn => "num warn",
                };
                format!(
                    "<a class=\"{class}\" href=\"#{}\">{}</a>",
                    esc(anchor),
                    esc(text)
                )
            }
        })
        .collect()
}

/// What a chart shows.
fn caption_text(kind: Kind) -> &'static str {
    match kind {
        Kind::Throughput => {
            "Sales completed per second (timeline.csv). The last, partial second is shown as a \
             rate over the part that ran, or left out when under half a second."
        }
        Kind::P99 => "p99 of the attempts that completed in each second (timeline.csv).",
        Kind::Spectrum => {
            "Every outcome class of latency.hlog merged per strategy; the right end is the \
             maximum. A flat line is a predictable system, a late cliff is a tail."
        }
        Kind::Tradeoff => {
            "One point per strategy (summary.json): fast and safe is top left. A cross marks a \
             strategy that claims safety and broke it."
        }
        Kind::Safety => {
            "Oversell and lost updates from the audit of the store; double grants from the lease \
             log. Every bar carries its value."
        }
        Kind::LatencyVsRate => {
            "The SLO percentile over every scheduled arrival at each offered rate (sweep.json); \
             a triangle is a lower bound (arrivals never served), the ring the capacity."
        }
        Kind::Capacity => {
            "The highest offered rate that met the SLO with the store intact (sweep.json); an \
             open end is a lower bound, \"<\" failed even the lowest rate."
        }
        Kind::Surge => {
            "The sale (summary.json's sale.series): arrivals by intended start, units sold by \
             the end of their sale, and the most attempts in flight, per 10 ms, from half a \
             second before the surge to half a second after the hot SKU sold out. Arrivals never \
             started (refused at the door) are not in it: the driver knows only their count."
        }
        Kind::Contention => {
            "Each strategy in a closed loop on one key (contend.json). Above: grants/s, a dot \
             the mean of a level's trials and a whisker their range, the line the Universal \
             Scalability Law fitted to every trial. Below: the p99 of the wait for the lock \
             (granted attempts, critical section apart); a ring is the maximum of too few waits."
        }
    }
}

/// The caption of a chart of `runs` (none for the sweep's charts).
pub(super) fn caption(kind: Kind, runs: &[RunData]) -> String {
    let any_faults = runs.iter().any(|r| !r.summary.faults.is_empty());
    let bands = if any_faults && matches!(kind, Kind::Throughput | Kind::P99) {
        " Grey bands: fault windows (started → healed), one per strategy run."
    } else {
        ""
    };
    let sparse = if matches!(kind, Kind::P99) {
        format!(
            " A second of fewer than {} completions cannot bound its p99: there the line is \
             about the second's slowest attempt, a trend, not a percentile.",
            crate::record::quantile::min_samples(Pct::P99.q())
        )
    } else {
        String::new()
    };
    format!("{}{sparse}{bands}", caption_text(kind))
}

/// A chart inline, with its caption; `png` is the path of its PNG relative to the page.
pub(super) fn figure(h: &mut String, c: &charts::Chart, caption: &str, png: &str) {
    // The namespace is implied inside HTML; dropping it leaves no URL in the page.
    let svg = c.svg.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "");
    let svg = svg.get(svg.find("<svg").unwrap_or(0)..).unwrap_or(&svg);
    let _ = writeln!(
        h,
        "<figure id=\"chart-{}\">\n<h3>{}</h3>\n{}\n<figcaption>{} \
         (<code>{}</code>)</figcaption>\n</figure>",
        c.kind.file(),
        esc(c.kind.title()),
        svg,
        esc(caption),
        esc(png)
    );
}

//! The page of a `scripts/versions.sh` folder: every strategy on every server build, its
//! capacity interval against the first build's and its calm p99 with interval and sample count.

use std::fmt::Write as _;
use std::path::Path;

use super::page::{esc, page_end, page_start};
use crate::report::versions::{Build, HEADERS, NOTE, cells, lines};

pub(super) fn render(dir: &Path, builds: &[Build]) -> String {
    let mut h = String::new();
    page_start(&mut h, "lockbench versions: server builds side by side");
    // Each build's sweep measured the machine at its start: one line per machine.
    let sweeps = builds.iter().filter_map(|b| b.sweep.machine.as_ref());
    super::page::machines(&mut h, sweeps);
    let _ = writeln!(
        h,
        "<p>The same strategies, workload and SLO on each server build, one after the other on \
         this machine: a capacity sweep per build, then a calm run at one rate common to every \
         build of a strategy (half the lowest capacity any build showed), then at that rate \
         under each fault of <code>FAULTS</code>. Each build's folder holds its sweep's and \
         runs' own pages.</p>"
    );
    let _ = write!(h, "<table>\n<tr><th>strategy</th>");
    for c in HEADERS {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    let _ = writeln!(h, "</tr>");
    for l in lines(builds) {
        let _ = write!(h, "<tr><td>{}</td>", esc(&l.strategy));
        for c in cells(&l) {
            let _ = write!(h, "<td>{}</td>", esc(&c));
        }
        let _ = writeln!(h, "</tr>");
    }
    let _ = writeln!(h, "</table>\n<p>{}.</p>", esc(NOTE));
    page_end(
        &mut h,
        dir,
        "<p>Measured by <code>scripts/versions.sh</code>; the same table in the terminal: \
         <code>lockbench versions DIR</code>.</p>",
    );
    h
}

//! Where and how runs ran, and how to run them again: versions, machine, seed, files, the
//! servers of each run, the command lines and the effective workload (written beside the page).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::page::esc;
use crate::cluster::Provisioner;
use crate::report::Summary;
use crate::report::error::ReportError;
use crate::report::format::secs;
use crate::report::saved::RunData;

/// The exact replay needs the effective workload as a file `--workload` accepts: writes it
/// beside the page and returns its path.
pub(super) fn write_effective_workload(
    dir: &Path,
    s: &Summary,
) -> Result<Option<PathBuf>, ReportError> {
    let Some(t) = effective_toml(&s.workload) else {
        return Ok(None);
    };
    let path = dir.join("effective-workload.toml");
    std::fs::write(&path, t).map_err(|source| ReportError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Some(path))
}

/// The effective workload as TOML, loadable with `--workload` (nulls dropped: TOML has none).
fn effective_toml(workload: &serde_json::Value) -> Option<String> {
    fn strip(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(m) => serde_json::Value::Object(
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(strip).collect()),
            v => v.clone(),
        }
    }
    toml::to_string(&strip(workload)).ok()
}

/// Shell-quotes one word when it needs it.
pub(super) fn sh(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./,=:+@".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The command line that reproduces the results, with the workload as given.
fn reproduce_command(runs: &[RunData], compare: bool, workload: &str) -> String {
    let s = &runs[0].summary;
    let mut cmd = if compare {
        let ids: Vec<&str> = runs.iter().map(|r| r.summary.strategy.as_str()).collect();
        format!("lockbench compare --strategies {}", sh(&ids.join(",")))
    } else {
        format!("lockbench run --strategy {}", sh(&s.strategy))
    };
    let _ = write!(cmd, " --workload {}", sh(workload));
    match (s.provisioner, &s.target_file) {
        (Provisioner::Containers, _) => cmd.push_str(" --provision containers"),
        (Provisioner::Target, Some(t)) => {
            let _ = write!(cmd, " --target {}", sh(t));
        }
        _ => {}
    }
    if let Some(c) = &s.chaos_file {
        let _ = write!(cmd, " --chaos {}", sh(c));
    }
    if s.workers > 0 {
        let _ = write!(cmd, " --workers {}", s.workers);
    }
    cmd
}

/// Where and how the runs ran, and the commands that reproduce them; `scope` (HTML, may be
/// empty) says which runs these are when the page holds more than one part.
pub(super) fn environment(
    h: &mut String,
    runs: &[RunData],
    compare: bool,
    exact: Option<&Path>,
    scope: &str,
) {
    environment_table(h, runs, scope);
    servers_table(h, runs);
    reproduce(h, runs, compare, exact);
}

/// The table of versions, machine, seed and files.
fn environment_table(h: &mut String, runs: &[RunData], scope: &str) {
    let s = &runs[0].summary;
    let cores = std::thread::available_parallelism()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "unknown".into());
    let mut versions: Vec<&str> = runs
        .iter()
        .map(|r| r.summary.lockbench_version.as_str())
        .collect();
    versions.dedup();
    let _ = writeln!(
        h,
        "<h2>Environment and reproduction</h2>\n{scope}<table id=\"environment\">\n\
         <tr><th>lockbench</th><td>{} (this report rendered by {}, git {})</td></tr>\n\
         <tr><th>machine</th><td>{} cores, {} memory (the machine that rendered this report)</td></tr>\n\
         <tr><th>seed</th><td>{}</td></tr>\n\
         <tr><th>servers</th><td>{}</td></tr>\n\
         <tr><th>workload file</th><td><code>{}</code></td></tr>\n\
         <tr><th>chaos file</th><td>{}</td></tr>\n\
         <tr><th>client workers</th><td>{}</td></tr>\n</table>",
        esc(&versions.join(", ")),
        env!("CARGO_PKG_VERSION"),
        esc(option_env!("LOCKBENCH_GIT_REV").unwrap_or("unknown")),
        cores,
        mem_total().unwrap_or_else(|| "unknown".into()),
        s.seed,
        servers_origin(runs),
        esc(&s.workload_file),
        s.chaos_file
            .as_deref()
            .map_or_else(|| "none".into(), |c| format!("<code>{}</code>", esc(c))),
        if s.workers == 0 {
            "none (buyers inside lockbench)".to_string()
        } else {
            s.workers.to_string()
        },
    );
}

/// Total memory from /proc/meminfo, e.g. `7.8 GiB`.
fn mem_total() -> Option<String> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)))
}

/// Where the servers came from, as HTML: numbers from loopback processes, containers and a
/// staging cluster are not comparable, so the page says which these are.
fn servers_origin(runs: &[RunData]) -> String {
    let mut kinds: Vec<String> = Vec::new();
    for r in runs {
        let s = &r.summary;
        let kind = match s.provisioner {
            Provisioner::Local => "local: child processes on loopback".to_string(),
            Provisioner::Containers => {
                let mut images: Vec<&str> = s
                    .servers
                    .iter()
                    .filter_map(|n| n.container.as_ref().map(|c| c.image.as_str()))
                    .collect();
                images.sort_unstable();
                images.dedup();
                format!(
                    "containers on a private Docker network (images <code>{}</code>)",
                    esc(&images.join(", "))
                )
            }
            Provisioner::Target => format!(
                "external target <code>{}</code> (servers that already existed)",
                esc(s.target_file.as_deref().unwrap_or("?"))
            ),
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.join("; ")
}

/// One row per run and server: what ran where, on which version.
fn servers_table(h: &mut String, runs: &[RunData]) {
    let _ = writeln!(
        h,
        "<h3>Runs and servers</h3>\n<table id=\"servers\">\n<thead><tr><th>strategy</th>\
         <th>started at</th><th>duration s</th><th>server</th><th>service</th><th>role</th>\
         <th>address</th><th>version</th><th title=\"where a write is when the server \
         acknowledges it: memory, os (page cache), disk (fsynced)\">durability</th></tr></thead>\n\
         <tbody>"
    );
    for r in runs {
        server_rows(h, &r.summary);
    }
    let _ = writeln!(h, "</tbody>\n</table>");
}

/// The rows of one run: its first cell spans the rows of its servers.
fn server_rows(h: &mut String, s: &Summary) {
    let rows = s.servers.len().max(1);
    let _ = write!(
        h,
        "<tr><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td>\
         <td rowspan=\"{rows}\" class=\"n\">{}</td>",
        // A library names itself and the version it loaded.
        s.library.as_ref().map_or_else(
            || esc(&s.strategy),
            |l| format!(
                "{}<br><small>{} {}</small>",
                esc(&s.strategy),
                esc(&l.library),
                esc(&l.version)
            )
        ),
        esc(&s.started_at),
        secs(s.duration_s)
    );
    if s.servers.is_empty() {
        let _ = writeln!(h, "<td colspan=\"6\">no servers</td></tr>");
    }
    for (i, n) in s.servers.iter().enumerate() {
        if i > 0 {
            h.push_str("<tr>");
        }
        let _ = writeln!(
            h,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&n.name),
            n.service,
            n.role,
            n.addr,
            esc(&n.version),
            // Older summaries do not say; a Sentinel keeps no data of the run.
            n.durability
                .as_ref()
                .map_or_else(|| "—".into(), |d| esc(&d.describe()))
        );
    }
}

/// The commands that reproduce the runs, and the effective workload.
fn reproduce(h: &mut String, runs: &[RunData], compare: bool, exact: Option<&Path>) {
    let s = &runs[0].summary;
    let toml = effective_toml(&s.workload);
    let same = runs.iter().all(|r| r.summary.workload == s.workload);
    let _ = writeln!(h, "<h3>Reproduce</h3>");
    let _ = writeln!(
        h,
        "<p>As run (the workload file as it is now; summary.json does not record which \
         <code>--set</code> overrides were given, they are folded into the effective workload \
         below):</p>\n<pre id=\"command\">{}</pre>",
        esc(&reproduce_command(runs, compare, &s.workload_file))
    );
    if let (Some(t), Some(path)) = (&toml, exact) {
        let path = path.display().to_string();
        let _ = writeln!(
            h,
            "<p>Exactly (overrides, defaults and seed included), with the effective workload \
             written beside this report as <code>{}</code>:</p>\n<pre id=\"command-exact\">{}</pre>\n\
             <h3>Effective workload (TOML)</h3>\n<pre id=\"workload-toml\">{}</pre>",
            esc(&path),
            esc(&reproduce_command(runs, compare, &path)),
            esc(t)
        );
    }
    if !same {
        let _ = writeln!(
            h,
            "<p class=\"note\">The strategies ran with different effective workloads; the one \
             above is {}'s.</p>",
            esc(&s.strategy)
        );
    }
    let _ = writeln!(
        h,
        "<h3>Effective workload (summary.json)</h3>\n<pre id=\"workload-json\">{}</pre>",
        esc(&serde_json::to_string_pretty(&s.workload).unwrap_or_default())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(sh("workloads/chaos.toml"), "workloads/chaos.toml");
        assert_eq!(sh("my file.toml"), "'my file.toml'");
        assert_eq!(sh("it's"), r"'it'\''s'");
    }

    #[test]
    fn effective_workload_loads_back() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workloads/chaos.toml");
        let w = crate::workload::Workload::load(&file, &["load.clients=5".to_string()]).unwrap();
        let json = serde_json::to_value(&w).unwrap();
        let toml = effective_toml(&json).expect("converts");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.toml");
        std::fs::write(&path, toml).unwrap();
        let back = crate::workload::Workload::load(&path, &[]).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
    }
}

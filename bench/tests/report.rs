//! `report.html` from fake results folders (no servers): the charts are there, every headline
//! number is the one in summary.json, fault windows are shaded when there were faults, and
//! `lockbench report` on a folder that holds no results fails clearly; `lockbench history` lines
//! the runs of such folders up in one CSV.

#![recursion_limit = "256"]

use std::path::Path;
use std::time::{Duration, Instant};

use lockbench::cluster::{ContainerInfo, Provisioner};
use lockbench::record::{Completion, LatencySummary, Outcome, Stats};
use lockbench::report::{self, Summary};
use serde_json::{Value, json};

/// Deterministic attempts over 6 s: latencies of a few ms with a slow tail, some lock timeouts.
fn fake_stats(slow_from_s: u64) -> Stats {
    let start = Instant::now() + Duration::from_secs(60);
    let mut stats = Stats::new();
    for i in 0..3000u64 {
        let at = Duration::from_millis(i * 2);
        let mut lat_us = 1_000 + (i * 7919) % 4_000;
        if at.as_secs() >= slow_from_s && i % 10 == 0 {
            lat_us += 400_000;
        }
        let outcome = if i % 50 == 0 {
            Outcome::LockTimeout
        } else {
            Outcome::Sold
        };
        let ended = start + at + Duration::from_millis(1);
        let c = Completion {
            ask: Default::default(),
            seq: i,
            client: (i % 8) as u32,
            sku: (i % 4) as u32,
            read: false,
            outcome,
            intended: ended - Duration::from_micros(lat_us),
            started: ended - Duration::from_micros(lat_us / 2),
            ended,
            release_failed: false,
            lease: None,
        };
        stats.record(&c, start);
    }
    stats
}

struct Fake {
    strategy: &'static str,
    claims_safety: bool,
    /// `lock_verdict` in summary.json (`None`: a strategy without a lock).
    lock: Option<&'static str>,
    /// oversell, lost updates, double grants, stale rejected, errors, unknown.
    counts: [u64; 6],
    sales_per_s: f64,
    faults: bool,
}

impl Fake {
    /// A run of `strategy` whose lock held, with nothing to count and no fault.
    fn held(strategy: &'static str, sales_per_s: f64) -> Fake {
        Fake {
            strategy,
            claims_safety: true,
            lock: Some("held"),
            counts: [0; 6],
            sales_per_s,
            faults: false,
        }
    }
}

/// A summary.json as `run` writes it, made from JSON (so it goes through the real schema).
fn fake_summary(f: &Fake, stats: &Stats) -> Summary {
    let lat = LatencySummary::of(&stats.all_latency());
    let [oversell, lost, dbl, stale, errors, unknown] = f.counts;
    let (faults, phases) = if f.faults {
        (
            json!([
                {"id": 1, "label": "pause holder", "plan": {"kind": "pause", "target": "holder"},
                 "nodes": ["worker-1"], "started_s": 2.004, "healed_s": 4.011,
                 "first_served_after_start_s": 0.001, "recovery_s": 0.25,
                 "unavailable_s": 0.4, "note": null},
                {"id": 2, "label": "kill master", "plan": {"kind": "kill", "target": "master"},
                 "nodes": ["redis-1"], "started_s": 4.5, "healed_s": 5.0,
                 "first_served_after_start_s": 0.6, "recovery_s": 0.125,
                 "unavailable_s": 0.7, "note": null}
            ]),
            json!([
                {"name": "before", "faults": [], "from_s": 0.0, "to_s": 2.004, "attempts": 1000,
                 "sold": 980, "errors": 0, "unknown": 0, "lock_timeouts": 20,
                 "attempts_per_s": 499.0, "sales_per_s": 489.0, "latency_us": lat},
                {"name": "during 1", "faults": [1], "from_s": 2.004, "to_s": 4.011,
                 "attempts": 0, "sold": 0, "errors": 0, "unknown": 0, "lock_timeouts": 0,
                 "attempts_per_s": 0.0, "sales_per_s": 0.0,
                 "latency_us": LatencySummary::default()}
            ]),
        )
    } else {
        (json!([]), json!([]))
    };
    let v = json!({
        "schema": report::SCHEMA,
        "lockbench_version": "0.1.0",
        "strategy": f.strategy,
        "claims_safety": f.claims_safety,
        "safe": matches!(f.lock, None | Some("held")) && oversell + lost == 0,
        "lock_verdict": f.lock,
        "store_verdict": if oversell + lost == 0 { "intact" } else { "corrupted" },
        "seed": 7,
        "workload_file": "workloads/chaos.toml",
        "workload": {"seed": 7, "inventory": {"skus": 4, "stock": 1000}},
        "initial_stock": 4000, "final_stock": 1000, "sold": 3000, "oversell": oversell,
        "lost_updates": lost, "inconsistent_skus": 0,
        "double_grants": dbl, "double_grant_incidents": dbl / 3, "lease_lost": dbl / 4,
        "double_grant_examples": [], "stale_rejected": stale,
        "utilization": f.lock.map(|_| json!({"overall": 0.875, "per_sku": [
            {"sku": 0, "utilization": 0.9, "window_s": 8.0, "sold_out": false},
            {"sku": 1, "utilization": 0.85, "window_s": 5.5, "sold_out": true}]})),
        "stuck_locks": 0, "unknown": unknown, "attempts": stats.attempts(), "errors": errors,
        "outcomes": {"sold": 2940, "lock_timeout": 60}, "errors_by_kind": {},
        "release_failures": 0, "not_started": 0, "started_fraction": 1.0, "interrupted": false,
        "duration_s": 6.002, "sold_out_s": null,
        "throughput": {"attempts_per_s": 499.8, "sales_per_s": f.sales_per_s},
        "latency_us": lat, "latency_us_started": lat, "latency_us_by_outcome": {},
        "service_time_us": lat,
        "servers": [{"name": "redis-1", "service": "redis", "role": "primary",
                     "addr": "127.0.0.1:6379", "version": "7.0.15", "pid": 1, "log": "x.log"}],
        "started_at": "2026-01-01T00:00:00.000Z",
        "chaos_file": if f.faults { json!("chaos/pause-holder.toml") } else { Value::Null },
        "faults": faults, "phases": phases, "workers": 4, "worker_failures": []
    });
    serde_json::from_value(v).expect("the fake summary follows the schema")
}

/// Writes one strategy's folder with the real writers and returns its summary.
fn write_run(dir: &Path, f: &Fake, slow_from_s: u64) -> Summary {
    std::fs::create_dir_all(dir).unwrap();
    let stats = fake_stats(slow_from_s);
    let windows = if f.faults {
        vec![(1, 2.004, 4.011), (2, 4.5, 5.0)]
    } else {
        vec![]
    };
    report::write_results(dir, &stats, &windows).unwrap();
    let s = fake_summary(f, &stats);
    report::write_summary(dir, &s).unwrap();
    s
}

const FAKES: [Fake; 3] = [
    Fake {
        strategy: "redis-setnx-fenced",
        claims_safety: true,
        lock: Some("broken-fenced"),
        counts: [0, 0, 12, 2, 1, 3],
        sales_per_s: 480.3,
        faults: true,
    },
    Fake {
        strategy: "redis-setnx",
        claims_safety: true,
        lock: Some("broken"),
        counts: [3, 5, 7, 11, 13, 17],
        sales_per_s: 490.5,
        faults: true,
    },
    Fake {
        strategy: "none",
        claims_safety: false,
        lock: None,
        counts: [300, 500, 0, 0, 0, 0],
        sales_per_s: 495.0,
        faults: true,
    },
];

/// The value of `name="..."` in a tag.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name}=\"");
    let at = tag.find(&key)? + key.len();
    let end = tag[at..].find('"')? + at;
    Some(&tag[at..end])
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// One headline cell: `data-field`, `data-value`, the text shown.
type Cell = (String, String, String);

/// Headline rows: (strategy, row class, cells).
fn headline(html: &str) -> Vec<(String, String, Vec<Cell>)> {
    runs_table(html, "headline")
}

/// The rows of the table of runs `id` (family heading rows skipped).
fn runs_table(html: &str, id: &str) -> Vec<(String, String, Vec<Cell>)> {
    let start = html
        .find(&format!("<table id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id}"));
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    table
        .split("<tr ")
        .skip(1)
        .filter(|row| attr(row, "data-strategy").is_some())
        .map(|row| {
            let strategy = attr(row, "data-strategy").unwrap().to_string();
            let class = attr(row, "class").unwrap().to_string();
            let cells = row
                .split("<td")
                .filter(|c| c.contains("data-field="))
                .map(|c| {
                    let field = attr(c, "data-field").unwrap().to_string();
                    let value = unescape(attr(c, "data-value").unwrap());
                    let text = c[c.find('>').unwrap() + 1..c.find("</td>").unwrap()].to_string();
                    (field, value, unescape(&text))
                })
                .collect();
            (strategy, class, cells)
        })
        .collect()
}

/// A percentile cell: `X (n=N)`, or `MAX (max of N)` when N samples have no 95 % upper bound
/// on the percentile (qᴺ > 5 %: a p50 needs 5, a p99 299, a p99.9 2995); `+` may follow X.
fn check_latency_cell(field: &str, value_us: u64, latency: &Value, text: &str) {
    let count = latency["count"].as_u64().unwrap();
    let q: f64 = match field {
        "latency_us.p50" => 0.5,
        "latency_us.p99" => 0.99,
        _ => 0.999,
    };
    let (value, rest) = text
        .split_once(" (")
        .unwrap_or_else(|| panic!("{field}: {text}"));
    let ms: f64 = value.trim_end_matches('+').parse().unwrap();
    let bounded = q.powf(count as f64) <= 0.05;
    if bounded {
        assert_eq!(rest, format!("n={count})"), "{field}: {text}");
        assert_eq!((ms * 1000.0).round() as u64, value_us, "{field}: {text}");
    } else {
        assert_eq!(rest, format!("max of {count})"), "{field}: {text}");
        let max = latency["max"].as_u64().unwrap();
        assert_eq!((ms * 1000.0).round() as u64, max, "{field}: {text}");
    }
}

fn check_headline(html: &str, summaries: &[Value]) {
    let rows = headline(html);
    assert_eq!(rows.len(), summaries.len());
    for ((strategy, class, cells), s) in rows.iter().zip(summaries) {
        assert_eq!(strategy, s["strategy"].as_str().unwrap());
        // The verdict rules, restated from summary.json's two halves.
        let (lock, store) = (s["lock_verdict"].as_str(), s["store_verdict"].as_str());
        let safe = matches!(lock, None | Some("held")) && store == Some("intact");
        assert_eq!(s["safe"].as_bool(), Some(safe), "{strategy}");
        let control = s["claims_safety"].as_bool() == Some(false);
        let (expected_class, expected_verdict) = match (control, safe, lock) {
            (true, true, _) => ("control", "not caught (control)"),
            (true, false, _) => ("control", "caught (control)"),
            (false, true, _) => ("safe", "safe"),
            (false, false, Some("broken-fenced")) => ("fenced", "fenced"),
            (false, false, _) => ("unsafe", "UNSAFE"),
        };
        assert_eq!(class, expected_class, "{strategy}");
        assert_eq!(cells.len(), 17, "{strategy}: {cells:?}");
        for (field, value, text) in cells {
            let shown: Value = serde_json::from_str(value).unwrap();
            let want = match field.as_str() {
                "recovery_s" => s["faults"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|f| f["recovery_s"].as_f64())
                    .reduce(f64::max)
                    .map_or(Value::Null, Value::from),
                "verdict" => Value::from(expected_verdict),
                // No lock, no utilization (`null` in summary.json).
                "utilization.overall" if s["utilization"].is_null() => Value::Null,
                f => s
                    .pointer(&format!("/{}", f.replace('.', "/")))
                    .unwrap_or_else(|| panic!("{f} is not a summary.json field"))
                    .clone(),
            };
            assert_eq!(shown, want, "{strategy}: data-value of {field}");
            // The text shown is the same number, in ms for latencies.
            match (field.as_str(), &want) {
                (_, Value::Null) => assert_eq!(text, "-", "{field}"),
                ("verdict", Value::String(v)) => assert_eq!(text, v),
                ("lock_verdict", Value::String(v)) => assert_eq!(
                    text,
                    match v.as_str() {
                        "held" => "held",
                        "broken" => "BROKEN",
                        "broken-fenced" => "broken, fenced",
                        other => panic!("lock verdict {other}"),
                    }
                ),
                ("store_verdict", Value::String(v)) => {
                    assert_eq!(text, if v == "intact" { "intact" } else { "CORRUPTED" })
                }
                ("started_fraction", Value::Number(n)) => {
                    assert_eq!(*text, format!("{:.0}%", n.as_f64().unwrap() * 100.0))
                }
                (f, Value::Number(n)) if f.starts_with("latency_us.") => {
                    check_latency_cell(f, n.as_u64().unwrap(), &s["latency_us"], text)
                }
                (f, Value::Number(n)) => {
                    let t: f64 = text.parse().unwrap_or_else(|_| panic!("{f}: {text}"));
                    assert_eq!(t, n.as_f64().unwrap(), "{strategy}: {f}: {text}");
                }
                (f, v) => panic!("{f}: unexpected {v}"),
            }
        }
    }
}

fn svgs(html: &str) -> Vec<&str> {
    html.split("<svg").skip(1).collect()
}

/// Writes the fake comparison into `dir` (one folder per strategy and compare.json).
fn fake_comparison(dir: &Path) {
    let summaries: Vec<Summary> = FAKES
        .iter()
        .enumerate()
        .map(|(i, f)| write_run(&dir.join(f.strategy), f, 2 + i as u64))
        .collect();
    std::fs::write(
        dir.join("compare.json"),
        serde_json::to_vec_pretty(&summaries).unwrap(),
    )
    .unwrap();
}

#[test]
fn comparison_report_has_charts_exact_numbers_and_fault_bands() {
    let dir = tempfile::tempdir().unwrap();
    fake_comparison(dir.path());

    let path = report::write_report(dir.path()).unwrap();
    assert_eq!(path, dir.path().join("report.html"));
    let html = std::fs::read_to_string(&path).unwrap();

    assert_eq!(svgs(&html).len(), 5, "five inline charts");
    for name in [
        "throughput",
        "p99-over-time",
        "latency-spectrum",
        "throughput-vs-p99",
        "safety",
    ] {
        for ext in ["png", "svg"] {
            let p = dir.path().join("charts").join(format!("{name}.{ext}"));
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} is missing or empty", p.display());
        }
        assert!(html.contains(&format!("id=\"chart-{name}\"")), "{name}");
    }
    let png = std::fs::read(dir.path().join("charts/throughput.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // Per-SKU utilization: one row per strategy with a lock, a SKU that sold out marked.
    let util = &html[html
        .find("<table id=\"utilization\">")
        .expect("utilization table")..];
    let util = &util[..util.find("</table>").unwrap()];
    for locked in ["redis-setnx", "redis-setnx-fenced"] {
        let row = &util[util.find(&format!("data-strategy=\"{locked}\"")).unwrap()..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(
            row.contains(">0.875<") && row.contains(">0.9<") && row.contains(">0.85<sup>s</sup><"),
            "{row}"
        );
    }
    assert!(!util.contains("data-strategy=\"none\""), "no lock, no row");

    // Self-contained: no scripts, no external references.
    assert!(!html.contains("<script"));
    assert!(!html.contains("http://") && !html.contains("https://"));

    let json: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("compare.json")).unwrap()).unwrap();
    check_headline(&html, &json);

    // The throughput-vs-p99 map says which lock broke, fenced or not: never a bare name.
    let map = svgs(&html)[3];
    assert!(
        map.contains("redis-setnx-fenced (lock broke, fenced)"),
        "fenced label"
    );
    assert!(map.contains("redis-setnx (UNSAFE)"), "unsafe label");

    // Fault windows are shaded (translucent grey rectangles) on both time charts.
    let band = "fill=\"#5A5A5A\"";
    let charts = svgs(&html);
    assert!(charts[0].contains(band), "throughput has fault bands");
    assert!(charts[1].contains(band), "p99 has fault bands");
    // Each fault is named at its band, and in the legend.
    assert!(charts[0].contains("\nfault 1\n") && charts[0].contains("\nfault 2\n"));
    assert!(
        charts[0].contains("fault 1: pause holder") && charts[1].contains("fault 2: kill master")
    );
    // Fault and phase tables, reproduction with the chaos file.
    assert!(html.contains("<table id=\"faults\">"));
    assert!(html.contains("class=\"phases\" data-strategy=\"redis-setnx\""));
    assert!(html.contains(
        "lockbench compare --strategies redis-setnx-fenced,redis-setnx,none --workload \
         workloads/chaos.toml --chaos chaos/pause-holder.toml --workers 4"
    ));
    assert!(dir.path().join("effective-workload.toml").is_file());
}

#[test]
fn single_run_without_faults_has_no_bands() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::held("mysql-atomic", 1953.0);
    write_run(dir.path(), &fake, 100);
    let html = std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap();
    assert_eq!(svgs(&html).len(), 5);
    let json: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    check_headline(&html, &[json]);
    assert!(!html.contains("fill=\"#5A5A5A\""), "no fault, no band");
    assert!(!html.contains("<table id=\"faults\">"));
    assert!(html.contains("lockbench run --strategy mysql-atomic --workload workloads/chaos.toml"));
}

/// Numbers from containers or a staging cluster are not loopback numbers: the page says where
/// the servers came from, and its reproduction command asks for the same servers again.
#[test]
fn the_page_names_where_the_servers_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::held("redis-setnx", 790.0);
    let page = |s: &Summary| {
        report::write_summary(dir.path(), s).unwrap();
        std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap()
    };
    let mut s = write_run(dir.path(), &fake, 100);
    let html = page(&s);
    assert!(html.contains("local: child processes on loopback"));
    assert!(html.contains(
        "lockbench run --strategy redis-setnx --workload workloads/chaos.toml --workers 4<"
    ));

    s.provisioner = Provisioner::Containers;
    s.servers[0].container = Some(ContainerInfo {
        id: "0123abcd".into(),
        image: "redis:7.0".into(),
        network: "lockbench-1".into(),
    });
    let html = page(&s);
    assert!(
        html.contains("containers on a private Docker network (images <code>redis:7.0</code>)")
    );
    assert!(html.contains(
        "lockbench run --strategy redis-setnx --workload workloads/chaos.toml --provision containers --workers 4<"
    ));

    s.provisioner = Provisioner::Target;
    s.target_file = Some("targets/staging.toml".into());
    s.servers[0].container = None;
    let html = page(&s);
    assert!(html.contains("external target <code>targets/staging.toml</code>"));
    assert!(html.contains(
        "lockbench run --strategy redis-setnx --workload workloads/chaos.toml --target targets/staging.toml --workers 4<"
    ));
}

#[test]
fn report_of_a_folder_without_results_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&dir.path().display().to_string())
            && err.contains("no summary.json, compare.json or sweep.json"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("report.html").exists());
}

#[test]
fn report_subcommand_prints_the_page_path() {
    let dir = tempfile::tempdir().unwrap();
    write_run(dir.path(), &FAKES[1], 3);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        printed.trim(),
        dir.path().join("report.html").display().to_string()
    );
}

/// The page as a browser sees it: headless Chromium loads it offline, every chart is in the
/// rendered DOM, every headline number equals summary.json, and the screenshot is not blank.
#[test]
fn report_loads_in_headless_chromium() {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "CI is set but chromium is not installed: run scripts/install-deps.sh --for-tests"
            );
        }
        eprintln!("SKIPPED: chromium not installed (scripts/install-deps.sh --for-tests)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    fake_comparison(dir.path());
    let page = report::write_report(dir.path()).unwrap();
    let url = format!("file://{}", page.display());
    let profile = dir.path().join("profile");
    let browser = |extra: &[&str]| {
        let out = std::process::Command::new(chromium)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(out.status.success(), "{chromium}: {out:?}");
        out
    };
    let dom = String::from_utf8(browser(&["--dump-dom"]).stdout).unwrap();
    assert_eq!(svgs(&dom).len(), 5, "five charts in the rendered page");
    let json: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.path().join("compare.json")).unwrap()).unwrap();
    check_headline(&dom, &json);
    let shot = dir.path().join("shot.png");
    browser(&[
        "--window-size=1400,3000",
        &format!("--screenshot={}", shot.display()),
    ]);
    let png = std::fs::read(&shot).unwrap();
    // A blank 1400x3000 page compresses to a few KB; charts and tables do not.
    assert!(png.len() > 100_000, "screenshot of {} bytes", png.len());
}

/// One sweep step: the fixture's summary at `rate` with the judged numbers given.
fn step(rate: f64, latency_ms: f64, censored: bool, passed: bool) -> report::sweep::Step {
    let summary: Summary =
        serde_json::from_str(include_str!("fixtures/summary.json")).expect("fixture summary");
    let d = if passed {
        lockbench::stats::Decision::Pass
    } else {
        lockbench::stats::Decision::Fail
    };
    let mut s = report::sweep::Step::decided(
        rate,
        d,
        latency_ms,
        censored,
        format!("steps/{rate}"),
        summary,
    );
    s.served_fraction = if censored { 0.8 } else { 1.0 };
    s
}

/// A strategy whose p99 grows as its offered rate nears `knee` (arrivals/s): every step of
/// a ramp ×2 from 50/s, with a bisection between the last pass and the first failure.
fn swept(
    strategy: &str,
    family: lockbench::strategy::Family,
    kind: lockbench::strategy::Kind,
    knee: f64,
) -> report::sweep::Entry {
    use report::sweep::Bound;
    let latency = |rate: f64| 2.0 + 20.0 * (rate / knee).powi(4);
    let mut steps = Vec::new();
    let mut rate = 50.0;
    let (mut pass, mut fail) = (0.0, None);
    while rate <= 6400.0 {
        let ms = latency(rate);
        let ok = ms <= 100.0;
        // Past 1 s some arrivals are never served: the percentile is then a lower bound.
        steps.push(step(rate, ms.min(2000.0), ms > 1000.0, ok));
        if ok {
            pass = rate;
            rate *= 2.0;
        } else {
            fail = Some(rate);
            break;
        }
    }
    if let (Some(f), true) = (fail, pass > 0.0) {
        let mid = (pass * f).sqrt().round();
        let ms = latency(mid);
        steps.push(step(mid, ms, false, ms <= 100.0));
        if ms <= 100.0 {
            pass = mid;
        } else {
            fail = Some(mid);
        }
    }
    let bound = match (pass > 0.0, fail) {
        (false, _) => Bound::BelowLowest,
        (true, None) => Bound::AtLeastMax,
        (true, Some(_)) => Bound::Found,
    };
    let control = kind == lockbench::strategy::Kind::Control;
    let unsafe_steps: Vec<f64> = if control {
        steps
            .iter()
            .map(|s| s.rate_per_s)
            .filter(|r| *r >= 200.0)
            .collect()
    } else {
        Vec::new()
    };
    for s in &mut steps {
        s.safe = !unsafe_steps.contains(&s.rate_per_s);
    }
    report::sweep::Entry::new(strategy, family, kind, (pass, bound, fail), steps, None)
}

/// A sweep of 30 strategies over every family, with each kind of bound and unsafe steps.
fn synthetic_sweep() -> report::sweep::Sweep {
    use lockbench::strategy::{Family as F, Kind as K};
    let rows: [(&str, F, K, f64); 30] = [
        ("mysql-for-update", F::Database, K::Lock, 900.0),
        ("mysql-optimistic", F::Database, K::LockFree, 500.0),
        ("mysql-atomic", F::Database, K::LockFree, 20000.0),
        ("mysql-lock-table", F::Database, K::Lock, 180.0),
        ("mysql-lock-table-fenced", F::Database, K::Lock, 170.0),
        ("pg-advisory", F::Postgres, K::Lock, 400.0),
        ("pg-atomic", F::Postgres, K::LockFree, 3000.0),
        ("redis-setnx", F::RedisSingle, K::Lock, 700.0),
        ("redis-setnx-watchdog", F::RedisSingle, K::Lock, 680.0),
        ("redis-setnx-fenced", F::RedisSingle, K::Lock, 650.0),
        ("redis-reentrant", F::RedisSingle, K::Lock, 640.0),
        ("redis-lua-decr", F::RedisSingle, K::LockFree, 5200.0),
        ("redlock", F::RedisMulti, K::Lock, 260.0),
        ("redis-sentinel", F::RedisMulti, K::Lock, 600.0),
        ("redis-sentinel-wait", F::RedisMulti, K::Lock, 380.0),
        ("zookeeper", F::Consensus, K::Lock, 320.0),
        ("etcd", F::Consensus, K::Lock, 150.0),
        ("zookeeper-fenced", F::Consensus, K::Lock, 310.0),
        ("etcd-fenced", F::Consensus, K::Lock, 140.0),
        ("lib:redis-py", F::Libraries, K::Lock, 420.0),
        ("lib:redis-semaphore", F::Libraries, K::Lock, 410.0),
        ("lib:node-redlock", F::Libraries, K::Lock, 230.0),
        ("lib:node-redlock-v5", F::Libraries, K::Lock, 225.0),
        ("lib:curator", F::Libraries, K::Lock, 290.0),
        ("lib:kazoo", F::Libraries, K::Lock, 120.0),
        ("lib:aetcd", F::Libraries, K::Lock, 25.0),
        ("lib:curator-fenced", F::Libraries, K::Lock, 285.0),
        ("none", F::Controls, K::Control, 30000.0),
        ("redis-get-del", F::Controls, K::Control, 690.0),
        ("redis-setnx-expire", F::Controls, K::Control, 700.0),
    ];
    let mut entries: Vec<report::sweep::Entry> = rows
        .iter()
        .map(|&(id, f, k, knee)| swept(id, f, k, knee))
        .collect();
    // A search that stopped early keeps what it measured.
    let stopped = entries
        .iter_mut()
        .find(|e| e.strategy == "lib:kazoo")
        .unwrap();
    stopped.bound = report::sweep::Bound::Incomplete;
    stopped.error = Some("adapter exited".into());
    stopped.first_failing_per_s = None;
    // A lock that broke at one rate: flagged even though it met the SLO there.
    let broke = entries
        .iter_mut()
        .find(|e| e.strategy == "redis-setnx-watchdog")
        .unwrap();
    broke.unsafe_steps = vec![400.0];
    broke.safe = false;
    report::sweep::Sweep {
        schema: report::sweep::SWEEP_SCHEMA.into(),
        lockbench_version: "0.1.0".into(),
        started_at: "2026-01-01T00:00:00.000Z".into(),
        slo: report::sweep::Slo {
            quantile: 0.99,
            latency_ms: 100.0,
            min_served: 0.99,
        },
        search: report::sweep::Search {
            start_per_s: Some(50.0),
            factor: 2.0,
            ..report::sweep::Search::default()
        },
        workload_file: "workloads/flash-sale.toml".into(),
        entries,
        elapsed_s: 900.0,
        machine: None,
        environment: None,
        drift: None,
    }
}

/// SVG text as drawn (plotters escapes `<`, `>` and `&`).
fn svg_text(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn sweep_charts_name_every_strategy_the_slo_and_each_kind_of_bound() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = synthetic_sweep();
    let charts = report::render_sweep(&sweep, &dir.path().join("charts")).unwrap();
    let kinds: Vec<report::ChartKind> = charts.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, report::ChartKind::SWEEP);
    for name in ["latency-vs-rate", "capacity"] {
        for ext in ["png", "svg"] {
            let p = dir.path().join("charts").join(format!("{name}.{ext}"));
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{} is missing or empty", p.display());
        }
    }
    let (rate, bars) = (svg_text(&charts[0].svg), svg_text(&charts[1].svg));
    for e in &sweep.entries {
        assert!(
            rate.contains(&e.strategy),
            "{} in the latency chart",
            e.strategy
        );
        assert!(
            bars.contains(&e.strategy),
            "{} in the capacity bars",
            e.strategy
        );
    }
    // The SLO is drawn and named; one panel per family.
    assert!(rate.contains("SLO p99 ≤ 100 ms"), "SLO label");
    for family in lockbench::strategy::Family::ALL {
        assert!(rate.contains(family.title()), "{} panel", family.title());
    }
    // Each bound says what it is: a capacity, a lower bound, an upper bound, a search cut short.
    let entry = |id: &str| sweep.entry(id).unwrap();
    assert!(bars.contains(&format!("{}/s", entry("redis-setnx").capacity_per_s)));
    assert!(bars.contains("≥ 6400/s"), "at-least-max");
    assert!(bars.contains("< 50/s"), "below-lowest");
    assert!(bars.contains("stopped early: adapter exited"), "incomplete");
    assert!(
        bars.contains("unsafe at 6 steps, 200–6400/s"),
        "unsafe steps flagged"
    );
    assert!(bars.contains("controls (known unsafe"), "controls apart");
    assert!(bars.contains("arrivals/s sustained at p99 ≤ 100 ms, ≥ 99% served"));
}

#[test]
fn a_sweep_of_one_strategy_is_one_panel() {
    let dir = tempfile::tempdir().unwrap();
    let mut sweep = synthetic_sweep();
    sweep.entries.retain(|e| e.strategy == "redis-setnx");
    let charts = report::render_sweep(&sweep, dir.path()).unwrap();
    let rate = svg_text(&charts[0].svg);
    assert!(
        !rate.contains("Redis, single node"),
        "no family panel for one"
    );
    assert!(rate.contains("Latency against offered rate") && rate.contains("redis-setnx"));
}

/// Renders a real sweep (`$LOCKBENCH_SWEEP`, a folder holding sweep.json) into
/// `$LOCKBENCH_CHARTS_OUT`, to look at.
#[test]
#[ignore = "renders a real sweep for a human to look at"]
fn render_a_real_sweep() {
    let dir = std::env::var("LOCKBENCH_SWEEP").unwrap_or("/tmp/lockbench-sweep-sample".into());
    let out = std::env::var("LOCKBENCH_CHARTS_OUT").unwrap_or("/tmp/sweep-charts".into());
    let sweep = report::sweep::Sweep::read(Path::new(&dir)).unwrap();
    report::render_sweep(&sweep, Path::new(&out)).unwrap();
}

/// Renders the synthetic sweep into `$LOCKBENCH_CHARTS_OUT`, to look at.
#[test]
#[ignore = "renders the synthetic sweep for a human to look at"]
fn render_the_synthetic_sweep() {
    let out = std::env::var("LOCKBENCH_CHARTS_OUT").unwrap_or("/tmp/synthetic-sweep".into());
    report::render_sweep(&synthetic_sweep(), Path::new(&out)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// The job page (scripts/compare.sh's folder: sweep/, calm/, chaos/<scenario>/) and --needs.
// Kept apart from the chart tests above.
// ---------------------------------------------------------------------------------------------

mod job {
    use std::path::Path;

    use lockbench::report::sweep::{Bound, Entry, SWEEP_SCHEMA, Search, Slo, Step, Sweep};
    use lockbench::report::{self, Needs, Summary};
    use lockbench::strategy::{Family, Kind};

    use super::{Fake, attr, write_run};

    /// A step's summary: the committed fixture, renamed; `broken`: lock broken, store corrupted.
    fn step_summary(strategy: &str, control: bool, broken: bool) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("fixtures/summary.json")).expect("fixture");
        s.strategy = strategy.into();
        s.claims_safety = !control;
        if broken {
            s.safe = false;
            s.lock_verdict = Some(lockbench::check::LockVerdict::Broken);
            s.store_verdict = lockbench::check::StoreVerdict::Corrupted;
        }
        s
    }

    /// A sweep entry; `steps` are (rate, met the SLO, broken).
    fn entry(
        strategy: &str,
        family: Family,
        kind: Kind,
        capacity: f64,
        bound: Bound,
        steps: &[(f64, bool, bool)],
    ) -> Entry {
        let control = kind == Kind::Control;
        let steps: Vec<Step> = steps
            .iter()
            .map(|&(rate, passed, broken)| {
                let d = if passed {
                    lockbench::stats::Decision::Pass
                } else {
                    lockbench::stats::Decision::Fail
                };
                let ms = if passed { 20.0 } else { rate / 2.0 };
                let summary = step_summary(strategy, control, broken);
                Step::decided(rate, d, ms, false, format!("{strategy}/{rate}"), summary)
            })
            .collect();
        let fail = steps.iter().find(|s| !s.passed).map(|s| s.rate_per_s);
        Entry::new(strategy, family, kind, (capacity, bound, fail), steps, None)
    }

    fn sweep() -> Sweep {
        let fam = Family::RedisSingle;
        Sweep {
            schema: SWEEP_SCHEMA.into(),
            lockbench_version: "0.1.0".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            slo: Slo {
                quantile: 0.99,
                latency_ms: 100.0,
                min_served: 0.99,
            },
            search: Search {
                start_per_s: Some(160.0),
                min_per_s: 10.0,
                max_per_s: 2560.0,
                factor: 2.0,
                ..Search::default()
            },
            workload_file: "workloads/flash-sale.toml".into(),
            entries: vec![
                entry(
                    "redis-setnx-fenced",
                    fam,
                    Kind::Lock,
                    640.0,
                    Bound::Found,
                    &[
                        (160.0, true, false),
                        (640.0, true, false),
                        (1280.0, false, false),
                    ],
                ),
                entry(
                    "redis-setnx",
                    fam,
                    Kind::Lock,
                    800.0,
                    Bound::Found,
                    &[(800.0, true, false), (1600.0, false, true)],
                ),
                entry(
                    "none",
                    Family::Controls,
                    Kind::Control,
                    2560.0,
                    Bound::AtLeastMax,
                    &[(1280.0, true, true), (2560.0, true, true)],
                ),
                entry(
                    "mysql-atomic",
                    Family::Database,
                    Kind::LockFree,
                    1200.0,
                    Bound::Found,
                    &[(1200.0, true, false), (1600.0, false, false)],
                ),
            ],
            elapsed_s: 42.0,
            machine: None,
            environment: None,
            drift: None,
        }
    }

    /// Writes a compare folder of `fakes` into `dir`.
    fn compare(dir: &Path, fakes: &[Fake]) {
        let summaries: Vec<Summary> = fakes
            .iter()
            .map(|f| write_run(&dir.join(f.strategy), f, 3))
            .collect();
        std::fs::write(
            dir.join("compare.json"),
            serde_json::to_vec_pretty(&summaries).unwrap(),
        )
        .unwrap();
    }

    /// A whole job: the sweep of four strategies, a calm run of all four, and pause-holder
    /// (mysql-atomic did not run in it).
    fn job(dir: &Path) {
        sweep().write(&dir.join("sweep")).unwrap();
        let calm = [
            Fake::held("redis-setnx-fenced", 610.0),
            Fake::held("redis-setnx", 630.0),
            Fake {
                claims_safety: false,
                lock: None,
                ..Fake::held("none", 640.0)
            },
            Fake {
                lock: None,
                ..Fake::held("mysql-atomic", 640.0)
            },
        ];
        compare(&dir.join("calm"), &calm);
        compare(&dir.join("chaos/pause-holder"), &super::FAKES);
    }

    fn render(dir: &Path, needs: Option<&str>) -> String {
        let needs: Option<Needs> = needs.map(|n| n.parse().expect("valid needs"));
        let page = report::write_report_with(dir, needs.as_ref()).unwrap();
        std::fs::read_to_string(page).unwrap()
    }

    /// The text of the element with `id="x"`, tags stripped, up to its first closing tag.
    fn text_of(html: &str, id: &str) -> Option<String> {
        let at = html.find(&format!(" id=\"{id}\""))?;
        let open = at + html[at..].find('>')? + 1;
        let close = open + html[open..].find("</")?;
        Some(super::unescape(&html[open..close]))
    }

    /// Every `<a href="#x">text</a>` in `part`: (x, text).
    fn links(part: &str) -> Vec<(String, String)> {
        part.split("<a ")
            .skip(1)
            .filter_map(|a| {
                let href = attr(a, "href")?.strip_prefix('#')?.to_string();
                let text = &a[a.find('>')? + 1..a.find("</a>")?];
                Some((href, super::unescape(text)))
            })
            .collect()
    }

    /// The part of the page from `<h2 id="from"` to the next `<h2`.
    fn section<'a>(html: &'a str, from: &str) -> &'a str {
        let start = html
            .find(&format!("<h2 id=\"{from}\""))
            .unwrap_or_else(|| panic!("no section {from}"));
        let end = html[start + 4..]
            .find("<h2")
            .map_or(html.len(), |e| start + 4 + e);
        &html[start..end]
    }

    /// Strategies listed under a needs heading (`needs-qualify`, `needs-other`).
    fn listed(html: &str, heading: &str) -> Vec<String> {
        let start = html.find(&format!("id=\"{heading}\"")).expect(heading);
        let list = &html[start..start + html[start..].find("</ul>").unwrap()];
        list.split("<li")
            .skip(1)
            .filter_map(|li| {
                let b = li.find("<b>")? + 3;
                Some(li[b..b + li[b..].find("</b>")?].to_string())
            })
            .collect()
    }

    #[test]
    fn every_strategy_has_a_line_whose_numbers_link_to_their_cells() {
        let dir = tempfile::tempdir().unwrap();
        job(dir.path());
        let html = render(dir.path(), None);
        let summary = section(&html, "summary");
        for id in ["redis-setnx-fenced", "redis-setnx", "none", "mysql-atomic"] {
            assert!(
                summary.contains(&format!("<li id=\"sum-{id}\"><b>{id}</b>")),
                "no line for {id}"
            );
        }
        // Grouped by family, in the registry's order.
        let at = |t: &str| summary.find(&format!("<h3>{t}</h3>")).expect(t);
        assert!(
            at("database") < at("Redis, single node") && at("Redis, single node") < at("controls")
        );

        let found = links(summary);
        assert!(found.len() > 15, "{found:?}");
        for (id, text) in &found {
            let target = text_of(&html, id).unwrap_or_else(|| panic!("no element id=\"{id}\""));
            // The number (or verdict) linked is the one in its cell.
            let shown = text.trim_end_matches(" ms").trim_end_matches(" s");
            assert!(
                target.contains(shown),
                "#{id}: the line says `{text}`, the cell says `{target}`"
            );
        }
        // The plain words, truthfully: bounds, unsafe steps, controls, what did not run.
        let line = |id: &str| {
            let li = &summary[summary.find(&format!("id=\"sum-{id}\"")).unwrap()..];
            super::unescape(
                &li[..li.find("</li>").unwrap()]
                    .split('<')
                    .map(|t| t.split_once('>').map_or(t, |(_, x)| x))
                    .collect::<String>(),
            )
        };
        assert!(
            line("redis-setnx-fenced").contains("sustains 640 arrivals/s at p99 ≤ 100 ms"),
            "{}",
            line("redis-setnx-fenced")
        );
        assert!(line("redis-setnx").contains("UNSAFE at 1600/s in the sweep"));
        assert!(
            line("redis-setnx").contains("pause-holder: UNSAFE (lock BROKEN, store CORRUPTED)")
        );
        assert!(line("none").contains("sustains ≥ 2560 arrivals/s"));
        assert!(line("none").contains("caught at every step (2) in the sweep"));
        assert!(
            !line("none").contains("safe"),
            "a control is never safe: {}",
            line("none")
        );
        assert!(line("mysql-atomic").contains("pause-holder: not measured"));
        assert!(line("mysql-atomic").contains("no lock"));
        assert!(line("redis-setnx-fenced").contains("lock busy 0.875 of the time"));

        // The calm rate and why: the lowest capacity among the safe (640/s, fenced's), rounded
        // down the 1–2–5 series.
        let calm = section(&html, "calm");
        assert!(calm.contains("500/s is the lowest capacity"), "{calm}");
        assert!(calm.contains("href=\"#cap-redis-setnx-fenced\""));
        // Chaos rows show the offered rate as a share of capacity.
        assert!(html.contains("id=\"chaos-pause-holder-redis-setnx-share\""));
        // Every link on the page has its target.
        for (id, _) in links(&html) {
            if !id.is_empty() {
                assert!(
                    html.contains(&format!(" id=\"{id}\"")),
                    "#{id} has no target"
                );
            }
        }
    }

    #[test]
    fn needs_list_who_qualifies_from_measured_fields() {
        let dir = tempfile::tempdir().unwrap();
        job(dir.path());
        let html = render(dir.path(), Some("capacity>=600,safe-under-pause"));
        // Fenced is not safe unless asked; an UNSAFE lock, a control, and a strategy that did
        // not run under pause never qualify.
        assert_eq!(listed(&html, "needs-qualify"), Vec::<String>::new());
        assert_eq!(
            listed(&html, "needs-other"),
            ["mysql-atomic", "redis-setnx-fenced", "redis-setnx", "none"]
        );
        let other = section(&html, "needs");
        assert!(other.contains("safe-under-pause: not measured: pause-holder: not measured"));
        assert!(other.contains("add fenced-ok to accept it"));

        let html = render(dir.path(), Some("capacity>=600,safe-under-pause,fenced-ok"));
        assert_eq!(listed(&html, "needs-qualify"), ["redis-setnx-fenced"]);
        let needs = section(&html, "needs");
        for (id, _) in links(needs) {
            assert!(
                html.contains(&format!(" id=\"{id}\"")),
                "#{id} has no target"
            );
        }
        assert!(needs.contains("href=\"#cap-redis-setnx-fenced\">640</a>"));

        // A lower bound counts when it reaches the need.
        let html = render(dir.path(), Some("capacity>=1000"));
        assert_eq!(listed(&html, "needs-qualify"), ["mysql-atomic", "none"]);
        let html = render(dir.path(), Some("capacity>=1000,safe"));
        assert_eq!(listed(&html, "needs-qualify"), ["mysql-atomic"]);
    }

    #[test]
    fn missing_parts_read_not_measured() {
        // A job stopped after its sweep.
        let dir = tempfile::tempdir().unwrap();
        sweep().write(&dir.path().join("sweep")).unwrap();
        std::fs::create_dir_all(dir.path().join("chaos/kill-master")).unwrap();
        let html = render(dir.path(), Some("p99<=50ms"));
        assert!(html.contains("Not measured in this job: the calm run, chaos scenarios."));
        assert!(
            html.contains("chaos/kill-master: "),
            "an unfinished scenario is named"
        );
        assert!(section(&html, "calm").contains("Not measured: this job has no calm run."));
        assert!(section(&html, "chaos").contains("Not measured"));
        assert_eq!(listed(&html, "needs-qualify"), Vec::<String>::new());
        assert!(html.contains("p99&lt;=50ms: not measured: calm p99 not measured (no calm run)"));
        // A sweep folder given alone renders the same way.
        let html = render(&dir.path().join("sweep"), None);
        assert!(html.contains("id=\"cap-redis-setnx\""));
        assert!(html.contains("<li id=\"sum-none\">"));

        // A job with no sweep: capacity is not measured, never guessed.
        let dir = tempfile::tempdir().unwrap();
        compare(
            &dir.path().join("calm"),
            &[Fake::held("redis-setnx", 600.0)],
        );
        let html = render(dir.path(), Some("capacity>=10"));
        assert!(section(&html, "capacity").contains("Not measured: this job has no sweep."));
        assert!(html.contains("capacity&gt;=10: not measured: capacity not measured (no sweep)"));

        // A chaos run in which no fault took effect says nothing about safety under it (a
        // broken lock would still count: bad news is measured whenever it happens).
        let dir = tempfile::tempdir().unwrap();
        job(dir.path());
        let path = dir.path().join("chaos/pause-holder/compare.json");
        let mut runs: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        runs[0]["lock_verdict"] = "held".into();
        runs[0]["safe"] = true.into();
        for f in runs[0]["faults"].as_array_mut().unwrap() {
            f["started_s"] = serde_json::Value::Null;
            f["healed_s"] = serde_json::Value::Null;
            f["note"] = "no holder to pause".into();
        }
        std::fs::write(&path, serde_json::to_vec(&runs).unwrap()).unwrap();
        let html = render(dir.path(), Some("safe-under-pause,fenced-ok"));
        assert!(
            html.contains(
                "pause-holder</span>: not measured: <a class=\"num\" \
                 href=\"#chaos-pause-holder-redis-setnx-fenced-hit\">0 of 2</a> faults took \
                 effect (no holder to pause)"
            ),
            "{}",
            section(&html, "summary")
        );
        assert_eq!(listed(&html, "needs-qualify"), Vec::<String>::new());
    }

    #[test]
    fn report_needs_flag_names_a_bad_term_and_refuses_a_lone_compare() {
        let dir = tempfile::tempdir().unwrap();
        job(dir.path());
        let run = |dir: &Path, needs: &str| {
            std::process::Command::new(env!("CARGO_BIN_EXE_lockbench"))
                .arg("report")
                .arg(dir)
                .args(["--needs", needs])
                .output()
                .unwrap()
        };
        let out = run(dir.path(), "safe,capacity>500");
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("`capacity>500`") && err.contains("capacity>=N"),
            "{err}"
        );
        let out = run(dir.path(), "safe-under-pause");
        assert!(out.status.success(), "{out:?}");
        let out = run(&dir.path().join("calm"), "safe");
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--needs judges a sweep or a job folder")
        );
    }
}

/// A run's server work shows in report.html with its sample count and what was not available;
/// a summary written before the field existed still loads, without the section.
#[test]
fn server_work_shows_per_grant_with_its_samples() {
    use lockbench::cluster::Service;
    use lockbench::report::work::{Counted, ServerWork, ServiceWork, WorkFigures};
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::held("redis-setnx", 790.0);
    let mut s = write_run(dir.path(), &fake, 100);
    let html = std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap();
    assert!(
        !html.contains("id=\"server-work\""),
        "an old summary has no server work"
    );
    let counted = |per| Counted {
        raw: 100,
        background: 0.0,
        net: 100.0,
        per: Some(per),
    };
    let figures = WorkFigures {
        nodes: 1,
        load_s: 5.0,
        total_per: Some(4.02),
        bytes_in_per: Some(190.5),
        bytes_out_per: Some(11.0),
        counters: [("cmd.publish".to_string(), counted(1.0))].into(),
        background_share: 0.01,
        notes: Vec::new(),
    };
    let work = |service, per: &str, figures, not_available: Option<&str>| ServiceWork {
        service,
        unit: "commands".into(),
        per: per.into(),
        samples: 321,
        source: "INFO commandstats".into(),
        figures,
        not_available: not_available.map(String::from),
    };
    s.server_work = Some(ServerWork {
        lock: vec![work(Service::Redis, "grant", Some(figures), None)],
        store: Some(work(Service::Mariadb, "sale", None, Some("no login"))),
        idle_window_s: 1.0,
    });
    // The buyers' round trips per sale show once, on the run's first row.
    s.cost = Some(lockbench::report::work::Cost {
        sales: 300,
        fsyncs_per_sale: None,
        cpu_ms_per_sale: None,
        cpu_ms_per_sale_pm: None,
        round_trips_per_sale: Some(7.02),
        round_trips: None,
        services: Vec::new(),
    });
    report::write_summary(dir.path(), &s).unwrap();
    let html = std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap();
    let table = &html[html.find("id=\"server-work\"").expect("server work table")..];
    assert!(table.contains(
        "<td class=\"n\">321</td><td class=\"n\">7.02</td><td class=\"n\">4.02 commands</td>"
    ));
    assert!(table.contains("<td class=\"n\">321</td><td class=\"n\"></td><td>-</td>"));
    assert!(table.contains("publish 1"));
    assert!(table.contains("not available: no login"));
}

/// The machine a command ran on heads the page and the printed table, read from summary.json;
/// a summary from before the fingerprint loads, and shows none.
#[test]
fn the_page_and_the_table_name_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = write_run(dir.path(), &Fake::held("redis-setnx", 790.0), 100);
    let old = std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap();
    assert!(!old.contains("id=\"machine\""));
    s.machine = Some(test_machine());
    report::write_summary(dir.path(), &s).unwrap();
    let html = std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap();
    let line = "machine: Test CPU &lt;9&gt;, 2 cores, cpu score 400 M/s, fdatasync not measured, \
                loopback p50 30 µs p99 80 µs (n=5000), psi not measured";
    let at = html.find(&format!("<p class=\"machine\" id=\"machine\">{line}</p>"));
    assert!(
        at.is_some_and(|at| at < html.find("<h2").unwrap()),
        "{html}"
    );
    let read: Summary =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(read.machine, s.machine);
    let mut table = Vec::new();
    report::print_table(&mut table, &[read.clone(), read]).unwrap();
    let table = String::from_utf8(table).unwrap();
    let mut lines = table.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("machine: Test CPU <9>, 2 cores")
    );
    assert!(
        lines.next().unwrap().starts_with("strategy "),
        "one line: {table}"
    );
}

/// A machine whose disk could not be probed.
fn test_machine() -> lockbench::record::machine::Machine {
    use lockbench::record::machine::{CpuScore, Latency, Machine};
    Machine {
        cpu_model: "Test CPU <9>".into(),
        cores: 2,
        usable_cores: 2,
        cpu_score: Some(CpuScore {
            m_per_s: 400.0,
            rounds: 16,
            optimized: true,
        }),
        fdatasync: None,
        loopback: Some(Latency {
            n: 5000,
            p50_us: 30.0,
            p99_us: 80.0,
            max_us: 200.0,
        }),
        psi: None,
        unmeasured: vec!["fdatasync: create a file in /ro: read-only".into()],
        probe_s: 0.6,
    }
}

/// A sweep's machine is kept in sweep.json, heads its capacity table and its page.
#[test]
fn a_sweep_names_its_machine_in_the_table_and_on_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut sweep = synthetic_sweep();
    sweep.machine = Some(test_machine());
    sweep.write(dir.path()).unwrap();
    let read = report::sweep::Sweep::read(dir.path()).unwrap();
    assert_eq!(read.machine, sweep.machine);
    let mut table = Vec::new();
    report::sweep::print_capacity(&mut table, &read).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("machine: Test CPU <9>, 2 cores"),
        "{table}"
    );
    let html = std::fs::read_to_string(report::write_report(dir.path()).unwrap()).unwrap();
    assert!(
        html.contains("id=\"machine\">machine: Test CPU &lt;9&gt;"),
        "{html}"
    );
}

/// `lockbench history` over a comparison and a single run of another folder: one CSV, the runs
/// in the order they started whichever folder holds them, `--out` writing the same; a folder
/// without results exits 2 naming it.
#[test]
fn history_lines_up_the_runs_of_several_folders_and_names_an_empty_one() {
    let (cmp, one, empty) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    fake_comparison(cmp.path());
    let mut early = write_run(one.path(), &FAKES[1], 3);
    early.started_at = "2025-12-31T23:00:00.000Z".into();
    let summary_json = serde_json::to_vec(&early).unwrap();
    std::fs::write(one.path().join("summary.json"), summary_json).unwrap();
    let history = |args: &[&Path]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lockbench"))
            .arg("history")
            .args(args)
            .output()
            .unwrap()
    };
    let out = history(&[cmp.path(), one.path()]);
    assert!(out.status.success(), "{out:?}");
    let csv = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0][..4],
        ["time", "build", "lockbench_version", "strategy"]
    );
    assert_eq!(rows.len(), 1 + FAKES.len() + 1, "{csv}");
    assert_eq!(rows[1][0], "2025-12-31T23:00:00.000Z", "{csv}");
    assert_eq!(rows[1][3], FAKES[1].strategy);
    assert!(
        rows[2..].iter().all(|r| r[0] == "2026-01-01T00:00:00.000Z"),
        "{csv}"
    );
    let file = cmp.path().join("history.csv");
    let out = history(&[cmp.path(), one.path(), Path::new("--out"), &file]);
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), csv);
    let out = history(&[cmp.path(), empty.path()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: no results found", empty.path().display())),
        "{err}"
    );
}

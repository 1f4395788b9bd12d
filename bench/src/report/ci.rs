//! What a run or a comparison measured, in the formats CI tools read (docs/ci-formats.md):
//! JUnit XML (`--junit`: one testcase per strategy and check), a Markdown table (`--markdown`,
//! and the GitHub job summary when `GITHUB_STEP_SUMMARY` is set), Bencher's metric format
//! (`--bmf`) and github-action-benchmark's custom JSON (`--github-benchmark`). Every figure is
//! the summary's; an interval is given only where the summary has one (a p99's order-statistic
//! bounds), never made up.

use std::path::{Path, PathBuf};

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde_json::{Map, Value, json};

use super::Summary;
use super::format::{decimals, ms_exact};
use crate::record::Pct;

/// The files asked for (each `None`: not written).
#[derive(Debug, Clone, Default)]
pub struct CiOutputs {
    /// JUnit XML.
    pub junit: Option<PathBuf>,
    /// A Markdown table.
    pub markdown: Option<PathBuf>,
    /// Bencher Metric Format JSON.
    pub bmf: Option<PathBuf>,
    /// github-action-benchmark's `customSmallerIsBetter` JSON; its `customBiggerIsBetter` twin
    /// goes beside it as `<stem>-bigger.<ext>`.
    pub github_benchmark: Option<PathBuf>,
}

/// One figure of one strategy.
#[derive(Debug, Clone, PartialEq)]
struct Metric {
    /// `sales_per_s`, `p99_ms`, `sold_out_s`.
    slug: &'static str,
    unit: &'static str,
    value: f64,
    /// Its 95 % interval, when the summary has one.
    interval: Option<(f64, f64)>,
    /// Its sample count, when it has one.
    n: Option<u64>,
    /// The value is only a lower bound: arrivals never started sit past it (a p99 `+`).
    at_least: bool,
    smaller_is_better: bool,
}

/// The figures of one summary: sales/s, the p99 (only when the run had enough arrivals to bound
/// it), and a sale's time to sell its hot item out from the surge.
fn metrics(s: &Summary) -> Vec<Metric> {
    let mut m = vec![Metric {
        slug: "sales_per_s",
        unit: "sales/s",
        value: s.throughput.sales_per_s,
        interval: None,
        n: None,
        at_least: false,
        smaller_is_better: false,
    }];
    let l = &s.latency_us;
    if l.supports(Pct::P99) {
        // Arrivals never started count at the load's end: then the p99 is only a lower bound,
        // and an interval around it would claim more than was measured.
        let at_least = s.among_unstarted(Pct::P99.q());
        let interval = (l.ci95)
            .filter(|_| !at_least)
            .and_then(|c| Some((c.p99.0 as f64 / 1e3, c.p99.1? as f64 / 1e3)));
        m.push(Metric {
            slug: "p99_ms",
            unit: "ms",
            value: l.p99 as f64 / 1e3,
            interval,
            n: Some(l.count),
            at_least,
            smaller_is_better: true,
        });
    }
    let sold_out = s.hot_sold_out_s();
    if let Some(t) = sold_out {
        m.push(Metric {
            slug: "sold_out_s",
            unit: "s",
            value: t,
            interval: None,
            n: None,
            at_least: false,
            smaller_is_better: true,
        });
    }
    m
}

/// `54.239 ms (95% 54.047..54.463, n=2159)`.
fn said(m: &Metric) -> String {
    let plus = if m.at_least { "+" } else { "" };
    let mut s = format!("{}{plus} {}", decimals(m.value, 3), m.unit);
    let mut extra = Vec::new();
    if m.at_least {
        extra.push("a lower bound: arrivals never started".to_string());
    }
    if let Some((lo, hi)) = m.interval {
        extra.push(format!("95% {}..{}", decimals(lo, 3), decimals(hi, 3)));
    }
    if let Some(n) = m.n {
        extra.push(format!("n={n}"));
    }
    if !extra.is_empty() {
        s.push_str(&format!(" ({})", extra.join(", ")));
    }
    s
}

/// The JUnit report: a suite `name`, per strategy a `safety` testcase (fails when the verdict is
/// not what the strategy claims) and one testcase per figure (passes: the figure and its
/// interval in its output; a gate's regressions fail there).
pub fn junit(name: &str, summaries: &[Summary]) -> Report {
    let mut report = Report::new("lockbench");
    report.add_test_suite(suite(name, summaries, true));
    report
}

/// One suite: the `safety` testcase of every run, and its figures' when `figures`.
fn suite(name: &str, summaries: &[Summary], figures: bool) -> TestSuite {
    let mut suite = TestSuite::new(name);
    for s in summaries {
        let mut safety = match s.verdict_holds() {
            Ok(h) => {
                let mut t = TestCase::new("safety", TestCaseStatus::success());
                t.set_system_out(h);
                t
            }
            Err(why) => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(why.clone());
                let mut t = TestCase::new("safety", status);
                t.set_system_out(why);
                t
            }
        };
        safety.set_classname(s.strategy.clone());
        suite.add_test_case(safety);
        for m in metrics(s).into_iter().filter(|_| figures) {
            let mut t = TestCase::new(m.slug, TestCaseStatus::success());
            t.set_classname(s.strategy.clone()).set_system_out(said(&m));
            suite.add_test_case(t);
        }
    }
    suite
}

/// A short Markdown table: strategy, verdict, sales/s, p99 with its n (`+`: a lower bound),
/// sell-out time.
pub fn markdown(title: &str, summaries: &[Summary]) -> String {
    let mut md = format!(
        "### {title}\n\n| strategy | verdict | sales/s | p99 (ms) | sold out (s, from the surge) |\n|---|---|---:|---:|---:|\n"
    );
    for s in summaries {
        let ms = metrics(s);
        let get = |slug: &str| ms.iter().find(|m| m.slug == slug);
        let verdict = match s.verdict_holds() {
            Ok(_) if s.headline() == "fenced" => "fenced (the lock broke)".to_string(),
            Ok(h) => h,
            Err(_) => format!("**{}**", s.headline()),
        };
        let p99 = match get("p99_ms") {
            Some(m) => format!(
                "{}{} (n={})",
                ms_exact(s.latency_us.p99),
                if m.at_least { "+" } else { "" },
                s.latency_us.count
            ),
            None => format!("too few arrivals (n={})", s.latency_us.count),
        };
        let sold_out = get("sold_out_s").map_or("-".to_string(), |m| decimals(m.value, 3));
        md.push_str(&format!(
            "| {} | {verdict} | {} | {p99} | {sold_out} |\n",
            s.strategy,
            decimals(s.throughput.sales_per_s, 1)
        ));
    }
    md
}

/// Bencher Metric Format: `{strategy: {slug: {value, lower_value?, upper_value?}}}`.
pub fn bmf(summaries: &[Summary]) -> Value {
    bmf_keyed(&by_strategy(summaries))
}

/// Each run under its strategy's name.
fn by_strategy(summaries: &[Summary]) -> Vec<(String, &Summary)> {
    summaries.iter().map(|s| (s.strategy.clone(), s)).collect()
}

/// BMF with each run under the benchmark name it is given.
fn bmf_keyed(runs: &[(String, &Summary)]) -> Value {
    let mut all = Map::new();
    for (key, s) in runs {
        let mut measures = Map::new();
        for m in metrics(s) {
            let mut v = Map::new();
            v.insert("value".into(), json!(m.value));
            if let Some((lo, hi)) = m.interval {
                v.insert("lower_value".into(), json!(lo));
                v.insert("upper_value".into(), json!(hi));
            } else if m.at_least {
                v.insert("lower_value".into(), json!(m.value));
            }
            measures.insert(m.slug.into(), Value::Object(v));
        }
        all.insert(key.clone(), Value::Object(measures));
    }
    Value::Object(all)
}

/// github-action-benchmark's custom JSON: the entries whose smaller value is better
/// (`customSmallerIsBetter`) or the others (`customBiggerIsBetter`): `name`, `unit`, `value`,
/// and `range` / `extra` where known.
pub fn github_benchmark(summaries: &[Summary], smaller_is_better: bool) -> Value {
    github_keyed(&by_strategy(summaries), smaller_is_better)
}

/// github-action-benchmark's JSON with each run's entries named `<key> <figure>`.
fn github_keyed(runs: &[(String, &Summary)], smaller_is_better: bool) -> Value {
    let entries: Vec<Value> = runs
        .iter()
        .flat_map(|(key, s)| metrics(s).into_iter().map(move |m| (key, m)))
        .filter(|(_, m)| m.smaller_is_better == smaller_is_better)
        .map(|(key, m)| {
            let mut e = json!({
                "name": format!("{key} {}", m.slug),
                "unit": m.unit,
                "value": m.value,
            });
            if let Some((lo, hi)) = m.interval {
                e["range"] = json!(format!("{}..{}", decimals(lo, 3), decimals(hi, 3)));
            }
            if let Some(n) = m.n {
                let bound = if m.at_least {
                    ", a lower bound: arrivals never started"
                } else {
                    ""
                };
                e["extra"] = json!(format!("n={n}{bound}"));
            }
            e
        })
        .collect();
    Value::Array(entries)
}

/// `out/bench.json` → `out/bench-bigger.json`.
pub fn bigger_twin(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("benchmark");
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-bigger.{ext}"),
        None => format!("{stem}-bigger"),
    };
    path.with_file_name(name)
}

/// A Markdown table to `path` (when given) and appended to `$GITHUB_STEP_SUMMARY` (when set),
/// as GitHub reads it.
pub fn write_markdown(path: Option<&Path>, md: &str) -> std::io::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, md)?;
    }
    if let Some(p) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)?;
        writeln!(f, "{md}")?;
    }
    Ok(())
}

/// One part of a job, as its CI files show it: its runs, and whether their figures are the
/// job's headline figures (the sale and the calm part) or only their verdicts count (a part
/// under faults, whose figures measure the fault).
#[derive(Debug, Clone)]
pub struct Part {
    /// `sale`, `sale/<scenario>`, `calm`, `chaos/<scenario>`.
    pub name: String,
    /// Its runs.
    pub summaries: Vec<Summary>,
    /// Whether its figures go in the files (as testcases, BMF measures, benchmark entries).
    pub figures: bool,
}

/// The parts of the job folder `root` that left a comparison, in the order the job runs them:
/// the sale (`sale`, then `sale/<scenario>`), `calm`, `chaos/<scenario>`. The figures are the
/// sale's and the calm part's; every part's verdicts count.
pub fn job_parts(root: &Path) -> std::io::Result<Vec<Part>> {
    let layout = super::layout::JobLayout::new(root);
    let mut dirs: Vec<(String, PathBuf, bool)> = Vec::new();
    for (name, dir) in layout.sales() {
        let calm = name == super::layout::SALE_CALM;
        let part = if calm {
            "sale".into()
        } else {
            format!("sale/{name}")
        };
        dirs.push((part, dir, calm));
    }
    dirs.push(("calm".into(), layout.calm(), true));
    for (name, dir) in layout.scenarios() {
        dirs.push((format!("chaos/{name}"), dir, false));
    }
    // compare.json holds every run of a part that finished so far (none: nothing to show).
    let mut parts = Vec::new();
    for (name, dir, figures) in dirs {
        let path = dir.join("compare.json");
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read(&path)?;
        let summaries = serde_json::from_slice(&text).map_err(|e| {
            let what = format!("{}: not a lockbench comparison: {e}", path.display());
            std::io::Error::new(std::io::ErrorKind::InvalidData, what)
        })?;
        parts.push(Part {
            name,
            summaries,
            figures,
        });
    }
    Ok(parts)
}

impl CiOutputs {
    /// Writes every file asked for, and the Markdown to `$GITHUB_STEP_SUMMARY` when it is set
    /// (appended, as GitHub reads it). `name` names the suite and the table.
    pub fn write(&self, name: &str, summaries: &[Summary]) -> std::io::Result<()> {
        let report = || junit(name, summaries);
        self.write_files(report, &markdown(name, summaries), &by_strategy(summaries))
    }

    /// A job's files: a JUnit suite per part (`<name>: <part>`), a Markdown table per part, and
    /// the figures of the parts that have them under `<part>/<strategy>` (BMF benchmarks,
    /// github-action-benchmark names), so that the sale's and the calm run's never mix.
    pub fn write_job(&self, name: &str, parts: &[Part]) -> std::io::Result<()> {
        let title = |p: &Part| format!("{name}: {}", p.name);
        let report = || {
            let mut r = Report::new("lockbench");
            for p in parts {
                r.add_test_suite(suite(&title(p), &p.summaries, p.figures));
            }
            r
        };
        let md: Vec<String> = parts
            .iter()
            .map(|p| markdown(&title(p), &p.summaries))
            .collect();
        let keyed: Vec<(String, &Summary)> = parts
            .iter()
            .filter(|p| p.figures)
            .flat_map(|p| {
                p.summaries
                    .iter()
                    .map(|s| (format!("{}/{}", p.name, s.strategy), s))
            })
            .collect();
        self.write_files(report, &md.join("\n"), &keyed)
    }

    fn write_files(
        &self,
        report: impl Fn() -> Report,
        md: &str,
        keyed: &[(String, &Summary)],
    ) -> std::io::Result<()> {
        let json = |v: &Value| serde_json::to_vec_pretty(v).expect("JSON values serialize");
        if let Some(p) = &self.junit {
            let xml = report().to_string().map_err(std::io::Error::other)?;
            std::fs::write(p, xml)?;
        }
        write_markdown(self.markdown.as_deref(), md)?;
        if let Some(p) = &self.bmf {
            std::fs::write(p, json(&bmf_keyed(keyed)))?;
        }
        if let Some(p) = &self.github_benchmark {
            std::fs::write(p, json(&github_keyed(keyed, true)))?;
            std::fs::write(bigger_twin(p), json(&github_keyed(keyed, false)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed fixture as `strategy`, safe or not.
    fn summary(strategy: &str, safe: bool) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        s.strategy = strategy.into();
        s.claims_safety = true;
        s.safe = safe;
        s.lock_verdict = Some(if safe {
            crate::check::LockVerdict::Held
        } else {
            crate::check::LockVerdict::Broken
        });
        s.store_verdict = if safe {
            crate::check::StoreVerdict::Intact
        } else {
            crate::check::StoreVerdict::Corrupted
        };
        s
    }

    #[test]
    fn junit_reads_back_with_a_failed_safety_case_carrying_the_verdict() {
        let runs = [summary("good", true), summary("bad", false)];
        let xml = junit("lockbench compare x", &runs).to_string().unwrap();
        let back = Report::deserialize_from_str(&xml).expect("valid JUnit XML");
        let suite = &back.test_suites[0];
        assert_eq!(suite.name.as_str(), "lockbench compare x");
        let cases: Vec<(&str, &str, bool)> = suite
            .test_cases
            .iter()
            .map(|t| {
                let failed = matches!(t.status, TestCaseStatus::NonSuccess { .. });
                let class = t.classname.as_ref().map_or("", |c| c.as_str());
                (class, t.name.as_str(), failed)
            })
            .collect();
        assert!(cases.contains(&("good", "safety", false)), "{cases:?}");
        assert!(cases.contains(&("bad", "safety", true)), "{cases:?}");
        assert!(cases.contains(&("good", "sales_per_s", false)), "{cases:?}");
        assert_eq!(suite.failures, 1);
        assert_contains!(xml, "bad: UNSAFE (lock BROKEN, store CORRUPTED)");
    }

    /// Bencher's BMF as documented (bencher.dev/docs/reference/bencher-metric-format and its
    /// JSON schema): an object of benchmark names (at most 1024 characters) to objects of
    /// measure slugs (at most 64) to `{value, lower_value?, upper_value?}`, numbers, `value`
    /// required; nothing else. Returns (benchmark, measure) pairs.
    fn documented_bmf(b: &Value) -> Vec<(String, String)> {
        let mut seen = Vec::new();
        for (bench, measures) in b.as_object().expect("BMF is an object") {
            assert!(
                !bench.is_empty() && bench.chars().count() <= 1024,
                "{bench}"
            );
            for (slug, m) in measures.as_object().expect("a benchmark's measures object") {
                assert!(!slug.is_empty() && slug.len() <= 64, "{slug}");
                let m = m.as_object().expect("a measure is an object");
                let num = |k: &str| m.get(k).map(|v| v.as_f64().expect("a number"));
                let value = num("value").expect("value is required");
                assert!(value.is_finite(), "{bench} {slug}");
                assert!(
                    m.keys()
                        .all(|k| ["value", "lower_value", "upper_value"].contains(&k.as_str()))
                );
                assert!(
                    num("lower_value").is_none_or(|lo| lo <= value),
                    "{bench} {slug}"
                );
                assert!(
                    num("upper_value").is_none_or(|hi| value <= hi),
                    "{bench} {slug}"
                );
                seen.push((bench.clone(), slug.clone()));
            }
        }
        seen
    }

    /// github-action-benchmark's custom tools as documented (its README, "Examples" of
    /// customBiggerIsBetter / customSmallerIsBetter): an array of `{name, unit, value}`, with
    /// `range` and `extra` optional strings; nothing else. Returns (name, unit) pairs.
    fn documented_github_benchmark(g: &Value) -> Vec<(String, String)> {
        let mut seen = Vec::new();
        for e in g.as_array().expect("an array of entries") {
            let e = e.as_object().expect("an entry is an object");
            let text = |k: &str| e.get(k).map(|v| v.as_str().expect("a string").to_string());
            let (name, unit) = (text("name").expect("name"), text("unit").expect("unit"));
            assert!(!name.is_empty() && !unit.is_empty());
            assert!(e["value"].as_f64().is_some_and(f64::is_finite), "{name}");
            assert!(
                text("range").is_none_or(|r| !r.is_empty())
                    && text("extra").is_none_or(|x| !x.is_empty())
            );
            assert!(
                e.keys()
                    .all(|k| ["name", "unit", "value", "range", "extra"].contains(&k.as_str()))
            );
            seen.push((name, unit));
        }
        seen
    }

    #[test]
    fn every_bmf_and_github_benchmark_field_is_as_documented() {
        // A p99 with both bounds, one that is only a lower bound, one too short to show.
        let mut bounded = summary("bounded", true);
        bounded.latency_us.ci95 = Some(crate::record::Ci95 {
            p50: (1, Some(2)),
            p99: (bounded.latency_us.p99 - 5, Some(bounded.latency_us.p99 + 9)),
            p999: (1, None),
        });
        let mut lower = summary("lower", true);
        lower.not_started = lower.attempts;
        let mut short = summary("short", true);
        (short.latency_us.count, short.attempts) = (3, 3);
        let runs = [bounded, lower, short];
        let b = bmf(&runs);
        let measures = documented_bmf(&b);
        let bmf_of = |bench: &str| -> Vec<&str> {
            let m = measures.iter().filter(|(b, _)| b == bench);
            m.map(|(_, s)| s.as_str()).collect()
        };
        assert_eq!(bmf_of("bounded"), ["p99_ms", "sales_per_s"]);
        assert_eq!(bmf_of("short"), ["sales_per_s"], "no p99 from 3 arrivals");
        let p99 = &b["bounded"]["p99_ms"];
        assert!(p99["lower_value"].as_f64() < p99["value"].as_f64(), "{p99}");
        assert!(p99["value"].as_f64() < p99["upper_value"].as_f64(), "{p99}");
        assert_eq!(
            b["lower"]["p99_ms"]["lower_value"],
            b["lower"]["p99_ms"]["value"]
        );
        // The two github-action-benchmark files split the figures by direction, every name
        // once across both.
        let smaller = documented_github_benchmark(&github_benchmark(&runs, true));
        let bigger = documented_github_benchmark(&github_benchmark(&runs, false));
        assert!(
            smaller
                .iter()
                .all(|(n, u)| n.ends_with(" p99_ms") && u == "ms"),
            "{smaller:?}"
        );
        assert!(
            bigger
                .iter()
                .all(|(n, u)| n.ends_with(" sales_per_s") && u == "sales/s"),
            "{bigger:?}"
        );
        assert_eq!((smaller.len(), bigger.len()), (2, 3));
        let mut names: Vec<&String> = smaller.iter().chain(&bigger).map(|(n, _)| n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 5);
        let g = github_benchmark(&runs, true);
        let bounded = g
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "bounded p99_ms");
        let bounded = bounded.expect("the bounded p99");
        assert!(
            bounded["range"].as_str().unwrap().contains(".."),
            "{bounded}"
        );
        assert!(
            bounded["extra"].as_str().unwrap().starts_with("n="),
            "{bounded}"
        );
        assert_eq!(
            bigger_twin(Path::new("out/bench.json")),
            Path::new("out/bench-bigger.json")
        );
    }

    #[test]
    fn a_job_writes_a_suite_per_part_and_the_figures_of_the_sale_and_the_calm_part_only() {
        let root = tempfile::tempdir().unwrap();
        use crate::report::layout::JobLayout;
        let layout = JobLayout::new(root.path());
        let put = |dir: PathBuf, runs: &[Summary]| {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("compare.json"), serde_json::to_vec(runs).unwrap()).unwrap();
        };
        put(layout.sale("calm"), &[summary("a", true)]);
        put(layout.sale("kill-master"), &[summary("a", true)]);
        put(layout.calm(), &[summary("a", true), summary("b", true)]);
        put(
            layout.chaos("pause-holder"),
            &[summary("a", true), summary("b", false)],
        );
        std::fs::create_dir_all(layout.chaos("never-ran")).unwrap();
        let parts = job_parts(root.path()).unwrap();
        let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["sale", "sale/kill-master", "calm", "chaos/pause-holder"]
        );
        let files = tempfile::tempdir().unwrap();
        let f = |n: &str| files.path().join(n);
        let ci = CiOutputs {
            junit: Some(f("junit.xml")),
            markdown: Some(f("summary.md")),
            bmf: Some(f("bmf.json")),
            github_benchmark: Some(f("bench.json")),
        };
        ci.write_job("lockbench job j", &parts).unwrap();
        let xml = std::fs::read_to_string(f("junit.xml")).unwrap();
        let back = Report::deserialize_from_str(&xml).expect("valid JUnit XML");
        let suites: Vec<(&str, usize, usize)> = back
            .test_suites
            .iter()
            .map(|s| (s.name.as_str(), s.test_cases.len(), s.failures))
            .collect();
        // Under faults only the verdicts: one safety case per run; b's broken lock fails.
        assert_eq!(
            suites,
            [
                ("lockbench job j: sale", 3, 0),
                ("lockbench job j: sale/kill-master", 1, 0),
                ("lockbench job j: calm", 6, 0),
                ("lockbench job j: chaos/pause-holder", 2, 1),
            ]
        );
        let b: Value = serde_json::from_slice(&std::fs::read(f("bmf.json")).unwrap()).unwrap();
        let benches: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert_eq!(benches, ["calm/a", "calm/b", "sale/a"]);
        let bigger: Value =
            serde_json::from_slice(&std::fs::read(f("bench-bigger.json")).unwrap()).unwrap();
        assert_eq!(bigger[0]["name"], "sale/a sales_per_s");
        let md = std::fs::read_to_string(f("summary.md")).unwrap();
        assert_contains!(md, "### lockbench job j: chaos/pause-holder");
        assert_contains!(md, "| b | **UNSAFE** |");
    }

    #[test]
    fn a_p99_past_never_started_arrivals_is_a_lower_bound_everywhere() {
        let mut s = summary("slow", true);
        s.not_started = s.attempts;
        let m = metrics(&s);
        let p99 = m.iter().find(|m| m.slug == "p99_ms").unwrap();
        assert!(p99.at_least && p99.interval.is_none(), "{p99:?}");
        assert!(said(p99).contains("+ ms (a lower bound"), "{}", said(p99));
        let b = bmf(std::slice::from_ref(&s));
        assert!(b["slow"]["p99_ms"].get("upper_value").is_none(), "{b}");
        assert!(markdown("t", std::slice::from_ref(&s)).contains("+ (n="));
        let g = github_benchmark(std::slice::from_ref(&s), true);
        assert!(
            g[0]["extra"].as_str().unwrap().contains("lower bound"),
            "{g}"
        );
    }

    #[test]
    fn a_fenced_verdict_passes_but_says_the_lock_broke() {
        let mut s = summary("fenced", true);
        s.lock_verdict = Some(crate::check::LockVerdict::BrokenFenced);
        assert_eq!(s.headline(), "fenced");
        let xml = junit("t", std::slice::from_ref(&s)).to_string().unwrap();
        assert_contains!(xml, "fenced: the lock broke");
        assert!(markdown("t", &[s]).contains("| fenced (the lock broke) |"));
    }

    #[test]
    fn the_markdown_table_has_a_row_per_strategy_and_bolds_a_broken_verdict() {
        let md = markdown("t", &[summary("good", true), summary("bad", false)]);
        assert!(md.starts_with("### t\n\n| strategy | verdict |"), "{md}");
        assert_contains!(md, "| good | safe |");
        assert_contains!(md, "| bad | **UNSAFE** |");
    }
}

//! `lockbench advise`: which strategies of a results folder meet an architect's stated needs,
//! in words, each answer with the figure it rests on. The judgement is `--needs`'
//! ([`super::needs`]), the same one report.html's needs section renders: this is its
//! terminal form, for a job folder, a sweep, or a comparison (a sale's runs answer the sale's
//! terms, steady runs without a fault the calm run's).

use std::io::{self, Write};
use std::path::Path;

use super::error::ReportError;
use super::layout::SALE_CALM;
use super::model::Model;
use super::needs::{Judged, Met, Needs};
use super::saved::{Folder, Job, Part, RunData, load_folder};

/// Judges every strategy of the folder `dir` against `needs`.
pub fn advise(dir: &Path, needs: &Needs) -> Result<Model, ReportError> {
    let job = match load_folder(dir)? {
        Folder::Job(job) => *job,
        Folder::Runs { runs, .. } => job_of_runs(dir, runs),
    };
    Ok(Model::of(&job, Some(needs)))
}

/// A comparison as the parts of a job: its sale runs without a fault are the sale, with one
/// the sale under that scenario (its chaos file's name); its steady runs likewise the calm
/// part and chaos parts.
fn job_of_runs(dir: &Path, runs: Vec<RunData>) -> Job {
    let mut job = Job::empty(dir);
    for r in runs {
        let s = &r.summary;
        let scenario = match (&s.chaos_file, s.faults.is_empty()) {
            (_, true) => None,
            (Some(f), false) => Some(scenario_of(f)),
            (None, false) => Some("faults".to_string()),
        };
        let parts = match s.sale.is_some() {
            true => &mut job.sale,
            false => &mut job.chaos,
        };
        let name = match (scenario, s.sale.is_some()) {
            (Some(sc), _) => sc,
            (None, true) => SALE_CALM.to_string(),
            (None, false) => {
                let calm = job.calm.get_or_insert_with(|| Part {
                    dir: dir.to_path_buf(),
                    runs: Vec::new(),
                });
                calm.runs.push(r);
                continue;
            }
        };
        match parts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, part)) => part.runs.push(r),
            None => parts.push((
                name,
                Part {
                    dir: dir.to_path_buf(),
                    runs: vec![r],
                },
            )),
        }
    }
    // The sale without a fault first, as a job folder reads.
    job.sale.sort_by_key(|(name, _)| name != SALE_CALM);
    job
}

/// `chaos/kill-master-in-surge.toml` → `kill-master-in-surge`.
fn scenario_of(file: &str) -> String {
    let stem = Path::new(file).file_stem().and_then(|s| s.to_str());
    stem.unwrap_or(file).to_string()
}

/// Prints the advice: who meets every need and why, then who misses one (the first), then who
/// cannot be judged on what was measured.
pub fn print_advice(out: &mut dyn Write, model: &Model) -> io::Result<()> {
    let Some(answer) = &model.needs else {
        return Ok(());
    };
    writeln!(out, "needs: {}", answer.given)?;
    let name = |i: usize| {
        let c = &model.strategies[i];
        match c.control {
            true => format!("{} (a control)", c.strategy),
            false => c.strategy.clone(),
        }
    };
    // Where a strategy stands: every term met, else the first term not met.
    let standing = |j: &super::needs::Judgement| j.first_gap().map_or(Met::Yes, |g| g.met);
    let groups = [
        (Met::Yes, "meet every need"),
        (Met::No, "miss a need (the first one missed)"),
        (Met::Unmeasured, "not shown either way by what was measured"),
    ];
    for (met, head) in groups {
        let these: Vec<(usize, &super::needs::Judgement)> = (answer.judgements.iter())
            .enumerate()
            .filter(|(_, j)| standing(j) == met)
            .collect();
        writeln!(out, "\n{head}: {}", these.len())?;
        for (i, j) in these {
            writeln!(out, "  {}", name(i))?;
            let why: Vec<&Judged> = match j.first_gap() {
                Some(g) => vec![g],
                None => j.terms.iter().collect(),
            };
            for term in why {
                writeln!(out, "    {}: {}", term.term, term.why.text())?;
            }
        }
    }
    for p in &model.problems {
        writeln!(out, "note: {p}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A comparison folder of three runs: a sale that sold out, a control's sale, a steady run.
    fn folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let base: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        let sale = serde_json::to_value(crate::report::sale::fixture()).unwrap();
        let mut runs = Vec::new();
        for (id, sale, claims) in [
            ("sold", Some(&sale), true),
            ("ctl", Some(&sale), false),
            ("steady", None, true),
        ] {
            let mut s = base.clone();
            s["strategy"] = id.into();
            s["claims_safety"] = claims.into();
            s["faults"] = serde_json::json!([]);
            if let Some(sale) = sale {
                s["sale"] = sale.clone();
            }
            runs.push(s);
        }
        std::fs::write(
            dir.path().join("compare.json"),
            serde_json::to_vec(&runs).unwrap(),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_scenario_is_named_by_its_file() {
        assert_eq!(
            scenario_of("chaos/kill-master-in-surge.toml"),
            "kill-master-in-surge"
        );
    }

    #[test]
    fn a_comparison_is_judged_and_grouped_in_words() {
        let dir = folder();
        let needs: Needs = "safe,fcfs>=0.5".parse().unwrap();
        let model = advise(dir.path(), &needs).unwrap();
        let mut out = Vec::new();
        print_advice(&mut out, &model).unwrap();
        let text = String::from_utf8(out).unwrap();
        // The fixture's sale was folded by workers: no FCFS, so nobody meets every need.
        assert_contains!(text, "meet every need: 0\n");
        assert_contains!(
            text,
            "  ctl (a control)\n    safe: a control makes no safety claim"
        );
        assert_contains!(
            text,
            "  sold\n    fcfs>=0.5: sale figures not measured (the buyers ran in 4 worker processes)"
        );
        // The steady run answers safe from its calm run, and ran no sale.
        assert_contains!(
            text,
            "  steady\n    fcfs>=0.5: the sale did not run this strategy"
        );
        let needs: Needs = "safe".parse().unwrap();
        let mut out = Vec::new();
        print_advice(&mut out, &advise(dir.path(), &needs).unwrap()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "meet every need: 2\n  steady\n    safe: calm run: safe\n  sold\n    safe: the sale: safe\n"
            ),
            "{text}"
        );
        // A run with a fault is judged as a run of its chaos file's scenario
        // (chaos/kill-master.toml): its fault must have taken effect.
        let mut runs: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(dir.path().join("compare.json")).unwrap())
                .unwrap();
        let base: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/summary.json")).unwrap();
        runs[2]["faults"] = base["faults"].clone();
        std::fs::write(
            dir.path().join("compare.json"),
            serde_json::to_vec(&runs).unwrap(),
        )
        .unwrap();
        let needs: Needs = "safe-under-kill-master".parse().unwrap();
        let model = advise(dir.path(), &needs).unwrap();
        let steady = &model.needs.as_ref().unwrap().judgements[0];
        assert_eq!(steady.terms[0].met, Met::Yes, "{steady:?}");
    }
}

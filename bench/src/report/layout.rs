//! The folder layout of a job (`lockbench job`): `sweep/`, `calm/`, `chaos/<scenario>/` and
//! `report.html`. The job writes through this type and the report reads back through it, so
//! the writer and the reader cannot disagree on a name. It sits in `report/`, below `run/`,
//! so both may use it.

use std::path::{Path, PathBuf};

/// Where each part of one job folder lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLayout {
    root: PathBuf,
}

/// The part folders at a job's top, in the order the job runs them.
const PARTS: [&str; 4] = ["sale", "sweep", "calm", "chaos"];

impl JobLayout {
    /// The layout of the job folder `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> JobLayout {
        JobLayout { root: root.into() }
    }

    /// The job folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder holding the sale part's comparisons.
    pub fn sale_dir(&self) -> PathBuf {
        self.root.join(PARTS[0])
    }

    /// A comparison of the sale part: `calm` (the sale as it comes) or a chaos scenario's name.
    pub fn sale(&self, name: &str) -> PathBuf {
        self.sale_dir().join(name)
    }

    /// The capacity part: a sweep folder.
    pub fn sweep(&self) -> PathBuf {
        self.root.join(PARTS[1])
    }

    /// The sweep's `sweep.json`.
    pub fn sweep_json(&self) -> PathBuf {
        self.sweep().join("sweep.json")
    }

    /// The calm part: a comparison folder.
    pub fn calm(&self) -> PathBuf {
        self.root.join(PARTS[2])
    }

    /// The folder holding one comparison folder per chaos scenario.
    pub fn chaos_dir(&self) -> PathBuf {
        self.root.join(PARTS[3])
    }

    /// The chaos part of `scenario` (the name of its file in `chaos/`, without `.toml`).
    pub fn chaos(&self, scenario: &str) -> PathBuf {
        self.chaos_dir().join(scenario)
    }

    /// The job's page.
    pub fn report(&self) -> PathBuf {
        self.root.join("report.html")
    }

    /// Whether any part folder is there (a job stopped early has some of them).
    pub fn has_parts(&self) -> bool {
        PARTS.iter().any(|p| self.root.join(p).is_dir())
    }

    /// The chaos parts that are there, as (scenario, folder), by name: the order is the
    /// folder's, not the run's, so a re-render always reads the same.
    pub fn scenarios(&self) -> Vec<(String, PathBuf)> {
        subfolders(&self.chaos_dir())
    }

    /// The sale part's comparisons that are there, as (name, folder): `calm` first, then the
    /// scenarios by name.
    pub fn sales(&self) -> Vec<(String, PathBuf)> {
        let mut found = subfolders(&self.sale_dir());
        found.sort_by_key(|(name, _)| name != SALE_CALM);
        found
    }
}

/// The sale part's comparison without a fault.
pub const SALE_CALM: &str = "calm";

/// The subfolders of `dir`, as (name, folder), by name.
fn subfolders(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .filter_map(|p| {
                    let name = p.file_name()?.to_string_lossy().into_owned();
                    Some((name, p))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_written_are_the_paths_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobLayout::new(dir.path().join("job"));
        assert!(!job.has_parts());
        assert!(job.scenarios().is_empty());
        // Written as the job writes them, in its order.
        for p in [
            job.sale("kill-master"),
            job.sale(SALE_CALM),
            job.sweep(),
            job.calm(),
            job.chaos("pause-holder"),
            job.chaos("kill-master"),
        ] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(job.chaos_dir().join("stray.txt"), "").unwrap();
        let again = JobLayout::new(job.root());
        assert!(again.has_parts());
        // The sale without a fault first, whatever the names.
        let sales: Vec<String> = again.sales().into_iter().map(|(n, _)| n).collect();
        assert_eq!(sales, ["calm", "kill-master"]);
        assert_eq!(
            again.scenarios(),
            vec![
                ("kill-master".to_string(), job.chaos("kill-master")),
                ("pause-holder".to_string(), job.chaos("pause-holder")),
            ]
        );
    }

    #[test]
    fn the_layout_is_the_one_the_docs_name() {
        let job = JobLayout::new("out");
        assert_eq!(job.sweep_json(), Path::new("out/sweep/sweep.json"));
        assert_eq!(job.calm(), Path::new("out/calm"));
        assert_eq!(job.sale(SALE_CALM), Path::new("out/sale/calm"));
        assert_eq!(job.sale("kill-master"), Path::new("out/sale/kill-master"));
        assert_eq!(job.chaos("kill-master"), Path::new("out/chaos/kill-master"));
        assert_eq!(job.report(), Path::new("out/report.html"));
    }

    #[test]
    fn one_part_alone_makes_a_job_folder() {
        let dir = tempfile::tempdir().unwrap();
        let job = JobLayout::new(dir.path());
        std::fs::create_dir_all(job.chaos_dir()).unwrap();
        assert!(job.has_parts());
    }
}

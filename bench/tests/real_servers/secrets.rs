//! No password reaches a file of the results folder at any verbosity: with `-vv` the SQL
//! clients log every statement, `CREATE USER … IDENTIFIED BY '…'` and `CREATE ROLE … PASSWORD
//! '…'` among them; and the files naming the servers' addresses are private (mode 0600).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::{lockbench, postgres_available, servers_available, succeed, workload_file};

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A `-vv` run of `strategy` whose login's password (variable `var`) is known: no file of
/// its results holds it, and its log shows the statement that made the login, redacted.
fn no_password_in_a_verbose_run(strategy: &str, var: &str, statement: &str) {
    no_password_in_a_verbose_run_with(strategy, var, statement, "");
}

/// [`no_password_in_a_verbose_run`] with `more` added to its workload; its folder (results in
/// `out`).
fn no_password_in_a_verbose_run_with(
    strategy: &str,
    var: &str,
    statement: &str,
    more: &str,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let secret = "hushSecret7q";
    let text = format!("[load]\nduration = \"1s\"\nrate = 50\n{more}");
    let w = workload_file(dir.path(), &text);
    let out = dir.path().join("out");
    succeed(
        lockbench()
            .env(var, secret)
            .args(["-vv", "run", "--strategy", strategy, "--workload"])
            .arg(&w)
            .arg("--out")
            .arg(&out),
    );
    let log = std::fs::read_to_string(out.join("logs/lockbench.log")).unwrap();
    assert!(
        log.contains(&format!("{statement} '***'")),
        "{strategy}: the statement that makes the login is not in the log, so this test \
         proves nothing"
    );
    for f in files(&out) {
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(secret),
            "{strategy}: {} holds the password",
            f.display()
        );
    }
    for f in ["logs/lockbench.log", "summary.json"] {
        let mode = std::fs::metadata(out.join(f)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{strategy}: {f} is {mode:o}");
    }
    dir
}

#[test]
fn a_verbose_mariadb_run_logs_no_password() {
    if !servers_available() {
        return;
    }
    no_password_in_a_verbose_run("mysql-atomic", "LOCKBENCH_MYSQL_PASSWORD", "IDENTIFIED BY");
}

#[test]
fn a_verbose_postgres_run_logs_no_password() {
    if !postgres_available() {
        return;
    }
    no_password_in_a_verbose_run("pg-atomic", "LOCKBENCH_POSTGRES_PASSWORD", "PASSWORD");
}

/// PgBouncer logs in with the password too (its userlist, in the run's data folder): neither its
/// log nor any other result holds it.
#[test]
fn a_verbose_run_through_pgbouncer_logs_no_password() {
    if !postgres_available() || !Path::new("/usr/sbin/pgbouncer").exists() {
        return;
    }
    let dir = no_password_in_a_verbose_run_with(
        "pg-atomic",
        "LOCKBENCH_POSTGRES_PASSWORD",
        "PASSWORD",
        "[servers]\npostgres_pooler = \"pgbouncer-transaction\"\n",
    );
    let log = dir.path().join("out/logs/postgres-pooler.log");
    assert!(
        log.exists(),
        "no PgBouncer in the run: this test proves nothing"
    );
}

//! The shell commands of `command` faults: how faults reach servers lockbench does not own
//! (an external target), e.g. `kubectl delete pod …` to inject and `kubectl wait …` to heal.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Runs `cmd` with `sh -c`, output appended to `log`, killed with its whole process group when
/// `timeout` runs out. `Err` says why it did not succeed (exit status, timeout, spawn error).
pub async fn run(
    cmd: &str,
    timeout: Duration,
    log: &Path,
    env: &[(&str, String)],
) -> Result<(), String> {
    use std::io::Write;
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("open {}: {e}", log.display()))?;
    let _ = writeln!(file, "$ {cmd}");
    let err = file
        .try_clone()
        .map_err(|e| format!("open {}: {e}", log.display()))?;
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err))
        // Its own group, so a timeout kills what it started too (a kubectl, a ssh).
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("start `sh -c {cmd:?}`: {e}"))?;
    match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!(
            "`{cmd}` failed ({status}); output in {}",
            log.display()
        )),
        Ok(Err(e)) => Err(format!("`{cmd}`: {e}")),
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            let _ = child.wait().await;
            Err(format!(
                "`{cmd}` did not finish within {}; killed; output in {}",
                humantime::format_duration(timeout),
                log.display()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn success_failure_and_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("f.log");
        let env = [("LOCKBENCH_FAULT", "3".to_string())];
        run(
            "echo hi $LOCKBENCH_FAULT",
            Duration::from_secs(5),
            &log,
            &env,
        )
        .await
        .unwrap();
        let e = run("exit 3", Duration::from_secs(5), &log, &[])
            .await
            .unwrap_err();
        assert_contains!(e, "exit status: 3");
        let started = std::time::Instant::now();
        // The sleep is a grandchild: the whole group must die, or wait() would hang on it.
        let e = run("sleep 30 & wait", Duration::from_millis(300), &log, &[])
            .await
            .unwrap_err();
        assert_contains!(e, "did not finish within 300ms");
        assert!(started.elapsed() < Duration::from_secs(10));
        let text = std::fs::read_to_string(&log).unwrap();
        assert_contains!(text, "$ echo hi", "hi 3");
    }
}

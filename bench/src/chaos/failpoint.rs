//! Failpoints: `LOCKBENCH_FAILPOINTS="name=action[,name=action]"`.
//!
//! Actions: `crash` — abort the process on the spot, as a client killed at that instruction
//! would (no destructors, no release, no reply); `crash-after=N` — the same on the N-th time
//! the point is reached (1-based). Unknown names or actions are an error at first use, so a
//! typo cannot silently disable a fault.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms failpoints.
pub const ENV: &str = "LOCKBENCH_FAILPOINTS";

/// Every failpoint in the code, with what reaching it means.
pub const POINTS: &[(&str, &str)] = &[
    (
        "lock.after-acquire",
        "a lock strategy has just acquired its lock (Locked)",
    ),
    (
        "lock.between-setnx-and-expire",
        "redis-setnx-expire has set the key but not its expiry yet",
    ),
];

#[derive(Debug)]
struct Armed {
    /// Crash on this hit (1-based).
    at: u64,
    hits: AtomicU64,
}

fn parse(spec: &str) -> Result<HashMap<String, Armed>, String> {
    let mut armed = HashMap::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, action) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}`: expected name=action"))?;
        if !POINTS.iter().any(|(p, _)| *p == name) {
            let known: Vec<&str> = POINTS.iter().map(|(p, _)| *p).collect();
            return Err(format!(
                "unknown failpoint `{name}`; known: {}",
                known.join(", ")
            ));
        }
        let at = match action {
            "crash" => 1,
            a => a
                .strip_prefix("crash-after=")
                .and_then(|n| n.parse::<u64>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    format!("`{item}`: expected the action `crash` or `crash-after=N` (N >= 1)")
                })?,
        };
        armed.insert(
            name.to_string(),
            Armed {
                at,
                hits: AtomicU64::new(0),
            },
        );
    }
    Ok(armed)
}

fn armed() -> &'static HashMap<String, Armed> {
    static ARMED: OnceLock<HashMap<String, Armed>> = OnceLock::new();
    ARMED.get_or_init(|| match std::env::var(ENV) {
        Ok(spec) => parse(&spec).unwrap_or_else(|e| {
            eprintln!("lockbench: {ENV}: {e}");
            std::process::exit(2);
        }),
        Err(_) => HashMap::new(),
    })
}

/// Marks a failpoint; aborts the process here if it is armed and due. Costs one hash lookup
/// when nothing is armed.
pub fn failpoint(name: &'static str) {
    debug_assert!(
        POINTS.iter().any(|(p, _)| *p == name),
        "undeclared failpoint {name}"
    );
    let armed = armed();
    if armed.is_empty() {
        return;
    }
    if let Some(a) = armed.get(name)
        && a.hits.fetch_add(1, Ordering::SeqCst) + 1 == a.at
    {
        eprintln!("lockbench: failpoint {name}: crashing the client here");
        std::process::abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_actions_and_rejects_typos() {
        let a =
            parse("lock.after-acquire=crash, lock.between-setnx-and-expire=crash-after=3").unwrap();
        assert_eq!(a["lock.after-acquire"].at, 1);
        assert_eq!(a["lock.between-setnx-and-expire"].at, 3);
        assert!(
            parse("lock.after-aquire=crash")
                .unwrap_err()
                .contains("unknown failpoint")
        );
        assert!(
            parse("lock.after-acquire=explode")
                .unwrap_err()
                .contains("crash-after=N")
        );
        assert!(parse("lock.after-acquire=crash-after=0").is_err());
        assert!(parse("").unwrap().is_empty());
    }
}

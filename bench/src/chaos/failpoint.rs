//! Failpoints: `LOCKBENCH_FAILPOINTS="name=action[,name=action]"`.
//!
//! Actions: `crash` — abort the process on the spot, as a client killed at that instruction
//! would (no destructors, no release, no reply); `crash-after=N` — the same on the N-th time
//! the point is reached (1-based); `F` (a factor, at a point that takes a duration) — multiply
//! that duration by F, a planted slowdown for measuring the gate's power. Unknown names or
//! actions are an error at first use, so a typo cannot silently disable a fault.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
    (
        SLOW_CRITICAL_SECTION,
        "a lock strategy's hold (Locked, critical_section.hold); takes a factor, not a crash: \
         `critical-section.slow=1.3` holds 30 % longer, as a slower build would",
    ),
];

/// The point that scales a lock strategy's hold ([`scaled`]).
pub const SLOW_CRITICAL_SECTION: &str = "critical-section.slow";

/// Points whose action is a factor on a duration rather than a crash.
const SCALING: &[&str] = &[SLOW_CRITICAL_SECTION];

#[derive(Debug)]
enum Armed {
    /// Crash on this hit (1-based).
    Crash { at: u64, hits: AtomicU64 },
    /// Multiply the duration by this factor.
    Scale(f64),
}

fn action(name: &str, item: &str, action: &str) -> Result<Armed, String> {
    if SCALING.contains(&name) {
        return action
            .parse::<f64>()
            .ok()
            // Up to 100x: anything larger is a typo, and a factor below zero cannot sleep.
            .filter(|f| (0.0..=100.0).contains(f))
            .map(Armed::Scale)
            .ok_or_else(|| format!("`{item}`: expected a factor such as 1.3 (0 to 100)"));
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
    Ok(Armed::Crash {
        at,
        hits: AtomicU64::new(0),
    })
}

fn parse(spec: &str) -> Result<HashMap<String, Armed>, String> {
    let mut armed = HashMap::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, act) = item
            .split_once('=')
            .ok_or_else(|| format!("`{item}`: expected name=action"))?;
        if !POINTS.iter().any(|(p, _)| *p == name) {
            let known: Vec<&str> = POINTS.iter().map(|(p, _)| *p).collect();
            return Err(format!(
                "unknown failpoint `{name}`; known: {}",
                known.join(", ")
            ));
        }
        armed.insert(name.to_string(), action(name, item, act)?);
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

fn declared(name: &str) {
    debug_assert!(
        POINTS.iter().any(|(p, _)| *p == name),
        "undeclared failpoint {name}"
    );
}

/// Marks a failpoint; aborts the process here if it is armed and due. Costs one hash lookup
/// when nothing is armed.
pub fn failpoint(name: &'static str) {
    declared(name);
    let armed = armed();
    if armed.is_empty() {
        return;
    }
    if let Some(Armed::Crash { at, hits }) = armed.get(name)
        && hits.fetch_add(1, Ordering::SeqCst) + 1 == *at
    {
        eprintln!("lockbench: failpoint {name}: crashing the client here");
        std::process::abort();
    }
}

/// `d`, multiplied by the factor the failpoint `name` is armed with (unchanged when it is not).
pub fn scaled(name: &'static str, d: Duration) -> Duration {
    declared(name);
    match armed().get(name) {
        Some(Armed::Scale(f)) => d.mul_f64(*f),
        _ => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_actions_and_rejects_typos() {
        let a =
            parse("lock.after-acquire=crash, lock.between-setnx-and-expire=crash-after=3").unwrap();
        assert!(matches!(
            a["lock.after-acquire"],
            Armed::Crash { at: 1, .. }
        ));
        assert!(matches!(
            a["lock.between-setnx-and-expire"],
            Armed::Crash { at: 3, .. }
        ));
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

    #[test]
    fn the_slow_point_takes_a_factor_and_only_a_factor() {
        let a = parse("critical-section.slow=1.3").unwrap();
        assert!(matches!(a[SLOW_CRITICAL_SECTION], Armed::Scale(f) if f == 1.3));
        for bad in ["crash", "fast", "-1", "1000"] {
            let e = parse(&format!("critical-section.slow={bad}")).unwrap_err();
            assert!(e.contains("expected a factor"), "{bad}: {e}");
        }
        // A factor is no action for a crash point.
        assert!(parse("lock.after-acquire=1.3").is_err());
        assert!(
            parse("critical-section.slo=1.3")
                .unwrap_err()
                .contains("unknown failpoint")
        );
    }
}

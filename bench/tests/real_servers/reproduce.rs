//! `lockbench reproduce`: a published failure reads reproduced on the build it was found on and
//! "fixed in" on the build that fixed it, each measured on a real cluster of that build.

use lockbench::cluster::EtcdBuild;
use lockbench::reproduce::{Finding, Options, jepsen_lock_outcome, run};
use tokio_util::sync::CancellationToken;

use crate::common::{consensus_servers_available, lockbench, require, servers_available};
use crate::versions::builds_installed;

/// `reproduce NAME --rounds N` into `dir`, in this process: what it printed, and its findings.
async fn reproduced(name: &str, rounds: u32, dir: &std::path::Path) -> (String, Vec<Finding>) {
    let opts = Options {
        names: vec![name.into()],
        rounds,
        out: dir.to_path_buf(),
    };
    let mut printed = Vec::new();
    let found = run(&opts, &mut printed, &CancellationToken::new())
        .await
        .unwrap();
    (String::from_utf8(printed).unwrap(), found)
}

/// Each finding's (build, verdict).
fn verdicts(found: &[Finding]) -> Vec<(&str, &str)> {
    (found.iter())
        .map(|f| (f.build.as_str(), f.verdict.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn etcd_11456_shows_on_3_4_and_reads_fixed_on_3_5() {
    if !require("etcd", consensus_servers_available()) || !builds_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (printed, found) = reproduced("etcd-11456", 2, dir.path()).await;
    let verdicts = verdicts(&found);
    // 3.4 answers the expired waiter as the holder and grants the next caller too; 3.5 checks
    // the waiter's lease and refuses it.
    assert_eq!(
        verdicts,
        [
            ("3.4", "reproduced"),
            ("3.5", "not reproduced: fixed in 3.5")
        ],
        "{printed}"
    );
    assert!(found[0].server.starts_with("etcd 3.4"), "{printed}");
    assert!(found[0].measured.contains("in 2 of them"), "{printed}");
    assert!(
        found[1].measured.contains("session is expired"),
        "{printed}"
    );
    // Written as it went.
    let saved = std::fs::read_to_string(dir.path().join("reproduce.json")).unwrap();
    assert!(saved.contains("fixed in 3.5"), "{saved}");
}

/// Through the command (its pause-holder runs need worker processes: lockbench's own binary).
#[test]
fn kleppmanns_pause_loses_an_update_unfenced_and_is_refused_fenced_on_each_redis_build() {
    if !servers_available() || !builds_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = lockbench()
        .args(["reproduce", "kleppmann-pause", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let printed =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{printed}");
    let found: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("reproduce.json")).unwrap())
            .unwrap();
    let verdicts: Vec<(&str, &str)> = found
        .iter()
        .map(|f| (f["build"].as_str().unwrap(), f["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [("7.0", "reproduced"), ("valkey-8.0", "reproduced")],
        "{printed}"
    );
    for f in &found {
        let m = f["measured"].as_str().unwrap();
        assert!(
            m.contains("redis-setnx: lock broken, store corrupted")
                && m.contains("redis-setnx-fenced: lock broken-fenced, store intact"),
            "{printed}"
        );
    }
    assert!(
        found[1]["server"].as_str().unwrap().contains("valkey 8.0"),
        "{printed}"
    );
}

/// Jepsen's lock-set on etcd 3.4, 20 s: the clients that trust the grant lose acknowledged
/// adds to the in-memory set; the fenced ones, under the same pauses, lose none.
#[tokio::test(flavor = "multi_thread")]
async fn jepsen_lock_set_loses_acknowledged_adds_on_3_4_unless_fenced() {
    if !require("etcd", consensus_servers_available()) || !builds_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let (server, o) = jepsen_lock_outcome(EtcdBuild::Etcd34, 2, dir.path(), &cancel)
        .await
        .unwrap();
    assert!(server.starts_with("etcd 3.4"), "{server}");
    // The first pause stops every member: on resume every lease has expired, and 3.4 answers
    // each blocked waiter as the holder.
    assert_eq!((o.paused_all, o.paused_leader), (1, 1), "{o:?}");
    assert!(o.nemesis_errors.is_empty(), "{o:?}");
    assert!(o.trusting.lost >= 1, "{o:?}");
    assert!(o.trusting.lost <= o.trusting.acked, "{o:?}");
    // The fence met the stale holders too, and refused them.
    assert!(o.fenced.acked >= 1 && o.fenced.refused >= 1, "{o:?}");
    assert_eq!(o.fenced.lost, 0, "{o:?}");
}

/// One `lockbench reproduce sentinel-failover` into `dir`: what it printed, and each build's
/// finding.
fn sentinel_failover(dir: &std::path::Path) -> (String, Vec<serde_json::Value>) {
    let out = lockbench()
        .args(["reproduce", "sentinel-failover", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    let printed =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{printed}");
    let found: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reproduce.json")).unwrap())
            .unwrap();
    let builds: Vec<&str> = found.iter().map(|f| f["build"].as_str().unwrap()).collect();
    assert_eq!(builds, ["7.0", "valkey-8.0"], "{printed}");
    (printed, found)
}

/// redis.io's failover: through the command, as Kleppmann's (its holder pause needs worker
/// processes), both builds, about 70 s a try. The WAIT lock must never grant a key twice; the
/// plain lock's second grant needs the promotion to land in the 0.8 s between the old lease's
/// end and the paused holder's resume, which a busy machine can miss (once in the suite, Nov 28:
/// 7.0's plain lock held), so a build that did not break gets a second try.
#[test]
fn a_sentinel_failover_breaks_the_plain_lock_and_the_wait_lock_grants_nothing_unreplicated() {
    let root = nix::unistd::geteuid().is_root();
    if !servers_available() || !builds_installed() || !require("root (partition faults)", root) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut broke = [false; 2];
    let mut all = String::new();
    for try_ in 1..=2 {
        let (printed, found) = sentinel_failover(&dir.path().join(format!("try-{try_}")));
        all.push_str(&printed);
        for (i, f) in found.iter().enumerate() {
            let m = f["measured"].as_str().unwrap();
            let (plain, wait) = m.split_once("; redis-sentinel-wait: ").expect(&printed);
            // Every try, every build: the WAIT lock never granted a key twice.
            assert!(wait.contains("(double grants 0,"), "{printed}");
            let twice = plain.starts_with("redis-sentinel: lock broken")
                && !plain.contains("(double grants 0,");
            // Granted twice means the finding (a lease the WAIT lock lost without a second
            // grant does not undo it).
            assert!(
                !twice || f["verdict"].as_str() == Some("reproduced"),
                "{printed}"
            );
            broke[i] |= twice;
        }
        if broke == [true, true] {
            break;
        }
    }
    assert_eq!(
        broke,
        [true, true],
        "the plain lock granted twice on each build: {all}"
    );
}

/// apache/curator#727 through the command (its holder pause needs worker processes): on
/// Curator 5.4.0 with ZooKeeper 3.8 and 5.7.1 with ZooKeeper 3.9, the holder's session expires
/// while it is stopped after its read, a waiter is granted the lock, and the resumed holder
/// writes: the plain lock is granted twice and loses an update, the czxid fence refuses the
/// stale write. Four runs with JVMs (three ZooKeeper members and four adapters each), ~60 s.
#[test]
fn curator_727_grants_a_lock_twice_after_a_session_expiry_on_5_4_and_5_7_unless_fenced() {
    use lockbench::strategy::adapter::{adapters_dir, library_of};
    if !consensus_servers_available() || !builds_installed() {
        return;
    }
    let compiled = ["lib:curator", "lib:curator-5.7"]
        .iter()
        .all(|id| library_of(id).unwrap().installed(&adapters_dir()));
    if !require(
        "Curator 5.4 and 5.7 compiled (scripts/install-deps.sh --servers all --adapters)",
        compiled,
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = lockbench()
        .args(["reproduce", "curator-727", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    let printed =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{printed}");
    let found: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("reproduce.json")).unwrap())
            .unwrap();
    let verdicts: Vec<(&str, &str)> = found
        .iter()
        .map(|f| (f["build"].as_str().unwrap(), f["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [("5.4", "reproduced"), ("5.7", "reproduced")],
        "{printed}"
    );
    // Each build ran its own Curator on its own ZooKeeper, as their adapters and servers said.
    for (f, zookeeper, curator) in [
        (&found[0], "zookeeper 3.8.", "curator 5.4.0"),
        (&found[1], "zookeeper 3.9.", "curator 5.7.1"),
    ] {
        let server = f["server"].as_str().unwrap();
        assert!(
            server.starts_with(zookeeper) && server.ends_with(curator),
            "{printed}"
        );
        let m = f["measured"].as_str().unwrap();
        let (plain, fenced) = m.split_once("; ").expect(&printed);
        assert!(
            plain.contains(": lock broken, store corrupted (double grants ")
                && !plain.contains("(double grants 0,"),
            "{printed}"
        );
        assert!(
            fenced.contains("-fenced: lock broken-fenced, store intact")
                && !fenced.contains("stale writes refused 0)"),
            "{printed}"
        );
    }
}

/// redis.io's everysec: a power loss 1 s into a sale drops the sales Redis acknowledged since
/// its last fsync (at most a second's), with `always` none, on each Redis build (~40 s).
#[tokio::test(flavor = "multi_thread")]
async fn a_power_loss_costs_everysec_acknowledged_sales_and_always_none_on_each_redis_build() {
    let root = nix::unistd::geteuid().is_root();
    let fuse = std::path::Path::new("/dev/fuse").exists();
    if !servers_available() || !builds_installed() || !require("root and /dev/fuse", root && fuse) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (printed, found) = reproduced("redis-everysec", 1, dir.path()).await;
    let verdicts = verdicts(&found);
    assert_eq!(
        verdicts,
        [("7.0", "reproduced"), ("valkey-8.0", "reproduced")],
        "{printed}"
    );
    for f in &found {
        assert!(
            f.measured.contains("appendfsync everysec: ")
                && f.measured
                    .contains("appendfsync always: 0 acknowledged sales lost"),
            "{printed}"
        );
    }
}

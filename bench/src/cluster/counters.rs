//! The work a service's servers did, as they count it themselves: one [`Reading`] of counters
//! summed over the nodes a strategy sends requests to. Each service reads its own in its
//! module (`ServiceKind::work`); this file holds the shared types and the readers of the text
//! formats those counters come in. It imports nothing of `cluster/`, so every service can
//! use it; what reads all services through the registry is `work.rs`, above them.

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Requests of the service's unit (commands, statements, requests, packets), its first counter.
pub const TOTAL: &str = "total";
/// Bytes the nodes received from clients.
pub const BYTES_IN: &str = "bytes_in";
/// Bytes the nodes sent to clients.
pub const BYTES_OUT: &str = "bytes_out";
/// fsync/fdatasync calls of the nodes, as the server counts them (absent where it does not).
pub const FSYNCS: &str = "fsyncs";
/// CPU the nodes' processes used, µs (from `/proc`, where lockbench sees their processes).
pub const CPU_US: &str = "cpu_us";

/// Counters of one service, summed over its nodes (or, for a counter every node keeps of the
/// same thing, such as a consensus log, the most advanced node's).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// The nodes read, sorted: a reading on other nodes (a failover moved the master) is not
    /// comparable with this one.
    pub nodes: Vec<SocketAddr>,
    /// Counter name → value so far: [`TOTAL`], [`BYTES_IN`], [`BYTES_OUT`] and the service's
    /// own (a command's calls, row-lock waits).
    pub counters: BTreeMap<String, u64>,
}

impl Reading {
    /// Adds `counters` read on `node`.
    pub fn add(&mut self, node: SocketAddr, counters: BTreeMap<String, u64>) {
        self.nodes.push(node);
        self.nodes.sort();
        for (k, v) in counters {
            *self.counters.entry(k).or_default() += v;
        }
    }
}

/// What a service's counters count, for the reader of the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meter {
    /// The unit of [`TOTAL`]: `commands`, `statements`, `requests`, `packets`.
    pub unit: &'static str,
    /// Where the counters come from, in a few words.
    pub source: &'static str,
}

/// `key:value` lines of a Redis `INFO` answer (section headers and blank lines skipped).
pub fn info_fields(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim().split_once(':'))
}

/// The counters of a Redis (or Valkey) `INFO stats commandstats` answer: [`TOTAL`] (calls of
/// every command, those a Lua script runs included: commandstats cannot tell them apart),
/// `cmd.<name>` (each command's calls; subcommands such as `client|setinfo` keep their name),
/// and the client network bytes (`total_net_input_bytes` less the replication stream's
/// `total_net_repl_input_bytes`, which Redis 7.0 counts apart; likewise for output).
pub fn redis_counters(info: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut total = 0;
    let mut bytes = [0u64; 4];
    for (k, v) in info_fields(info) {
        if let Some(cmd) = k.strip_prefix("cmdstat_") {
            // calls=12,usec=34,usec_per_call=2.83,rejected_calls=0,failed_calls=0
            let calls = v
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            total += calls;
            out.insert(format!("cmd.{cmd}"), calls);
        } else if let Some(i) = [
            "total_net_input_bytes",
            "total_net_output_bytes",
            "total_net_repl_input_bytes",
            "total_net_repl_output_bytes",
        ]
        .iter()
        .position(|n| *n == k)
        {
            bytes[i] = v.trim().parse().unwrap_or(0);
        }
    }
    out.insert(TOTAL.to_string(), total);
    if let Some(f) = redis_fsyncs(info) {
        out.insert(FSYNCS.to_string(), f);
    }
    out.insert(BYTES_IN.to_string(), bytes[0].saturating_sub(bytes[2]));
    out.insert(BYTES_OUT.to_string(), bytes[1].saturating_sub(bytes[3]));
    out
}

/// A Redis node's fsyncs, from `INFO persistence`, when it can tell: with the append-only
/// file off, only an RDB snapshot syncs (once per file written), so `rdb_saves` counts them;
/// with it on, Redis counts no fsyncs (`None`).
pub fn redis_fsyncs(info: &str) -> Option<u64> {
    let field = |name: &str| {
        info_fields(info)
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.trim())
    };
    match field("aof_enabled")? {
        "0" => field("rdb_saves")?.parse().ok(),
        _ => None,
    }
}

/// The samples of metric `name` in a Prometheus text exposition, with their label text
/// (`grpc_method="Range",…`, empty without labels); Go prints large values as `1.2e+06`.
pub fn prometheus_samples<'a>(
    text: &'a str,
    name: &'a str,
) -> impl Iterator<Item = (&'a str, u64)> + 'a {
    text.lines().filter_map(move |l| {
        let rest = l.strip_prefix(name)?;
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once("} ")?,
            None => ("", rest.strip_prefix(' ')?),
        };
        let v = value.split_whitespace().next()?.parse::<f64>().ok()?;
        Some((labels, v.round() as u64))
    })
}

/// The value of label `label` in a sample's label text.
pub fn label<'a>(labels: &'a str, label: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == label).then(|| v.trim().trim_matches('"'))
    })
}

/// `key value` lines of ZooKeeper's `mntr` answer (tab-separated) whose value is a whole
/// number (`zk_version` and `zk_server_state` are text; gauges are numbers too).
pub fn mntr_fields(text: &str) -> impl Iterator<Item = (&str, u64)> {
    text.lines().filter_map(|l| {
        let (k, v) = l.split_once(char::is_whitespace)?;
        Some((k.trim(), v.trim().parse::<u64>().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_info_gives_commands_and_bytes() {
        let info = "# Stats\r\ntotal_connections_received:3\r\ntotal_net_input_bytes:1200\r\n\
                    total_net_output_bytes:3900\r\ntotal_net_repl_input_bytes:0\r\n\
                    total_net_repl_output_bytes:500\r\n\r\n# Commandstats\r\n\
                    cmdstat_set:calls=10,usec=30,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r\n\
                    cmdstat_evalsha:calls=7,usec=70,usec_per_call=10.00\r\n\
                    cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50\r\n";
        let c = redis_counters(info);
        assert_eq!(c[TOTAL], 19);
        assert_eq!(c["cmd.set"], 10);
        assert_eq!(c["cmd.evalsha"], 7);
        assert_eq!(c["cmd.client|setinfo"], 2);
        assert_eq!((c[BYTES_IN], c[BYTES_OUT]), (1200, 3400));
        assert!(!c.contains_key("total_net_repl_input_bytes"));
        assert!(!c.contains_key(FSYNCS), "no persistence section, no fsyncs");
        let off = "aof_enabled:0\r\nrdb_saves:2\r\n";
        assert_eq!(redis_counters(off)[FSYNCS], 2);
        assert_eq!(redis_fsyncs("aof_enabled:1\r\nrdb_saves:2\r\n"), None);
        // An answer without commands still has a total.
        assert_eq!(redis_counters("# Stats\n")[TOTAL], 0);
    }

    #[test]
    fn prometheus_samples_keep_their_labels() {
        let text = "# HELP grpc_server_msg_received_total x\n\
                    # TYPE grpc_server_msg_received_total counter\n\
                    grpc_server_msg_received_total{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 12\n\
                    grpc_server_msg_received_total{grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\",grpc_type=\"bidi_stream\"} 1.5e+06\n\
                    grpc_server_msg_received_total_other 3\n\
                    etcd_server_proposals_committed_total 42\n";
        let s: Vec<(&str, u64)> =
            prometheus_samples(text, "grpc_server_msg_received_total").collect();
        assert_eq!(s.len(), 2);
        assert_eq!(label(s[0].0, "grpc_method"), Some("Range"));
        assert_eq!(
            (label(s[1].0, "grpc_method"), s[1].1),
            (Some("Watch"), 1_500_000)
        );
        let p: Vec<_> = prometheus_samples(text, "etcd_server_proposals_committed_total").collect();
        assert_eq!(p, vec![("", 42)]);
    }

    #[test]
    fn mntr_lines_are_numbers_or_skipped() {
        let text = "zk_version\t3.8.0-debian\nzk_packets_received\t120\nzk_packets_sent\t118\n\
                    zk_server_state\tleader\nzk_avg_latency\t0.5\n";
        let f: BTreeMap<&str, u64> = mntr_fields(text).collect();
        assert_eq!(f["zk_packets_received"], 120);
        assert_eq!(f["zk_packets_sent"], 118);
        assert!(!f.contains_key("zk_version") && !f.contains_key("zk_avg_latency"));
    }

    #[test]
    fn a_reading_sums_its_nodes() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let mut r = Reading::default();
        r.add(b, BTreeMap::from([(TOTAL.to_string(), 3)]));
        r.add(
            a,
            BTreeMap::from([(TOTAL.to_string(), 4), (BYTES_IN.into(), 1)]),
        );
        assert_eq!(r.nodes, vec![a, b]);
        assert_eq!((r.counters[TOTAL], r.counters[BYTES_IN]), (7, 1));
    }
}

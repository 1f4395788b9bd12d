//! The chaos file: a list of faults, or a schedule generated from the run's seed.
//!
//! TOML → raw structs (unknown keys rejected) → [`ChaosPlan::load`], resolved against the
//! workload: durations may be relative to its lock ttl (`"3x ttl"`), faults must start inside
//! the load, and a generated schedule is drawn from its seed. Every error names the file, the
//! field and the expected form, like workload errors.

use std::path::Path;
use std::time::Duration;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize, Serializer};

use super::holder::Point;
use crate::cluster::{Provisioner, Service};

/// Bound of each command of a `command` fault unless the file sets `timeout`.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
use crate::workload::Workload;

/// Errors in a chaos file.
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// The file could not be read.
    #[error("{file}: cannot read chaos file: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    /// Not valid TOML, or unknown / mistyped keys.
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    /// A value is out of range or does not fit the other values.
    #[error("{file}: {field} = {value}: expected {expected}")]
    Invalid {
        file: String,
        field: String,
        value: String,
        expected: String,
    },
}

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// SIGKILL the target nodes; restart them when the fault ends.
    Kill,
    /// SIGSTOP the target (a server node, or a client worker process); SIGCONT at the end.
    Pause,
    /// Shift (`jump`) or speed up (`rate`) CLOCK_REALTIME of the target Redis nodes.
    Clock,
    /// Cut the target nodes off from the service's other nodes (and from some clients, see
    /// [`ClientSide`]) with iptables rules in their network namespaces; remove the rules at
    /// the end.
    Partition,
    /// Run the file's own shell command (`run`) at the start and its `heal` command at the
    /// end, each bounded by `timeout`: how faults reach servers lockbench does not own.
    Command,
}

/// Which client processes a partition also cuts from the isolated nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientSide {
    /// The second half of the workers lose the isolated nodes, the first half still reach
    /// them: the split in which an old master keeps taking writes from some clients while
    /// the others move on to a new one.
    Split,
    /// Every client still reaches the isolated nodes (servers are cut from each other only).
    None,
    /// No client reaches the isolated nodes.
    All,
}

/// Who a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The Redis master (as Sentinel says now), or the only node of a single-node service.
    Master,
    /// The ZooKeeper / etcd leader (as the servers say now); the master for Redis.
    Leader,
    /// One node of the service, drawn from the seed.
    One,
    /// The largest minority of the service's nodes (1 of 3, 2 of 5).
    Minority,
    /// The smallest majority (2 of 3, 3 of 5).
    Majority,
    /// Every node of the service.
    All,
    /// The client process whose buyer next reaches the fault's [`Point`] while holding a lock
    /// (pause only; by default between its read of the stock and its write).
    Holder,
    /// One client process, drawn from the seed (pause only).
    Client,
    /// Whatever a `command` fault's own commands hit (set for `kind = "command"`, never
    /// written in a file).
    Command,
}

impl Target {
    /// Whether the target is a client process rather than a server node.
    pub fn is_client(self) -> bool {
        matches!(self, Self::Holder | Self::Client)
    }
}

/// How a clock fault changes the clock.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClockChange {
    /// Added to CLOCK_REALTIME, ms (negative: back in time).
    pub jump_ms: i64,
    /// Speed of the clock (1.0 = real time).
    pub rate: f64,
}

/// One fault of the resolved schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultSpec {
    /// 1-based, in start order.
    pub id: usize,
    /// What it does.
    pub kind: FaultKind,
    /// Who it hits.
    pub target: Target,
    /// Which service's nodes (server targets); `None`: the strategy's lock service.
    pub service: Option<Service>,
    /// Start, from the start of the load.
    #[serde(serialize_with = "human")]
    pub at: Duration,
    /// How long it lasts before it is healed.
    #[serde(serialize_with = "human")]
    pub duration: Duration,
    /// Clock faults only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockChange>,
    /// Partition faults only: which clients are cut too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clients: Option<ClientSide>,
    /// Command faults only: what to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandFault>,
    /// Holder pauses only: where in the holder's attempt it stops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point: Option<Point>,
}

/// The shell commands of a `command` fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandFault {
    /// Run with `sh -c` when the fault starts.
    pub run: String,
    /// Run with `sh -c` when it ends, always (also after `run` failed, and on Ctrl-C).
    pub heal: String,
    /// Bound of each command; it is killed (its whole process group) when it runs out.
    #[serde(serialize_with = "human")]
    pub timeout: Duration,
}

impl FaultSpec {
    /// A fault without clock change or client side (numbered once the plan is sorted).
    fn new(
        kind: FaultKind,
        target: Target,
        service: Option<Service>,
        at: Duration,
        duration: Duration,
    ) -> Self {
        Self {
            id: 0,
            kind,
            target,
            service,
            at,
            duration,
            clock: None,
            clients: None,
            command: None,
            point: None,
        }
    }

    /// Short label such as `pause holder` or `kill redis master`.
    pub fn label(&self) -> String {
        let kind = match self.kind {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Clock => "clock",
            FaultKind::Partition => "partition",
            FaultKind::Command => {
                return match &self.command {
                    Some(c) => format!("command `{}`", short(&c.run)),
                    None => "command".into(),
                };
            }
        };
        let target = serde_json::to_value(self.target)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        match self.service {
            Some(s) => format!("{kind} {} {target}", service_name(s)),
            None => format!("{kind} {target}"),
        }
    }
}

/// The first line of a command, cut to 40 characters, for labels.
fn short(cmd: &str) -> String {
    let line = cmd.trim().lines().next().unwrap_or_default();
    match line.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// Lower-case name of a service, as written in chaos files.
pub fn service_name(s: Service) -> &'static str {
    match s {
        Service::Mariadb => "mariadb",
        Service::Redis => "redis",
        Service::Sentinel => "sentinel",
        Service::Zookeeper => "zookeeper",
        Service::Etcd => "etcd",
    }
}

/// A validated chaos file, resolved against one workload.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChaosPlan {
    /// Where it came from.
    pub file: String,
    /// What the scenario shows (from the file).
    pub description: String,
    /// Faults sorted by start.
    pub faults: Vec<FaultSpec>,
}

impl ChaosPlan {
    /// Whether clients must run as worker processes: to pause one, or to put them in network
    /// namespaces of their own for a partition.
    pub fn needs_workers(&self) -> bool {
        self.faults
            .iter()
            .any(|f| f.target.is_client() || f.kind == FaultKind::Partition)
    }

    /// Whether any fault partitions the network (nodes then run in network namespaces).
    pub fn needs_network(&self) -> bool {
        self.faults.iter().any(|f| f.kind == FaultKind::Partition)
    }

    /// Longest pause of a client process: attempts may outlast their bound by this much.
    pub fn max_client_pause(&self) -> Duration {
        self.faults
            .iter()
            .filter(|f| f.target.is_client())
            .map(|f| f.duration)
            .max()
            .unwrap_or_default()
    }

    /// Whether any fault changes clocks (Redis nodes then start with the clock shim).
    pub fn needs_clock_shim(&self) -> bool {
        self.faults.iter().any(|f| f.kind == FaultKind::Clock)
    }

    /// Rejects, before anything starts, a fault that servers provisioned by `p` cannot take.
    pub fn check_provisioner(&self, p: Provisioner) -> Result<(), ChaosError> {
        for (i, f) in self.faults.iter().enumerate() {
            let field = format!("fault[{i}]");
            let reject = |field: String, value: String, expected: &str| {
                Err(ChaosError::Invalid {
                    file: self.file.clone(),
                    field,
                    value,
                    expected: expected.to_string(),
                })
            };
            let server_fault = !f.target.is_client() && f.kind != FaultKind::Command;
            match p {
                Provisioner::Target if server_fault => {
                    return reject(
                        format!("{field}.kind"),
                        format!("{:?}", self.kind_name(f.kind)),
                        "\"command\" (or a pause of a client): lockbench kills, pauses and cuts \
                         only servers it started; against an external target write the fault as \
                         commands, e.g. kind = \"command\", run = \"kubectl delete pod redis-0\", \
                         heal = \"kubectl wait …\"",
                    );
                }
                Provisioner::Containers if f.kind == FaultKind::Clock => {
                    return reject(
                        format!("{field}.kind"),
                        "\"clock\"".into(),
                        "kill, pause or partition: clock faults preload a library into local \
                         Redis processes, which containers do not have; use --provision local",
                    );
                }
                Provisioner::Containers
                    if f.kind == FaultKind::Partition && f.clients != Some(ClientSide::All) =>
                {
                    return reject(
                        format!("{field}.clients"),
                        format!("{:?}", self.client_side_name(f.clients)),
                        "\"all\": a container is partitioned by disconnecting it from the run's \
                         Docker network, which cuts it from every node and every client; split \
                         and node-only partitions need --provision local",
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn client_side_name(&self, c: Option<ClientSide>) -> String {
        serde_json::to_value(c.unwrap_or(ClientSide::Split))
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    fn kind_name(&self, k: FaultKind) -> String {
        serde_json::to_value(k)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Reads and validates `path` against `w`.
    pub fn load(path: &Path, w: &Workload) -> Result<Self, ChaosError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ChaosError::Read {
            file: file.clone(),
            source,
        })?;
        Self::parse(&file, &text, w)
    }

    /// Parses chaos text; `file` names it in errors.
    pub fn parse(file: &str, text: &str, w: &Workload) -> Result<Self, ChaosError> {
        let raw: RawChaos = toml::from_str(text).map_err(|e| ChaosError::Parse {
            file: file.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let v = Validator { file, w };
        let mut faults = Vec::new();
        for (i, f) in raw.fault.iter().enumerate() {
            faults.push(v.fault(&format!("fault[{i}]"), f)?);
        }
        if let Some(r) = &raw.random {
            faults.extend(v.generate(r)?);
        }
        if faults.is_empty() {
            return Err(v.invalid(
                "fault",
                "none",
                "at least one [[fault]] table or a [random] table",
            ));
        }
        faults.sort_by_key(|f| f.at);
        for (i, f) in faults.iter_mut().enumerate() {
            f.id = i + 1;
        }
        Ok(Self {
            file: file.to_string(),
            description: raw.description.unwrap_or_default().trim().to_string(),
            faults,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChaos {
    description: Option<String>,
    #[serde(default)]
    fault: Vec<RawFault>,
    random: Option<RawRandom>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    kind: String,
    target: Option<String>,
    service: Option<String>,
    at: String,
    duration: String,
    jump: Option<String>,
    rate: Option<f64>,
    clients: Option<String>,
    run: Option<String>,
    heal: Option<String>,
    timeout: Option<String>,
    point: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRandom {
    kinds: Vec<String>,
    target: Option<String>,
    service: Option<String>,
    /// Mean gap between one fault's end and the next one's start.
    every: String,
    /// Mean fault duration.
    duration: String,
    /// No fault before this offset.
    start: Option<String>,
}

const KINDS: &str = "one of \"kill\", \"pause\", \"clock\", \"partition\", \"command\"";
const TARGETS: &str = "one of \"master\", \"leader\", \"one\", \"minority\", \"majority\", \"all\", \"holder\", \"client\"";
const SERVICES: &str = "one of \"mariadb\", \"redis\", \"zookeeper\", \"etcd\"";
const POINTS: &str = "one of \"after-read\" (the default), \"after-acquire\", \"before-release\"";
const SPAN: &str =
    "a duration such as \"500ms\" or \"2s\", or a multiple of the lock ttl such as \"3x ttl\"";

struct Validator<'a> {
    file: &'a str,
    w: &'a Workload,
}

impl Validator<'_> {
    fn invalid(&self, field: &str, value: impl std::fmt::Display, expected: &str) -> ChaosError {
        ChaosError::Invalid {
            file: self.file.to_string(),
            field: field.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        }
    }

    /// An error for the first of `keys` that is set although this kind of fault takes none.
    fn none_set(
        &self,
        field: &dyn Fn(&str) -> String,
        keys: &[(&str, bool)],
        why: &str,
    ) -> Result<(), ChaosError> {
        match keys.iter().find(|(_, set)| *set) {
            Some((k, _)) => Err(self.invalid(&field(k), "set", &format!("no value: {why}"))),
            None => Ok(()),
        }
    }

    fn enumerated<T: for<'de> Deserialize<'de>>(
        &self,
        field: &str,
        text: &str,
        expected: &str,
    ) -> Result<T, ChaosError> {
        T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(text))
            .map_err(|_| self.invalid(field, format!("{text:?}"), expected))
    }

    /// `"2s"`, `"500ms"` or `"3x ttl"` / `"0.5x ttl"`.
    fn span(&self, field: &str, text: &str, allow_zero: bool) -> Result<Duration, ChaosError> {
        let bad = || self.invalid(field, format!("{text:?}"), SPAN);
        let t = text.trim();
        let d = match t.strip_suffix("ttl") {
            Some(factor) => {
                let factor = factor.trim().strip_suffix(['x', '×']).ok_or_else(bad)?;
                let f: f64 = factor.trim().parse().map_err(|_| bad())?;
                if !(0.0..=1000.0).contains(&f) {
                    return Err(bad());
                }
                self.w.lock.ttl.mul_f64(f)
            }
            None => humantime::parse_duration(t).map_err(|_| bad())?,
        };
        if d.is_zero() && !allow_zero {
            return Err(bad());
        }
        Ok(d)
    }

    fn service(&self, field: &str, s: &Option<String>) -> Result<Option<Service>, ChaosError> {
        s.as_deref()
            .map(|s| match s {
                "sentinel" => Err(self.invalid(
                    field,
                    format!("{s:?}"),
                    "a service that holds data (faults on the Redis nodes of a Sentinel set use \"redis\")",
                )),
                _ => self.enumerated(field, s, SERVICES),
            })
            .transpose()
    }

    fn fault(&self, at_field: &str, f: &RawFault) -> Result<FaultSpec, ChaosError> {
        let field = |k: &str| format!("{at_field}.{k}");
        let kind: FaultKind = self.enumerated(&field("kind"), &f.kind, KINDS)?;
        let at = self.span(&field("at"), &f.at, true)?;
        let duration = self.span(&field("duration"), &f.duration, false)?;
        if kind == FaultKind::Command {
            return self.command_fault(at_field, f, at, duration);
        }
        self.none_set(
            &field,
            &[
                ("run", f.run.is_some()),
                ("heal", f.heal.is_some()),
                ("timeout", f.timeout.is_some()),
            ],
            "only command faults take it",
        )?;
        let target = f
            .target
            .as_deref()
            .ok_or_else(|| self.invalid(&field("target"), "missing", TARGETS))?;
        let target: Target = match self.enumerated(&field("target"), target, TARGETS)? {
            Target::Command => return Err(self.invalid(&field("target"), "\"command\"", TARGETS)),
            t => t,
        };
        let service = self.service(&field("service"), &f.service)?;
        self.check(at_field, kind, target, service, at)?;
        let clock = match kind {
            FaultKind::Clock => {
                let jump_ms = match &f.jump {
                    Some(j) => {
                        let (neg, rest) = match j.trim().strip_prefix('-') {
                            Some(r) => (true, r),
                            None => (false, j.trim().trim_start_matches('+')),
                        };
                        let d = self.span(&field("jump"), rest, true).map_err(|_| {
                            self.invalid(
                                &field("jump"),
                                format!("{j:?}"),
                                "a signed duration such as \"+10s\", \"-2s\" or \"+3x ttl\"",
                            )
                        })?;
                        let ms = d.as_millis() as i64;
                        if neg { -ms } else { ms }
                    }
                    None => 0,
                };
                let rate = f.rate.unwrap_or(1.0);
                if !(rate.is_finite() && rate > 0.0 && rate <= 1000.0) {
                    return Err(self.invalid(
                        &field("rate"),
                        rate,
                        "the clock's speed, a number > 0 (2.0 = twice as fast)",
                    ));
                }
                if jump_ms == 0 && rate == 1.0 {
                    return Err(self.invalid(
                        &field("jump"),
                        "none",
                        "a clock fault with a jump (\"+10s\") or a rate other than 1.0",
                    ));
                }
                Some(ClockChange { jump_ms, rate })
            }
            _ => {
                for (k, set) in [("jump", f.jump.is_some()), ("rate", f.rate.is_some())] {
                    if set {
                        return Err(self.invalid(
                            &field(k),
                            "set",
                            "no value: only clock faults take it",
                        ));
                    }
                }
                None
            }
        };
        let clients = match (&f.clients, kind) {
            (Some(c), FaultKind::Partition) => Some(self.enumerated(
                &field("clients"),
                c,
                "one of \"split\", \"none\", \"all\"",
            )?),
            (None, FaultKind::Partition) => Some(ClientSide::Split),
            (Some(_), _) => {
                return Err(self.invalid(
                    &field("clients"),
                    "set",
                    "no value: only partition faults take it",
                ));
            }
            (None, _) => None,
        };
        let point = match (&f.point, target) {
            (Some(p), Target::Holder) => Some(self.enumerated(&field("point"), p, POINTS)?),
            (None, Target::Holder) => Some(Point::AfterRead),
            (Some(_), _) => {
                return Err(self.invalid(
                    &field("point"),
                    "set",
                    "no value: only pauses of the holder take it",
                ));
            }
            (None, _) => None,
        };
        Ok(FaultSpec {
            clock,
            clients,
            point,
            ..FaultSpec::new(kind, target, service, at, duration)
        })
    }

    /// `kind = "command"`: `run` and `heal` commands, an optional `timeout`, nothing else.
    fn command_fault(
        &self,
        at_field: &str,
        f: &RawFault,
        at: Duration,
        duration: Duration,
    ) -> Result<FaultSpec, ChaosError> {
        let field = |k: &str| format!("{at_field}.{k}");
        self.none_set(
            &field,
            &[
                ("target", f.target.is_some()),
                ("service", f.service.is_some()),
                ("jump", f.jump.is_some()),
                ("rate", f.rate.is_some()),
                ("clients", f.clients.is_some()),
                ("point", f.point.is_some()),
            ],
            "a command fault hits whatever its commands hit",
        )?;
        let command = |k: &str, v: &Option<String>| match v.as_deref().map(str::trim) {
            Some(c) if !c.is_empty() => Ok(c.to_string()),
            _ => Err(self.invalid(
                &field(k),
                v.as_deref().map_or("missing".into(), |c| format!("{c:?}")),
                "a shell command (run with sh -c)",
            )),
        };
        let run = command("run", &f.run)?;
        let heal = command("heal", &f.heal)?;
        let timeout = match &f.timeout {
            Some(t) => self.span(&field("timeout"), t, false)?,
            None => DEFAULT_COMMAND_TIMEOUT,
        };
        self.check(at_field, FaultKind::Command, Target::Command, None, at)?;
        Ok(FaultSpec {
            command: Some(CommandFault { run, heal, timeout }),
            ..FaultSpec::new(FaultKind::Command, Target::Command, None, at, duration)
        })
    }

    /// Combinations that cannot work, and faults that start after the load.
    fn check(
        &self,
        at_field: &str,
        kind: FaultKind,
        target: Target,
        service: Option<Service>,
        at: Duration,
    ) -> Result<(), ChaosError> {
        let field = |k: &str| format!("{at_field}.{k}");
        if target.is_client() && kind != FaultKind::Pause {
            return Err(self.invalid(
                &field("target"),
                format!("{target:?}").to_lowercase(),
                "a server target (master, leader, one, minority, majority, all): only `pause` \
                 hits client processes",
            ));
        }
        if kind == FaultKind::Partition && matches!(target, Target::All | Target::Majority) {
            return Err(self.invalid(
                &field("target"),
                format!("{target:?}").to_lowercase(),
                "master, leader, one or minority: a partition isolates some nodes from the rest",
            ));
        }
        if target.is_client() && service.is_some() {
            return Err(self.invalid(&field("service"), "set", "no service for a client target"));
        }
        if kind == FaultKind::Clock && service.is_some_and(|s| s != Service::Redis) {
            return Err(self.invalid(
                &field("service"),
                service_name(service.expect("checked")),
                "\"redis\": the clock shim is preloaded into Redis nodes only",
            ));
        }
        if at >= self.w.load.duration {
            return Err(self.invalid(
                &field("at"),
                humantime::format_duration(at),
                &format!(
                    "a start before the load ends (load.duration = {})",
                    humantime::format_duration(self.w.load.duration)
                ),
            ));
        }
        Ok(())
    }

    /// Draws a schedule: exponential gaps and durations around the given means, one fault at a
    /// time, from the workload's seed.
    fn generate(&self, r: &RawRandom) -> Result<Vec<FaultSpec>, ChaosError> {
        if r.kinds.is_empty() {
            return Err(self.invalid("random.kinds", "[]", "a non-empty list of kinds"));
        }
        let mut kinds = Vec::new();
        for (i, k) in r.kinds.iter().enumerate() {
            let kind: FaultKind = self.enumerated(&format!("random.kinds[{i}]"), k, KINDS)?;
            if matches!(
                kind,
                FaultKind::Clock | FaultKind::Partition | FaultKind::Command
            ) {
                return Err(self.invalid(
                    &format!("random.kinds[{i}]"),
                    format!("{k:?}"),
                    "\"kill\" or \"pause\" (list clock, partition and command faults as [[fault]])",
                ));
            }
            kinds.push(kind);
        }
        let target: Target = match &r.target {
            Some(t) => self.enumerated("random.target", t, TARGETS)?,
            None => Target::One,
        };
        let service = self.service("random.service", &r.service)?;
        let every = self.span("random.every", &r.every, false)?;
        let mean = self.span("random.duration", &r.duration, false)?;
        let first = match &r.start {
            Some(s) => self.span("random.start", s, true)?,
            None => every,
        };
        // A stream of its own, so changing the faults never changes the arrivals.
        let mut rng = ChaCha8Rng::seed_from_u64(self.w.seed ^ 0xc4a0_5eed);
        let exp = |rng: &mut ChaCha8Rng, mean: Duration| {
            let u: f64 = rng.random();
            // Clamped to [0.2, 3] × mean: no zero-length faults, no fault longer than a run.
            mean.mul_f64((-(1.0 - u).ln()).clamp(0.2, 3.0))
        };
        let mut out = Vec::new();
        let mut at = first;
        while at < self.w.load.duration && out.len() < 1000 {
            let kind = kinds[rng.random_range(0..kinds.len())];
            self.check("random", kind, target, service, at)?;
            let duration = exp(&mut rng, mean);
            let mut fault = FaultSpec::new(kind, target, service, at, duration);
            fault.point = (target == Target::Holder).then_some(Point::AfterRead);
            out.push(fault);
            at += duration + exp(&mut rng, every);
        }
        Ok(out)
    }
}

fn human<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload::parse(
            "w.toml",
            "[lock]\nttl = \"2s\"\n[load]\nduration = \"10s\"",
            &[],
        )
        .expect("valid workload")
    }

    fn err(text: &str) -> String {
        ChaosPlan::parse("c.toml", text, &workload())
            .expect_err("should be rejected")
            .to_string()
    }

    #[test]
    fn parses_faults_and_resolves_ttl_multiples() {
        let p = ChaosPlan::parse(
            "c.toml",
            r#"
description = "x"
[[fault]]
kind = "pause"
target = "holder"
at = "3s"
duration = "3x ttl"
[[fault]]
kind = "clock"
target = "majority"
service = "redis"
at = "1s"
duration = "1s"
jump = "+1.5x ttl"
"#,
            &workload(),
        )
        .expect("valid");
        assert_eq!(p.faults.len(), 2);
        // Sorted by start, numbered from 1.
        assert_eq!((p.faults[0].id, p.faults[0].kind), (1, FaultKind::Clock));
        assert_eq!(p.faults[0].clock.expect("clock").jump_ms, 3000);
        assert_eq!(p.faults[1].duration, Duration::from_secs(6));
        assert!(p.needs_workers() && p.needs_clock_shim());
        assert_eq!(p.max_client_pause(), Duration::from_secs(6));
    }

    #[test]
    fn generated_schedule_is_reproducible_and_inside_the_load() {
        let text = "[random]\nkinds = [\"kill\", \"pause\"]\nevery = \"1s\"\nduration = \"500ms\"";
        let a = ChaosPlan::parse("c.toml", text, &workload()).expect("valid");
        let b = ChaosPlan::parse("c.toml", text, &workload()).expect("valid");
        assert_eq!(a, b);
        assert!(a.faults.len() >= 2, "{:?}", a.faults);
        for pair in a.faults.windows(2) {
            // One fault at a time.
            assert!(pair[0].at + pair[0].duration <= pair[1].at);
        }
        assert!(a.faults.iter().all(|f| f.at < Duration::from_secs(10)));
        let mut other = workload();
        other.seed = 99;
        let c = ChaosPlan::parse("c.toml", text, &other).expect("valid");
        assert_ne!(a.faults, c.faults, "another seed, another schedule");
    }

    #[test]
    fn command_faults_parse_and_servers_faults_are_refused_on_a_target() {
        let text = "[[fault]]\nkind = \"command\"\nat = \"1s\"\nduration = \"2s\"\n\
                    run = \"docker pause r1\"\nheal = \"docker unpause r1\"\ntimeout = \"5s\"\n";
        let plan = ChaosPlan::parse("c.toml", text, &workload()).unwrap();
        let f = &plan.faults[0];
        assert_eq!((f.kind, f.target), (FaultKind::Command, Target::Command));
        let c = f.command.as_ref().unwrap();
        assert_eq!(
            (c.run.as_str(), c.heal.as_str()),
            ("docker pause r1", "docker unpause r1")
        );
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(f.label(), "command `docker pause r1`");
        plan.check_provisioner(Provisioner::Target).unwrap();
        plan.check_provisioner(Provisioner::Local).unwrap();
        let cases = [
            (text.replace("timeout = \"5s\"\n", "target = \"one\"\n"), "fault[0].target"),
            (text.replace("run = \"docker pause r1\"\n", ""), "fault[0].run = missing"),
            (text.replace("\"docker unpause r1\"", "\" \""), "fault[0].heal"),
            (
                "[[fault]]\nkind = \"kill\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\nrun = \"x\"\n"
                    .to_string(),
                "fault[0].run = set: expected no value: only command faults take it",
            ),
            (
                "[[fault]]\nkind = \"kill\"\nat = \"1s\"\nduration = \"1s\"\n".to_string(),
                "fault[0].target = missing",
            ),
            (
                "[[fault]]\nkind = \"pause\"\ntarget = \"command\"\nat = \"1s\"\nduration = \"1s\"\n"
                    .to_string(),
                "fault[0].target = \"command\"",
            ),
        ];
        for (text, want) in cases {
            let e = ChaosPlan::parse("c.toml", &text, &workload())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let kill = "[[fault]]\nkind = \"kill\"\ntarget = \"master\"\nat = \"1s\"\nduration = \"1s\"\n\
                    [[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"1s\"\n";
        let plan = ChaosPlan::parse("k.toml", kill, &workload()).unwrap();
        let e = plan
            .check_provisioner(Provisioner::Target)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("k.toml: fault[0].kind = \"kill\": expected \"command\""),
            "{e}"
        );
        // A client pause alone is fine anywhere: the client is lockbench's own process.
        let holder =
            "[[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"1s\"\n";
        let plan = ChaosPlan::parse("h.toml", holder, &workload()).unwrap();
        plan.check_provisioner(Provisioner::Target).unwrap();
    }

    #[test]
    fn containers_take_kills_pauses_and_whole_partitions_only() {
        let fault = |kind: &str, extra: &str| {
            let text = format!(
                "[[fault]]\nkind = \"{kind}\"\ntarget = \"leader\"\nat = \"1s\"\n\
                 duration = \"1s\"\n{extra}"
            );
            ChaosPlan::parse("c.toml", &text, &workload()).unwrap()
        };
        for ok in [
            fault("kill", ""),
            fault("pause", ""),
            fault("partition", "clients = \"all\"\n"),
        ] {
            ok.check_provisioner(Provisioner::Containers).unwrap();
        }
        let cases = [
            (
                fault("clock", "jump = \"+1s\"\n"),
                "c.toml: fault[0].kind = \"clock\": expected kill, pause or partition",
            ),
            (
                fault("partition", ""),
                "c.toml: fault[0].clients = \"split\": expected \"all\"",
            ),
            (
                fault("partition", "clients = \"none\"\n"),
                "c.toml: fault[0].clients = \"none\": expected \"all\"",
            ),
        ];
        for (plan, want) in cases {
            let e = plan
                .check_provisioner(Provisioner::Containers)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{e}");
            // The same plans run on local processes.
            plan.check_provisioner(Provisioner::Local).unwrap();
        }
    }

    #[test]
    fn the_shipped_target_chaos_example_parses() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap();
        let w = Workload::load(&root.join("workloads/chaos.toml"), &[]).unwrap();
        let plan = ChaosPlan::load(&root.join("targets/example-chaos.toml"), &w).unwrap();
        assert!(plan.faults.iter().all(|f| f.kind == FaultKind::Command));
        plan.check_provisioner(Provisioner::Target).unwrap();
    }

    #[test]
    fn holder_pauses_land_after_the_read_unless_told_otherwise() {
        let holder =
            "[[fault]]\nkind = \"pause\"\ntarget = \"holder\"\nat = \"1s\"\nduration = \"1s\"\n";
        let plan = ChaosPlan::parse("h.toml", holder, &workload()).unwrap();
        assert_eq!(plan.faults[0].point, Some(Point::AfterRead));
        for p in Point::ALL {
            let text = format!("{holder}point = \"{}\"\n", p.name());
            let plan = ChaosPlan::parse("h.toml", &text, &workload()).unwrap();
            assert_eq!(plan.faults[0].point, Some(p));
        }
        let server = holder.replace("\"holder\"", "\"one\"");
        let plan = ChaosPlan::parse("h.toml", &server, &workload()).unwrap();
        assert_eq!(
            plan.faults[0].point, None,
            "only holder pauses have a point"
        );
    }

    #[test]
    fn bad_files_name_file_field_and_form() {
        let base =
            "[[fault]]\nkind = \"pause\"\ntarget = \"one\"\nat = \"1s\"\nduration = \"1s\"\n";
        let cases = [
            (
                base.replace("\"pause\"", "\"explode\""),
                "fault[0].kind = \"explode\"",
            ),
            (
                base.replace("\"one\"", "\"boss\""),
                "fault[0].target = \"boss\"",
            ),
            (
                base.replace("at = \"1s\"", "at = \"soon\""),
                "fault[0].at = \"soon\"",
            ),
            (
                base.replace("duration = \"1s\"", "duration = \"2x lease\""),
                "fault[0].duration",
            ),
            (
                base.replace("at = \"1s\"", "at = \"20s\""),
                "before the load ends",
            ),
            (
                base.replace("\"pause\"", "\"kill\"")
                    .replace("\"one\"", "\"holder\""),
                "only `pause`",
            ),
            (format!("{base}jump = \"+1s\"\n"), "only clock faults"),
            (
                format!("{base}point = \"after-read\"\n"),
                "fault[0].point = set: expected no value: only pauses of the holder take it",
            ),
            (
                format!(
                    "{}point = \"mid-air\"\n",
                    base.replace("\"one\"", "\"holder\"")
                ),
                "fault[0].point = \"mid-air\": expected one of \"after-read\" (the default)",
            ),
            (base.replace("\"pause\"", "\"clock\""), "fault[0].jump"),
            (
                format!("{base}colour = \"red\"\n"),
                "unknown field `colour`",
            ),
            (
                "description = \"nothing\"".to_string(),
                "at least one [[fault]]",
            ),
            (
                "[random]\nkinds = []\nevery = \"1s\"\nduration = \"1s\"".to_string(),
                "random.kinds",
            ),
        ];
        for (text, want) in cases {
            let e = err(&text);
            assert!(e.starts_with("c.toml: "), "{e}");
            assert!(e.contains(want), "expected {want:?} in: {e}");
        }
    }
}

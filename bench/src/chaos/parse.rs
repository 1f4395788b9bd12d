//! Reading a chaos file: TOML → raw structs (unknown keys rejected) → a [`ChaosPlan`]
//! resolved against the workload. Every error names the file, the field and the expected form.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;

use super::holder::Point;
use super::plan::*;
use crate::cluster::Service;
use crate::names::one_of;
use crate::workload::Workload;

impl ChaosPlan {
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
    /// On a Redis Cluster: the SKU whose slot's master or replica is hit.
    sku: Option<u32>,
    /// Delay faults: each packet's wait, and how far it may stray either way.
    delay: Option<String>,
    jitter: Option<String>,
    /// Loss faults: the share of packets dropped.
    loss: Option<f64>,
    /// Bandwidth faults: `"1mbit"`.
    bandwidth: Option<String>,
    /// Slow-disk faults: whether `write` waits too (default false: fsync and fdatasync only).
    writes: Option<bool>,
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

/// The keys of a fault table that only some kinds take; all unset in a generated fault.
#[derive(Default)]
struct Extras<'a> {
    jump: Option<&'a str>,
    rate: Option<f64>,
    clients: Option<&'a str>,
    point: Option<&'a str>,
    sku: Option<u32>,
    delay: Option<&'a str>,
    jitter: Option<&'a str>,
    loss: Option<f64>,
    bandwidth: Option<&'a str>,
    writes: Option<bool>,
}

const SERVICES: &str = "one of \"mariadb\", \"redis\", \"redis-cluster\", \"zookeeper\", \"etcd\"";
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

    /// One of an enum's names.
    fn named<T: FromStr>(&self, field: &str, text: &str, expected: &str) -> Result<T, ChaosError> {
        text.parse()
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
                _ => self.named(field, s, SERVICES),
            })
            .transpose()
    }

    fn fault(&self, at_field: &str, f: &RawFault) -> Result<FaultSpec, ChaosError> {
        let field = |k: &str| format!("{at_field}.{k}");
        let kind: FaultKind = self.named(&field("kind"), &f.kind, &one_of(FaultKind::NAMES))?;
        let at = self.span(&field("at"), &f.at, true)?;
        let duration = self.span(&field("duration"), &f.duration, false)?;
        let fault = if kind == FaultKind::Command {
            Fault::Command(self.command_fault(&field, f)?)
        } else {
            self.none_set(
                &field,
                &[
                    ("run", f.run.is_some()),
                    ("heal", f.heal.is_some()),
                    ("timeout", f.timeout.is_some()),
                ],
                "only command faults take it",
            )?;
            let targets = one_of(Target::NAMES);
            let target = f
                .target
                .as_deref()
                .ok_or_else(|| self.invalid(&field("target"), "missing", &targets))?;
            let target: Target = self.named(&field("target"), target, &targets)?;
            let service = self.service(&field("service"), &f.service)?;
            let extras = Extras {
                jump: f.jump.as_deref(),
                rate: f.rate,
                clients: f.clients.as_deref(),
                point: f.point.as_deref(),
                sku: f.sku,
                delay: f.delay.as_deref(),
                jitter: f.jitter.as_deref(),
                loss: f.loss,
                bandwidth: f.bandwidth.as_deref(),
                writes: f.writes,
            };
            self.aim(&field, kind, target, service, &extras)?
        };
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
        Ok(FaultSpec {
            id: 0,
            at,
            duration,
            fault,
        })
    }

    /// The fault `kind` does to `target`: combinations that cannot work are errors, and so are
    /// extras this kind or target does not take.
    fn aim(
        &self,
        field: &dyn Fn(&str) -> String,
        kind: FaultKind,
        target: Target,
        service: Option<Service>,
        x: &Extras,
    ) -> Result<Fault, ChaosError> {
        self.check_aim(field, kind, target, service)?;
        self.check_extras(field, kind, target, x)?;
        let nodes = match target {
            Target::Holder => {
                let point = match x.point {
                    Some(p) => self.named(&field("point"), p, POINTS)?,
                    None => Point::AfterRead,
                };
                return Ok(Fault::PauseClient(ClientPause::Holder(point)));
            }
            Target::Client => return Ok(Fault::PauseClient(ClientPause::Any)),
            Target::Reaper if self.w.pay.is_none() => {
                return Err(self.invalid(
                    &field("target"),
                    target,
                    "a target the workload has: \"reaper\" pauses the reapers of [pay], and \
                     the workload has no [pay]",
                ));
            }
            Target::Reaper => return Ok(Fault::PauseClient(ClientPause::Reaper)),
            Target::Nodes(n) => n,
        };
        self.check_servers(field, target, nodes, service, x)?;
        let servers = Servers {
            nodes,
            service,
            sku: x.sku,
        };
        self.server_fault(field, kind, servers, x)
    }

    /// Refuses a kind of fault aimed where it cannot work: a client, or a service it cannot
    /// reach.
    fn check_aim(
        &self,
        field: &dyn Fn(&str) -> String,
        kind: FaultKind,
        target: Target,
        service: Option<Service>,
    ) -> Result<(), ChaosError> {
        if target.is_client() && kind != FaultKind::Pause {
            return Err(self.invalid(
                &field("target"),
                target,
                "a server target (master, leader, follower, one, minority, majority, all): only `pause` \
                 hits client processes",
            ));
        }
        // A slow or lossy majority is a fault of its own; a cut-off majority is the same
        // partition as a cut-off minority.
        if kind == FaultKind::Partition
            && matches!(target, Target::Nodes(NodeSet::All | NodeSet::Majority))
        {
            return Err(self.invalid(
                &field("target"),
                target,
                "master, leader, follower, one or minority: a partition isolates some nodes \
                 from the rest",
            ));
        }
        if target.is_client() && service.is_some() {
            return Err(self.invalid(&field("service"), "set", "no service for a client target"));
        }
        if let Some(s) = service.filter(|s| kind == FaultKind::Clock && *s != Service::Redis) {
            return Err(self.invalid(
                &field("service"),
                s,
                "\"redis\": the clock shim is preloaded into Redis nodes only",
            ));
        }
        Ok(())
    }

    /// Refuses extras that this kind or target does not take.
    fn check_extras(
        &self,
        field: &dyn Fn(&str) -> String,
        kind: FaultKind,
        target: Target,
        x: &Extras,
    ) -> Result<(), ChaosError> {
        if kind != FaultKind::Clock {
            let keys = [("jump", x.jump.is_some()), ("rate", x.rate.is_some())];
            self.none_set(field, &keys, "only clock faults take it")?;
        }
        if kind != FaultKind::Partition && !kind.is_network() {
            let keys = [("clients", x.clients.is_some())];
            self.none_set(field, &keys, "only partition and network faults take it")?;
        }
        if !matches!(kind, FaultKind::Delay | FaultKind::SlowDisk) {
            let keys = [("delay", x.delay.is_some()), ("jitter", x.jitter.is_some())];
            self.none_set(field, &keys, "only delay and slow-disk faults take it")?;
        }
        let only = [
            (FaultKind::SlowDisk, "writes", x.writes.is_some()),
            (FaultKind::Loss, "loss", x.loss.is_some()),
            (FaultKind::Bandwidth, "bandwidth", x.bandwidth.is_some()),
        ];
        for (k, key, set) in only.into_iter().filter(|(k, ..)| *k != kind) {
            self.none_set(field, &[(key, set)], &format!("only {k} faults take it"))?;
        }
        if target != Target::Holder {
            let keys = [("point", x.point.is_some())];
            self.none_set(field, &keys, "only pauses of the holder take it")?;
        }
        Ok(())
    }

    /// Refuses `sku` and `replica` outside a Redis Cluster's slot.
    fn check_servers(
        &self,
        field: &dyn Fn(&str) -> String,
        target: Target,
        nodes: NodeSet,
        service: Option<Service>,
        x: &Extras,
    ) -> Result<(), ChaosError> {
        let slot_target = matches!(nodes, NodeSet::Master | NodeSet::Leader | NodeSet::Replica);
        let cluster = service.is_none_or(|s| s == Service::RedisCluster);
        if x.sku.is_some() && !(slot_target && cluster) {
            return Err(self.invalid(
                &field("sku"),
                "set",
                "no value: only a Redis Cluster's slot master or replica takes it (target = \
                 \"master\" or \"replica\", service = \"redis-cluster\")",
            ));
        }
        if nodes == NodeSet::Replica && !cluster {
            return Err(self.invalid(
                &field("target"),
                target,
                "a target of this service: \"replica\" is the replica of a Redis Cluster slot \
                 (service = \"redis-cluster\")",
            ));
        }
        Ok(())
    }

    /// The fault `kind` does to `servers`.
    fn server_fault(
        &self,
        field: &dyn Fn(&str) -> String,
        kind: FaultKind,
        servers: Servers,
        x: &Extras,
    ) -> Result<Fault, ChaosError> {
        Ok(match kind {
            FaultKind::Kill => Fault::Kill(servers),
            FaultKind::Pause => Fault::Pause(servers),
            FaultKind::PowerLoss => Fault::PowerLoss(servers),
            FaultKind::SlowDisk => {
                let (delay, jitter) = self.delay_jitter(field, x)?;
                Fault::SlowDisk {
                    servers,
                    disk: DiskDelay {
                        delay,
                        jitter,
                        writes: x.writes.unwrap_or(false),
                    },
                }
            }
            FaultKind::Clock => Fault::Clock {
                servers,
                change: self.clock_change(field, x)?,
            },
            FaultKind::Partition => Fault::Partition {
                servers,
                clients: match x.clients {
                    Some(c) => self.named(&field("clients"), c, &one_of(ClientSide::NAMES))?,
                    None => ClientSide::Split,
                },
            },
            k if k.is_network() => Fault::Network {
                servers,
                clients: match x.clients {
                    Some(c) => self.named(&field("clients"), c, &one_of(ClientSide::NAMES))?,
                    None => ClientSide::All,
                },
                impairment: self.impairment(field, kind, x)?,
            },
            _ => unreachable!("command faults are read by command_fault"),
        })
    }

    /// `delay` (+ `jitter`), `loss` or `bandwidth`, as `kind` asks.
    fn impairment(
        &self,
        field: &dyn Fn(&str) -> String,
        kind: FaultKind,
        x: &Extras,
    ) -> Result<Impairment, ChaosError> {
        Ok(match kind {
            FaultKind::Delay => {
                let (delay, jitter) = self.delay_jitter(field, x)?;
                Impairment::Delay { delay, jitter }
            }
            FaultKind::Loss => match x.loss {
                Some(share) if share > 0.0 && share <= 1.0 => Impairment::Loss { share },
                v => {
                    return Err(self.invalid(
                        &field("loss"),
                        v.map_or("missing".into(), |v| v.to_string()),
                        "the share of packets dropped, a number in (0, 1] such as 0.3",
                    ));
                }
            },
            FaultKind::Bandwidth => Impairment::Bandwidth {
                bits_per_s: self.bandwidth(&field("bandwidth"), x.bandwidth)?,
            },
            _ => Impairment::Reset,
        })
    }

    /// `delay` and its optional `jitter` (at most the delay): a packet's or an fsync's wait.
    fn delay_jitter(
        &self,
        field: &dyn Fn(&str) -> String,
        x: &Extras,
    ) -> Result<(Duration, Duration), ChaosError> {
        let form = "a duration from \"1ms\" to \"30s\", such as \"100ms\"";
        let delay = self.wait(&field("delay"), x.delay, form)?;
        let jitter_form = "a duration up to the delay, such as \"20ms\" (each packet or fsync \
                           waits delay ± up to jitter)";
        let jitter = match x.jitter {
            Some(j) => self.wait(&field("jitter"), Some(j), jitter_form)?,
            None => Duration::ZERO,
        };
        if jitter > delay {
            return Err(self.invalid(
                &field("jitter"),
                format!("{:?}", x.jitter.unwrap_or_default()),
                jitter_form,
            ));
        }
        Ok((delay, jitter))
    }

    /// A delay or jitter: a plain duration of at most 30 s (`"0ms"` only for a jitter).
    fn wait(&self, field: &str, text: Option<&str>, form: &str) -> Result<Duration, ChaosError> {
        let Some(t) = text else {
            return Err(self.invalid(field, "missing", form));
        };
        match humantime::parse_duration(t.trim()) {
            Ok(d)
                if d <= Duration::from_secs(30) && (!d.is_zero() || field.ends_with("jitter")) =>
            {
                Ok(d)
            }
            _ => Err(self.invalid(field, format!("{t:?}"), form)),
        }
    }

    /// `"1mbit"`: a number and one of tc's units (`bit`, `kbit`, `mbit`, `gbit`: powers of
    /// 1000 bits per second), optionally followed by `/s`.
    fn bandwidth(&self, field: &str, text: Option<&str>) -> Result<u64, ChaosError> {
        let form = "a rate such as \"1mbit\" or \"512kbit\" (bit, kbit, mbit or gbit per \
                    second), at least \"8kbit\"";
        let Some(t) = text else {
            return Err(self.invalid(field, "missing", form));
        };
        let bad = || self.invalid(field, format!("{t:?}"), form);
        let v = t.trim().to_ascii_lowercase();
        let v = v.strip_suffix("/s").unwrap_or(&v).trim_end();
        let (number, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
            .into_iter()
            .find_map(|(unit, scale)| v.strip_suffix(unit).map(|n| (n.trim(), scale)))
            .ok_or_else(bad)?;
        let n: f64 = number.parse().map_err(|_| bad())?;
        let bits = n * scale;
        if !(bits.is_finite() && (8e3..=1e12).contains(&bits)) {
            return Err(bad());
        }
        Ok(bits as u64)
    }

    /// `jump = "+1.5x ttl"` and / or `rate = 2.0`: at least one of them changes the clock.
    fn clock_change(
        &self,
        field: &dyn Fn(&str) -> String,
        x: &Extras,
    ) -> Result<ClockChange, ChaosError> {
        let jump_ms = match x.jump {
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
        let rate = x.rate.unwrap_or(1.0);
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
        Ok(ClockChange { jump_ms, rate })
    }

    /// `kind = "command"`: `run` and `heal` commands, an optional `timeout`, nothing else.
    fn command_fault(
        &self,
        field: &dyn Fn(&str) -> String,
        f: &RawFault,
    ) -> Result<CommandFault, ChaosError> {
        self.none_set(
            field,
            &[
                ("target", f.target.is_some()),
                ("service", f.service.is_some()),
                ("jump", f.jump.is_some()),
                ("rate", f.rate.is_some()),
                ("clients", f.clients.is_some()),
                ("point", f.point.is_some()),
                ("delay", f.delay.is_some()),
                ("jitter", f.jitter.is_some()),
                ("loss", f.loss.is_some()),
                ("bandwidth", f.bandwidth.is_some()),
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
        Ok(CommandFault { run, heal, timeout })
    }

    /// Draws a schedule: exponential gaps and durations around the given means, one fault at a
    /// time, from the workload's seed.
    fn generate(&self, r: &RawRandom) -> Result<Vec<FaultSpec>, ChaosError> {
        if r.kinds.is_empty() {
            return Err(self.invalid("random.kinds", "[]", "a non-empty list of kinds"));
        }
        let mut kinds = Vec::new();
        for (i, k) in r.kinds.iter().enumerate() {
            let field = format!("random.kinds[{i}]");
            let kind: FaultKind = self.named(&field, k, &one_of(FaultKind::NAMES))?;
            if !matches!(kind, FaultKind::Kill | FaultKind::Pause) {
                return Err(self.invalid(
                    &field,
                    format!("{k:?}"),
                    "\"kill\" or \"pause\" (list clock, partition and command faults as [[fault]])",
                ));
            }
            kinds.push(kind);
        }
        let target: Target = match &r.target {
            Some(t) => self.named("random.target", t, &one_of(Target::NAMES))?,
            None => Target::Nodes(NodeSet::One),
        };
        let service = self.service("random.service", &r.service)?;
        // One fault per listed kind, checked once; the schedule draws among them.
        let field = |k: &str| format!("random.{k}");
        let faults = kinds
            .into_iter()
            .map(|kind| self.aim(&field, kind, target, service, &Extras::default()))
            .collect::<Result<Vec<_>, _>>()?;
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
            let fault = faults[rng.random_range(0..faults.len())].clone();
            let duration = exp(&mut rng, mean);
            out.push(FaultSpec {
                id: 0,
                at,
                duration,
                fault,
            });
            at += duration + exp(&mut rng, every);
        }
        Ok(out)
    }
}

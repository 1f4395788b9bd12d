//! `lockbench k8s render`: Kubernetes manifests for a run whose workers are pods, against
//! servers named in a target file.
//!
//! What it writes, in one multi-document YAML stream (apply order):
//! - a ConfigMap `lockbench`: the effective workload, the target file and the chaos file;
//! - a headless Service `lockbench-coordinator` selecting the coordinator Pod: the workers'
//!   DNS name for it;
//! - the coordinator Pod (`lockbench coordinate`), with its results on an emptyDir that a
//!   second container keeps reachable for `kubectl cp` after the run;
//! - an Indexed Job `lockbench-workers` of N pods (`lockbench worker --connect`), each index
//!   run once: a retried index would connect a second worker under the same index.
//!
//! No secret value is rendered: the pods read the token and the servers' passwords from the
//! Secret `lockbench` ([`SECRET`]), which the user creates (see [`secret_command`]); its keys
//! are the variable names. Manifests are built as typed JSON values and emitted as YAML
//! (serde-saphyr), never from text templates.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Value, json};

use crate::chaos::{ChaosError, ChaosPlan};
use crate::cluster::ClusterError;
use crate::cluster::target::{OfflineTarget, PasswordVars};
use crate::workload::{Workload, WorkloadError};

/// Oldest Kubernetes that honours a Job's `backoffLimitPerIndex` and `podReplacementPolicy`
/// (beta and on by default from 1.29; GA in 1.33 and 1.34): an older API server drops them
/// and could run an index twice.
pub const MIN_KUBERNETES: &str = "1.29";
/// The Secret the pods read the token and the passwords from; its keys are variable names.
pub const SECRET: &str = "lockbench";
/// The ConfigMap holding the workload, target and chaos files.
pub const CONFIG_MAP: &str = "lockbench";
/// The coordinator Pod, and the headless Service the workers reach it by.
pub const COORDINATOR: &str = "lockbench-coordinator";
/// The Indexed Job of the workers.
pub const WORKERS_JOB: &str = "lockbench-workers";
pub use super::link::TOKEN_ENV;
/// The variable an Indexed Job gives each pod its index in.
pub const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// Where a worker reached over TCP reads each login's password: (login, variable), whatever
/// name the target file's `password_env` gives it.
use crate::cluster::credentials::PASSWORD_ENV as WORKER_PASSWORD_ENV;
/// The image `--image` defaults to: this version of lockbench.
pub const DEFAULT_IMAGE: &str = concat!("lockbench:", env!("CARGO_PKG_VERSION"));

/// Where the ConfigMap is mounted in the coordinator.
const CONFIG_DIR: &str = "/etc/lockbench";
/// The coordinator's emptyDir, and its results folder in it.
const RESULTS_DIR: &str = "/results";
const RESULTS_OUT: &str = "/results/run";
/// Room for the coordinator to audit and clean the target's prefix after a SIGTERM (each
/// clean-up call is bounded by 10 s).
const GRACE_S: u64 = 60;
/// The name of the coordinator's port (at most 15 characters).
const PORT_NAME: &str = "workers";
/// The label the Service selects the coordinator by, and the workers are told apart by.
const COMPONENT: &str = "app.kubernetes.io/component";

/// `lockbench k8s`
#[derive(Debug, Subcommand)]
pub enum K8sCommand {
    /// Write Kubernetes manifests for a run with its workers in a cluster: a ConfigMap (the
    /// workload, target and chaos files), the coordinator Pod and its headless Service, and an
    /// Indexed Job of --workers pods that connect to it. Needs Kubernetes >= 1.29.
    ///
    /// No secret value is written: the pods read LOCKBENCH_TOKEN and the target's passwords
    /// from the Secret `lockbench` (keys: the variable names), whose `kubectl create secret`
    /// command is printed on stderr and heads the YAML. The target's host names are checked
    /// for form only (they resolve inside the cluster); its password variables need not be set
    /// here.
    Render(RenderArgs),
}

/// `lockbench k8s render`
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Worker pods: the Job's completions and parallelism, one index each.
    #[arg(long, value_name = "N")]
    pub workers: u32,
    /// Workload file (TOML); the ConfigMap holds it with the --set overrides applied.
    #[arg(long, short = 'w', value_name = "FILE")]
    pub workload: PathBuf,
    /// Override a workload value, e.g. `--set load.clients=64` (repeatable).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
    /// Target file (TOML; see targets/k8s.toml): the servers, by names the pods resolve.
    #[arg(long, value_name = "FILE")]
    pub target: PathBuf,
    /// Strategy id (see `lockbench list`).
    #[arg(long, short = 's')]
    pub strategy: String,
    /// Chaos file (TOML): on a target, `command` faults and pauses of the workers.
    #[arg(long, value_name = "FILE")]
    pub chaos: Option<PathBuf>,
    /// Container image with `lockbench` on PATH (and `sleep` and `tar`, for `kubectl cp`).
    #[arg(long, default_value = DEFAULT_IMAGE)]
    pub image: String,
    /// Namespace of every object (and of the Service's DNS name).
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Port the coordinator listens on for its workers.
    #[arg(long, default_value_t = 7400)]
    pub port: u16,
    /// How long the coordinator Pod stays up from its start, so `kubectl cp` can copy its
    /// results after the run (delete it sooner when done).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
    pub keep: Duration,
    /// Write <DIR>/lockbench.yaml (and print its path) instead of the YAML on stdout.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Why no manifests were rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The workload file or a --set override is invalid.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The target file is invalid.
    #[error(transparent)]
    Target(#[from] ClusterError),
    /// The chaos file is invalid.
    #[error(transparent)]
    Chaos(#[from] ChaosError),
    /// A flag's value cannot go into a manifest.
    #[error("{flag} {value}: expected {expected}")]
    Flag {
        flag: &'static str,
        value: String,
        expected: String,
    },
    /// The manifests could not be written.
    #[error("write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// The files a render reads, validated.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The workload with its overrides.
    pub workload: Workload,
    /// The target file, read away from its network.
    pub target: OfflineTarget,
    /// The chaos plan and its file's text.
    pub chaos: Option<(ChaosPlan, String)>,
}

impl Inputs {
    /// Reads and validates the files `args` names, and the flags that go into manifests.
    pub fn load(args: &RenderArgs) -> Result<Self, RenderError> {
        check_flags(args)?;
        let workload = Workload::load(&args.workload, &args.set)?;
        let target = OfflineTarget::load(&args.target)?;
        check_vars(&target)?;
        let chaos = match &args.chaos {
            None => None,
            Some(path) => {
                let file = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|source| ChaosError::Read {
                    file: file.clone(),
                    source,
                })?;
                Some((ChaosPlan::parse(&file, &text, &workload)?, text))
            }
        };
        Ok(Self {
            workload,
            target,
            chaos,
        })
    }
}

/// The flags that become names and numbers in the manifests.
fn check_flags(args: &RenderArgs) -> Result<(), RenderError> {
    let bad = |flag, value: String, expected: &str| {
        Err(RenderError::Flag {
            flag,
            value,
            expected: expected.to_string(),
        })
    };
    if args.workers == 0 {
        return bad("--workers", "0".into(), "at least 1 worker pod");
    }
    if !is_dns_label(&args.namespace) {
        return bad(
            "--namespace",
            format!("{:?}", args.namespace),
            "a DNS label: at most 63 lower-case letters, digits or `-`, starting and ending \
             with a letter or digit",
        );
    }
    if args.image.is_empty() || args.image.contains(char::is_whitespace) {
        return bad(
            "--image",
            format!("{:?}", args.image),
            "an image reference, e.g. registry.example.com/lockbench:0.1.0",
        );
    }
    if args.port == 0 {
        return bad("--port", "0".into(), "a port from 1 to 65535");
    }
    if args.keep < Duration::from_secs(1) {
        return bad(
            "--keep",
            humantime::format_duration(args.keep).to_string(),
            "at least 1s",
        );
    }
    Ok(())
}

/// The Secret's keys are the target's variable names: none may be the token's.
fn check_vars(target: &OfflineTarget) -> Result<(), RenderError> {
    if secret_vars(&target.password_vars).contains(&TOKEN_ENV) {
        return Err(RenderError::Target(ClusterError::Target {
            file: target.checked.file.clone(),
            field: "password_env".into(),
            problem: format!("{TOKEN_ENV:?}: expected another variable: it holds the link's token"),
        }));
    }
    Ok(())
}

/// `[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?`: a namespace name.
fn is_dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&s.len())
        && s.starts_with(ok)
        && s.ends_with(ok)
        && s.chars().all(|c| ok(c) || c == '-')
}

/// What goes into the manifests beside the files: validated flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Strategy id.
    pub strategy: String,
    /// Worker pods.
    pub workers: u32,
    /// Container image.
    pub image: String,
    /// Namespace.
    pub namespace: String,
    /// The coordinator's port.
    pub port: u16,
    /// How long the coordinator Pod stays up, seconds.
    pub keep_s: u64,
    /// Where the workload came from (named in the ConfigMap's copy).
    pub workload_file: String,
    /// The --set overrides applied (named in the ConfigMap's copy).
    pub set: Vec<String>,
}

impl Settings {
    /// From the command line (checked by [`Inputs::load`]).
    pub fn of(args: &RenderArgs) -> Self {
        Self {
            strategy: args.strategy.clone(),
            workers: args.workers,
            image: args.image.clone(),
            namespace: args.namespace.clone(),
            port: args.port,
            keep_s: args.keep.as_secs(),
            workload_file: args.workload.display().to_string(),
            set: args.set.clone(),
        }
    }

    /// The workers' address of the coordinator: the Service's DNS name in the namespace (the
    /// pods' search path adds the cluster's domain).
    pub fn coordinator_addr(&self) -> String {
        format!("{COORDINATOR}.{}.svc:{}", self.namespace, self.port)
    }
}

/// The manifests as one multi-document YAML stream, headed by the steps to run them.
pub fn render(inputs: &Inputs, s: &Settings) -> String {
    let mut out = header(inputs, s);
    for m in manifests(inputs, s) {
        out.push_str("---\n");
        let doc = serde_saphyr::to_string(&m).expect("a manifest of JSON values serialises");
        out.push_str(doc.trim_end_matches('\n'));
        out.push('\n');
    }
    out
}

/// Renders `args` to stdout, or to <out>/lockbench.yaml (printing its path); the Secret's
/// command goes to stderr either way.
pub fn write(args: &RenderArgs, inputs: &Inputs) -> Result<(), RenderError> {
    let s = Settings::of(args);
    let yaml = render(inputs, &s);
    eprintln!(
        "Create the Secret first (values from your environment; never rendered):\n{}",
        secret_command(&s.namespace, &inputs.target.password_vars)
    );
    let Some(dir) = &args.out else {
        print!("{yaml}");
        return Ok(());
    };
    let path = out_file(dir);
    let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, yaml));
    written.map_err(|source| RenderError::Write {
        path: path.display().to_string(),
        source,
    })?;
    println!("{}", path.display());
    Ok(())
}

/// The `kubectl create secret` command that gives the pods what they read: a fresh token and
/// each password from the variable of the same name in the user's shell.
pub fn secret_command(namespace: &str, vars: &PasswordVars) -> String {
    let mut lines = vec![
        format!("kubectl create secret generic {SECRET} --namespace {namespace}"),
        format!("--from-literal={TOKEN_ENV}=\"$(openssl rand -hex 32)\""),
    ];
    for var in secret_vars(vars) {
        lines.push(format!("--from-literal={var}=\"${var}\""));
    }
    lines.join(" \\\n    ")
}

/// Every variable the target reads a password from, once each, in [`WORKER_PASSWORD_ENV`]'s
/// order.
fn secret_vars(vars: &PasswordVars) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for (_, var) in logins(vars) {
        if !out.contains(&var) {
            out.push(var);
        }
    }
    out
}

/// (the worker's variable, the target's variable) of each login with a password.
fn logins(vars: &PasswordVars) -> Vec<(&'static str, &str)> {
    WORKER_PASSWORD_ENV
        .iter()
        .filter_map(|(service, worker)| Some((*worker, vars.get(*service)?)))
        .collect()
}

/// The comment that heads the YAML: what it needs and how to run it.
fn header(inputs: &Inputs, s: &Settings) -> String {
    let ns = &s.namespace;
    let secret = secret_command(ns, &inputs.target.password_vars);
    let mut lines = vec![
        format!(
            "lockbench k8s render: strategy {} with {} worker pods against {}, namespace {ns}.",
            s.strategy, s.workers, inputs.target.checked.file
        ),
        format!(
            "Needs Kubernetes >= {MIN_KUBERNETES} (the Job's backoffLimitPerIndex and \
             podReplacementPolicy) and the image {} \
             with `lockbench` on PATH, `sleep` and `tar`.",
            s.image
        ),
        "1. Create the Secret (its values are never rendered):".into(),
    ];
    lines.extend(secret.lines().map(|l| format!("   {l}")));
    lines.extend([
        "2. kubectl apply -f lockbench.yaml".to_string(),
        format!("3. kubectl logs -f --namespace {ns} {COORDINATOR}   (the run's table at its end)"),
        format!(
            "4. kubectl cp --namespace {ns} -c results {COORDINATOR}:{RESULTS_OUT} ./k8s-run   \
             (the pod stays up {} from its start: --keep)",
            humantime::format_duration(Duration::from_secs(s.keep_s))
        ),
        format!(
            "5. kubectl delete -f lockbench.yaml && kubectl delete secret --namespace {ns} {SECRET}"
        ),
    ]);
    lines
        .iter()
        .map(|l| format!("# {}\n", one_line(l)))
        .collect()
}

/// `text` fit for a comment line: a file name or `--set` value with a line break in it must
/// not start a line of YAML or TOML of its own.
fn one_line(text: &str) -> String {
    text.replace(|c: char| c.is_control(), " ")
}

/// A Kubernetes object: its kind first, then the rest (serde_json's maps sort their keys).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    api_version: &'static str,
    kind: &'static str,
    metadata: Value,
    #[serde(flatten)]
    body: Value,
}

/// ConfigMap, Service, coordinator Pod, worker Job.
fn manifests(inputs: &Inputs, s: &Settings) -> Vec<Manifest> {
    vec![
        config_map(inputs, s),
        service(s),
        coordinator(inputs, s),
        workers(inputs, s),
    ]
}

/// Labels of every object; `component` tells them apart.
fn labels(component: &str) -> Value {
    json!({ "app.kubernetes.io/name": "lockbench", COMPONENT: component })
}

fn metadata(name: &str, s: &Settings, component: &str) -> Value {
    json!({ "name": name, "namespace": s.namespace, "labels": labels(component) })
}

fn config_map(inputs: &Inputs, s: &Settings) -> Manifest {
    let mut sets = String::new();
    for set in &s.set {
        sets.push_str(&format!(" --set {set}"));
    }
    let workload = format!(
        "# {}\n{}",
        one_line(&format!(
            "The effective workload: {}{sets} (lockbench k8s render).",
            s.workload_file
        )),
        toml::to_string(&inputs.workload).expect("a workload serialises to TOML")
    );
    let mut data = json!({
        "workload.toml": workload,
        "target.toml": inputs.target.text,
    });
    if let Some((_, text)) = &inputs.chaos {
        data["chaos.toml"] = json!(text);
    }
    Manifest {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: metadata(CONFIG_MAP, s, "config"),
        body: json!({ "data": data }),
    }
}

fn service(s: &Settings) -> Manifest {
    Manifest {
        api_version: "v1",
        kind: "Service",
        metadata: metadata(COORDINATOR, s, "coordinator"),
        body: json!({
            "spec": {
                // Headless: the name resolves to the coordinator Pod itself.
                "clusterIP": "None",
                "selector": labels("coordinator"),
                "ports": [{
                    "name": PORT_NAME,
                    "port": s.port,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }],
            }
        }),
    }
}

/// An environment variable read from the Secret's `key`.
fn from_secret(name: &str, key: &str) -> Value {
    json!({ "name": name, "valueFrom": { "secretKeyRef": { "name": SECRET, "key": key } } })
}

fn coordinator(inputs: &Inputs, s: &Settings) -> Manifest {
    let file = |name: &str| format!("{CONFIG_DIR}/{name}");
    let mut args = vec![
        "coordinate".to_string(),
        "--listen".into(),
        format!("0.0.0.0:{}", s.port),
        "--workers".into(),
        s.workers.to_string(),
        // Worker pods may wait for nodes and image pulls longer than a local run's agents.
        "--wait".into(),
        "10m".into(),
        "--strategy".into(),
        s.strategy.clone(),
        "--workload".into(),
        file("workload.toml"),
        "--target".into(),
        file("target.toml"),
    ];
    if inputs.chaos.is_some() {
        args.extend(["--chaos".into(), file("chaos.toml")]);
    }
    args.extend(["--out".into(), RESULTS_OUT.into()]);
    // The coordinator parses the target file, so it reads each password under the target's
    // own variable name.
    let mut env = vec![from_secret(TOKEN_ENV, TOKEN_ENV)];
    for var in secret_vars(&inputs.target.password_vars) {
        env.push(from_secret(var, var));
    }
    let results = json!({ "name": "results", "mountPath": RESULTS_DIR });
    let mut metadata = metadata(COORDINATOR, s, "coordinator");
    // `kubectl logs` shows the coordinator, not the keeper of its results.
    metadata["annotations"] = json!({ "kubectl.kubernetes.io/default-container": "coordinator" });
    Manifest {
        api_version: "v1",
        kind: "Pod",
        metadata,
        body: json!({
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": GRACE_S,
                "containers": [
                    {
                        "name": "coordinator",
                        "image": s.image,
                        "command": ["lockbench"],
                        "args": args,
                        "env": env,
                        "ports": [{ "name": PORT_NAME, "containerPort": s.port, "protocol": "TCP" }],
                        "volumeMounts": [
                            { "name": "config", "mountPath": CONFIG_DIR, "readOnly": true },
                            results,
                        ],
                    },
                    {
                        // `kubectl cp` needs a running container: this one keeps the results
                        // reachable after the coordinator has exited.
                        "name": "results",
                        "image": s.image,
                        "command": ["sleep", s.keep_s.to_string()],
                        "volumeMounts": [results],
                    },
                ],
                "volumes": [
                    { "name": "config", "configMap": { "name": CONFIG_MAP } },
                    { "name": "results", "emptyDir": {} },
                ],
            }
        }),
    }
}

fn workers(inputs: &Inputs, s: &Settings) -> Manifest {
    let mut env = vec![
        from_secret(TOKEN_ENV, TOKEN_ENV),
        // What the Job controller would add itself; explicit so `$(…)` below can use it.
        json!({
            "name": INDEX_ENV,
            "valueFrom": { "fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
            } }
        }),
    ];
    // Workers read each password under a fixed name, whatever the target file calls it.
    for (worker_var, var) in logins(&inputs.target.password_vars) {
        env.push(from_secret(worker_var, var));
    }
    Manifest {
        api_version: "batch/v1",
        kind: "Job",
        metadata: metadata(WORKERS_JOB, s, "worker"),
        body: json!({
            "spec": {
                "completionMode": "Indexed",
                "completions": s.workers,
                "parallelism": s.workers,
                // A retried index would connect a second worker under the same index; and
                // no pod replaces one that is still terminating (beta from 1.29 too).
                "backoffLimitPerIndex": 0,
                "podReplacementPolicy": "Failed",
                "template": {
                    "metadata": { "labels": labels("worker") },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{
                            "name": "worker",
                            "image": s.image,
                            "command": ["lockbench"],
                            "args": [
                                "worker",
                                "--connect",
                                s.coordinator_addr(),
                                "--index",
                                format!("$({INDEX_ENV})"),
                            ],
                            "env": env,
                        }],
                    },
                },
            }
        }),
    }
}

/// Where `lockbench.yaml` goes for `--out DIR`.
pub fn out_file(dir: &Path) -> PathBuf {
    dir.join("lockbench.yaml")
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORKERS: u32 = 3;
    const PORT: u16 = 7411;
    /// A variable cargo sets for every test run, used as a target's `password_env`: its value
    /// is in this process's environment, so a render that read it could leak it.
    const SET_VAR: &str = "CARGO_MANIFEST_DIR";

    fn inputs(target: &str, chaos: Option<&str>) -> Inputs {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let text = std::fs::read_to_string(root.join("workloads/flash-sale.toml")).unwrap();
        let workload = Workload::parse("flash-sale.toml", &text, &[]).unwrap();
        let chaos = chaos.map(|c| (ChaosPlan::parse("c.toml", c, &workload).unwrap(), c.into()));
        Inputs {
            workload,
            target: OfflineTarget::parse("t.toml", target).unwrap(),
            chaos,
        }
    }

    fn settings() -> Settings {
        Settings {
            strategy: "redis-setnx".into(),
            workers: WORKERS,
            image: "registry.example/lockbench:1".into(),
            namespace: "bench".into(),
            port: PORT,
            keep_s: 600,
            workload_file: "workloads/flash-sale.toml".into(),
            set: vec!["load.clients=8".into()],
        }
    }

    fn target_text() -> String {
        format!(
            "[mysql]\ndsn = \"mysql://bench@db.shop.svc:3306/shop\"\npassword_env = \"{SET_VAR}\"\n\
             [redis]\nnodes = [\"redis.shop.svc:6379\"]\npassword_env = \"REDIS_PW\"\n\
             [sentinel]\nnodes = [\"sentinel.shop.svc:26379\"]\npassword_env = \"REDIS_PW\"\n"
        )
    }

    /// The rendered YAML, parsed back: what `kubectl apply` would read.
    fn docs(inputs: &Inputs) -> (String, Vec<Value>) {
        let yaml = render(inputs, &settings());
        let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        (yaml, docs)
    }

    fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
        let mut of_kind = docs.iter().filter(|d| d["kind"] == kind);
        let doc = of_kind.next().unwrap_or_else(|| panic!("no {kind}"));
        assert!(of_kind.next().is_none(), "one {kind}");
        doc
    }

    fn container<'a>(pod_spec: &'a Value, name: &str) -> &'a Value {
        let all = pod_spec["containers"].as_array().unwrap();
        all.iter().find(|c| c["name"] == name).unwrap()
    }

    fn args(c: &Value) -> Vec<&str> {
        c["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect()
    }

    /// The value after `flag` in `args`.
    fn flag<'a>(args: &[&'a str], flag: &str) -> &'a str {
        let i = args.iter().position(|a| *a == flag);
        args[i.unwrap_or_else(|| panic!("no {flag} in {args:?}")) + 1]
    }

    fn env<'a>(c: &'a Value, name: &str) -> &'a Value {
        let all = c["env"].as_array().unwrap();
        let mut named = all.iter().filter(|e| e["name"] == name);
        let e = named.next().unwrap_or_else(|| panic!("no env {name}"));
        assert!(named.next().is_none(), "env {name} once");
        e
    }

    fn secret_key(e: &Value) -> &str {
        let r = &e["valueFrom"]["secretKeyRef"];
        assert_eq!(r["name"], SECRET, "{e}");
        r["key"].as_str().unwrap()
    }

    #[test]
    fn the_job_runs_each_index_once_and_no_pod_restarts() {
        let (_, docs) = docs(&inputs(&target_text(), None));
        let job = kind(&docs, "Job");
        assert_eq!(job["apiVersion"], "batch/v1");
        let spec = &job["spec"];
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["completions"], WORKERS);
        assert_eq!(spec["parallelism"], WORKERS);
        assert_eq!(spec["backoffLimitPerIndex"], 0);
        assert_eq!(spec["podReplacementPolicy"], "Failed");
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Never");
        let pod = kind(&docs, "Pod");
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ConfigMap", "Service", "Pod", "Job"]);
        for d in &docs {
            assert_eq!(d["metadata"]["namespace"], "bench", "{d}");
        }
    }

    #[test]
    fn the_headless_service_selects_the_coordinator_and_its_port() {
        let (_, docs) = docs(&inputs(&target_text(), None));
        let svc = kind(&docs, "Service");
        assert_eq!(svc["spec"]["clusterIP"], "None");
        let selector = svc["spec"]["selector"].as_object().unwrap();
        assert!(!selector.is_empty());
        let matches = |labels: &Value| selector.iter().all(|(k, v)| &labels[k] == v);
        let pod = kind(&docs, "Pod");
        assert!(matches(&pod["metadata"]["labels"]), "{pod}");
        let worker = &kind(&docs, "Job")["spec"]["template"]["metadata"]["labels"];
        assert!(
            !matches(worker),
            "the Service must not select workers: {worker}"
        );
        let port = &svc["spec"]["ports"][0];
        assert_eq!(port["port"], PORT);
        let coordinator = container(&pod["spec"], "coordinator");
        let listening = coordinator["ports"].as_array().unwrap().iter();
        let target = listening
            .filter(|p| p["name"] == port["targetPort"])
            .collect::<Vec<_>>();
        assert_eq!(target.len(), 1, "{coordinator}");
        assert_eq!(target[0]["containerPort"], PORT);
        let listen = format!("0.0.0.0:{PORT}");
        assert_eq!(flag(&args(coordinator), "--listen"), listen);
        assert_eq!(flag(&args(coordinator), "--workers"), WORKERS.to_string());
    }

    #[test]
    fn workers_connect_to_the_services_dns_name_under_their_job_index() {
        let (_, docs) = docs(&inputs(&target_text(), None));
        let svc = kind(&docs, "Service");
        let job = kind(&docs, "Job");
        let worker = container(&job["spec"]["template"]["spec"], "worker");
        let a = args(worker);
        assert_eq!(a[0], "worker");
        let want = format!(
            "{}.{}.svc:{}",
            svc["metadata"]["name"].as_str().unwrap(),
            svc["metadata"]["namespace"].as_str().unwrap(),
            svc["spec"]["ports"][0]["port"]
        );
        assert_eq!(flag(&a, "--connect"), want);
        // Kubernetes expands $(VAR) from the container's own env.
        assert_eq!(flag(&a, "--index"), "$(JOB_COMPLETION_INDEX)");
        let index = env(worker, "JOB_COMPLETION_INDEX");
        assert_eq!(
            index["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
    }

    #[test]
    fn no_password_is_rendered_and_every_secret_comes_by_reference() {
        let password = std::env::var(SET_VAR).expect("cargo sets CARGO_MANIFEST_DIR for tests");
        assert!(password.len() > 3);
        let (yaml, docs) = docs(&inputs(&target_text(), None));
        assert!(!yaml.contains(&password), "{yaml}");
        assert!(!docs.iter().any(|d| d["kind"] == "Secret"));
        let pod = kind(&docs, "Pod");
        let job = kind(&docs, "Job");
        let coordinator = container(&pod["spec"], "coordinator");
        let worker = container(&job["spec"]["template"]["spec"], "worker");
        for c in [coordinator, worker] {
            assert_eq!(secret_key(env(c, TOKEN_ENV)), TOKEN_ENV);
            for e in c["env"].as_array().unwrap() {
                assert!(e.get("value").is_none(), "a literal value: {e}");
            }
        }
        // The coordinator reads the target's own variables; each from the key of its name.
        assert_eq!(secret_key(env(coordinator, SET_VAR)), SET_VAR);
        assert_eq!(secret_key(env(coordinator, "REDIS_PW")), "REDIS_PW");
        assert_eq!(coordinator["env"].as_array().unwrap().len(), 3);
        // Workers read fixed names, from the keys the target's variables name.
        assert_eq!(secret_key(env(worker, "LOCKBENCH_MYSQL_PASSWORD")), SET_VAR);
        assert_eq!(
            secret_key(env(worker, "LOCKBENCH_REDIS_PASSWORD")),
            "REDIS_PW"
        );
        assert_eq!(
            secret_key(env(worker, "LOCKBENCH_SENTINEL_PASSWORD")),
            "REDIS_PW"
        );
        assert_eq!(worker["env"].as_array().unwrap().len(), 5);
        // The command the user runs names every key once, values from their shell.
        let cmd = secret_command("bench", &inputs(&target_text(), None).target.password_vars);
        assert!(!cmd.contains(&password), "{cmd}");
        assert_eq!(
            cmd.matches("--from-literal=REDIS_PW=\"$REDIS_PW\"").count(),
            1
        );
        assert!(cmd.contains(&format!("--from-literal={SET_VAR}=\"${SET_VAR}\"")));
        assert!(cmd.contains("--from-literal=LOCKBENCH_TOKEN=\"$(openssl rand -hex 32)\""));
        assert!(cmd.starts_with("kubectl create secret generic lockbench --namespace bench"));
        assert!(yaml.contains(&cmd.replace('\n', "\n#    ")), "{yaml}");
    }

    #[test]
    fn the_config_map_holds_the_files_the_coordinator_reads() {
        let chaos = "[[fault]]\nkind = \"command\"\nat = \"1s\"\nduration = \"1s\"\n\
                     run = \"true\"\nheal = \"true\"\n";
        let inputs = inputs(&target_text(), Some(chaos));
        let (_, docs) = docs(&inputs);
        let cm = kind(&docs, "ConfigMap");
        let pod = kind(&docs, "Pod");
        let coordinator = container(&pod["spec"], "coordinator");
        let volumes = pod["spec"]["volumes"].as_array().unwrap();
        let config = volumes.iter().find(|v| v["configMap"].is_object()).unwrap();
        assert_eq!(config["configMap"]["name"], cm["metadata"]["name"]);
        let mounts = coordinator["volumeMounts"].as_array().unwrap();
        let mount = mounts.iter().find(|m| m["name"] == config["name"]).unwrap();
        let dir = format!("{}/", mount["mountPath"].as_str().unwrap());
        let a = args(coordinator);
        let key = |f: &str| {
            let path = flag(&a, f);
            let key = path.strip_prefix(&dir).unwrap_or_else(|| panic!("{path}"));
            cm["data"][key].as_str().unwrap().to_string()
        };
        let workload = Workload::parse("w", &key("--workload"), &[]).unwrap();
        assert_eq!(
            toml::to_string(&workload).unwrap(),
            toml::to_string(&inputs.workload).unwrap()
        );
        assert_eq!(key("--target"), target_text());
        assert_eq!(key("--chaos"), chaos);
        assert_eq!(flag(&a, "--strategy"), "redis-setnx");
        assert!(flag(&a, "--out").starts_with("/results/"));
        assert!(key("--workload").starts_with(
            "# The effective workload: workloads/flash-sale.toml --set load.clients=8"
        ));
        // The results outlive the coordinator in a container `kubectl cp` can reach.
        let keeper = container(&pod["spec"], "results");
        assert_eq!(keeper["command"], json!(["sleep", "600"]));
        assert_eq!(keeper["volumeMounts"][0]["mountPath"], "/results");
    }

    #[test]
    fn a_line_break_in_a_file_name_or_override_stays_inside_its_comment() {
        let mut s = settings();
        s.workload_file = "w\n[evil]\n".into();
        s.set = vec!["load.clients=8\nkind: Secret".into()];
        let mut inputs = inputs(&target_text(), None);
        inputs.target.checked.file = "t\n---\nkind: Secret".into();
        let yaml = render(&inputs, &s);
        let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!(docs.len(), 4, "{yaml}");
        let workload = kind(&docs, "ConfigMap")["data"]["workload.toml"]
            .as_str()
            .unwrap();
        assert!(
            workload.starts_with("# The effective workload: w [evil]  --set"),
            "{workload}"
        );
        Workload::parse("w", workload, &[]).unwrap();
    }

    #[test]
    fn flags_that_cannot_go_into_a_manifest_are_refused_by_name() {
        let base = || RenderArgs {
            workers: 2,
            workload: "w.toml".into(),
            set: Vec::new(),
            target: "t.toml".into(),
            strategy: "none".into(),
            chaos: None,
            image: DEFAULT_IMAGE.into(),
            namespace: "default".into(),
            port: 7400,
            keep: Duration::from_secs(60),
            out: None,
        };
        check_flags(&base()).unwrap();
        type Change = fn(&mut RenderArgs);
        let cases: [(Change, &str); 5] = [
            (|a| a.workers = 0, "--workers 0"),
            (|a| a.namespace = "Bench".into(), "--namespace \"Bench\""),
            (|a| a.namespace = "-x".into(), "--namespace \"-x\""),
            (|a| a.image = "a b".into(), "--image \"a b\""),
            (|a| a.port = 0, "--port 0"),
        ];
        for (change, want) in cases {
            let mut a = base();
            change(&mut a);
            let e = check_flags(&a).unwrap_err().to_string();
            assert!(e.starts_with(want), "{want}: {e}");
        }
        let t = OfflineTarget::parse(
            "t.toml",
            "[redis]\nnodes = [\"r:1\"]\npassword_env = \"LOCKBENCH_TOKEN\"\n",
        )
        .unwrap();
        let e = check_vars(&t).unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml: password_env: \"LOCKBENCH_TOKEN\""),
            "{e}"
        );
    }
}

//! `lockbench k8s render` through the real binary: the docs' command renders manifests that
//! `kubernetes-validate --strict` accepts offline (no cluster), with no password in them; a
//! malformed target file is refused, naming the file and the field.
//!
//! kubernetes-validate comes from scripts/kubernetes-validate/install.sh (run by
//! `scripts/install-deps.sh --for-tests`). Without it the test fails when CI is set, and is
//! skipped with a message otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Kubernetes versions whose schemas the manifests must pass: the oldest they need
/// (`backoffLimitPerIndex` and `podReplacementPolicy`, beta from 1.29) and the first with both
/// GA.
const VERSIONS: [&str; 2] = ["1.29.0", "1.34.0"];
/// The objects a render writes.
const OBJECTS: usize = 4;
/// Set in the binary's environment as the target's password variables: a render that read
/// them could leak them.
const PASSWORDS: [(&str, &str); 2] = [
    ("LOCKBENCH_MYSQL_PASSWORD", "mysql-pw-7c1e0b9d4f"),
    ("LOCKBENCH_REDIS_PASSWORD", "redis-pw-3a8f6e2c51"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn lockbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args(args)
        .current_dir(root())
        .envs(PASSWORDS)
        .output()
        .expect("run lockbench")
}

/// The arguments of the `lockbench k8s render` command of docs/distributed.md (section
/// "Kubernetes: workers as an Indexed Job"), without its `> FILE` redirection: CI runs exactly
/// what the docs show.
fn docs_render_args() -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/distributed.md")).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Kubernetes: workers as an Indexed Job"))
        .expect("docs/distributed.md has a section \"Kubernetes: workers as an Indexed Job\"");
    let line = section
        .lines()
        .find(|l| l.starts_with("lockbench k8s render "))
        .expect("the section shows a `lockbench k8s render` command");
    assert!(
        !line.ends_with('\\'),
        "one line, so this test reads all of it: {line}"
    );
    let command = line.split(" > ").next().unwrap();
    assert!(
        !command.contains(['"', '\'', '$', '|']),
        "plain words only: {command}"
    );
    let words: Vec<String> = command.split_whitespace().map(String::from).collect();
    words[1..].to_vec()
}

/// kubernetes-validate: the venv of scripts/kubernetes-validate, or one on PATH. `None`
/// (skip) only when CI is not set.
fn validator() -> Option<PathBuf> {
    let venv = root().join("scripts/kubernetes-validate/.venv/bin/kubernetes-validate");
    let found = [venv, PathBuf::from("kubernetes-validate")]
        .into_iter()
        .find(|bin| {
            Command::new(bin)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!(
                "CI is set but kubernetes-validate is not installed: run scripts/install-deps.sh \
                 --for-tests (or scripts/kubernetes-validate/install.sh)"
            );
        }
        eprintln!(
            "SKIPPED: kubernetes-validate not installed (scripts/kubernetes-validate/install.sh)"
        );
    }
    found
}

/// Validates `file` strictly (unknown fields are errors) against every version of
/// [`VERSIONS`]; panics with the validator's output when it finds an error.
fn validate(validator: &Path, file: &Path) {
    for version in VERSIONS {
        let out = Command::new(validator)
            .args(["--strict", "--kubernetes-version", version])
            .arg(file)
            .output()
            .expect("run kubernetes-validate");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && !text.contains("ERROR"),
            "kubernetes-validate {version} refused {}:\n{text}",
            file.display()
        );
        // Every object was checked, not an empty or unparsed stream.
        assert_eq!(
            text.matches("passed for resource").count(),
            OBJECTS,
            "{text}"
        );
    }
}

fn assert_no_password(what: &str, text: &str) {
    for (var, pw) in PASSWORDS {
        assert!(
            !text.contains(pw),
            "{what} holds the value of {var}:\n{text}"
        );
    }
}

#[test]
fn the_readme_render_command_writes_manifests_kubernetes_validate_accepts() {
    let args = docs_render_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = lockbench(&args);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    assert_no_password("stdout", &stdout);
    assert_no_password("stderr", &stderr);
    // The Secret's command names the keys, never the values.
    assert!(
        stderr.contains("kubectl create secret generic lockbench"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--from-literal=LOCKBENCH_MYSQL_PASSWORD=\"$LOCKBENCH_MYSQL_PASSWORD\"")
    );
    let Some(validator) = validator() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lockbench.yaml");
    std::fs::write(&file, &stdout).unwrap();
    validate(&validator, &file);

    // --out, with a chaos file: the file it writes passes too.
    let out_dir = dir.path().join("out");
    let mut with_chaos = args.clone();
    with_chaos.extend(["--chaos", "targets/example-chaos.toml", "--out"]);
    with_chaos.push(out_dir.to_str().unwrap());
    let out = lockbench(&with_chaos);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = out_dir.join("lockbench.yaml");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        written.display().to_string()
    );
    let yaml = std::fs::read_to_string(&written).unwrap();
    assert_no_password("lockbench.yaml", &yaml);
    assert!(yaml.contains("chaos.toml: |"), "{yaml}");
    validate(&validator, &written);
}

#[test]
fn a_malformed_target_is_refused_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[redis]\nnodes = [\"redis.shop.svc\"]\n", "redis.nodes[0]"),
        (
            "[redis]\nnodes = [\"redis.shop.svc:6379\"]\npassword_env = \"my-pw\"\n",
            "redis.password_env",
        ),
        (
            "[redis]\nnode = [\"redis.shop.svc:6379\"]\n",
            "unknown field `node`",
        ),
    ];
    for (i, (text, field)) in cases.into_iter().enumerate() {
        let target = dir.path().join(format!("bad-{i}.toml"));
        std::fs::write(&target, text).unwrap();
        let out = lockbench(&[
            "k8s",
            "render",
            "--workers",
            "2",
            "--strategy",
            "redis-setnx",
            "--workload",
            "workloads/flash-sale.toml",
            "--target",
            target.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text:?} was accepted");
        assert!(
            stderr.contains(&format!("{}: ", target.display())) && stderr.contains(field),
            "{text:?}: expected the file and `{field}` named: {stderr}"
        );
        assert!(out.stdout.is_empty(), "no manifests for a bad target");
    }
    // A target without what the strategy needs, and more workers than buyers.
    let out = lockbench(&[
        "k8s",
        "render",
        "--workers",
        "2",
        "--strategy",
        "redlock",
        "--workload",
        "workloads/flash-sale.toml",
        "--target",
        "targets/k8s.toml",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("targets/k8s.toml: [redis] nodes: missing"),
        "{stderr}"
    );
    let out = lockbench(&[
        "k8s",
        "render",
        "--workers",
        "9",
        "--set",
        "load.clients=8",
        "--strategy",
        "redis-setnx",
        "--workload",
        "workloads/flash-sale.toml",
        "--target",
        "targets/k8s.toml",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--workers 9: expected at most load.clients = 8"),
        "{stderr}"
    );
}

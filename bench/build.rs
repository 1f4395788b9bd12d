//! Builds the clock shim (`src/chaos/clockshim.c`) into a shared object that the binary embeds
//! and writes next to the servers it preloads into. The C compiler is the one Rust links with.
//! Also records the git revision (`LOCKBENCH_GIT_REV`) for report.html, when there is a git.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "src/chaos/clockshim.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let so = out.join("libclockshim.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&so)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}` for {src}: {e} (install gcc)"));
    assert!(status.success(), "`{cc}` failed to build {src}");
    git_rev();
}

/// Sets `LOCKBENCH_GIT_REV` to `git rev-parse --short HEAD`; left unset (the report says
/// "unknown") outside a git checkout or without git.
fn git_rev() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(rev) = git(&["rev-parse", "--short", "HEAD"]) else {
        return;
    };
    // Rebuild when HEAD moves: HEAD itself (branch switch) and the ref it points to (commit).
    // A worktree keeps HEAD in its own git dir and the refs in the common one.
    for dir in ["--git-dir", "--git-common-dir"] {
        let Some(d) = git(&["rev-parse", dir]) else {
            continue;
        };
        let mut files = vec![format!("{d}/HEAD"), format!("{d}/packed-refs")];
        files.extend(git(&["symbolic-ref", "-q", "HEAD"]).map(|r| format!("{d}/{r}")));
        // A path that does not exist would make cargo rerun this script on every build.
        for f in files.iter().filter(|f| std::path::Path::new(f).exists()) {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    println!("cargo:rustc-env=LOCKBENCH_GIT_REV={rev}");
}

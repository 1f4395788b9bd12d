//! Builds the clock shim (`src/chaos/clockshim.c`) into a shared object that the binary embeds
//! and writes next to the servers it preloads into. The C compiler is the one Rust links with.

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
}

//! The `lockbench` binary: parse arguments, set up logging, call the library, map errors to
//! exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = lockbench::cli::Cli::parse();
    lockbench::cli::init_tracing(&cli);
    match lockbench::cli::main(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lockbench: error: {}", chain(&err));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes, skipping a cause whose text its parent already shows (our error
/// messages embed their source so they read well on their own).
fn chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let msg = cause.to_string();
        if !text.contains(&msg) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&msg);
        }
    }
    text
}

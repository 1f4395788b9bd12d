//! The `lockbench` binary: parse arguments, set up logging, call the library, map errors to
//! exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = lockbench::cli::Cli::parse();
    lockbench::cli::init_tracing(cli.verbose);
    match lockbench::cli::main(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lockbench: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

//! The `rubyrace` binary: parses arguments and wires the crates together. No measurement
//! or analysis logic lives here.

mod load_command;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// rubyrace: a benchmarking lab for Ruby web stacks.
#[derive(Parser, Debug)]
#[command(name = "rubyrace", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Send HTTP/1.1 load to a URL and report throughput, latency and errors.
    Load(load_command::LoadArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Load(args) => load_command::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rubyrace: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

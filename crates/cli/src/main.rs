//! The `rubyrace` binary: parses arguments and wires the crates together. No measurement
//! or analysis logic lives here.

/// `println!` and `eprintln!` that never panic. The standard ones panic when stdout or
/// stderr is closed (`rubyrace ruby build ... | head`), and a panic printing to a closed
/// stderr aborts. Here a closed stream is the end of that output: the command goes on (a
/// build finishes, a run stores its trials) and its exit code still tells the outcome.
/// Defined before the modules, so it shadows the standard macros in all of them.
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}
macro_rules! print {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

mod doctor_command;
mod load_command;
mod output;
mod report_command;
mod ruby_command;
mod run_command;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// rubyrace: a benchmarking lab for Ruby web stacks.
#[derive(Parser, Debug)]
#[command(name = "rubyrace", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Send HTTP/1.1 load to a URL and report throughput, latency and errors.
    Load(load_command::LoadArgs),
    /// Run an experiment: every configuration in randomized blocks, into a results directory.
    Run(run_command::RunArgs),
    /// Run one trial from a JSON spec and print its result as JSON.
    Trial(run_command::TrialArgs),
    /// Analyse results: cohorts, comparisons with confidence intervals, warnings; as a
    /// table, Markdown, CSV, JSON, benchstat text or an HTML report.
    Report(report_command::ReportArgs),
    /// Compare two results directories, or two cohorts of one.
    Compare(report_command::CompareArgs),
    /// Write the trials of a results directory as JSON.
    Export(run_command::ExportArgs),
    /// List the Rubies installed on this machine.
    Rubies(run_command::RubiesArgs),
    /// Check this machine for what makes benchmarks noisy or wrong, and what to do about it.
    Doctor(doctor_command::DoctorArgs),
    /// Build a CRuby into rubyrace's cache, to name in experiments.
    #[command(subcommand)]
    Ruby(ruby_command::RubyCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Load(args) => load_command::run(args),
        Command::Run(args) => run_command::run(args),
        Command::Trial(args) => run_command::trial(args),
        Command::Report(args) => report_command::report(args),
        Command::Compare(args) => report_command::compare(args),
        Command::Export(args) => run_command::export(args),
        Command::Rubies(args) => run_command::rubies(args),
        Command::Ruby(command) => ruby_command::run(command),
        Command::Doctor(args) => doctor_command::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rubyrace: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

//! The `rubyrace` binary: parses arguments and wires the crates together. No measurement
//! or analysis logic lives here.
#![forbid(unsafe_code)]
// The doc comments of the commands' arguments are their `--help` text, where `[OPTION]`
// and `<name>` are the usual notation, not intra-doc links or HTML.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

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

mod commands;
mod invocation;
mod live_report;
mod output;
mod progress;
mod results_dir;
mod run_end;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The commit this binary was built from (build.rs: `RUBYRACE_BUILD_COMMIT`, else git's
/// HEAD, else "unknown").
const BUILD_COMMIT: &str = env!("RUBYRACE_COMMIT");

/// rubyrace: a benchmarking lab for Ruby web stacks.
#[derive(Parser, Debug)]
#[command(name = "rubyrace", version = env!("RUBYRACE_VERSION_LONG"), propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Send HTTP/1.1 load to a URL and report throughput, latency and errors.
    Load(commands::load::LoadArgs),
    /// Run an experiment: every configuration in randomized blocks, into a results directory.
    Run(commands::run::RunArgs),
    /// Run the demo (the interpreter against YJIT × glibc against jemalloc on a bundled Rails
    /// app) into results/ here, and report it: what `make demo` runs, from any directory.
    Demo(commands::demo::DemoArgs),
    /// Write a starting experiment for an app (read from its config.ru, Gemfile, database.yml
    /// and puma.rb; its GET paths that answer 2xx found by booting it), or with --ci github a
    /// pull-request gate workflow; the app is never changed.
    Init(commands::init::InitArgs),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell) for rubyrace.
    Completions(commands::completions::CompletionsArgs),
    /// Write the man pages (rubyrace.1, and rubyrace-COMMAND.1 for each command) into a
    /// directory: what the Debian package installs (scripts/deb).
    #[command(hide = true)]
    Man(commands::completions::ManArgs),
    /// Gate a change in CI: run two commits of the app in the same blocks until the head's
    /// slowdown is decided against a threshold; exit 0 (pass), 1 (slower) or 4 (cannot tell).
    Check(commands::check::CheckArgs),
    /// Find the commit that made the app slower: the ends and up to six candidates in every
    /// block, one model of every block, a commit named at 95%; commits that do not boot
    /// skipped.
    Bisect(commands::bisect::BisectArgs),
    /// Run one trial from a JSON spec and print its result as JSON.
    Trial(commands::trial::TrialArgs),
    /// Analyse results: cohorts, comparisons with confidence intervals, warnings; as a
    /// table, Markdown, CSV, JSON, benchstat text or an HTML report.
    Report(commands::report::ReportArgs),
    /// Compare two results directories, or two cohorts of one.
    Compare(commands::report::CompareArgs),
    /// Watch a run in progress from another terminal (read-only): its blocks, the current
    /// trial, the comparisons and the stopping rule, noise, warnings, failures.
    Watch(commands::watch::WatchArgs),
    /// Write the trials of a results directory as JSON.
    Export(commands::export::ExportArgs),
    /// One configuration's profiles (profile = "rbspy" | "perf"), merged over its
    /// trials: folded stacks or a flame graph.
    Profile(commands::profile::ProfileArgs),
    /// List the Rubies installed on this machine.
    Rubies(commands::rubies::RubiesArgs),
    /// Check this machine for what makes benchmarks noisy or wrong, and what to do about it.
    Doctor(commands::doctor::DoctorArgs),
    /// Write a Gemfile that loads an app's Gemfile and adds the app server rubyrace starts
    /// (for an app whose bundle has no puma), without editing the app.
    Gemfile(commands::gemfile::GemfileArgs),
    /// Every run remembered by commit: add results directories to a history file, show its
    /// series and their change points, or check the newest commits for a new change.
    #[command(subcommand)]
    History(commands::history::HistoryCommand),
    /// Build a CRuby into rubyrace's cache, to name in experiments.
    #[command(subcommand)]
    Ruby(commands::ruby::RubyCommand),
    /// One block of a fleet run, on the node Slurm gave it (started by `run --slurm`).
    #[command(hide = true)]
    FleetTask(commands::fleet::TaskArgs),
    /// A node's answer to a fleet run's probe (started by `run --slurm`).
    #[command(hide = true)]
    FleetProbe(commands::fleet::ProbeArgs),
    /// The load of a block's trials, on the block's second node (`[fleet] load =
    /// "separate"`; started by the block's task through `srun`).
    #[command(hide = true)]
    FleetLoadAgent,
}

fn main() -> ExitCode {
    results::provenance::set_build_commit(BUILD_COMMIT);
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Load(args) => commands::load::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Demo(args) => commands::demo::demo(args),
        Command::Init(args) => commands::init::init(args),
        Command::History(command) => commands::history::history(command),
        Command::Completions(args) => commands::completions::completions(args),
        Command::Man(args) => commands::completions::man(args),
        Command::Check(args) => commands::check::check(args),
        Command::Bisect(args) => commands::bisect::bisect(args),
        Command::Trial(args) => commands::trial::trial(args),
        Command::Report(args) => commands::report::report(args),
        Command::Compare(args) => commands::report::compare(args),
        Command::Export(args) => commands::export::export(args),
        Command::Watch(args) => commands::watch::watch(args),
        Command::Profile(args) => commands::profile::profile(args),
        Command::Rubies(args) => commands::rubies::rubies(args),
        Command::Gemfile(args) => commands::gemfile::gemfile(args),
        Command::Ruby(command) => commands::ruby::run(command),
        Command::Doctor(args) => commands::doctor::run(args),
        Command::FleetTask(args) => commands::fleet::task(args),
        Command::FleetProbe(args) => commands::fleet::probe(args),
        Command::FleetLoadAgent => commands::fleet::load_agent(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rubyrace: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

//! `rubyrace ruby build` and `rubyrace ruby list`: argument parsing, progress lines and
//! the printing of Ruby builds. The building itself is in `rubies::build`.

use std::cell::Cell;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use rubies::build::{
    build, cache_builds, default_cache_dir, format_elapsed, BuildOptions, BuildRequest,
    CachedBuild, Event,
};

/// `rubyrace ruby` subcommands.
#[derive(Subcommand, Debug)]
pub enum RubyCommand {
    /// Build CRuby from a release tarball or a git source tree into rubyrace's cache.
    Build(BuildArgs),
    /// List the Rubies built into rubyrace's cache.
    List(ListArgs),
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  rubyrace ruby build 3.3.8 --source ruby-3.3.8.tar.xz --jemalloc
  rubyrace ruby build 3.4-dev --source ~/src/ruby --ref v3_4_0 --yjit
  rubyrace ruby build 3.3.8 --source ruby-3.3.8.tar.xz -- CFLAGS='-O3 -march=native'

Identical requests reuse the earlier build. The cache layout, the reuse rules and the \
build record are described in docs/ruby-builds.md.")]
pub struct BuildArgs {
    /// A label for the build (e.g. 3.3.8): the start of its directory and default name.
    #[arg(value_name = "VERSION")]
    pub ruby_version: String,
    /// A release tarball (.tar.gz, .tar.xz...), or the top of a git source tree.
    #[arg(long, value_name = "TARBALL|DIR")]
    pub source: PathBuf,
    /// For a git source: the commit to build (branch, tag, hash). Without it, HEAD of a
    /// work tree without uncommitted changes.
    #[arg(long = "ref", value_name = "GITREF")]
    pub git_ref: Option<String>,
    /// Build with YJIT (./configure --enable-yjit; needs rustc).
    #[arg(long)]
    pub yjit: bool,
    /// Link jemalloc (./configure --with-jemalloc; needs libjemalloc-dev).
    #[arg(long)]
    pub jemalloc: bool,
    /// One more ./configure argument (repeatable); arguments after `--` are added too.
    #[arg(
        long = "configure-opts",
        visible_alias = "configure-opt",
        value_name = "OPT",
        allow_hyphen_values = true
    )]
    pub configure_opts: Vec<String>,
    /// make -j N [default: the number of CPUs].
    #[arg(short, long, value_name = "N")]
    pub jobs: Option<usize>,
    /// The cache directory [default: $RUBYRACE_CACHE, $XDG_CACHE_HOME/rubyrace or
    /// ~/.cache/rubyrace].
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// The name to use in experiments [default: VERSION[-yjit][-jemalloc]].
    #[arg(long)]
    pub name: Option<String>,
    /// Rebuild even if a complete build of the same sources and options exists.
    #[arg(long)]
    pub force: bool,
    /// More ./configure arguments, after `--`.
    #[arg(last = true, value_name = "CONFIGURE_ARG")]
    pub extra: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// The cache directory [default: as for `ruby build`].
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Print the builds (prefix, names and record) as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: RubyCommand) -> Result<ExitCode> {
    match command {
        RubyCommand::Build(args) => build_ruby(args),
        RubyCommand::List(args) => list(args),
    }
}

fn cache_dir(given: Option<PathBuf>) -> Result<PathBuf> {
    match given {
        Some(dir) => Ok(dir),
        None => default_cache_dir(),
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn build_ruby(args: BuildArgs) -> Result<ExitCode> {
    let mut configure_opts = args.configure_opts;
    configure_opts.extend(args.extra);
    let request = BuildRequest {
        version: args.ruby_version,
        source: args.source,
        git_ref: args.git_ref,
        options: BuildOptions {
            yjit: args.yjit,
            jemalloc: args.jemalloc,
            configure_opts,
        },
        jobs: args.jobs,
        cache: cache_dir(args.cache)?,
        name: args.name,
        force: args.force,
    };
    let outcome = build_with_progress(&request)?;
    let record = &outcome.record;
    if outcome.reused {
        eprintln!(
            "rubyrace: reusing {} (built {})",
            record.prefix.display(),
            record.built_at
        );
    } else {
        eprintln!(
            "rubyrace: built {} in {}",
            record.prefix.display(),
            seconds(record.build_seconds)
        );
    }
    println!("{}", record.ruby_description);
    println!("{}", outcome.ruby().display());
    println!();
    println!("Name it in an experiment file (docs/experiment.md):");
    println!("[rubies]");
    println!(
        "{} = {}",
        toml_string(&outcome.name),
        toml_string(&outcome.ruby().to_string_lossy())
    );
    Ok(ExitCode::SUCCESS)
}

/// Builds (or reuses) the Ruby `request` asks for, with each step's progress on stderr.
pub(crate) fn build_with_progress(request: &BuildRequest) -> Result<rubies::build::BuildOutcome> {
    // A step's line ("rubyrace: configure... ") is finished by its duration; a failed
    // step leaves it open.
    let step_open = Cell::new(false);
    let mut on_event = |event: Event| {
        let mut err = std::io::stderr().lock();
        let _ = match event {
            Event::Step(step) => {
                step_open.set(true);
                write!(err, "rubyrace: {step}... ")
            }
            Event::StepDone(elapsed) => {
                step_open.set(false);
                writeln!(err, "{}", format_elapsed(elapsed))
            }
            Event::Note(note) => writeln!(err, "rubyrace: {note}"),
        };
        let _ = err.flush();
    };
    let outcome = build(request, &mut on_event);
    if step_open.get() {
        eprintln!("failed");
    }
    outcome
}

/// The interpreter of a single commit's build (`rubies::build::commit_request`: a
/// bisection's step, an experiment's `ruby_ref`), built with its progress on stderr or
/// reused from the cache, and a line saying which.
pub(crate) fn commit_ruby(request: &BuildRequest) -> Result<std::path::PathBuf> {
    let outcome = build_with_progress(request)?;
    let commit = request.git_ref.as_deref().unwrap_or("HEAD");
    eprintln!(
        "rubyrace: commit {}: {} {}",
        &commit[..12.min(commit.len())],
        if outcome.reused { "reusing" } else { "built" },
        outcome.record.prefix.display()
    );
    Ok(outcome.record.prefix.join("bin/ruby"))
}

/// CRuby at `commit` of the repository `repo` (its top directory), built with
/// `configure_opts` into the commits' cache (or found there), as the commit a
/// configuration runs on; `git_ref` is the revision as the user wrote it.
pub(crate) fn ruby_commit(
    repo: &std::path::Path,
    git_ref: &str,
    commit: &str,
    configure_opts: &[String],
) -> Result<experiment::RubyCommit> {
    let request = rubies::build::commit_request(
        &rubies::build::default_cache_dir()?,
        repo,
        commit,
        configure_opts,
    );
    let ruby = commit_ruby(&request)?;
    Ok(experiment::RubyCommit {
        repo: repo.to_path_buf(),
        git_ref: git_ref.to_string(),
        commit: commit.to_string(),
        configure_opts: configure_opts.to_vec(),
        prefix: ruby
            .parent()
            .and_then(std::path::Path::parent)
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default(),
    })
}

/// What `run` and `check` build an experiment's `ruby_ref` with (its error becomes one of
/// the file, at the `ruby_ref`).
pub(crate) fn experiment_ruby(
    request: &BuildRequest,
) -> std::result::Result<std::path::PathBuf, String> {
    commit_ruby(request).map_err(|e| format!("does not build: {e:#}"))
}

fn seconds(s: f64) -> String {
    std::time::Duration::try_from_secs_f64(s)
        .map(format_elapsed)
        .unwrap_or_else(|_| format!("{s} s"))
}

fn describe_options(b: &CachedBuild) -> String {
    let o = &b.record.options;
    let mut parts = Vec::new();
    if o.yjit {
        parts.push("yjit".to_string());
    }
    if o.jemalloc {
        parts.push("jemalloc".to_string());
    }
    if !o.configure_opts.is_empty() {
        parts.push(format!("configure: {}", o.configure_opts.join(" ")));
    }
    if parts.is_empty() {
        "(none)".to_string()
    } else {
        parts.join("; ")
    }
}

fn list(args: ListArgs) -> Result<ExitCode> {
    let cache = cache_dir(args.cache)?;
    let builds = cache_builds(&cache);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&builds)?);
        return Ok(ExitCode::SUCCESS);
    }
    if builds.is_empty() {
        println!(
            "No Ruby builds in {} (build one with `rubyrace ruby build`).",
            rubies::build::rubies_dir(&cache).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for b in &builds {
        let names = if b.names.is_empty() {
            format!("{} (no name)", b.record.name)
        } else {
            b.names.join(", ")
        };
        println!("{names}");
        println!("  ruby     {}", b.record.ruby_description);
        println!("  prefix   {}", b.prefix.display());
        println!("  source   {}", b.record.source.describe());
        println!("  options  {}", describe_options(b));
        println!(
            "  built    {} in {}",
            b.record.built_at,
            seconds(b.record.build_seconds)
        );
    }
    println!("\n[rubies]");
    for b in &builds {
        let ruby = b.ruby();
        let name = b.names.first().unwrap_or(&b.record.name);
        println!(
            "{} = {}",
            toml_string(name),
            toml_string(&ruby.to_string_lossy())
        );
    }
    Ok(ExitCode::SUCCESS)
}

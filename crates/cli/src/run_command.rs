//! `rubyrace run`, `rubyrace trial`, `rubyrace export` and `rubyrace rubies`: argument
//! parsing, the progress display and the end-of-run summary. The work itself is in `lab`.

use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lab::experiment::{Experiment, Order, Workload};
use lab::runner::{run_pending, trial_spec, Progress, RunEnd};
use lab::schedule::{schedule, ScheduledTrial};
use lab::store::Store;
use lab::trial::{run_trial, TrialOutcome, TrialResult, TrialSpec, TrialStatus};
use load::report::{bytes, micros};
use stats::median;

use crate::output::{self, write_stdout};

/// Exit status of a malformed experiment file.
pub const EXIT_BAD_EXPERIMENT: u8 = 2;
/// Exit status of a run that completed with failed or invalid trials (or stopped by
/// --fail-fast).
pub const EXIT_TRIALS_FAILED: u8 = 3;
/// Exit status after Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OrderArg {
    Random,
    Sequential,
}

#[derive(Args, Debug)]
#[command(
    after_help = "The experiment file is described in docs/experiment.md, the results \
directory in docs/results.md."
)]
pub struct RunArgs {
    /// The experiment file (TOML).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    pub experiment: Option<PathBuf>,

    /// Results directory [default: results/NAME-YYYYMMDD-HHMMSS].
    #[arg(short = 'o', long, value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Continue an interrupted run: run the trials of DIR's schedule that are not stored.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["output", "smoke", "order", "dry_run"])]
    pub resume: Option<PathBuf>,

    /// Print the configurations and the schedule, and run nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// A quick check of a new experiment: two short blocks (warmup ≤ 1s, duration ≤ 2s,
    /// one script run), into a separate results directory.
    #[arg(long)]
    pub smoke: bool,

    /// Order of the configurations within each block [default: the file's `order`, else random].
    #[arg(long, value_enum)]
    pub order: Option<OrderArg>,

    /// Stop at the first trial that fails or is invalid.
    #[arg(long)]
    pub fail_fast: bool,

    /// With --dry-run: print the plan as JSON (schema rubyrace.plan/1), including the spec
    /// of every trial, each runnable with `rubyrace trial --spec`.
    #[arg(long, requires = "dry_run")]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TrialArgs {
    /// A trial spec (JSON, schema rubyrace.trial-spec/1; see docs/results.md).
    #[arg(long, value_name = "FILE")]
    pub spec: PathBuf,

    /// Write the result (schema rubyrace.trial/1) to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A results directory.
    pub dir: PathBuf,

    /// Write every trial as JSON (schema rubyrace.export/1; the only format for now).
    #[arg(long, required = true)]
    pub json: bool,

    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RubiesArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Sets the interrupt flag on Ctrl-C; a second Ctrl-C exits at once (the parent-death
/// signal and the live-server registry still take care of the server).
fn install_interrupt() -> Result<Arc<AtomicBool>> {
    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = interrupt.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
        eprintln!("\nrubyrace: stopping the current trial (Ctrl-C again to quit at once)");
    })
    .context("cannot install the Ctrl-C handler")?;
    Ok(interrupt)
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// "1 configuration", "4 configurations".
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn default_output(name: &str, smoke: bool) -> PathBuf {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    // 2026-11-22T01:02:03Z -> 20261122-010203
    let compact: String = stamp
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        .replace('T', "-");
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let smoke = if smoke { "-smoke" } else { "" };
    PathBuf::from("results").join(format!("{safe}{smoke}-{compact}"))
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let (mut store, kind) = if let Some(dir) = &args.resume {
        (Store::open(dir)?, "resume")
    } else {
        let file = args
            .experiment
            .as_ref()
            .expect("clap requires the experiment");
        let experiment = match Experiment::load(file) {
            Ok(e) => e,
            Err(errors) => {
                eprintln!("{errors}");
                return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
            }
        };
        // Before the plan (on stderr, so `--dry-run --json` stays JSON).
        if let Some(note) = experiment.defaults_note() {
            eprintln!("rubyrace: {note}");
        }
        let mut experiment = if args.smoke {
            experiment.smoke()
        } else {
            experiment
        };
        if let Some(order) = args.order {
            experiment.order = match order {
                OrderArg::Random => Order::Random,
                OrderArg::Sequential => Order::Sequential,
            };
        }
        let plan = schedule(
            experiment.configs.len(),
            experiment.batches,
            experiment.order,
            experiment.seed,
        );
        let dir = args
            .output
            .clone()
            .unwrap_or_else(|| default_output(&experiment.name, args.smoke));
        if args.dry_run && args.json {
            print_plan_json(&experiment, &plan, &dir, args.smoke)?;
            return Ok(ExitCode::SUCCESS);
        }
        if args.dry_run {
            print_dry_run(&experiment, &plan)?;
            return Ok(ExitCode::SUCCESS);
        }
        (
            Store::create(&dir, &experiment, &plan, args.smoke)?,
            "start",
        )
    };
    let dir = store.dir().to_path_buf();
    let interrupt = install_interrupt()?;
    let mut progress = ConsoleProgress::new(&store)?;
    eprintln!("rubyrace: results go to {}", dir.display());
    let end = run_pending(
        &mut store,
        kind,
        &command_line(),
        args.fail_fast,
        &interrupt,
        &mut progress,
    );
    progress.finish();
    let end = match end {
        Ok(end) => end,
        Err(e) => {
            eprintln!(
                "rubyrace: the run stopped: {e:#}\nEvery trial finished before this point is stored. Resume with:\n  rubyrace run --resume {}",
                dir.display()
            );
            return Ok(ExitCode::from(1));
        }
    };
    print_summary(&store)?;
    if let Some(end) = store.precision_end()? {
        println!("\n{}.", end.describe());
    }
    let completed = store.completed()?.len();
    let total = store.schedule()?.len();
    match end {
        RunEnd::Interrupted => {
            eprintln!(
                "\nInterrupted: {completed} of {total} trials are stored in {}. Resume with:\n  rubyrace run --resume {}",
                dir.display(),
                dir.display()
            );
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        RunEnd::StoppedAfterFailure { trial_id } => {
            eprintln!(
                "\nStopped after trial {trial_id} (--fail-fast): {completed} of {total} trials are stored. Resume with:\n  rubyrace run --resume {}",
                dir.display()
            );
            Ok(ExitCode::from(EXIT_TRIALS_FAILED))
        }
        RunEnd::Complete => {
            let rows = store.summary_rows()?;
            let bad: usize = rows.iter().map(|r| r.invalid + r.failed).sum();
            if total == 1 {
                println!("\nThe trial is stored in {}.", dir.display());
            } else {
                println!("\nAll {total} trials are stored in {}.", dir.display());
            }
            println!(
                "Every trial as JSON: rubyrace export {} --json",
                dir.display()
            );
            if bad > 0 {
                eprintln!("rubyrace: {bad} trial(s) failed or were invalid; their reasons are in the store");
                return Ok(ExitCode::from(EXIT_TRIALS_FAILED));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print_dry_run(experiment: &Experiment, plan: &[ScheduledTrial]) -> Result<()> {
    // Collected first and written at once, so `| head` ends it quietly.
    let mut out = String::new();
    macro_rules! println {
        ($($arg:tt)*) => {{
            use std::fmt::Write as _;
            let _ = writeln!(out, $($arg)*);
        }};
    }
    println!(
        "Experiment {:?} from {}",
        experiment.name,
        experiment.file.display()
    );
    println!(
        "{} × {} = {}, order {}, seed {}\n",
        count(experiment.configs.len(), "configuration"),
        count(experiment.batches as usize, "block"),
        count(plan.len(), "trial"),
        match experiment.order {
            Order::Random => "random",
            Order::Sequential => "sequential",
        },
        experiment.seed
    );
    println!("Configurations:");
    let mut estimate = Duration::ZERO;
    let interleaved = experiment.design.measured_per_configuration();
    for c in &experiment.configs {
        let s = &c.settings;
        let measured = interleaved.unwrap_or(s.load.duration);
        let what = match s.workload {
            Workload::Http => format!(
                "{} on {} ({}×{}), {}, {}, warmup {}, {} {}",
                s.app,
                s.server,
                s.processes,
                s.threads,
                count(s.load.connections, "connection"),
                s.load.mode.as_str(),
                humantime::format_duration(s.load.warmup),
                if interleaved.is_some() {
                    "measured"
                } else {
                    "duration"
                },
                humantime::format_duration(measured)
            ),
            Workload::Script => format!(
                "script {} × {} runs",
                s.script
                    .as_ref()
                    .map(|x| x.path.display().to_string())
                    .unwrap_or_default(),
                s.script.as_ref().map_or(0, |x| x.runs)
            ),
        };
        println!("  [{}] {}", c.id, c.label);
        println!("      ruby: {}", s.ruby_argv.join(" "));
        let mut verified = Vec::new();
        if let Some(j) = s.jit {
            verified.push(format!("jit {}", j.as_str()));
        }
        if let Some(a) = &s.allocator {
            verified.push(match (&a.preload, a.linked) {
                (Some(lib), _) => format!("allocator {} ({})", a.name, lib.display()),
                (None, true) => format!("allocator {} (linked into the Ruby)", a.name),
                (None, false) => format!("allocator {}", a.name),
            });
        }
        if let Some(c) = s.compact {
            verified.push(format!("compact {}", c.as_str()));
        }
        if !verified.is_empty() {
            println!("      verified in the server: {}", verified.join(", "));
        }
        if let Some(g) = &s.gemfile {
            println!("      gemfile: {} (bundle exec)", g.display());
        }
        if !s.env.is_empty() {
            let env: Vec<String> = s.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("      env: {}", env.join(" "));
        }
        println!("      {what}");
        estimate += s.estimated_trial_time(&experiment.design, experiment.configs.len())
            * experiment.batches;
    }
    println!("\nSchedule:");
    for block in 0..experiment.batches {
        let order: Vec<String> = plan
            .iter()
            .filter(|t| t.block == block)
            .map(|t| format!("{}", t.config_id))
            .collect();
        println!("  block {}: {}", block + 1, order.join(" "));
    }
    println!(
        "\nAbout {} (warmup + duration + ~3s of server start and stop per HTTP trial).",
        humantime::format_duration(Duration::from_secs(estimate.as_secs()))
    );
    match experiment.design {
        lab::design::Design::Blocks => {}
        lab::design::Design::Interleaved { slice, rounds } => println!(
            "Design: interleaved. In each block every configuration's server is started and warmed up, then the load alternates between them: {} of {} each, in a new random order every round.",
            count(rounds as usize, "round"),
            humantime::format_duration(slice)
        ),
        lab::design::Design::CoScheduled { slice, rounds } => println!(
            "Design: co-scheduled. In each block every configuration's server is started and warmed up, then all of them are loaded at once, sharing the server CPUs: {} of {}. Compare CPU per request: throughput and latency are each server's share.",
            count(rounds as usize, "window"),
            humantime::format_duration(slice)
        ),
    }
    if let Some(line) = conditions_line(&experiment.conditions) {
        println!("{line}");
    }
    if let Some(t) = &experiment.precision {
        let per_block = estimate / experiment.batches.max(1);
        let budget = match t.max_duration {
            Some(d) => format!(", or {} of trials", humantime::format_duration(d)),
            None => String::new(),
        };
        println!(
            "Adaptive: after {} blocks, a block at a time until every comparison with {} is within ±{}% on {} (97.5% intervals), at most {} blocks (about {}){budget}.",
            t.first_stop(experiment.configs.len()),
            experiment.configs.first().map_or("the baseline", |c| c.label.as_str()),
            100.0 * t.target,
            t.metric.name(),
            t.max_batches,
            humantime::format_duration(Duration::from_secs((per_block * t.max_batches).as_secs()))
        );
    }
    write_stdout(&out)
}

/// The run's trial conditions in a sentence, or None when it sets none.
fn conditions_line(c: &lab::conditions::TrialConditions) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(q) = &c.quiet {
        parts.push(format!(
            "each trial waits for a quiet machine (other processes below {}% of a CPU and steal below {}% over {}, at most {})",
            q.other_percent,
            q.steal_percent,
            humantime::format_duration(q.window),
            humantime::format_duration(q.max_wait)
        ));
    }
    if let Some(split) = &c.cpus {
        parts.push(format!(
            "servers run on CPU {} and the load generator on CPU {}",
            split.server, split.load
        ));
    }
    if c.repeat_noisy > 0 {
        parts.push(format!(
            "a trial measured in noise is run again up to {} time(s), the noisy attempt kept apart",
            c.repeat_noisy
        ));
    }
    (!parts.is_empty()).then(|| format!("Trial conditions: {}.", parts.join("; ")))
}

/// The plan as JSON: the experiment, its configurations, its schedule and every trial's spec.
fn print_plan_json(
    experiment: &Experiment,
    plan: &[ScheduledTrial],
    dir: &std::path::Path,
    smoke: bool,
) -> Result<()> {
    let dir = std::path::absolute(dir)?;
    let specs = plan
        .iter()
        .map(|t| {
            trial_spec(
                &dir,
                &experiment.configs,
                t,
                &experiment.record_env,
                &experiment.conditions,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let json = serde_json::json!({
        "schema": "rubyrace.plan/1",
        "experiment": {
            "name": experiment.name,
            "description": experiment.description,
            "file": std::fs::canonicalize(&experiment.file).unwrap_or_else(|_| experiment.file.clone()),
            "smoke": smoke,
            "seed": experiment.seed,
            "batches": experiment.batches,
            "precision": experiment.precision,
            "conditions": experiment.conditions,
            "design": experiment.design,
            "order": experiment.order,
            "record_env": experiment.record_env,
        },
        "results_dir": dir,
        "configs": experiment.configs,
        "schedule": plan,
        "trials": specs,
    });
    write_stdout(&(serde_json::to_string_pretty(&json)? + "\n"))
}

fn print_summary(store: &Store) -> Result<()> {
    let rows = store.summary_rows()?;
    let width = rows
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(5)
        .max(13);
    println!(
        "\n{:<width$}  {:>5} {:>7} {:>6}  {:>16}  {:>10}  {:>10}",
        "configuration", "valid", "invalid", "failed", "median", "median RSS", "median PSS"
    );
    for r in &rows {
        let rps = median(&r.requests_per_s)
            .map(|v| format!("{v:.1} req/s"))
            .or_else(|| median(&r.script_wall_s).map(|w| format!("{w:.3} s wall")))
            .unwrap_or_else(|| "-".into());
        let mem = |v: &[f64]| {
            median(v)
                .map(|b| bytes(b as u64))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<width$}  {:>5} {:>7} {:>6}  {:>16}  {:>10}  {:>10}",
            r.label,
            r.valid,
            r.invalid,
            r.failed,
            rps,
            mem(&r.rss_end_bytes),
            mem(&r.pss_end_bytes)
        );
    }
    println!("(medians over valid trials; memory is the server's whole process tree at the end of the measurement; scripts show wall time)");
    Ok(())
}

/// Progress on the terminal: a bar with the block, trial count, ETA, current label and
/// the last trial's throughput; one line per finished trial (also when not a terminal, so
/// an overnight log has them).
struct ConsoleProgress {
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    blocks: u32,
    started: Instant,
    run_this_session: usize,
    estimate_per_trial: Duration,
    last: String,
    /// Configuration labels by id (the precision line names the comparisons).
    labels: std::collections::BTreeMap<usize, String>,
}

impl ConsoleProgress {
    fn new(store: &Store) -> Result<ConsoleProgress> {
        // Before any trial ends, estimate from the settings.
        let configs = store.configs()?;
        let design = store.design()?;
        let per_trial: Vec<Duration> = configs
            .iter()
            .map(|c| c.settings.estimated_trial_time(&design, configs.len()))
            .collect();
        let estimate = per_trial.iter().sum::<Duration>() / per_trial.len().max(1) as u32;
        Ok(ConsoleProgress {
            bar: None,
            total: 0,
            done: 0,
            blocks: 0,
            started: Instant::now(),
            run_this_session: 0,
            estimate_per_trial: estimate,
            last: String::new(),
            labels: configs.iter().map(|c| (c.id, c.label.clone())).collect(),
        })
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    fn eta(&self) -> Duration {
        let per = if self.run_this_session > 0 {
            self.started.elapsed() / self.run_this_session as u32
        } else {
            self.estimate_per_trial
        };
        per * (self.total - self.done) as u32
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn describe_result(r: &TrialResult) -> String {
    let mut parts = Vec::new();
    if let Some(rps) = r.derived.requests_per_s {
        parts.push(format!("{rps:.1} req/s"));
    }
    if let Some(load) = &r.load {
        parts.push(format!("p99 {}", micros(load.latency_us.p99)));
    }
    if let Some(res) = &r.resources {
        parts.push(format!("PSS {}", bytes(res.end.pss_bytes)));
    }
    if let Some(cpu) = r.derived.cpu_us_per_request {
        parts.push(format!("{cpu:.0} µs CPU/req"));
    }
    if let Some(s) = &r.script {
        if let Some(w) = s.median_wall_s {
            parts.push(format!("{w:.3} s wall (median of {})", s.runs.len()));
        }
    }
    parts.join(" · ")
}

impl Progress for ConsoleProgress {
    fn begin(&mut self, total: usize, done: usize, blocks: u32) {
        self.total = total;
        self.done = done;
        self.blocks = blocks;
        if done > 0 {
            eprintln!(
                "rubyrace: {done} of {total} trials already stored; running the remaining {}",
                total - done
            );
        }
        if io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:24.cyan/blue} {pos}/{len} trials · {msg}")
                    .expect("a valid progress template"),
            );
            bar.set_position(done as u64);
            bar.enable_steady_tick(Duration::from_millis(500));
            self.bar = Some(bar);
        }
    }

    fn trial_started(&mut self, trial: &ScheduledTrial, label: &str) {
        let eta = humantime::format_duration(Duration::from_secs(self.eta().as_secs()));
        let last = if self.last.is_empty() {
            String::new()
        } else {
            format!(" · last: {}", self.last)
        };
        let msg = format!(
            "block {}/{} · ETA {eta} · {label}{last}",
            trial.block + 1,
            self.blocks
        );
        if let Some(bar) = &self.bar {
            bar.set_message(msg);
        }
    }

    fn trial_finished(&mut self, r: &TrialResult) {
        self.done += 1;
        self.run_this_session += 1;
        let what = match r.status {
            TrialStatus::Valid => describe_result(r),
            TrialStatus::Invalid => format!(
                "INVALID: {} · {}",
                r.reason.as_deref().unwrap_or(""),
                describe_result(r)
            ),
            TrialStatus::Failed => format!("FAILED: {}", r.reason.as_deref().unwrap_or("")),
        };
        self.last = r
            .derived
            .requests_per_s
            .map(|v| format!("{v:.0} req/s"))
            .or_else(|| {
                r.script
                    .as_ref()
                    .and_then(|s| s.median_wall_s)
                    .map(|w| format!("{w:.3}s"))
            })
            .unwrap_or_default();
        self.line(format!(
            "[{}/{}] block {} · {} · {what}",
            self.done,
            self.total,
            r.block + 1,
            r.label
        ));
        if r.status == TrialStatus::Failed {
            if let Some(server) = &r.server {
                let tail: Vec<&str> = server.stderr_tail.lines().rev().take(5).collect();
                for l in tail.into_iter().rev() {
                    self.line(format!("      | {l}"));
                }
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_position(self.done as u64);
        }
    }

    fn note(&mut self, message: &str) {
        self.line(format!("rubyrace: {message}"));
    }

    fn precision(
        &mut self,
        status: &lab::precision::PrecisionStatus,
        target: &lab::precision::PrecisionTarget,
        added: bool,
        total: usize,
    ) {
        let labels: std::collections::BTreeMap<usize, String> = self.labels.clone();
        let widths: Vec<String> = status
            .comparisons
            .iter()
            .map(|c| {
                let w = c
                    .half_width
                    .map(|h| format!("±{:.2}%", 100.0 * h))
                    .unwrap_or_else(|| "±?".into());
                format!(
                    "{} {w}",
                    labels.get(&c.config_id).map_or("?", String::as_str)
                )
            })
            .collect();
        let per_block = if self.run_this_session > 0 {
            self.started.elapsed() / self.run_this_session as u32 * labels.len().max(1) as u32
        } else {
            self.estimate_per_trial * labels.len().max(1) as u32
        };
        let left = match (added, status.blocks_left) {
            (false, _) => "stopping".to_string(),
            (true, Some(n)) => {
                let n = n.min((target.max_batches - status.blocks_done) as usize);
                format!(
                    "about {n} more block{} (~{})",
                    if n == 1 { "" } else { "s" },
                    humantime::format_duration(Duration::from_secs(
                        (per_block * n as u32).as_secs()
                    ))
                )
            }
            (true, None) => "adding a block".to_string(),
        };
        self.line(format!(
            "precision after {} block{} ({}, 97.5% intervals, target ±{}%): {} · {left}",
            status.blocks_done,
            if status.blocks_done == 1 { "" } else { "s" },
            target.metric.name(),
            100.0 * target.target,
            widths.join(", ")
        ));
        self.total = total;
        self.blocks = (status.blocks_done + u32::from(added)).max(self.blocks);
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
        }
    }
}

pub fn trial(args: TrialArgs) -> Result<ExitCode> {
    // A bad --json path fails before the trial, not after it.
    if let Some(path) = &args.json {
        crate::output::check_output_file(path)?;
    }
    let text = fs::read_to_string(&args.spec)
        .with_context(|| format!("cannot read {}", args.spec.display()))?;
    let spec: TrialSpec = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a trial spec (schema rubyrace.trial-spec/1)",
            args.spec.display()
        )
    })?;
    if spec.schema != lab::trial::TRIAL_SPEC_SCHEMA {
        bail!(
            "{}: schema {:?} is not {}",
            args.spec.display(),
            spec.schema,
            lab::trial::TRIAL_SPEC_SCHEMA
        );
    }
    let interrupt = install_interrupt()?;
    // As in `run`: a server that daemonizes comes back to rubyrace and is killed.
    if let Err(e) = lab::process::become_subreaper() {
        eprintln!("rubyrace: cannot become a child subreaper ({e}): a server that daemonizes could outlive its trial");
    }
    let result = match run_trial(&spec, &interrupt) {
        TrialOutcome::Done(r) => r,
        TrialOutcome::Interrupted => {
            eprintln!("rubyrace: trial interrupted; nothing recorded");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        TrialOutcome::WriteFailed(what) => bail!("{what}; nothing recorded"),
    };
    let json = serde_json::to_string_pretty(&result)? + "\n";
    match &args.json {
        Some(path) => crate::output::write_file(path, json.as_bytes())?,
        None => io::stdout().write_all(json.as_bytes())?,
    }
    eprintln!(
        "rubyrace: trial {} {}{}",
        result.trial_id,
        result.status.as_str(),
        result
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    );
    Ok(if result.status == TrialStatus::Valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_TRIALS_FAILED)
    })
}

pub fn export(args: ExportArgs) -> Result<ExitCode> {
    if let Some(path) = &args.output {
        output::check_output_file(path)?;
    }
    let store = Store::open_read_only(&args.dir)?;
    let meta_keys = [
        "schema_version",
        "rubyrace_version",
        "created_at",
        "experiment_name",
        "experiment_description",
        "experiment_file",
        "experiment_text",
        "seed",
        "batches",
        "order",
        "record_env",
        "smoke",
        "precision",
        "precision_end",
        "conditions",
    ];
    let mut meta = serde_json::Map::new();
    for k in meta_keys {
        if let Some(v) = store.meta(k)? {
            meta.insert(k.to_string(), serde_json::Value::String(v));
        }
    }
    let export = serde_json::json!({
        "schema": "rubyrace.export/1",
        "meta": meta,
        "configs": store.configs()?,
        "schedule": store.schedule()?,
        "trials": store.trial_results_json()?,
        "noisy_attempts": store.noisy_attempts()?,
    });
    let text = serde_json::to_string_pretty(&export)? + "\n";
    output::write(args.output.as_deref(), &text)?;
    Ok(ExitCode::SUCCESS)
}

pub fn rubies(args: RubiesArgs) -> Result<ExitCode> {
    let found = lab::rubies::discover();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        println!("No Ruby found on PATH or in rbenv, rvm, chruby, asdf or mise.");
        return Ok(ExitCode::from(1));
    }
    let width = found.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let source_width = found
        .iter()
        .map(|r| r.source.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:<width$}  {:<source_width$}  RUBY_DESCRIPTION / path",
        "name", "source"
    );
    for r in &found {
        let description = match (&r.description, &r.error) {
            (Some(d), _) => d.clone(),
            (None, Some(e)) => format!("(does not run: {})", e.lines().next().unwrap_or("")),
            (None, None) => "(unknown)".into(),
        };
        println!(
            "{:<width$}  {:<source_width$}  {description}",
            r.name, r.source
        );
        println!(
            "{:<width$}  {:<source_width$}  {}",
            "",
            "",
            r.path.display()
        );
    }
    println!("\nUse them in an experiment file: [rubies] NAME = \"PATH\" (docs/experiment.md).");
    Ok(ExitCode::SUCCESS)
}

//! `rubyrace run`: an experiment file (or a results directory to resume) to a stored run,
//! with the dry run, the plan as JSON and the end-of-run summary. The work is in `lab`.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use experiment::schedule::{schedule, ScheduledTrial};
use experiment::{Experiment, Order, Workload};
use lab::runner::RunEnd;
use results::store::Store;
use units::count;

use crate::invocation::{
    install_run_interrupt, EXIT_BAD_EXPERIMENT, EXIT_INTERRUPTED, EXIT_TRIALS_FAILED,
};
use crate::output::write_stdout;
use crate::progress::run_pending_shown;

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
    #[arg(long, value_parser = crate::invocation::one_of::<Order>(Order::NAMES))]
    pub order: Option<Order>,

    /// Stop at the first trial that fails or is invalid.
    #[arg(long)]
    pub fail_fast: bool,

    /// Rewrite DIR/report.html after every complete block (atomically: a reloaded browser
    /// tab shows the blocks done so far).
    #[arg(long)]
    pub live_report: bool,

    /// With --dry-run: print the plan as JSON (schema rubyrace.plan/1), including the spec
    /// of every trial, each runnable with `rubyrace trial --spec`.
    #[arg(long, requires = "dry_run")]
    pub json: bool,

    /// Run the blocks on a Slurm cluster, one array task per block on a node of its own,
    /// as the file's [fleet] says (docs/fleet.md).
    /// With --dry-run: the fleet's plan too (partition, nodes, job array, time limit),
    /// submitting nothing.
    #[arg(long, conflicts_with_all = ["resume"])]
    pub slurm: bool,

    /// With --slurm (or --resume of a fleet run): submit, then exit; `run --resume DIR`
    /// attaches again.
    #[arg(long)]
    pub detach: bool,

    /// When the run ends, add it to this history file (`rubyrace history add`,
    /// docs/history.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dry_run", "smoke"])]
    pub history: Option<PathBuf>,
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let opened = match &args.resume {
        Some(dir) => store_to_resume(dir)?,
        None => new_store(&args)?,
    };
    let (mut store, kind) = match opened {
        ControlFlow::Continue(opened) => opened,
        ControlFlow::Break(code) => return Ok(code),
    };
    if store.fleet()?.is_some() {
        return super::fleet::control(&mut store, kind, args.detach);
    }
    if args.detach {
        eprintln!("rubyrace: --detach is for a fleet run (--slurm)");
        return Ok(ExitCode::from(EXIT_BAD_EXPERIMENT));
    }
    let dir = store.dir().to_path_buf();
    let interrupt = install_run_interrupt(&format!("rubyrace run --resume {}", dir.display()))?;
    eprintln!("rubyrace: results go to {}", dir.display());
    if args.live_report {
        eprintln!(
            "rubyrace: the report is rewritten after every block: {}",
            crate::live_report::LiveReport::path(&dir).display()
        );
    }
    let end = run_pending_shown(
        &mut store,
        kind,
        args.fail_fast,
        &interrupt,
        args.live_report,
    );
    let end = match end {
        Ok(end) => end,
        Err(e) => {
            print_run_stopped(&store, &dir, &e);
            return Ok(ExitCode::from(1));
        }
    };
    let code = print_run_end(&store, &end, &dir)?;
    if let Some(file) = &args.history {
        // The run's writer goes first, so the history reads a finished run.
        drop(store);
        super::history::add_after(&dir, file);
    }
    Ok(code)
}

/// The store of the run in `dir` to resume, or the exit code when it is not to be resumed
/// here: a bisection, or one of its rounds, is resumed by `rubyrace bisect`; a gate's run
/// by `rubyrace check`; a run whose services this machine cannot start not at all.
fn store_to_resume(
    dir: &Path,
) -> Result<ControlFlow<ExitCode, (Store, results::store::SessionKind)>> {
    if dir.join(results::bisect::BISECT_FILE).exists() {
        eprintln!(
            "rubyrace: {} holds a bisection: go on with `rubyrace bisect --resume {}` (a run's resume would measure outside the search)",
            dir.display(),
            dir.display()
        );
        return Ok(ControlFlow::Break(ExitCode::from(EXIT_BAD_EXPERIMENT)));
    }
    let store = Store::open(dir)?;
    if store.gate()?.is_some() {
        drop(store);
        return super::check::resume_from_run(dir).map(ControlFlow::Break);
    }
    if store.meta(results::bisect::ROUND_META)?.is_some() {
        // A round's directory: DIR/rounds/NN
        let search = dir.ancestors().nth(2).unwrap_or(dir);
        eprintln!(
            "rubyrace: {} is a round of the bisection in {}: go on with `rubyrace bisect --resume {}` (a run's resume would measure it outside the search)",
            dir.display(),
            search.display(),
            search.display()
        );
        return Ok(ControlFlow::Break(ExitCode::from(EXIT_BAD_EXPERIMENT)));
    }
    // The services are stored with the run: one this machine cannot start would fail
    // every resume the same way.
    let problems = lab::services::check(&store.services()?);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("rubyrace: {}: {p}", store.dir().display());
        }
        let next = if store.completed()?.is_empty() {
            format!("it holds no trial: fix the experiment file and run it again with -o {} (an empty results directory is reused)", store.dir().display())
        } else {
            "install what is missing, then resume".to_string()
        };
        eprintln!("rubyrace: the stored experiment cannot run on this machine; {next}");
        return Ok(ControlFlow::Break(ExitCode::from(EXIT_BAD_EXPERIMENT)));
    }
    Ok(ControlFlow::Continue((
        store,
        results::store::SessionKind::Resume,
    )))
}

/// The store of a new run of the experiment file, made once its services and cluster are
/// checked; or the exit code when nothing is to run: a dry run (printed), or an error.
fn new_store(
    args: &RunArgs,
) -> Result<ControlFlow<ExitCode, (Store, results::store::SessionKind)>> {
    let file = args
        .experiment
        .as_ref()
        .expect("clap requires the experiment");
    let experiment = match experiment_to_run(args, file) {
        Some(experiment) => experiment,
        None => return Ok(ControlFlow::Break(ExitCode::from(EXIT_BAD_EXPERIMENT))),
    };
    let plan = schedule(
        experiment.configs.len(),
        experiment.batches,
        experiment.order,
        experiment.seed,
    );
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| crate::results_dir::default_output(&experiment.name, args.smoke));
    // What the services need, checked before the plan is shown or anything starts.
    let problems = lab::services::check(&experiment.services);
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("{}: {p}", file.display());
        }
        return Ok(ControlFlow::Break(ExitCode::from(EXIT_BAD_EXPERIMENT)));
    }
    // The cluster, before a results directory is made: a partition that does not exist
    // or a Slurm that cannot be reached would fail every resume the same way.
    let fleet_plan = match &experiment.fleet {
        Some(fleet) => {
            match super::fleet::check_cluster(fleet, args.dry_run) {
                Ok(plan) => plan,
                Err(e) => {
                    eprintln!("rubyrace: {}: {e:#}; nothing was submitted and no results directory was made", file.display());
                    return Ok(ControlFlow::Break(ExitCode::from(EXIT_BAD_EXPERIMENT)));
                }
            }
        }
        None => None,
    };
    if args.dry_run && args.json {
        print_plan_json(&experiment, &plan, &dir, args.smoke)?;
        return Ok(ControlFlow::Break(ExitCode::SUCCESS));
    }
    if args.dry_run {
        print_dry_run(&experiment, &plan)?;
        if let Some(plan) = fleet_plan {
            write_stdout(&super::fleet::describe_plan(&experiment, &plan))?;
        }
        return Ok(ControlFlow::Break(ExitCode::SUCCESS));
    }
    if args.output.is_none() {
        crate::results_dir::make_results_root(&dir).map_err(anyhow::Error::msg)?;
    }
    Ok(ControlFlow::Continue((
        Store::create(&dir, &experiment, &plan, args.smoke)?,
        results::store::SessionKind::Start,
    )))
}

/// The experiment `file` as this run measures it: read (and, unless a dry run, its Ruby
/// built), on a fleet with `--slurm`, smoke-sized with `--smoke`, in the `--order` given;
/// None when it has errors (printed).
fn experiment_to_run(args: &RunArgs, file: &Path) -> Option<Experiment> {
    // A dry run builds nothing: a `ruby_ref` not built yet is an error of the file then.
    let read = if args.dry_run {
        Experiment::load(file)
    } else {
        Experiment::load_building(file, &super::ruby::experiment_ruby)
    };
    let experiment = match read {
        Ok(e) => e,
        Err(errors) => {
            eprintln!("{errors}");
            return None;
        }
    };
    // Before the plan (on stderr, so `--dry-run --json` stays JSON).
    if let Some(note) = experiment.defaults_note() {
        eprintln!("rubyrace: {note}");
    }
    let mut experiment = experiment;
    if args.slurm {
        experiment.fleet = Some(experiment.fleet.take().unwrap_or_default());
    } else if experiment.fleet.take().is_some() && !args.dry_run {
        eprintln!("rubyrace: [fleet] is for `rubyrace run --slurm`; this run is on this machine");
    }
    let mut experiment = if args.smoke {
        let smoke = experiment.smoke();
        eprintln!("rubyrace: {}", smoke.smoke_note());
        smoke
    } else {
        experiment
    };
    if let Some(order) = args.order {
        experiment.order = order;
    }
    Some(experiment)
}

/// A run stopped by an error (`e`): what is stored in `dir`, and how to go on.
fn print_run_stopped(store: &Store, dir: &Path, e: &anyhow::Error) {
    // A resume helps when trials are stored and the cause is passing; before the
    // first trial, a fixed file run again into the same directory does as well.
    let stored = store.completed().map(|c| c.len()).unwrap_or(0);
    if stored == 0 {
        eprintln!(
            "rubyrace: the run stopped: {e:#}\nNo trial is stored. Fix the cause and run the experiment again (`rubyrace run FILE -o {}` reuses this empty directory), or resume with:\n  rubyrace run --resume {}",
            dir.display(),
            dir.display()
        );
    } else {
        eprintln!(
            "rubyrace: the run stopped: {e:#}\nEvery trial finished before this point is stored ({stored}). Resume with:\n  rubyrace run --resume {}",
            dir.display()
        );
    }
}

/// The end of a run: its summary, the adaptive rule's and the gate's ends, then how it
/// ended (`end`) and, unless it is complete, how to go on; the exit code that says it.
fn print_run_end(store: &Store, end: &RunEnd, dir: &Path) -> Result<ExitCode> {
    crate::run_end::print_summary(store)?;
    if let Some(end) = store.precision_end()? {
        println!("\n{}.", end.describe());
    }
    if let Some(end) = store.gate_end()? {
        println!("\ngate (rubyrace check): {}.", end.describe());
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
        RunEnd::CannotBoot { block, .. } => {
            eprintln!(
                "\nrubyrace: stopped after block {block}: no trial of the run could run, so every further block would fail the same way:\n  {}\n{completed} of {total} trials are stored. Fix the cause, then resume with:\n  rubyrace run --resume {}",
                end.cannot_boot_lines().join("\n  "),
                dir.display()
            );
            Ok(ExitCode::from(EXIT_TRIALS_FAILED))
        }
        RunEnd::Complete => crate::run_end::finish_complete(store),
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
        experiment.order.as_str(),
        experiment.seed
    );
    println!("Configurations:");
    let interleaved = experiment.design.measured_per_configuration();
    for c in &experiment.configs {
        let s = &c.settings;
        let what = measured_line(s, interleaved);
        println!("  [{}] {}", c.id, c.label);
        println!("      ruby: {}", s.ruby_argv.join(" "));
        let verified = verified_knobs(s);
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
        for line in configuration_extras(s) {
            println!("      {line}");
        }
        println!("      {what}");
    }
    let services = lab::services::describe(&experiment.services);
    if !services.is_empty() {
        println!("\nServices (given to the app as DATABASE_URL and REDIS_URL):");
        for line in services {
            println!("  {line}");
        }
    }
    let estimate = experiment::estimated_block_time(&experiment.configs, &experiment.design)
        * experiment.batches;
    println!("\nSchedule:");
    for block in 0..experiment.batches {
        let order: Vec<String> = plan
            .iter()
            .filter(|t| t.block == block)
            .map(|t| format!("{}", t.config_id))
            .collect();
        println!("  block {}: {}", block + 1, order.join(" "));
    }
    let profiled = experiment
        .configs
        .iter()
        .any(|c| !c.settings.profile.is_empty() && !c.settings.profile_measured);
    println!(
        "\nAbout {} (warmup + duration + ~3s of server start and stop per HTTP trial{}).",
        humantime::format_duration(Duration::from_secs(estimate.as_secs())),
        if profiled {
            ", + the profiled phase: the duration again and ~1s for the profilers"
        } else {
            ""
        }
    );
    if let Some(line) = design_line(&experiment.design) {
        println!("{line}");
    }
    if let Some(line) = conditions_line(&experiment.conditions) {
        println!("{line}");
    }
    if let Some(t) = &experiment.precision {
        println!("{}", adaptive_line(experiment, t, estimate));
    }
    write_stdout(&out)
}

/// What a configuration measures, for the dry run: an HTTP server's app, server, counts,
/// load and time measured (`interleaved`: per configuration in a sliced design), or a
/// script's path and runs.
fn measured_line(s: &experiment::ConfigSettings, interleaved: Option<Duration>) -> String {
    let measured = interleaved.unwrap_or(s.load.duration);
    match s.workload {
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
    }
}

/// The knobs a trial verifies in the server, one phrase each: JIT, allocator, compaction.
fn verified_knobs(s: &experiment::ConfigSettings) -> Vec<String> {
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
    verified
}

/// A sliced design, said in a sentence for the dry run; None for blocks.
fn design_line(design: &experiment::design::Design) -> Option<String> {
    match *design {
        experiment::design::Design::Blocks => None,
        experiment::design::Design::Interleaved { slice, rounds } => Some(format!(
            "Design: interleaved. In each block every configuration's server is started and warmed up, then the load alternates between them: {} of {} each, in a new random order every round.",
            count(rounds as usize, "round"),
            humantime::format_duration(slice)
        )),
        experiment::design::Design::CoScheduled { slice, rounds } => Some(format!(
            "Design: co-scheduled. In each block every configuration's server is started and warmed up, then all of them are loaded at once, sharing the server CPUs: {} of {}. Compare CPU per request: throughput and latency are each server's share.",
            count(rounds as usize, "window"),
            humantime::format_duration(slice)
        )),
    }
}

/// The adaptive rule (`t`), said in a sentence for the dry run: when it stops, at most
/// how many blocks, and how long those take (from the run's `estimate`).
fn adaptive_line(
    experiment: &Experiment,
    t: &experiment::precision::PrecisionTarget,
    estimate: Duration,
) -> String {
    let per_block = estimate / experiment.batches.max(1);
    let budget = match t.max_duration {
        Some(d) => format!(", or {} of trials", humantime::format_duration(d)),
        None => String::new(),
    };
    format!(
        "Adaptive: after {} blocks, a block at a time until every comparison with {} is within ±{}% on {} ({} intervals{}), at most {} blocks (about {}){budget}.",
        t.first_stop(experiment.configs.len()),
        experiment.configs.first().map_or("the baseline", |c| c.label.as_str()),
        100.0 * t.target,
        t.metric.name(),
        report::format::confidence_text(experiment::precision::interval_confidence(
            experiment.configs.len()
        )),
        if experiment.configs.len() > 2 {
            format!(
                ", simultaneous over the {} comparisons",
                experiment.configs.len() - 1
            )
        } else {
            String::new()
        },
        t.max_batches,
        humantime::format_duration(Duration::from_secs((per_block * t.max_batches).as_secs()))
    )
}

/// What else a configuration runs with, one line each, for the dry run: its setup
/// commands, scenario, TLS and profilers.
fn configuration_extras(s: &experiment::ConfigSettings) -> Vec<String> {
    let mut lines = Vec::new();
    // "commit: REF = HASH12: SUBJECT (of REPO, WHERE)".
    let commit_line =
        |what: &str, repo: &std::path::Path, git_ref: &str, commit: &str, place: String| {
            let subject = sys::git::describe_commit(repo, commit)
                .map(|(subject, _)| format!(": {subject}"))
                .unwrap_or_default();
            format!(
                "{what}: {git_ref} = {}{subject} (of {}, {place})",
                &commit[..12.min(commit.len())],
                repo.display()
            )
        };
    if let Some(c) = &s.app_commit {
        lines.push(commit_line(
            "commit",
            &c.repo,
            &c.git_ref,
            &c.commit,
            "checked out in the results directory".into(),
        ));
    }
    if let Some(c) = &s.ruby_commit {
        lines.push(commit_line(
            "ruby",
            &c.repo,
            &c.git_ref,
            &c.commit,
            format!("built in {}", c.prefix.display()),
        ));
    }
    for argv in &s.setup {
        let argv: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
        lines.push(format!("setup: {}", sys::process::display_argv(&argv)));
    }
    if let Some(source) = &s.load.scenario {
        let scenarios = source.parse().map_or_else(
            |_| String::new(),
            |set| {
                let named: Vec<String> = set
                    .scenarios
                    .iter()
                    .map(|x| {
                        format!(
                            "{} (weight {}, {})",
                            x.name,
                            x.weight,
                            count(x.steps.len(), "step")
                        )
                    })
                    .collect();
                format!(": {}", named.join(", "))
            },
        );
        lines.push(format!("scenario: {}{scenarios}", source.name));
    }
    if s.tls {
        lines.push("TLS: the server serves HTTPS with a certificate made for the run; the load trusts only its authority".into());
    }
    if !s.profile.is_empty() {
        let names: Vec<&str> = s.profile.iter().map(|p| p.as_str()).collect();
        let when = match (s.workload, s.profile_measured) {
            (_, true) => "during the measured phase (profile_measured)".to_string(),
            (Workload::Http, false) => format!(
                "in a profiled phase of {} after the measured one (the same load again; not in the figures)",
                humantime::format_duration(s.load.duration)
            ),
            (Workload::Script, false) => format!(
                "in {} of the script after the measured ones",
                count(s.profile_runs as usize, "profiled run")
            ),
        };
        lines.push(format!(
            "profiled: {} at {} Hz {when}",
            names.join(", "),
            s.profile_rate
        ));
    }
    lines
}

/// The run's trial conditions in a sentence, or None when it sets none.
fn conditions_line(c: &experiment::conditions::TrialConditions) -> Option<String> {
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
    let json = lab::runner::plan(experiment, plan, dir, smoke)?;
    write_stdout(&(serde_json::to_string_pretty(&json)? + "\n"))
}

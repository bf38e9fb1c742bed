//! Profilers attached to a trial's processes for one phase: rbspy for Ruby stacks (every
//! process of the server's tree, forked workers included, or a script's process), perf for
//! native and kernel stacks (`perf record -e cpu-clock`: VMs have no hardware counters).
//!
//! A [`Session`] is one thread that waits for the phase to begin, starts each profiler as
//! a supervised process group of its own, and on [`Session::finish`] interrupts them
//! (SIGINT, so they write what they sampled), folds their stacks and stores them gzipped in
//! the trial's directory as `profile.<profiler>.folded.gz`. The profilers are started and
//! waited for on that same thread, because a supervised child's parent-death signal fires
//! when the thread that spawned it exits. A profiler that cannot start, or cannot read the
//! Ruby, leaves a [`ProfileRecord`] with its error; the trial's measurement is kept.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use experiment::Profiler;
use results::profile::{
    fold_lines, folded_file_name, read_folded, write_folded, ProfileRecord, FILE_PREFIX,
    PROFILED_PHASE,
};
use sys::process::{Launch, Supervised};

/// How long a profiler takes from its start to its first sample: perf took about 0.3 s on
/// this 2-CPU VM (a 0.5 s script started with it gave no sample at all; after a 0.3 s
/// delay, 30); rbspy less.
const ATTACH_SETTLE: Duration = Duration::from_millis(600);

/// How long a profiler may take to write its output after SIGINT.
const FINISH_TIMEOUT: Duration = Duration::from_secs(20);

/// The environment variable that names the rbspy executable (else `rbspy` on PATH, then
/// `~/.cargo/bin/rbspy`, where `scripts/setup` installs it).
pub const RBSPY_ENV: &str = "RUBYRACE_RBSPY";

/// The probe's start gate (ruby/probe.rb): a script's profiled run waits at load until
/// this file exists in the trial's directory.
pub const START_GATE_ENV: &str = "RUBYRACE_START_GATE";
pub const START_GATE_FILE: &str = "profile.start-gate";

/// Profilers attached to a process tree, on a thread of their own.
pub struct Session {
    stop: mpsc::Sender<()>,
    attached: mpsc::Receiver<()>,
    thread: JoinHandle<Vec<ProfileRecord>>,
}

/// What a session profiles.
#[derive(Clone, Debug)]
pub struct Target {
    /// The first process (the server's master, or the script).
    pub root: i32,
    /// Its process group: every member of the tree is profiled.
    pub pgid: i32,
    /// The trial's directory (outputs, logs).
    pub dir: PathBuf,
    /// Where profiler process groups are registered while they live.
    pub registry: PathBuf,
    pub phase: String,
    /// Samples per second (`profile_rate`): perf's `--freq`, rbspy's `--rate`.
    pub rate_hz: u32,
}

impl Session {
    /// Starts `profilers` on `target` at `at` (now, if it has passed).
    pub fn start(profilers: &[Profiler], target: Target, at: Instant) -> Session {
        let (stop, stopped) = mpsc::channel();
        let (attached_tx, attached) = mpsc::channel();
        let profilers = profilers.to_vec();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            let started = Instant::now();
            let mut running: Vec<Running> = profilers
                .iter()
                .map(|p| Running::start(*p, &target))
                .collect();
            let _ = attached_tx.send(());
            // Until told to stop, or until the first process has exited: rbspy can hold
            // the remaining threads of an exiting Ruby stopped (ptrace) and never let them
            // go, so the process never finishes exiting (seen with a script of 16 threads:
            // its leader a zombie, the others in ptrace_stop for 9 minutes). Stopping
            // rbspy releases them.
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(Duration::from_millis(50))
            {
                if exited_leader(target.root) {
                    break;
                }
            }
            let duration = started.elapsed();
            running
                .iter_mut()
                .map(|r| r.finish(&target, duration))
                .collect()
        });
        Session {
            stop,
            attached,
            thread,
        }
    }

    /// Waits until every profiler has been started and has had `ATTACH_SETTLE` to attach
    /// (at most `timeout`): a script's profiled run is let go only then.
    pub fn wait_attached(&self, timeout: Duration) {
        if self.attached.recv_timeout(timeout).is_ok() {
            std::thread::sleep(ATTACH_SETTLE);
        }
    }

    /// Stops the profilers and returns what each recorded (requests are filled by the
    /// caller, who knows what the phase served).
    pub fn finish(self) -> Vec<ProfileRecord> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_else(|_| {
            vec![ProfileRecord {
                error: Some("the profiling thread panicked".into()),
                ..ProfileRecord::default()
            }]
        })
    }
}

/// Whether `pid`'s main thread has exited (a zombie, or gone): the process is ending.
fn exited_leader(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// How long a profiler waits for a Ruby to appear in a tree just started (a script's run,
/// or a wrapper that has not started its Ruby yet) before it attaches to what is there.
const RUBY_APPEARS_WITHIN: Duration = Duration::from_secs(2);

/// The pids of the target's tree, once it holds a Ruby process (or after
/// `RUBY_APPEARS_WITHIN`).
fn tree_with_ruby(target: &Target) -> Vec<i32> {
    let deadline = Instant::now() + RUBY_APPEARS_WITHIN;
    loop {
        let pids = sys::resources::tree_pids(target.root, target.pgid).unwrap_or_default();
        if pids.iter().any(|&p| is_ruby(p)) || Instant::now() >= deadline {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` runs a Ruby: its executable is named ruby* or it has libruby mapped.
fn is_ruby(pid: i32) -> bool {
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok();
    let named = exe
        .as_ref()
        .and_then(|e| e.file_name())
        .is_some_and(|n| n.to_string_lossy().starts_with("ruby"));
    named
        || fs::read_to_string(format!("/proc/{pid}/maps"))
            .is_ok_and(|maps| maps.contains("/libruby"))
}

/// The top-most Ruby process of the tree `pids` (rooted at `root`): the one rbspy attaches to
/// and follows the forks of. The root itself is not always Ruby: a wrapper (bubblewrap for
/// `../shared/tools/debian-ruby`'s Rubies, `bundle exec`, a shell) may start it, and rbspy
/// gives up on a process without a Ruby VM ("Couldn't find Ruby VM address").
fn first_ruby(root: i32, pids: &[i32]) -> i32 {
    let rubies: Vec<i32> = pids.iter().copied().filter(|&p| is_ruby(p)).collect();
    let parent = |pid: i32| {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok())
            })
    };
    rubies
        .iter()
        .copied()
        .find(|&p| parent(p).is_none_or(|pp| !rubies.contains(&pp)))
        .unwrap_or(root)
}

/// A record per profiler that could not even be attached, saying why.
pub fn failed_records(profilers: &[Profiler], rate_hz: u32, why: &str) -> Vec<ProfileRecord> {
    profilers
        .iter()
        .map(|&p| ProfileRecord {
            profiler: Some(p),
            rate_hz,
            phase: PROFILED_PHASE.into(),
            error: Some(format!("{}: {why}", p.as_str())),
            ..ProfileRecord::default()
        })
        .collect()
}

/// The profiles of several profiled runs (a script's `profile_runs`) added up into one
/// record per profiler: stacks, samples, CPU time, script runs and the profilers' time
/// summed over the runs that each profiler sampled, the wall time a median per run.
#[derive(Default)]
pub struct Accumulated {
    records: Vec<ProfileRecord>,
    stacks: BTreeMap<Profiler, BTreeMap<String, u64>>,
    walls: BTreeMap<Profiler, Vec<f64>>,
    runs: u32,
}

impl Accumulated {
    /// Adds the records of one run (its `run`-th, from 1), reading and removing the folded
    /// stacks each wrote in `dir` before the next run writes its own. A run a profiler did
    /// not sample (an error, no stacks) adds only its error, the first one kept.
    pub fn add(&mut self, dir: &Path, run: u32, records: Vec<ProfileRecord>) {
        self.runs = self.runs.max(run);
        for r in records {
            let Some(profiler) = r.profiler else { continue };
            let stacks = r.file.as_ref().and_then(|f| {
                let path = dir.join(f);
                let read = read_folded(&path).ok();
                let _ = fs::remove_file(path);
                read
            });
            let index = match self.records.iter().position(|x| x.profiler == r.profiler) {
                Some(i) => i,
                None => {
                    self.records.push(ProfileRecord {
                        file: None,
                        samples: 0,
                        stacks: 0,
                        pids: Vec::new(),
                        duration_s: 0.0,
                        script_runs: None,
                        cpu_us: None,
                        wall_s: None,
                        error: None,
                        ..r.clone()
                    });
                    self.records.len() - 1
                }
            };
            let sum = &mut self.records[index];
            match (stacks, r.error) {
                (Some(stacks), None) => {
                    let merged = self.stacks.entry(profiler).or_default();
                    for (stack, n) in stacks {
                        *merged.entry(stack).or_insert(0) += n;
                    }
                    sum.samples += r.samples;
                    sum.duration_s += r.duration_s;
                    sum.script_runs =
                        Some(sum.script_runs.unwrap_or(0) + r.script_runs.unwrap_or(0));
                    sum.cpu_us = Some(sum.cpu_us.unwrap_or(0) + r.cpu_us.unwrap_or(0));
                    self.walls.entry(profiler).or_default().extend(r.wall_s);
                    for pid in r.pids {
                        if !sum.pids.contains(&pid) {
                            sum.pids.push(pid);
                        }
                    }
                }
                (_, error) => {
                    let error =
                        error.unwrap_or_else(|| format!("{}: no samples", profiler.as_str()));
                    sum.error
                        .get_or_insert(format!("profiled run {run}: {error}"));
                }
            }
        }
    }

    /// The summed records, each profiler's stacks written to its file in `dir`. With one
    /// run, that run's records as they were (its error unprefixed).
    pub fn finish(mut self, dir: &Path) -> Vec<ProfileRecord> {
        for r in &mut self.records {
            let Some(profiler) = r.profiler else { continue };
            let walls = self.walls.remove(&profiler).unwrap_or_default();
            r.wall_s = stats::median(&walls);
            if self.runs == 1 {
                if let Some(e) = &mut r.error {
                    *e = e.trim_start_matches("profiled run 1: ").to_string();
                }
            }
            let Some(stacks) = self.stacks.remove(&profiler) else {
                continue;
            };
            r.stacks = stacks.len();
            let name = folded_file_name(profiler);
            match write_folded(&dir.join(&name), &stacks) {
                Ok(()) => r.file = Some(name),
                Err(e) => {
                    r.error = Some(format!("the folded stacks could not be written: {e}"));
                }
            }
        }
        self.records
    }
}

/// One profiler process.
struct Running {
    profiler: Profiler,
    process: Result<Supervised, String>,
    pids: Vec<i32>,
    /// The process rbspy attached to when the tree held no Ruby (it attaches to the root
    /// then, and its failure must not be blamed on a Ruby).
    not_ruby: Option<i32>,
    /// Where the profiler writes (rbspy: folded stacks; perf: perf.data).
    output: PathBuf,
}

impl Running {
    fn start(profiler: Profiler, target: &Target) -> Running {
        let pids = tree_with_ruby(target);
        let attach_to = first_ruby(target.root, &pids);
        let not_ruby = (!is_ruby(attach_to)).then_some(attach_to);
        let name = format!("{FILE_PREFIX}{}", profiler.as_str());
        let output = target.dir.join(match profiler {
            Profiler::Rbspy => format!("{name}.folded"),
            Profiler::Perf => format!("{name}.data"),
        });
        let rate = target.rate_hz.to_string();
        let argv: Result<Vec<String>, String> = match profiler {
            Profiler::Rbspy => rbspy_executable().map(|rbspy| {
                vec![
                    rbspy.display().to_string(),
                    "record".into(),
                    "--pid".into(),
                    attach_to.to_string(),
                    "--subprocesses".into(),
                    // CPU time, as perf's cpu-clock: a master or an idle thread waiting in
                    // a C function would otherwise fill the profile.
                    "--on-cpu".into(),
                    "--rate".into(),
                    rate,
                    "--format".into(),
                    "collapsed".into(),
                    "--file".into(),
                    output.display().to_string(),
                    "--raw-file".into(),
                    target
                        .dir
                        .join(format!("{name}.raw.gz"))
                        .display()
                        .to_string(),
                    "--silent".into(),
                ]
            }),
            Profiler::Perf => {
                let list: Vec<String> = if pids.is_empty() {
                    vec![target.root.to_string()]
                } else {
                    pids.iter().map(i32::to_string).collect()
                };
                Ok(vec![
                    "perf".into(),
                    "record".into(),
                    "--event".into(),
                    "cpu-clock".into(),
                    "--freq".into(),
                    rate,
                    "--call-graph".into(),
                    "fp".into(),
                    "--pid".into(),
                    list.join(","),
                    // Threads and processes started after perf attached (a script's
                    // threads, a worker forked later): `--pid` alone leaves them out.
                    "--inherit".into(),
                    "--output".into(),
                    output.display().to_string(),
                    "--quiet".into(),
                ])
            }
        };
        let process = argv.and_then(|argv| {
            let launch = Launch {
                argv,
                env: Vec::new(),
                cwd: target.dir.clone(),
                cpus: None,
            };
            Supervised::spawn(&launch, &target.dir, &name, &target.registry)
                .map_err(|e| not_started(profiler, &e))
        });
        Running {
            profiler,
            process,
            pids,
            not_ruby,
            output,
        }
    }

    fn finish(&mut self, target: &Target, duration: Duration) -> ProfileRecord {
        let mut record = ProfileRecord {
            profiler: Some(self.profiler),
            rate_hz: target.rate_hz,
            duration_s: duration.as_secs_f64(),
            pids: self.pids.clone(),
            phase: target.phase.clone(),
            version: profiler_version(self.profiler),
            ..ProfileRecord::default()
        };
        let process = match &mut self.process {
            Ok(p) => p,
            Err(e) => {
                record.error = Some(e.clone());
                return record;
            }
        };
        let early_exit = process.exited();
        if early_exit.is_none() {
            process.interrupt();
            process.wait_for_exit(FINISH_TIMEOUT);
        }
        let ended = process.stop(Duration::from_secs(2));
        let stderr = process.stderr_tail(1500);
        let folded = match self.profiler {
            Profiler::Rbspy => fs::read_to_string(&self.output).map_err(|e| e.to_string()),
            Profiler::Perf => perf_folded(&self.output),
        };
        let folded = match folded {
            Ok(f) if !f.trim().is_empty() => f,
            other => {
                let why = match other {
                    Err(e) => format!("no output ({e})"),
                    Ok(_) => "no samples".into(),
                };
                record.error = Some(describe_failure(
                    self.profiler,
                    &why,
                    early_exit.is_some(),
                    &ended.status,
                    &stderr,
                    self.not_ruby,
                ));
                return record;
            }
        };
        let stacks = fold_lines(&folded);
        record.samples = stacks.values().sum();
        record.stacks = stacks.len();
        let name = folded_file_name(self.profiler);
        match write_folded(&target.dir.join(&name), &stacks) {
            Ok(()) => {
                record.file = Some(name);
                let _ = fs::remove_file(&self.output);
            }
            Err(e) => record.error = Some(format!("the folded stacks could not be written: {e}")),
        }
        record
    }
}

/// Why a profiler could not be started, and what to do when it is not installed.
fn not_started(profiler: Profiler, e: &io::Error) -> String {
    let mut text = format!("{} could not be started: {e}", profiler.as_str());
    if e.kind() == io::ErrorKind::NotFound {
        text.push_str(match profiler {
            Profiler::Perf => {
                " (perf is not on PATH: install it, e.g. apt-get install linux-perf on \
                 Debian; the trial's measurement is kept)"
            }
            Profiler::Rbspy => {
                " (scripts/setup installs rbspy: cargo install --locked rbspy; or name it \
                 in RUBYRACE_RBSPY; the trial's measurement is kept)"
            }
        });
    }
    text
}

/// Why a profiler gave nothing, with the part of its stderr that says so.
fn describe_failure(
    profiler: Profiler,
    why: &str,
    exited_early: bool,
    status: &str,
    stderr: &str,
    not_ruby: Option<i32>,
) -> String {
    // rbspy's own account starts there; its progress lines before it say nothing.
    let account = stderr
        .find("Something went wrong")
        .map_or(stderr, |at| &stderr[at..]);
    let said: Vec<&str> = account
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("Stack backtrace")
                && !l.chars().next().is_some_and(|c| c.is_ascii_digit())
                && !l.starts_with("at ")
        })
        .take(6)
        .collect();
    let mut text = format!("{}: {why}", profiler.as_str());
    if exited_early {
        text.push_str(&format!("; it exited before the phase ended ({status})"));
    }
    if !said.is_empty() {
        text.push_str(&format!("; it said: {}", said.join(" ")));
    }
    if let (Profiler::Rbspy, Some(pid)) = (profiler, not_ruby) {
        let exe = fs::read_link(format!("/proc/{pid}/exe"))
            .map_or_else(|_| "gone by then".into(), |e| e.display().to_string());
        text.push_str(&format!(
            " (no Ruby process appeared in the tree within {} s, so rbspy attached to its \
             first process, pid {pid} ({exe}), which is not a Ruby: is the command a Ruby \
             server or script? The trial's measurement is kept)",
            RUBY_APPEARS_WITHIN.as_secs()
        ));
    } else if profiler == Profiler::Rbspy && stderr.contains("Couldn't find Ruby VM address") {
        text.push_str(
            " (rbspy found the Ruby's version but not the symbol ruby_current_vm_ptr: this \
             Ruby's libruby does not export it and its symbol table was stripped, as in \
             Debian's Ruby 3.3 packages; rbspy does not read split debug symbols, \
             rbspy/rbspy#390. perf still profiles it, and a Ruby built by `rubyrace ruby \
             build` keeps its symbols; the trial's measurement is kept)",
        );
    } else if stderr.contains("Operation not permitted")
        || stderr.contains("Permission denied")
        || stderr.contains("perf_event_paranoid")
    {
        text.push_str(match profiler {
            Profiler::Rbspy => {
                " (rbspy reads another process's memory with ptrace: run rubyrace as root, \
                 give rbspy CAP_SYS_PTRACE, or set kernel.yama.ptrace_scope = 0; the trial's \
                 measurement is kept)"
            }
            Profiler::Perf => {
                " (perf needs kernel.perf_event_paranoid at 1 or less, or root / \
                 CAP_PERFMON: sysctl kernel.perf_event_paranoid=1; the trial's measurement is \
                 kept)"
            }
        });
    } else if profiler == Profiler::Perf && stderr.contains("Maximum frequency rate") {
        text.push_str(
            " (profile_rate is above kernel.perf_event_max_sample_rate, which the kernel \
             lowers when sampling takes too long: lower profile_rate, or raise the limit with \
             sysctl kernel.perf_event_max_sample_rate=N; the trial's measurement is kept)",
        );
    } else if profiler == Profiler::Rbspy && stderr.contains("ruby version") {
        text.push_str(
            " (rbspy cannot read this Ruby's VM: it supports CRuby 1.9.1 to 3.4 with \
             symbols for ruby_version; the trial's measurement is kept)",
        );
    }
    text
}

/// The first line of `PROFILER --version`, asked once per rubyrace process.
fn profiler_version(profiler: Profiler) -> Option<String> {
    static RBSPY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    static PERF: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let (cell, program) = match profiler {
        Profiler::Rbspy => (&RBSPY, rbspy_executable().ok()),
        Profiler::Perf => (&PERF, Some(PathBuf::from("perf"))),
    };
    cell.get_or_init(|| {
        let out = std::process::Command::new(program?)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next()?.trim();
        (out.status.success() && !line.is_empty()).then(|| line.to_string())
    })
    .clone()
}

/// rbspy: `RUBYRACE_RBSPY`, else on PATH, else `~/.cargo/bin/rbspy` (each resolved as
/// rubyrace resolves a Ruby: `~/` is `$HOME`, a bare name is looked up on PATH).
pub fn rbspy_executable() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(RBSPY_ENV) {
        return Ok(PathBuf::from(path));
    }
    ["rbspy", "~/.cargo/bin/rbspy"]
        .into_iter()
        .find_map(|p| rubies::discovery::resolve_executable(p).ok())
        .ok_or_else(|| {
            format!(
                "rbspy was not found (on PATH, in ~/.cargo/bin, or in {RBSPY_ENV}): \
             scripts/setup installs it (cargo install --locked rbspy)"
            )
        })
}

/// Removes YJIT's perf maps (`--yjit-perf`: /tmp/perf-PID.map) of every Ruby process the
/// trial started, as its probe recorded them (`probe_dir`): they are read by `perf script`
/// and would otherwise stay in /tmp, one per process and run.
pub fn remove_perf_maps(probe_dir: &Path) {
    for record in crate::probe::read_records(probe_dir) {
        if record.pid > 0 {
            let _ = fs::remove_file(format!("/tmp/perf-{}.map", record.pid));
        }
    }
}

/// `perf script` of a perf.data file, folded with inferno's perf collapser.
fn perf_folded(data: &Path) -> Result<String, String> {
    if !data.exists() {
        return Err(format!("{} was not written", data.display()));
    }
    let output = Command::new("perf")
        .arg("script")
        .arg("--input")
        .arg(data)
        // No period field: each sample then counts 1 (with it, inferno sums the periods,
        // nanoseconds of cpu-clock).
        .arg("--fields")
        .arg("comm,pid,tid,time,event,ip,sym,dso")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("perf script could not run: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "perf script failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let mut folded = Vec::new();
    let mut folder = inferno::collapse::perf::Folder::default();
    inferno::collapse::Collapse::collapse(&mut folder, &output.stdout[..], &mut folded)
        .map_err(|e| format!("the perf stacks could not be folded: {e}"))?;
    String::from_utf8(folded).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's record as a session leaves it, its stacks written in `dir`.
    fn run_record(
        dir: &Path,
        profiler: Profiler,
        folded: &str,
        cpu_us: u64,
        wall_s: f64,
    ) -> ProfileRecord {
        let stacks = fold_lines(folded);
        let name = folded_file_name(profiler);
        write_folded(&dir.join(&name), &stacks).unwrap();
        ProfileRecord {
            profiler: Some(profiler),
            file: Some(name),
            rate_hz: 499,
            duration_s: 1.5,
            samples: stacks.values().sum(),
            stacks: stacks.len(),
            pids: vec![10],
            phase: PROFILED_PHASE.into(),
            script_runs: Some(1),
            cpu_us: Some(cpu_us),
            wall_s: Some(wall_s),
            ..ProfileRecord::default()
        }
    }

    #[test]
    fn the_profiles_of_several_runs_add_up() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let mut sum = Accumulated::default();
        sum.add(
            dir,
            1,
            vec![run_record(
                dir,
                Profiler::Rbspy,
                "main;work 30\nmain 2\n",
                400_000,
                0.5,
            )],
        );
        sum.add(
            dir,
            2,
            vec![run_record(
                dir,
                Profiler::Rbspy,
                "main;work 20\nmain;gc 5\n",
                300_000,
                0.4,
            )],
        );
        let mut failed = run_record(dir, Profiler::Rbspy, "main;work 7\n", 100_000, 0.2);
        failed.error = Some("the profiled run ended with exit status 1".into());
        sum.add(dir, 3, vec![failed]);
        let records = sum.finish(dir);
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!(r.rate_hz, 499);
        // The failed run's samples and time are left out, its error kept.
        assert_eq!(r.samples, 57);
        assert_eq!(r.stacks, 3);
        assert_eq!(r.script_runs, Some(2));
        assert_eq!(r.cpu_us, Some(700_000));
        assert_eq!(r.duration_s, 3.0);
        assert_eq!(r.wall_s, Some(0.45));
        assert_eq!(
            r.error.as_deref(),
            Some("profiled run 3: the profiled run ended with exit status 1")
        );
        let merged = read_folded(&dir.join(r.file.as_ref().unwrap())).unwrap();
        assert_eq!(merged["main;work"], 50);
        assert_eq!(merged["main;gc"], 5);
        assert_eq!(merged.values().sum::<u64>(), r.samples);
    }

    #[test]
    fn one_run_is_recorded_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let mut sum = Accumulated::default();
        let one = run_record(dir, Profiler::Perf, "a;b 3\n", 1000, 0.1);
        let mut nothing = failed_records(&[Profiler::Rbspy], 99, "rbspy was not found").remove(0);
        nothing.phase = PROFILED_PHASE.into();
        sum.add(dir, 1, vec![one.clone(), nothing.clone()]);
        let records = sum.finish(dir);
        assert_eq!(records, [one, nothing]);
    }

    #[test]
    fn a_profiler_that_is_not_installed_is_told_how_to_get_it() {
        let missing = io::Error::from(io::ErrorKind::NotFound);
        assert!(not_started(Profiler::Perf, &missing).contains("apt-get install linux-perf"));
        assert!(not_started(Profiler::Rbspy, &missing).contains("cargo install --locked rbspy"));
        let other = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(!not_started(Profiler::Perf, &other).contains("install"));
    }

    #[test]
    fn a_failure_names_the_profiler_and_what_it_said() {
        let text = describe_failure(
            Profiler::Rbspy,
            "no samples",
            true,
            "exit status 1",
            "Something went wrong\n- Couldn't get ruby version: Failed\n\nStack backtrace:\n   0: x\n",
            None,
        );
        assert!(
            text.starts_with("rbspy: no samples; it exited before"),
            "{text}"
        );
        assert!(text.contains("Couldn't get ruby version"), "{text}");
        assert!(text.contains("measurement is kept"), "{text}");
        assert!(!text.contains("0: x"), "{text}");
    }

    #[test]
    fn a_profiler_without_permission_is_told_what_to_change() {
        let rbspy = describe_failure(
            Profiler::Rbspy,
            "no samples",
            true,
            "exit status 1",
            "Something went wrong while rbspy was sampling the process. Here's what we know:\n\
             - Operation not permitted (os error 1)\n",
            None,
        );
        assert!(rbspy.contains("ptrace_scope"), "{rbspy}");
        let perf = describe_failure(
            Profiler::Perf,
            "no samples",
            true,
            "exit status 255",
            "Error:\nAccess to performance monitoring and observability operations is limited.\n\
             Consider adjusting /proc/sys/kernel/perf_event_paranoid setting\n",
            None,
        );
        assert!(
            perf.contains("sysctl kernel.perf_event_paranoid=1"),
            "{perf}"
        );
        assert!(perf.contains("measurement is kept"), "{perf}");
    }

    #[test]
    fn a_stripped_ruby_is_explained() {
        // What rbspy 0.55.0 printed attached to Debian trixie's Ruby 3.3.8.
        let text = describe_failure(
            Profiler::Rbspy,
            "no samples",
            true,
            "exit status 1",
            "rbspy is recording traces. Press Ctrl+C to stop.\nInterrupted.\n\
             Warning: no profile samples were collected\nWrote raw data to /x/raw.gz\n\
             Wrote formatted output to /x/folded\n\
             Something went wrong while rbspy was sampling the process. Here's what we know:\n\
             - initialize\n- get ruby VM state\n- Couldn't find Ruby VM address\n",
            None,
        );
        // rbspy's account, not its progress lines.
        assert!(text.contains("it said: Something went wrong"), "{text}");
        assert!(text.contains("- Couldn't find Ruby VM address ("), "{text}");
        assert!(!text.contains("Wrote raw data"), "{text}");
        assert!(text.contains("ruby_current_vm_ptr"), "{text}");
        assert!(text.contains("rbspy/rbspy#390"), "{text}");
        assert!(text.contains("measurement is kept"), "{text}");
    }

    #[test]
    fn a_tree_without_ruby_is_not_blamed_on_a_stripped_ruby() {
        // rbspy says the same thing attached to a process that is not Ruby at all.
        let text = describe_failure(
            Profiler::Rbspy,
            "no samples",
            true,
            "exit status 1",
            "Something went wrong while rbspy was sampling the process. Here's what we know:\n\
             - initialize\n- get ruby VM state\n- Couldn't find Ruby VM address\n",
            Some(std::process::id() as i32),
        );
        assert!(text.contains("which is not a Ruby"), "{text}");
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(!text.contains("rbspy/rbspy#390"), "{text}");
        assert!(text.contains("measurement is kept"), "{text}");
    }
}

//! What an experiment file becomes: the `Experiment` (run-wide settings and the expanded,
//! labelled configurations) and each configuration's resolved `ConfigSettings`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use load::LoadSettings;
use serde::{Deserialize, Serialize};

use crate::schedule::Order;
use crate::servers::ServerKind;
use rubies::knobs::{AllocatorSetting, Compact, Jit};

/// Apps shipped in `ruby/apps/`.
pub const BUNDLED_APPS: [&str; 6] = [
    "rack-hello",
    "rails-hello",
    "sinatra-hello",
    "rails-mixed",
    "known-effect",
    "rails-forum",
];

/// What a configuration measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// An app server under HTTP load.
    Http,
    /// A Ruby script run several times per trial, timed from outside.
    Script,
}

/// A Ruby named in `[rubies]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RubyDef {
    /// The executable (resolved to a path) and any fixed options, e.g. `["/usr/bin/ruby"]`.
    pub argv: Vec<String>,
    /// Environment set whenever this Ruby runs.
    pub env: BTreeMap<String, String>,
    /// The Gemfile this Ruby's configurations use unless `gemfile` says otherwise.
    #[serde(default)]
    pub gemfile: Option<PathBuf>,
}

/// A script workload: a Ruby file run `runs` times per trial.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScriptSettings {
    pub path: PathBuf,
    pub args: Vec<String>,
    pub runs: u32,
    /// A run still going after this long is stopped and fails the trial.
    #[serde(with = "humantime_serde", default = "default_script_timeout")]
    pub timeout: Duration,
}

pub(crate) fn default_script_timeout() -> Duration {
    Duration::from_secs(600)
}

/// Everything one configuration runs with, fully resolved (absolute paths, URL mix read).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigSettings {
    /// Name of the Ruby in `[rubies]`.
    pub ruby: String,
    /// The Ruby's argv prefix followed by `ruby_opts`.
    pub ruby_argv: Vec<String>,
    pub ruby_opts: Vec<String>,
    /// The Ruby's own environment, overlaid with the configuration's `env`.
    pub env: BTreeMap<String, String>,
    pub workload: Workload,
    /// Bundled app name or the user's directory, as written.
    pub app: String,
    /// Directory holding the app's `config.ru`.
    pub app_dir: PathBuf,
    pub server: ServerKind,
    pub server_argv: Vec<String>,
    pub processes: u32,
    pub threads: u32,
    /// 0 picks a free port per trial.
    pub port: u16,
    pub readiness_path: String,
    #[serde(with = "humantime_serde")]
    pub readiness_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub stop_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub sample_interval: Duration,
    /// Percent of failed requests (errors and non-2xx) above which a trial is invalid.
    pub max_error_rate: f64,
    /// Warmup, duration and everything `rubyrace load` accepts.
    pub load: LoadSettings,
    pub script: Option<ScriptSettings>,
    /// The JIT asked for, verified on the running Ruby; none: the Ruby's own default,
    /// recorded but not checked.
    #[serde(default)]
    pub jit: Option<Jit>,
    /// The allocator asked for (its library is in `env` as `LD_PRELOAD` when preloaded).
    #[serde(default)]
    pub allocator: Option<AllocatorSetting>,
    #[serde(default)]
    pub compact: Option<Compact>,
    /// The Gemfile in use: the server runs through `bundle exec` with `BUNDLE_GEMFILE` set.
    #[serde(default)]
    pub gemfile: Option<PathBuf>,
    /// `RUBY_ENGINE` of the Ruby ("ruby", "jruby"), when it answered the check.
    #[serde(default)]
    pub ruby_engine: Option<String>,
    /// The profilers attached to each trial (`profile = ...`), in a profiled phase after
    /// the measured one, or during it with `profile_measured`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<Profiler>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub profile_measured: bool,
    /// `profile_rate`: samples per second of every profiler (perf's `--freq`, rbspy's
    /// `--rate`).
    #[serde(
        default = "default_profile_rate",
        skip_serializing_if = "is_default_profile_rate"
    )]
    pub profile_rate: u32,
    /// `profile_runs`: a script's profiled runs after its measured ones, their samples
    /// added up into one profile per profiler.
    #[serde(default = "one_run", skip_serializing_if = "is_one_run")]
    pub profile_runs: u32,
    /// `setup`: commands run once before the first trial of each (Ruby, Gemfile, app),
    /// with `{ruby}` and `{app}` expanded already (lab::services).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<Vec<String>>,
    /// `tls = true`: Puma serves HTTPS (`ssl://`) with a certificate made for the run, and
    /// the load speaks TLS to it, trusting only that certificate's authority.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// `preload = true`: the server's master loads the app before it forks its workers
    /// (Puma's `--preload`, unicorn's `preload_app true`), so the workers share its pages
    /// copy-on-write; with `compact = "after-boot"` the master compacts before the fork.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preload: bool,
    /// `ref` with `app_repo`: the app runs from a checkout of this commit, never from the
    /// working tree (`lab::checkouts`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_commit: Option<AppCommit>,
    /// `ruby_ref` with `ruby_repo`: the Ruby is CRuby built from this commit (its
    /// interpreter is `ruby_argv[0]`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ruby_commit: Option<RubyCommit>,
}

/// A commit of CRuby that a configuration runs on (`ruby_ref` with `ruby_repo`), built
/// into rubyrace's cache when the file is read by `run` or `check`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RubyCommit {
    /// The top directory of the CRuby repository's working tree (never touched: the build
    /// exports the commit).
    pub repo: PathBuf,
    /// The revision as written (`v3_4_5`, `master`, a hash).
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The commit it named when the experiment was read: what every trial runs.
    pub commit: String,
    /// `ruby_configure_opts`: more arguments of `./configure`, part of the build's key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configure_opts: Vec<String>,
    /// The build's prefix in the cache (`bin/ruby` in it is the interpreter).
    pub prefix: PathBuf,
}

/// A commit of the app's repository that a configuration runs (`ref` with `app_repo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppCommit {
    /// The top directory of the repository's working tree (the user's; never touched).
    pub repo: PathBuf,
    /// The revision as written (`v1.4.0`, `HEAD~3`, a branch).
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The commit it named when the experiment was read: what every trial runs.
    pub commit: String,
}

/// Why a commit cannot be run: the key at fault (`app_repo`, `ref` or `app`), what is
/// wrong, and what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppCommitError {
    pub key: &'static str,
    pub message: String,
    pub help: Option<String>,
}

impl AppCommit {
    /// `git_ref` of the repository holding `repo`, resolved to its commit, for the app in
    /// `app_dir` (which must be inside the repository); an HTTP app (`http`) must have its
    /// `config.ru` at that commit. Also the app's directory as the canonical path inside
    /// the repository, which a checkout maps (`ConfigSettings::in_checkout`).
    pub fn resolve(
        repo: &std::path::Path,
        git_ref: &str,
        app_dir: &std::path::Path,
        http: bool,
    ) -> Result<(PathBuf, AppCommit), AppCommitError> {
        let err =
            |key, message: String, help: Option<String>| AppCommitError { key, message, help };
        let top = sys::git::toplevel(repo).map_err(|e| err("app_repo", e.to_string(), None))?;
        let commit = sys::git::commit_of(&top, git_ref).map_err(|e| {
            err(
                "ref",
                e.to_string(),
                Some(format!(
                    "its commits: git -C {} log --oneline",
                    top.display()
                )),
            )
        })?;
        let subdir = app_dir
            .canonicalize()
            .ok()
            .and_then(|d| d.strip_prefix(&top).ok().map(std::path::Path::to_path_buf))
            .ok_or_else(|| {
                err(
                    "app",
                    format!(
                        "the app {} is not inside app_repo ({})",
                        app_dir.display(),
                        top.display()
                    ),
                    Some("with `ref`, `app` is the app's directory in that repository".into()),
                )
            })?;
        if http && !sys::git::has_file(&top, &commit, &subdir.join("config.ru")) {
            let shown = if subdir.as_os_str().is_empty() {
                std::path::Path::new(".")
            } else {
                &subdir
            };
            return Err(err(
                "ref",
                format!(
                    "{} has no config.ru at {git_ref} ({})",
                    shown.display(),
                    &commit[..12.min(commit.len())]
                ),
                None,
            ));
        }
        Ok((
            top.join(&subdir),
            AppCommit {
                repo: top,
                git_ref: git_ref.to_string(),
                commit,
            },
        ))
    }
}

/// Samples per second unless `profile_rate` says otherwise: 99, not 100, so the sampling
/// does not run in lockstep with timers.
pub const DEFAULT_PROFILE_RATE_HZ: u32 = 99;

fn default_profile_rate() -> u32 {
    DEFAULT_PROFILE_RATE_HZ
}

fn is_default_profile_rate(rate: &u32) -> bool {
    *rate == DEFAULT_PROFILE_RATE_HZ
}

fn one_run() -> u32 {
    1
}

fn is_one_run(runs: &u32) -> bool {
    *runs == 1
}

/// A profiler rubyrace attaches to a trial's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profiler {
    /// Ruby stacks, from outside the process (rbspy reads the VM's memory).
    Rbspy,
    /// Native and kernel stacks (`perf record -e cpu-clock`).
    Perf,
}

/// YJIT's perf integration (Ruby 3.3+), added to a YJIT configuration's Ruby when perf
/// profiles it: each Ruby process writes a perf map, /tmp/perf-PID.map, which `perf script`
/// reads to name JIT code (lab::profile removes the maps at the end of the trial).
pub const YJIT_PERF: &str = "--yjit-perf";

/// The names of `profile`'s values, in the order of [`Profiler::ALL`].
pub const PROFILER_NAMES: &[&str] = &[Profiler::Rbspy.as_str(), Profiler::Perf.as_str()];

impl Profiler {
    pub const ALL: [Profiler; 2] = [Profiler::Rbspy, Profiler::Perf];

    pub const fn as_str(self) -> &'static str {
        match self {
            Profiler::Rbspy => "rbspy",
            Profiler::Perf => "perf",
        }
    }

    pub fn parse(name: &str) -> Option<Profiler> {
        Profiler::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl ConfigSettings {
    /// The commit the configuration names, app's or Ruby's: (repository, ref as written,
    /// commit); None without one.
    pub fn named_commit(&self) -> Option<(&std::path::Path, &str, &str)> {
        self.app_commit
            .as_ref()
            .map(|c| (c.repo.as_path(), c.git_ref.as_str(), c.commit.as_str()))
            .or_else(|| {
                self.ruby_commit
                    .as_ref()
                    .map(|c| (c.repo.as_path(), c.git_ref.as_str(), c.commit.as_str()))
            })
    }

    /// The configuration on the Ruby built from `commit` (`ruby_ref`, a bisection's step,
    /// a gate on CRuby commits): its interpreter in the Ruby's argv and wherever the
    /// server's argv names the old one, named `commit-HASH12`, the commit recorded.
    pub fn on_commit_ruby(&mut self, commit: RubyCommit) {
        let ruby = commit
            .prefix
            .join("bin/ruby")
            .to_string_lossy()
            .into_owned();
        if let Some(old) = self.ruby_argv.first().cloned() {
            self.ruby_argv[0] = ruby.clone();
            for arg in self.server_argv.iter_mut().filter(|a| **a == old) {
                *arg = ruby.clone();
            }
        } else {
            self.ruby_argv.push(ruby);
        }
        self.ruby = format!("commit-{}", &commit.commit[..12.min(commit.commit.len())]);
        self.ruby_commit = Some(commit);
    }

    /// These settings with every path inside the app's repository (the app's directory,
    /// the Gemfile, a script, `BUNDLE_GEMFILE` and other environment values, setup
    /// commands) moved to the same place in `checkout`, a checkout of `app_commit`. Paths
    /// already in the checkout are kept, so moving twice changes nothing.
    pub fn in_checkout(&self, checkout: &std::path::Path) -> ConfigSettings {
        let Some(commit) = &self.app_commit else {
            return self.clone();
        };
        let moved_path = |p: &std::path::Path| -> PathBuf {
            if p.starts_with(checkout) {
                return p.to_path_buf();
            }
            match p.strip_prefix(&commit.repo) {
                Ok(rest) => checkout.join(rest),
                Err(_) => p.to_path_buf(),
            }
        };
        let moved = |s: &str| -> String {
            let p = std::path::Path::new(s);
            if p.is_absolute() && p.starts_with(&commit.repo) && !p.starts_with(checkout) {
                moved_path(p).to_string_lossy().into_owned()
            } else {
                s.to_string()
            }
        };
        let mut s = self.clone();
        s.app_dir = moved_path(&s.app_dir);
        s.gemfile = s.gemfile.as_deref().map(moved_path);
        if let Some(script) = &mut s.script {
            script.path = moved_path(&script.path);
        }
        for value in s.env.values_mut() {
            *value = moved(value);
        }
        for argv in &mut s.setup {
            for arg in argv.iter_mut() {
                *arg = moved(arg);
            }
        }
        s
    }

    /// A rough wall time of one trial of this configuration, for estimates before anything
    /// ran: for HTTP, the warmup, the measured time (the duration, or rounds × (slice +
    /// lead-in) when sliced, shared by the `configurations` when co-scheduled) and about
    /// 3 s to start and stop the server; for a script, 2 s per run. With `profile` (not
    /// `profile_measured`), the profiled phase too: the duration again and about 1 s to
    /// attach the profilers and write their stacks, or a script's `profile_runs`.
    pub fn estimated_trial_time(
        &self,
        design: &crate::design::Design,
        configurations: usize,
    ) -> Duration {
        let profiled_phase = !self.profile.is_empty() && !self.profile_measured;
        match self.workload {
            Workload::Http => {
                let measured = design
                    .loaded_per_configuration(configurations)
                    .unwrap_or(self.load.duration);
                let profiled = if profiled_phase {
                    self.load.duration + Duration::from_secs(1)
                } else {
                    Duration::ZERO
                };
                self.load.warmup + measured + Duration::from_secs(3) + profiled
            }
            Workload::Script => {
                let profiled = if self.profile.is_empty() {
                    0
                } else {
                    self.profile_runs
                };
                Duration::from_secs(2) * (self.script.as_ref().map_or(1, |x| x.runs) + profiled)
            }
        }
    }
}

/// One point of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// 0-based position in the expanded list.
    #[serde(rename = "config_id")]
    pub id: usize,
    pub label: String,
    /// The matrix axes and their value labels for this configuration, e.g. `ruby=3.3`.
    pub axes: BTreeMap<String, String>,
    pub settings: ConfigSettings,
}

/// A parsed, validated and expanded experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    pub file: PathBuf,
    /// The file's text, stored with the results so a resume never depends on the file.
    pub text: String,
    pub name: String,
    pub description: Option<String>,
    pub seed: u64,
    pub batches: u32,
    pub order: Order,
    /// Extra environment variable names to record with every trial.
    pub record_env: Vec<String>,
    pub rubies: BTreeMap<String, RubyDef>,
    pub configs: Vec<Config>,
    /// What the file leaves to defaults that decide what runs and for how long, as
    /// `key = value` (`blocks = 5`, `warmup = "5s"`); see [`Experiment::defaults_note`].
    pub defaults: Vec<String>,
    /// `precision = "1%"`: blocks are added after `batches` until every comparison is that
    /// precise, or the budget is spent (crate::precision).
    pub precision: Option<crate::precision::PrecisionTarget>,
    /// `rubyrace check`: the gate that decides when the run stops (not a key of the file).
    pub gate: Option<crate::gate::GateTarget>,
    /// `quiet`, `cpus`, `repeat_noisy`: how trials are kept out of the machine's noise.
    pub conditions: crate::conditions::TrialConditions,
    /// `design`, `slice`, `rounds`: one trial after another, or interleaved (crate::design).
    pub design: crate::design::Design,
    /// Whether the file wrote `design` (else it is the default for its configurations).
    pub design_written: bool,
    /// `[services]`: PostgreSQL and Redis servers the app needs (crate::services).
    pub services: crate::services::Services,
    /// `[fleet]`: how `run --slurm` spreads the blocks over machines (crate::fleet).
    pub fleet: Option<crate::fleet::Fleet>,
}

/// A rough wall time of one block of `configs` in `design`, for estimates before anything
/// ran (`--dry-run`, the progress bar's first ETA): each configuration's
/// [`ConfigSettings::estimated_trial_time`], summed.
pub fn estimated_block_time(configs: &[Config], design: &crate::design::Design) -> Duration {
    configs
        .iter()
        .map(|c| c.settings.estimated_trial_time(design, configs.len()))
        .sum()
}

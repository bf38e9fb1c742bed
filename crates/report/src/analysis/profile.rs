//! Profiles in the report: each cohort's profile per profiler, merged over its valid
//! trials, with the profilers' cost; and, against the baseline, the frames whose time per
//! request changed, each with an interval and a p-value paired by block.
//!
//! How a frame is compared (docs/profiles.md, "Reading the diff"):
//! - Per trial, a frame's self samples (the frame on top of the stack) and total samples
//!   (anywhere on it, once per sample) become µs per request: (count + ½) × the time one
//!   sample stands for, which is the profiled processes' CPU time over the phase ÷ samples
//!   ÷ requests (or, for records without it, 1 ÷ rate ÷ requests). The half sample keeps a
//!   frame absent from one trial at a finite log ratio.
//! - Frames are matched across cohorts by `frame_key`: rbspy's `method - file` without the
//!   line, version numbers left out of the path, and perf's `[libruby-3.3.so.3.3.8]` as
//!   `[libruby.so]`; a Ruby or gem upgrade keeps its frames.
//! - Tested: frames with at least `MIN_SHARE` of both sides' samples pooled and
//!   `MIN_SAMPLES` samples, at most `MAX_FRAMES` per cohort, profiler and measure (the most
//!   sampled). The filter looks at the pooled counts only, never at the difference.
//! - Paired by block (as every comparison of the report): the interval is Student's t on
//!   the per-block log ratios and the p-value is the t-test of the same log ratios, because
//!   a signed-rank test cannot reach significance with five blocks (p ≥ 0.0625), let alone
//!   after Holm over dozens of frames. Unpaired trials (two results directories) fall back
//!   to the bootstrap interval and the Mann–Whitney test.
//! - Holm's adjustment over every frame tested for the same profiler and measure, every
//!   cohort included. A change is significant when the interval excludes 1 and the adjusted
//!   p < 0.05; otherwise "~". The seeded simulations in `tests/profile_sim.rs` check the
//!   false-positive rate, the coverage and the power of this rule.

use std::collections::{BTreeMap, BTreeSet};

use experiment::Profiler;
use results::profile::ProfileRecord;
use results::TrialStatus;

use super::compare::{holm, pairs};
use super::{ALPHA, BOOTSTRAP_SEED, RESAMPLES};
use crate::format::p_text;
use crate::input::TrialData;
use crate::model::{CohortProfile, FrameChange, FrameTime, SparseFrames, Summary, Warning};

/// A frame is tested when it has at least this share of both sides' samples pooled...
pub const MIN_SHARE: f64 = 0.01;
/// ...and at least this many samples over both sides' trials (the report's renderers say
/// it too, so it lives in the model).
pub const MIN_SAMPLES: u64 = crate::model::MIN_FRAME_SAMPLES;
/// At most this many frames per cohort, profiler and measure are tested.
pub const MAX_FRAMES: usize = 30;
/// A cohort whose profiled processes waited for a CPU this long, as a share of the CPU
/// time they used, gets the `profile-cpu-wait` warning (docs/profiles.md, "Waiting for a
/// CPU", says where the figure comes from).
const CPU_WAIT_WARNING: f64 = 0.5;
/// Frames listed per cohort profile (by self time).
const TOP_FRAMES: usize = 12;
/// Added to every per-trial count before its logarithm is taken.
const PSEUDO_COUNT: f64 = 0.5;

/// One trial's profile from one profiler, read.
pub struct TrialProfile<'a> {
    pub trial: &'a TrialData,
    pub record: &'a ProfileRecord,
    pub stacks: BTreeMap<String, u64>,
    /// Per frame key: (self samples, total samples).
    pub frames: BTreeMap<String, (u64, u64)>,
}

impl TrialProfile<'_> {
    /// Requests (or script runs) served while the profile was taken.
    fn units(&self) -> u64 {
        unit_count(self.record)
    }

    /// The time per request (or script run) one sample stands for, µs: the profiled
    /// processes' CPU time over the phase split by the samples' shares when it was
    /// recorded (a sampler's own rate falters on busy CPUs), else the sampling interval.
    fn us_per_sample(&self) -> Option<f64> {
        let units = self.units() as f64;
        let samples: u64 = self.stacks.values().sum();
        match self.record.cpu_us {
            Some(cpu) if samples > 0 && units > 0.0 => Some(cpu as f64 / samples as f64 / units),
            _ => (units > 0.0 && self.record.rate_hz > 0)
                .then(|| 1e6 / f64::from(self.record.rate_hz) / units),
        }
    }

    /// µs per request of `count` samples, the pseudo-count added.
    fn us_per_unit(&self, count: u64) -> Option<f64> {
        Some((count as f64 + PSEUDO_COUNT) * self.us_per_sample()?)
    }
}

fn unit_count(record: &ProfileRecord) -> u64 {
    record
        .requests
        .filter(|&r| r > 0)
        .or(record.script_runs.map(u64::from))
        .unwrap_or(0)
}

/// The profilers any trial of the report ran, in their documented order.
fn profilers_used(trials: &[&TrialData]) -> Vec<Profiler> {
    let used: BTreeSet<Profiler> = trials
        .iter()
        .flat_map(|t| t.profiles.iter().filter_map(|p| p.profiler))
        .collect();
    used.into_iter().collect()
}

/// Reads the profiles of `trials` (valid ones only) for `profiler`; the others are
/// returned as "run:trial: why".
fn read_profiles<'a>(
    trials: &[&'a TrialData],
    profiler: Profiler,
) -> (Vec<TrialProfile<'a>>, Vec<String>) {
    let mut read = Vec::new();
    let mut missing = Vec::new();
    for &t in trials.iter().filter(|t| t.status == TrialStatus::Valid) {
        let Some(record) = t.profiles.iter().find(|p| p.profiler == Some(profiler)) else {
            continue;
        };
        let id = format!("{}:{}", t.source + 1, t.trial_id);
        let Some(file) = &record.file else {
            let why = record.error.as_deref().unwrap_or("no samples");
            missing.push(format!("{id}: {why}"));
            continue;
        };
        match results::profile::read_folded(&t.dir.join(file)) {
            Ok(stacks) => {
                let frames = frame_counts(&stacks);
                read.push(TrialProfile {
                    trial: t,
                    record,
                    stacks,
                    frames,
                });
            }
            Err(e) => missing.push(format!(
                "{id}: {} unreadable: {e}",
                t.dir.join(file).display()
            )),
        }
    }
    (read, missing)
}

/// The frame as the diff matches it across cohorts: rbspy's `method - path:line` loses
/// the line, and version numbers in the path (`3.1.0`, `puma-5.6.5`) are left out; other
/// frames (perf's symbols) stay as they are.
pub fn frame_key(frame: &str) -> String {
    let Some((name, location)) = frame.rsplit_once(" - ") else {
        return library_key(frame);
    };
    let path = match location.rsplit_once(':') {
        Some((path, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => path,
        _ => location,
    };
    let is_version = |s: &str| {
        s.contains('.') && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') && !s.starts_with('.')
    };
    let path: Vec<String> = path
        .split('/')
        .map(|part| {
            if is_version(part) {
                "*".to_string()
            } else if let Some((stem, version)) = part.rsplit_once('-') {
                if is_version(version) {
                    stem.to_string()
                } else {
                    part.to_string()
                }
            } else {
                part.to_string()
            }
        })
        .collect();
    format!("{} - {}", without_addresses(name), path.join("/"))
}

/// `name` with every object address (`0x` and six or more hex digits) as `0x…`: a method
/// of an anonymous class is `#<Class:0x7f0f90888168>#hot_loop` in rbspy's frames (a Rack
/// app's methods on Ruby 3.3, say), at another address in every process.
fn without_addresses(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find("0x") {
        let digits = rest[at + 2..]
            .bytes()
            .take_while(u8::is_ascii_hexdigit)
            .count();
        out.push_str(&rest[..at + 2]);
        if digits >= 6 {
            out.push('…');
        } else {
            out.push_str(&rest[at + 2..at + 2 + digits]);
        }
        rest = &rest[at + 2 + digits..];
    }
    out.push_str(rest);
    out
}

/// perf's frame for JIT code it has no symbol for, in every process.
pub const JIT_CODE: &str = "[JIT code without a perf map]";

/// perf's frame for code of a library without symbols, `[libruby-3.3.so.3.3.8]`, without
/// its versions: `[libruby.so]`, so the interpreter's own time matches across Rubies.
fn library_key(frame: &str) -> String {
    let Some(inner) = frame.strip_prefix('[').and_then(|f| f.strip_suffix(']')) else {
        return frame.to_string();
    };
    // Anonymous executable memory perf could not name (a JIT without a perf map, as Ruby
    // 3.1's YJIT) is labelled with the process's pid, `[perf-12408.map]`: one frame.
    if inner.starts_with("perf-") && inner.ends_with(".map") {
        return JIT_CODE.to_string();
    }
    let Some(at) = inner.find(".so") else {
        return frame.to_string();
    };
    let (stem, rest) = inner.split_at(at);
    let is_version = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let stem = match stem.rsplit_once('-') {
        Some((base, version)) if is_version(version) => base,
        _ => stem,
    };
    let rest = match rest.strip_prefix(".so") {
        Some(v) if v.is_empty() || v.strip_prefix('.').is_some_and(is_version) => ".so",
        _ => rest,
    };
    format!("[{stem}{rest}]")
}

/// A stack with every frame keyed by `frame_key`.
fn stack_key(stack: &str) -> String {
    stack
        .split(';')
        .map(frame_key)
        .collect::<Vec<_>>()
        .join(";")
}

/// Per frame key: (self samples, total samples), a frame counted once per sample however
/// often it recurs on the stack.
pub fn frame_counts(stacks: &BTreeMap<String, u64>) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (stack, &count) in stacks {
        let frames: Vec<String> = stack.split(';').map(frame_key).collect();
        if let Some(top) = frames.last() {
            out.entry(top.clone()).or_default().0 += count;
        }
        let distinct: BTreeSet<&String> = frames.iter().collect();
        for f in distinct {
            out.entry(f.clone()).or_default().1 += count;
        }
    }
    out
}

/// Each cohort's profile per profiler, the frames tested against the baseline, and the
/// frames that lacked the samples to be tested.
pub(super) fn profiles(
    order: &[String],
    members: &BTreeMap<String, Vec<&TrialData>>,
    baseline: &str,
    confidence: f64,
) -> (Vec<CohortProfile>, Vec<FrameChange>, Vec<SparseFrames>) {
    let all: Vec<&TrialData> = members.values().flatten().copied().collect();
    let mut cohorts = Vec::new();
    let mut changes = Vec::new();
    let mut sparse = Vec::new();
    for profiler in profilers_used(&all) {
        let read: BTreeMap<&str, (Vec<TrialProfile>, Vec<String>)> = order
            .iter()
            .map(|name| (name.as_str(), read_profiles(&members[name], profiler)))
            .collect();
        for name in order {
            let (profiles, missing) = &read[name.as_str()];
            if profiles.is_empty() && missing.is_empty() {
                continue;
            }
            cohorts.push(cohort_profile(name, profiler, profiles, missing));
        }
        let profiles: BTreeMap<&str, &[TrialProfile]> = read
            .iter()
            .map(|(name, (profiles, _))| (*name, profiles.as_slice()))
            .collect();
        changes.extend(compare_frames(
            order, &profiles, baseline, profiler, confidence,
        ));
        if let Some(base) = profiles.get(baseline) {
            for name in order.iter().filter(|n| *n != baseline) {
                if let Some(cohort) = profiles.get(name.as_str()) {
                    sparse.extend(sparse_frames(name, cohort, baseline, base, profiler));
                }
            }
        }
    }
    (cohorts, changes, sparse)
}

/// Whether a frame with `pooled` of `pooled_samples` self samples (both sides) is tested on
/// its samples: it has the share, and the samples.
fn has_share(pooled: u64, pooled_samples: u64) -> bool {
    pooled as f64 / pooled_samples as f64 >= MIN_SHARE
}

/// The frames of a cohort that had the share to be tested against the baseline
/// (`MIN_SHARE` of the self samples, both sides pooled) but fewer than `MIN_SAMPLES`, and
/// how much more profiling would give the fewest of them enough; none when none lacked.
pub(super) fn sparse_frames(
    name: &str,
    profiles: &[TrialProfile],
    baseline: &str,
    base: &[TrialProfile],
    profiler: Profiler,
) -> Option<SparseFrames> {
    let (a, b) = (
        side(profiles, Measure::SelfTime)?,
        side(base, Measure::SelfTime)?,
    );
    let pooled_samples = a.samples + b.samples;
    let lacking: Vec<u64> = a
        .counts
        .keys()
        .chain(b.counts.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|f| a.counts.get(f).unwrap_or(&0) + b.counts.get(f).unwrap_or(&0))
        .filter(|&pooled| has_share(pooled, pooled_samples) && pooled < MIN_SAMPLES)
        .collect();
    let fewest = *lacking.iter().min()?;
    let most = *lacking.iter().max()?;
    let both: Vec<&TrialProfile> = profiles.iter().chain(base).collect();
    let mean = |values: Vec<f64>| values.iter().sum::<f64>() / values.len().max(1) as f64;
    let profiled_s = mean(both.iter().map(|t| profiled_seconds(t.record)).collect());
    let rate_hz = both.iter().map(|t| t.record.rate_hz).max().unwrap_or(0);
    let script = both.iter().all(|t| t.record.requests.is_none());
    let runs = script.then(|| {
        let runs = mean(
            both.iter()
                .map(|t| f64::from(t.record.script_runs.unwrap_or(1)))
                .collect(),
        );
        (runs.round() as u32).max(1)
    });
    let more = more_samples(fewest, profiled_s, rate_hz, runs);
    let mut s = SparseFrames {
        cohort: name.to_string(),
        baseline: baseline.to_string(),
        profiler: profiler.as_str().to_string(),
        frames: lacking.len(),
        fewest_samples: fewest,
        most_samples: most,
        pooled_samples,
        factor: more.factor,
        profiled_s,
        needed_profiled_s: more.seconds,
        rate_hz,
        needed_rate_hz: more.rate_hz,
        profile_runs: runs,
        needed_profile_runs: more.runs,
        advice: String::new(),
    };
    s.advice = sparse_advice(&s);
    Some(s)
}

/// The seconds a profile covers: the load's time for HTTP (requests ÷ throughput), a
/// script's profiled runs' wall time (without the wait at the start gate), else how long
/// the profiler ran.
fn profiled_seconds(record: &ProfileRecord) -> f64 {
    match (record.requests, record.requests_per_s, record.wall_s) {
        (Some(requests), Some(rate), _) if rate > 0.0 => requests as f64 / rate,
        (None, _, Some(wall)) => wall * f64::from(record.script_runs.unwrap_or(1)),
        _ => record.duration_s,
    }
}

/// How much more profiling would give a frame with `fewest` pooled samples `MIN_SAMPLES`:
/// the samples grow with the profiled time, the rate, the script's profiled runs (and the
/// blocks), so each is scaled by `MIN_SAMPLES ÷ fewest`; the rate and the runs rounded up.
#[derive(Debug, PartialEq)]
pub struct MoreSamples {
    pub factor: f64,
    pub seconds: f64,
    pub rate_hz: u32,
    pub runs: Option<u32>,
}

pub fn more_samples(fewest: u64, profiled_s: f64, rate_hz: u32, runs: Option<u32>) -> MoreSamples {
    let fewest = fewest.max(1);
    let factor = MIN_SAMPLES as f64 / fewest as f64;
    // Integer arithmetic: 99 × 20 ÷ 6 is 330 exactly, not 330.00000000000006 rounded up.
    let scaled = |x: u32| (u64::from(x) * MIN_SAMPLES).div_ceil(fewest) as u32;
    MoreSamples {
        factor,
        seconds: profiled_s * factor,
        rate_hz: scaled(rate_hz),
        runs: runs.map(scaled),
    }
}

/// What `SparseFrames` says, in words.
fn sparse_advice(s: &SparseFrames) -> String {
    let x = format!("{:.1}×", s.factor);
    let longer = match s.needed_profile_runs {
        Some(runs) => format!(
            "profile_runs = {runs}, now {}: about {:.1} s of profiled runs per trial instead \
             of {:.1} s",
            s.profile_runs.unwrap_or(1),
            s.needed_profiled_s,
            s.profiled_s
        ),
        None => format!(
            "a profiled phase of about {:.1} s per trial instead of {:.1} s; it lasts as long \
             as `duration`, the measured phase too",
            s.needed_profiled_s, s.profiled_s
        ),
    };
    let faster = if s.needed_rate_hz <= experiment::MAX_PROFILE_RATE_HZ {
        format!("profile_rate = {}, now {}", s.needed_rate_hz, s.rate_hz)
    } else {
        format!(
            "not by the rate: {} Hz would be above profile_rate's limit of {} Hz",
            s.needed_rate_hz,
            experiment::MAX_PROFILE_RATE_HZ
        )
    };
    let most = if s.most_samples > s.fewest_samples {
        format!(
            "; the most sampled of them, with {}, would need about {:.1}×",
            s.most_samples,
            MIN_SAMPLES as f64 / s.most_samples as f64
        )
    } else {
        String::new()
    };
    format!(
        "{} {} had at least {:.0}% of the self samples but fewer than the {MIN_SAMPLES} \
         pooled samples a test needs (the fewest {} of {} pooled): about {x} the samples \
         would test them all{most}. Profile {x} as long ({longer}), {x} as fast ({faster}), \
         or in {x} the blocks",
        s.frames,
        if s.frames == 1 { "frame" } else { "frames" },
        MIN_SHARE * 100.0,
        s.fewest_samples,
        s.pooled_samples,
    )
}

/// Every cohort's frames against the baseline's, for one profiler: a family per measure
/// (self, total) over every cohort, Holm-adjusted, decided.
pub(super) fn compare_frames(
    order: &[String],
    profiles: &BTreeMap<&str, &[TrialProfile]>,
    baseline: &str,
    profiler: Profiler,
    confidence: f64,
) -> Vec<FrameChange> {
    let Some(base) = profiles.get(baseline) else {
        return Vec::new();
    };
    let mut changes = Vec::new();
    for measure in [Measure::SelfTime, Measure::Total] {
        let mut family = Vec::new();
        for name in order.iter().filter(|n| *n != baseline) {
            if let Some(cohort) = profiles.get(name.as_str()) {
                family.extend(frame_changes(
                    name, cohort, baseline, base, profiler, measure, confidence,
                ));
            }
        }
        let p: Vec<Option<f64>> = family.iter().map(|c| c.p_value).collect();
        let (adjusted, m) = holm(&p);
        for (c, adjusted) in family.iter_mut().zip(adjusted) {
            c.p_adjusted = adjusted;
            c.family_size = m.max(1);
            decide(c);
        }
        changes.extend(family);
    }
    changes
}

fn cohort_profile(
    name: &str,
    profiler: Profiler,
    profiles: &[TrialProfile],
    missing: &[String],
) -> CohortProfile {
    let mut p = CohortProfile {
        cohort: name.to_string(),
        profiler: profiler.as_str().to_string(),
        trials: profiles.len(),
        missing: missing.to_vec(),
        rate_hz: profiles.first().map_or(0, |t| t.record.rate_hz),
        phase: profiles
            .first()
            .map_or_else(String::new, |t| t.record.phase.clone()),
        ..CohortProfile::default()
    };
    // Per frame: (self, total) time summed over the trials, µs × units.
    let mut frames: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let mut time = 0.0;
    let mut overhead = Vec::new();
    let mut script = false;
    let (mut waited_us, mut ran_us) = (0u64, 0u64);
    for t in profiles {
        if let (Some(cpu), Some(wait)) = (t.record.cpu_us, t.record.cpu_wait_us) {
            ran_us += cpu;
            waited_us += wait;
        }
        let us = t.us_per_sample().unwrap_or(0.0) * t.units() as f64;
        for (stack, &n) in &t.stacks {
            *p.stacks.entry(stack.clone()).or_insert(0) += n;
            *p.frame_stacks.entry(stack_key(stack)).or_insert(0) += n;
            p.samples += n;
            time += n as f64 * us;
        }
        for (f, &(s, tot)) in &t.frames {
            let e = frames.entry(f.clone()).or_default();
            e.0 += s as f64 * us;
            e.1 += tot as f64 * us;
        }
        p.units += t.units();
        p.yjit_perf_map |= t
            .trial
            .keys
            .get("settings.ruby_argv")
            .is_some_and(|argv| argv.split(' ').any(|a| a == experiment::YJIT_PERF));
        script |= t.record.requests.is_none() && t.record.script_runs.is_some();
        p.duration_s += t.record.duration_s;
        if t.record.phase == results::profile::PROFILED_PHASE {
            // Profiled ÷ measured throughput: requests per second, or for a script its
            // measured runs' median wall time ÷ the profiled run's.
            let ratio = match (t.record.requests_per_s, t.trial.requests_per_s) {
                (Some(profiled), Some(measured)) if measured > 0.0 => Some(profiled / measured),
                _ => match (t.record.wall_s, t.trial.wall_s) {
                    (Some(profiled), Some(measured)) if profiled > 0.0 => Some(measured / profiled),
                    _ => None,
                },
            };
            overhead.extend(ratio);
        }
    }
    p.unit = if script { "script run" } else { "request" }.into();
    p.overhead = Summary::of(&overhead);
    p.cpu_wait_share = (ran_us > 0).then(|| waited_us as f64 / ran_us as f64);
    let units = p.units as f64;
    p.sampled_us_per_unit = (p.units > 0 && time > 0.0).then(|| time / units);
    let mut top: Vec<(&String, &(f64, f64))> = frames.iter().filter(|(_, c)| c.0 > 0.0).collect();
    top.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0).then(a.0.cmp(b.0)));
    p.top_self = top
        .into_iter()
        .take(TOP_FRAMES)
        .map(|(f, &(s, tot))| FrameTime {
            frame: f.clone(),
            self_share: s / time.max(f64::MIN_POSITIVE),
            self_us_per_unit: s / units.max(1.0),
            total_us_per_unit: tot / units.max(1.0),
        })
        .collect();
    p
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Measure {
    SelfTime,
    Total,
}

impl Measure {
    fn name(self) -> &'static str {
        match self {
            Measure::SelfTime => "self",
            Measure::Total => "total",
        }
    }
    fn of(self, counts: (u64, u64)) -> u64 {
        match self {
            Measure::SelfTime => counts.0,
            Measure::Total => counts.1,
        }
    }
}

/// A side's merged samples per frame under `measure`, its total samples, and the time per
/// request of each frame (µs), each trial's samples weighted by what one stands for.
struct Side {
    counts: BTreeMap<String, u64>,
    samples: u64,
    us_per_unit: BTreeMap<String, f64>,
}

fn side(profiles: &[TrialProfile], measure: Measure) -> Option<Side> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut time: BTreeMap<String, f64> = BTreeMap::new();
    let mut samples = 0;
    let mut units = 0;
    for t in profiles {
        let Some(us) = t.us_per_sample() else {
            continue;
        };
        for (f, &c) in &t.frames {
            *counts.entry(f.clone()).or_insert(0) += measure.of(c);
            *time.entry(f.clone()).or_insert(0.0) += measure.of(c) as f64 * us * t.units() as f64;
        }
        samples += t.stacks.values().sum::<u64>();
        units += t.units();
    }
    (samples > 0 && units > 0).then(|| Side {
        counts,
        samples,
        us_per_unit: time
            .into_iter()
            .map(|(f, t)| (f, t / units as f64))
            .collect(),
    })
}

/// The frames of one cohort tested against the baseline, before Holm's adjustment.
fn frame_changes(
    name: &str,
    profiles: &[TrialProfile],
    baseline: &str,
    base: &[TrialProfile],
    profiler: Profiler,
    measure: Measure,
    confidence: f64,
) -> Vec<FrameChange> {
    let (Some(a), Some(b)) = (side(profiles, measure), side(base, measure)) else {
        return Vec::new();
    };
    // Chosen on the pooled counts of both sides: a filter on either side's share alone
    // would favour frames that happen to be high on one side (in simulation it raised the
    // family-wise false-positive rate from 5% to 6–8%).
    let pooled_samples = (a.samples + b.samples) as f64;
    let mut candidates: Vec<(&String, f64)> = a
        .counts
        .keys()
        .chain(b.counts.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(|f| {
            let pooled = a.counts.get(f).unwrap_or(&0) + b.counts.get(f).unwrap_or(&0);
            let share = pooled as f64 / pooled_samples;
            (has_share(pooled, pooled_samples as u64) && pooled >= MIN_SAMPLES)
                .then_some((f, share))
        })
        .collect();
    candidates.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(y.0)));
    candidates.truncate(MAX_FRAMES);

    let trials_a: Vec<&TrialData> = profiles.iter().map(|t| t.trial).collect();
    let trials_b: Vec<&TrialData> = base.iter().map(|t| t.trial).collect();
    let per_trial = |side: &[TrialProfile], frame: &str| -> BTreeMap<(usize, usize), f64> {
        side.iter()
            .filter_map(|t| {
                let count = t.frames.get(frame).map_or(0, |&c| measure.of(c));
                Some(((t.trial.source, t.trial.trial_id), t.us_per_unit(count)?))
            })
            .collect()
    };
    let mut out = Vec::new();
    for (frame, _) in candidates {
        let va = per_trial(profiles, frame);
        let vb = per_trial(base, frame);
        let value = |side: &BTreeMap<(usize, usize), f64>, t: &TrialData| {
            side.get(&(t.source, t.trial_id)).copied()
        };
        let block_pairs = pairs(&trials_a, &trials_b, |t| {
            value(&va, t).or_else(|| value(&vb, t))
        });
        let (ci, test, test_name, method, n) = if block_pairs.paired() {
            let logs: Vec<f64> = block_pairs
                .a
                .iter()
                .zip(&block_pairs.b)
                .map(|(x, y)| x.ln() - y.ln())
                .collect();
            let Some(ci) = stats::ci::paired_ratio(&block_pairs.a, &block_pairs.b, confidence)
            else {
                continue;
            };
            (
                ci,
                stats::ttest::one_sample_t(&logs),
                "t-test",
                "paired",
                logs.len(),
            )
        } else {
            let xa: Vec<f64> = va.values().copied().collect();
            let xb: Vec<f64> = vb.values().copied().collect();
            let Some(ci) =
                stats::ci::unpaired_ratio(&xa, &xb, confidence, RESAMPLES, BOOTSTRAP_SEED)
            else {
                continue;
            };
            (
                ci,
                stats::ranktest::mann_whitney_u(&xa, &xb),
                "mann-whitney-u",
                "unpaired",
                xa.len().min(xb.len()),
            )
        };
        out.push(FrameChange {
            cohort: name.to_string(),
            baseline: baseline.to_string(),
            profiler: profiler.as_str().to_string(),
            measure: measure.name().into(),
            frame: frame.clone(),
            baseline_us_per_unit: *b.us_per_unit.get(frame).unwrap_or(&0.0),
            cohort_us_per_unit: *a.us_per_unit.get(frame).unwrap_or(&0.0),
            ratio: ci.ratio,
            ci_low: ci.low,
            ci_high: ci.high,
            method: method.into(),
            n,
            test: test_name.into(),
            p_value: test.map(|t| t.p_value),
            p_adjusted: None,
            family_size: 1,
            significant: false,
            verdict: String::new(),
        });
    }
    out
}

/// The decision and its words, once the family is adjusted.
fn decide(c: &mut FrameChange) {
    let excludes_one = c.ci_low > 1.0 || c.ci_high < 1.0;
    c.significant = excludes_one && c.p_adjusted.is_some_and(|p| p < ALPHA);
    let interval = format!("{:.2}× [{:.2}–{:.2}]", c.ratio, c.ci_low, c.ci_high);
    let p = c.p_adjusted.map_or_else(|| "no test".into(), p_text);
    c.verdict = if c.significant {
        let change = if c.baseline_us_per_unit == 0.0 {
            "absent from the baseline".to_string()
        } else if c.ratio >= 2.0 {
            format!("{:.1}× the time", c.ratio)
        } else if c.ratio > 1.0 {
            format!("{:.0}% more time", (c.ratio - 1.0) * 100.0)
        } else {
            format!("{:.0}% less time", (1.0 - c.ratio) * 100.0)
        };
        format!("{interval}, {change}, {p} (Holm, {} frames)", c.family_size)
    } else {
        format!("~ {interval}, {p} (Holm, {} frames)", c.family_size)
    };
}

/// What a reader of the profiles must know: trials without a profile (and the first
/// reason), and figures measured with the profilers attached or with YJIT's perf map on.
pub(super) fn warnings(profiles: &[CohortProfile]) -> Vec<Warning> {
    let mut out = Vec::new();
    for p in profiles {
        if let Some(first) = p.missing.first() {
            out.push(Warning {
                kind: "profile-missing".into(),
                cohort: Some(p.cohort.clone()),
                message: format!(
                    "{}: {} of {} valid trials have no {} profile (their measurements are kept); trial {first}",
                    p.cohort,
                    p.missing.len(),
                    p.missing.len() + p.trials,
                    p.profiler
                ),
            });
        }
        if p.yjit_perf_map && p.profiler == Profiler::Perf.as_str() {
            out.push(Warning {
                kind: "perf-map-measured".into(),
                cohort: Some(p.cohort.clone()),
                message: format!(
                    "{}: its Ruby ran with {} for perf (a start-up option, in force in the measured phase too): its figures include the cost of YJIT's frame pointers and map; perf_map = false measures without it",
                    p.cohort,
                    experiment::YJIT_PERF
                ),
            });
        }
        if let Some(share) = p
            .cpu_wait_share
            .filter(|&s| s >= CPU_WAIT_WARNING && p.profiler == Profiler::Rbspy.as_str())
        {
            out.push(Warning {
                kind: "profile-cpu-wait".into(),
                cohort: Some(p.cohort.clone()),
                message: format!(
                    "{}: while profiled, the server's threads waited for a CPU {:.0}% as long as they ran; rbspy samples a waiting thread as if it ran, so its self times lean toward the frames the server was preempted in, and a frame can differ between configurations that compete for the CPUs differently (docs/profiles.md, \"Waiting for a CPU\"); fewer processes or connections than CPUs avoid it",
                    p.cohort,
                    share * 100.0
                ),
            });
        }
        if p.phase == results::profile::MEASURED_PHASE {
            out.push(Warning {
                kind: "profiled-measurement".into(),
                cohort: Some(p.cohort.clone()),
                message: format!(
                    "{}: measured with {} attached (profile_measured = true): its figures include the profiler's cost",
                    p.cohort, p.profiler
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{frame_key, warnings, CPU_WAIT_WARNING};
    use crate::model::CohortProfile;

    /// The wait warning: for rbspy at and above its level, naming the cohort and the
    /// figure; never for perf, which samples on the CPU clock.
    #[test]
    fn profiles_taken_while_the_server_waited_for_a_cpu_are_warned_about() {
        let profile = |profiler: &str, share: Option<f64>| CohortProfile {
            cohort: "extra".into(),
            profiler: profiler.into(),
            phase: results::profile::PROFILED_PHASE.into(),
            cpu_wait_share: share,
            ..CohortProfile::default()
        };
        let kinds = |p: CohortProfile| -> Vec<String> {
            warnings(&[p])
                .into_iter()
                .filter(|w| w.kind == "profile-cpu-wait")
                .map(|w| w.message)
                .collect()
        };
        let warned = kinds(profile("rbspy", Some(0.97)));
        assert_eq!(warned.len(), 1);
        assert!(warned[0].starts_with("extra: "), "{}", warned[0]);
        assert!(
            warned[0].contains("97% as long as they ran"),
            "{}",
            warned[0]
        );
        assert_eq!(kinds(profile("rbspy", Some(CPU_WAIT_WARNING))).len(), 1);
        assert!(kinds(profile("rbspy", Some(0.22))).is_empty());
        assert!(kinds(profile("rbspy", None)).is_empty());
        assert!(kinds(profile("perf", Some(0.97))).is_empty());
    }

    #[test]
    fn frames_match_across_ruby_and_gem_versions() {
        assert_eq!(
            frame_key(
                "process_client - /usr/lib/ruby/gems/3.1.0/gems/puma-5.6.5/lib/puma/server.rb:496"
            ),
            "process_client - /usr/lib/ruby/gems/*/gems/puma/lib/puma/server.rb"
        );
        assert_eq!(frame_key("hot_loop - unknown:9"), "hot_loop - unknown");
        // Anonymous classes are at another address in every process.
        assert_eq!(
            frame_key("#<Class:0x7f0f90888168>#hot_loop - unknown"),
            "#<Class:0x…>#hot_loop - unknown"
        );
        assert_eq!(
            frame_key("#<Class:0x7f97d77e8210>#extra_work - unknown"),
            frame_key("#<Class:0x7f5a7a0780d8>#extra_work - unknown")
        );
        assert_eq!(frame_key("parse 0x1f - a.rb:3"), "parse 0x1f - a.rb");
        assert_eq!(
            frame_key("(unknown) [c function] - (unknown)"),
            "(unknown) [c function] - (unknown)"
        );
        assert_eq!(frame_key("[libruby-3.3.so.3.3.8]"), "[libruby.so]");
        assert_eq!(frame_key("[libruby-3.1.so.3.1.2]"), "[libruby.so]");
        assert_eq!(frame_key("[libc.so.6]"), "[libc.so]");
        assert_eq!(frame_key("[unknown]"), "[unknown]");
        assert_eq!(
            frame_key("[perf-12408.map]"),
            "[JIT code without a perf map]"
        );
        assert_eq!(
            frame_key("finish_task_switch.isra.0"),
            "finish_task_switch.isra.0"
        );
        assert_eq!(
            frame_key("[JIT] work@/tmp/hot.rb:1"),
            "[JIT] work@/tmp/hot.rb:1"
        );
    }
}

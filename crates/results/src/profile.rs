//! A trial's profiles as recorded: one `ProfileRecord` per profiler, and the folded stacks
//! it sampled, stored gzipped in the trial's directory (`lab::profile` runs the profilers).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use experiment::Profiler;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

/// Every file a profiler session writes in a trial's directory starts with this:
/// `profile.rbspy.folded.gz`, `profile.perf.stderr`, ...
pub const FILE_PREFIX: &str = "profile.";

/// `ProfileRecord::phase` of profiles taken in a phase of their own, after the measured one.
pub const PROFILED_PHASE: &str = "profiled-phase";
/// `ProfileRecord::phase` of profiles taken over the measured phase (`profile_measured`).
pub const MEASURED_PHASE: &str = "measured";

/// One profiler's output for one trial.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProfileRecord {
    pub profiler: Option<Profiler>,
    /// The folded stacks, gzipped, relative to the trial's directory; absent when nothing
    /// was sampled.
    pub file: Option<String>,
    pub rate_hz: u32,
    /// How long the profiler ran.
    pub duration_s: f64,
    /// Samples in the folded stacks, and distinct stacks.
    pub samples: u64,
    pub stacks: usize,
    /// The processes it was attached to.
    pub pids: Vec<i32>,
    /// "profiled-phase" (after the measured phase, the default) or "measured".
    pub phase: String,
    /// What the profiled phase served, so that profiles compare per request (HTTP) or per
    /// script run.
    pub requests: Option<u64>,
    pub requests_per_s: Option<f64>,
    pub script_runs: Option<u32>,
    /// The CPU time (user + system) of the profiled processes over the phase, µs: the clock
    /// the report splits by the samples' shares, because a sampler's own rate falters when
    /// the CPUs are busy (rbspy's did by ±15% between trials on 2 CPUs; the tree's CPU
    /// time per request varied by ±2%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us: Option<u64>,
    /// How long the profiled processes' threads were runnable but waited for a CPU over
    /// the phase, µs (the scheduler's `run_delay`). rbspy samples such a thread as if it
    /// ran, so where this is large against `cpu_us` its shares are skewed toward the frames
    /// the server was preempted in (docs/profiles.md, "Waiting for a CPU").
    pub cpu_wait_us: Option<u64>,
    /// A script's profiled run: its wall time without its wait at the start gate, the
    /// clock of the profilers' overhead against the measured runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// Why the profile is missing or partial, in words.
    pub error: Option<String>,
    /// What the profiler says of itself (`rbspy 0.55.0`, `perf version 6.1.158`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl ProfileRecord {
    /// What the profiled phase served: the unit profiles are compared per, and, against the
    /// measured phase, the profilers' overhead.
    pub fn note_served(
        records: &mut [ProfileRecord],
        report: &load::LoadReport,
        cpu_us: Option<u64>,
        cpu_wait_us: Option<u64>,
    ) {
        for r in records {
            r.requests = Some(report.requests);
            r.requests_per_s = Some(report.requests_per_s);
            r.cpu_us = cpu_us;
            r.cpu_wait_us = cpu_wait_us;
        }
    }
}

/// The file name of a profiler's folded stacks in a trial's directory.
pub fn folded_file_name(profiler: Profiler) -> String {
    format!("{FILE_PREFIX}{}.folded.gz", profiler.as_str())
}

/// Folded stack lines (`frame;frame;frame COUNT`) summed by stack.
pub fn fold_lines(text: &str) -> BTreeMap<String, u64> {
    let mut stacks = BTreeMap::new();
    for line in text.lines() {
        let Some((stack, count)) = line.trim_end().rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        if !stack.is_empty() && count > 0 {
            *stacks.entry(collapse_unknown_runs(stack)).or_insert(0) += count;
        }
    }
    stacks
}

/// A stack with every run of unresolved frames (`[unknown];[unknown];...`) as one: perf's
/// frame-pointer unwinding through code built without frame pointers follows garbage up to
/// its limit of 127 frames, which drew flame graphs 2000 px tall of nothing.
pub fn collapse_unknown_runs(stack: &str) -> String {
    const UNKNOWN: &str = "[unknown]";
    let mut out: Vec<&str> = Vec::new();
    for frame in stack.split(';') {
        if frame == UNKNOWN && out.last() == Some(&UNKNOWN) {
            continue;
        }
        out.push(frame);
    }
    out.join(";")
}

/// Writes folded stacks, gzipped, atomically (a temporary file renamed into place).
pub fn write_folded(path: &Path, stacks: &BTreeMap<String, u64>) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut gz = GzEncoder::new(File::create(&tmp)?, flate2::Compression::default());
        for (stack, count) in stacks {
            writeln!(gz, "{stack} {count}")?;
        }
        gz.finish()?.sync_all()?;
    }
    fs::rename(tmp, path)
}

/// Reads a gzipped folded-stacks file.
pub fn read_folded(path: &Path) -> io::Result<BTreeMap<String, u64>> {
    let mut text = String::new();
    io::Read::read_to_string(&mut GzDecoder::new(File::open(path)?), &mut text)?;
    Ok(fold_lines(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_lines_are_summed_and_survive_a_round_trip() {
        let stacks = fold_lines("a;b 3\na;b 2\na;c 1\nnot a line\na;d x\n\n");
        assert_eq!(stacks.len(), 2);
        assert_eq!(stacks["a;b"], 5);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.folded.gz");
        write_folded(&path, &stacks).unwrap();
        assert_eq!(read_folded(&path).unwrap(), stacks);
    }
}

//! One configuration of an interleaved block while it runs: its trial's result, its phase
//! (no server up, refused, or measured), and what a measured one's slices gather until its
//! trial's figures are made of them.

use std::time::{Duration, Instant};

use crate::trial::{ServerUnderTest, StoppedServer, TrialSpec};
use results::{SliceRecord, TrialResult};
use sys::process::DeathWatch;
use sys::resources::{CpuTimes, CpuWindow};

/// One configuration of the block while it runs.
pub(super) struct Member<'a> {
    pub spec: &'a TrialSpec,
    pub result: TrialResult,
    pub started: Instant,
    pub phase: Phase,
}

/// Where a member stands; what it has depends on it.
pub(super) enum Phase {
    /// No server of its own up: not started yet, its server did not come up (its result
    /// says why, and the server was recorded), or stopped and recorded at the block's end.
    Down,
    /// A server stopped before the others (its load settings were invalid), not recorded yet.
    Refused(Box<StoppedServer>),
    /// A server up with a valid load: warmed up, then measured in its slices.
    Measured(Box<Measured>),
}

/// A member whose server is up with a valid load, and what its slices gathered.
pub(super) struct Measured {
    pub server: ServerUnderTest,
    /// Watches the server's tree from its start to the end of the measured phase (taken
    /// then).
    pub watch: Option<DeathWatch>,
    pub load_spec: load::LoadSpec,
    pub url: String,
    /// Its 99th percentile latency in warmup: how long its last requests of a slice run on.
    pub tail: Option<Duration>,
    /// The slices' outcomes, merged.
    pub outcome: Option<load::RunOutcome>,
    pub slices: Vec<SliceRecord>,
    /// The CPU time of the slices' recorded windows, summed; an error once one could not
    /// be read.
    pub slice_cpu: Result<CpuTimes, String>,
    /// Each slice's whole span (lead-in and wind-down included) and its CPU time.
    pub spans: Vec<(Duration, Option<CpuTimes>)>,
    /// Its slices were held open (one load run over the block).
    pub held_open: bool,
    /// Held open: the longest any slice's last request took to complete after its close.
    pub drain_max: Option<Duration>,
    /// The requests it answered over the measured phase, its slices' lead-ins included: what
    /// the probe's figures per request divide by, its snapshots bracketing the phase.
    pub answered: Option<u64>,
}

impl Member<'_> {
    /// Its measured state, for a member measured.
    pub fn measured(&self) -> Option<&Measured> {
        match &self.phase {
            Phase::Measured(up) => Some(up),
            _ => None,
        }
    }

    /// Its measured state, for a member measured.
    pub fn measured_mut(&mut self) -> Option<&mut Measured> {
        match &mut self.phase {
            Phase::Measured(up) => Some(up),
            _ => None,
        }
    }
}

impl Measured {
    /// A server just up, watched from its start, with the load that goes to `url`; nothing
    /// gathered yet.
    pub fn new(
        server: ServerUnderTest,
        watch: DeathWatch,
        load_spec: load::LoadSpec,
        url: String,
    ) -> Measured {
        Measured {
            server,
            watch: Some(watch),
            load_spec,
            url,
            tail: None,
            outcome: None,
            slices: Vec::new(),
            slice_cpu: Ok(CpuTimes::default()),
            spans: Vec::new(),
            held_open: false,
            drain_max: None,
            answered: None,
        }
    }

    /// Adds the CPU time of round `round`'s recorded window to the slices' sum, or keeps
    /// the first error reading one.
    pub fn add_window_cpu(&mut self, window_cpu: &Result<CpuWindow, String>, round: u32) {
        self.slice_cpu = match (&self.slice_cpu, window_cpu) {
            (Ok(sum), Ok(w)) => Ok(sum.plus(&w.times)),
            (Err(e), _) => Err(e.clone()),
            (Ok(_), Err(e)) => Err(format!(
                "the server's CPU time could not be read at the edges of round {}'s slice: {e}",
                round + 1
            )),
        };
    }
}

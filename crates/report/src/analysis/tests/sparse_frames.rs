//! Frames that had the share to be tested against the baseline but not the samples
//! (`profile::sparse_frames`), and the arithmetic of how much longer or faster to profile
//! (`profile::more_samples`).

use super::*;
use crate::analysis::profile::{
    compare_frames, frame_counts, more_samples, sparse_frames, MoreSamples, TrialProfile,
};
use experiment::Profiler;
use results::profile::ProfileRecord;

#[test]
fn the_samples_needed_scale_the_time_the_rate_and_the_runs() {
    // The fewest had 6 of the 20 samples: 20/6 = 3.33× of each, the rate and the runs
    // rounded up (99 × 20 / 6 = 330 exactly; 1 × 20 / 6 = 3.33, so 4 runs).
    let m = more_samples(6, 0.5, 99, Some(1));
    assert!((m.factor - 20.0 / 6.0).abs() < 1e-12, "{m:?}");
    assert!((m.seconds - 0.5 * 20.0 / 6.0).abs() < 1e-12, "{m:?}");
    assert_eq!((m.rate_hz, m.runs), (330, Some(4)));
    assert_eq!(
        more_samples(5, 2.0, 99, None),
        MoreSamples {
            factor: 4.0,
            seconds: 8.0,
            rate_hz: 396,
            runs: None
        }
    );
    // 99 × 20 / 19 = 104.2 → 105 Hz; 3 runs × 20 / 19 = 3.16 → 4.
    let m = more_samples(19, 1.0, 99, Some(3));
    assert_eq!((m.rate_hz, m.runs), (105, Some(4)));
}

/// 3 blocks of "base" and "other", each trial a script run profiled at 99 Hz for 0.5 s,
/// whose samples are `stacks`.
fn script_trials(stacks: &[(&str, u64)]) -> (Vec<TrialData>, Vec<ProfileRecord>) {
    let mut trials = Vec::new();
    let mut records = Vec::new();
    for block in 0..3 {
        for label in ["base", "other"] {
            trials.push(trial(0, trials.len(), block, label, 1.0, "m"));
            records.push(ProfileRecord {
                profiler: Some(Profiler::Rbspy),
                rate_hz: 99,
                samples: stacks.iter().map(|(_, n)| n).sum(),
                script_runs: Some(1),
                wall_s: Some(0.5),
                cpu_us: Some(500_000),
                phase: "profiled-phase".into(),
                ..ProfileRecord::default()
            });
        }
    }
    (trials, records)
}

fn profiles_of<'a>(
    trials: &'a [TrialData],
    records: &'a [ProfileRecord],
    stacks: &[(&str, u64)],
    label: &str,
) -> Vec<TrialProfile<'a>> {
    let stacks: BTreeMap<String, u64> = stacks.iter().map(|(s, n)| (s.to_string(), *n)).collect();
    trials
        .iter()
        .zip(records)
        .filter(|(t, _)| t.label == label)
        .map(|(t, r)| TrialProfile {
            trial: t,
            record: r,
            stacks: stacks.clone(),
            frames: frame_counts(&stacks),
        })
        .collect()
}

#[test]
fn frames_with_the_share_but_not_the_samples_are_counted_and_advised_on() {
    // About 50 samples a trial, as a 0.5 s script at 99 Hz: over 6 trials, `hot` has 270,
    // `warm` 18 (6% of the 294) and `cool` 6 (2%): only `hot` is tested.
    let stacks = [
        ("main - a.rb:1;hot - a.rb:2", 45),
        ("main - a.rb:1;warm - a.rb:3", 3),
        ("main - a.rb:1;cool - a.rb:4", 1),
    ];
    let (trials, records) = script_trials(&stacks);
    let base = profiles_of(&trials, &records, &stacks, "base");
    let other = profiles_of(&trials, &records, &stacks, "other");
    let profiles: BTreeMap<&str, &[TrialProfile]> =
        [("base", base.as_slice()), ("other", other.as_slice())].into();
    let order = vec!["base".to_string(), "other".to_string()];
    let tested: Vec<String> = compare_frames(&order, &profiles, "base", Profiler::Rbspy, 0.95)
        .into_iter()
        .filter(|c| c.measure == "self")
        .map(|c| c.frame)
        .collect();
    assert_eq!(tested, ["hot - a.rb"]);

    let s = sparse_frames("other", &other, "base", &base, Profiler::Rbspy).unwrap();
    assert_eq!((s.frames, s.fewest_samples, s.pooled_samples), (2, 6, 294));
    assert!((s.factor - 20.0 / 6.0).abs() < 1e-12, "{s:?}");
    assert!((s.profiled_s - 0.5).abs() < 1e-12, "{s:?}");
    assert_eq!((s.rate_hz, s.needed_rate_hz), (99, 330));
    assert_eq!((s.profile_runs, s.needed_profile_runs), (Some(1), Some(4)));
    assert!(
        s.advice.starts_with(
            "2 frames had at least 1% of the self samples but fewer than the 20 pooled samples a test needs (the fewest 6 of 294 pooled): about 3.3× the samples would test them all; the most sampled of them, with 18, would need about 1.1×."
        ),
        "{}",
        s.advice
    );
    assert!(
        s.advice.contains(
            "profile_runs = 4, now 1: about 1.7 s of profiled runs per trial instead of 0.5 s"
        ),
        "{}",
        s.advice
    );
    assert!(
        s.advice.contains("profile_rate = 330, now 99"),
        "{}",
        s.advice
    );

    // Enough samples for every frame with the share: nothing to advise.
    let plenty = [
        ("main - a.rb:1;hot - a.rb:2", 450),
        ("main - a.rb:1;warm - a.rb:3", 30),
        ("main - a.rb:1;cool - a.rb:4", 1),
    ];
    let (trials, records) = script_trials(&plenty);
    let base = profiles_of(&trials, &records, &plenty, "base");
    let other = profiles_of(&trials, &records, &plenty, "other");
    // `cool` has 6 of 2886 pooled samples, under 1%: never tested, whatever the samples.
    assert_eq!(
        sparse_frames("other", &other, "base", &base, Profiler::Rbspy),
        None
    );
}

#[test]
fn a_rate_above_the_limit_is_not_advised() {
    // HTTP at 4000 Hz; `rare` has 1 sample, in one trial of the baseline only.
    let stacks = [("main - a.rb:1;hot - a.rb:2", 9)];
    let (trials, mut records) = script_trials(&stacks);
    for r in &mut records {
        r.rate_hz = 4000;
        r.script_runs = None;
        r.wall_s = None;
        r.requests = Some(500);
        r.requests_per_s = Some(250.0);
    }
    let mut base = profiles_of(&trials, &records, &stacks, "base");
    let other = profiles_of(&trials, &records, &stacks, "other");
    let rare: BTreeMap<String, u64> = [
        ("main - a.rb:1;hot - a.rb:2".to_string(), 9),
        ("main - a.rb:1;rare - a.rb:3".to_string(), 1),
    ]
    .into();
    base[0].frames = frame_counts(&rare);
    base[0].stacks = rare;
    let s = sparse_frames("other", &other, "base", &base, Profiler::Rbspy).unwrap();
    assert_eq!((s.fewest_samples, s.pooled_samples), (1, 55));
    assert_eq!(s.needed_rate_hz, 80_000);
    assert_eq!(s.needed_profile_runs, None);
    // HTTP: 500 requests at 250/s is a 2 s profiled phase; 20× that is 40 s.
    assert!(
        s.advice
            .contains("a profiled phase of about 40.0 s per trial instead of 2.0 s"),
        "{}",
        s.advice
    );
    assert!(
        s.advice
            .contains("not by the rate: 80000 Hz would be above profile_rate's limit of 10000 Hz"),
        "{}",
        s.advice
    );
}

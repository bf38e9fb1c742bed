//! A large synthetic history for `bench/history-scale/run` (docs/history.md, "How big a
//! history can grow"): `HISTORY_SCALE_RUNS` runs (10,000 by default) of
//! `HISTORY_SCALE_EXPERIMENTS` experiments (25) taking turns night after night, each run
//! with `HISTORY_SCALE_SERIES` points (4 metrics of one configuration against its baseline),
//! so 100 series of 400 points by default; every series steps 5% once, two thirds of the
//! way along. Written through the store's own `add`, as `history add` writes, to
//! `HISTORY_SCALE_OUT`. Ignored by default: it is the benchmark's input, not a test.

use std::path::PathBuf;

use history::import::{CommitInfo, ImportedRun, PointKind, PointRecord};
use history::History;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: a whole number"))
        })
        .unwrap_or(default)
}

#[test]
#[ignore = "writes the benchmark's history; run by bench/history-scale/run"]
fn write_a_large_history() {
    let out = PathBuf::from(std::env::var("HISTORY_SCALE_OUT").expect("HISTORY_SCALE_OUT"));
    let runs = env_usize("HISTORY_SCALE_RUNS", 10_000);
    let experiments = env_usize("HISTORY_SCALE_EXPERIMENTS", 25).max(1);
    let per_run = env_usize("HISTORY_SCALE_SERIES", 4).max(1);
    let _ = std::fs::remove_file(&out);
    let mut history = History::open(&out).unwrap();
    let mut rng = stats::rng::SeededRng::new(52);
    let nights = runs.div_ceil(experiments);
    for i in 0..runs {
        let (night, experiment) = (i / experiments, i % experiments);
        let level = if night * 3 >= nights * 2 { 1.05 } else { 1.0 };
        let created_at = format!("2026-01-01T00:00:00Z+{night:05}d{experiment:03}",);
        let points = (0..per_run)
            .map(|m| {
                let value = level * (0.01 * rng.standard_normal()).exp();
                PointRecord {
                    label: "yjit/interp".into(),
                    metric: format!("metric{m}"),
                    kind: PointKind::Ratio,
                    value,
                    lo: value * (-0.012f64).exp(),
                    hi: value * 0.012f64.exp(),
                    confidence: 0.95,
                    blocks: 7,
                    higher_is_better: true,
                }
            })
            .collect();
        history
            .add(&ImportedRun {
                key: format!("run:experiment{experiment}:{created_at}"),
                kind: "run".into(),
                experiment: format!("experiment{experiment}"),
                experiment_file: format!("/perf/experiment{experiment}.toml"),
                dir: format!("/results/{i}"),
                created_at: created_at.clone(),
                commit: Some(CommitInfo {
                    hash: format!(
                        "{:040x}",
                        (night as u128 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
                    ),
                    subject: format!("commit {night}"),
                    author_date: created_at,
                    order: Some(night as i64),
                    dirty: false,
                    repo: Some("/src/app".into()),
                }),
                host_kind: "cpu × 2".into(),
                design: "interleaved".into(),
                rubyrace_version: "0".into(),
                points,
            })
            .unwrap();
    }
    eprintln!(
        "{}: {runs} runs, {} series",
        out.display(),
        experiments * per_run
    );
}

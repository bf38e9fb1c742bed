//! The interleaved design with the real binary, real Puma servers and the bundled
//! Rack app: every configuration of a block is measured in the same seconds, each trial's
//! figures add up its own slices, a block is stored whole or not at all, and a killed run
//! is resumed by running the interrupted block again.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use crate::support::lab::{trials, Lab, TrialRow};
use crate::support::rubyrace;

/// Two configurations (Puma with 1 and 2 threads), interleaved in 4 rounds of 300 ms.
fn interleaved(batches: u32) -> String {
    format!(
        r#"
name = "interleaved"
batches = {batches}
design = "interleaved"
slice = "300ms"
rounds = 4

[settings]
app = "rack-hello"
connections = 2
warmup = "300ms"

[matrix]
threads = [1, 2]
"#
    )
}

/// The slices of a stored trial: (round, turn, start_s, elapsed_s, requests).
fn slices(t: &TrialRow) -> Vec<(u64, u64, f64, f64, u64)> {
    t.result["interleaved"]["slices"]
        .as_array()
        .unwrap_or_else(|| panic!("trial {} has no slices: {}", t.trial_id, t.result))
        .iter()
        .map(|s| {
            (
                s["round"].as_u64().unwrap(),
                s["turn"].as_u64().unwrap(),
                s["start_s"].as_f64().unwrap(),
                s["elapsed_s"].as_f64().unwrap(),
                s["requests"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Runs the lab's experiment to the end and gives its `trials` trials, every one valid, by
/// block.
fn run_to_valid_blocks(lab: &Lab, trials_expected: usize) -> BTreeMap<i64, Vec<TrialRow>> {
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let stored = trials(&lab.db());
    assert_eq!(stored.len(), trials_expected);
    let mut by_block: BTreeMap<i64, Vec<TrialRow>> = BTreeMap::new();
    for t in stored {
        assert_eq!(t.status, "valid", "trial {}: {:?}", t.trial_id, t.reason);
        by_block.entry(t.block).or_default().push(t);
    }
    by_block
}

#[test]
fn an_interleaved_run_measures_every_configuration_of_a_block_in_the_same_seconds() {
    let lab = Lab::new("interleaved");
    lab.experiment(&interleaved(2));
    let dry = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(dry.code(), Some(0), "{dry:?}");
    assert!(
        dry.stdout.contains("Design: interleaved. In each block every configuration's server is started and warmed up, then the load alternates between them: 4 rounds of 300ms each"),
        "{dry:?}"
    );
    assert!(
        dry.stdout.contains("warmup 300ms, measured 1s 200ms"),
        "{dry:?}"
    );
    assert!(
        !dry.stderr.contains("duration"),
        "no duration default is noted: {dry:?}"
    );

    let by_block = run_to_valid_blocks(&lab, 4);
    for (block, pair) in &by_block {
        assert_eq!(pair.len(), 2, "block {block}");
        let ids: Vec<u64> = pair.iter().map(|t| t.trial_id as u64).collect();
        for t in pair {
            let record = &t.result["interleaved"];
            assert_eq!(record["rounds"], 4);
            assert_eq!(record["slice_s"], 0.3);
            let block_trials: Vec<u64> = record["block_trials"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(block_trials, ids, "the block's trials are named in each");
            let s = slices(t);
            assert_eq!(
                s.iter().map(|x| x.0).collect::<Vec<_>>(),
                [0, 1, 2, 3],
                "one slice per round"
            );
            // The trial's figures are its slices' sums.
            let requests: u64 = s.iter().map(|x| x.4).sum();
            assert_eq!(t.result["load"]["requests"].as_u64(), Some(requests));
            let recorded: f64 = s.iter().map(|x| x.3).sum();
            assert!(
                (t.result["load"]["elapsed_s"].as_f64().unwrap() - recorded).abs() < 1e-6,
                "{}",
                t.result["load"]
            );
            for x in &s {
                assert!((0.25..0.6).contains(&x.3), "a 300 ms slice took {} s", x.3);
                assert!(x.4 > 0, "a slice without a response: {s:?}");
            }
            let slice_cpu: u64 = t.result["interleaved"]["slices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["cpu_us"].as_u64().unwrap())
                .sum();
            let resources = &t.result["resources"];
            assert_eq!(
                resources["cpu_user_us"].as_u64().unwrap()
                    + resources["cpu_system_us"].as_u64().unwrap(),
                slice_cpu,
                "the trial's CPU is its slices'"
            );
            let fine = record["slices"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["cpu_fine"] == true)
                .count();
            assert!(
                fine >= 3,
                "{fine} of 4 slices read from the threads' nanosecond counters"
            );
            assert!(record["idle_cpu_us"].as_u64().is_some());
            assert_eq!(record["lead_in_s"], 0.03, "a tenth of the slice");
            // The trial's wall time is its recorded windows'; the rest of the phase is idle.
            assert_eq!(
                resources["elapsed_us"].as_u64().unwrap(),
                (recorded * 1e6).round() as u64
            );

            assert!(std::path::Path::new(&lab.results())
                .join(format!("trials/{:05}/latency.hlog", t.trial_id))
                .is_file());
        }
        // Each server is idle while the other has the load: at least the other's recorded
        // windows.
        for (this, other) in [(&pair[0], &pair[1]), (&pair[1], &pair[0])] {
            let others: f64 = slices(other).iter().map(|x| x.3).sum();
            let idle = this.result["interleaved"]["idle_s"].as_f64().unwrap();
            assert!(idle >= others, "idle {idle} s < the other's {others} s");
            assert!(idle < 3.0 * others, "idle {idle} s, the other's {others} s");
        }
        // In the same seconds: round by round, the two configurations' slices alternate,
        // each taking its turn, and never overlap.
        let (a, b) = (slices(&pair[0]), slices(&pair[1]));
        for round in 0..4 {
            let (sa, sb) = (a[round], b[round]);
            assert_ne!(sa.1, sb.1, "two slices with the same turn in round {round}");
            let (first, second) = if sa.1 < sb.1 { (sa, sb) } else { (sb, sa) };
            // Each slice's recorded window follows its unrecorded 30 ms lead-in.
            assert!(
                second.2 >= first.2 + 0.03 + first.3 - 1e-9,
                "slices overlap in round {round}: {first:?} {second:?}"
            );
            if round < 3 {
                let next_start = a[round + 1].2.min(b[round + 1].2);
                assert!(
                    second.2 < next_start,
                    "round {round} ended after the next began"
                );
            }
        }
    }
    // The report pairs the block's trials as for any design.
    let v = lab.report_json();
    let comparisons = v["comparisons"].as_array().unwrap();
    assert!(
        comparisons
            .iter()
            .any(|c| c["cohort"] == "threads=2" && c["n"] == 2 && c["method"] == "paired"),
        "{}",
        v["comparisons"]
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// Slices of 20 ms on held-open connections: each server's load opens its connections once
/// for the block, every slice has its own requests and CPU, the lead-in is the 5 ms
/// minimum, and the slices of the two servers alternate without overlapping.
#[test]
fn twenty_millisecond_slices_keep_their_connections_open_for_the_block() {
    let lab = Lab::new("interleaved-20ms");
    lab.experiment(
        r#"
name = "interleaved-20ms"
batches = 1
design = "interleaved"
slice = "20ms"
rounds = 50

[settings]
app = "rack-hello"
connections = 2
warmup = "300ms"

[matrix]
threads = [1, 2]
"#,
    );
    let by_block = run_to_valid_blocks(&lab, 2);
    let pair = &by_block[&0];
    let mut windows: Vec<(f64, f64)> = Vec::new();
    for t in pair {
        let record = &t.result["interleaved"];
        assert_eq!(record["held_open"], true);
        assert_eq!(record["lead_in_s"], 0.005, "the 5 ms minimum lead-in");
        assert!(record["drain_max_s"].as_f64().is_some(), "{record}");
        // The CPU is read at each slice's open too: the lead-ins' part of the idle CPU.
        // Both are differences of /proc's CPU times, counted in 10 ms clock ticks: the
        // lead-ins are a sum of one difference per slice, each off by up to a tick, so
        // they can pass the idle figure (one difference) by a few ticks (7.8 ms over 50
        // slices was seen in a full `make test`): allowed up to 4 sd of that sum.
        let lead_in_cpu = record["lead_in_cpu_us"].as_u64().expect("read apart");
        let count = record["slices"].as_array().unwrap().len() as f64;
        let ticks = 1.0 + 4.0 * 0.41 * count.sqrt();
        let allowed = record["idle_cpu_us"].as_u64().unwrap() as f64 + ticks * 10_000.0;
        assert!(
            lead_in_cpu > 0 && (lead_in_cpu as f64) <= allowed,
            "{record}"
        );
        // Two connections, opened once for the whole block (the warmup's own are apart).
        let actual = &t.result["load"]["actual"];
        assert_eq!(actual["connections_opened"], 2, "{actual}");
        let s = slices(t);
        assert_eq!(s.len(), 50);
        let with_requests = s.iter().filter(|x| x.4 > 0).count();
        assert!(
            with_requests >= 45,
            "{with_requests} of 50 slices had a response: {s:?}"
        );
        let requests: u64 = s.iter().map(|x| x.4).sum();
        assert_eq!(t.result["load"]["requests"].as_u64(), Some(requests));
        // The probe's snapshots bracket the whole phase, lead-ins included (5 ms before
        // every 20 ms window, a quarter as many requests again): its figures per request
        // divide by every request the server answered between them, not the recorded
        // ones alone (which made objects per request a fifth too high at these slices).
        let measured = &t.result["probe"]["measured"];
        let objects = measured["allocated_objects"].as_f64().unwrap();
        let per_request = measured["allocated_objects_per_request"].as_f64().unwrap();
        let answered = objects / per_request;
        assert!(
            answered > 1.1 * requests as f64 && answered < 1.8 * requests as f64,
            "the probe divided by {answered:.0} requests, {requests} recorded: {measured}"
        );
        for (x, stored) in s.iter().zip(record["slices"].as_array().unwrap()) {
            assert!((x.3 - 0.02).abs() < 1e-9, "a recorded window of {} s", x.3);
            // start_s is the slice's open: its recorded window starts after its lead-in,
            // the design's 5 ms or the previous server's tail.
            let lead = stored["lead_in_s"].as_f64().unwrap();
            assert!(lead >= 0.005 - 1e-9, "{stored}");
            windows.push((x.2 + lead, x.2 + lead + 0.02));
        }
        let fine = record["slices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["cpu_fine"] == true && x["cpu_us"].as_u64().is_some())
            .count();
        assert!(
            fine >= 45,
            "{fine} of 50 slices read from the threads' counters"
        );
    }
    windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    for w in windows.windows(2) {
        assert!(
            w[1].0 >= w[0].1 + 0.005 - 1e-9,
            "recorded windows overlap: {w:?}"
        );
    }
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// A slice after a slow server's has a longer lead-in: the slow server's last requests
/// (its 99th percentile latency in warmup, here many milliseconds of pure-Ruby work per
/// request) complete before the next server's recorded window opens; after the fast
/// server's, the lead-in is shorter.
#[test]
fn a_slow_servers_tail_lengthens_the_next_slices_lead_in() {
    let lab = Lab::new("interleaved-tail");
    lab.experiment(
        r#"
name = "interleaved-tail"
batches = 1
design = "interleaved"
slice = "20ms"
rounds = 20

[settings]
app = "known-effect"
threads = 1
connections = 2
warmup = "1s"

[matrix]
env = [
  { label = "fast", value = { RUBYRACE_WORK_ITERATIONS = "100" } },
  { label = "slow", value = { RUBYRACE_WORK_ITERATIONS = "600000" } },
]
"#,
    );
    let by_block = run_to_valid_blocks(&lab, 2);
    let pair = &by_block[&0];
    // Every slice of both, in time order: (open, its lead-in, whose).
    let mut all: Vec<(f64, f64, String)> = Vec::new();
    for t in pair {
        for x in t.result["interleaved"]["slices"].as_array().unwrap() {
            let lead = x["lead_in_s"].as_f64().unwrap();
            assert!(lead >= 0.005 - 1e-9, "{x}");
            assert!(x["drain_s"].as_f64().is_some(), "{x}");
            all.push((x["start_s"].as_f64().unwrap(), lead, t.label.clone()));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let after = |whose: &str| -> Vec<f64> {
        all.windows(2)
            .filter(|w| w[0].2 == whose && w[1].2 != whose)
            .map(|w| w[1].1)
            .collect()
    };
    let (after_slow, after_fast) = (after("slow"), after("fast"));
    assert!(!after_slow.is_empty() && !after_fast.is_empty(), "{all:?}");
    // 600,000 iterations are over 10 ms of CPU a request, and two connections queue behind
    // one thread: the slow server's p99 is well above 10 ms, and every lead-in after it is
    // that long. The fast one's is under a millisecond on a quiet machine (then the lead-in
    // is the design's 5 ms; a busy one's warmup can stall some requests for longer), and
    // under the slow one's on any.
    assert!(
        after_slow.iter().all(|&l| l > 0.010),
        "lead-ins after the slow server: {after_slow:?}"
    );
    let (longest_fast, shortest_slow) = (
        after_fast.iter().copied().fold(0.0, f64::max),
        after_slow.iter().copied().fold(f64::MAX, f64::min),
    );
    assert!(
        longest_fast < shortest_slow,
        "after the fast server {after_fast:?}, after the slow one {after_slow:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// A run killed (SIGKILL) in the middle of a block stores nothing of that block; the
/// resume runs it again whole, and no server of the killed run is left.
#[test]
fn a_block_interrupted_by_a_kill_is_run_again_whole() {
    let lab = Lab::new("interleaved-kill");
    lab.experiment(&interleaved(3));
    let results = lab.results();
    let running = lab.spawn_run(&[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let count = || lab.stored_trials();
    while count() < 2 {
        assert!(Instant::now() < deadline, "block 1 was not stored in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Block 2 is under way: its servers are starting or being measured.
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        count(),
        2,
        "block 2 ended before the kill; the test needs it under way"
    );
    // SAFETY: kill(2) on our own child, by pid.
    unsafe { libc::kill(running.pid() as i32, libc::SIGKILL) };
    let killed = running.wait(Duration::from_secs(150));
    assert_eq!(killed.status.signal(), Some(libc::SIGKILL), "{killed:?}");
    assert_eq!(
        trials(&lab.db()).len(),
        2,
        "a block is stored whole or not at all"
    );

    let resumed = rubyrace(&["run", "--resume", results.to_str().unwrap()]);
    assert_eq!(resumed.code(), Some(0), "{resumed:?}");
    assert!(
        resumed
            .stderr
            .contains("a server left running by an earlier rubyrace"),
        "the killed run's servers were found and killed: {resumed:?}"
    );
    let stored = trials(&lab.db());
    assert_eq!(
        stored.iter().map(|t| t.trial_id).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    assert!(
        stored.iter().all(|t| t.status == "valid"),
        "{:?}",
        stored.iter().map(|t| &t.reason).collect::<Vec<_>>()
    );
    lab.assert_no_leftovers(Duration::from_secs(5));
}

/// An adaptive run on CPU per request, interleaved, with a target it cannot
/// reach: the rule looks at the metric it was given after every block from the first stop
/// (the plan holds those 6 blocks whatever `batches` says), the time budget ends the run,
/// every stored block is whole, and how it ended is said and stored.
#[test]
fn an_interleaved_adaptive_run_on_cpu_per_request_ends_at_its_time_budget() {
    let lab = Lab::new("interleaved-adaptive");
    lab.experiment(
        r#"
name = "interleaved-adaptive"
batches = 2
precision = "0.001%"
metric = "cpu_per_request"
max_duration = "10s"
design = "interleaved"
slice = "200ms"
rounds = 3

[settings]
app = "rack-hello"
connections = 2
warmup = "200ms"

[matrix]
threads = [1, 2]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(180));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains(
            "precision after 6 blocks (cpu_per_request, 97.5% intervals, target ±0.001%): threads=2 ±"
        ),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("the run stopped at its time budget (max_duration) after "),
        "{run:?}"
    );
    let stored = trials(&lab.db());
    let mut by_block: BTreeMap<i64, usize> = BTreeMap::new();
    for t in &stored {
        assert_eq!(t.status, "valid", "trial {}: {:?}", t.trial_id, t.reason);
        assert!(t.result["derived"]["cpu_us_per_request"].as_f64().unwrap() > 0.0);
        *by_block.entry(t.block).or_default() += 1;
    }
    assert!(by_block.len() >= 2, "{by_block:?}");
    assert!(
        by_block.values().all(|&n| n == 2),
        "a block stored in part: {by_block:?}"
    );
    // An interleaved block counts once against the budget: 10 s of blocks of about 2 ×
    // (0.2 s warmup + 3 × 0.22 s) plus the servers' starts, so well under 20 blocks.
    assert!(by_block.len() < 20, "{by_block:?}");
    let v = lab.report_json();
    assert_eq!(v["confidence"], 0.975);
    let ended = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "adaptive-run")
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        ended["message"]
            .as_str()
            .unwrap()
            .contains("short of ±0.001%"),
        "{ended}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// The co-scheduled design: both servers of a block are loaded at once in every window,
/// each window's CPU time comes from the threads' nanosecond counters, and a planted
/// difference in CPU per request (the known-effect app doing twice the work per request)
/// shows in every block, while the report says that throughput is a share.
#[test]
fn a_co_scheduled_run_loads_every_server_at_once_and_compares_cpu_per_request() {
    let lab = Lab::new("co-scheduled");
    lab.experiment(
        r#"
name = "co-scheduled"
batches = 2
design = "co-scheduled"
slice = "300ms"
rounds = 4

[settings]
app = "known-effect"
threads = 1
connections = 1
warmup = "300ms"

[matrix]
env = [
  { label = "base", value = { RUBYRACE_WORK_ITERATIONS = "20000" } },
  { label = "double", value = { RUBYRACE_WORK_ITERATIONS = "40000" } },
]
"#,
    );
    let dry = lab.run(&["--dry-run"], Duration::from_secs(20));
    assert_eq!(dry.code(), Some(0), "{dry:?}");
    assert!(
        dry.stdout.contains("Design: co-scheduled. In each block every configuration's server is started and warmed up, then all of them are loaded at once, sharing the server CPUs: 4 windows of 300ms."),
        "{dry:?}"
    );
    let by_block = run_to_valid_blocks(&lab, 4);
    let mut fine = 0;
    for (block, pair) in &by_block {
        assert_eq!(pair.len(), 2, "block {block}");
        let (a, b) = (slices(&pair[0]), slices(&pair[1]));
        for round in 0..4 {
            // The same window: started together, and each recorded for the whole slice.
            assert_eq!(a[round].0, round as u64);
            assert_eq!(a[round].2, b[round].2, "round {round} began apart");
            assert!((0.25..0.6).contains(&a[round].3), "{a:?}");
            assert!((0.25..0.6).contains(&b[round].3), "{b:?}");
        }
        for t in pair {
            for s in t.result["interleaved"]["slices"].as_array().unwrap() {
                fine += usize::from(s["cpu_fine"] == true);
            }
        }
        let cpu = |label: &str| {
            let t = pair.iter().find(|t| t.label == label).unwrap();
            t.result["derived"]["cpu_us_per_request"].as_f64().unwrap()
        };
        // Twice the loop on top of Puma's own work per request: about 1.9 times the CPU.
        let ratio = cpu("double") / cpu("base");
        assert!(
            (1.4..2.6).contains(&ratio),
            "block {block}: CPU per request double/base {ratio}"
        );
    }
    // No thread of a one-thread Puma ends within a window: the fine clock is used.
    assert!(
        fine >= 14,
        "{fine} of 16 windows read from the threads' counters"
    );
    let v = lab.report_json();
    let warned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["kind"] == "co-scheduled");
    assert!(warned, "{}", v["warnings"]);
    // The slices' edges are no one's idle work in this design.
    assert!(
        !v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["kind"] == "idle-cpu-differs"),
        "{}",
        v["warnings"]
    );
    assert!(
        v["sources"][0]["design"]
            .as_str()
            .unwrap()
            .starts_with("co-scheduled: 4 windows of 300ms"),
        "{}",
        v["sources"]
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// A file that writes no design: its two HTTP configurations are interleaved, each measured
/// for its duration in equal slices of at most 500 ms, and the run names that default
/// before it starts; the same file with `requests` runs in blocks and says why.
#[test]
fn two_http_configurations_without_a_design_are_interleaved_for_their_duration() {
    let file = |measure: &str| {
        format!(
            r#"
name = "by-default"
batches = 1

[settings]
app = "rack-hello"
connections = 2
warmup = "300ms"
{measure}

[matrix]
threads = [1, 2]
"#
        )
    };
    let lab = Lab::new("by-default");
    lab.experiment(&file("duration = \"900ms\""));
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("does not set these, so their defaults apply: ")
            && run
                .stderr
                .contains(", design = \"interleaved\" (18 rounds of 50ms slices)\n"),
        "{run:?}"
    );
    let stored = trials(&lab.db());
    assert_eq!(stored.len(), 2);
    for t in &stored {
        assert_eq!(t.status, "valid", "{:?}", t.reason);
        // The default slice, 50 ms, on connections held open for the block.
        assert_eq!(t.result["interleaved"]["held_open"], true);
        let s = slices(t);
        assert_eq!(s.len(), 18, "trial {}: {s:?}", t.trial_id);
        for (_, _, _, elapsed, _) in &s {
            assert!((elapsed - 0.05).abs() < 1e-9, "a slice of {elapsed} s");
        }
        let answered = s.iter().filter(|x| x.4 > 0).count();
        assert!(
            answered >= 15,
            "{answered} of 18 slices had a response: {s:?}"
        );
    }
    assert!(
        lab.report_json()["sources"][0]["design"]
            .as_str()
            .unwrap()
            .starts_with("interleaved: 18 rounds of 50ms slices"),
        "{}",
        lab.report_json()["sources"]
    );
    lab.assert_no_leftovers(Duration::from_secs(2));

    let blocks = Lab::new("by-default-requests");
    blocks.experiment(&file("requests = 300"));
    let run = blocks.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains("design = \"blocks\" (requests is set)"),
        "{run:?}"
    );
    for t in trials(&blocks.db()) {
        assert_eq!(t.status, "valid", "{:?}", t.reason);
        assert!(t.result.get("interleaved").is_none(), "{}", t.result);
        assert_eq!(t.result["load"]["requests"], 300, "{}", t.result["load"]);
    }
    assert_eq!(blocks.report_json()["sources"][0]["design"], "blocks");
    blocks.assert_no_leftovers(Duration::from_secs(2));
}

/// On a terminal, the progress of an interleaved block counts its slices
/// and names the configuration loaded now and the slice just ended (it stayed at `0/4
/// trials` for a whole block, named the last server started, and showed the block before).
/// rubyrace's stderr is a real pseudo-terminal here, as in a user's shell.
#[test]
fn the_progress_on_a_terminal_counts_slices_and_names_the_one_on() {
    let lab = Lab::new("interleaved-progress");
    lab.experiment(
        r#"
name = "interleaved-progress"
batches = 1
design = "interleaved"
slice = "700ms"
rounds = 3

[settings]
app = "rack-hello"
connections = 2
warmup = "700ms"

[matrix]
threads = [1, 2]
"#,
    );
    let screen = run_on_a_terminal(&lab);
    // Each of the 6 slices was shown while it ran, with the configuration on it.
    for n in 1..=6 {
        assert!(
            screen.contains(&format!("block 1/1 · slice {n}/6 · ETA ")),
            "slice {n}: {screen}"
        );
    }
    assert!(
        screen.contains("· on: threads=1") && screen.contains("· on: threads=2"),
        "{screen}"
    );
    // Held-open slices count their requests on the load's threads, known at the block's
    // end: the bar names no rate of a last slice (a separate load host's slices do).
    assert!(!screen.contains("· last slice: "), "{screen}");
    assert!(
        screen.contains("starting threads=1") && screen.contains("warming up threads=2"),
        "{screen}"
    );
}

/// Runs the lab's experiment with its stderr on a pseudo-terminal (120 columns); all it
/// drew there, without the terminal's control sequences.
fn run_on_a_terminal(lab: &Lab) -> String {
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the integers given; no name is asked.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let file = lab.dir.path("").join("experiment.toml");
    let results = lab.results();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rubyrace"))
        .args([
            "run",
            file.to_str().unwrap(),
            "-o",
            results.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(slave))
        .spawn()
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut master = std::fs::File::from(master);
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // The read fails (EIO) once the child's side is closed.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not end in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let drawn = reader.join().unwrap();
    assert!(
        status.success(),
        "{status:?}: {}",
        String::from_utf8_lossy(&drawn)
    );
    without_escapes(&String::from_utf8_lossy(&drawn))
}

/// Text without ANSI control sequences (`ESC [ ... letter`).
fn without_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

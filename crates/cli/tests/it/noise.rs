//! The noise record of real trials and the known-effect app, end to end: the real binary
//! runs real Puma servers, reads the real /proc, and the tests read the stored results and
//! the report. A busy process this test starts (and kills by its pid) must show up as other
//! processes' CPU and make the report name the trials in `noisy-trials`; twice the
//! known-effect app's iterations must show up as more server CPU per request. Each test runs with
//! the machine to itself (`.config/nextest.toml`): the busy loop of one would be the noise of
//! another, and any other test's load would be noise too.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::lab::{trials, Lab, TrialRow};
use crate::support::rubyrace;
use serde_json::Value;

/// A process burning one CPU until dropped; killed and reaped by its pid.
struct BusyLoop(Child);

impl BusyLoop {
    fn start() -> BusyLoop {
        let child = Command::new("/bin/sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting a busy loop");
        BusyLoop(child)
    }

    /// The loop's CPU so far (utime + stime from /proc/PID/stat), in clock ticks.
    fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).unwrap();
        // The fields after the command name, which is in parentheses.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }
}

impl Drop for BusyLoop {
    fn drop(&mut self) {
        // Child::kill sends SIGKILL to this child's pid only.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn valid_trials(lab: &Lab) -> Vec<TrialRow> {
    let rows = trials(&lab.db());
    for row in &rows {
        assert_eq!(
            row.status, "valid",
            "trial {}: {:?}",
            row.trial_id, row.reason
        );
    }
    rows
}

fn num(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn every_trial_records_the_noise_of_its_measured_phase() {
    let lab = Lab::new("noise-fields");
    lab.experiment(
        r#"
name = "noise-fields"
seed = 1
batches = 2

[settings]
app = "rack-hello"
server = "puma"
threads = 2
connections = 2
warmup = "1s"
duration = "2s"
"#,
    );
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = valid_trials(&lab);
    assert_eq!(rows.len(), 2);
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    for row in &rows {
        let n = &row.result["noise"];
        // The window is the resource sampler's: the 2 s measured phase.
        let elapsed = num(n, "elapsed_s");
        assert!((1.5..=3.0).contains(&elapsed), "{n}");
        let res = &row.result["resources"];
        let tree_us = res["cpu_user_us"].as_f64().unwrap() + res["cpu_system_us"].as_f64().unwrap();
        let tree_percent = 100.0 * tree_us / res["elapsed_us"].as_f64().unwrap();
        // The server's share is the sampler's tree CPU over the same window.
        let server = num(n, "server_percent");
        assert!(
            server > 1.0 && (server - tree_percent).abs() <= 0.02 * tree_percent + 0.5,
            "server {server}% vs tree {tree_percent}%: {n}"
        );
        // rubyrace sent thousands of requests: it used CPU.
        let own = num(n, "rubyrace_percent");
        assert!(own > 1.0 && own <= 100.0 * cpus, "{n}");
        // The machine's processes include the server and rubyrace, give or take how the
        // kernel splits ticks: /proc/stat counts ticks, a process's times are scaled from its
        // exact run time, and a tick taken in an interrupt goes to irq in /proc/stat while
        // the process is charged for it. Seen on a CI machine: processes 93.5%, interrupts
        // 12.0%, server + rubyrace 120.2%. So the processes plus the interrupts, with a
        // margin for the tick rounding.
        let processes = num(n, "processes_percent");
        let interrupts = num(n, "interrupts_percent");
        assert!(processes + interrupts >= 0.75 * (server + own), "{n}");
        assert!(processes <= 100.0 * cpus + 5.0, "{n}");
        let other = num(n, "other_percent");
        assert!(other >= 0.0 && other <= processes, "{n}");
        assert!(
            (other - (processes - server - own).max(0.0)).abs() < 1e-6,
            "other = processes − server − rubyrace: {n}"
        );
        let steal = num(n, "steal_percent");
        assert!((0.0..=100.0 * cpus).contains(&steal), "{n}");
        assert!(num(n, "interrupts_percent") >= 0.0, "{n}");
        for key in ["load_average_start", "load_average_end"] {
            let l = num(n, key);
            assert!(l.is_finite() && l >= 0.0, "{n}");
        }
    }
    // The report gives the cohort's medians.
    let report = lab.report_json();
    let noise = &report["cohorts"][0]["noise"];
    assert_eq!(noise["trials"], 2, "{noise}");
    assert!(num(noise, "other_cpu_percent") >= 0.0, "{noise}");
    assert!(num(noise, "steal_percent") >= 0.0, "{noise}");
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn a_busy_process_during_the_measurement_is_named_in_noisy_trials() {
    let lab = Lab::new("noise-busy");
    lab.experiment(
        r#"
name = "noise-busy"
seed = 1
batches = 2

[settings]
app = "rack-hello"
server = "puma"
threads = 1
connections = 1
warmup = "1s"
duration = "2s"
"#,
    );
    let busy = BusyLoop::start();
    let (ticks0, t0) = (busy.cpu_ticks(), std::time::Instant::now());
    let run = lab.run(&[], Duration::from_secs(120));
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let loop_percent =
        100.0 * (busy.cpu_ticks() - ticks0) as f64 / ticks_per_s / t0.elapsed().as_secs_f64();
    drop(busy);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        loop_percent > 25.0,
        "the busy loop got {loop_percent:.0}% of a CPU"
    );
    let rows = valid_trials(&lab);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let n = &row.result["noise"];
        // The loop alone wants a whole CPU; it gets at least a quarter of one on a busy
        // 2-core machine, far above the 10% threshold.
        assert!(
            num(n, "other_percent") > 25.0,
            "trial {}: {n}",
            row.trial_id
        );
    }
    let report = lab.report_json();
    let warning = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "noisy-trials")
        .unwrap_or_else(|| panic!("no noisy-trials warning: {}", report["warnings"]));
    let message = warning["message"].as_str().unwrap();
    for row in &rows {
        assert!(
            message.contains(&format!("0:{} (", row.trial_id)),
            "{message}"
        );
    }
    let noise = &report["cohorts"][0]["noise"];
    assert_eq!(noise["noisy"].as_array().unwrap().len(), 2, "{noise}");
    assert!(num(noise, "other_cpu_percent") > 25.0, "{noise}");
    // The text report shows the table.
    let text = rubyrace(&["report", lab.results().to_str().unwrap()]);
    assert!(text.stdout.contains("Machine noise"), "{text:?}");
    assert!(text.stdout.contains("2 of 2"), "{text:?}");
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn twice_the_known_effect_iterations_cost_more_cpu_per_request() {
    let lab = Lab::new("known-effect");
    lab.experiment(
        r#"
name = "known-effect-2x"
seed = 2
batches = 2

[settings]
app = "known-effect"
server = "puma"
processes = 1
threads = 1
connections = 1
warmup = "1s"
duration = "2s"

[matrix]
env = [
  { label = "once", value = { RUBYRACE_WORK_ITERATIONS = "20000" } },
  { label = "twice", value = { RUBYRACE_WORK_ITERATIONS = "40000" } },
]
"#,
    );
    let run = lab.run(&[], Duration::from_secs(120));
    assert_eq!(run.code(), Some(0), "{run:?}");
    let rows = valid_trials(&lab);
    assert_eq!(rows.len(), 4);
    let cpu_of = |label: &str| -> Vec<f64> {
        rows.iter()
            .filter(|r| r.label == label)
            .map(|r| r.result["derived"]["cpu_us_per_request"].as_f64().unwrap())
            .collect()
    };
    let (once, twice) = (cpu_of("once"), cpu_of("twice"));
    assert_eq!((once.len(), twice.len()), (2, 2));
    // Per block: twice the loop is more than 1.5× the server's CPU per request (about 1.9×
    // with Puma's fixed ~50 µs). The upper bound is loose: other work on the machine (a
    // build on the other core) slows each iteration down, and it did reach 2.39 once.
    for block in 0..2 {
        let in_block = |label: &str| {
            rows.iter()
                .find(|r| r.label == label && r.block == block)
                .map(|r| r.result["derived"]["cpu_us_per_request"].as_f64().unwrap())
                .unwrap()
        };
        let ratio = in_block("twice") / in_block("once");
        assert!(
            (1.5..=3.0).contains(&ratio),
            "block {block}: CPU/request ratio {ratio} (once {once:?}, twice {twice:?})"
        );
    }
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// The server's CPUs under `cpus = "split"` for a process with this test's affinity: all
/// but the first quarter (at least one) of the CPUs it may use, as `lab::conditions` splits
/// them. (first, last, count) of the server's set, and the load generator's set as a list.
fn split_of_this_process() -> ((usize, usize, usize), String) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap());
    }
    assert!(
        cpus.len() >= 2,
        "pinning needs 2 CPUs and this test may use only {list}"
    );
    let load = (cpus.len() / 4).max(1);
    let server = &cpus[load..];
    let load_list: Vec<String> = cpus[..load].iter().map(|c| c.to_string()).collect();
    (
        (server[0], server[server.len() - 1], server.len()),
        load_list.join(","),
    )
}

#[test]
fn cpus_split_pins_every_server_process_and_script_and_catches_a_server_that_leaves() {
    let ((first, last, count), load_cpus) = split_of_this_process();
    let lab = Lab::new("pinned");
    // The script reports the CPUs the kernel lets it use: an independent check of the pinning.
    std::fs::write(
        lab.dir.path("").join("affinity.rb"),
        r#"list = File.read("/proc/self/status")[/^Cpus_allowed_list:\s*(\S+)/, 1]
cpus = list.split(",").flat_map { |p| a, b = p.split("-").map(&:to_i); (a..(b || a)).to_a }
puts "rubyrace-metric cpu_count=#{cpus.size} first_cpu=#{cpus.first} last_cpu=#{cpus.last}"
"#,
    )
    .unwrap();
    lab.experiment(&format!(
        r#"
name = "pinned"
seed = 1
batches = 1
cpus = "split"

[settings]

[[configs]]
label = "puma-2x1"
app = "rack-hello"
server = "puma"
processes = 2
threads = 1
connections = 2
warmup = "1s"
duration = "2s"

[[configs]]
label = "script"
workload = "script"
script = "affinity.rb"
runs = 1

# A server that moves itself to the load generator's CPUs: the check must catch it.
[[configs]]
label = "escaped"
app = "rack-hello"
server = "custom"
server_argv = ["taskset", "-c", "{load_cpus}", "{{ruby}}", "-S", "puma", "-t", "1:1", "-b", "tcp://127.0.0.1:{{port}}", "{{app}}/config.ru"]
threads = 1
connections = 1
warmup = "1s"
duration = "1s"
"#
    ));
    let run = lab.run(&[], Duration::from_secs(120));
    // Exit 3: a trial (the escaped server's) is invalid.
    assert_eq!(run.code(), Some(3), "{run:?}");
    let rows = trials(&lab.db());
    let by_label = |label: &str| rows.iter().find(|r| r.label == label).unwrap();

    let puma = by_label("puma-2x1");
    assert_eq!(puma.status, "valid", "{:?}", puma.reason);
    let pinning = &puma.result["pinning"];
    // The master and its two workers, each read from /proc.
    assert_eq!(pinning["server_processes"], 3, "{pinning}");
    assert!(
        pinning["rubyrace_threads"].as_u64().unwrap() >= 2,
        "{pinning}"
    );
    assert_eq!(
        pinning["mismatches"].as_array().unwrap().len(),
        0,
        "{pinning}"
    );
    assert_eq!(pinning["load_cpus"], load_cpus.as_str(), "{pinning}");

    let script = by_label("script");
    assert_eq!(script.status, "valid", "{:?}", script.reason);
    let metrics = &script.result["script"]["median_metrics"];
    assert_eq!(
        metrics["cpu_count"].as_f64(),
        Some(count as f64),
        "{metrics}"
    );
    assert_eq!(
        metrics["first_cpu"].as_f64(),
        Some(first as f64),
        "{metrics}"
    );
    assert_eq!(metrics["last_cpu"].as_f64(), Some(last as f64), "{metrics}");

    let escaped = by_label("escaped");
    assert_eq!(escaped.status, "invalid", "{:?}", escaped.reason);
    let reason = escaped.reason.as_deref().unwrap();
    assert!(
        reason.contains("cpus: not in force") && reason.contains(&format!(": {load_cpus}")),
        "{reason}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

#[test]
fn quiet_waits_for_a_busy_process_to_end_and_gives_up_at_max_wait() {
    let experiment = |max_wait: &str| {
        format!(
            r#"
name = "quiet"
seed = 1
batches = 1
# The busy loop takes a whole CPU; 30% leaves room for a CI machine's own background.
quiet = {{ other = "30%", max_wait = "{max_wait}" }}

[settings]
app = "rack-hello"
server = "puma"
threads = 1
connections = 1
warmup = "1s"
duration = "1s"
"#
        )
    };
    // A busy process that ends after 3 s: the trial waits for its end.
    let lab = Lab::new("quiet-wait");
    lab.experiment(&experiment("60s"));
    let busy = BusyLoop::start();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        drop(busy);
    });
    let run = lab.run(&[], Duration::from_secs(120));
    stopper.join().unwrap();
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stderr.contains("waiting for a quiet machine"),
        "{run:?}"
    );
    let rows = valid_trials(&lab);
    let quiet = &rows[0].result["quiet"];
    assert_eq!(quiet["quiet"], true, "{quiet}");
    // It waited for the loop (at least until it ended, 3 s in, less a window) and found
    // the machine quiet before max_wait. How long after the loop's end it took depends on
    // the machine's other work: a CI machine was busy above 30% for 30 s more once.
    let waited = num(quiet, "waited_s");
    assert!((1.5..60.0).contains(&waited), "{quiet}\n{}", run.stderr);
    assert!(num(quiet, "other_percent") < 30.0, "{quiet}");
    lab.assert_no_leftovers(Duration::from_secs(2));

    // A busy process that outlasts max_wait: the trial starts anyway and says so.
    let lab = Lab::new("quiet-give-up");
    lab.experiment(&experiment("2s"));
    let busy = BusyLoop::start();
    let run = lab.run(&[], Duration::from_secs(120));
    drop(busy);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(run.stderr.contains("stayed busy for 2s"), "{run:?}");
    let rows = valid_trials(&lab);
    let quiet = &rows[0].result["quiet"];
    assert_eq!(quiet["quiet"], false, "{quiet}");
    assert!((2.0..6.0).contains(&num(quiet, "waited_s")), "{quiet}");
    assert!(num(quiet, "other_percent") >= 30.0, "{quiet}");
    let report = lab.report_json();
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w["kind"] == "not-quiet" && w["message"].as_str().unwrap().contains("0:0")),
        "{warnings:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// Runs the lab's one-trial experiment (`repeat_noisy = repeats`) beside a busy loop, so
/// that every attempt is noisy: the trial is run again `repeats` times and its last attempt
/// stored, valid, saying so. The stored trials.
fn run_beside_a_busy_loop(lab: &Lab, repeats: usize) -> Vec<TrialRow> {
    let busy = BusyLoop::start();
    let run = lab.run(&[], Duration::from_secs(120));
    drop(busy);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(
        run.stderr.matches("was measured in noise").count(),
        repeats,
        "{run:?}"
    );
    let rows = valid_trials(lab);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].result["noisy_attempts"], repeats);
    rows
}

#[test]
fn a_trial_measured_in_noise_is_run_again_and_its_noisy_attempts_are_kept_apart() {
    let lab = Lab::new("repeat-noisy");
    lab.experiment(
        r#"
name = "repeat-noisy"
seed = 1
batches = 1
repeat_noisy = 2

[settings]
app = "rack-hello"
server = "puma"
threads = 1
connections = 1
warmup = "1s"
duration = "2s"
"#,
    );
    // Busy for the whole run: every attempt is noisy, so the trial runs 1 + 2 times and the
    // last attempt is stored (still noisy, and named so).
    run_beside_a_busy_loop(&lab, 2);
    let export = rubyrace(&["export", lab.results().to_str().unwrap(), "--json"]);
    assert_eq!(export.code(), Some(0), "{export:?}");
    let export: Value = serde_json::from_str(&export.stdout).unwrap();
    let attempts = export["noisy_attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let trial_dir = lab.results().join("trials/00000");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["trial_id"], 0);
        assert!(num(&a["noise"], "other_percent") > 10.0, "{a}");
        // Its files moved aside, where the next attempt did not replace them.
        let files: Vec<&str> = a["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(
            files.contains(&format!("noisy-{}/latency.hlog", i + 1).as_str()),
            "{files:?}"
        );
        for f in files {
            assert!(trial_dir.join(f).exists(), "{f}");
        }
    }
    assert!(trial_dir.join("latency.hlog").is_file());
    // The report counts one trial, and says two attempts were set aside.
    let report = lab.report_json();
    let cohort = &report["cohorts"][0];
    assert_eq!(cohort["noise"]["set_aside"], 2, "{cohort}");
    assert_eq!(cohort["noise"]["trials"], 1, "{cohort}");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["kind"] == "noisy-repeated"),
        "{warnings:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(2));
}

/// A script trial has a noise record too, over its runs (each run sampled on its own, the
/// script's process tree counted as its own CPU): a busy process beside it shows up as other
/// processes' CPU, `repeat_noisy` runs the trial again, and the report's noise table has
/// the cohort. Before, a script trial had no noise record: `repeat_noisy` never fired and
/// the report had no noise table for scripts (threads-pipes' quiet rerun of 2026-11-30).
#[test]
fn a_script_trial_records_the_noise_over_its_runs_and_a_noisy_one_is_run_again() {
    let lab = Lab::new("script-noise");
    // About half a second of CPU a run.
    std::fs::write(
        lab.dir.path("").join("spin.rb"),
        "t = Process.clock_gettime(Process::CLOCK_MONOTONIC)\nx = 0\nx += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < 0.5\nputs \"rubyrace-metric spins=#{x}\"\n",
    )
    .unwrap();
    lab.experiment(
        r#"
name = "script-noise"
seed = 1
batches = 1
repeat_noisy = 1

[settings]
workload = "script"
script = "spin.rb"
runs = 2
"#,
    );
    let rows = run_beside_a_busy_loop(&lab, 1);
    let n = &rows[0].result["noise"];
    // Two runs of about 0.5 s each, sampled from their start to their last sample.
    let elapsed = num(n, "elapsed_s");
    assert!((0.6..5.0).contains(&elapsed), "{n}");
    // The script spins on a CPU: its own, not other processes'.
    assert!(num(n, "server_percent") > 50.0, "{n}");
    assert!(num(n, "other_percent") > 25.0, "{n}");
    let report = lab.report_json();
    let noise = &report["cohorts"][0]["noise"];
    assert_eq!(noise["set_aside"], 1, "{noise}");
    assert!(num(noise, "other_cpu_percent") > 25.0, "{noise}");
    let text = rubyrace(&["report", lab.results().to_str().unwrap()]);
    assert!(text.stdout.contains("Machine noise"), "{text:?}");
    lab.assert_no_leftovers(Duration::from_secs(2));
}

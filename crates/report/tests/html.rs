//! The HTML report in a real browser: a realistic report (tests/fixtures/report-http.json:
//! five cohorts of a ruby × yjit experiment, one of them named
//! `<script>alert("x")</script>`, invalid and failed trials, warnings, a 2-axis dot matrix,
//! hostile environment values and commands) is rendered to a file and opened in headless
//! Chromium, which takes a screenshot and dumps the DOM it built, while its log shows every
//! console message. A report with profiles is opened with the DevTools protocol on a pipe,
//! to call the flame graphs' own search and zoom inside their sandboxed frames.
//!
//! Chromium comes from Debian (`scripts/setup` installs it). `RUBYRACE_CHROMIUM` names
//! another binary; a run that takes longer than 90 s (`RUBYRACE_CHROMIUM_TIMEOUT`) is
//! killed, with its whole process group, and fails the test. The page and the screenshot are kept under Cargo's target tmp directory
//! (printed), and copied to `$RUBYRACE_SCREENSHOT` when that is set.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use report::model::Report;

const HOSTILE: &str = "<script>alert(\"x\")</script>";
/// How long one Chromium run may take before it is killed (a cold start takes about a
/// second); `RUBYRACE_CHROMIUM_TIMEOUT` (seconds) changes it.
fn chromium_timeout() -> Duration {
    let secs = std::env::var("RUBYRACE_CHROMIUM_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok());
    Duration::from_secs(secs.unwrap_or(90))
}

fn fixture() -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-http.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh directory under Cargo's target tmp directory, at a stable path so a person can
/// look at what the last run produced.
fn work_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-html-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("RUBYRACE_CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "no Chromium found: run scripts/setup (it installs Debian's `chromium`), or set \
         RUBYRACE_CHROMIUM to a Chromium or Chrome binary"
    );
}

/// How every Chromium of these tests runs: headless, without the sandbox (tests may run
/// as root), first-run dialogs or extensions.
const HEADLESS: [&str; 7] = [
    "--headless=new",
    "--disable-gpu",
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
];

/// What one headless Chromium run left behind.
struct Run {
    stdout: String,
    stderr: String,
}

impl Run {
    /// Console messages of the page: Chromium logs them as `INFO:CONSOLE:LINE] "text",
    /// source: URL (LINE)` with `--enable-logging=stderr`.
    fn console(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .collect()
    }
}

/// Runs headless Chromium on `page` with `action` (`--dump-dom`, `--screenshot=...`) in a
/// process group of its own, killing the whole group if it outlives the timeout.
fn run_chromium(dir: &Path, page: &Path, action: &str) -> Run {
    use std::os::unix::process::CommandExt;
    let tag = action
        .trim_start_matches("--")
        .split('=')
        .next()
        .unwrap()
        .to_string();
    let out_path = dir.join(format!("{tag}.stdout"));
    let err_path = dir.join(format!("{tag}.stderr"));
    let profile = dir.join(format!("{tag}.profile"));
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut child = Command::new(chromium())
        .args(HEADLESS)
        .args([
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1280,3000",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(action)
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .process_group(0)
        .spawn()
        .expect("starting chromium");
    let pgid = child.id();
    let started = Instant::now();
    let timeout = chromium_timeout();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Chromium's helpers (zygote, renderer, GPU) are in the group it leads. On a timeout,
    // end the whole group; after a normal exit, only if members are left (while any is
    // alive, the kernel keeps the group id ours). Only this group, which this test started.
    if status.is_none() || group_alive(pgid) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.wait();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let status = status.unwrap_or_else(|| {
        panic!("chromium {action} did not finish in {timeout:?}; killed it. stderr:\n{stderr}")
    });
    assert!(
        status.success(),
        "chromium {action} exited with {status}; stderr:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&profile);
    Run {
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr,
    }
}

/// Whether any process is in process group `pgid` (field 5 of /proc/PID/stat).
fn group_alive(pgid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let pgid = pgid.to_string();
    entries.flatten().any(|e| {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        // After the ")" that closes the command name: state, ppid, pgrp, ...
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2).map(|g| g == pgid))
            .unwrap_or(false)
    })
}

/// The charts in a DOM: (`data-chart`, number of `data-series` elements) for each
/// `<svg class="chart">`.
fn charts_in(dom: &str) -> Vec<(String, usize)> {
    let mut charts = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("<svg") {
        rest = &rest[i..];
        let tag_end = rest.find('>').unwrap();
        let tag = &rest[..tag_end];
        let body_end = rest.find("</svg>").unwrap();
        let body = &rest[..body_end];
        if tag.contains("class=\"chart\"") {
            let name = tag
                .split("data-chart=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("?")
                .to_string();
            charts.push((name, body.matches(" data-series=\"").count()));
        }
        rest = &rest[body_end..];
    }
    charts
}

#[test]
fn fixture_renders_and_survives_the_browser() {
    let report = fixture();
    assert!(
        report.cohorts.iter().any(|c| c.name == HOSTILE),
        "the fixture has the hostile cohort"
    );
    let matrix = report
        .matrix
        .as_ref()
        .expect("the fixture has a dot matrix");
    assert_eq!((matrix.rows.len(), matrix.cols.len()), (3, 2));

    let html = report::render::html::render(&report);
    assert!(
        !html.contains("<script"),
        "raw <script in the rendered page"
    );
    // Which statistic the ratio is, where the page explains its columns and its table.
    assert_eq!(
        html.matches("the geometric mean of the per-block ratios")
            .count(),
        2,
        "How to read and the comparisons table say which ratio it is"
    );
    assert!(
        !html.contains("cohort ÷ baseline"),
        "the old, wrong wording"
    );

    let dir = work_dir("browser");
    let page = dir.join("report.html");
    std::fs::write(&page, &html).unwrap();

    // The console check must be able to fail: a page that logs an error shows up.
    let probe = dir.join("probe.html");
    std::fs::write(
        &probe,
        "<!DOCTYPE html><title>p</title><script>console.error('rubyrace-probe')</script>",
    )
    .unwrap();
    let probe_run = run_chromium(&dir, &probe, "--dump-dom");
    assert!(
        probe_run.console().iter().any(|l| l.contains("rubyrace-probe")),
        "Chromium's log shows no console messages, so the console check below would prove nothing. stderr:\n{}",
        probe_run.stderr
    );

    // The DOM Chromium built from the page.
    let dom_run = run_chromium(&dir, &page, "--dump-dom");
    let dom = &dom_run.stdout;
    assert!(
        dom.contains("<main>") && dom.contains("</html>"),
        "no DOM dumped: {dom:.500}"
    );
    assert!(
        !dom.to_ascii_lowercase().contains("<script"),
        "a <script> element is in the DOM"
    );
    assert!(
        !dom.to_ascii_lowercase().contains("<img"),
        "an <img> element is in the DOM"
    );
    assert!(
        !dom.contains("<svg onload"),
        "an injected <svg> is in the DOM"
    );
    // The hostile name is text: in the summary table, the warnings and the SVG text.
    let as_text = "&lt;script&gt;alert(\"x\")&lt;/script&gt;";
    assert!(
        dom.matches(as_text).count() >= 5,
        "the hostile cohort name is not shown as text"
    );
    assert!(
        dom.contains(&format!("<th class=\"name\" scope=\"row\">{as_text}")),
        "summary table row"
    );
    assert!(dom.contains(&format!(">{as_text}</text>")), "SVG label");

    let charts = charts_in(dom);
    let expected = [
        ("throughput", 5),
        ("matrix", 5),
        ("latency", 5),
        ("memory", 5),
        ("trial-order", 5),
    ];
    let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        expected.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        "charts in the DOM"
    );
    for ((name, series), (_, want)) in charts.iter().zip(expected) {
        assert_eq!(*series, want, "data-series in the {name} chart");
    }
    // Five summary rows, one per cohort, and every comparison.
    let summary = dom
        .split("id=\"summary\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(
        summary.matches("<th class=\"name\" scope=\"row\">").count(),
        report.cohorts.len()
    );
    assert_eq!(
        dom.matches("<td class=\"verdict ").count(),
        report.comparisons.len() + 1
    );
    assert_eq!(dom.matches("<details>").count(), report.environment.len());

    let console = dom_run.console();
    assert!(console.is_empty(), "console messages: {console:#?}");

    // The screenshot: exists, 1280×3000, and shows more than a blank page.
    let shot = dir.join("screenshot.png");
    let shot_run = run_chromium(&dir, &page, &format!("--screenshot={}", shot.display()));
    assert!(
        shot_run.console().is_empty(),
        "console messages: {:#?}",
        shot_run.console()
    );
    let bytes = std::fs::read(&shot).expect("no screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 100_000,
        "screenshot is only {} bytes",
        bytes.len()
    );
    let pixmap = resvg::tiny_skia::Pixmap::decode_png(&bytes).unwrap();
    assert_eq!((pixmap.width(), pixmap.height()), (1280, 3000));
    let pixels = pixmap.pixels();
    let mut colours: Vec<u32> = pixels
        .iter()
        .map(|p| u32::from_be_bytes([p.red(), p.green(), p.blue(), 0]))
        .collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        colours.len() > 200,
        "only {} colours: blank or unstyled page?",
        colours.len()
    );
    let dark = pixels
        .iter()
        .filter(|p| p.red() < 100 && p.green() < 100 && p.blue() < 100)
        .count();
    assert!(dark > 20_000, "only {dark} dark pixels: no text?");

    if let Some(copy) = std::env::var_os("RUBYRACE_SCREENSHOT") {
        std::fs::copy(&shot, &copy).unwrap();
    }
    println!("report: {}\nscreenshot: {}", page.display(), shot.display());
}

#[test]
fn fixture_charts_export_as_svg_and_png() {
    let report = fixture();
    let dir = work_dir("charts");
    let written =
        report::render::png::export_charts(&report, &dir, |p, b| Ok(std::fs::write(p, b)?))
            .unwrap();
    assert_eq!(written.len(), 10, "{written:?}");
    for path in &written {
        let bytes = std::fs::read(path).unwrap();
        assert!(bytes.len() > 1000, "{}", path.display());
        if path.extension().unwrap() == "svg" {
            let text = String::from_utf8(bytes).unwrap();
            assert!(!text.contains("<script"), "{}", path.display());
        }
    }
    println!("charts: {}", dir.display());
}

/// A report with profiles: the fixture's baseline and one other cohort, each with a small
/// profile (the other one calls `extra_work` too).
fn fixture_with_profiles() -> Report {
    use report::model::CohortProfile;
    let mut report = fixture();
    let base = report.baseline.clone();
    let other = report
        .cohorts
        .iter()
        .map(|c| c.name.clone())
        .find(|n| *n != base)
        .unwrap();
    let profile = |cohort: &str, extra: bool| {
        let mut stacks = std::collections::BTreeMap::new();
        stacks.insert("<main> - app.rb:1;hot_loop - app.rb:5".to_string(), 60u64);
        stacks.insert("<main> - app.rb:1;other - app.rb:9".to_string(), 40);
        if extra {
            stacks.insert("<main> - app.rb:1;extra_work - app.rb:12".to_string(), 30);
        }
        let samples = stacks.values().sum();
        CohortProfile {
            cohort: cohort.to_string(),
            profiler: "rbspy".into(),
            phase: "profiled-phase".into(),
            trials: 3,
            samples,
            rate_hz: 99,
            duration_s: 6.0,
            unit: "request".into(),
            units: 1000,
            sampled_us_per_unit: Some(samples as f64 * 10.0),
            frame_stacks: stacks.clone(),
            stacks,
            ..CohortProfile::default()
        }
    };
    report.profiles = vec![profile(&base, false), profile(&other, true)];
    report
}

/// One Chromium with the DevTools protocol on a pipe (`--remote-debugging-pipe`: it reads
/// commands from fd 3 and writes replies and events to fd 4, each a JSON text ended by a
/// NUL byte), in a process group of its own that is killed when this is dropped.
struct Devtools {
    child: std::process::Child,
    to_browser: std::io::PipeWriter,
    messages: std::sync::mpsc::Receiver<serde_json::Value>,
    next_id: u64,
    /// Events seen while waiting for replies.
    events: Vec<serde_json::Value>,
}

impl Devtools {
    fn open(dir: &Path, url: &str) -> Devtools {
        use std::io::Read as _;
        use std::os::fd::AsRawFd as _;
        use std::os::unix::process::CommandExt;
        let (browser_reads, to_browser) = std::io::pipe().unwrap();
        let (mut from_browser, browser_writes) = std::io::pipe().unwrap();
        let (r, w) = (browser_reads.as_raw_fd(), browser_writes.as_raw_fd());
        let mut command = Command::new(chromium());
        command
            .args(HEADLESS)
            .args([
                "--window-size=1280,1000",
                "--remote-debugging-pipe",
                // The flame graphs' frames in the page's renderer, where one session sees
                // their execution contexts.
                "--disable-site-isolation-trials",
                "--disable-features=IsolateOrigins,site-per-process,IsolateSandboxedIframes",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.join("devtools.profile").display()
            ))
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("devtools.stderr")).unwrap())
            .process_group(0);
        // SAFETY: fcntl and dup2 are async-signal-safe; the fds are open in the parent until
        // spawn. Moved above 4 first, so that neither is 3 or 4 already (dup2 onto itself
        // would keep close-on-exec) nor overwritten by the other.
        unsafe {
            command.pre_exec(move || {
                let high_r = libc::fcntl(r, libc::F_DUPFD, 10);
                let high_w = libc::fcntl(w, libc::F_DUPFD, 10);
                if high_r < 0
                    || high_w < 0
                    || libc::dup2(high_r, 3) < 0
                    || libc::dup2(high_w, 4) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("starting chromium");
        drop((browser_reads, browser_writes));
        let (tx, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = from_browser.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buffer.extend_from_slice(&chunk[..n]);
                while let Some(end) = buffer.iter().position(|&b| b == 0) {
                    let message: Vec<u8> = buffer.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice(&message[..message.len() - 1]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Devtools {
            child,
            to_browser,
            messages,
            next_id: 0,
            events: Vec::new(),
        }
    }

    /// Sends a command (to `session` when given) and waits for its reply's `result`.
    fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: serde_json::Value,
    ) -> serde_json::Value {
        use std::io::Write as _;
        self.next_id += 1;
        let id = self.next_id;
        let mut message = serde_json::json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            message["sessionId"] = s.into();
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.to_browser.write_all(&bytes).unwrap();
        let deadline = Instant::now() + chromium_timeout();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no reply to {method} from chromium"));
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method}: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Collects events for `wait`.
    fn drain(&mut self, wait: Duration) {
        let until = Instant::now() + wait;
        while let Ok(m) = self
            .messages
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            self.events.push(m);
        }
    }
}

impl Drop for Devtools {
    fn drop(&mut self) {
        let pgid = self.child.id();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if group_alive(pgid) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The flame graphs keep their search and zoom inside the report: each is a sandboxed frame
/// whose script (inferno's, allowed by the page's CSP hash) runs, finds a frame and zooms,
/// while the page itself has no script, and nothing is refused or thrown.
#[test]
fn flame_graphs_search_and_zoom_inside_the_report() {
    let report = fixture_with_profiles();
    let dir = work_dir("flames");
    let page = dir.join("report.html");
    std::fs::write(&page, report::render::html::render(&report)).unwrap();
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut devtools = Devtools::open(&dir, &url);
    let targets = devtools.call(None, "Target.getTargets", serde_json::json!({}));
    let target = targets["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "page")
        .expect("a page target")["targetId"]
        .clone();
    let attached = devtools.call(
        None,
        "Target.attachToTarget",
        serde_json::json!({ "targetId": target, "flatten": true }),
    );
    let session = attached["sessionId"].as_str().unwrap().to_string();
    let s = Some(session.as_str());
    devtools.call(s, "Runtime.enable", serde_json::json!({}));
    let deadline = Instant::now() + chromium_timeout();
    loop {
        let state = devtools.call(
            s,
            "Runtime.evaluate",
            serde_json::json!({ "expression": "location.protocol + ' ' + document.readyState",
                                "returnByValue": true }),
        );
        if state["result"]["value"] == "file: complete" {
            break;
        }
        assert!(Instant::now() < deadline, "the page did not load: {state}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Offscreen frames load lazily: load them all.
    let main = devtools.call(
        s,
        "Runtime.evaluate",
        serde_json::json!({ "expression":
            "document.querySelectorAll('iframe').forEach(f => f.loading = 'eager'); \
             [document.querySelectorAll('iframe').length, typeof init]",
            "returnByValue": true }),
    );
    assert_eq!(
        main["result"]["value"],
        serde_json::json!([3, "undefined"]),
        "three flame graphs (two cohorts, one diff); the page has no script: {main}"
    );
    devtools.drain(Duration::from_secs(3));
    // Each frame's live default context: a frame's document may be replaced once (its
    // first, empty document, then the srcdoc), which destroys the first context.
    let mut live: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for e in &devtools.events {
        if e["method"] == "Runtime.executionContextCreated" {
            let c = &e["params"]["context"];
            if c["auxData"]["isDefault"] == true
                && c["origin"] != "file://"
                && c["auxData"]["frameId"] != target
            {
                let frame = c["auxData"]["frameId"].as_str().unwrap().to_string();
                live.insert(frame, c["id"].as_i64().unwrap());
            }
        } else if e["method"] == "Runtime.executionContextDestroyed" {
            let id = e["params"]["executionContextId"].as_i64();
            live.retain(|_, c| Some(*c) != id);
        }
    }
    let frames: Vec<i64> = live.into_values().collect();
    assert_eq!(frames.len(), 3, "{:?}", devtools.events);
    for context in frames {
        let r = devtools.call(
            s,
            "Runtime.evaluate",
            serde_json::json!({ "contextId": context, "returnByValue": true, "expression":
                "(function () { try { \
                   var title = document.getElementById('title').textContent; \
                   search('hot_loop'); \
                   var matched = document.getElementById('matched').textContent; \
                   var frame = Array.from(document.querySelectorAll('#frames > g')) \
                     .find(function (g) { return g.textContent.indexOf('hot_loop') >= 0; }); \
                   zoom(frame); \
                   return [title, matched, document.querySelectorAll('#frames > g.hide').length]; \
                 } catch (e) { return ['error', String(e), 0]; } })()" }),
        );
        let v = &r["result"]["value"];
        assert_ne!(v[0], "error", "{v}");
        assert!(
            v[1].as_str().unwrap().starts_with("Matched: "),
            "search: {v}"
        );
        assert!(v[2].as_i64().unwrap() > 0, "zoom hid nothing: {v}");
    }
    let thrown: Vec<&serde_json::Value> = devtools
        .events
        .iter()
        .filter(|e| e["method"] == "Runtime.exceptionThrown")
        .collect();
    assert!(thrown.is_empty(), "{thrown:?}");
    drop(devtools);
    let stderr = std::fs::read_to_string(dir.join("devtools.stderr")).unwrap_or_default();
    let refused: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Content Security Policy") || l.contains("violates"))
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
}

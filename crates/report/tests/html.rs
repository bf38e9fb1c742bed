//! The HTML report in a real browser: a realistic report (tests/fixtures/report-http.json:
//! five cohorts of a ruby × yjit experiment, one of them named
//! `<script>alert("x")</script>`, invalid and failed trials, warnings, a 2-axis dot matrix,
//! hostile environment values and commands) is rendered to a file and opened in headless
//! Chromium, which takes a screenshot and dumps the DOM it built, while its log shows every
//! console message.
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
        .args([
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
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

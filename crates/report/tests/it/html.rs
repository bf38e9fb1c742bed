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
//! killed, with its whole process group, and fails the test. The page and the screenshot are
//! kept under Cargo's target tmp directory (printed), and copied to `$RUBYRACE_SCREENSHOT`
//! when that is set. The harness is in `browser/`, shared with `html_escaping`.

use std::time::Duration;

use crate::browser::*;

const HOSTILE: &str = "<script>alert(\"x\")</script>";

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
    let (session, _) = devtools.attach_to_page();
    let s = Some(session.as_str());
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
    let frames = devtools.frame_contexts();
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

//! Every string of a report that comes from the user's files or the machine, made hostile,
//! rendered to HTML and opened in headless Chromium: no script runs, every string shows
//! as written, and the page logs no error.
//!
//! Each string is [`hostile`]`(tag)`: a `<script>`, an `<img onerror>` and an `<svg onload>`
//! that would each set `window.__pwned` to the tag, quotes of both kinds, an already
//! escaped `&amp;` and a `<b>`. The page is opened twice: as rendered, and with its
//! Content-Security-Policy taken out, so that what is checked is the escaping itself and not
//! the policy behind it (with the policy, an injected script would be refused, not run).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::browser::*;
use report::model::{
    CohortNoise, CohortStep, FrameChange, FrameTime, Report, SparseFrames, VerifiedSetting, Warning,
};

/// A string that is markup if anything forgets to escape it; `tag` says which string it is.
fn hostile(tag: &str) -> String {
    format!(
        "{tag}<script>window.__pwned='{tag}'</script>\"'&amp;<b>x</b>\
         <img src=x onerror=\"window.__pwned='{tag}'\"><svg onload=\"window.__pwned='{tag}'\">"
    )
}

/// A hostile frame in a folded stack, where `;` separates frames: without the `;` of
/// `&amp;` (and `&amp` alone is still a character reference to an HTML parser).
fn stack_frame() -> String {
    hostile("stack-frame").replace(';', "")
}

/// The fixture with profiles, with every string that comes from the user or the machine
/// replaced by a hostile one. Returns the report and the tags of the strings the page must
/// show as text (the others are in the charts, checked apart).
fn hostile_report() -> (Report, Vec<&'static str>) {
    let mut report = fixture_with_profiles();
    // Cohort names are labels: renamed everywhere they are used (cohorts, comparisons,
    // trials, warnings, environment, overhead, the matrix, profiles).
    let baseline = report.baseline.clone();
    let other = report.profiles[1].cohort.clone();
    let mut text = serde_json::to_string(&report).unwrap();
    for (name, tag) in [(&baseline, "baseline-label"), (&other, "label")] {
        text = text.replace(
            &serde_json::to_string(name).unwrap(),
            &serde_json::to_string(&hostile(tag)).unwrap(),
        );
    }
    let mut renamed: Report = serde_json::from_str(&text).unwrap();
    // Stacks are not in the JSON: the profiles as the fixture had them, renamed.
    for (p, old) in renamed.profiles.iter_mut().zip(&report.profiles) {
        p.stacks = old.stacks.clone();
        p.frame_stacks = old.frame_stacks.clone();
    }
    report = renamed;
    let base = hostile("baseline-label");
    let label = hostile("label");

    report.command = format!("rubyrace report results --label {}", hostile("command"));
    report.group_by[1] = hostile("group-key");
    let source = &mut report.sources[0];
    source.dir = format!("results/{}", hostile("results-dir"));
    source.experiment = hostile("experiment");
    source.design = hostile("design");
    source.created_at = hostile("created-at");
    source.machines = vec![hostile("machine")];
    source.commands = vec![format!("rubyrace run {}", hostile("argv"))];
    source.doctor = vec![doctor::Report {
        schema: doctor::SCHEMA.into(),
        checked_at: hostile("doctor-time"),
        findings: vec![doctor::Finding {
            name: hostile("doctor-check"),
            status: doctor::Status::Warn,
            value: hostile("doctor-value"),
            advice: hostile("doctor-advice"),
        }],
        failed_checks: vec![],
    }];

    let cohort = report.cohorts.iter_mut().find(|c| c.name == label).unwrap();
    cohort.key.insert(hostile("key-name"), hostile("key-value"));
    cohort.outliers = vec![hostile("outlier")];
    cohort.verified = vec![VerifiedSetting {
        setting: hostile("setting"),
        expected: hostile("expected"),
        verified: 3,
        checked: 3,
        observed: hostile("observed"),
    }];
    cohort.noise = Some(CohortNoise {
        trials: 10,
        cpus: Some(hostile("cpus")),
        ..CohortNoise::default()
    });

    report.warnings.push(Warning {
        kind: hostile("warning-kind"),
        cohort: Some(label.clone()),
        message: hostile("warning"),
    });
    let env = report
        .environment
        .iter_mut()
        .find(|e| e.cohort == label)
        .unwrap();
    env.values.insert(
        "app".into(),
        vec![format!("/srv/{}/config.ru", hostile("app-path"))],
    );
    env.values
        .insert(hostile("env-key"), vec![hostile("env-value")]);
    let comparison = report
        .comparisons
        .iter_mut()
        .find(|c| c.cohort == label)
        .unwrap();
    comparison.test = hostile("test");
    comparison.verdict = hostile("verdict");
    report.overhead.as_mut().unwrap().method = hostile("overhead-method");

    let matrix = report.matrix.as_mut().unwrap();
    matrix.row_key = hostile("row-key");
    matrix.col_key = hostile("col-key");
    matrix.rows[0] = hostile("row");
    matrix.cols[0] = hostile("col");
    matrix.unit = hostile("unit");

    report.steps = vec![CohortStep {
        cohort: label.clone(),
        scenario: hostile("scenario"),
        step: hostile("step"),
        trials: 3,
        requests: 300,
        failures: 1,
        p50_us: Some(900.0),
        p99_us: Some(4000.0),
    }];

    // Profiles: the profiler's name, frame names in the stacks, the top frames and the
    // frame tables, the trials without a profile, the advice on sparse frames.
    let frame = |tag: &str| format!("{} - /srv/app/lib/app.rb", hostile(tag));
    for p in &mut report.profiles {
        p.profiler = hostile("profiler");
        let rename = |stacks: &BTreeMap<String, u64>| {
            stacks
                .iter()
                .map(|(s, n)| (s.replace("hot_loop - app.rb:5", &stack_frame()), *n))
                .collect()
        };
        p.stacks = rename(&p.stacks);
        p.frame_stacks = rename(&p.frame_stacks);
        p.top_self = vec![FrameTime {
            frame: frame("top-frame"),
            self_share: 0.46,
            self_us_per_unit: 300.0,
            total_us_per_unit: 300.0,
        }];
        p.missing = vec![hostile("missing")];
    }
    report.frame_changes = vec![FrameChange {
        cohort: label.clone(),
        baseline: base.clone(),
        profiler: hostile("profiler"),
        measure: "self".into(),
        frame: frame("changed-frame"),
        baseline_us_per_unit: 300.0,
        cohort_us_per_unit: 420.0,
        ratio: 1.4,
        ci_low: 1.2,
        ci_high: 1.6,
        method: hostile("frame-method"),
        n: 3,
        test: "t-test".into(),
        p_value: Some(0.01),
        p_adjusted: Some(0.02),
        family_size: 2,
        significant: true,
        verdict: hostile("frame-verdict"),
    }];
    report.sparse_frames = vec![SparseFrames {
        cohort: label.clone(),
        baseline: base.clone(),
        profiler: hostile("profiler"),
        advice: hostile("advice"),
        ..SparseFrames::default()
    }];

    let shown = vec![
        "baseline-label",
        "label",
        "command",
        "group-key",
        "results-dir",
        "experiment",
        "design",
        "created-at",
        "machine",
        "argv",
        "doctor-time",
        "doctor-check",
        "doctor-value",
        "doctor-advice",
        "key-name",
        "key-value",
        "outlier",
        "setting",
        "expected",
        "cpus",
        "warning-kind",
        "warning",
        "app-path",
        "env-key",
        "env-value",
        "test",
        "verdict",
        "overhead-method",
        "scenario",
        "step",
        "profiler",
        "top-frame",
        "changed-frame",
        "frame-method",
        "frame-verdict",
        "advice",
    ];
    (report, shown)
}

/// What the page says about itself, from inside: whether anything set `window.__pwned`,
/// the elements no report of ours has, its title, its visible text (every `<details>`
/// opened), the text of its charts and the values of its `title` attributes.
const PAGE_PROBE: &str = "(function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var handlers = 0;
  document.querySelectorAll('*').forEach(function (e) {
    for (var i = 0; i < e.attributes.length; i++) {
      if (e.attributes[i].name.indexOf('on') === 0) { handlers++; }
    }
  });
  return {
    pwned: typeof window.__pwned === 'undefined' ? null : String(window.__pwned),
    scripts: document.querySelectorAll('script').length,
    injected: document.querySelectorAll('img, svg:not(.chart), iframe[onload]').length +
      Array.from(document.querySelectorAll('b')).filter(function (b) {
        return b.textContent === 'x'; }).length,
    handlers: handlers,
    title: document.title,
    text: document.body.innerText,
    charts: Array.from(document.querySelectorAll('svg.chart')).map(function (s) {
      return s.textContent; }).join('\\n'),
    titles: Array.from(document.querySelectorAll('[title]')).map(function (e) {
      return e.getAttribute('title'); }).join('\\n')
  };
})()";

/// The same from inside a flame graph's frame: inferno's one script (and its root's
/// `onload`) may run there, and nothing else.
const FRAME_PROBE: &str = "(function () {
  return {
    pwned: typeof window.__pwned === 'undefined' ? null : String(window.__pwned),
    scripts: document.querySelectorAll('script').length,
    onload: document.querySelectorAll('[onload]').length,
    injected: document.querySelectorAll('img').length +
      Array.from(document.querySelectorAll('b')).filter(function (b) {
        return b.textContent === 'x'; }).length,
    text: document.documentElement.textContent
  };
})()";

/// Opens `page` and checks it; `what` names the variant in messages.
fn check_page(dir: &std::path::Path, page: &std::path::Path, shown: &[&str], what: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut devtools = Devtools::open(dir, &url);
    let (session, _) = devtools.attach_to_page();
    // Time for the flame graphs' frames to load and for any injected handler to fire.
    devtools.drain(Duration::from_secs(3));
    let v = devtools.eval(&session, None, PAGE_PROBE);

    assert_eq!(v["pwned"], serde_json::Value::Null, "{what}: a script ran");
    assert_eq!(v["scripts"], 0, "{what}: <script> elements in the page");
    assert_eq!(v["injected"], 0, "{what}: injected elements in the page");
    assert_eq!(
        v["handlers"], 0,
        "{what}: event handler attributes in the page"
    );
    assert_eq!(
        v["title"],
        format!("rubyrace report: {}", hostile("experiment")),
        "{what}: <title>"
    );
    let text = v["text"].as_str().unwrap();
    let missing: Vec<&&str> = shown
        .iter()
        .filter(|tag| !text.contains(&hostile(tag)))
        .collect();
    assert!(
        missing.is_empty(),
        "{what}: not shown as written: {missing:?}\n{text}"
    );
    // The charts clip long labels, and give the whole in a tooltip or their description.
    let charts = v["charts"].as_str().unwrap();
    for tag in [
        "label",
        "baseline-label",
        "row-key",
        "col-key",
        "row",
        "col",
        "unit",
    ] {
        assert!(
            charts.contains(&hostile(tag)),
            "{what}: {tag} not in the charts' text"
        );
    }
    let titles = v["titles"].as_str().unwrap();
    for tag in ["changed-frame", "top-frame", "missing"] {
        assert!(
            titles.contains(&hostile(tag)),
            "{what}: {tag} not in a title attribute"
        );
    }

    let frames = devtools.frame_contexts();
    assert_eq!(frames.len(), 3, "{what}: three flame graphs");
    for context in frames {
        let f = devtools.eval(&session, Some(context), FRAME_PROBE);
        assert_eq!(
            f["pwned"],
            serde_json::Value::Null,
            "{what}: a script ran in a flame graph"
        );
        assert_eq!(f["scripts"], 1, "{what}: only inferno's script in a frame");
        assert_eq!(f["onload"], 1, "{what}: only inferno's onload in a frame");
        assert_eq!(
            f["injected"], 0,
            "{what}: injected elements in a flame graph"
        );
        let text = f["text"].as_str().unwrap();
        assert!(
            text.contains(&stack_frame()) && text.contains(&hostile("profiler")),
            "{what}: a flame graph does not show its frame and title as written"
        );
    }
    let errors: Vec<String> = devtools.errors().iter().map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}");
}

#[test]
fn every_user_string_shows_as_written_and_runs_nothing() {
    let (report, shown) = hostile_report();
    let html = report::render::html::render(&report);
    let dir = work_dir("escaping");
    let page = dir.join("report.html");
    std::fs::write(&page, &html).unwrap();

    // The Content-Security-Policy out: an escaping bug would now run its script.
    let start = html
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let end = start + html[start..].find('>').unwrap() + 1;
    let open_page = dir.join("report-without-csp.html");
    std::fs::write(&open_page, format!("{}{}", &html[..start], &html[end..])).unwrap();

    check_page(&dir.join("with-csp"), &page, &shown, "with its CSP");
    check_page(
        &dir.join("without-csp"),
        &open_page,
        &shown,
        "without a CSP",
    );
    println!("pages: {}", dir.display());
}

/// The check above can fail: the same page with one string not escaped runs its script
/// (without the CSP) and does not show the string as written.
#[test]
fn an_unescaped_string_is_caught() {
    let (report, shown) = hostile_report();
    let html = report::render::html::render(&report);
    let escaped = "warning&lt;script&gt;window.__pwned='warning'&lt;/script&gt;";
    assert!(html.contains(escaped), "the warning, escaped, in the page");
    let broken = html.replacen(
        &format!("{escaped}&quot;'&amp;amp;&lt;b&gt;x&lt;/b&gt;&lt;img src=x onerror=&quot;window.__pwned='warning'&quot;&gt;&lt;svg onload=&quot;window.__pwned='warning'&quot;&gt;"),
        &hostile("warning"),
        1,
    );
    assert_ne!(broken, html, "the warning was found and left unescaped");
    let start = broken
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let end = start + broken[start..].find('>').unwrap() + 1;
    let dir = work_dir("escaping-broken");
    let page = dir.join("report.html");
    std::fs::write(&page, format!("{}{}", &broken[..start], &broken[end..])).unwrap();
    let failed = std::panic::catch_unwind(|| check_page(&dir, &page, &shown, "broken"));
    let message = failed.expect_err("the check passed a page with an unescaped string");
    let message = message
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("a script ran"), "{message}");
}

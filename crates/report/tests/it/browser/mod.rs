//! What the browser tests share: the fixture reports, a headless Chromium run in a
//! process group of its own (`run_chromium`), and one with the DevTools protocol on a pipe
//! (`Devtools`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use report::model::Report;

/// How long one Chromium run may take before it is killed (a cold start takes about a
/// second); `RUBYRACE_CHROMIUM_TIMEOUT` (seconds) changes it.
pub fn chromium_timeout() -> Duration {
    let secs = std::env::var("RUBYRACE_CHROMIUM_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok());
    Duration::from_secs(secs.unwrap_or(90))
}

pub fn fixture() -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report-http.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh directory under Cargo's target tmp directory, at a stable path so a person can
/// look at what the last run produced.
pub fn work_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-html-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn chromium() -> PathBuf {
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
pub const HEADLESS: [&str; 7] = [
    "--headless=new",
    "--disable-gpu",
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
];

/// What one headless Chromium run left behind.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Console messages of the page: Chromium logs them as `INFO:CONSOLE:LINE] "text",
    /// source: URL (LINE)` with `--enable-logging=stderr`.
    pub fn console(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .collect()
    }
}

/// Runs headless Chromium on `page` with `action` (`--dump-dom`, `--screenshot=...`) in a
/// process group of its own, killing the whole group if it outlives the timeout.
pub fn run_chromium(dir: &Path, page: &Path, action: &str) -> Run {
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
pub fn group_alive(pgid: u32) -> bool {
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

/// A report with profiles: the fixture's baseline and one other cohort, each with a small
/// profile (the other one calls `extra_work` too).
pub fn fixture_with_profiles() -> Report {
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
pub struct Devtools {
    child: std::process::Child,
    to_browser: std::io::PipeWriter,
    messages: std::sync::mpsc::Receiver<serde_json::Value>,
    next_id: u64,
    /// Events seen while waiting for replies.
    pub events: Vec<serde_json::Value>,
    /// The page's frame id, once attached.
    page: Option<serde_json::Value>,
}

impl Devtools {
    pub fn open(dir: &Path, url: &str) -> Devtools {
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
            page: None,
        }
    }

    /// Sends a command (to `session` when given) and waits for its reply's `result`.
    pub fn call(
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
    pub fn drain(&mut self, wait: Duration) {
        let until = Instant::now() + wait;
        while let Ok(m) = self
            .messages
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            self.events.push(m);
        }
    }
}

impl Devtools {
    /// Attaches to the page, enables its runtime and log, and waits until it has loaded;
    /// returns the session and remembers the page's frame id (for [`Devtools::frame_contexts`]).
    pub fn attach_to_page(&mut self) -> (String, serde_json::Value) {
        let targets = self.call(None, "Target.getTargets", serde_json::json!({}));
        let target = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .expect("a page target")["targetId"]
            .clone();
        let attached = self.call(
            None,
            "Target.attachToTarget",
            serde_json::json!({ "targetId": target, "flatten": true }),
        );
        let session = attached["sessionId"].as_str().unwrap().to_string();
        let s = Some(session.as_str());
        self.call(s, "Runtime.enable", serde_json::json!({}));
        self.call(s, "Log.enable", serde_json::json!({}));
        let deadline = Instant::now() + chromium_timeout();
        loop {
            let state = self.call(
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
        self.page = Some(target.clone());
        (session, target)
    }

    /// The value of `expression` evaluated in `context` (None: the page's own).
    pub fn eval(
        &mut self,
        session: &str,
        context: Option<i64>,
        expression: &str,
    ) -> serde_json::Value {
        let mut params = serde_json::json!({ "expression": expression, "returnByValue": true });
        if let Some(c) = context {
            params["contextId"] = c.into();
        }
        let r = self.call(Some(session), "Runtime.evaluate", params);
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// The live default execution context of each frame in the page (not the page's own),
    /// from the events seen so far: a frame's document may be replaced once (its first,
    /// empty document, then the srcdoc), which destroys the first context.
    pub fn frame_contexts(&self) -> Vec<i64> {
        let page = self.page.clone().expect("attach_to_page first");
        let mut live: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
        for e in &self.events {
            if e["method"] == "Runtime.executionContextCreated" {
                let c = &e["params"]["context"];
                if c["auxData"]["isDefault"] == true
                    && c["origin"] != "file://"
                    && c["auxData"]["frameId"] != page
                {
                    let frame = c["auxData"]["frameId"].as_str().unwrap().to_string();
                    live.insert(frame, c["id"].as_i64().unwrap());
                }
            } else if e["method"] == "Runtime.executionContextDestroyed" {
                let id = e["params"]["executionContextId"].as_i64();
                live.retain(|_, c| Some(*c) != id);
            }
        }
        live.into_values().collect()
    }

    /// The page's errors and warnings so far: exceptions thrown, `console.error` and
    /// `console.warn` calls, and the browser's own log entries (a refused script, a resource
    /// blocked by the Content-Security-Policy).
    pub fn errors(&self) -> Vec<&serde_json::Value> {
        self.events
            .iter()
            .filter(|e| {
                let p = &e["params"];
                e["method"] == "Runtime.exceptionThrown"
                    || (e["method"] == "Runtime.consoleAPICalled"
                        && (p["type"] == "error" || p["type"] == "warning"))
                    || (e["method"] == "Log.entryAdded"
                        && (p["entry"]["level"] == "error" || p["entry"]["level"] == "warning"))
            })
            .collect()
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

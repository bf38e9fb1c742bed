//! Real servers, real apps: each server kind starts from the argv and environment that
//! `experiment::servers::server_command` builds, with Debian's Ruby, in a process group
//! supervised by `sys::process` as a trial's server is; it must answer `GET /` with the
//! app's page, and on SIGTERM to its group its first process must end within 5 s with no
//! worker left behind.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use experiment::servers::{server_command, ServerKind, ServerLaunch};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use sys::process::{proc_stat, Launch, Supervised};
use tempfile::TempDir;
use testkit::free_port;

/// The Ruby of these tests: Debian's, where scripts/setup installs the servers.
const SYSTEM_RUBY: &str = "/usr/bin/ruby";

/// The repository's bundled apps.
fn apps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ruby/apps")
}

/// One `GET /` with the given Host header; the whole response, if any.
fn get(port: u16, host: &str) -> Option<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    (!out.is_empty()).then(|| String::from_utf8_lossy(&out).into_owned())
}

fn status_line(response: &str) -> &str {
    response.lines().next().unwrap_or("")
}

/// The Host header the apps accept (rails-hello allows only loopback names).
fn host(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// The live (not zombie) processes of process group `pgid`, from /proc.
fn live_group_members(pgid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter_map(proc_stat)
        .filter(|s| s.pgid == pgid && s.state != 'Z')
        .map(|s| s.pid)
        .collect()
}

/// A server answering 200 on `port`; its group is killed when `server` is dropped.
struct Running {
    server: Supervised,
    port: u16,
}

impl Running {
    fn log(&self) -> String {
        std::fs::read_to_string(self.server.stderr_path()).unwrap_or_default()
            + &std::fs::read_to_string(self.server.stdout_path()).unwrap_or_default()
    }
}

/// Starts `kind` serving the bundled `app` and waits until GET / answers 200. Retries on a
/// fresh port when the server exits early (the port may have been taken between picking
/// and binding).
fn start(
    kind: ServerKind,
    app: &str,
    processes: u32,
    threads: u32,
    custom_argv: &[&str],
    scratch: &TempDir,
) -> Running {
    let app_dir = apps_dir().join(app);
    assert!(
        app_dir.join("config.ru").is_file(),
        "{} has no config.ru",
        app_dir.display()
    );
    assert!(
        Path::new(SYSTEM_RUBY).exists(),
        "{SYSTEM_RUBY} is required by this test; run scripts/setup"
    );
    let ruby = vec![SYSTEM_RUBY.to_string()];
    let custom_argv: Vec<String> = custom_argv.iter().map(|s| s.to_string()).collect();
    let registry = scratch.path().join("live");
    std::fs::create_dir_all(&registry).unwrap();
    let mut last_log = String::new();
    for attempt in 0..3 {
        let port = free_port();
        let cmd = server_command(&ServerLaunch {
            kind,
            ruby: &ruby,
            app_dir: &app_dir,
            host: std::net::Ipv4Addr::LOCALHOST.into(),
            port,
            processes,
            threads,
            scratch_dir: scratch.path(),
            custom_argv: &custom_argv,
            environment: "production",
            bundle_exec: false,
            tls: None,
            preload: false,
        })
        .unwrap();
        let launch = Launch {
            argv: cmd.argv.clone(),
            env: cmd.env.clone(),
            cwd: cmd.cwd.clone(),
            cpus: None,
        };
        let server = Supervised::spawn(
            &launch,
            scratch.path(),
            &format!("server-{attempt}"),
            &registry,
        )
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.argv));
        let mut running = Running { server, port };
        let started = Instant::now();
        let mut exited = false;
        while started.elapsed() < Duration::from_secs(60) {
            if running.server.exited().is_some() {
                exited = true;
                break;
            }
            if let Some(response) = get(port, &host(port)) {
                if status_line(&response).starts_with("HTTP/1.1 200") {
                    return running;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        last_log = running.log();
        let argv = cmd.argv.join(" ");
        running.server.stop(Duration::from_secs(5));
        if !exited {
            panic!("{argv}\ndid not answer 200 within 60 s; its log:\n{last_log}");
        }
    }
    panic!("{kind} with {app} exited before answering, 3 times; last log:\n{last_log}");
}

/// Starts the server, checks GET / (status and body), sends SIGTERM to its group and checks
/// that the whole group is gone within 5 s.
fn serve(kind: ServerKind, app: &str, processes: u32, threads: u32) {
    serve_custom(kind, app, processes, threads, &[]);
}

fn serve_custom(kind: ServerKind, app: &str, processes: u32, threads: u32, custom_argv: &[&str]) {
    let scratch = tempfile::Builder::new()
        .prefix(&format!("{kind}-{app}"))
        .tempdir()
        .unwrap();
    let mut running = start(kind, app, processes, threads, custom_argv, &scratch);
    let response = get(running.port, &host(running.port)).expect("no response");
    assert!(
        status_line(&response).starts_with("HTTP/1.1 200"),
        "{response}\nlog:\n{}",
        running.log()
    );
    assert!(response.contains("Hello, world!"), "{response}");
    if app == "rails-hello" {
        // Host authorization is on: a name other than the loopback ones is refused.
        let refused = get(running.port, "example.com").expect("no response");
        assert!(
            status_line(&refused).starts_with("HTTP/1.1 403"),
            "{refused}"
        );
    }

    // SIGTERM alone, to the group (ours: its id is the pid of the process we started), must
    // stop it: the supervisor's own stop would KILL what is left after the first process,
    // and hide a worker that outlives its master.
    let pgid = running.server.pid();
    let stopping = Instant::now();
    killpg(Pid::from_raw(pgid), Signal::SIGTERM).unwrap();
    let leader_exited = running
        .server
        .wait_for_exit(Duration::from_secs(5))
        .is_some();
    let stopped_in = stopping.elapsed();
    // Workers must be gone with the master: give them the moment the master's own exit
    // took to reach them.
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut survivors = live_group_members(pgid);
    while !survivors.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        survivors = live_group_members(pgid);
    }
    // Cleans up whatever is left, after a failure too.
    running.server.stop(Duration::from_secs(1));
    assert!(
        leader_exited,
        "{kind} did not exit within 5 s of SIGTERM; log:\n{}",
        running.log()
    );
    assert!(
        survivors.is_empty(),
        "{kind}: {survivors:?} of the group survived the master"
    );
    eprintln!("{kind} + {app}: stopped {stopped_in:?} after SIGTERM");
}

#[test]
fn puma_serves_rack_hello() {
    serve(ServerKind::Puma, "rack-hello", 2, 2);
}

#[test]
fn puma_serves_sinatra_hello() {
    serve(ServerKind::Puma, "sinatra-hello", 1, 2);
}

#[test]
fn puma_serves_rails_hello() {
    serve(ServerKind::Puma, "rails-hello", 2, 2);
}

#[test]
fn unicorn_serves_rack_hello() {
    serve(ServerKind::Unicorn, "rack-hello", 2, 1);
}

#[test]
fn unicorn_serves_sinatra_hello() {
    serve(ServerKind::Unicorn, "sinatra-hello", 2, 1);
}

#[test]
fn unicorn_serves_rails_hello() {
    serve(ServerKind::Unicorn, "rails-hello", 1, 1);
}

#[test]
fn thin_serves_rack_hello() {
    serve(ServerKind::Thin, "rack-hello", 1, 1);
}

#[test]
fn thin_serves_sinatra_hello() {
    serve(ServerKind::Thin, "sinatra-hello", 1, 4);
}

#[test]
fn thin_serves_rails_hello() {
    serve(ServerKind::Thin, "rails-hello", 1, 2);
}

#[test]
fn webrick_serves_rack_hello() {
    serve(ServerKind::Webrick, "rack-hello", 1, 1);
}

#[test]
fn webrick_serves_sinatra_hello() {
    serve(ServerKind::Webrick, "sinatra-hello", 1, 1);
}

#[test]
fn webrick_serves_rails_hello() {
    serve(ServerKind::Webrick, "rails-hello", 1, 1);
}

#[test]
fn custom_serves_rack_hello() {
    serve_custom(
        ServerKind::Custom,
        "rack-hello",
        2,
        2,
        &[
            "{ruby}",
            "-S",
            "puma",
            "--no-config",
            "-b",
            "tcp://127.0.0.1:{port}",
            "-w",
            "{processes}",
            "-t",
            "{threads}:{threads}",
            "{app}/config.ru",
        ],
    );
}

//! A real Puma (the Debian package) serving a bundled app in its own process group, killed
//! by its pgid when dropped; and finding the workspace and programs.

#![allow(dead_code, unused_imports)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::files::TempDir;
use super::http_server::closed_port;

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Finds an executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// A Puma server in its own process group; the whole group is terminated on drop.
pub struct Puma {
    child: Option<Child>,
    pgid: i32,
    pub port: u16,
    log: PathBuf,
    _dir: Option<TempDir>,
}

/// Sends one `GET /` and returns the status line, if any.
fn probe(port: u16) -> Option<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    text.lines().next().map(str::to_string)
}

impl Puma {
    /// Starts `puma -b tcp://127.0.0.1:PORT -t 1:4 -w 0 CONFIG_RU` on a free port and waits
    /// until it answers 200. Fails the test (never skips) when puma is not on PATH.
    pub fn start(config_ru: &Path) -> Puma {
        Puma::start_bound(config_ru, |port| format!("tcp://127.0.0.1:{port}"), false)
    }

    /// [`Puma::start`] serving HTTPS with this certificate and key (`ssl://` bind); ready
    /// once its port accepts connections.
    pub fn start_ssl(config_ru: &Path, cert: &Path, key: &Path) -> Puma {
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        Puma::start_bound(
            config_ru,
            |port| format!("ssl://127.0.0.1:{port}?key={key}&cert={cert}&verify_mode=none"),
            true,
        )
    }

    fn start_bound(config_ru: &Path, bind: impl Fn(u16) -> String, ssl: bool) -> Puma {
        let puma = which("puma").unwrap_or_else(|| {
            panic!(
                "`puma` is not on PATH ({:?}); it is required by this test. \
                 Run scripts/setup (it installs the Debian packages ruby, puma and ruby-rack).",
                std::env::var("PATH").unwrap_or_default()
            )
        });
        assert!(
            config_ru.is_file(),
            "{} does not exist",
            config_ru.display()
        );
        let dir = TempDir::new("puma");
        let mut last_log = String::new();
        for attempt in 0..5 {
            let port = closed_port();
            let log = dir.path(&format!("puma-{attempt}.log"));
            let log_file = std::fs::File::create(&log).unwrap();
            let child = Command::new(&puma)
                .args(["-b", &bind(port), "-t", "1:4", "-w", "0"])
                .arg(config_ru)
                .current_dir(config_ru.parent().unwrap())
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file)
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", puma.display()));
            let pgid = child.id() as i32;
            let mut guard = Puma {
                child: Some(child),
                pgid,
                port,
                log: log.clone(),
                _dir: None,
            };
            let started = Instant::now();
            let mut exited = false;
            while started.elapsed() < Duration::from_secs(30) {
                if exited_unreaped(pgid) {
                    exited = true;
                    break;
                }
                if ssl {
                    let addr = SocketAddr::from(([127, 0, 0, 1], port));
                    if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                        guard._dir = Some(dir);
                        return guard;
                    }
                } else if let Some(line) = probe(port) {
                    if line.starts_with("HTTP/1.1 200") || line.starts_with("HTTP/1.0 200") {
                        guard._dir = Some(dir);
                        return guard;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            last_log = std::fs::read_to_string(&log).unwrap_or_default();
            drop(guard); // terminates the group
            if !exited {
                panic!("puma on port {port} did not answer 200 within 30 s; its log:\n{last_log}");
            }
            // Exited early: most likely the port was taken in the meantime. Retry.
        }
        panic!("puma failed to start 5 times; last log:\n{last_log}");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Puma {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Only our own child's process group is signalled (pgid == its pid, set by
        // process_group(0)), never anything found by name. The leader is not reaped before
        // the final SIGKILL, so its pid (and so the group id) cannot have been reused.
        // SAFETY: plain kill(2) on our child's process group.
        unsafe { libc::kill(-self.pgid, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) && !exited_unreaped(self.pgid) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above; whatever of the group survived the grace period is killed.
        unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        let _ = child.wait();
    }
}

/// Has the child `pid` exited? Leaves it a zombie (WNOWAIT) so its pid stays reserved.
fn exited_unreaped(pid: i32) -> bool {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid(2).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with a valid siginfo_t pointer.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after a successful waitid.
    rc == 0 && unsafe { info.si_pid() } != 0
}

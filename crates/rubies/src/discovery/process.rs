//! Running a program as a child with a timeout ([`run_captured`]): stdin closed, stdout
//! and stderr captured (up to a cap), in a process group of its own that is killed when the
//! time is up, so a hung program, or a grandchild holding its pipes, costs seconds and an
//! error message, never a hung lab.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use sys::process::kill_group;

/// What a program run by [`run_captured`] did and printed.
pub struct Captured {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
}

/// Keep at most this much of each output stream (the rest is read and dropped so the child
/// never blocks on a full pipe).
const OUTPUT_CAP: usize = 256 * 1024;

/// Runs `cmd` with stdin closed and stdout/stderr captured, in a new process group that is
/// killed (SIGKILL) when `timeout` passes.
pub fn run_captured(mut cmd: Command, timeout: Duration) -> std::io::Result<Captured> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let deadline = Instant::now() + timeout;
    let mut child = spawn_retrying(&mut cmd)?;
    let pgid = child.id() as libc::pid_t;

    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>)>();
    let streams: [Option<Box<dyn Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ];
    for (i, stream) in streams.into_iter().enumerate() {
        let Some(mut stream) = stream else { continue };
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = OUTPUT_CAP.saturating_sub(kept.len());
                        kept.extend_from_slice(&buf[..n.min(room)]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = tx.send((i, kept));
        });
    }
    drop(tx);

    let mut timed_out = false;
    let mut pause = Duration::from_millis(1);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            kill_group(pgid);
            break child.wait()?;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    };

    // The pipes close when the last process holding them exits; a leftover grandchild
    // (in our group) gets a moment, then is killed.
    let mut outputs: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut pending = 2;
    let mut grace_deadline = Instant::now() + Duration::from_secs(2);
    let mut killed_leftovers = timed_out;
    while pending > 0 {
        let wait = grace_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok((i, bytes)) => {
                outputs[i] = bytes;
                pending -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !killed_leftovers => {
                kill_group(pgid);
                killed_leftovers = true;
                grace_deadline = Instant::now() + Duration::from_secs(1);
            }
            Err(_) => break,
        }
    }
    let [stdout, stderr] = outputs;
    Ok(Captured {
        status,
        stdout,
        stderr,
        timed_out,
    })
}

/// Spawns, retrying on ETXTBSY: an executable written a moment ago (tests, fresh installs)
/// can be briefly "busy" while another thread's fork still holds it open for writing.
fn spawn_retrying(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let mut attempt = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < 10 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10 * attempt));
            }
            other => return other,
        }
    }
}

/// The last few lines of a captured output stream, trimmed, for error messages.
pub(super) fn tail_output(bytes: &[u8]) -> String {
    const MAX_LINES: usize = 12;
    const MAX_CHARS: usize = 1500;
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.trim().lines().collect();
    let mut out = lines[lines.len().saturating_sub(MAX_LINES)..].join("\n");
    if out.chars().count() > MAX_CHARS {
        let skip = out.chars().count() - MAX_CHARS;
        out = format!("...{}", out.chars().skip(skip).collect::<String>());
    }
    out
}

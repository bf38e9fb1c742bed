//! Held-open slicing: a run that keeps its connections open for a whole interleaved block
//! and sends only inside its windows, the spans of time its server has the load. Several
//! runs, one per server, are given windows that follow each other, so the load moves
//! between servers at each window's edge without a connect.
//!
//! A window opens (sending may start), records from a lead-in later (requests sent from
//! then on are counted, to this window, when they complete, however late), and closes
//! (nothing more is sent). Requests in flight at the close complete after it, during the
//! next server's lead-in, and count to the window that sent them.

use std::time::{Duration, Instant};

/// One window of a run's held-open schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub open: Instant,
    pub record_from: Instant,
    pub close: Instant,
}

impl Window {
    /// The recorded part of the window.
    pub fn recorded(&self) -> Duration {
        self.close.saturating_duration_since(self.record_from)
    }
}

/// After its last window closes, how long a run waits at most for its requests still in
/// flight to complete (they are counted, as at every other close).
pub const LAST_DRAIN: Duration = Duration::from_secs(1);

/// What one window measured (every thread's, summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowStats {
    /// Responses to requests sent in the window's recorded part.
    pub responses: u64,
    /// Errors of requests sent in its recorded part (timeouts, resets, connects).
    pub errors: u64,
    /// How long after the close its last request completed (0 when none was in flight):
    /// the drain that overlaps the next window's lead-in.
    pub drained_ns: u64,
}

impl WindowStats {
    pub fn plus(self, other: WindowStats) -> WindowStats {
        WindowStats {
            responses: self.responses + other.responses,
            errors: self.errors + other.errors,
            drained_ns: self.drained_ns.max(other.drained_ns),
        }
    }
}

/// Where a run stands in its windows at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Before a window's open (or after the last close): nothing may be sent.
    Shut,
    /// Inside window `index`; `recorded` from its lead-in on.
    Open { index: usize, recorded: bool },
}

/// The window a run is in or waits for, kept by a cursor that only moves forward.
#[derive(Clone, Debug)]
pub struct Schedule {
    windows: std::sync::Arc<[Window]>,
    at: usize,
}

impl Schedule {
    /// `windows` in time order, not overlapping.
    pub fn new(windows: std::sync::Arc<[Window]>) -> Schedule {
        debug_assert!(windows.windows(2).all(|w| w[0].close <= w[1].open));
        Schedule { windows, at: 0 }
    }

    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// Moves past the windows closed by `now` and says where `now` is.
    pub fn gate(&mut self, now: Instant) -> Gate {
        while self.at < self.windows.len() && now >= self.windows[self.at].close {
            self.at += 1;
        }
        match self.windows.get(self.at) {
            Some(w) if now >= w.open => Gate::Open {
                index: self.at,
                recorded: now >= w.record_from,
            },
            _ => Gate::Shut,
        }
    }

    /// The next edge after `now` at which the gate changes (an open, a lead-in's end or a
    /// close), if any is left.
    pub fn next_edge(&self, now: Instant) -> Option<Instant> {
        self.windows[self.at.min(self.windows.len())..]
            .iter()
            .flat_map(|w| [w.open, w.record_from, w.close])
            .find(|&t| t > now)
    }

    /// The next open at or after `now`, if any.
    pub fn next_open(&self, now: Instant) -> Option<Instant> {
        self.windows[self.at.min(self.windows.len())..]
            .iter()
            .map(|w| w.open)
            .find(|&t| t >= now)
    }

    /// The first window's recorded start and the last one's close.
    pub fn span(&self) -> Option<(Instant, Instant)> {
        Some((
            self.windows.first()?.record_from,
            self.windows.last()?.close,
        ))
    }

    /// The recorded time of every window, summed.
    pub fn recorded(&self) -> Duration {
        self.windows.iter().map(Window::recorded).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(base: Instant, n: u64) -> Instant {
        base + Duration::from_millis(n)
    }

    #[test]
    fn the_gate_follows_the_windows_and_only_moves_forward() {
        let t = Instant::now();
        let windows: std::sync::Arc<[Window]> = vec![
            Window {
                open: ms(t, 10),
                record_from: ms(t, 12),
                close: ms(t, 30),
            },
            Window {
                open: ms(t, 50),
                record_from: ms(t, 52),
                close: ms(t, 70),
            },
        ]
        .into();
        let mut s = Schedule::new(windows);
        assert_eq!(s.gate(ms(t, 0)), Gate::Shut);
        assert_eq!(s.next_edge(ms(t, 0)), Some(ms(t, 10)));
        assert_eq!(
            s.gate(ms(t, 11)),
            Gate::Open {
                index: 0,
                recorded: false
            }
        );
        assert_eq!(
            s.gate(ms(t, 12)),
            Gate::Open {
                index: 0,
                recorded: true
            }
        );
        assert_eq!(s.next_edge(ms(t, 12)), Some(ms(t, 30)));
        // The close is the first instant outside.
        assert_eq!(s.gate(ms(t, 30)), Gate::Shut);
        assert_eq!(s.next_open(ms(t, 30)), Some(ms(t, 50)));
        assert_eq!(
            s.gate(ms(t, 69)),
            Gate::Open {
                index: 1,
                recorded: true
            }
        );
        assert_eq!(s.gate(ms(t, 70)), Gate::Shut);
        assert_eq!(s.next_edge(ms(t, 70)), None);
        assert_eq!(s.next_open(ms(t, 70)), None);
        assert_eq!(s.recorded(), Duration::from_millis(36));
        assert_eq!(s.span(), Some((ms(t, 12), ms(t, 70))));
    }

    /// A tiny HTTP/1.1 keep-alive server on a real socket, one thread per connection:
    /// it answers every request after `service` and notes when each arrived and how many
    /// connections it accepted.
    struct Server {
        port: u16,
        arrivals: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
        accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    fn serve(service: Duration) -> Server {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let arrivals = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (a, n) = (arrivals.clone(), accepted.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let a = a.clone();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            a.lock().unwrap().push(Instant::now());
                            buf.drain(..end + 4);
                            std::thread::sleep(service);
                            // One write: head and body in two would meet Nagle and
                            // the client's delayed ACK (40 ms).
                            let response = "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n";
                            if stream.write_all(response.as_bytes()).is_err() {
                                return;
                            }
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                    }
                });
            }
        });
        Server {
            port,
            arrivals,
            accepted,
        }
    }

    #[test]
    fn a_held_open_run_sends_only_in_its_windows_on_connections_opened_once() {
        let server = serve(Duration::from_micros(500));
        let settings = crate::LoadSettings {
            connections: 3,
            timeout: Duration::from_secs(5),
            ..crate::LoadSettings::default()
        };
        let spec = settings
            .build_spec(&format!("http://127.0.0.1:{}/", server.port))
            .unwrap();
        // Six windows of 30 ms (5 ms of lead-in) with 40 ms gaps, the first 100 ms on.
        let t = Instant::now() + Duration::from_millis(100);
        let windows: std::sync::Arc<[Window]> = (0..6u32)
            .map(|i| {
                let open = t + Duration::from_millis(70) * i;
                Window {
                    open,
                    record_from: open + Duration::from_millis(5),
                    close: open + Duration::from_millis(30),
                }
            })
            .collect::<Vec<_>>()
            .into();
        let outcome = crate::run_in_windows(
            &spec,
            windows.clone(),
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        )
        .unwrap();
        // Every request reached the server inside a window, none in the gaps. A send just
        // before the close arrives within microseconds, but the server's thread may be
        // scheduled late on a busy machine: 10 ms of slack, in gaps of 40.
        let arrivals = server.arrivals.lock().unwrap().clone();
        assert!(!arrivals.is_empty());
        let slack = Duration::from_millis(10);
        let outside: Vec<_> = arrivals
            .iter()
            .filter(|&&a| !windows.iter().any(|w| a >= w.open && a <= w.close + slack))
            .collect();
        assert!(
            outside.is_empty(),
            "{} of {} requests arrived outside the windows",
            outside.len(),
            arrivals.len()
        );
        // Requests arrived in every window: each open started them again.
        for w in windows.iter() {
            assert!(
                arrivals.iter().any(|&a| a >= w.open && a <= w.close),
                "{w:?}"
            );
        }
        // The connections were opened once, before the first window, and kept.
        assert_eq!(server.accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
        assert_eq!(outcome.stats.connections_opened, 3);
        // Each window's responses are its own; their sum is the run's.
        let per_window: Vec<u64> = outcome.stats.windows.iter().map(|w| w.responses).collect();
        assert_eq!(per_window.len(), 6);
        assert!(
            per_window.iter().all(|&n| n > 0),
            "{per_window:?} responses {} errors {:?} in flight {}",
            outcome.stats.responses,
            outcome.stats.errors,
            outcome.stats.in_flight_at_end
        );
        assert_eq!(per_window.iter().sum::<u64>(), outcome.stats.responses);
        assert_eq!(outcome.stats.in_flight_at_end, 0);
        // At 0.5 ms a request on 3 connections, about 25 ms recorded gives up to ~150 a
        // window; the requests sent in the recorded part are at most the arrivals there
        // plus those in flight at its start.
        for (w, n) in windows.iter().zip(&per_window) {
            let arrived = arrivals
                .iter()
                .filter(|&&a| a >= w.record_from && a <= w.close + slack)
                .count() as u64;
            assert!(*n <= arrived + 3, "{n} counted, {arrived} arrived in {w:?}");
        }
        assert_eq!(outcome.recorded, Duration::from_millis(25 * 6));
    }
}

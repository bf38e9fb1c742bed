//! The TLS read path of a load thread: records read from the socket, processed by the
//! rustls session (which may answer, during the handshake), and the plaintext appended to
//! the connection's input. The same `Worker` as `worker.rs`, whose `on_readable` hands a
//! TLS connection here.

use std::io::{self, Read};

use super::{ConnState, Fate, Worker};
use crate::stats::ErrorKind;

impl Worker {
    /// `on_readable` for a TLS socket: records in, the session processes them (and may
    /// answer, during the handshake), plaintext out into the input buffer.
    pub(super) fn on_readable_tls(&mut self, index: usize, peer_closed: bool) -> Fate {
        let mut eof = false;
        loop {
            let conn = &mut self.conns[index];
            let (Some(socket), Some(tls)) = (conn.socket.as_mut(), conn.tls.as_mut()) else {
                return Fate::Keep;
            };
            let mut drained = false;
            match tls.read_tls(socket) {
                Ok(0) => eof = true,
                Ok(n) => {
                    if self.recording {
                        self.stats.bytes_read += n as u64;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Fate::Reset(Some(ErrorKind::Read)),
            }
            if let Err(e) = tls.process_new_packets() {
                // A certificate not trusted, an alert, a bad record: rustls has queued
                // an alert for the server; the connection is over either way.
                let _ = tls.write_tls(socket);
                if self.stats.first_tls_error.is_none() {
                    self.stats.first_tls_error = Some(e.to_string());
                }
                return Fate::Reset(Some(ErrorKind::Tls));
            }
            // Plaintext, as much as there is.
            let mut clean_close = false;
            loop {
                if let Some(fate) = self.make_room(index) {
                    return fate;
                }
                let conn = &mut self.conns[index];
                let tls = conn.tls.as_mut().expect("a TLS connection");
                match tls.reader().read(&mut conn.input[conn.in_end..]) {
                    Ok(0) => {
                        clean_close = true;
                        break;
                    }
                    Ok(n) => {
                        conn.in_end += n;
                        let fate = self.process_input(index);
                        if !matches!(fate, Fate::Keep) {
                            return fate;
                        }
                        if self.conns[index].tls.is_none() {
                            return Fate::Keep;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // The peer closed the TCP connection without close_notify.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        clean_close = true;
                        break;
                    }
                    Err(_) => return Fate::Reset(Some(ErrorKind::Tls)),
                }
            }
            // The handshake (or a key update) may have something to send.
            if self.conns[index]
                .tls
                .as_ref()
                .is_some_and(|t| t.wants_write())
            {
                let fate = self.flush_writes(index);
                if !matches!(fate, Fate::Keep) {
                    return fate;
                }
            }
            if clean_close || eof {
                return self.on_eof(index);
            }
            let draining = matches!(self.conns[index].state, ConnState::Draining { .. });
            if drained && !peer_closed && !draining {
                return Fate::Keep;
            }
        }
    }
}

//! How the load's connections are reused between requests: a leaf that both the request
//! plan (which serializes `Connection: close` into the requests) and the spec (which
//! carries the mode to the engine) use.

/// How connections are reused between requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionMode {
    /// HTTP/1.1 persistent connections; a connection is replaced only after an error or
    /// when the server announces `Connection: close`.
    Keepalive,
    /// Every request carries `Connection: close`; the server is expected to close. A server
    /// that does not close within `close_grace` is counted and closed from the client.
    CloseHeader,
    /// Plain keepalive requests, but the client closes the socket after each response.
    ClientClose,
}

impl ConnectionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionMode::Keepalive => "keepalive",
            ConnectionMode::CloseHeader => "close-header",
            ConnectionMode::ClientClose => "client-close",
        }
    }
}

//! TLS for `https://` targets: rustls with the ring provider, TLS 1.2 and 1.3.
//!
//! The server's certificate is checked against `--cacert` (a PEM file: the server's own
//! self-signed certificate or its CA), or not at all with `--insecure`, whose verifier
//! still checks every handshake signature: only the chain of trust is skipped. Session
//! resumption is off, so every connection makes a full handshake: with `--client-close`
//! that is one handshake per request, the cost a server pays for clients that do not
//! reuse connections.
//!
//! The engine drives a `rustls::ClientConnection` per socket (`engine::worker`); a
//! blocking stream ([`blocking_stream`]) serves readiness checks.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use serde::{Deserialize, Serialize};

/// How the server's certificate is trusted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TlsTrust {
    /// The certificates of this PEM file are the only roots.
    CaFile(PathBuf),
    /// Any certificate (signatures are still verified).
    Insecure,
}

/// What every TLS connection of a run needs: the configuration and the name to check.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsClient({:?})", self.server_name)
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsClient {
    /// A client for `host` (a name or an IP address, as in the URL) trusting `trust`.
    pub fn new(host: &str, trust: &TlsTrust) -> Result<TlsClient, String> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host:?} is not a name TLS can check: {e}"))?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let mut config = match trust {
            TlsTrust::CaFile(path) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certificates(path)? {
                    roots.add(cert).map_err(|e| {
                        format!("{}: not a usable certificate: {e}", path.display())
                    })?;
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            TlsTrust::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
                .with_no_client_auth(),
        };
        config.resumption = Resumption::disabled();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
        })
    }

    /// A new client connection (nothing sent yet).
    pub fn connection(&self) -> Result<ClientConnection, rustls::Error> {
        ClientConnection::new(self.config.clone(), self.server_name.clone())
    }
}

/// The certificates of a PEM file; an error when there are none.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// `--insecure`: any certificate chain, but real signature checks.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A blocking TLS stream over a connected socket (the handshake happens on first use),
/// for readiness checks.
pub type TlsStream = rustls::StreamOwned<ClientConnection, TcpStream>;

/// Wraps a connected socket in a TLS session of `client`.
pub fn blocking_stream(client: &TlsClient, tcp: TcpStream) -> std::io::Result<TlsStream> {
    let conn = client.connection().map_err(std::io::Error::other)?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}

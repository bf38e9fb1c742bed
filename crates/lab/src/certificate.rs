//! The certificates of `tls = true`: a certificate authority made for one run, and a
//! server certificate it signs for `127.0.0.1` and `localhost` (ECDSA P-256, rcgen). The
//! server gets the certificate and its key; the load generator trusts the authority only,
//! so the handshake is verified as a real client verifies it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};

/// Where the files of a run's certificates are.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerCertificate {
    /// The authority's certificate (PEM): what the client trusts.
    pub ca: PathBuf,
    /// The server's certificate (PEM) and private key (PEM, PKCS#8).
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The files in `dir` (`ca.pem`, `server.pem`, `server.key`), made now if any is missing.
pub fn server_certificate(dir: &Path) -> Result<ServerCertificate> {
    let files = ServerCertificate {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    if files.ca.is_file() && files.cert.is_file() && files.key.is_file() {
        return Ok(files);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let ca_key = KeyPair::generate().context("cannot generate a key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "rubyrace run authority");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca_params.self_signed(&ca_key)?;

    let server_key = KeyPair::generate().context("cannot generate a key")?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = params.signed_by(&server_key, &ca, &ca_key)?;

    let write = |path: &Path, text: String| {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write(&files.key, server_key.serialize_pem())?;
    write(&files.cert, cert.pem())?;
    write(&files.ca, ca.pem())?;
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_are_made_once_and_read_as_pem() {
        let dir = tempfile::tempdir().unwrap();
        let files = server_certificate(dir.path()).unwrap();
        // The authority loads as a root (the chain itself is checked by the tls test).
        let client =
            load::tls::TlsClient::new("127.0.0.1", &load::tls::TlsTrust::CaFile(files.ca.clone()));
        assert!(client.is_ok(), "{:?}", client.err());
        let certs = load::tls::read_certificates(&files.cert).unwrap();
        assert_eq!(certs.len(), 1);
        // Made once per directory: a second call reuses the files.
        let before = std::fs::read(&files.cert).unwrap();
        server_certificate(dir.path()).unwrap();
        assert_eq!(std::fs::read(&files.cert).unwrap(), before);
    }
}

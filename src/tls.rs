//! TLS for coogle's HTTPS clients (Gemini in the search server, GitHub in self-update): one
//! rustls configuration, with ring as its crypto provider (smaller than aws-lc, so every binary
//! is), and where its trust comes from.
//!
//! By default, as uv does: Mozilla's roots bundled in the binary (webpki-roots), plus every
//! certificate in the PEM file `SSL_CERT_FILE` names (a corporate proxy's CA, say). Nothing here
//! asks the platform, so a macOS binary links no Apple framework and loads only libSystem: that
//! is what lets scripts/check-macos link and inspect the release binaries from Linux.
//!
//! With the cargo feature `native-roots` (for those who build on a Mac, whose SDK has the
//! frameworks), certificates are checked by the platform's verifier instead (the macOS
//! keychain, with its MDM-installed CAs), `SSL_CERT_FILE`'s certificates added.
//!
//! It must never fall back to trusting less, or more, than it says: a `SSL_CERT_FILE` that
//! cannot be read, or holds no certificate, is an error, not a silent return to the defaults.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The variable naming a PEM file of extra CA certificates (OpenSSL's, curl's and uv's name).
pub const CA_FILE_VAR: &str = "SSL_CERT_FILE";

/// Why no TLS configuration could be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("could not read the CA certificates in {} ({CA_FILE_VAR})", path.display())]
    ReadCaFile {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} ({CA_FILE_VAR}) holds no PEM certificate", path.display())]
    NoCaCertificate { path: PathBuf },
    #[cfg(not(feature = "native-roots"))]
    #[error("a certificate in {} ({CA_FILE_VAR}) cannot be a trust root", path.display())]
    BadCaCertificate {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[cfg(feature = "native-roots")]
    #[error("the platform's certificate verifier is unavailable")]
    Verifier(#[source] rustls::Error),
}

impl TlsError {
    /// The error and its cause on one line, for callers that carry errors as text.
    pub fn one_line(&self) -> String {
        match std::error::Error::source(self) {
            Some(cause) => format!("{self}: {cause}"),
            None => self.to_string(),
        }
    }
}

/// The client configuration every HTTPS client of coogle's uses: the trust described in the
/// module's doc, TLS 1.2 and 1.3, and ALPN offering HTTP/2 then HTTP/1.1 (the client is handed
/// this whole, so the protocols it may speak are said here).
pub fn client_config() -> Result<rustls::ClientConfig, TlsError> {
    let extra = extra_roots()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions");
    let mut config = verifier(builder, provider, extra)?.with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(not(feature = "native-roots"))]
fn verifier(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>,
    _provider: Arc<rustls::crypto::CryptoProvider>,
    extra: Option<(PathBuf, Vec<CertificateDer<'static>>)>,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, TlsError>
{
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some((path, certs)) = extra {
        for cert in certs {
            roots
                .add(cert)
                .map_err(|source| TlsError::BadCaCertificate {
                    path: path.clone(),
                    source,
                })?;
        }
    }
    Ok(builder.with_root_certificates(roots))
}

#[cfg(feature = "native-roots")]
fn verifier(
    builder: rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    extra: Option<(PathBuf, Vec<CertificateDer<'static>>)>,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, TlsError>
{
    let extra = extra.map(|(_, certs)| certs).unwrap_or_default();
    let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(extra, provider)
        .map_err(TlsError::Verifier)?;
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier)))
}

/// The certificates `SSL_CERT_FILE` names, with the path; none when it is unset or empty.
fn extra_roots() -> Result<Option<(PathBuf, Vec<CertificateDer<'static>>)>, TlsError> {
    let Some(path) = std::env::var_os(CA_FILE_VAR).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = PathBuf::from(path);
    let read_error = |source| TlsError::ReadCaFile {
        path: path.clone(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(&path)
        .map_err(read_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_error)?;
    if certs.is_empty() {
        return Err(TlsError::NoCaCertificate { path });
    }
    tracing::debug!(
        "trusting {} extra CA certificate(s) from {}",
        certs.len(),
        path.display()
    );
    Ok(Some((path, certs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_roots_are_mozillas_and_alpn_offers_h2_first() {
        // The variable itself is covered against the real binary (tests/it/tls.rs).
        if std::env::var_os(CA_FILE_VAR).is_some() {
            return;
        }
        let config = client_config().unwrap();
        assert_eq!(
            config.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn an_error_reads_on_one_line_with_its_cause() {
        let e = TlsError::ReadCaFile {
            path: "/nowhere/ca.pem".into(),
            source: rustls::pki_types::pem::Error::Io(std::io::Error::from(
                std::io::ErrorKind::NotFound,
            )),
        };
        let line = e.one_line();
        assert!(
            line.starts_with(
                "could not read the CA certificates in /nowhere/ca.pem (SSL_CERT_FILE): "
            ),
            "{line}"
        );
        assert_eq!(line.matches("SSL_CERT_FILE").count(), 1, "{line}");
    }
}

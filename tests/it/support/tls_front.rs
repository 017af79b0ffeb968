//! An HTTPS front on 127.0.0.1 for a plain-HTTP mock (Gemini's, GitHub's): it terminates TLS
//! with a certificate for 127.0.0.1 signed by a throwaway CA made for this front alone, and
//! pipes the bytes to the mock. A client trusts it only if it was given that CA (`ca_pem`), which
//! is how the tests tell bundled roots, `SSL_CERT_FILE` and a missing trust apart.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio_rustls::rustls;

pub struct TlsFront {
    /// `https://127.0.0.1:<port>`.
    pub origin: String,
    /// The CA that signed the front's certificate, PEM.
    pub ca_pem: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl TlsFront {
    /// Front `backend` (a plain-HTTP `http://127.0.0.1:<port>...` URL: only its address is used).
    pub fn start(backend: &str) -> TlsFront {
        let backend: SocketAddr = backend
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .parse()
            .expect("the backend is http://127.0.0.1:<port>");

        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "coogle test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let origin = format!("https://{}", listener.local_addr().unwrap());
        runtime.spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that does not trust the CA hangs up during the handshake.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            origin,
            ca_pem: ca.pem(),
            runtime: Some(runtime),
        }
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

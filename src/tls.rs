//! The TLS crypto provider for coogle's HTTPS clients (Gemini in the search server, GitHub in
//! self-update): rustls with ring, installed once per process before the first client is built.
//! ring rather than aws-lc keeps the binary, and so every `coogle mcp` shim, smaller.

/// Install ring as the process's rustls provider; a second call (or one already installed)
/// changes nothing.
pub fn install() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

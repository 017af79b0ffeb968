//! The HTTP client self-update hands to the self_update crate for listing releases and
//! downloading: a blocking reqwest client with coogle's own TLS configuration (`crate::tls`),
//! so GitHub is reached with the same trust as Gemini, `SSL_CERT_FILE` included, and the crate's
//! own TLS (which would bring Apple's frameworks into a macOS build) is never compiled in.
//!
//! It must answer as the crate's own clients do: a non-2xx status becomes the crate's
//! structured error (not found, unauthorized, rate limited) before any body is read.

use std::sync::Arc;
use std::time::Duration;

use self_update::http_client::{HeaderMap, HttpClient, HttpResponse};

use crate::error::InstallError;

/// A blocking client; build it outside the async runtime (self-update runs outside one).
pub(super) struct Http(reqwest::blocking::Client);

impl Http {
    pub fn client() -> Result<Arc<dyn HttpClient>, InstallError> {
        let tls = crate::tls::client_config()?;
        let client = reqwest::blocking::Client::builder()
            .user_agent(concat!("coogle/", env!("CARGO_PKG_VERSION")))
            .use_preconfigured_tls(tls)
            .build()
            .map_err(|e| InstallError::HttpClient(Box::new(e)))?;
        Ok(Arc::new(Http(client)))
    }
}

impl HttpClient for Http {
    fn get(
        &self,
        url: &str,
        headers: &HeaderMap,
        timeout: Option<Duration>,
    ) -> self_update::errors::Result<Box<dyn HttpResponse>> {
        let mut request = self.0.get(url).headers(headers.clone());
        if let Some(t) = timeout {
            request = request.timeout(t);
        }
        let response = request
            .send()
            .map_err(self_update::errors::Error::transport)?;
        if !response.status().is_success() {
            return Err(self_update::errors::Error::http_status_error_with_headers(
                response.status().as_u16(),
                url,
                response.headers(),
            ));
        }
        Ok(Box::new(Body(response)))
    }
}

struct Body(reqwest::blocking::Response);

impl HttpResponse for Body {
    fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }

    fn body(self: Box<Self>) -> Box<dyn std::io::Read> {
        Box::new(self.0)
    }
}

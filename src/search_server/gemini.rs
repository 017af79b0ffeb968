//! The Gemini `generateContent` call with Google Search grounding: one reqwest client, the key
//! in the `x-goog-api-key` header (never in a URL, so never in a log line), a per-request
//! timeout, errors sorted into categories an agent can act on, and retries with exponential
//! backoff for transient failures only. What the API or the network says is shown to the agent
//! and logged, so it is redacted first: the key itself, should an error quote it, and anything
//! else shaped like a credential.

use std::time::Duration;

use serde_json::{Value, json};

/// What went wrong, as the prefix of the tool's error text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// 401/403 or an invalid key: retrying cannot help; the key must change.
    Auth,
    /// 429 or an exhausted quota: retrying now makes it worse.
    Quota,
    /// The request took longer than `timeoutMs`, or the server said it timed out.
    Timeout,
    /// Everything else.
    Api,
}

impl Category {
    pub fn prefix(self) -> &'static str {
        match self {
            Category::Auth => "[AUTH_ERROR]",
            Category::Quota => "[QUOTA_ERROR]",
            Category::Timeout => "[TIMEOUT_ERROR]",
            Category::Api => "[API_ERROR]",
        }
    }
}

/// A failed attempt: its category, a message without secrets, and whether another attempt
/// may succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub category: Category,
    pub message: String,
    pub transient: bool,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.category.prefix(), self.message)
    }
}

/// Sort an HTTP error into a category: by status first, then by what the message says.
pub fn categorize(status: u16, message: &str) -> Failure {
    let lower = message.to_ascii_lowercase();
    let (category, transient) = match status {
        401 | 403 => (Category::Auth, false),
        429 => (Category::Quota, false),
        408 | 504 => (Category::Timeout, true),
        _ if lower.contains("api key")
            || lower.contains("api_key_")
            || lower.contains("permission_denied")
            || lower.contains("unauthenticated") =>
        {
            (Category::Auth, false)
        }
        _ if lower.contains("resource_exhausted")
            || lower.contains("quota")
            || lower.contains("rate limit") =>
        {
            (Category::Quota, false)
        }
        _ if lower.contains("deadline") || lower.contains("timed out") => (Category::Timeout, true),
        500..=599 => (Category::Api, true),
        _ => (Category::Api, false),
    };
    Failure {
        category,
        message: format!("Gemini answered HTTP {status}: {message}"),
        transient,
    }
}

/// The most of an error text (the API's message, a network error) an error shows.
const MAX_SHOWN: usize = 2000;

/// The Gemini client, built once per server.
pub struct Gemini {
    http: reqwest::Client,
    base: String,
    key: String,
    timeout: Duration,
    retry_base: Duration,
    max_retries: u32,
}

impl Gemini {
    pub fn new(
        base: &str,
        key: String,
        timeout: Duration,
        retry_base: Duration,
        max_retries: u32,
    ) -> Result<Gemini, String> {
        crate::tls::install();
        let http = reqwest::Client::builder()
            .user_agent(concat!("coogle/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("could not build the HTTP client: {e}"))?;
        Ok(Gemini {
            http,
            base: base.trim_end_matches('/').to_owned(),
            key,
            timeout,
            retry_base,
            max_retries,
        })
    }

    /// Ask `model` with Google Search grounding; retries transient failures with backoff
    /// (`retryBaseMs`, doubled each time) up to `maxRetries` times.
    pub async fn ask(&self, model: &str, system: &str, question: &str) -> Result<Value, Failure> {
        let body = json!({
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": question}]}],
            "tools": [{"google_search": {}}],
        });
        let attempts = self.max_retries + 1;
        let mut delay = self.retry_base;
        for attempt in 1..=attempts {
            tracing::info!(model, "asking Gemini: attempt {attempt}/{attempts}");
            match self.once(model, &body).await {
                Ok(v) => return Ok(v),
                Err(f) if f.transient && attempt < attempts => {
                    tracing::warn!(
                        "attempt {attempt}/{attempts} failed: {f}; retrying in {} ms",
                        delay.as_millis()
                    );
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(f) => {
                    tracing::warn!("attempt {attempt}/{attempts} failed: {f}");
                    return Err(f);
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// `text` without the key, wherever it is: one pass over all of it, before anything is cut
    /// short, so no part of the key survives a cut.
    fn without_key(&self, text: &str) -> String {
        text.replace(self.key.as_str(), "[redacted]")
    }

    /// What of `text` becomes part of an error (shown to the agent and logged): without the
    /// key, at most `max` characters, and without anything else shaped like a credential.
    fn shown(&self, text: &str, max: usize) -> String {
        let cut: String = self.without_key(text).chars().take(max).collect();
        crate::redact::redact(&cut, &[])
    }

    async fn once(&self, model: &str, body: &Value) -> Result<Value, Failure> {
        let url = format!("{}/models/{model}:generateContent", self.base);
        let timed_out = || Failure {
            category: Category::Timeout,
            message: format!(
                "Gemini did not answer within {} ms",
                self.timeout.as_millis()
            ),
            transient: true,
        };
        let unreachable = |e: reqwest::Error| Failure {
            category: Category::Api,
            message: self.shown(
                &format!("could not reach {}: {}", self.base, error_chain(&e)),
                MAX_SHOWN,
            ),
            transient: true,
        };
        let response = self
            .http
            .post(&url)
            .header("x-goog-api-key", &self.key)
            .timeout(self.timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    timed_out()
                } else {
                    unreachable(e)
                }
            })?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| {
            if e.is_timeout() {
                timed_out()
            } else {
                unreachable(e)
            }
        })?;
        if !(200..300).contains(&status) {
            let message = error_message(&self.without_key(&text));
            return Err(categorize(status, &self.shown(&message, MAX_SHOWN)));
        }
        // A 200 whose body is not JSON is not a blip a retry would fix; it is reported.
        serde_json::from_str(&text).map_err(|e| Failure {
            category: Category::Api,
            message: format!(
                "Gemini answered with malformed JSON ({e}); the body began: {}",
                self.shown(&text, 120)
            ),
            transient: false,
        })
    }
}

/// Gemini's error body is `{"error": {"code", "message", "status", "details"}}`; the reasons in
/// `details` (`API_KEY_INVALID`, `RATE_LIMIT_EXCEEDED`) are kept, since they categorize better
/// than the prose. Falls back to the start of the text.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    match error {
        Some(e) => {
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            let mut out = match e.get("status").and_then(Value::as_str) {
                Some(status) => format!("{status}: {message}"),
                None => message.to_owned(),
            };
            let reasons: Vec<&str> = e
                .get("details")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|d| d.get("reason").and_then(Value::as_str))
                .collect();
            if !reasons.is_empty() {
                out.push_str(&format!(" ({})", reasons.join(", ")));
            }
            out
        }
        None => body.chars().take(200).collect::<String>().trim().to_owned(),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_decides_first_then_the_message() {
        let c = |s, m| {
            let f = categorize(s, m);
            (f.category, f.transient)
        };
        assert_eq!(c(401, "x"), (Category::Auth, false));
        assert_eq!(c(403, "quota"), (Category::Auth, false));
        assert_eq!(c(429, "x"), (Category::Quota, false));
        assert_eq!(
            c(
                400,
                "INVALID_ARGUMENT: API key not valid. Please pass a valid API key."
            ),
            (Category::Auth, false)
        );
        assert_eq!(
            c(
                400,
                "INVALID_ARGUMENT: API key expired. Please renew the API key."
            ),
            (Category::Auth, false)
        );
        assert_eq!(
            c(400, "INVALID_ARGUMENT: bad (API_KEY_INVALID)"),
            (Category::Auth, false)
        );
        assert_eq!(c(400, "RESOURCE_EXHAUSTED"), (Category::Quota, false));
        assert_eq!(c(503, "rate limit exceeded"), (Category::Quota, false));
        assert_eq!(c(500, "internal"), (Category::Api, true));
        assert_eq!(c(503, "UNAVAILABLE"), (Category::Api, true));
        assert_eq!(c(504, "x"), (Category::Timeout, true));
        assert_eq!(c(400, "bad request"), (Category::Api, false));
        assert_eq!(c(404, "model not found"), (Category::Api, false));
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            error_message(
                r#"{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}"#
            ),
            "RESOURCE_EXHAUSTED: slow down"
        );
        assert_eq!(error_message("<html>oops</html>"), "<html>oops</html>");
        assert_eq!(
            error_message(
                r#"{"error":{"code":400,"message":"API key expired.","status":"INVALID_ARGUMENT",
                    "details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",
                                "reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}"#
            ),
            "INVALID_ARGUMENT: API key expired. (API_KEY_INVALID)"
        );
    }
}

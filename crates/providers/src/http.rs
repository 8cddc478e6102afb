//! The HTTP layer shared by the remote providers: a reqwest client (rustls), a per-request timeout, retries
//! with exponential backoff on 429 / 5xx / timeouts / connection errors (honouring `Retry-After` and
//! `retry-after-ms`), and scrubbing of secrets from every message that leaves this module.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use memory_core::embedding::EmbeddingError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tracing::{debug, warn};

/// A secret (API key). Its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// `None` for an empty or blank key.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        let trimmed = key.trim();
        if trimmed.is_empty() {
            None
        } else {
            Some(ApiKey(trimmed.to_string()))
        }
    }

    /// The raw value, for the one place that puts it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Timeouts and retry policy of one provider's HTTP calls.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Limit for one request (connect + send + full response).
    pub request_timeout: Duration,
    /// Retries after the first attempt on 429, 5xx, timeouts and connection errors.
    pub max_retries: u32,
    /// First backoff delay; doubled at each retry.
    pub initial_backoff: Duration,
    /// Upper bound of a computed backoff delay.
    pub max_backoff: Duration,
    /// Upper bound of a server-requested `Retry-After` wait; a longer request is capped to this.
    pub max_retry_after: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            request_timeout: memory_core::indexed::patience::REMOTE_REQUEST_TIMEOUT,
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// A non-success HTTP answer that is not retried (4xx other than 429, 408).
#[derive(Debug, Clone)]
pub(crate) struct HttpStatusError {
    pub status: u16,
    /// Response body, truncated and scrubbed of secrets.
    pub body: String,
}

impl HttpStatusError {
    /// The human part of a JSON error body (`{"error": {"message": ...}}`, `{"error": "..."}`,
    /// `{"message": ...}`, `{"detail": ...}`), else the raw (truncated) body.
    pub fn message(&self) -> String {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&self.body) {
            let pick = |v: &serde_json::Value| -> Option<String> {
                match v {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Object(o) => o.get("message").or_else(|| o.get("detail")).and_then(|m| m.as_str().map(str::to_string)),
                    _ => None,
                }
            };
            if let Some(m) = v.get("error").and_then(pick).or_else(|| pick(&v)) {
                return m;
            }
        }
        self.body.clone()
    }

    pub fn into_embedding_error(self, provider: &str) -> EmbeddingError {
        let what = match self.status {
            401 | 403 => "authentication failed",
            404 => "not found",
            400 | 422 => "request rejected",
            _ => "request failed",
        };
        EmbeddingError::Permanent { provider: provider.to_string(), message: format!("{what} (HTTP {}): {}", self.status, self.message()) }
    }
}

/// One provider's client: base headers (auth included), options, and the secrets to scrub from messages.
#[derive(Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    provider: String,
    headers: HeaderMap,
    options: HttpOptions,
    secrets: Vec<String>,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("provider", &self.provider)
            .field("header_names", &self.headers.keys().map(reqwest::header::HeaderName::as_str).collect::<Vec<_>>())
            .field("options", &self.options)
            .finish()
    }
}

impl HttpClient {
    /// `auth` headers hold secrets: they are marked sensitive and their values scrubbed from messages.
    pub fn new(
        provider: &str,
        auth: Vec<(&'static str, String)>,
        extra_headers: &BTreeMap<String, String>,
        options: HttpOptions,
    ) -> Result<Self, EmbeddingError> {
        let not_configured = |message: String| EmbeddingError::NotConfigured { provider: provider.to_string(), message };
        let mut headers = HeaderMap::new();
        let mut secrets = Vec::new();
        for (name, value) in extra_headers {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| not_configured(format!("invalid header name `{name}`")))?;
            let mut v = HeaderValue::from_str(value).map_err(|_| not_configured(format!("invalid value for header `{name}`")))?;
            // Extra headers often carry credentials too (api-key, x-api-key, cookies): treat them all as secret.
            v.set_sensitive(true);
            if value.len() >= 8 {
                secrets.push(value.clone());
            }
            headers.insert(n, v);
        }
        for (name, value) in auth {
            let mut v =
                HeaderValue::from_str(&value).map_err(|_| not_configured("the API key contains characters not allowed in a header".into()))?;
            v.set_sensitive(true);
            headers.insert(HeaderName::from_static(name), v);
            // Scrub both the whole header value ("Bearer sk-...") and the bare key.
            if let Some(bare) = value.strip_prefix("Bearer ") {
                secrets.push(bare.to_string());
            }
            secrets.push(value);
        }
        let client = reqwest::Client::builder()
            .user_agent(concat!("memory-rs-providers/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| not_configured(format!("cannot build HTTP client: {e}")))?;
        // Longest first so a key that contains another is scrubbed whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Ok(HttpClient { client, provider: provider.to_string(), headers, options, secrets })
    }

    /// The timeouts and retry policy of this client's requests.
    pub fn options(&self) -> &HttpOptions {
        &self.options
    }

    /// Replace every secret in `text` with `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if !s.is_empty() && out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }

    fn transient(&self, message: String) -> EmbeddingError {
        EmbeddingError::Transient { provider: self.provider.clone(), message: self.scrub(&message) }
    }

    /// POST a JSON body. `Ok(Ok(body))` on 2xx; `Ok(Err(status))` on a non-retryable status; `Err` when the
    /// retries are exhausted (transient) or the request cannot be built.
    pub async fn post_json(&self, url: &str, body: &serde_json::Value) -> Result<Result<Vec<u8>, HttpStatusError>, EmbeddingError> {
        let payload = serde_json::to_vec(body)
            .map_err(|e| EmbeddingError::Permanent { provider: self.provider.clone(), message: format!("cannot encode request: {e}") })?;
        self.send(reqwest::Method::POST, url, Some(("application/json".into(), payload))).await
    }

    /// One request with retries on 429 / 408 / 5xx / timeouts / connection errors. `body` is
    /// (content type, bytes).
    pub async fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<(String, Vec<u8>)>,
    ) -> Result<Result<Vec<u8>, HttpStatusError>, EmbeddingError> {
        let mut attempt: u32 = 0;
        loop {
            let mut request = self.client.request(method.clone(), url).headers(self.headers.clone()).timeout(self.options.request_timeout);
            if let Some((content_type, payload)) = &body {
                request = request.header(reqwest::header::CONTENT_TYPE, content_type.as_str()).body(payload.clone());
            }
            let result = request.send().await;
            let (reason, retry_after) = match result {
                Ok(resp) => {
                    let status = resp.status();
                    let retry_after = retry_after(resp.headers());
                    let bytes = resp.bytes().await;
                    match bytes {
                        Ok(bytes) if status.is_success() => {
                            debug!(provider = %self.provider, %method, url, status = status.as_u16(), bytes = bytes.len(), "provider request ok");
                            return Ok(Ok(bytes.to_vec()));
                        }
                        Ok(bytes) => {
                            let body = self.scrub(&truncate(&String::from_utf8_lossy(&bytes), 500));
                            let code = status.as_u16();
                            if code == 429 || code == 408 || status.is_server_error() {
                                let err = HttpStatusError { status: code, body };
                                (format!("HTTP {code}: {}", err.message()), retry_after)
                            } else {
                                return Ok(Err(HttpStatusError { status: code, body }));
                            }
                        }
                        Err(e) => (describe_reqwest_error(&e, self.options.request_timeout), None),
                    }
                }
                Err(e) => (describe_reqwest_error(&e, self.options.request_timeout), None),
            };
            if attempt >= self.options.max_retries {
                return Err(self.transient(format!("{reason} (gave up after {} attempts)", attempt + 1)));
            }
            let backoff = self.options.initial_backoff.saturating_mul(1u32 << attempt.min(16)).min(self.options.max_backoff);
            let delay = match retry_after {
                Some(d) => d.min(self.options.max_retry_after),
                None => backoff,
            };
            attempt += 1;
            warn!(
                provider = %self.provider,
                attempt,
                delay_ms = delay.as_millis() as u64,
                reason = %self.scrub(&reason),
                "provider request failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

fn describe_reqwest_error(e: &reqwest::Error, timeout: Duration) -> String {
    // reqwest's Display names the URL, which never carries a key here (keys go in headers).
    if e.is_timeout() {
        format!("request timed out after {} ms", timeout.as_millis())
    } else if e.is_connect() {
        format!("connection failed: {e}")
    } else if e.is_body() || e.is_decode() {
        format!("reading the response failed: {e}")
    } else {
        format!("request failed: {e}")
    }
}

/// Server-requested wait: `retry-after-ms` (OpenAI, Azure), else `Retry-After` in seconds or as an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers.get("retry-after-ms").and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let raw = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim().to_string();
    if let Ok(secs) = raw.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(&raw).ok()?;
    let wait = when.timestamp_millis() - chrono::Utc::now().timestamp_millis();
    Some(Duration::from_millis(wait.max(0) as u64))
}

pub(crate) fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Join a base URL and a path with exactly one slash.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!("{}/{}", base.trim_end_matches('/'), path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_debug_and_display_hide_the_value() {
        let k = ApiKey::new("sk-secret-123").unwrap();
        assert_eq!(format!("{k:?}"), "ApiKey(***)");
        assert_eq!(format!("{k}"), "***");
        assert!(ApiKey::new("   ").is_none());
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn error_message_extraction() {
        let e = HttpStatusError { status: 401, body: r#"{"error":{"message":"Incorrect API key","type":"x"}}"#.into() };
        assert_eq!(e.message(), "Incorrect API key");
        let e = HttpStatusError { status: 404, body: r#"{"error":"model \"x\" not found"}"#.into() };
        assert_eq!(e.message(), "model \"x\" not found");
        let e = HttpStatusError { status: 400, body: "plain".into() };
        assert_eq!(e.message(), "plain");
    }

    #[test]
    fn scrub_removes_keys_from_text() {
        let c =
            HttpClient::new("openai", vec![("authorization", "Bearer sk-abcdef123456".into())], &BTreeMap::new(), HttpOptions::default()).unwrap();
        assert_eq!(c.scrub("bad key sk-abcdef123456 given"), "bad key *** given");
        assert!(!format!("{c:?}").contains("sk-abcdef"));
    }

    #[test]
    fn join_url_single_slash() {
        assert_eq!(join_url("http://h/v1/", "/embeddings"), "http://h/v1/embeddings");
        assert_eq!(join_url("http://h/v1", "embeddings"), "http://h/v1/embeddings");
    }
}

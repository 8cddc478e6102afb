//! The client side of one remote provider, as its wire protocol ([`crate::wire`]) and its batch jobs
//! ([`crate::batch`]) use it: requests with the provider's headers and retries, errors named after the provider
//! with secrets scrubbed, JSON as servers send it, and the check every vector passes (the provider's width,
//! non-finite values zeroed, L2-normalised). [`crate::remote::RemoteProvider`] builds one and hands it to both.

use std::sync::atomic::{AtomicUsize, Ordering};

use memory_core::embedding::{sanitize_and_normalize, EmbeddingError};
use serde_json::Value;
use tracing::debug;

use crate::catalogue::Provider;
use crate::http::{join_url, truncate, HttpClient, HttpStatusError};
use crate::wire::Wire;

pub(crate) struct Client {
    provider: &'static Provider,
    /// As configured (Gemini's may carry `models/`).
    model: String,
    /// Without a trailing `/`.
    base_url: String,
    /// The provider's key and headers, retries, secrets to scrub.
    http: HttpClient,
    /// The width asked of the API (`dimensions` / `outputDimensionality`), when the provider sends one.
    output_dims: Option<usize>,
    /// Configured, asked for or known; `None`: `learned_dims` holds the first answer's (0 before it).
    expected_dims: Option<usize>,
    learned_dims: AtomicUsize,
    /// What changes vectors: the identity batch jobs and the index are kept under.
    fingerprint: String,
}

impl Client {
    /// A client of `provider`'s `model` at `base_url`, its vectors' width learnt from the first answer and its
    /// fingerprint empty until [`with_widths`](Self::with_widths) and [`with_fingerprint`](Self::with_fingerprint).
    pub fn new(provider: &'static Provider, model: String, base_url: String, http: HttpClient) -> Client {
        let (output_dims, expected_dims, learned_dims, fingerprint) = (None, None, AtomicUsize::new(0), String::new());
        Client { provider, model, base_url, http, output_dims, expected_dims, learned_dims, fingerprint }
    }

    /// `asked`: the width requests ask for (the provider sends it); `configured`: the width the settings promise.
    /// Vectors must then be that wide, else the model's known width, else the first answer's.
    pub fn with_widths(mut self, asked: Option<usize>, configured: Option<usize>) -> Client {
        self.output_dims = asked;
        self.expected_dims = configured.or(asked).or_else(|| self.provider.known_dimensions(&self.model));
        self
    }

    /// The fingerprint of what changes vectors: provider, model, width, and how `wire`'s requests tell queries from
    /// documents. The base URL counts for self-hosted servers (`openai-compatible`, `ollama`: another server may
    /// serve another model under the same name) but not for the vendors' APIs (a proxy in front of OpenAI serves
    /// the same vectors). Keys and headers never enter it.
    pub fn with_fingerprint(mut self, wire: &dyn Wire) -> Client {
        let dims = self.expected_dims.map(|d| d.to_string()).unwrap_or_else(|| "auto".into());
        let mut s = format!("v1;provider={};model={};dims={dims}", self.id(), self.model);
        s.push_str(&wire.fingerprint_part());
        if self.provider.self_hosted {
            s.push_str(";base=");
            s.push_str(&self.base_url);
        }
        self.fingerprint = memory_core::sha256_hex(s.as_bytes());
        self
    }

    pub fn provider(&self) -> &'static Provider {
        self.provider
    }

    /// The id errors and the index identity carry.
    pub fn id(&self) -> &'static str {
        self.provider.reported_id()
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `path` under the base URL.
    pub fn url(&self, path: &str) -> String {
        join_url(&self.base_url, path)
    }

    pub fn output_dims(&self) -> Option<usize> {
        self.output_dims
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The vectors' width: configured, asked for or known, else learnt from the first answer.
    pub fn dimensions(&self) -> Option<usize> {
        self.expected_dims.or_else(|| match self.learned_dims.load(Ordering::SeqCst) {
            0 => None,
            d => Some(d),
        })
    }

    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    /// `text` with every key and header value replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        self.http.scrub(text)
    }

    pub fn permanent(&self, message: impl Into<String>) -> EmbeddingError {
        EmbeddingError::Permanent { provider: self.id().to_string(), message: self.http.scrub(&message.into()) }
    }

    pub fn status_error(&self, e: HttpStatusError) -> EmbeddingError {
        e.into_embedding_error(self.id())
    }

    /// The JSON of a response, `context` naming what it was in the error (`"malformed response"`).
    pub fn parse(&self, bytes: &[u8], context: &str) -> Result<Value, EmbeddingError> {
        parse_json(bytes).map_err(|e| self.permanent(format!("{context}: {e}")))
    }

    /// POST a JSON body; the answer's JSON.
    pub async fn post(&self, url: &str, body: &Value) -> Result<Value, EmbeddingError> {
        match self.http.post_json(url, body).await? {
            Ok(bytes) => self.parse(&bytes, "malformed response"),
            Err(status) => Err(self.status_error(status)),
        }
    }

    /// POST a JSON body, leaving a non-retryable status to the caller.
    pub async fn post_raw(&self, url: &str, body: &Value) -> Result<Result<Vec<u8>, HttpStatusError>, EmbeddingError> {
        self.http.post_json(url, body).await
    }

    /// A request with any body (`(content type, bytes)`); the answer's bytes.
    pub async fn send(&self, method: reqwest::Method, url: &str, body: Option<(String, Vec<u8>)>) -> Result<Vec<u8>, EmbeddingError> {
        match self.http.send(method, url, body).await? {
            Ok(bytes) => Ok(bytes),
            Err(status) => Err(self.status_error(status)),
        }
    }

    /// GET `url` (batch status, file contents), with the same retries as a POST; the answer's bytes.
    pub async fn get(&self, url: &str) -> Result<Vec<u8>, EmbeddingError> {
        self.send(reqwest::Method::GET, url, None).await
    }

    /// A JSON array of numbers; `null` (how a non-finite value arrives) becomes NaN, zeroed later.
    pub fn floats(&self, v: &Value) -> Result<Vec<f32>, EmbeddingError> {
        let arr = v.as_array().ok_or_else(|| self.permanent("malformed response: an embedding is not an array"))?;
        arr.iter()
            .map(|x| match x {
                Value::Number(n) => n.as_f64().map(|f| f as f32).ok_or_else(|| self.permanent("malformed number")),
                Value::Null => Ok(f32::NAN),
                other => Err(self.permanent(format!("malformed response: `{}` in an embedding", truncate(&other.to_string(), 40)))),
            })
            .collect()
    }

    /// One vector per text, each checked by [`check_one`](Self::check_one).
    pub fn check(&self, mut vectors: Vec<Vec<f32>>, n: usize) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if vectors.len() != n {
            return Err(self.permanent(format!("returned {} vectors for {n} texts", vectors.len())));
        }
        for v in &mut vectors {
            self.check_one(v)?;
        }
        Ok(vectors)
    }

    /// One vector of the provider's width, sanitised and normalised in place.
    pub fn check_one(&self, v: &mut [f32]) -> Result<(), EmbeddingError> {
        if v.is_empty() {
            return Err(self.permanent("returned an empty vector"));
        }
        let want = match self.expected_dims {
            Some(d) => d,
            None => match self.learned_dims.compare_exchange(0, v.len(), Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => {
                    debug!(provider = self.id(), model = %self.model, dims = v.len(), "learnt vector width");
                    v.len()
                }
                Err(existing) => existing,
            },
        };
        if v.len() != want {
            return Err(self.permanent(format!("returned a vector of {} dimensions, expected {want} for model `{}`", v.len(), self.model)));
        }
        sanitize_and_normalize(v);
        Ok(())
    }
}

/// JSON, tolerating the bare `NaN` / `Infinity` / `-Infinity` some servers (Python's json module) emit: they
/// become `null`, which [`Client::floats`] turns into a zeroed value.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Ok(v),
        Err(first) => {
            let text = String::from_utf8_lossy(bytes);
            let fixed = replace_non_finite_literals(&text);
            if fixed == text {
                return Err(first.to_string());
            }
            serde_json::from_str::<Value>(&fixed).map_err(|_| first.to_string())
        }
    }
}

fn replace_non_finite_literals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        } else {
            let mut replaced = false;
            for lit in ["-Infinity", "Infinity", "NaN"] {
                if rest.starts_with(lit) {
                    out.push_str("null");
                    rest = &rest[lit.len()..];
                    replaced = true;
                    break;
                }
            }
            if replaced {
                continue;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_literals_become_null_outside_strings() {
        let t = r#"{"a":[1.0,NaN,-Infinity,Infinity],"s":"NaN \" Infinity"}"#;
        assert_eq!(replace_non_finite_literals(t), r#"{"a":[1.0,null,null,null],"s":"NaN \" Infinity"}"#);
        assert!(parse_json(b"{not json").is_err());
    }
}

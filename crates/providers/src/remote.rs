//! The HTTP embedding providers (SPEC §7): `openai`, `openai-compatible`, `gemini`, `voyage`, `mistral`, `ollama`.
//!
//! One type, [`RemoteProvider`], speaks each API's wire format; the shared part splits the texts into requests
//! by a token budget, runs a few requests at once, and checks every answer (one vector per text, in order, all of
//! the provider's width) before zeroing non-finite values and L2-normalising.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::{
    sanitize_and_normalize, BatchEmbedder, EmbeddingError, EmbeddingProvider, EmbeddingPurpose, MediaInput,
};
use serde_json::{json, Value};
use tokio::task::JoinSet;
use tracing::{debug, info};

use crate::batch::{BatchRunner, BatchSettings};
use crate::batching::{plan_batches, BatchLimits};
use crate::http::{join_url, truncate, ApiKey, HttpClient, HttpOptions, HttpStatusError};

/// Which HTTP API a [`RemoteProvider`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemoteKind {
    OpenAi,
    OpenAiCompatible,
    Gemini,
    Voyage,
    Mistral,
    Ollama,
}

impl RemoteKind {
    pub const ALL: [RemoteKind; 6] = [
        RemoteKind::OpenAi,
        RemoteKind::OpenAiCompatible,
        RemoteKind::Gemini,
        RemoteKind::Voyage,
        RemoteKind::Mistral,
        RemoteKind::Ollama,
    ];

    /// The provider id used in config (`memory.search.provider`) and in the index identity.
    pub fn id(self) -> &'static str {
        match self {
            RemoteKind::OpenAi => "openai",
            RemoteKind::OpenAiCompatible => "openai-compatible",
            RemoteKind::Gemini => "gemini",
            RemoteKind::Voyage => "voyage",
            RemoteKind::Mistral => "mistral",
            RemoteKind::Ollama => "ollama",
        }
    }

    pub fn from_id(id: &str) -> Option<Self> {
        RemoteKind::ALL.into_iter().find(|k| k.id() == id)
    }

    /// Default base URL (the path prefix the endpoint paths are joined to).
    pub fn default_base_url(self) -> &'static str {
        match self {
            RemoteKind::OpenAi => "https://api.openai.com/v1",
            RemoteKind::OpenAiCompatible => "http://127.0.0.1:1234/v1",
            RemoteKind::Gemini => "https://generativelanguage.googleapis.com/v1beta",
            RemoteKind::Voyage => "https://api.voyageai.com/v1",
            RemoteKind::Mistral => "https://api.mistral.ai/v1",
            RemoteKind::Ollama => "http://127.0.0.1:11434",
        }
    }

    /// Default model; `openai-compatible` has none (the server decides what it serves).
    pub fn default_model(self) -> Option<&'static str> {
        match self {
            RemoteKind::OpenAi => Some("text-embedding-3-small"),
            RemoteKind::OpenAiCompatible => None,
            RemoteKind::Gemini => Some("gemini-embedding-001"),
            RemoteKind::Voyage => Some("voyage-4-large"),
            RemoteKind::Mistral => Some("mistral-embed"),
            RemoteKind::Ollama => Some("nomic-embed-text"),
        }
    }

    /// Environment variable holding the API key.
    pub fn api_key_env(self) -> Option<&'static str> {
        match self {
            RemoteKind::OpenAi => Some("OPENAI_API_KEY"),
            RemoteKind::Gemini => Some("GEMINI_API_KEY"),
            RemoteKind::Voyage => Some("VOYAGE_API_KEY"),
            RemoteKind::Mistral => Some("MISTRAL_API_KEY"),
            RemoteKind::OpenAiCompatible | RemoteKind::Ollama => None,
        }
    }

    /// Whether a call without an API key is pointless.
    pub fn requires_api_key(self) -> bool {
        matches!(self, RemoteKind::OpenAi | RemoteKind::Gemini | RemoteKind::Voyage | RemoteKind::Mistral)
    }

    /// Texts per request the API accepts.
    fn max_items(self) -> usize {
        match self {
            RemoteKind::OpenAi => 2048,
            RemoteKind::Gemini => 100,
            RemoteKind::Voyage => 1000,
            RemoteKind::Mistral => 512,
            RemoteKind::OpenAiCompatible | RemoteKind::Ollama => 256,
        }
    }
}

impl fmt::Display for RemoteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Known vector widths of models (the API's default output size). Unknown models learn it from the first answer.
pub fn known_dimensions(kind: RemoteKind, model: &str) -> Option<usize> {
    let base = model.strip_prefix("models/").unwrap_or(model);
    let base = if kind == RemoteKind::Ollama { base.split(':').next().unwrap_or(base) } else { base };
    let dims = match (kind, base) {
        (RemoteKind::OpenAi, "text-embedding-3-small") => 1536,
        (RemoteKind::OpenAi, "text-embedding-3-large") => 3072,
        (RemoteKind::OpenAi, "text-embedding-ada-002") => 1536,
        (RemoteKind::Gemini, "gemini-embedding-001") => 3072,
        (RemoteKind::Gemini, "gemini-embedding-2-preview") => 3072,
        (RemoteKind::Gemini, "text-embedding-004") => 768,
        (RemoteKind::Voyage, "voyage-4-large" | "voyage-4" | "voyage-4-lite" | "voyage-3-large" | "voyage-3.5") => 1024,
        (RemoteKind::Mistral, "mistral-embed") => 1024,
        (RemoteKind::Ollama, "nomic-embed-text") => 768,
        (RemoteKind::Ollama, "mxbai-embed-large") => 1024,
        (RemoteKind::Ollama, "all-minilm") => 384,
        _ => return None,
    };
    Some(dims)
}

/// Everything a [`RemoteProvider`] is built from. `Debug` shows header names only.
#[derive(Clone, Default)]
pub struct RemoteSettings {
    /// Model; `None` for the kind's default (required for `openai-compatible`).
    pub model: Option<String>,
    /// Base URL; `None` for the kind's default.
    pub base_url: Option<String>,
    pub api_key: Option<ApiKey>,
    /// Extra request headers (for example OpenRouter's `HTTP-Referer`). Values are treated as secrets.
    pub headers: BTreeMap<String, String>,
    /// Expected vector width, for models not in [`known_dimensions`]; otherwise learnt from the first answer.
    pub dimensions: Option<usize>,
    /// `openai-compatible` only: send `input_type: "query" | "document"` (servers that embed them differently).
    pub send_input_type: bool,
    /// `memory.search.queryInputType` / `documentInputType` (each falling back to `inputType`): the
    /// `input_type` sent by OpenAI-like APIs (Voyage, OpenAI, compatible servers) or Gemini's `taskType`.
    pub query_input_type: Option<String>,
    pub document_input_type: Option<String>,
    pub http: HttpOptions,
    /// `None` for the defaults (8,000 estimated tokens, the API's item cap, 4 in flight).
    pub limits: Option<BatchLimits>,
    /// Provider batch jobs for large backfills (`openai`, `gemini`, `voyage`); `None` for synchronous calls only.
    pub batch: Option<BatchSettings>,
    /// Ask for vectors of this width: Gemini's `outputDimensionality` (e.g. 768 / 1536 / 3072 for
    /// `gemini-embedding-2-preview`), OpenAI's and compatible servers' `dimensions`.
    pub output_dimensionality: Option<usize>,
}

impl fmt::Debug for RemoteSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSettings")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("header_names", &self.headers.keys().collect::<Vec<_>>())
            .field("dimensions", &self.dimensions)
            .field("send_input_type", &self.send_input_type)
            .field("query_input_type", &self.query_input_type)
            .field("document_input_type", &self.document_input_type)
            .field("http", &self.http)
            .field("limits", &self.limits)
            .field("batch", &self.batch)
            .field("output_dimensionality", &self.output_dimensionality)
            .finish()
    }
}

pub(crate) enum Wire {
    /// OpenAI's `POST {base}/embeddings {model, input}`; also Mistral, Voyage and compatible servers.
    OpenAiLike { url: String, input_type: InputTypes, dimensions: Option<usize> },
    /// `models/{m}:embedContent` for one text, `:batchEmbedContents` for several.
    Gemini { single_url: String, batch_url: String, model_ref: String, output_dims: Option<usize>, tasks: InputTypes },
    /// `/api/embed {model, input}`; `/api/embeddings {model, prompt}` once the server turned out to be older.
    Ollama { embed_url: String, legacy_url: String, legacy: AtomicBool },
}

/// What a request says it embeds, per purpose; `None`: nothing is sent for that purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InputTypes {
    pub query: Option<String>,
    pub document: Option<String>,
}

impl InputTypes {
    fn new(query: Option<&str>, document: Option<&str>) -> Self {
        let clean = |s: Option<&str>| s.map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
        InputTypes { query: clean(query), document: clean(document) }
    }

    fn or(self, query: &str, document: &str) -> Self {
        InputTypes { query: self.query.or(Some(query.into())), document: self.document.or(Some(document.into())) }
    }

    pub(crate) fn for_purpose(&self, purpose: EmbeddingPurpose) -> Option<&str> {
        match purpose {
            EmbeddingPurpose::Query => self.query.as_deref(),
            EmbeddingPurpose::Document => self.document.as_deref(),
        }
    }
}

pub(crate) struct Inner {
    pub(crate) kind: RemoteKind,
    pub(crate) model: String,
    wire: Wire,
    pub(crate) http: HttpClient,
    expected_dims: Option<usize>,
    learned_dims: AtomicUsize,
    limits: BatchLimits,
    pub(crate) fingerprint: String,
    pub(crate) base_url: String,
    /// `gemini`: the `outputDimensionality` sent with every request.
    pub(crate) output_dims: Option<usize>,
}

/// An HTTP embedding provider. Cheap to clone (shared state).
#[derive(Clone)]
pub struct RemoteProvider {
    inner: Arc<Inner>,
    batch: Option<Arc<BatchRunner>>,
}

impl fmt::Debug for RemoteProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteProvider")
            .field("provider", &self.inner.kind.id())
            .field("model", &self.inner.model)
            .field("base_url", &self.inner.base_url)
            .field("dimensions", &self.dimensions())
            .field("limits", &self.inner.limits)
            .field("http", &self.inner.http)
            .finish()
    }
}

impl RemoteProvider {
    pub fn new(kind: RemoteKind, settings: RemoteSettings) -> Result<Self, EmbeddingError> {
        let not_configured =
            |message: String| EmbeddingError::NotConfigured { provider: kind.id().to_string(), message };
        let model = match settings.model.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => kind
                .default_model()
                .ok_or_else(|| not_configured("a model name is required (memory.search.model)".into()))?
                .to_string(),
        };
        if kind.requires_api_key() && settings.api_key.is_none() {
            let env = kind.api_key_env().unwrap_or("");
            return Err(not_configured(format!(
                "no API key (memory.search.remote.apiKey, models.providers.{}.apiKey or {env})",
                kind.id()
            )));
        }
        let base_url = settings
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .unwrap_or(kind.default_base_url())
            .trim_end_matches('/')
            .to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(not_configured(format!("base URL `{base_url}` must start with http:// or https://")));
        }
        let auth = match (&settings.api_key, kind) {
            (None, _) => Vec::new(),
            (Some(k), RemoteKind::Gemini) => vec![("x-goog-api-key", k.expose().to_string())],
            (Some(k), _) => vec![("authorization", format!("Bearer {}", k.expose()))],
        };
        let http = HttpClient::new(kind.id(), auth, &settings.headers, settings.http.clone())?;
        let model_ref = model.strip_prefix("models/").unwrap_or(&model).to_string();
        let configured = InputTypes::new(settings.query_input_type.as_deref(), settings.document_input_type.as_deref());
        let url = join_url(&base_url, "embeddings");
        let dims = settings.output_dimensionality;
        let wire = match kind {
            RemoteKind::Gemini => Wire::Gemini {
                single_url: join_url(&base_url, &format!("models/{model_ref}:embedContent")),
                batch_url: join_url(&base_url, &format!("models/{model_ref}:batchEmbedContents")),
                model_ref: format!("models/{model_ref}"),
                output_dims: settings.output_dimensionality,
                tasks: configured.clone().or("RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT"),
            },
            RemoteKind::Ollama => Wire::Ollama {
                embed_url: join_url(&base_url, "api/embed"),
                legacy_url: join_url(&base_url, "api/embeddings"),
                legacy: AtomicBool::new(false),
            },
            RemoteKind::Voyage => Wire::OpenAiLike { url, input_type: configured.or("query", "document"), dimensions: None },
            RemoteKind::OpenAiCompatible => {
                let input_type = if settings.send_input_type { configured.or("query", "document") } else { configured };
                Wire::OpenAiLike { url, input_type, dimensions: dims }
            }
            RemoteKind::OpenAi => Wire::OpenAiLike { url, input_type: configured, dimensions: dims },
            RemoteKind::Mistral => Wire::OpenAiLike { url, input_type: InputTypes::default(), dimensions: None },
        };
        let output_dims = if kind == RemoteKind::Gemini { settings.output_dimensionality } else { None };
        let dims_asked = if kind == RemoteKind::Gemini { output_dims } else if let Wire::OpenAiLike { dimensions, .. } = &wire { *dimensions } else { None };
        let expected_dims = settings.dimensions.or(dims_asked).or_else(|| known_dimensions(kind, &model));
        let mut limits = settings.limits.unwrap_or(BatchLimits { max_items: kind.max_items(), ..BatchLimits::default() });
        limits.max_items = limits.max_items.clamp(1, kind.max_items());
        limits.concurrency = limits.concurrency.max(1);
        let fingerprint = fingerprint(kind, &model, expected_dims, &base_url, &wire);
        let inner = Arc::new(Inner {
            kind,
            model,
            wire,
            http,
            expected_dims,
            learned_dims: AtomicUsize::new(0),
            limits,
            fingerprint,
            base_url,
            output_dims,
        });
        let batch = match settings.batch {
            Some(b) if BatchRunner::supports(kind) => Some(Arc::new(BatchRunner::new(inner.clone(), b))),
            Some(_) => {
                tracing::warn!(provider = kind.id(), "memory.search.remote.batch: this provider has no batch API; using synchronous requests");
                None
            }
            None => None,
        };
        Ok(RemoteProvider { inner, batch })
    }

    pub fn kind(&self) -> RemoteKind {
        self.inner.kind
    }

    pub fn base_url(&self) -> &str {
        &self.inner.base_url
    }

    pub fn limits(&self) -> BatchLimits {
        self.inner.limits
    }
}

/// What changes vectors: provider, model, width, and how queries and documents are told apart. The base URL
/// counts for self-hosted servers (`openai-compatible`, `ollama`: another server may serve another model under
/// the same name) but not for the vendors' APIs (a proxy in front of OpenAI serves the same vectors). Keys and
/// headers never enter it.
fn fingerprint(kind: RemoteKind, model: &str, dims: Option<usize>, base_url: &str, wire: &Wire) -> String {
    let dims = dims.map(|d| d.to_string()).unwrap_or_else(|| "auto".into());
    let mut s = format!("v1;provider={};model={};dims={dims}", kind.id(), model);
    match wire {
        // The historical form for the default types, so existing indexes keep their identity.
        Wire::OpenAiLike { input_type, .. } if *input_type == InputTypes::new(Some("query"), Some("document")) => {
            s.push_str(";input_type=query/document")
        }
        Wire::OpenAiLike { input_type: InputTypes { query: None, document: None }, .. } => {}
        Wire::OpenAiLike { input_type, .. } => s.push_str(&format!(
            ";input_type={}/{}",
            input_type.query.as_deref().unwrap_or("-"),
            input_type.document.as_deref().unwrap_or("-")
        )),
        Wire::Gemini { tasks, .. } => s.push_str(&format!(
            ";taskType={}/{}",
            tasks.query.as_deref().unwrap_or(""),
            tasks.document.as_deref().unwrap_or("")
        )),
        _ => {}
    }
    if matches!(kind, RemoteKind::OpenAiCompatible | RemoteKind::Ollama) {
        s.push_str(";base=");
        s.push_str(base_url);
    }
    memory_core::sha256_hex(s.as_bytes())
}

impl Inner {
    pub(crate) fn permanent(&self, message: impl Into<String>) -> EmbeddingError {
        EmbeddingError::Permanent { provider: self.kind.id().to_string(), message: self.http.scrub(&message.into()) }
    }

    pub(crate) fn status_error(&self, e: HttpStatusError) -> EmbeddingError {
        e.into_embedding_error(self.kind.id())
    }

    pub(crate) async fn post(&self, url: &str, body: &Value) -> Result<Value, EmbeddingError> {
        match self.http.post_json(url, body).await? {
            Ok(bytes) => parse_json(&bytes).map_err(|e| self.permanent(format!("malformed response: {e}"))),
            Err(status) => Err(self.status_error(status)),
        }
    }

    /// One request's worth of texts to raw vectors, in input order.
    async fn call(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        match &self.wire {
            Wire::OpenAiLike { url, input_type, dimensions } => {
                let mut body = json!({ "model": self.model, "input": texts });
                if let Some(d) = dimensions {
                    body["dimensions"] = json!(d);
                }
                if let Some(t) = input_type.for_purpose(purpose) {
                    body["input_type"] = json!(t);
                }
                let v = self.post(url, &body).await?;
                self.parse_openai(&v, texts.len())
            }
            Wire::Gemini { single_url, batch_url, model_ref, output_dims, tasks } => {
                let task = tasks.for_purpose(purpose).unwrap_or("RETRIEVAL_DOCUMENT");
                let request = |t: &String| {
                    let mut r = json!({ "model": model_ref, "content": { "parts": [{ "text": t }] }, "taskType": task });
                    if let Some(d) = output_dims {
                        r["outputDimensionality"] = json!(d);
                    }
                    r
                };
                if texts.len() == 1 {
                    let v = self.post(single_url, &request(&texts[0])).await?;
                    let values = v
                        .get("embedding")
                        .and_then(|e| e.get("values"))
                        .ok_or_else(|| self.permanent("malformed response: no `embedding.values`"))?;
                    Ok(vec![self.floats(values)?])
                } else {
                    let body = json!({ "requests": texts.iter().map(request).collect::<Vec<_>>() });
                    let v = self.post(batch_url, &body).await?;
                    let list = v
                        .get("embeddings")
                        .and_then(Value::as_array)
                        .ok_or_else(|| self.permanent("malformed response: no `embeddings` array"))?;
                    list.iter()
                        .map(|e| {
                            let values = e
                                .get("values")
                                .ok_or_else(|| self.permanent("malformed response: an embedding has no `values`"))?;
                            self.floats(values)
                        })
                        .collect()
                }
            }
            Wire::Ollama { embed_url, legacy_url, legacy } => {
                if !legacy.load(Ordering::Relaxed) {
                    let body = json!({ "model": self.model, "input": texts });
                    match self.http.post_json(embed_url, &body).await? {
                        Ok(bytes) => {
                            let v = parse_json(&bytes).map_err(|e| self.permanent(format!("malformed response: {e}")))?;
                            let list = v
                                .get("embeddings")
                                .and_then(Value::as_array)
                                .ok_or_else(|| self.permanent("malformed response: no `embeddings` array"))?;
                            return list.iter().map(|e| self.floats(e)).collect();
                        }
                        Err(e) if e.status == 404 && !is_missing_model(&e) => {
                            info!(url = %embed_url, "ollama has no /api/embed; using the older /api/embeddings");
                            legacy.store(true, Ordering::Relaxed);
                        }
                        Err(e) if e.status == 404 => {
                            return Err(self.permanent(format!(
                                "model `{}` not found on the server ({}); pull it first (`ollama pull {}`)",
                                self.model,
                                e.message(),
                                self.model
                            )))
                        }
                        Err(e) => return Err(self.status_error(e)),
                    }
                }
                let mut out = Vec::with_capacity(texts.len());
                for t in texts {
                    let v = self.post(legacy_url, &json!({ "model": self.model, "prompt": t })).await?;
                    let values =
                        v.get("embedding").ok_or_else(|| self.permanent("malformed response: no `embedding`"))?;
                    out.push(self.floats(values)?);
                }
                Ok(out)
            }
        }
    }

    /// `{data: [{embedding, index}]}`, ordered by `index` when every item has one.
    fn parse_openai(&self, v: &Value, n: usize) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| self.permanent("malformed response: no `data` array"))?;
        if data.len() != n {
            return Err(self.permanent(format!("returned {} vectors for {n} texts", data.len())));
        }
        let indices: Option<Vec<usize>> =
            data.iter().map(|d| d.get("index").and_then(Value::as_u64).map(|i| i as usize)).collect();
        let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
        for (pos, d) in data.iter().enumerate() {
            let slot = match &indices {
                Some(ix) => ix[pos],
                None => pos,
            };
            let values = d
                .get("embedding")
                .ok_or_else(|| self.permanent("malformed response: an item has no `embedding`"))?;
            let cell = out
                .get_mut(slot)
                .ok_or_else(|| self.permanent(format!("response index {slot} out of range for {n} texts")))?;
            if cell.is_some() {
                return Err(self.permanent(format!("response index {slot} appears twice")));
            }
            *cell = Some(self.floats(values)?);
        }
        Ok(out.into_iter().map(|v| v.unwrap_or_default()).collect())
    }

    /// A JSON array of numbers; `null` (how a non-finite value arrives) becomes NaN, zeroed later.
    pub(crate) fn floats(&self, v: &Value) -> Result<Vec<f32>, EmbeddingError> {
        let arr = v.as_array().ok_or_else(|| self.permanent("malformed response: an embedding is not an array"))?;
        arr.iter()
            .map(|x| match x {
                Value::Number(n) => n.as_f64().map(|f| f as f32).ok_or_else(|| self.permanent("malformed number")),
                Value::Null => Ok(f32::NAN),
                other => Err(self.permanent(format!("malformed response: `{}` in an embedding", truncate(&other.to_string(), 40)))),
            })
            .collect()
    }

    /// One vector per text, all of the provider's width; then sanitised and normalised.
    fn check(&self, mut vectors: Vec<Vec<f32>>, n: usize) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if vectors.len() != n {
            return Err(self.permanent(format!("returned {} vectors for {n} texts", vectors.len())));
        }
        for v in vectors.iter_mut() {
            self.check_one(v)?;
        }
        Ok(vectors)
    }

    /// One vector of the provider's width, sanitised and normalised in place.
    pub(crate) fn check_one(&self, v: &mut [f32]) -> Result<(), EmbeddingError> {
        if v.is_empty() {
            return Err(self.permanent("returned an empty vector"));
        }
        let want = match self.expected_dims {
            Some(d) => d,
            None => match self.learned_dims.compare_exchange(0, v.len(), Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => {
                    debug!(provider = self.kind.id(), model = %self.model, dims = v.len(), "learnt vector width");
                    v.len()
                }
                Err(existing) => existing,
            },
        };
        if v.len() != want {
            return Err(self.permanent(format!(
                "returned a vector of {} dimensions, expected {want} for model `{}`",
                v.len(),
                self.model
            )));
        }
        sanitize_and_normalize(v);
        Ok(())
    }

    async fn embed_range(self: Arc<Self>, texts: Arc<Vec<String>>, range: std::ops::Range<usize>, purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let slice = &texts[range.clone()];
        debug!(provider = self.kind.id(), texts = slice.len(), "embedding request");
        let raw = self.call(slice, purpose).await?;
        self.check(raw, slice.len())
    }
}

/// Models that embed images and audio beside text.
pub fn is_multimodal_model(model: &str) -> bool {
    let m = model.strip_prefix("models/").unwrap_or(model);
    memory_core::config::MULTIMODAL_MODELS.contains(&m)
}

/// Standard base64 with padding (RFC 4648), for inline media.
pub(crate) fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn is_missing_model(e: &HttpStatusError) -> bool {
    let m = e.message().to_lowercase();
    m.contains("model") && (m.contains("not found") || m.contains("pull"))
}

/// JSON, tolerating the bare `NaN` / `Infinity` / `-Infinity` some servers (Python's json module) emit: they
/// become `null`, which [`Inner::floats`] turns into a zeroed value.
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

#[async_trait]
impl EmbeddingProvider for RemoteProvider {
    fn id(&self) -> &str {
        self.inner.kind.id()
    }

    fn model(&self) -> &str {
        &self.inner.model
    }

    fn dimensions(&self) -> Option<usize> {
        self.inner.expected_dims.or_else(|| match self.inner.learned_dims.load(Ordering::SeqCst) {
            0 => None,
            d => Some(d),
        })
    }

    fn fingerprint(&self) -> String {
        self.inner.fingerprint.clone()
    }

    fn batch(&self) -> Option<&dyn BatchEmbedder> {
        self.batch.as_deref().map(|b| b as &dyn BatchEmbedder)
    }

    fn supports_media(&self) -> bool {
        self.inner.kind == RemoteKind::Gemini && is_multimodal_model(&self.inner.model)
    }

    /// Gemini `models/{m}:embedContent` with `content.parts[{inline_data: {mime_type, data}}]` (base64), one
    /// request per file (files are large; a few in flight).
    async fn embed_media(&self, media: &[MediaInput]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let Wire::Gemini { single_url, model_ref, output_dims, .. } = &self.inner.wire else {
            return Err(self.inner.permanent("this provider does not embed images or audio"));
        };
        if !self.supports_media() {
            return Err(EmbeddingError::NotConfigured {
                provider: self.id().to_string(),
                message: format!("model `{}` does not embed images or audio (use gemini-embedding-2-preview)", self.inner.model),
            });
        }
        let mut out = Vec::with_capacity(media.len());
        for m in media {
            let mut body = json!({
                "model": model_ref,
                "content": { "parts": [{ "inline_data": { "mime_type": m.mime_type, "data": base64(&m.data) } }] },
                "taskType": "RETRIEVAL_DOCUMENT",
            });
            if let Some(d) = output_dims {
                body["outputDimensionality"] = json!(d);
            }
            let v = self.inner.post(single_url, &body).await?;
            let values = v
                .get("embedding")
                .and_then(|e| e.get("values"))
                .ok_or_else(|| self.inner.permanent("malformed response: no `embedding.values`"))?;
            let mut vector = self.inner.floats(values)?;
            self.inner.check_one(&mut vector)?;
            out.push(vector);
        }
        Ok(out)
    }

    async fn embed(&self, texts: &[String], purpose: EmbeddingPurpose) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let plan = plan_batches(texts, &self.inner.limits);
        let shared = Arc::new(texts.to_vec());
        if plan.len() == 1 {
            return self.inner.clone().embed_range(shared, plan[0].clone(), purpose).await;
        }
        debug!(provider = self.id(), texts = texts.len(), requests = plan.len(), "embedding in batches");
        let mut results: Vec<Option<Vec<Vec<f32>>>> = vec![None; plan.len()];
        let mut set = JoinSet::new();
        let mut next = 0;
        loop {
            while next < plan.len() && set.len() < self.inner.limits.concurrency {
                let (inner, texts, range, idx) = (self.inner.clone(), shared.clone(), plan[next].clone(), next);
                set.spawn(async move { (idx, inner.embed_range(texts, range, purpose).await) });
                next += 1;
            }
            match set.join_next().await {
                None => break,
                Some(Ok((idx, Ok(vectors)))) => results[idx] = Some(vectors),
                Some(Ok((_, Err(e)))) => {
                    set.abort_all();
                    return Err(e);
                }
                Some(Err(join)) => {
                    set.abort_all();
                    return Err(self.inner.permanent(format!("embedding task failed: {join}")));
                }
            }
        }
        let mut out = Vec::with_capacity(texts.len());
        for r in results {
            out.extend(r.ok_or_else(|| self.inner.permanent("a batch produced no result"))?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, want) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(base64(input.as_bytes()), want);
        }
        assert_eq!(base64(&[0xff, 0xfe, 0x00]), "//4A");
    }

    #[test]
    fn non_finite_literals_become_null_outside_strings() {
        let t = r#"{"a":[1.0,NaN,-Infinity,Infinity],"s":"NaN \" Infinity"}"#;
        assert_eq!(replace_non_finite_literals(t), r#"{"a":[1.0,null,null,null],"s":"NaN \" Infinity"}"#);
        assert!(parse_json(b"{not json").is_err());
    }

    #[test]
    fn fingerprint_depends_on_what_changes_vectors_only() {
        let mk = |kind, model: &str, base: &str, key: &str| {
            RemoteProvider::new(
                kind,
                RemoteSettings {
                    model: Some(model.into()),
                    base_url: Some(base.into()),
                    api_key: ApiKey::new(key),
                    ..Default::default()
                },
            )
            .unwrap()
            .fingerprint()
        };
        let a = mk(RemoteKind::OpenAi, "text-embedding-3-small", "https://api.openai.com/v1", "k1");
        assert_eq!(a, mk(RemoteKind::OpenAi, "text-embedding-3-small", "https://proxy.example/v1", "k2"));
        assert_ne!(a, mk(RemoteKind::OpenAi, "text-embedding-3-large", "https://api.openai.com/v1", "k1"));
        let c1 = mk(RemoteKind::OpenAiCompatible, "m", "http://127.0.0.1:1234/v1", "");
        assert_ne!(c1, mk(RemoteKind::OpenAiCompatible, "m", "http://127.0.0.1:8000/v1", ""));
    }

    #[test]
    fn missing_key_and_model_are_not_configured() {
        let e = RemoteProvider::new(RemoteKind::Voyage, RemoteSettings::default()).unwrap_err();
        assert!(matches!(e, EmbeddingError::NotConfigured { .. }), "{e}");
        assert!(e.to_string().contains("VOYAGE_API_KEY"));
        let e = RemoteProvider::new(RemoteKind::OpenAiCompatible, RemoteSettings::default()).unwrap_err();
        assert!(e.to_string().contains("memory.search.model"), "{e}");
    }
}

//! The HTTP embedding providers: every entry of [`crate::catalogue`].
//!
//! One type, [`RemoteProvider`], speaks each provider's wire protocol through `crate::wire`; the shared part
//! splits the texts into requests by a token budget, runs a few requests at once, and checks every answer (one
//! vector per text, in order, all of the provider's width) before zeroing non-finite values and L2-normalising.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use memory_core::embedding::{BatchEmbedder, EmbeddingError, EmbeddingProvider, EmbeddingPurpose, MediaInput};
use tokio::task::JoinSet;
use tracing::debug;

use crate::batch::{BatchRunner, BatchSettings};
use crate::batching::{plan_batches, BatchLimits};
use crate::catalogue::Provider;
use crate::client::Client;
use crate::http::{ApiKey, HttpClient, HttpOptions};
use crate::wire::{self, InputTypes, Wire, WireSettings};

/// Everything a [`RemoteProvider`] is built from. `Debug` shows header names only.
#[derive(Clone, Default)]
pub struct RemoteSettings {
    /// Model; `None` for the provider's default (required when it has none, as `openai-compatible`).
    pub model: Option<String>,
    /// Base URL; `None` for the provider's default.
    pub base_url: Option<String>,
    pub api_key: Option<ApiKey>,
    /// Extra request headers (for example OpenRouter's `HTTP-Referer`). Values are treated as secrets.
    pub headers: BTreeMap<String, String>,
    /// Expected vector width, for models not in the catalogue ([`Provider::dimensions`]); otherwise learnt from
    /// the first answer.
    pub dimensions: Option<usize>,
    /// Send the provider's [`OnRequest`](crate::catalogue::InputTypeRule::OnRequest) input types
    /// (`openai-compatible`: `input_type: "query" | "document"`, for servers that embed them differently).
    pub send_input_type: bool,
    /// `memory.search.queryInputType` / `documentInputType` (each falling back to `inputType`): the
    /// `input_type` sent by OpenAI-like APIs or Gemini's `taskType`, as the provider's
    /// [`InputTypeRule`](crate::catalogue::InputTypeRule) says.
    pub query_input_type: Option<String>,
    pub document_input_type: Option<String>,
    pub http: HttpOptions,
    /// `None` for the defaults (8,000 estimated tokens, the API's item cap, 4 in flight).
    pub limits: Option<BatchLimits>,
    /// Provider batch jobs for large backfills (providers with a [`Provider::batch`] API); `None` for synchronous
    /// calls only.
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

struct Inner {
    client: Arc<Client>,
    wire: Box<dyn Wire>,
    limits: BatchLimits,
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
            .field("provider", &self.inner.client.id())
            .field("model", &self.inner.client.model())
            .field("base_url", &self.inner.client.base_url())
            .field("dimensions", &self.dimensions())
            .field("limits", &self.inner.limits)
            .field("http", self.inner.client.http())
            .finish()
    }
}

impl RemoteProvider {
    pub fn new(provider: &'static Provider, settings: RemoteSettings) -> Result<Self, EmbeddingError> {
        let id = provider.reported_id();
        let not_configured = |message: String| EmbeddingError::NotConfigured { provider: id.to_string(), message };
        let model = match settings.model.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
            Some(m) => m.to_string(),
            None => provider.default_model.ok_or_else(|| not_configured("a model name is required (memory.search.model)".into()))?.to_string(),
        };
        if provider.key_required && settings.api_key.is_none() {
            let env = provider.key_env.unwrap_or("");
            return Err(not_configured(format!("no API key (memory.search.remote.apiKey, models.providers.{id}.apiKey or {env})")));
        }
        let base_url =
            settings.base_url.as_deref().map(str::trim).filter(|b| !b.is_empty()).unwrap_or(provider.base_url).trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(not_configured(format!("base URL `{base_url}` must start with http:// or https://")));
        }
        let auth = settings.api_key.iter().map(|k| wire::auth_header(provider.protocol, k.expose())).collect();
        let http = HttpClient::new(id, auth, &settings.headers, settings.http.clone())?;
        let output_dims = settings.output_dimensionality.filter(|_| provider.sends_dimensions);
        let input_types = InputTypes::resolve(
            provider.input_types,
            settings.query_input_type.as_deref(),
            settings.document_input_type.as_deref(),
            settings.send_input_type,
        );
        let wire = wire::build(provider.protocol, WireSettings { base_url: &base_url, model: &model, input_types, output_dims });
        let mut limits = settings.limits.unwrap_or(BatchLimits { max_items: provider.max_items, ..BatchLimits::default() });
        limits.max_items = limits.max_items.clamp(1, provider.max_items);
        limits.concurrency = limits.concurrency.max(1);
        let client = Client::new(provider, model, base_url, http).with_widths(output_dims, settings.dimensions);
        let client = Arc::new(client.with_fingerprint(wire.as_ref()));
        let batch = match (settings.batch, provider.batch) {
            (Some(b), Some(protocol)) => Some(Arc::new(BatchRunner::new(client.clone(), protocol, b))),
            (Some(_), None) => {
                tracing::warn!(provider = id, "memory.search.remote.batch: this provider has no batch API; using synchronous requests");
                None
            }
            (None, _) => None,
        };
        Ok(RemoteProvider { inner: Arc::new(Inner { client, wire, limits }), batch })
    }

    /// The provider's catalogue entry.
    pub fn entry(&self) -> &'static Provider {
        self.inner.client.provider()
    }

    pub fn base_url(&self) -> &str {
        self.inner.client.base_url()
    }

    pub fn limits(&self) -> BatchLimits {
        self.inner.limits
    }
}

impl Inner {
    async fn embed_range(
        self: Arc<Self>,
        texts: Arc<Vec<String>>,
        range: std::ops::Range<usize>,
        purpose: EmbeddingPurpose,
    ) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let slice = &texts[range.clone()];
        debug!(provider = self.client.id(), texts = slice.len(), "embedding request");
        let raw = self.wire.embed(&self.client, slice, purpose).await?;
        self.client.check(raw, slice.len())
    }
}

#[async_trait]
impl EmbeddingProvider for RemoteProvider {
    fn id(&self) -> &str {
        self.inner.client.id()
    }

    fn model(&self) -> &str {
        self.inner.client.model()
    }

    fn dimensions(&self) -> Option<usize> {
        self.inner.client.dimensions()
    }

    fn fingerprint(&self) -> String {
        self.inner.client.fingerprint().to_string()
    }

    fn batch(&self) -> Option<&dyn BatchEmbedder> {
        self.batch.as_deref().map(|b| b as &dyn BatchEmbedder)
    }

    /// The requests these texts take, in waves of `concurrency`, each at most the request timeout.
    fn call_timeout(&self, texts: &[String]) -> Option<std::time::Duration> {
        let requests = plan_batches(texts, &self.inner.limits).len().max(1);
        let waves = requests.div_ceil(self.inner.limits.concurrency.max(1));
        Some(self.inner.client.http().options().request_timeout.saturating_mul(waves as u32))
    }

    fn supports_media(&self) -> bool {
        self.inner.wire.embeds_media(self.model())
    }

    /// Images and audio, over protocols that embed them (Gemini's multimodal models).
    async fn embed_media(&self, media: &[MediaInput]) -> Result<Vec<Vec<f32>>, EmbeddingError> {
        let raw = self.inner.wire.embed_media(&self.inner.client, media).await?;
        self.inner.client.check(raw, media.len())
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
                    return Err(self.inner.client.permanent(format!("embedding task failed: {join}")));
                }
            }
        }
        let mut out = Vec::with_capacity(texts.len());
        for r in results {
            out.extend(r.ok_or_else(|| self.inner.client.permanent("a batch produced no result"))?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::get;

    #[test]
    fn fingerprint_depends_on_what_changes_vectors_only() {
        let mk = |kind, model: &str, base: &str, key: &str| {
            RemoteProvider::new(
                kind,
                RemoteSettings { model: Some(model.into()), base_url: Some(base.into()), api_key: ApiKey::new(key), ..Default::default() },
            )
            .unwrap()
            .fingerprint()
        };
        let a = mk(get("openai").unwrap(), "text-embedding-3-small", "https://api.openai.com/v1", "k1");
        assert_eq!(a, mk(get("openai").unwrap(), "text-embedding-3-small", "https://proxy.example/v1", "k2"));
        assert_ne!(a, mk(get("openai").unwrap(), "text-embedding-3-large", "https://api.openai.com/v1", "k1"));
        let c1 = mk(get("openai-compatible").unwrap(), "m", "http://127.0.0.1:1234/v1", "");
        assert_ne!(c1, mk(get("openai-compatible").unwrap(), "m", "http://127.0.0.1:8000/v1", ""));
    }

    /// Fingerprints are index identities: they keep the exact text they had before the catalogue, so no index
    /// is rebuilt by this code's shape.
    #[test]
    fn fingerprints_keep_their_historical_text() {
        let none = |_: &mut RemoteSettings| {};
        let typed = |s: &mut RemoteSettings| {
            s.query_input_type = Some("search_query".into());
            s.document_input_type = Some("search_document".into());
        };
        let model = |s: &mut RemoteSettings| s.model = Some("m".into());
        let on_request = |s: &mut RemoteSettings| {
            model(s);
            s.send_input_type = true;
        };
        let query_only = |s: &mut RemoteSettings| {
            model(s);
            s.query_input_type = Some("q".into());
        };
        let width = |s: &mut RemoteSettings| s.output_dimensionality = Some(256);
        let lm = "base=http://127.0.0.1:1234/v1";
        type Case<'a> = (&'a str, &'a dyn Fn(&mut RemoteSettings), String);
        let cases: [Case; 13] = [
            ("openai", &none, "provider=openai;model=text-embedding-3-small;dims=1536".into()),
            ("openai", &typed, "provider=openai;model=text-embedding-3-small;dims=1536;input_type=search_query/search_document".into()),
            ("openai", &width, "provider=openai;model=text-embedding-3-small;dims=256".into()),
            ("openai-compatible", &model, format!("provider=openai-compatible;model=m;dims=auto;{lm}")),
            ("openai-compatible", &on_request, format!("provider=openai-compatible;model=m;dims=auto;input_type=query/document;{lm}")),
            ("openai-compatible", &query_only, format!("provider=openai-compatible;model=m;dims=auto;input_type=q/-;{lm}")),
            ("lmstudio", &model, format!("provider=openai-compatible;model=m;dims=auto;{lm}")),
            ("deepinfra", &model, "provider=openai-compatible;model=m;dims=auto;base=https://api.deepinfra.com/v1/openai".into()),
            ("gemini", &none, "provider=gemini;model=gemini-embedding-001;dims=3072;taskType=RETRIEVAL_QUERY/RETRIEVAL_DOCUMENT".into()),
            ("gemini", &typed, "provider=gemini;model=gemini-embedding-001;dims=3072;taskType=search_query/search_document".into()),
            ("voyage", &none, "provider=voyage;model=voyage-4-large;dims=1024;input_type=query/document".into()),
            ("mistral", &typed, "provider=mistral;model=mistral-embed;dims=1024".into()),
            ("ollama", &typed, "provider=ollama;model=nomic-embed-text;dims=768;base=http://127.0.0.1:11434".into()),
        ];
        for (id, settings, text) in cases {
            let mut s = RemoteSettings { api_key: ApiKey::new("k"), ..Default::default() };
            settings(&mut s);
            let got = RemoteProvider::new(get(id).unwrap(), s).unwrap().fingerprint();
            assert_eq!(got, memory_core::sha256_hex(format!("v1;{text}").as_bytes()), "{id}: v1;{text}");
        }
    }

    #[test]
    fn missing_key_and_model_are_not_configured() {
        let e = RemoteProvider::new(get("voyage").unwrap(), RemoteSettings::default()).unwrap_err();
        assert!(matches!(e, EmbeddingError::NotConfigured { .. }), "{e}");
        assert!(e.to_string().contains("VOYAGE_API_KEY"));
        let e = RemoteProvider::new(get("openai-compatible").unwrap(), RemoteSettings::default()).unwrap_err();
        assert!(e.to_string().contains("memory.search.model"), "{e}");
    }
}

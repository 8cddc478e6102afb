//! The remote embedding providers: one [`Provider`] entry each, the single place that says what a provider is
//! (its wire protocol, default model and known widths, keys, base URL, how it tells queries from documents,
//! its batch API). [`crate::remote`], `crate::resolve` and [`crate::batch`] read these entries; none of them
//! names a provider.
//!
//! Adding a provider that speaks an existing protocol is one entry in [`CATALOGUE`]; an OpenAI-compatible
//! service starts from [`OPENAI_COMPATIBLE`] (see docs/providers.md, "Adding an embedding provider"). A new
//! wire protocol is one module under `crate::wire` and one [`Protocol`] variant.

use std::fmt;

/// The wire protocol a provider speaks: request bodies, response parsing, authentication. Each has one module
/// under `crate::wire`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `POST {base}/embeddings {model, input, dimensions?, input_type?}`, `Authorization: Bearer`.
    OpenAi,
    /// `models/{m}:embedContent` / `:batchEmbedContents` with `taskType`, `x-goog-api-key`.
    Gemini,
    /// `/api/embed {model, input}`, or the older `/api/embeddings {model, prompt}`.
    Ollama,
}

/// How a provider tells a query from a document (`memory.search.queryInputType` / `documentInputType`, each
/// falling back to `inputType`, are the configured types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputTypeRule {
    /// Nothing is sent, configured or not.
    Never,
    /// The configured types only.
    Configured,
    /// The configured types, else these.
    Default { query: &'static str, document: &'static str },
    /// The configured types; these only when the settings ask for them (`RemoteSettings::send_input_type`).
    OnRequest { query: &'static str, document: &'static str },
}

/// A provider batch API (`memory.search.remote.batch`), spoken by [`crate::batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchProtocol {
    /// OpenAI's Files + Batches API, lines `{custom_id, method, url, body: {model, input}}`.
    OpenAiFiles,
    /// Voyage's, which follows OpenAI's: lines `{custom_id, body: {input}}`, model and input type on the batch.
    VoyageFiles,
    /// Gemini's `models/{m}:asyncBatchEmbedContent` with inline requests.
    GeminiAsync,
}

/// One remote embedding provider.
#[derive(Debug, Clone, Copy)]
pub struct Provider {
    /// Its name in `memory.search.provider` / `fallback`.
    pub id: &'static str,
    /// The id it reports (index identity, errors) when it is a preset of another provider; `None`: its own.
    pub reports_as: Option<&'static str>,
    pub protocol: Protocol,
    /// `None`: the server decides what it serves, so `memory.search.model` is required.
    pub default_model: Option<&'static str>,
    /// Models whose vector width is known (the API's default output size), by name without `models/` (and,
    /// for Ollama, without the `:tag`). Unknown models learn it from the first answer.
    pub dimensions: &'static [(&'static str, usize)],
    /// Default base URL (the path prefix the endpoint paths are joined to).
    pub base_url: &'static str,
    /// Environment variable with the server's address (`host:port` or a URL; without a port, the default base
    /// URL's), used when no base URL is configured.
    pub host_env: Option<&'static str>,
    /// Environment variable holding the API key (after the config's keys).
    pub key_env: Option<&'static str>,
    /// Whether a call without an API key is pointless (building the provider fails instead).
    pub key_required: bool,
    /// The `models.providers` entries that may hold its key, base URL and headers, first found wins.
    pub config_entries: &'static [&'static str],
    pub input_types: InputTypeRule,
    /// Whether `outputDimensionality` (`memory.search.outputDimensionality`) is sent (as `dimensions` or
    /// Gemini's `outputDimensionality`).
    pub sends_dimensions: bool,
    /// Texts per request the API accepts.
    pub max_items: usize,
    /// Self-hosted servers: the base URL is part of the vectors' identity (another server may serve another
    /// model under the same name).
    pub self_hosted: bool,
    /// `auto` picks it when it has a key, in catalogue order (after the local model).
    pub auto: bool,
    pub batch: Option<BatchProtocol>,
    /// `models.providers.<id>.api` values of custom providers that speak this provider's API (a trailing `*`
    /// matches any ending).
    pub custom_apis: &'static [&'static str],
}

impl Provider {
    /// The id in the index identity and in errors.
    pub fn reported_id(&self) -> &'static str {
        self.reports_as.unwrap_or(self.id)
    }

    /// The known width of `model`'s vectors (see [`Provider::dimensions`]).
    pub fn known_dimensions(&self, model: &str) -> Option<usize> {
        let base = model.strip_prefix("models/").unwrap_or(model);
        let base = match self.protocol {
            Protocol::Ollama => base.split(':').next().unwrap_or(base),
            Protocol::OpenAi | Protocol::Gemini => base,
        };
        self.dimensions.iter().find(|(m, _)| *m == base).map(|(_, d)| *d)
    }

    fn speaks_custom_api(&self, api: &str) -> bool {
        self.custom_apis.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => api.starts_with(prefix),
            None => *pattern == api,
        })
    }
}

impl PartialEq for Provider {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Provider {}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id)
    }
}

/// A server speaking OpenAI's embeddings API (LM Studio by default); the starting point of a preset for any
/// OpenAI-compatible service: `Provider { id, base_url, key_env, config_entries, ..OPENAI_COMPATIBLE }`.
pub const OPENAI_COMPATIBLE: Provider = Provider {
    id: "openai-compatible",
    reports_as: None,
    protocol: Protocol::OpenAi,
    default_model: None,
    dimensions: &[],
    base_url: "http://127.0.0.1:1234/v1",
    host_env: None,
    key_env: None,
    key_required: false,
    config_entries: &["openai-compatible"],
    input_types: InputTypeRule::OnRequest { query: "query", document: "document" },
    sends_dimensions: true,
    max_items: 256,
    self_hosted: true,
    auto: false,
    batch: None,
    custom_apis: &["openai*", "azure-openai-responses", "mistral"],
};

/// Every remote provider, in the order `auto` tries them.
pub const CATALOGUE: &[Provider] = &[
    Provider {
        id: "openai",
        protocol: Protocol::OpenAi,
        default_model: Some("text-embedding-3-small"),
        dimensions: &[("text-embedding-3-small", 1536), ("text-embedding-3-large", 3072), ("text-embedding-ada-002", 1536)],
        base_url: "https://api.openai.com/v1",
        key_env: Some("OPENAI_API_KEY"),
        key_required: true,
        config_entries: &["openai"],
        input_types: InputTypeRule::Configured,
        max_items: 2048,
        self_hosted: false,
        auto: true,
        batch: Some(BatchProtocol::OpenAiFiles),
        custom_apis: &[],
        ..OPENAI_COMPATIBLE
    },
    OPENAI_COMPATIBLE,
    Provider {
        id: "gemini",
        reports_as: None,
        protocol: Protocol::Gemini,
        default_model: Some("gemini-embedding-001"),
        dimensions: &[("gemini-embedding-001", 3072), ("gemini-embedding-2-preview", 3072), ("text-embedding-004", 768)],
        base_url: "https://generativelanguage.googleapis.com/v1beta",
        host_env: None,
        key_env: Some("GEMINI_API_KEY"),
        key_required: true,
        // OpenClaw keeps Gemini's key under `models.providers.google`.
        config_entries: &["gemini", "google"],
        input_types: InputTypeRule::Default { query: "RETRIEVAL_QUERY", document: "RETRIEVAL_DOCUMENT" },
        sends_dimensions: true,
        max_items: 100,
        self_hosted: false,
        auto: true,
        batch: Some(BatchProtocol::GeminiAsync),
        custom_apis: &["google-generative-ai", "google-gemini", "gemini"],
    },
    Provider {
        id: "voyage",
        default_model: Some("voyage-4-large"),
        dimensions: &[("voyage-4-large", 1024), ("voyage-4", 1024), ("voyage-4-lite", 1024), ("voyage-3-large", 1024), ("voyage-3.5", 1024)],
        base_url: "https://api.voyageai.com/v1",
        key_env: Some("VOYAGE_API_KEY"),
        key_required: true,
        config_entries: &["voyage"],
        input_types: InputTypeRule::Default { query: "query", document: "document" },
        sends_dimensions: false,
        max_items: 1000,
        self_hosted: false,
        auto: true,
        batch: Some(BatchProtocol::VoyageFiles),
        custom_apis: &[],
        ..OPENAI_COMPATIBLE
    },
    Provider {
        id: "mistral",
        default_model: Some("mistral-embed"),
        dimensions: &[("mistral-embed", 1024)],
        base_url: "https://api.mistral.ai/v1",
        key_env: Some("MISTRAL_API_KEY"),
        key_required: true,
        config_entries: &["mistral"],
        input_types: InputTypeRule::Never,
        sends_dimensions: false,
        max_items: 512,
        self_hosted: false,
        auto: true,
        custom_apis: &[],
        ..OPENAI_COMPATIBLE
    },
    Provider {
        id: "ollama",
        reports_as: None,
        protocol: Protocol::Ollama,
        default_model: Some("nomic-embed-text"),
        dimensions: &[("nomic-embed-text", 768), ("mxbai-embed-large", 1024), ("all-minilm", 384)],
        base_url: "http://127.0.0.1:11434",
        host_env: Some("OLLAMA_HOST"),
        key_env: None,
        key_required: false,
        config_entries: &["ollama"],
        input_types: InputTypeRule::Never,
        sends_dimensions: false,
        max_items: 256,
        self_hosted: true,
        auto: false,
        batch: None,
        custom_apis: &["ollama"],
    },
    // OpenClaw's presets of OpenAI-compatible servers; they report as `openai-compatible` (their indexes'
    // identity).
    Provider {
        id: "lmstudio",
        reports_as: Some("openai-compatible"),
        key_env: Some("LMSTUDIO_API_KEY"),
        config_entries: &["lmstudio"],
        custom_apis: &[],
        ..OPENAI_COMPATIBLE
    },
    Provider {
        id: "deepinfra",
        reports_as: Some("openai-compatible"),
        base_url: "https://api.deepinfra.com/v1/openai",
        key_env: Some("DEEPINFRA_API_KEY"),
        config_entries: &["deepinfra"],
        custom_apis: &[],
        ..OPENAI_COMPATIBLE
    },
];

/// OpenClaw provider ids that have no embedding API memory-rs can call, and why.
pub const UNAVAILABLE: &[(&str, &str)] = &[
    ("bedrock", "AWS Bedrock needs SigV4-signed requests, which memory-rs does not make"),
    ("amazon-bedrock", "AWS Bedrock needs SigV4-signed requests, which memory-rs does not make"),
    ("github-copilot", "GitHub Copilot offers no embedding API to other programs"),
];

/// The catalogue entry named `id`.
pub fn get(id: &str) -> Option<&'static Provider> {
    CATALOGUE.iter().find(|p| p.id == id)
}

/// The provider whose API a custom `models.providers.<id>.api` speaks, for embeddings.
pub fn for_custom_api(api: &str) -> Option<&'static Provider> {
    CATALOGUE.iter().find(|p| p.speaks_custom_api(api))
}

/// Why the OpenClaw provider `id` cannot be called here, if it cannot.
pub fn unavailable_reason(id: &str) -> Option<&'static str> {
    UNAVAILABLE.iter().find(|(name, _)| *name == id).map(|(_, why)| *why)
}

/// Values of `memory.search.provider` that are not remote providers.
const OTHER_NAMES: [&str; 3] = ["auto", "local", "none"];

const NAME_COUNT: usize = OTHER_NAMES.len() + CATALOGUE.len() + UNAVAILABLE.len();

/// Every value `memory.search.provider` accepts (besides the id of a custom `models.providers.<id>`):
/// `auto`, `local`, `none`, the catalogue, the providers not available here.
pub const PROVIDER_NAMES: [&str; NAME_COUNT] = provider_names();

const fn provider_names() -> [&'static str; NAME_COUNT] {
    let mut out = [""; NAME_COUNT];
    let mut i = 0;
    while i < OTHER_NAMES.len() {
        out[i] = OTHER_NAMES[i];
        i += 1;
    }
    let mut j = 0;
    while j < CATALOGUE.len() {
        out[i] = CATALOGUE[j].id;
        i += 1;
        j += 1;
    }
    let mut k = 0;
    while k < UNAVAILABLE.len() {
        out[i] = UNAVAILABLE[k].0;
        i += 1;
        k += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_resolve_to_their_entry() {
        for (i, name) in PROVIDER_NAMES.iter().enumerate() {
            assert!(!name.is_empty());
            assert!(!PROVIDER_NAMES[..i].contains(name), "`{name}` twice");
        }
        for p in CATALOGUE {
            assert_eq!(get(p.id).map(|e| e.id), Some(p.id));
            assert!(p.max_items > 0, "{p}");
            assert!(p.base_url.starts_with("http://") || p.base_url.starts_with("https://"), "{p}");
            if let Some(m) = p.default_model {
                assert!(p.self_hosted || p.known_dimensions(m).is_some(), "{p}: the default model's width is unknown");
            }
        }
    }

    #[test]
    fn custom_apis_and_model_tags() {
        let id = |api| for_custom_api(api).map(|p| p.id);
        assert_eq!(id("openai-completions"), Some("openai-compatible"));
        assert_eq!(id("azure-openai-responses"), Some("openai-compatible"));
        assert_eq!(id("mistral"), Some("openai-compatible"));
        assert_eq!(id("google-generative-ai"), Some("gemini"));
        assert_eq!(id("ollama"), Some("ollama"));
        assert_eq!(id("anthropic-messages"), None);
        let ollama = get("ollama").unwrap();
        assert_eq!(ollama.known_dimensions("nomic-embed-text:latest"), Some(768));
        assert_eq!(get("gemini").unwrap().known_dimensions("models/text-embedding-004"), Some(768));
        assert_eq!(get("openai").unwrap().known_dimensions("nomic-embed-text"), None);
    }
}

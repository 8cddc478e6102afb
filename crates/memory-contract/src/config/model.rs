//! The typed configuration tree with its defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SecretString;
use crate::types::Source;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Config {
    pub memory: MemoryConfig,
    pub models: ModelsConfig,
    /// Keys accepted but not acted on, each with the reason (`memory status` lists them).
    #[serde(skip)]
    pub warnings: Vec<super::ConfigIssue>,
    /// The `memory.<engine>` blocks of the engines (`qmd`, `lancedb`, the configured plugin), as written with
    /// their references resolved; each engine reads its own with [`Config::engine_block`].
    #[serde(skip)]
    pub(super) engine_blocks: EngineBlocks,
}

/// Engine blocks by engine name. Debug output names the engines only: a block may hold credentials.
#[derive(Clone, Default)]
pub(super) struct EngineBlocks(pub(super) BTreeMap<String, serde_json::Value>);

impl std::fmt::Debug for EngineBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Engine name: `builtin`, `qmd`, `lancedb` or a registered plugin.
    pub backend: String,
    pub citations: Citations,
    pub search: SearchConfig,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig { backend: "builtin".into(), citations: Citations::Auto, search: SearchConfig::default() }
    }
}

/// `auto`: a `citation` field on each result; `on`: also a `Source:` line in the snippet; `off`: neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Citations {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SearchConfig {
    pub enabled: bool,
    /// `auto`, `openai`, `openai-compatible`, `gemini`, `voyage`, `mistral`, `ollama`, `local`, `none`.
    pub provider: String,
    pub model: Option<String>,
    /// Sent to providers that take an input type (Voyage, OpenAI-compatible servers as `input_type`; Gemini as
    /// `taskType`) for queries and documents alike, unless the specific one below is set.
    pub input_type: Option<String>,
    pub query_input_type: Option<String>,
    pub document_input_type: Option<String>,
    /// Vector width asked of the provider: Gemini `outputDimensionality`, OpenAI(-compatible) `dimensions`.
    pub output_dimensionality: Option<usize>,
    /// A second provider used only when the first fails; `none` for no fallback.
    pub fallback: String,
    pub remote: RemoteConfig,
    pub local: LocalConfig,
    pub sources: Vec<Source>,
    pub extra_paths: Vec<ExtraPath>,
    /// Where session transcripts (JSONL) are read from, for the `sessions` source.
    pub sessions_dir: Option<String>,
    pub chunking: ChunkingConfig,
    pub query: QueryConfig,
    pub cache: CacheConfig,
    pub store: StoreConfig,
    pub sync: SyncConfig,
    pub multimodal: MultimodalConfig,
    /// Files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            enabled: true,
            provider: "auto".into(),
            model: None,
            input_type: None,
            query_input_type: None,
            document_input_type: None,
            output_dimensionality: None,
            fallback: "none".into(),
            remote: RemoteConfig::default(),
            local: LocalConfig::default(),
            sources: vec![Source::Memory],
            extra_paths: Vec::new(),
            sessions_dir: None,
            chunking: ChunkingConfig::default(),
            query: QueryConfig::default(),
            cache: CacheConfig::default(),
            store: StoreConfig::default(),
            sync: SyncConfig::default(),
            multimodal: MultimodalConfig::default(),
            max_file_bytes: 10 * 1024 * 1024,
        }
    }
}

/// An `extraPaths` entry: a file or folder, or (OpenClaw 2026.9) `{path, pattern}`: the files under the folder
/// whose path relative to it matches the glob (`*`, `**`, `?`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExtraPath {
    Path(String),
    Pattern {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
}

impl ExtraPath {
    pub fn path(&self) -> &str {
        match self {
            ExtraPath::Path(p) | ExtraPath::Pattern { path: p, .. } => p,
        }
    }

    /// How the entry enters the index identity: the path, and its pattern when there is one (so a plain
    /// entry keeps the identity it had before patterns existed).
    pub fn identity_key(&self) -> String {
        match self.pattern() {
            Some(p) => format!("{}#pattern={p}", self.path()),
            None => self.path().to_string(),
        }
    }

    pub fn pattern(&self) -> Option<&str> {
        match self {
            ExtraPath::Path(_) => None,
            ExtraPath::Pattern { pattern, .. } => pattern.as_deref().map(str::trim).filter(|p| !p.is_empty()),
        }
    }
}

impl PartialEq<&str> for ExtraPath {
    fn eq(&self, other: &&str) -> bool {
        self.pattern().is_none() && self.path() == *other
    }
}

impl PartialEq<String> for ExtraPath {
    fn eq(&self, other: &String) -> bool {
        self.pattern().is_none() && self.path() == other
    }
}

impl From<&str> for ExtraPath {
    fn from(p: &str) -> Self {
        ExtraPath::Path(p.to_string())
    }
}

impl From<String> for ExtraPath {
    fn from(p: String) -> Self {
        ExtraPath::Path(p)
    }
}

impl From<&String> for ExtraPath {
    fn from(p: &String) -> Self {
        ExtraPath::Path(p.clone())
    }
}

impl From<&ExtraPath> for ExtraPath {
    fn from(p: &ExtraPath) -> Self {
        p.clone()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemoteConfig {
    pub base_url: Option<String>,
    pub api_key: Option<SecretString>,
    /// Extra request headers; values are treated as secrets (they often carry credentials).
    pub headers: BTreeMap<String, SecretString>,
    /// Embedding requests in flight at once (OpenClaw's key; default: `indexed::patience::RequestLimits`).
    pub non_batch_concurrency: Option<usize>,
    pub batch: BatchConfig,
}

/// `memory.search.remote.batch`: embed large backfills as provider batch jobs (OpenAI, Gemini, Voyage).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BatchConfig {
    pub enabled: bool,
    /// Wait for jobs during the sync; when off, a later sync collects what finished.
    pub wait: bool,
    /// Jobs in flight at once.
    pub concurrency: usize,
    pub poll_interval_ms: u64,
    /// A job not finished this long after submission counts as failed.
    pub timeout_minutes: u64,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig { enabled: false, wait: true, concurrency: 2, poll_interval_ms: 2000, timeout_minutes: 60 }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LocalConfig {
    /// The model: a folder with `model.safetensors`, `config.json` and `tokenizer.json`, a GGUF file, a name in the
    /// model caches, an `hf:` URI or an HTTPS GGUF URL (`providers::model_file`). Unset with `provider: "local"`:
    /// OpenClaw's default model.
    pub model_path: Option<String>,
    /// Where OpenClaw keeps downloaded models (its default: `~/.openclaw/models/llama.cpp`): looked in first, and
    /// where a download goes when set.
    pub model_cache_dir: Option<String>,
    /// Prepended to queries before embedding (memory-rs's own key; default: the model's own prompt).
    pub query_prompt: Option<String>,
    /// Prepended to documents before embedding.
    pub document_prompt: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ChunkingConfig {
    pub tokens: usize,
    pub overlap: usize,
}

impl Default for ChunkingConfig {
    fn default() -> Self {
        ChunkingConfig { tokens: 400, overlap: 80 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QueryConfig {
    pub max_results: usize,
    pub min_score: f64,
    /// The moment searches are asked at, for replays, tests and evaluations: a date (`2026-03-04`) or a date and
    /// time with an offset (`2026-03-04T21:30:00+08:00`). What "yesterday" and "last week" mean and what temporal
    /// decay counts from. Unset: the clock, in this machine's time zone.
    pub now: Option<String>,
    pub hybrid: HybridConfig,
    pub rerank: RerankConfig,
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig { max_results: 6, min_score: 0.35, now: None, hybrid: HybridConfig::default(), rerank: RerankConfig::default() }
    }
}

/// `memory.search.query.rerank`: a second model reads the query with each of the best candidates and its score
/// is folded into theirs (`memory_core::rerank::fold`): a cross-encoder (the pair read together) or a
/// late-interaction model (ColBERT: query and passage encoded apart, token vectors compared), the kind told by
/// the model folder's files. Off by default: it costs a model load and tens of milliseconds per candidate on a
/// CPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RerankConfig {
    pub enabled: bool,
    /// The reranker's folder (`model.safetensors`, `tokenizer.json`, `config.json`; a late-interaction model also
    /// `artifact.metadata` or a `linear.weight` projection); `~` allowed.
    pub model_path: Option<String>,
    /// How many of the best candidates are reranked (the rest keep their order below them). 10 by default: about
    /// a quarter of a second with the int8 cross-encoder on two cores; 20 reads deeper on conversations at twice
    /// the cost and did worse on Cranfield's abstracts (docs/benchmark-history.md).
    pub candidates: usize,
    /// Time budget of one reranking, in milliseconds: past it the first-stage order answers, with a warning.
    pub budget_ms: u64,
    /// The reranker's share in the folded order (0..1; both sides scaled over the candidates first).
    pub weight: f64,
}

impl Default for RerankConfig {
    fn default() -> Self {
        RerankConfig { enabled: false, model_path: None, candidates: 10, budget_ms: 2000, weight: 0.5 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HybridConfig {
    pub enabled: bool,
    pub vector_weight: f64,
    pub text_weight: f64,
    pub candidate_multiplier: usize,
    pub mmr: MmrConfig,
    pub temporal_decay: TemporalDecayConfig,
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            enabled: true,
            vector_weight: 0.7,
            text_weight: 0.3,
            candidate_multiplier: 4,
            mmr: MmrConfig::default(),
            temporal_decay: TemporalDecayConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MmrConfig {
    pub enabled: bool,
    pub lambda: f64,
}

impl Default for MmrConfig {
    fn default() -> Self {
        MmrConfig { enabled: false, lambda: 0.7 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TemporalDecayConfig {
    pub enabled: bool,
    pub half_life_days: f64,
}

impl Default for TemporalDecayConfig {
    fn default() -> Self {
        TemporalDecayConfig { enabled: false, half_life_days: 30.0 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CacheConfig {
    pub enabled: bool,
    pub max_entries: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { enabled: true, max_entries: 50_000 }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Index file; `{agentId}` is replaced. Default: `<state-dir>/memory/<agentId>.sqlite`.
    pub path: Option<String>,
    /// OpenClaw's `store.driver`; only `sqlite` (what the builtin engine is).
    pub driver: Option<String>,
    pub vector: StoreVectorConfig,
    pub fts: StoreFtsConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreVectorConfig {
    pub enabled: bool,
}

impl Default for StoreVectorConfig {
    fn default() -> Self {
        StoreVectorConfig { enabled: true }
    }
}

/// `store.fts`: its one key (`tokenizer`) is accepted with a warning (keyword analysis is the project's own); the
/// object stays so that a config holding it reads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreFtsConfig {}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SyncConfig {
    /// The longest one embedding request may take, in seconds (OpenClaw's key; default:
    /// `indexed::patience::RequestLimits`).
    pub embedding_batch_timeout_seconds: Option<u64>,
    pub watch: bool,
    pub watch_debounce_ms: u64,
    pub interval_minutes: u64,
    pub on_search: bool,
    pub on_session_start: bool,
    pub sessions: SessionsSyncConfig,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            embedding_batch_timeout_seconds: None,
            watch: true,
            watch_debounce_ms: 1500,
            interval_minutes: 0,
            on_search: true,
            on_session_start: true,
            sessions: SessionsSyncConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SessionsSyncConfig {
    pub delta_bytes: u64,
    pub delta_messages: u64,
}

impl Default for SessionsSyncConfig {
    fn default() -> Self {
        SessionsSyncConfig { delta_bytes: 100_000, delta_messages: 50 }
    }
}

/// `memory.search.multimodal`: index images and audio found under `extraPaths` with a multimodal embedding
/// model (`gemini-embedding-2-preview`); requires `fallback: "none"`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MultimodalConfig {
    pub enabled: bool,
    /// Media files larger than this are skipped with a warning.
    pub max_file_bytes: u64,
    /// Output width of the multimodal model: 768, 1536 or 3072 (default: the model's own, 3072).
    pub dimensions: Option<usize>,
}

impl Default for MultimodalConfig {
    fn default() -> Self {
        MultimodalConfig { enabled: false, max_file_bytes: 10 * 1024 * 1024, dimensions: None }
    }
}

/// `models.providers.<id>`: only the keys memory search reads; other provider settings are left to the host.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelsConfig {
    pub providers: BTreeMap<String, ModelProviderConfig>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelProviderConfig {
    /// The wire format of a custom provider (`openai-completions`, `google-generative-ai`, `ollama`, ...).
    pub api: Option<String>,
    pub api_key: Option<SecretString>,
    pub base_url: Option<String>,
    pub headers: BTreeMap<String, SecretString>,
}

//! The typed configuration tree with its defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::provider::{LocalConfig, ModelsConfig, RemoteConfig};
use super::query::QueryConfig;
use crate::types::Source;

/// The checked configuration of one agent: the `memory` block (with the search settings merged from every place
/// they may be written) and the parts of `models` memory search reads. [`Config::default`] is what an empty
/// config file gives.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Config {
    /// `memory`: the engine, citations and search settings.
    pub memory: MemoryConfig,
    /// `models`: the model providers whose keys, URLs and headers the embedding providers read.
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

/// The `memory` block: which engine answers, how results cite their files, and the search settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// `memory.backend`: the engine that answers searches: `builtin` (the default), `qmd`, `lancedb` or a
    /// registered plugin.
    pub backend: String,
    /// `memory.citations`: how results cite the lines they come from (default `auto`).
    pub citations: Citations,
    /// `memory.search`: what is indexed and how it is searched (also read from a top-level `memorySearch`,
    /// `agents.defaults.memorySearch` and the agent's own block).
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
    /// Each result has a `citation` field (`path#L<start>-L<end>`); the snippet is left as it is.
    Auto,
    /// The `citation` field, and a `Source: path#L..` line appended to the snippet.
    On,
    /// No citation at all.
    Off,
}

/// `memory.search`: the embedding provider, the files indexed, how they are chunked, synced and ranked. Later
/// blocks override earlier ones key by key: a top-level `memorySearch`, `agents.defaults.memorySearch`,
/// `memory.search`, then the agent's own block.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SearchConfig {
    /// `memory.search.enabled`: memory search for the agent (default true); false turns its memory tools off (the
    /// CLI and the Python binding refuse to open its memory) and no embedding provider is built.
    pub enabled: bool,
    /// `memory.search.provider`: the embedding provider: `auto` (the default: a configured local model, else the
    /// first of `openai`, `gemini`, `voyage`, `mistral` with an API key, else none), `openai`,
    /// `openai-compatible`, `gemini`, `voyage`, `mistral`, `ollama`, `lmstudio`, `deepinfra`, `local`, the id of a
    /// `models.providers` entry, or `none` (keyword search only).
    pub provider: String,
    /// `memory.search.model`: the remote provider's embedding model (unset: the provider's default model; a
    /// provider without one, such as `openai-compatible`, requires it). Not read by `local` (see
    /// `local.modelPath`) nor by the fallback provider.
    pub model: Option<String>,
    /// `memory.search.inputType`: sent to providers that take an input type (Voyage, OpenAI-compatible servers as
    /// `input_type`; Gemini as `taskType`), and the name of the prompt a local model with named prompts uses, for
    /// queries and documents alike, unless the specific one below is set. Unset by default; primary provider only.
    pub input_type: Option<String>,
    /// `memory.search.queryInputType`: the input type (or local prompt name) for queries, over `inputType`
    /// (unset by default).
    pub query_input_type: Option<String>,
    /// `memory.search.documentInputType`: the input type (or local prompt name) for indexed documents, over
    /// `inputType` (unset by default).
    pub document_input_type: Option<String>,
    /// `memory.search.outputDimensionality`: vector width asked of the provider: Gemini `outputDimensionality`,
    /// OpenAI(-compatible) `dimensions`, a local model's Matryoshka cut (unset by default: the model's own width).
    pub output_dimensionality: Option<usize>,
    /// `memory.search.fallback`: a second provider used only when the first fails; `none` (the default) for no
    /// fallback. `auto` is not accepted here.
    pub fallback: String,
    /// `memory.search.remote`: where and how remote embedding requests are sent.
    pub remote: RemoteConfig,
    /// `memory.search.local`: the model of the `local` provider and its prompts.
    pub local: LocalConfig,
    /// `memory.search.sources`: what is indexed and searched: `memory` (`MEMORY.md`, `memory/` and `extraPaths`)
    /// and `sessions` (the conversation transcripts in `sessionsDir`). Default `["memory"]`; at least one;
    /// `experimental.sessionMemory` adds or removes `sessions`.
    pub sources: Vec<Source>,
    /// `memory.search.extraPaths`: more files and folders indexed as memory besides the workspace's `MEMORY.md`
    /// and `memory/` (relative paths are taken in the workspace, `~` expanded); none by default. An agent's own
    /// list adds to the defaults' rather than replacing them, and `qmd.extraCollections` entries are added here.
    pub extra_paths: Vec<ExtraPath>,
    /// `memory.search.sessionsDir`: where session transcripts (JSONL) are read from, for the `sessions` source
    /// (`{agentId}` replaced, `~` expanded, a relative path taken under the state folder). Unset by default:
    /// OpenClaw's `<OpenClaw state>/agents/<agentId>/sessions` when it exists, else
    /// `<state>/agents/<agentId>/sessions`.
    pub sessions_dir: Option<String>,
    /// `memory.search.chunking`: how files are cut into the chunks that are indexed and returned.
    pub chunking: ChunkingConfig,
    /// `memory.search.query`: how a search ranks and cuts its results.
    pub query: QueryConfig,
    /// `memory.search.cache`: the embedding cache.
    pub cache: CacheConfig,
    /// `memory.search.store`: where the index is kept and whether it holds vectors.
    pub store: StoreConfig,
    /// `memory.search.sync`: when the index is brought up to date with the files.
    pub sync: SyncConfig,
    /// `memory.search.multimodal`: indexing images and audio.
    pub multimodal: MultimodalConfig,
    /// `memory.search.maxFileBytes`: memory files larger than this are skipped with a warning, and `memory_get`
    /// does not read them (default 10 MiB).
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
    /// A file or folder, written as a string: a Markdown file, or a folder whose Markdown files are indexed (with
    /// `multimodal.enabled`, its images and audio too).
    Path(String),
    /// `{path, pattern}`: the files under `path` that match `pattern`.
    Pattern {
        /// The file or folder.
        path: String,
        /// A glob matched against each file's path relative to `path` (`*`, `**`, `?`), narrowing the files the
        /// folder gives; unset or blank: the entry is a plain path.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
}

impl ExtraPath {
    /// The file or folder, as written.
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

    /// The glob, trimmed; `None` for a plain path or a blank pattern.
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

/// `memory.search.chunking`: the size of the pieces files are indexed and returned in. Both keys are part of the
/// index identity: changing them rebuilds the index. The flat `chunkSize` / `chunkOverlap` keys are read as these.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ChunkingConfig {
    /// `memory.search.chunking.tokens`: the size of a chunk, in estimated tokens (default 400; at least 16); a
    /// dated heading always starts a new chunk.
    pub tokens: usize,
    /// `memory.search.chunking.overlap`: how many tokens a chunk repeats from the end of the one before (default
    /// 80; less than `tokens`).
    pub overlap: usize,
}

impl Default for ChunkingConfig {
    fn default() -> Self {
        ChunkingConfig { tokens: 400, overlap: 80 }
    }
}

/// `memory.search.cache`: vectors kept in the index by the hash of the chunk's text and the provider's settings,
/// so text embedded once (a file moved or restored, an index rebuilt) is not sent to the provider again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CacheConfig {
    /// `memory.search.cache.enabled`: read and write the embedding cache (default true).
    pub enabled: bool,
    /// `memory.search.cache.maxEntries`: vectors the cache keeps; the oldest beyond it are pruned (default 50,000).
    pub max_entries: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { enabled: true, max_entries: 50_000 }
    }
}

/// `memory.search.store`: the index's file and whether it holds vectors.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `memory.search.store.path`: the builtin engine's index file; `{agentId}` is replaced, `~` expanded, a
    /// relative path taken under the state folder. Unset by default: `<state>/agents/<agentId>/builtin-<tag>.sqlite`
    /// (the tag: 12 hex digits hashing the workspace; see [`crate::space::AgentSpace::index_file`]).
    pub path: Option<String>,
    /// `memory.search.store.driver`: OpenClaw's key; only `sqlite` (what the builtin engine is) is accepted.
    /// Unset by default.
    pub driver: Option<String>,
    /// `memory.search.store.vector`: whether the index holds vectors.
    pub vector: StoreVectorConfig,
    /// `memory.search.store.fts`: accepted for OpenClaw's configs, not acted on.
    pub fts: StoreFtsConfig,
}

/// `memory.search.store.vector` (`store.vector.extensionPath` is accepted, not acted on: sqlite-vec is compiled
/// in).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct StoreVectorConfig {
    /// `memory.search.store.vector.enabled`: embed chunks and search by vectors (default true); false: the
    /// engine uses no embedding provider and searches by words only.
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

/// `memory.search.sync`: when the index is brought up to date with the files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SyncConfig {
    /// `memory.search.sync.embeddingBatchTimeoutSeconds`: the longest one embedding request may take, in seconds
    /// (OpenClaw's key; 1 to 86,400; unset by default: 120 to a remote API, 600 to a server on this machine or
    /// the local network).
    pub embedding_batch_timeout_seconds: Option<u64>,
    /// `memory.search.sync.watch`: `memory serve` watches the memory files and syncs when they change (default
    /// true; `--no-watch` also turns it off).
    pub watch: bool,
    /// `memory.search.sync.watchDebounceMs`: how long the watcher waits after a change before it syncs, in
    /// milliseconds (default 1500; at most an hour).
    pub watch_debounce_ms: u64,
    /// `memory.search.sync.intervalMinutes`: the watcher also syncs every this many minutes (default 0: off; at
    /// most a year).
    pub interval_minutes: u64,
    /// `memory.search.sync.onSearch`: a search first syncs the files that changed (default true); off: searches
    /// answer from the index as it is.
    pub on_search: bool,
    /// `memory.search.sync.onSessionStart`: sync once when `memory serve` or `memory watch` starts (default true).
    pub on_session_start: bool,
    /// `memory.search.sync.sessions`: when a grown transcript is indexed again.
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

/// `memory.search.sync.sessions`: a transcript that grew is indexed again once it grew by `deltaBytes` or by
/// `deltaMessages`; below both, its new lines wait (a new, truncated or rotated transcript counts at once).
/// `sessions.postCompactionForce` is accepted, not acted on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SessionsSyncConfig {
    /// `memory.search.sync.sessions.deltaBytes`: bytes a transcript must grow by (default 100,000); a search
    /// syncs a grown transcript first only past this.
    pub delta_bytes: u64,
    /// `memory.search.sync.sessions.deltaMessages`: messages a transcript must grow by (default 50).
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
    /// `memory.search.multimodal.enabled`: also index the images and audio under `extraPaths` (default false);
    /// requires `provider: "gemini"`, a multimodal `model` and `fallback: "none"`.
    pub enabled: bool,
    /// `memory.search.multimodal.maxFileBytes`: media files larger than this are skipped with a warning (default
    /// 10 MiB).
    pub max_file_bytes: u64,
    /// `memory.search.multimodal.dimensions`: output width of the multimodal model: 768, 1536 or 3072, over
    /// `outputDimensionality` (default: the model's own, 3072).
    pub dimensions: Option<usize>,
}

impl Default for MultimodalConfig {
    fn default() -> Self {
        MultimodalConfig { enabled: false, max_file_bytes: 10 * 1024 * 1024, dimensions: None }
    }
}

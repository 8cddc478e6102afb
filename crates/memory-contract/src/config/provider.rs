//! The embedding provider's blocks: `memory.search.remote` (with its batch jobs), `memory.search.local`, and the
//! `models.providers` entries whose keys, URLs and headers the providers read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SecretString;

/// `memory.search.remote`: the primary remote provider's endpoint, credentials and request limits (the fallback
/// provider reads its settings from `models.providers` and the environment only).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RemoteConfig {
    /// `memory.search.remote.baseUrl`: the API's base URL, over the provider's `models.providers` entry (unset by
    /// default: that entry's, else the provider's host variable such as `OLLAMA_HOST`, else its default URL).
    pub base_url: Option<String>,
    /// `memory.search.remote.apiKey`: the API key, over the provider's `models.providers.<id>.apiKey` and its
    /// environment variable (unset by default).
    pub api_key: Option<SecretString>,
    /// `memory.search.remote.headers`: extra request headers, added to those of the provider's `models.providers`
    /// entry; values are treated as secrets (they often carry credentials). None by default.
    pub headers: BTreeMap<String, SecretString>,
    /// `memory.search.remote.nonBatchConcurrency`: embedding requests in flight at once (OpenClaw's key; unset by
    /// default: 4 to a remote API, 1 to a server on this machine or the local network and to Ollama).
    pub non_batch_concurrency: Option<usize>,
    /// `memory.search.remote.batch`: provider batch jobs for large backfills.
    pub batch: BatchConfig,
}

/// `memory.search.remote.batch`: embed large backfills as provider batch jobs (OpenAI, Gemini, Voyage).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BatchConfig {
    /// `memory.search.remote.batch.enabled`: a sync sends the new chunks no cache holds to the primary
    /// provider's batch API as jobs instead of synchronous requests (default false).
    pub enabled: bool,
    /// `memory.search.remote.batch.wait`: wait for jobs during the sync (default true); when off, a later sync
    /// collects what finished.
    pub wait: bool,
    /// `memory.search.remote.batch.concurrency`: jobs in flight at once (default 2; at least 1).
    pub concurrency: usize,
    /// `memory.search.remote.batch.pollIntervalMs`: how often a job's progress is asked, in milliseconds
    /// (default 2000; at least 1).
    pub poll_interval_ms: u64,
    /// `memory.search.remote.batch.timeoutMinutes`: a job not finished this long after submission counts as
    /// failed (default 60; at least 1).
    pub timeout_minutes: u64,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig { enabled: false, wait: true, concurrency: 2, poll_interval_ms: 2000, timeout_minutes: 60 }
    }
}

/// `memory.search.local`: the model the `local` provider runs in-process and the prompts it embeds with
/// (`local.contextSize` is accepted, not acted on: the model's own context length is used).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LocalConfig {
    /// `memory.search.local.modelPath`: the model: a folder with `model.safetensors`, `config.json` and
    /// `tokenizer.json`, a GGUF file, a name in the model caches, an `hf:` URI or an HTTPS GGUF URL
    /// (`providers::model_file`); `auto` picks `local` when it is set. Unset (the default) with `provider:
    /// "local"`: `$MEMORY_LOCAL_MODEL`, else OpenClaw's default model.
    pub model_path: Option<String>,
    /// `memory.search.local.modelCacheDir`: where OpenClaw keeps downloaded models (its default:
    /// `~/.openclaw/models/llama.cpp`): looked in first, and where a download goes when set. Unset by default: a
    /// download goes into memory-rs's cache (`$MEMORY_RS_CACHE/models`, else `~/.cache/memory-rs/models`).
    pub model_cache_dir: Option<String>,
    /// `memory.search.local.queryPrompt`: prepended to queries before embedding, over the prompt named by
    /// `queryInputType` (memory-rs's own key; unset by default: the model's own query prompt).
    pub query_prompt: Option<String>,
    /// `memory.search.local.documentPrompt`: prepended to documents before embedding, over the prompt named by
    /// `documentInputType` (memory-rs's own key; unset by default: the model's own document prompt).
    pub document_prompt: Option<String>,
}

/// `models.providers.<id>`: only the keys memory search reads; other provider settings are left to the host.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelsConfig {
    /// `models.providers`: provider entries by id; a built-in provider reads its entry's key, URL and headers, and
    /// an id that names no built-in provider can be used as `memory.search.provider` (none by default).
    pub providers: BTreeMap<String, ModelProviderConfig>,
}

/// `models.providers.<id>`: one provider's settings; keys memory search does not read are ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModelProviderConfig {
    /// `models.providers.<id>.api`: the wire format of a custom provider (`openai-completions`,
    /// `google-generative-ai`, `ollama`, ...; unset: `openai-completions`).
    pub api: Option<String>,
    /// `models.providers.<id>.apiKey`: the provider's API key, used when `memory.search.remote.apiKey` is not set
    /// (or for the fallback provider), over the provider's environment variable.
    pub api_key: Option<SecretString>,
    /// `models.providers.<id>.baseUrl`: the provider's base URL, under `memory.search.remote.baseUrl`.
    pub base_url: Option<String>,
    /// `models.providers.<id>.headers`: request headers, under `memory.search.remote.headers`; values are treated
    /// as secrets.
    pub headers: BTreeMap<String, SecretString>,
}

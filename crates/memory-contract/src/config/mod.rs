//! Configuration: JSON5, OpenClaw-compatible keys of both OpenClaw schema generations (see
//! `schema.rs`). Only the memory-related top-level sections are read. Inside them an unknown key or a wrong type is
//! an error naming the key as written, a key accepted but not acted on is a warning, and all errors of a file are
//! reported together. The search block may sit at a top-level `memorySearch`, `agents.defaults.memorySearch` or
//! `memory.search` (later wins key by key); an agent's own block (`agents.list[].memorySearch`,
//! `agents.entries.<id>.memory.search`) is merged over them for that agent. An engine's own block
//! (`memory.qmd`, `memory.lancedb`, a plugin's `memory.<engine>`) is kept raw for the engine to read and check
//! ([`Config::engine_block`]); the registry refuses a block no registered engine owns
//! (`BackendRegistry::check_config`).

mod model;
mod provider;
mod query;
mod refs;
mod schema;
mod secret;

pub use model::*;
pub use provider::*;
pub use query::*;
pub use refs::EnvLookup;
pub use schema::ConfigIssue;
pub use secret::SecretString;

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

use model::EngineBlocks;
use refs::Resolver;
use schema::Diagnostics;

use crate::error::{MemoryError, Result};

/// The top-level sections read; every other section of an OpenClaw config is someone else's and ignored.
pub const READ_SECTIONS: &[&str] = &["memory", "agents", "models", "env", "memorySearch", "secrets"];

/// Embedding models that take images and audio as well as text (`memory.search.multimodal`).
pub const MULTIMODAL_MODELS: &[&str] = &["gemini-embedding-2-preview"];

/// Bounds of the sync periods (`validate`).
const MAX_INTERVAL_MINUTES: u64 = 525_600;
/// The longest `sync.embeddingBatchTimeoutSeconds` (a day): deadlines are computed from it.
const MAX_REQUEST_TIMEOUT_SECONDS: u64 = 86_400;
const MAX_DEBOUNCE_MS: u64 = 3_600_000;

impl Config {
    /// Parse a JSON5 document (defaults and `memory.search`, no agent's overrides).
    pub fn from_json5(text: &str) -> Result<Config> {
        Self::from_json5_for(text, None, &process_env)
    }

    /// Parse a JSON5 document for one agent: its `agents.list[]` / `agents.entries.<id>` memory settings merged
    /// over the defaults; `env` answers `${VAR}` and `{source: "env"}` (before the config's own `env` section).
    pub fn from_json5_for(text: &str, agent: Option<&str>, env: EnvLookup<'_>) -> Result<Config> {
        Self::from_value_for(parse_text(text)?, agent, env)
    }

    /// Read and check the config file at `path` (defaults and `memory.search`, no agent's overrides); errors name
    /// the file.
    pub fn load(path: &Path) -> Result<Config> {
        Self::load_for(path, None)
    }

    /// [`load`](Self::load) for one agent (see [`from_json5_for`](Self::from_json5_for)).
    pub fn load_for(path: &Path, agent: Option<&str>) -> Result<Config> {
        Self::from_file_value(Self::read_file(path)?, path, agent)
    }

    /// A config file as a JSON value: read once (a pipe such as `--config <(echo ...)` can be read only once),
    /// at most [`MAX_CONFIG_BYTES`](crate::bounded::MAX_CONFIG_BYTES), its nesting bounded before it is parsed.
    /// Hosts that need keys outside `memory.*` read the file with this and then call
    /// [`from_file_value`](Self::from_file_value).
    pub fn read_file(path: &Path) -> Result<Value> {
        let text = crate::bounded::read_text(path, crate::bounded::MAX_CONFIG_BYTES).map_err(|e| match e {
            crate::bounded::ReadError::Io(e) => MemoryError::io_path("cannot read config", path, e),
            crate::bounded::ReadError::Parse(e) => in_file(MemoryError::config("(file)", e.to_string()), path),
        })?;
        parse_text(&text).map_err(|e| in_file(e, path))
    }

    /// The config of `agent` from a file's value (see [`read_file`](Self::read_file)); errors name the file.
    pub fn from_file_value(root: Value, path: &Path, agent: Option<&str>) -> Result<Config> {
        Self::from_value_for(root, agent, &process_env).map_err(|e| in_file(e, path))
    }

    /// Check a parsed config document (defaults and `memory.search`, no agent's overrides), with `${VAR}` and
    /// `{source: "env"}` answered by the process environment.
    pub fn from_value(root: Value) -> Result<Config> {
        Self::from_value_for(root, None, &process_env)
    }

    /// Check a parsed config document for one agent: every search block merged (a top-level `memorySearch`,
    /// `agents.defaults.memorySearch`, `memory.search`, then the agent's own), references resolved with `env`
    /// before the config's own `env` section, every error of the document reported together, the keys accepted
    /// but not acted on kept in [`Config::warnings`].
    pub fn from_value_for(root: Value, agent: Option<&str>, env: EnvLookup<'_>) -> Result<Config> {
        let Value::Object(mut root) = root else {
            return Err(MemoryError::config("(root)", "expected an object"));
        };
        let mut d = Diagnostics::default();
        let config_env = root.get("env").cloned();
        let lookup = |name: &str| env(name).or_else(|| config_env_var(config_env.as_ref(), name));
        let secrets = root.get("secrets").and_then(|s| s.get("providers")).and_then(Value::as_object).cloned();
        let resolver = Resolver { env: &lookup, providers: secrets.as_ref() };

        // Every search block, lowest precedence first, named as written.
        let mut defaults: Vec<(String, Value)> = Vec::new();
        if let Some(v) = root.remove("memorySearch") {
            defaults.push(("memorySearch".into(), v));
        }
        if let Some(v) =
            root.get_mut("agents").and_then(|a| a.get_mut("defaults")).and_then(|x| x.as_object_mut()).and_then(|x| x.remove("memorySearch"))
        {
            defaults.push(("agents.defaults.memorySearch".into(), v));
        }
        let mut memory = match root.remove("memory") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                d.error("memory", "expected an object");
                Map::new()
            }
        };
        if let Some(v) = memory.remove("search") {
            defaults.push(("memory.search".into(), v));
        }
        let agents = agent_blocks(root.get("agents"), &mut d);

        let mut search = Value::Object(Map::new());
        for (name, block) in defaults {
            if let Some(block) = prepare_search(block, &name, &resolver, &mut d) {
                search = merge_search(search, block, false);
            }
        }
        for (id, name, block) in agents {
            let Some(block) = prepare_search(block, &name, &resolver, &mut d) else { continue };
            if agent.is_some_and(|a| a.eq_ignore_ascii_case(&id)) {
                // OpenClaw adds an agent's extraPaths to the defaults' rather than replacing them.
                search = merge_search(search, block, true);
            }
        }
        finish_search(&mut search);

        let mut memory = Value::Object(memory);
        resolver.resolve(&mut memory, "memory", &mut d);
        let mut engine_blocks = EngineBlocks::default();
        if let Value::Object(m) = &mut memory {
            // Every other object in `memory` is an engine's block (`memory.qmd`, a plugin's `memory.<engine>`): the
            // engine checks its keys and values, and the registry refuses a block no engine owns (a misspelt key).
            // `memory.<engine>: null` is no block, as null is "unset" everywhere.
            m.retain(|k, v| schema::is_memory_key(k) || !v.is_null());
            let blocks: Vec<String> = m.iter().filter(|(k, v)| !schema::is_memory_key(k) && v.is_object()).map(|(k, _)| k.clone()).collect();
            for engine in blocks {
                if let Some(mut block) = m.remove(&engine) {
                    drop_nulls(&mut block);
                    engine_blocks.0.insert(engine, block);
                }
            }
            schema::check(m, schema::MEMORY, "memory", &mut d);
            m.insert("search".into(), search);
        }
        let mut models = root.remove("models").unwrap_or(Value::Object(Map::new()));
        resolver.resolve(&mut models, "models", &mut d);
        if !d.errors.is_empty() {
            return Err(all_errors(d.errors));
        }
        let memory: MemoryConfig = typed(memory, "memory")?;
        let models: ModelsConfig = typed(models, "models")?;
        let mut config = Config { memory, models, warnings: Vec::new(), engine_blocks };
        config.validate()?;
        config.add_warnings(d.warnings);
        Ok(config)
    }

    /// The `memory.<engine>` block of an engine as `T`, `None` when the config has none. Errors name the key as
    /// written (`memory.<engine>.<key>`); give `T` `#[serde(deny_unknown_fields)]` to refuse unknown keys.
    pub fn engine_block<T: DeserializeOwned>(&self, engine: &str) -> Result<Option<T>> {
        match self.engine_blocks.0.get(engine) {
            None => Ok(None),
            Some(block) => typed(block.clone(), &format!("memory.{engine}")).map(Some),
        }
    }

    /// The names of the `memory.<engine>` blocks the config holds.
    pub fn engine_block_names(&self) -> impl Iterator<Item = &str> {
        self.engine_blocks.0.keys().map(String::as_str)
    }

    /// Add warnings: those of the file's own keys at load, then what an engine found in its block
    /// ([`BackendFactory::config_warnings`](crate::registry::BackendFactory::config_warnings)). Each key is
    /// logged once, its first warning kept, and the list kept in key order for `memory status`.
    pub fn add_warnings(&mut self, issues: impl IntoIterator<Item = ConfigIssue>) {
        for w in issues {
            if !self.warnings.iter().any(|x| x.key == w.key) {
                tracing::warn!(key = %w.key, "config: {}", w.message);
                self.warnings.push(w);
            }
        }
        self.warnings.sort_by(|a, b| a.key.cmp(&b.key));
    }

    /// Set the `memory.<engine>` block, as if the config file held `block` (for hosts and tests that build a
    /// config in code). Nothing is checked until the engine reads it.
    pub fn set_engine_block<T: Serialize>(&mut self, engine: &str, block: &T) -> Result<()> {
        let value = serde_json::to_value(block).map_err(|e| MemoryError::config(format!("memory.{engine}"), e.to_string()))?;
        self.engine_blocks.0.insert(engine.to_string(), value);
        Ok(())
    }

    /// Checks serde cannot express: ranges and relations between keys.
    pub fn validate(&self) -> Result<()> {
        let mut errs: Vec<MemoryError> = Vec::new();
        let s = &self.memory.search;
        let q = &s.query;
        // JSON5 has NaN and Infinity: no ranking number may be either.
        let h = &q.hybrid;
        for (key, v) in [
            ("memory.search.query.hybrid.vectorWeight", h.vector_weight),
            ("memory.search.query.hybrid.textWeight", h.text_weight),
            ("memory.search.query.hybrid.temporalDecay.halfLifeDays", h.temporal_decay.half_life_days),
            ("memory.search.query.hybrid.mmr.lambda", h.mmr.lambda),
            ("memory.search.query.rerank.weight", q.rerank.weight),
        ] {
            if !v.is_finite() {
                return Err(MemoryError::config(key, "must be a finite number"));
            }
        }
        if !(0.0..=1.0).contains(&q.min_score) {
            errs.push(MemoryError::config("memory.search.query.minScore", "must be between 0 and 1"));
        }
        if q.max_results == 0 {
            errs.push(MemoryError::config("memory.search.query.maxResults", "must be at least 1"));
        }
        if let Err(why) = crate::dates::now(q.now.as_deref()) {
            errs.push(MemoryError::config("memory.search.query.now", why));
        }
        let h = &q.hybrid;
        if h.vector_weight < 0.0 || h.text_weight < 0.0 || h.vector_weight + h.text_weight <= 0.0 {
            errs.push(MemoryError::config("memory.search.query.hybrid", "vectorWeight and textWeight must be >= 0 and not both 0"));
        }
        if h.candidate_multiplier == 0 {
            errs.push(MemoryError::config("memory.search.query.hybrid.candidateMultiplier", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&h.mmr.lambda) {
            errs.push(MemoryError::config("memory.search.query.hybrid.mmr.lambda", "must be between 0 and 1"));
        }
        if h.temporal_decay.half_life_days <= 0.0 {
            errs.push(MemoryError::config("memory.search.query.hybrid.temporalDecay.halfLifeDays", "must be > 0"));
        }
        let r = &q.rerank;
        if !(0.0..=1.0).contains(&r.weight) {
            errs.push(MemoryError::config("memory.search.query.rerank.weight", "must be between 0 and 1"));
        }
        if r.enabled && r.candidates == 0 {
            errs.push(MemoryError::config("memory.search.query.rerank.candidates", "must be at least 1"));
        }
        if r.enabled && r.model_path.as_deref().is_none_or(|p| p.trim().is_empty()) {
            errs.push(MemoryError::config(
                "memory.search.query.rerank.modelPath",
                "is required when rerank.enabled is true (the folder of a cross-encoder or a late-interaction model such as ColBERT)",
            ));
        }
        if s.chunking.tokens < 16 {
            errs.push(MemoryError::config("memory.search.chunking.tokens", "must be at least 16"));
        }
        if s.chunking.overlap >= s.chunking.tokens {
            errs.push(MemoryError::config("memory.search.chunking.overlap", "must be smaller than chunking.tokens"));
        }
        if s.sources.is_empty() {
            errs.push(MemoryError::config("memory.search.sources", "must name at least one source"));
        }
        if let Some(t) = s.sync.embedding_batch_timeout_seconds.filter(|t| !(1..=MAX_REQUEST_TIMEOUT_SECONDS).contains(t)) {
            errs.push(MemoryError::config(
                "memory.search.sync.embeddingBatchTimeoutSeconds",
                format!("must be from 1 to {MAX_REQUEST_TIMEOUT_SECONDS} (a day): the seconds one embedding request may take, not {t}"),
            ));
        }
        if s.remote.non_batch_concurrency == Some(0) {
            errs.push(MemoryError::config("memory.search.remote.nonBatchConcurrency", "must be at least 1 (embedding requests in flight at once)"));
        }
        // Durations are multiplied into milliseconds: absurd ones would overflow (and mean "never" anyway).
        if s.sync.interval_minutes > MAX_INTERVAL_MINUTES {
            return Err(MemoryError::config(
                "memory.search.sync.intervalMinutes",
                format!("must be at most {MAX_INTERVAL_MINUTES} (a year); 0 turns it off"),
            ));
        }
        if s.sync.watch_debounce_ms > MAX_DEBOUNCE_MS {
            return Err(MemoryError::config("memory.search.sync.watchDebounceMs", format!("must be at most {MAX_DEBOUNCE_MS} (an hour)")));
        }
        let b = &s.remote.batch;
        if b.concurrency == 0 {
            errs.push(MemoryError::config("memory.search.remote.batch.concurrency", "must be at least 1"));
        }
        if b.poll_interval_ms == 0 {
            errs.push(MemoryError::config("memory.search.remote.batch.pollIntervalMs", "must be at least 1"));
        }
        if b.timeout_minutes == 0 {
            errs.push(MemoryError::config("memory.search.remote.batch.timeoutMinutes", "must be at least 1"));
        }
        let m = &s.multimodal;
        if m.enabled {
            if !s.fallback.trim().eq_ignore_ascii_case("none") && !s.fallback.trim().is_empty() {
                errs.push(MemoryError::config(
                    "memory.search.multimodal.enabled",
                    format!("requires memory.search.fallback = \"none\" (a fallback model cannot embed images and audio), found \"{}\"", s.fallback),
                ));
            }
            let model = s.model.as_deref().unwrap_or("").trim();
            let model = model.strip_prefix("models/").unwrap_or(model);
            if s.provider.trim() != "gemini" || !MULTIMODAL_MODELS.contains(&model) {
                errs.push(MemoryError::config(
                    "memory.search.multimodal.enabled",
                    format!(
                        "requires memory.search.provider = \"gemini\" and a multimodal memory.search.model ({}), found provider \"{}\" model \"{}\"",
                        MULTIMODAL_MODELS.join(", "),
                        s.provider,
                        model
                    ),
                ));
            }
            if let Some(d) = m.dimensions {
                if ![768, 1536, 3072].contains(&d) {
                    errs.push(MemoryError::config("memory.search.multimodal.dimensions", "must be 768, 1536 or 3072"));
                }
            }
            if m.max_file_bytes == 0 {
                errs.push(MemoryError::config("memory.search.multimodal.maxFileBytes", "must be at least 1"));
            }
        }
        if s.store.path.as_deref().is_some_and(|p| p.trim().is_empty()) {
            errs.push(MemoryError::config("memory.search.store.path", "must not be empty (leave it out for the default)"));
        }
        if let Some(driver) = s.store.driver.as_deref().filter(|d| *d != "sqlite") {
            errs.push(MemoryError::config("memory.search.store.driver", format!("only \"sqlite\" is supported, found \"{driver}\"")));
        }
        let issues: Vec<ConfigIssue> = errs
            .into_iter()
            .map(|e| match e {
                MemoryError::Config { key, message } => ConfigIssue { key, message },
                other => ConfigIssue { key: "(config)".into(), message: other.to_string() },
            })
            .collect();
        if issues.is_empty() {
            Ok(())
        } else {
            Err(all_errors(issues))
        }
    }
}

/// A config text as a JSON value, its size and nesting bounded before the JSON5 parser sees it.
/// `NaN` and `Infinity` (JSON5 has them) in the sections read are refused naming the key: a JSON value cannot
/// hold them, and read as `null` they would silently mean "the default".
fn parse_text(text: &str) -> Result<Value> {
    let (root, non_finite) =
        crate::bounded::json5_tracked(text, crate::bounded::MAX_CONFIG_BYTES).map_err(|e| MemoryError::config("(file)", e.to_string()))?;
    let issues: Vec<ConfigIssue> = non_finite
        .into_iter()
        .filter(|path| READ_SECTIONS.iter().any(|s| path == s || path.starts_with(&format!("{s}.")) || path.starts_with(&format!("{s}["))))
        .map(|key| ConfigIssue { key, message: "must be a finite number (NaN and Infinity are not accepted)".into() })
        .collect();
    if !issues.is_empty() {
        return Err(all_errors(issues));
    }
    Ok(root)
}

/// A config error, naming the file it is in.
fn in_file(e: MemoryError, path: &Path) -> MemoryError {
    match e {
        MemoryError::Config { key, message } => MemoryError::Config { key, message: format!("{message} (in {})", path.display()) },
        other => other,
    }
}

/// Deserialize `value` as `T`, reporting the failing key as `prefix.path.to.key`.
fn typed<T: DeserializeOwned>(value: Value, prefix: &str) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let mut key = prefix.to_string();
        if inner != "." && !inner.is_empty() {
            key.push('.');
            key.push_str(&inner);
        }
        let message = e.into_inner().to_string();
        if message.starts_with("unknown field") {
            // The path already ends with the unknown key; serde's list of expected keys is noise here.
            return MemoryError::config(key, "unknown key");
        }
        MemoryError::config(key, message)
    })
}

/// `null` means "unset" in every block, the engines' too: their keys set to null are removed before they read it.
fn drop_nulls(v: &mut Value) {
    if let Value::Object(m) = v {
        m.retain(|_, x| !x.is_null());
        m.values_mut().for_each(drop_nulls);
    }
}

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A variable from the config's `env` section: `env.vars.<NAME>` or a string at `env.<NAME>`.
fn config_env_var(env: Option<&Value>, name: &str) -> Option<String> {
    let env = env?;
    env.get("vars").and_then(|v| v.get(name)).or_else(|| env.get(name)).and_then(Value::as_str).map(str::to_string)
}

/// One `MemoryError::Config` for all the problems of a file: the first names its key, the rest follow.
fn all_errors(mut issues: Vec<ConfigIssue>) -> MemoryError {
    let first = issues.remove(0);
    if issues.is_empty() {
        return MemoryError::Config { key: first.key, message: first.message };
    }
    let rest: Vec<String> = issues.iter().map(|i| format!("`{}`: {}", i.key, i.message)).collect();
    MemoryError::Config { key: first.key, message: format!("{} (and {} more: {})", first.message, rest.len(), rest.join("; ")) }
}

/// Every agent's own search block as `(agent id, key as written, block)`: `agents.list[i].memorySearch`
/// (2026.7), `agents.entries.<id>.memorySearch` (moved by 2026.9) and `agents.entries.<id>.memory.search`.
fn agent_blocks(agents: Option<&Value>, d: &mut Diagnostics) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    let Some(agents) = agents else { return out };
    if let Some(list) = agents.get("list").and_then(Value::as_array) {
        for (i, entry) in list.iter().enumerate() {
            let id = entry.get("id").and_then(Value::as_str).unwrap_or("").to_string();
            if let Some(block) = entry.get("memorySearch") {
                out.push((id, format!("agents.list[{i}].memorySearch"), block.clone()));
            }
        }
    }
    if let Some(entries) = agents.get("entries").and_then(Value::as_object) {
        for (id, entry) in entries {
            if let Some(block) = entry.get("memorySearch") {
                out.push((id.clone(), format!("agents.entries.{id}.memorySearch"), block.clone()));
            }
            match entry.get("memory") {
                None | Some(Value::Null) => {}
                Some(Value::Object(m)) => {
                    for k in m.keys().filter(|k| *k != "search") {
                        d.error(format!("agents.entries.{id}.memory.{k}"), "unknown key");
                    }
                    if let Some(block) = m.get("search") {
                        out.push((id.clone(), format!("agents.entries.{id}.memory.search"), block.clone()));
                    }
                }
                Some(_) => d.error(format!("agents.entries.{id}.memory"), "expected an object"),
            }
        }
    }
    out
}

/// Resolve references in a search block, check it against the schema, and bring it to this project's shape:
/// `qmd.extraCollections` become `extraPaths` entries (as OpenClaw 2026.9's migration writes them).
fn prepare_search(block: Value, name: &str, resolver: &Resolver<'_>, d: &mut Diagnostics) -> Option<Value> {
    let mut block = match block {
        Value::Null => return None,
        Value::Object(m) => Value::Object(m),
        _ => {
            d.error(name, "expected an object");
            return None;
        }
    };
    resolver.resolve(&mut block, name, d);
    let m = block.as_object_mut()?;
    schema::check(m, schema::SEARCH, name, d);
    if let Some(Value::Object(mut qmd)) = m.remove("qmd") {
        if let Some(Value::Array(collections)) = qmd.remove("extraCollections") {
            let extra = m.entry("extraPaths").or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(extra) = extra {
                for c in collections {
                    let mut entry = Map::new();
                    entry.insert("path".into(), c.get("path").cloned().unwrap_or(Value::Null));
                    if let Some(p) = c.get("pattern").filter(|p| p.is_string()) {
                        entry.insert("pattern".into(), p.clone());
                    }
                    extra.push(Value::Object(entry));
                }
            }
        }
    }
    Some(block)
}

/// Merge search blocks key by key; `concat_extra`: `extraPaths` of `top` add to those of `base`.
fn merge_search(base: Value, top: Value, concat_extra: bool) -> Value {
    let (Value::Object(mut b), Value::Object(mut t)) = (base, top) else { return Value::Null };
    // Only when both have a list: with one of them, the key-by-key merge below keeps it (taking both out first
    // dropped the agent's list when the defaults had none).
    if concat_extra && b.get("extraPaths").is_some_and(Value::is_array) && t.get("extraPaths").is_some_and(Value::is_array) {
        if let (Some(Value::Array(mut older)), Some(Value::Array(newer))) = (b.remove("extraPaths"), t.remove("extraPaths")) {
            for p in newer {
                if !older.contains(&p) {
                    older.push(p);
                }
            }
            t.insert("extraPaths".into(), Value::Array(older));
        }
    }
    merge(Value::Object(b), Value::Object(t))
}

/// After merging: `experimental.sessionMemory` turns the `sessions` source on or off, as in OpenClaw.
fn finish_search(search: &mut Value) {
    let Some(m) = search.as_object_mut() else { return };
    let session_memory = m.remove("experimental").and_then(|e| e.get("sessionMemory").and_then(Value::as_bool));
    match session_memory {
        Some(true) => {
            let sources = m.entry("sources").or_insert_with(|| Value::Array(vec!["memory".into()]));
            if let Value::Array(s) = sources {
                if !s.iter().any(|x| x == "sessions") {
                    s.push("sessions".into());
                }
            }
        }
        Some(false) => {
            if let Some(Value::Array(s)) = m.get_mut("sources") {
                s.retain(|x| x != "sessions");
            }
        }
        None => {}
    }
}

/// Deep merge: keys of `top` override those of `base`.
fn merge(base: Value, top: Value) -> Value {
    match (base, top) {
        (Value::Object(mut b), Value::Object(t)) => {
            for (k, v) in t {
                let merged = match b.remove(&k) {
                    Some(old) => merge(old, v),
                    None => v,
                };
                b.insert(k, merged);
            }
            Value::Object(b)
        }
        (_, top) => top,
    }
}

#[cfg(test)]
mod tests;

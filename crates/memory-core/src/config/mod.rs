//! Configuration (SPEC §9): JSON5, OpenClaw-compatible keys. Unknown keys and wrong types are errors that name
//! the key. The search block may sit at `memory.search` or, in older configs, at `agents.defaults.memorySearch`;
//! both are accepted and `memory.search` wins key by key.

mod model;
mod secret;

pub use model::*;
pub use secret::SecretString;

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{MemoryError, Result};

/// Top-level sections of an OpenClaw config that this project does not read but must not reject, since users
/// point us at their whole `openclaw.json`.
const FOREIGN_SECTIONS: &[&str] = &[
    "$schema", "meta", "env", "wizard", "diagnostics", "logging", "update", "browser", "ui", "auth", "channels",
    "gateway", "plugins", "skills", "tools", "session", "messages", "commands", "hooks", "cron", "web", "discovery",
    "canvasHost", "talk", "broadcast", "audio", "bindings", "approvals", "nodeHost", "media", "secrets",
];

/// Embedding models that take images and audio as well as text (`memory.search.multimodal`).
pub const MULTIMODAL_MODELS: &[&str] = &["gemini-embedding-2-preview"];

/// Bounds of the sync periods (`validate`).
const MAX_INTERVAL_MINUTES: u64 = 525_600;
const MAX_DEBOUNCE_MS: u64 = 3_600_000;

impl Config {
    /// Parse a JSON5 document.
    pub fn from_json5(text: &str) -> Result<Config> {
        // The JSON5 parser recurses once per level with no limit of its own: deep nesting overflowed the stack.
        if nesting_depth(text) > MAX_NESTING {
            return Err(MemoryError::config("(file)", format!("not valid JSON5: nested deeper than {MAX_NESTING} levels")));
        }
        let root: Value = json5::from_str(text).map_err(|e| MemoryError::config("(file)", format!("not valid JSON5: {e}")))?;
        Self::from_value(root)
    }

    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| MemoryError::io_path("cannot read config", path, e))?;
        Self::from_json5(&text).map_err(|e| match e {
            MemoryError::Config { key, message } => {
                MemoryError::Config { key, message: format!("{message} (in {})", path.display()) }
            }
            other => other,
        })
    }

    pub fn from_value(root: Value) -> Result<Config> {
        let Value::Object(mut root) = root else {
            return Err(MemoryError::config("(root)", "expected an object"));
        };
        for key in root.keys() {
            if !matches!(key.as_str(), "memory" | "agents" | "models") && !FOREIGN_SECTIONS.contains(&key.as_str()) {
                // An empty key would make an error that names nothing: show it quoted.
                let name = if key.is_empty() { "\"\"".to_string() } else { key.clone() };
                return Err(MemoryError::config(name, "unknown key"));
            }
        }

        // The older search block: validate it where it stands so errors name its real path.
        let legacy = root
            .get_mut("agents")
            .and_then(|a| a.get_mut("defaults"))
            .and_then(|d| d.get_mut("memorySearch"))
            .map(Value::take);
        if let Some(legacy) = &legacy {
            typed::<SearchConfig>(legacy.clone(), "agents.defaults.memorySearch")?;
        }

        let mut memory = root.remove("memory").unwrap_or(Value::Object(Default::default()));
        if !memory.is_object() {
            return Err(MemoryError::config("memory", "expected an object"));
        }
        if let Some(search) = memory.get("search") {
            typed::<SearchConfig>(search.clone(), "memory.search")?;
        }
        if let Some(legacy) = legacy {
            let merged = match memory.get_mut("search").map(Value::take) {
                Some(newer) => merge(legacy, newer),
                None => legacy,
            };
            memory.as_object_mut().unwrap().insert("search".into(), merged);
        }
        let memory: MemoryConfig = typed(memory, "memory")?;
        let models: ModelsConfig = match root.remove("models") {
            Some(v) => typed(v, "models")?,
            None => ModelsConfig::default(),
        };
        let config = Config { memory, models };
        config.validate()?;
        Ok(config)
    }

    /// Checks serde cannot express: ranges and relations between keys.
    pub fn validate(&self) -> Result<()> {
        let s = &self.memory.search;
        let q = &s.query;
        if !(0.0..=1.0).contains(&q.min_score) {
            return Err(MemoryError::config("memory.search.query.minScore", "must be between 0 and 1"));
        }
        if q.max_results == 0 {
            return Err(MemoryError::config("memory.search.query.maxResults", "must be at least 1"));
        }
        if self.memory.lancedb.nprobes == Some(0) {
            return Err(MemoryError::config("memory.lancedb.nprobes", "must be at least 1"));
        }
        let h = &q.hybrid;
        if h.vector_weight < 0.0 || h.text_weight < 0.0 || h.vector_weight + h.text_weight <= 0.0 {
            return Err(MemoryError::config(
                "memory.search.query.hybrid",
                "vectorWeight and textWeight must be >= 0 and not both 0",
            ));
        }
        if h.candidate_multiplier == 0 {
            return Err(MemoryError::config("memory.search.query.hybrid.candidateMultiplier", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&h.mmr.lambda) {
            return Err(MemoryError::config("memory.search.query.hybrid.mmr.lambda", "must be between 0 and 1"));
        }
        if h.temporal_decay.half_life_days <= 0.0 {
            return Err(MemoryError::config("memory.search.query.hybrid.temporalDecay.halfLifeDays", "must be > 0"));
        }
        if s.chunking.tokens < 16 {
            return Err(MemoryError::config("memory.search.chunking.tokens", "must be at least 16"));
        }
        if s.chunking.overlap >= s.chunking.tokens {
            return Err(MemoryError::config("memory.search.chunking.overlap", "must be smaller than chunking.tokens"));
        }
        if s.sources.is_empty() {
            return Err(MemoryError::config("memory.search.sources", "must name at least one source"));
        }
        // Durations are multiplied into milliseconds: absurd ones would overflow (and mean "never" anyway).
        if s.sync.interval_minutes > MAX_INTERVAL_MINUTES {
            return Err(MemoryError::config("memory.search.sync.intervalMinutes", format!("must be at most {MAX_INTERVAL_MINUTES} (a year); 0 turns it off")));
        }
        if s.sync.watch_debounce_ms > MAX_DEBOUNCE_MS {
            return Err(MemoryError::config("memory.search.sync.watchDebounceMs", format!("must be at most {MAX_DEBOUNCE_MS} (an hour)")));
        }
        let b = &s.remote.batch;
        if b.concurrency == 0 {
            return Err(MemoryError::config("memory.search.remote.batch.concurrency", "must be at least 1"));
        }
        if b.poll_interval_ms == 0 {
            return Err(MemoryError::config("memory.search.remote.batch.pollIntervalMs", "must be at least 1"));
        }
        if b.timeout_minutes == 0 {
            return Err(MemoryError::config("memory.search.remote.batch.timeoutMinutes", "must be at least 1"));
        }
        let m = &s.multimodal;
        if m.enabled {
            if !s.fallback.trim().eq_ignore_ascii_case("none") && !s.fallback.trim().is_empty() {
                return Err(MemoryError::config(
                    "memory.search.multimodal.enabled",
                    format!(
                        "requires memory.search.fallback = \"none\" (a fallback model cannot embed images and audio), found \"{}\"",
                        s.fallback
                    ),
                ));
            }
            let model = s.model.as_deref().unwrap_or("").trim();
            let model = model.strip_prefix("models/").unwrap_or(model);
            if s.provider.trim() != "gemini" || !MULTIMODAL_MODELS.contains(&model) {
                return Err(MemoryError::config(
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
                    return Err(MemoryError::config("memory.search.multimodal.dimensions", "must be 768, 1536 or 3072"));
                }
            }
            if m.max_file_bytes == 0 {
                return Err(MemoryError::config("memory.search.multimodal.maxFileBytes", "must be at least 1"));
            }
        }
        Ok(())
    }
}

/// Deepest `[`/`{` nesting accepted in a config file (serde_json's own limit); real configs use a handful.
const MAX_NESTING: usize = 128;

/// The deepest bracket nesting of a JSON5 text, brackets inside strings and comments not counted. Lexical only:
/// a malformed text gets some number and the parser reports the real error.
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                while let Some(s) = chars.next() {
                    if s == '\\' {
                        chars.next();
                    } else if s == c {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for s in chars.by_ref() {
                    if s == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut star = false;
                for s in chars.by_ref() {
                    if star && s == '/' {
                        break;
                    }
                    star = s == '*';
                }
            }
            '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
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

//! `memory.qmd`: the engine's settings, read from core's raw block ([`Config::engine_block`]) with durations
//! and the search mode parsed as they are read, so a bad value is an error naming its key as written
//! (`memory.qmd.update.interval`), and an unknown key an error naming it. OpenClaw keys this engine has no use
//! for are accepted and named in the config's warnings ([`QmdConfig::ignored_keys`]).

use std::time::Duration;

use memory_core::config::{Config, ConfigIssue};
use memory_core::error::Result;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The engine's name in `memory.backend`, and its block `memory.qmd`.
pub const NAME: &str = "qmd";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QmdConfig {
    /// Path or name of the `qmd` command (or its JS entry). Default: PATH, then the project's cache.
    pub command: Option<String>,
    pub search_mode: SearchMode,
    pub include_default_memory: bool,
    pub paths: Vec<QmdPathConfig>,
    pub sessions: QmdSessionsConfig,
    pub update: QmdUpdateConfig,
    pub limits: QmdLimitsConfig,
    /// Which chats may search (OpenClaw's scope rules); kept as given.
    pub scope: Option<serde_json::Value>,
    /// OpenClaw keys not acted on ([`QmdConfig::ignored_keys`] says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcporter: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerank: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_tool: Option<String>,
}

impl Default for QmdConfig {
    fn default() -> Self {
        QmdConfig {
            command: None,
            search_mode: SearchMode::Search,
            include_default_memory: true,
            paths: Vec::new(),
            sessions: QmdSessionsConfig::default(),
            update: QmdUpdateConfig::default(),
            limits: QmdLimitsConfig::default(),
            scope: None,
            mcporter: None,
            rerank: None,
            search_tool: None,
        }
    }
}

impl QmdConfig {
    /// The `memory.qmd` block of `config` (the defaults when there is none).
    pub fn from_config(config: &Config) -> Result<QmdConfig> {
        Ok(config.engine_block::<QmdConfig>(NAME)?.unwrap_or_default())
    }

    /// The OpenClaw keys set in this block that this engine accepts but does not act on, each with why.
    pub fn ignored_keys(&self) -> Vec<ConfigIssue> {
        let key = |k: &str| format!("memory.{NAME}.{k}");
        let boot = "the first update runs when the engine opens (onBoot)";
        [
            (self.mcporter.is_some(), key("mcporter"), "memory-rs runs the qmd command itself, never through an MCP daemon"),
            (self.rerank.is_some(), key("rerank"), "qmd reranks in searchMode \"query\" only, as memory-rs calls it"),
            (self.search_tool.is_some(), key("searchTool"), "memory-rs runs qmd's search commands, not an MCP tool"),
            (self.update.startup.is_some(), key("update.startup"), boot),
            (self.update.startup_delay_ms.is_some(), key("update.startupDelayMs"), boot),
        ]
        .into_iter()
        .filter(|(set, ..)| *set)
        .map(|(_, key, why)| ConfigIssue { key, message: format!("accepted, not used: {why}") })
        .collect()
    }

    /// Write this as the `memory.qmd` block of `config` (for hosts and tests that build a config in code).
    pub fn write_to(&self, config: &mut Config) -> Result<()> {
        config.set_engine_block(NAME, self)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QmdPathConfig {
    pub name: Option<String>,
    pub path: String,
    pub pattern: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QmdSessionsConfig {
    pub enabled: bool,
    pub retention_days: Option<u64>,
    pub export_dir: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QmdUpdateConfig {
    /// Between background `qmd update` runs (`interval`: "5m", "30s"...); `None` ("0") disables.
    #[serde(with = "interval")]
    pub interval: Option<Duration>,
    #[serde(rename = "debounceMs", with = "millis")]
    pub debounce: Duration,
    pub on_boot: bool,
    pub wait_for_boot_sync: bool,
    /// Between `qmd embed` runs (`embedInterval`); `None` ("0") disables.
    #[serde(with = "interval")]
    pub embed_interval: Option<Duration>,
    #[serde(rename = "commandTimeoutMs", with = "millis")]
    pub command_timeout: Duration,
    #[serde(rename = "updateTimeoutMs", with = "millis")]
    pub update_timeout: Duration,
    #[serde(rename = "embedTimeoutMs", with = "millis")]
    pub embed_timeout: Duration,
    /// OpenClaw's first-update timing: not acted on ([`QmdConfig::ignored_keys`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_delay_ms: Option<u64>,
}

impl Default for QmdUpdateConfig {
    fn default() -> Self {
        QmdUpdateConfig {
            interval: Some(Duration::from_secs(5 * 60)),
            debounce: Duration::from_secs(15),
            on_boot: true,
            wait_for_boot_sync: false,
            embed_interval: Some(Duration::from_secs(60 * 60)),
            command_timeout: Duration::from_secs(30),
            update_timeout: Duration::from_secs(120),
            embed_timeout: Duration::from_secs(120),
            startup: None,
            startup_delay_ms: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct QmdLimitsConfig {
    pub max_results: usize,
    pub max_snippet_chars: usize,
    pub max_injected_chars: usize,
    /// A search's time limit (`timeoutMs`); above 0.
    #[serde(rename = "timeoutMs", with = "positive_millis")]
    pub timeout: Duration,
}

impl Default for QmdLimitsConfig {
    fn default() -> Self {
        QmdLimitsConfig { max_results: 6, max_snippet_chars: 700, max_injected_chars: 4_000, timeout: Duration::from_secs(4) }
    }
}

/// Search modes QMD offers (`searchMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// BM25 full-text (no model needed).
    Search,
    /// Vector similarity (needs the embedding model and `qmd embed`).
    VSearch,
    /// Hybrid with query expansion and reranking (needs models).
    Query,
}

impl SearchMode {
    pub fn parse(s: &str) -> Option<SearchMode> {
        match s {
            "search" => Some(SearchMode::Search),
            "vsearch" => Some(SearchMode::VSearch),
            "query" => Some(SearchMode::Query),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Search => "search",
            SearchMode::VSearch => "vsearch",
            SearchMode::Query => "query",
        }
    }

    pub(crate) fn response_mode(self) -> &'static str {
        match self {
            SearchMode::Search => "keyword",
            SearchMode::VSearch => "vector",
            SearchMode::Query => "hybrid",
        }
    }

    pub(crate) fn needs_vectors(self) -> bool {
        self != SearchMode::Search
    }
}

impl Serialize for SearchMode {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SearchMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        SearchMode::parse(&raw).ok_or_else(|| serde::de::Error::custom(format!("`{raw}` is not one of search, vsearch, query")))
    }
}

/// A duration as OpenClaw writes them: `30s`, `5m`, `1h30m`, `1.5h`, `250ms`, `2d`; a bare number is minutes;
/// `0`, `off` or an empty string is `None` (disabled).
pub fn parse_duration(raw: &str) -> std::result::Result<Option<Duration>, String> {
    let s: String = raw.trim().to_ascii_lowercase().chars().filter(|c| !c.is_whitespace()).collect();
    if s.is_empty() || s == "0" || s == "off" || s == "false" {
        return Ok(None);
    }
    let bad = || format!("`{raw}` is not a duration (examples: 30s, 5m, 1h30m, 0)");
    let mut rest = s.as_str();
    let mut ms = 0.0f64;
    while !rest.is_empty() {
        let split = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, tail) = rest.split_at(split);
        let n: f64 = num.parse().map_err(|_| bad())?;
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let factor = match unit {
            "ms" => 1.0,
            "s" | "sec" | "secs" => 1000.0,
            "" | "m" | "min" | "mins" => 60_000.0,
            "h" | "hr" | "hrs" => 3_600_000.0,
            "d" => 86_400_000.0,
            u => return Err(format!("unknown duration unit `{u}` in `{raw}` (use ms, s, m, h, d)")),
        };
        // A bare number is minutes only on its own: `1h30` is not a duration.
        if unit.is_empty() && ms > 0.0 {
            return Err(bad());
        }
        ms += n * factor;
        rest = tail;
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// An interval written as a duration string ([`parse_duration`]); written back in milliseconds (`"0"`: off).
mod interval {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> std::result::Result<S::Ok, S::Error> {
        match v {
            Some(d) => s.serialize_str(&format!("{}ms", d.as_millis())),
            None => s.serialize_str("0"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Duration>, D::Error> {
        parse_duration(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A duration written as whole milliseconds (`...Ms` keys).
mod millis {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(v.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// [`millis`] that must be above 0 (a zero time limit would fail every call).
mod positive_millis {
    use super::*;

    pub use super::millis::serialize;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Duration, D::Error> {
        let v = super::millis::deserialize(d)?;
        if v.is_zero() {
            return Err(serde::de::Error::custom("must be above 0"));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memory_core::MemoryError;

    fn read(text: &str) -> Result<QmdConfig> {
        QmdConfig::from_config(&Config::from_json5(text)?)
    }

    fn key_of(text: &str) -> (String, String) {
        match read(text).unwrap_err() {
            MemoryError::Config { key, message } => (key, message),
            other => panic!("not a config error: {other}"),
        }
    }

    #[test]
    fn durations_take_openclaws_forms() {
        for (raw, want) in [
            ("5m", Some(Duration::from_secs(300))),
            ("30s", Some(Duration::from_secs(30))),
            ("1h", Some(Duration::from_secs(3600))),
            ("250ms", Some(Duration::from_millis(250))),
            ("2", Some(Duration::from_secs(120))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("2m30s", Some(Duration::from_secs(150))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("2d", Some(Duration::from_secs(2 * 86_400))),
            (" 5 M ", Some(Duration::from_secs(300))),
            ("0", None),
            ("off", None),
            ("", None),
        ] {
            assert_eq!(parse_duration(raw).unwrap(), want, "{raw}");
        }
        for raw in ["soon", "5 weeks", "1h30"] {
            assert!(parse_duration(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn the_block_is_read_into_types() {
        let c = read(
            "{ memory: { backend: 'qmd', qmd: { searchMode: 'vsearch', update: { interval: '90s', embedInterval: '0', debounceMs: 250, \
             commandTimeoutMs: 5000 }, limits: { timeoutMs: 1500 } } } }",
        )
        .unwrap();
        assert_eq!(c.search_mode, SearchMode::VSearch);
        assert_eq!(c.update.interval, Some(Duration::from_secs(90)));
        assert_eq!(c.update.embed_interval, None);
        assert_eq!(c.update.debounce, Duration::from_millis(250));
        assert_eq!(c.update.command_timeout, Duration::from_secs(5));
        assert_eq!(c.update.update_timeout, Duration::from_secs(120), "unset keys keep their defaults");
        assert_eq!(c.limits.timeout, Duration::from_millis(1500));
        // No block: the defaults, also when another engine is configured.
        assert_eq!(read("{ memory: { backend: 'builtin' } }").unwrap(), QmdConfig::default());
    }

    #[test]
    fn a_bad_value_names_its_key_as_written() {
        let (key, message) = key_of("{ memory: { qmd: { update: { interval: 'soon' } } } }");
        assert_eq!(key, "memory.qmd.update.interval");
        assert!(message.contains("`soon` is not a duration"), "{message}");
        assert_eq!(key_of("{ memory: { qmd: { update: { embedInterval: '5 weeks' } } } }").0, "memory.qmd.update.embedInterval");
        let (key, message) = key_of("{ memory: { qmd: { searchMode: 'fast' } } }");
        assert_eq!(key, "memory.qmd.searchMode");
        assert!(message.contains("not one of search, vsearch, query"), "{message}");
        assert_eq!(key_of("{ memory: { qmd: { limits: { timeoutMs: 0 } } } }").0, "memory.qmd.limits.timeoutMs");
    }

    #[test]
    fn a_block_written_in_code_reads_back_the_same() {
        let mut q = QmdConfig { search_mode: SearchMode::Query, ..QmdConfig::default() };
        q.update.interval = Some(Duration::from_millis(100));
        q.update.embed_interval = None;
        q.update.debounce = Duration::ZERO;
        q.paths.push(QmdPathConfig { name: Some("team".into()), path: "notes".into(), pattern: Some("*.md".into()) });
        let mut config = Config::default();
        q.write_to(&mut config).unwrap();
        assert_eq!(QmdConfig::from_config(&config).unwrap(), q);
    }

    #[test]
    fn openclaw_2026_7_qmd_block_means_what_it_means() {
        let text = include_str!("../../memory-contract/tests/fixtures/openclaw-2026.7.1.json5");
        let env = |k: &str| (k == "OC7_OPENAI_KEY").then(|| "sk-oc7".to_string());
        let c = QmdConfig::from_config(&Config::from_json5_for(text, Some("main"), &env).unwrap()).unwrap();
        assert_eq!(c.paths[0].pattern.as_deref(), Some("**/*.md"));
        assert_eq!(c.update.interval, Some(Duration::from_secs(5400)));
        // OpenClaw's keys that this engine does not act on: accepted, each named with why.
        let ignored: Vec<String> = c.ignored_keys().into_iter().map(|w| w.key).collect();
        assert_eq!(ignored, ["mcporter", "rerank", "searchTool", "update.startup", "update.startupDelayMs"].map(|k| format!("memory.qmd.{k}")));
        assert!(c.ignored_keys().iter().all(|w| w.message.starts_with("accepted, not used: ")));
        assert!(QmdConfig::default().ignored_keys().is_empty());
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_errors_naming_the_key() {
        assert_eq!(key_of("{ memory: { qmd: { comand: 'x' } } }").0, "memory.qmd.comand");
        assert_eq!(key_of("{ memory: { qmd: { update: { debounceMs: 'soon' } } } }").0, "memory.qmd.update.debounceMs");
        assert_eq!(key_of("{ memory: { qmd: { rerank: 'yes' } } }").0, "memory.qmd.rerank");
        assert_eq!(key_of("{ memory: { qmd: { paths: [{ path: 'a', nam: 'x' }] } } }").0, "memory.qmd.paths[0].nam");
        // null means unset, as everywhere in the config.
        assert_eq!(read("{ memory: { qmd: { searchMode: null, update: { interval: null } } } }").unwrap(), QmdConfig::default());
    }
}

//! `memory.search.provider` / `fallback` / `model` / `remote` / `local` to a provider (SPEC §7, §9).

use std::path::PathBuf;
use std::sync::Arc;

use memory_core::config::SearchConfig;
use memory_core::embedding::{EmbeddingError, EmbeddingProvider};
use memory_core::{Config, MemoryError};
use tracing::{info, warn};

use crate::fallback::FallbackProvider;
use crate::http::{ApiKey, HttpOptions};
use crate::local::{model_folder_present, LocalModelError, LocalProvider};
use crate::remote::{RemoteKind, RemoteProvider, RemoteSettings};

/// Environment variable naming the local model folder when `memory.search.local.modelPath` is unset.
pub const LOCAL_MODEL_ENV: &str = "MEMORY_LOCAL_MODEL";

/// Every value `memory.search.provider` accepts.
pub const PROVIDER_NAMES: [&str; 9] =
    ["auto", "openai", "openai-compatible", "gemini", "voyage", "mistral", "ollama", "local", "none"];

/// The order `auto` tries remote providers in, after `local`.
pub const AUTO_REMOTE_ORDER: [RemoteKind; 4] =
    [RemoteKind::OpenAi, RemoteKind::Gemini, RemoteKind::Voyage, RemoteKind::Mistral];

/// Where environment variables come from (the process, or a map in tests).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Knobs of providers built from a config that the config itself does not carry.
#[derive(Debug, Clone, Default)]
pub struct ResolveOptions {
    pub http: HttpOptions,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Primary,
    Fallback,
}

/// A provider that could not be built: `missing` when it is simply not set up here (no key, no model folder).
struct BuildError {
    key: String,
    message: String,
    missing: bool,
}

impl From<BuildError> for MemoryError {
    fn from(e: BuildError) -> Self {
        MemoryError::Config { key: e.key, message: e.message }
    }
}

/// The provider the config asks for, reading keys from the process environment. `None` means keyword-only
/// (`provider: "none"`, search disabled, or `auto` with nothing available). See [`from_config_with`].
pub fn from_config(config: &Config) -> Result<Option<Arc<dyn EmbeddingProvider>>, MemoryError> {
    from_config_with(config, &|k| std::env::var(k).ok(), &ResolveOptions::default())
}

/// [`from_config`] with an explicit environment and options.
///
/// - `auto`: `local` when its model folder is present (`local.modelPath`, else `$MEMORY_LOCAL_MODEL`), then
///   `openai`, `gemini`, `voyage`, `mistral`, the first with an API key; else `None`.
/// - An explicit provider that is not set up (no key, no model folder) is an error naming the key to set,
///   unless a `fallback` is configured: then the fallback is used alone.
/// - `fallback` (other than `none`) wraps both in a [`FallbackProvider`].
pub fn from_config_with(
    config: &Config,
    env: EnvLookup<'_>,
    options: &ResolveOptions,
) -> Result<Option<Arc<dyn EmbeddingProvider>>, MemoryError> {
    let search = &config.memory.search;
    if !search.enabled {
        return Ok(None);
    }
    let provider = normalize_name(&search.provider);
    let fallback = normalize_name(&search.fallback);
    if !PROVIDER_NAMES.contains(&provider.as_str()) {
        return Err(MemoryError::Config {
            key: "memory.search.provider".into(),
            message: format!("unknown embedding provider `{}`; expected one of {}", search.provider, PROVIDER_NAMES.join(", ")),
        });
    }
    if fallback == "auto" || !PROVIDER_NAMES.contains(&fallback.as_str()) {
        return Err(MemoryError::Config {
            key: "memory.search.fallback".into(),
            message: format!(
                "unknown fallback provider `{}`; expected `none` or one of {}",
                search.fallback,
                PROVIDER_NAMES.iter().filter(|p| !matches!(**p, "auto" | "none")).copied().collect::<Vec<_>>().join(", ")
            ),
        });
    }
    if provider == "none" {
        return Ok(None);
    }

    let primary_name = if provider == "auto" {
        match auto_choice(config, env) {
            Some(name) => {
                info!(provider = name, "auto-selected embedding provider");
                Some(name.to_string())
            }
            None => None,
        }
    } else {
        Some(provider.clone())
    };

    let secondary = if fallback == "none" || Some(&fallback) == primary_name.as_ref() {
        if fallback != "none" {
            warn!(fallback = %fallback, "memory.search.fallback names the primary provider; ignored");
        }
        None
    } else {
        match build(&fallback, Role::Fallback, config, env, options) {
            Ok(p) => Some(p),
            Err(e) if e.missing => {
                warn!(fallback = %fallback, reason = %e.message, "fallback embedding provider not available");
                None
            }
            Err(e) => {
                return Err(MemoryError::Config { key: "memory.search.fallback".into(), message: e.message });
            }
        }
    };

    let Some(primary_name) = primary_name else {
        if secondary.is_none() {
            info!("no embedding provider available (auto): keyword-only search");
        }
        return Ok(secondary);
    };
    match build(&primary_name, Role::Primary, config, env, options) {
        Ok(primary) => Ok(Some(match secondary {
            Some(s) => Arc::new(FallbackProvider::new(primary, s)) as Arc<dyn EmbeddingProvider>,
            None => primary,
        })),
        Err(e) if e.missing && secondary.is_some() => {
            warn!(provider = %primary_name, reason = %e.message, "embedding provider not available; using the fallback");
            Ok(secondary)
        }
        Err(e) => Err(e.into()),
    }
}

/// What `auto` would pick, without building it: `local`, `openai`, `gemini`, `voyage`, `mistral`, or `None`.
pub fn auto_choice(config: &Config, env: EnvLookup<'_>) -> Option<&'static str> {
    let search = &config.memory.search;
    if local_model_dir(search, env).is_some_and(|d| model_folder_present(&d)) {
        return Some("local");
    }
    AUTO_REMOTE_ORDER
        .into_iter()
        .find(|k| api_key(*k, Role::Primary, config, env).is_some())
        .map(RemoteKind::id)
}

fn normalize_name(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    if s.is_empty() {
        "none".into()
    } else {
        s
    }
}

fn non_empty(s: Option<&String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn expand_home(p: &str) -> PathBuf {
    match p.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest),
        None => PathBuf::from(p),
    }
}

fn local_model_dir(search: &SearchConfig, env: EnvLookup<'_>) -> Option<PathBuf> {
    non_empty(search.local.model_path.as_ref())
        .or_else(|| non_empty(env(LOCAL_MODEL_ENV).as_ref()))
        .map(|p| expand_home(&p))
}

/// The key for `kind`: `memory.search.remote.apiKey` (primary only), `models.providers.<id>.apiKey`, then the
/// environment variable.
fn api_key(kind: RemoteKind, role: Role, config: &Config, env: EnvLookup<'_>) -> Option<ApiKey> {
    let secret = |s: Option<&memory_core::config::SecretString>| non_empty(s.map(|k| k.expose().to_string()).as_ref());
    let remote = (role == Role::Primary).then(|| secret(config.memory.search.remote.api_key.as_ref())).flatten();
    remote
        .or_else(|| secret(config.models.providers.get(kind.id()).and_then(|p| p.api_key.as_ref())))
        .or_else(|| kind.api_key_env().and_then(|v| non_empty(env(v).as_ref())))
        .and_then(ApiKey::new)
}

fn build(
    name: &str,
    role: Role,
    config: &Config,
    env: EnvLookup<'_>,
    options: &ResolveOptions,
) -> Result<Arc<dyn EmbeddingProvider>, BuildError> {
    let search = &config.memory.search;
    let provider_key = match role {
        Role::Primary => "memory.search.provider",
        Role::Fallback => "memory.search.fallback",
    };
    if name == "local" {
        let Some(dir) = local_model_dir(search, env) else {
            return Err(BuildError {
                key: "memory.search.local.modelPath".into(),
                message: format!("provider `local` needs a model folder: set memory.search.local.modelPath or ${LOCAL_MODEL_ENV}"),
                missing: true,
            });
        };
        return match LocalProvider::open(&dir) {
            Ok(p) => Ok(Arc::new(p)),
            Err(e) => Err(BuildError {
                key: "memory.search.local.modelPath".into(),
                missing: matches!(e, LocalModelError::MissingFolder(_) | LocalModelError::MissingFile { .. }),
                message: e.to_string(),
            }),
        };
    }
    let Some(kind) = RemoteKind::from_id(name) else {
        return Err(BuildError { key: provider_key.into(), message: format!("unknown provider `{name}`"), missing: false });
    };
    let entry = config.models.providers.get(kind.id());
    let exposed = |h: &std::collections::BTreeMap<String, memory_core::config::SecretString>| {
        h.iter().map(|(k, v)| (k.clone(), v.expose().to_string())).collect::<std::collections::BTreeMap<String, String>>()
    };
    let mut headers = entry.map(|e| exposed(&e.headers)).unwrap_or_default();
    let mut base_url = non_empty(entry.and_then(|e| e.base_url.as_ref()));
    let mut model = None;
    if role == Role::Primary {
        headers.extend(exposed(&search.remote.headers));
        base_url = non_empty(search.remote.base_url.as_ref()).or(base_url);
        model = non_empty(search.model.as_ref());
    }
    if kind == RemoteKind::Ollama && base_url.is_none() {
        base_url = non_empty(env("OLLAMA_HOST").as_ref()).map(|h| ollama_host_url(&h));
    }
    if kind == RemoteKind::OpenAiCompatible && model.is_none() {
        let (key, message) = match role {
            Role::Primary => ("memory.search.model", "provider `openai-compatible` needs a model name"),
            Role::Fallback => (
                "memory.search.fallback",
                "`openai-compatible` needs a model name and memory.search.model applies to the primary provider only",
            ),
        };
        return Err(BuildError { key: key.into(), message: message.into(), missing: false });
    }
    let settings = RemoteSettings {
        model,
        base_url,
        api_key: api_key(kind, role, config, env),
        headers,
        http: options.http.clone(),
        // Batch jobs are for the primary provider's backfills; a fallback answers synchronously.
        batch: if role == Role::Primary { crate::batch::BatchSettings::from_config(&search.remote.batch) } else { None },
        output_dimensionality: if role == Role::Primary && search.multimodal.enabled { search.multimodal.dimensions } else { None },
        ..RemoteSettings::default()
    };
    match RemoteProvider::new(kind, settings) {
        Ok(p) => Ok(Arc::new(p)),
        Err(EmbeddingError::NotConfigured { message, .. }) if message.starts_with("no API key") => {
            let env_var = kind.api_key_env().unwrap_or_default();
            let key = match role {
                Role::Primary => "memory.search.remote.apiKey".to_string(),
                Role::Fallback => format!("models.providers.{}.apiKey", kind.id()),
            };
            Err(BuildError {
                key,
                message: format!(
                    "provider `{}` needs an API key: set {} or the environment variable {env_var}",
                    kind.id(),
                    match role {
                        Role::Primary => format!("memory.search.remote.apiKey, models.providers.{}.apiKey", kind.id()),
                        Role::Fallback => format!("models.providers.{}.apiKey", kind.id()),
                    }
                ),
                missing: true,
            })
        }
        Err(e) => {
            let key = match role {
                Role::Primary if e.to_string().contains("base URL") => "memory.search.remote.baseUrl",
                Role::Primary if e.to_string().contains("header") => "memory.search.remote.headers",
                _ => provider_key,
            };
            Err(BuildError { key: key.into(), message: e.to_string(), missing: false })
        }
    }
}

/// `OLLAMA_HOST` may be `host:port`, `0.0.0.0`, or a URL.
fn ollama_host_url(host: &str) -> String {
    let with_scheme = if host.contains("://") { host.to_string() } else { format!("http://{host}") };
    let url = with_scheme.replace("://0.0.0.0", "://127.0.0.1");
    let authority = url.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("");
    if authority.contains(':') || authority.starts_with('[') {
        url
    } else {
        format!("{}:11434", url.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_host_forms() {
        assert_eq!(ollama_host_url("0.0.0.0"), "http://127.0.0.1:11434");
        assert_eq!(ollama_host_url("10.0.0.5:8080"), "http://10.0.0.5:8080");
        assert_eq!(ollama_host_url("https://ollama.example"), "https://ollama.example:11434");
    }
}

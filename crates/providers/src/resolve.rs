//! `memory.search.provider` / `fallback` / `model` / `remote` / `local` to a provider.

use std::sync::Arc;

use memory_core::config::SearchConfig;
use memory_core::embedding::{EmbeddingError, EmbeddingProvider};
use memory_core::{Config, MemoryError};
use tracing::{debug, info, warn};

use crate::catalogue::{self, Provider, CATALOGUE};
use crate::fallback::FallbackProvider;
use crate::http::{ApiKey, HttpOptions};
use crate::local::{LocalModelError, LocalOptions, LocalProvider};
use crate::model_file::{self, DownloadOptions, ModelDownload, Places, Source, OPENCLAW_DEFAULT_MODEL};
use crate::remote::{RemoteProvider, RemoteSettings};
use memory_core::embedding::Unavailable;

/// How often a stand-in for a local model that cannot be used looks for it again ([`memory_core::embedding::Unavailable`]).
const STAND_IN_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// Environment variable naming the local model (folder, file or URI) when `memory.search.local.modelPath` is unset.
pub const LOCAL_MODEL_ENV: &str = "MEMORY_LOCAL_MODEL";

pub use crate::catalogue::{unavailable_reason, PROVIDER_NAMES};

/// What answers when the configured provider cannot (`unavailable_reason`), for `memory status`.
pub fn provider_note(config: &Config) -> Option<String> {
    let name = normalize_name(&config.memory.search.provider);
    let why = unavailable_reason(&name)?;
    let instead = match normalize_name(&config.memory.search.fallback).as_str() {
        "none" => "keyword search answers instead".to_string(),
        f => format!("the fallback `{f}` answers instead"),
    };
    Some(format!("embedding provider `{name}` is not available in memory-rs ({why}); {instead}"))
}

/// How a provider id is reached: the catalogue entry it is built from, the `models.providers` entries that may
/// hold its key and URL, and the environment variable with its key.
struct Target {
    provider: &'static Provider,
    entries: Vec<String>,
    key_env: Option<&'static str>,
}

/// The catalogue entry `name`, or a custom `models.providers.<name>` with the entry of the API it speaks.
fn target(name: &str, config: &Config) -> Result<Target, String> {
    if let Some(provider) = catalogue::get(name) {
        return Ok(Target {
            provider,
            entries: provider.config_entries.iter().map(std::string::ToString::to_string).collect(),
            key_env: provider.key_env,
        });
    }
    let Some(entry) = config.models.providers.get(name) else { return Err(format!("unknown provider `{name}`")) };
    let api = entry.api.as_deref().unwrap_or("openai-completions");
    let provider = catalogue::for_custom_api(api).ok_or_else(|| {
        format!("models.providers.{name}.api is `{api}`, which has no embedding API memory-rs speaks (openai-*, google-generative-ai, ollama)")
    })?;
    Ok(Target { provider, entries: vec![name.to_string()], key_env: None })
}

/// Where environment variables come from (the process, or a map in tests).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Knobs of providers built from a config that the config itself does not carry.
#[derive(Debug, Clone, Default)]
pub struct ResolveOptions {
    /// The HTTP policy of remote providers instead of the one the config and the server's place imply
    /// (`indexed::patience::RequestLimits`); tests shorten it.
    pub http: Option<HttpOptions>,
    /// Whether a local model file named by a URI and found in no cache may be downloaded now.
    pub model_download: ModelDownload,
    /// Limits and patience of that download.
    pub download: DownloadOptions,
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
    /// The provider exists in OpenClaw but not here: keyword search (or the fallback) answers.
    unavailable: bool,
    /// A configured local model folder that cannot be used (missing, incomplete, damaged): the provider that
    /// stands in for it when there is no fallback ([`local_stand_in`]).
    stand_in: Option<Box<Unavailable>>,
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
/// - `local` without `local.modelPath` or `$MEMORY_LOCAL_MODEL`: OpenClaw's default model
///   ([`OPENCLAW_DEFAULT_MODEL`]); a model named by a URI is found or downloaded by [`model_file::locate`].
/// - `auto`: `local` when a local model is configured (`local.modelPath`, else `$MEMORY_LOCAL_MODEL`), then
///   `openai`, `gemini`, `voyage`, `mistral`, the first with an API key; else `None`. A configured local folder
///   that cannot be used is still `local` (its stand-in answers, as for an explicit `local`).
/// - An explicit provider that is not set up (no key, no model folder) is an error naming the key to set,
///   unless a `fallback` is configured: then the fallback is used alone.
/// - `fallback` (other than `none`) wraps both in a [`FallbackProvider`].
pub fn from_config_with(config: &Config, env: EnvLookup<'_>, options: &ResolveOptions) -> Result<Option<Arc<dyn EmbeddingProvider>>, MemoryError> {
    let search = &config.memory.search;
    if !search.enabled {
        return Ok(None);
    }
    let provider = normalize_name(&search.provider);
    let fallback = normalize_name(&search.fallback);
    let known = |p: &str| PROVIDER_NAMES.contains(&p) || config.models.providers.contains_key(p);
    if !known(&provider) {
        return Err(MemoryError::Config {
            key: "memory.search.provider".into(),
            message: format!("unknown embedding provider `{}`; expected one of {}", search.provider, PROVIDER_NAMES.join(", ")),
        });
    }
    if fallback == "auto" || !known(&fallback) {
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
            Err(e) if e.missing || e.unavailable => {
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
        // A local model folder that cannot be used (missing or damaged) is the primary failing: the fallback the
        // user set answers, as it does when the primary fails later.
        Err(e) if (e.missing || e.stand_in.is_some()) && secondary.is_some() => {
            warn!(provider = %primary_name, reason = %e.message, "embedding provider not available; using the fallback");
            Ok(secondary)
        }
        Err(e) if e.unavailable => {
            warn!(provider = %primary_name, reason = %e.message, "embedding provider not available here");
            Ok(secondary)
        }
        Err(BuildError { stand_in: Some(stand_in), key, message, .. }) => {
            // The memory keeps answering by its words, and keeps its index, while the model is away. Said once
            // per process: a host opens its provider more than once (engines, fallback, reopening).
            let reason = format!("{key}: {message}");
            if first_time(&reason) {
                warn!(provider = %primary_name, reason = %reason, "the local model cannot be used; searches answer by words until it is back");
            } else {
                debug!(provider = %primary_name, reason = %reason, "the local model still cannot be used");
            }
            Ok(Some(Arc::new(*stand_in)))
        }
        Err(e) => Err(e.into()),
    }
}

/// What `auto` would pick, without building it: `local`, `openai`, `gemini`, `voyage`, `mistral`, or `None`.
///
/// A local model folder that is configured (`local.modelPath` or `$MEMORY_LOCAL_MODEL`) is picked even when it is
/// not there (moved, a cache cleaned): the local model is what was asked for, and its stand-in keeps the index's
/// vectors for when it is back, where a remote provider or keyword-only search would rebuild the index without
/// them.
pub fn auto_choice(config: &Config, env: EnvLookup<'_>) -> Option<&'static str> {
    let search = &config.memory.search;
    if local_model_spec(search, env).is_some() {
        return Some("local");
    }
    CATALOGUE.iter().filter(|p| p.auto).find(|p| api_key(p, Role::Primary, config, env).is_some()).map(|p| p.id)
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

/// The provider standing in for the local model `source` that cannot be used (`why`): every embedding fails with
/// why, and a long-running process (`memory serve`) looks for the model on disk again every [`STAND_IN_RETRY`]
/// (never downloading: a process tries a download once), so it answers with vectors once the model is back.
fn local_stand_in(source: Source, places: Places, options: LocalOptions, why: String) -> Unavailable {
    let model = match &source {
        Source::Path(p) | Source::Relative(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        Source::Remote(a) => a.file_name.clone(),
    };
    let reload: memory_core::embedding::Reload = Box::new(move || {
        let path =
            model_file::locate_source(source.clone(), &places, ModelDownload::Never, &DownloadOptions::default()).map_err(|e| e.to_string())?;
        LocalProvider::open_with(&path, &options).map(|p| Arc::new(p) as Arc<dyn EmbeddingProvider>).map_err(|e| e.to_string())
    });
    Unavailable::new("local", model, why).with_reload(reload, STAND_IN_RETRY)
}

/// The local model configured: `local.modelPath`, else `$MEMORY_LOCAL_MODEL` (a folder, a file or a URI).
fn local_model_spec(search: &SearchConfig, env: EnvLookup<'_>) -> Option<String> {
    non_empty(search.local.model_path.as_ref()).or_else(|| non_empty(env(LOCAL_MODEL_ENV).as_ref()))
}

/// Whether `message` is said for the first time in this process (warnings a host would otherwise repeat each
/// time it opens its provider).
fn first_time(message: &str) -> bool {
    static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> = std::sync::Mutex::new(std::collections::BTreeSet::new());
    SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(message.to_string())
}

/// The key for `provider`: `memory.search.remote.apiKey` (primary only), `models.providers.<entry>.apiKey`, then
/// the environment variable.
fn api_key(provider: &Provider, role: Role, config: &Config, env: EnvLookup<'_>) -> Option<ApiKey> {
    target_key(provider.config_entries, provider.key_env, role, config, env)
}

fn target_key<E: AsRef<str>>(entries: &[E], key_env: Option<&str>, role: Role, config: &Config, env: EnvLookup<'_>) -> Option<ApiKey> {
    let secret = |s: Option<&memory_core::config::SecretString>| non_empty(s.map(|k| k.expose().to_string()).as_ref());
    let remote = (role == Role::Primary).then(|| secret(config.memory.search.remote.api_key.as_ref())).flatten();
    remote
        .or_else(|| entries.iter().find_map(|e| secret(config.models.providers.get(e.as_ref()).and_then(|p| p.api_key.as_ref()))))
        .or_else(|| key_env.and_then(|v| non_empty(env(v).as_ref())))
        .and_then(ApiKey::new)
}

fn build(name: &str, role: Role, config: &Config, env: EnvLookup<'_>, options: &ResolveOptions) -> Result<Arc<dyn EmbeddingProvider>, BuildError> {
    let search = &config.memory.search;
    let provider_key = match role {
        Role::Primary => "memory.search.provider",
        Role::Fallback => "memory.search.fallback",
    };
    if name == "local" {
        let key = "memory.search.local.modelPath";
        let spec = local_model_spec(search, env).unwrap_or_else(|| OPENCLAW_DEFAULT_MODEL.to_string());
        let places = Places::new(&search.local, env);
        let (model_download, download_options) = (options.model_download, options.download.clone());
        let source = model_file::parse_source(&spec, env).map_err(|e| BuildError {
            key: key.into(),
            message: e.to_string(),
            missing: false,
            unavailable: false,
            stand_in: None,
        })?;
        // Prompts: literal ones from `local.*Prompt`, else prompt names from the input-type keys (the primary
        // provider's settings, as for remote providers).
        let primary = role == Role::Primary;
        let options = LocalOptions {
            query_prompt: search.local.query_prompt.clone().filter(|_| primary),
            document_prompt: search.local.document_prompt.clone().filter(|_| primary),
            query_prompt_name: non_empty(search.query_input_type.as_ref().or(search.input_type.as_ref())).filter(|_| primary),
            document_prompt_name: non_empty(search.document_input_type.as_ref().or(search.input_type.as_ref())).filter(|_| primary),
            dimensions: search.output_dimensionality.filter(|_| primary),
        };
        let download = if model_file::offline(env) { ModelDownload::Offline } else { model_download };
        let dir = match model_file::locate_source(source.clone(), &places, download, &download_options) {
            Ok(path) => path,
            Err(e) => {
                let message = e.to_string();
                return Err(BuildError {
                    key: key.into(),
                    missing: true,
                    unavailable: false,
                    stand_in: primary.then(|| Box::new(local_stand_in(source, places, options, format!("{key}: {message}")))),
                    message,
                });
            }
        };
        return match LocalProvider::open_with(&dir, &options) {
            Ok(p) => Ok(Arc::new(p)),
            Err(LocalModelError::UnknownPrompt { key, dir, name, available }) => Err(BuildError {
                key: if key == "memory.search.queryInputType" && search.query_input_type.is_none()
                    || key == "memory.search.documentInputType" && search.document_input_type.is_none()
                {
                    "memory.search.inputType".into()
                } else {
                    key.into()
                },
                missing: false,
                unavailable: false,
                stand_in: None,
                message: format!("the local model in {} has no prompt named `{name}` (its prompts: {available})", dir.display()),
            }),
            Err(e) => {
                let message = e.to_string();
                Err(BuildError {
                    key: key.into(),
                    missing: matches!(e, LocalModelError::MissingFolder(_) | LocalModelError::MissingFile { .. }),
                    unavailable: false,
                    stand_in: primary.then(|| Box::new(local_stand_in(source, places, options, format!("{key}: {message}")))),
                    message,
                })
            }
        };
    }
    if let Some(why) = unavailable_reason(name) {
        return Err(BuildError {
            key: provider_key.into(),
            message: format!("provider `{name}` is not available in memory-rs: {why}"),
            missing: false,
            unavailable: true,
            stand_in: None,
        });
    }
    let target = target(name, config).map_err(|message| BuildError {
        key: provider_key.into(),
        message,
        missing: false,
        unavailable: false,
        stand_in: None,
    })?;
    let provider = target.provider;
    let entry = target.entries.iter().find_map(|e| config.models.providers.get(e));
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
    if let (None, Some(var)) = (&base_url, provider.host_env) {
        base_url = non_empty(env(var).as_ref()).map(|h| host_url(&h, provider.base_url));
    }
    if provider.default_model.is_none() && model.is_none() {
        let id = provider.reported_id();
        let (key, message) = match role {
            Role::Primary => ("memory.search.model", format!("provider `{id}` needs a model name")),
            Role::Fallback => {
                ("memory.search.fallback", format!("`{id}` needs a model name and memory.search.model applies to the primary provider only"))
            }
        };
        return Err(BuildError { key: key.into(), message, missing: false, unavailable: false, stand_in: None });
    }
    // How long a request may take and how many are in flight: from the keys, else from where the server is.
    let effective_base = base_url.as_deref().unwrap_or(provider.base_url);
    let request_limits = memory_core::indexed::patience::RequestLimits::for_server(search, effective_base, provider.id == "ollama");
    let http = options.http.clone().unwrap_or_else(|| HttpOptions { request_timeout: request_limits.request_timeout, ..HttpOptions::default() });
    let limits = crate::batching::BatchLimits { max_items: provider.max_items, concurrency: request_limits.concurrency, ..Default::default() };
    let settings = RemoteSettings {
        model,
        base_url,
        api_key: target_key(&target.entries, target.key_env, role, config, env),
        query_input_type: search.query_input_type.clone().or_else(|| search.input_type.clone()).filter(|_| role == Role::Primary),
        document_input_type: search.document_input_type.clone().or_else(|| search.input_type.clone()).filter(|_| role == Role::Primary),
        headers,
        http,
        limits: Some(limits),
        // Batch jobs are for the primary provider's backfills; a fallback answers synchronously.
        batch: if role == Role::Primary { crate::batch::BatchSettings::from_config(&search.remote.batch) } else { None },
        output_dimensionality: match role {
            Role::Fallback => None,
            Role::Primary if search.multimodal.enabled => search.multimodal.dimensions.or(search.output_dimensionality),
            Role::Primary => search.output_dimensionality,
        },
        ..RemoteSettings::default()
    };
    match RemoteProvider::new(provider, settings) {
        Ok(p) => Ok(Arc::new(p)),
        Err(EmbeddingError::NotConfigured { message, .. }) if message.starts_with("no API key") => {
            let env_var = provider.key_env.unwrap_or_default();
            let id = provider.reported_id();
            let key = match role {
                Role::Primary => "memory.search.remote.apiKey".to_string(),
                Role::Fallback => format!("models.providers.{id}.apiKey"),
            };
            Err(BuildError {
                key,
                message: format!(
                    "provider `{id}` needs an API key: set {} or the environment variable {env_var}",
                    match role {
                        Role::Primary => format!("memory.search.remote.apiKey, models.providers.{id}.apiKey"),
                        Role::Fallback => format!("models.providers.{id}.apiKey"),
                    }
                ),
                missing: true,
                unavailable: false,
                stand_in: None,
            })
        }
        Err(e) => {
            let key = match role {
                Role::Primary if e.to_string().contains("base URL") => "memory.search.remote.baseUrl",
                Role::Primary if e.to_string().contains("header") => "memory.search.remote.headers",
                _ => provider_key,
            };
            Err(BuildError { key: key.into(), message: e.to_string(), missing: false, unavailable: false, stand_in: None })
        }
    }
}

/// A server address from the environment (`OLLAMA_HOST`): `host:port`, `0.0.0.0`, or a URL; without a port,
/// the port of the provider's default base URL.
fn host_url(host: &str, default_base: &str) -> String {
    let with_scheme = if host.contains("://") { host.to_string() } else { format!("http://{host}") };
    let url = with_scheme.replace("://0.0.0.0", "://127.0.0.1");
    if authority(&url).contains(':') || authority(&url).starts_with('[') {
        return url;
    }
    match authority(default_base).rsplit_once(':') {
        Some((_, port)) => format!("{}:{port}", url.trim_end_matches('/')),
        None => url,
    }
}

/// The `host[:port]` of a URL.
fn authority(url: &str) -> &str {
    url.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ollama_host_forms() {
        let ollama = catalogue::get("ollama").unwrap().base_url;
        assert_eq!(host_url("0.0.0.0", ollama), "http://127.0.0.1:11434");
        assert_eq!(host_url("10.0.0.5:8080", ollama), "http://10.0.0.5:8080");
        assert_eq!(host_url("https://ollama.example", ollama), "https://ollama.example:11434");
    }
}

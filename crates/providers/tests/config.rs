//! `from_config`: provider selection (`auto`, explicit, `none`), keys from config or environment, errors that
//! name the key to fix, and the fallback provider end to end against loopback servers.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{MockServer, Reply};
use memory_core::config::ModelProviderConfig;
use memory_core::{Config, MemoryError};
use providers::catalogue::CATALOGUE;
use providers::model_file::{ModelDownload, OPENCLAW_DEFAULT_MODEL};
use providers::{auto_choice, from_config, from_config_with, EmbeddingPurpose, HttpOptions, ResolveOptions, PROVIDER_NAMES};
use serde_json::json;

fn env_of(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn resolve(config: &Config, env: &HashMap<String, String>) -> Result<Option<std::sync::Arc<dyn providers::EmbeddingProvider>>, MemoryError> {
    let options = ResolveOptions {
        http: Some(HttpOptions {
            request_timeout: Duration::from_secs(2),
            max_retries: 1,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_millis(100),
        }),
        // Never a download from these tests (a local model named by a URI is looked for on disk only).
        model_download: ModelDownload::Never,
        ..Default::default()
    };
    from_config_with(config, &|k| env.get(k).cloned(), &options)
}

fn config(provider: &str) -> Config {
    let mut c = Config::default();
    c.memory.search.provider = provider.into();
    c
}

fn config_key(err: MemoryError) -> String {
    err.config_key().unwrap_or_else(|| panic!("expected a config error, got {err}")).to_string()
}

#[test]
fn none_and_disabled_are_keyword_only() {
    let env = env_of(&[("OPENAI_API_KEY", "sk-x")]);
    assert!(resolve(&config("none"), &env).unwrap().is_none());
    let mut c = config("openai");
    c.memory.search.enabled = false;
    assert!(resolve(&c, &env).unwrap().is_none());
}

#[test]
fn auto_with_nothing_available_is_keyword_only() {
    let env = env_of(&[]);
    let c = config("auto");
    assert!(resolve(&c, &env).unwrap().is_none());
    assert_eq!(auto_choice(&c, &|_| None), None);
    // A model folder configured but not there is the local model asked for: its stand-in answers (searches by
    // words, the index keeps its vectors), not keyword-only or a remote provider, which would rebuild without them.
    let mut c = config("auto");
    c.memory.search.local.model_path = Some("/nonexistent/model".into());
    let p = resolve(&c, &env).unwrap().expect("the local model's stand-in");
    assert_eq!(p.id(), "local");
    assert!(p.unavailable().is_some_and(|why| why.contains("memory.search.local.modelPath")));
    let p = resolve(&c, &env_of(&[("OPENAI_API_KEY", "k1")])).unwrap().unwrap();
    assert_eq!(p.id(), "local", "a configured local model is preferred to a key in the environment, as when present");
}

#[test]
fn auto_prefers_local_then_openai_gemini_voyage_mistral() {
    let c = config("auto");
    let all = [("OPENAI_API_KEY", "k1"), ("GEMINI_API_KEY", "k2"), ("VOYAGE_API_KEY", "k3"), ("MISTRAL_API_KEY", "k4")];
    for (i, want) in ["openai", "gemini", "voyage", "mistral"].iter().enumerate() {
        let env = env_of(&all[i..]);
        let p = resolve(&c, &env).unwrap().unwrap();
        assert_eq!(p.id(), *want);
    }
    // Keys in models.providers count too; empty keys do not.
    let mut c2 = config("auto");
    c2.models.providers.insert("voyage".into(), ModelProviderConfig { api_key: Some("vk".into()), ..Default::default() });
    let env = env_of(&[("OPENAI_API_KEY", "  "), ("MISTRAL_API_KEY", "mk")]);
    assert_eq!(resolve(&c2, &env).unwrap().unwrap().id(), "voyage");
    // The local model wins when its folder is present (from the environment here).
    let dir = common::test_model_dir();
    let env = env_of(&[("OPENAI_API_KEY", "k1"), ("MEMORY_LOCAL_MODEL", dir.to_str().unwrap())]);
    let p = resolve(&c, &env).unwrap().unwrap();
    assert_eq!((p.id(), p.model(), p.dimensions()), ("local", "all-MiniLM-L6-v2", Some(384)));
}

/// Every catalogue entry is a `memory.search.provider` value, built with its default model and its key variable.
#[test]
fn every_catalogue_provider_is_accepted_by_name() {
    for p in CATALOGUE {
        assert!(PROVIDER_NAMES.contains(&p.id), "{p}");
        let mut c = config(p.id);
        if p.default_model.is_none() {
            c.memory.search.model = Some("m".into());
        }
        let env = env_of(&p.key_env.map(|k| (k, "key")).into_iter().collect::<Vec<_>>());
        let built = resolve(&c, &env).unwrap_or_else(|e| panic!("{p}: {e}")).unwrap();
        assert_eq!((built.id(), built.model()), (p.reported_id(), p.default_model.unwrap_or("m")), "{p}");
        assert_eq!(built.dimensions(), p.default_model.and_then(|m| p.known_dimensions(m)), "{p}");
        if p.key_required {
            let err = resolve(&c, &env_of(&[])).err().unwrap_or_else(|| panic!("{p}: built without a key"));
            assert_eq!(config_key(err), "memory.search.remote.apiKey", "{p}");
        }
    }
}

#[test]
fn config_errors_name_the_key() {
    let env = env_of(&[]);
    assert_eq!(config_key(resolve(&config("word2vec"), &env).err().unwrap()), "memory.search.provider");
    let mut c = config("none");
    c.memory.search.fallback = "bogus".into();
    assert_eq!(config_key(resolve(&c, &env).err().unwrap()), "memory.search.fallback");

    let err = resolve(&config("openai"), &env).err().unwrap();
    let msg = err.to_string();
    assert_eq!(config_key(err), "memory.search.remote.apiKey");
    assert!(msg.contains("OPENAI_API_KEY"), "{msg}");

    assert_eq!(config_key(resolve(&config("openai-compatible"), &env).err().unwrap()), "memory.search.model");
    // `local` without a model is OpenClaw's default model, as in OpenClaw: not on this machine (and never
    // downloaded here), its stand-in says why, naming the key and the model.
    let p = resolve(&config("local"), &env).unwrap().expect("the local model's stand-in");
    let why = p.unavailable().expect("a stand-in").to_string();
    assert!(why.starts_with(&format!("memory.search.local.modelPath: {OPENCLAW_DEFAULT_MODEL} is not on this machine")), "{why}");
    // A URI that names no file is a config error.
    let mut c = config("local");
    c.memory.search.local.model_path = Some("hf:owner/repo".into());
    assert_eq!(config_key(resolve(&c, &env).err().unwrap()), "memory.search.local.modelPath");
    let mut c = config("ollama");
    c.memory.search.remote.base_url = Some("localhost:11434".into());
    assert_eq!(config_key(resolve(&c, &env).err().unwrap()), "memory.search.remote.baseUrl");
}

#[test]
fn process_environment_is_the_default_source() {
    // `none` never reads it; this only checks the public entry point is wired.
    assert!(from_config(&config("none")).unwrap().is_none());
}

#[tokio::test]
async fn remote_settings_reach_the_wire_and_keys_stay_hidden() {
    let server = MockServer::start(|rec, _| {
        let n = rec.body["input"].as_array().map(std::vec::Vec::len).unwrap_or(0);
        let data: Vec<_> = (0..n).map(|i| json!({ "index": i, "embedding": [1.0, i as f32, 0.0] })).collect();
        Reply::json(200, json!({ "data": data }).to_string())
    })
    .await;
    let mut c = config("openai-compatible");
    c.memory.search.model = Some("bge-m3".into());
    c.memory.search.remote.base_url = Some(format!("{}/v1", server.url()));
    c.memory.search.remote.api_key = Some("sk-config-SECRET-42".into());
    c.memory.search.remote.headers.insert("X-Title".into(), "memory".into());
    let p = resolve(&c, &env_of(&[])).unwrap().unwrap();
    assert_eq!((p.id(), p.model()), ("openai-compatible", "bge-m3"));
    let v = p.embed(&["a".into(), "b".into()], EmbeddingPurpose::Document).await.unwrap();
    assert_eq!(v.len(), 2);
    assert_eq!(p.dimensions(), Some(3));
    let rec = &server.requests()[0];
    assert_eq!(rec.path, "/v1/embeddings");
    assert_eq!(rec.header("authorization"), Some("Bearer sk-config-SECRET-42"));
    assert_eq!(rec.header("x-title"), Some("memory"));
    assert_eq!(rec.body["model"], "bge-m3");
}

#[tokio::test]
async fn models_providers_entry_supplies_key_and_base_url() {
    let server =
        MockServer::start(|rec, _| Reply::json(200, json!({ "embedding": { "values": vec![0.5; 3072] }, "path": rec.path }).to_string())).await;
    let mut c = config("gemini");
    c.models.providers.insert(
        "gemini".into(),
        ModelProviderConfig { api_key: Some("g-key-SECRET".into()), base_url: Some(format!("{}/v1beta", server.url())), ..Default::default() },
    );
    let p = resolve(&c, &env_of(&[("GEMINI_API_KEY", "env-key-unused")])).unwrap().unwrap();
    p.embed_query("hello").await.unwrap();
    let rec = &server.requests()[0];
    assert_eq!(rec.path, "/v1beta/models/gemini-embedding-001:embedContent");
    assert_eq!(rec.header("x-goog-api-key"), Some("g-key-SECRET"), "config key wins over the environment");
}

#[tokio::test]
async fn fallback_takes_over_only_after_the_primary_fails() {
    // Primary: an OpenAI-compatible server that works for the first call, then fails with 503.
    let primary = MockServer::start(|rec, n| {
        if n == 0 {
            let k = rec.body["input"].as_array().unwrap().len();
            let data: Vec<_> = (0..k).map(|i| json!({ "index": i, "embedding": [1.0, 0.0] })).collect();
            Reply::json(200, json!({ "data": data }).to_string())
        } else {
            Reply::json(503, r#"{"error":{"message":"overloaded"}}"#)
        }
    })
    .await;
    // Secondary: Ollama.
    let secondary = MockServer::start(|rec, _| {
        let k = rec.body["input"].as_array().unwrap().len();
        // nomic-embed-text is 768 wide.
        let mut v = vec![0.0f32; 768];
        v[2] = 2.0;
        Reply::json(200, json!({ "embeddings": vec![v; k] }).to_string())
    })
    .await;
    let mut c = config("openai-compatible");
    c.memory.search.model = Some("m".into());
    c.memory.search.remote.base_url = Some(format!("{}/v1", primary.url()));
    c.memory.search.fallback = "ollama".into();
    c.models.providers.insert("ollama".into(), ModelProviderConfig { base_url: Some(secondary.url()), ..Default::default() });
    let p = resolve(&c, &env_of(&[])).unwrap().unwrap();

    assert_eq!(p.id(), "openai-compatible");
    let primary_fp = p.fingerprint();
    let v = p.embed(&["x".into()], EmbeddingPurpose::Document).await.unwrap();
    assert_eq!(v, vec![vec![1.0, 0.0]]);
    assert!(secondary.requests().is_empty(), "the fallback is not used while the primary works");

    // The failing call returns an error (its caller read the primary's identity), and the identity switches.
    let err = p.embed(&["y".into()], EmbeddingPurpose::Document).await.unwrap_err();
    assert!(err.is_transient());
    assert!(err.to_string().contains("switched to the fallback provider `ollama`"), "{err}");
    assert_eq!(primary.requests().len(), 3, "the primary's own retries ran first");
    assert_eq!(p.id(), "ollama");
    assert_eq!(p.model(), "nomic-embed-text");
    assert_ne!(p.fingerprint(), primary_fp);
    assert!(secondary.requests().is_empty());

    let v = p.embed(&["y".into()], EmbeddingPurpose::Document).await.unwrap();
    assert_eq!((v.len(), v[0].len(), v[0][2]), (1, 768, 1.0));
    assert_eq!(p.dimensions(), Some(768));
    assert_eq!(secondary.requests()[0].path, "/api/embed");
    assert_eq!(primary.requests().len(), 3, "no return to the primary");
}

#[test]
fn fallback_alone_when_the_primary_is_not_set_up() {
    let mut c = config("openai");
    c.memory.search.fallback = "ollama".into();
    let p = resolve(&c, &env_of(&[])).unwrap().unwrap();
    assert_eq!(p.id(), "ollama");
    // With a key, the primary is wrapped and reports its own identity.
    let p = resolve(&c, &env_of(&[("OPENAI_API_KEY", "sk-1")])).unwrap().unwrap();
    assert_eq!((p.id(), p.dimensions()), ("openai", Some(1536)));
}

/// Issue 20: a config as OpenClaw writes it (the 2026.7.1 fixture's search keys, with `${VAR}` keys) reaches an
/// OpenAI-compatible server as configured: the variable's value as the key, the input types per purpose, the
/// width as `dimensions`.
#[tokio::test]
async fn openclaw_config_values_reach_the_wire() {
    let server = MockServer::start(|rec, _| {
        let n = rec.body["input"].as_array().map(std::vec::Vec::len).unwrap_or(0);
        let data: Vec<_> =
            (0..n).map(|i| json!({ "index": i, "embedding": (0..256).map(|d| if d == 0 { 1.0 } else { 0.0 }).collect::<Vec<f32>>() })).collect();
        Reply::json(200, json!({ "data": data }).to_string())
    })
    .await;
    let text = format!(
        r#"{{ gateway: {{ port: 1 }}, mcp: {{ servers: {{}} }},
             models: {{ providers: {{ myserver: {{ api: "openai-completions", baseUrl: "{}/v1", apiKey: "${{OC_TEST_KEY}}", headers: {{ "X-Org": "${{OC_TEST_ORG}}" }} }} }} }},
             agents: {{ defaults: {{ memorySearch: {{ provider: "myserver", model: "bge-m3", queryInputType: "search_query",
                 documentInputType: "search_document", outputDimensionality: 256 }} }} }} }}"#,
        server.url()
    );
    let vars = env_of(&[("OC_TEST_KEY", "sk-from-VAR"), ("OC_TEST_ORG", "org-7")]);
    let c = Config::from_json5_for(&text, Some("main"), &|k| vars.get(k).cloned()).unwrap();
    let p = resolve(&c, &env_of(&[])).unwrap().unwrap();
    p.embed(&["a".into()], EmbeddingPurpose::Document).await.unwrap();
    p.embed_query("q").await.unwrap();
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/embeddings");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-from-VAR"));
    assert_eq!(reqs[0].header("x-org"), Some("org-7"));
    assert_eq!(reqs[0].body["input_type"], "search_document");
    assert_eq!(reqs[0].body["dimensions"], 256);
    assert_eq!(reqs[1].body["input_type"], "search_query");
}

#[test]
fn openclaw_provider_ids() {
    // lmstudio: an OpenAI-compatible server at LM Studio's default local URL.
    let mut c = config("lmstudio");
    c.memory.search.model = Some("nomic-embed".into());
    let p = resolve(&c, &env_of(&[])).unwrap().unwrap();
    assert_eq!(p.id(), "openai-compatible");
    // Gemini reads OpenClaw's models.providers.google.apiKey.
    let mut c = config("gemini");
    c.models.providers.insert("google".into(), ModelProviderConfig { api_key: Some("g-key".into()), ..Default::default() });
    assert_eq!(resolve(&c, &env_of(&[])).unwrap().unwrap().id(), "gemini");
    // bedrock / github-copilot: not available here; keyword search (or the fallback) answers, with a status line.
    for id in ["bedrock", "github-copilot"] {
        let c = config(id);
        assert!(resolve(&c, &env_of(&[])).unwrap().is_none(), "{id}");
        let note = providers::provider_note(&c).unwrap();
        assert!(note.contains("not available") && note.contains("keyword search answers instead"), "{note}");
    }
    // A custom provider whose api has no embeddings is a clear error naming the key.
    let mut c = config("claude");
    c.models.providers.insert("claude".into(), ModelProviderConfig { api: Some("anthropic-messages".into()), ..Default::default() });
    let e = resolve(&c, &env_of(&[])).err().unwrap();
    assert!(e.to_string().contains("models.providers.claude.api"), "{e}");
}

/// A configured local model folder that cannot be used (moved, a cache cleaned, damaged) is not a config error at
/// every command: a stand-in answers whose every embedding fails with the key and the cause, so searches answer by
/// their words and the index keeps its vectors; with a fallback, the fallback answers (missing or damaged alike).
#[tokio::test]
async fn a_local_model_folder_that_cannot_be_used_has_a_stand_in_naming_the_key() {
    let env = env_of(&[]);
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::write(damaged.join("model.safetensors"), b"not a model").unwrap();
    for folder in [dir.path().join("gone"), damaged] {
        let mut c = config("local");
        c.memory.search.local.model_path = Some(folder.to_string_lossy().into_owned());
        let p = resolve(&c, &env).unwrap().expect("a stand-in");
        let why = p.unavailable().expect("says it cannot embed").to_string();
        assert!(why.starts_with("memory.search.local.modelPath: "), "{why}");
        assert_eq!(p.id(), "local");
        let err = p.embed(&["x".to_string()], providers::EmbeddingPurpose::Query).await.unwrap_err().to_string();
        assert!(err.contains("memory.search.local.modelPath") && !err.is_empty(), "{err}");
        // It takes the identity of an index the local provider built, and no other provider's.
        assert!(!p.adopt_identity("openai", "text-embedding-3-small", "fp-o", Some(1536)));
        assert!(p.adopt_identity("local", "all-MiniLM-L6-v2", "fp-l", Some(384)));
        assert_eq!((p.model(), p.fingerprint().as_str(), p.dimensions()), ("all-MiniLM-L6-v2", "fp-l", Some(384)));
    }
    // With a fallback, the fallback answers, whether the folder is missing or damaged.
    let env = env_of(&[("OPENAI_API_KEY", "sk-test")]);
    for folder in ["gone", "damaged"] {
        let mut c = config("local");
        c.memory.search.local.model_path = Some(dir.path().join(folder).to_string_lossy().into_owned());
        c.memory.search.fallback = "openai".into();
        let p = resolve(&c, &env).unwrap().expect("the fallback");
        assert_eq!((p.id(), p.unavailable()), ("openai", None), "{folder}");
    }
}

/// OpenClaw's request limits reach the wire: a server on this machine gets one request at a time unless
/// `remote.nonBatchConcurrency` says more, and `sync.embeddingBatchTimeoutSeconds` is each request's timeout (what a
/// background sync waits for a call: `call_timeout`).
#[tokio::test]
async fn request_limits_come_from_openclaw_s_keys_and_where_the_server_is() {
    let server = MockServer::start(|rec, _| {
        let n = rec.body["input"].as_array().map(std::vec::Vec::len).unwrap_or(0);
        let data: Vec<_> = (0..n).map(|i| json!({ "index": i, "embedding": [1.0, i as f32, 0.0] })).collect();
        Reply::json(200, json!({ "data": data }).to_string()).delayed(Duration::from_millis(150))
    })
    .await;
    let mut c = config("openai-compatible");
    c.memory.search.model = Some("bge-m3".into());
    c.memory.search.remote.base_url = Some(format!("{}/v1", server.url()));
    // Six texts of ~6,000 estimated tokens: one request each.
    let texts: Vec<String> = (0..6).map(|i| format!("t{i} {}", "word ".repeat(4_800))).collect();

    let p = from_config_with(&c, &|_| None, &ResolveOptions::default()).unwrap().unwrap();
    assert_eq!(p.call_timeout(&texts), Some(Duration::from_secs(600 * 6)), "a local server: 600 s a request, one at a time");
    p.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    assert_eq!((server.requests().len(), server.peak_in_flight()), (6, 1));

    c.memory.search.remote.non_batch_concurrency = Some(3);
    c.memory.search.sync.embedding_batch_timeout_seconds = Some(45);
    let p = from_config_with(&c, &|_| None, &ResolveOptions::default()).unwrap().unwrap();
    assert_eq!(p.call_timeout(&texts), Some(Duration::from_secs(45 * 2)), "two waves of three requests");
    p.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    assert_eq!((server.requests().len(), server.peak_in_flight()), (12, 3));

    // A remote API: 120 s and four at once by default.
    let mut c = config("openai");
    c.memory.search.remote.api_key = Some("sk-remote".into());
    let p = from_config_with(&c, &|_| None, &ResolveOptions::default()).unwrap().unwrap();
    assert_eq!(p.call_timeout(&texts), Some(Duration::from_secs(120 * 2)));
}

/// A request over `embeddingBatchTimeoutSeconds` is cut at that time, and the error says so.
#[tokio::test]
async fn a_request_longer_than_the_configured_timeout_is_cut_at_it() {
    let server = MockServer::start(|_, _| Reply::json(200, "{}").delayed(Duration::from_secs(30))).await;
    let mut c = config("openai-compatible");
    c.memory.search.model = Some("bge-m3".into());
    c.memory.search.remote.base_url = Some(format!("{}/v1", server.url()));
    c.memory.search.sync.embedding_batch_timeout_seconds = Some(1);
    let p = from_config_with(&c, &|_| None, &ResolveOptions::default()).unwrap().unwrap();
    let started = std::time::Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(20), p.embed(&["a".into()], EmbeddingPurpose::Document)).await.expect("bounded").unwrap_err();
    assert!(err.to_string().contains("timed out after 1000 ms"), "{err}");
    // Four attempts of 1 s and the backoff between them, not 30 s.
    assert!(started.elapsed() < Duration::from_secs(12), "{:?}", started.elapsed());
}

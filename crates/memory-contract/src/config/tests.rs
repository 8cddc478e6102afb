use super::*;

#[test]
fn defaults_follow_the_spec() {
    let c = Config::from_json5("{}").unwrap();
    let s = &c.memory.search;
    assert_eq!(c.memory.backend, "builtin");
    assert_eq!(s.query.max_results, 6);
    assert_eq!(s.query.min_score, 0.35);
    assert!(s.query.hybrid.enabled);
    assert_eq!(s.query.hybrid.vector_weight, 0.7);
    assert_eq!(s.query.hybrid.text_weight, 0.3);
    assert_eq!(s.query.hybrid.candidate_multiplier, 4);
    assert!(!s.query.hybrid.mmr.enabled);
    assert_eq!(s.query.hybrid.mmr.lambda, 0.7);
    assert!(!s.query.hybrid.temporal_decay.enabled);
    assert_eq!(s.query.hybrid.temporal_decay.half_life_days, 30.0);
    assert_eq!((s.chunking.tokens, s.chunking.overlap), (400, 80));
    assert_eq!(s.cache.max_entries, 50_000);
    assert_eq!(s.sync.watch_debounce_ms, 1500);
}

#[test]
fn json5_with_comments_and_memory_block() {
    let c = Config::from_json5(
        r#"{
        // comment
        memory: { backend: 'qmd', citations: 'on', search: { query: { maxResults: 10, }, extraPaths: ['notes'] } },
        gateway: { port: 1 }, // foreign sections of an OpenClaw config are tolerated
    }"#,
    )
    .unwrap();
    assert_eq!(c.memory.backend, "qmd");
    assert_eq!(c.memory.citations, Citations::On);
    assert_eq!(c.memory.search.query.max_results, 10);
    assert_eq!(c.memory.search.extra_paths, vec!["notes"]);
}

#[test]
fn legacy_block_is_accepted_and_memory_search_wins() {
    let c = Config::from_json5(
        r#"{ agents: { defaults: { memorySearch: { provider: 'openai', query: { maxResults: 3, minScore: 0.1 } } } },
             memory: { search: { query: { maxResults: 9 } } } }"#,
    )
    .unwrap();
    assert_eq!(c.memory.search.provider, "openai");
    assert_eq!(c.memory.search.query.max_results, 9);
    assert_eq!(c.memory.search.query.min_score, 0.1);
}

fn key_of(text: &str) -> String {
    let e = Config::from_json5(text).unwrap_err();
    e.config_key().unwrap_or_else(|| panic!("not a config error: {e}")).to_string()
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key() {
    assert_eq!(key_of("{ memory: { search: { query: { maxResult: 3 } } } }"), "memory.search.query.maxResult");
    assert_eq!(key_of("{ memory: { search: { query: { maxResults: 'six' } } } }"), "memory.search.query.maxResults");
    assert_eq!(key_of("{ agents: { defaults: { memorySearch: { chunking: { tokens: true } } } } }"), "agents.defaults.memorySearch.chunking.tokens");
    // Top-level sections other than the memory-related ones belong to other parts of OpenClaw: ignored.
    assert!(Config::from_json5("{ memroy: {}, mcp: { servers: {} } }").is_ok());
    assert_eq!(key_of("{ memory: { search: { remote: { bogus: 1 } } } }"), "memory.search.remote.bogus");
    assert_eq!(key_of("{ memory: { citations: 'sometimes' } }"), "memory.citations");
    assert_eq!(key_of("{ memory: { search: { query: { minScore: 2 } } } }"), "memory.search.query.minScore");
    assert_eq!(key_of("{ memory: { search: { chunking: { tokens: 100, overlap: 100 } } } }"), "memory.search.chunking.overlap");
    assert_eq!(key_of("{ memory: { search: { sync: { embeddingBatchTimeoutSeconds: 0 } } } }"), "memory.search.sync.embeddingBatchTimeoutSeconds");
    assert_eq!(key_of("{ memory: { search: { sync: { embeddingBatchTimeoutSeconds: 1e12 } } } }"), "memory.search.sync.embeddingBatchTimeoutSeconds");
    assert_eq!(key_of("{ memory: { search: { remote: { nonBatchConcurrency: 0 } } } }"), "memory.search.remote.nonBatchConcurrency");
    // An engine's block is the engine's to check (BackendRegistry::check_config): kept raw, nulls dropped.
    let c = Config::from_json5("{ memory: { lancedb: { nprobes: 12, table: null, storageOptions: { region: null } } } }").unwrap();
    assert_eq!(c.engine_block::<serde_json::Value>("lancedb").unwrap(), Some(serde_json::json!({ "nprobes": 12, "storageOptions": {} })));
    assert_eq!(c.engine_block_names().collect::<Vec<_>>(), vec!["lancedb"]);
    // A key of the memory block that is not an object is no engine's block: still an unknown key here; null is
    // no block at all.
    assert_eq!(key_of("{ memory: { lancedbb: 3 } }"), "memory.lancedbb");
    assert_eq!(Config::from_json5("{ memory: { qmd: null } }").unwrap().engine_block_names().count(), 0);
    let e = Config::from_json5("{ memory: ").unwrap_err();
    assert!(e.to_string().contains("JSON5"), "{e}");
}

#[test]
fn deep_nesting_is_a_config_error_not_a_stack_overflow() {
    // A crash of the fuzz/config target: the JSON5 parser recursed once per `[` until the stack overflowed.
    let deep = format!("{{memory: {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    let e = Config::from_json5(&deep).unwrap_err();
    assert!(matches!(&e, MemoryError::Config { key, message } if key == "(file)" && message.contains("nested deeper")), "{e}");
    // Brackets in strings and comments do not count; ordinary nesting is fine.
    let text =
        format!("{{memory: {{search: {{extraPaths: ['{}', \"[{{\\\"\"]}}}} // {}\n /* {} */ }}", "[".repeat(500), "{".repeat(500), "[".repeat(500));
    let c = Config::from_json5(&text).unwrap();
    assert_eq!(c.memory.search.extra_paths, vec!["[".repeat(500), "[{\"".to_string()]);
}

#[test]
fn an_empty_unknown_key_is_named() {
    // A crash of the fuzz/config target: `{"": 1}` gave an error whose key was the empty string.
    let e = Config::from_json5(r#"{ memory: {"": -21} }"#).unwrap_err();
    assert!(matches!(&e, MemoryError::Config { key, message } if key == "memory.\"\"" && message == "unknown key"), "{e}");
}

#[test]
fn keys_and_credentials_never_show_in_debug_output() {
    let c = Config::from_json5(
        r#"{
        memory: {
            search: { remote: { apiKey: 'sk-remote-SECRET-1', headers: { 'x-api-key': 'hdr-SECRET-2' } } },
            lancedb: { storageOptions: { aws_secret_access_key: 'aws-SECRET-3' } },
        },
        models: { providers: { openai: { apiKey: 'sk-models-SECRET-4', headers: { Authorization: 'Bearer tok-SECRET-5' } } } },
    }"#,
    )
    .unwrap();
    let printed = format!("{c:?} {c:#?}");
    for secret in ["sk-remote-SECRET-1", "hdr-SECRET-2", "aws-SECRET-3", "sk-models-SECRET-4", "tok-SECRET-5"] {
        assert!(!printed.contains(secret), "{secret} leaked in {printed}");
    }
    assert_eq!(c.memory.search.remote.api_key.as_ref().unwrap().expose(), "sk-remote-SECRET-1");
    assert_eq!(c.memory.search.remote.api_key.as_ref().unwrap().to_string(), "***");
    // Written back, a config keeps its keys.
    let json = serde_json::to_string(&c.models).unwrap();
    assert!(json.contains("sk-models-SECRET-4"));
}

#[test]
fn batch_settings_are_checked() {
    let c = Config::from_json5("{memory: {search: {remote: {batch: {enabled: true, concurrency: 3}}}}}").unwrap();
    assert!(c.memory.search.remote.batch.enabled);
    assert_eq!(c.memory.search.remote.batch.concurrency, 3);
    assert!(!Config::from_json5("{}").unwrap().memory.search.remote.batch.enabled, "off by default");
    for (json, key) in [
        ("{memory: {search: {remote: {batch: {concurrency: 0}}}}}", "memory.search.remote.batch.concurrency"),
        ("{memory: {search: {remote: {batch: {pollIntervalMs: 0}}}}}", "memory.search.remote.batch.pollIntervalMs"),
        ("{memory: {search: {remote: {batch: {timeoutMinutes: 0}}}}}", "memory.search.remote.batch.timeoutMinutes"),
        ("{memory: {search: {remote: {batch: {wiat: true}}}}}", "memory.search.remote.batch.wiat"),
    ] {
        match Config::from_json5(json) {
            Err(crate::MemoryError::Config { key: k, .. }) => assert_eq!(k, key, "{json}"),
            other => panic!("{json}: {other:?}"),
        }
    }
}

#[test]
fn multimodal_needs_a_multimodal_model_and_no_fallback() {
    let ok = "{memory: {search: {provider: 'gemini', model: 'gemini-embedding-2-preview', extraPaths: ['media'], multimodal: {enabled: true, dimensions: 768}}}}";
    let c = Config::from_json5(ok).unwrap();
    assert!(c.memory.search.multimodal.enabled);
    assert_eq!(c.memory.search.multimodal.max_file_bytes, 10 * 1024 * 1024);
    let err = |json: &str| match Config::from_json5(json) {
        Err(crate::MemoryError::Config { key, message }) => (key, message),
        other => panic!("{json}: {other:?}"),
    };
    let (key, message) =
        err("{memory: {search: {provider: 'gemini', model: 'gemini-embedding-2-preview', fallback: 'openai', multimodal: {enabled: true}}}}");
    assert_eq!(key, "memory.search.multimodal.enabled");
    assert!(message.contains("memory.search.fallback = \"none\""), "{message}");
    let (key, message) = err("{memory: {search: {provider: 'gemini', model: 'gemini-embedding-001', multimodal: {enabled: true}}}}");
    assert_eq!(key, "memory.search.multimodal.enabled");
    assert!(message.contains("gemini-embedding-2-preview"), "{message}");
    let (key, _) =
        err("{memory: {search: {provider: 'gemini', model: 'gemini-embedding-2-preview', multimodal: {enabled: true, dimensions: 1000}}}}");
    assert_eq!(key, "memory.search.multimodal.dimensions");
    // Off, nothing is required.
    Config::from_json5("{memory: {search: {fallback: 'openai', multimodal: {enabled: false}}}}").unwrap();
}

#[test]
fn absurd_sync_periods_are_refused_naming_the_key() {
    let e = Config::from_json5("{ memory: { search: { sync: { intervalMinutes: 900000000000 } } } }").unwrap_err();
    assert!(e.to_string().contains("memory.search.sync.intervalMinutes"), "{e}");
    let e = Config::from_json5("{ memory: { search: { sync: { watchDebounceMs: 99999999999 } } } }").unwrap_err();
    assert!(e.to_string().contains("memory.search.sync.watchDebounceMs"), "{e}");
    assert!(Config::from_json5("{ memory: { search: { sync: { intervalMinutes: 60 } } } }").is_ok());
}

// ---- OpenClaw compatibility (issue 20): full configs of both schema generations ----

const OC7: &str = include_str!("../../tests/fixtures/openclaw-2026.7.1.json5");
const OC9: &str = include_str!("../../tests/fixtures/openclaw-2026.9.6.json5");

fn env_with(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
}

fn warned(c: &Config) -> Vec<&str> {
    c.warnings.iter().map(|w| w.key.as_str()).collect()
}

#[test]
fn openclaw_2026_7_config_loads_and_means_what_it_means() {
    let env = env_with(&[("OC7_OPENAI_KEY", "sk-oc7-SECRET")]);
    let c = Config::from_json5_for(OC7, Some("main"), &env).unwrap();
    let s = &c.memory.search;
    assert_eq!(s.provider, "openai");
    assert_eq!(s.remote.api_key.as_ref().unwrap().expose(), "sk-oc7-SECRET", "a {{source: env}} reference is resolved");
    assert_eq!(c.models.providers["openai"].api_key.as_ref().unwrap().expose(), "sk-oc7-SECRET", "${{VAR}} is resolved");
    // experimental.sessionMemory: true keeps the sessions source on.
    assert_eq!(s.sources, vec![crate::types::Source::Memory, crate::types::Source::Sessions]);
    // qmd.extraCollections become extraPaths entries with their pattern.
    assert_eq!(s.extra_paths, vec![ExtraPath::from("shared"), ExtraPath::Pattern { path: "collections/team".into(), pattern: Some("*.md".into()) }]);
    assert_eq!(
        (s.query_input_type.as_deref(), s.document_input_type.as_deref(), s.input_type.as_deref()),
        (Some("query"), Some("passage"), Some("passage"))
    );
    assert_eq!(s.output_dimensionality, Some(512));
    // OpenClaw's request limits are read, not warned about.
    assert_eq!((s.remote.non_batch_concurrency, s.sync.embedding_batch_timeout_seconds), (Some(4), Some(120)));
    // OpenClaw's model cache folder is where a model file is looked for first (providers::model_file).
    assert_eq!((s.local.model_path.as_deref(), s.local.model_cache_dir.as_deref()), (Some("~/models/embed"), Some("~/.cache/models")));
    // The qmd block is kept raw for the engine, which checks it and warns of its ignored keys (memory-qmd's
    // config.rs runs this fixture).
    let qmd = c.engine_block::<serde_json::Value>("qmd").unwrap().unwrap();
    assert_eq!(qmd["paths"][0]["pattern"], "**/*.md");
    assert_eq!(qmd["update"]["interval"], "1h30m");
    for key in [
        "agents.defaults.memorySearch.store.vector.extensionPath",
        "agents.defaults.memorySearch.local.contextSize",
        "agents.defaults.memorySearch.multimodal.modalities",
        "agents.defaults.memorySearch.sync.sessions.postCompactionForce",
    ] {
        assert!(warned(&c).contains(&key), "{key} is warned: {:?}", warned(&c));
    }
    assert!(c.warnings.iter().all(|w| w.message.starts_with("accepted, not used: ")));

    // Per-agent blocks: merged over the defaults key by key; extraPaths add to the defaults'.
    let ops = Config::from_json5_for(OC7, Some("ops"), &env).unwrap();
    assert_eq!(ops.memory.search.query.max_results, 3);
    assert_eq!(ops.memory.search.extra_paths.last().unwrap(), &"runbooks");
    assert_eq!(ops.memory.search.extra_paths.len(), 3);
    assert_eq!(ops.memory.search.provider, "openai");
    assert!(!Config::from_json5_for(OC7, Some("quiet"), &env).unwrap().memory.search.enabled);
    assert_eq!(c.memory.search.query.max_results, 6, "another agent's block does not leak into main");
}

#[test]
fn openclaw_2026_9_config_loads_and_means_what_it_means() {
    let env = env_with(&[("GEMINI_API_KEY", "g-oc9-SECRET")]);
    let c = Config::from_json5_for(OC9, Some("main"), &env).unwrap();
    let s = &c.memory.search;
    assert_eq!(c.memory.citations, Citations::On);
    assert_eq!((s.provider.as_str(), s.model.as_deref()), ("gemini", Some("gemini-embedding-001")));
    assert_eq!(s.remote.api_key.as_ref().unwrap().expose(), "g-oc9-SECRET");
    assert_eq!(c.models.providers["google"].api_key.as_ref().unwrap().expose(), "g-oc9-SECRET");
    assert_eq!(s.extra_paths[1], ExtraPath::Pattern { path: "projects".into(), pattern: Some("**/notes/*.md".into()) });
    assert_eq!(s.sources, vec![crate::types::Source::Memory]);
    assert_eq!(s.output_dimensionality, Some(768));
    assert_eq!(s.query.max_results, 8);
    assert!(warned(&c).contains(&"memory.search.rememberAcrossConversations"), "{:?}", warned(&c));
    assert!(warned(&c).contains(&"memory.search.store.vector.extensionPath"));
    let ops = Config::from_json5_for(OC9, Some("ops"), &env).unwrap();
    assert_eq!(ops.memory.search.extra_paths.len(), 3);
    assert_eq!(ops.memory.search.extra_paths[2], ExtraPath::Pattern { path: "runbooks".into(), pattern: Some("*.md".into()) });
    assert!(!Config::from_json5_for(OC9, Some("quiet"), &env).unwrap().memory.search.enabled);
}

#[test]
fn a_missing_variable_is_an_error_naming_the_key_and_the_variable_and_all_errors_come_at_once() {
    let e = Config::from_json5_for(OC9, None, &|_| None).unwrap_err().to_string();
    assert!(e.contains("models.providers.google.apiKey") && e.contains("memory.search.remote.apiKey"), "{e}");
    assert!(e.contains("GEMINI_API_KEY"), "{e}");
    let e = Config::from_json5(
        "{ agents: { defaults: { memorySearch: { x: 1 } }, list: [{ id: 'a', memorySearch: { query: { maxResult: 2 } } }] }, memory: { search: { chunking: { tokens: 'many' } } } }",
    )
    .unwrap_err()
    .to_string();
    for key in ["agents.defaults.memorySearch.x", "agents.list[0].memorySearch.query.maxResult", "memory.search.chunking.tokens"] {
        assert!(e.contains(key), "{key} in {e}");
    }
    // The value of a resolved secret never shows in an error.
    let e = Config::from_json5_for("{ memory: { search: { remote: { apiKey: '${K}', bogus: 1 } } } }", None, &env_with(&[("K", "sk-VALUE")]))
        .unwrap_err()
        .to_string();
    assert!(!e.contains("sk-VALUE"), "{e}");
}

#[test]
fn older_shapes_are_understood() {
    let c =
        Config::from_json5("{ memorySearch: { chunkSize: 256, chunkOverlap: 32, maxResults: 4 }, memory: { search: { query: { maxResults: 5 } } } }")
            .unwrap();
    assert_eq!((c.memory.search.chunking.tokens, c.memory.search.chunking.overlap), (256, 32));
    assert_eq!(c.memory.search.query.max_results, 5, "memory.search wins over the top-level memorySearch");
    let c = Config::from_json5("{ agents: { entries: { ops: { memorySearch: { query: { maxResults: 2 } } } } } }").unwrap();
    assert_eq!(c.memory.search.query.max_results, 6);
    assert_eq!(key_of("{ memory: { search: { store: { driver: 'postgres' } } } }"), "memory.search.store.driver");
}

#[test]
fn file_secret_references_are_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secrets.json");
    std::fs::write(&file, r#"{ "providers": { "openai": { "apiKey": "sk-from-file" } } }"#).unwrap();
    let text = format!(
        "{{ secrets: {{ providers: {{ vault: {{ source: 'file', path: {} }} }} }}, memory: {{ search: {{ remote: {{ apiKey: {{ source: 'file', provider: 'vault', id: '/providers/openai/apiKey' }} }} }} }} }}",
        // Quoted as JSON: a Windows path's backslashes are escapes in a string.
        serde_json::to_string(&file.display().to_string()).unwrap()
    );
    let c = Config::from_json5(&text).unwrap();
    assert_eq!(c.memory.search.remote.api_key.as_ref().unwrap().expose(), "sk-from-file");
}

#[test]
fn non_finite_ranking_numbers_never_reach_the_ranking() {
    // JSON5 can write NaN and Infinity: refused naming the key (a JSON value would hold them as null, read as
    // "unset"), in the sections read only.
    for (text, key) in [
        (
            "{ memory: { search: { query: { hybrid: { temporalDecay: { enabled: true, halfLifeDays: NaN } } } } } }",
            "memory.search.query.hybrid.temporalDecay.halfLifeDays",
        ),
        ("{ memory: { search: { query: { hybrid: { vectorWeight: Infinity } } } } }", "memory.search.query.hybrid.vectorWeight"),
        ("{ memory: { search: { query: { hybrid: { mmr: { lambda: -Infinity } } } } } }", "memory.search.query.hybrid.mmr.lambda"),
        ("{ agents: { list: [{ id: 'a', memorySearch: { query: { minScore: NaN } } }] } }", "agents.list[0].memorySearch.query.minScore"),
    ] {
        let e = Config::from_json5(text).unwrap_err();
        assert!(matches!(&e, MemoryError::Config { key: k, message } if k == key && message.contains("finite")), "{text}: {e}");
    }
    assert!(Config::from_json5("{ gateway: { ratio: NaN }, memory: {} }").is_ok());
    // A config built in code is checked too.
    let mut c = Config::default();
    c.memory.search.query.hybrid.text_weight = f64::NAN;
    assert!(c.validate().unwrap_err().to_string().contains("textWeight"));
}

#[test]
fn a_plugin_engine_reads_its_own_block_with_errors_naming_the_key() {
    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Foo {
        endpoint: String,
        #[serde(default)]
        max_hits: u32,
    }
    let c = Config::from_json5("{ memory: { backend: 'foo', foo: { endpoint: 'http://x', maxHits: 3 } } }").unwrap();
    assert_eq!(c.engine_block::<Foo>("foo").unwrap(), Some(Foo { endpoint: "http://x".into(), max_hits: 3 }));
    assert_eq!(c.engine_block::<Foo>("bar").unwrap(), None);
    let bad = Config::from_json5("{ memory: { backend: 'foo', foo: { endpoint: 'http://x', maxHitz: 3 } } }").unwrap();
    let e = bad.engine_block::<Foo>("foo").unwrap_err();
    assert!(e.to_string().contains("memory.foo.maxHitz") && e.to_string().contains("unknown key"), "{e}");
    let wrong = Config::from_json5("{ memory: { backend: 'foo', foo: { endpoint: 7 } } }").unwrap();
    assert!(wrong.engine_block::<Foo>("foo").unwrap_err().to_string().contains("memory.foo.endpoint"));
    // Any block is kept for its engine; one that no registered engine owns is refused by the registry
    // (registry.rs tests).
    let c = Config::from_json5("{ memory: { backend: 'foo', fooo: {} } }").unwrap();
    assert_eq!(c.engine_block_names().collect::<Vec<_>>(), vec!["fooo"]);
    // A block set in code reads back; engine blocks never show in debug output (they may hold credentials).
    let mut c = Config::default();
    c.set_engine_block("foo", &serde_json::json!({ "endpoint": "http://secret-host", "maxHits": 2 })).unwrap();
    assert_eq!(c.engine_block::<Foo>("foo").unwrap(), Some(Foo { endpoint: "http://secret-host".into(), max_hits: 2 }));
    assert!(!format!("{c:?}").contains("secret-host"), "{c:?}");
}

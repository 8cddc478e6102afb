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
    match Config::from_json5(text).unwrap_err() {
        MemoryError::Config { key, .. } => key,
        other => panic!("not a config error: {other}"),
    }
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key() {
    assert_eq!(key_of("{ memory: { search: { query: { maxResult: 3 } } } }"), "memory.search.query.maxResult");
    assert_eq!(key_of("{ memory: { search: { query: { maxResults: 'six' } } } }"), "memory.search.query.maxResults");
    assert_eq!(key_of("{ agents: { defaults: { memorySearch: { chunking: { tokens: true } } } } }"), "agents.defaults.memorySearch.chunking.tokens");
    assert_eq!(key_of("{ memroy: {} }"), "memroy");
    assert_eq!(key_of("{ memory: { citations: 'sometimes' } }"), "memory.citations");
    assert_eq!(key_of("{ memory: { search: { query: { minScore: 2 } } } }"), "memory.search.query.minScore");
    assert_eq!(key_of("{ memory: { search: { chunking: { tokens: 100, overlap: 100 } } } }"), "memory.search.chunking.overlap");
    assert_eq!(key_of("{ memory: { lancedb: { nprobes: 0 } } }"), "memory.lancedb.nprobes");
    assert_eq!(key_of("{ memory: { lancedb: { nprobes: -3 } } }"), "memory.lancedb.nprobes");
    assert_eq!(Config::from_json5("{ memory: { lancedb: { nprobes: 12 } } }").unwrap().memory.lancedb.nprobes, Some(12));
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
    let text = format!("{{memory: {{search: {{extraPaths: ['{}', \"[{{\\\"\"]}}}} // {}\n /* {} */ }}", "[".repeat(500), "{".repeat(500), "[".repeat(500));
    let c = Config::from_json5(&text).unwrap();
    assert_eq!(c.memory.search.extra_paths, vec!["[".repeat(500), "[{\"".to_string()]);
}

#[test]
fn an_empty_unknown_key_is_named() {
    // A crash of the fuzz/config target: `{"": 1}` gave an error whose key was the empty string.
    let e = Config::from_json5(r#"{"": -21}"#).unwrap_err();
    assert!(matches!(&e, MemoryError::Config { key, message } if key == "\"\"" && message == "unknown key"), "{e}");
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
    let (key, message) = err("{memory: {search: {provider: 'gemini', model: 'gemini-embedding-2-preview', fallback: 'openai', multimodal: {enabled: true}}}}");
    assert_eq!(key, "memory.search.multimodal.enabled");
    assert!(message.contains("memory.search.fallback = \"none\""), "{message}");
    let (key, message) = err("{memory: {search: {provider: 'gemini', model: 'gemini-embedding-001', multimodal: {enabled: true}}}}");
    assert_eq!(key, "memory.search.multimodal.enabled");
    assert!(message.contains("gemini-embedding-2-preview"), "{message}");
    let (key, _) = err("{memory: {search: {provider: 'gemini', model: 'gemini-embedding-2-preview', multimodal: {enabled: true, dimensions: 1000}}}}");
    assert_eq!(key, "memory.search.multimodal.dimensions");
    // Off, nothing is required.
    Config::from_json5("{memory: {search: {fallback: 'openai', multimodal: {enabled: false}}}}").unwrap();
}

#[test]
fn absurd_sync_periods_are_refused_naming_the_key() {
    let e = Config::from_json5("{ memory: { search: { sync: { intervalMinutes: 18446744073709551615 } } } }").unwrap_err();
    assert!(e.to_string().contains("memory.search.sync.intervalMinutes"), "{e}");
    let e = Config::from_json5("{ memory: { search: { sync: { watchDebounceMs: 99999999999 } } } }").unwrap_err();
    assert!(e.to_string().contains("memory.search.sync.watchDebounceMs"), "{e}");
    assert!(Config::from_json5("{ memory: { search: { sync: { intervalMinutes: 60 } } } }").is_ok());
}

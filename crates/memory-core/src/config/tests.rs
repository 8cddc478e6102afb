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

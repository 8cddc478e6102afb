//! Config parser: arbitrary JSON5 gives a config or a config error naming a key, never a panic; an accepted
//! config is usable (its chunk sizes chunk text).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_core::{Config, MemoryError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::from_json5(text) {
        Ok(config) => {
            config.validate().expect("a parsed config is valid");
            let c = &config.memory.search.chunking;
            let chunks = memory_core::chunking::chunk_text("# t\nsome text\n", c.tokens, c.overlap);
            assert_eq!(chunks.len(), 1);
        }
        Err(MemoryError::Config { key, message }) => {
            assert!(!key.is_empty(), "config error without a key: {message}");
            assert!(!message.is_empty(), "config error at {key} without a message");
        }
        Err(other) => panic!("not a config error: {other:?}"),
    }
});

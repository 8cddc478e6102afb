//! Transcript parser: arbitrary JSONL (read lossily, as the indexer does) flattens to one `User:`/`Assistant:`
//! line per message, each mapped to a JSONL line of the input, and chunks of it map back inside that file. A
//! secret planted in a message (as a word of its own) never survives redaction, whatever surrounds it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_core::chunking::chunk_text;
use memory_core::sessions::{flatten, message_text};

const PLANTED: &str = "sk-FUZZplanted0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let flat = flatten(&text, 1);
    assert_eq!(flat.records, text.matches('\n').count());
    assert_eq!(flat.lines.len(), flat.jsonl_lines.len());
    let mut prev = 0;
    for (line, &n) in flat.lines.iter().zip(&flat.jsonl_lines) {
        assert!(n > prev && n <= flat.records, "JSONL line {n} after {prev}, {} records", flat.records);
        prev = n;
        assert!(line.starts_with("User: ") || line.starts_with("Assistant: "), "{line:?}");
        assert!(!line.contains('\n'), "{line:?}");
    }
    // What the indexer does with it: chunk the flattened text and map chunk lines back to JSONL lines.
    let flat_text = flat.text();
    for c in chunk_text(&flat_text, 64, 8) {
        assert!(c.end_line <= flat.jsonl_lines.len(), "chunk ends at flattened line {} of {}", c.end_line, flat.jsonl_lines.len());
    }

    let around = String::from_utf8_lossy(data);
    let (before, after) = around.split_at(around.char_indices().nth(around.chars().count() / 2).map_or(0, |(i, _)| i));
    let line = serde_json::json!({"role": "user", "content": format!("{before} {PLANTED} {after}")}).to_string();
    let msg = message_text(&line).expect("a user message with text");
    // The fuzzer copies the planted string into its inputs; glued to a word there it is not a key (`task-...`).
    let already = around.matches(PLANTED).count();
    assert!(msg.matches(PLANTED).count() <= already, "planted secret survived: {msg:?}");
});

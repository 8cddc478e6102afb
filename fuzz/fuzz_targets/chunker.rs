//! Chunker: arbitrary text and chunk sizes. Chunks stay inside the file, never exceed the budget, cover every line
//! that has content, and hold the file's own text (each chunk line a piece of the source line it claims).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_core::chunking::{char_weight, chunk_text, importance};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    // Sizes from the first bytes: mostly small budgets, where the edge cases live; 0xffff stands for "unbounded".
    let size = |lo: u8, hi: u8| match u16::from_le_bytes([lo, hi]) {
        0xffff => usize::MAX,
        n => n as usize % 1024,
    };
    let (tokens, overlap) = (size(data[0], data[1]), size(data[2], data[3]));
    let text = String::from_utf8_lossy(&data[4..]);
    let _ = importance(&text);

    let chunks = chunk_text(&text, tokens, overlap);
    let lines: Vec<&str> = text.lines().collect();
    let budget = tokens.max(1).saturating_mul(4);
    let mut covered = vec![false; lines.len()];
    let mut prev_start = 0;
    for c in &chunks {
        assert!(c.start_line >= 1 && c.start_line <= c.end_line && c.end_line <= lines.len(), "range {}..{} of {} lines", c.start_line, c.end_line, lines.len());
        assert!(c.start_line >= prev_start, "chunks go backwards: {} after {}", c.start_line, prev_start);
        prev_start = c.start_line;
        assert!(!c.text.trim().is_empty(), "blank chunk");
        let weight: usize = c.text.chars().map(char_weight).sum();
        assert!(weight <= budget, "chunk weighs {weight} > budget {budget}");
        assert_eq!(c.hash, sha256(&c.text));
        let parts: Vec<&str> = c.text.split('\n').collect();
        assert_eq!(parts.len(), c.end_line - c.start_line + 1, "chunk text lines vs its range {}..{}", c.start_line, c.end_line);
        for (k, part) in parts.iter().enumerate() {
            let source = lines[c.start_line - 1 + k];
            assert!(source.contains(part), "chunk line {:?} is not in source line {} {:?}", part, c.start_line + k, source);
        }
        for slot in &mut covered[c.start_line - 1..c.end_line] {
            *slot = true;
        }
    }
    for (i, line) in lines.iter().enumerate() {
        assert!(covered[i] || line.trim().is_empty(), "line {} ({line:?}) is in no chunk", i + 1);
    }
});

fn sha256(s: &str) -> String {
    memory_core::sha256_hex(s.as_bytes())
}

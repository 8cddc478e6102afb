//! The ranking pipeline with arbitrary paths, texts, scores and options: file names in any script (a byte slice
//! of a Chinese name panicked under temporal decay), NaN and infinite scores, any importance, mtimes from any
//! era, MMR and decay on and off, any minScore. `rank` must not panic, and must keep its promises: at most
//! `max_results` results, finite scores, citations inside the candidate's lines, snippets from its text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_core::config::Citations;
use memory_core::ranking::{rank, RankingOptions};
use memory_core::store::Candidate;
use memory_core::Source;

/// Reads little-endian numbers and length-prefixed strings off the input; runs dry to zeros and empty strings.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0u64, |n, i| n | (self.u8() as u64) << (8 * i))
    }
    fn f64(&mut self) -> f64 {
        f64::from_bits(self.u64())
    }
    fn string(&mut self) -> String {
        let n = (self.u8() as usize).min(self.0.len());
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8_lossy(s).into_owned()
    }
}

fn candidate(b: &mut Bytes, i: usize) -> Candidate {
    let path = match b.u8() % 4 {
        0 => format!("memory/{}.md", b.string()),
        1 => format!("memory/2026-11-{:02}{}.md", b.u8() % 40, b.string()),
        2 => b.string(),
        _ => "MEMORY.md".to_string(),
    };
    let start = (b.u8() as usize).max(1);
    let flags = b.u8();
    Candidate {
        chunk_id: format!("c{}", b.u8() % 8 + i as u8 % 2),
        source: if flags & 1 == 0 { Source::Memory } else { Source::Sessions },
        path,
        start_line: start,
        end_line: start + b.u8() as usize,
        text: b.string(),
        importance: (flags & 2 != 0).then(|| b.u8()),
        file_mtime_ms: b.u64() as i64,
        keyword_score: (flags & 4 != 0).then(|| b.f64()),
        vector_score: (flags & 8 != 0).then(|| b.f64()),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let flags = b.u8();
    let opts = RankingOptions {
        max_results: (b.u8() as usize % 12).max(1),
        min_score: b.f64(),
        vector_weight: b.f64(),
        text_weight: b.f64(),
        mmr_lambda: (flags & 1 != 0).then(|| b.f64()),
        half_life_days: (flags & 2 != 0).then(|| b.f64()),
        citations: if flags & 4 != 0 { Citations::On } else { Citations::Off },
        now_ms: b.u64() as i64,
        vector_floor: (flags & 8 != 0).then(|| b.f64()),
    };
    let query = b.string();
    let n_kw = b.u8() as usize % 16;
    let n_vec = b.u8() as usize % 16;
    let keyword: Vec<Candidate> = (0..n_kw).map(|i| candidate(&mut b, i)).collect();
    let vector: Vec<Candidate> = (0..n_vec).map(|i| candidate(&mut b, i)).collect();
    let exact: Vec<(Candidate, u8)> = (0..b.u8() as usize % 3).map(|i| (candidate(&mut b, i), b.u8() % 4)).collect();
    let all: Vec<Candidate> = keyword.iter().chain(&vector).chain(exact.iter().map(|(c, _)| c)).cloned().collect();

    let results = rank(keyword, vector, exact, &query, &opts);
    assert!(results.len() <= opts.max_results, "{} results for max {}", results.len(), opts.max_results);
    for r in &results {
        assert!(r.score.is_finite(), "score {}", r.score);
        assert!(r.start_line >= 1 && r.start_line <= r.end_line, "lines {}..{}", r.start_line, r.end_line);
        assert!(all.iter().any(|c| c.path == r.path && c.start_line == r.start_line), "result {} not from a candidate", r.path);
    }
});

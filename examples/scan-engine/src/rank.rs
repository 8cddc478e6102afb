//! Chunks of the memory files and their ranking: BM25 over the chunks' terms ([`crate::words::terms`]).

use std::collections::HashMap;

use memory_contract::dates::{parse_day, DayRange};
use memory_contract::{SearchResult, Source};

use crate::files::{read_text, MemoryFile};
use crate::words::terms;

/// A chunk's text is at most this many characters (one longer line is a chunk of its own, its snippet cut).
const CHUNK_CHARS: usize = 600;

/// The longest snippet (OpenClaw's).
const SNIPPET_CHARS: usize = 700;

/// BM25's term-frequency saturation and length normalisation.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Lines of one memory file that are searched and returned together.
pub struct Chunk {
    key: String,
    start_line: usize,
    end_line: usize,
    text: String,
    terms: Vec<String>,
}

/// The chunks of `files`; with `days`, of the daily logs (`memory/YYYY-MM-DD*.md`) dated inside only. A chunk
/// starts at a heading, or where the one before it reached [`CHUNK_CHARS`]; blank lines never start or end one.
pub fn chunks_of(files: &[MemoryFile], days: Option<DayRange>) -> Vec<Chunk> {
    let mut out = Vec::new();
    for file in files {
        if let Some(days) = days {
            if !date_of(&file.key).is_some_and(|d| days.contains(d)) {
                continue;
            }
        }
        let Some(text) = read_text(&file.abs) else { continue };
        let mut lines: Vec<(usize, &str)> = Vec::new();
        let mut chars = 0;
        for (i, line) in text.lines().enumerate() {
            let starts_new = line.starts_with('#') || chars + line.chars().count() > CHUNK_CHARS;
            if starts_new && !lines.is_empty() {
                out.extend(chunk(&file.key, &lines));
                lines.clear();
                chars = 0;
            }
            if !(lines.is_empty() && line.trim().is_empty()) {
                lines.push((i + 1, line));
                chars += line.chars().count() + 1;
            }
        }
        out.extend(chunk(&file.key, &lines));
    }
    out
}

fn chunk(key: &str, lines: &[(usize, &str)]) -> Option<Chunk> {
    let last = lines.iter().rposition(|(_, l)| !l.trim().is_empty())?;
    let lines = &lines[..=last];
    let text = lines.iter().map(|(_, l)| *l).collect::<Vec<_>>().join("\n");
    Some(Chunk { key: key.to_string(), start_line: lines[0].0, end_line: lines[last].0, terms: terms(&text), text })
}

/// The day a daily log is of, from its name.
fn date_of(key: &str) -> Option<i64> {
    let name = key.strip_prefix("memory/")?.rsplit('/').next()?;
    parse_day(name.get(..10)?)
}

/// The chunks that hold words of `query`, best first: those scoring at least `min_score` (0..1), or, when none
/// does, the best of them anyway (a keyword match is never hidden by the cut alone); at most `max_results`. Results
/// are uncited: the caller cites them as `memory.citations` says.
pub fn search(chunks: &[Chunk], query: &str, max_results: usize, min_score: f64) -> Vec<SearchResult> {
    let mut wanted = terms(query);
    wanted.sort();
    wanted.dedup();
    let n = chunks.len() as f64;
    let avg_len = chunks.iter().map(|c| c.terms.len()).sum::<usize>() as f64 / n.max(1.0);
    let df = |t: &String| chunks.iter().filter(|c| c.terms.contains(t)).count() as f64;
    let idf: HashMap<&String, f64> = wanted.iter().map(|t| (t, (1.0 + (n - df(t) + 0.5) / (df(t) + 0.5)).ln())).collect();
    let mut scored: Vec<(f64, &Chunk)> = chunks
        .iter()
        .filter_map(|c| {
            let len = c.terms.len() as f64;
            let bm25: f64 = wanted
                .iter()
                .map(|t| {
                    let tf = c.terms.iter().filter(|x| *x == t).count() as f64;
                    idf[t] * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
                })
                .sum();
            // 0..1, as the contract's scores are: a strong match nears 1, a weak one stays low.
            (bm25 > 0.0).then(|| (bm25 / (1.0 + bm25), c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.key.cmp(&b.1.key)).then(a.1.start_line.cmp(&b.1.start_line)));
    let passing = scored.iter().filter(|(s, _)| *s >= min_score).count();
    let kept = if passing > 0 { passing } else { scored.len() };
    scored.into_iter().take(kept.min(max_results)).map(|(score, c)| result(c, score)).collect()
}

fn result(c: &Chunk, score: f64) -> SearchResult {
    SearchResult {
        path: c.key.clone(),
        start_line: c.start_line,
        end_line: c.end_line,
        score,
        snippet: c.text.chars().take(SNIPPET_CHARS).collect(),
        source: Source::Memory,
        text_score: Some(score),
        vector_score: None,
        citation: None,
        snippet_start_line: None,
        snippet_end_line: None,
    }
}

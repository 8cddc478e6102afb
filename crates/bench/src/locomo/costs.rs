//! What the second stages cost on LoCoMo text: reranking n passages, and choosing a snippet per result.
//! Separate commands from the recall runs, sharing only the dataset.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::dataset::{load, Question};
use super::report::percentile;

/// What reranking costs: `runs` rerankings of n passages (each a turn-sized line of a LoCoMo session, the query one
/// of its questions) for each n, timed whole (tokenising, forward passes), after one warm-up.
pub fn rerank_cost(dataset: &Path, reranker: &Path, ns: &[usize], runs: usize) -> anyhow::Result<()> {
    let questions = load(dataset)?;
    let rr = providers::open_reranker(reranker)?;
    // Passages: the snippet-sized windows a search would hand the reranker, from the first conversation's logs.
    let ws = dataset.join(questions.first().map_or("conv-26", |q| q.conv.as_str())).join("ws/memory");
    let mut passages: Vec<String> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&ws)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    for p in names {
        let text = std::fs::read_to_string(&p)?;
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        for w in lines.chunks(3) {
            let mut s = w.join("\n");
            s.truncate(s.char_indices().nth(memory_core::ranking::RERANK_PASSAGE_CHARS).map_or(s.len(), |(i, _)| i));
            passages.push(s);
        }
    }
    let far = || Instant::now() + std::time::Duration::from_secs(3600);
    rr.score_blocking("warm up", &passages[..2], far())?;
    println!("reranker {}: {} passages available", reranker.display(), passages.len());
    println!("{:>6} {:>10} {:>10} {:>12}", "pairs", "p50 ms", "p95 ms", "ms / pair");
    for &n in ns {
        let mut times = Vec::new();
        for r in 0..runs {
            let q = &questions[(r * 7) % questions.len()].question;
            let start = (r * n) % passages.len().saturating_sub(n).max(1);
            let batch = &passages[start..(start + n).min(passages.len())];
            let t = Instant::now();
            rr.score_blocking(q, batch, far())?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        println!("{n:>6} {:>10.1} {:>10.1} {:>12.2}", percentile(&times, 0.5), percentile(&times, 0.95), percentile(&times, 0.5) / n as f64);
    }
    Ok(())
}

/// What choosing a snippet costs per result: for every question, ten chunk-sized windows of its conversation
/// (12 turns each, ~1,600 characters, as the default chunking makes them), the query's terms weighted over them
/// (`SnippetQuery::new`) and a snippet chosen from each (`snippet::choose`), as `to_results` does for ten hits.
pub fn snippet_cost(dataset: &Path, rounds: usize) -> anyhow::Result<()> {
    use memory_core::ranking::{snippet, SNIPPET_MAX_CHARS};
    let questions: Vec<Question> = load(dataset)?.into_iter().filter(|q| q.category != 5).collect();
    let mut chunks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in &questions {
        if chunks.contains_key(&q.conv) {
            continue;
        }
        let dir = dataset.join(&q.conv).join("ws/memory");
        let mut names: Vec<_> = std::fs::read_dir(&dir)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
        names.sort();
        let mut out = Vec::new();
        for p in names {
            let text = std::fs::read_to_string(&p)?;
            let lines: Vec<&str> = text.lines().collect();
            out.extend(lines.chunks(12).map(|w| w.join("\n")));
        }
        chunks.insert(q.conv.clone(), out);
    }
    let mut per_result = Vec::new();
    let mut results = 0usize;
    for round in 0..rounds.max(1) {
        for (i, q) in questions.iter().enumerate() {
            let all = &chunks[&q.conv];
            let start = (i * 7 + round) % all.len().saturating_sub(10).max(1);
            let hits: Vec<&str> = all[start..(start + 10).min(all.len())].iter().map(String::as_str).collect();
            let t = Instant::now();
            let terms = snippet::SnippetQuery::new(&q.question, &hits);
            let mut shown = 0usize;
            for h in &hits {
                shown += snippet::choose(h, &terms, SNIPPET_MAX_CHARS).text.len();
            }
            let elapsed = t.elapsed().as_secs_f64() * 1e3;
            std::hint::black_box(shown);
            per_result.push(elapsed / hits.len() as f64);
            results += hits.len();
        }
    }
    per_result.sort_by(f64::total_cmp);
    println!("snippet selection: {results} results ({} searches of 10 hits)", per_result.len());
    println!(
        "per result: p50 {:.4} ms, p95 {:.4} ms, max {:.4} ms",
        percentile(&per_result, 0.5),
        percentile(&per_result, 0.95),
        per_result.last().copied().unwrap_or(0.0)
    );
    Ok(())
}

//! Keyword search through `memory serve` over MCP, as an agent's client calls it: the same figures, and the
//! latency a client sees. Its own part: it drives a server process, not an engine in this process.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use memory_core::SearchResult;

use super::dataset::Question;
use super::metrics::{score_question, Tally};
use super::Run;

/// Keyword search through `memory serve`: each question as `memory_search {query, maxResults: 10, minScore: 0}`
/// over MCP (stdio), timed from the request to its answer; one server per conversation, its index built by the
/// first search (not timed).
pub(super) fn served_keyword(bin: &Path, dataset: &Path, questions: &[Question], convs: &[String], state: &Path) -> anyhow::Result<Run> {
    let mut run = Run {
        label: "keyword via memory serve".into(),
        by_category: BTreeMap::new(),
        all: Tally::default(),
        latencies_ms: Vec::new(),
        oracle: Vec::new(),
        rerank_ms_per_candidate: None,
    };
    for conv in convs {
        let state = state.join(conv);
        std::fs::create_dir_all(&state)?;
        std::fs::write(state.join("none.json5"), "{}")?;
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("--workspace").arg(dataset.join(conv).join("ws")).arg("--state-dir").arg(&state).arg("serve");
        // Default settings, whatever the machine's OpenClaw or memory-rs config says.
        cmd.env("OPENCLAW_STATE_DIR", state.join("no-openclaw")).env("MEMORY_CONFIG", state.join("none.json5")).env("RUST_LOG", "error");
        let mut session = crate::mcp::Session::start(&mut cmd).with_context(|| format!("memory serve for {conv}"))?;
        let mut ask = |query: &str| -> anyhow::Result<(Vec<SearchResult>, f64)> {
            let t = Instant::now();
            let v = session
                .call("tools/call", serde_json::json!({"name": "memory_search", "arguments": {"query": query, "maxResults": 10, "minScore": 0}}))?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let results = v["result"]["structuredContent"]["results"].clone();
            Ok((serde_json::from_value(results).with_context(|| format!("memory_search answer {v}"))?, ms))
        };
        ask("warm up: build the index")?;
        for q in questions.iter().filter(|q| &q.conv == conv) {
            let (hits, ms) = ask(&q.question)?;
            run.latencies_ms.push(ms);
            let (rec, seen) = score_question(q, &hits);
            run.by_category.entry(q.category).or_default().add(rec, seen);
            run.all.add(rec, seen);
        }
    }
    Ok(run)
}

//! A search: the query as qmd is given it, the mode and its retries, and the hits within the limits.

use memory_core::locks::LockExt;
use std::time::Instant;

use memory_core::config::RerankConfig;
use memory_core::error::{MemoryError, Result};
use memory_core::ranking;
use memory_core::rerank::Reranker;
use memory_core::types::{SearchRequest, SearchResponse, SearchResult, Source};
use tracing::{debug, warn};

use super::results::truncate_chars;
use super::update::Trigger;
use super::{Inner, QmdBackend};
use crate::config::SearchMode;
use crate::parse::{self, QmdHit};
use crate::process::{self, RunError};

/// How many hits QMD is asked for when a search is held to dates (`after`/`before`), which are applied to them.
const DATED_FETCH: usize = 100;

impl QmdBackend {
    /// A search: freshen, run the mode (retrying as `query` when qmd rejects its flags, then any word in keyword
    /// mode), and map the hits within the limits.
    pub(super) async fn answer(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let inner = &self.inner;
        let query = normalize_query(&request.query);
        if query.is_empty() {
            return Err(MemoryError::InvalidInput("query is empty".into()));
        }
        if !request.sources.is_empty() && !request.sources.contains(&Source::Memory) && inner.sessions.is_none() {
            return Ok(SearchResponse {
                results: vec![],
                mode: Some(inner.mode.response_mode().into()),
                warnings: vec!["session transcripts are not indexed (memory.qmd.sessions.enabled is off)".into()],
                explanation: None,
            });
        }
        let registered: Vec<String> = inner.state.locked().registered.iter().map(|c| c.name.clone()).collect();
        let wanted = |name: &str| {
            let is_sessions = inner.sessions.is_some() && name == crate::sessions::SESSIONS_COLLECTION;
            request.sources.is_empty() || request.sources.contains(if is_sessions { &Source::Sessions } else { &Source::Memory })
        };
        let names: Vec<String> = registered.iter().filter(|n| wanted(n)).cloned().collect();
        if names.is_empty() && !registered.is_empty() {
            return Ok(SearchResponse { results: vec![], mode: Some(inner.mode.response_mode().into()), warnings: vec![], explanation: None });
        }
        if names.is_empty() {
            let running = inner.state.locked().update_running;
            return Err(MemoryError::Unavailable(if running {
                "qmd is still building its index (first update running)".into()
            } else {
                "qmd has no collections yet (no update has completed)".into()
            }));
        }
        let max = request.max_results.unwrap_or(inner.cfg.limits.max_results).clamp(1, 100);
        let days = request.days()?;
        let started = Instant::now();
        let mut mode = inner.mode;
        let mut warnings = Vec::new();
        if inner.on_search_update {
            inner.freshen(&mut warnings).await;
        }
        // Keyword mode: plain words only (QMD's own syntax never sees user text), every word required first.
        let terms = (mode == SearchMode::Search).then(|| crate::query::keyword_terms(&query));
        let query = match &terms {
            Some(t) if t.is_empty() => {
                // Only punctuation or syntax characters: no word to look for.
                return Ok(SearchResponse { results: vec![], mode: Some(mode.response_mode().into()), warnings, explanation: None });
            }
            Some(t) => crate::query::all_words_query(t),
            None => query,
        };
        // With a reranker, QMD is asked for as many hits as it reads, and the best `max` of its order answer.
        let fetch = if inner.reranker.is_some() { max.max(inner.rerank.candidates.min(100)) } else { max };
        // QMD keeps no dates: `after`/`before` are applied to its best hits, as many as it gives.
        let fetch = if days.is_some() { DATED_FETCH.max(fetch) } else { fetch };
        if days.is_some() {
            warnings.push(format!(
                "after/before on the qmd engine keep the notes dated inside among qmd's best {DATED_FETCH} hits (qmd keeps no dates to search by)"
            ));
        }
        let mut attempt = inner.run_search(mode, &query, fetch, &names).await;
        if let Err(e) = &attempt {
            if mode != SearchMode::Query && flags_rejected(e.stderr()) {
                warn!(mode = mode.as_str(), "qmd rejected the mode's flags; retrying as `query`");
                warnings.push(format!("qmd rejected `{}` flags; answered with `query`", mode.as_str()));
                mode = SearchMode::Query;
                attempt = inner.run_search(mode, &query, fetch, &names).await;
            }
        }
        let mut what = format!("qmd {}", mode.as_str());
        let (mut hits, mut stderr) = attempt.map_err(|e| e.into_memory_error(&what))?;
        if let Some(msg) = stderr.strip_prefix('\u{0}') {
            return Err(MemoryError::Internal(format!("{what}: {msg}")));
        }
        if hits.is_empty() && mode == SearchMode::VSearch && stderr.contains("(100%) need embeddings") {
            return Err(MemoryError::Unavailable(format!("{what}: no document has embeddings yet (run `qmd embed`; it needs the embedding model)")));
        }
        if let (true, SearchMode::Search, Some(doc)) = (hits.is_empty(), mode, terms.as_deref().and_then(crate::query::any_word_document)) {
            // No note holds every word (most questions): ask again for any word. One `lex:` sub-query per
            // word, fused by QMD (reciprocal rank); lexical only, so no model is loaded.
            what = "qmd query (any word)".into();
            (hits, stderr) = inner.run_any_word(&doc, fetch, &names).await.map_err(|e| e.into_memory_error(&what))?;
            if let Some(msg) = stderr.strip_prefix('\u{0}') {
                return Err(MemoryError::Internal(format!("{what}: {msg}")));
            }
        }
        // The question read once, for the reranker's passages and the snippets, as the indexed engines read it.
        let parsed = ranking::Query::parse(&request.query);
        if let Some(reranker) = &inner.reranker {
            rerank_hits(reranker.as_ref(), &inner.rerank, &parsed, &mut hits, &mut warnings).await;
        }
        let mut results: Vec<SearchResult> = Vec::new();
        let mut budget = inner.cfg.limits.max_injected_chars;
        // Snippets by core's rule, the query's terms weighed over these hits' lines, as the indexed engines do.
        let texts: Vec<&str> = hits.iter().map(|h| h.text.as_str()).collect();
        let snippet_terms = ranking::snippet::SnippetQuery::of(&parsed, &texts);
        // minScore applies to QMD's scores, cut by the shared rule: when no hit reaches it, the keyword-backed
        // hits (all of them in keyword mode, none in the others) are returned rather than nothing.
        if let Some(min) = request.min_score {
            hits = ranking::min_score_cut(hits, usize::MAX, |h| h.score >= min, |_| mode == SearchMode::Search);
        }
        let mut dates = super::dates::HitDates::new(inner);
        for hit in &hits {
            let Some(mut r) = inner.to_result(hit, &snippet_terms) else {
                warn!(file = %hit.file, "qmd hit in an unknown collection; skipped");
                continue;
            };
            // A file deleted since QMD's last update is never returned.
            if r.source == Source::Memory && !inner.roots.abs_path(&r.path).is_file() {
                continue;
            }
            if let Some(days) = days {
                match dates.day(&r) {
                    Ok(Some(d)) if days.contains(d) => {}
                    Ok(_) => continue,
                    Err(why) => {
                        let said = format!("after/before: {} cannot be read to date it ({why}); left out", r.path);
                        if !warnings.contains(&said) {
                            warn!(file = %r.path, reason = %why, "a qmd hit cannot be dated");
                            warnings.push(said);
                        }
                        continue;
                    }
                }
            }
            if results.iter().any(|o| o.path == r.path && o.start_line == r.start_line && o.end_line == r.end_line) {
                continue;
            }
            let n = r.snippet.chars().count();
            if n > budget {
                if budget == 0 || (budget < 80 && !results.is_empty()) {
                    break;
                }
                r.snippet = truncate_chars(&r.snippet, budget);
            }
            budget = budget.saturating_sub(r.snippet.chars().count());
            memory_core::citation::cite(&mut r, inner.citations);
            results.push(r);
            if results.len() >= max {
                break;
            }
        }
        debug!(query = %query, hits = hits.len(), results = results.len(), elapsed_ms = started.elapsed().as_millis() as u64, "qmd search");
        if inner.on_search_update && inner.sessions.is_some() {
            // Memory files were checked before the search; exported transcripts are only as fresh as the last
            // update: refresh them in the background (debounced, serialised).
            if let Ok(_g) = inner.write_lock.try_lock() {
                drop(_g);
                let i = inner.clone();
                self.spawn(async move {
                    if let Err(e) = i.update(Trigger::Search).await {
                        debug!(error = %e, "qmd update after search failed");
                    }
                });
            }
        }
        Ok(SearchResponse { results, mode: Some(mode.response_mode().into()), warnings, explanation: None })
    }
}

/// The second stage on QMD's hits, as the indexed engines run it ([`memory_core::rerank::second_stage`]): the
/// reranker reads the lines each of the best `cfg.candidates` hits' snippet would show, and they take the folded
/// order, with scores in the range of QMD's own. Over the budget or failed, QMD's order stands (`warnings`).
async fn rerank_hits(reranker: &dyn Reranker, cfg: &RerankConfig, query: &ranking::Query, hits: &mut [QmdHit], warnings: &mut Vec<String>) {
    let n = cfg.candidates.min(hits.len());
    let texts: Vec<&str> = hits[..n].iter().map(|h| h.text.as_str()).collect();
    let passages = ranking::passages_to_rerank(&texts, query);
    let Some(logits) = memory_core::rerank::second_stage(reranker, cfg, query.text(), &passages, warnings).await else { return };
    memory_core::rerank::reorder(&mut hits[..n], &logits, cfg.weight, |h| h.score, |h, score| h.score = score);
}

impl Inner {
    pub(super) async fn run_search(&self, mode: SearchMode, query: &str, limit: usize, names: &[String]) -> Result<(Vec<QmdHit>, String), RunError> {
        self.run_hits(&[mode.as_str()], query, limit, names).await
    }

    /// `qmd query --no-rerank` with a document of `lex:` lines (see [`crate::query::any_word_document`]).
    pub(super) async fn run_any_word(&self, doc: &str, limit: usize, names: &[String]) -> Result<(Vec<QmdHit>, String), RunError> {
        self.run_hits(&["query", "--no-rerank"], doc, limit, names).await
    }

    /// Run `qmd <command...> --json -n limit [-c name]... -- text` and parse its hits. A truncated or
    /// unparsable answer is no hits, with the reason behind a NUL in the returned stderr.
    async fn run_hits(&self, command: &[&str], text: &str, limit: usize, names: &[String]) -> Result<(Vec<QmdHit>, String), RunError> {
        let mut args: Vec<String> = command.iter().map(std::string::ToString::to_string).collect();
        args.extend(["--json".into(), "-n".into(), limit.to_string()]);
        for n in names {
            args.push("-c".into());
            args.push(n.clone());
        }
        args.push("--".into());
        args.push(text.to_string());
        let out = process::run(self.run_spec(args, self.cfg.limits.timeout)).await?;
        if out.stdout_truncated {
            return Ok((Vec::new(), "\u{0}truncated".into()));
        }
        match parse::parse_hits(&out.stdout) {
            Ok(hits) => Ok((hits, out.stderr)),
            Err(e) => Ok((Vec::new(), format!("\u{0}{e}"))),
        }
    }
}

/// True when qmd's complaint is about its command-line flags (so another mode may work).
pub(super) fn flags_rejected(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    ["unknown option", "unknown flag", "unrecognized option", "unrecognised option", "invalid option", "unexpected argument", "unknown argument"]
        .iter()
        .any(|p| s.contains(p))
}

/// One line of query text: control characters and newlines become spaces (a newline would turn a `query` into
/// a structured query document).
pub(super) fn normalize_query(q: &str) -> String {
    q.split(|c: char| c.is_control() || c.is_whitespace()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_become_one_line() {
        assert_eq!(normalize_query("  lex: a\nvec: b\t c "), "lex: a vec: b c");
        assert_eq!(normalize_query("\n\t"), "");
    }

    #[test]
    fn flag_rejections() {
        assert!(flags_rejected("error: Unknown option '--json'"));
        assert!(!flags_rejected("Collection not found: x"));
    }
}

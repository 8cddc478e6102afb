//! A search that explains itself ([`SearchRequest::explains`]): the ranking's [`Trace`] read into an
//! [`Explanation`], and, for `explainPath`, where that note is in the search and why.

use super::search::SearchContext;
use super::*;
use crate::discovery::Match;
use crate::explanation::{Explanation, PathExplanation, PathVerdict, Verdict};
use crate::ranking::{Query, Trace};

/// The most chunks of one file read to say why none of them was a candidate.
const MAX_CHUNKS_READ: usize = 10_000;

/// `explainPath` as asked, when it can name a note at all: a path with `..`, or an absolute one outside the
/// workspace and the extra paths, is an argument error naming the field (the search does not run).
pub(super) fn check_explain_path(roots: &crate::discovery::MemoryRoots, asked: &str) -> Result<()> {
    let p = Path::new(asked.trim());
    let outside = p.is_absolute() && !p.starts_with(&roots.workspace) && !roots.extra_paths.iter().any(|x| p.starts_with(x));
    if asked.trim().is_empty() || outside || p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(MemoryError::InvalidInput(format!(
            "explainPath: `{asked}` is not a path inside the workspace ({}) or its extra paths; give one as `memory search` lists it, e.g. memory/2026-03-04.md",
            roots.workspace.display()
        )));
    }
    Ok(())
}

impl IndexedBackend {
    /// The explanation of a search that recorded `trace` and answered `results`.
    pub(super) async fn explanation(
        &self,
        trace: &Trace,
        request: &SearchRequest,
        query: &Query,
        ctx: &SearchContext,
        results: &[SearchResult],
        reranked: bool,
    ) -> Explanation {
        let mut explanation = trace.explain(query, &ctx.opts, results, reranked);
        if let Some(asked) = request.explain_path.as_deref() {
            explanation.path = Some(self.explain_path(asked.trim(), trace, query, ctx, results).await);
        }
        explanation
    }

    /// Where the note at `asked` (workspace-relative, or absolute) is in this search, and why.
    async fn explain_path(&self, asked: &str, trace: &Trace, query: &Query, ctx: &SearchContext, results: &[SearchResult]) -> PathExplanation {
        let answer = |verdict, rank, detail: String| PathExplanation { path: asked.to_string(), verdict, rank, detail };
        let abs = {
            let p = Path::new(asked);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                self.roots().workspace.join(p)
            }
        };
        let key = self.roots().key_for(&abs);
        let stored = match ctx.store.files().await {
            Ok(f) => f,
            Err(e) => return answer(PathVerdict::NotIndexed, None, format!("the index cannot list its files: {e}")),
        };
        let Some(record) = stored.iter().find(|f| f.path == key || f.path == asked) else {
            return self.unindexed(&abs, &key, answer);
        };
        if let Some(skipped) = skipped_files(std::slice::from_ref(record)).into_iter().next() {
            let retry = if skipped.retried { "it is read again at the next sync" } else { "it is read again when it changes" };
            return answer(
                PathVerdict::Skipped,
                None,
                format!("the index skips it: {}; {retry} (`memory status` lists skipped files)", skipped.reason),
            );
        }
        if !ctx.scope.sources.is_empty() && !ctx.scope.sources.contains(&record.source) {
            return answer(
                PathVerdict::OutsideScope,
                None,
                format!("it is a {} file and the search asked for {}", record.source.as_str(), sources_named(&ctx.scope.sources)),
            );
        }
        let min_score = ctx.opts.min_score;
        let ranked = trace.ranked().iter().position(|s| s.candidate.source == record.source && s.candidate.path == record.path);
        if let Some(i) = ranked {
            let s = &trace.ranked()[i];
            let lines = format!("lines {}-{}", s.candidate.start_line, s.candidate.end_line);
            let (verdict, result) = trace.verdict(s, min_score);
            return match (verdict, result) {
                (_, Some(n)) => answer(PathVerdict::Result, Some(i + 1), format!("result {n} ({lines}, score {:.3}: {})", s.score, verdict.why())),
                (Verdict::BeyondMaxResults, None) => answer(
                    PathVerdict::BeyondMaxResults,
                    Some(i + 1),
                    format!(
                        "ranked {} ({lines}, score {:.3}); {} results rank above it (ask for more with maxResults / --max-results)",
                        i + 1,
                        s.score,
                        results.len()
                    ),
                ),
                _ => answer(
                    PathVerdict::BelowMinScore,
                    Some(i + 1),
                    format!(
                        "ranked {} ({lines}), but its score {:.3} is below minScore {min_score} (lower it with minScore / --min-score)",
                        i + 1,
                        s.score
                    ),
                ),
            };
        }
        self.not_a_candidate(record, trace, query, ctx, answer).await
    }

    /// A path the index holds no record of: not a memory file, missing, or a memory file not indexed yet.
    fn unindexed(&self, abs: &Path, key: &str, answer: impl Fn(PathVerdict, Option<usize>, String) -> PathExplanation) -> PathExplanation {
        let exists = abs.exists();
        match self.roots().classify(abs, abs.is_dir()) {
            Match::File(_) if exists => answer(
                PathVerdict::NotIndexed,
                None,
                format!("`{key}` is a memory file the index does not hold yet: `memory index` reads it (`memory status` says why when it cannot)"),
            ),
            _ if !exists => answer(PathVerdict::Missing, None, format!("no file at {}", abs.display())),
            _ => answer(
                PathVerdict::NotMemoryFile,
                None,
                format!(
                    "not a memory file: memory indexes MEMORY.md (or memory.md), USER.md and the Markdown files under memory/ in the workspace {}, \
                     and the configured extra paths (memorySearch.extraPaths), never inside tool folders such as .git or node_modules",
                    self.roots().workspace.display()
                ),
            ),
        }
    }

    /// An indexed file none of whose chunks either leg brought: outside the search's days, no query word and not
    /// near enough the query's vector.
    async fn not_a_candidate(
        &self,
        record: &FileRecord,
        trace: &Trace,
        query: &Query,
        ctx: &SearchContext,
        answer: impl Fn(PathVerdict, Option<usize>, String) -> PathExplanation,
    ) -> PathExplanation {
        let chunks = match ctx.store.file_chunks(record.source, &record.path, MAX_CHUNKS_READ).await {
            Ok(c) => c,
            Err(e) => return answer(PathVerdict::NotACandidate, None, format!("no chunk of it was a candidate (its chunks cannot be read: {e})")),
        };
        if chunks.is_empty() {
            return answer(PathVerdict::NotACandidate, None, "it is indexed but holds no text to search (an empty file)".into());
        }
        if ctx.scope.days.is_some() && !chunks.iter().any(|c| ctx.scope.admits(c.source, c.date)) {
            let dates: std::collections::BTreeSet<String> = chunks
                .iter()
                .filter_map(|c| c.date)
                .filter_map(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.date_naive().to_string())
                .collect();
            let dated = if dates.is_empty() {
                "it is undated".to_string()
            } else {
                format!("it is dated {}", dates.into_iter().collect::<Vec<_>>().join(", "))
            };
            return answer(PathVerdict::OutsideScope, None, format!("{dated}, outside the search's after/before days"));
        }
        let mut reasons = Vec::new();
        let words: Vec<&str> = query.words().list().collect();
        let mut held = vec![false; words.len()];
        for c in &chunks {
            for (h, now) in held.iter_mut().zip(query.words().held_by(&c.text)) {
                *h |= now;
            }
        }
        let named: Vec<&str> = words.iter().zip(&held).filter(|(_, h)| **h).map(|(w, _)| *w).collect();
        if named.is_empty() {
            reasons.push(format!("none of its lines holds a word of the query ({})", words.join(", ")));
        } else {
            reasons.push(format!(
                "its lines hold {}, but the keyword leg's {} candidates (at most {}) did not include it",
                named.join(", "),
                trace.keyword_candidates,
                ctx.limit
            ));
        }
        if let Some(qv) = trace.query_vector.as_deref() {
            let ids: Vec<String> = chunks.iter().map(|c| c.chunk_id.clone()).collect();
            match ctx.store.chunk_vectors(&ids).await {
                Ok(vectors) => {
                    let best = vectors.values().filter(|v| v.len() == qv.len()).map(|v| crate::embedding::cosine(qv, v)).max_by(f64::total_cmp);
                    match (best, trace.lowest_vector_cosine()) {
                        (Some(b), Some(low)) => reasons.push(format!(
                            "its nearest chunk's similarity to the query is {b:.3}, below the {low:.3} of the last of the {} vector candidates",
                            trace.vector_candidates
                        )),
                        (Some(b), None) => reasons.push(format!("its nearest chunk's similarity to the query is {b:.3}")),
                        (None, _) => reasons.push("it has no vectors yet (`memory status` says whether files wait for them)".into()),
                    }
                }
                Err(e) => debug!(error = %e, "cannot read the file's vectors for its explanation"),
            }
        } else {
            reasons.push("the search had no vector leg".into());
        }
        answer(PathVerdict::NotACandidate, None, format!("indexed, but no chunk of it was a candidate: {}", reasons.join("; ")))
    }
}

fn sources_named(sources: &[Source]) -> String {
    sources.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" and ")
}

//! One search: keyword and vector candidates, pseudo-relevance feedback on both, exact path hits, then the
//! shared ranking.

use super::*;
use crate::analysis::QueryWords;
use crate::ranking::{Stage, Trace};

/// Pseudo-relevance feedback: applied to queries with at least this many content terms...
const PRF_MIN_QUERY_TERMS: usize = 4;
/// ...using this many top keyword hits...
const PRF_DOCS: usize = 10;
/// ...to pick this many expansion terms, whose BM25 counts this much beside the original query's.
const PRF_TERMS: usize = 10;
const PRF_WEIGHT: f64 = 0.3;
/// Weight of the feedback centroid added to a question's query vector (Rocchio's textbook beta, with alpha 1).
const VECTOR_PRF_WEIGHT: f32 = 0.75;

/// The best [`PRF_DOCS`] chunks of the merged keyword + vector ranking: the feedback set of both expansions.
fn feedback_ranking(keyword: &[Candidate], vector: &[Candidate], words: &QueryWords, opts: &RankingOptions) -> Vec<crate::ranking::Scored> {
    let (mut ranked, _) = merge(keyword.to_vec(), vector.to_vec(), words, opts.vector_floor, opts.vector_weight, opts.text_weight);
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.candidate.chunk_id.cmp(&b.candidate.chunk_id)));
    ranked.truncate(PRF_DOCS);
    ranked
}

/// How much of the question the keyword leg's best match holds (the share the merge discounts the text leg by,
/// [`crate::ranking::best_match_share`]): the weight of the keyword leg's evidence in the vector leg's feedback. 0
/// when the search weighs no keyword leg (none answered, or `textWeight` 0).
fn keyword_share(keyword: &[Candidate], words: &QueryWords, opts: &RankingOptions) -> f64 {
    if opts.text_weight <= 0.0 {
        return 0.0;
    }
    crate::ranking::best_match_share(keyword, &crate::ranking::text_scores(keyword), words).unwrap_or(0.0)
}

/// What the steps of one search share: one store handle for the whole search, the ranking options (the vector
/// floor is set once the query vector is known), the candidate budget per leg, the scope (sources; `after` and
/// `before`) and, when the question says when, that time's narrower scope ([`window_scope`]).
pub(super) struct SearchContext {
    pub(super) store: Arc<dyn ChunkStore>,
    pub(super) opts: RankingOptions,
    pub(super) limit: usize,
    pub(super) scope: Scope,
    window: Option<Scope>,
}

/// The scope of the time a question says ("last week"), inside `scope`: each leg also asks the store for its best
/// candidates from there, so the notes of that time are among the candidates the ranking prefers
/// ([`crate::ranking::window`]) even when notes of other times match the words better. `None` without a time, or
/// when the search is already held to dates (`after`/`before`).
fn window_scope(query: &crate::ranking::Query, scope: &Scope) -> Option<Scope> {
    if scope.days.is_some() {
        return None;
    }
    let first = query.time().iter().map(|e| e.range.first).min()?;
    let last = query.time().iter().map(|e| e.range.last).max()?;
    let days = crate::store::DayRange { first: crate::discovery::day_millis(first)?, last: crate::discovery::day_millis(last)? };
    Some(Scope { sources: scope.sources.clone(), days: Some(days) })
}

impl SearchContext {
    /// Keyword candidates inside the scope and, when the question says when, those of that time besides.
    async fn keyword_search(&self, query: &KeywordQuery) -> Result<Vec<Candidate>> {
        let found = self.store.keyword_search(query, self.limit, &self.scope).await?;
        match &self.window {
            Some(window) => Ok(union(found, self.store.keyword_search(query, self.limit, window).await?)),
            None => Ok(found),
        }
    }

    /// Vector candidates inside the scope and, when the question says when, those of that time besides.
    async fn vector_search(&self, vector: &[f32]) -> Result<Vec<Candidate>> {
        let found = self.store.vector_search(vector, self.limit, &self.scope).await?;
        match &self.window {
            Some(window) => Ok(union(found, self.store.vector_search(vector, self.limit, window).await?)),
            None => Ok(found),
        }
    }
}

/// When the vector leg does not tell the query's notes from unrelated text ([`crate::ranking::vector_leg_tells`]):
/// its best cosine and the unrelated probe's it did not exceed. `None` when it does, or cannot be measured.
fn set_aside(leg: &VectorLeg, probes: &unrelated::Unrelated) -> Option<crate::explanation::VectorSetAside> {
    let best = leg.candidates.iter().filter_map(|c| c.vector_score).filter(|v| v.is_finite()).reduce(f64::max)?;
    let unrelated = probes.nearest(&leg.query_vector)?;
    (!crate::ranking::vector_leg_tells(best, unrelated)).then_some(crate::explanation::VectorSetAside { best, unrelated })
}

/// `first`, then those of `more` it lacks (by chunk id).
fn union(mut first: Vec<Candidate>, more: Vec<Candidate>) -> Vec<Candidate> {
    let seen: std::collections::HashSet<String> = first.iter().map(|c| c.chunk_id.clone()).collect();
    first.extend(more.into_iter().filter(|c| !seen.contains(&c.chunk_id)));
    first
}

/// The vector leg of a search: its candidates and the query vector they were found with (by `self.embedder`).
struct VectorLeg {
    candidates: Vec<Candidate>,
    query_vector: Vec<f32>,
}

impl IndexedBackend {
    pub(super) async fn search_inner(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let text = request.query.trim();
        if text.is_empty() {
            return Err(MemoryError::InvalidInput("query is empty".into()));
        }
        let days = request.days()?;
        if let Some(asked) = request.explain_path.as_deref() {
            super::explain::check_explain_path(self.roots(), asked)?;
        }
        let mut warnings = Vec::new();
        // One wait for the embedding provider serves the whole search: the changed notes' vectors and the query's.
        let embed_deadline = tokio::time::Instant::now() + patience::EMBED_WAIT;
        let stale = self.freshen(&mut warnings, embed_deadline).await?;
        let mut opts = RankingOptions::from_config(&self.config, request.max_results, request.min_score);
        // Read once; every stage below reads this.
        let query = crate::ranking::Query::parse_on(text, opts.today);
        opts.active_project_keys = crate::ranking::project::active_keys(&request.active_project_keys);
        let limit = RankingOptions::candidate_limit(opts.max_results, self.config.memory.search.query.hybrid.candidate_multiplier);
        let scope = Scope { sources: request.sources.clone(), days };
        let window = window_scope(&query, &scope);
        let mut ctx = SearchContext { store: self.store(), opts, limit, scope, window };
        if let Some(cause) = ctx.store.read_only() {
            warnings
                .push(format!("the index is read-only ({cause}): answers come from it as it is; changed notes are indexed once it can be written"));
        }

        let (terms, words) = (query.terms(), query.words());
        let keyword = self.keyword_leg(&ctx, terms, &mut warnings).await?;
        let vector = self.vector_leg(&ctx, text, embed_deadline, &mut warnings).await?;
        if keyword.is_none() && vector.is_none() && !warnings.is_empty() {
            return Err(MemoryError::Unavailable(warnings.join("; ")));
        }
        let mode = match (keyword.is_some(), vector.is_some()) {
            (true, true) => "hybrid",
            (false, true) => "vector",
            _ => "keyword",
        };
        let probes = match (&vector, &self.embedder) {
            (Some(_), Some(embedder)) => self.unrelated_probes(&ctx.store, embedder, patience::Bound::Until(embed_deadline)).await,
            _ => None,
        };
        // Beside a keyword leg that matched, a vector leg no better than unrelated text is set aside.
        let keyword_matched = keyword.as_ref().is_some_and(|k| !k.is_empty());
        let set_aside = vector.as_ref().zip(probes.as_deref()).filter(|_| keyword_matched).and_then(|(leg, p)| set_aside(leg, p));
        let vector = match set_aside {
            Some(a) => {
                debug!(best = a.best, unrelated = a.unrelated, "vector leg set aside: no candidate is more like the query than unrelated text");
                None
            }
            None => vector,
        };
        ctx.opts.vector_floor = vector.as_ref().zip(probes.as_deref()).and_then(|(leg, p)| p.floor(&leg.query_vector));
        let first_vector: &[Candidate] = vector.as_ref().map_or(&[], |leg| &leg.candidates);
        let keyword = match keyword {
            Some(k) => self.expand_keyword(&ctx, terms, words, k, first_vector).await,
            None => Vec::new(),
        };
        // The vector candidates and the query vector their cosines are with.
        let (vector, query_vector) = match vector {
            Some(leg) if terms.len() >= PRF_MIN_QUERY_TERMS => {
                let (vector, scored_by) = self.expand_vector(&ctx, &leg.query_vector, &keyword, words, leg.candidates).await;
                // The candidates' cosines are with the refined vector now: so is the floor.
                if let Some(p) = probes.as_deref() {
                    ctx.opts.vector_floor = p.floor(&scored_by);
                }
                (vector, Some(scored_by))
            }
            Some(leg) => (leg.candidates, Some(leg.query_vector)),
            None => (Vec::new(), None),
        };
        let mut exact = self.exact_path_hits(&ctx, text).await?;

        let keyword = self.vouch(&stale, keyword);
        let vector = self.vouch(&stale, vector);
        exact.retain(|(c, _)| !stale.removed.contains(&(c.source, c.path.clone())));
        // A search asked to explain itself records each stage's scores; any other records nothing.
        let mut trace = request.explains().then(|| {
            let mut t = Trace::default();
            (t.keyword_candidates, t.vector_candidates, t.candidate_limit) = (keyword.len(), vector.len(), ctx.limit);
            (t.vector_floor, t.vector_set_aside, t.query_vector) = (ctx.opts.vector_floor, set_aside, query_vector);
            t
        });
        let mut items = crate::ranking::order(keyword, vector, exact, &query, &ctx.opts, trace.as_mut());
        let reranked = match &self.reranker {
            Some(reranker) => self.rerank(reranker.as_ref(), &query, &mut items, &mut warnings, trace.as_mut()).await,
            None => false,
        };
        let results = crate::ranking::finish(items, &query, &ctx.opts, trace.as_mut());
        let explanation = match trace {
            Some(trace) => Some(Box::new(self.explanation(&trace, request, &query, &ctx, &results, reranked).await)),
            None => None,
        };
        if results.is_empty() {
            if days.is_some() {
                let from = request.after.as_deref().unwrap_or("the first note");
                let to = request.before.as_deref().unwrap_or("today");
                warnings.push(format!("no notes dated from {from} to {to} match (undated notes are left out when after or before is given)"));
            }
            // Nothing found may be the notes the index does not hold: say so, where `status` names them.
            match ctx.store.files().await {
                Ok(stored) => {
                    let skipped = super::skipped_files(&stored).len();
                    if skipped > 0 {
                        warnings.push(format!(
                            "no results; {skipped} memory files are not indexed (too large, binary, unreadable or not UTF-8): `memory status` lists them with the reason"
                        ));
                    }
                }
                Err(e) => debug!(error = %e, "cannot count the skipped files"),
            }
        }
        Ok(SearchResponse { results, mode: Some(mode.into()), warnings, explanation })
    }

    /// The second stage: the reranker reads the best candidates (their snippet lines) within the time budget and
    /// its scores are folded into theirs. Over budget or failed: the first-stage order answers, and `warnings`
    /// says why. Whether it folded; `trace` records the scores of those it read.
    async fn rerank(
        &self,
        reranker: &dyn crate::rerank::Reranker,
        query: &crate::ranking::Query,
        items: &mut [crate::ranking::Scored],
        warnings: &mut Vec<String>,
        trace: Option<&mut Trace>,
    ) -> bool {
        let cfg = &self.config.memory.search.query.rerank;
        let passages = crate::ranking::rerank_passages(items, cfg.candidates, query);
        let Some(logits) = crate::rerank::second_stage(reranker, cfg, query.text(), &passages, warnings).await else { return false };
        crate::ranking::rerank(items, &logits, cfg.weight);
        if let Some(t) = trace {
            t.record(Stage::Reranked, &items[..logits.len().min(items.len())]);
        }
        true
    }

    /// Keyword candidates; `None` when the store could not answer (said in `warnings`). A query without words
    /// has none: an answer, not a failure. A damaged index is an error: the caller repairs it.
    async fn keyword_leg(&self, ctx: &SearchContext, terms: &[String], warnings: &mut Vec<String>) -> Result<Option<Vec<Candidate>>> {
        if terms.is_empty() {
            return Ok(Some(Vec::new()));
        }
        match ctx.keyword_search(&KeywordQuery { terms: terms.to_vec() }).await {
            Ok(k) => Ok(Some(k)),
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => Err(e),
            Err(e) => {
                warn!(error = %e, "keyword search failed");
                warnings.push(format!("keyword search unavailable: {e}"));
                Ok(None)
            }
        }
    }

    /// Vector candidates, when hybrid search is on and the index holds vectors of the provider's settings;
    /// `None` otherwise (a failure is said in `warnings`).
    async fn vector_leg(
        &self,
        ctx: &SearchContext,
        query: &str,
        deadline: tokio::time::Instant,
        warnings: &mut Vec<String>,
    ) -> Result<Option<VectorLeg>> {
        let Some(embedder) = self.embedder.as_ref().filter(|_| self.config.memory.search.query.hybrid.enabled) else { return Ok(None) };
        if self.index_fingerprint(&ctx.store).await.as_deref() != Some(embedder.fingerprint().as_str()) {
            warnings.push(format!(
                "the index holds vectors of other embedding settings than `{}` now has; keyword results only until the next sync rebuilds it",
                embedder.id()
            ));
            return Ok(None);
        }
        // Said every time until they have their vectors: the answer misses what they mean.
        match ctx.store.files_waiting_for_vectors().await {
            Ok(0) => {}
            Ok(n) => warnings.push(format!(
                "{n} files are not embedded yet and are found by their words only (`memory status` says why; `memory index` embeds them now)"
            )),
            Err(e) => debug!(error = %e, "cannot count the files waiting for vectors"),
        }
        if let Some(why) = self.patience.paused() {
            warnings.push(format!("embeddings unavailable: {why}; keyword results only"));
            return Ok(None);
        }
        let query_vector = match self.patience.call(patience::Bound::Until(deadline), embedder.embed_query(query)).await {
            Ok(v) => v,
            Err(e) => {
                // A stand-in's reason was said once when it was built; each search keeps it in its warnings.
                if embedder.unavailable().is_some() {
                    debug!(error = %e, "query embedding failed; keyword results only");
                } else {
                    warn!(error = %e, "query embedding failed; keyword results only");
                }
                warnings.push(format!("embeddings unavailable: {e}"));
                return Ok(None);
            }
        };
        match ctx.vector_search(&query_vector).await {
            Ok(candidates) => Ok(Some(VectorLeg { candidates, query_vector })),
            Err(e) if e.kind() == crate::ErrorKind::CorruptIndex => Err(e),
            Err(e) => {
                warn!(error = %e, "vector search failed");
                warnings.push(format!("vector search unavailable: {e}"));
                Ok(None)
            }
        }
    }

    /// The first chunk of each file whose name the query is (a one-word query), with its tier.
    async fn exact_path_hits(&self, ctx: &SearchContext, query: &str) -> Result<Vec<(Candidate, u8)>> {
        let mut exact = Vec::new();
        if query.contains(char::is_whitespace) {
            return Ok(exact);
        }
        for f in ctx.store.files_named(query).await? {
            if !ctx.scope.sources.is_empty() && !ctx.scope.sources.contains(&f.source) {
                continue;
            }
            let tier = exact_path_tier(query, &f.path);
            if tier > 0 {
                if let Some(first) = ctx.store.file_chunks(f.source, &f.path, 1).await?.into_iter().next() {
                    if ctx.scope.admits(first.source, first.date) {
                        exact.push((first, tier));
                    }
                }
            }
        }
        Ok(exact)
    }

    /// The provider fingerprint the live index was built with (cached: it changes only with a sync).
    pub(super) async fn index_fingerprint(&self, store: &Arc<dyn ChunkStore>) -> Option<String> {
        if let Some(fp) = self.live.fingerprint_of(store) {
            return fp;
        }
        let fp = store.identity().await.ok().flatten().and_then(|id| id.provider_fingerprint);
        self.live.remember_fingerprint(store, fp.clone());
        fp
    }

    /// Pseudo-relevance feedback for questions: terms common to the best hits are searched as a second, lighter
    /// query, and each chunk's BM25 becomes rank(original) + weight x rank(expansion). The best hits are those of
    /// the merged keyword + vector ranking when there are vector candidates (two signals pick better feedback
    /// than one), else the keyword ones. Short queries (names, ids, a word or two) are precise already and skip it.
    async fn expand_keyword(
        &self,
        ctx: &SearchContext,
        terms: &[String],
        words: &QueryWords,
        keyword: Vec<Candidate>,
        vector: &[Candidate],
    ) -> Vec<Candidate> {
        let (store, opts, limit) = (&ctx.store, &ctx.opts, ctx.limit);
        if terms.len() < PRF_MIN_QUERY_TERMS || keyword.len() < PRF_DOCS {
            return keyword;
        }
        let ranked = feedback_ranking(&keyword, vector, words, opts);
        let best = ranked.first().map_or(0.0, |s| s.score);
        let docs: Vec<(&str, f64)> = ranked.iter().map(|s| (s.candidate.text.as_str(), if best > 0.0 { s.score / best } else { 1.0 })).collect();
        let extra = expansion_terms(terms, &docs, PRF_TERMS);
        if extra.is_empty() {
            return keyword;
        }
        let expanded = match store.keyword_search(&KeywordQuery { terms: extra }, limit, &ctx.scope).await {
            Ok(e) => e,
            Err(e) => {
                warn!(error = %e, "expansion query failed; using the original ranking");
                return keyword;
            }
        };
        // As many as came in (the leg's and, when the question says when, that time's besides), at least `limit`.
        let keep = keyword.len().max(limit);
        let mut by_id: HashMap<String, Candidate> = keyword.into_iter().map(|c| (c.chunk_id.clone(), c)).collect();
        for e in expanded {
            let es = e.keyword_score.unwrap_or(0.0) * PRF_WEIGHT;
            by_id
                .entry(e.chunk_id.clone())
                .and_modify(|c| c.keyword_score = Some(c.keyword_score.unwrap_or(0.0) + es))
                .or_insert_with(|| Candidate { keyword_score: Some(es), ..e });
        }
        let mut merged: Vec<Candidate> = by_id.into_values().collect();
        // Best (highest keyword score) first.
        merged.sort_by(|a, b| b.keyword_score.unwrap_or(0.0).total_cmp(&a.keyword_score.unwrap_or(0.0)).then_with(|| a.chunk_id.cmp(&b.chunk_id)));
        merged.truncate(keep);
        merged
    }

    /// Rocchio feedback on the query vector, for questions: the centroid of the stored vectors of the best chunks
    /// of the merged ranking (keyword, after its own feedback, and vector) is added to the query vector with
    /// weight [`VECTOR_PRF_WEIGHT`] x the share of the question the keyword leg's best match holds
    /// ([`keyword_share`]), and the vector side is searched again with that vector. A question's words rarely
    /// match how the answer is written; the best hits of two signals describe the answer's neighbourhood (Rocchio
    /// 1971; the same holds for dense retrieval). Vector scores are then cosine similarities to the refined query
    /// vector. Any failure keeps the first vector candidates.
    ///
    /// Why in proportion to the keyword share: what the feedback adds is the keyword leg's evidence. When the
    /// keyword leg's best match holds little of the question (a Chinese question about an English note, whose
    /// only matches are Chinese notes sharing one word with it), its matches in the feedback set pull the query
    /// towards those notes and away from the answer the vector leg found; with no keyword leg, feedback from the
    /// vector leg's own head brings nothing the leg did not already find. Figures in docs/benchmark-history.md.
    async fn expand_vector(
        &self,
        ctx: &SearchContext,
        query_vector: &[f32],
        keyword: &[Candidate],
        words: &QueryWords,
        vector: Vec<Candidate>,
    ) -> (Vec<Candidate>, Vec<f32>) {
        let (store, opts) = (&ctx.store, &ctx.opts);
        let first = |vector| (vector, query_vector.to_vec());
        if vector.len() < PRF_DOCS {
            return first(vector);
        }
        let share = keyword_share(keyword, words, opts);
        if share <= 0.0 {
            return first(vector);
        }
        let ids: Vec<String> = feedback_ranking(keyword, &vector, words, opts).into_iter().map(|s| s.candidate.chunk_id).collect();
        let stored = match store.chunk_vectors(&ids).await {
            Ok(v) => v,
            Err(e) => {
                warn!(error = %e, "reading feedback vectors failed; using the first vector candidates");
                return first(vector);
            }
        };
        let feedback: Vec<&Vec<f32>> = ids.iter().filter_map(|id| stored.get(id)).filter(|v| v.len() == query_vector.len()).collect();
        // Too few stored vectors (a store that cannot read them back, media chunks) is no centroid.
        if feedback.len() * 2 < ids.len() {
            return first(vector);
        }
        let mut refined = query_vector.to_vec();
        let w = share as f32 * VECTOR_PRF_WEIGHT / feedback.len() as f32;
        for v in feedback {
            for (q, x) in refined.iter_mut().zip(v) {
                *q += w * x;
            }
        }
        crate::embedding::sanitize_and_normalize(&mut refined);
        match ctx.vector_search(&refined).await {
            Ok(second) if !second.is_empty() => (second, refined),
            Ok(_) => first(vector),
            Err(e) => {
                warn!(error = %e, "feedback vector search failed; using the first vector candidates");
                first(vector)
            }
        }
    }
}

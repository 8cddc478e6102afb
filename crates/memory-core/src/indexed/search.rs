//! One search: keyword and vector candidates, pseudo-relevance feedback on both, exact path hits, then the
//! shared ranking.

use super::*;

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
fn feedback_ranking(keyword: &[Candidate], vector: &[Candidate], opts: &RankingOptions) -> Vec<crate::ranking::Scored> {
    let mut ranked = merge(keyword.to_vec(), vector.to_vec(), opts.vector_floor, opts.vector_weight, opts.text_weight);
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.candidate.chunk_id.cmp(&b.candidate.chunk_id)));
    ranked.truncate(PRF_DOCS);
    ranked
}

impl IndexedBackend {
    pub(super) async fn search_inner(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let query = request.query.trim();
        if query.is_empty() {
            return Err(MemoryError::InvalidInput("query is empty".into()));
        }
        let mut warnings = Vec::new();
        let stale = self.freshen(&mut warnings).await?;
        let store = self.store();
        let q = &self.config.memory.search.query;
        let mut opts = RankingOptions::from_config(&self.config, request.max_results, request.min_score);
        let limit = RankingOptions::candidate_limit(opts.max_results, q.hybrid.candidate_multiplier);

        let terms = query_terms(query);
        // A query without words has no keyword candidates: an answer, not a failure.
        let mut keyword_ok = terms.is_empty();
        let keyword = if terms.is_empty() {
            Vec::new()
        } else {
            match store.keyword_search(&KeywordQuery { terms: terms.clone() }, limit, &request.sources).await {
                Ok(k) => {
                    keyword_ok = true;
                    k
                }
                Err(e) => {
                    warn!(error = %e, "keyword search failed");
                    warnings.push(format!("keyword search unavailable: {e}"));
                    Vec::new()
                }
            }
        };

        let mut vector_ok = false;
        let mut vector = Vec::new();
        let mut query_vector = None;
        let embedder = self.embedder.as_ref().filter(|_| q.hybrid.enabled);
        let embedder = match embedder {
            Some(e) if self.index_fingerprint(&store).await.as_deref() != Some(e.fingerprint().as_str()) => {
                warnings.push(format!("the index holds vectors of other embedding settings than `{}` now has; keyword results only until the next sync rebuilds it", e.id()));
                None
            }
            other => other,
        };
        if let Some(embedder) = embedder {
            match embedder.embed_query(query).await {
                Ok(v) => match store.vector_search(&v, limit, &request.sources).await {
                    Ok(c) => {
                        vector_ok = true;
                        vector = c;
                        query_vector = Some(v);
                    }
                    Err(e) => {
                        warn!(error = %e, "vector search failed");
                        warnings.push(format!("vector search unavailable: {e}"));
                    }
                },
                Err(e) => {
                    warn!(error = %e, "query embedding failed; keyword results only");
                    warnings.push(format!("embeddings unavailable: {e}"));
                }
            }
        }
        if !keyword_ok && !vector_ok && !warnings.is_empty() {
            return Err(MemoryError::Unavailable(warnings.join("; ")));
        }
        let centroid = match (&query_vector, embedder) {
            (Some(_), Some(e)) => self.unrelated_centroid(&store, e).await,
            _ => None,
        };
        opts.vector_floor = query_vector.as_deref().zip(centroid.as_deref()).and_then(|(q, c)| unrelated::floor(q, c));
        let keyword = if keyword_ok {
            self.expand_keyword(&store, &terms, keyword, &vector, &opts, limit, &request.sources).await
        } else {
            keyword
        };
        let vector = match &query_vector {
            Some(qv) if terms.len() >= PRF_MIN_QUERY_TERMS => {
                let (vector, scored_by) = self.expand_vector(&store, qv, &keyword, vector, &opts, limit, &request.sources).await;
                // The candidates' cosines are with the refined vector now: so is the floor.
                if let Some(c) = centroid.as_deref() {
                    opts.vector_floor = unrelated::floor(&scored_by, c);
                }
                vector
            }
            _ => vector,
        };

        let mut exact = Vec::new();
        if !query.contains(char::is_whitespace) {
            for f in store.files_named(query).await? {
                if !request.sources.is_empty() && !request.sources.contains(&f.source) {
                    continue;
                }
                let tier = exact_path_tier(query, &f.path);
                if tier > 0 {
                    if let Some(first) = store.file_chunks(f.source, &f.path, 1).await?.into_iter().next() {
                        exact.push((first, tier));
                    }
                }
            }
        }

        let keyword = self.vouch(&stale, keyword);
        let vector = self.vouch(&stale, vector);
        exact.retain(|(c, _)| !stale.removed.contains(&(c.source, c.path.clone())));
        let results = rank(keyword, vector, exact, query, &opts);
        let mode = match (keyword_ok, vector_ok) {
            (true, true) => "hybrid",
            (false, true) => "vector",
            _ => "keyword",
        };
        Ok(SearchResponse { results, mode: Some(mode.into()), warnings })
    }

    /// The provider fingerprint the live index was built with (cached: it changes only with a sync).
    pub(super) async fn index_fingerprint(&self, store: &Arc<dyn ChunkStore>) -> Option<String> {
        let handle = store_handle(store);
        if let Some((h, fp)) = self.built_fingerprint.read().unwrap().clone() {
            if h == handle {
                return fp;
            }
        }
        let fp = store.identity().await.ok().flatten().and_then(|id| id.provider_fingerprint);
        *self.built_fingerprint.write().unwrap() = Some((handle, fp.clone()));
        fp
    }

    /// Pseudo-relevance feedback for questions: terms common to the best hits are searched as a second, lighter
    /// query, and each chunk's BM25 becomes rank(original) + weight x rank(expansion). The best hits are those of
    /// the merged keyword + vector ranking when there are vector candidates (two signals pick better feedback
    /// than one), else the keyword ones. Short queries (names, ids, a word or two) are precise already and skip it.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn expand_keyword(
        &self,
        store: &Arc<dyn ChunkStore>,
        terms: &[String],
        keyword: Vec<Candidate>,
        vector: &[Candidate],
        opts: &RankingOptions,
        limit: usize,
        sources: &[Source],
    ) -> Vec<Candidate> {
        if terms.len() < PRF_MIN_QUERY_TERMS || keyword.len() < PRF_DOCS {
            return keyword;
        }
        let ranked = feedback_ranking(&keyword, vector, opts);
        let best = ranked.first().map_or(0.0, |s| s.score);
        let docs: Vec<(&str, f64)> = ranked
            .iter()
            .map(|s| (s.candidate.text.as_str(), if best > 0.0 { s.score / best } else { 1.0 }))
            .collect();
        let extra = expansion_terms(terms, &docs, PRF_TERMS);
        if extra.is_empty() {
            return keyword;
        }
        let expanded = match store.keyword_search(&KeywordQuery { terms: extra }, limit, sources).await {
            Ok(e) => e,
            Err(e) => {
                warn!(error = %e, "expansion query failed; using the original ranking");
                return keyword;
            }
        };
        let mut by_id: HashMap<String, Candidate> = keyword.into_iter().map(|c| (c.chunk_id.clone(), c)).collect();
        for e in expanded {
            let er = e.bm25_rank.unwrap_or(0.0) * PRF_WEIGHT;
            by_id
                .entry(e.chunk_id.clone())
                .and_modify(|c| c.bm25_rank = Some(c.bm25_rank.unwrap_or(0.0) + er))
                .or_insert_with(|| Candidate { bm25_rank: Some(er), ..e });
        }
        let mut merged: Vec<Candidate> = by_id.into_values().collect();
        merged.sort_by(|a, b| a.bm25_rank.unwrap_or(0.0).total_cmp(&b.bm25_rank.unwrap_or(0.0)).then_with(|| a.chunk_id.cmp(&b.chunk_id)));
        merged.truncate(limit);
        merged
    }

    /// Rocchio feedback on the query vector, for questions: the centroid of the stored vectors of the best chunks
    /// of the merged ranking (keyword, after its own feedback, and vector) is added to the query vector with
    /// weight [`VECTOR_PRF_WEIGHT`], and the vector side is searched again with that vector. A question's words
    /// rarely match how the answer is written; the best hits' vectors describe the answer's neighbourhood
    /// (Rocchio 1971; the same holds for dense retrieval). Vector scores are then cosine similarities to the
    /// refined query vector. Any failure keeps the first vector candidates.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn expand_vector(
        &self,
        store: &Arc<dyn ChunkStore>,
        query_vector: &[f32],
        keyword: &[Candidate],
        vector: Vec<Candidate>,
        opts: &RankingOptions,
        limit: usize,
        sources: &[Source],
    ) -> (Vec<Candidate>, Vec<f32>) {
        let first = |vector| (vector, query_vector.to_vec());
        if vector.len() < PRF_DOCS {
            return first(vector);
        }
        let ids: Vec<String> = feedback_ranking(keyword, &vector, opts).into_iter().map(|s| s.candidate.chunk_id).collect();
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
        let w = VECTOR_PRF_WEIGHT / feedback.len() as f32;
        for v in feedback {
            for (q, x) in refined.iter_mut().zip(v) {
                *q += w * x;
            }
        }
        crate::embedding::sanitize_and_normalize(&mut refined);
        match store.vector_search(&refined, limit, sources).await {
            Ok(second) if !second.is_empty() => (second, refined),
            Ok(_) => first(vector),
            Err(e) => {
                warn!(error = %e, "feedback vector search failed; using the first vector candidates");
                first(vector)
            }
        }
    }
}

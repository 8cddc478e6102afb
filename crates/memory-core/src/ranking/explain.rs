//! Why a search answered what it did: when a search is asked to explain itself, the ranking records each
//! candidate's score after each of its stages in a [`Trace`] (a search that is not asked records nothing), and
//! [`Trace::explain`] reads it, with the factors the stages multiply by ([`Adjustment`]) and the `minScore` cut's
//! reasons ([`Pass`]), into the [`Explanation`] that `memory explain` prints.

use std::collections::HashMap;

use super::{keyword_backed, read_depth, snippet, window::candidate_day, Adjustment, ExactQuery, Pass, Query, RankingOptions, Scored};
use crate::explanation::{Explanation, HitExplanation, KeywordFactor, LegWeights, QueryReading, SnippetReason, TimeReading, VectorFactor, Verdict};
use crate::types::{SearchResult, Source};

/// The points of a search at which each candidate's score is recorded.
#[derive(Debug, Clone, Copy)]
pub enum Stage {
    /// The two legs merged (exact-path hits at their stand-in score).
    Merged,
    /// After the preference for newer dated notes ([`super::prefer_recent`]).
    Recency,
    /// After the preference for notes of the time the query names ([`super::window`]).
    Window,
    /// After the head's reordering by sentences ([`super::prefer_sentences_holding_the_query`]).
    Sentence,
    /// After decay, importance and project ([`super::adjust_and_sort`]).
    Adjusted,
    /// After the reranker (only the candidates it read).
    Reranked,
}

const STAGES: usize = 6;

/// What one search recorded for its explanation.
#[derive(Debug, Default)]
pub struct Trace {
    /// Each candidate's score (by chunk id) after each [`Stage`].
    scores: HashMap<String, [Option<f64>; STAGES]>,
    weights: Option<LegWeights>,
    /// Every candidate in the ranking's final order (after MMR), before the `minScore` cut.
    ranked: Vec<Scored>,
    /// The chunk ids of the results, in order.
    results: Vec<String>,
    /// Set by the engine: the candidates each leg brought, the budget it asked each for, the vector floor.
    pub keyword_candidates: usize,
    pub vector_candidates: usize,
    pub candidate_limit: usize,
    pub vector_floor: Option<f64>,
    /// Set when the engine set the vector leg aside ([`super::vector_leg_tells`]).
    pub vector_set_aside: Option<crate::explanation::VectorSetAside>,
    /// The query vector the vector candidates' cosines are with (after feedback, when it refined it).
    pub query_vector: Option<Vec<f32>>,
}

impl Trace {
    /// Record the scores of `items` after `stage`.
    pub fn record(&mut self, stage: Stage, items: &[Scored]) {
        for s in items {
            self.scores.entry(s.candidate.chunk_id.clone()).or_default()[stage as usize] = Some(s.score);
        }
    }

    pub(super) fn weighed(&mut self, weights: LegWeights) {
        self.weights = Some(weights);
    }

    pub(super) fn ranked_as(&mut self, items: &[Scored]) {
        self.ranked = items.to_vec();
    }

    pub(super) fn selected(&mut self, results: &[Scored]) {
        self.results = results.iter().map(|s| s.candidate.chunk_id.clone()).collect();
    }

    /// Every candidate in the final order, before the `minScore` cut.
    pub fn ranked(&self) -> &[Scored] {
        &self.ranked
    }

    fn score(&self, s: &Scored, stage: Stage) -> Option<f64> {
        self.scores.get(&s.candidate.chunk_id).and_then(|v| v[stage as usize])
    }

    /// The lowest cosine among the vector candidates: what a chunk had to beat to be one.
    pub fn lowest_vector_cosine(&self) -> Option<f64> {
        self.ranked.iter().filter_map(|s| s.vector_score).min_by(f64::total_cmp)
    }

    /// Where a ranked candidate stands after the cut at `min_score`: its verdict, and its place among the
    /// results (from 1).
    pub fn verdict(&self, s: &Scored, min_score: f64) -> (Verdict, Option<usize>) {
        let result = self.results.iter().position(|id| *id == s.candidate.chunk_id);
        let verdict = match (Pass::of(s, min_score), result) {
            (Some(Pass::ExactPath), Some(_)) => Verdict::ExactPath,
            (Some(Pass::ExactMatch), Some(_)) => Verdict::ExactMatch,
            (Some(Pass::Score), Some(_)) => Verdict::Score,
            (Some(Pass::VectorLeg), Some(_)) => Verdict::VectorLeg,
            (None, Some(_)) => Verdict::KeywordBackfill,
            (Some(_), None) => Verdict::BeyondMaxResults,
            // Nothing passed and keyword matches answered, but more of them than `maxResults` ranked above it.
            (None, None) if keyword_backed(s) && !self.ranked.iter().any(|o| Pass::of(o, min_score).is_some()) => Verdict::BeyondMaxResults,
            (None, None) => Verdict::BelowMinScore,
        };
        (verdict, result.map(|i| i + 1))
    }

    /// The explanation of a search that ranked as recorded and answered `results`.
    pub fn explain(&self, query: &Query, opts: &RankingOptions, results: &[SearchResult], reranked: bool) -> Explanation {
        let depth = read_depth(opts.max_results).min(self.ranked.len());
        let head = &self.ranked[..depth];
        // The snippet weights of the search ([`super::finish`]): the query's terms over the same lines.
        let texts: Vec<&str> = head.iter().map(|s| s.candidate.text.as_str()).collect();
        let terms = snippet::SnippetQuery::of(query, &texts);
        let hits = head.iter().enumerate().map(|(i, s)| self.hit(i + 1, s, query, opts, results, &terms)).collect();
        Explanation {
            query: reading(query),
            today: opts.today.to_string(),
            keyword_candidates: self.keyword_candidates,
            vector_candidates: self.vector_candidates,
            candidate_limit: self.candidate_limit,
            weights: self.weights,
            vector_floor: self.vector_floor,
            vector_set_aside: self.vector_set_aside,
            min_score: opts.min_score,
            max_results: opts.max_results,
            half_life_days: opts.half_life_days,
            reranked,
            ranked: self.ranked.len(),
            hits,
            path: None,
        }
    }

    fn hit(
        &self,
        rank: usize,
        s: &Scored,
        query: &Query,
        opts: &RankingOptions,
        results: &[SearchResult],
        terms: &snippet::SnippetQuery,
    ) -> HitExplanation {
        let c = &s.candidate;
        let at = |stage| self.score(s, stage);
        let merged = at(Stage::Merged).unwrap_or(0.0);
        let step = |from: Stage, to: Stage| match (at(from), at(to)) {
            (Some(a), Some(b)) => b - a,
            _ => 0.0,
        };
        let adjustment = Adjustment::of(c, opts);
        let keyword = s.text_score.filter(|_| c.keyword_score.is_some()).map(|text_score| {
            let held = query.words().held_by(&c.text);
            KeywordFactor {
                bm25: c.keyword_score.unwrap_or(0.0),
                text_score,
                words: query.words().list().zip(held).filter(|(_, h)| *h).map(|(w, _)| w.to_string()).collect(),
            }
        });
        let vector = s.vector_score.map(|cosine| VectorFactor { cosine, score: s.vector_leg.unwrap_or(0.0) });
        let (verdict, result) = self.verdict(s, opts.min_score);
        let snippet = result.map(|i| snippet_reason(&results[i - 1], s, terms));
        HitExplanation {
            rank,
            result,
            path: c.path.clone(),
            start_line: c.start_line,
            end_line: c.end_line,
            source: c.source,
            date: candidate_day(s).map(|d| d.to_string()),
            keyword,
            vector,
            merged,
            exact_path_tier: s.tier,
            exact_match: s.exact_match,
            recency: step(Stage::Merged, Stage::Recency),
            time_window: step(Stage::Recency, Stage::Window),
            sentence: step(Stage::Window, Stage::Sentence),
            age_days: adjustment.age_days,
            decay: adjustment.decay,
            importance: adjustment.importance,
            project: adjustment.project,
            rerank: at(Stage::Reranked).zip(at(Stage::Adjusted)).map(|(after, before)| after - before),
            score: s.score,
            verdict,
            snippet,
        }
    }
}

/// How the ranking read `query`.
fn reading(query: &Query) -> QueryReading {
    let time = query
        .time()
        .iter()
        .map(|e| TimeReading {
            text: query.text().get(e.span.clone()).unwrap_or_default().to_string(),
            first: e.range.first.to_string(),
            last: e.range.last.to_string(),
        })
        .collect();
    let exact = match query.exact() {
        ExactQuery::None => None,
        ExactQuery::Identifiers(words) => Some(words.join(" ")),
        ExactQuery::Phrase(p) => Some(p.clone()),
    };
    QueryReading { terms: query.terms().to_vec(), time, exact, asks_about_present: query.asks_about_present() }
}

/// The lines `result`'s snippet shows of `s` and the query's words on them.
fn snippet_reason(result: &SearchResult, s: &Scored, terms: &snippet::SnippetQuery) -> SnippetReason {
    let c = &s.candidate;
    let shown = match (result.snippet_start_line, result.snippet_end_line) {
        (Some(first), Some(last)) if c.source == Source::Memory => {
            let lines: Vec<&str> = c.text.split('\n').collect();
            let (a, b) = (first.saturating_sub(c.start_line), last.saturating_sub(c.start_line));
            lines.get(a..=b.min(lines.len().saturating_sub(1))).map(|l| l.join("\n")).unwrap_or_default()
        }
        _ => result.snippet.clone(),
    };
    let whole_chunk = result.snippet_start_line == Some(c.start_line) && result.snippet_end_line == Some(c.end_line);
    SnippetReason { start_line: result.snippet_start_line, end_line: result.snippet_end_line, whole_chunk, words: terms.named_in(&shown) }
}

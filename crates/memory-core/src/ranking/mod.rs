//! The ranking pipeline, shared by every engine:
//! keyword + vector candidates -> weighted merge -> temporal decay -> importance -> recency among near-equal
//! dated notes -> sort -> MMR -> exact-path tiers, then exact matches (hybrid) -> min-score selection with
//! keyword back-fill -> top K, with snippets and citations.

use std::collections::HashSet;

use crate::analysis::similarity_tokens;
use crate::citation::cite;
use crate::config::{Citations, Config};
use crate::discovery::{date_from_path, is_evergreen};
use crate::store::Candidate;
use crate::types::{SearchResult, Source};

mod exact;
mod explain;
mod fusion;
mod query;
mod recency;

pub use exact::{exact_path_tier, ExactQuery};
pub use explain::{Stage, Trace};
pub use fusion::{best_match_share, hybrid_weights, leg_spread, merge, read_depth, text_scores, vector_leg_tells, vector_scores, SPREAD_DEPTH};
pub use query::Query;
pub use recency::{asks_about_present, prefer_recent, RECENCY_PREFERENCE, RECENCY_PREFERENCE_PRESENT};

pub const SNIPPET_MAX_CHARS: usize = 700;
const DAY_MS: f64 = 86_400_000.0;

/// Added to the BM25 of every matching chunk. BM25's idf is ~0 for a word in about half the documents: in a
/// workspace of two or three notes every match would score 0.000 and read as no match at all (FTS5 floors its
/// idf at 1e-6). Added, not a floor, so that matches keep their order: a chunk that matches a query word scores
/// at least 0.1 / 1.1 = 0.09.
pub const MIN_MATCH_BM25: f64 = 0.1;

/// A candidate's keyword score (`Candidate::keyword_score`, higher = better) to a 0..1 text score: r = score +
/// [`MIN_MATCH_BM25`], text = r / (1 + r). A score of zero or below (no store gives one for a match; feedback
/// can) maps to 1 / (1 - score), as it always has.
pub fn keyword_text_score(score: f64) -> f64 {
    if !score.is_finite() {
        return 0.0;
    }
    if score > 0.0 {
        let r = score + MIN_MATCH_BM25;
        r / (1.0 + r)
    } else {
        1.0 / (1.0 - score)
    }
}

/// exp(-ln 2 / halfLife x ageDays); no decay for future dates.
pub fn decay_factor(age_days: f64, half_life_days: f64) -> f64 {
    if age_days <= 0.0 || half_life_days <= 0.0 {
        return 1.0;
    }
    (-(std::f64::consts::LN_2 / half_life_days) * age_days).exp()
}

/// 0.75 + 0.05 x N for N in 1..=10; absent is 1.
pub fn importance_factor(importance: Option<u8>) -> f64 {
    match importance {
        Some(n) if (1..=10).contains(&n) => 0.75 + 0.05 * n as f64,
        _ => 1.0,
    }
}

/// The age that decay uses: the date in a daily log's name, none for evergreen files, else the mtime.
pub fn age_days(source: Source, path: &str, file_mtime_ms: i64, now_ms: i64) -> Option<f64> {
    if source == Source::Memory {
        if let Some(date) = date_from_path(path) {
            return Some((now_ms as f64 - date as f64) / DAY_MS);
        }
        if is_evergreen(path) {
            return None;
        }
    }
    // In f64: a file time from any era (or a broken file system) must not overflow the subtraction.
    Some((now_ms as f64 - file_mtime_ms as f64) / DAY_MS)
}

/// Settings of one ranking run.
#[derive(Debug, Clone)]
pub struct RankingOptions {
    pub max_results: usize,
    pub min_score: f64,
    /// Weights as configured; they are normalised to sum 1 over the signals present.
    pub vector_weight: f64,
    pub text_weight: f64,
    pub mmr_lambda: Option<f64>,
    pub half_life_days: Option<f64>,
    pub citations: Citations,
    /// The moment the search is asked at ([`crate::time::now`]): what temporal decay counts from.
    pub now_ms: i64,
    /// The day it is asked on: what "yesterday" and "last week" in a query mean ([`Query::parse_on`]).
    pub today: chrono::NaiveDate,
    /// The similarity the embedding model gives this query and unrelated text: vector scores count from it
    /// beside the text leg ([`vector_scores`]). Set by the engine per search; `None`: raw cosines.
    pub vector_floor: Option<f64>,
    /// The session's active repository keys ([`project::active_keys`]): project-tagged hits are boosted or
    /// demoted by [`project::factor`]. Empty: no project scoping.
    pub active_project_keys: Vec<String>,
}

impl RankingOptions {
    pub fn from_config(config: &Config, max_results: Option<usize>, min_score: Option<f64>) -> RankingOptions {
        let q = &config.memory.search.query;
        // A `now` setting that does not read was refused when the config was loaded; the clock stands in here.
        let (today, now_ms) = crate::time::now(q.now.as_deref()).unwrap_or_else(|_| crate::time::clock());
        RankingOptions {
            max_results: max_results.unwrap_or(q.max_results).max(1),
            min_score: min_score.unwrap_or(q.min_score),
            vector_weight: q.hybrid.vector_weight,
            text_weight: q.hybrid.text_weight,
            mmr_lambda: q.hybrid.mmr.enabled.then_some(q.hybrid.mmr.lambda),
            half_life_days: q.hybrid.temporal_decay.enabled.then_some(q.hybrid.temporal_decay.half_life_days),
            citations: config.memory.citations,
            now_ms,
            today,
            vector_floor: None,
            active_project_keys: Vec::new(),
        }
    }

    /// Candidates to ask each retriever for: maxResults x multiplier, counting maxResults as at least
    /// [`SPREAD_DEPTH`], at most 200. Why the floor: the ranking reads more than the results (feedback from the best
    /// ten, the score spread to the tenth), and with fewer candidates behind them a search for five results would
    /// rank its first five otherwise than a search for ten does.
    pub fn candidate_limit(max_results: usize, multiplier: usize) -> usize {
        read_depth(max_results).saturating_mul(multiplier).clamp(1, 200)
    }
}

/// A candidate with its merged score.
#[derive(Debug, Clone)]
pub struct Scored {
    pub candidate: Candidate,
    pub score: f64,
    pub text_score: Option<f64>,
    pub vector_score: Option<f64>,
    /// The vector leg's own score of the chunk, as a search by vectors alone scores it (counted from the model's
    /// similarity of unrelated text beside a text leg, [`vector_scores`]): what [`select`] lets through on the
    /// vector leg's word.
    pub vector_leg: Option<f64>,
    pub tier: u8,
    /// The chunk holds what the query names exactly ([`ExactQuery`]): in hybrid search it ranks above chunks that
    /// do not (below exact-path hits), whatever the vectors say.
    pub exact_match: bool,
}

/// The rank whose score the spread is measured to.
const SPREAD_RANK: usize = 10;

/// The spread of a search's scores: the best minus the tenth best (or the last); `None` when they do not spread.
/// Preferences that move candidates (recency, a named day) move them by a share of it, so that models whose
/// similarities bunch and models whose similarities spread out are moved alike.
fn score_spread(items: &[Scored]) -> Option<f64> {
    let mut scores: Vec<f64> = items.iter().map(|s| s.score).filter(|v| v.is_finite()).collect();
    scores.sort_by(|a, b| b.total_cmp(a));
    let best = *scores.first()?;
    let spread = best - scores[(SPREAD_RANK - 1).min(scores.len() - 1)];
    (spread > 0.0 && spread.is_finite()).then_some(spread)
}

/// The factors [`adjust_and_sort`] multiplies a candidate's score by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adjustment {
    /// The age temporal decay counts ([`age_days`]); `None` when decay is off or the note is evergreen.
    pub age_days: Option<f64>,
    /// [`decay_factor`] of that age (1 without).
    pub decay: f64,
    /// [`importance_factor`].
    pub importance: f64,
    /// [`project::factor`].
    pub project: f64,
}

impl Adjustment {
    /// The three factors of `c` in a search with `opts`.
    pub fn of(c: &Candidate, opts: &RankingOptions) -> Adjustment {
        let age_days = opts.half_life_days.and_then(|_| age_days(c.source, &c.path, c.file_mtime_ms, opts.now_ms));
        let decay = match (age_days, opts.half_life_days) {
            (Some(age), Some(h)) => decay_factor(age, h),
            _ => 1.0,
        };
        Adjustment { age_days, decay, importance: importance_factor(c.importance), project: project::factor(c, &opts.active_project_keys) }
    }
}

/// Temporal decay, importance and project ([`Adjustment`]), then sort by score (ties: path, line).
pub fn adjust_and_sort(items: &mut [Scored], opts: &RankingOptions) {
    for s in items.iter_mut() {
        let a = Adjustment::of(&s.candidate, opts);
        s.score *= a.decay;
        s.score *= a.importance;
        s.score *= a.project;
        // A NaN or infinite signal (a degenerate vector, an extreme option) must not reach the ranking or the wire.
        if !s.score.is_finite() {
            s.score = 0.0;
        }
        s.vector_score = s.vector_score.filter(|v| v.is_finite());
        s.text_score = s.text_score.filter(|v| v.is_finite());
    }
    sort(items);
}

fn sort(items: &mut [Scored]) {
    items.sort_by(ranked_before);
}

/// The ranking's order: exact-path tiers, then exact matches, then score (ties: path, line).
fn ranked_before(a: &Scored, b: &Scored) -> std::cmp::Ordering {
    b.tier
        .cmp(&a.tier)
        .then(b.exact_match.cmp(&a.exact_match))
        .then(b.score.total_cmp(&a.score))
        .then_with(|| a.candidate.path.cmp(&b.candidate.path))
        .then(a.candidate.start_line.cmp(&b.candidate.start_line))
}

/// Jaccard similarity of two token sets.
pub fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// Maximal marginal relevance re-ordering: repeatedly pick the item maximising
/// lambda x relevance - (1 - lambda) x (max similarity to the items already picked), relevance min-max normalised.
pub fn mmr(items: Vec<Scored>, lambda: f64) -> Vec<Scored> {
    if items.len() < 2 {
        return items;
    }
    let (lo, hi) = items.iter().fold((f64::MAX, f64::MIN), |(lo, hi), s| (lo.min(s.score), hi.max(s.score)));
    let rel: Vec<f64> = items.iter().map(|s| if hi > lo { (s.score - lo) / (hi - lo) } else { 1.0 }).collect();
    let tokens: Vec<HashSet<String>> = items.iter().map(|s| similarity_tokens(&s.candidate.text)).collect();
    let mut remaining: Vec<usize> = (0..items.len()).collect();
    let mut picked: Vec<usize> = Vec::with_capacity(items.len());
    // Each candidate's highest similarity to the picked ones, updated with each new pick only (the same maximum
    // as over all picks, in O(n^2) instead of O(n^3)).
    let mut max_sim = vec![0.0_f64; items.len()];
    while !remaining.is_empty() {
        if let Some(&last) = picked.last() {
            for &i in &remaining {
                max_sim[i] = max_sim[i].max(jaccard(&tokens[i], &tokens[last]));
            }
        }
        let mut best = 0;
        let mut best_val = f64::MIN;
        for (pos, &i) in remaining.iter().enumerate() {
            let val = lambda * rel[i] - (1.0 - lambda) * max_sim[i];
            if val > best_val {
                best_val = val;
                best = pos;
            }
        }
        picked.push(remaining.remove(best));
    }
    // `picked` is a permutation of the items' positions: each slot is taken once.
    let mut slots: Vec<Option<Scored>> = items.into_iter().map(Some).collect();
    picked.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Results at or above `min_score`, up to `max_results`; exact-path hits always pass, and so does a hit whose
/// vector leg alone scores it at `min_score` or more ([`Scored::vector_leg`]). If nothing passes, keyword-backed
/// hits are returned instead of nothing.
///
/// Why the vector leg's own score: the merge gives a chunk no keyword matched only the vector leg's share of the
/// weight, so the note a question in one language asks about in another (no shared word) scored about half its
/// similarity and fell under `min_score`, while a note sharing one word with the question passed; when nothing
/// else passed, the keyword back-fill returned only the word matches. Hybrid search must not return less than a
/// search by vectors alone would; the order stays the merged one.
pub fn select(items: Vec<Scored>, max_results: usize, min_score: f64) -> Vec<Scored> {
    min_score_cut(items, max_results, |s| Pass::of(s, min_score).is_some(), keyword_backed)
}

/// What lets a candidate through [`select`]'s `minScore` cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Its file's name is the query ([`exact_path_tier`]).
    ExactPath,
    /// It holds what the query names exactly ([`ExactQuery`]).
    ExactMatch,
    /// Its score is at `minScore` or above.
    Score,
    /// The vector leg alone scores it at `minScore` or above ([`Scored::vector_leg`]).
    VectorLeg,
}

impl Pass {
    /// Why `s` passes the cut at `min_score`; `None` when it does not.
    pub fn of(s: &Scored, min_score: f64) -> Option<Pass> {
        if s.tier > 0 {
            Some(Pass::ExactPath)
        } else if s.exact_match {
            Some(Pass::ExactMatch)
        } else if s.score >= min_score {
            Some(Pass::Score)
        } else if s.vector_leg.is_some_and(|v| v >= min_score) {
            Some(Pass::VectorLeg)
        } else {
            None
        }
    }
}

/// A keyword match backs it: what [`select`] returns when nothing passes.
pub fn keyword_backed(s: &Scored) -> bool {
    s.text_score.is_some_and(|t| t > 0.0)
}

/// The `minScore` cut of every engine (the indexed engines' [`select`], QMD's hits): up to `max` of the items that
/// `pass`, in order; when none does, up to `max` of those a keyword match backs instead, so a search by words never
/// answers nothing because `minScore` was set above what its scores reach.
pub fn min_score_cut<T>(items: Vec<T>, max: usize, passes: impl Fn(&T) -> bool, keyword_backed: impl Fn(&T) -> bool) -> Vec<T> {
    if items.iter().any(&passes) {
        items.into_iter().filter(passes).take(max).collect()
    } else {
        items.into_iter().filter(keyword_backed).take(max).collect()
    }
}

/// Turn ranked items into results: snippets (the query's terms weighed over these items' lines), citations, source.
pub fn to_results(items: Vec<Scored>, query: &str, citations: Citations) -> Vec<SearchResult> {
    let texts: Vec<&str> = items.iter().map(|s| s.candidate.text.as_str()).collect();
    let terms = snippet::SnippetQuery::new(query, &texts);
    results_with_snippets(items, &terms, citations)
}

/// Results of `items` with snippets chosen by `terms`.
fn results_with_snippets(items: Vec<Scored>, terms: &snippet::SnippetQuery, citations: Citations) -> Vec<SearchResult> {
    items
        .into_iter()
        .map(|s| {
            let c = s.candidate;
            let shown = snippet::choose(&c.text, terms, SNIPPET_MAX_CHARS);
            let mut result = SearchResult {
                path: c.path,
                start_line: c.start_line,
                end_line: c.end_line,
                score: s.score,
                snippet: shown.text,
                source: c.source,
                vector_score: s.vector_score,
                text_score: s.text_score,
                citation: None,
                // A transcript's lines are its JSONL lines, not the flattened text's: its snippet has no file lines.
                snippet_start_line: (c.source == Source::Memory).then_some(c.start_line + shown.first_line),
                snippet_end_line: (c.source == Source::Memory).then_some((c.start_line + shown.last_line).min(c.end_line)),
            };
            cite(&mut result, citations);
            result
        })
        .collect()
}

/// The whole pipeline after retrieval. `exact` holds the first chunk of each file whose path matches the query,
/// with its tier.
pub fn rank(keyword: Vec<Candidate>, vector: Vec<Candidate>, exact: Vec<(Candidate, u8)>, query: &Query, opts: &RankingOptions) -> Vec<SearchResult> {
    finish(order(keyword, vector, exact, query, opts, None), query, opts, None)
}

/// The candidates merged, marked (exact matches, exact-path tiers), adjusted (recency, decay, importance) and
/// sorted: where a second stage ([`rerank`]) may re-score the best of them before [`finish`]. `trace`: a search
/// that explains itself records the scores after each stage there.
pub fn order(
    keyword: Vec<Candidate>,
    vector: Vec<Candidate>,
    exact: Vec<(Candidate, u8)>,
    query: &Query,
    opts: &RankingOptions,
    mut trace: Option<&mut Trace>,
) -> Vec<Scored> {
    // Exact matches are ordered first in hybrid search only: keyword search alone already ranks by the words,
    // and a search configured to weigh one leg only is not hybrid.
    let hybrid = !keyword.is_empty() && !vector.is_empty() && opts.vector_weight > 0.0 && opts.text_weight > 0.0;
    let (mut items, weights) = merge(keyword, vector, query.words(), opts.vector_floor, opts.vector_weight, opts.text_weight);
    if hybrid {
        let named = query.exact();
        if *named != ExactQuery::None {
            for s in &mut items {
                s.exact_match = named.matches(&s.candidate.text);
            }
        }
    }
    for (c, tier) in exact {
        // Every retrieved chunk of the file takes the tier; if none was retrieved, its first chunk stands in.
        let mut found = false;
        for s in items.iter_mut().filter(|s| s.candidate.source == c.source && s.candidate.path == c.path) {
            s.tier = s.tier.max(tier);
            found = true;
        }
        if !found {
            items.push(Scored { candidate: c, score: 1.0, text_score: None, vector_score: None, vector_leg: None, tier, exact_match: false });
        }
    }
    let mut record = |stage, items: &[Scored]| {
        if let Some(t) = trace.as_deref_mut() {
            t.record(stage, items);
        }
    };
    record(Stage::Merged, &items);
    prefer_recent(&mut items, query);
    record(Stage::Recency, &items);
    window::prefer_dated_in_window(&mut items, query);
    record(Stage::Window, &items);
    prefer_sentences_holding_the_query(&mut items, query, weights.text > 0.0 && weights.vector > 0.0);
    record(Stage::Sentence, &items);
    adjust_and_sort(&mut items, opts);
    record(Stage::Adjusted, &items);
    if let Some(t) = trace {
        t.weighed(weights);
    }
    items
}

/// The head of a ranking that [`prefer_sentences_holding_the_query`] reorders: the first five.
pub const HEAD: usize = 5;

/// How far a head candidate whose sentence holds the most query weight moves up, as a share of the search's score
/// spread (`score_spread`); the others move in proportion to what their best sentence holds.
pub const SENTENCE_PREFERENCE: f64 = 0.5;

/// Among the best [`HEAD`] candidates, prefer those with one sentence that holds the query's words together: they
/// are reordered as if each gained [`SENTENCE_PREFERENCE`] x spread x (its best sentence's query weight / the most
/// any of them holds), the weights being [`snippet::SnippetQuery`]'s (rarer words weigh more) over the head's lines,
/// and keep the head's scores in that order.
///
/// Why: a chunk's BM25 and its vector count the query's words anywhere in it. A daily log of short facts about
/// many people ("Marta says the spare key is with the neighbour", "Søren says the Wi-Fi password is ...") holds
/// "Søren", "spare" and "key" as surely as the note where Søren says where the spare key is, and, shorter and
/// with "spare key" three times, would outrank it: the agent would read other people's keys first. Only the head
/// moves: a bonus deeper down pulls candidates whose one sentence is wordy over ones that hold the answer in
/// another way; within the first five it decides which answer reads first. Long abstracts whose every sentence
/// is dense with the query's words gain nothing from it. Figures in docs/benchmark-history.md.
///
/// `words_weighed`: the merge gave the keyword leg a weight beside the vector leg's ([`merge`]). Then a head
/// candidate none of whose sentences holds a query word keeps its place, and the others reorder among their own
/// places. Why: such a candidate was found by meaning alone (a paraphrase, a note in the other language of a
/// bilingual memory); its lack of words was already weighed by the keyword leg, and the preference counted it
/// again, so a Chinese question's English answer, first in the merge, fell below any note sharing one word with
/// the question ("原因", reason). It is not a worse instance of holding the query together but no instance. Where
/// no keyword leg weighed the words (a search by vectors alone, or a keyword leg whose best match holds none of
/// the query's words), the preference is the only word the ranking hears, and every head candidate moves by it.
pub fn prefer_sentences_holding_the_query(items: &mut [Scored], query: &Query, words_weighed: bool) {
    let Some(spread) = score_spread(items) else { return };
    // The head as the ranking orders it: exact-path tiers and exact matches first.
    let mut head: Vec<usize> = (0..items.len()).collect();
    head.sort_by(|&a, &b| ranked_before(&items[a], &items[b]));
    head.truncate(HEAD);
    let texts: Vec<&str> = head.iter().map(|&i| items[i].candidate.text.as_str()).collect();
    let terms = snippet::SnippetQuery::of(query, &texts);
    let held: Vec<f64> = texts.iter().map(|t| terms.best_sentence_weight(t)).collect();
    let most = held.iter().copied().fold(0.0, f64::max);
    if most <= 0.0 || !most.is_finite() {
        return;
    }
    // The head is reordered by score + bonus, and its own scores, best first, are given out in that order: the
    // scores an agent reads stay those the search computed (within 0..1 as before; added, the bonus put the first
    // hit above 1 for half of locomo-dev's questions), only who holds which changes.
    // In ranking order, and the bonus reorders only within a tier (and exact-match class): each class's scores are
    // best first here, and go back to its members in their new order. When the words were weighed, a candidate
    // that holds none keeps its own place and score.
    let (mut head, held): (Vec<usize>, Vec<f64>) = head.into_iter().zip(held).filter(|(_, h)| !words_weighed || *h > 0.0).unzip();
    let scores: Vec<f64> = head.iter().map(|&i| items[i].score).collect();
    for (&i, h) in head.iter().zip(held) {
        items[i].score += SENTENCE_PREFERENCE * spread * h / most;
    }
    head.sort_by(|&a, &b| ranked_before(&items[a], &items[b]));
    for (&i, score) in head.iter().zip(scores) {
        items[i].score = score;
    }
}

/// Characters of a candidate a reranker reads: the lines the snippet would show, a little shorter than a snippet
/// so that query and passage fit the reranker's token budget.
pub const RERANK_PASSAGE_CHARS: usize = 500;

/// The passages a reranker reads for the first `n` of `items`: each one's best lines ([`passages_to_rerank`]).
pub fn rerank_passages(items: &[Scored], n: usize, query: &Query) -> Vec<String> {
    let texts: Vec<&str> = items.iter().take(n).map(|s| s.candidate.text.as_str()).collect();
    passages_to_rerank(&texts, query)
}

/// The passage a reranker reads of each of `texts` (the best candidates' texts, of any engine): its best lines
/// ([`snippet::choose`], the query's terms weighed over these texts), at most [`RERANK_PASSAGE_CHARS`].
pub fn passages_to_rerank(texts: &[&str], query: &Query) -> Vec<String> {
    let terms = snippet::SnippetQuery::of(query, texts);
    texts.iter().map(|t| snippet::choose(t, &terms, RERANK_PASSAGE_CHARS).text).collect()
}

/// Fold a reranker's logits into the first `logits.len()` of `items` ([`crate::rerank::fold`]): those are ordered
/// by the folded share (exact-path tiers and exact matches first, as before; ties in first-stage order) and
/// scored within the first stage's range of them, so the rest keep their order and scores below them.
pub fn rerank(items: &mut [Scored], logits: &[f32], weight: f64) {
    let n = logits.len().min(items.len());
    crate::rerank::reorder(&mut items[..n], &logits[..n], weight, |s| s.score, |s, score| s.score = score);
    // Exact-path tiers and exact matches first (a stable sort keeps the folded order within them).
    items[..n].sort_by(|a, b| b.tier.cmp(&a.tier).then(b.exact_match.cmp(&a.exact_match)));
}

/// After ordering (and reranking): MMR, the min-score selection and the results with their snippets. `trace`: a
/// search that explains itself records the final order there.
pub fn finish(mut items: Vec<Scored>, query: &Query, opts: &RankingOptions, mut trace: Option<&mut Trace>) -> Vec<SearchResult> {
    if let Some(lambda) = opts.mmr_lambda {
        // Exact-path hits and exact matches stay first; MMR re-orders the rest.
        let split = items.iter().take_while(|s| s.tier > 0 || s.exact_match).count();
        let rest = items.split_off(split);
        items.extend(mmr(rest, lambda));
    }
    if let Some(t) = trace.as_deref_mut() {
        t.ranked_as(&items);
    }
    // A query term's rarity is measured over the lines of the best [`SPREAD_DEPTH`] candidates (or more, when more
    // are asked for), not over the results alone: an agent asking for five results reads the same snippets in them
    // as one asking for ten (over five hits, one query word on most of their lines weighed little, and the window
    // moved to another word's line).
    let depth = read_depth(opts.max_results).min(items.len());
    let texts: Vec<&str> = items[..depth].iter().map(|s| s.candidate.text.as_str()).collect();
    let terms = snippet::SnippetQuery::of(query, &texts);
    let selected = select(items, opts.max_results, opts.min_score);
    if let Some(t) = trace {
        t.selected(&selected);
    }
    results_with_snippets(selected, &terms, opts.citations)
}

pub mod project;
pub mod snippet;
pub mod window;

#[cfg(test)]
mod tests;

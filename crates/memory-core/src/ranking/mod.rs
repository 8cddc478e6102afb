//! The ranking pipeline, shared by every engine:
//! keyword + vector candidates -> weighted merge -> temporal decay -> importance -> recency among near-equal
//! dated notes -> sort -> MMR -> exact-path tiers, then exact matches (hybrid) -> min-score selection with
//! keyword back-fill -> top K, with snippets and citations.

use std::collections::{HashMap, HashSet};

use crate::analysis::{similarity_tokens, QueryWords};
use crate::config::{Citations, Config};
use crate::discovery::{date_from_path, is_evergreen};
use crate::store::{name_and_stem, Candidate};
use crate::types::{SearchResult, Source};

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

/// Exact-path tier of a file for a query: 3 = the path, 2 = the basename, 1 = the stem, 0 = none.
pub fn exact_path_tier(query: &str, path: &str) -> u8 {
    let q = query.trim();
    if q.is_empty() {
        return 0;
    }
    if q == path {
        return 3;
    }
    let (name, stem) = name_and_stem(path);
    if q == name {
        return 2;
    }
    if q == stem {
        return 1;
    }
    0
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
    pub now_ms: i64,
    /// The similarity the embedding model gives this query and unrelated text: vector scores count from it
    /// beside the text leg ([`vector_scores`]). Set by the engine per search; `None`: raw cosines.
    pub vector_floor: Option<f64>,
    /// The session's active repository keys ([`project::active_keys`]): project-tagged hits are boosted or
    /// demoted by [`project::factor`]. Empty: no project scoping.
    pub active_projects: Vec<String>,
}

impl RankingOptions {
    pub fn from_config(config: &Config, max_results: Option<usize>, min_score: Option<f64>) -> RankingOptions {
        let q = &config.memory.search.query;
        RankingOptions {
            max_results: max_results.unwrap_or(q.max_results).max(1),
            min_score: min_score.unwrap_or(q.min_score),
            vector_weight: q.hybrid.vector_weight,
            text_weight: q.hybrid.text_weight,
            mmr_lambda: q.hybrid.mmr.enabled.then_some(q.hybrid.mmr.lambda),
            half_life_days: q.hybrid.temporal_decay.enabled.then_some(q.hybrid.temporal_decay.half_life_days),
            citations: config.memory.citations,
            now_ms: crate::now_ms(),
            vector_floor: None,
            active_projects: Vec::new(),
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

/// What a query names exactly, if anything: its identifier-like words (a ticket id, a config key, a version,
/// an error code, `CamelCase` or `SNAKE_CASE` names), else, for a query of three words or more (or six CJK
/// characters), the whole query as a phrase (an error message pasted in).
///
/// Why: keyword search finds such a string by what it is, while an embedding model sees an id or a version as
/// a few sub-word pieces close to any other id or version, and a small model's cosine similarities can push the
/// note holding the string below notes that merely look alike. A chunk holding the exact string is evidence no
/// similarity outweighs, so in hybrid search it is ordered first (by its merged score among such chunks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExactQuery {
    None,
    /// Lowercased identifier words; a chunk must hold each, at word boundaries.
    Identifiers(Vec<String>),
    /// The lowercased query with whitespace collapsed; a chunk must hold it at word boundaries.
    Phrase(String),
}

/// Characters an identifier may hold besides ASCII letters and digits.
const IDENT_PUNCT: &[char] = &['.', '_', '-', ':', '/', '#', '@', '$'];

fn is_identifier_like(w: &str) -> bool {
    let chars: Vec<char> = w.chars().collect();
    if chars.len() < 2 {
        return false;
    }
    let digits = chars.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = chars.iter().filter(|c| c.is_ascii_alphabetic()).count();
    // Punctuation between letters or digits: `v2.14.3`, `INC-20931`, `memory.search.local`, `ATLAS_SENTRY_DSN`.
    // Not a hyphen alone (`two-dimensional`, `re-entry` are English words; an id with a hyphen has a digit or a
    // capital), not single letters with dots (`i.e`, `e.g`).
    let inner_punct =
        chars.windows(3).any(|w| w[0].is_ascii_alphanumeric() && IDENT_PUNCT.contains(&w[1]) && w[1] != '-' && w[2].is_ascii_alphanumeric())
            && !w.split(|c: char| IDENT_PUNCT.contains(&c)).all(|seg| seg.chars().count() <= 1);
    // camelCase / PascalCase with a hump inside: `vectorWeight`, `BadDeviceToken` (not `Atlas`, not `HSBC`).
    let camel = chars.windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    // An acronym of three letters or more that is not an English word in capitals (`OR`, `AND`, `NOT`).
    let acronym =
        letters >= 3 && digits == 0 && chars.iter().all(char::is_ascii_uppercase) && !crate::analysis::is_stop_word(&w.to_ascii_lowercase());
    // A year (`2023` in "in May 2023") is a date's word, not an id: every dated note's heading holds one, and as an
    // exact match it would put every session's first chunk above the one that answers.
    let year = chars.len() == 4 && digits == 4 && (w.starts_with("19") || w.starts_with("20"));
    (digits > 0 && letters > 0) || (digits >= 3 && !year) || inner_punct || camel || acronym
}

impl ExactQuery {
    pub fn of(query: &str) -> ExactQuery {
        let mut idents: Vec<String> = Vec::new();
        let mut word = String::new();
        let flush = |word: &mut String, idents: &mut Vec<String>| {
            let w = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
            if is_identifier_like(w) {
                let w = w.to_ascii_lowercase();
                if !idents.contains(&w) {
                    idents.push(w);
                }
            }
            word.clear();
        };
        for c in query.chars() {
            if c.is_ascii_alphanumeric() || IDENT_PUNCT.contains(&c) {
                word.push(c);
            } else {
                flush(&mut word, &mut idents);
            }
        }
        flush(&mut word, &mut idents);
        if !idents.is_empty() {
            return ExactQuery::Identifiers(idents);
        }
        let phrase = normalize_phrase(query);
        let phrase = phrase.trim_matches(|c: char| !c.is_alphanumeric()).to_string();
        let words = phrase.split(' ').filter(|w| !w.is_empty()).count();
        let cjk = phrase.chars().filter(|c| crate::chunking::is_cjk(*c)).count();
        if words >= 3 || cjk >= 6 {
            ExactQuery::Phrase(phrase)
        } else {
            ExactQuery::None
        }
    }

    /// Whether `text` holds what the query names.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            ExactQuery::None => false,
            ExactQuery::Identifiers(ids) => {
                let lower = text.to_ascii_lowercase();
                ids.iter().all(|id| contains_at_boundary(&lower, id))
            }
            ExactQuery::Phrase(p) => contains_at_boundary(&normalize_phrase(text), p),
        }
    }
}

/// Lowercase, whitespace runs as one space.
fn normalize_phrase(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for w in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(w.chars().flat_map(char::to_lowercase));
    }
    out
}

/// `needle` in `haystack` with no ASCII letter or digit right before or after it (`v2.14.3` is not in
/// `v2.14.30`). A CJK needle has no word boundaries to check.
fn contains_at_boundary(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let first_word = needle.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    let last_word = needle.chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric());
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let before_ok = !first_word || !haystack[..start].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric());
        let after_ok = !last_word || !haystack[end..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// The text scores of one hybrid search's keyword candidates. The best candidate scores `keyword_text_score` of its
/// keyword score; the others score in proportion to their BM25 against it.
///
/// Why not r / (1 + r) for every candidate: BM25 sums over the query's terms, so questions of several words give
/// ranks of 10-30, where r / (1 + r) is 0.91-0.97 for a chunk matching one term and one matching them all alike.
/// Merged with cosine similarities (which spread over 0.2-0.7), such a flattened text score stops telling good
/// keyword matches from weak ones, and hybrid search would rank below keyword search alone. In proportion to the
/// best, the text leg keeps its order and spread while the best match keeps the absolute score that min-score
/// selection reads.
pub fn text_scores(keyword: &[Candidate]) -> Vec<f64> {
    // Strength: a matching candidate's keyword score (higher = better) with the match offset.
    let strength = |c: &Candidate| c.keyword_score.filter(|s| s.is_finite() && *s > 0.0).map_or(0.0, |s| s + MIN_MATCH_BM25);
    let best = keyword.iter().map(strength).fold(0.0, f64::max);
    // `best` already carries the match offset: map it as keyword_text_score does, without adding it twice.
    let best_score = best / (1.0 + best);
    keyword
        .iter()
        .map(|c| match c.keyword_score {
            Some(s) if s > 0.0 && best > 0.0 => best_score * strength(c) / best,
            Some(s) => keyword_text_score(s),
            None => 0.0,
        })
        .collect()
}

/// The vector scores of one hybrid search's vector candidates, counted from `floor`, the similarity the model
/// gives this query and text unrelated to it: the best candidate keeps its cosine similarity, the others score
/// in proportion to their similarity above the floor (best x (cos - floor) / (best - floor), at least 0), as the
/// text leg scores in proportion to the best BM25 ([`text_scores`]). Without a floor (an engine that could not
/// measure it) the cosine similarities are used as they are.
///
/// Why: models differ in where unrelated text sits. all-MiniLM-L6-v2 gives it a cosine near 0, so its cosines
/// count nearly as they are; multilingual-e5-small (like most contrastively trained retrieval models) gives it
/// ~0.7 and bunches a query's candidates in 0.75-0.9, so a raw cosine barely separates the right note from an
/// unrelated one, and a keyword match on one weak term (a common Chinese bigram) outweighed the vector leg's
/// clear first choice. Counted from the model's own zero, every model's vector leg weighs the same beside the
/// text leg, and the best hit's score stays on the cosine scale `minScore` is set in. The floor is the model's,
/// not the candidates': the weakest retrieved candidate moves with `maxResults` and, for a model whose unrelated
/// text sits near 0, would stretch the vector leg over the text leg.
pub fn vector_scores(vector: &[Candidate], floor: Option<f64>) -> Vec<f64> {
    let raw: Vec<f64> = vector.iter().map(|c| c.vector_score.filter(|v| v.is_finite()).unwrap_or(0.0)).collect();
    let Some(floor) = floor.filter(|f| f.is_finite()) else { return raw };
    let best = raw.iter().copied().fold(f64::MIN, f64::max);
    if best - floor <= 1e-9 {
        // Nothing is more like the query than unrelated text is: the vector leg says nothing.
        return vec![0.0; raw.len()];
    }
    raw.iter().map(|v| Some(best * (v - floor).max(0.0) / (best - floor)).filter(|s| s.is_finite()).unwrap_or(0.0)).collect()
}

/// How many of a leg's best scores its [`leg_spread`] is measured over: the depth a search is read to.
pub const SPREAD_DEPTH: usize = 10;

/// How deep a search for `max_results` is read: at least [`SPREAD_DEPTH`], so that the first k results of any search
/// are the first k of a search for more (its candidate budget, [`RankingOptions::candidate_limit`], and the lines
/// its snippets weigh the query's words over, [`finish`]).
pub fn read_depth(max_results: usize) -> usize {
    max_results.max(SPREAD_DEPTH)
}

/// How decisively a leg of one hybrid search tells its best candidates from the rest: the coefficient of variation
/// (standard deviation / mean) of its best `depth` calibrated scores, a candidate the leg did not return counting
/// 0 (as it does in the merge: a chunk no keyword matched has no text score). `None` when it cannot say (a depth
/// under two, no positive score).
pub fn leg_spread(scores: &[f64], depth: usize) -> Option<f64> {
    if depth < 2 {
        return None;
    }
    let mut top: Vec<f64> = scores.iter().copied().filter(|v| v.is_finite()).collect();
    top.sort_by(|a, b| b.total_cmp(a));
    top.resize(depth, 0.0);
    let mean = top.iter().sum::<f64>() / depth as f64;
    if mean <= 0.0 {
        return None;
    }
    let sd = (top.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / depth as f64).sqrt();
    Some(sd / mean).filter(|v| v.is_finite())
}

/// The weights of one hybrid search: the configured ones, each scaled by its leg's [`leg_spread`] over the same
/// depth (the best [`SPREAD_DEPTH`] of the `candidates` the two legs returned together), normalised to sum 1. When
/// a leg cannot say how decisive it is, or neither separates anything, the configured ratio stands.
///
/// Why: fixed weights trust each leg as much on every query, and a leg that scores its candidates nearly alike
/// then decides the order by noise. In one long conversation every chunk is about the same people, so a small
/// model's cosines sit in a narrow band well above the model's floor for unrelated text, while BM25 picks out
/// the one turn with the question's rare words; with 0.7 on the flat vector leg, hybrid would rank below keyword
/// alone. Scaled by spread (a query-performance predictor in the
/// manner of Shtok et al.'s normalised query commitment), the leg that separates its candidates leads and the
/// other refines (figures in docs/benchmark-history.md). Both legs are measured over the same depth, a candidate a leg
/// did not return counting 0 there: the vector leg always returns its full depth, unrelated chunks included, and
/// the keyword leg only the chunks that match; measured among its matches alone, a keyword leg that found four
/// near-identical notes looked flat beside a vector leg whose spread was its own unrelated tail.
pub fn hybrid_weights(vector_weight: f64, text_weight: f64, vector: &[f64], text: &[f64], candidates: usize) -> (f64, f64) {
    let depth = candidates.min(SPREAD_DEPTH);
    let (v, t) = match (leg_spread(vector, depth), leg_spread(text, depth)) {
        (Some(sv), Some(st)) => (vector_weight * sv, text_weight * st),
        _ => (vector_weight, text_weight),
    };
    let (v, t) = if v + t > 0.0 && (v + t).is_finite() { (v, t) } else { (vector_weight, text_weight) };
    (v / (v + t), t / (v + t))
}

/// The share of the query's words held by the keyword leg's best match: the candidate with the highest of `text`
/// (its text scores, one per candidate). `None` without keyword candidates. What [`merge`] discounts the text leg
/// by, and what the engines' vector feedback weighs the keyword leg's evidence by.
pub fn best_match_share(keyword: &[Candidate], text: &[f64], query: &QueryWords) -> Option<f64> {
    keyword.iter().zip(text).max_by(|a, b| a.1.total_cmp(b.1)).map(|(best, _)| query.share_held_by(&best.text))
}

/// Merge keyword and vector candidates by chunk id: score = vw x vector + tw x text (text scores from
/// [`text_scores`] and vector scores from [`vector_scores`] when both legs have candidates), with the weights
/// normalised over the signals that are present in this search (keyword-only search scores by text alone) and,
/// when both legs answered, scaled by how decisive each is on this query ([`hybrid_weights`]) and the text leg
/// discounted by how much of the query its best match holds.
///
/// The discount: beside a vector leg, the text leg's scores and its weight are each multiplied by the share of the
/// query's words its best candidate holds ([`QueryWords::share_held_by`]; a query without words: no discount).
/// BM25 says how well
/// a chunk matches the words it matched, not how many of the question's words those were: a chunk that shares one
/// common bigram with a Chinese question ("每天", "时候") scores r / (1 + r) = 0.8 when that bigram is rare enough,
/// as high as a chunk holding the whole question, and the spread weights read one such match among zeros as a
/// decisive leg; a Chinese paraphrase, or a Chinese question about an English note, that the vector leg found
/// clearly first fell below it. The share corrects both readings: the match's score (how good the best match is)
/// and the leg's weight (how far to trust the leg on this query). A question whose words the best match holds
/// keeps its keyword lead (share 1: no change). Figures in docs/benchmark-history.md.
pub fn merge(
    keyword: Vec<Candidate>,
    vector: Vec<Candidate>,
    query: &QueryWords,
    vector_floor: Option<f64>,
    vector_weight: f64,
    text_weight: f64,
) -> Vec<Scored> {
    let have_text = !keyword.is_empty();
    let have_vec = !vector.is_empty();
    let (vw, tw) = match (have_vec, have_text) {
        (true, true) => {
            let sum = vector_weight + text_weight;
            (vector_weight / sum, text_weight / sum)
        }
        (true, false) => (1.0, 0.0),
        _ => (0.0, 1.0),
    };
    let mut by_id: HashMap<String, Scored> = HashMap::new();
    let mut order = Vec::new();
    // Alone, the text leg keeps the r / (1 + r) mapping for every candidate (same order, and min-score keeps meaning
    // what it meant); only beside cosine similarities does its spread matter.
    let mut text = if have_vec { text_scores(&keyword) } else { keyword.iter().map(|c| c.keyword_score.map_or(0.0, keyword_text_score)).collect() };
    // How much of the query the text leg's best match holds (see above): 1 alone, where it ranks by words anyway.
    let share = if have_vec { best_match_share(&keyword, &text, query).unwrap_or(1.0) } else { 1.0 };
    text.iter_mut().for_each(|t| *t *= share);
    // Beside the text leg, cosine similarities count from the model's similarity of unrelated text; alone they
    // are used as they are.
    let calibrated = if have_text { vector_scores(&vector, vector_floor) } else { vector.iter().map(|c| c.vector_score.unwrap_or(0.0)).collect() };
    let (vw, tw) = if have_text && have_vec && vw > 0.0 && tw > 0.0 {
        let union: HashSet<&str> = keyword.iter().chain(&vector).map(|c| c.chunk_id.as_str()).collect();
        hybrid_weights(vw, tw * share, &calibrated, &text, union.len())
    } else {
        (vw, tw)
    };
    for (c, t) in keyword.into_iter().zip(text) {
        order.push(c.chunk_id.clone());
        by_id.insert(
            c.chunk_id.clone(),
            Scored { candidate: c, score: 0.0, text_score: Some(t), vector_score: None, vector_leg: None, tier: 0, exact_match: false },
        );
    }
    for (c, cal) in vector.into_iter().zip(calibrated) {
        let v = c.vector_score.unwrap_or(0.0);
        match by_id.get_mut(&c.chunk_id) {
            Some(s) => {
                s.vector_score = Some(v);
                s.vector_leg = Some(cal);
            }
            None => {
                order.push(c.chunk_id.clone());
                by_id.insert(
                    c.chunk_id.clone(),
                    Scored { candidate: c, score: 0.0, text_score: None, vector_score: Some(v), vector_leg: Some(cal), tier: 0, exact_match: false },
                );
            }
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .map(|mut s| {
            s.score = vw * s.vector_leg.unwrap_or(0.0) + tw * s.text_score.unwrap_or(0.0);
            s
        })
        .collect()
}

/// How far a dated note may move up for being the newest of a search's dated candidates, as a share of the
/// spread of the search's scores (the best minus the tenth best): notes that score within a twentieth of that
/// spread of each other are ordered newest first; clearly better matches are not overtaken. A share of the
/// spread, not of the score, so that models whose similarities bunch (multilingual-e5's 0.75-0.9) and models
/// whose similarities spread out are moved alike.
pub const RECENCY_PREFERENCE: f64 = 0.05;
/// The same for a question about the present ("now", "currently", "现在", "目前"...): there the newer of two
/// notes that disagree is the answer unless the older one is a clearly better match.
pub const RECENCY_PREFERENCE_PRESENT: f64 = 0.2;
/// The rank whose score the spread is measured to.
const SPREAD_RANK: usize = 10;

/// Words by which a question asks about the present state of things (English and Chinese).
const PRESENT_WORDS: &[&str] = &["now", "currently", "current", "nowadays", "latest", "presently", "today", "anymore", "still"];
const PRESENT_CJK: &[&str] = &["现在", "目前", "当前", "如今", "最新", "眼下", "现今", "还在", "现时", "現在"];

/// Whether a query asks about the present.
pub fn asks_about_present(query: &str) -> bool {
    let lower = query.to_lowercase();
    lower.split(|c: char| !c.is_alphanumeric()).any(|w| PRESENT_WORDS.contains(&w)) || PRESENT_CJK.iter().any(|w| query.contains(w))
}

/// Mild recency among dated notes (daily logs, by the date in their name), with or without temporal decay:
/// when two notes disagree, the newer is the likelier answer. Each dated candidate gains
/// p x spread x (its date - the oldest date) / (the newest - the oldest) over this search's dated candidates,
/// where spread is the best score minus the tenth best (or the last) and p is [`RECENCY_PREFERENCE`] or, for a
/// question about the present, [`RECENCY_PREFERENCE_PRESENT`]. Undated notes and `MEMORY.md` are untouched; so
/// is a search whose dated candidates share one date.
pub fn prefer_recent(items: &mut [Scored], query: &str) {
    let date = |s: &Scored| if s.candidate.source == Source::Memory { date_from_path(&s.candidate.path) } else { None };
    let dates: Vec<i64> = items.iter().filter_map(date).collect();
    let (Some(&oldest), Some(&newest)) = (dates.iter().min(), dates.iter().max()) else { return };
    if newest <= oldest {
        return;
    }
    let Some(spread) = score_spread(items) else { return };
    let p = if asks_about_present(query) { RECENCY_PREFERENCE_PRESENT } else { RECENCY_PREFERENCE };
    let span = (newest - oldest) as f64;
    for s in items.iter_mut() {
        if let Some(d) = date(s) {
            s.score += p * spread * (d - oldest) as f64 / span;
        }
    }
}

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

/// Temporal decay and importance, then sort by score (ties: path, line).
pub fn adjust_and_sort(items: &mut [Scored], opts: &RankingOptions) {
    for s in items.iter_mut() {
        if let Some(h) = opts.half_life_days {
            let c = &s.candidate;
            if let Some(age) = age_days(c.source, &c.path, c.file_mtime_ms, opts.now_ms) {
                s.score *= decay_factor(age, h);
            }
        }
        s.score *= importance_factor(s.candidate.importance);
        s.score *= project::factor(&s.candidate, &opts.active_projects);
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
    let passes = |s: &Scored| s.tier > 0 || s.exact_match || s.score >= min_score || s.vector_leg.is_some_and(|v| v >= min_score);
    let passing: Vec<Scored> = items.iter().filter(|s| passes(s)).take(max_results).cloned().collect();
    if !passing.is_empty() {
        return passing;
    }
    items.into_iter().filter(|s| s.text_score.is_some_and(|t| t > 0.0)).take(max_results).collect()
}

/// `path#L<start>-L<end>`, or `path#L<n>` for one line.
pub fn citation(path: &str, start: usize, end: usize) -> String {
    if start == end {
        format!("{path}#L{start}")
    } else {
        format!("{path}#L{start}-L{end}")
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
            let cite = citation(&c.path, c.start_line, c.end_line);
            let shown = snippet::choose(&c.text, terms, SNIPPET_MAX_CHARS);
            let mut snip = shown.text;
            if citations == Citations::On {
                snip.push_str("\nSource: ");
                snip.push_str(&cite);
            }
            SearchResult {
                path: c.path,
                start_line: c.start_line,
                end_line: c.end_line,
                score: s.score,
                snippet: snip,
                source: c.source,
                vector_score: s.vector_score,
                text_score: s.text_score,
                citation: (citations != Citations::Off).then_some(cite),
                // A transcript's lines are its JSONL lines, not the flattened text's: its snippet has no file lines.
                snippet_start_line: (c.source == Source::Memory).then_some(c.start_line + shown.first_line),
                snippet_end_line: (c.source == Source::Memory).then_some((c.start_line + shown.last_line).min(c.end_line)),
            }
        })
        .collect()
}

/// The whole pipeline after retrieval. `exact` holds the first chunk of each file whose path matches the query,
/// with its tier.
pub fn rank(keyword: Vec<Candidate>, vector: Vec<Candidate>, exact: Vec<(Candidate, u8)>, query: &str, opts: &RankingOptions) -> Vec<SearchResult> {
    finish(order(keyword, vector, exact, query, opts), query, opts)
}

/// The candidates merged, marked (exact matches, exact-path tiers), adjusted (recency, decay, importance) and
/// sorted: where a second stage ([`rerank`]) may re-score the best of them before [`finish`].
pub fn order(keyword: Vec<Candidate>, vector: Vec<Candidate>, exact: Vec<(Candidate, u8)>, query: &str, opts: &RankingOptions) -> Vec<Scored> {
    // Exact matches are ordered first in hybrid search only: keyword search alone already ranks by the words,
    // and a search configured to weigh one leg only is not hybrid.
    let hybrid = !keyword.is_empty() && !vector.is_empty() && opts.vector_weight > 0.0 && opts.text_weight > 0.0;
    let mut items = merge(keyword, vector, &QueryWords::of(query), opts.vector_floor, opts.vector_weight, opts.text_weight);
    if hybrid {
        let named = ExactQuery::of(query);
        if named != ExactQuery::None {
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
    prefer_recent(&mut items, query);
    named_day::prefer_named_days(&mut items, query);
    prefer_sentences_holding_the_query(&mut items, query);
    adjust_and_sort(&mut items, opts);
    items
}

/// The head of a ranking that [`prefer_sentences_holding_the_query`] reorders: the first five.
pub const HEAD: usize = 5;

/// How far a head candidate whose sentence holds the most query weight moves up, as a share of the search's score
/// spread ([`score_spread`]); the others move in proportion to what their best sentence holds.
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
pub fn prefer_sentences_holding_the_query(items: &mut [Scored], query: &str) {
    let Some(spread) = score_spread(items) else { return };
    // The head as the ranking orders it: exact-path tiers and exact matches first.
    let mut head: Vec<usize> = (0..items.len()).collect();
    head.sort_by(|&a, &b| ranked_before(&items[a], &items[b]));
    head.truncate(HEAD);
    let texts: Vec<&str> = head.iter().map(|&i| items[i].candidate.text.as_str()).collect();
    let terms = snippet::SnippetQuery::new(query, &texts);
    let held: Vec<f64> = texts.iter().map(|t| terms.best_sentence_weight(t)).collect();
    let most = held.iter().copied().fold(0.0, f64::max);
    if most <= 0.0 || !most.is_finite() {
        return;
    }
    // The head is reordered by score + bonus, and its own scores, best first, are given out in that order: the
    // scores an agent reads stay those the search computed (within 0..1 as before; added, the bonus put the first
    // hit above 1 for half of locomo-dev's questions), only who holds which changes.
    // In ranking order, and the bonus reorders only within a tier (and exact-match class): each class's scores are
    // best first here, and go back to its members in their new order.
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
pub fn rerank_passages(items: &[Scored], n: usize, query: &str) -> Vec<String> {
    let texts: Vec<&str> = items.iter().take(n).map(|s| s.candidate.text.as_str()).collect();
    passages_to_rerank(&texts, query)
}

/// The passage a reranker reads of each of `texts` (the best candidates' texts, of any engine): its best lines
/// ([`snippet::choose`], the query's terms weighed over these texts), at most [`RERANK_PASSAGE_CHARS`].
pub fn passages_to_rerank(texts: &[&str], query: &str) -> Vec<String> {
    let terms = snippet::SnippetQuery::new(query, texts);
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

/// After ordering (and reranking): MMR, the min-score selection and the results with their snippets.
pub fn finish(mut items: Vec<Scored>, query: &str, opts: &RankingOptions) -> Vec<SearchResult> {
    if let Some(lambda) = opts.mmr_lambda {
        // Exact-path hits and exact matches stay first; MMR re-orders the rest.
        let split = items.iter().take_while(|s| s.tier > 0 || s.exact_match).count();
        let rest = items.split_off(split);
        items.extend(mmr(rest, lambda));
    }
    // A query term's rarity is measured over the lines of the best [`SPREAD_DEPTH`] candidates (or more, when more
    // are asked for), not over the results alone: an agent asking for five results reads the same snippets in them
    // as one asking for ten (over five hits, one query word on most of their lines weighed little, and the window
    // moved to another word's line).
    let depth = read_depth(opts.max_results).min(items.len());
    let texts: Vec<&str> = items[..depth].iter().map(|s| s.candidate.text.as_str()).collect();
    let terms = snippet::SnippetQuery::new(query, &texts);
    let selected = select(items, opts.max_results, opts.min_score);
    results_with_snippets(selected, &terms, opts.citations)
}

pub mod named_day;
pub mod project;
pub mod snippet;

#[cfg(test)]
mod tests;

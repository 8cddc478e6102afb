//! The merge of the two legs of a hybrid search: each leg's scores put on one scale, the weights each leg earns
//! on this query, and the weighted sum.

use std::collections::{HashMap, HashSet};

use super::{keyword_text_score, Scored, MIN_MATCH_BM25};
use crate::analysis::QueryWords;
use crate::explanation::LegWeights;
use crate::store::Candidate;

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

/// Whether a vector leg tells this query's notes from text about something else: its best candidate (`best`, a
/// cosine with the query) is more like the query than the unrelated text most like it (`nearest_unrelated`, the
/// query's highest cosine with the probes the engine measures its floor with). A leg that does not is set aside
/// beside a keyword leg that matched something: the search ranks by words.
///
/// Why: a model that does not read the query's language still answers, with cosines that say nothing. An English
/// model reading a Chinese question gives every Chinese text about the same similarity, unrelated sentences as
/// high as the notes, or higher; merged, those cosines outweighed the keyword leg's match and pushed the note
/// keyword search ranks first out of the first ten. A model that reads the language keeps its best candidates
/// clearly above every unrelated probe, and its leg counts as before.
pub fn vector_leg_tells(best: f64, nearest_unrelated: f64) -> bool {
    !(best.is_finite() && nearest_unrelated.is_finite()) || best > nearest_unrelated
}

/// How many of a leg's best scores its [`leg_spread`] is measured over: the depth a search is read to.
pub const SPREAD_DEPTH: usize = 10;

/// How deep a search for `max_results` is read: at least [`SPREAD_DEPTH`], so that the first k results of any search
/// are the first k of a search for more (its candidate budget, [`RankingOptions::candidate_limit`](super::RankingOptions::candidate_limit), and the lines
/// its snippets weigh the query's words over, [`finish`](super::finish)).
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
///
/// Returns the merged candidates and the weights the legs were given (what `memory explain` shows).
pub fn merge(
    keyword: Vec<Candidate>,
    vector: Vec<Candidate>,
    query: &QueryWords,
    vector_floor: Option<f64>,
    vector_weight: f64,
    text_weight: f64,
) -> (Vec<Scored>, LegWeights) {
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
    let items = order
        .into_iter()
        .filter_map(|id| by_id.remove(&id))
        .map(|mut s| {
            s.score = vw * s.vector_leg.unwrap_or(0.0) + tw * s.text_score.unwrap_or(0.0);
            s
        })
        .collect();
    (items, LegWeights { text: tw, vector: vw })
}

#[cfg(test)]
mod tests {
    use super::vector_leg_tells;

    #[test]
    fn a_vector_leg_counts_only_when_its_best_beats_unrelated_text() {
        assert!(vector_leg_tells(0.62, 0.31), "well above the nearest probe");
        assert!(!vector_leg_tells(0.55, 0.60), "an unrelated sentence is more like the query");
        assert!(!vector_leg_tells(0.60, 0.60), "as like the query as unrelated text is: no evidence");
        assert!(vector_leg_tells(f64::NAN, 0.6), "what cannot be measured is not set aside");
        assert!(vector_leg_tells(0.2, f64::NAN));
    }
}

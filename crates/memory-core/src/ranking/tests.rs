use crate::analysis::QueryWords;
use std::collections::HashMap;

use super::*;
use crate::store::Candidate;

/// A memory chunk `id` of `path` holding `text`, lines 1-2, no score yet: what the ranking tests build on.
pub(super) fn cand(id: &str, path: &str, text: &str) -> Candidate {
    Candidate {
        chunk_id: id.into(),
        source: Source::Memory,
        path: path.into(),
        start_line: 1,
        end_line: 2,
        text: text.into(),
        importance: None,
        date: None,
        file_mtime_ms: 0,
        keyword_score: None,
        vector_score: None,
    }
}

/// `candidate` scored `score` by its words alone (the keyword leg's candidate, no vector).
fn by_words(candidate: Candidate, score: f64) -> Scored {
    Scored { candidate, score, text_score: Some(score), vector_score: None, vector_leg: None, tier: 0, exact_match: false }
}

fn scored(id: &str, text: &str, score: f64) -> Scored {
    by_words(cand(id, "memory/x.md", text), score)
}

fn opts() -> RankingOptions {
    RankingOptions {
        max_results: 6,
        min_score: 0.35,
        vector_weight: 0.7,
        text_weight: 0.3,
        mmr_lambda: None,
        half_life_days: None,
        citations: Citations::Auto,
        now_ms: 1_800_000_000_000,
        today: chrono::NaiveDate::from_ymd_opt(2027, 1, 15).unwrap(),
        vector_floor: None,
        active_project_keys: Vec::new(),
    }
}

#[test]
fn keyword_score_normalisation() {
    assert_eq!(keyword_text_score(0.0), 1.0);
    assert_eq!(keyword_text_score(-1.0), 0.5);
    assert!((keyword_text_score(1.0) - 1.1 / 2.1).abs() < 1e-12);
    assert!((keyword_text_score(3.0) - 3.1 / 4.1).abs() < 1e-12);
    assert_eq!(keyword_text_score(f64::NAN), 0.0);
    // A match whose idf collapsed (a word in half the notes of a two-note workspace) still reads as a match.
    assert!(keyword_text_score(1e-6) > 0.09);
    let tiny = |s: f64| Candidate { keyword_score: Some(s), ..crate::ranking::tests::candidate_for_floor() };
    let scores = text_scores(&[tiny(1e-6), tiny(2e-6)]);
    assert!(scores.iter().all(|s| *s > 0.09), "{scores:?}");
    // ...and matches keep their order.
    assert!(scores[1] > scores[0], "{scores:?}");
    assert!(keyword_text_score(2e-6) > keyword_text_score(1e-6));
}

#[test]
fn importance_multipliers() {
    assert!((0.8 * importance_factor(Some(10)) - 1.0).abs() < 1e-12);
    assert!((0.8 * importance_factor(Some(1)) - 0.64).abs() < 1e-12);
    assert_eq!(importance_factor(None), 1.0);
    assert_eq!(importance_factor(Some(0)), 1.0);
    assert_eq!(importance_factor(Some(11)), 1.0);
}

#[test]
fn decay_halves_at_half_life() {
    assert!((decay_factor(30.0, 30.0) - 0.5).abs() < 1e-12);
    assert!((decay_factor(60.0, 30.0) - 0.25).abs() < 1e-12);
    assert_eq!(decay_factor(0.0, 30.0), 1.0);
    assert_eq!(decay_factor(-5.0, 30.0), 1.0);
}

#[test]
fn dated_note_30_days_old_scores_half_and_evergreen_never_decays() {
    let now = chrono::NaiveDate::from_ymd_opt(2026, 11, 30).unwrap().and_hms_opt(0, 0, 0).unwrap().and_utc().timestamp_millis();
    let mut o = opts();
    o.now_ms = now;
    o.half_life_days = Some(30.0);
    let mut items = vec![
        by_words(cand("a", "memory/2026-10-31.md", "x"), 0.8),
        by_words(cand("b", "MEMORY.md", "x"), 0.8),
        by_words(cand("c", "memory/projects/alpha.md", "x"), 0.8),
    ];
    adjust_and_sort(&mut items, &o);
    let by_id: HashMap<_, _> = items.iter().map(|s| (s.candidate.chunk_id.as_str(), s.score)).collect();
    assert!((by_id["a"] - 0.4).abs() < 1e-9, "{}", by_id["a"]);
    assert_eq!(by_id["b"], 0.8);
    assert_eq!(by_id["c"], 0.8);
}

#[test]
fn undated_file_outside_memory_decays_by_mtime() {
    let now = 100 * 86_400_000;
    assert_eq!(age_days(Source::Memory, "notes/x.md", now - 30 * 86_400_000, now), Some(30.0));
    assert!(age_days(Source::Memory, "memory/2026-01-01-standup.md", 0, now).is_some());
    assert_eq!(age_days(Source::Memory, "memory.md", 0, now), None);
    // Any file time, any clock (found by the ranking fuzz target: the i64 subtraction overflowed).
    assert!(age_days(Source::Memory, "notes/x.md", i64::MIN, i64::MAX).is_some_and(f64::is_finite));
}

#[test]
fn merge_weights_and_normalises() {
    let mut k = cand("a", "memory/a.md", "alpha");
    k.keyword_score = Some(0.9); // text (0.9 + 0.1) / 2 = 0.5
    let mut v = cand("a", "memory/a.md", "alpha");
    v.vector_score = Some(1.0);
    let mut v2 = cand("b", "memory/b.md", "beta");
    v2.vector_score = Some(0.5);
    let items = merge(vec![k], vec![v, v2], &QueryWords::default(), None, 0.7, 0.3).0;
    // The configured weights, scaled by each leg's spread over the two candidates ([`hybrid_weights`]).
    let (vw, tw) = hybrid_weights(0.7, 0.3, &[1.0, 0.5], &[0.5], 2);
    assert!((vw + tw - 1.0).abs() < 1e-12 && tw > 0.3, "{vw} {tw}");
    let a = items.iter().find(|s| s.candidate.chunk_id == "a").unwrap();
    assert!((a.score - (vw * 1.0 + tw * 0.5)).abs() < 1e-12);
    let b = items.iter().find(|s| s.candidate.chunk_id == "b").unwrap();
    assert!((b.score - vw * 0.5).abs() < 1e-12);
    // Beside the text leg, cosines count from the model's similarity of unrelated text (the floor): the best
    // keeps its cosine, the others in proportion above the floor, at or below it 0; the cosine itself is what
    // the result reports.
    let mut k = cand("a", "memory/a.md", "alpha");
    k.keyword_score = Some(0.9);
    let vector = vec![cand_with_vec("a", 0.9), cand_with_vec("c", 0.7), cand_with_vec("b", 0.5)];
    let calibrated = vector_scores(&vector, Some(0.5));
    assert_eq!(calibrated.len(), 3);
    assert!((calibrated[0] - 0.9).abs() < 1e-12 && (calibrated[1] - 0.45).abs() < 1e-12 && calibrated[2].abs() < 1e-12, "{calibrated:?}");
    let items = merge(vec![k], vector.clone(), &QueryWords::default(), Some(0.5), 0.7, 0.3).0;
    let (vw, tw) = hybrid_weights(0.7, 0.3, &calibrated, &[0.5], 3);
    let score = |id: &str| items.iter().find(|s| s.candidate.chunk_id == id).unwrap().clone();
    assert!((score("a").score - (vw * 0.9 + tw * 0.5)).abs() < 1e-12);
    assert!((score("c").score - vw * 0.45).abs() < 1e-12, "{}", score("c").score);
    assert!(score("b").score.abs() < 1e-12);
    assert_eq!(score("b").vector_score, Some(0.5));
    // The floor is the model's, not the candidates': the same candidate's vector score is the same however many
    // others were retrieved beside it.
    let mut more = vector;
    more.extend((0..40).map(|i| cand_with_vec(&format!("x{i}"), 0.2)));
    assert!((vector_scores(&more, Some(0.5))[1] - 0.45).abs() < 1e-12);
    // Nothing above the floor: the vector leg says nothing. No floor: the cosines count as they are.
    let items = merge(vec![cand("a", "memory/a.md", "alpha")], vec![cand_with_vec("c", 0.4)], &QueryWords::default(), Some(0.5), 0.7, 0.3).0;
    assert!(items.iter().find(|s| s.candidate.chunk_id == "c").unwrap().score.abs() < 1e-12);
    let items = merge(vec![cand("a", "memory/a.md", "alpha")], vec![cand_with_vec("c", 0.75)], &QueryWords::default(), None, 1.0, 1.0).0;
    let c = items.iter().find(|s| s.candidate.chunk_id == "c").unwrap();
    assert!((c.score - 0.5 * 0.75).abs() < 1e-12, "{}", c.score);
    // Weights that do not sum to 1 are normalised.
    let items = merge(vec![], vec![cand_with_vec("c", 0.9)], &QueryWords::default(), Some(0.5), 7.0, 3.0).0;
    assert!((items[0].score - 0.9).abs() < 1e-12, "vector-only search scores by the vector alone");
}

fn cand_with_vec(id: &str, v: f64) -> Candidate {
    let mut c = cand(id, "memory/c.md", "c");
    c.vector_score = Some(v);
    c
}

#[test]
fn keyword_only_scores_by_text() {
    let mut k = cand("a", "memory/a.md", "alpha");
    k.keyword_score = Some(2.9);
    let items = merge(vec![k], vec![], &QueryWords::default(), None, 0.7, 0.3).0;
    assert!((items[0].score - 0.75).abs() < 1e-12);
}

#[test]
fn beside_vectors_text_scores_are_in_proportion_to_the_best_keyword_match() {
    // A 4-term question: BM25 30 for a chunk matching every term, 6 for one matching a single term. Mapped with
    // r / (1 + r) alone they would score 0.968 and 0.857: nearly alike.
    let mut all = cand("all", "memory/all.md", "all terms");
    // (BM25 as stored, less the match offset every matching chunk gets.)
    all.keyword_score = Some(30.0 - MIN_MATCH_BM25);
    let mut one = cand("one", "memory/one.md", "one term");
    one.keyword_score = Some(6.0 - MIN_MATCH_BM25);
    let t = text_scores(&[all.clone(), one.clone()]);
    assert!((t[0] - 30.0 / 31.0).abs() < 1e-12, "the best keeps its keyword score r / (1 + r)");
    assert!((t[1] - (30.0 / 31.0) * 6.0 / 30.0).abs() < 1e-12, "the others in proportion: {t:?}");
    // With equal cosine similarity the full match wins by the text leg's real margin.
    let v = |c: &Candidate| {
        let mut c = c.clone();
        c.vector_score = Some(0.5);
        c
    };
    let items = merge(vec![all.clone(), one.clone()], vec![v(&all), v(&one)], &QueryWords::default(), None, 0.7, 0.3).0;
    let score = |id: &str| items.iter().find(|s| s.candidate.chunk_id == id).unwrap().score;
    assert!(score("all") - score("one") > 0.2, "{} vs {}", score("all"), score("one"));
    // Keyword-only search keeps the r / (1 + r) mapping for every candidate (min-score reads it).
    let items = merge(vec![all, one], vec![], &QueryWords::default(), None, 0.7, 0.3).0;
    assert!((items[1].score - 6.0 / 7.0).abs() < 1e-12);
}

#[test]
fn a_flat_vector_leg_does_not_outvote_a_decisive_keyword_match() {
    // One long conversation: every chunk is about the same people, so the model's cosines sit in a narrow band
    // (0.45-0.50, the model's floor for unrelated text at 0.05); "y" holds every rare word of the question, "x"
    // is the vector leg's (barely) best and matches part of it. At the configured 0.7 / 0.3 a fixed-weight merge
    // puts "x" first (0.53 vs 0.47); scaled by how decisive each leg is, the keyword match leads.
    let mut keyword = vec![kw("y", "memory/2023-05-08.md", "y", 12.0), kw("x", "memory/2023-05-09.md", "x", 8.0)];
    keyword.extend((0..8).map(|i| kw(&format!("o{i}"), &format!("memory/o{i}.md"), "o", 1.0)));
    let mut vector = vec![vec_cand("x", "memory/2023-05-09.md", "x", 0.50), vec_cand("y", "memory/2023-05-08.md", "y", 0.30)];
    vector.extend((0..8).map(|i| vec_cand(&format!("o{i}"), &format!("memory/o{i}.md"), "o", 0.45 + 0.005 * i as f64)));
    let items = merge(keyword.clone(), vector.clone(), &QueryWords::default(), Some(0.05), 0.7, 0.3).0;
    let score = |id: &str| items.iter().find(|s| s.candidate.chunk_id == id).unwrap().score;
    assert!(score("y") > score("x"), "y {} x {}", score("y"), score("x"));
    let (vw, tw) = hybrid_weights(0.7, 0.3, &vector_scores(&vector, Some(0.05)), &text_scores(&keyword), 10);
    assert!(tw > vw && (vw + tw - 1.0).abs() < 1e-12, "{vw} {tw}");

    // The other way round (a paraphrase: the vector leg picks one chunk out clearly, the keyword leg matches a
    // common word everywhere alike): the vector leg leads.
    let keyword: Vec<Candidate> = (0..10).map(|i| kw(&format!("k{i}"), &format!("memory/k{i}.md"), "k", 3.0 + 0.01 * i as f64)).collect();
    let mut vector = vec![vec_cand("p", "memory/p.md", "p", 0.80)];
    vector.extend((0..9).map(|i| vec_cand(&format!("k{i}"), &format!("memory/k{i}.md"), "k", 0.15)));
    let (vw, tw) = hybrid_weights(0.7, 0.3, &vector_scores(&vector, Some(0.05)), &text_scores(&keyword), 11);
    assert!(vw > 0.9, "{vw} {tw}");
    let items = merge(keyword, vector, &QueryWords::default(), Some(0.05), 0.7, 0.3).0;
    let mut order: Vec<_> = items.iter().map(|s| (s.score, s.candidate.chunk_id.clone())).collect();
    order.sort_by(|a, b| b.0.total_cmp(&a.0));
    assert_eq!(order[0].1, "p");
}

#[test]
fn a_leg_that_cannot_say_how_decisive_it_is_keeps_the_configured_weights() {
    assert_eq!(leg_spread(&[0.9], 1), None);
    assert_eq!(leg_spread(&[], 10), None);
    assert_eq!(leg_spread(&[0.0, 0.0], 2), None);
    assert_eq!(leg_spread(&[0.5, 0.5], 2), Some(0.0));
    // A candidate the leg did not return counts 0: one match among four candidates is decisive.
    assert!(leg_spread(&[0.8], 4).unwrap() > 1.0);
    let (vw, tw) = hybrid_weights(0.7, 0.3, &[0.9, 0.1], &[0.8], 1);
    assert!((vw - 0.7).abs() < 1e-12 && (tw - 0.3).abs() < 1e-12);
    let (vw, tw) = hybrid_weights(7.0, 3.0, &[f64::NAN], &[0.8, 0.2], 2);
    assert!((vw - 0.7).abs() < 1e-12 && (tw - 0.3).abs() < 1e-12, "{vw} {tw}");
    // Both legs flat: nothing to scale by; the configured ratio stands.
    let (vw, tw) = hybrid_weights(0.7, 0.3, &[0.5, 0.5], &[0.4, 0.4], 2);
    assert!((vw - 0.7).abs() < 1e-12 && (tw - 0.3).abs() < 1e-12, "{vw} {tw}");
}

#[test]
fn a_keyword_leg_that_matched_few_of_the_candidates_is_measured_with_the_rest_at_zero() {
    // Four near-identical notes match the words; the vector leg returns them and two unrelated notes. Among its
    // matches alone the keyword leg would look flat and the vector leg's unrelated tail would make it look
    // decisive; over the same six candidates the keyword leg's zeros count too.
    let keyword: Vec<Candidate> = (0..4).map(|i| kw(&format!("m{i}"), &format!("memory/m{i}.md"), "m", 5.0 + 0.1 * i as f64)).collect();
    let mut vector: Vec<Candidate> = (0..4).map(|i| vec_cand(&format!("m{i}"), &format!("memory/m{i}.md"), "m", 0.75 - 0.03 * i as f64)).collect();
    vector.extend((0..2).map(|i| vec_cand(&format!("u{i}"), &format!("memory/u{i}.md"), "u", 0.15)));
    let (vw, tw) = hybrid_weights(0.7, 0.3, &vector_scores(&vector, Some(0.05)), &text_scores(&keyword), 6);
    assert!(tw > 0.3, "the keyword leg keeps a say: {vw} {tw}");
}

#[test]
fn mmr_lambda_one_keeps_relevance_order_and_zero_diversifies() {
    let items = vec![
        scored("a", "deploy the gateway on the mac studio", 0.9),
        scored("b", "deploy the gateway on the mac studio today", 0.85),
        scored("c", "coffee preferences oat milk", 0.8),
        scored("d", "unrelated trivia", 0.1),
    ];
    let order = |v: Vec<Scored>| v.into_iter().map(|s| s.candidate.chunk_id).collect::<Vec<_>>();
    assert_eq!(order(mmr(items.clone(), 1.0)), vec!["a", "b", "c", "d"]);
    // lambda 0: after the first pick, the near-duplicate comes last.
    assert_eq!(order(mmr(items.clone(), 0.0)).last().unwrap(), "b");
    // The default 0.7 pushes the near-duplicate below a slightly less relevant distinct note.
    assert_eq!(order(mmr(items, 0.7)), vec!["a", "c", "b", "d"]);
}

#[test]
fn jaccard_similarity() {
    let a = similarity_tokens("a b c");
    let b = similarity_tokens("b c d");
    assert!((jaccard(&a, &b) - 0.5).abs() < 1e-12);
}

#[test]
fn exact_path_tiers() {
    assert_eq!(exact_path_tier("memory/2026-11-29.md", "memory/2026-11-29.md"), 3);
    assert_eq!(exact_path_tier("2026-11-29.md", "memory/2026-11-29.md"), 2);
    assert_eq!(exact_path_tier("2026-11-29", "memory/2026-11-29.md"), 1);
    assert_eq!(exact_path_tier("2026-11", "memory/2026-11-29.md"), 0);
}

#[test]
fn selection_applies_min_score_then_backfills_keyword_hits() {
    let items = vec![scored("a", "x", 0.9), scored("b", "y", 0.2)];
    let sel = select(items, 6, 0.35);
    assert_eq!(sel.len(), 1);
    let low = vec![scored("a", "x", 0.2), scored("b", "y", 0.1)];
    let sel = select(low, 6, 0.35);
    assert_eq!(sel.len(), 2, "nothing passes: keyword-backed hits are returned");
    let mut vec_only = scored("c", "z", 0.2);
    vec_only.text_score = None;
    assert!(select(vec![vec_only], 6, 0.35).is_empty(), "vector-only hits are not back-filled");
}

#[test]
fn a_hit_the_vector_leg_alone_would_return_passes_min_score_in_hybrid() {
    // A Chinese question about an English note: no keyword matches the note, the vector leg finds it with a score
    // that passes minScore on its own (0.55), and the merge, which gives the vector leg its share of the weight
    // only, scores it 0.29. A keyword match on one word of the question (0.37) passes. Hybrid must not return
    // less than the vector leg alone would: both pass, in the merged order.
    let mut english = scored("en", "The apartment lease renews every September.", 0.29);
    english.text_score = None;
    english.vector_score = Some(0.55);
    english.vector_leg = Some(0.55);
    let mut chinese = scored("zh", "合同已经续签。", 0.37);
    chinese.vector_score = Some(0.6);
    chinese.vector_leg = Some(0.6);
    let sel = select(vec![chinese.clone(), english.clone()], 6, 0.35);
    let ids: Vec<&str> = sel.iter().map(|s| s.candidate.chunk_id.as_str()).collect();
    assert_eq!(ids, ["zh", "en"]);
    // A vector hit that the vector leg alone scores below minScore stays out, and a keyword hit is judged by its
    // merged score as before.
    english.vector_leg = Some(0.3);
    let mut weak_keyword = scored("kw", "续", 0.2);
    weak_keyword.text_score = Some(0.5);
    let sel = select(vec![chinese, english, weak_keyword], 6, 0.35);
    assert_eq!(sel.iter().map(|s| s.candidate.chunk_id.as_str()).collect::<Vec<_>>(), ["zh"]);
}

#[test]
fn exact_path_hit_ranks_first_even_below_min_score() {
    let mut k = cand("a", "memory/other.md", "gateway");
    k.keyword_score = Some(10.0);
    let first = cand("f", "memory/2026-11-29.md", "unrelated text");
    let res = rank(vec![k], vec![], vec![(first, 1)], &Query::parse("2026-11-29"), &opts());
    assert_eq!(res[0].path, "memory/2026-11-29.md");
    assert_eq!(res.len(), 2);
}

#[test]
fn citations_and_snippet_cap() {
    assert_eq!(crate::citation::citation("memory/a.md", 3, 3), "memory/a.md#L3");
    assert_eq!(crate::citation::citation("memory/a.md", 3, 9), "memory/a.md#L3-L9");
    let mut c = cand("a", "memory/a.md", "text");
    c.keyword_score = Some(1.0);
    let on = to_results(vec![by_words(c.clone(), 0.5)], "q", Citations::On);
    assert!(on[0].snippet.ends_with("Source: memory/a.md#L1-L2"));
    let off = to_results(vec![by_words(c, 0.5)], "q", Citations::Off);
    assert_eq!(off[0].citation, None);
    assert_eq!(off[0].snippet, "text");
}

#[test]
fn results_say_which_lines_their_snippet_shows() {
    // A chunk of lines 10-50 whose answer is its last line: the snippet ends with it, whole, and says so.
    let mut lines: Vec<String> = (0..40).map(|i| format!("- note {i}: the team reviewed quarterly budget items")).collect();
    lines.push("- Deploys go through the canary cluster first, always".into());
    let mut c = cand("a", "memory/2026-01-02.md", &lines.join("\n"));
    c.start_line = 10;
    c.end_line = 50;
    c.keyword_score = Some(3.0);
    let r = to_results(vec![by_words(c, 0.5)], "always canary", Citations::Auto);
    assert!(r[0].snippet.ends_with("- Deploys go through the canary cluster first, always"), "{:?}", r[0].snippet);
    assert!(r[0].snippet.chars().count() <= SNIPPET_MAX_CHARS);
    assert_eq!(r[0].snippet_end_line, Some(50));
    let shown = r[0].snippet.lines().count();
    assert_eq!(r[0].snippet_start_line, Some(50 + 1 - shown));
    assert_eq!(r[0].citation.as_deref(), Some("memory/2026-01-02.md#L10-L50"), "the hit's citation is the chunk's");
}

#[test]
fn candidate_limit_is_capped() {
    assert_eq!(RankingOptions::candidate_limit(12, 4), 48);
    assert_eq!(RankingOptions::candidate_limit(100, 4), 200);
    // A search for fewer results than the ranking reads still has the candidates of ten behind it.
    assert_eq!(RankingOptions::candidate_limit(6, 4), 40);
    assert_eq!(RankingOptions::candidate_limit(1, 1), 10);
}

pub(crate) fn candidate_for_floor() -> Candidate {
    Candidate { end_line: 1, ..cand("c", "memory/a.md", "a") }
}

#[test]
fn non_finite_signals_never_reach_the_scores() {
    // Found by the ranking fuzz target: a NaN cosine (or weight, or half-life) made the score NaN.
    let mut v = candidate_for_floor();
    v.vector_score = Some(f64::NAN);
    let mut k = candidate_for_floor();
    k.chunk_id = "k".into();
    k.keyword_score = Some(f64::INFINITY);
    let opts = RankingOptions {
        max_results: 5,
        min_score: 0.0,
        vector_weight: f64::NAN,
        text_weight: 0.3,
        mmr_lambda: Some(0.5),
        half_life_days: Some(f64::NAN),
        citations: Citations::Off,
        now_ms: i64::MAX,
        today: chrono::NaiveDate::MAX,
        vector_floor: Some(f64::NAN),
        active_project_keys: Vec::new(),
    };
    let results = rank(vec![k], vec![v], vec![], &Query::parse("a"), &opts);
    assert!(!results.is_empty());
    assert!(results.iter().all(|r| r.score.is_finite() && r.vector_score.is_none_or(f64::is_finite)), "{results:?}");
}

#[test]
fn exact_queries_name_identifiers_or_a_phrase() {
    let ids = |q: &str| match ExactQuery::of(q) {
        ExactQuery::Identifiers(v) => v,
        other => panic!("{q}: {other:?}"),
    };
    assert_eq!(ids("INC-20931"), vec!["inc-20931"]);
    assert_eq!(ids("v2.14.3"), vec!["v2.14.3"]);
    assert_eq!(ids("errcode 40029"), vec!["40029"]);
    assert_eq!(ids("memory.search.query.hybrid.vectorWeight"), vec!["memory.search.query.hybrid.vectorweight"]);
    assert_eq!(ids("BadDeviceToken"), vec!["baddevicetoken"]);
    assert_eq!(ids("ATLAS_SENTRY_DSN 在哪里注入？"), vec!["atlas_sentry_dsn"]);
    assert_eq!(ids("小鱼记账 1.8.0 上线了什么"), vec!["1.8.0"]);
    assert_eq!(ids("What broke in \"M8R-FLP\"?"), vec!["m8r-flp"]);
    // Query syntax is not part of an identifier: the id is what must match.
    assert_eq!(ids("E4012 OR 1=1"), vec!["e4012"]);
    assert_eq!(ids("HSBC account"), vec!["hsbc"]);
    assert_eq!(ExactQuery::of("remaining connection slots are reserved"), ExactQuery::Phrase("remaining connection slots are reserved".into()));
    assert_eq!(ExactQuery::of("没有权限访问该资源。"), ExactQuery::Phrase("没有权限访问该资源".into()));
    // Ordinary words name nothing exactly: a capitalised word, a short query, a short Chinese question.
    for q in ["Atlas", "gateway host", "网关在哪？", "", "   ", "a b", "two-dimensional", "i.e", "re-entry"] {
        assert_eq!(ExactQuery::of(q), ExactQuery::None, "{q:?}");
    }
    // A year is a date's word: "in May 2023" names no id (every daily log's heading holds its year), so the
    // question is a phrase like any other; a year inside an id still counts with it.
    assert_eq!(ExactQuery::of("What did Maria donate in December 2023?"), ExactQuery::Phrase("what did maria donate in december 2023".into()));
    assert_eq!(ExactQuery::of("Q3 report for 1999"), ExactQuery::Identifiers(vec!["q3".into()]));
    assert_eq!(ids("release 2023-05-23"), vec!["2023-05-23"]);
    assert_eq!(ids("port 8080"), vec!["8080"]);
}

#[test]
fn exact_matches_respect_word_boundaries() {
    let q = ExactQuery::of("v2.14.3");
    assert!(q.matches("Atlas 后端 v2.14.3 修复了搜索分页的 bug。"));
    assert!(q.matches("released V2.14.3."));
    assert!(!q.matches("v2.14.30 is out"));
    assert!(!q.matches("xv2.14.3"));
    let both = ExactQuery::of("INC-20931 export");
    assert!(matches!(&both, ExactQuery::Identifiers(v) if v.len() == 1));
    let phrase = ExactQuery::of("remaining connection slots are reserved");
    assert!(phrase.matches("`FATAL: remaining connection\n slots are reserved for non-replication`"));
    assert!(!phrase.matches("remaining connection slots are reservedly kept"));
    assert!(!ExactQuery::None.matches("anything"));
}

fn kw(id: &str, path: &str, text: &str, bm25: f64) -> Candidate {
    Candidate { keyword_score: Some(bm25), ..cand(id, path, text) }
}

fn vec_cand(id: &str, path: &str, text: &str, cos: f64) -> Candidate {
    Candidate { vector_score: Some(cos), ..cand(id, path, text) }
}

#[test]
fn hybrid_keeps_the_exact_match_first_whatever_the_vectors_say() {
    let o = RankingOptions { min_score: 0.0, ..opts() };
    // Keyword finds the ticket; vectors like two other tickets better.
    let keyword = vec![kw("t", "memory/tickets.md", "INC-20931: export timed out", 4.0)];
    let vector = vec![
        vec_cand("a", "memory/a.md", "INC-21007: amounts counted twice", 0.9),
        vec_cand("b", "memory/b.md", "FEAT-388: dark mode", 0.85),
        vec_cand("t", "memory/tickets.md", "INC-20931: export timed out", 0.5),
    ];
    let r = rank(keyword.clone(), vector.clone(), vec![], &Query::parse("INC-20931"), &o);
    assert_eq!(r[0].path, "memory/tickets.md");
    // Without the exact string in the query the merged score decides, as before: with the keyword leg matching
    // all three alike, the vector leg's clear first choice leads.
    let flat = vec![
        kw("t", "memory/tickets.md", "INC-20931: export timed out", 4.0),
        kw("a", "memory/a.md", "INC-21007: amounts counted twice", 3.9),
        kw("b", "memory/b.md", "FEAT-388: dark mode", 3.95),
    ];
    let r = rank(flat, vector.clone(), vec![], &Query::parse("export ticket"), &o);
    assert_eq!(r[0].path, "memory/a.md");
    // An exact match passes minScore.
    let strict = RankingOptions { min_score: 0.99, ..opts() };
    let r = rank(keyword.clone(), vector, vec![], &Query::parse("INC-20931"), &strict);
    assert_eq!(r.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), vec!["memory/tickets.md"]);
    // An exact-path hit still ranks above an exact match.
    let vector = vec![vec_cand("p", "memory/INC-20931.md", "notes", 0.2)];
    let exact = vec![(cand("p", "memory/INC-20931.md", "notes"), 1)];
    let r = rank(keyword, vector, exact, &Query::parse("INC-20931"), &o);
    assert_eq!(r[0].path, "memory/INC-20931.md");
    assert_eq!(r[1].path, "memory/tickets.md");
}

#[test]
fn keyword_only_ranking_is_not_reordered_by_exact_matches() {
    let o = RankingOptions { min_score: 0.0, ..opts() };
    let keyword = vec![kw("a", "memory/a.md", "v2 14 3 release notes", 6.0), kw("b", "memory/b.md", "v2.14.3", 2.0)];
    let r = rank(keyword, vec![], vec![], &Query::parse("v2.14.3"), &o);
    assert_eq!(r[0].path, "memory/a.md");
}

#[test]
fn newer_dated_notes_win_near_ties_but_not_clear_differences() {
    let o = RankingOptions { min_score: 0.0, ..opts() };
    let keyword = vec![
        kw("old", "memory/2026-03-02.md", "the backend uses MySQL", 3.0),
        kw("new", "memory/2026-09-18.md", "the backend moved to PostgreSQL", 2.9),
        kw("ever", "MEMORY.md", "databases", 1.0),
    ];
    let r = rank(keyword.clone(), vec![], vec![], &Query::parse("which database does the backend use"), &o);
    // The older note's sentence holds more of the question ("backend" and "use"): the head prefers it.
    assert_eq!(r[0].path, "memory/2026-03-02.md", "{r:?}");
    // Where both sentences hold the question alike, near ties go to the newer note.
    let alike = vec![
        kw("old", "memory/2026-03-02.md", "the backend uses MySQL", 3.0),
        kw("new", "memory/2026-09-18.md", "the backend uses PostgreSQL since the migration", 2.9),
        kw("ever", "MEMORY.md", "databases", 1.0),
    ];
    let r = rank(alike, vec![], vec![], &Query::parse("which database does the backend use"), &o);
    assert_eq!(r[0].path, "memory/2026-09-18.md", "{r:?}");
    // A clearly better older match stays first.
    let keyword2 = vec![kw("old", "memory/2026-03-02.md", "x", 6.0), kw("new", "memory/2026-09-18.md", "y", 2.0), kw("ever", "MEMORY.md", "z", 0.5)];
    let r = rank(keyword2, vec![], vec![], &Query::parse("which database does the backend use now"), &o);
    assert_eq!(r[0].path, "memory/2026-03-02.md");
    // The gain is a share of the spread (best - last here): the oldest and undated notes gain nothing.
    let mut items = merge(keyword.clone(), vec![], &QueryWords::default(), None, 0.7, 0.3).0;
    let before: Vec<f64> = items.iter().map(|s| s.score).collect();
    let spread = before.iter().copied().fold(f64::MIN, f64::max) - before.iter().copied().fold(f64::MAX, f64::min);
    prefer_recent(&mut items, &Query::parse("which database"));
    assert_eq!(items[2].score, before[2]);
    assert_eq!(items[0].score, before[0], "the oldest gets nothing");
    assert!((items[1].score - before[1] - RECENCY_PREFERENCE * spread).abs() < 1e-12);
    let mut now = merge(keyword, vec![], &QueryWords::default(), None, 0.7, 0.3).0;
    prefer_recent(&mut now, &Query::parse("which database do we use now?"));
    assert!((now[1].score - before[1] - RECENCY_PREFERENCE_PRESENT * spread).abs() < 1e-12);
    // Scores that bunch (a model's cosines in 0.80-0.82) move as little as they spread: the order of two
    // candidates a tenth of the spread apart holds.
    let mut bunched: Vec<Scored> = (0..10)
        .map(|i| Scored {
            candidate: cand(&format!("c{i}"), &format!("memory/2026-01-{:02}.md", i + 1), "x"),
            score: 0.82 - 0.002 * i as f64,
            text_score: None,
            vector_score: None,
            vector_leg: None,
            tier: 0,
            exact_match: false,
        })
        .collect();
    prefer_recent(&mut bunched, &Query::parse("anything"));
    assert!(bunched[0].score > bunched[1].score, "{} vs {}", bunched[0].score, bunched[1].score);
    assert!(asks_about_present("小鱼记账现在用的是什么数据库？"));
    assert!(!asks_about_present("which database did we pick in March?"));
}

#[test]
fn a_question_naming_a_day_prefers_that_days_notes() {
    let o = RankingOptions { min_score: 0.0, ..opts() };
    // The day's log matches less well by its words than another day's (its answer is in a later chunk, without
    // the heading that names the day): the day the question names leads.
    let keyword = vec![
        kw("other", "memory/2023-10-20.md", "we painted the fence together", 3.0),
        kw("day", "memory/2023-10-13.md", "I painted a sunset, inspired by the beach", 2.6),
        kw("third", "memory/2023-09-01.md", "painting class", 1.0),
        kw("ever", "MEMORY.md", "notes", 0.5),
    ];
    let r = rank(keyword.clone(), vec![], vec![], &Query::parse("What painting did Melanie show on October 13, 2023?"), &o);
    assert_eq!(r[0].path, "memory/2023-10-13.md", "{r:?}");
    // Without the day, the words decide.
    let r = rank(keyword, vec![], vec![], &Query::parse("What painting did Melanie show?"), &o);
    assert_eq!(r[0].path, "memory/2023-10-20.md", "{r:?}");
    // A day's note that holds none of the rest of the question does not move; asked about the day alone, it leads.
    let keyword2 = vec![
        kw("a", "memory/2023-10-20.md", "the fence", 6.0),
        kw("b", "memory/2023-10-19.md", "the fence", 5.5),
        kw("day", "memory/2023-10-13.md", "a sunset", 1.0),
        kw("c", "memory/2023-09-01.md", "z", 0.9),
    ];
    let r = rank(keyword2.clone(), vec![], vec![], &Query::parse("the fence on 2023-10-13"), &o);
    assert_eq!(r[0].path, "memory/2023-10-20.md", "{r:?}");
    let r = rank(keyword2, vec![], vec![], &Query::parse("what happened on 2023-10-13"), &o);
    assert_eq!(r[0].path, "memory/2023-10-13.md", "{r:?}");
}

#[test]
fn a_question_saying_when_prefers_the_notes_of_that_time_asked_on_its_day() {
    let o = RankingOptions { min_score: 0.0, ..opts() };
    // Five logs decide about the same project; the words alone favour an older one.
    let keyword = vec![
        kw("old", "memory/2026-01-20.md", "Project Alder: we decided to drop the app", 3.0),
        kw("week", "memory/2026-03-11.md", "Project Alder: we decided to move to Postgres, after a long talk", 2.6),
        kw("month", "memory/2026-02-03.md", "Project Alder: we decided to hire", 2.9),
        kw("other", "memory/2026-03-12.md", "lunch with Ana", 0.4),
    ];
    let wednesday = chrono::NaiveDate::from_ymd_opt(2026, 3, 18).unwrap();
    for (q, want) in [
        ("What did we decide about Project Alder last week?", "memory/2026-03-11.md"),
        ("上周我们对 Project Alder 做了什么决定？", "memory/2026-03-11.md"),
        ("What did we decide about Project Alder last month?", "memory/2026-02-03.md"),
        ("What did we decide about Project Alder?", "memory/2026-01-20.md"),
    ] {
        let r = rank(keyword.clone(), vec![], vec![], &Query::parse_on(q, wednesday), &o);
        assert_eq!(r[0].path, want, "{q}: {r:?}");
    }
    // Two logs that match alike (no spread): the one of the time asked about leads.
    let tied = vec![
        kw("nov", "memory/2026-02-20.md", "Decided to keep the importer in Go.", 1.0),
        kw("dec", "memory/2026-03-17.md", "Decided to move the importer to Rust.", 1.0),
    ];
    for q in ["what did we decide yesterday about the importer?", "昨天关于 importer 的决定"] {
        let r = rank(tied.clone(), vec![], vec![], &Query::parse_on(q, wednesday), &o);
        assert_eq!(r[0].path, "memory/2026-03-17.md", "{q}: {r:?}");
    }
    // The same question asked a year later names a week no note is from: the words decide.
    let later = chrono::NaiveDate::from_ymd_opt(2027, 3, 18).unwrap();
    let r = rank(keyword, vec![], vec![], &Query::parse_on("What did we decide about Project Alder last week?", later), &o);
    assert_eq!(r[0].path, "memory/2026-01-20.md", "{r:?}");
}

#[test]
fn reranked_candidates_are_ordered_by_both_sides_and_keep_the_first_stages_range() {
    // First stage: a (0.86) > b (0.84) > c (0.80) > d (0.50, not reranked). The reranker loves b, dislikes a.
    let mut items = vec![scored("a", "a", 0.86), scored("b", "b", 0.84), scored("c", "c", 0.80), scored("d", "d", 0.50)];
    rerank(&mut items, &[-2.0, 6.0, 2.0], 0.5);
    let ids: Vec<&str> = items.iter().map(|s| s.candidate.chunk_id.as_str()).collect();
    assert_eq!(ids, ["b", "a", "c", "d"]);
    let scores: Vec<f64> = items.iter().map(|s| s.score).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "scores fall with the order: {scores:?}");
    assert!(scores[..3].iter().all(|&s| (0.80..=0.86).contains(&s)), "within the first stage's range: {scores:?}");
    assert_eq!(scores[3], 0.50, "the candidate not reranked keeps its score");
    // Weight 0: the first stage's order and scores, unchanged.
    let mut same = vec![scored("a", "a", 0.86), scored("b", "b", 0.84), scored("c", "c", 0.80)];
    rerank(&mut same, &[-2.0, 6.0, 2.0], 0.0);
    assert_eq!(same.iter().map(|s| (s.candidate.chunk_id.as_str(), s.score)).collect::<Vec<_>>(), [("a", 0.86), ("b", 0.84), ("c", 0.80)]);
}

#[test]
fn reranking_keeps_exact_matches_first_and_orders_ties_of_the_first_stage() {
    let mut exact = scored("x", "x", 0.60);
    exact.exact_match = true;
    let mut items = vec![exact, scored("a", "a", 0.60), scored("b", "b", 0.60)];
    rerank(&mut items, &[-5.0, 1.0, 3.0], 1.0);
    let ids: Vec<&str> = items.iter().map(|s| s.candidate.chunk_id.as_str()).collect();
    assert_eq!(ids, ["x", "b", "a"], "exact match first; equal first-stage scores: the reranker decides");
}

#[test]
fn the_head_prefers_a_sentence_that_holds_the_query_together() {
    let o = RankingOptions { min_score: 0.0, ..opts() };
    // A daily log of facts about many people holds "Søren", "spare" and "key", in different sentences; the note
    // where Søren says where the spare key is scores a little lower by its words alone.
    let log = "# 2026-12-04\n\n- Marta says the spare key is with the neighbour.\n- Søren says the Wi-Fi password is on the router.\n- Aisha says the spare key is in the drawer.";
    let note = "# Keys\n\nSøren says the spare key is under the blue flowerpot.";
    let filler = |i: usize| kw(&format!("f{i}"), &format!("memory/f{i}.md"), "the key to a good week is sleep", 1.0 + i as f64 * 0.01);
    let mut keyword = vec![kw("log", "memory/2026-12-04.md", log, 3.2), kw("note", "memory/keys.md", note, 3.0)];
    keyword.extend((0..8).map(filler));
    let r = rank(keyword.clone(), vec![], vec![], &Query::parse("where does Søren keep the spare key"), &o);
    assert_eq!(r[0].path, "memory/keys.md", "{r:?}");
    assert_eq!(r[1].path, "memory/2026-12-04.md");
    // A clearly better match by its words keeps its place.
    keyword[0].keyword_score = Some(9.0);
    let r = rank(keyword.clone(), vec![], vec![], &Query::parse("where does Søren keep the spare key"), &o);
    assert_eq!(r[0].path, "memory/2026-12-04.md", "{r:?}");
    // Only the head moves: a sixth candidate whose sentence holds the whole query stays out of the first five.
    let mut items = merge(keyword, vec![], &QueryWords::default(), None, 0.7, 0.3).0;
    items.push(by_words(cand("deep", "memory/deep.md", "Søren keeps the spare key in the car."), 0.01));
    let before: f64 = items.last().unwrap().score;
    prefer_sentences_holding_the_query(&mut items, &Query::parse("where does Søren keep the spare key"), false);
    assert_eq!(items.last().unwrap().score, before);
}

#[test]
fn the_head_does_not_move_a_note_found_by_meaning_alone_below_one_sharing_a_word() {
    // "Why does uploading a receipt over 1 MB fail?" asked in Chinese of an English note: the merge has the note
    // first (its vector leg's clear first); a daily log sharing "失败" and "原因" (fail, reason) with the question
    // follows closely. The note can hold none of the question's words: the merge weighed that already.
    let o = RankingOptions { min_score: 0.0, vector_floor: Some(0.1), ..opts() };
    let query = Query::parse("上传小票超过 1MB 失败是什么原因？");
    let note = "client_max_body_size 25m is needed on the upload endpoint, otherwise receipts over 1 MB fail with 413.";
    let log = "同步失败的原因是证书过期。";
    let keyword = vec![kw("log", "memory/2026-07-14.md", log, 0.5)];
    let mut vector = vec![vec_cand("note", "memory/nginx.md", note, 0.60), vec_cand("log", "memory/2026-07-14.md", log, 0.40)];
    vector.extend((0..8).map(|i| vec_cand(&format!("o{i}"), &format!("memory/o{i}.md"), "其他", 0.10 + 0.01 * i as f64)));
    let (merged, _) = merge(keyword.clone(), vector.clone(), query.words(), o.vector_floor, o.vector_weight, o.text_weight);
    let first = |items: &[Scored]| items.iter().max_by(|a, b| a.score.total_cmp(&b.score)).unwrap().candidate.chunk_id.clone();
    assert_eq!(first(&merged), "note");
    let r = rank(keyword, vector.clone(), vec![], &query, &o);
    assert_eq!(r[0].path, "memory/nginx.md", "{r:?}");
    assert_eq!(r[1].path, "memory/2026-07-14.md", "{r:?}");
    // Where no keyword leg weighed the words (a search by vectors alone), the sentence is the only word the
    // ranking hears, and the log that holds the question's words moves up.
    let r = rank(vec![], vector, vec![], &query, &o);
    assert_eq!(r[0].path, "memory/2026-07-14.md", "{r:?}");
}

#[test]
fn a_keyword_match_on_one_word_of_a_chinese_question_does_not_outrank_the_vector_legs_clear_first() {
    // "How often is the air purifier filter changed?" asked in Chinese of an English note: the vector leg finds the
    // note clearly first; the keyword leg's one candidate is a daily log sharing only "一次" (once) with the question.
    let query = "空气净化器滤芯多久换一次？";
    let keyword = vec![kw("log", "memory/2026-10-20.md", "周末去爬山，一次走了二十公里。", 6.0)];
    let mut vector = vec![vec_cand("note", "memory/shopping.md", "Air purifier: replace the HEPA filter every 6 months.", 0.56)];
    vector.push(vec_cand("log", "memory/2026-10-20.md", "周末去爬山，一次走了二十公里。", 0.42));
    vector.extend((0..8).map(|i| vec_cand(&format!("o{i}"), &format!("memory/o{i}.md"), "other", 0.30 + 0.01 * i as f64)));
    let first = |words: &QueryWords| {
        let items = merge(keyword.clone(), vector.clone(), words, Some(0.18), 0.7, 0.3).0;
        items.into_iter().max_by(|a, b| a.score.total_cmp(&b.score)).unwrap().candidate.chunk_id
    };
    let words = QueryWords::of(query);
    assert!(words.share_held_by(&keyword[0].text) < 0.3, "{words:?}");
    assert_eq!(first(&words), "note");
    // Without the discount (no words known) the lone keyword match reads as a decisive leg and wins.
    assert_eq!(first(&QueryWords::default()), "log");

    // A keyword match holding the question's words keeps its lead over a flat vector leg.
    let query = "Where did Caroline move from four years ago?";
    let keyword =
        vec![kw("y", "memory/y.md", "Caroline moved from Sweden four years ago.", 12.0), kw("x", "memory/x.md", "Caroline likes it here.", 3.0)];
    let mut vector = vec![
        vec_cand("x", "memory/x.md", "Caroline likes it here.", 0.50),
        vec_cand("y", "memory/y.md", "Caroline moved from Sweden four years ago.", 0.47),
    ];
    vector.extend((0..8).map(|i| vec_cand(&format!("o{i}"), &format!("memory/o{i}.md"), "o", 0.45 + 0.002 * i as f64)));
    let words = QueryWords::of(query);
    assert_eq!(words.share_held_by(&keyword[0].text), 1.0, "{words:?}");
    let items = merge(keyword, vector, &words, Some(0.05), 0.7, 0.3).0;
    assert_eq!(items.into_iter().max_by(|a, b| a.score.total_cmp(&b.score)).unwrap().candidate.chunk_id, "y");
}

#[test]
fn a_chinese_questions_function_words_are_not_words_a_keyword_match_holds() {
    // "What food is the cat allergic to?" asked in Chinese of an English note: the keyword leg's one candidate
    // holds "过敏" (allergic) and the preposition "对" (to), not "猫" (cat) or "食物" (food).
    let query = Query::parse("猫对什么食物过敏？");
    let mom = "妈妈对青霉素过敏，看病时一定要提醒医生。";
    let pets = "The cat is called Tuanzi. She is allergic to chicken-based food; buy the salmon formula.";
    assert!((query.words().share_held_by(mom) - 1.0 / 3.0).abs() < 1e-9, "{:?}", query.words());
    let o = RankingOptions { min_score: 0.0, vector_floor: Some(0.127), ..opts() };
    let keyword = vec![kw("mom", "memory/people/mom.md", mom, 7.388)];
    let mut vector = vec![vec_cand("pets", "memory/pets.md", pets, 0.552), vec_cand("mom", "memory/people/mom.md", mom, 0.384)];
    vector.extend((0..8).map(|i| vec_cand(&format!("o{i}"), &format!("memory/o{i}.md"), "其他", 0.20 + 0.01 * i as f64)));
    let r = rank(keyword, vector, vec![], &query, &o);
    assert_eq!(r[0].path, "memory/pets.md", "{r:?}");
}

#[test]
fn the_min_score_cut_keeps_what_passes_else_what_words_back() {
    // (score, keyword-backed)
    let hits = vec![(0.9, false), (0.2, true), (0.5, true), (0.1, false)];
    let cut = |min: f64, max: usize| min_score_cut(hits.clone(), max, |h| h.0 >= min, |h| h.1);
    assert_eq!(cut(0.4, 10), vec![(0.9, false), (0.5, true)]);
    assert_eq!(cut(0.4, 1), vec![(0.9, false)]);
    // Nothing reaches 0.95: the keyword-backed hits answer, in order, up to `max`.
    assert_eq!(cut(0.95, 10), vec![(0.2, true), (0.5, true)]);
    assert_eq!(cut(0.95, 1), vec![(0.2, true)]);
    // Nothing passes and no word backs any: nothing.
    assert!(min_score_cut(vec![(0.1, false)], 10, |h| h.0 >= 0.5, |h| h.1).is_empty());
}

/// A search that records its trace ranks exactly as one that does not, and its explanation's factors give each
/// hit's score: the merge by the weights, plus what each preference added, times decay, importance and project.
#[test]
fn a_traced_ranking_is_the_same_ranking_and_its_factors_give_each_score() {
    let day = |d: u32| crate::discovery::day_millis(chrono::NaiveDate::from_ymd_opt(2027, 1, d).unwrap());
    let dated = |id: &str, d: u32, text: &str, bm25: f64| Candidate { date: day(d), ..kw(id, &format!("memory/2027-01-{d:02}.md"), text, bm25) };
    let keyword = vec![
        dated("a", 14, "we decided the importer streams", 2.0),
        dated("b", 3, "the importer decided to crash, decided twice", 3.5),
        Candidate { importance: Some(9), ..kw("c", "MEMORY.md", "importer runs nightly", 1.0) },
    ];
    let vector = vec![
        vec_cand("a", "memory/2027-01-14.md", "we decided the importer streams", 0.8),
        vec_cand("d", "memory/notes.md", "streaming parser", 0.7),
    ];
    let mut o = opts();
    o.half_life_days = Some(30.0);
    o.now_ms = day(15).unwrap();
    let query = Query::parse_on("what did we decide yesterday about the importer", o.today);
    let plain = order(keyword.clone(), vector.clone(), vec![], &query, &o, None);
    let mut trace = Trace::default();
    let traced = order(keyword, vector, vec![], &query, &o, Some(&mut trace));
    let ids = |items: &[Scored]| items.iter().map(|s| (s.candidate.chunk_id.clone(), s.score)).collect::<Vec<_>>();
    assert_eq!(ids(&plain), ids(&traced));
    let results = finish(traced, &query, &o, Some(&mut trace));
    assert_eq!(results, finish(plain, &query, &o, None));

    let e = trace.explain(&query, &o, &results, false);
    assert_eq!(e.hits.len(), 4);
    assert_eq!(e.hits[0].path, "memory/2027-01-14.md", "{e:?}");
    assert!(e.hits[0].time_window > 0.0 && e.hits[0].date.as_deref() == Some("2027-01-14"), "{e:?}");
    let w = e.weights.unwrap();
    for h in &e.hits {
        let text = h.keyword.as_ref().map_or(0.0, |k| k.text_score);
        let vector = h.vector.as_ref().map_or(0.0, |v| v.score);
        assert!((w.text * text + w.vector * vector - h.merged).abs() < 1e-12, "{h:?}");
        let score = (h.merged + h.recency + h.time_window + h.sentence) * h.decay * h.importance * h.project;
        assert!((score - h.score).abs() < 1e-12, "{h:?}");
        assert_eq!(h.verdict.kept(), h.result.is_some(), "{h:?}");
    }
    let memory = e.hits.iter().find(|h| h.path == "MEMORY.md").unwrap();
    assert!((memory.importance - 1.2).abs() < 1e-12 && memory.age_days.is_none(), "an evergreen note does not decay: {memory:?}");
    let old = e.hits.iter().find(|h| h.path == "memory/2027-01-03.md").unwrap();
    assert!((old.age_days.unwrap() - 12.0).abs() < 1e-9 && old.decay < 1.0, "{old:?}");
}

/// The `minScore` cut's verdicts: kept by score, by the vector leg alone; past `maxResults`; cut.
#[test]
fn a_traced_cut_says_why_each_hit_is_kept_or_not() {
    let mut items = vec![scored("a", "alpha", 0.9), scored("b", "alpha", 0.5), scored("c", "alpha", 0.1), scored("d", "alpha", 0.2)];
    items[3].vector_leg = Some(0.6);
    let mut o = opts();
    o.max_results = 2;
    o.min_score = 0.35;
    let query = Query::parse_on("alpha", o.today);
    let mut trace = Trace::default();
    finish(items, &query, &o, Some(&mut trace));
    let verdicts: Vec<_> = trace.ranked().iter().map(|s| trace.verdict(s, o.min_score).0).collect();
    use crate::explanation::Verdict;
    assert_eq!(verdicts, [Verdict::Score, Verdict::Score, Verdict::BelowMinScore, Verdict::BeyondMaxResults]);
}

/// A generated search: up to 12 candidates from a small vocabulary, some dated, some with an importance or a
/// project tag, found by words, by vectors or both; decay, MMR and a project on or off; a query with or
/// without a time.
fn generated_search() -> impl proptest::strategy::Strategy<Value = (Vec<Candidate>, Vec<Candidate>, RankingOptions, String)> {
    use proptest::prelude::*;
    const WORDS: &[&str] = &["importer", "billing", "deploy", "decided", "heron", "key", "yesterday", "导入", "决定", "E4012"];
    let candidate = (
        0usize..12,
        proptest::collection::vec(0usize..WORDS.len(), 1..6),
        proptest::option::of(1u32..28),
        proptest::option::of(1u8..=10),
        any::<bool>(),
        proptest::option::of(0.0f64..8.0),
        proptest::option::of(-0.2f64..0.95),
    );
    (
        proptest::collection::vec(candidate, 1..12),
        proptest::collection::vec(0usize..WORDS.len(), 1..5),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(cands, query_words, decay, mmr, project, time)| {
            let day = |d: u32| crate::discovery::day_millis(chrono::NaiveDate::from_ymd_opt(2027, 1, d).unwrap());
            let (mut keyword, mut vector) = (Vec::new(), Vec::new());
            let mut seen = std::collections::HashSet::new();
            for (id, words, date, importance, tagged, bm25, cos) in cands {
                if !seen.insert(id) {
                    continue;
                }
                let mut text: String = words.iter().map(|w| WORDS[*w]).collect::<Vec<_>>().join(" ");
                if tagged {
                    text.push_str("\n<!-- project: github.com/acme/app -->");
                }
                let path = match date {
                    Some(d) => format!("memory/2027-01-{d:02}.md"),
                    None => format!("memory/note-{id}.md"),
                };
                let c = Candidate { date: date.and_then(day), importance, file_mtime_ms: 1_700_000_000_000, ..cand(&format!("c{id}"), &path, &text) };
                if let Some(s) = bm25 {
                    keyword.push(Candidate { keyword_score: Some(s), ..c.clone() });
                }
                if let Some(v) = cos {
                    vector.push(Candidate { vector_score: Some(v), ..c });
                }
            }
            let mut o = opts();
            o.half_life_days = decay.then_some(30.0);
            o.mmr_lambda = mmr.then_some(0.7);
            o.vector_floor = Some(0.1);
            o.active_project_keys = if project { vec!["github.com/acme/app".into()] } else { Vec::new() };
            let mut q: Vec<&str> = query_words.iter().map(|w| WORDS[*w]).collect();
            if time {
                q.push("last week");
            }
            (keyword, vector, o, q.join(" "))
        })
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 256, ..Default::default() })]

    /// Whatever the search, explaining it changes nothing, and its factors give every explained hit's score.
    #[test]
    fn any_traced_search_ranks_alike_and_its_factors_give_each_score((keyword, vector, o, text) in generated_search()) {
        let query = Query::parse_on(&text, o.today);
        let plain = finish(order(keyword.clone(), vector.clone(), vec![], &query, &o, None), &query, &o, None);
        let mut trace = Trace::default();
        let traced = order(keyword, vector, vec![], &query, &o, Some(&mut trace));
        let results = finish(traced, &query, &o, Some(&mut trace));
        proptest::prop_assert_eq!(&plain, &results);
        let e = trace.explain(&query, &o, &results, false);
        for h in &e.hits {
            let score = (h.merged + h.recency + h.time_window + h.sentence) * h.decay * h.importance * h.project;
            proptest::prop_assert!((score - h.score).abs() <= 1e-9 * h.score.abs().max(1.0), "{:?}", h);
            proptest::prop_assert_eq!(h.verdict.kept(), h.result.is_some());
        }
        for (i, r) in results.iter().enumerate() {
            proptest::prop_assert!(e.hits.iter().any(|h| h.result == Some(i + 1) && h.path == r.path && h.start_line == r.start_line), "result {} not explained", i + 1);
        }
    }
}

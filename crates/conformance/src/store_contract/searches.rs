//! The checks of reading: keyword scores (their direction, their independence from the write history),
//! source filters, lookup by file name, and vectors (read back, nearest first, wrong widths refused).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use memory_core::store::{Candidate, IndexStorage, KeywordQuery, SyncBatch};
use memory_core::{ErrorKind, Source};

use super::fixtures::{axis, chunk, file, query, record, set, upserts};
use super::{step, CheckResult, StoreHarness, Verdict};

/// `keyword_score` points the way `Candidate::keyword_score` states: positive for a match, higher for the better
/// match, and results come best first. A store that passes its engine's number the other way round fails here.
pub async fn keyword_scores_are_higher_for_better_matches(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let files = vec![
        file(Source::Memory, "strong.md", &["kiwi kiwi kiwi orchard"], 1),
        file(Source::Memory, "weak.md", &["kiwi beside many other ordinary words about the weather and the garden"], 1),
        file(Source::Memory, "none.md", &["nothing relevant here"], 1),
    ];
    step("apply", store.apply(upserts(files)).await)?;
    let hits = step("keyword_search()", store.keyword_search(&query("kiwi"), 10, &[]).await)?;
    better_match_scores_higher(&hits, "strong.md", "weak.md")?;
    ensure!(hits.iter().all(|c| c.vector_score.is_none()), "keyword candidates carry a vector score");
    let limited = step("keyword_search(limit 1)", store.keyword_search(&query("kiwi"), 1, &[]).await)?;
    ensure!(limited.len() == 1 && limited[0].path == "strong.md", "limit 1 did not return the best match: {limited:?}");
    // Query syntax of the store's engine is never interpreted: terms are literals.
    let odd = KeywordQuery { terms: vec!["NEAR".into(), "kiwi*".into(), "\"".into(), "OR".into()] };
    step("keyword_search() with syntax-like terms", store.keyword_search(&odd, 10, &[]).await)?;
    Ok(Verdict::Passed)
}

/// A keyword score depends on what the index holds, not on how it got there: a store whose files were rewritten,
/// removed, and written by words first and with vectors after (as a first search builds an index) scores a query
/// exactly as a store written once with the same files, once both have settled ([`StoreHarness::settle`]). (A
/// store whose keyword statistics keep removed rows for good counts the same chunk twice after each rewrite: its
/// document frequencies and lengths drift with every edit.)
pub async fn keyword_scores_do_not_depend_on_earlier_writes(h: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, dir: PathBuf) -> CheckResult {
    let last = |vectors: bool| {
        let v = |i: usize| vectors.then(|| axis(i, 4));
        vec![
            (
                record(Source::Memory, "a.md", "a", 3),
                vec![
                    chunk(Source::Memory, "a.md", 1, "kiwi orchard planted in spring", v(0)),
                    chunk(Source::Memory, "a.md", 3, "notes about the weather this week", v(1)),
                ],
            ),
            (record(Source::Memory, "b.md", "b", 1), vec![chunk(Source::Memory, "b.md", 1, "kiwi kiwi harvest and the weather", v(2))]),
            (record(Source::Memory, "c.md", "c", 1), vec![chunk(Source::Memory, "c.md", 1, "nothing relevant here at all", v(3))]),
        ]
    };
    let rewritten = step("open_live", storage.open_live().await)?;
    let draft = "an early draft with many many words about kiwi and other fruit along the long garden path";
    step(
        "apply the first files",
        rewritten
            .apply(upserts(vec![file(Source::Memory, "a.md", &[draft], 1), file(Source::Memory, "gone.md", &["kiwi weather soon removed"], 1)]))
            .await,
    )?;
    for round in 0..3 {
        let text = format!("draft {round} of the kiwi notes, weather words and more words");
        step("rewrite a file", rewritten.apply(upserts(vec![file(Source::Memory, "a.md", &[&text], 2)])).await)?;
    }
    step("remove a file", rewritten.apply(SyncBatch { removals: vec![(Source::Memory, "gone.md".into())], ..Default::default() }).await)?;
    step("apply the last files by their words", rewritten.apply(upserts(last(false))).await)?;
    step("apply the last files with vectors", rewritten.apply(upserts(last(true))).await)?;

    let other = tempfile::tempdir().map_err(|e| format!("temporary folder: {e}"))?;
    let once = step("open a second storage", h.open(other.path()).await)?;
    let once = step("open_live", once.open_live().await)?;
    step("apply the last files once", once.apply(upserts(last(true))).await)?;
    step("settle the rewritten store", h.settle(&dir).await)?;
    step("settle the store written once", h.settle(other.path()).await)?;

    for q in ["kiwi weather", "weather", "orchard spring kiwi"] {
        let scores = |hits: Vec<Candidate>| hits.into_iter().map(|c| (c.path, c.start_line, c.keyword_score.unwrap_or(f64::NAN))).collect::<Vec<_>>();
        let a = scores(step("keyword_search() after rewrites", rewritten.keyword_search(&query(q), 10, &[]).await)?);
        let b = scores(step("keyword_search() written once", once.keyword_search(&query(q), 10, &[]).await)?);
        let same = a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && x.1 == y.1 && (x.2 - y.2).abs() <= 1e-9 * x.2.abs().max(1.0));
        ensure!(same, "`{q}`: the rewritten store scores {a:?}, the store written once {b:?}");
    }
    Ok(Verdict::Passed)
}

/// The hits of a query that `better` matches better than `worse` (and nothing else matches): exactly these two, in
/// that order, with positive keyword scores, the better one's higher.
fn better_match_scores_higher(hits: &[Candidate], better: &str, worse: &str) -> std::result::Result<(), String> {
    let order: Vec<&str> = hits.iter().map(|c| c.path.as_str()).collect();
    ensure!(order == [better, worse], "expected [{better}, {worse}], got {order:?}");
    let scores: Vec<f64> = hits.iter().map(|c| c.keyword_score.unwrap_or(f64::NAN)).collect();
    ensure!(scores.iter().all(|s| *s > 0.0), "keyword scores must be positive for a match (higher = better): {scores:?}");
    ensure!(scores[0] > scores[1], "the better match must have the higher keyword score: {scores:?}");
    Ok(())
}

/// Keyword and vector search return only the requested sources (all when none is given).
pub async fn searches_honour_source_filters(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let m = (record(Source::Memory, "m.md", "m", 1), vec![chunk(Source::Memory, "m.md", 1, "shared lighthouse", Some(axis(0, 4)))]);
    let s = (record(Source::Sessions, "s.jsonl", "s", 1), vec![chunk(Source::Sessions, "s.jsonl", 1, "shared lighthouse", Some(axis(0, 4)))]);
    step("apply", store.apply(upserts(vec![m, s])).await)?;
    let q = query("lighthouse");
    for (sources, want) in [
        (vec![], vec![Source::Memory, Source::Sessions]),
        (vec![Source::Memory], vec![Source::Memory]),
        (vec![Source::Sessions], vec![Source::Sessions]),
    ] {
        let kw: BTreeSet<Source> = step("keyword_search()", store.keyword_search(&q, 10, &sources).await)?.iter().map(|c| c.source).collect();
        ensure!(kw == want.iter().copied().collect(), "keyword search with sources {sources:?} returned {kw:?}");
        let vs: BTreeSet<Source> = step("vector_search()", store.vector_search(&axis(0, 4), 10, &sources).await)?.iter().map(|c| c.source).collect();
        ensure!(vs == want.iter().copied().collect(), "vector search with sources {sources:?} returned {vs:?}");
    }
    Ok(Verdict::Passed)
}

/// `files_named` returns files whose path, basename or stem equals the query, never a substring match.
pub async fn files_named_matches_path_name_or_stem_only(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let files = vec![
        file(Source::Memory, "memory/projects/rust.md", &["r"], 1),
        file(Source::Memory, "memory/projects/rustacean.md", &["r2"], 1),
        file(Source::Memory, "rust.txt.md", &["r3"], 1),
    ];
    step("apply", store.apply(upserts(files)).await)?;
    for (q, want) in [
        ("memory/projects/rust.md", vec!["memory/projects/rust.md"]),
        ("rust.md", vec!["memory/projects/rust.md"]),
        ("rust", vec!["memory/projects/rust.md"]),
        ("rust.txt", vec!["rust.txt.md"]),
        ("projects", vec![]),
        ("rus", vec![]),
    ] {
        let got: BTreeSet<String> = step("files_named()", store.files_named(q).await)?.into_iter().map(|f| f.path).collect();
        ensure!(got == set(&want), "files_named({q:?}) returned {got:?}, expected {want:?}");
    }
    Ok(Verdict::Passed)
}

/// Vectors read back exactly; vector search returns the nearest first with cosine scores; a query of the
/// wrong width is an error, not a silent empty answer.
pub async fn stored_vectors_round_trip(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let dims = 8;
    let v_a: Vec<f32> = (0..dims).map(|i| (i as f32 + 1.0) / 10.0).collect();
    let mut v_a: Vec<f32> = v_a;
    memory_core::embedding::sanitize_and_normalize(&mut v_a);
    let mut a = chunk(Source::Memory, "v.md", 1, "vector one", Some(v_a));
    let b = chunk(Source::Memory, "v.md", 3, "vector two", Some(axis(3, dims)));
    let c = chunk(Source::Memory, "v.md", 5, "no vector", None);
    let stored_a = a.embedding.clone().expect("set above");
    a.importance = Some(7);
    step("apply", store.apply(upserts(vec![(record(Source::Memory, "v.md", "v", 1), vec![a.clone(), b.clone(), c.clone()])])).await)?;
    let ids = vec![a.id.clone(), b.id.clone(), c.id.clone(), "no-such-chunk".to_string()];
    let back = step("chunk_vectors()", store.chunk_vectors(&ids).await)?;
    if back.is_empty() {
        return Ok(Verdict::Skipped("chunk_vectors keeps the trait default (this store cannot read vectors back)".into()));
    }
    let want: HashMap<String, Vec<f32>> = [(a.id.clone(), stored_a.clone()), (b.id.clone(), axis(3, dims))].into_iter().collect();
    ensure!(back == want, "chunk_vectors did not return exactly the stored vectors of the chunks that have one: {back:?}");
    let hits = step("vector_search()", store.vector_search(&axis(3, dims), 10, &[]).await)?;
    ensure!(hits.first().map(|h| h.chunk_id.as_str()) == Some(b.id.as_str()), "the identical vector is not the nearest: {hits:?}");
    ensure!(hits.iter().all(|h| h.chunk_id != c.id), "a chunk without a vector was returned by vector search");
    let score = hits[0].vector_score.unwrap_or(f64::NAN);
    // total_cmp: a NaN score fails too.
    ensure!((score - 1.0).abs().total_cmp(&1e-3).is_lt(), "cosine of identical unit vectors should be 1, got {score}");
    ensure!(hits.windows(2).all(|w| w[0].vector_score >= w[1].vector_score), "vector hits are not best first");
    ensure!(hits.iter().all(|h| h.keyword_score.is_none()), "vector candidates carry a keyword score");
    let a_hit = hits.iter().find(|h| h.chunk_id == a.id).ok_or("the other vector is missing from the hits")?;
    ensure!(
        a_hit.importance == Some(7) && a_hit.start_line == 1 && a_hit.end_line == 2 && a_hit.text == "vector one",
        "candidate fields did not round trip: {a_hit:?}"
    );
    match store.vector_search(&axis(0, dims + 1), 10, &[]).await {
        Err(e) if matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Unavailable) => {}
        other => return Err(format!("a query vector of the wrong width must be InvalidInput or Unavailable, got {other:?}")),
    }
    Ok(Verdict::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(path: &str, keyword_score: f64) -> Candidate {
        Candidate {
            chunk_id: path.into(),
            source: Source::Memory,
            path: path.into(),
            start_line: 1,
            end_line: 1,
            text: String::new(),
            importance: None,
            file_mtime_ms: 1,
            keyword_score: Some(keyword_score),
            vector_score: None,
        }
    }

    #[test]
    fn the_keyword_score_check_fails_a_store_whose_scores_point_the_wrong_way() {
        assert_eq!(better_match_scores_higher(&[hit("strong.md", 2.5), hit("weak.md", 0.7)], "strong.md", "weak.md"), Ok(()));
        // SQLite's own convention (negative, more negative = better), passed through unconverted.
        let e = better_match_scores_higher(&[hit("strong.md", -2.5), hit("weak.md", -0.7)], "strong.md", "weak.md").unwrap_err();
        assert!(e.contains("must be positive"), "{e}");
        // Positive, but the better match scored lower.
        let e = better_match_scores_higher(&[hit("strong.md", 0.7), hit("weak.md", 2.5)], "strong.md", "weak.md").unwrap_err();
        assert!(e.contains("higher keyword score"), "{e}");
        let e = better_match_scores_higher(&[hit("weak.md", 0.7), hit("strong.md", 2.5)], "strong.md", "weak.md").unwrap_err();
        assert!(e.contains("expected [strong.md, weak.md]"), "{e}");
    }
}

//! The checks of reading: keyword scores (their direction, their independence from the write history),
//! source filters, lookup by file name, and vectors (read back, nearest first, wrong widths refused).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use memory_core::store::{Candidate, DayRange, IndexStorage, KeywordQuery, Scope, SyncBatch};
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
    let hits = step("keyword_search()", store.keyword_search(&query("kiwi"), 10, &Scope::default()).await)?;
    better_match_scores_higher(&hits, "strong.md", "weak.md")?;
    ensure!(hits.iter().all(|c| c.vector_score.is_none()), "keyword candidates carry a vector score");
    let limited = step("keyword_search(limit 1)", store.keyword_search(&query("kiwi"), 1, &Scope::default()).await)?;
    ensure!(limited.len() == 1 && limited[0].path == "strong.md", "limit 1 did not return the best match: {limited:?}");
    // Query syntax of the store's engine is never interpreted: terms are literals.
    let odd = KeywordQuery { terms: vec!["NEAR".into(), "kiwi*".into(), "\"".into(), "OR".into()] };
    step("keyword_search() with syntax-like terms", store.keyword_search(&odd, 10, &Scope::default()).await)?;
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
        let a = scores(step("keyword_search() after rewrites", rewritten.keyword_search(&query(q), 10, &Scope::default()).await)?);
        let b = scores(step("keyword_search() written once", once.keyword_search(&query(q), 10, &Scope::default()).await)?);
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
        let kw: BTreeSet<Source> =
            step("keyword_search()", store.keyword_search(&q, 10, &Scope::sources(&sources)).await)?.iter().map(|c| c.source).collect();
        ensure!(kw == want.iter().copied().collect(), "keyword search with sources {sources:?} returned {kw:?}");
        let vs: BTreeSet<Source> =
            step("vector_search()", store.vector_search(&axis(0, 4), 10, &Scope::sources(&sources)).await)?.iter().map(|c| c.source).collect();
        ensure!(vs == want.iter().copied().collect(), "vector search with sources {sources:?} returned {vs:?}");
    }
    Ok(Verdict::Passed)
}

/// A scope's days hold both searches to the chunks dated inside them (undated chunks left out), before the limit
/// (a narrow window still fills it though better matches lie outside), and keyword scores within dates are those
/// of the whole search (its candidates are merged with the unscoped ones).
pub async fn searches_honour_days(_: &dyn StoreHarness, storage: Arc<dyn IndexStorage>, _: PathBuf) -> CheckResult {
    let store = step("open_live", storage.open_live().await)?;
    let day = |d: u32| memory_core::discovery::day_millis(chrono::NaiveDate::from_ymd_opt(2026, 3, d).unwrap_or_default());
    let dated = |path: &str, text: &str, date: Option<i64>, v: Vec<f32>| {
        let mut c = chunk(Source::Memory, path, 1, text, Some(v));
        c.date = date;
        (record(Source::Memory, path, text, 1), vec![c])
    };
    // Better matches outside the window (more of the word, nearer the query vector) than the one inside it.
    let files = vec![
        dated("memory/2026-03-01.md", "heron heron heron", day(1), axis(0, 4)),
        dated("memory/2026-03-02.md", "heron heron", day(2), axis(0, 4)),
        dated("memory/2026-03-10.md", "heron and a long line of other words about the pond", day(10), axis(1, 4)),
        dated("notes/undated.md", "heron heron heron heron", None, axis(0, 4)),
    ];
    step("apply", store.apply(upserts(files)).await)?;
    let window = |first: u32, last: u32| Scope { sources: vec![], days: day(first).zip(day(last)).map(|(first, last)| DayRange { first, last }) };
    let q = query("heron");
    let all = step("keyword_search()", store.keyword_search(&q, 10, &Scope::default()).await)?;
    let within = step("keyword_search() within days", store.keyword_search(&q, 1, &window(5, 12)).await)?;
    ensure!(
        within.iter().map(|c| c.path.as_str()).collect::<Vec<_>>() == ["memory/2026-03-10.md"],
        "keyword search within 2026-03-05..12 returned {within:?}"
    );
    ensure!(within[0].date == day(10), "the chunk's date does not round-trip: {:?}", within[0].date);
    let whole = all.iter().find(|c| c.path == "memory/2026-03-10.md").and_then(|c| c.keyword_score);
    ensure!(
        whole.zip(within[0].keyword_score).is_some_and(|(a, b)| (a - b).abs() <= 1e-6 * a.abs().max(1.0)),
        "a chunk's keyword score within dates ({:?}) differs from the whole search's ({whole:?})",
        within[0].keyword_score
    );
    let two = step("keyword_search() within two days", store.keyword_search(&q, 10, &window(1, 2)).await)?;
    let paths: BTreeSet<&str> = two.iter().map(|c| c.path.as_str()).collect();
    ensure!(
        paths == ["memory/2026-03-01.md", "memory/2026-03-02.md"].into_iter().collect(),
        "keyword search within 2026-03-01..02 returned {paths:?}"
    );
    let near = step("vector_search() within days", store.vector_search(&axis(0, 4), 1, &window(5, 12)).await)?;
    ensure!(
        near.iter().map(|c| c.path.as_str()).collect::<Vec<_>>() == ["memory/2026-03-10.md"],
        "vector search within 2026-03-05..12 returned {near:?}"
    );
    // Open ends (`after` alone, `before` alone) are i64::MIN and i64::MAX.
    let after = Scope { sources: vec![], days: day(5).map(|first| DayRange { first, last: i64::MAX }) };
    let since = step("keyword_search() after a day", store.keyword_search(&q, 10, &after).await)?;
    ensure!(
        since.iter().map(|c| c.path.as_str()).collect::<Vec<_>>() == ["memory/2026-03-10.md"],
        "keyword search after 2026-03-05 returned {since:?}"
    );
    let before = Scope { sources: vec![], days: day(1).map(|last| DayRange { first: i64::MIN, last }) };
    let until = step("vector_search() before a day", store.vector_search(&axis(0, 4), 10, &before).await)?;
    ensure!(
        until.iter().map(|c| c.path.as_str()).collect::<Vec<_>>() == ["memory/2026-03-01.md"],
        "vector search before 2026-03-01 returned {until:?}"
    );
    let none = step("keyword_search() within empty days", store.keyword_search(&q, 10, &window(20, 25)).await)?;
    ensure!(none.is_empty(), "keyword search within days holding no chunk returned {none:?}");
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
    let hits = step("vector_search()", store.vector_search(&axis(3, dims), 10, &Scope::default()).await)?;
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
    match store.vector_search(&axis(0, dims + 1), 10, &Scope::default()).await {
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
            date: None,
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

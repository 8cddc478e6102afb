//! The builtin engine's fast paths of issue 22. Vector search (an in-memory int8 copy scanned, its best
//! candidates re-scored from the f32 vectors) against sqlite-vec's exact scan on seeded corpora, and a write by
//! another process seen by the next search; keyword search bounded by document frequency.

use std::path::Path;

use conformance::testing::Xorshift;
use memory_builtin::SqliteStore;
use memory_core::store::{ChunkRecord, ChunkStore, FileRecord, Scope, SyncBatch};
use memory_core::Source;

const DIMS: usize = 384;

/// Seeded vectors for the corpus and its queries.
struct Rng(Xorshift);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(Xorshift(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Vectors clustered around a few directions, as a model's are (pure noise would make every cosine ~0).
    fn vector(&mut self, centres: &[Vec<f32>]) -> Vec<f32> {
        let c = &centres[(self.next() % centres.len() as u64) as usize];
        c.iter().map(|x| x + ((self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.6).collect()
    }

    fn noise(&mut self) -> Vec<f32> {
        (0..DIMS).map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect()
    }
}

fn file(source: Source, path: &str) -> FileRecord {
    FileRecord { source, path: path.into(), hash: format!("h-{path}"), size: 1, mtime_ms: 1 }
}

fn chunk(source: Source, path: &str, i: usize, v: Vec<f32>) -> ChunkRecord {
    ChunkRecord {
        id: format!("{path}#{i}"),
        source,
        path: path.into(),
        start_line: i + 1,
        end_line: i + 1,
        text: format!("chunk {i} of {path}"),
        hash: format!("{path}-{i}"),
        terms: format!("chunk {path}"),
        heading_terms: String::new(),
        importance: None,
        date: None,
        embedding: Some(v),
    }
}

/// `files` files of `per_file` chunks each; every 7th file is a session transcript.
fn corpus(rng: &mut Rng, centres: &[Vec<f32>], files: usize, per_file: usize, tag: &str) -> SyncBatch {
    let mut batch = SyncBatch::default();
    for f in 0..files {
        let source = if f % 7 == 3 { Source::Sessions } else { Source::Memory };
        let path = format!("memory/{tag}-{f}.md");
        let chunks = (0..per_file).map(|i| chunk(source, &path, i, rng.vector(centres))).collect();
        batch.upserts.push((file(source, &path), chunks));
    }
    batch
}

type Answer = Vec<(String, f64)>;

async fn both(store: &SqliteStore, q: &[f32], limit: usize, sources: &[Source]) -> (Answer, Answer) {
    let fast = store.vector_search(q, limit, &Scope::sources(sources)).await.unwrap();
    let exact = store.exact_vector_search(q, limit, &Scope::sources(sources)).unwrap();
    let pairs = |v: Vec<memory_core::store::Candidate>| v.into_iter().map(|c| (c.chunk_id, c.vector_score.unwrap())).collect();
    (pairs(fast), pairs(exact))
}

async fn assert_same_as_exact(store: &SqliteStore, rng: &mut Rng, centres: &[Vec<f32>], queries: usize) {
    for i in 0..queries {
        // Half the queries near the data, half pure noise (many near-ties).
        let q = if i % 2 == 0 { rng.vector(centres) } else { rng.noise() };
        for (limit, sources) in [(24, vec![]), (10, vec![Source::Sessions]), (6, vec![Source::Memory])] {
            let (fast, exact) = both(store, &q, limit, &sources).await;
            assert_eq!(fast.len(), limit, "query {i}: fewer results than asked for");
            assert_eq!(fast, exact, "query {i}, sources {sources:?}: the fast path differs from the exact scan");
        }
    }
}

#[tokio::test]
async fn answers_equal_the_exact_scan_through_writes_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("index.sqlite")).unwrap();
    let mut rng = Rng::new(0x9e3779b97f4a7c15);
    let centres: Vec<Vec<f32>> = (0..12).map(|_| rng.noise()).collect();
    store.apply(corpus(&mut rng, &centres, 300, 10, "a")).await.unwrap();
    assert_same_as_exact(&store, &mut rng, &centres, 20).await;

    // Replace some files, delete others, add new ones: the copy follows through the change log.
    let mut batch = corpus(&mut rng, &centres, 40, 10, "a");
    batch.removals = (100..160).map(|f| (if f % 7 == 3 { Source::Sessions } else { Source::Memory }, format!("memory/a-{f}.md"))).collect();
    store.apply(batch).await.unwrap();
    store.apply(corpus(&mut rng, &centres, 50, 10, "b")).await.unwrap();
    assert_same_as_exact(&store, &mut rng, &centres, 20).await;

    // A zero query vector has no cosine: no results on either path.
    let (fast, exact) = both(&store, &[0.0; DIMS], 10, &[]).await;
    assert!(fast.is_empty() && exact.is_empty());
    // A query of another width is refused, not answered.
    assert!(store.vector_search(&[1.0; 3], 10, &Scope::default()).await.is_err());
    store.close().await.unwrap();
}

/// Whether the store holds its in-memory vector copy (`memory status` shows it as `vectorCopy`).
async fn holds_copy(store: &SqliteStore) -> bool {
    store.status_details().await.unwrap().contains_key("vectorCopy")
}

/// A store's first vector search is answered by sqlite-vec's exact scan without building the copy (a one-shot
/// search never needs it), the same answer as the copy gives; the next search builds it. A source filter that
/// leaves out chunks the index holds cannot be answered that way: the copy is built at once.
#[tokio::test]
async fn the_first_vector_search_scans_the_file_and_the_next_one_builds_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let mut rng = Rng::new(5);
    let centres: Vec<Vec<f32>> = (0..6).map(|_| rng.noise()).collect();
    let mut memory_only = corpus(&mut rng, &centres, 60, 6, "m");
    memory_only.upserts.retain(|(f, _)| f.source == Source::Memory);
    SqliteStore::open(&path).unwrap().apply(memory_only).await.unwrap();
    let q = rng.vector(&centres);
    for sources in [vec![], vec![Source::Memory], vec![Source::Memory, Source::Sessions]] {
        let store = SqliteStore::open(&path).unwrap();
        let (first, exact) = both(&store, &q, 12, &sources).await;
        assert_eq!(first, exact, "{sources:?}");
        assert!(!holds_copy(&store).await, "{sources:?}: the first search built the copy");
        let (second, _) = both(&store, &q, 12, &sources).await;
        assert_eq!(second, first, "{sources:?}");
        assert!(holds_copy(&store).await, "{sources:?}: the second search did not build the copy");
    }
    // Transcripts in the index, memory asked for: sqlite-vec cannot filter inside its scan, so the copy answers.
    let writer = SqliteStore::open(&path).unwrap();
    writer.apply(corpus(&mut rng, &centres, 14, 6, "s")).await.unwrap();
    let store = SqliteStore::open(&path).unwrap();
    let (first, exact) = both(&store, &q, 12, &[Source::Memory]).await;
    assert_eq!(first, exact);
    assert!(holds_copy(&store).await);
}

#[tokio::test]
async fn a_store_opened_on_an_index_written_by_another_store_agrees_with_the_exact_scan() {
    // Writes by another connection (as another process's would be) reach this store's copy via data_version.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let reader = SqliteStore::open(&path).unwrap();
    let writer = SqliteStore::open(&path).unwrap();
    let mut rng = Rng::new(77);
    let centres: Vec<Vec<f32>> = (0..6).map(|_| rng.noise()).collect();
    writer.apply(corpus(&mut rng, &centres, 100, 8, "w")).await.unwrap();
    assert_same_as_exact(&reader, &mut rng, &centres, 6).await;
    for round in 0..5 {
        let mut batch = corpus(&mut rng, &centres, 10, 8, &format!("r{round}"));
        batch.removals.push((Source::Memory, format!("memory/w-{}.md", round * 2)));
        writer.apply(batch).await.unwrap();
        assert_same_as_exact(&reader, &mut rng, &centres, 4).await;
    }
}

const CHILD_ENV: &str = "MEMORY_VECTOR_TEST_CHILD";

/// The second process of the test below: writes one chunk whose vector is `[1, 0, 0, ...]` and deletes
/// `memory/p-0.md`, then exits.
#[tokio::test]
#[ignore = "the second process of a_write_by_a_second_process_is_seen_by_the_next_search, which runs it"]
async fn child_process_writer() {
    let path = std::env::var(CHILD_ENV).unwrap_or_else(|_| panic!("{CHILD_ENV} names the index to write (the parent test sets it)"));
    let store = SqliteStore::open(Path::new(&path)).unwrap();
    let mut v = vec![0.0; DIMS];
    v[0] = 1.0;
    let mut batch = SyncBatch::default();
    batch.upserts.push((file(Source::Memory, "memory/new.md"), vec![chunk(Source::Memory, "memory/new.md", 0, v)]));
    batch.removals.push((Source::Memory, "memory/p-0.md".into()));
    store.apply(batch).await.unwrap();
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_write_by_a_second_process_is_seen_by_the_next_search() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    let mut rng = Rng::new(4242);
    let centres: Vec<Vec<f32>> = (0..4).map(|_| rng.noise()).collect();
    store.apply(corpus(&mut rng, &centres, 50, 4, "p")).await.unwrap();
    let mut q = vec![0.0; DIMS];
    q[0] = 1.0;
    // The first search builds the in-memory copy.
    let before = store.vector_search(&q, 200, &Scope::default()).await.unwrap();
    assert!(before.iter().any(|c| c.path == "memory/p-0.md"));
    assert!(before.iter().all(|c| c.path != "memory/new.md"));

    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fast_paths::child_process_writer", "--ignored", "--test-threads", "1"])
        .env(CHILD_ENV, &path)
        .status()
        .unwrap();
    assert!(status.success(), "the writer process failed");

    let after = store.vector_search(&q, 200, &Scope::default()).await.unwrap();
    assert_eq!(after[0].path, "memory/new.md", "the other process's chunk is not the nearest");
    assert!((after[0].vector_score.unwrap() - 1.0).abs() < 1e-6);
    assert!(after.iter().all(|c| c.path != "memory/p-0.md"), "a chunk deleted by the other process was returned");
    let (fast, exact) = both(&store, &q, 200, &[]).await;
    assert_eq!(fast, exact);
}

/// Keyword search bounded by document frequency (keyword_plan.rs), on a real FTS5 index of 12,000 chunks:
/// a word in every chunk does not drown a rare one, and a query of only that word still answers, from the
/// newest chunks.
#[tokio::test]
async fn keyword_queries_of_frequent_words_stay_bounded_and_rare_words_win() {
    use memory_core::store::KeywordQuery;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("index.sqlite")).unwrap();
    let mut batch = SyncBatch::default();
    for f in 0..1200 {
        let path = format!("memory/k-{f}.md");
        let chunks = (0..10)
            .map(|i| {
                let mut c = chunk(Source::Memory, &path, i, vec![0.0; 1]);
                c.embedding = None;
                let n = f * 10 + i;
                c.terms = if n % 2500 == 7 { format!("everywhere often rareword n{n}") } else { format!("everywhere often n{n}") };
                if n == 555 {
                    c.terms.push_str(" memory.search.provider");
                }
                c
            })
            .collect();
        batch.upserts.push((file(Source::Memory, &path), chunks));
    }
    store.apply(batch).await.unwrap();
    let q = |words: &[&str]| KeywordQuery { terms: words.iter().map(std::string::ToString::to_string).collect() };
    // The rare word's five chunks come first, as unbounded BM25 ranks them.
    let hits = store.keyword_search(&q(&["everywhere", "rareword", "often"]), 10, &Scope::default()).await.unwrap();
    let rare: Vec<&str> = hits.iter().take(5).map(|c| c.text.as_str()).collect();
    assert_eq!(hits.len(), 5, "only the rare word's chunks are candidates once the frequent words are bounded: {rare:?}");
    assert!(hits.iter().all(|c| c.keyword_score.unwrap() > 0.0));
    // Only frequent words: still a full answer, from the newest chunks.
    let hits = store.keyword_search(&q(&["everywhere", "often"]), 10, &Scope::default()).await.unwrap();
    assert_eq!(hits.len(), 10);
    let newest: Vec<&str> = hits.iter().map(|c| c.path.as_str()).collect();
    assert!(newest.iter().all(|p| p.trim_start_matches("memory/k-").trim_end_matches(".md").parse::<usize>().unwrap() >= 400), "{newest:?}");
    // A term FTS5 indexes as several tokens (no vocabulary entry of its own) is counted, found, and not cut by
    // the newest-chunks window (chunk 555 is among the oldest).
    let hits = store.keyword_search(&q(&["everywhere", "memory.search.provider"]), 10, &Scope::default()).await.unwrap();
    assert_eq!(hits.first().map(|c| c.path.as_str()), Some("memory/k-55.md"));
    // A small query is untouched: an id finds its one chunk.
    let hits = store.keyword_search(&q(&["n42"]), 10, &Scope::default()).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].path, "memory/k-4.md");
}

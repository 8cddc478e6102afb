//! Hybrid-search benchmark of the LanceDB store: p50/p99 latency with exact vector search and with an ANN
//! index, recall@10 of ANN against exact, and the index build time.
//!
//! ```text
//! cargo run --release -p memory-rs-lancedb --example ann_bench -- --rows 100000 [--rows 1000000] \
//!     [--dims 384] [--queries 200] [--dir /tmp/lancedb-bench] [--keep] [--reuse] \
//!     [--index ivf-flat|hnsw-sq|hnsw-flat|ivf-pq|ivf-pq:48]... [--partition-size 4096]... \
//!     [--nprobes 0]... [--refine 0]... [--ef 0]... [--skip-exact] [--steps]      (nprobes 0: automatic)
//! ann_bench --grow --rows N     (the engine's own maintenance: index trained and retrained as the table grows)
//! ```
//!
//! Data: `rows` chunks with seeded 384-dimensional vectors drawn around 2,000 random centres (clustered, as
//! text embeddings are) and ~40 seeded words each from a 20,000-word Zipf vocabulary for the keyword side.
//! Queries: a perturbed copy of a random stored vector plus three of its chunk's words. One "hybrid search" is
//! what the engine does per query: keyword and vector candidates (24 each, concurrently) merged by the
//! shared ranking pipeline. Keyword-only and vector-only latencies are printed too, to show which side costs.
//! Every combination of index kind x partition size is built, and every nprobes x refine x ef is measured on
//! it. `--reuse` keeps an ingested table from an earlier `--keep` run; without `--keep` the data is deleted.
//! The exact top 10 of each query is kept beside a kept table, so `--reuse --skip-exact` (no exact-search
//! latency) goes straight to the ANN runs; `--steps` also times the parts of one search. `--grow` instead
//! ingests with the engine's default options, so the vector index is trained and retrained by the engine's
//! maintenance while the table grows (as in real use), then measures search on what that left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use memory_core::ranking::{rank, RankingOptions};
use memory_core::store::{ChunkRecord, ChunkStore, FileRecord, KeywordQuery, Scope, SyncBatch};
use memory_core::Source;
use memory_lancedb::{AnnIndexKind, LanceDbOptions, LanceDbStorage, LanceStore};

struct Args {
    rows: Vec<usize>,
    dims: usize,
    queries: usize,
    dir: std::path::PathBuf,
    keep: bool,
    reuse: bool,
    skip_exact: bool,
    steps: bool,
    grow: bool,
    indexes: Vec<AnnIndexKind>,
    partition_sizes: Vec<usize>,
    nprobes: Vec<usize>,
    refine: Vec<u32>,
    ef: Vec<usize>,
}

fn parse_index(s: &str) -> AnnIndexKind {
    match s.split_once(':') {
        None if s == "hnsw-sq" => AnnIndexKind::IvfHnswSq,
        None if s == "ivf-pq" => AnnIndexKind::IvfPq { sub_vectors: 0 },
        None if s == "ivf-flat" => AnnIndexKind::IvfFlat,
        None if s == "hnsw-flat" => AnnIndexKind::IvfHnswFlat,
        Some(("ivf-pq", n)) => AnnIndexKind::IvfPq { sub_vectors: n.parse().expect("ivf-pq:<sub vectors>") },
        _ => panic!("--index hnsw-sq | hnsw-flat | ivf-flat | ivf-pq | ivf-pq:<sub vectors>"),
    }
}

fn args() -> Args {
    let mut a = Args {
        rows: Vec::new(),
        dims: 384,
        queries: 200,
        dir: std::env::temp_dir().join("lancedb-bench"),
        keep: false,
        reuse: false,
        skip_exact: false,
        steps: false,
        grow: false,
        indexes: Vec::new(),
        partition_sizes: Vec::new(),
        nprobes: Vec::new(),
        refine: Vec::new(),
        ef: Vec::new(),
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        // Switches take no value.
        let switch = match v[i].as_str() {
            "--keep" => Some(&mut a.keep),
            "--reuse" => Some(&mut a.reuse),
            "--skip-exact" => Some(&mut a.skip_exact),
            "--steps" => Some(&mut a.steps),
            "--grow" => Some(&mut a.grow),
            _ => None,
        };
        if let Some(on) = switch {
            *on = true;
            i += 1;
            continue;
        }
        let val = v.get(i + 1).cloned().unwrap_or_default();
        match v[i].as_str() {
            "--rows" => a.rows.push(val.parse().expect("--rows N")),
            "--dims" => a.dims = val.parse().expect("--dims N"),
            "--queries" => a.queries = val.parse().expect("--queries N"),
            "--dir" => a.dir = val.into(),
            "--index" => a.indexes.push(parse_index(&val)),
            "--partition-size" => a.partition_sizes.push(val.parse().expect("--partition-size N")),
            "--nprobes" => a.nprobes.push(val.parse().expect("--nprobes N")),
            "--refine" => a.refine.push(val.parse().expect("--refine N")),
            "--ef" => a.ef.push(val.parse().expect("--ef N")),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    let d = LanceDbOptions::default();
    if a.rows.is_empty() {
        a.rows = vec![100_000];
    }
    if a.indexes.is_empty() {
        a.indexes = vec![d.ann_index];
    }
    if a.partition_sizes.is_empty() {
        a.partition_sizes = vec![d.ann_partition_size];
    }
    if a.nprobes.is_empty() {
        a.nprobes = vec![0, 4, 16]; // 0: the engine's automatic choice
    }
    if a.refine.is_empty() {
        a.refine = vec![d.refine_factor];
    }
    if a.ef.is_empty() {
        a.ef = vec![d.hnsw_ef];
    }
    a
}

/// xorshift64*: seeded, fast, good enough for synthetic data.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.unit().max(1e-12), self.unit());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
    fn zipf_word(&mut self, vocab: usize) -> usize {
        // Inverse-CDF approximation of Zipf(1): rank ~ vocab^u.
        ((vocab as f64).powf(self.unit()) as usize).saturating_sub(1).min(vocab - 1)
    }
}

const CENTRES: usize = 2000;
const VOCAB: usize = 20_000;
const WORDS: usize = 40;

struct Gen {
    dims: usize,
    centres: Vec<Vec<f32>>,
}

impl Gen {
    fn new(dims: usize) -> Gen {
        let mut r = Rng(42);
        let centres = (0..CENTRES).map(|_| (0..dims).map(|_| r.gauss()).collect()).collect();
        Gen { dims, centres }
    }
    fn vector(&self, i: u64) -> Vec<f32> {
        let mut r = Rng(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let c = &self.centres[(r.next() % CENTRES as u64) as usize];
        let mut v: Vec<f32> = (0..self.dims).map(|d| c[d] + 0.6 * r.gauss()).collect();
        memory_core::embedding::sanitize_and_normalize(&mut v);
        v
    }
    fn words(&self, i: u64) -> Vec<String> {
        let mut r = Rng(i ^ 0xABCD_EF01_2345_6789);
        (0..WORDS).map(|_| format!("w{}", r.zipf_word(VOCAB))).collect()
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

async fn ingest(store: &LanceStore, gen: &Gen, rows: usize) {
    const PER_FILE: usize = 500;
    const FILES_PER_BATCH: usize = 40;
    let started = Instant::now();
    let mut i = 0usize;
    let mut f = 0usize;
    while i < rows {
        let mut batch = SyncBatch::default();
        for _ in 0..FILES_PER_BATCH {
            if i >= rows {
                break;
            }
            let path = format!("memory/bench/{f:06}.md");
            let n = PER_FILE.min(rows - i);
            let chunks: Vec<ChunkRecord> = (i..i + n)
                .map(|k| {
                    let text = gen.words(k as u64).join(" ");
                    ChunkRecord {
                        id: format!("c{k}"),
                        source: Source::Memory,
                        path: path.clone(),
                        start_line: k - i + 1,
                        end_line: k - i + 1,
                        hash: format!("{k:x}"),
                        terms: text.clone(),
                        heading_terms: String::new(),
                        text,
                        importance: None,
                        date: None,
                        embedding: Some(gen.vector(k as u64)),
                    }
                })
                .collect();
            let file = FileRecord { source: Source::Memory, path, hash: format!("f{f}"), size: n as u64, mtime_ms: 0 };
            batch.upserts.push((file, chunks));
            i += n;
            f += 1;
        }
        store.apply(batch).await.expect("apply");
        eprint!("\r  ingested {i}/{rows}");
    }
    eprintln!("\r  ingested {rows} rows in {:.1} s", started.elapsed().as_secs_f64());
}

struct Query {
    vector: Vec<f32>,
    terms: Vec<String>,
    text: String,
}

fn queries(gen: &Gen, rows: usize, n: usize) -> Vec<Query> {
    let mut r = Rng(7);
    (0..n)
        .map(|_| {
            let k = r.next() % rows as u64;
            let mut v = gen.vector(k);
            for x in &mut v {
                *x += 0.02 * r.gauss();
            }
            memory_core::embedding::sanitize_and_normalize(&mut v);
            let words = gen.words(k);
            let terms: Vec<String> = (0..3).map(|j| words[(j * 13 + 5) % WORDS].clone()).collect();
            Query { vector: v, text: terms.join(" "), terms }
        })
        .collect()
}

/// One engine search: keyword + vector candidates concurrently, then the shared ranking.
async fn hybrid(store: &LanceStore, q: &Query, opts: &RankingOptions) -> Vec<String> {
    let limit = RankingOptions::candidate_limit(opts.max_results, 4);
    let kq = KeywordQuery { terms: q.terms.clone() };
    let all = Scope::default();
    let (k, v) = tokio::join!(store.keyword_search(&kq, limit, &all), store.vector_search(&q.vector, limit, &all));
    let results = rank(k.expect("keyword"), v.expect("vector"), Vec::new(), &memory_core::ranking::Query::parse(&q.text), opts);
    results.into_iter().map(|r| format!("{}:{}", r.path, r.start_line)).collect()
}

/// p50/p99 in ms of `f` over the queries (after a few warm-up calls).
async fn timed<'a, F, Fut>(qs: &'a [Query], f: F) -> (f64, f64)
where
    F: Fn(&'a Query) -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    for q in qs.iter().take(5) {
        f(q).await;
    }
    let mut t = Vec::with_capacity(qs.len());
    for q in qs {
        let s = Instant::now();
        std::hint::black_box(f(q).await);
        t.push(s.elapsed());
    }
    t.sort();
    (pct(&t, 0.5), pct(&t, 0.99))
}

async fn latency(store: &LanceStore, qs: &[Query], opts: &RankingOptions) -> (f64, f64) {
    timed(qs, |q| async move { hybrid(store, q, opts).await.len() }).await
}

async fn keyword_latency(store: &LanceStore, qs: &[Query], limit: usize) -> (f64, f64) {
    timed(
        qs,
        |q| async move { store.keyword_search(&KeywordQuery { terms: q.terms.clone() }, limit, &Scope::default()).await.expect("keyword").len() },
    )
    .await
}

async fn vector_latency(store: &LanceStore, qs: &[Query], limit: usize) -> (f64, f64) {
    timed(qs, |q| async move { store.vector_search(&q.vector, limit, &Scope::default()).await.expect("vector").len() }).await
}

async fn top10(store: &LanceStore, q: &Query) -> Vec<String> {
    store.vector_search(&q.vector, 10, &Scope::default()).await.expect("vector").into_iter().map(|c| c.chunk_id).collect()
}

/// Exact top 10 ids, bypassing any index.
async fn exact_top10(table: &lancedb::Table, q: &Query) -> Vec<String> {
    let batches: Vec<arrow_array::RecordBatch> = table
        .query()
        .nearest_to(q.vector.as_slice())
        .unwrap()
        .column("vector")
        .distance_type(lancedb::DistanceType::Cosine)
        .bypass_vector_index()
        .limit(10)
        .only_if("kind = 'chunk'")
        .select(Select::columns(&["id"]))
        .execute()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in batches {
        let ids = b.column_by_name("id").unwrap().as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
        out.extend((0..b.num_rows()).map(|i| ids.value(i).to_string()));
    }
    out
}

/// Exact top 10 per query, read from `cache` when an earlier run of the same table and queries wrote it.
async fn exact_truth(table: &lancedb::Table, qs: &[Query], cache: &std::path::Path) -> Vec<Vec<String>> {
    if let Ok(text) = std::fs::read_to_string(cache) {
        let rows: Vec<Vec<String>> = text.lines().map(|l| l.split(' ').filter(|s| !s.is_empty()).map(String::from).collect()).collect();
        if rows.len() == qs.len() {
            println!("  exact top 10 of each query read from {}", cache.display());
            return rows;
        }
    }
    let mut truth = Vec::with_capacity(qs.len());
    for q in qs {
        truth.push(exact_top10(table, q).await);
    }
    let text: String = truth.iter().map(|t| t.join(" ") + "\n").collect();
    if let Err(e) = std::fs::write(cache, text) {
        eprintln!("  (could not keep the exact results in {}: {e})", cache.display());
    }
    truth
}

/// p50 in ms of one raw LanceDB query shape over the queries.
async fn raw_p50<'a, F, Fut>(qs: &'a [Query], f: F) -> f64
where
    F: Fn(&'a Query) -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    timed(qs, f).await.0
}

/// Where the time of one search goes: fixed costs, the vector query with and without the refine step and the
/// wide candidate columns, the keyword query on one column and on both.
async fn steps(store: &LanceStore, table: &lancedb::Table, qs: &[Query], limit: usize, np: usize, refine: u32) {
    use lancedb::index::scalar::{FullTextSearchQuery, MatchQuery, MultiMatchQuery, Operator};
    let rows = |b: Vec<arrow_array::RecordBatch>| b.iter().map(arrow_array::RecordBatch::num_rows).sum::<usize>();
    let schema = raw_p50(qs, |_| async move { table.schema().await.unwrap().fields().len() }).await;
    let point = raw_p50(qs, |_| async move {
        let q = table.query().only_if("id = 'c17'").select(Select::columns(&["id"])).limit(1);
        rows(q.execute().await.unwrap().try_collect().await.unwrap())
    })
    .await;
    let vec_q = |q: &Query, cols: &'static [&'static str], refine: u32| {
        let mut v = table.query().nearest_to(q.vector.as_slice()).unwrap().column("vector");
        v = v.distance_type(lancedb::DistanceType::Cosine).limit(limit).select(Select::columns(cols));
        v = v.nprobes(np).unwrap();
        if refine > 0 {
            v = v.refine_factor(refine);
        }
        v
    };
    // What a search selects to build candidates: the card column, or the eight columns of older tables.
    let has_card = table.schema().await.unwrap().field_with_name("card").is_ok();
    let cols: &'static [&'static str] =
        if has_card { &["card"] } else { &["id", "source", "path", "start_line", "end_line", "text", "importance", "mtime_ms"] };
    let v_id = raw_p50(qs, |q| async move { rows(vec_q(q, &["id"], refine).execute().await.unwrap().try_collect().await.unwrap()) }).await;
    let v_id0 = raw_p50(qs, |q| async move { rows(vec_q(q, &["id"], 0).execute().await.unwrap().try_collect().await.unwrap()) }).await;
    let v_all = raw_p50(qs, |q| async move { rows(vec_q(q, cols, refine).execute().await.unwrap().try_collect().await.unwrap()) }).await;
    let v_all0 = raw_p50(qs, |q| async move { rows(vec_q(q, cols, 0).execute().await.unwrap().try_collect().await.unwrap()) }).await;
    let k_one = raw_p50(qs, |q| async move {
        let m = MatchQuery::new(q.terms.join(" ")).with_column(Some("terms".into())).with_operator(Operator::Or);
        let f = FullTextSearchQuery::new_query(m.into());
        rows(table.query().full_text_search(f).limit(limit).select(Select::columns(&["id"])).execute().await.unwrap().try_collect().await.unwrap())
    })
    .await;
    let k_two = raw_p50(qs, |q| async move {
        let m = MultiMatchQuery::try_new(q.terms.join(" "), vec!["terms".into(), "heading_terms".into()]).unwrap().with_operator(Operator::Or);
        let f = FullTextSearchQuery::new_query(m.into());
        rows(table.query().full_text_search(f).limit(limit).select(Select::columns(&["id"])).execute().await.unwrap().try_collect().await.unwrap())
    })
    .await;
    let k_engine = keyword_latency(store, qs, limit).await.0;
    println!("      steps (p50 ms): schema {schema:.2}, point lookup {point:.2}; vector id-only refine {refine} {v_id:.2}, refine 0 {v_id0:.2}, candidate columns ({}) {v_all:.2} (refine 0: {v_all0:.2}); keyword one column {k_one:.2}, two columns {k_two:.2}, engine {k_engine:.2}", cols.len());
}

/// Ingest with the engine's own maintenance (index trained as the table grows), then measure search.
async fn grow(a: &Args, gen: &Gen, rows: usize, ropts: &RankingOptions) {
    let dir = a.dir.join(format!("grow-{rows}-d{}", a.dims));
    let truth_file = dir.join(format!("truth-{}.txt", a.queries));
    let kept_truth = std::fs::read(&truth_file).ok();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(t) = kept_truth {
        std::fs::write(&truth_file, t).unwrap();
    }
    println!("== {rows} chunks x {} dims, grown with the engine's maintenance ({} queries)", a.dims, a.queries);
    // Engine defaults; only old versions are pruned at once (disk space).
    let opts = LanceDbOptions { prune_older_than: Duration::ZERO, ..Default::default() };
    let (storage, store) = open(&dir, opts).await;
    let s = Instant::now();
    ingest(&store, gen, rows).await;
    println!("  ingest including the engine's index trainings: {:.1} s", s.elapsed().as_secs_f64());
    let (trained_on, partitions) = store.ann_build().await.unwrap().expect("no vector index was trained");
    println!(
        "  vector index: last trained on {trained_on} vectors, {partitions} partitions; automatic nprobes {}",
        memory_lancedb::auto_nprobes(Some(partitions))
    );
    let table = storage.connection().open_table("bench_g1").execute().await.unwrap();
    let st = table.stats().await.unwrap();
    println!("  table: {} rows in {} fragments ({} small)", st.num_rows, st.fragment_stats.num_fragments, st.fragment_stats.num_small_fragments);
    for i in table.list_indices().await.unwrap() {
        if let Some(x) = table.index_stats(&i.name).await.unwrap() {
            println!(
                "  index {} on {:?}: {:?}, {:?} segments, {} rows indexed, {} not",
                i.name, i.columns, x.index_type, x.num_indices, x.num_indexed_rows, x.num_unindexed_rows
            );
        }
    }
    let qs = queries(gen, rows, a.queries);
    let truth = exact_truth(&table, &qs, &truth_file).await;
    let mut hit = 0usize;
    for (q, t) in qs.iter().zip(&truth) {
        hit += top10(&store, q).await.iter().filter(|id| t.contains(id)).count();
    }
    let recall = hit as f64 / (10 * qs.len()) as f64;
    let limit = RankingOptions::candidate_limit(ropts.max_results, 4);
    let (p50, p99) = latency(&store, &qs, ropts).await;
    let (k50, _) = keyword_latency(&store, &qs, limit).await;
    let (v50, _) = vector_latency(&store, &qs, limit).await;
    println!("  hybrid p50 {p50:.1} ms  p99 {p99:.1} ms  (keyword side {k50:.1} ms, vector side {v50:.1} ms)  recall@10 {recall:.3}");
    if a.steps {
        steps(&store, &table, &qs, limit, memory_lancedb::auto_nprobes(Some(partitions)), 0).await;
    }
    drop((store, table, storage));
    if !a.keep {
        std::fs::remove_dir_all(&dir).ok();
    }
}

async fn open(dir: &std::path::Path, opts: LanceDbOptions) -> (LanceDbStorage, Arc<LanceStore>) {
    let storage = LanceDbStorage::connect(dir.to_str().unwrap(), &Default::default(), "bench", opts).await.unwrap();
    let store = storage.open_live_store().await.unwrap();
    (storage, store)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    let gen = Gen::new(a.dims);
    let mut config = memory_core::Config::default();
    config.memory.search.query.min_score = 0.0;
    let ropts = RankingOptions::from_config(&config, None, None);
    let limit = RankingOptions::candidate_limit(ropts.max_results, 4);
    println!("profile: {}", if cfg!(debug_assertions) { "debug" } else { "release" });
    for &rows in &a.rows {
        if a.grow {
            grow(&a, &gen, rows, &ropts).await;
            continue;
        }
        let dir = a.dir.join(format!("rows-{rows}-d{}", a.dims));
        println!("== {rows} chunks x {} dims ({} queries, {} candidates per side)", a.dims, a.queries, limit);
        // No ANN index during ingest; old versions pruned at once (disk space).
        let base = LanceDbOptions { ann_min_rows: usize::MAX, nprobes: 0, refine_factor: 0, prune_older_than: Duration::ZERO, ..Default::default() };
        let reused = a.reuse && dir.exists();
        if !reused {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let (storage, store) = open(&dir, base.clone()).await;
        let table = if reused {
            let t = storage.connection().open_table("bench_g1").execute().await.expect("--reuse: no table to reuse");
            let n = t.count_rows(Some("kind = 'chunk'".into())).await.unwrap();
            assert_eq!(n, rows, "--reuse: the kept table has {n} chunks");
            println!("  reusing the ingested table in {}", dir.display());
            t
        } else {
            ingest(&store, &gen, rows).await;
            let s = Instant::now();
            store.optimize_now().await.unwrap();
            println!("  optimize (compaction + FTS/id indices): {:.1} s", s.elapsed().as_secs_f64());
            storage.connection().open_table("bench_g1").execute().await.unwrap()
        };
        let qs = queries(&gen, rows, a.queries);
        // Exact search: drop any ANN index a reused table carries.
        for i in table.list_indices().await.unwrap() {
            if i.columns.iter().any(|c| c == "vector") {
                table.drop_index(&i.name).await.unwrap();
            }
        }
        let (_s, exact) = open(&dir, base.clone()).await;
        if !a.skip_exact {
            let (p50, p99) = latency(&exact, &qs, &ropts).await;
            println!("  hybrid search, exact vectors:   p50 {p50:.1} ms  p99 {p99:.1} ms");
            let (k50, k99) = keyword_latency(&exact, &qs, limit).await;
            let (v50, v99) = vector_latency(&exact, &qs, limit).await;
            println!("    keyword side alone: p50 {k50:.1} ms  p99 {k99:.1} ms; exact vector side alone: p50 {v50:.1} ms  p99 {v99:.1} ms");
        }
        let truth = exact_truth(&table, &qs, &dir.join(format!("truth-{}.txt", qs.len()))).await;
        for &kind in &a.indexes {
            for &psize in &a.partition_sizes {
                let idx_opts = LanceDbOptions { ann_min_rows: 0, ann_index: kind, ann_partition_size: psize, ..Default::default() };
                let s = Instant::now();
                let (_st, trainer) = open(&dir, idx_opts.clone()).await;
                let (_, partitions) = trainer.train_ann_index_now().await.unwrap();
                println!("  ANN index {kind:?}, {partitions} partitions (~{psize} vectors each): built in {:.1} s", s.elapsed().as_secs_f64());
                for &np in &a.nprobes {
                    for &refine in &a.refine {
                        for &ef in &a.ef {
                            // nprobes 0: the engine's automatic choice (printed as auto=N).
                            let opts = LanceDbOptions { nprobes: np, refine_factor: refine, hnsw_ef: ef, ..idx_opts.clone() };
                            let np_label = if np == 0 { format!("auto={}", memory_lancedb::auto_nprobes(Some(partitions))) } else { np.to_string() };
                            let (_st, ann) = open(&dir, opts).await;
                            let mut hit = 0usize;
                            for (q, t) in qs.iter().zip(&truth) {
                                let got = top10(&ann, q).await;
                                hit += got.iter().filter(|id| t.contains(id)).count();
                            }
                            let recall = hit as f64 / (10 * qs.len()) as f64;
                            let (p50, p99) = latency(&ann, &qs, &ropts).await;
                            let (v50, _) = vector_latency(&ann, &qs, limit).await;
                            println!(
                                "    nprobes={np_label} refine={refine} ef={ef}: hybrid p50 {p50:.1} ms  p99 {p99:.1} ms  (vector side p50 {v50:.1} ms)  recall@10 {recall:.3}"
                            );
                            if a.steps {
                                steps(&ann, &table, &qs, limit, if np == 0 { memory_lancedb::auto_nprobes(Some(partitions)) } else { np }, refine)
                                    .await;
                            }
                        }
                    }
                }
            }
        }
        drop((store, exact, table, storage));
        if !a.keep {
            std::fs::remove_dir_all(&dir).ok();
        }
    }
}

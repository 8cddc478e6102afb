//! Index maintenance of a [`LanceStore`]: the full-text index, the vector (ANN) index and its retraining as the
//! table grows, compaction and version pruning. The store's reads and writes are in `mod.rs`.

use memory_core::locks::LockExt;
use std::time::{Duration, Instant};

use arrow_schema::Schema;
use lancedb::index::scalar::FtsIndexBuilder;
use lancedb::index::vector::{IvfFlatIndexBuilder, IvfHnswFlatIndexBuilder, IvfHnswSqIndexBuilder, IvfPqIndexBuilder};
use lancedb::index::{Index, IndexType};
use lancedb::table::OptimizeAction;
use lancedb::{DistanceType, Table};
use memory_core::{MemoryError, Result};
use tracing::info;

use super::{LanceStore, Which, WriteState};
use crate::schema::*;

/// Meta key of the vector index's build record ([`AnnBuild`]).
const META_ANN: &str = "ann_index";
/// The vector index is retrained once the vectors have grown by half since its training: LanceDB's index
/// catch-up adds rows to the existing partitions, so an index trained on a small table would otherwise hold a
/// table many times larger in a handful of huge partitions, and every search would scan them all. By half rather
/// than double: an IVF-FLAT search costs the vectors it scans, so partitions grown to twice their size make each
/// search slower, while retraining at every half adds up, over the whole growth, to a small multiple of the last
/// training (the trainings grow geometrically).
fn ann_retrain_at(trained_on: usize) -> usize {
    trained_on.saturating_add(trained_on / 2)
}
/// How often a store re-reads the vector index's build record (another host may have retrained it).
const ANN_CHECK: Duration = Duration::from_secs(60);
impl LanceStore {
    /// FTS on the analysed terms (and headings) with a plain whitespace tokenizer: no stemming, stop words or
    /// folding here, since [`memory_core::analysis`] already did exactly that for every engine.
    pub(super) async fn ensure_fts(&self, t: &Table) -> Result<()> {
        let ready = self.known.locked().fts_ready;
        if ready {
            return Ok(());
        }
        let existing = t.list_indices().await.map_err(|e| self.err("list indices", e))?;
        let has = |c: &str| existing.iter().any(|i| i.index_type == IndexType::FTS && i.columns.iter().any(|x| x == c));
        let chunks = t.count_rows(Some(format!("{COL_KIND} = '{KIND_CHUNK}'"))).await.map_err(|e| self.err("count", e))?;
        if chunks == 0 {
            return Ok(());
        }
        if !existing.iter().any(|i| i.columns.iter().any(|c| c == COL_ID)) {
            // Lets merge_insert look ids up instead of scanning the table.
            t.create_index(&[COL_ID], Index::BTree(Default::default())).execute().await.map_err(|e| self.err("create id index", e))?;
        }
        for column in [COL_TERMS, COL_HEADING] {
            if has(column) {
                continue;
            }
            let started = Instant::now();
            let params = FtsIndexBuilder::default()
                .base_tokenizer("whitespace".into())
                .lower_case(false)
                .stem(false)
                .remove_stop_words(false)
                .ascii_folding(false)
                .max_token_length(None)
                .with_position(false);
            t.create_index(&[column], Index::FTS(params)).execute().await.map_err(|e| self.err(&format!("create full-text index on {column}"), e))?;
            info!(column, rows = chunks, ms = started.elapsed().as_millis() as u64, "full-text index created");
        }
        self.known.locked().fts_ready = true;
        Ok(())
    }

    /// ANN index once the table passes the size where an exact scan gets slow, retrained each time the vectors
    /// have grown past [`ann_retrain_at`] of the last training (partitions stay near `ann_partition_size`).
    /// Counting vectors reads a column, so it only happens once the table has grown by at least the rows
    /// still missing; the row count itself is metadata.
    pub(super) async fn ensure_ann(&self, t: &Table, schema: &Schema) -> Result<()> {
        if vector_dims(schema).is_none() {
            return Ok(());
        }
        let opts = &self.shared.options;
        let rows = t.count_rows(None).await.map_err(|e| self.err("count rows", e))?;
        let (known, recheck) = {
            let k = self.known.locked();
            (k.ann, k.ann_recheck_rows)
        };
        if rows < opts.ann_min_rows || recheck.is_some_and(|at| rows < at) {
            return Ok(());
        }
        let build = match known {
            Some(b) => Some(b),
            None => self.read_ann_build().await?,
        };
        let existing = t.list_indices().await.map_err(|e| self.err("list indices", e))?;
        let indexed = existing.iter().any(|i| i.columns.iter().any(|c| c == COL_VECTOR));
        let vectors = t.count_rows(Some(format!("{COL_VECTOR} IS NOT NULL"))).await.map_err(|e| self.err("count vectors", e))?;
        // An index without a training record predates it: retrain once so its partitions are known.
        let wanted = match build {
            Some(b) if indexed => ann_retrain_at(b.rows),
            _ => opts.ann_min_rows,
        };
        if vectors < wanted {
            self.known.locked().ann_recheck_rows = Some(rows + (wanted - vectors));
            return Ok(());
        }
        self.train_ann(t, vectors, indexed).await?;
        self.known.locked().ann_recheck_rows = Some(rows + (ann_retrain_at(vectors) - vectors));
        Ok(())
    }

    /// Train the vector index on the table's `vectors` vectors now and keep its build record.
    pub(super) async fn train_ann(&self, t: &Table, vectors: usize, retrained: bool) -> Result<AnnBuild> {
        let opts = &self.shared.options;
        let started = Instant::now();
        create_ann_index(t, vectors, opts).await.map_err(|e| self.err("create vector index", e))?;
        let b = AnnBuild { rows: vectors, partitions: ann_partitions(vectors, opts) };
        self.meta_put(META_ANN, &serde_json::to_string(&b).expect("ann build serialises")).await?;
        info!(
            vectors,
            partitions = b.partitions,
            kind = ?opts.ann_index,
            retrained,
            ms = started.elapsed().as_millis() as u64,
            "vector index built"
        );
        let mut k = self.known.locked();
        k.ann = Some(b);
        k.ann_checked = Some(Instant::now());
        Ok(b)
    }

    /// Train (or retrain) the vector index now with this store's options, whatever the table's size; returns
    /// (vectors, partitions). The benchmark uses it; the engine trains on its own as the table grows.
    pub async fn train_ann_index_now(&self) -> Result<(usize, usize)> {
        let _w = self.writer.lock().await;
        let Some(t) = self.table(Which::Data).await? else { return Err(MemoryError::Unavailable("no data table yet".into())) };
        let vectors = t.count_rows(Some(format!("{COL_VECTOR} IS NOT NULL"))).await.map_err(|e| self.err("count vectors", e))?;
        let b = self.train_ann(&t, vectors, true).await?;
        Ok((b.rows, b.partitions))
    }

    pub(super) async fn read_ann_build(&self) -> Result<Option<AnnBuild>> {
        let b = match self.meta_get(META_ANN).await? {
            Some(json) => Some(
                serde_json::from_str::<AnnBuild>(&json)
                    .map_err(|e| MemoryError::CorruptIndex(format!("lancedb at {}: unreadable vector index record: {e}", self.shared.location)))?,
            ),
            None => None,
        };
        let mut k = self.known.locked();
        k.ann = b;
        k.ann_checked = Some(Instant::now());
        Ok(b)
    }

    /// IVF partitions a vector search probes: the configured number, else [`auto_nprobes`] of the index's
    /// partitions (its build record is re-read now and then, since another host may retrain it).
    pub(super) async fn nprobes(&self) -> Result<usize> {
        let opts = &self.shared.options;
        if opts.nprobes > 0 {
            return Ok(opts.nprobes);
        }
        let (known, checked) = {
            let k = self.known.locked();
            (k.ann, k.ann_checked)
        };
        let build = if checked.is_some_and(|c| c.elapsed() < ANN_CHECK) { known } else { self.read_ann_build().await? };
        Ok(auto_nprobes(build.map(|b| b.partitions)))
    }

    /// Compaction, index catch-up and pruning of old versions, after enough writes.
    pub(super) async fn maintain(&self, t: &Table, schema: &Schema, state: &mut WriteState) -> Result<()> {
        self.ensure_fts(t).await?;
        self.ensure_ann(t, schema).await?;
        let opts = &self.shared.options;
        if state.rows_since_optimize < opts.optimize_after_rows && state.commits_since_optimize < opts.optimize_after_commits {
            return Ok(());
        }
        optimize_table(t, opts.prune_older_than).await.map_err(|e| self.err("optimize", e))?;
        state.rows_since_optimize = 0;
        state.commits_since_optimize = 0;
        Ok(())
    }

    /// Run maintenance now regardless of the write counters (the benchmark and tests use it).
    pub async fn optimize_now(&self) -> Result<()> {
        let mut state = self.writer.lock().await;
        let Some(t) = self.table(Which::Data).await? else { return Ok(()) };
        let schema = self.data_schema_of(&t).await?;
        state.rows_since_optimize = usize::MAX / 2;
        self.maintain(&t, &schema, &mut state).await
    }

    /// Number of versions the data table keeps (tests check pruning).
    pub async fn data_versions(&self) -> Result<usize> {
        let Some(t) = self.table(Which::Data).await? else { return Ok(0) };
        Ok(t.list_versions().await.map_err(|e| self.err("list versions", e))?.len())
    }

    /// Vectors and partitions the ANN index was last trained on, from its build record (tests and status).
    pub async fn ann_build(&self) -> Result<Option<(usize, usize)>> {
        Ok(self.read_ann_build().await?.map(|b| (b.rows, b.partitions)))
    }

    /// Segments of the vector index (base plus deltas), if it exists (tests and status).
    pub async fn vector_index_segments(&self) -> Result<Option<usize>> {
        let Some(t) = self.table(Which::Data).await? else { return Ok(None) };
        for i in t.list_indices().await.map_err(|e| self.err("list indices", e))? {
            if i.columns.iter().any(|c| c == COL_VECTOR) {
                let stats = t.index_stats(&i.name).await.map_err(|e| self.err("index stats", e))?;
                return Ok(Some(stats.and_then(|s| s.num_indices).unwrap_or(1) as usize));
            }
        }
        Ok(None)
    }

    /// Names of the data table's indices (tests and status).
    pub async fn index_names(&self) -> Result<Vec<(String, String)>> {
        let Some(t) = self.table(Which::Data).await? else { return Ok(Vec::new()) };
        let list = t.list_indices().await.map_err(|e| self.err("list indices", e))?;
        Ok(list.into_iter().map(|i| (i.columns.join(","), format!("{:?}", i.index_type))).collect())
    }
}

/// Build (or rebuild) the ANN index on the vector column of a data table: [`crate::AnnIndexKind`] with cosine
/// distance, `rows / options.ann_partition_size` partitions. The engine calls it once the table passes
/// [`crate::LanceDbOptions::ann_min_rows`]; the benchmark calls it directly.
pub async fn create_ann_index(t: &Table, rows: usize, opts: &crate::LanceDbOptions) -> lancedb::Result<()> {
    let partitions = ann_partitions(rows, opts) as u32;
    let index = match opts.ann_index {
        crate::AnnIndexKind::IvfHnswSq => {
            Index::IvfHnswSq(IvfHnswSqIndexBuilder::default().distance_type(DistanceType::Cosine).num_partitions(partitions))
        }
        crate::AnnIndexKind::IvfPq { sub_vectors } => {
            let mut b = IvfPqIndexBuilder::default().distance_type(DistanceType::Cosine).num_partitions(partitions);
            if sub_vectors > 0 {
                b = b.num_sub_vectors(sub_vectors);
            }
            Index::IvfPq(b)
        }
        crate::AnnIndexKind::IvfFlat => Index::IvfFlat(IvfFlatIndexBuilder::default().distance_type(DistanceType::Cosine).num_partitions(partitions)),
        crate::AnnIndexKind::IvfHnswFlat => {
            Index::IvfHnswFlat(IvfHnswFlatIndexBuilder::default().distance_type(DistanceType::Cosine).num_partitions(partitions))
        }
    };
    t.create_index(&[COL_VECTOR], index).replace(true).execute().await
}

/// What the vector index was trained on; kept in the meta table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct AnnBuild {
    pub(super) rows: usize,
    pub(super) partitions: usize,
}

/// IVF partitions for an index over `rows` vectors.
pub fn ann_partitions(rows: usize, opts: &crate::LanceDbOptions) -> usize {
    (rows / opts.ann_partition_size.max(1)).clamp(1, 4096)
}

/// Partitions probed when `nprobes` is not set: [`crate::AUTO_NPROBES_FRACTION`] of them, at least
/// [`crate::AUTO_NPROBES_MIN`] (LanceDB's default of 20 when the partition count is unknown).
pub fn auto_nprobes(partitions: Option<usize>) -> usize {
    match partitions {
        Some(p) => ((p as f64 * crate::AUTO_NPROBES_FRACTION).ceil() as usize).max(crate::AUTO_NPROBES_MIN),
        None => 20,
    }
}

/// Delta segments the vector index may collect before they are merged into one. Index catch-up adds one
/// segment per maintenance run; each search reads every segment, and fragments covered by different
/// segments are never compacted together, so without merging a table grown by many syncs holds a segment per
/// sync, and every search pays for reading them all.
const ANN_MAX_SEGMENTS: usize = 4;

/// Merge the vector index's delta segments once there are more than [`ANN_MAX_SEGMENTS`]; returns how many
/// were merged (0: none). Merging rewrites the index, so it is batched rather than done on every write.
async fn merge_vector_segments(t: &Table) -> lancedb::Result<usize> {
    for index in t.list_indices().await? {
        if !index.columns.iter().any(|c| c == COL_VECTOR) {
            continue;
        }
        let segments = t.index_stats(&index.name).await?.and_then(|s| s.num_indices).unwrap_or(1) as usize;
        if segments > ANN_MAX_SEGMENTS {
            let mut o = lancedb::table::OptimizeOptions::merge(segments);
            o.index_names = Some(vec![index.name.clone()]);
            t.optimize(OptimizeAction::Index(o)).await?;
            return Ok(segments);
        }
    }
    Ok(0)
}

/// Compact files, fold new rows into the indices, prune old versions.
pub(crate) async fn optimize_table(t: &Table, prune_older_than: Duration) -> lancedb::Result<()> {
    let started = Instant::now();
    let compact = t.optimize(OptimizeAction::Compact { options: Default::default(), remap_options: None }).await?;
    t.optimize(OptimizeAction::Index(Default::default())).await?;
    let merged = merge_vector_segments(t).await?;
    let older_than = lancedb::table::Duration::from_std(prune_older_than).unwrap_or(lancedb::table::Duration::zero());
    let prune = t
        .optimize(OptimizeAction::Prune { older_than: Some(older_than), delete_unverified: Some(false), error_if_tagged_old_versions: Some(false) })
        .await?;
    info!(
        ms = started.elapsed().as_millis() as u64,
        compaction = ?compact.compaction.map(|c| (c.fragments_removed, c.fragments_added)),
        pruned_versions = ?prune.prune.map(|p| p.old_versions),
        merged_vector_segments = merged,
        "table optimized"
    );
    Ok(())
}

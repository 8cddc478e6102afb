//! memory-lancedb: the `lancedb` engine. An agent's chunks live in a LanceDB table on a local folder or an
//! object store (`s3://bucket/prefix`), with a full-text index on the analysed terms and a cosine vector column.
//! Discovery, incremental sync, embeddings and ranking come from [`memory_core::indexed::IndexedBackend`], so
//! this engine ranks exactly like the builtin one; this crate stores chunks and returns candidates.
//!
//! - [`LanceDbFactory`]: `memory.backend = "lancedb"`, configured by `memory.lancedb.{uri, storageOptions, table, nprobes}`
//!   ([`LanceDbConfig`]).
//! - [`LanceDbStorage`]: the [`memory_core::store::IndexStorage`] (rebuilds into a new generation, then swaps).
//! - [`LanceStore`]: the [`memory_core::store::ChunkStore`] of one generation.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod config;
mod error;
mod filters;
mod schema;
mod storage;
mod store;
mod writer_lock;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memory_core::indexed::IndexedBackend;
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{Config, MemoryBackend, Result};

pub use config::LanceDbConfig;
pub use storage::{default_table_name, LanceDbStorage};
pub use store::{ann_partitions, auto_nprobes, create_ann_index, LanceStore};

/// With `nprobes` unset, a vector search probes this share of the index's IVF partitions...
pub const AUTO_NPROBES_FRACTION: f64 = 0.03;
/// ...and at least this many. Scanning ~3% of the vectors is the usual operating point of an IVF index for
/// recall@10 around 0.95 on real embeddings; the benchmark's clustered data needs far fewer probes.
pub const AUTO_NPROBES_MIN: usize = 8;

/// Engine name in `memory.backend`.
pub const BACKEND_NAME: &str = "lancedb";

/// Tuning of the engine's maintenance and search. The defaults suit agent memories from a handful of notes
/// to millions of chunks; tests and the benchmark lower the thresholds.
#[derive(Debug, Clone)]
pub struct LanceDbOptions {
    /// Build the ANN vector index once this many rows have vectors; below it search is exact.
    pub ann_min_rows: usize,
    /// Kind of ANN index.
    pub ann_index: AnnIndexKind,
    /// Target vectors per IVF partition.
    pub ann_partition_size: usize,
    /// IVF partitions probed per query once the ANN index exists (0: automatic, see [`auto_nprobes`];
    /// `memory.lancedb.nprobes` sets it).
    pub nprobes: usize,
    /// Re-rank `limit x refine_factor` ANN hits by exact distance (0: off).
    pub refine_factor: u32,
    /// HNSW candidates per probed partition (`ef`; 0: LanceDB's default of 1.5 x limit).
    pub hnsw_ef: usize,
    /// Compact, fold new rows into the indices and prune old versions after this many written rows...
    pub optimize_after_rows: usize,
    /// ...or this many commits.
    pub optimize_after_commits: usize,
    /// Versions older than this are pruned by maintenance. Readers on other hosts may still be reading a
    /// version for the duration of one query, so keep a margin on shared object stores.
    pub prune_older_than: Duration,
    /// How stale a read may be with respect to other processes' writes (zero: every read checks).
    pub read_consistency: Duration,
    /// Period of the writer lease on `s3://` (renewed every third of it while a sync runs): how long a host
    /// that died mid-sync blocks the others' syncs at most.
    pub writer_lease: Duration,
}

impl Default for LanceDbOptions {
    fn default() -> Self {
        LanceDbOptions {
            ann_min_rows: 25_000,
            ann_index: AnnIndexKind::IvfFlat,
            ann_partition_size: 4_096,
            nprobes: 0,
            refine_factor: 0,
            hnsw_ef: 0,
            optimize_after_rows: 5_000,
            optimize_after_commits: 20,
            prune_older_than: Duration::from_secs(10 * 60),
            read_consistency: Duration::ZERO,
            writer_lease: Duration::from_secs(30),
        }
    }
}

/// The ANN index built on the vector column (both with cosine distance).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnIndexKind {
    /// IVF partitions, each an HNSW graph over 8-bit scalar-quantised vectors.
    IvfHnswSq,
    /// IVF partitions of product-quantised vectors (`sub_vectors` codes of 8 bits; 0: LanceDB's choice).
    IvfPq { sub_vectors: u32 },
    /// IVF partitions of full-precision vectors, scanned exactly: no quantisation error, so no refine step.
    IvfFlat,
    /// IVF partitions, each an HNSW graph over full-precision vectors.
    IvfHnswFlat,
}

/// Opens the LanceDB engine for `memory.backend = "lancedb"`.
#[derive(Debug, Default, Clone)]
pub struct LanceDbFactory {
    pub options: LanceDbOptions,
}

impl LanceDbFactory {
    pub fn new(options: LanceDbOptions) -> Self {
        LanceDbFactory { options }
    }

    /// The storage the configuration names: `memory.lancedb.uri` (default: the space's LanceDB home, `<state>/agents/<agentId>/lancedb-<tag>`),
    /// `storageOptions`, `table` (default `memory_<agentId>`).
    pub async fn storage(&self, ctx: &OpenContext) -> Result<LanceDbStorage> {
        let cfg = LanceDbConfig::from_config(&ctx.config)?;
        let uri = match &cfg.uri {
            Some(u) => resolve_uri(u, ctx.space.agent_id(), ctx.space.state_dir()),
            None => ctx.space.engine_home(BACKEND_NAME).to_string_lossy().into_owned(),
        };
        let table = cfg.table.clone().unwrap_or_else(|| default_table_name(ctx.space.agent_id()));
        let mut options = self.options.clone();
        if let Some(n) = cfg.nprobes {
            options.nprobes = n;
        }
        let storage_options: std::collections::BTreeMap<String, String> =
            cfg.storage_options.iter().map(|(k, v)| (k.clone(), v.expose().to_string())).collect();
        LanceDbStorage::connect(&uri, &storage_options, &table, options).await
    }

    /// Open the engine with its concrete type.
    pub async fn open_indexed(&self, ctx: OpenContext) -> Result<IndexedBackend> {
        let storage = Arc::new(self.storage(&ctx).await?);
        IndexedBackend::open_for(BACKEND_NAME, &ctx, storage).await
    }
}

#[async_trait]
impl BackendFactory for LanceDbFactory {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        Ok(Box::new(self.open_indexed(ctx).await?))
    }

    fn check_config(&self, config: &Config) -> Result<()> {
        LanceDbConfig::from_config(config).map(drop)
    }
}

/// Object-store URIs pass through (with `{agentId}` replaced); a folder follows the rule of every configured state
/// path (`memory_core::paths::state_path`, as the builtin engine's `store.path`): `~` expanded, a relative folder
/// under the state folder, so an index never lands inside the workspace it indexes.
fn resolve_uri(uri: &str, agent_id: &str, state_dir: &Path) -> String {
    if uri.contains("://") && !uri.starts_with("file://") {
        return memory_core::paths::with_agent_id(uri, agent_id);
    }
    let folder = uri.strip_prefix("file://").unwrap_or(uri);
    memory_core::paths::state_path(folder, agent_id, state_dir).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_resolve() {
        let state = Path::new("/state");
        assert_eq!(resolve_uri("s3://b/{agentId}", "main", state), "s3://b/main");
        assert_eq!(resolve_uri("/abs/x", "main", state), "/abs/x");
        assert_eq!(resolve_uri("file:///abs/{agentId}", "a/b", state), format!("/abs/{}", memory_core::sanitize_id("a/b")));
        assert_ne!(resolve_uri("file:///abs/{agentId}", "a/b", state), resolve_uri("file:///abs/{agentId}", "a_b", state));
        // A relative folder is under the state folder, never the workspace; an agent id cannot climb out.
        assert_eq!(resolve_uri("idx/{agentId}", "main", state), "/state/idx/main");
        assert!(resolve_uri("idx/{agentId}", "../../x", state).starts_with("/state/idx/______x-"));
        assert_eq!(default_table_name("main"), "memory_main");
        assert!(default_table_name("a b/c").starts_with("memory_a_b_c-"));
        // Table names are ASCII: a name that had to change carries a hash of the id, so two ids never share one.
        assert!(default_table_name("zoë").starts_with("memory_zo_-"));
        assert_ne!(default_table_name("zoë"), default_table_name("zoé"));
        assert!(default_table_name("zoë").is_ascii());
    }
}

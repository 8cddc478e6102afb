//! The embedding cache: its own table of vectors keyed by a digest of (provider, model, fingerprint) and the
//! text hash, pruned oldest first beyond its size.

use std::collections::HashMap;

use arrow_array::{Int64Array, StringArray};
use lancedb::query::{QueryBase, Select};
use memory_core::store::EmbeddingCacheKey;
use memory_core::Result;
use tracing::debug;

use super::writes::reader;
use super::{LanceStore, Which, CACHE_READ_CHUNK};
use crate::filters::sql_str;
use crate::schema::*;

impl LanceStore {
    pub(super) async fn read_cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        let mut out = HashMap::new();
        if hashes.is_empty() {
            return Ok(out);
        }
        let Some(t) = self.table(Which::Cache).await? else { return Ok(out) };
        let k = cache_key_digest(key);
        for part in hashes.chunks(CACHE_READ_CHUNK) {
            let list: Vec<String> = part.iter().map(|h| sql_str(h)).collect();
            let filter = format!("key = {} AND hash IN ({})", sql_str(&k), list.join(", "));
            let q = t.query().only_if(filter).select(Select::columns(&["hash", "vector"]));
            out.extend(batches_to_vectors(&self.collect("read embedding cache", q).await?, "hash")?);
        }
        Ok(out)
    }

    pub(super) async fn write_cached_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let t = self.table_or_create(Which::Cache, cache_schema()).await?;
        let k = cache_key_digest(key);
        let mut m = t.merge_insert(&["id"]);
        m.when_not_matched_insert_all();
        m.execute(reader(cache_batch(&k, entries, memory_core::now_ms())?)).await.map_err(|e| self.err("write embedding cache", e))?;
        let total = t.count_rows(None).await.map_err(|e| self.err("count embedding cache", e))?;
        if total > max_entries {
            let excess = total - max_entries;
            let q = t.query().select(Select::columns(&["id", "created_ms"]));
            let mut rows: Vec<(i64, String)> = Vec::with_capacity(total);
            for b in self.collect("scan embedding cache", q).await? {
                let ids = col::<StringArray>(&b, "id")?;
                let created = col::<Int64Array>(&b, "created_ms")?;
                rows.extend((0..b.num_rows()).map(|i| (created.value(i), ids.value(i).to_string())));
            }
            rows.sort();
            let victims: Vec<String> = rows.into_iter().take(excess).map(|(_, id)| sql_str(&id)).collect();
            if !victims.is_empty() {
                t.delete(format!("id IN ({})", victims.join(", ")).as_str()).await.map_err(|e| self.err("prune embedding cache", e))?;
                debug!(pruned = victims.len(), "embedding cache pruned");
            }
        }
        Ok(())
    }
}

/// Cache rows are keyed by a digest of (provider, model, settings fingerprint).
fn cache_key_digest(key: &EmbeddingCacheKey) -> String {
    memory_core::sha256_hex(format!("{}\u{1f}{}\u{1f}{}", key.provider, key.model, key.fingerprint).as_bytes())[..32].to_string()
}

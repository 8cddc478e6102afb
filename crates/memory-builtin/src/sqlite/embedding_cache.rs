//! The embedding cache: vectors by (provider, model, fingerprint, text hash), read before embedding and
//! pruned oldest first beyond its size. Its own table, apart from the index's chunks.

use std::collections::HashMap;

use memory_core::store::EmbeddingCacheKey;
use memory_core::Result;
use rusqlite::{params, OptionalExtension};

use super::rows::{blob_to_vec, vec_to_blob};
use super::SqliteStore;

impl SqliteStore {
    pub(super) fn read_cached_embeddings(&self, key: &EmbeddingCacheKey, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        self.read("read embedding cache", |c| {
            let mut st =
                c.prepare_cached("SELECT embedding FROM embedding_cache WHERE provider = ?1 AND model = ?2 AND fingerprint = ?3 AND hash = ?4")?;
            let mut out = HashMap::new();
            for h in hashes {
                if let Some(blob) = st.query_row(params![key.provider, key.model, key.fingerprint, h], |r| r.get::<_, Vec<u8>>(0)).optional()? {
                    out.insert(h.clone(), blob_to_vec(&blob));
                }
            }
            Ok(out)
        })
    }

    pub(super) fn write_cached_embeddings(&self, key: &EmbeddingCacheKey, entries: &[(String, Vec<f32>)], max_entries: usize) -> Result<()> {
        let now = memory_core::now_ms();
        self.write("write embedding cache", |c| {
            let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT OR REPLACE INTO embedding_cache(provider, model, fingerprint, hash, embedding, dims, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?;
                for (h, v) in entries {
                    st.execute(params![key.provider, key.model, key.fingerprint, h, vec_to_blob(v), v.len() as i64, now])?;
                }
                let count: i64 = tx.query_row("SELECT count(*) FROM embedding_cache", [], |r| r.get(0))?;
                if count as usize > max_entries {
                    tx.execute(
                        "DELETE FROM embedding_cache WHERE rowid IN
                           (SELECT rowid FROM embedding_cache ORDER BY updated_at, rowid LIMIT ?1)",
                        params![count - max_entries as i64],
                    )?;
                }
            }
            tx.commit()
        })
    }
}

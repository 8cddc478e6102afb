//! The generation's meta table: key-value pairs (the index identity, the caller's metadata) merged by key.

use arrow_array::StringArray;
use lancedb::query::{QueryBase, Select};
use memory_core::Result;

use super::writes::reader;
use super::{LanceStore, Which};
use crate::filters::sql_str;
use crate::schema::*;

pub(super) const META_IDENTITY: &str = "identity";

impl LanceStore {
    pub(super) async fn meta_get(&self, key: &str) -> Result<Option<String>> {
        let Some(t) = self.table(Which::Meta).await? else { return Ok(None) };
        let batches = self.collect("read meta", t.query().only_if(format!("key = {}", sql_str(key))).select(Select::columns(&["value"]))).await?;
        for b in &batches {
            if b.num_rows() > 0 {
                return Ok(Some(col::<StringArray>(b, "value")?.value(0).to_string()));
            }
        }
        Ok(None)
    }

    pub(super) async fn meta_put(&self, key: &str, value: &str) -> Result<()> {
        let t = self.table_or_create(Which::Meta, meta_schema()).await?;
        let batch = meta_batch(key, value)?;
        let mut m = t.merge_insert(&["key"]);
        m.when_matched_update_all(None).when_not_matched_insert_all();
        m.execute(reader(batch)).await.map_err(|e| self.err("write meta", e))?;
        Ok(())
    }
}

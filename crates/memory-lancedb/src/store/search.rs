//! Keyword search (Lance's full-text index over terms and headings) and vector search (the ANN index, cosine),
//! and the stored vectors of given chunks.

use memory_core::locks::LockExt;
use std::collections::HashMap;

use lancedb::index::scalar::{FullTextSearchQuery, MultiMatchQuery, Operator};
use lancedb::query::{QueryBase, Select};
use lancedb::DistanceType;
use memory_core::store::{Candidate, KeywordQuery, Scope};
use memory_core::{MemoryError, Result};

use super::{LanceStore, Which, CACHE_READ_CHUNK};
use crate::filters::{scope_filter, sql_str};
use crate::schema::*;

/// BM25 weight of the heading column relative to the body terms (the builtin engine's weights).
const HEADING_BOOST: f32 = memory_core::analysis::HEADING_WEIGHT as f32;

impl LanceStore {
    pub(super) async fn keyword_candidates(&self, query: &KeywordQuery, limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        if query.terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let Some(t) = self.table(Which::Data).await? else { return Ok(Vec::new()) };
        let ready = self.known.locked().fts_ready;
        if !ready {
            // Opened by another process, or the index creation failed after a write: create it now.
            let _w = self.writer.lock().await;
            self.ensure_fts(&t).await?;
            let ready = self.known.locked().fts_ready;
            if !ready {
                return Ok(Vec::new()); // no chunks at all
            }
        }
        // Terms are word characters only (the shared analysis), so the whitespace tokenizer sees each as one
        // literal token; nothing of the user's text is parsed as query syntax.
        let terms: Vec<&str> = query.terms.iter().map(std::string::String::as_str).filter(|s| !s.contains(char::is_whitespace)).collect();
        let mm = MultiMatchQuery::try_new(terms.join(" "), vec![COL_TERMS.to_string(), COL_HEADING.to_string()])
            .and_then(|m| m.try_with_boosts(vec![1.0, HEADING_BOOST]))
            .map_err(|e| MemoryError::Internal(format!("lancedb: building the keyword query: {e}")))?
            .with_operator(Operator::Or);
        let fts = FullTextSearchQuery::new_query(mm.into());
        // `_score` named in the projection: lancedb warns on every query that leaves it to be added implicitly.
        let mut columns = candidate_columns(&*self.data_schema_of(&t).await?).to_vec();
        columns.push("_score");
        let mut q = t.query().full_text_search(fts).limit(limit).select(Select::columns(&columns));
        if let Some(f) = scope_filter(scope) {
            q = q.only_if(f);
        }
        let mut out = batches_to_candidates(&self.collect("keyword search", q).await?)?;
        out.sort_by(|a, b| b.keyword_score.partial_cmp(&a.keyword_score).unwrap_or(std::cmp::Ordering::Equal));
        out.truncate(limit);
        Ok(out)
    }

    pub(super) async fn nearest_candidates(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        let Some(t) = self.table(Which::Data).await? else {
            return Err(MemoryError::Unavailable("the index has no vectors yet".into()));
        };
        let schema = self.data_schema_of(&t).await?;
        match vector_dims(&schema) {
            None => return Err(MemoryError::Unavailable("the index stores no vectors (keyword-only)".into())),
            Some(d) if d != vector.len() => {
                return Err(MemoryError::InvalidInput(format!("query vector has {} dimensions, the index {d}", vector.len())))
            }
            Some(_) => {}
        }
        if limit == 0 {
            return Ok(Vec::new());
        }
        let opts = &self.shared.options;
        let mut q = t
            .query()
            .nearest_to(vector)
            .map_err(|e| self.err("vector query", e))?
            .column(COL_VECTOR)
            .distance_type(DistanceType::Cosine)
            .limit(limit)
            .select(Select::columns(candidate_columns(&schema)));
        q = q.nprobes(self.nprobes().await?).map_err(|e| self.err("vector query", e))?;
        if opts.refine_factor > 0 {
            q = q.refine_factor(opts.refine_factor);
        }
        if opts.hnsw_ef > 0 {
            q = q.ef(opts.hnsw_ef);
        }
        // File rows have no vector, and rows without one are never returned (Lance drops null distances), so
        // no filter on `kind`: an unfiltered query keeps the ANN path cheap.
        if let Some(f) = scope_filter(scope) {
            q = q.only_if(f);
        }
        let mut out = batches_to_candidates(&self.collect("vector search", q).await?)?;
        out.sort_by(|a, b| b.vector_score.partial_cmp(&a.vector_score).unwrap_or(std::cmp::Ordering::Equal));
        out.truncate(limit);
        Ok(out)
    }

    pub(super) async fn read_chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        let mut out = HashMap::new();
        if chunk_ids.is_empty() {
            return Ok(out);
        }
        let Some(t) = self.table(Which::Data).await? else { return Ok(out) };
        let schema = self.data_schema_of(&t).await?;
        if vector_dims(&schema).is_none() {
            return Ok(out);
        }
        for part in chunk_ids.chunks(CACHE_READ_CHUNK) {
            let list: Vec<String> = part.iter().map(|id| sql_str(id)).collect();
            let filter = format!("{COL_ID} IN ({})", list.join(", "));
            let q = t.query().only_if(filter).select(Select::columns(&[COL_ID, COL_VECTOR]));
            out.extend(batches_to_vectors(&self.collect("read chunk vectors", q).await?, COL_ID)?);
        }
        Ok(out)
    }
}

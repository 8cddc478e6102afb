//! Vector search: the nearest chunks from the in-memory copy (`vectors`), the exact first search, sqlite-vec's
//! scan kept as the reference path, and the stored vectors of given chunks.

use std::collections::HashMap;

use memory_core::locks::ResetOnPoison;
use memory_core::store::{Candidate, Scope};
use memory_core::{MemoryError, Result};
#[cfg(feature = "reference-paths")]
use rusqlite::params_from_iter;
use rusqlite::{params, OptionalExtension};

#[cfg(feature = "reference-paths")]
use super::rows::scope_filter;
use super::rows::{blob_to_vec, candidate_row, vec_to_blob, CANDIDATE_COLUMNS};
use super::{schema, vectors, SqliteStore};

impl SqliteStore {
    /// sqlite-vec's exact k-NN scan over every f32 vector: how vector search answered before the in-memory
    /// copy, kept as the reference the fast path is tested and benchmarked against (exact for up to 4096
    /// vectors outside the filtered sources). Only with the `reference-paths` feature (tests and memory-bench).
    #[cfg(feature = "reference-paths")]
    pub fn exact_vector_search(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        self.check_query_vector(vector)?;
        let sources = &scope.sources;
        let (filter, filter_args) = scope_filter(scope);
        // With a source filter the scan's k is before filtering: ask for sqlite-vec's most (the fast path filters
        // inside its scan and always fills `limit`; the old path over-fetched 4x and could come up short).
        let fetch = if sources.is_empty() && scope.days.is_none() { limit } else { 4096 };
        let sql = format!(
            "SELECT {CANDIDATE_COLUMNS}, v.distance FROM
               (SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ?1 AND k = ?2) v
             JOIN chunks c ON c.rowid = v.rowid
             JOIN files f ON f.source = c.source AND f.path = c.path
             WHERE 1 = 1{filter} ORDER BY v.distance"
        );
        let blob = vec_to_blob(vector);
        self.read("vector search", |c| {
            let mut st = c.prepare_cached(&sql)?;
            let mut args: Vec<rusqlite::types::Value> = vec![blob.clone().into(), (fetch as i64).into()];
            args.extend(filter_args.iter().cloned());
            let rows = st.query_map(params_from_iter(args), |r| {
                let mut cand = candidate_row(r)?;
                // sqlite-vec has no cosine distance for a zero vector (NULL): such a query matches nothing.
                let distance: Option<f64> = r.get(9)?;
                cand.vector_score = distance.map(|d| 1.0 - d);
                Ok(cand)
            })?;
            let mut out: Vec<Candidate> = rows.filter(|c| !matches!(c, Ok(c) if c.vector_score.is_none())).collect::<rusqlite::Result<_>>()?;
            out.truncate(limit);
            Ok(out)
        })
    }

    /// The index's vector width, or why `vector` cannot be searched.
    pub(super) fn check_query_vector(&self, vector: &[f32]) -> Result<usize> {
        let dims = self.read("read vector dims", |c| schema::vector_dims(c))?;
        let Some(dims) = dims else {
            return Err(MemoryError::Unavailable("no vectors indexed yet".into()));
        };
        if vector.len() != dims {
            return Err(MemoryError::InvalidInput(format!("query vector has {} dimensions, the index holds {dims}", vector.len())));
        }
        Ok(dims)
    }

    pub(super) fn nearest_candidates(&self, vector: &[f32], limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        let dims = self.check_query_vector(vector)?;
        let sources = scope.sources.as_slice();
        let first = scope.days.is_none() && !self.searched_vectors.swap(true, std::sync::atomic::Ordering::Relaxed);
        let exact = if scope.days.is_some() {
            Some(self.read("vector search within dates", |c| vectors::nearest_dated(c, vector, limit, scope))?)
        } else if first {
            let blob = vec_to_blob(vector);
            self.read("vector search", |c| vectors::exact_first(c, &blob, limit, sources))?
        } else {
            None
        };
        let nearest = match exact {
            Some(hits) => hits,
            None => self.read("vector search", |c| {
                let mut copy = self.vectors.locked_or_reset();
                vectors::nearest(c, &mut copy, dims, vector, limit, sources)
            })?,
        };
        self.read("read vector candidates", |c| {
            let sql = format!("SELECT {CANDIDATE_COLUMNS} FROM chunks c JOIN files f ON f.source = c.source AND f.path = c.path WHERE c.rowid = ?1");
            let mut st = c.prepare_cached(&sql)?;
            let mut out = Vec::with_capacity(nearest.len());
            for (rowid, score) in &nearest {
                // A chunk deleted since the scan (a sync committed in between) is simply not a candidate.
                if let Some(mut cand) = st.query_row([rowid], candidate_row).optional()? {
                    cand.vector_score = Some(*score);
                    out.push(cand);
                }
            }
            Ok(out)
        })
    }

    pub(super) fn read_chunk_vectors(&self, chunk_ids: &[String]) -> Result<HashMap<String, Vec<f32>>> {
        if chunk_ids.is_empty() || self.read("read vector dims", |c| schema::vector_dims(c))?.is_none() {
            return Ok(HashMap::new());
        }
        self.read("read chunk vectors", |c| {
            let mut st = c.prepare_cached("SELECT v.embedding FROM chunks c JOIN vec_f32 v ON v.rowid = c.rowid WHERE c.id = ?1")?;
            let mut out = HashMap::new();
            for id in chunk_ids {
                if let Some(blob) = st.query_row(params![id], |r| r.get::<_, Vec<u8>>(0)).optional()? {
                    out.insert(id.clone(), blob_to_vec(&blob));
                }
            }
            Ok(out)
        })
    }
}

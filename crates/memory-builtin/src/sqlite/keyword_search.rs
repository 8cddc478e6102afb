//! Keyword search: FTS5's BM25 over the analysed terms and headings, bounded by document frequency
//! (`keyword_plan`), and the unbounded reference path the benchmark compares with.

use memory_core::store::{Candidate, KeywordQuery, Scope};
use memory_core::Result;
use rusqlite::params_from_iter;

use super::keyword_plan;
use super::rows::{candidate_row, source_filter, CANDIDATE_COLUMNS};
use super::SqliteStore;

/// BM25 weights of the FTS columns (terms, heading): headings count again, at the shared heading weight.
const BM25_WEIGHTS: (f64, f64) = (1.0, memory_core::analysis::HEADING_WEIGHT);

impl SqliteStore {
    /// Keyword candidates without the document-frequency bound (every term, every matching row): how keyword
    /// search answered before the bound, the reference the benchmark compares with. Only with the
    /// `reference-paths` feature.
    #[cfg(feature = "reference-paths")]
    pub fn unbounded_keyword_candidates(&self, query: &KeywordQuery, limit: usize, scope: &Scope) -> Result<Vec<Candidate>> {
        self.keyword_candidates(query, limit, scope, false)
    }

    /// Keyword candidates; `bounded: false` runs the query over every term (the reference path above). A scope's
    /// days are applied inside the keyword query, before its limit, so a narrow window still fills it.
    pub(super) fn keyword_candidates(&self, query: &KeywordQuery, limit: usize, scope: &Scope, bounded: bool) -> Result<Vec<Candidate>> {
        if query.terms.is_empty() {
            return Ok(Vec::new());
        }
        let (filter, filter_args) = source_filter(&scope.sources, "c.source");
        let sql = |window: bool| {
            let days = if scope.days.is_some() { " AND rowid IN (SELECT rowid FROM chunks WHERE date BETWEEN ?4 AND ?5)" } else { "" };
            format!(
                "SELECT {CANDIDATE_COLUMNS}, r.rank FROM
                   (SELECT rowid, bm25(chunks_fts, {}, {}) AS rank FROM chunks_fts WHERE chunks_fts MATCH ?1{}{days} ORDER BY rank LIMIT ?2) r
                 JOIN chunks c ON c.rowid = r.rowid
                 JOIN files f ON f.source = c.source AND f.path = c.path
                 WHERE 1 = 1{filter} ORDER BY r.rank",
                BM25_WEIGHTS.0,
                BM25_WEIGHTS.1,
                if window { " AND rowid >= ?3" } else { "" }
            )
        };
        // With days, ?3 is always bound (the lowest rowid when the plan has none) so that ?4 and ?5 follow it.
        let (plain_sql, window_sql) = (sql(scope.days.is_some()), sql(true));
        // With a source filter, over-fetch so filtering leaves enough.
        let fetch = if scope.sources.is_empty() { limit } else { limit * 4 };
        self.read("keyword search", |c| {
            // One read transaction: the plan's frequencies and the query see the same commit.
            let tx = c.transaction()?;
            let plan = if bounded {
                keyword_plan::plan(&tx, &query.terms)?
            } else {
                keyword_plan::KeywordPlan { terms: query.terms.clone(), min_rowid: None }
            };
            if plan.terms.len() != query.terms.len() || plan.min_rowid.is_some() {
                tracing::debug!(terms = ?query.terms, kept = ?plan.terms, min_rowid = ?plan.min_rowid, "keyword query bounded by document frequency");
            }
            let mut st = tx.prepare_cached(if plan.min_rowid.is_some() { &window_sql } else { &plain_sql })?;
            let mut args: Vec<rusqlite::types::Value> = vec![fts_match_expression(&plan.terms).into(), (fetch as i64).into()];
            if plan.min_rowid.is_some() || scope.days.is_some() {
                args.push(plan.min_rowid.unwrap_or(i64::MIN).into());
            }
            if let Some(days) = scope.days {
                args.push(days.first.into());
                args.push(days.last.into());
            }
            args.extend(filter_args.iter().cloned().map(Into::into));
            let rows = st.query_map(params_from_iter(args), |r| {
                let mut cand = candidate_row(r)?;
                // FTS5's bm25() is negative, more negative = better: negated to `Candidate::keyword_score`'s
                // direction (higher = better).
                cand.keyword_score = Some(-r.get::<_, f64>(9)?);
                Ok(cand)
            })?;
            let mut out: Vec<Candidate> = rows.collect::<rusqlite::Result<_>>()?;
            drop(st);
            tx.commit()?;
            out.truncate(limit);
            Ok(out)
        })
    }
}

/// FTS5 MATCH expression: every term a quoted string (quotes doubled), any may match.
pub fn fts_match_expression(terms: &[String]) -> String {
    terms.iter().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" OR ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn match_expression_quotes_every_term() {
        let e = fts_match_expression(&["a\"b".into(), "near".into()]);
        assert_eq!(e, "\"a\"\"b\" OR \"near\"");
    }
}

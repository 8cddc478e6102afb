//! Bounding the work of a keyword query by its terms' document frequencies.
//!
//! Any query word may match (OR), and FTS5 computes BM25 for every matching row before it can sort them: a
//! query whose words each appear in most chunks scores nearly the whole index (1.1 s at 400k chunks). Before
//! the query runs, each term's document frequency is read from the FTS5 vocabulary (`chunks_fts_vocab`, an
//! `fts5vocab` table: no storage of its own). When the rows the query would score stay under
//! [`ROW_BUDGET`] nothing changes. Otherwise, in this order:
//!
//! 1. terms in more than half the chunks are left out while a rarer term remains: FTS5's BM25 gives such
//!    terms an idf of 1e-6 (its floor), so they only break ties;
//! 2. then the rarest terms are kept while their rows fit the budget (the terms left out are the more frequent,
//!    lower-idf ones);
//! 3. if even the rarest term alone exceeds the budget, it is matched among the newest chunks only (a rowid
//!    window holding about [`ROW_BUDGET`] of its rows): every word of such a query is in a large part of the
//!    memory and BM25 can barely rank by it, so recent notes are the answer an agent most likely wants.
//!
//! Collections small enough that no query reaches the budget (Cranfield's 1,400 abstracts) rank exactly as
//! before.

use rusqlite::Connection;

/// Rows a keyword query may score before its terms are bounded (~2.5 us per scored row on this machine).
pub(crate) const ROW_BUDGET: u64 = 8_000;

#[derive(Debug, PartialEq)]
pub(crate) struct KeywordPlan {
    /// The terms to match.
    pub terms: Vec<String>,
    /// Match only rows with rowid >= this (the newest chunks).
    pub min_rowid: Option<i64>,
}

/// Document frequency of each term (rows containing it in any column). A term FTS5 indexes as several tokens
/// (`memory.search.provider`) has no vocabulary entry: its rows are counted by matching it.
fn doc_frequencies(c: &Connection, terms: &[String]) -> rusqlite::Result<Vec<u64>> {
    let mut vocab = c.prepare_cached("SELECT doc FROM chunks_fts_vocab WHERE term = ?1")?;
    let mut phrase = c.prepare_cached("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?1")?;
    terms
        .iter()
        .map(|t| match vocab.query_row([t], |r| r.get::<_, i64>(0)) {
            Ok(n) => Ok(n.max(0) as u64),
            Err(rusqlite::Error::QueryReturnedNoRows) => {
                let n: i64 = phrase.query_row([super::fts_match_expression(std::slice::from_ref(t))], |r| r.get(0))?;
                Ok(n.max(0) as u64)
            }
            Err(e) => Err(e),
        })
        .collect()
}

/// Decide which terms to match (see the module comment). `rows` is the number of chunks.
pub(crate) fn plan_from(terms: &[String], dfs: &[u64], rows: u64, max_rowid: i64) -> KeywordPlan {
    let total: u64 = dfs.iter().sum();
    if total <= ROW_BUDGET {
        return KeywordPlan { terms: terms.to_vec(), min_rowid: None };
    }
    // Terms in no chunk cannot match: they are no candidates and no reason to drop others.
    let mut by_df: Vec<(&String, u64)> = terms.iter().zip(dfs.iter().copied()).filter(|(_, df)| *df > 0).collect();
    by_df.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    // 1. Terms FTS5 weighs at its idf floor, while a rarer one remains.
    if by_df.iter().any(|(_, df)| df * 2 <= rows) {
        by_df.retain(|(_, df)| df * 2 <= rows);
    }
    // 2. The rarest terms that fit the budget (always at least the rarest).
    let mut kept = Vec::new();
    let mut sum = 0u64;
    for (t, df) in &by_df {
        if !kept.is_empty() && sum + df > ROW_BUDGET {
            break;
        }
        kept.push((*t).clone());
        sum += df;
    }
    // 3. The rarest term alone is over budget: only the newest rows, about ROW_BUDGET of its matches.
    let min_rowid = (sum > ROW_BUDGET && rows > 0).then(|| {
        let window = (ROW_BUDGET as f64 * rows as f64 / sum as f64).ceil() as i64;
        max_rowid.saturating_sub(window).saturating_add(1)
    });
    KeywordPlan { terms: kept, min_rowid }
}

/// The plan for `terms` on the index `c` reads.
pub(crate) fn plan(c: &Connection, terms: &[String]) -> rusqlite::Result<KeywordPlan> {
    let dfs = doc_frequencies(c, terms)?;
    if dfs.iter().sum::<u64>() <= ROW_BUDGET {
        return Ok(KeywordPlan { terms: terms.to_vec(), min_rowid: None });
    }
    let (rows, max_rowid): (i64, Option<i64>) = c.query_row("SELECT count(*), max(rowid) FROM chunks", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(plan_from(terms, &dfs, rows.max(0) as u64, max_rowid.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn small_queries_are_unchanged() {
        let p = plan_from(&t(&["a", "b"]), &[100, 7000], 100_000, 100_000);
        assert_eq!(p, KeywordPlan { terms: t(&["a", "b"]), min_rowid: None });
    }

    #[test]
    fn words_in_most_chunks_give_way_to_rarer_ones() {
        let p = plan_from(&t(&["common", "rare", "mid"]), &[90_000, 40, 30_000], 100_000, 100_000);
        // "common" is at FTS5's idf floor; "mid" does not fit beside "rare".
        assert_eq!(p, KeywordPlan { terms: t(&["rare"]), min_rowid: None });
        let p = plan_from(&t(&["common", "rare", "mid"]), &[90_000, 40, 5_000], 100_000, 100_000);
        assert_eq!(p.terms, t(&["rare", "mid"]));
    }

    #[test]
    fn only_frequent_words_are_matched_among_the_newest_chunks() {
        let p = plan_from(&t(&["x", "y"]), &[80_000, 60_000], 100_000, 250_000);
        assert_eq!(p.terms, t(&["y"]));
        let window = 250_000 - p.min_rowid.unwrap() + 1;
        // About ROW_BUDGET of y's 60,000 rows fall in the window.
        assert_eq!(window, (ROW_BUDGET as f64 * 100_000.0 / 60_000.0).ceil() as i64);
        // A term in no chunk changes nothing.
        let p = plan_from(&t(&["x", "zzz"]), &[80_000, 0], 100_000, 100_000);
        assert_eq!(p.terms, t(&["x"]));
        assert!(p.min_rowid.is_some());
    }
}

//! Bounding the work of a keyword query by its terms' document frequencies.
//!
//! Any query word may match (OR), and FTS5 computes BM25 for every matching row before it can sort them: a
//! query whose words each appear in most chunks scores nearly the whole index, in time that grows with it.
//! Before the query runs, each term's document frequency is counted (up to the budget; beyond it, estimated from the
//! newest rows: the plan's own cost must not grow with the index). When the rows the query would score stay
//! under [`ROW_BUDGET`] nothing changes. Otherwise, in this order:
//!
//! 1. terms in more than half the chunks are left out while a rarer term remains: FTS5's BM25 gives such
//!    terms an idf of 1e-6 (its floor), so they only break ties;
//! 2. then the rarest terms are kept while their rows fit the budget (the terms left out are the more frequent,
//!    lower-idf ones);
//! 3. if even the rarest term alone exceeds the budget, it is matched among the newest chunks only (a rowid
//!    window holding about [`ROW_BUDGET`] of its rows): every word of such a query is in a large part of the
//!    memory and BM25 can barely rank by it, so recent notes are the answer an agent most likely wants.
//!
//! Collections of at most [`ROW_BUDGET`] chunks (a small test collection such as Cranfield) are always scored
//! whole and rank exactly as without a plan.

use rusqlite::Connection;

/// Rows a keyword query may score before its terms are bounded: few enough that scoring them stays a small part
/// of a search, which a one-shot `memory search` pays with a cold cache. A collection of at most this many chunks
/// is always scored whole.
pub(crate) const ROW_BUDGET: u64 = 8_000;

#[derive(Debug, PartialEq)]
pub(crate) struct KeywordPlan {
    /// The terms to match.
    pub terms: Vec<String>,
    /// Match only rows with rowid >= this (the newest chunks).
    pub min_rowid: Option<i64>,
}

/// Document frequency of each term (rows containing it in any column), at a cost bounded by the budget rather
/// than by the term's frequency: the term's newest rows are read up to [`ROW_BUDGET`] + 1 (exact below that,
/// which is every term of a small collection). A term past it is estimated from how much of the rowid range
/// its newest [`ROW_BUDGET`] + 1 rows span. (FTS5's `fts5vocab` counts by walking the term's whole doclist, a
/// cost that grows with the index, on every query.)
fn doc_frequencies(c: &Connection, terms: &[String], rows: u64, rowids: (i64, i64)) -> rusqlite::Result<Vec<u64>> {
    // Counted inside SQLite: one row back per term, not one per matching chunk.
    let mut newest =
        c.prepare_cached("SELECT count(*), min(rowid) FROM (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2)")?;
    let (first, last) = rowids;
    terms
        .iter()
        .map(|t| {
            let expr = super::fts_match_expression(std::slice::from_ref(t));
            let (n, oldest): (i64, Option<i64>) = newest.query_row(rusqlite::params![expr, ROW_BUDGET as i64 + 1], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let (n, oldest) = (n as u64, oldest.unwrap_or(last));
            if n <= ROW_BUDGET {
                return Ok(n);
            }
            // n rows in the newest (last - oldest + 1) rowids: the same density over the whole range.
            let spanned = (last - oldest + 1).max(1) as f64;
            let whole = (last - first + 1).max(1) as f64;
            let estimate = (n as f64 * whole / spanned).round() as u64;
            Ok(estimate.clamp(ROW_BUDGET + 1, rows.max(ROW_BUDGET + 1)))
        })
        .collect()
}

/// Decide which terms to match (see the module comment). `rows` is the number of chunks.
pub(crate) fn plan_from(terms: &[String], dfs: &[u64], rows: u64, max_rowid: i64) -> KeywordPlan {
    let total: u64 = dfs.iter().sum();
    if total <= ROW_BUDGET || rows <= ROW_BUDGET {
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
    let rows = super::schema::chunk_count(c)?;
    if rows <= ROW_BUDGET {
        return Ok(KeywordPlan { terms: terms.to_vec(), min_rowid: None });
    }
    let (first, last): (Option<i64>, Option<i64>) = c.query_row(
        // Two subqueries: SQLite reads min and max from the b-tree's ends only for a lone min() or max().
        "SELECT (SELECT min(rowid) FROM chunks), (SELECT max(rowid) FROM chunks)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (first, last) = (first.unwrap_or(0), last.unwrap_or(0));
    let dfs = doc_frequencies(c, terms, rows, (first, last))?;
    Ok(plan_from(terms, &dfs, rows, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(words: &[&str]) -> Vec<String> {
        words.iter().map(std::string::ToString::to_string).collect()
    }

    /// The kept count is the number of chunks through inserts, deletes and a migration of an index from before.
    #[test]
    fn the_chunk_count_follows_inserts_and_deletes() {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::create(&mut c).unwrap();
        let count = |c: &Connection| super::super::schema::chunk_count(c).unwrap();
        assert_eq!(count(&c), 0);
        let insert = |c: &Connection, i: i64| {
            c.execute(
                "INSERT INTO chunks (rowid, id, source, path, start_line, end_line, text, hash) VALUES (?1, ?2, 'memory', 'a.md', 1, 1, 't', 'h')",
                rusqlite::params![i, format!("c{i}")],
            )
            .unwrap();
        };
        for i in 1..=300 {
            insert(&c, i);
        }
        assert_eq!(count(&c), 300);
        c.execute("DELETE FROM chunks WHERE rowid % 3 = 0", []).unwrap();
        assert_eq!(count(&c), 200);
        // An index from before the count: migrated on open, counted once.
        c.execute_batch("DROP TRIGGER chunk_count_insert; DROP TRIGGER chunk_count_delete; DROP TABLE chunk_count;").unwrap();
        insert(&c, 1000);
        super::super::schema::create(&mut c).unwrap();
        assert_eq!(count(&c), 201);
        insert(&c, 1001);
        assert_eq!(count(&c), 202);
    }

    const B: u64 = ROW_BUDGET;

    #[test]
    fn small_queries_are_unchanged() {
        let p = plan_from(&t(&["a", "b"]), &[100, B - 100], 100_000, 100_000);
        assert_eq!(p, KeywordPlan { terms: t(&["a", "b"]), min_rowid: None });
        // A collection the budget covers is scored whole, whatever the frequencies add up to.
        let p = plan_from(&t(&["a", "b", "c"]), &[B, B, B], B, B as i64);
        assert_eq!(p, KeywordPlan { terms: t(&["a", "b", "c"]), min_rowid: None });
    }

    #[test]
    fn words_in_most_chunks_give_way_to_rarer_ones() {
        let p = plan_from(&t(&["common", "rare", "mid"]), &[90_000, 40, 30_000], 100_000, 100_000);
        // "common" is at FTS5's idf floor; "mid" does not fit beside "rare".
        assert_eq!(p, KeywordPlan { terms: t(&["rare"]), min_rowid: None });
        let p = plan_from(&t(&["common", "rare", "mid"]), &[90_000, 40, B / 2], 100_000, 100_000);
        assert_eq!(p.terms, t(&["rare", "mid"]));
    }

    #[test]
    fn only_frequent_words_are_matched_among_the_newest_chunks() {
        let p = plan_from(&t(&["x", "y"]), &[80_000, 60_000], 100_000, 250_000);
        assert_eq!(p.terms, t(&["y"]));
        let window = 250_000 - p.min_rowid.unwrap() + 1;
        // About ROW_BUDGET of y's 60,000 rows fall in the window.
        assert_eq!(window, (B as f64 * 100_000.0 / 60_000.0).ceil() as i64);
        // A term in no chunk changes nothing.
        let p = plan_from(&t(&["x", "zzz"]), &[80_000, 0], 100_000, 100_000);
        assert_eq!(p.terms, t(&["x"]));
        assert!(p.min_rowid.is_some());
    }

    /// Frequencies on a real FTS5 table: exact up to the budget, estimated from the newest rows beyond it, and
    /// the plan built from them.
    #[test]
    fn frequencies_are_exact_below_the_budget_and_estimated_above_it() {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::create(&mut c).unwrap();
        let n = 4 * B as i64;
        let tx = c.transaction().unwrap();
        for i in 1..=n {
            // "every" in every chunk, "half" in every other, "rare" in 10, "recent" in the newest 3/8 only.
            let mut text = String::from("every");
            if i % 2 == 0 {
                text.push_str(" half");
            }
            if i % (n / 10) == 0 {
                text.push_str(" rare");
            }
            if i > 5 * n / 8 {
                text.push_str(" recent");
            }
            tx.execute(
                "INSERT INTO chunks (rowid, id, source, path, start_line, end_line, text, hash) VALUES (?1, ?2, 'memory', 'a.md', 1, 1, ?3, 'h')",
                rusqlite::params![i, format!("c{i}"), text],
            )
            .unwrap();
            tx.execute("INSERT INTO chunks_fts (rowid, terms, heading) VALUES (?1, ?2, '')", rusqlite::params![i, text]).unwrap();
        }
        tx.commit().unwrap();
        let rows = n as u64;
        let dfs = doc_frequencies(&c, &t(&["every", "half", "rare", "recent", "absent"]), rows, (1, n)).unwrap();
        assert_eq!(dfs[0], rows);
        assert!(dfs[1].abs_diff(rows / 2) <= rows / 50, "half: {}", dfs[1]);
        assert_eq!(dfs[2], 10);
        // All of "recent" is among the newest rows: estimated as everywhere, which bounds it like a common word.
        assert!(dfs[3] > B, "recent: {}", dfs[3]);
        assert_eq!(dfs[4], 0);
        let p = plan(&c, &t(&["every", "rare"])).unwrap();
        assert_eq!(p, KeywordPlan { terms: t(&["rare"]), min_rowid: None });
        let p = plan(&c, &t(&["every", "half"])).unwrap();
        assert_eq!(p.terms, t(&["half"]));
        // "half" is in every other chunk: its newest ROW_BUDGET rows span about twice as many rowids.
        let window = n - p.min_rowid.unwrap() + 1;
        assert!((window as u64).abs_diff(2 * B) <= B / 10, "window {window}");
    }
}

//! Keyword query builder: an arbitrary user query goes through the keyword analysis and the builtin engine's FTS5
//! MATCH expression, which then runs against the engine's real schema in memory. It must never be an FTS5 syntax
//! error, and a document made of the same text must match it (queries and documents share one analysis), unless
//! FTS5's tokenizer sees no token in any query term: unicode61 knows letters, digits and private-use characters
//! of Unicode 6.1 only, so a term made of combining marks alone (U+07A6) or of newer letters matches nothing.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use memory_core::analysis::{document_terms_joined, query_terms, MAX_QUERY_TERMS};
use rusqlite::Connection;

thread_local! {
    static DB: RefCell<Connection> = RefCell::new({
        let mut c = Connection::open_in_memory().expect("in-memory database");
        memory_builtin::fuzzing::create_schema(&mut c).expect("builtin schema");
        // The tokens FTS5 sees in a text: the engine's tokenizer on a scratch table, read through fts5vocab.
        let tokenizer: String = c
            .query_row("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'", [], |r| r.get(0))
            .map(|sql: String| sql[sql.find("tokenize").expect("chunks_fts names its tokenizer")..].trim_end_matches(')').to_string())
            .expect("chunks_fts schema");
        c.execute_batch(&format!(
            "CREATE VIRTUAL TABLE scratch USING fts5(t, {tokenizer});
             CREATE VIRTUAL TABLE scratch_vocab USING fts5vocab(scratch, 'row');"
        ))
        .expect("scratch table");
        c
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(query) = std::str::from_utf8(data) else { return };
    let terms = query_terms(query);
    assert!(terms.len() <= MAX_QUERY_TERMS);
    if terms.is_empty() {
        return;
    }
    let expr = memory_builtin::fuzzing::fts_match_expression(&terms);
    let doc = document_terms_joined(query);
    DB.with(|db| {
        let db = db.borrow();
        db.execute("DELETE FROM chunks_fts", []).expect("clear");
        db.execute("INSERT INTO chunks_fts (rowid, terms, heading) VALUES (1, ?1, '')", [&doc]).expect("insert");
        let mut st = db.prepare_cached("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1").expect("prepare");
        let hits: Vec<i64> = match st.query_map([&expr], |r| r.get(0)).and_then(|rows| rows.collect()) {
            Ok(h) => h,
            Err(e) => panic!("MATCH {expr:?} (query {query:?}) failed: {e}"),
        };
        db.execute("DELETE FROM scratch", []).expect("clear scratch");
        db.execute("INSERT INTO scratch (t) VALUES (?1)", [terms.join(" ")]).expect("insert scratch");
        let fts_tokens: i64 = db.query_row("SELECT count(*) FROM scratch_vocab", [], |r| r.get(0)).expect("vocab");
        if fts_tokens > 0 {
            assert_eq!(hits, vec![1], "the query's own text does not match it: MATCH {expr:?} against {doc:?}");
        }
    });
});

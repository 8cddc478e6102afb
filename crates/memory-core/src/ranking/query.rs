//! A search's query, read once: the text as asked and every reading of it the ranking rules use (its index terms,
//! its words as a reader counts them, what it names exactly, whether it asks about the present, the days it names,
//! its compounds and word pairs), so that no rule analyses the text again.

use crate::analysis::{query_compounds, query_terms, query_word_pairs, QueryWords};

use super::{asks_about_present, named_day, ExactQuery};

/// A query parsed once ([`Query::parse`]); every stage of a search reads this.
#[derive(Debug, Clone)]
pub struct Query {
    text: String,
    terms: Vec<String>,
    words: QueryWords,
    exact: ExactQuery,
    about_present: bool,
    named_days: Vec<i64>,
    compounds: Vec<String>,
    word_pairs: Vec<String>,
}

impl Query {
    /// Read `text` for every rule at once.
    pub fn parse(text: &str) -> Query {
        Query {
            text: text.to_string(),
            terms: query_terms(text),
            words: QueryWords::of(text),
            exact: ExactQuery::of(text),
            about_present: asks_about_present(text),
            named_days: named_day::named_days(text),
            compounds: query_compounds(text),
            word_pairs: query_word_pairs(text),
        }
    }

    /// The query as asked (what a reranker or an embedding model reads).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its keyword-index terms ([`query_terms`]).
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// Its words as a reader counts them ([`QueryWords`]).
    pub fn words(&self) -> &QueryWords {
        &self.words
    }

    /// What it names exactly ([`ExactQuery`]).
    pub fn exact(&self) -> &ExactQuery {
        &self.exact
    }

    /// Whether it asks about the present ([`asks_about_present`]).
    pub fn asks_about_present(&self) -> bool {
        self.about_present
    }

    /// The days it names, as midnight UTC milliseconds ([`named_day::named_days`]).
    pub fn named_days(&self) -> &[i64] {
        &self.named_days
    }

    /// Its hyphen compounds ([`query_compounds`]).
    pub fn compounds(&self) -> &[String] {
        &self.compounds
    }

    /// Its adjacent word pairs ([`query_word_pairs`]).
    pub fn word_pairs(&self) -> &[String] {
        &self.word_pairs
    }
}

//! A search's query, read once: the text as asked and every reading of it the ranking rules use (its index terms,
//! its words as a reader counts them, what it names exactly, whether it asks about the present, its compounds and
//! word pairs, the time it names), so that no rule analyses the text again.

use chrono::NaiveDate;

use crate::analysis::{query_compounds, query_terms, query_word_pairs, QueryWords};
use crate::time::{self, TimeExpression};

use super::{asks_about_present, ExactQuery};

/// A query parsed once ([`Query::parse`]); every stage of a search reads this.
#[derive(Debug, Clone)]
pub struct Query {
    text: String,
    terms: Vec<String>,
    words: QueryWords,
    exact: ExactQuery,
    about_present: bool,
    time: Vec<TimeExpression>,
    undated_words: QueryWords,
    compounds: Vec<String>,
    word_pairs: Vec<String>,
}

impl Query {
    /// Read `text` for every rule at once, asked today by the clock.
    pub fn parse(text: &str) -> Query {
        Query::parse_on(text, time::clock().0)
    }

    /// Read `text` for every rule at once, asked on `today` (what its "yesterday" or "last week" means).
    pub fn parse_on(text: &str, today: NaiveDate) -> Query {
        let found = time::find(text, today);
        let words = QueryWords::of(text);
        let undated_words = if found.is_empty() { words.clone() } else { QueryWords::of(&time::without_expressions(text, &found)) };
        Query {
            text: text.to_string(),
            terms: query_terms(text),
            words,
            exact: ExactQuery::of(text),
            about_present: asks_about_present(text),
            compounds: query_compounds(text),
            word_pairs: query_word_pairs(text),
            time: found,
            undated_words,
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

    /// The time it names ([`crate::time::find`]): what [`super::window`] prefers notes from.
    pub fn time(&self) -> &[TimeExpression] {
        &self.time
    }

    /// Its words without those that say when: how much of the rest of the question a note of that time holds
    /// ([`super::window`]).
    pub fn undated_words(&self) -> &QueryWords {
        &self.undated_words
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

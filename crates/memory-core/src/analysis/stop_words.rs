//! English words that carry no meaning in a query (stop words), and the clitics (`'s`, `n't`...) a query's words
//! lose before they are looked up.

use std::collections::HashSet;

/// Common English words that carry no meaning in a query.
pub(super) const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "also",
    "may",
    "might",
    "must",
    "shall",
    "upon",
    "us",
    "whether",
    "within",
    "without",
    "yet",
    "one",
    "ones",
    "anything",
    "something",
    "etc",
    "eg",
    "ie",
];

/// English clitics after an apostrophe: "Gina's", "it's", "don't", "I'd", "we'll", "you're", "I've", "I'm".
pub(super) const CLITICS: &[&str] = &["s", "t", "d", "ll", "re", "ve", "m"];

/// The query without the clitics an apostrophe attaches to a word ([`CLITICS`]). What is left of one is not a
/// word but a term on nearly every line of chat ("it's", "that's"), so a possessive in a question ("Melanie's
/// son") would make every line with a contraction match it, in the snippet's choice most. Only after an
/// apostrophe that follows
/// a letter or digit: "vitamin D" keeps its "d". Queries only: documents keep every term, so indexes stay as
/// they are.
pub(super) fn without_clitics(query: &str) -> std::borrow::Cow<'_, str> {
    const APOSTROPHES: [char; 2] = ['\'', '\u{2019}'];
    if !query.contains(APOSTROPHES) {
        return std::borrow::Cow::Borrowed(query);
    }
    let mut out = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(pos) = rest.find(APOSTROPHES) {
        let (before, from) = rest.split_at(pos);
        let quote_len = from.chars().next().map_or(1, char::len_utf8);
        let after = &from[quote_len..];
        out.push_str(before);
        let attached = out.chars().next_back().is_some_and(char::is_alphanumeric);
        let word_len = after.find(|c: char| !c.is_alphanumeric()).unwrap_or(after.len());
        if attached && CLITICS.iter().any(|c| after[..word_len].eq_ignore_ascii_case(c)) {
            out.push(' ');
            rest = &after[word_len..];
        } else {
            out.push_str(&from[..quote_len]);
            rest = after;
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

pub fn is_stop_word(w: &str) -> bool {
    static SET: std::sync::OnceLock<HashSet<&'static str>> = std::sync::OnceLock::new();
    SET.get_or_init(|| STOP_WORDS.iter().copied().collect()).contains(w)
}

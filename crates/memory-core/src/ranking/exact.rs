//! What a query names exactly (an identifier, a pasted phrase, a file's name or path) and which chunks hold it:
//! evidence no similarity outweighs, so hybrid search orders such chunks first.

use crate::store::name_and_stem;

/// What a query names exactly, if anything: its identifier-like words (a ticket id, a config key, a version,
/// an error code, `CamelCase` or `SNAKE_CASE` names), else, for a query of three words or more (or six CJK
/// characters), the whole query as a phrase (an error message pasted in).
///
/// Why: keyword search finds such a string by what it is, while an embedding model sees an id or a version as
/// a few sub-word pieces close to any other id or version, and a small model's cosine similarities can push the
/// note holding the string below notes that merely look alike. A chunk holding the exact string is evidence no
/// similarity outweighs, so in hybrid search it is ordered first (by its merged score among such chunks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExactQuery {
    None,
    /// Lowercased identifier words; a chunk must hold each, at word boundaries.
    Identifiers(Vec<String>),
    /// The lowercased query with whitespace collapsed; a chunk must hold it at word boundaries.
    Phrase(String),
}

/// Characters an identifier may hold besides ASCII letters and digits.
const IDENT_PUNCT: &[char] = &['.', '_', '-', ':', '/', '#', '@', '$'];

fn is_identifier_like(w: &str) -> bool {
    let chars: Vec<char> = w.chars().collect();
    if chars.len() < 2 {
        return false;
    }
    let digits = chars.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = chars.iter().filter(|c| c.is_ascii_alphabetic()).count();
    // Punctuation between letters or digits: `v2.14.3`, `INC-20931`, `memory.search.local`, `ATLAS_SENTRY_DSN`.
    // Not a hyphen alone (`two-dimensional`, `re-entry` are English words; an id with a hyphen has a digit or a
    // capital), not single letters with dots (`i.e`, `e.g`).
    let inner_punct =
        chars.windows(3).any(|w| w[0].is_ascii_alphanumeric() && IDENT_PUNCT.contains(&w[1]) && w[1] != '-' && w[2].is_ascii_alphanumeric())
            && !w.split(|c: char| IDENT_PUNCT.contains(&c)).all(|seg| seg.chars().count() <= 1);
    // camelCase / PascalCase with a hump inside: `vectorWeight`, `BadDeviceToken` (not `Atlas`, not `HSBC`).
    let camel = chars.windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    // An acronym of three letters or more that is not an English word in capitals (`OR`, `AND`, `NOT`).
    let acronym =
        letters >= 3 && digits == 0 && chars.iter().all(char::is_ascii_uppercase) && !crate::analysis::is_stop_word(&w.to_ascii_lowercase());
    // A year (`2023` in "in May 2023") is a date's word, not an id: every dated note's heading holds one, and as an
    // exact match it would put every session's first chunk above the one that answers.
    let year = chars.len() == 4 && digits == 4 && (w.starts_with("19") || w.starts_with("20"));
    (digits > 0 && letters > 0) || (digits >= 3 && !year) || inner_punct || camel || acronym
}

impl ExactQuery {
    pub fn of(query: &str) -> ExactQuery {
        let mut idents: Vec<String> = Vec::new();
        let mut word = String::new();
        let flush = |word: &mut String, idents: &mut Vec<String>| {
            let w = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
            if is_identifier_like(w) {
                let w = w.to_ascii_lowercase();
                if !idents.contains(&w) {
                    idents.push(w);
                }
            }
            word.clear();
        };
        for c in query.chars() {
            if c.is_ascii_alphanumeric() || IDENT_PUNCT.contains(&c) {
                word.push(c);
            } else {
                flush(&mut word, &mut idents);
            }
        }
        flush(&mut word, &mut idents);
        if !idents.is_empty() {
            return ExactQuery::Identifiers(idents);
        }
        let phrase = normalize_phrase(query);
        let phrase = phrase.trim_matches(|c: char| !c.is_alphanumeric()).to_string();
        let words = phrase.split(' ').filter(|w| !w.is_empty()).count();
        let cjk = phrase.chars().filter(|c| crate::chunking::is_cjk(*c)).count();
        if words >= 3 || cjk >= 6 {
            ExactQuery::Phrase(phrase)
        } else {
            ExactQuery::None
        }
    }

    /// Whether `text` holds what the query names.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            ExactQuery::None => false,
            ExactQuery::Identifiers(ids) => {
                let lower = text.to_ascii_lowercase();
                ids.iter().all(|id| contains_at_boundary(&lower, id))
            }
            ExactQuery::Phrase(p) => contains_at_boundary(&normalize_phrase(text), p),
        }
    }
}

/// Lowercase, whitespace runs as one space.
fn normalize_phrase(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for w in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(w.chars().flat_map(char::to_lowercase));
    }
    out
}

/// `needle` in `haystack` with no ASCII letter or digit right before or after it (`v2.14.3` is not in
/// `v2.14.30`). A CJK needle has no word boundaries to check.
fn contains_at_boundary(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let first_word = needle.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    let last_word = needle.chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric());
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let start = from + i;
        let end = start + needle.len();
        let before_ok = !first_word || !haystack[..start].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric());
        let after_ok = !last_word || !haystack[end..].chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if before_ok && after_ok {
            return true;
        }
        from = start + haystack[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Exact-path tier of a file for a query: 3 = the path, 2 = the basename, 1 = the stem, 0 = none.
pub fn exact_path_tier(query: &str, path: &str) -> u8 {
    let q = query.trim();
    if q.is_empty() {
        return 0;
    }
    if q == path {
        return 3;
    }
    let (name, stem) = name_and_stem(path);
    if q == name {
        return 2;
    }
    if q == stem {
        return 1;
    }
    0
}

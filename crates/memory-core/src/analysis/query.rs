//! What a query is made of, read once per search: its index terms, its words as a reader counts them
//! ([`QueryWords`]), its hyphen compounds and its adjacent word pairs.

use std::collections::HashSet;

use super::cjk::{cjk_terms, is_kana_or_hangul, jieba, CJK_QUESTION_WORDS, CJK_STOP_CHARS};
use super::stop_words::without_clitics;
use super::{each_document_term, each_hyphen_compound, is_stop_word, raw_tokens, stem_word};

/// A query's words as a reader counts them, for asking how much of the query a text holds
/// ([`QueryWords::share_held_by`]): each content word once (stemmed; stop words out), and each Chinese or Japanese
/// run cut into its words (jieba; function characters, question words and the words jieba tags as function words
/// out: `is_function_word`) rather than into the overlapping bigrams the keyword index matches by, most of which
/// straddle two words and are held by no text at all.
#[derive(Debug, Clone, Default)]
pub struct QueryWords {
    /// Stems, matched against a text's terms.
    words: Vec<String>,
    /// CJK words, matched as they are written in a text.
    cjk: Vec<String>,
}

impl QueryWords {
    pub fn of(query: &str) -> QueryWords {
        let mut out = QueryWords::default();
        raw_tokens(&without_clitics(query), |t, cjk| {
            if cjk {
                let mut add = |w: &str| {
                    let single_stop = w.chars().count() == 1 && CJK_STOP_CHARS.contains(w);
                    if !single_stop && !CJK_QUESTION_WORDS.contains(&w) && !out.cjk.iter().any(|c| c == w) {
                        out.cjk.push(w.to_string());
                    }
                };
                if t.chars().any(is_kana_or_hangul) {
                    add(t);
                } else {
                    for token in jieba().tag(t, true) {
                        if !is_function_word(token.tag) {
                            add(token.word);
                        }
                    }
                }
            } else if t.chars().any(char::is_alphanumeric) && !is_stop_word(t) {
                let stem = stem_word(t);
                if !out.words.contains(&stem) {
                    out.words.push(stem);
                }
            }
        });
        out.words.truncate(MAX_QUERY_TERMS);
        out.cjk.truncate(MAX_QUERY_TERMS);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.cjk.is_empty()
    }

    /// The share of these words `text` holds, 0..1 (1 when there are none to hold).
    pub fn share_held_by(&self, text: &str) -> f64 {
        let held = self.held_by(text);
        if held.is_empty() {
            return 1.0;
        }
        held.iter().filter(|h| **h).count() as f64 / held.len() as f64
    }

    /// These words, in the order [`held_by`](Self::held_by) flags them (stems first, then CJK words).
    pub fn list(&self) -> impl Iterator<Item = &str> {
        self.words.iter().chain(&self.cjk).map(String::as_str)
    }

    /// Which of these words `text` holds: one flag per word (stems first, then CJK words).
    pub fn held_by(&self, text: &str) -> Vec<bool> {
        let mut held = vec![false; self.words.len()];
        if !self.words.is_empty() {
            each_document_term(text, &mut |t| {
                if let Some(i) = self.words.iter().position(|w| w == t) {
                    held[i] = true;
                }
            });
        }
        let lower = if self.cjk.is_empty() { String::new() } else { text.to_lowercase() };
        held.extend(self.cjk.iter().map(|w| lower.contains(w.as_str())));
        held
    }
}

/// A jieba part of speech of the words that carry grammar, not content: prepositions (p, "对", "在"),
/// conjunctions (c), particles (u..., "的", "了"), modal particles (y) and interjections (e). What English stop words
/// are to [`QueryWords`]: "猫对什么食物过敏" asks about a cat, food and allergy, as "What food is the cat allergic
/// to?" does; a note that holds "对" holds no more of the question than one that holds "to".
fn is_function_word(tag: &str) -> bool {
    matches!(tag, "p" | "c" | "y" | "e") || tag.starts_with('u')
}

/// Maximum distinct terms in one query: bounds the cost of pasted paragraphs.
pub const MAX_QUERY_TERMS: usize = 64;

/// Distinct query terms, stop words removed (unless nothing else is left), in query order.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut content = Vec::new();
    let mut seen = HashSet::new();
    raw_tokens(&without_clitics(query), |t, cjk| {
        // Underscores alone (`_`, `__`) are nothing to search for: full-text indexes drop them as punctuation, so
        // such a term would match no document, not even one made of the same text.
        if !cjk && !t.chars().any(char::is_alphanumeric) {
            return;
        }
        let mut terms = Vec::new();
        let stop = !cjk && is_stop_word(t);
        if cjk {
            cjk_terms(t, &mut terms);
        } else {
            terms.push(stem_word(t));
        }
        for term in terms {
            if seen.insert(term.clone()) {
                if !stop {
                    content.push(term.clone());
                }
                all.push(term);
            }
        }
    });
    each_hyphen_compound(query, &mut |w| {
        let term = stem_word(w);
        if seen.insert(term.clone()) {
            content.push(term.clone());
            all.push(term);
        }
    });
    let mut terms = if content.is_empty() { all } else { content };
    terms.truncate(MAX_QUERY_TERMS);
    terms
}

/// Verb particles a phrasal verb's compound noun absorbs ("work out" / "workout", "set up" / "setup").
const PARTICLES: &[&str] = &["out", "up", "down", "off", "over", "in"];

/// Words a query writes apart that a note may write as one ("work out" / "workout", "road trip" / "roadtrip"):
/// each two adjacent words joined and stemmed, when both are alphabetic, the first is a content word and the
/// second is one too or a verb particle (`PARTICLES`; "for getting" is not "forgetting"). Snippets weigh
/// them as query terms; a join that is no word matches nothing. Not for the index's search: there the joins
/// match more wrong chunks than right ones (figures in docs/benchmark-history.md).
pub fn query_compounds(query: &str) -> Vec<String> {
    let mut words: Vec<Option<String>> = Vec::new();
    raw_tokens(&without_clitics(query), |t, cjk| words.push((!cjk && t.chars().all(char::is_alphabetic)).then(|| t.to_string())));
    let mut out: Vec<String> = Vec::new();
    for pair in words.windows(2) {
        let (Some(a), Some(b)) = (&pair[0], &pair[1]) else { continue };
        if is_stop_word(a) || (is_stop_word(b) && !PARTICLES.contains(&b.as_str())) {
            continue;
        }
        let joined = stem_word(&format!("{a}{b}"));
        if !out.contains(&joined) {
            out.push(joined);
        }
        if out.len() >= MAX_QUERY_TERMS {
            break;
        }
    }
    out
}

/// Articles: a word pair reads across them ("after the accident" holds the pair "after accident").
pub(super) fn is_article(w: &str) -> bool {
    matches!(w, "a" | "an" | "the")
}

/// The query's adjacent word pairs, stemmed and joined by a space ("How did Melanie feel after the accident?"
/// -> "how did", "did melanie", ..., "after accident"): articles skipped, pairs of two stop words left out. A
/// line that holds a pair in the same order says the query's phrase, not only its words.
/// [`each_term_and_word_pair`](super::each_term_and_word_pair) writes a text's pairs the same way.
pub fn query_word_pairs(query: &str) -> Vec<String> {
    let mut words: Vec<Option<(String, bool)>> = Vec::new();
    raw_tokens(&without_clitics(query), |t, cjk| {
        if cjk {
            words.push(None);
        } else if !is_article(t) {
            words.push(Some((stem_word(t), is_stop_word(t))));
        }
    });
    let mut out: Vec<String> = Vec::new();
    for pair in words.windows(2) {
        let (Some((a, a_stop)), Some((b, b_stop))) = (&pair[0], &pair[1]) else { continue };
        if *a_stop && *b_stop {
            continue;
        }
        let joined = format!("{a} {b}");
        if !out.contains(&joined) {
            out.push(joined);
        }
        if out.len() >= MAX_QUERY_TERMS {
            break;
        }
    }
    out
}

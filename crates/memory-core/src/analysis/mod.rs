//! Keyword analysis shared by every engine, for documents and queries alike, so that every store matches the
//! same terms: Unicode word tokens lowercased, English words stemmed (Snowball, after irregular forms take their
//! base word: `irregular`), CJK runs as character bigrams
//! (a safety net that finds every two-character word, known to a dictionary or not), plus, for Chinese, the
//! words of a jieba segmentation that bigrams cannot express: single-character words and words of three or more
//! characters. Japanese (any kana in the run) and Korean stay bigrams.
//! Stores index the space-joined terms with a plain tokenizer; user text never reaches query syntax.
//!
//! Changing anything here changes [`crate::identity::ANALYZER_VERSION`], which rebuilds indexes.

use std::collections::HashSet;

use rust_stemmers::{Algorithm, Stemmer};

use crate::chunking::is_cjk;

mod cjk;
mod irregular;
mod query;
mod stop_words;

#[cfg(test)]
use cjk::cjk_terms;
use cjk::cjk_terms_each;
use query::is_article;
pub use query::{query_compounds, query_terms, query_word_pairs, QueryWords, MAX_QUERY_TERMS};
pub use stop_words::is_stop_word;
use stop_words::without_clitics;

/// Name recorded in the index identity.
pub fn analyzer_name() -> String {
    format!("{}:words+irregular-en+snowball-en+cjk-bigram+jieba", crate::identity::ANALYZER_VERSION)
}

thread_local! {
    static STEMMER: Stemmer = Stemmer::create(Algorithm::English);
}

/// Word tokens of `text`: runs of letters, digits and `_`, lowercased; CJK runs are returned whole
/// (flag true) for the caller to split.
fn raw_tokens(text: &str, mut f: impl FnMut(&str, bool)) {
    let mut word = String::new();
    let mut cjk = String::new();
    for c in text.chars() {
        if is_cjk(c) && c.is_alphanumeric() {
            if !word.is_empty() {
                f(&word, false);
                word.clear();
            }
            cjk.push(c);
        } else if c.is_alphanumeric() || c == '_' {
            if !cjk.is_empty() {
                f(&cjk, true);
                cjk.clear();
            }
            if c.is_ascii() {
                word.push(c.to_ascii_lowercase());
            } else {
                word.extend(c.to_lowercase());
            }
        } else {
            if !word.is_empty() {
                f(&word, false);
                word.clear();
            }
            if !cjk.is_empty() {
                f(&cjk, true);
                cjk.clear();
            }
        }
    }
    if !word.is_empty() {
        f(&word, false);
    }
    if !cjk.is_empty() {
        f(&cjk, true);
    }
}

/// Stem a lowercase word: only purely alphabetic words are stemmed; ids, numbers and snake_case stay exact.
fn stem_word(w: &str) -> String {
    with_stem(w, str::to_string)
}

/// `f` of the stem of lowercase word `w` (see [`stem_word`]), without copying a memoised stem.
fn with_stem<R>(w: &str, f: impl FnOnce(&str) -> R) -> R {
    // An irregular form ("made", "went", "children") is its base word, stemmed as that word is.
    let w = irregular::base_of(w).unwrap_or(w);
    if w.len() > 3 && w.chars().all(char::is_alphabetic) {
        // Vocabularies are small and Zipfian: memoise stems (bounded, shared by indexing threads) so each
        // distinct word is stemmed once.
        let cache = STEM_CACHE.get_or_init(Default::default);
        if let Ok(c) = cache.read() {
            if let Some(s) = c.get(w) {
                return f(s);
            }
        }
        let stem = STEMMER.with(|s| s.stem(w).into_owned());
        let out = f(&stem);
        if let Ok(mut c) = cache.write() {
            if c.len() >= STEM_CACHE_MAX {
                c.clear();
            }
            c.insert(w.to_string(), stem);
        }
        out
    } else {
        f(w)
    }
}

const STEM_CACHE_MAX: usize = 100_000;
static STEM_CACHE: std::sync::OnceLock<std::sync::RwLock<rustc_hash::FxHashMap<String, String>>> = std::sync::OnceLock::new();

/// Every term of a document, in order (repeats kept: they are term frequency).
pub fn document_terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_document_term(text, &mut |t| out.push(t.to_string()));
    out
}

/// Each term of [`document_terms`], handed to `emit` without a copy.
pub fn each_document_term(text: &str, emit: &mut dyn FnMut(&str)) {
    raw_tokens(text, |t, cjk| {
        if cjk {
            cjk_terms_each(t, emit);
        } else {
            with_stem(t, |s| emit(s));
        }
    });
    each_hyphen_compound(text, &mut |w| with_stem(w, |s| emit(s)));
}

/// The longest word a hyphenated compound can join to: longer runs are not words.
const MAX_COMPOUND_CHARS: usize = 40;

/// Each hyphenated compound of `text` written as one word, lowercased ("de-stress" -> "destress", "self-care" ->
/// "selfcare"): two or more runs of letters joined by single hyphens, the whole not part of a longer word with
/// digits or underscores ("covid-19", "x_y-z" are not compounds). Its parts are terms already; the joined word
/// is a term too, so a question that writes the word whole ("destress", "email") finds the note that hyphenates
/// it, and the other way round (what Lucene's word-delimiter filter calls catenating words).
fn each_hyphen_compound(text: &str, emit: &mut dyn FnMut(&str)) {
    const HYPHENS: [char; 2] = ['-', '\u{2010}'];
    if !text.contains(HYPHENS) {
        return;
    }
    let mut joined = String::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || HYPHENS.contains(&c)) || is_cjk(c)) {
        if !word.contains(HYPHENS) {
            continue;
        }
        joined.clear();
        let mut parts = 0;
        for part in word.split(HYPHENS) {
            if part.is_empty() || !part.chars().all(char::is_alphabetic) {
                parts = 0;
                break;
            }
            parts += 1;
            joined.extend(part.chars().flat_map(char::to_lowercase));
        }
        if parts >= 2 && joined.chars().count() <= MAX_COMPOUND_CHARS {
            emit(&joined);
        }
    }
}

/// Document terms joined by spaces, ready for a store's full-text index (`document_terms(text).join(" ")`,
/// written into one string: indexing spends most of its time here).
pub fn document_terms_joined(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut first = true;
    each_document_term(text, &mut |t| {
        if !first {
            out.push(' ');
        }
        first = false;
        out.push_str(t);
    });
    out
}

/// BM25 weight of a chunk's heading terms relative to its body terms (1.0): every store that scores keywords
/// weighs headings this much extra, so engines rank alike.
pub const HEADING_WEIGHT: f64 = 0.5;

/// Heading terms of a chunk: those of the headings it sits under (`above`, from
/// [`crate::chunking::headings::headings_above`]) and of its own heading lines.
pub fn heading_terms(above: &[&str], text: &str) -> String {
    let mut out = Vec::new();
    for h in above.iter().copied().chain(crate::chunking::headings::headings(text).map(|(_, _, h)| h)) {
        out.extend(document_terms(h));
    }
    out.join(" ")
}

/// Each term of [`each_document_term`] and, after each word, the pair it makes with the word before it
/// ([`query_word_pairs`]' form: articles skipped, a CJK run breaks the sequence), both without the clitics an
/// apostrophe leaves, as queries are read ("Melanie's son" holds the pair "melani son", not "melani s"). One
/// pass: snippets score every line of every hit with it.
pub fn each_term_and_word_pair(text: &str, emit: &mut dyn FnMut(&str)) {
    let mut prev = String::new();
    let mut pair = String::new();
    raw_tokens(&without_clitics(text), |t, cjk| {
        if cjk {
            cjk_terms_each(t, emit);
            prev.clear();
            return;
        }
        with_stem(t, |s| {
            emit(s);
            if is_article(t) {
                return;
            }
            if !prev.is_empty() {
                pair.clear();
                pair.push_str(&prev);
                pair.push(' ');
                pair.push_str(s);
                emit(&pair);
            }
            prev.clear();
            prev.push_str(s);
        });
    });
    each_hyphen_compound(text, &mut |w| with_stem(w, |s| emit(s)));
}

/// Pseudo-relevance feedback (RM3-style): terms that carry the top-ranked documents, weighted by how much of
/// each document they make up and by the document's relevance. Query terms, stop words, numbers and very short
/// terms are left out. `docs` holds (text, relevance weight) pairs, best first.
pub fn expansion_terms(query: &[String], docs: &[(&str, f64)], max_terms: usize) -> Vec<String> {
    let query: HashSet<&str> = query.iter().map(String::as_str).collect();
    let mut weights: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    let mut support: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (text, w) in docs {
        let mut tf: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut len = 0usize;
        raw_tokens(text, |t, cjk| {
            if cjk || t.chars().count() < 3 || is_stop_word(t) || t.chars().any(|c| c.is_ascii_digit()) {
                return;
            }
            len += 1;
            *tf.entry(stem_word(t)).or_default() += 1;
        });
        if len == 0 {
            continue;
        }
        for (term, n) in tf {
            if query.contains(term.as_str()) {
                continue;
            }
            *weights.entry(term.clone()).or_default() += w * n as f64 / len as f64;
            *support.entry(term).or_default() += 1;
        }
    }
    // A term seen in only one feedback document is more likely noise than topic.
    let mut ranked: Vec<(String, f64)> = weights.into_iter().filter(|(t, _)| support[t] >= 2).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.into_iter().take(max_terms).map(|(t, _)| t).collect()
}

/// Lowercase word tokens plus CJK unigrams and adjacent bigrams: the token set MMR compares.
pub fn similarity_tokens(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for_each_similarity_token(text, |t| {
        if !out.contains(t) {
            out.insert(t.to_string());
        }
    });
    out
}

/// Visit the similarity tokens of `text` (repeats included) without collecting them.
pub fn for_each_similarity_token(text: &str, mut f: impl FnMut(&str)) {
    let mut buf = String::new();
    raw_tokens(text, |t, cjk| {
        if cjk {
            let chars: Vec<char> = t.chars().collect();
            for c in &chars {
                buf.clear();
                buf.push(*c);
                f(&buf);
            }
            for w in chars.windows(2) {
                buf.clear();
                buf.extend(w);
                f(&buf);
            }
        } else {
            f(t);
        }
    });
}

#[cfg(test)]
mod tests {

    #[test]
    fn query_words_count_what_a_reader_counts() {
        let w = QueryWords::of("笔记库每天几点备份？");
        // Words, not straddling bigrams ("库每", "天几"); the question word "几点" is out.
        assert_eq!(w.share_held_by("笔记库每天备份一次"), 1.0, "{w:?}");
        assert_eq!(w.share_held_by("我每天跑步"), 0.25, "{w:?}");
        let w = QueryWords::of("What is my mother allergic to?");
        assert_eq!(w.share_held_by("Mom is allergic to penicillin."), 0.5, "{w:?}");
        assert_eq!(w.share_held_by("Both my mothers were allergic"), 1.0, "stems meet: {w:?}");
        assert!(QueryWords::of("what is it?").is_empty());
        assert_eq!(QueryWords::of("?").share_held_by("anything"), 1.0);
    }
    use super::*;
    use proptest::prelude::*;

    /// The analysis written the plain way (every character through `to_lowercase`, no stem cache, a vector of
    /// terms joined at the end): the fast path must give the same terms, or indexes would need a rebuild.
    fn plain_terms_joined(text: &str) -> String {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut terms: Vec<String> = Vec::new();
        let mut word = String::new();
        let mut cjk = String::new();
        let flush = |word: &mut String, cjk: &mut String, terms: &mut Vec<String>| {
            if !word.is_empty() {
                let base = irregular::base_of(word).map_or_else(|| word.clone(), str::to_string);
                let stemmed = base.len() > 3 && base.chars().all(char::is_alphabetic);
                terms.push(if stemmed { stemmer.stem(&base).into_owned() } else { base });
                word.clear();
            }
            if !cjk.is_empty() {
                cjk_terms(cjk, terms);
                cjk.clear();
            }
        };
        for c in text.chars() {
            if is_cjk(c) && c.is_alphanumeric() {
                let mut none = String::new();
                flush(&mut word, &mut none, &mut terms);
                cjk.push(c);
            } else if c.is_alphanumeric() || c == '_' {
                flush(&mut String::new(), &mut cjk, &mut terms);
                word.extend(c.to_lowercase());
            } else {
                flush(&mut word, &mut cjk, &mut terms);
            }
        }
        flush(&mut word, &mut cjk, &mut terms);
        // Hyphenated compounds, joined, after the words: runs of word characters and hyphens, each split at its
        // hyphens into two or more parts of letters only.
        let mut run = String::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if (c.is_alphanumeric() || c == '_' || c == '-' || c == '\u{2010}') && !is_cjk(c) {
                run.push(c);
                continue;
            }
            let parts: Vec<&str> = run.split(['-', '\u{2010}']).collect();
            if parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && p.chars().all(char::is_alphabetic)) {
                let joined: String = parts.concat().chars().flat_map(char::to_lowercase).collect();
                if joined.chars().count() <= MAX_COMPOUND_CHARS {
                    let mut word = joined;
                    flush(&mut word, &mut String::new(), &mut terms);
                }
            }
            run.clear();
        }
        terms.join(" ")
    }

    proptest! {
        #[test]
        fn joined_terms_match_the_plain_analysis(text in "[a-zA-Z0-9_ .,ÄÖÜßİΣσçéЖж中文记忆数据库的了かなカナ한국어\\-\n]{0,80}") {
            prop_assert_eq!(document_terms_joined(&text), plain_terms_joined(&text));
            prop_assert_eq!(document_terms(&text).join(" "), plain_terms_joined(&text));
        }
    }

    #[test]
    fn words_are_lowercased_and_stemmed_ids_kept() {
        assert_eq!(document_terms("Aircrafts FLYING api_key_v2 E1234"), vec!["aircraft", "fli", "api_key_v2", "e1234"]);
        assert_eq!(query_terms("aircraft"), query_terms("aircrafts"));
    }

    #[test]
    fn a_questions_base_verb_meets_the_notes_irregular_past() {
        // "What did she make / buy / choose?" against "she made / bought / chose": one term each.
        for (question, note) in
            [("make", "made"), ("buy", "bought"), ("choose", "chose"), ("choosing", "chosen"), ("eat", "ate"), ("go", "went"), ("child", "children")]
        {
            assert_eq!(query_terms(question), document_terms(note), "{question} / {note}");
        }
        // A form that is more often another word stays itself.
        assert_eq!(document_terms("left"), vec!["left"]);
    }

    #[test]
    fn query_drops_stop_words_but_not_all() {
        assert_eq!(query_terms("what is the gateway host?"), vec!["gateway", "host"]);
        assert_eq!(query_terms("the who"), vec!["the", "who"]);
    }

    #[test]
    fn what_an_apostrophe_leaves_is_not_a_query_term() {
        assert_eq!(query_terms("How did Melanie's son handle it?"), vec!["melani", "son", "handl"]);
        assert_eq!(query_terms("I'm sure we\u{2019}ll go, you're right, I've said I'd, don't"), vec!["sure", "go", "right", "say", "don"]);
        // A letter that is a word stays: "vitamin D", a quoted 's'.
        assert_eq!(query_terms("vitamin D for 's' plans"), vec!["vitamin", "d", "s", "plan"]);
        // Documents keep them (term frequencies and indexes do not change).
        assert_eq!(document_terms("Gina's"), vec!["gina", "s"]);
    }

    #[test]
    fn a_hyphenated_compound_is_also_one_word() {
        // The note hyphenates, the question does not, and the other way round.
        let note = document_terms("I've been running farther to de-stress, it helps my well\u{2010}being.");
        for q in ["destress", "wellbeing"] {
            assert!(note.contains(&query_terms(q)[0]), "{q}: {note:?}");
        }
        assert!(query_terms("How do you de-stress?").contains(&document_terms("destress")[0]));
        // The parts stay terms.
        assert!(note.contains(&"stress".to_string()) && note.contains(&"well".to_string()));
        // Not compounds: digits, underscores, a hyphen at an end, two hyphens, CJK, a run too long to be a word.
        for text in ["covid-19", "x_y-z", "-flag", "well-", "a--b", "中文-word", "state-of-the-art-and-then-some-more-words-and-yet-more-words"] {
            let joined: Vec<String> = {
                let mut v = Vec::new();
                each_hyphen_compound(text, &mut |w| v.push(w.to_string()));
                v
            };
            assert!(joined.is_empty(), "{text}: {joined:?}");
        }
        let mut v = Vec::new();
        each_hyphen_compound("state-of-the-art, Self-Care", &mut |w| v.push(w.to_string()));
        assert_eq!(v, ["stateoftheart", "selfcare"]);
    }

    #[test]
    fn compounds_join_a_content_word_with_the_next_one_or_a_particle() {
        let c = query_compounds("How often does John work out with his family?");
        assert!(c.contains(&document_terms("workout")[0]), "{c:?}");
        assert!(query_compounds("What happened on their road trip?").contains(&document_terms("roadtrip")[0]));
        // A stop word before is no compound's head: "for getting" is not "forgetting".
        let c = query_compounds("What advice does she give for getting started?");
        assert!(!c.contains(&document_terms("forgetting")[0]), "{c:?}");
        // Numbers, ids and CJK runs are not joined.
        assert!(query_compounds("api v2 中文 word").is_empty());
    }

    #[test]
    fn word_pairs_read_across_articles_and_leave_stop_word_pairs_out() {
        let pairs = query_word_pairs("How did Melanie feel after the accident?");
        assert!(pairs.contains(&"after accid".to_string()), "{pairs:?}");
        assert!(pairs.contains(&"melani feel".to_string()), "{pairs:?}");
        assert!(!pairs.contains(&"how did".to_string()), "two stop words are no phrase: {pairs:?}");
        // A text's pairs are written the same way, after each word's own term.
        let mut seen = Vec::new();
        each_term_and_word_pair("Especially after the accident, 中文 here", &mut |t| seen.push(t.to_string()));
        assert_eq!(seen, ["especi", "after", "especi after", "the", "accid", "after accid", "中文", "here"]);
        // A possessive reads as the query reads it: "Melanie's son" is the pair "melani son" on both sides.
        seen.clear();
        each_term_and_word_pair("Melanie's son", &mut |t| seen.push(t.to_string()));
        assert_eq!(seen, ["melani", "son", "melani son"]);
        assert!(query_word_pairs("What happened to Melanie's son?").contains(&"melani son".to_string()));
    }

    #[test]
    fn query_syntax_is_just_text() {
        assert_eq!(query_terms("\"a\" AND (b OR c) NEAR(d e) col:x -y z*"), vec!["b", "c", "near", "d", "e", "col", "x", "y", "z"]);
    }

    #[test]
    fn underscore_only_words_are_not_query_terms() {
        // Found by fuzz/keyword_query: `a _` queried for `_`, which FTS5 tokenizes to an empty phrase.
        assert_eq!(query_terms("a _"), vec!["a"]);
        assert!(query_terms("__ _").is_empty());
        assert_eq!(query_terms("_id __init__"), vec!["_id", "__init__"]);
    }

    #[test]
    fn cjk_runs_become_bigrams() {
        let t = document_terms("我喜欢咖啡");
        assert_eq!(&t[..4], ["我喜", "喜欢", "欢咖", "咖啡"]);
        assert_eq!(query_terms("咖啡"), vec!["咖啡"]);
        assert_eq!(query_terms("Kubernetes 灰度发布"), vec!["kubernet", "灰度", "度发", "发布"]);
    }

    #[test]
    fn chinese_single_character_and_long_words_from_jieba() {
        let t = document_terms("我的猫很可爱");
        assert!(t.contains(&"猫".to_string()), "{t:?}");
        assert!(!t.contains(&"的".to_string()), "{t:?}");
        assert_eq!(query_terms("猫"), vec!["猫"]);
        let t = document_terms("我们在中华人民共和国工作");
        assert!(t.iter().any(|w| w.chars().count() >= 3), "{t:?}");
    }

    #[test]
    fn expansion_terms_come_from_several_feedback_documents() {
        let q = query_terms("heat transfer in hypersonic flow");
        let docs = [
            ("boundary layer heat transfer with ablation at hypersonic speed", 1.0),
            ("ablation of the nose cone and boundary layer transition", 0.8),
            ("an unrelated note about coffee", 0.1),
        ];
        let e = expansion_terms(&q, &docs, 5);
        assert!(e.contains(&"ablat".to_string()) || e.contains(&"ablation".to_string()), "{e:?}");
        assert!(e.contains(&"boundari".to_string()), "{e:?}");
        assert!(!e.iter().any(|t| q.contains(t)), "query terms are not expansion terms: {e:?}");
        assert!(!e.contains(&"coffe".to_string()), "single-document terms are noise: {e:?}");
    }

    #[test]
    fn japanese_runs_stay_bigrams() {
        assert_eq!(document_terms("東京に行く"), vec!["東京", "京に", "に行", "行く"]);
        assert_eq!(query_terms("東京"), vec!["東京"]);
    }

    #[test]
    fn similarity_tokens_have_cjk_unigrams_and_bigrams() {
        let t = similarity_tokens("Hello 东京");
        for x in ["hello", "东", "京", "东京"] {
            assert!(t.contains(x), "{x}");
        }
    }
}

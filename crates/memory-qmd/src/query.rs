//! Turning a user's query into what `qmd search` and its `lex:` sub-queries understand, with none of the
//! user's text read as query syntax.
//!
//! QMD's keyword parser reads `-word` as a negation, `"..."` as a phrase, and joins every term with AND (each a
//! prefix match). So the text is cut into plain words first: anything but letters, digits and `_` separates
//! words, except `-` and `.` between two letters or digits (`studio-gw`, `127.0.0.1`, `memory.search.provider`,
//! which QMD matches as the adjacent parts its tokenizer indexed). English stop words are dropped unless
//! nothing else is left, as in the builtin engine's analysis.
//!
//! AND finds nothing for most natural-language questions, so [`any_word_document`] builds the fallback: a QMD
//! query document of one `lex:` line per word (CJK runs as character bigrams), which QMD fuses by reciprocal
//! rank, with no model involved.

use memory_core::analysis::is_stop_word;

fn is_cjk(c: char) -> bool {
    memory_core::chunking::is_cjk(c)
}

fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The query's words, syntax-free, stop words dropped (unless only stop words are left), in order, distinct.
pub fn keyword_terms(query: &str) -> Vec<String> {
    let chars: Vec<char> = query.chars().collect();
    let mut raw: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let joiner = (c == '-' || c == '.')
            && i > 0
            && word_char(chars[i - 1])
            && chars.get(i + 1).is_some_and(|n| word_char(*n))
            && !is_cjk(chars[i - 1])
            && !chars.get(i + 1).is_some_and(|n| is_cjk(*n));
        // A CJK run and Latin text next to it are separate words (QMD spaces CJK characters apart).
        let boundary = cur.chars().last().is_some_and(|p| word_char(c) && is_cjk(p) != is_cjk(c));
        if boundary {
            raw.push(std::mem::take(&mut cur));
        }
        if word_char(c) || joiner {
            cur.push(c);
        } else if !cur.is_empty() {
            raw.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        raw.push(cur);
    }
    let mut seen = std::collections::HashSet::new();
    let all: Vec<String> = raw.into_iter().map(|w| w.to_lowercase()).filter(|w| seen.insert(w.clone())).collect();
    let content: Vec<String> = all.iter().filter(|w| !is_stop_word(w)).cloned().collect();
    let mut terms = if content.is_empty() { all } else { content };
    terms.truncate(memory_core::analysis::MAX_QUERY_TERMS);
    terms
}

/// The `qmd search` query: the words, space-separated (QMD requires each of them).
pub fn all_words_query(terms: &[String]) -> String {
    terms.join(" ")
}

/// A QMD query document that matches any of the words: one `lex:` line per word, CJK runs of three or more
/// characters as their character bigrams. `None` when that would be the same search as [`all_words_query`]
/// (a single word).
pub fn any_word_document(terms: &[String]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    for t in terms {
        let chars: Vec<char> = t.chars().collect();
        if chars.len() > 2 && chars.iter().all(|c| is_cjk(*c)) {
            for w in chars.windows(2) {
                lines.push(w.iter().collect());
            }
        } else {
            lines.push(t.clone());
        }
    }
    let mut seen = std::collections::HashSet::new();
    lines.retain(|l| seen.insert(l.clone()));
    if lines.len() < 2 {
        return None;
    }
    Some(lines.iter().map(|l| format!("lex: {l}")).collect::<Vec<_>>().join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(q: &str) -> Vec<String> {
        keyword_terms(q)
    }

    #[test]
    fn syntax_is_never_passed_on() {
        assert_eq!(t("-gateway"), ["gateway"]);
        assert_eq!(t("\"unbalanced"), ["unbalanced"]);
        assert_eq!(t("NEAR(gateway studio)"), ["near", "gateway", "studio"]);
        assert_eq!(t("col:gateway"), ["col", "gateway"]);
        assert_eq!(t("gateway*"), ["gateway"]);
        assert_eq!(t("^gateway OR"), ["gateway"]);
        assert_eq!(t("{x} [y] (z)"), ["x", "y", "z"]);
        assert!(t("( ) : ^ -").is_empty());
        assert!(t("*").is_empty());
    }

    #[test]
    fn identifiers_stay_whole() {
        assert_eq!(t("studio-gw"), ["studio-gw"]);
        assert_eq!(t("ECONNREFUSED 127.0.0.1:11434"), ["econnrefused", "127.0.0.1", "11434"]);
        assert_eq!(t("memory.search.provider"), ["memory.search.provider"]);
        assert_eq!(t("Error: SQLITE_BUSY: database is locked"), ["error", "sqlite_busy", "database", "locked"]);
        assert_eq!(t("-x- a.b."), ["x", "a.b"]);
    }

    #[test]
    fn stop_words_go_unless_nothing_is_left() {
        assert_eq!(t("Where does the gateway run these days?"), ["gateway", "run", "days"]);
        assert_eq!(t("the and of"), ["the", "and", "of"]);
    }

    #[test]
    fn cjk_runs_are_words_of_their_own() {
        assert_eq!(t("Kubernetes的rollout计划"), ["kubernetes", "的", "rollout", "计划"]);
        assert_eq!(t("下周去东京出差，住在新宿"), ["下周去东京出差", "住在新宿"]);
    }

    #[test]
    fn any_word_documents() {
        assert_eq!(any_word_document(&t("gateway")), None);
        assert_eq!(any_word_document(&t("gateway machine")).unwrap(), "lex: gateway\nlex: machine");
        assert_eq!(any_word_document(&t("王小明是谁")).unwrap(), "lex: 王小\nlex: 小明\nlex: 明是\nlex: 是谁");
        assert_eq!(any_word_document(&t("周报")), None);
    }
}

//! The engine's word analysis: what a text's terms are, for notes and questions alike.

/// The terms of `text`: each word lowercased, its runs of letters and digits (an English plural made singular)
/// and, for a word written with inner punctuation (`studio-gw`, `127.0.0.1:11434`, `memory.search.provider`),
/// the whole word as well, so a pasted identifier matches itself before its parts. A run of CJK characters
/// gives its characters and their pairs. Stop words give nothing.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        let runs: Vec<&str> = word.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|r| !r.is_empty()).collect();
        if runs.len() > 1 {
            out.push(word.clone());
        }
        for run in runs {
            if run.chars().any(is_cjk) {
                let chars: Vec<char> = run.chars().collect();
                out.extend(chars.iter().map(char::to_string));
                out.extend(chars.windows(2).map(|pair| pair.iter().collect::<String>()));
            } else if !STOP_WORDS.contains(&run) {
                out.push(singular(run));
            }
        }
    }
    out
}

/// Words too common to say what a note is about.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does", "for",
    "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or",
    "our", "she", "so", "some", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "up", "us", "was",
    "we", "were", "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// Characters of the scripts written without spaces (Han, kana, Hangul).
fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}' | '\u{ac00}'..='\u{d7af}' | '\u{f900}'..='\u{faff}')
}

/// An English plural made singular ("aircrafts" -> "aircraft", "taxes" -> "tax", "countries" -> "country");
/// other words as they are.
fn singular(w: &str) -> String {
    if w.len() > 4 {
        if let Some(stem) = w.strip_suffix("ies") {
            return format!("{stem}y");
        }
        if let Some(stem) = w.strip_suffix("es").filter(|s| s.ends_with(['x', 's', 'z']) || s.ends_with("ch") || s.ends_with("sh")) {
            return stem.to_string();
        }
    }
    match w.strip_suffix('s') {
        Some(stem) if stem.len() >= 3 && !stem.ends_with(['s', 'u', 'i']) => stem.to_string(),
        _ => w.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::terms;

    #[test]
    fn identifiers_match_whole_and_in_parts_and_plurals_meet_singulars() {
        assert_eq!(terms("`studio-gw`,"), ["studio-gw", "studio", "gw"]);
        assert_eq!(terms("Aircrafts and taxes"), ["aircraft", "tax"]);
        assert_eq!(terms("*  ( ) : ^ -"), Vec::<String>::new());
        assert_eq!(terms("猫过敏"), ["猫", "过", "敏", "猫过", "过敏"]);
    }
}

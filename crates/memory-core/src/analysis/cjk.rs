//! Chinese, Japanese and Korean runs: character bigrams for every run, jieba's words for Chinese, and the
//! function characters and question words that carry no meaning.

/// Chinese function characters that carry no meaning as single-character terms.
pub(super) const CJK_STOP_CHARS: &str = "的了是在我你他她它们和与及或也都就很这那有个吗呢吧啊之其而于以为被把让给着过地得";

/// Chinese question words: what a question asks with, not what its answer says (the CJK side of the English stop
/// words "what", "where", "how", "which", "when").
pub(super) const CJK_QUESTION_WORDS: &[&str] =
    &["什么", "怎么", "怎样", "怎么样", "哪里", "哪儿", "哪个", "哪些", "哪家", "哪天", "多少", "多久", "几点", "为什么", "如何", "是否", "是不是"];

/// The jieba segmenter, loaded on first use only: a process that never sees Chinese text never pays for its
/// dictionary.
pub(super) fn jieba() -> &'static jieba_rs::Jieba {
    static JIEBA: std::sync::OnceLock<jieba_rs::Jieba> = std::sync::OnceLock::new();
    JIEBA.get_or_init(jieba_rs::Jieba::new)
}

pub(super) fn is_kana_or_hangul(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F | 0x1100..=0x11FF | 0x3130..=0x318F | 0xAC00..=0xD7AF)
}

/// CJK run to terms: adjacent bigrams (or the lone character), plus jieba's single-character and long words
/// for Chinese runs.
pub(super) fn cjk_terms(run: &str, out: &mut Vec<String>) {
    cjk_terms_each(run, &mut |t| out.push(t.to_string()));
}

/// [`cjk_terms`], each term handed to `emit`.
pub(super) fn cjk_terms_each(run: &str, emit: &mut dyn FnMut(&str)) {
    let chars: Vec<char> = run.chars().collect();
    if chars.len() == 1 {
        emit(run);
        return;
    }
    let mut pair = String::with_capacity(8);
    for w in chars.windows(2) {
        pair.clear();
        pair.push(w[0]);
        pair.push(w[1]);
        emit(&pair);
    }
    if chars.len() >= 3 && !chars.iter().any(|c| is_kana_or_hangul(*c)) {
        for token in jieba().cut(run, true) {
            let word = token.word;
            match word.chars().count() {
                1 if !CJK_STOP_CHARS.contains(word) => emit(word),
                n if n >= 3 => emit(word),
                _ => {}
            }
        }
    }
}

//! The WordPiece tokenizer of a GGUF file (`tokenizer.ggml.model = "bert"`: BERT, nomic-bert), built from the
//! file's own vocabulary, tokenizing as llama.cpp does so that vectors match llama.cpp's on the same file:
//! - llama.cpp's converter writes the vocabulary in "phantom space" form: a word-initial piece is stored as `▁` and
//!   its text, a `##` continuation piece as its bare text, special tokens as they are;
//! - special (control) tokens written in the text (`[SEP]`) are split out first, longest first;
//! - the rest is normalised per code point: accents stripped when the file asks (llama.cpp keeps the first code
//!   point of each character's NFD form and drops marks), control characters dropped, lowercased (one code point
//!   for one, as llama.cpp's table); split on white space, and every punctuation mark, ASCII symbol and CJK
//!   ideograph is a word of its own;
//! - each word, `▁` in front, is matched greedily from the left, longest piece first; a word with a part that
//!   matches nothing is one `[UNK]`;
//! - `[CLS]` first and `[SEP]` last; a text longer than the model takes is cut, `[SEP]` kept last.
//!
//! Bounded: words are tokenized only until the model's token budget is spent, and each match tries at most the
//! longest piece's length.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;
use unicode_general_category::get_general_category;
use unicode_normalization::UnicodeNormalization;

use crate::gguf::GgufFile;
use crate::spm::{split_specials, Piece};
use crate::ModelError;

/// llama.cpp's token type of a control token.
const CONTROL: i32 = 3;
/// The phantom space in front of a word-initial piece.
const PHANTOM: char = '\u{2581}';

pub struct WordPieceTokenizer {
    ids: HashMap<String, u32>,
    vocab: usize,
    /// Control tokens matched in raw text, longest first.
    specials: Vec<(String, u32)>,
    cls: u32,
    sep: u32,
    unk: u32,
    lowercase: bool,
    strip_accents: bool,
    /// Bytes of the longest piece: no match is tried longer.
    longest: usize,
    pub max_tokens: usize,
}

impl std::fmt::Debug for WordPieceTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordPieceTokenizer").field("tokens", &self.vocab).finish()
    }
}

impl WordPieceTokenizer {
    pub fn from_gguf(g: &GgufFile, max_tokens: usize) -> Result<Self, ModelError> {
        let invalid = |message: String| ModelError::Invalid { path: g.path.clone(), message };
        let model = g.string("tokenizer.ggml.model")?;
        if model != "bert" {
            return Err(ModelError::Tokenizer(format!("tokenizer `{model}` is not a WordPiece (`bert`) tokenizer")));
        }
        let tokens = g.array("tokenizer.ggml.tokens")?;
        if tokens.is_empty() || tokens.len() > u32::MAX as usize {
            return Err(invalid(format!("{} tokens in the vocabulary", tokens.len())));
        }
        let types = if g.has("tokenizer.ggml.token_type") { Some(g.array("tokenizer.ggml.token_type")?) } else { None };
        if types.is_some_and(|t| t.len() != tokens.len()) {
            return Err(invalid(format!(
                "{} tokens, {} token types",
                tokens.len(),
                types.map_or(0, <[candle_core::quantized::gguf_file::Value]>::len)
            )));
        }
        let mut ids = HashMap::with_capacity(tokens.len());
        let mut specials = Vec::new();
        let mut longest = 0;
        for (i, t) in tokens.iter().enumerate() {
            let Value::String(text) = t else { return Err(invalid(format!("token {i} is not a string"))) };
            // The first of two equal texts wins, as in llama.cpp's map.
            ids.entry(text.clone()).or_insert(i as u32);
            longest = longest.max(text.len());
            if let Some(Value::I32(CONTROL)) = types.map(|t| &t[i]) {
                if !text.is_empty() {
                    specials.push((text.clone(), i as u32));
                }
            }
        }
        specials.sort_by_key(|s| std::cmp::Reverse(s.0.len()));
        // llama.cpp's defaults for a BERT vocabulary, unless the file names them.
        let id_of = |key: &str, default: usize| -> Result<u32, ModelError> {
            let id = g.usize_or(key, default)?;
            if id >= tokens.len() {
                return Err(invalid(format!("`{key}` = {id} is not a token")));
            }
            Ok(id as u32)
        };
        let lowercase = g.bool_or("tokenizer.ggml.normalizer.lowercase", true)?;
        Ok(WordPieceTokenizer {
            cls: id_of("tokenizer.ggml.bos_token_id", 101)?,
            sep: id_of("tokenizer.ggml.seperator_token_id", 102)?,
            unk: id_of("tokenizer.ggml.unknown_token_id", 100)?,
            ids,
            vocab: tokens.len(),
            specials,
            lowercase,
            strip_accents: g.bool_or("tokenizer.ggml.normalizer.strip_accents", lowercase)?,
            longest,
            max_tokens: max_tokens.max(2),
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// Token ids of `text`: `[CLS]`, the pieces, `[SEP]`, cut to `max_tokens` with `[SEP]` kept last.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let room = self.max_tokens - 1;
        let mut out = vec![self.cls];
        for piece in split_specials(text, &self.specials) {
            if out.len() >= room {
                break;
            }
            match piece {
                Piece::Special(id) => out.push(id),
                Piece::Text(t) => {
                    for word in self.words(t) {
                        if out.len() >= room {
                            break;
                        }
                        self.word(&word, &mut out);
                    }
                }
            }
        }
        out.truncate(room);
        out.push(self.sep);
        out
    }

    /// Normalised words of a text fragment (llama.cpp's `preprocess` of its WordPiece session).
    fn words(&self, text: &str) -> Vec<String> {
        let mut words = vec![String::new()];
        for c in text.chars() {
            let c = if self.strip_accents { std::iter::once(c).nfd().next().unwrap_or(c) } else { c };
            if is_whitespace(c) {
                if !words.last().is_some_and(String::is_empty) {
                    words.push(String::new());
                }
                continue;
            }
            let category = get_general_category(c).abbreviation();
            if c == '\0' || c == '\u{FFFD}' || matches!(category, "Cc" | "Cf" | "Co" | "Cs") {
                continue;
            }
            if self.strip_accents && category.starts_with('M') {
                continue;
            }
            // One code point for one, as llama.cpp's lowercase table (`İ` becomes `i`).
            let c = if self.lowercase { c.to_lowercase().next().unwrap_or(c) } else { c };
            let last = words.last_mut().expect("never empty");
            if category.starts_with('P') || (category.starts_with('S') && (c as u32) < 0x7F) || is_cjk(c) {
                if last.is_empty() {
                    last.push(c);
                } else {
                    words.push(c.to_string());
                }
                words.push(String::new());
            } else {
                last.push(c);
            }
        }
        words.retain(|w| !w.is_empty());
        words
    }

    /// One word's pieces: greedy longest match from the left, `▁` in front; `[UNK]` when a part matches nothing.
    fn word(&self, word: &str, out: &mut Vec<u32>) {
        let mut text = String::with_capacity(word.len() + PHANTOM.len_utf8());
        text.push(PHANTOM);
        text.push_str(word);
        let start = out.len();
        let mut i = 0;
        while i < text.len() {
            let mut end = (i + self.longest).min(text.len());
            let found = loop {
                if end <= i {
                    break None;
                }
                if text.is_char_boundary(end) {
                    if let Some(&id) = self.ids.get(&text[i..end]) {
                        break Some((id, end));
                    }
                }
                end -= 1;
            };
            match found {
                Some((id, end)) => {
                    out.push(id);
                    i = end;
                }
                None => {
                    out.truncate(start);
                    break;
                }
            }
        }
        if out.len() == start {
            out.push(self.unk);
        }
    }
}

/// Unicode's White_Space code points (llama.cpp's list).
fn is_whitespace(c: char) -> bool {
    matches!(c as u32, 0x09..=0x0D | 0x20 | 0x85 | 0xA0 | 0x1680 | 0x2000..=0x200A | 0x2028 | 0x2029 | 0x202F | 0x205F | 0x3000)
}

/// CJK ideographs, each a word of its own (the ranges of BERT's tokenizer as llama.cpp has them).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer(tokens: &[&str], max_tokens: usize) -> WordPieceTokenizer {
        let ids: HashMap<String, u32> = tokens.iter().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
        let specials = ["[CLS]", "[SEP]", "[UNK]"].iter().map(|s| (s.to_string(), ids[*s])).collect();
        WordPieceTokenizer {
            cls: ids["[CLS]"],
            sep: ids["[SEP]"],
            unk: ids["[UNK]"],
            longest: tokens.iter().map(|t| t.len()).max().unwrap(),
            vocab: tokens.len(),
            ids,
            specials,
            lowercase: true,
            strip_accents: true,
            max_tokens,
        }
    }

    const VOCAB: &[&str] = &["[CLS]", "[SEP]", "[UNK]", "▁un", "aff", "able", "▁the", "▁cafe", "▁,", "▁你", "▁好", "▁hello", "▁$", "▁€x"];

    #[test]
    fn words_are_split_lowercased_and_matched_longest_first() {
        let t = tokenizer(VOCAB, 64);
        // "unaffable" = ▁un + aff + able; punctuation and CJK ideographs are words of their own; accents go.
        assert_eq!(t.encode("The UNAFFABLE Café,你好"), vec![0, 6, 3, 4, 5, 7, 8, 9, 10, 1]);
        // A word with a part no piece matches is one [UNK]; a control token in the text is that token.
        assert_eq!(t.encode("hello unaffablex [SEP] hello"), vec![0, 11, 2, 1, 11, 1]);
        // An ASCII symbol is a word of its own, a non-ASCII one stays in its word.
        assert_eq!(t.encode("$€x"), vec![0, 12, 13, 1]);
        assert_eq!(t.encode(" \t\u{200B}"), vec![0, 1]);
    }

    #[test]
    fn long_texts_are_cut_with_sep_last() {
        let t = tokenizer(VOCAB, 4);
        assert_eq!(t.encode("hello hello hello hello"), vec![0, 11, 11, 1]);
    }
}

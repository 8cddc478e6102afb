//! The SentencePiece tokenizer of a GGUF file (`tokenizer.ggml.model = "llama"`), built from the file's own
//! vocabulary (`tokenizer.ggml.tokens`, `.scores`, `.token_type`): a user who has only the `.gguf` file has
//! everything. It tokenizes as llama.cpp does, so vectors match llama.cpp's on the same file:
//! - special pieces (control, user-defined and unknown tokens) are split out of the text first, longest first;
//! - each remaining piece has its spaces written as `▁` (and one in front when the file asks for a space prefix)
//!   and is merged pair by pair, the pair whose joined text is the highest-scoring token first (leftmost on a
//!   tie), as long as a joined pair is a token;
//! - what is not a token is spelled in byte tokens (`<0x41>`);
//! - BOS and EOS are added as the file says (`tokenizer.ggml.add_bos_token` / `add_eos_token`).

use std::collections::{BinaryHeap, HashMap};

use candle_core::quantized::gguf_file::Value;

use crate::gguf::GgufFile;
use crate::ModelError;

const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNKNOWN: i32 = 2;
const BYTE: i32 = 6;

pub struct SpmTokenizer {
    ids: HashMap<String, u32>,
    scores: Vec<f32>,
    /// Special pieces matched in raw text, longest first.
    specials: Vec<(String, u32)>,
    bytes: [Option<u32>; 256],
    bos: Option<u32>,
    eos: Option<u32>,
    add_space_prefix: bool,
    pub max_tokens: usize,
}

impl std::fmt::Debug for SpmTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpmTokenizer").field("tokens", &self.scores.len()).finish()
    }
}

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Highest score first; on a tie, the leftmost pair.
        self.score.total_cmp(&other.score).then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl SpmTokenizer {
    pub fn from_gguf(g: &GgufFile, max_tokens: usize) -> Result<Self, ModelError> {
        let invalid = |message: String| ModelError::Invalid { path: g.path.clone(), message };
        let model = g.string("tokenizer.ggml.model")?;
        if model != "llama" {
            return Err(ModelError::Tokenizer(format!("tokenizer `{model}` is not a SentencePiece (`llama`) tokenizer")));
        }
        let tokens = g.array("tokenizer.ggml.tokens")?;
        let scores = g.array("tokenizer.ggml.scores")?;
        let types = g.array("tokenizer.ggml.token_type")?;
        if tokens.len() != scores.len() || tokens.len() != types.len() || tokens.is_empty() || tokens.len() > u32::MAX as usize {
            return Err(invalid(format!("{} tokens, {} scores, {} token types", tokens.len(), scores.len(), types.len())));
        }
        let mut ids = HashMap::with_capacity(tokens.len());
        let mut score_list = Vec::with_capacity(tokens.len());
        let mut specials = Vec::new();
        let mut bytes = [None; 256];
        for (i, ((t, s), ty)) in tokens.iter().zip(scores).zip(types).enumerate() {
            let (Value::String(text), Value::F32(score), Value::I32(ty)) = (t, s, ty) else {
                return Err(invalid(format!("token {i}: not a (string, f32 score, i32 type)")));
            };
            let id = i as u32;
            // The first of two equal texts wins, as in llama.cpp's map.
            ids.entry(text.clone()).or_insert(id);
            score_list.push(*score);
            match *ty {
                CONTROL | USER_DEFINED | UNKNOWN if !text.is_empty() => specials.push((text.clone(), id)),
                BYTE => {
                    if let Some(b) = text.strip_prefix("<0x").and_then(|h| h.strip_suffix('>')).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        bytes[b as usize] = Some(id);
                    }
                }
                _ => {}
            }
        }
        specials.sort_by_key(|s| std::cmp::Reverse(s.0.len()));
        let id_of = |key: &str| -> Result<Option<u32>, ModelError> {
            if !g.has(key) {
                return Ok(None);
            }
            let id = g.usize(key)?;
            if id >= tokens.len() {
                return Err(invalid(format!("`{key}` = {id} is not a token")));
            }
            Ok(Some(id as u32))
        };
        let (bos, eos) = (id_of("tokenizer.ggml.bos_token_id")?, id_of("tokenizer.ggml.eos_token_id")?);
        let add_bos = g.bool_or("tokenizer.ggml.add_bos_token", true)?;
        let add_eos = g.bool_or("tokenizer.ggml.add_eos_token", false)?;
        Ok(SpmTokenizer {
            ids,
            scores: score_list,
            specials,
            bytes,
            bos: bos.filter(|_| add_bos),
            eos: eos.filter(|_| add_eos),
            add_space_prefix: g.bool_or("tokenizer.ggml.add_space_prefix", true)?,
            max_tokens,
        })
    }

    pub fn vocab_size(&self) -> usize {
        self.scores.len()
    }

    /// Token ids of `text`, with BOS / EOS as the file says, cut to `max_tokens` (the EOS kept last).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        if let Some(b) = self.bos {
            out.push(b);
        }
        let mut prev_special = true;
        for piece in split_specials(text, &self.specials) {
            match piece {
                Piece::Special(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Piece::Text(t) => {
                    let mut s = String::with_capacity(t.len() + 3);
                    if self.add_space_prefix && prev_special {
                        s.push('▁');
                    }
                    for c in t.chars() {
                        s.push(if c == ' ' { '▁' } else { c });
                    }
                    self.merge(&s, &mut out);
                    prev_special = false;
                }
            }
        }
        let room = self.max_tokens.saturating_sub(self.eos.is_some() as usize).max(1);
        out.truncate(room);
        if let Some(e) = self.eos {
            out.push(e);
        }
        out
    }

    fn merge(&self, text: &str, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = Vec::new();
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol { start, len: c.len_utf8(), prev: i.checked_sub(1), next: None });
            if i > 0 {
                symbols[i - 1].next = Some(i);
            }
        }
        if symbols.is_empty() {
            return;
        }
        let mut queue = BinaryHeap::new();
        let mut rev_merge: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        let try_add = |symbols: &[Symbol],
                       left: Option<usize>,
                       right: Option<usize>,
                       queue: &mut BinaryHeap<Bigram>,
                       rev: &mut HashMap<(usize, usize), (usize, usize)>| {
            let (Some(l), Some(r)) = (left, right) else { return };
            let start = symbols[l].start;
            let size = symbols[l].len + symbols[r].len;
            if let Some(&id) = self.ids.get(&text[start..start + size]) {
                queue.push(Bigram { score: self.scores[id as usize], left: l, right: r, size });
                rev.insert((start, size), (l, r));
            }
        };
        for i in 1..symbols.len() {
            try_add(&symbols, Some(i - 1), Some(i), &mut queue, &mut rev_merge);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (b.left, b.right);
            if symbols[l].len == 0 || symbols[r].len == 0 || symbols[l].len + symbols[r].len != b.size {
                continue;
            }
            symbols[l].len += symbols[r].len;
            symbols[r].len = 0;
            symbols[l].next = symbols[r].next;
            if let Some(n) = symbols[r].next {
                symbols[n].prev = Some(l);
            }
            let (prev, next) = (symbols[l].prev, symbols[l].next);
            try_add(&symbols, prev, Some(l), &mut queue, &mut rev_merge);
            try_add(&symbols, Some(l), next, &mut queue, &mut rev_merge);
        }
        let mut i = Some(0);
        while let Some(at) = i {
            self.resegment(text, symbols[at].start, symbols[at].len, &symbols, &rev_merge, out);
            i = symbols[at].next;
        }
    }

    /// A merged span as its token, else as the two spans it was merged from, else as bytes.
    fn resegment(&self, text: &str, start: usize, len: usize, symbols: &[Symbol], rev: &HashMap<(usize, usize), (usize, usize)>, out: &mut Vec<u32>) {
        if let Some(&id) = self.ids.get(&text[start..start + len]) {
            out.push(id);
            return;
        }
        match rev.get(&(start, len)) {
            Some(&(l, r)) => {
                let left_len = symbols[r].start - symbols[l].start;
                self.resegment(text, start, left_len, symbols, rev, out);
                self.resegment(text, start + left_len, len - left_len, symbols, rev, out);
            }
            None => {
                for b in text[start..start + len].bytes() {
                    // A byte without a byte token is dropped, as llama.cpp drops it (its lookup fails).
                    if let Some(id) = self.bytes[b as usize] {
                        out.push(id);
                    }
                }
            }
        }
    }
}

/// A fragment of a text to tokenize: plain text, or a control token written in it.
pub(super) enum Piece<'t> {
    Text(&'t str),
    Special(u32),
}

/// The text cut around control tokens written in it: each (longest first in `specials`) splits every text fragment
/// where it occurs, as llama.cpp partitions it. Shared by the SentencePiece and WordPiece tokenizers.
pub(super) fn split_specials<'t>(text: &'t str, specials: &[(String, u32)]) -> Vec<Piece<'t>> {
    let mut pieces = vec![Piece::Text(text)];
    for (special, id) in specials {
        if !text.contains(special.as_str()) {
            continue;
        }
        let mut next = Vec::with_capacity(pieces.len() + 2);
        for p in pieces {
            match p {
                Piece::Text(mut t) => {
                    while let Some(at) = t.find(special.as_str()) {
                        if at > 0 {
                            next.push(Piece::Text(&t[..at]));
                        }
                        next.push(Piece::Special(*id));
                        t = &t[at + special.len()..];
                    }
                    if !t.is_empty() {
                        next.push(Piece::Text(t));
                    }
                }
                special => next.push(special),
            }
        }
        pieces = next;
    }
    pieces
}

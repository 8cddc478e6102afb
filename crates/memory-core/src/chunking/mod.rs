//! Chunking: whole lines into chunks of about `tokens` tokens with `overlap` tokens carried over.
//! A token is estimated as 4 characters, except CJK characters which weigh a token each. A line longer than
//! the budget (a Markdown paragraph is often one long line) is split into budget-sized pieces, cut after a
//! sentence end or a space in the second half of the piece where there is one (never inside a word), else on a
//! character boundary (never inside a UTF-8 sequence, so never inside a surrogate pair).
//!
//! Changing how text is cut changes [`CHUNKER_VERSION`], which rebuilds indexes.

use crate::sha256_hex;

pub mod annotations;
pub mod dates;
pub mod headings;

/// Version of the cutting rules below, part of the index identity.
pub const CHUNKER_VERSION: &str = "ch4";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based, inclusive.
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
    /// sha256 of `text`.
    pub hash: String,
}

/// Weight of a character in quarter-tokens: 4 for CJK, 1 otherwise.
pub fn char_weight(c: char) -> usize {
    if is_cjk(c) {
        4
    } else {
        1
    }
}

/// Han, kana, hangul and CJK punctuation/full-width forms.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF | 0x2E80..=0x2FDF | 0x2FF0..=0x303F | 0x3040..=0x30FF | 0x3100..=0x312F |
        0x3130..=0x318F | 0x3190..=0x31FF | 0x3200..=0x33FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF |
        0xA960..=0xA97F | 0xAC00..=0xD7AF | 0xD7B0..=0xD7FF | 0xF900..=0xFAFF | 0xFE30..=0xFE4F |
        0xFF00..=0xFFEF | 0x20000..=0x2FA1F | 0x30000..=0x3134F)
}

fn weight(s: &str) -> usize {
    s.chars().map(char_weight).sum()
}

struct Piece<'a> {
    line: usize,
    text: &'a str,
    weight: usize,
    /// The piece begins a dated section (`## 2026-03-04`): a chunk ends before it, with no overlap carried, so
    /// each chunk of a running log is of one day ([`dates`]).
    starts_day: bool,
}

/// Split text into chunks. `tokens` and `overlap` are in tokens (budget = 4 x tokens weight units). A dated
/// heading (`## 2026-03-04`) always starts a new chunk.
pub fn chunk_text(text: &str, tokens: usize, overlap: usize) -> Vec<Chunk> {
    // Saturating: the config puts no upper bound on the sizes, and a huge one means "no limit", not a panic.
    let budget = tokens.max(1).saturating_mul(4);
    let overlap_budget = overlap.saturating_mul(4).min(budget.saturating_sub(1));

    // Over-long lines are cut into pieces that fill a chunk (one weight unit left for the newline).
    let piece_budget = budget.saturating_sub(1).max(1);

    // Lines, with over-long lines split into pieces that keep their line number.
    let mut pieces: Vec<Piece> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let w = weight(line) + 1; // +1 for the newline
        let starts_day = dates::is_dated_heading(line);
        if w <= budget {
            pieces.push(Piece { line: i + 1, text: line, weight: w, starts_day });
            continue;
        }
        for (k, (text, weight)) in split_long_line(line, piece_budget).into_iter().enumerate() {
            pieces.push(Piece { line: i + 1, text, weight, starts_day: starts_day && k == 0 });
        }
    }

    let mut chunks = Vec::new();
    let mut cur: Vec<usize> = Vec::new(); // indices into pieces
    let mut cur_weight = 0;
    let mut i = 0;
    while i < pieces.len() {
        let p = &pieces[i];
        if !cur.is_empty() && p.starts_day {
            emit(&pieces, &cur, &mut chunks);
            cur.clear();
            cur_weight = 0;
        } else if !cur.is_empty() && cur_weight + p.weight > budget {
            emit(&pieces, &cur, &mut chunks);
            // Carry trailing pieces worth at most `overlap_budget` into the next chunk, but always make progress:
            // never carry the whole chunk.
            let mut carried = Vec::new();
            let mut w = 0;
            for &j in cur.iter().rev() {
                if w + pieces[j].weight > overlap_budget || carried.len() + 1 >= cur.len() {
                    break;
                }
                w += pieces[j].weight;
                carried.push(j);
            }
            carried.reverse();
            // Overlap plus the next piece must fit; drop carried pieces from the front until it does.
            while !carried.is_empty() && w + p.weight > budget {
                w -= pieces[carried.remove(0)].weight;
            }
            cur = carried;
            cur_weight = w;
        }
        cur.push(i);
        cur_weight += p.weight;
        i += 1;
    }
    if !cur.is_empty() {
        emit(&pieces, &cur, &mut chunks);
    }
    chunks
}

/// Cut a line into consecutive pieces of at most `max` weight (the last piece's weight counts its newline), each
/// ending after the last sentence end in its second half, else after the last space there, else where the
/// budget runs out. The pieces concatenate back to the line.
fn split_long_line(line: &str, max: usize) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < line.len() {
        let rest = &line[start..];
        // One pass up to the budget (never over the whole rest of a long line: that made huge lines quadratic),
        // remembering the best cut points seen past half of it.
        let (mut acc, mut end) = (0, rest.len());
        let (mut sentence, mut space) = (None, None);
        let mut prev = '\0';
        for (pos, c) in rest.char_indices() {
            let cw = char_weight(c);
            if acc + cw > max && pos > 0 {
                end = pos;
                break;
            }
            if acc * 2 >= max {
                if (c.is_whitespace() && matches!(prev, '.' | '!' | '?' | ';' | ':')) || matches!(prev, '。' | '！' | '？' | '；') {
                    sentence = Some((pos, acc));
                }
                if c.is_whitespace() {
                    space = Some((pos, acc));
                }
            }
            acc += cw;
            prev = c;
        }
        // The rest fits with its newline: the last piece.
        if end == rest.len() && acc < max {
            out.push((rest, acc));
            break;
        }
        let (cut, w) = match sentence.or(space) {
            // Cut after the whitespace, so the next piece starts on a word; a CJK full stop ends its piece itself.
            Some((pos, w)) => match rest[pos..].chars().next() {
                Some(c) if c.is_whitespace() => (pos + c.len_utf8(), w + char_weight(c)),
                _ => (pos, w),
            },
            None => (end, acc),
        };
        out.push((&rest[..cut], w));
        start += cut;
    }
    // Weights so far are the pieces' text; the newline belongs to the last piece.
    if let Some(last) = out.last_mut() {
        last.1 += 1;
    }
    out
}

fn emit(pieces: &[Piece], idx: &[usize], out: &mut Vec<Chunk>) {
    let mut text = String::new();
    let mut last_line = 0;
    for (n, &j) in idx.iter().enumerate() {
        let p = &pieces[j];
        if n > 0 && p.line != last_line {
            text.push('\n');
        }
        text.push_str(p.text);
        last_line = p.line;
    }
    if text.trim().is_empty() {
        return;
    }
    let (Some(&first), Some(&last)) = (idx.first(), idx.last()) else { return };
    let (start_line, end_line) = (pieces[first].line, pieces[last].line);
    out.push(Chunk { start_line, end_line, hash: sha256_hex(text.as_bytes()), text });
}

/// The `<!-- importance: N -->` annotation (N 1..=10), if any.
pub fn importance(text: &str) -> Option<u8> {
    let mut rest = text;
    while let Some(pos) = rest.find("<!--") {
        let after = &rest[pos + 4..];
        let Some(end) = after.find("-->") else { break };
        let body = after[..end].trim();
        if let Some(v) = body.strip_prefix("importance").map(str::trim_start).and_then(|b| b.strip_prefix(':')) {
            if let Ok(n) = v.trim().parse::<u8>() {
                if (1..=10).contains(&n) {
                    return Some(n);
                }
            }
        }
        rest = &after[end + 3..];
    }
    None
}

/// Stable chunk id from source, path, lines, chunk hash and embedding model.
pub fn chunk_id(source: &str, path: &str, start: usize, end: usize, hash: &str, model: &str) -> String {
    sha256_hex(format!("{source}\u{1f}{path}\u{1f}{start}\u{1f}{end}\u{1f}{hash}\u{1f}{model}").as_bytes())
}

#[cfg(test)]
mod tests;

//! Which part of a hit the agent reads: the lines of the chunk that answer the query, whole, with their
//! neighbours as context, within [`super::SNIPPET_MAX_CHARS`].
//!
//! Lines are scored by the query's analysed terms ([`crate::analysis::query_terms`]: stems, CJK words,
//! identifiers; stop words out), each term weighted by how rare it is among the lines of this search's best
//! candidates (`ranking::finish`: the best ten, or more when more results are asked for; a speaker's name on every
//! line of a conversation weighs little, the one word only the answer holds weighs most). Two more kinds of term count: the query's words joined where a note may write them as one ("work
//! out" finds "workout": [`crate::analysis::query_compounds`]), and its adjacent word pairs in order ("after the
//! accident": [`crate::analysis::query_word_pairs`]), which weigh `PAIR_SHARE` of a word: a phrase decides
//! between lines that hold the same words. The window is the run of whole lines around the best line (and the
//! line after it, which most often holds what the best line leads to: the answer to a question, the body under a
//! heading) that covers the most query-term weight (then the most matching lines, then the most text, then the
//! best line nearest its middle). Heading lines show but do not match (a heading names its section, whose every
//! chunk carries its words). A line longer than the cap is cut around its matches at word boundaries. The same
//! rule serves every engine: QMD's hits are passed through it too.

use std::collections::HashMap;

use crate::analysis::each_term_and_word_pair;

/// The share of what a line counts (its match and what it inherited) that the line after it inherits (see
/// [`choose`]).
const LEAD_SHARE: f64 = 0.5;

/// A word pair's weight as a share of a word's of the same rarity: the sequential dependence model's ordered
/// pairs against its words, 0.1 / 0.85 (Metzler and Croft, SIGIR 2005): a pair confirms a phrase without
/// outweighing the words themselves (figures in docs/benchmark-history.md).
const PAIR_SHARE: f64 = 0.1 / 0.85;

/// The part of a chunk a snippet shows: its text and its lines, 0-based within the chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub text: String,
    pub first_line: usize,
    pub last_line: usize,
}

/// A query's terms with their weights among a set of texts (the hits of one search).
pub struct SnippetQuery {
    /// term -> (index, weight)
    terms: HashMap<String, (usize, f64)>,
}

impl SnippetQuery {
    /// The query's terms, weighted by an inverse line frequency over `texts`: ln(1 + (N - n + 0.5) / (n + 0.5)),
    /// N the lines of all texts, n those holding the term (BM25's idf, over lines).
    pub fn new(query: &str, texts: &[&str]) -> SnippetQuery {
        SnippetQuery::of(&super::Query::parse(query), texts)
    }

    /// [`SnippetQuery::new`] for a query already parsed.
    pub fn of(query: &super::Query, texts: &[&str]) -> SnippetQuery {
        // (term, share of its rarity weight it counts for): words and compounds in full, pairs at PAIR_SHARE.
        let mut list: Vec<(String, f64)> = query.terms().iter().map(|t| (t.clone(), 1.0)).collect();
        for t in query.compounds() {
            if !list.iter().any(|(u, _)| u == t) {
                list.push((t.clone(), 1.0));
            }
        }
        list.extend(query.word_pairs().iter().map(|t| (t.clone(), PAIR_SHARE)));
        let mut terms: HashMap<String, (usize, f64)> = list.iter().enumerate().map(|(i, (t, _))| (t.clone(), (i, 0.0))).collect();
        if terms.is_empty() {
            return SnippetQuery { terms };
        }
        let mut df = vec![0usize; list.len()];
        let mut lines = 0usize;
        let mut seen = vec![false; list.len()];
        for text in texts {
            for line in text.split('\n') {
                if line.trim().is_empty() {
                    continue;
                }
                lines += 1;
                seen.iter_mut().for_each(|s| *s = false);
                each_term_and_word_pair(line, &mut |t| {
                    if let Some(&(i, _)) = terms.get(t) {
                        if !seen[i] {
                            seen[i] = true;
                            df[i] += 1;
                        }
                    }
                });
            }
        }
        let n = lines as f64;
        for (i, w) in terms.values_mut() {
            let d = df[*i] as f64;
            *w = (1.0 + (n - d + 0.5).max(0.0) / (d + 0.5)).ln().max(1e-3) * list[*i].1;
        }
        SnippetQuery { terms }
    }

    fn len(&self) -> usize {
        self.terms.len()
    }

    /// The indexes of the query terms `text` holds (each once).
    fn terms_in(&self, text: &str) -> Vec<usize> {
        let mut out = Vec::new();
        if self.terms.is_empty() {
            return out;
        }
        each_term_and_word_pair(text, &mut |t| {
            if let Some(&(i, _)) = self.terms.get(t) {
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        });
        out
    }

    /// The query's terms and word pairs `text` holds, heaviest (rarest) first: what a snippet's lines show.
    pub fn named_in(&self, text: &str) -> Vec<String> {
        let found = self.terms_in(text);
        let mut held: Vec<(&str, f64)> = self.terms.iter().filter(|(_, (i, _))| found.contains(i)).map(|(t, (_, w))| (t.as_str(), *w)).collect();
        held.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        held.into_iter().map(|(t, _)| t.to_string()).collect()
    }

    /// The most query-term weight one sentence of `text` holds (each term once; a sentence ends a line or ends at
    /// `.`, `?`, `!` or `;`; heading lines do not count, as in [`choose`]): how closely the text holds the query's
    /// words together.
    pub fn best_sentence_weight(&self, text: &str) -> f64 {
        if self.terms.is_empty() {
            return 0.0;
        }
        let weights = self.weights();
        let headings: Vec<usize> = crate::chunking::headings::headings(text).map(|(i, _, _)| i).collect();
        text.split('\n')
            .enumerate()
            .filter(|(i, _)| !headings.contains(i))
            .flat_map(|(_, line)| line.split_inclusive(['.', '?', '!', ';']))
            .map(|sentence| self.terms_in(sentence).iter().map(|&i| weights[i]).sum::<f64>())
            .fold(0.0, f64::max)
    }

    fn weights(&self) -> Vec<f64> {
        let mut w = vec![0.0; self.terms.len()];
        for (i, v) in self.terms.values() {
            w[*i] = *v;
        }
        w
    }
}

/// The snippet of `text` for `query`: the whole chunk when it fits in `max_chars` characters, else the best
/// window of whole lines (see the module docs).
pub fn choose(text: &str, query: &SnippetQuery, max_chars: usize) -> Snippet {
    let lines: Vec<&str> = text.split('\n').collect();
    let total = text.chars().count();
    if total <= max_chars {
        return Snippet { text: text.to_string(), first_line: 0, last_line: lines.len().saturating_sub(1) };
    }
    let weights = query.weights();
    let mut hits: Vec<Vec<usize>> = lines.iter().map(|l| query.terms_in(l)).collect();
    // A heading names its section; it is not what the section says. Its words are every chunk's below it (the
    // index gives each chunk its headings), so they do not pull the window up to the heading line: a daily log's
    // "# 2023-10-13: conversation between Caroline and Melanie" matches every question about either of them, and
    // the window would go to the top of the chunk instead of the line that answers.
    // A heading still shows as context, and a query only its heading matches still shows the chunk's start.
    for (i, _, _) in crate::chunking::headings::headings(text) {
        if let Some(h) = hits.get_mut(i) {
            h.clear();
        }
    }
    let line_score = |h: &Vec<usize>| h.iter().map(|&i| weights[i]).sum::<f64>();
    // Length of each line with its newline (the last line has none, but counting one keeps windows simple).
    let lens: Vec<usize> = lines.iter().map(|l| l.chars().count() + 1).collect();
    let best = (0..lines.len()).fold(0, |b, i| if line_score(&hits[i]) > line_score(&hits[b]) { i } else { b });
    if lens[best] - 1 > max_chars {
        return Snippet { text: cut_line(lines[best], query, &weights, max_chars), first_line: best, last_line: best };
    }
    // Every window of whole lines holding `best` that fits (the window's text is its lines joined, so its
    // length is the sum of lens less one newline).
    // A line also counts for half of what the line before it counted: what follows a match is what it leads to
    // (the answer after a question, the body after a heading), so of two windows that hold the same terms the
    // one that reads on past the match wins over the one that reaches back before it. Half of what it counted,
    // not of what it matched: the share halves again with each line, so a reply two lines on still counts (the
    // match, a question about it that names nothing the query asks, then its answer).
    let own: Vec<f64> = hits.iter().map(line_score).collect();
    let mut scores: Vec<f64> = Vec::with_capacity(own.len());
    for i in 0..own.len() {
        let lead = if i > 0 { scores[i - 1] * LEAD_SHARE } else { 0.0 };
        scores.push(own[i] + lead);
    }
    // Every window holds the best line and, when both fit, the line after it (past blank lines): what follows
    // the line that matches is most often what it leads to (the answer to a question in a conversation, the
    // body under a heading or a list item's lead).
    let mut core_end = best;
    let mut next = best + 1;
    while next < lines.len() && lines[next].trim().is_empty() {
        next += 1;
    }
    if next < lines.len() && lens[best..=next].iter().sum::<usize>() - 1 <= max_chars {
        core_end = next;
    }
    let mut covered = vec![0u32; query.len()];
    let mut choice = (best, best);
    let mut choice_key = (f64::MIN, f64::MIN, 0usize, usize::MAX);
    for lo in (0..=best).rev() {
        let before: usize = lens[lo..best].iter().sum();
        if before + lens[best] - 1 > max_chars {
            break;
        }
        covered.iter_mut().for_each(|c| *c = 0);
        for h in &hits[lo..best] {
            h.iter().for_each(|&i| covered[i] += 1);
        }
        let mut used = before;
        let mut matched: f64 = scores[lo..best].iter().sum();
        for hi in best..lines.len() {
            if used + lens[hi] - 1 > max_chars {
                break;
            }
            used += lens[hi];
            matched += scores[hi];
            hits[hi].iter().for_each(|&i| covered[i] += 1);
            if hi < core_end {
                continue;
            }
            let weight: f64 = covered.iter().zip(&weights).filter(|(c, _)| **c > 0).map(|(_, w)| w).sum();
            let off_centre = (best - lo).abs_diff(hi - best);
            // The most query weight, then the most matching lines (a term on two lines counts twice), then the
            // most text, then the best line nearest the middle.
            let key = (weight, matched, used, off_centre);
            let eq = |a: f64, b: f64| (a - b).abs() <= 1e-9;
            let better = if !eq(key.0, choice_key.0) {
                key.0 > choice_key.0
            } else if !eq(key.1, choice_key.1) {
                key.1 > choice_key.1
            } else if key.2 != choice_key.2 {
                key.2 > choice_key.2
            } else {
                key.3 < choice_key.3
            };
            if better {
                choice_key = key;
                choice = (lo, hi);
            }
        }
    }
    let (lo, hi) = choice;
    Snippet { text: lines[lo..=hi].join("\n"), first_line: lo, last_line: hi }
}

/// A window of at most `max_chars` characters of one long line: starting at a word, over the most query-term
/// weight, ending at a word boundary when there is one.
fn cut_line(line: &str, query: &SnippetQuery, weights: &[f64], max_chars: usize) -> String {
    // Pieces: words (whitespace-separated) with their char offsets; long runs without spaces (CJK text, a URL)
    // in pieces of 16 characters, so a window may start inside them.
    let chars: Vec<char> = line.chars().collect();
    let mut pieces: Vec<(usize, usize)> = Vec::new(); // (start, end) char offsets
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && i - start < 16 {
            i += 1;
        }
        pieces.push((start, i));
    }
    // Terms of each piece alone (a CJK word across a piece edge is missed: the window is then chosen by the
    // other terms, and the cap still holds).
    let piece_terms: Vec<Vec<usize>> = pieces.iter().map(|&(s, e)| query.terms_in(&chars[s..e].iter().collect::<String>())).collect();
    let mut best_start = 0usize;
    let mut best_weight = -1.0;
    let mut covered = vec![0u32; weights.len()];
    for (p, &(start, _)) in pieces.iter().enumerate() {
        covered.iter_mut().for_each(|c| *c = 0);
        for (q, &(_, end)) in pieces.iter().enumerate().skip(p) {
            if end - start > max_chars {
                break;
            }
            piece_terms[q].iter().for_each(|&i| covered[i] += 1);
        }
        let weight: f64 = covered.iter().zip(weights).filter(|(c, _)| **c > 0).map(|(_, w)| w).sum();
        if weight > best_weight + 1e-12 {
            best_weight = weight;
            best_start = start;
        }
    }
    // A window that would run past the line's end starts earlier instead, to show as much as fits.
    let start = best_start.min(chars.len().saturating_sub(max_chars));
    let mut end = (start + max_chars).min(chars.len());
    if end < chars.len() {
        // End at a word boundary when one is in the last fifth of the window.
        if let Some(ws) = (start + max_chars * 4 / 5..end).rev().find(|&k| chars[k].is_whitespace()) {
            end = ws;
        }
    }
    chars[start..end].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(text: &str, query: &str, max: usize) -> Snippet {
        choose(text, &SnippetQuery::new(query, &[text]), max)
    }

    #[test]
    fn a_chunk_that_fits_is_shown_whole() {
        let s = pick("a\nb\nc", "b", 700);
        assert_eq!((s.text.as_str(), s.first_line, s.last_line), ("a\nb\nc", 0, 2));
    }

    #[test]
    fn the_last_line_of_a_long_chunk_is_shown_whole() {
        // The newest entry of a daily log is the chunk's last line: the window must not cut it at its edge.
        let mut text: Vec<String> = (0..30).map(|i| format!("- entry {i}: the weekly sync covered budgets and hiring plans")).collect();
        text.push("- Deploys go through the canary cluster first, always".into());
        let text = text.join("\n");
        let s = pick(&text, "canary always", 700);
        assert!(s.text.ends_with("- Deploys go through the canary cluster first, always"), "{:?}", s.text);
        assert_eq!(s.last_line, 30);
        assert!(s.text.chars().count() <= 700);
        assert!(s.text.starts_with("- entry"), "whole lines only: {:?}", s.text);
    }

    #[test]
    fn the_line_after_the_best_one_is_shown_with_it() {
        // A conversation: the question that matches, then its answer, which shares no word with the query. Lines
        // before it that mention the accident must not pull the window away from the answer.
        let filler = "and we talked for a long while about everything that happened that weekend on the road";
        let mut lines: Vec<String> = (0..4).map(|i| format!("Melanie: the accident was a shock {i}, {filler}.")).collect();
        lines.push(format!("Caroline: How did your son handle the accident? {filler}."));
        lines.push(format!("Melanie: He was scared but we reassured him and explained he would be fine, {filler}."));
        lines.extend((0..4).map(|i| format!("Caroline: unrelated chatter {i}, {filler}.")));
        let text = lines.join("\n");
        let s = pick(&text, "How did Melanie's son handle the accident?", 400);
        assert!(s.text.contains("He was scared but we reassured him"), "{:?}", s.text);
        assert!(s.first_line <= 4 && s.last_line >= 5, "{s:?}");
        assert!(s.text.chars().count() <= 400);
    }

    #[test]
    fn the_window_reads_on_past_the_match_rather_than_back_before_it() {
        // The question matches, its answer asks back, and the line after that answers the asker: with room for
        // three lines, the window reads on (question, answer, the answer to it) instead of reaching back to a
        // longer line before the question that matches nothing.
        let before = "Ann: we walked to the neighbourhood market early this morning with the kids, lovely time";
        let question = "Ann: How long have you been creating pottery?";
        let answer = "Bea: Since I was 17. How long for you?";
        let answer_back = "Ann: Seven years, finally my muse.";
        assert!(answer_back.len() < before.len());
        let mut lines: Vec<&str> = vec!["Bea: the weather was grey all day and nobody went out"; 6];
        lines.extend([before, question, answer, answer_back]);
        lines.extend(vec!["Bea: and then we spoke about the weekend and the weather again"; 6]);
        let text = lines.join("\n");
        let cap = before.len() + question.len() + answer.len() + 2;
        let s = pick(&text, "How long has she been creating pottery?", cap);
        assert_eq!(s.text, [question, answer, answer_back].join("\n"));
    }

    #[test]
    fn the_answer_to_a_question_about_the_match_is_read_two_lines_on() {
        // The match, a question about it that names nothing the query asks, and its answer: what the match leads to
        // reaches past the question (its share halves with each line), so the window reads on to the answer
        // instead of reaching back to a line that only names the person the query asks about.
        let before = "Maria: It's inspiring to see the resilience of the veterans in your group, and their stories stay with me for days afterwards.";
        let thanks = "John: Thanks, Maria! We're like a family in that group. Did you do anything fun lately?";
        let best = "Maria: Last weekend I had a picnic with some friends from church. We chilled under the trees and ate yummy food.";
        let question = "John: Looks fun! What games did you all play?";
        let answer = "Maria: Some fun ones like charades and a scavenger hunt.";
        let mut lines: Vec<&str> = vec!["John: the weather was grey all day and nobody went out"; 4];
        // The answer is the chunk's last line (a daily log's newest entry): a window ending there holds less text.
        lines.extend([before, thanks, best, question, answer]);
        let text = lines.join("\n");
        // Room for four of the five lines: the line that names Maria before the match, or the answer after it.
        let cap = before.len() + thanks.len() + best.len() + question.len() + 3;
        assert!(thanks.len() + best.len() + question.len() + answer.len() + 3 <= cap);
        let s = pick(&text, "What kind of activities did Maria do at the picnic with her church friends?", cap);
        assert!(s.text.contains(answer), "{:?}", s.text);
        assert!(s.text.contains(best), "{:?}", s.text);
    }

    #[test]
    fn a_word_the_query_writes_apart_meets_the_note_that_writes_it_as_one() {
        // "work out" in the question, "workout" in the note: the line that says it (and its answer after it)
        // is what the window shows, not the lines that say "work" or "family" only.
        let filler = "and the rest of the evening was spent on other things entirely, as it often is";
        let mut lines: Vec<String> = (0..6).map(|i| format!("John: work was busy again today {i}, {filler}.")).collect();
        lines.push(format!("Maria: Great news! Do you all do a workout together? {filler}."));
        lines.push("John: Three times a week; it keeps us on track.".into());
        lines.extend((0..6).map(|i| format!("John: my family visited last weekend {i}, {filler}.")));
        let text = lines.join("\n");
        let s = pick(&text, "How often does John work out with his family?", 300);
        assert!(s.text.contains("Three times a week"), "{:?}", s.text);
    }

    #[test]
    fn the_querys_phrase_decides_between_lines_with_the_same_words() {
        // Every line names Melanie and the accident; one says what the question asks, "after the accident" (and no
        // line says "feel": the words alone tie).
        let mut lines: Vec<String> = (0..5).map(|i| format!("Melanie: the accident on the road trip was scary, day {i} of our trip.")).collect();
        lines.push("Melanie: Especially after the accident, I am so thankful for my family.".into());
        lines.extend((5..10).map(|i| format!("Melanie: the accident on the road trip was scary, day {i} of our trip.")));
        let text = lines.join("\n");
        let s = pick(&text, "How did Melanie feel after the accident?", 160);
        assert!(s.text.contains("Especially after the accident"), "{:?}", s.text);
    }

    #[test]
    fn stems_meet_and_stop_words_do_not_count() {
        // "research" meets "Researching"; "what", "did", "is" do not pull the window to lines full of them.
        let mut lines: Vec<String> = (0..20).map(|i| format!("Melanie: what did you do, what is it, what was it {i}?")).collect();
        lines.insert(12, "Caroline: Researching adoption agencies — it's been a dream to have a family.".into());
        lines.extend((0..20).map(|i| format!("Melanie: what is that, what did it do {i}?")));
        let text = lines.join("\n");
        let s = pick(&text, "What did Caroline research?", 300);
        assert!(s.text.contains("Caroline: Researching adoption agencies — it's been a dream to have a family."), "{:?}", s.text);
        assert!(s.first_line <= 12 && 12 <= s.last_line);
    }

    #[test]
    fn rare_terms_outweigh_common_ones() {
        // "caroline" is on every line; "lgbtq" on one: the window goes to the rare word.
        let mut lines: Vec<String> = (0..40).map(|i| format!("Caroline: group chat number {i} about the weekend plans and more")).collect();
        lines[33] = "Caroline: I went to a LGBTQ support group yesterday".into();
        let text = lines.join("\n");
        let s = pick(&text, "When did Caroline go to the LGBTQ support group?", 400);
        assert!(s.text.contains("LGBTQ support group yesterday"), "{:?}", s.text);
    }

    #[test]
    fn a_long_line_is_cut_around_its_match_at_word_boundaries() {
        let line = format!("{} the needle is here {}", "hay stack ".repeat(200), "straw pile ".repeat(200));
        let s = pick(&line, "needle", 200);
        assert!(s.text.contains("needle"), "{:?}", s.text);
        assert!(s.text.chars().count() <= 200);
        assert!(!s.text.ends_with("sta") && !s.text.starts_with("tack"), "{:?}", s.text);
    }

    #[test]
    fn no_character_is_split_and_the_cap_holds() {
        let text = "😀".repeat(800);
        let s = pick(&text, "x", 700);
        assert_eq!(s.text.chars().count(), 700);
        let cjk = format!("{}我们把数据库迁移到了新的服务器上{}", "今天天气很好。".repeat(150), "明天下雨。".repeat(150));
        let s = pick(&cjk, "数据库迁移", 100);
        assert!(s.text.contains("数据库迁移"), "{:?}", s.text);
        assert!(s.text.chars().count() <= 100);
    }

    #[test]
    fn a_heading_does_not_pull_the_window_away_from_the_answer() {
        // A question naming the day and both speakers: the daily log's heading holds all of those words, the
        // answer deeper in the chunk only one of them and the thing asked about. The window shows the answer.
        let mut lines = vec!["# 2023-10-13: conversation between Caroline and Melanie (13 October, 2023)".to_string(), String::new()];
        for i in 0..4 {
            lines.push(format!("Caroline: we chatted about the weather and the weekend, part {i}, for quite a while"));
            lines.push(format!("Melanie: and about the garden and the neighbours' dog, part {i}, for a long time too"));
        }
        lines.push("Caroline: Find an adoption agency or a lawyer first, they help with everything.".into());
        let text = lines.join("\n");
        let s = pick(&text, "What did Caroline tell Melanie about the agency on 13 October?", 300);
        assert!(s.text.contains("Find an adoption agency or a lawyer first"), "{:?}", s.text);
        // Matched by its heading only, a chunk still shows its start.
        let s = pick(&text, "conversation on 13 October", 300);
        assert_eq!(s.first_line, 0, "{s:?}");
    }

    #[test]
    fn nothing_matches_shows_the_start() {
        let text = (0..100).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n");
        let s = pick(&text, "zebra", 50);
        assert_eq!(s.first_line, 0);
        assert!(s.text.starts_with("line 0\nline 1"));
    }
}

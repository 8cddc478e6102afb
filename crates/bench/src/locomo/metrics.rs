//! How one question's hits are scored: R@k (evidence lines inside a hit), S@k (evidence text in a snippet),
//! their tallies, and the bound a perfect reranker could reach. Apart from the runs, which only feed it hits.

use memory_core::SearchResult;

use super::dataset::Question;

pub const KS: [usize; 3] = [1, 5, 10];

/// R@k and S@k for k in [`KS`], summed over questions (divide by `n`).
#[derive(Default, Clone)]
pub struct Tally {
    pub n: usize,
    pub recall: [f64; 3],
    pub seen: [f64; 3],
}

impl Tally {
    pub(super) fn add(&mut self, recall: [f64; 3], seen: [f64; 3]) {
        self.n += 1;
        for i in 0..3 {
            self.recall[i] += recall[i];
            self.seen[i] += seen[i];
        }
    }

    pub fn mean(&self) -> ([f64; 3], [f64; 3]) {
        let n = self.n.max(1) as f64;
        (self.recall.map(|v| v / n), self.seen.map(|v| v / n))
    }
}

/// The evidence text as the metric compares it: its first 50 characters, whitespace collapsed, case folded.
pub fn evidence_key(text: &str) -> String {
    fold(text).chars().take(50).collect()
}

/// Whitespace runs as one space, lowercased.
pub fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// (R, S) of one question's hits at each k.
pub fn score_question(q: &Question, hits: &[SearchResult]) -> ([f64; 3], [f64; 3]) {
    let folded: Vec<String> = hits.iter().map(|h| fold(&h.snippet)).collect();
    let n = q.evidence.len().max(1) as f64;
    let mut recall = [0.0; 3];
    let mut seen = [0.0; 3];
    for (i, &k) in KS.iter().enumerate() {
        let top = &hits[..k.min(hits.len())];
        let r = q.evidence.iter().filter(|e| top.iter().any(|h| h.path == e.path && h.start_line <= e.line && e.line <= h.end_line)).count();
        let s = q.evidence.iter().filter(|e| folded[..top.len()].iter().any(|f| f.contains(&evidence_key(&e.text)))).count();
        recall[i] = r as f64 / n;
        seen[i] = s as f64 / n;
    }
    (recall, seen)
}

/// The depths at which a deeper search (`--depth`) reports [`best_five`].
pub(super) const ORACLE_DEPTHS: [usize; 3] = [10, 20, 40];

/// R@5 of the best five of `hits` for this question: what a second stage that reorders those candidates perfectly
/// could reach (the bound of any reranker over them). Exact: the evidence a hit covers is a set, and the best five
/// of the sets no other contains are tried (greedy when there are too many to try).
pub fn best_five(q: &Question, hits: &[SearchResult]) -> f64 {
    let covers = |h: &SearchResult| -> u64 {
        q.evidence
            .iter()
            .take(64)
            .enumerate()
            .filter(|(_, e)| h.path == e.path && h.start_line <= e.line && e.line <= h.end_line)
            .fold(0, |m, (i, _)| m | 1 << i)
    };
    let mut sets: Vec<u64> = hits.iter().map(covers).filter(|&m| m != 0).collect();
    sets.sort_unstable();
    sets.dedup();
    let maximal: Vec<u64> = sets.iter().copied().filter(|&m| !sets.iter().any(|&o| o != m && o & m == m)).collect();
    fn best(sets: &[u64], left: usize, have: u64) -> u32 {
        match sets.split_first() {
            Some((&first, rest)) if left > 0 => best(rest, left - 1, have | first).max(best(rest, left, have)),
            _ => have.count_ones(),
        }
    }
    let covered = if maximal.len() <= 24 {
        best(&maximal, 5, 0)
    } else {
        let mut have = 0u64;
        for _ in 0..5 {
            have |= maximal.iter().copied().max_by_key(|&m| (m & !have).count_ones()).unwrap_or(0);
        }
        have.count_ones()
    };
    covered as f64 / q.evidence.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locomo::dataset::Evidence;
    use memory_core::Source;

    fn hit(path: &str, start: usize, end: usize, snippet: &str) -> SearchResult {
        SearchResult::new(Source::Memory, path, start, end, 1.0, snippet)
    }

    #[test]
    fn recall_counts_the_line_range_and_seen_counts_the_snippet() {
        let q = Question {
            conv: "c".into(),
            id: "q".into(),
            question: "?".into(),
            category: 1,
            evidence: vec![
                Evidence { path: "memory/a.md".into(), line: 5, text: "Researching   adoption agencies".into() },
                Evidence { path: "memory/b.md".into(), line: 2, text: "Other".into() },
            ],
        };
        let hits = vec![hit("memory/x.md", 1, 9, "nothing"), hit("memory/a.md", 3, 8, "x\nCaroline: researching adoption agencies — a dream\n")];
        let (r, s) = score_question(&q, &hits);
        assert_eq!(r, [0.0, 0.5, 0.5]);
        assert_eq!(s, [0.0, 0.5, 0.5]);
        // In range but not shown: recalled, not seen.
        let hits = vec![hit("memory/a.md", 3, 8, "something else")];
        let (r, s) = score_question(&q, &hits);
        assert_eq!((r[0], s[0]), (0.5, 0.0));
    }

    #[test]
    fn the_best_five_cover_the_most_evidence_the_hits_can() {
        let line = |l: usize| Evidence { path: "memory/a.md".into(), line: l, text: String::new() };
        let q = Question { conv: "c".into(), id: "q".into(), question: "?".into(), category: 1, evidence: (1..=6).map(|i| line(i * 10)).collect() };
        // Six evidence lines in six hits, one of them behind hits that cover nothing: five of six at most.
        let mut hits: Vec<SearchResult> = (0..4).map(|i| hit("memory/x.md", i, i, "")).collect();
        hits.extend((1..=6).map(|i| hit("memory/a.md", i * 10, i * 10, "")));
        assert!((best_five(&q, &hits) - 5.0 / 6.0).abs() < 1e-9);
        // One hit spanning two lines lets five hits cover all six.
        hits.push(hit("memory/a.md", 10, 20, ""));
        assert!((best_five(&q, &hits) - 1.0).abs() < 1e-9);
        assert_eq!(best_five(&q, &hits[..4]), 0.0);
    }
}

//! What a recall run prints: the table of R@k/S@k and latencies per setup, per category, the reranking bound,
//! and each missed question when asked.

use memory_core::SearchResult;

use super::dataset::Question;
use super::metrics::Tally;
use super::Run;

pub(super) fn print_miss(q: &Question, hits: &[SearchResult], r5: f64, s5: f64) {
    println!("--- {} (cat {}) R@5 {r5:.2} S@5 {s5:.2}: {}", q.id, q.category, q.question);
    for e in &q.evidence {
        println!("    evidence {}:{}  {}", e.path, e.line, e.text.chars().take(100).collect::<String>());
    }
    for (i, h) in hits.iter().take(5).enumerate() {
        let first = h.snippet.lines().next().unwrap_or("").chars().take(90).collect::<String>();
        let shown = match (h.snippet_start_line, h.snippet_end_line) {
            (Some(a), Some(b)) => format!(" (snippet {a}-{b})"),
            _ => String::new(),
        };
        println!("    {}. {}:{}-{}{shown} {:.3}  {first}", i + 1, h.path, h.start_line, h.end_line, h.score);
    }
}

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

const CATEGORY_NAMES: [&str; 5] = ["multi-hop", "temporal", "open-domain", "single-hop", "adversarial"];

pub(super) fn report(runs: &[Run]) {
    println!();
    println!(
        "{:<40} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8} {:>8} {:>10}",
        "setup", "R@1", "R@5", "R@10", "S@1", "S@5", "S@10", "p50 ms", "p95 ms", "rr ms/cand"
    );
    for run in runs {
        let mut lat = run.latencies_ms.clone();
        lat.sort_by(f64::total_cmp);
        let (r, s) = run.all.mean();
        println!(
            "{:<40} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>8.2} {:>8.2} {:>10}",
            run.label,
            r[0],
            r[1],
            r[2],
            s[0],
            s[1],
            s[2],
            percentile(&lat, 0.5),
            percentile(&lat, 0.95),
            run.rerank_ms_per_candidate.map_or("-".to_string(), |ms| format!("{ms:.2}"))
        );
    }
    println!();
    println!("Per category (R@5 / S@5):");
    let cats: Vec<u32> = runs.iter().flat_map(|r| r.by_category.keys().copied()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    print!("{:<40}", "setup");
    for c in &cats {
        let name = CATEGORY_NAMES.get(*c as usize - 1).copied().unwrap_or("?");
        print!(" {:>18}", format!("{c} {name} (n={})", runs[0].by_category.get(c).map_or(0, |t| t.n)));
    }
    println!();
    for run in runs {
        print!("{:<40}", run.label);
        for c in &cats {
            let (r, s) = run.by_category.get(c).map(Tally::mean).unwrap_or_default();
            print!(" {:>18}", format!("{:.3} / {:.3}", r[1], s[1]));
        }
        println!();
    }
    println!();
    crate::legs::print(&shortfalls(runs, &cats), 3);
    if runs.iter().any(|r| r.oracle.len() > 1) {
        println!();
        println!("R@5 of a perfect second stage over the first N hits (the most any reranking of them could reach):");
        for run in runs.iter().filter(|r| !r.oracle.is_empty()) {
            let n = run.all.n.max(1) as f64;
            let cells: Vec<String> = run.oracle.iter().map(|(d, sum)| format!("N={d} {:.3}", sum / n)).collect();
            println!("{:<40} {}", run.label, cells.join("  "));
        }
    }
}

/// Each hybrid setup's R@5 and S@5 per category against its legs that ran beside it ([`crate::legs::of`]).
fn shortfalls(runs: &[Run], cats: &[u32]) -> Vec<crate::legs::Shortfall> {
    let mut out = Vec::new();
    for run in runs {
        let Some(legs) = crate::legs::of(&run.label) else { continue };
        for leg in runs.iter().filter(|r| legs.contains(&r.label)) {
            for c in cats {
                let (Some(h), Some(l)) = (run.by_category.get(c), leg.by_category.get(c)) else { continue };
                let ((hr, hs), (lr, ls)) = (h.mean(), l.mean());
                let kind = format!("{c} {}", CATEGORY_NAMES.get(*c as usize - 1).copied().unwrap_or("?"));
                crate::legs::compare(&mut out, &kind, "R@5", (&run.label, hr[1]), (&leg.label, lr[1]), 3);
                crate::legs::compare(&mut out, &kind, "S@5", (&run.label, hs[1]), (&leg.label, ls[1]), 3);
            }
        }
    }
    out
}

//! `memory explain` for people: how the query was read, then each hit with the factors that placed it, one line
//! per kind of factor, a factor left out where it did nothing (`--json` has every field).

use std::io::Write;

use memory_core::explanation::{Explanation, HitExplanation, PathExplanation, Verdict};
use memory_core::SearchResponse;

pub fn explanation(out: &mut dyn Write, err: &mut dyn Write, r: &SearchResponse) -> anyhow::Result<()> {
    for w in &r.warnings {
        writeln!(err, "warning: {w}")?;
    }
    let Some(e) = r.explanation.as_deref() else {
        writeln!(out, "This engine does not explain its ranking; its results:")?;
        return super::search(out, &mut std::io::sink(), r, false);
    };
    header(out, e, r.mode.as_deref())?;
    if e.hits.is_empty() {
        writeln!(out, "No candidates.")?;
    }
    for hit in &e.hits {
        writeln!(out)?;
        self::hit(out, hit, e)?;
    }
    if e.ranked > e.hits.len() {
        writeln!(out, "\n... and {} more candidates ranked below.", e.ranked - e.hits.len())?;
    }
    if let Some(p) = &e.path {
        writeln!(out)?;
        path(out, p)?;
    }
    Ok(())
}

/// Both legs weighed: the search was hybrid.
fn hybrid(e: &Explanation) -> bool {
    e.weights.is_some_and(|w| w.text > 0.0 && w.vector > 0.0)
}

/// `n` and the noun, singular or plural.
fn count(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

fn header(out: &mut dyn Write, e: &Explanation, mode: Option<&str>) -> anyhow::Result<()> {
    let q = &e.query;
    let mut read = vec![format!("keyword terms {}", if q.terms.is_empty() { "(none)".to_string() } else { q.terms.join(", ") })];
    for t in &q.time {
        let days = if t.first == t.last { t.first.clone() } else { format!("{} to {}", t.first, t.last) };
        read.push(format!("time \"{}\" = {days}", t.text));
    }
    // Chunks holding it are ordered first in hybrid search only.
    if let Some(x) = q.exact.as_ref().filter(|_| hybrid(e)) {
        read.push(format!("names exactly \"{x}\""));
    }
    if q.asks_about_present {
        read.push("asks about the present".into());
    }
    writeln!(out, "Query read as: {}; asked on {}", read.join("; "), e.today)?;
    let mut legs = format!(
        "Legs ({}): keyword {}, vector {} (at most {} each)",
        mode.unwrap_or("keyword"),
        count(e.keyword_candidates, "candidate"),
        count(e.vector_candidates, "candidate"),
        e.candidate_limit
    );
    if let Some(w) = e.weights.filter(|_| hybrid(e)) {
        legs.push_str(&format!("; weights text {:.2}, vector {:.2}", w.text, w.vector));
    }
    if let Some(f) = e.vector_floor {
        legs.push_str(&format!("; vector floor {f:.3}"));
    }
    if let Some(a) = e.vector_set_aside {
        legs.push_str(&format!(
            "; vector leg set aside: its best candidate (cosine {:.3}) is no more like the query than unrelated text ({:.3}), so words rank",
            a.best, a.unrelated
        ));
    }
    writeln!(out, "{legs}")?;
    let decay = e.half_life_days.map_or("off".to_string(), |h| format!("half-life {h} days"));
    writeln!(
        out,
        "Cut: minScore {}, maxResults {}; temporal decay {decay}; reranker {}; {} ranked",
        e.min_score,
        e.max_results,
        if e.reranked { "read the best" } else { "off" },
        count(e.ranked, "candidate")
    )?;
    Ok(())
}

fn hit(out: &mut dyn Write, h: &HitExplanation, e: &Explanation) -> anyhow::Result<()> {
    let lines = if h.start_line == h.end_line { h.start_line.to_string() } else { format!("{}-{}", h.start_line, h.end_line) };
    let place = match h.result {
        Some(n) => format!("result {n}: {}", verdict(h.verdict, e)),
        None => format!("not a result: {}", verdict(h.verdict, e)),
    };
    writeln!(out, "#{} {}:{}  score {:.3}  ({place})", h.rank, h.path, lines, h.score)?;
    if let Some(k) = &h.keyword {
        let words = if k.words.is_empty() { String::new() } else { format!("  holds: {}", k.words.join(", ")) };
        writeln!(out, "   keyword  bm25 {:.3} -> text score {:.3}{words}", k.bm25, k.text_score)?;
    }
    if let Some(v) = &h.vector {
        writeln!(out, "   vector   cosine {:.3} -> vector score {:.3}", v.cosine, v.score)?;
    }
    match (e.weights.filter(|_| hybrid(e)), &h.keyword, &h.vector) {
        (Some(w), k, v) if k.is_some() || v.is_some() => {
            let (t, vs) = (k.as_ref().map_or(0.0, |k| k.text_score), v.as_ref().map_or(0.0, |v| v.score));
            writeln!(out, "   merged   {:.3} = {:.2} x {t:.3} + {:.2} x {vs:.3}", h.merged, w.text, w.vector)?;
        }
        // An exact-path hit no leg brought stands in at a fixed score.
        (_, None, None) => writeln!(out, "   merged   {:.3} (an exact-path hit no leg brought)", h.merged)?,
        // One leg alone: its score is the merged one.
        _ => {}
    }
    let mut first = Vec::new();
    if h.exact_path_tier > 0 {
        first.push(format!("its file's name is the query (tier {})", h.exact_path_tier));
    }
    if h.exact_match {
        first.push("holds what the query names exactly".to_string());
    }
    if !first.is_empty() {
        writeln!(out, "   first    {}", first.join("; "))?;
    }
    let mut moved = Vec::new();
    let date = h.date.as_deref().map(|d| format!(" (dated {d})")).unwrap_or_default();
    for (name, v) in [("time window", h.time_window), ("recency", h.recency), ("sentence", h.sentence)] {
        if v.abs() >= 5e-4 {
            moved.push(format!("{name} {v:+.3}{}", if name == "time window" { date.as_str() } else { "" }));
        }
    }
    if !moved.is_empty() {
        writeln!(out, "   moved    {}", moved.join("  "))?;
    }
    let mut factors = Vec::new();
    if (h.decay - 1.0).abs() >= 5e-4 {
        factors.push(format!("decay x{:.3} ({:.0} days old)", h.decay, h.age_days.unwrap_or(0.0)));
    }
    if (h.importance - 1.0).abs() >= 5e-4 {
        factors.push(format!("importance x{:.2}", h.importance));
    }
    if (h.project - 1.0).abs() >= 5e-4 {
        factors.push(format!("project x{:.2}", h.project));
    }
    if !factors.is_empty() {
        writeln!(out, "   factors  {}", factors.join("  "))?;
    }
    if let Some(r) = h.rerank {
        writeln!(out, "   rerank   {r:+.3}")?;
    }
    if let Some(s) = &h.snippet {
        let shown = match (s.start_line, s.end_line) {
            _ if s.whole_chunk => "the whole chunk".to_string(),
            (Some(a), Some(b)) if a == b => format!("line {a}"),
            (Some(a), Some(b)) => format!("lines {a}-{b}"),
            _ => "the best lines".to_string(),
        };
        let words = if s.words.is_empty() { "no query word (the chunk's first lines)".to_string() } else { s.words.join(", ") };
        writeln!(out, "   snippet  {shown}: {words}")?;
    }
    Ok(())
}

/// The verdict's reason with this search's numbers: "minScore 0.35", "6 maxResults hits".
fn verdict(v: Verdict, e: &Explanation) -> String {
    v.why().replacen("minScore", &format!("minScore {}", e.min_score), 1).replacen("maxResults hits", &format!("{} hits", e.max_results), 1)
}

fn path(out: &mut dyn Write, p: &PathExplanation) -> anyhow::Result<()> {
    writeln!(out, "{}: {}", p.path, p.detail)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use memory_core::explanation::{Explanation, LegWeights, VectorSetAside};

    fn header_of(e: &Explanation) -> String {
        let mut out = Vec::new();
        super::header(&mut out, e, Some("hybrid")).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_legs_line_says_when_the_vector_leg_was_set_aside() {
        let mut e = Explanation { weights: Some(LegWeights { text: 1.0, vector: 0.0 }), keyword_candidates: 8, ..Explanation::default() };
        assert!(!header_of(&e).contains("set aside"), "{}", header_of(&e));
        e.vector_set_aside = Some(VectorSetAside { best: 0.551, unrelated: 0.6 });
        let legs = header_of(&e);
        assert!(
            legs.contains("vector leg set aside: its best candidate (cosine 0.551) is no more like the query than unrelated text (0.600)"),
            "{legs}"
        );
    }
}

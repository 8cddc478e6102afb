//! Where a hybrid setup falls below one of its own legs on one kind of question: the check behind "hybrid is
//! never below its better leg, per kind", printed by each benchmark that runs the legs beside hybrid.

/// The labels of the legs a hybrid setup is made of: keyword search and vector search with the same model
/// (`hybrid X` -> `keyword`, `vector X`). `None` for a label that is not a hybrid setup's.
pub fn of(label: &str) -> Option<[String; 2]> {
    let model = label.strip_prefix("hybrid ")?;
    Some(["keyword".to_string(), format!("vector {model}")])
}

/// A hybrid setup below one of its legs on one figure for one kind of question.
pub struct Shortfall {
    pub setup: String,
    pub kind: String,
    pub figure: &'static str,
    pub hybrid: f64,
    pub leg: String,
    pub by_leg: f64,
}

/// Records a shortfall when `hybrid` (a setup's label and figure) is under `leg` (a leg's label and the same figure)
/// for one kind of question. Figures are compared as printed (`decimals`), so that a shortfall is one a reader of
/// the table sees.
pub fn compare(out: &mut Vec<Shortfall>, kind: &str, figure: &'static str, hybrid: (&str, f64), leg: (&str, f64), decimals: i32) {
    let round = |v: f64| (v * 10f64.powi(decimals)).round();
    if round(hybrid.1) < round(leg.1) {
        out.push(Shortfall { setup: hybrid.0.to_string(), kind: kind.to_string(), figure, hybrid: hybrid.1, leg: leg.0.to_string(), by_leg: leg.1 });
    }
}

/// The shortfalls, one line each, or a line saying there are none.
pub fn print(shortfalls: &[Shortfall], decimals: usize) {
    if shortfalls.is_empty() {
        println!("Hybrid below one of its legs on a kind of question: none");
        return;
    }
    println!("Hybrid below one of its legs on a kind of question:");
    for s in shortfalls {
        println!("  {} on {}: {} {:.decimals$} < {} {:.decimals$}", s.setup, s.kind, s.figure, s.hybrid, s.leg, s.by_leg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hybrid_setup_is_compared_with_keyword_and_its_own_models_vectors() {
        assert_eq!(of("hybrid bge-small-en-v1.5"), Some(["keyword".to_string(), "vector bge-small-en-v1.5".to_string()]));
        assert_eq!(of("vector e5"), None);
        assert_eq!(of("keyword"), None);
    }

    #[test]
    fn only_a_difference_the_table_shows_is_a_shortfall() {
        let mut out = Vec::new();
        compare(&mut out, "temporal", "R@5", ("hybrid m", 0.9891), ("keyword", 0.9894), 3);
        assert!(out.is_empty(), "0.989 and 0.989 print alike");
        compare(&mut out, "open-domain", "R@5", ("hybrid m", 0.461), ("vector m", 0.513), 3);
        compare(&mut out, "exact", "first", ("hybrid m", 10.0), ("keyword", 9.0), 0);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].kind.as_str(), out[0].leg.as_str()), ("open-domain", "vector m"));
    }
}

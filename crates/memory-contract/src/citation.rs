//! How a result cites the lines it comes from, as `memory.citations` asks: one rule for every engine's results,
//! the way OpenClaw cites (`path#L<start>-L<end>`).

use crate::config::Citations;
use crate::types::SearchResult;

/// `path#L<start>-L<end>`, or `path#L<n>` for one line.
pub fn citation(path: &str, start: usize, end: usize) -> String {
    if start == end {
        format!("{path}#L{start}")
    } else {
        format!("{path}#L{start}-L{end}")
    }
}

/// Give `result` its citation as `citations` says: `path#L..` in `citation` unless off, and also as a `Source:`
/// line under the snippet when on.
pub fn cite(result: &mut SearchResult, citations: Citations) {
    if citations == Citations::Off {
        return;
    }
    let cite = citation(&result.path, result.start_line, result.end_line);
    if citations == Citations::On {
        result.snippet.push_str("\nSource: ");
        result.snippet.push_str(&cite);
    }
    result.citation = Some(cite);
}

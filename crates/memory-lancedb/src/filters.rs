//! The SQL filters of the tables' queries: text from outside (paths, hashes) enters them only as quoted literals.

use memory_core::Source;

use crate::schema::{COL_DATE, COL_PATH, COL_SOURCE};

/// SQL string literal with quotes doubled: the only way user-controlled text (paths) enters a filter.
pub(crate) fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `(source = 'x' AND path IN (...)) OR ...` for a set of files.
pub(crate) fn files_filter(files: &[(Source, &str)]) -> Option<String> {
    let mut by_source: std::collections::BTreeMap<Source, Vec<&str>> = Default::default();
    for (s, p) in files {
        by_source.entry(*s).or_default().push(p);
    }
    if by_source.is_empty() {
        return None;
    }
    let parts: Vec<String> = by_source
        .into_iter()
        .map(|(s, paths)| {
            let list: Vec<String> = paths.iter().map(|p| sql_str(p)).collect();
            format!("({COL_SOURCE} = {} AND {COL_PATH} IN ({}))", sql_str(s.as_str()), list.join(", "))
        })
        .collect();
    Some(parts.join(" OR "))
}

/// `source IN (...)` for a search limited to some sources; `None` means all.
pub(crate) fn sources_filter(sources: &[Source]) -> Option<String> {
    if sources.is_empty() {
        return None;
    }
    let list: Vec<String> = sources.iter().map(|s| sql_str(s.as_str())).collect();
    Some(format!("{COL_SOURCE} IN ({})", list.join(", ")))
}

/// The filter of a scope (sources, days), `None` when it admits every chunk.
pub(crate) fn scope_filter(scope: &memory_core::store::Scope) -> Option<String> {
    // An open end (`after` alone, `before` alone) is i64::MIN or MAX, which the filter's SQL cannot write as a
    // literal: it is left out, and `IS NOT NULL` still leaves the undated out.
    let days = scope.days.map(|d| {
        let mut parts = vec![format!("{COL_DATE} IS NOT NULL")];
        if d.first != i64::MIN {
            parts.push(format!("{COL_DATE} >= {}", d.first));
        }
        if d.last != i64::MAX {
            parts.push(format!("{COL_DATE} <= {}", d.last));
        }
        parts.join(" AND ")
    });
    match (sources_filter(&scope.sources), days) {
        (Some(s), Some(d)) => Some(format!("({s}) AND {d}")),
        (s, d) => s.or(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_doubled_in_filters() {
        assert_eq!(sql_str("it's"), "'it''s'");
        let f = files_filter(&[(Source::Memory, "a'b.md"), (Source::Memory, "c.md")]).unwrap();
        assert_eq!(f, "(source = 'memory' AND path IN ('a''b.md', 'c.md'))");
        assert!(files_filter(&[]).is_none());
        assert_eq!(sources_filter(&[Source::Sessions]).unwrap(), "source IN ('sessions')");
    }
}

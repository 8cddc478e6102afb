//! Project-scoped ranking (OpenClaw 2026.9's rule): with a session's active repository keys, a hit tagged
//! `<!-- project: key -->` whose every key is active is boosted, one tagged for another repository is mildly
//! demoted, untagged memory is neutral. Without active keys nothing changes (and nothing is parsed).
//!
//! The tags are read from the hit's lines ([`crate::chunking::annotations`]); a hit is a chunk, so a chunk
//! that holds several entries is boosted when any of its tagged entries is fully active, else demoted when it
//! holds a tagged entry. `USER.md` is user-level and never project-scoped.

use crate::chunking::annotations::entries;
use crate::discovery::USER_FILE;
use crate::store::Candidate;
use crate::types::Source;

/// The multiplier of an entry of an active repository.
pub const ACTIVE_PROJECT_BOOST: f64 = 1.15;
/// The multiplier of an entry of another repository.
pub const OTHER_PROJECT_FACTOR: f64 = 0.9;
/// A session keeps at most this many active repository keys (most recent first); more are not read.
pub const MAX_ACTIVE_PROJECTS: usize = 4;

/// The active keys as the ranking reads them: normalised like the annotations, invalid ones dropped, at most
/// [`MAX_ACTIVE_PROJECTS`] (the first ones: OpenClaw passes them most recent first).
pub fn active_keys(raw: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in raw.iter().filter_map(|k| crate::chunking::annotations::normalize_project_key(k)) {
        if out.len() == MAX_ACTIVE_PROJECTS {
            break;
        }
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// Whether an entry of this file may be project-scoped.
pub fn is_project_scoped_file(source: Source, path: &str) -> bool {
    source == Source::Memory && path != USER_FILE
}

/// The project multiplier of one hit for the active keys `active` (already normalised by [`active_keys`]).
pub fn factor(c: &Candidate, active: &[String]) -> f64 {
    if active.is_empty() || !is_project_scoped_file(c.source, &c.path) || !c.text.contains("<!--") {
        return 1.0;
    }
    let mut tagged = false;
    for e in entries(&c.text, c.start_line) {
        if e.annotations.projects_all_active(active) {
            return ACTIVE_PROJECT_BOOST;
        }
        tagged |= e.annotations.is_project_tagged();
    }
    if tagged {
        OTHER_PROJECT_FACTOR
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory chunk of `path` holding `text` (its id is its path).
    fn cand(path: &str, text: &str) -> Candidate {
        crate::ranking::tests::cand(path, path, text)
    }

    #[test]
    fn boost_demote_neutral() {
        let active = active_keys(&["GitHub.com/org/repo".into()]);
        assert_eq!(active, ["github.com/org/repo"]);
        let ours = cand("MEMORY.md", "- Run make ci. <!-- project: github.com/org/repo -->");
        let theirs = cand("MEMORY.md", "- Run make ci. <!-- project: github.com/org/other -->");
        let none = cand("MEMORY.md", "- Run make ci.");
        assert_eq!(factor(&ours, &active), ACTIVE_PROJECT_BOOST);
        assert_eq!(factor(&theirs, &active), OTHER_PROJECT_FACTOR);
        assert_eq!(factor(&none, &active), 1.0);
        // No active keys: nothing changes.
        assert_eq!(factor(&ours, &[]), 1.0);
        assert_eq!(factor(&theirs, &[]), 1.0);
        // Every key of an entry must be active.
        let both = cand("memory/notes.md", "- x <!-- project: github.com/org/repo; github.com/org/other -->");
        assert_eq!(factor(&both, &active), OTHER_PROJECT_FACTOR);
        let two = active_keys(&["github.com/org/repo".into(), "github.com/org/other".into()]);
        assert_eq!(factor(&both, &two), ACTIVE_PROJECT_BOOST);
        // USER.md is never project-scoped; an invalid tag is never active.
        assert_eq!(factor(&cand("USER.md", "- x <!-- project: github.com/org/other -->"), &active), 1.0);
        assert_eq!(factor(&cand("MEMORY.md", "- x <!-- project: github.com/<org>/repo -->"), &active), OTHER_PROJECT_FACTOR);
    }

    #[test]
    fn active_keys_are_bounded_and_normalised() {
        let raw: Vec<String> = ["a/1", "A/1", "", "b<x>/2", "c/3", "d/4", "e/5", "f/6"].iter().map(std::string::ToString::to_string).collect();
        assert_eq!(active_keys(&raw), ["a/1", "c/3", "d/4", "e/5"]);
    }
}

//! Unit tests of the engine's own rules (engine behaviour end to end is in the conformance suites and
//! memory-builtin's tests).

use super::freshness::{CheckPlan, Journal};
use crate::discovery::MemoryRoots;

fn workspace() -> (tempfile::TempDir, MemoryRoots) {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("memory")).unwrap();
    std::fs::write(d.path().join("memory/a.md"), "a\n").unwrap();
    let roots = MemoryRoots::new(d.path(), &[] as &[String]);
    (d, roots)
}

/// A journal after the two searches that start it and find the index in step.
#[cfg(target_os = "linux")]
fn journal_in_step(roots: &MemoryRoots) -> Journal {
    let mut j = Journal::default();
    for _ in 0..2 {
        let e = run(j.plan(roots, None, false));
        j.in_step_at(e);
    }
    j
}

/// A check of every file.
fn run(plan: CheckPlan) -> u64 {
    match plan {
        CheckPlan::Run(epoch) => epoch,
        other => panic!("expected a check of every file, got {other:?}"),
    }
}

/// A check of the files the journal named alone.
fn named(plan: CheckPlan) -> u64 {
    match plan {
        CheckPlan::Named(epoch) => epoch,
        other => panic!("expected a check of the named files, got {other:?}"),
    }
}

#[test]
fn a_one_shot_search_never_starts_the_journal_and_later_ones_trust_it_once_in_step() {
    let (d, roots) = workspace();
    let mut j = Journal::default();
    // First search: a check, no journal (a one-shot process ends here).
    let e = run(j.plan(&roots, None, false));
    j.in_step_at(e);
    // Second: the journal starts before this check lists the files; the check still runs.
    let e = run(j.plan(&roots, None, false));
    j.in_step_at(e);
    if cfg!(target_os = "linux") {
        assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
        // A change: a check of the file it named, then trusted again.
        std::fs::write(d.path().join("memory/b.md"), "b\n").unwrap();
        let e = named(j.plan(&roots, None, false));
        j.in_step_at(e);
        // A new folder: its notes came without events of their own, so every file is checked.
        std::fs::create_dir_all(d.path().join("memory/projects")).unwrap();
        let e = run(j.plan(&roots, None, false));
        j.in_step_at(e);
        assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
        // A host announced a change: checked whatever the journal says.
        run(j.plan(&roots, None, true));
        // A swapped index: not trusted until a check finds it in step.
        j.forget();
        let e = run(j.plan(&roots, None, false));
        j.in_step_at(e);
        assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
    } else {
        run(j.plan(&roots, None, false));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_check_that_finishes_late_does_not_vouch_for_a_change_another_search_drained() {
    let (d, roots) = workspace();
    let mut j = journal_in_step(&roots);
    // Search A starts its check after a change (of that file alone: the index was in step before it).
    std::fs::write(d.path().join("memory/a.md"), "aa\n").unwrap();
    let a = named(j.plan(&roots, None, false));
    // Another change; search B drains it and starts its own check (of every file: A has not vouched yet).
    std::fs::write(d.path().join("memory/b.md"), "b\n").unwrap();
    let b = run(j.plan(&roots, None, false));
    assert!(b > a);
    // A finishes first: it answers for what it saw, not for B's change.
    j.in_step_at(a);
    run(j.plan(&roots, None, false));
    // B finishes (and the search just above too): now trusted.
    j.in_step_at(b);
    assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
}

#[test]
fn a_check_that_failed_leaves_the_journal_untrusted() {
    let (_d, roots) = workspace();
    let mut j = Journal::default();
    let e = run(j.plan(&roots, None, false));
    j.in_step_at(e);
    // The second check starts the journal but fails (no `in_step_at`): the third still checks.
    run(j.plan(&roots, None, false));
    run(j.plan(&roots, None, false));
}

/// Files a host announces (the watcher's events) are named files: with the journal in step they are checked
/// alone, not by listing every file; too many at once, and every file is checked.
#[cfg(target_os = "linux")]
#[test]
fn announced_files_are_checked_alone_while_the_journal_is_in_step() {
    let (d, roots) = workspace();
    let mut j = journal_in_step(&roots);
    assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
    let a = d.path().join("memory/a.md");
    j.announce([a.clone()]);
    assert_eq!(j.announced(), std::slice::from_ref(&a));
    let e = named(j.plan(&roots, None, false));
    assert_eq!(j.take_files(), std::slice::from_ref(&a));
    j.in_step_at(e);
    assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
    j.announce((0..300).map(|i| d.path().join(format!("memory/{i}.md"))));
    assert!(j.announced().is_empty(), "bounded");
    let e = run(j.plan(&roots, None, false));
    j.in_step_at(e);
    assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
}

/// A watcher subscribing starts the journal at once (before any search), and the searches' checks then trust
/// the journal the watcher is fed from: one set of watches serves both.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_watcher_s_feed_is_the_journal_the_searches_trust() {
    let (d, roots) = workspace();
    let mut j = Journal::default();
    let mut feed = j.subscribe(&roots, None).expect("a feed on Linux");
    // The first search's check runs (nothing vouched yet); the second is skipped, no second start needed.
    let e = run(j.plan(&roots, None, false));
    j.in_step_at(e);
    assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
    std::fs::write(d.path().join("memory/b.md"), "b\n").unwrap();
    let heard = tokio::time::timeout(std::time::Duration::from_secs(5), crate::changes::ChangeStream::next(&mut feed)).await.unwrap().unwrap();
    assert_eq!(heard.paths.first(), Some(&d.path().join("memory/b.md")));
    // What the watcher's feed took is still the search's named change.
    let e = named(j.plan(&roots, None, false));
    assert_eq!(j.take_files(), [d.path().join("memory/b.md")]);
    j.in_step_at(e);
    assert_eq!(j.plan(&roots, None, false), CheckPlan::Skip);
}

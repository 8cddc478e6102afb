//! Questions that say when, through the `memory` command: asked on a fixed day (`memory.search.query.now`), each
//! expression finds the log of its time first among five logs that decide about the same project; a `now` that
//! is not a date is refused naming the key.

use std::process::Output;

mod common;

/// Logs deciding about Project Alder (and 阿尔德项目) on five days; the question is asked on Wednesday 2026-03-18.
const LOGS: &[(&str, &str)] = &[
    ("memory/2026-03-18.md", "decided to ship the importer"),
    ("memory/2026-03-17.md", "decided to rename the service"),
    ("memory/2026-03-10.md", "decided to move the database to Postgres"),
    ("memory/2026-02-12.md", "decided to hire two engineers"),
    ("memory/2025-11-04.md", "decided to drop the mobile app"),
];

fn search(dirs: &conformance::testing::TestDirs, config: &std::path::Path, query: &str) -> Output {
    common::memory(dirs.ws.path(), dirs.state.path(), Some(config)).args(["search", query, "--json"]).output().unwrap()
}

#[test]
fn each_way_of_saying_when_finds_the_log_of_that_time_first() {
    let notes: Vec<(String, String)> = LOGS
        .iter()
        .map(|(path, decision)| {
            let day = &path[7..17];
            // A long first line on the older logs: by words alone they would rank first.
            (path.to_string(), format!("# {day}\n\n- Project Alder: we {decision}.\n- 阿尔德项目：我们{decision}。\n"))
        })
        .collect();
    let refs: Vec<(&str, &str)> = notes.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let dirs = common::workspace(&refs);
    let config = dirs.state.path().join("config.json");
    std::fs::write(&config, r#"{"memory": {"search": {"query": {"now": "2026-03-18"}}}}"#).unwrap();
    for (query, want) in [
        ("What did we decide about Project Alder today?", "memory/2026-03-18.md"),
        ("What did we decide about Project Alder yesterday?", "memory/2026-03-17.md"),
        ("What did we decide about Project Alder last week?", "memory/2026-03-10.md"),
        ("What did we decide about Project Alder last month?", "memory/2026-02-12.md"),
        ("What did we decide about Project Alder in November?", "memory/2025-11-04.md"),
        ("What did we decide about Project Alder on 2026-03-10?", "memory/2026-03-10.md"),
        ("What did we decide about Project Alder 8 days ago?", "memory/2026-03-10.md"),
        ("What did we decide about Project Alder last Tuesday?", "memory/2026-03-17.md"),
        ("昨天我们对阿尔德项目做了什么决定？", "memory/2026-03-17.md"),
        ("上周我们对阿尔德项目做了什么决定？", "memory/2026-03-10.md"),
        ("上个月我们对阿尔德项目做了什么决定？", "memory/2026-02-12.md"),
        ("去年十一月我们对阿尔德项目做了什么决定？", "memory/2025-11-04.md"),
    ] {
        let out = search(&dirs, &config, query);
        assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["results"][0]["path"], want, "{query}: {v}");
    }
}

#[test]
fn a_now_that_is_not_a_date_is_refused_naming_the_key() {
    let dirs = common::workspace(&[]);
    let config = dirs.state.path().join("config.json");
    std::fs::write(&config, r#"{"memory": {"search": {"query": {"now": "next tuesday"}}}}"#).unwrap();
    let out = search(&dirs, &config, "anything");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("memory.search.query.now") && err.contains("next tuesday"), "{err}");
}

/// A workspace of notes dated three ways: a daily log by its name, a note by its front matter, a running journal by
/// its dated headings; and an undated note that matches too.
fn dated_notes() -> conformance::testing::TestDirs {
    common::workspace(&[
        ("memory/2026-03-10.md", "# 2026-03-10\n\n- The heron nested by the pond.\n"),
        ("memory/trip.md", "---\ntitle: Trip\ndate: 2026-02-14\n---\n# Trip\n\nWe saw a heron at the lake.\n"),
        ("memory/journal.md", "# Journal\n\n## 2026-01-05\n\nA heron in the snow.\n\n## 2026-03-01\n\nNo birds today.\n"),
        ("memory/birds.md", "# Birds\n\nThe heron is a wading bird.\n"),
    ])
}

fn search_args(dirs: &conformance::testing::TestDirs, args: &[&str]) -> Output {
    common::memory(dirs.ws.path(), dirs.state.path(), None).arg("search").args(args).arg("--json").output().unwrap()
}

fn paths(out: &Output) -> Vec<String> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut p: Vec<String> = v["results"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap().to_string()).collect();
    p.sort();
    p.dedup();
    p
}

#[test]
fn after_and_before_keep_the_notes_dated_inside_by_name_front_matter_or_heading() {
    let dirs = dated_notes();
    let all = paths(&search_args(&dirs, &["heron"]));
    assert_eq!(all, ["memory/2026-03-10.md", "memory/birds.md", "memory/journal.md", "memory/trip.md"]);
    assert_eq!(paths(&search_args(&dirs, &["heron", "--after", "2026-03-01"])), ["memory/2026-03-10.md"]);
    assert_eq!(paths(&search_args(&dirs, &["heron", "--after", "2026-02-01", "--before", "2026-02-28"])), ["memory/trip.md"]);
    // The journal's January section, not its March one (which says nothing of herons).
    let out = search_args(&dirs, &["heron", "--before", "2026-01-31"]);
    assert_eq!(paths(&out), ["memory/journal.md"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["results"][0]["snippet"].as_str().unwrap().contains("snow"), "{v}");
    // Inclusive at both ends.
    assert_eq!(paths(&search_args(&dirs, &["heron", "--after", "2026-03-10", "--before", "2026-03-10"])), ["memory/2026-03-10.md"]);
}

#[test]
fn a_window_without_notes_answers_empty_with_a_note_and_bad_days_name_the_field() {
    let dirs = dated_notes();
    let out = search_args(&dirs, &["heron", "--after", "2027-01-01"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"], serde_json::json!([]), "{v}");
    assert!(v["warnings"].to_string().contains("no notes dated from 2027-01-01"), "{v}");
    for (args, field) in [
        (vec!["heron", "--after", "March"], "after"),
        (vec!["heron", "--before", "2026-02-30"], "before"),
        (vec!["heron", "--after", "2026-03-02", "--before", "2026-03-01"], "earlier than after"),
    ] {
        let out = search_args(&dirs, &args);
        assert!(!out.status.success(), "{args:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(field) && err.lines().count() <= 2, "{args:?}: {err}");
    }
}

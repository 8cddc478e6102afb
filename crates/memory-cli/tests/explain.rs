//! `memory explain` through the binary: every factor it shows adds up to the score the search gives, explaining
//! changes no result, and `--path` says where each kind of note is (a result, below maxResults, cut by
//! minScore, brought by no leg, outside the days asked, skipped, not a memory file, missing).

use serde_json::{json, Value};

mod common;

const LOGS: &[(&str, &str)] = &[
    ("memory/2026-03-17.md", "# 2026-03-17\n\n- Decided with Bob: the importer switches to streaming parse, batch size 500.\n"),
    ("memory/2026-03-10.md", "# 2026-03-10\n\n- The importer crashed on the big CSV again; we decided to look at it later.\n"),
    ("memory/importer.md", "# Importer\n\nThe CSV importer lives in tools/import and reads UTF-8 only.\n"),
    ("memory/garden.md", "# Garden\n\nTomatoes go in after the last frost.\n"),
    ("MEMORY.md", "# Memory\n\n- <!-- importance: 9 --> The importer runs nightly at 02:00 on the build box.\n"),
];

fn config(dirs: &conformance::testing::TestDirs, search: Value) -> std::path::PathBuf {
    let path = dirs.state.path().join("config.json");
    let mut search = search;
    search["query"]["now"] = json!("2026-03-18");
    std::fs::write(&path, json!({ "memory": { "search": search } }).to_string()).unwrap();
    path
}

fn run(dirs: &conformance::testing::TestDirs, config: &std::path::Path, args: &[&str]) -> Value {
    let out = common::memory(dirs.ws.path(), dirs.state.path(), Some(config)).args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_factors_add_up_to_each_score_and_explaining_changes_no_result() {
    let dirs = common::workspace(LOGS);
    let base_url = common::slow_embedding_server(std::time::Duration::ZERO);
    let config = config(&dirs, json!({ "provider": "openai-compatible", "model": "m", "remote": { "baseUrl": base_url } }));
    let query = "what did we decide yesterday about the importer?";
    let searched = run(&dirs, &config, &["search", query]);
    let explained = run(&dirs, &config, &["explain", query]);
    assert_eq!(searched["results"], explained["results"], "explaining a search changes none of its results");
    assert!(searched.get("explanation").is_none(), "a search that does not ask is not explained: {searched}");
    assert_eq!(explained["mode"], "hybrid", "{explained}");

    let e = &explained["explanation"];
    assert_eq!(e["today"], "2026-03-18");
    assert_eq!(e["query"]["time"][0]["first"], "2026-03-17", "{e}");
    let (wt, wv) = (f(&e["weights"]["text"]), f(&e["weights"]["vector"]));
    assert!((wt + wv - 1.0).abs() < 1e-9 && wt > 0.0 && wv > 0.0, "{e}");
    let hits = e["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 5, "every candidate of a small workspace is explained: {e}");
    let results = explained["results"].as_array().unwrap();
    for h in hits {
        let text = h["keyword"]["textScore"].as_f64().unwrap_or(0.0);
        let vector = h["vector"]["score"].as_f64().unwrap_or(0.0);
        assert!((wt * text + wv * vector - f(&h["merged"])).abs() < 1e-9, "merged = weights x leg scores: {h}");
        let moved = f(&h["merged"]) + f(&h["recency"]) + f(&h["timeWindow"]) + f(&h["sentence"]);
        let adjusted = moved * f(&h["decay"]) * f(&h["importance"]) * f(&h["project"]);
        assert!((adjusted - f(&h["score"])).abs() < 1e-9, "the factors give the score: {h}");
        match h["result"].as_u64() {
            Some(n) => {
                let r = &results[n as usize - 1];
                assert_eq!((&r["path"], &r["score"]), (&h["path"], &h["score"]), "{h}");
                assert_eq!(h["snippet"]["startLine"], r["snippetStartLine"], "{h}");
            }
            None => assert!(h.get("snippet").is_none(), "{h}"),
        }
    }
    let first = &hits[0];
    assert_eq!(first["path"], "memory/2026-03-17.md", "{e}");
    assert!(f(&first["timeWindow"]) > 0.0 && first["date"] == "2026-03-17", "the log of yesterday moved up for it: {first}");
    let words: Vec<&str> = first["keyword"]["words"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(words.contains(&"import") && words.contains(&"decid"), "{first}");
    let memory = hits.iter().find(|h| h["path"] == "MEMORY.md").unwrap();
    assert!((f(&memory["importance"]) - 1.2).abs() < 1e-9, "importance 9 multiplies by 1.2: {memory}");
}

#[test]
fn explain_path_says_where_each_note_is_and_why() {
    let big = format!("# Big\n\nimporter {}\n", "x".repeat(2_000));
    let mut notes = LOGS.to_vec();
    notes.push(("memory/big.md", big.as_str()));
    notes.push(("notes.txt", "the importer again"));
    let dirs = common::workspace(&notes);
    let config = config(&dirs, json!({ "maxFileBytes": 1000 }));
    let path = |query: &str, file: &str, more: &[&str]| -> Value {
        let mut args = vec!["explain", query, "--path", file];
        args.extend(more);
        let v = run(&dirs, &config, &args);
        v["explanation"]["path"].clone()
    };

    let p = path("importer streaming parse", "memory/2026-03-17.md", &[]);
    assert_eq!((p["verdict"].as_str(), p["rank"].as_u64()), (Some("result"), Some(1)), "{p}");
    let p = path("importer", "memory/2026-03-10.md", &["--max-results", "1", "--min-score", "0"]);
    assert_eq!(p["verdict"], "beyond-max-results", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("maxResults"), "{p}");
    // The query is the name of importer.md: that file passes by its name, the others' scores are far below.
    let p = path("importer", "memory/2026-03-10.md", &["--min-score", "0.99"]);
    assert_eq!(p["verdict"], "below-min-score", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("minScore 0.99"), "{p}");
    let p = path("importer", "memory/garden.md", &[]);
    assert_eq!(p["verdict"], "not-a-candidate", "{p}");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.contains("none of its lines holds a word of the query") && detail.contains("no vector leg"), "{p}");
    let p = path("importer", "memory/importer.md", &["--after", "2026-03-01"]);
    assert_eq!(p["verdict"], "outside-scope", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("undated"), "{p}");
    let p = path("importer", "memory/big.md", &[]);
    assert_eq!(p["verdict"], "skipped", "{p}");
    assert!(p["detail"].as_str().unwrap().contains("memory status"), "{p}");
    let p = path("importer", "notes.txt", &[]);
    assert_eq!(p["verdict"], "not-memory-file", "{p}");
    let p = path("importer", "memory/never-written.md", &[]);
    assert_eq!(p["verdict"], "missing", "{p}");
    let abs = dirs.ws.path().join("memory/2026-03-17.md");
    let p = path("importer streaming parse", abs.to_str().unwrap(), &[]);
    assert_eq!(p["verdict"], "result", "an absolute path is the same note: {p}");
}

#[test]
fn explain_prints_for_people() {
    let dirs = common::workspace(LOGS);
    let config = config(&dirs, json!({}));
    let out = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config))
        .args(["explain", "what did we decide yesterday about the importer?", "--path", "memory/garden.md"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("Query read as: keyword terms decid, yesterday, import; time \"yesterday\" = 2026-03-17"), "{text}");
    assert!(text.contains("\n#1 memory/2026-03-17.md:1-3"), "{text}");
    assert!(text.contains("moved    time window +") && text.contains("(dated 2026-03-17)"), "{text}");
    assert!(text.contains("factors  importance x1.20"), "{text}");
    assert!(text.contains("snippet  the whole chunk: "), "{text}");
    assert!(text.contains("memory/garden.md: indexed, but no chunk of it was a candidate"), "{text}");
}

#[test]
fn a_path_that_cannot_name_a_note_is_an_argument_error() {
    let dirs = common::workspace(LOGS);
    let config = config(&dirs, json!({}));
    for bad in ["/etc/passwd", "memory/../../etc/passwd", " "] {
        let out = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config)).args(["explain", "importer", "--path", bad]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}: {stderr}");
        assert!(stderr.contains("explainPath") && stderr.contains("inside the workspace"), "{bad}: {stderr}");
    }
}

/// The factors a small keyword workspace does not show: temporal decay, project, an exact match in hybrid search,
/// the reranker (the cross-encoder the setup installs).
#[test]
fn decay_project_exact_match_and_reranker_show_through_the_binary() {
    let reranker = std::env::var_os("MEMORY_RS_CACHE")
        .map_or_else(|| std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs"), std::path::PathBuf::from)
        .join("models/ms-marco-MiniLM-L-12-v2");
    if !reranker.is_dir() {
        conformance::testing::missing_prerequisite(
            "decay_project_exact_match_and_reranker",
            "the ms-marco-MiniLM-L-12-v2 reranker is not in the cache",
        );
        return;
    }
    let mut notes = LOGS.to_vec();
    notes.push(("memory/deploys.md", "# Deploys\n\n<!-- project: github.com/acme/importer -->\nThe importer deploy failed with E4012 twice.\n"));
    let dirs = common::workspace(&notes);
    let base_url = common::slow_embedding_server(std::time::Duration::ZERO);
    let config = config(
        &dirs,
        json!({ "provider": "openai-compatible", "model": "m", "remote": { "baseUrl": base_url },
                "query": { "hybrid": { "temporalDecay": { "enabled": true, "halfLifeDays": 30 } },
                           "rerank": { "enabled": true, "modelPath": reranker.to_str().unwrap() } } }),
    );
    let v = run(&dirs, &config, &["explain", "importer E4012", "--project", "github.com/acme/importer"]);
    let e = &v["explanation"];
    assert_eq!((e["reranked"].as_bool(), e["halfLifeDays"].as_f64()), (Some(true), Some(30.0)), "{e}");
    let hit = |path: &str| e["hits"].as_array().unwrap().iter().find(|h| h["path"] == path).cloned().unwrap_or_else(|| panic!("{path}: {e}"));
    let deploys = hit("memory/deploys.md");
    assert_eq!(deploys["exactMatch"], true, "{deploys}");
    assert!((f(&deploys["project"]) - 1.15).abs() < 1e-9, "{deploys}");
    assert!(deploys["rerank"].is_number(), "the reranker read it: {deploys}");
    let old = hit("memory/2026-03-10.md");
    assert!((8.0..9.0).contains(&f(&old["ageDays"])) && f(&old["decay"]) < 1.0, "{old}");
    assert!(hit("MEMORY.md").get("ageDays").is_none(), "an evergreen note does not decay");
    for h in e["hits"].as_array().unwrap() {
        let moved = f(&h["merged"]) + f(&h["recency"]) + f(&h["timeWindow"]) + f(&h["sentence"]);
        let score = moved * f(&h["decay"]) * f(&h["importance"]) * f(&h["project"]) + h["rerank"].as_f64().unwrap_or(0.0);
        assert!((score - f(&h["score"])).abs() < 1e-9, "{h}");
    }
    let out = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config))
        .args(["explain", "importer E4012", "--project", "github.com/acme/importer"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("first    holds what the query names exactly"), "{text}");
    assert!(text.contains("project x1.15") && text.contains("decay x0.") && text.contains("   rerank   "), "{text}");
}

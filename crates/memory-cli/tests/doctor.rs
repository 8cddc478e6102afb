//! The skipped files `memory status` lists and a search that finds nothing mentions.

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::{json, Value};

fn run(dirs: &conformance::testing::TestDirs, config: Option<&Path>, args: &[&str]) -> Output {
    let mut c = common::memory(dirs.ws.path(), dirs.state.path(), config);
    c.env("MEMORY_NO_SERVER", "1").args(args);
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn write_config(dirs: &conformance::testing::TestDirs, v: &Value) -> std::path::PathBuf {
    let p = dirs.state.path().join("config.json5");
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

/// Item 5: `memory status` lists the files it left out with why, as text and JSON.
#[test]
fn status_lists_skipped_files_with_their_reason() {
    let dirs = common::workspace(&[("memory/notes.md", "# Notes\n\n- Harbour step one\n")]);
    std::fs::write(dirs.ws.path().join("memory/blob.md"), b"binary\0data").unwrap();
    std::fs::write(dirs.ws.path().join("memory/latin1.md"), b"caf\xe9 au lait\n").unwrap();
    std::fs::write(dirs.ws.path().join("memory/big.md"), "word ".repeat(400)).unwrap();
    let config = write_config(&dirs, &json!({ "memory": { "search": { "maxFileBytes": 1000 } } }));
    assert!(run(&dirs, Some(&config), &["index"]).status.success());
    let o = run(&dirs, Some(&config), &["status", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    let reason = |path: &str| -> String {
        let f = v["skipped"].as_array().into_iter().flatten().find(|f| f["path"] == path).unwrap_or_else(|| panic!("{path}: {v}"));
        assert_eq!(f["retried"], false, "{f}");
        f["reason"].as_str().unwrap().to_string()
    };
    assert!(reason("memory/blob.md").contains("binary"), "{v}");
    assert!(reason("memory/latin1.md").contains("not valid UTF-8"), "{v}");
    assert!(reason("memory/big.md").contains("over the 1000-byte limit"), "{v}");
    assert_eq!(v["skipped"].as_array().unwrap().len(), 3, "{v}");

    let o = run(&dirs, Some(&config), &["status"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Skipped:    memory/blob.md: file looks binary (contains NUL bytes)"), "{out}");
    assert!(out.contains("Skipped:    memory/big.md: file is 2000 bytes, over the 1000-byte limit"), "{out}");
}

/// Item 5: a search that finds nothing says that some notes were left out, and where they are listed.
#[test]
fn a_search_that_finds_nothing_says_notes_were_skipped() {
    let dirs = common::workspace(&[]);
    let o = run(&dirs, None, &["search", "zebra quokka", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(v["results"].as_array().unwrap().is_empty() && !v["warnings"].to_string().contains("not indexed"), "{v}");

    std::fs::write(dirs.ws.path().join("memory/blob.md"), b"zebra quokka\0").unwrap();
    let o = run(&dirs, None, &["search", "zebra quokka", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert!(v["results"].as_array().unwrap().is_empty(), "{v}");
    assert!(v["warnings"].to_string().contains("1 memory files are not indexed"), "{v}");
    assert!(v["warnings"].to_string().contains("memory status"), "{v}");
    // As text: on stderr, beside "No results."
    let o = run(&dirs, None, &["search", "zebra quokka"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("1 memory files are not indexed"), "{}", text(&o));
    // A search that finds something says nothing of them.
    let o = run(&dirs, None, &["search", "gateway", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!v["results"].as_array().unwrap().is_empty() && !v["warnings"].to_string().contains("not indexed"), "{v}");
}

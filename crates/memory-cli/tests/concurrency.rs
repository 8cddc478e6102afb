//! Two processes indexing the same index (one of them rebuilding it) while a third searches: the searcher
//! never sees an error and no file is lost.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod common;

fn memory(ws: &Path, state: &Path) -> Command {
    let mut c = common::memory(ws, state, None);
    c.env("RUST_LOG", "error").stdin(Stdio::null());
    c
}

#[test]
fn two_indexers_and_a_searcher() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let state = tmp.path().join("state");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    std::fs::write(ws.join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Studio.\n").unwrap();
    let write_notes = |from: usize, to: usize| {
        for i in from..to {
            let body: String = (0..40).map(|j| format!("- note {i} line {j} gateway billing roadmap item{}\n", (i * 7 + j) % 97)).collect();
            std::fs::write(ws.join(format!("memory/2025-01-01-n{i}.md")), format!("# Note {i}\n\n{body}")).unwrap();
        }
    };
    write_notes(0, 300);

    let stop = Arc::new(AtomicBool::new(false));
    let searcher = {
        let (ws, state, stop) = (ws.clone(), state.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut searches = 0;
            while !stop.load(Ordering::SeqCst) || searches < 5 {
                let o = memory(&ws, &state).args(["search", "gateway roadmap", "--json"]).output().unwrap();
                assert!(o.status.success(), "search {searches} failed: {}", String::from_utf8_lossy(&o.stderr));
                let err = String::from_utf8_lossy(&o.stderr);
                assert!(!err.contains("ERROR") && !err.contains("error:"), "search {searches} reported: {err}");
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                assert!(!v["results"].as_array().unwrap().is_empty(), "search {searches} found nothing");
                searches += 1;
            }
            searches
        })
    };
    for round in 0..3 {
        // More notes arrive while two indexers run, one of them forcing a rebuild.
        write_notes(300 + round * 50, 350 + round * 50);
        let a = memory(&ws, &state).arg("index").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let b = memory(&ws, &state).args(["index", "--force"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        for (name, child) in [("index", a), ("index --force", b)] {
            let o = child.wait_with_output().unwrap();
            assert!(o.status.success(), "round {round}: {name} failed: {}", String::from_utf8_lossy(&o.stderr));
        }
    }
    stop.store(true, Ordering::SeqCst);
    let searches = searcher.join().unwrap();

    // Nothing lost: every note is indexed and the index is fresh.
    let o = memory(&ws, &state).args(["status", "--json"]).output().unwrap();
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["files"], 451, "{st}");
    assert_eq!(st["dirty"], false, "{st}");
    let o = memory(&ws, &state).args(["search", "Note 449", "--json", "--max-results", "50"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["results"].as_array().unwrap().iter().any(|r| r["path"] == "memory/2025-01-01-n449.md"), "{v}");
    eprintln!("concurrency: {searches} searches during 3 rounds of two concurrent indexers, no error");
}

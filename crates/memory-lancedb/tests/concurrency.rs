//! Two processes indexing one local LanceDB table while a third searches it (issue 11): no error reaches the
//! searcher, and no file is lost: every file a writer's sync reported indexed is found by the searcher from
//! then on, and by a fresh engine at the end.
//!
//! The test is the coordinator: it re-executes this test binary with `MEMORY_LANCEDB_ROLE=writer-a|writer-b|searcher`
//! running only the ignored `child_process` test, once per child.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use memory_core::{ErrorKind, MemoryBackend, SearchRequest, SyncOptions};

const ROLE: &str = "MEMORY_LANCEDB_ROLE";
const DB: &str = "MEMORY_LANCEDB_DB";
const WS: &str = "MEMORY_LANCEDB_WS";
const LOG: &str = "MEMORY_LANCEDB_LOG";
/// Files each writer adds, one sync per file (every third sync also rewrites one of its earlier files).
const ROUNDS: usize = 8;
/// The whole test, children included, is bounded by this.
const LIMIT: Duration = Duration::from_secs(280);

/// The engine's defaults: old versions are pruned only after 10 minutes, so a reader in another process never
/// loses the version it is reading (tests elsewhere prune at once, which is only safe with one process).
fn engine_options() -> memory_lancedb::LanceDbOptions {
    memory_lancedb::LanceDbOptions::default()
}

#[test]
fn two_writers_and_a_searcher_on_one_local_table() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(coordinator());
}

/// One child of the test above; run only by it (it is ignored otherwise and does nothing without its role).
#[test]
#[ignore = "a child process of two_writers_and_a_searcher_on_one_local_table"]
fn child_process() {
    let role = std::env::var(ROLE).unwrap_or_else(|_| panic!("{ROLE} names this child's role (the parent test sets it)"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let env = |k: &str| PathBuf::from(std::env::var_os(k).unwrap_or_else(|| panic!("{k} not set")));
    let (db, ws, log) = (env(DB), env(WS), env(LOG));
    let outcome = rt.block_on(async {
        match role.as_str() {
            "writer-a" | "writer-b" => writer(&role[7..], &db, &ws, &log).await,
            "searcher" => searcher(&db, &ws, &log).await,
            other => Err(format!("unknown role {other}")),
        }
    });
    if let Err(e) = outcome {
        eprintln!("{role}: {e}");
        std::process::exit(1);
    }
}

/// Unique, analysis-stable word of one version of one file.
fn token(writer: &str, round: usize, version: usize) -> String {
    format!("qz{writer}{round}v{version}marker")
}

/// Word every version of a file carries: another writer's sync may index a newer version before the file's
/// own writer confirms it, so the searcher looks files up by this one.
fn file_word(writer: &str, round: usize) -> String {
    format!("qz{writer}{round}filemark")
}

fn path_word(path: &str) -> String {
    // memory/conc-<w>-<rr>.md
    let stem = path.trim_start_matches("memory/conc-").trim_end_matches(".md");
    let (w, r) = stem.split_once('-').unwrap();
    file_word(w, r.parse().unwrap())
}

fn note_path(writer: &str, round: usize) -> String {
    format!("memory/conc-{writer}-{round:02}.md")
}

/// Write a note atomically (temp file + rename) so a concurrent sync never reads half of it.
fn write_note(ws: &Path, log: &Path, rel: &str, text: &str) {
    let tmp = log.join(format!("tmp-{}", rel.replace('/', "_")));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, ws.join(rel)).unwrap();
}

/// Lines `path token` of files a writer's sync has reported indexed.
fn confirmed(log: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for w in ["a", "b"] {
        let Ok(text) = std::fs::read_to_string(log.join(format!("indexed-{w}"))) else { continue };
        for line in text.lines() {
            if let Some((p, t)) = line.split_once(' ') {
                out.push((p.to_string(), t.to_string()));
            }
        }
    }
    // A rewritten file: only its latest confirmed token counts.
    let mut latest: std::collections::BTreeMap<String, String> = Default::default();
    for (p, t) in out {
        latest.insert(p, t);
    }
    latest.into_iter().collect()
}

async fn writer(name: &str, db: &Path, ws: &Path, log: &Path) -> Result<(), String> {
    let emb = Arc::new(CountingEmbedder::default());
    let (b, _s) = open_local(db, ws, config(""), Some(emb), engine_options()).await;
    let mut record = std::fs::OpenOptions::new().create(true).append(true).open(log.join(format!("indexed-{name}"))).unwrap();
    for round in 0..ROUNDS {
        let rel = note_path(name, round);
        let tok = token(name, round, 0);
        write_note(ws, log, &rel, &format!("# Note {name} {round}\n\nWritten by writer {name}: {tok} {}.\n", file_word(name, round)));
        let mut done = vec![(rel, tok)];
        if round % 3 == 2 {
            // Rewrite an earlier note of ours: its old text must disappear, the new one be found.
            let old = round - 2;
            let (rel, tok) = (note_path(name, old), token(name, old, round));
            write_note(ws, log, &rel, &format!("# Note {name} {old}\n\nRewritten by writer {name}: {tok} {}.\n", file_word(name, old)));
            done.push((rel, tok));
        }
        sync_retrying_while_busy(&b, round).await?;
        for (rel, tok) in done {
            writeln!(record, "{rel} {tok}").unwrap();
        }
        record.flush().unwrap();
    }
    b.close().await.map_err(|e| e.to_string())?;
    std::fs::write(log.join(format!("done-{name}")), "").unwrap();
    Ok(())
}

/// A writer's sync, tried again while the other writer holds the index (a sync gives up after waiting 5 s for
/// the lock, by design, and says so as `Unavailable`; a host tries again later, as this writer does). On a loaded
/// machine the other writer's sync can outlast that wait; anything else is a failure.
async fn sync_retrying_while_busy(b: &dyn MemoryBackend, round: usize) -> Result<(), String> {
    const ATTEMPTS: usize = 12;
    for attempt in 1..=ATTEMPTS {
        match b.sync(SyncOptions::default()).await {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Unavailable && attempt < ATTEMPTS => {
                eprintln!("sync {round}: the other writer holds the index ({e}); trying again");
            }
            Err(e) => return Err(format!("sync {round} failed (attempt {attempt}): {e}")),
        }
    }
    unreachable!("the last attempt returns")
}

async fn find(b: &dyn MemoryBackend, tok: &str) -> Result<Vec<String>, String> {
    let mut r = SearchRequest::new(tok);
    r.min_score = Some(0.0);
    let resp = b.search(&r).await.map_err(|e| format!("search {tok:?} failed: {e}"))?;
    // Only keyword hits count as "found": vector neighbours of an unknown token are not evidence.
    Ok(resp.results.into_iter().filter(|x| x.text_score.unwrap_or(0.0) > 0.0).map(|x| x.path).collect())
}

async fn searcher(db: &Path, ws: &Path, log: &Path) -> Result<(), String> {
    let emb = Arc::new(CountingEmbedder::default());
    // The searcher only searches (no sync before search), so it is not a third writer.
    let (b, _s) = open_local(db, ws, config(", sync: { onSearch: false }"), Some(emb), engine_options()).await;
    let mut searches = 0usize;
    let mut checked_while_writing = 0usize;
    loop {
        let writers_done = log.join("done-a").exists() && log.join("done-b").exists();
        let files = confirmed(log);
        // A confirmed file must be found; check the newest ones every time and all of them now and then.
        let n = files.len();
        let sample: Vec<&(String, String)> =
            if searches.is_multiple_of(5) { files.iter().collect() } else { files.iter().skip(n.saturating_sub(3)).collect() };
        for (path, _latest) in sample {
            let tok = &path_word(path);
            let found = find(&b, tok).await?;
            searches += 1;
            if !found.contains(path) {
                let mut r = SearchRequest::new(tok.as_str());
                r.min_score = Some(0.0);
                let full = b.search(&r).await.map(|r| {
                    format!(
                        "{:?} mode {:?} warnings {:?}",
                        r.results.iter().map(|x| (&x.path, x.text_score, x.vector_score)).collect::<Vec<_>>(),
                        r.mode,
                        r.warnings
                    )
                });
                let st = b.status().await.map(|s| s.files);
                return Err(format!(
                    "{path} was reported indexed (token {tok}) but search finds {found:?}; all results {full:?}; status files {st:?}"
                ));
            }
            if !writers_done {
                checked_while_writing += 1;
            }
        }
        // Searches unrelated to the writers' files go on meanwhile and must not fail either.
        find(&b, "postgres migration").await?;
        searches += 1;
        if writers_done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    std::fs::write(log.join("searcher-stats"), format!("{searches} {checked_while_writing}")).unwrap();
    Ok(())
}

fn spawn(role: &str, db: &Path, ws: &Path, log: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "concurrency::child_process", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DB, db)
        .env(WS, ws)
        .env(LOG, log)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {role}: {e}"))
}

async fn coordinator() {
    let ws = tempfile::tempdir().unwrap();
    let db = tempfile::tempdir().unwrap();
    let log = tempfile::tempdir().unwrap();
    fixture_workspace(ws.path());
    // An existing index, as on a host that has been running: the searcher has something to answer from.
    {
        let (b, _s) = open_local(db.path(), ws.path(), config(""), Some(Arc::new(CountingEmbedder::default())), engine_options()).await;
        b.sync(SyncOptions::default()).await.unwrap();
        b.close().await.unwrap();
    }
    let deadline = Instant::now() + LIMIT;
    let mut children: Vec<(&str, Child)> =
        ["searcher", "writer-a", "writer-b"].into_iter().map(|r| (r, spawn(r, db.path(), ws.path(), log.path()))).collect();
    let mut failures = Vec::new();
    while !children.is_empty() {
        if Instant::now() > deadline {
            for (r, c) in &mut children {
                let _ = c.kill();
                let _ = c.wait();
                failures.push(format!("{r} did not finish within {LIMIT:?}"));
            }
            break;
        }
        let mut i = 0;
        while i < children.len() {
            if let Some(status) = children[i].1.try_wait().unwrap() {
                let (r, _) = children.remove(i);
                if !status.success() {
                    failures.push(format!("{r} failed ({status}); see its message above"));
                }
            } else {
                i += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(failures.is_empty(), "{failures:?}");

    let stats = std::fs::read_to_string(log.path().join("searcher-stats")).unwrap();
    let (searches, while_writing) = stats.trim().split_once(' ').unwrap();
    let (searches, while_writing): (usize, usize) = (searches.parse().unwrap(), while_writing.parse().unwrap());
    eprintln!("searcher: {searches} searches, {while_writing} checks of confirmed files while the writers ran");
    assert!(while_writing > 0, "the searcher never overlapped with the writers");

    // No file lost: a fresh engine finds every note in its latest version, and not the rewritten text.
    let (b, _s) = open_local(db.path(), ws.path(), config(""), Some(Arc::new(CountingEmbedder::default())), engine_options()).await;
    let files = confirmed(log.path());
    assert_eq!(files.len(), 2 * ROUNDS);
    for (path, tok) in &files {
        assert_eq!(find(&b, tok).await.unwrap(), vec![path.clone()], "{path} ({tok})");
    }
    for w in ["a", "b"] {
        assert!(find(&b, &token(w, 0, 0)).await.unwrap().is_empty(), "a rewritten note's old text is still indexed");
    }
    let st = b.status().await.unwrap();
    assert_eq!(st.files, 6 + 2 * ROUNDS, "{st:?}");
    // Nothing left for a sync to do: the writers indexed everything.
    let r = b.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_added, r.files_changed, r.files_removed), (0, 0, 0), "{r:?}");
}

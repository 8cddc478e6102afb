//! The conformance suite against the real QMD engine (`memory.qmd.searchMode: "search"`: QMD's own BM25, no
//! model needed, so nothing is downloaded).
//!
//! QMD ranks with its own BM25 and snippets, not the shared ranking pipeline, so the engine declares what it
//! serves (`QmdBackend::capabilities`) and the harness skips the rest, printing why. docs/qmd.md lists the
//! skipped cases; this test checks that list against the run. Under CI (`CI` set) a missing qmd install fails
//! the test; elsewhere it is skipped with the reason.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use conformance::{run_all, RunOptions, Suite};
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{MemoryBackend, Result};
use memory_qmd::{QmdConfig, QmdFactory, SearchMode};

/// The QMD engine with the settings a test run needs: the harness syncs explicitly (no boot update, no
/// timers), searches check the files first as by default (the `fresh` suite), and generous timeouts for a loaded
/// machine.
struct QmdForTests {
    command: String,
}

#[async_trait]
impl BackendFactory for QmdForTests {
    async fn open(&self, ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        let mut config = (*ctx.config).clone();
        config.memory.backend = "qmd".into();
        config.memory.search.sync.watch = false;
        let mut q = QmdConfig::from_config(&config)?;
        q.command = Some(self.command.clone());
        q.search_mode = SearchMode::Search;
        q.update.on_boot = false;
        q.update.interval = None;
        q.update.embed_interval = None;
        q.update.update_timeout = Duration::from_secs(60);
        q.limits.timeout = Duration::from_secs(30);
        q.write_to(&mut config)?;
        QmdFactory::new().open(OpenContext { config: Arc::new(config), ..ctx }).await
    }
}

/// QMD's JS entry from scripts/setup.sh, or why it cannot run here.
fn qmd_command() -> std::result::Result<String, String> {
    let entry = memory_qmd::locate::cached_js_entry().ok_or_else(|| {
        "QMD is not installed (run `eval \"$(bash scripts/setup.sh | grep '^export ')\"`; it sets MEMORY_QMD_DIR and MEMORY_NODE22)".to_string()
    })?;
    memory_qmd::locate::find_node22().map_err(|e| e.to_string())?;
    Ok(entry.to_string_lossy().into_owned())
}

/// Ids of the shipped cases that need a capability outside `declared`.
fn cases_needing_other_than(declared: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in Suite::builtin_suites() {
        for c in &s.manifest.cases {
            if s.manifest.requires.iter().chain(&c.requires).any(|r| !declared.contains(&r.name())) {
                out.insert(format!("{}/{}", s.name, c.id));
            }
        }
    }
    out
}

/// The case ids listed in docs/qmd.md between the `qmd-skips` markers (lines starting with "- `suite/case`").
fn documented_skips() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/qmd.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let start = doc.find("<!-- qmd-skips:start -->").expect("docs/qmd.md has a <!-- qmd-skips:start --> marker");
    let end = doc.find("<!-- qmd-skips:end -->").expect("docs/qmd.md has a <!-- qmd-skips:end --> marker");
    doc[start..end].lines().filter_map(|l| l.trim().strip_prefix("- `")).filter_map(|l| l.split_once('`').map(|(id, _)| id.to_string())).collect()
}

/// The qmd command, or `None` (with the reason printed) when it is missing outside CI.
fn qmd_or_skip(what: &str) -> Option<String> {
    match qmd_command() {
        Ok(c) => Some(c),
        Err(why) => {
            conformance::testing::missing_prerequisite(what, &why);
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qmd_keyword_search() {
    let Some(command) = qmd_or_skip("conformance [qmd search]") else { return };
    let started = Instant::now();
    let report = run_all(&QmdForTests { command }, &RunOptions::keyword("qmd search (BM25)")).await;
    eprintln!("conformance [qmd search (BM25)]: ran in {:.1} s", started.elapsed().as_secs_f64());
    report.assert_ok();

    // What QMD's keyword mode declares, and so exactly which cases are skipped: not the shared ranking
    // pipeline's (decay, importance, MMR, exact-path tiers), not vector or hybrid ones.
    let caps = report.capabilities.expect("an engine was opened");
    let declared = conformance::Capability::all_declared(&caps);
    assert_eq!(declared, ["keyword", "persistent", "cjk"], "QMD keyword mode changed its declaration: update docs/qmd.md");
    let skipped: BTreeSet<String> = report.skipped().iter().map(std::string::ToString::to_string).collect();
    if std::env::var_os("CONFORMANCE_FILTER").is_none() {
        assert_eq!(skipped, cases_needing_other_than(&declared), "skipped cases are exactly those needing undeclared capabilities");
        let documented = documented_skips();
        assert_eq!(documented, skipped, "docs/qmd.md (between the qmd-skips markers) must list exactly the cases QMD skips");
    }
}

/// Every snippet is exactly the lines its range cites, for answers where QMD requires every word and for the
/// any-word retry (a different QMD command with its own snippet windows), on short and long files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qmd_snippets_are_the_lines_they_cite() {
    let Some(command) = qmd_or_skip("qmd snippet line ranges") else { return };
    let suite = Suite::builtin_suites().into_iter().find(|s| s.name == "basics").expect("basics suite");
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("workspace");
    suite.materialize(&ws).unwrap();
    let ctx = OpenContext::new(Arc::new(memory_core::Config::default()), ws.clone(), tmp.path().join("state"), "snippets");
    let engine = QmdForTests { command }.open(ctx).await.unwrap();
    engine.sync(memory_core::SyncOptions::default()).await.unwrap();
    let queries = [
        "gateway",                                                            // every word
        "line 150 routine check",                                             // the end of a 150-line file
        "E4012",                                                              // a daily log
        "Where does the gateway run these days, and which machine is it on?", // any word
        "What did we decide about the deploy window after that incident last week?",
    ];
    let mut checked = 0;
    for q in queries {
        let r = engine.search(&memory_core::SearchRequest::new(q)).await.unwrap();
        assert!(!r.results.is_empty(), "{q:?}: no results");
        for hit in &r.results {
            let lines = hit.end_line - hit.start_line + 1;
            let req = memory_core::GetRequest { path: hit.path.clone(), from: Some(hit.start_line), lines: Some(lines), offset: None };
            let got = engine.get(&req).await.unwrap();
            assert_eq!(
                got.text, hit.snippet,
                "{q:?}: the snippet of {} L{}-{} is not those lines of the file",
                hit.path, hit.start_line, hit.end_line
            );
            checked += 1;
        }
    }
    assert!(checked >= queries.len());
    engine.close().await.unwrap();
}

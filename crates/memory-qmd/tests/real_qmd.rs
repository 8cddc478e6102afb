//! The engine against the real `qmd` (installed by scripts/setup.sh): collections, search with asserted line
//! ranges, freshness after update, deletions, qmd:// paths, extra collections.

mod common;

use common::*;
use memory_core::{ErrorKind, GetRequest, MemoryBackend, SearchRequest, SyncOptions};
use memory_qmd::config::QmdPathConfig;
use memory_qmd::{QmdBackend, QmdOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_update_delete_and_get_with_real_qmd() {
    let entry = qmd_entry();
    let (tmp, ws) = temp_sample_workspace();
    let state = tmp.path().join("state");
    write(&ws, "USER.md", "# User\n\nPrefers oolong tea in the afternoon.\n");
    let cfg = config(entry.to_str().unwrap());
    let qmd = QmdBackend::open(ctx(cfg, &ws, &state), QmdOptions::default()).await.unwrap();

    // Collections exist in qmd's own, self-contained config.
    let names: Vec<String> = qmd.collections().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["memory-root", "memory-dir"]);
    let yml = std::fs::read_to_string(qmd.home().join("config/qmd/index.yml")).unwrap();
    assert!(yml.contains("memory-root") && yml.contains("memory-dir"), "{yml}");
    assert!(qmd.home().join("cache/qmd/index.sqlite").is_file());
    assert!(qmd.home().starts_with(&state));

    // Top hit and its line range.
    let r = qmd.search(&SearchRequest::new("giraffe enclosure")).await.unwrap();
    assert_eq!(r.mode.as_deref(), Some("keyword"));
    let top = &r.results[0];
    assert_eq!(top.path, "memory/2026-11-02.md");
    assert_eq!((top.start_line, top.end_line), (4, 7), "{top:?}");
    assert!(top.snippet.starts_with("- Reviewed pull requests.\n- The giraffe enclosure"), "{:?}", top.snippet);
    assert!(!top.snippet.contains("@@"));
    assert_eq!(top.citation.as_deref(), Some("memory/2026-11-02.md#L4-L7"));
    assert!(top.score > 0.0 && top.score < 1.0);

    // MEMORY.md: leading/trailing blank lines of qmd's snippet are not part of the range.
    let r = qmd.search(&SearchRequest::new("rocket")).await.unwrap();
    let top = &r.results[0];
    assert_eq!(top.path, "MEMORY.md");
    assert_eq!((top.start_line, top.end_line), (7, 8), "{top:?}");
    // The lines really are those lines of the file.
    let g = qmd
        .get(&GetRequest { path: top.path.clone(), from: Some(top.start_line), lines: Some(top.end_line - top.start_line + 1), offset: None })
        .await
        .unwrap();
    assert_eq!(g.text, top.snippet);

    // A nested file under memory/.
    let r = qmd.search(&SearchRequest::new("penguins")).await.unwrap();
    assert_eq!(r.results[0].path, "memory/projects/zoo.md");

    // The user profile is a memory file here as it is for discovery.
    let r = qmd.search(&SearchRequest::new("oolong tea")).await.unwrap();
    assert_eq!(r.results[0].path, "USER.md", "{r:?}");

    // No match: empty, not an error.
    assert!(qmd.search(&SearchRequest::new("xylophonist")).await.unwrap().results.is_empty());

    // A new note is found after update (and not before: qmd results are stale until update runs).
    write(&ws, "memory/notes/okapi.md", "# Okapi\n\nAn okapi was seen near the river.\n");
    assert!(qmd.search(&SearchRequest::new("okapi")).await.unwrap().results.is_empty());
    let rep = qmd.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(rep.files_added, 1, "{rep:?}");
    let r = qmd.search(&SearchRequest::new("okapi")).await.unwrap();
    assert_eq!(r.results.len(), 1);
    assert_eq!(r.results[0].path, "memory/notes/okapi.md");
    assert_eq!((r.results[0].start_line, r.results[0].end_line), (1, 3));

    // A deleted note is gone after update.
    std::fs::remove_file(ws.join("memory/notes/okapi.md")).unwrap();
    let rep = qmd.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(rep.files_removed, 1, "{rep:?}");
    assert!(qmd.search(&SearchRequest::new("okapi")).await.unwrap().results.is_empty());

    // qmd:// paths are readable through memory_get's safety rules.
    let g = qmd.get(&GetRequest { path: "qmd://memory-dir/2026-11-02.md".into(), from: Some(5), lines: Some(1), offset: None }).await.unwrap();
    assert_eq!(g.text, "- The giraffe enclosure migration is scheduled for March.");
    assert_eq!(g.path, "memory/2026-11-02.md");
    let g = qmd.get(&GetRequest { path: "qmd://memory-root/MEMORY.md".into(), ..Default::default() }).await.unwrap();
    assert!(g.text.starts_with("# Long-term memory"));
    let e = qmd.get(&GetRequest { path: "qmd://memory-dir/../../etc/passwd".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused);
    let e = qmd.get(&GetRequest { path: "qmd://nope/a.md".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    let e = qmd.get(&GetRequest { path: "notes.txt".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused);

    let st = qmd.status().await.unwrap();
    assert_eq!(st.backend, "qmd");
    // The sample workspace's four files and USER.md.
    assert_eq!(st.files, 5, "{st:?}");
    assert!(st.last_sync_ms.is_some() && !st.dirty);
    assert!(st.fallback.is_none());
    assert_eq!(st.extra["collections"].as_array().unwrap().len(), 2);

    // Empty queries are the caller's mistake.
    assert_eq!(qmd.search(&SearchRequest::new("  \n ")).await.unwrap_err().kind(), ErrorKind::InvalidInput);
    qmd.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_extra_paths_and_reopen_with_real_qmd() {
    let entry = qmd_entry();
    let (tmp, ws) = temp_sample_workspace();
    let team = tmp.path().join("team-notes");
    let state = tmp.path().join("state");
    for i in 0..8 {
        write(&team, &format!("note-{i}.md"), &format!("# Note {i}\n\nThe walrus report number {i}.\n{}\n", "filler text ".repeat(30)));
    }
    let mut cfg = config(entry.to_str().unwrap());
    edit_qmd(&mut cfg, |q| {
        q.paths = vec![QmdPathConfig { name: Some("team".into()), path: team.to_string_lossy().into(), pattern: None }];
        q.limits.max_results = 3;
        q.limits.max_snippet_chars = 30;
        q.limits.max_injected_chars = 100;
    });
    let qmd = QmdBackend::open(ctx(cfg.clone(), &ws, &state), QmdOptions::default()).await.unwrap();
    let names: Vec<String> = qmd.collections().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["memory-root", "memory-dir", "team"]);

    let r = qmd.search(&SearchRequest::new("walrus")).await.unwrap();
    assert_eq!(r.results.len(), 3, "maxResults");
    let total: usize = r.results.iter().map(|x| x.snippet.chars().count()).sum();
    for x in &r.results {
        assert!(x.path.starts_with(team.to_str().unwrap()), "extra paths keep their absolute path: {}", x.path);
        assert!(x.snippet.chars().count() <= 30, "maxSnippetChars: {:?}", x.snippet);
        let g = qmd.get(&GetRequest { path: x.path.clone(), ..Default::default() }).await.unwrap();
        assert!(g.text.contains("walrus"));
    }
    assert!(total <= 100, "maxInjectedChars: {total}");
    let mut req = SearchRequest::new("walrus");
    req.max_results = Some(1);
    assert_eq!(qmd.search(&req).await.unwrap().results.len(), 1);
    // More results asked for than the injected-characters budget allows: the budget wins.
    req.max_results = Some(8);
    let r = qmd.search(&req).await.unwrap();
    let total: usize = r.results.iter().map(|x| x.snippet.chars().count()).sum();
    assert!(total <= 100 && r.results.len() < 8, "maxInjectedChars: {total} in {} results", r.results.len());
    let g = qmd.get(&GetRequest { path: "qmd://team/note-3.md".into(), ..Default::default() }).await.unwrap();
    assert!(g.text.contains("walrus report number 3"));
    qmd.close().await.unwrap();
    drop(qmd);

    // Reopen: the registered collections are reused; dropping an extra path removes its collection.
    edit_qmd(&mut cfg, |q| q.paths.clear());
    let qmd = QmdBackend::open(ctx(cfg, &ws, &state), QmdOptions::default()).await.unwrap();
    let names: Vec<String> = qmd.collections().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["memory-root", "memory-dir"]);
    assert!(qmd.search(&SearchRequest::new("walrus")).await.unwrap().results.is_empty());
    assert_eq!(qmd.search(&SearchRequest::new("giraffe")).await.unwrap().results[0].path, "memory/2026-11-02.md");
    // A forced sync rebuilds the collections.
    let rep = qmd.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap();
    assert!(rep.rebuilt);
    assert_eq!(qmd.search(&SearchRequest::new("giraffe")).await.unwrap().results[0].path, "memory/2026-11-02.md");
    qmd.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_boot_update_then_search() {
    let entry = qmd_entry();
    let (tmp, ws) = temp_sample_workspace();
    let mut cfg = config(entry.to_str().unwrap());
    edit_qmd(&mut cfg, |q| q.update.wait_for_boot_sync = false);
    let t = std::time::Instant::now();
    let qmd = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state")), QmdOptions::default()).await.unwrap();
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "open does not wait for the boot update");
    // Until the boot update has registered the collections, search says so (and a FallbackManager answers).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match qmd.search(&SearchRequest::new("giraffe")).await {
            Ok(r) if !r.results.is_empty() => {
                assert_eq!(r.results[0].path, "memory/2026-11-02.md");
                break;
            }
            Ok(_) => {}
            Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}"),
        }
        assert!(std::time::Instant::now() < deadline, "boot update never completed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    qmd.close().await.unwrap();
}

#[test]
fn the_npm_launcher_is_bypassed_for_node22_and_the_js_entry() {
    let entry = std::fs::canonicalize(qmd_entry()).unwrap();
    let install = entry.ancestors().nth(6).unwrap().to_path_buf(); // <dir>/node_modules/@tobilu/qmd/dist/cli/qmd.js
    let node = memory_qmd::locate::find_node22().unwrap();
    for command in [install.join("node_modules/.bin/qmd"), install.join("node_modules/@tobilu/qmd/bin/qmd"), install.clone(), entry.clone()] {
        let inv = memory_qmd::locate::resolve(Some(command.to_str().unwrap())).unwrap();
        assert_eq!(inv.program, node, "{}", command.display());
        assert_eq!(std::fs::canonicalize(&inv.pre_args[0]).unwrap(), entry, "{}", command.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_transcripts_are_searchable_with_jsonl_line_numbers() {
    let entry = qmd_entry();
    let (tmp, ws) = temp_sample_workspace();
    let transcripts = tmp.path().join("transcripts");
    let msg = |role: &str, text: &str| serde_json::json!({"type": "message", "message": {"role": role, "content": text}}).to_string();
    let jsonl = [
        r#"{"type":"session","id":"s1"}"#.to_string(),
        msg("user", "Remind me what we decided about the narwhal exhibit."),
        r#"{"type":"tool_call","name":"lookup"}"#.to_string(),
        r#"{"type":"tool_result","content":"narwhal data"}"#.to_string(),
        msg("assistant", "We agreed the narwhal exhibit opens in June."),
    ]
    .join("\n")
        + "\n";
    write(&transcripts, "s1.jsonl", &jsonl);
    let mut cfg = config(entry.to_str().unwrap());
    cfg.memory.search.sessions_dir = Some(transcripts.to_string_lossy().into());
    edit_qmd(&mut cfg, |q| q.sessions.enabled = true);
    let qmd = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state")), QmdOptions::default()).await.unwrap();
    assert!(qmd.capabilities().sessions);
    assert!(qmd.collections().iter().any(|c| c.name == "sessions"));

    let r = qmd.search(&SearchRequest::new("narwhal exhibit")).await.unwrap();
    let hit = r.results.iter().find(|h| h.path == "sessions/s1.jsonl").expect("transcript hit");
    assert_eq!(hit.source, memory_core::Source::Sessions);
    // The Markdown export has 2 lines (user, assistant); they are JSONL lines 2 and 5.
    assert_eq!((hit.start_line, hit.end_line), (2, 5), "{hit:?}");
    assert!(hit.snippet.contains("Assistant: We agreed the narwhal exhibit opens in June."), "{:?}", hit.snippet);
    assert!(!hit.snippet.contains("narwhal data"), "tool output is not indexed");

    // Sources filter the collections.
    let mut req = SearchRequest::new("narwhal");
    req.sources = vec![memory_core::Source::Memory];
    assert!(qmd.search(&req).await.unwrap().results.is_empty());
    req.sources = vec![memory_core::Source::Sessions];
    assert_eq!(qmd.search(&req).await.unwrap().results.len(), 1);
    req.query = "giraffe".into();
    assert!(qmd.search(&req).await.unwrap().results.is_empty());

    // A transcript that grows is re-exported on update.
    let mut more = jsonl.clone();
    more.push_str(&msg("user", "Also book the walrus keeper talk."));
    more.push('\n');
    write(&transcripts, "s1.jsonl", &more);
    qmd.sync(SyncOptions::default()).await.unwrap();
    let r = qmd.search(&SearchRequest::new("walrus keeper")).await.unwrap();
    assert_eq!(r.results[0].path, "sessions/s1.jsonl");
    assert!(r.results[0].end_line == 6, "{:?}", r.results[0]);
    qmd.close().await.unwrap();
}

/// A reranker that likes passages holding a marker word (deterministic: the test is of the second stage around
/// it, not of a model), or that always runs out of time.
struct MarkerReranker {
    marker: &'static str,
    over_budget: bool,
}

#[async_trait::async_trait]
impl memory_core::rerank::Reranker for MarkerReranker {
    fn id(&self) -> &str {
        "marker"
    }

    async fn score(&self, _query: &str, passages: &[String], _deadline: std::time::Instant) -> Result<Vec<f32>, memory_core::rerank::RerankError> {
        if self.over_budget {
            return Err(memory_core::rerank::RerankError::OverBudget { budget_ms: 1 });
        }
        Ok(passages.iter().map(|p| if p.contains(self.marker) { 5.0 } else { 0.0 }).collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reranker_reorders_qmd_hits_like_the_indexed_engines() {
    // `memory.search.query.rerank` is core's second stage on every engine: QMD's hits too. Four short notes say
    // "canary deploy" twice; the fifth says it once in a longer note, so BM25 ranks it last, outside the two
    // results asked for, and only it names the zebra the reranker looks for.
    let entry = qmd_entry();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    for d in 1..=4 {
        write(&ws, &format!("memory/2026-01-0{d}.md"), &format!("# Day {d}\n\nThe canary deploy went fine; canary deploy number {d}.\n"));
    }
    write(
        &ws,
        "memory/2026-01-05.md",
        "# Day 5\n\nA long day of planning, reviews, hiring loops and a budget meeting that ran over.\nThe canary deploy of the zebra service needs a manual gate.\nLunch was late and the coffee machine broke again.\n",
    );
    // Notes without the words, so that they are rare enough for BM25 to score.
    for (i, topic) in ["garden tomatoes", "piano lessons", "tax forms", "bicycle repair", "museum tickets", "recipe for soup"].iter().enumerate() {
        write(&ws, &format!("memory/notes/n{i}.md"), &format!("# Note\n\nSomething about {topic}.\n"));
    }
    let search = |rr: Option<MarkerReranker>, weight: f64| {
        let (ws, state) = (ws.clone(), tmp.path().join("state"));
        let mut cfg = config(entry.to_str().unwrap());
        cfg.memory.search.query.rerank.enabled = rr.is_some();
        cfg.memory.search.query.rerank.weight = weight;
        async move {
            let reranker = rr.map(|r| std::sync::Arc::new(r) as std::sync::Arc<dyn memory_core::rerank::Reranker>);
            let qmd = QmdBackend::open(ctx(cfg, &ws, &state).with_reranker(reranker), QmdOptions::default()).await.unwrap();
            let mut req = SearchRequest::new("canary deploy");
            req.max_results = Some(2);
            let r = qmd.search(&req).await.unwrap();
            qmd.close().await.unwrap();
            r
        }
    };
    let paths = |r: &memory_core::SearchResponse| r.results.iter().map(|h| h.path.clone()).collect::<Vec<_>>();

    let plain = search(None, 0.5).await;
    assert_eq!(plain.results.len(), 2);
    assert!(!paths(&plain).contains(&"memory/2026-01-05.md".to_string()), "BM25 alone ranks the long note below two: {plain:?}");

    // Weight 1: the reranker's order. The zebra note is read (QMD is asked for the reranker's ten candidates, not
    // the two results) and comes first, with its snippet on the line that matched, and a score in QMD's range.
    let reranked = search(Some(MarkerReranker { marker: "zebra", over_budget: false }), 1.0).await;
    assert_eq!(paths(&reranked)[0], "memory/2026-01-05.md", "{reranked:?}");
    assert!(reranked.results[0].snippet.contains("zebra service"), "{:?}", reranked.results[0].snippet);
    assert!(reranked.results[0].score >= reranked.results[1].score);
    assert!(reranked.results.iter().all(|h| h.score > 0.0 && h.score <= 1.0), "{reranked:?}");
    assert!(reranked.warnings.is_empty(), "{:?}", reranked.warnings);

    // Weight 0: the first stage's order, as without a reranker.
    let kept = search(Some(MarkerReranker { marker: "zebra", over_budget: false }), 0.0).await;
    assert_eq!(paths(&kept), paths(&plain));

    // Over its budget: QMD's order answers, and the agent is told.
    let late = search(Some(MarkerReranker { marker: "zebra", over_budget: true }), 1.0).await;
    assert_eq!(paths(&late), paths(&plain));
    assert!(late.warnings.iter().any(|w| w.contains("budget") && w.contains("not reranked")), "{:?}", late.warnings);
}

/// after/before on QMD's hits: a daily log by its name, a note by its front matter, a transcript's hit by its first
/// message's timestamp; a note that cannot be read to date (over `maxFileBytes`) is left out and said so, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_and_before_date_notes_and_transcripts() {
    let entry = qmd_entry();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    write(&ws, "MEMORY.md", "# Memory\n\nHerons nest by the lake.\n");
    write(&ws, "memory/2026-03-10.md", "# 2026-03-10\n\nThe heron came back to the lake.\n");
    write(&ws, "memory/2026-02-14.md", "# 2026-02-14\n\nA heron stood at the lake all morning.\n");
    write(&ws, "memory/trip.md", "---\ndate: 2026-03-20\n---\n# Trip\n\nWe saw a heron at the lake on the trip.\n");
    write(&ws, "memory/long.md", &format!("# Long\n\nThe heron at the lake, again.\n\n{}\n", "filler words here. ".repeat(40)));
    let transcripts = tmp.path().join("transcripts");
    let msg = |day: &str, text: &str| {
        serde_json::json!({"type": "message", "timestamp": format!("{day}T10:00:00Z"), "message": {"role": "user", "content": text}}).to_string()
    };
    write(&transcripts, "s1.jsonl", &format!("{}\n", msg("2026-03-11", "Did you see the heron at the lake today?")));
    let mut cfg = config(entry.to_str().unwrap());
    cfg.memory.search.sessions_dir = Some(transcripts.to_string_lossy().into());
    cfg.memory.search.max_file_bytes = 500;
    edit_qmd(&mut cfg, |q| q.sessions.enabled = true);
    let qmd = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state")), QmdOptions::default()).await.unwrap();

    let search = |after: Option<&str>, before: Option<&str>| {
        let req = SearchRequest {
            after: after.map(String::from),
            before: before.map(String::from),
            max_results: Some(10),
            ..SearchRequest::new("heron lake")
        };
        let qmd = &qmd;
        async move { qmd.search(&req).await.unwrap() }
    };
    let all = search(None, None).await;
    let paths = |r: &memory_core::SearchResponse| {
        let mut p: Vec<String> = r.results.iter().map(|h| h.path.clone()).collect();
        p.sort();
        p
    };
    assert!(paths(&all).contains(&"memory/long.md".to_string()), "qmd indexes the long note: {all:?}");
    let march = search(Some("2026-03-01"), Some("2026-03-31")).await;
    assert_eq!(paths(&march), ["memory/2026-03-10.md", "memory/trip.md", "sessions/s1.jsonl"], "{march:?}");
    let unreadable: Vec<&String> = march.warnings.iter().filter(|w| w.contains("memory/long.md cannot be read to date it")).collect();
    assert_eq!(unreadable.len(), 1, "said once: {:?}", march.warnings);
    let february = search(None, Some("2026-02-28")).await;
    assert_eq!(paths(&february), ["memory/2026-02-14.md"], "{february:?}");
    let one_day = search(Some("2026-03-11"), Some("2026-03-11")).await;
    assert_eq!(paths(&one_day), ["sessions/s1.jsonl"], "a transcript is of its message's day: {one_day:?}");
    qmd.close().await.unwrap();
}

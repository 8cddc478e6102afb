//! The harness itself: broken engines fail the cases they should, with the case, the expectation and the
//! actual ranking in the output; capability gating skips and says so; known failures are tracked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use conformance::{run_all, run_suites, Outcome, RunOptions, Suite};
use memory_builtin::BuiltinFactory;
use memory_core::registry::{BackendFactory, OpenContext};
use memory_core::{
    Capabilities, GetRequest, GetResponse, MemoryBackend, MemoryError, Result, SearchRequest, SearchResponse, Status, SyncOptions, SyncReport,
};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mutation {
    /// Results in reverse order.
    Reverse,
    /// Only the first sync does anything: later file changes are never indexed.
    FrozenIndex,
    /// Snippets padded past the 700-character cap.
    LongSnippets,
    /// Declares no CJK support.
    NoCjk,
    /// Refusals turned into empty answers.
    NoRefusals,
    /// Citations with wrong line numbers.
    BadCitations,
    /// Explanations whose factors do not give the scores.
    WrongExplanation,
}

struct Mutant {
    inner: Box<dyn MemoryBackend>,
    m: Mutation,
    synced: AtomicBool,
}

#[async_trait]
impl MemoryBackend for Mutant {
    fn name(&self) -> &str {
        "mutant"
    }
    fn capabilities(&self) -> Capabilities {
        let c = self.inner.capabilities();
        // A wrapper that changes the results does not explain them: only the mutant that breaks explanations
        // claims to.
        let c = Capabilities { explain: self.m == Mutation::WrongExplanation, ..c };
        if self.m == Mutation::NoCjk {
            Capabilities { cjk: false, ..c }
        } else {
            c
        }
    }
    async fn search(&self, request: &SearchRequest) -> Result<SearchResponse> {
        let mut r = self.inner.search(request).await?;
        match self.m {
            Mutation::Reverse => r.results.reverse(),
            Mutation::LongSnippets => r.results.iter_mut().for_each(|x| x.snippet = x.snippet.repeat(800)),
            Mutation::BadCitations => r.results.iter_mut().for_each(|x| x.citation = Some(format!("{}#L0", x.path))),
            Mutation::WrongExplanation => {
                if let Some(e) = r.explanation.as_deref_mut() {
                    e.hits.iter_mut().for_each(|h| h.recency += 0.5);
                }
            }
            _ => {}
        }
        Ok(r)
    }
    async fn get(&self, request: &GetRequest) -> Result<GetResponse> {
        match self.inner.get(request).await {
            Err(e) if self.m == Mutation::NoRefusals => {
                let _ = e;
                Ok(GetResponse { path: request.path.clone(), ..Default::default() })
            }
            r => r,
        }
    }
    async fn sync(&self, options: SyncOptions) -> Result<SyncReport> {
        if self.m == Mutation::FrozenIndex && self.synced.swap(true, Ordering::SeqCst) {
            return Ok(SyncReport::default());
        }
        self.inner.sync(options).await
    }
    async fn status(&self) -> Result<Status> {
        let mut s = self.inner.status().await?;
        s.capabilities = self.capabilities();
        Ok(s)
    }
    async fn close(&self) -> Result<()> {
        self.inner.close().await
    }
}

struct MutantFactory(Mutation);

#[async_trait]
impl BackendFactory for MutantFactory {
    async fn open(&self, mut ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
        if self.0 == Mutation::FrozenIndex {
            // Without on-search sync the builtin engine only sees changes through `sync`.
            let mut c = (*ctx.config).clone();
            c.memory.search.sync.on_search = false;
            ctx.config = Arc::new(c);
        }
        Ok(Box::new(Mutant { inner: BuiltinFactory.open(ctx).await?, m: self.0, synced: AtomicBool::new(false) }))
    }
}

fn suites(names: &[&str]) -> Vec<Suite> {
    Suite::builtin_suites().into_iter().filter(|s| names.contains(&s.name.as_str())).collect()
}

async fn run_mutant(m: Mutation, names: &[&str]) -> conformance::Report {
    let mut o = RunOptions::keyword(format!("mutant {m:?}"));
    o.filter = None;
    run_suites(&suites(names), &MutantFactory(m), &o).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reversed_ranking_fails_with_expected_and_actual() {
    let r = run_mutant(Mutation::Reverse, &["basics", "importance"]).await;
    let failed = r.failed();
    for id in ["basics/question-gateway", "basics/exact-path-basename", "importance/importance-orders-equal-notes"] {
        assert!(failed.contains(&id), "{id} should fail: {failed:?}");
    }
    // Sets are order-blind: reversing does not break them.
    assert!(r.passed().contains(&"basics/min-score-zero"));
    let text = r.render(false);
    assert!(text.contains("FAIL basics/question-gateway"), "{text}");
    assert!(text.contains("search \"Where does the gateway run these days"), "{text}");
    assert!(text.contains("expected: {\"first\":\"MEMORY.md\"}"), "{text}");
    assert!(text.contains("actual:\n      1. "), "{text}");
    assert!(!r.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explanations_whose_factors_miss_the_score_fail() {
    let r = run_mutant(Mutation::WrongExplanation, &["basics"]).await;
    assert!(r.failed().contains(&"basics/question-gateway"), "{:?}", r.failed());
    let text = r.render(false);
    assert!(text.contains("explain: MEMORY.md L1: the factors give"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_index_fails_the_sync_cases() {
    let r = run_mutant(Mutation::FrozenIndex, &["sync"]).await;
    let failed = r.failed();
    for id in ["sync/add", "sync/change", "sync/delete", "sync/rename", "sync/many-changes-at-once"] {
        assert!(failed.contains(&id), "{id} should fail: {failed:?}");
    }
    let text = r.render(false);
    assert!(text.contains("at step 3 of 4"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invariants_catch_long_snippets_and_bad_citations() {
    let r = run_mutant(Mutation::LongSnippets, &["basics"]).await;
    assert!(r.failed().contains(&"basics/question-gateway"));
    assert!(r.render(false).contains("the cap is 700"));
    let r = run_mutant(Mutation::BadCitations, &["basics"]).await;
    assert!(r.failed().contains(&"basics/citations-auto"));
    assert!(r.render(false).contains("does not match the result"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_checked() {
    let r = run_mutant(Mutation::NoRefusals, &["basics"]).await;
    let failed = r.failed();
    for id in ["basics/get-refuse-parent", "basics/get-refuse-symlink", "basics/get-refuse-non-markdown", "basics/get-empty-path"] {
        assert!(failed.contains(&id), "{id} should fail: {failed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_capabilities_skip_and_say_so() {
    let r = run_mutant(Mutation::NoCjk, &["cjk"]).await;
    assert!(r.is_ok());
    assert!(r.passed().is_empty());
    assert_eq!(r.skipped().len(), suites(&["cjk"])[0].manifest.cases.len());
    let text = r.render(false);
    assert!(text.contains("SKIP cjk/zh-two-char-coffee: the engine does not declare cjk"), "{text}");
    assert!(r.summary().contains("skipped (no cjk: "), "{}", r.summary());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_failures_are_tracked_both_ways() {
    let o = RunOptions::keyword("reverse, declared")
        .known_failure("importance/importance-orders-equal-notes", "reversed on purpose")
        .known_failure("importance/importance-compact-syntax", "reversed on purpose")
        .known_failure("importance/importance-first", "reversed on purpose");
    let r = run_suites(&suites(&["importance"]), &MutantFactory(Mutation::Reverse), &o).await;
    assert!(r.is_ok(), "{}", r.render(false));
    assert_eq!(r.known_failures().len(), 3);

    // A declared failure that passes fails the run, so stale declarations get removed.
    let o = RunOptions::keyword("builtin, stale declaration").known_failure("importance/importance-first", "was broken");
    let r = run_suites(&suites(&["importance"]), &BuiltinFactory, &o).await;
    assert!(!r.is_ok());
    assert!(matches!(r.cases.iter().find(|c| c.id == "importance/importance-first").unwrap().outcome, Outcome::UnexpectedPass { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authors_can_load_their_own_suites() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("mine");
    std::fs::create_dir_all(suite.join("workspace/memory")).unwrap();
    std::fs::write(suite.join("workspace/memory/{{date:-2}}.md"), "Walked the dog at dawn.\n").unwrap();
    std::fs::write(
        suite.join("cases.json5"),
        "{cases: [{id: 'dog', search: {query: 'dog'}, expect: {first: 'memory/{{date:-2}}.md'}},\n\
         {id: 'wrong', search: {query: 'dog'}, expect: {first: 'MEMORY.md'}}]}",
    )
    .unwrap();
    let suites = Suite::load_all(dir.path()).unwrap();
    let r = run_suites(&suites, &BuiltinFactory, &RunOptions::keyword("custom")).await;
    assert_eq!(r.passed(), vec!["mine/dog"]);
    assert_eq!(r.failed(), vec!["mine/wrong"]);

    std::fs::write(suite.join("cases.json5"), "{cases: [{id: 'a', status: {}}, {id: 'a', status: {}}]}").unwrap();
    assert!(Suite::load(&suite).unwrap_err().contains("duplicate case id `a`"));
    std::fs::write(suite.join("cases.json5"), "{cases: [{id: 'a', search: {query: 'x', maxResult: 3}}]}").unwrap();
    assert!(Suite::load(&suite).unwrap_err().contains("maxResult"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_factory_error_fails_every_case_of_the_group() {
    struct Broken;
    #[async_trait]
    impl BackendFactory for Broken {
        async fn open(&self, _ctx: OpenContext) -> Result<Box<dyn MemoryBackend>> {
            Err(MemoryError::Unavailable("qmd: command not found".into()))
        }
    }
    let r = run_all(&Broken, &RunOptions::keyword("broken")).await;
    assert!(r.passed().is_empty());
    assert!(r.render(false).contains("the factory failed to open the engine: qmd: command not found"));
}

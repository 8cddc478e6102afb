//! Running suites against an engine factory.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memory_contract::embedding::EmbeddingProvider;
use memory_contract::registry::{BackendFactory, OpenContext};
use memory_contract::{Capabilities, Config, MemoryBackend, SearchRequest, SyncOptions};
use serde_json::Value;

use crate::check;
use crate::fixture::{resolve_dates, write_file, Action, Capability, Case, Expect, Step, Suite};

/// How to run the suites against one engine.
#[derive(Clone)]
pub struct RunOptions {
    /// Name of this run in the output (`builtin keyword-only`, `lancedb hybrid`...).
    pub label: String,
    /// Handed to the factory in `OpenContext::embedder`; `None` for keyword-only.
    pub embedder: Option<Arc<dyn EmbeddingProvider>>,
    /// Only cases whose `suite/case` id contains this text (also from env `CONFORMANCE_FILTER`).
    pub filter: Option<String>,
    /// Cases known to fail, `suite/case` -> reason (an issue link or diagnosis). They are reported as known
    /// failures and do not fail the run; if one passes, the run fails so the entry gets removed.
    pub known_failures: BTreeMap<String, String>,
    /// Print passing cases too (always printed: skips with their reason, failures in full, the summary).
    pub verbose: bool,
    /// `OpenContext::agent_id`.
    pub agent_id: String,
}

impl RunOptions {
    /// A keyword-only run: no embedder is given to the engine.
    pub fn keyword(label: impl Into<String>) -> RunOptions {
        RunOptions {
            label: label.into(),
            embedder: None,
            filter: std::env::var("CONFORMANCE_FILTER").ok().filter(|s| !s.is_empty()),
            known_failures: BTreeMap::new(),
            verbose: std::env::var_os("CONFORMANCE_VERBOSE").is_some(),
            agent_id: "conformance".into(),
        }
    }

    /// A run with the deterministic [`crate::LexiconEmbedder`] the vector cases are written for.
    pub fn hybrid(label: impl Into<String>) -> RunOptions {
        RunOptions::keyword(label).with_embedder(Arc::new(crate::LexiconEmbedder::standard()))
    }

    /// A run with a given embedding provider (a real model, say).
    pub fn with_embedder(mut self, embedder: Arc<dyn EmbeddingProvider>) -> RunOptions {
        self.embedder = Some(embedder);
        self
    }

    /// Declare a case (`suite/case`) as failing for a known, reported reason.
    pub fn known_failure(mut self, id: impl Into<String>, reason: impl Into<String>) -> RunOptions {
        self.known_failures.insert(id.into(), reason.into());
        self
    }
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every expectation held.
    Passed,
    /// The engine lacks these capabilities.
    Skipped {
        /// The capabilities' names.
        missing: Vec<&'static str>,
    },
    /// An expectation did not hold.
    Failed {
        /// What was expected and what came, for the report.
        details: String,
    },
    /// Failed, as declared in [`RunOptions::known_failures`].
    KnownFailure {
        /// Why it is known to fail (the declaration's words).
        reason: String,
        /// What was expected and what came.
        details: String,
    },
    /// Declared as a known failure but passed: the declaration is stale.
    UnexpectedPass {
        /// The declaration's words.
        reason: String,
    },
}

/// One case and how it ended.
#[derive(Debug, Clone)]
pub struct CaseOutcome {
    /// `suite/case`.
    pub id: String,
    /// What the case checks (its `about`).
    pub about: String,
    /// How it ended.
    pub outcome: Outcome,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The run's name (`builtin keyword-only`).
    pub label: String,
    /// Capabilities the engine declared (from the first engine opened).
    pub capabilities: Option<Capabilities>,
    /// Every case, in run order.
    pub cases: Vec<CaseOutcome>,
}

impl Report {
    fn ids(&self, f: impl Fn(&Outcome) -> bool) -> Vec<&str> {
        self.cases.iter().filter(|c| f(&c.outcome)).map(|c| c.id.as_str()).collect()
    }
    /// The ids of the cases that passed.
    pub fn passed(&self) -> Vec<&str> {
        self.ids(|o| *o == Outcome::Passed)
    }
    /// The ids of the cases skipped for a capability the engine lacks.
    pub fn skipped(&self) -> Vec<&str> {
        self.ids(|o| matches!(o, Outcome::Skipped { .. }))
    }
    /// The ids of the cases that failed (a known failure that passed counts: its declaration is stale).
    pub fn failed(&self) -> Vec<&str> {
        self.ids(|o| matches!(o, Outcome::Failed { .. } | Outcome::UnexpectedPass { .. }))
    }
    /// The ids of the cases that failed as declared.
    pub fn known_failures(&self) -> Vec<&str> {
        self.ids(|o| matches!(o, Outcome::KnownFailure { .. }))
    }
    /// No case failed.
    pub fn is_ok(&self) -> bool {
        self.failed().is_empty()
    }

    /// One line: `builtin keyword-only: 50 passed, 8 skipped (vector), 0 failed`.
    pub fn summary(&self) -> String {
        let mut missing: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &self.cases {
            if let Outcome::Skipped { missing: m } = &c.outcome {
                for x in m {
                    *missing.entry(x).or_default() += 1;
                }
            }
        }
        let why = if missing.is_empty() {
            String::new()
        } else {
            format!(" (no {})", missing.iter().map(|(k, n)| format!("{k}: {n}")).collect::<Vec<_>>().join(", "))
        };
        let mut s = format!(
            "conformance [{}]: {} cases, {} passed, {} skipped{why}, {} failed",
            self.label,
            self.cases.len(),
            self.passed().len(),
            self.skipped().len(),
            self.failed().len()
        );
        if !self.known_failures().is_empty() {
            s.push_str(&format!(", {} known failures", self.known_failures().len()));
        }
        s
    }

    /// The full report: skips with reasons, failures with details, then the summary.
    pub fn render(&self, verbose: bool) -> String {
        let mut s = String::new();
        if let Some(c) = &self.capabilities {
            let _ = writeln!(s, "conformance [{}]: engine declares {}", self.label, Capability::all_declared(c).join(", "));
        }
        for c in &self.cases {
            match &c.outcome {
                Outcome::Passed if verbose => {
                    let _ = writeln!(s, "  PASS {}", c.id);
                }
                Outcome::Passed => {}
                Outcome::Skipped { missing } => {
                    let _ = writeln!(s, "  SKIP {}: the engine does not declare {}", c.id, missing.join(", "));
                }
                Outcome::Failed { details } => {
                    let _ = writeln!(s, "  FAIL {} ({})\n{details}", c.id, c.about);
                }
                Outcome::KnownFailure { reason, details } => {
                    let _ = writeln!(s, "  KNOWN FAILURE {}: {reason}\n{details}", c.id);
                }
                Outcome::UnexpectedPass { reason } => {
                    let _ = writeln!(s, "  FAIL {}: declared a known failure ({reason}) but it passes; remove the declaration", c.id);
                }
            }
        }
        s.push_str(&self.summary());
        s.push('\n');
        s
    }

    /// Print the report and panic if any case failed.
    pub fn assert_ok(&self) {
        eprint!("{}", self.render(std::env::var_os("CONFORMANCE_VERBOSE").is_some()));
        if !self.is_ok() {
            panic!("{} conformance case(s) failed: {}", self.failed().len(), self.failed().join(", "));
        }
    }
}

/// Run every suite shipped with this crate against an engine.
pub async fn run_all(factory: &dyn BackendFactory, options: &RunOptions) -> Report {
    run_suites(&Suite::builtin_suites(), factory, options).await
}

/// Run one suite.
pub async fn run(suite: &Suite, factory: &dyn BackendFactory, options: &RunOptions) -> Report {
    run_suites(std::slice::from_ref(suite), factory, options).await
}

/// Run suites. Each group of read-only cases with the same config shares one engine on one workspace; a case
/// that changes files gets a workspace and an engine of its own.
pub async fn run_suites(suites: &[Suite], factory: &dyn BackendFactory, options: &RunOptions) -> Report {
    let mut report = Report { label: options.label.clone(), capabilities: None, cases: Vec::new() };
    for suite in suites {
        run_suite(suite, factory, options, &mut report).await;
    }
    report
}

struct Planned<'a> {
    case: &'a Case,
    id: String,
    config: Result<Value, String>,
}

async fn run_suite(suite: &Suite, factory: &dyn BackendFactory, options: &RunOptions, report: &mut Report) {
    let mut groups: Vec<(String, Vec<Planned>)> = Vec::new();
    for case in &suite.manifest.cases {
        let id = format!("{}/{}", suite.name, case.id);
        if options.filter.as_deref().is_some_and(|f| !id.contains(f)) {
            continue;
        }
        let config = effective_config(suite.manifest.config.as_ref(), case.config.as_ref());
        let key =
            if case.mutates() { format!("own:{id}") } else { config.as_ref().map_or_else(|e| format!("bad:{e}"), std::string::ToString::to_string) };
        let planned = Planned { case, id, config };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(planned),
            None => groups.push((key, vec![planned])),
        }
    }
    for (_, group) in groups {
        run_group(suite, group, factory, options, report).await;
    }
}

/// Suite config with the case's config merged over it, key by key.
fn effective_config(suite: Option<&Value>, case: Option<&Value>) -> Result<Value, String> {
    let mut v = suite.cloned().unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(c) = case {
        merge(&mut v, c.clone());
    }
    // Parse now so a broken fixture config is reported on the case.
    Config::from_value(v.clone()).map_err(|e| format!("fixture config: {e}"))?;
    Ok(v)
}

fn merge(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                match b.get_mut(&k) {
                    Some(old) => merge(old, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, t) => *b = t,
    }
}

/// A temporary workspace and state folder for one engine.
struct Sandbox {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    state: PathBuf,
}

impl Sandbox {
    fn new(suite: &Suite) -> Result<Sandbox, String> {
        let dir = tempfile::Builder::new().prefix("conformance-").tempdir().map_err(|e| format!("temp dir: {e}"))?;
        // Canonical, so engines that resolve real paths report the same workspace.
        let root = std::fs::canonicalize(dir.path()).map_err(|e| format!("temp dir: {e}"))?;
        let workspace = root.join("workspace");
        let state = root.join("state");
        std::fs::create_dir_all(&workspace).and_then(|_| std::fs::create_dir_all(&state)).map_err(|e| format!("temp dir: {e}"))?;
        suite.materialize(&workspace).map_err(|e| format!("cannot write the fixture workspace: {e}"))?;
        Ok(Sandbox { _dir: dir, workspace, state })
    }
}

fn push(report: &mut Report, options: &RunOptions, p: &Planned, outcome: Outcome) {
    let outcome = match (outcome, options.known_failures.get(&p.id)) {
        (Outcome::Failed { details }, Some(reason)) => Outcome::KnownFailure { reason: reason.clone(), details },
        (Outcome::Passed, Some(reason)) => Outcome::UnexpectedPass { reason: reason.clone() },
        (o, _) => o,
    };
    report.cases.push(CaseOutcome { id: p.id.clone(), about: p.case.about.clone(), outcome });
}

async fn run_group(suite: &Suite, group: Vec<Planned<'_>>, factory: &dyn BackendFactory, options: &RunOptions, report: &mut Report) {
    let config_value = match &group[0].config {
        Ok(v) => v.clone(),
        Err(e) => {
            for p in &group {
                push(report, options, p, Outcome::Failed { details: format!("    {e}\n") });
            }
            return;
        }
    };
    let config = Config::from_value(config_value).expect("checked in effective_config");
    let sandbox = match Sandbox::new(suite) {
        Ok(s) => s,
        Err(e) => {
            for p in &group {
                push(report, options, p, Outcome::Failed { details: format!("    {e}\n") });
            }
            return;
        }
    };
    let ctx = OpenContext::new(Arc::new(config.clone()), sandbox.workspace.clone(), sandbox.state.clone(), &options.agent_id)
        .with_embedder(options.embedder.clone());
    let engine = match factory.open(ctx).await {
        Ok(e) => e,
        Err(e) => {
            for p in &group {
                push(report, options, p, Outcome::Failed { details: format!("    the factory failed to open the engine: {e}\n") });
            }
            return;
        }
    };
    let caps = engine.capabilities();
    report.capabilities.get_or_insert(caps);
    let mut synced = false;
    for p in &group {
        let mut needs: Vec<Capability> = suite.manifest.requires.clone();
        needs.extend(p.case.requires.iter().copied());
        needs.sort();
        needs.dedup();
        let missing: Vec<&'static str> = needs.iter().filter(|c| !c.declared_by(&caps)).map(|c| c.name()).collect();
        if !missing.is_empty() {
            push(report, options, p, Outcome::Skipped { missing });
            continue;
        }
        if !synced {
            if let Err(e) = engine.sync(SyncOptions::default()).await {
                push(report, options, p, Outcome::Failed { details: format!("    the first sync failed: {e}\n") });
                continue;
            }
            synced = true;
        }
        let steps = p.case.steps().expect("validated when loaded");
        let outcome = match run_steps(engine.as_ref(), &steps, &sandbox.workspace, &config, &caps).await {
            Ok(()) => Outcome::Passed,
            Err(details) => Outcome::Failed { details },
        };
        push(report, options, p, outcome);
    }
    let _ = engine.close().await;
}

/// Run a case's steps; on the first failing step, the failure text.
async fn run_steps(engine: &dyn MemoryBackend, steps: &[Step], ws: &Path, config: &Config, caps: &Capabilities) -> Result<(), String> {
    let mut pending_sync = false;
    for (i, step) in steps.iter().enumerate() {
        let action = step.action().expect("validated when loaded");
        let failures = run_step(engine, step, &action, ws, config, caps, &mut pending_sync).await;
        if let Err(lines) = failures {
            let mut s = String::new();
            if steps.len() > 1 {
                let _ = writeln!(s, "    at step {} of {}", i + 1, steps.len());
            }
            s.push_str(&lines);
            return Err(s);
        }
    }
    Ok(())
}

fn fail(what: String, expect: Option<&Expect>, failures: &[String], actual: String) -> Result<(), String> {
    if failures.is_empty() {
        return Ok(());
    }
    let mut s = format!("    {what}\n");
    if let Some(e) = expect {
        let _ = writeln!(s, "    expected: {}", serde_json::to_string(e).unwrap_or_default());
    }
    for f in failures {
        let _ = writeln!(s, "    - {f}");
    }
    let _ = write!(s, "    actual:\n{actual}");
    Err(s)
}

async fn run_step(
    engine: &dyn MemoryBackend,
    step: &Step,
    action: &Action,
    ws: &Path,
    config: &Config,
    caps: &Capabilities,
    pending_sync: &mut bool,
) -> Result<(), String> {
    let io = |what: &str, e: std::io::Error| format!("    {what}: {e}\n");
    if action.changes_files() {
        match action {
            Action::Write { path, text } => write_file(ws, &resolve_dates(path), &resolve_dates(text)).map_err(|e| io("write", e))?,
            Action::Delete { path } => std::fs::remove_file(ws.join(resolve_dates(path))).map_err(|e| io("delete", e))?,
            Action::Rename { from, to } => {
                let to = ws.join(resolve_dates(to));
                if let Some(d) = to.parent() {
                    std::fs::create_dir_all(d).map_err(|e| io("rename", e))?;
                }
                std::fs::rename(ws.join(resolve_dates(from)), &to).map_err(|e| io("rename", e))?;
            }
            _ => unreachable!(),
        }
        *pending_sync = !step.no_auto_sync;
        return Ok(());
    }
    if let Action::Sync { force } = action {
        *pending_sync = false;
        return match engine.sync(SyncOptions { force: *force, ..SyncOptions::default() }).await {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("    sync failed: {e}\n")),
        };
    }
    if *pending_sync {
        *pending_sync = false;
        engine.sync(SyncOptions::default()).await.map_err(|e| format!("    sync after the file changes failed: {e}\n"))?;
    }
    let expect = step.expect.as_ref();
    let want_error = expect.and_then(|e| e.error.as_ref());
    match action {
        Action::Search(req) => {
            let what = format!(
                "search {:?}{}{}",
                req.query,
                req.max_results.map(|n| format!(" maxResults={n}")).unwrap_or_default(),
                req.min_score.map(|n| format!(" minScore={n}")).unwrap_or_default()
            );
            match (engine.search(req).await, want_error) {
                (Ok(resp), None) => {
                    let mut f = check::search_invariants(req, config.memory.search.query.max_results, &resp, ws);
                    if let Some(e) = expect {
                        f.extend(check::check_search(e, &resp));
                    }
                    // Every search an engine that explains answers is asked once more with `explain`: the same
                    // results, each accounted for by factors that give its score.
                    if engine.capabilities().explain && !req.explains() {
                        match engine.search(&SearchRequest { explain: true, ..req.clone() }).await {
                            Ok(explained) => f.extend(check::explanation_invariants(&resp, &explained)),
                            Err(e) => f.push(format!("the same search with explain failed: {e}")),
                        }
                    }
                    fail(what, expect, &f, check::describe_results(&resp))
                }
                (Ok(resp), Some(_)) => fail(what, expect, &["expected an error, got results".into()], check::describe_results(&resp)),
                (Err(err), Some(want)) => fail(what, expect, &check::check_error(want, &err), format!("      error: {err}\n")),
                (Err(err), None) => fail(what, expect, &[format!("unexpected error ({})", check::kind_name(&err))], format!("      error: {err}\n")),
            }
        }
        Action::Get(req) => {
            let what = format!(
                "get {:?}{}{}",
                req.path,
                req.from.map(|n| format!(" from={n}")).unwrap_or_default(),
                req.lines.map(|n| format!(" lines={n}")).unwrap_or_default()
            );
            match (engine.get(req).await, want_error) {
                (Ok(r), None) => {
                    let mut f = check::get_invariants(&r);
                    if let Some(e) = expect {
                        f.extend(check::check_get(e, &r));
                    }
                    fail(what, expect, &f, format!("      {}\n", serde_json::to_string(&r).unwrap_or_default()))
                }
                (Ok(r), Some(_)) => {
                    fail(what, expect, &["expected an error, got text".into()], format!("      {}\n", serde_json::to_string(&r).unwrap_or_default()))
                }
                (Err(err), Some(want)) => fail(what, expect, &check::check_error(want, &err), format!("      error: {err}\n")),
                (Err(err), None) => fail(what, expect, &[format!("unexpected error ({})", check::kind_name(&err))], format!("      error: {err}\n")),
            }
        }
        Action::Status => match engine.status().await {
            Ok(s) => {
                let mut f = check::status_invariants(&s, caps);
                if let Some(e) = expect {
                    f.extend(check::check_status(e, &s));
                }
                fail("status".into(), expect, &f, format!("      {}\n", serde_json::to_string(&s).unwrap_or_default()))
            }
            Err(err) => fail("status".into(), expect, &[format!("status failed ({})", check::kind_name(&err))], format!("      error: {err}\n")),
        },
        _ => unreachable!(),
    }
}

//! The fixture format: a suite is a folder holding `cases.json5` and a `workspace/` of Markdown notes.
//!
//! ```text
//! fixtures/<suite>/cases.json5
//! fixtures/<suite>/workspace/MEMORY.md
//! fixtures/<suite>/workspace/memory/2026-11-28.md
//! ```
//!
//! File names and file contents may use date templates, resolved against today's date (UTC) when the
//! workspace is written: `{{date:-3}}` is the date three days ago as `YYYY-MM-DD`, `{{date:0}}` today (file
//! names spell it `{{date=-3}}`, which Windows and crates.io allow).
//! See `docs/write-your-own-backend.md` for the whole format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use memory_contract::{GetRequest, SearchRequest};

/// A loaded suite: its cases and the files of its workspace.
#[derive(Debug, Clone)]
pub struct Suite {
    /// Its folder's name (`basics`).
    pub name: String,
    /// Its `cases.json5`.
    pub manifest: Manifest,
    /// Workspace files (relative path with `/`, content), templates not yet resolved.
    pub files: BTreeMap<String, String>,
}

/// `cases.json5`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    /// What the suite is about.
    #[serde(default)]
    pub about: String,
    /// Config (the JSON5 tree of an OpenClaw/memory-rs config) shared by every case of the suite.
    #[serde(default)]
    pub config: Option<Value>,
    /// Capabilities every case of the suite needs (added to each case's own).
    #[serde(default)]
    pub requires: Vec<Capability>,
    /// More workspace files given inline (for paths git cannot hold, such as `memory/.git/x.md`).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Symbolic links to create in the workspace: link path -> target (as written into the link).
    #[serde(default)]
    pub links: BTreeMap<String, String>,
    /// The cases, run in order.
    pub cases: Vec<Case>,
}

/// A capability a case needs; the names are those of `memory_contract::Capabilities` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Capability {
    /// [`memory_contract::Capabilities::keyword`].
    Keyword,
    /// [`memory_contract::Capabilities::vector`].
    Vector,
    /// [`memory_contract::Capabilities::hybrid`].
    Hybrid,
    /// [`memory_contract::Capabilities::persistent`].
    Persistent,
    /// [`memory_contract::Capabilities::shared_ranking`].
    SharedRanking,
    /// [`memory_contract::Capabilities::cjk`].
    Cjk,
    /// [`memory_contract::Capabilities::sessions`].
    Sessions,
    /// [`memory_contract::Capabilities::explain`].
    Explain,
}

impl Capability {
    /// Its name in case files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Keyword => "keyword",
            Capability::Vector => "vector",
            Capability::Hybrid => "hybrid",
            Capability::Persistent => "persistent",
            Capability::SharedRanking => "sharedRanking",
            Capability::Cjk => "cjk",
            Capability::Sessions => "sessions",
            Capability::Explain => "explain",
        }
    }

    /// Whether an engine declaring `c` has it.
    pub fn declared_by(self, c: &memory_contract::Capabilities) -> bool {
        match self {
            Capability::Keyword => c.keyword,
            Capability::Vector => c.vector,
            Capability::Hybrid => c.hybrid,
            Capability::Persistent => c.persistent,
            Capability::SharedRanking => c.shared_ranking,
            Capability::Cjk => c.cjk,
            Capability::Sessions => c.sessions,
            Capability::Explain => c.explain,
        }
    }

    /// Every capability an engine declares, by name.
    pub fn all_declared(c: &memory_contract::Capabilities) -> Vec<&'static str> {
        use Capability::*;
        [Keyword, Vector, Hybrid, Persistent, SharedRanking, Cjk, Sessions, Explain]
            .into_iter()
            .filter(|x| x.declared_by(c))
            .map(Capability::name)
            .collect()
    }
}

/// One case: either a single action (`search`, `get` or `status`) with `expect`, or a list of `steps`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    /// Unique within its suite; reports name it `suite/id`.
    pub id: String,
    /// What it checks, in words.
    #[serde(default)]
    pub about: String,
    /// Capabilities it needs beside the suite's: an engine without them skips it, and the report says so.
    #[serde(default)]
    pub requires: Vec<Capability>,
    /// Config merged over the suite's config (key by key).
    #[serde(default)]
    pub config: Option<Value>,
    /// A search to run (the request as every wire carries it).
    #[serde(default)]
    pub search: Option<SearchRequest>,
    /// A `memory_get` to run.
    #[serde(default)]
    pub get: Option<GetRequest>,
    /// Ask for the engine's status (`{}`).
    #[serde(default)]
    pub status: Option<Value>,
    /// What the action must produce.
    #[serde(default)]
    pub expect: Option<Expect>,
    /// A scenario instead of one action: its steps, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
}

/// One step of a scenario. Exactly one action per step.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    /// Write (create or replace) a workspace file with `text`.
    #[serde(default)]
    pub write: Option<String>,
    /// The text a `write` step writes.
    #[serde(default)]
    pub text: Option<String>,
    /// Delete a workspace file.
    #[serde(default)]
    pub delete: Option<String>,
    /// Rename a workspace file to `to`.
    #[serde(default)]
    pub rename: Option<String>,
    /// The new name of a `rename` step.
    #[serde(default)]
    pub to: Option<String>,
    /// Call `sync` (`{}` or `{force: true}`). The harness also syncs before the first query and after file
    /// changes, unless `noAutoSync` is set on a file step.
    #[serde(default)]
    pub sync: Option<SyncStep>,
    /// On a file step: no sync after it (the next search must see the change by itself).
    #[serde(default)]
    pub no_auto_sync: bool,
    /// A search.
    #[serde(default)]
    pub search: Option<SearchRequest>,
    /// A `memory_get`.
    #[serde(default)]
    pub get: Option<GetRequest>,
    /// The engine's status (`{}`).
    #[serde(default)]
    pub status: Option<Value>,
    /// What the step must produce.
    #[serde(default)]
    pub expect: Option<Expect>,
}

/// A `sync` step's options.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncStep {
    /// Rebuild everything.
    #[serde(default)]
    pub force: bool,
}

/// What a step must produce. Ranking expectations look at result paths only (distinct, in order of first
/// appearance), never at raw scores: engines score on different scales.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    // --- search ---
    /// The top result's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
    /// The ranking starts with exactly these paths, in this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top: Option<Vec<String>>,
    /// Pairs `[a, b]`: both present, `a` ranked above `b`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<(String, String)>,
    /// Each of these paths is among the first `n` distinct paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<Within>,
    /// These paths appear somewhere in the results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<String>,
    /// None of these paths appears.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excludes: Vec<String>,
    /// The set of distinct result paths is exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<Vec<String>>,
    /// `true`: no results; `false`: at least one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty: Option<bool>,
    /// At most this many results (snippets, not paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_count: Option<usize>,
    /// The first result's snippet contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet_contains: Option<String>,
    /// No result's snippet contains this text (old text gone after a change or delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_snippet_contains: Option<String>,
    /// Citations: `"present"` (every result has `path#L..` matching its lines), `"sourceLine"` (also a
    /// `Source:` line ending the snippet) or `"absent"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations: Option<String>,

    // --- get ---
    /// The text read is exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The text read contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_contains: Option<String>,
    /// The answer names this path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The first line read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<usize>,
    /// How many lines were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<usize>,
    /// The file's lines in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<usize>,
    /// The file does not exist yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<bool>,
    /// More text follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// The answer's note contains this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note_contains: Option<String>,

    // --- status ---
    /// Files indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
    /// At least this many chunks indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks_at_least: Option<usize>,
    /// Whether files changed since the last sync.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,

    // --- any ---
    /// The call fails with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExpectError>,
}

/// `within`: each of `paths` among the first `n` distinct result paths.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Within {
    /// How many distinct paths are looked at.
    pub n: usize,
    /// The paths that must be among them.
    pub paths: Vec<String>,
}

/// `error`: the call fails, of this kind.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectError {
    /// `refused`, `invalid_input`, `not_found`, `unavailable`... (`memory_contract::ErrorKind` in snake_case).
    pub kind: String,
    /// Every one of these strings appears in the error message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contains: Vec<String>,
}

/// What a step does, after validation.
#[derive(Debug, Clone)]
pub enum Action {
    /// Write a workspace file.
    Write {
        /// Workspace-relative, with `/`.
        path: String,
        /// Its new content (date templates such as `{{date:-1}}` are resolved when it is written).
        text: String,
    },
    /// Delete a workspace file.
    Delete {
        /// Workspace-relative, with `/`.
        path: String,
    },
    /// Rename a workspace file.
    Rename {
        /// Its name now.
        from: String,
        /// Its new name.
        to: String,
    },
    /// Call `sync`.
    Sync {
        /// Rebuild everything.
        force: bool,
    },
    /// Call `search`.
    Search(SearchRequest),
    /// Call `get`.
    Get(GetRequest),
    /// Call `status`.
    Status,
}

impl Action {
    /// It writes, deletes or renames a file (the harness syncs after it unless told not to).
    pub fn changes_files(&self) -> bool {
        matches!(self, Action::Write { .. } | Action::Delete { .. } | Action::Rename { .. })
    }
}

impl Step {
    /// The one action of this step.
    pub fn action(&self) -> Result<Action, String> {
        let mut found = Vec::new();
        if let Some(p) = &self.write {
            let text = self.text.clone().ok_or("a `write` step needs `text`")?;
            found.push(Action::Write { path: p.clone(), text });
        }
        if let Some(p) = &self.delete {
            found.push(Action::Delete { path: p.clone() });
        }
        if let Some(p) = &self.rename {
            let to = self.to.clone().ok_or("a `rename` step needs `to`")?;
            found.push(Action::Rename { from: p.clone(), to });
        }
        if let Some(s) = self.sync {
            found.push(Action::Sync { force: s.force });
        }
        if let Some(s) = &self.search {
            found.push(Action::Search(s.clone()));
        }
        if let Some(g) = &self.get {
            found.push(Action::Get(g.clone()));
        }
        if self.status.is_some() {
            found.push(Action::Status);
        }
        match found.len() {
            1 => Ok(found.pop().unwrap()),
            0 => Err("a step needs one of write, delete, rename, sync, search, get, status".into()),
            _ => Err("a step has more than one action".into()),
        }
    }
}

impl Case {
    /// The case as a list of steps (a single-action case is one step).
    pub fn steps(&self) -> Result<Vec<Step>, String> {
        let single = self.search.is_some() || self.get.is_some() || self.status.is_some();
        if single && !self.steps.is_empty() {
            return Err(format!("case `{}`: use either a single action or `steps`, not both", self.id));
        }
        if single {
            let step = Step {
                search: self.search.clone(),
                get: self.get.clone(),
                status: self.status.clone(),
                expect: self.expect.clone(),
                ..Default::default()
            };
            step.action().map_err(|e| format!("case `{}`: {e}", self.id))?;
            return Ok(vec![step]);
        }
        if self.steps.is_empty() {
            return Err(format!("case `{}` has no action", self.id));
        }
        if self.expect.is_some() {
            return Err(format!("case `{}`: with `steps`, put `expect` on the steps", self.id));
        }
        for (i, s) in self.steps.iter().enumerate() {
            s.action().map_err(|e| format!("case `{}` step {}: {e}", self.id, i + 1))?;
        }
        Ok(self.steps.clone())
    }

    /// True when the case changes workspace files (it then gets a workspace and engine of its own).
    pub fn mutates(&self) -> bool {
        self.steps.iter().any(|s| s.action().is_ok_and(|a| a.changes_files()))
    }
}

impl Suite {
    /// Load a suite folder (`cases.json5` + `workspace/`).
    pub fn load(dir: &Path) -> Result<Suite, String> {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let manifest_path = dir.join("cases.json5");
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        // Date templates resolve everywhere in the manifest: file names in expectations, written texts...
        let text = resolve_dates(&text);
        let manifest: Manifest = json5::from_str(&text).map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        let mut ids = std::collections::HashSet::new();
        for c in &manifest.cases {
            if !ids.insert(c.id.clone()) {
                return Err(format!("{}: duplicate case id `{}`", manifest_path.display(), c.id));
            }
            c.steps().map_err(|e| format!("{}: {e}", manifest_path.display()))?;
        }
        let mut files = BTreeMap::new();
        let ws = dir.join("workspace");
        if ws.is_dir() {
            read_tree(&ws, &ws, &mut files)?;
        }
        for (k, v) in &manifest.files {
            files.insert(k.clone(), v.clone());
        }
        Ok(Suite { name, manifest, files })
    }

    /// Load every suite under `dir` (each sub-folder with a `cases.json5`), sorted by name.
    pub fn load_all(dir: &Path) -> Result<Vec<Suite>, String> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("cases.json5").is_file())
            .collect();
        dirs.sort();
        dirs.iter().map(|d| Suite::load(d)).collect()
    }

    /// The suites shipped with this crate.
    pub fn builtin_suites() -> Vec<Suite> {
        Suite::load_all(&fixtures_dir()).unwrap_or_else(|e| panic!("conformance fixtures are broken: {e}"))
    }

    /// Ids (`suite/case`) of the shipped cases that need capability `cap` (by the suite or the case itself),
    /// sorted: what an engine that does not declare it must report as skipped.
    pub fn builtin_cases_requiring(cap: &str) -> Vec<String> {
        let mut out = Vec::new();
        for s in Suite::builtin_suites() {
            for c in &s.manifest.cases {
                if s.manifest.requires.iter().chain(&c.requires).any(|r| r.name() == cap) {
                    out.push(format!("{}/{}", s.name, c.id));
                }
            }
        }
        out.sort();
        out
    }

    /// Write the workspace into `root` (which must exist): files with dates resolved, then links.
    pub fn materialize(&self, root: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(root.join("memory"))?;
        for (rel, text) in &self.files {
            write_file(root, &resolve_dates(rel), &resolve_dates(text))?;
        }
        for (link, target) in &self.manifest.links {
            let p = root.join(resolve_dates(link));
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d)?;
            }
            make_symlink(Path::new(target), &p)?;
        }
        Ok(())
    }
}

#[cfg(unix)]
fn make_symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn make_symlink(_target: &Path, _link: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Where this crate's fixtures live.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"))
}

fn read_tree(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            read_tree(base, &p, out)?;
        } else {
            let rel = p.strip_prefix(base).unwrap();
            let key = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            out.insert(key, text);
        }
    }
    Ok(())
}

/// Write `text` to `root/rel`, creating folders, and move its mtime forward so engines that detect changes by
/// size + mtime see every write, even several within one clock tick.
pub fn write_file(root: &Path, rel: &str, text: &str) -> std::io::Result<()> {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(&p, text)?;
    bump_mtime(&p)
}

/// Set `p`'s mtime later than any earlier call's (10 ms apart), so change detection sees every write.
pub fn bump_mtime(p: &Path) -> std::io::Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, SystemTime};
    static TICK: AtomicU64 = AtomicU64::new(1);
    let t = SystemTime::now() + Duration::from_millis(10 * TICK.fetch_add(1, Ordering::SeqCst));
    std::fs::File::options().write(true).open(p)?.set_modified(t)
}

/// Replace `{{date:N}}` or `{{date=N}}` (N days from today, UTC, may be negative) by `YYYY-MM-DD`. File names
/// spell it with `=`: a `:` cannot be in a Windows file name, nor in a crate's package for crates.io.
pub fn resolve_dates(s: &str) -> String {
    let today = chrono::Utc::now().date_naive();
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = [rest.find("{{date:"), rest.find("{{date=")].into_iter().flatten().min() {
        out.push_str(&rest[..pos + 7]);
        let after = &rest[pos + 7..];
        match after.find("}}").and_then(|end| after[..end].trim().parse::<i64>().ok().map(|n| (end, n))) {
            Some((end, n)) => {
                out.truncate(out.len() - 7);
                let d = today + chrono::Duration::days(n);
                out.push_str(&d.format("%Y-%m-%d").to_string());
                rest = &after[end + 2..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_templates_resolve_relative_to_today() {
        let today = chrono::Utc::now().date_naive();
        let y = (today - chrono::Duration::days(1)).format("%Y-%m-%d").to_string();
        assert_eq!(resolve_dates("memory/{{date:-1}}.md"), format!("memory/{y}.md"));
        assert_eq!(resolve_dates("memory/{{date=-1}}-a.md {{date:-1}}"), format!("memory/{y}-a.md {y}"));
        assert_eq!(resolve_dates("a {{date:x}} b {{date=y}}"), "a {{date:x}} b {{date=y}}");
        assert_eq!(resolve_dates("none"), "none");
    }

    #[test]
    fn a_step_has_exactly_one_action() {
        let s: Step = json5::from_str("{search: {query: 'x'}, delete: 'a.md'}").unwrap();
        assert!(s.action().is_err());
        let s: Step = json5::from_str("{write: 'a.md'}").unwrap();
        assert!(s.action().unwrap_err().contains("text"));
        let s: Step = json5::from_str("{sync: {}}").unwrap();
        assert!(matches!(s.action().unwrap(), Action::Sync { force: false }));
    }

    #[test]
    fn unknown_keys_in_cases_are_errors() {
        let r: Result<Case, _> = json5::from_str("{id: 'x', search: {query: 'q'}, expect: {frist: 'a.md'}}");
        assert!(r.unwrap_err().to_string().contains("frist"));
    }

    #[test]
    fn shipped_fixtures_load() {
        let suites = Suite::builtin_suites();
        assert!(suites.len() >= 5, "{}", suites.len());
        for s in &suites {
            assert!(!s.manifest.cases.is_empty(), "{}", s.name);
        }
    }
}

//! `memory_rs._native`: the memory-rs engine as a Python extension module (the public API is the `memory_rs`
//! package around it: python/memory_rs). An engine opens exactly as the `memory` command opens it
//! (`memory_host::Host`: every engine of this build behind the builtin fallback, the config checked against them);
//! each call runs on this object's tokio runtime with the GIL released, so other Python threads (and the async
//! twins, which run the calls on worker threads) go on while a search runs.

// A panic inside a call would surface as an opaque PanicException: errors say what went wrong instead.
#![deny(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use memory_core::{GetRequest, MemoryBackend, MemoryError, RecallRequest, SearchRequest, SyncOptions};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

create_exception!(memory_rs, MemoryRsError, PyException, "Base class of every error memory_rs raises.");
create_exception!(memory_rs, WorkspaceError, MemoryRsError, "The workspace folder does not exist or cannot be read.");
create_exception!(memory_rs, ConfigError, MemoryRsError, "The config file cannot be read, or a key or value in it is wrong (the message names it).");
create_exception!(memory_rs, ClosedError, MemoryRsError, "The Memory was closed: open a new one.");
create_exception!(
    memory_rs,
    InvalidInputError,
    MemoryRsError,
    "An argument the engine refuses (a path outside the memory files, an empty query, ...)."
);
create_exception!(memory_rs, NotFoundError, MemoryRsError, "What was asked for does not exist.");

/// The request `search` and `explain` send, from their shared arguments.
fn search_request(
    query: String,
    max_results: usize,
    min_score: Option<f64>,
    projects: Option<Vec<String>>,
    after: Option<String>,
    before: Option<String>,
) -> SearchRequest {
    SearchRequest {
        max_results: Some(max_results),
        min_score,
        active_project_keys: projects.unwrap_or_default(),
        after,
        before,
        ..SearchRequest::new(query)
    }
}

/// The Python exception for an engine error: its class names the cause, its message is the engine's.
fn to_py(e: MemoryError) -> PyErr {
    let message = e.to_string();
    match e {
        MemoryError::Config { .. } => ConfigError::new_err(message),
        MemoryError::InvalidInput(_) | MemoryError::Refused(_) => InvalidInputError::new_err(message),
        MemoryError::NotFound(_) => NotFoundError::new_err(message),
        _ => MemoryRsError::new_err(message),
    }
}

/// One search result.
#[pyclass(frozen, get_all, module = "memory_rs")]
pub struct Hit {
    /// Workspace-relative path of the memory file (e.g. `memory/2026-11-29.md`).
    path: String,
    /// 1-based first and last line of the chunk the snippet comes from.
    start_line: usize,
    end_line: usize,
    /// 0..1, higher is better.
    score: f64,
    snippet: String,
    /// `path#Lstart-Lend`, for citing the memory in an answer.
    citation: String,
    /// `memory` (the Markdown memory files) or `sessions` (indexed transcripts).
    source: String,
}

#[pymethods]
impl Hit {
    fn __repr__(&self) -> String {
        format!("Hit(citation={:?}, score={:.3}, snippet={:?})", self.citation, self.score, self.snippet)
    }
}

impl From<memory_core::SearchResult> for Hit {
    fn from(r: memory_core::SearchResult) -> Hit {
        let citation = r.citation.unwrap_or_else(|| memory_core::citation::citation(&r.path, r.start_line, r.end_line));
        Hit {
            path: r.path,
            start_line: r.start_line,
            end_line: r.end_line,
            score: r.score,
            snippet: r.snippet,
            citation,
            source: r.source.as_str().to_string(),
        }
    }
}

/// What `get` read.
#[pyclass(frozen, get_all, module = "memory_rs")]
pub struct Document {
    path: String,
    text: String,
    /// The first line returned (1-based) and how many lines were returned.
    from_: usize,
    lines: usize,
    /// Lines in the whole file.
    total_lines: usize,
    /// The file does not exist (yet): a daily log not written today reads as empty.
    missing: bool,
    /// Not the whole rest of the file: `note` says how to read on.
    truncated: bool,
    note: Option<String>,
    /// The `offset` to read the rest of a line longer than 12,000 characters from (the `memory get --offset`).
    next_offset: Option<usize>,
}

#[pymethods]
impl Document {
    fn __repr__(&self) -> String {
        let missing = if self.missing { "True" } else { "False" };
        format!("Document(path={:?}, from_={}, lines={}, total_lines={}, missing={missing})", self.path, self.from_, self.lines, self.total_lines)
    }
}

/// A curated entry whose trigger phrase matched the message given to `recall`.
#[pyclass(frozen, get_all, module = "memory_rs")]
pub struct Recalled {
    path: String,
    line: usize,
    text: String,
    score: f64,
    /// The trigger phrase that matched.
    trigger: String,
    citation: String,
}

#[pymethods]
impl Recalled {
    fn __repr__(&self) -> String {
        format!("Recalled(citation={:?}, trigger={:?}, score={:.3})", self.citation, self.trigger, self.score)
    }
}

/// An open engine and the workspace it serves.
struct Open {
    engine: Arc<dyn MemoryBackend>,
    workspace: PathBuf,
}

/// An agent's memory: a workspace's Markdown files, indexed under `state_dir`.
#[pyclass(frozen, subclass, module = "memory_rs")]
pub struct Memory {
    runtime: tokio::runtime::Runtime,
    /// `None` once closed.
    open: RwLock<Option<Open>>,
}

impl Memory {
    /// The engine, or ClosedError.
    fn engine(&self) -> PyResult<(Arc<dyn MemoryBackend>, PathBuf)> {
        let guard = self.open.read().map_err(|_| MemoryRsError::new_err("the Memory's lock was poisoned by a panic"))?;
        match guard.as_ref() {
            Some(open) => Ok((open.engine.clone(), open.workspace.clone())),
            None => Err(ClosedError::new_err("this Memory is closed")),
        }
    }
}

/// Where a value the engine serialises goes: the Python value of the same JSON shape (dicts, lists, str, ...).
fn json_to_py(py: Python<'_>, value: &serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any().unbind(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any().unbind(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any().unbind(),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any().unbind()
        }
    })
}

fn to_json(value: impl serde::Serialize) -> PyResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| MemoryRsError::new_err(format!("cannot convert the engine's answer: {e}")))
}

#[pymethods]
impl Memory {
    #[new]
    #[pyo3(signature = (workspace, config=None, state_dir=None, agent="main".to_string()))]
    fn new(py: Python<'_>, workspace: PathBuf, config: Option<PathBuf>, state_dir: Option<PathBuf>, agent: String) -> PyResult<Memory> {
        if !workspace.is_dir() {
            return Err(WorkspaceError::new_err(format!("workspace {} is not a folder", workspace.display())));
        }
        let workspace = memory_core::paths::canonical(&workspace)
            .map_err(|e| WorkspaceError::new_err(format!("cannot resolve workspace {}: {e}", workspace.display())))?;
        let host = memory_host::Host::new();
        let config = match &config {
            // Every engine's block is checked, whichever engine is configured: a misspelt key is an error.
            Some(path) => host.load_config(path, Some(&agent)).map_err(|e| ConfigError::new_err(format!("{e} (in {})", path.display())))?,
            None => memory_core::Config::default(),
        };
        if !config.memory.search.enabled {
            return Err(ConfigError::new_err(format!("memory search is turned off for agent `{agent}` (memorySearch.enabled: false in its config)")));
        }
        let state_dir = state_dir.unwrap_or_else(memory_host::default_state_dir);
        // Two workers, as `memory serve`: syncs run on blocking threads while calls are answered.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("memory-rs")
            .enable_all()
            .build()
            .map_err(|e| MemoryRsError::new_err(format!("cannot start the runtime: {e}")))?;
        let ws = workspace.clone();
        let engine = py.detach(|| runtime.block_on(host.open(Arc::new(config), ws, state_dir, &agent))).map_err(|e| match e {
            MemoryError::Config { .. } => to_py(e),
            other => MemoryRsError::new_err(format!("cannot open the memory of {}: {other}", workspace.display())),
        })?;
        Ok(Memory { runtime, open: RwLock::new(Some(Open { engine: Arc::from(engine), workspace })) })
    }

    /// Ranked snippets for `query` (the files changed since the last sync are synced first); `after` and `before`
    /// (`YYYY-MM-DD`, inclusive) keep only notes dated inside.
    #[pyo3(signature = (query, max_results=6, min_score=None, projects=None, after=None, before=None))]
    #[allow(clippy::too_many_arguments, reason = "the Python signature: keyword arguments with defaults")]
    fn search(
        &self,
        py: Python<'_>,
        query: String,
        max_results: usize,
        min_score: Option<f64>,
        projects: Option<Vec<String>>,
        after: Option<String>,
        before: Option<String>,
    ) -> PyResult<Vec<Hit>> {
        let (engine, _) = self.engine()?;
        let request = search_request(query, max_results, min_score, projects, after, before);
        let response = py.detach(|| self.runtime.block_on(engine.search(&request))).map_err(to_py)?;
        Ok(response.results.into_iter().map(Hit::from).collect())
    }

    /// Read a memory file (MEMORY.md, memory/**/*.md, configured extra paths), or `lines` lines from `from_`.
    #[pyo3(signature = (path, from_=None, lines=None))]
    fn get(&self, py: Python<'_>, path: String, from_: Option<usize>, lines: Option<usize>) -> PyResult<Document> {
        let (engine, _) = self.engine()?;
        let request = GetRequest { path, from: from_, lines, offset: None };
        let r = py.detach(|| self.runtime.block_on(engine.get(&request))).map_err(to_py)?;
        Ok(Document {
            path: r.path,
            text: r.text,
            from_: r.from,
            lines: r.lines,
            total_lines: r.total_lines,
            missing: r.missing,
            truncated: r.truncated,
            note: r.note,
            next_offset: r.next_offset,
        })
    }

    /// Append a timestamped entry to today's memory/YYYY-MM-DD.md and index it; a dict (path, startLine, endLine,
    /// entry, created, citation, indexed, warning?).
    fn append(&self, py: Python<'_>, text: String) -> PyResult<Py<PyAny>> {
        let (engine, workspace) = self.engine()?;
        let result = py.detach(|| self.runtime.block_on(memory_host::append::append_and_index(engine.as_ref(), &workspace, &text))).map_err(to_py)?;
        json_to_py(py, &to_json(result)?)
    }

    /// The curated entries whose `<!-- trigger: ... -->` phrases match `message` strongly.
    #[pyo3(signature = (message, projects=None))]
    fn recall(&self, py: Python<'_>, message: String, projects: Option<Vec<String>>) -> PyResult<Vec<Recalled>> {
        let (engine, _) = self.engine()?;
        let request = RecallRequest { message, active_project_keys: projects.unwrap_or_default(), project_entries: None };
        let r = py.detach(|| self.runtime.block_on(engine.recall(&request))).map_err(to_py)?;
        Ok(r.entries
            .into_iter()
            .map(|e| Recalled { path: e.path, line: e.line, text: e.text, score: e.score, trigger: e.trigger, citation: e.citation })
            .collect())
    }

    /// Why a search answers what it does: the dict `memory explain --json` prints (`results`, `explanation` with
    /// every factor of each hit and, with `path`, where that memory file is and why; `warnings`).
    #[pyo3(signature = (query, path=None, max_results=6, min_score=None, projects=None, after=None, before=None))]
    #[allow(clippy::too_many_arguments, reason = "the Python signature: keyword arguments with defaults")]
    fn explain(
        &self,
        py: Python<'_>,
        query: String,
        path: Option<String>,
        max_results: usize,
        min_score: Option<f64>,
        projects: Option<Vec<String>>,
        after: Option<String>,
        before: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let (engine, _) = self.engine()?;
        let request = SearchRequest { explain: true, explain_path: path, ..search_request(query, max_results, min_score, projects, after, before) };
        let response = py.detach(|| self.runtime.block_on(engine.search(&request))).map_err(to_py)?;
        json_to_py(py, &to_json(response)?)
    }

    /// What is indexed, where, and whether it is fresh: the dict `memory status --json` prints.
    fn status(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (engine, _) = self.engine()?;
        let status = py.detach(|| self.runtime.block_on(engine.status())).map_err(to_py)?;
        json_to_py(py, &to_json(status)?)
    }

    /// Bring the index in step with the files (`force`: rebuild everything); the sync report as a dict.
    #[pyo3(signature = (force=false))]
    fn index(&self, py: Python<'_>, force: bool) -> PyResult<Py<PyAny>> {
        let (engine, _) = self.engine()?;
        let options = SyncOptions { force, ..SyncOptions::default() };
        let report = py.detach(|| self.runtime.block_on(engine.sync(options))).map_err(to_py)?;
        json_to_py(py, &to_json(report)?)
    }

    /// Close the engine (its index and any child process); later calls raise ClosedError. Closing twice is fine.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.open.write().map_err(|_| MemoryRsError::new_err("the Memory's lock was poisoned by a panic"))?.take();
        match taken {
            Some(open) => py.detach(|| self.runtime.block_on(open.engine.close())).map_err(to_py),
            None => Ok(()),
        }
    }

    #[getter]
    fn closed(&self) -> bool {
        self.open.read().map_or(true, |g| g.is_none())
    }

    /// The workspace folder (absolute).
    #[getter]
    fn workspace(&self) -> PyResult<PathBuf> {
        Ok(self.engine()?.1)
    }

    /// For the benchmark of scripts/package-python.sh: `n` searches timed inside Rust on this same engine (the
    /// in-process Rust figure the Python calls are compared with), in seconds each.
    #[pyo3(signature = (query, n, max_results=6))]
    fn _rust_search_seconds(&self, py: Python<'_>, query: String, n: usize, max_results: usize) -> PyResult<Vec<f64>> {
        let (engine, _) = self.engine()?;
        let request = SearchRequest { query, max_results: Some(max_results), ..SearchRequest::default() };
        py.detach(|| {
            let mut seconds = Vec::with_capacity(n);
            for _ in 0..n {
                let start = Instant::now();
                self.runtime.block_on(engine.search(&request))?;
                seconds.push(start.elapsed().as_secs_f64());
            }
            Ok(seconds)
        })
        .map_err(to_py)
    }
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Memory>()?;
    m.add_class::<Hit>()?;
    m.add_class::<Document>()?;
    m.add_class::<Recalled>()?;
    m.add("MemoryRsError", py.get_type::<MemoryRsError>())?;
    m.add("WorkspaceError", py.get_type::<WorkspaceError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

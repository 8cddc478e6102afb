//! Helpers for engine and store tests: a workspace and a state folder in temporary directories, writes that
//! change detection always sees, and the [`OpenContext`] a factory is opened with.

use std::path::Path;
use std::sync::Arc;

use memory_core::embedding::EmbeddingProvider;
use memory_core::registry::OpenContext;
use memory_core::Config;
use tempfile::TempDir;

pub use crate::fixture::bump_mtime;

/// The agent id tests open engines for.
pub const TEST_AGENT: &str = "main";

/// A workspace (with its `memory/` folder) and a state folder, both deleted on drop.
pub struct TestDirs {
    pub ws: TempDir,
    pub state: TempDir,
}

impl TestDirs {
    pub fn new() -> TestDirs {
        let ws = tempfile::tempdir().expect("temporary workspace");
        std::fs::create_dir_all(ws.path().join("memory")).expect("memory folder");
        TestDirs { ws, state: tempfile::tempdir().expect("temporary state folder") }
    }

    /// Write a workspace file (folders created), with an mtime later than any earlier write's, so that
    /// mtime-based change detection sees it even within one clock tick.
    pub fn write(&self, rel: &str, text: &str) {
        crate::fixture::write_file(self.ws.path(), rel, text).unwrap_or_else(|e| panic!("write {rel}: {e}"));
    }

    /// The context to open an engine on these folders with.
    pub fn context(&self, config: Config, embedder: Option<Arc<dyn EmbeddingProvider>>) -> OpenContext {
        open_context(config, self.ws.path(), self.state.path(), embedder)
    }
}

impl Default for TestDirs {
    fn default() -> Self {
        TestDirs::new()
    }
}

/// The context to open an engine on `workspace` with its state in `state`, for [`TEST_AGENT`].
pub fn open_context(config: Config, workspace: &Path, state: &Path, embedder: Option<Arc<dyn EmbeddingProvider>>) -> OpenContext {
    OpenContext {
        config: Arc::new(config),
        workspace: workspace.to_path_buf(),
        state_dir: state.to_path_buf(),
        agent_id: TEST_AGENT.into(),
        embedder,
        reranker: None,
    }
}

/// A small seeded generator for generated test inputs (xorshift64): the same seed gives the same workspace or
/// vectors on every run, with no extra dependency.
pub struct Xorshift(pub u64);

impl Xorshift {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

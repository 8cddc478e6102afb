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
    OpenContext::new(Arc::new(config), workspace, state, TEST_AGENT).with_embedder(embedder)
}

/// A small seeded generator for generated test inputs (xorshift64): the same seed gives the same workspace or
/// vectors on every run, with no extra dependency.
pub struct Xorshift(pub u64);

impl Xorshift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform-ish in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Environment variable set by `scripts/test.sh`: every prerequisite its setup installs must be there.
pub const REQUIRE_ALL_ENV: &str = "MEMORY_TEST_REQUIRE_ALL";
/// Environment variable set by `scripts/test.sh`: the file each skipped test is recorded in, printed at the end.
pub const SKIP_REPORT_ENV: &str = "MEMORY_TEST_SKIP_REPORT";

/// Does this run promise every prerequisite (`scripts/test.sh`, or CI)?
pub fn requires_all() -> bool {
    let set = |v: &str| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    set(REQUIRE_ALL_ENV) || set("CI")
}

/// A prerequisite the project's setup installs (a model, QMD, a build feature) is missing for `test`: under
/// `scripts/test.sh` or CI the test fails with `why`; run by hand it is skipped, said on stderr and recorded
/// in the skip report. The caller returns after it.
#[track_caller]
pub fn missing_prerequisite(test: &str, why: &str) {
    if requires_all() {
        panic!("{test} cannot run: {why} (scripts/test.sh installs it with scripts/setup.sh)");
    }
    skipped(test, why);
}

/// `test` cannot run on this machine (mounting a tmpfs or dropping capabilities is not allowed, a condition
/// it needs did not arise): skipped, said on stderr and recorded in the skip report `scripts/test.sh` prints,
/// so that a run never looks as if it tested what it did not. The caller returns after it.
pub fn skipped(test: &str, why: &str) {
    eprintln!("SKIP {test}: {why}");
    if let Some(report) = std::env::var_os(SKIP_REPORT_ENV).filter(|v| !v.is_empty()) {
        use std::io::Write;
        let line = format!("{test}: {}\n", why.replace('\n', " "));
        // One write of a short line in append mode: lines of tests running at once do not mix.
        if let Err(e) = std::fs::OpenOptions::new().create(true).append(true).open(&report).and_then(|mut f| f.write_all(line.as_bytes())) {
            eprintln!("could not record the skip in {}: {e}", Path::new(&report).display());
        }
    }
}

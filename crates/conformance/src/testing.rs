//! Helpers for engine and store tests: a workspace and a state folder in temporary directories, writes that
//! change detection always sees, and the [`OpenContext`] a factory is opened with.

use std::path::Path;
use std::sync::Arc;

use memory_contract::embedding::EmbeddingProvider;
use memory_contract::registry::OpenContext;
use memory_contract::Config;
use tempfile::TempDir;

pub use crate::fixture::bump_mtime;

/// The agent id tests open engines for.
pub const TEST_AGENT: &str = "main";

/// A workspace (with its `memory/` folder) and a state folder, both deleted on drop.
pub struct TestDirs {
    /// The workspace.
    pub ws: TempDir,
    /// The state folder (indexes).
    pub state: TempDir,
}

impl TestDirs {
    /// Both folders, the workspace with an empty `memory/`.
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

/// What an agent's daily notes are about, for generated workspaces: the topic words of memory-bench's corpus
/// (their order is part of its seeded generator) and of the CLI's crash test.
pub const NOTE_TOPICS: &[&str] = &[
    "gateway",
    "deploy",
    "billing",
    "invoice",
    "kubernetes",
    "canary",
    "database",
    "migration",
    "backup",
    "latency",
    "dashboard",
    "alerting",
    "oncall",
    "release",
    "roadmap",
    "budget",
    "hiring",
    "interview",
    "design",
    "review",
    "security",
    "certificate",
    "dns",
    "cache",
    "queue",
    "worker",
    "scheduler",
    "embedding",
    "search",
    "index",
    "memory",
    "agent",
    "prompt",
    "evaluation",
    "benchmark",
    "regression",
    "incident",
    "postmortem",
    "customer",
    "contract",
    "travel",
    "flight",
    "hotel",
    "dentist",
    "groceries",
    "coffee",
    "running",
    "garden",
    "birthday",
];

/// A small seeded generator for generated test inputs (xorshift64): the same seed gives the same workspace or
/// vectors on every run, with no extra dependency.
pub struct Xorshift(pub u64);

impl Xorshift {
    /// The next number.
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

/// An HTTP/1.1 response read to the end of its connection (`Connection: close`), for tests and benchmarks that
/// talk to the CLI's HTTP servers over a bare socket.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// The status line and the headers, as sent.
    pub head: String,
    /// The body, with a chunked transfer encoding undone.
    pub body: String,
}

impl HttpReply {
    /// Split a whole response into status, head and body; an error says what is missing.
    pub fn parse(raw: &[u8]) -> Result<HttpReply, String> {
        let text = String::from_utf8_lossy(raw);
        let (head, rest) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no end of the headers in the response: {text:?}"))?;
        let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or_else(|| format!("no status code in {head:?}"))?;
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(rest) } else { rest.to_string() };
        Ok(HttpReply { status, head: head.to_string(), body })
    }

    /// The value of header `name` (any case), if the reply has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
    }
}

/// The data of a chunked body (`<hex size>\r\n<data>\r\n`... up to the empty chunk or a cut-off one).
fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::HttpReply;

    #[test]
    fn http_replies_are_split_and_de_chunked() {
        let raw = b"HTTP/1.1 200 OK\r\nMcp-Session-Id: abc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let r = HttpReply::parse(raw).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "hello world"));
        assert_eq!(r.header("mcp-session-id"), Some("abc"));
        assert_eq!(r.header("content-length"), None);
        let plain = HttpReply::parse(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\nno").unwrap();
        assert_eq!((plain.status, plain.body.as_str()), (401, "no"));
        assert!(HttpReply::parse(b"").unwrap_err().contains("no end of the headers"));
        assert!(HttpReply::parse(b"garbage\r\n\r\n").unwrap_err().contains("no status code"));
    }
}

//! What the CLI and the shared server say over the socket: one request line of JSON, then reply lines of JSON
//! (`accepted`, then `done` with the bytes the command prints), one exchange per connection.
//!
//! A `run` request carries this binary's identity (version and the executable file's size, mtime and inode):
//! a server of another build refuses it and the CLI answers in-process, so an upgraded binary never talks to an
//! older server.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::job::{Answer, Job};
use crate::openclaw::WorkspaceFrom;

/// Bumped whenever a request or reply changes shape.
pub const PROTOCOL: u32 = 1;

/// The longest request line a server reads (an `append` entry is at most 64 KiB of text, escaped).
pub const MAX_REQUEST_BYTES: u64 = 1 << 20;

/// The longest reply line a client reads.
pub const MAX_REPLY_BYTES: u64 = 256 << 20;

/// The files of a state folder's server.
pub struct Paths {
    pub socket: PathBuf,
    pub pid: PathBuf,
    pub lock: PathBuf,
    pub log: PathBuf,
}

impl Paths {
    pub fn new(state_dir: &Path) -> Paths {
        Paths {
            socket: state_dir.join("server.sock"),
            pid: state_dir.join("server.pid"),
            lock: state_dir.join("server.lock"),
            log: state_dir.join("server.log"),
        }
    }
}

/// This build: the version and the executable file ([`executable_stamp`]). A binary replaced by an upgrade (or a
/// rebuild) has another identity even at the same version number.
pub fn build_identity() -> String {
    let version = env!("CARGO_PKG_VERSION");
    match std::env::current_exe().and_then(std::fs::metadata) {
        Ok(m) => format!("{version}+{}", executable_stamp(&m)),
        // Unknown: matches no other process.
        Err(_) => format!("{version}+unknown.{}", std::process::id()),
    }
}

/// The executable file as its identity names it: size, mtime (seconds, nanoseconds) and inode.
#[cfg(unix)]
fn executable_stamp(m: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    format!("{}.{}.{}.{}", m.len(), m.mtime(), m.mtime_nsec(), m.ino())
}

/// Elsewhere: size and modified time (seconds, nanoseconds since 1970; 0 when unknown), no inode.
#[cfg(not(unix))]
fn executable_stamp(m: &std::fs::Metadata) -> String {
    let modified = m.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
    format!("{}.{}.{}", m.len(), modified.as_secs(), modified.subsec_nanos())
}

/// A name for the config's content (FNV-1a over its canonical JSON): the server keeps one engine per config
/// content and refuses a request whose config changed since the engine was opened.
pub fn content_hash(config: Option<&serde_json::Value>) -> String {
    let text = config.map(std::string::ToString::to_string).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}:{}", text.len())
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub protocol: u32,
    pub version: String,
    #[serde(flatten)]
    pub request: Request,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
#[allow(clippy::large_enum_variant, reason = "one request per connection, read once")]
pub enum Request {
    /// Run a job on the engine for this workspace, agent and config.
    #[serde(rename_all = "camelCase")]
    Run { workspace: PathBuf, workspace_from: WorkspaceFrom, agent: String, config_path: Option<PathBuf>, config_hash: String, job: Job },
    /// What the server is (any version answers it).
    Ping,
    /// Stop the server (any version obeys it).
    Stop,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "camelCase")]
pub enum Reply {
    /// The request is read and will be answered (the client's short wait ends here).
    Accepted,
    /// Not answered here: the client answers in-process.
    Refused {
        reason: String,
        version: String,
    },
    Done {
        answer: Answer,
    },
    Info {
        info: ServerInfo,
    },
    Stopping,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub socket: String,
    pub uptime_ms: u64,
    /// Run requests answered so far.
    pub requests: u64,
    /// Resident memory of the server process, in bytes (Linux: VmRSS).
    pub rss_bytes: Option<u64>,
    pub engines: Vec<EngineInfo>,
    pub idle_timeout_s: u64,
    pub engine_idle_s: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EngineInfo {
    pub workspace: String,
    pub agent: String,
    pub config_path: Option<String>,
    pub idle_ms: u64,
}

/// Resident memory of this process (VmRSS), in bytes.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

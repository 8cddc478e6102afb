//! Where one agent's memory lives: resolved once per open from the config, the workspace, the state folder and the
//! agent id, then asked by every engine, the CLI, the watcher and the host instead of each deriving paths.
//!
//! - The workspace and the transcripts folder (OpenClaw's state folder by OpenClaw's own rule, [`sessions_dir`]).
//!   Which files under the workspace and the extra paths are memory files is the engines' rule (memory-rs-core's
//!   `discovery::MemoryRoots::for_search`).
//! - The state layout: every file an engine keeps for an agent and workspace is
//!   `<state>/agents/<agent id>/<engine>-<tag><suffix>` where the agent id is made path-safe by
//!   [`crate::sanitize_id`] (ids that differ never share a folder) and the tag is 12 hex digits of
//!   sha256(`<engine>\n<canonical workspace>`) (one hashing rule). So every engine keeps its state per agent AND
//!   workspace: the index, its generations, staging and lock files (named after the index file by the store), the
//!   provider batch jobs, the fallback's failure state and an engine's home folder (QMD's, LanceDB's).
//! - Names written by earlier versions keep working: state that exists only under its old name is used where it is.

use std::path::{Path, PathBuf};

use crate::config::Config;

/// One agent's memory: its workspace, its transcripts and where its engines keep their state.
#[derive(Debug, Clone)]
pub struct AgentSpace {
    workspace: PathBuf,
    /// The workspace with links resolved: what the state names hash, so one folder reached two ways is one space.
    canonical_workspace: PathBuf,
    agent_id: String,
    state_dir: PathBuf,
    sessions_dir: PathBuf,
    /// `memory.search.store.path` as configured (`{agentId}`, `~`, relative to the state folder): the index file.
    configured_index: Option<PathBuf>,
}

/// The marker in a per-agent engine home of an earlier version (`<state>/<engine>/<agent>`) that says which
/// workspace it serves: the first workspace to open it keeps it, any other gets a home of its own.
const LEGACY_HOME_OWNER: &str = ".memory-rs-workspace";

impl AgentSpace {
    /// Resolve the space of `agent_id` working on `workspace`, keeping its state under `state_dir`.
    pub fn resolve(config: &Config, workspace: impl Into<PathBuf>, state_dir: impl Into<PathBuf>, agent_id: &str) -> AgentSpace {
        let workspace = workspace.into();
        let state_dir = state_dir.into();
        let canonical_workspace = crate::paths::canonical(&workspace).unwrap_or_else(|_| workspace.clone());
        let sessions_dir = sessions_dir(config, &state_dir, agent_id);
        let configured_index = config.memory.search.store.path.as_deref().map(|p| crate::paths::state_path(p, agent_id, &state_dir));
        AgentSpace { workspace, canonical_workspace, agent_id: agent_id.to_string(), state_dir, sessions_dir, configured_index }
    }

    /// The agent's workspace (holds MEMORY.md and memory/), as the host gave it.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The agent's id, as the host gave it (state paths use it made path-safe by [`crate::sanitize_id`]).
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The state folder every agent's state lives under (never inside the workspace by default).
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The transcripts folder of the `sessions` source (whether or not that source is on).
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    /// `<state>/agents/<agent id>`: the folder of every per-agent state file.
    pub fn agent_dir(&self) -> PathBuf {
        self.state_dir.join("agents").join(crate::sanitize_id(&self.agent_id))
    }

    /// The one hashing rule: 12 hex digits of sha256(`<engine>\n<canonical workspace>`).
    pub fn tag(&self, engine: &str) -> String {
        crate::sha256_hex(format!("{engine}\n{}", self.canonical_workspace.display()).as_bytes())[..12].to_string()
    }

    /// `<state>/agents/<agent id>/<engine>-<tag><suffix>`.
    pub fn state_file(&self, engine: &str, suffix: &str) -> PathBuf {
        self.agent_dir().join(format!("{engine}-{}{suffix}", self.tag(engine)))
    }

    /// The index file of a file-based store (`memory.search.store.path` when configured): the store names its
    /// generations, staging and lock files after it.
    pub fn index_file(&self, engine: &str, extension: &str) -> PathBuf {
        if let Some(p) = &self.configured_index {
            return p.clone();
        }
        let new = self.state_file(engine, &format!(".{extension}"));
        let old = self.legacy_index_file(extension);
        if !with_companions_exists(&new) && with_companions_exists(&old) {
            old
        } else {
            new
        }
    }

    /// Where provider batch jobs in flight are recorded (so a restart resumes them instead of paying again).
    pub fn batch_jobs_file(&self, engine: &str) -> PathBuf {
        let new = self.state_file(engine, ".batch-jobs.json");
        let old = self.state_dir.join("batch-jobs").join(format!("{}-{}.json", crate::sanitize_id(&self.agent_id), self.tag(engine)));
        if !new.exists() && old.exists() {
            old
        } else {
            new
        }
    }

    /// The fallback's failure state of `engine` (so a one-shot command does not pay a dead engine's timeout again).
    pub fn fallback_state_file(&self, engine: &str) -> PathBuf {
        self.state_file(engine, ".fallback.json")
    }

    /// A folder an engine keeps its own state in (QMD's home, LanceDB's tables). An earlier version kept one per
    /// agent (`<state>/<engine>/<agent id>`): the first workspace to open it keeps using it (a marker inside
    /// records which), any other workspace gets its own.
    pub fn engine_home(&self, engine: &str) -> PathBuf {
        let new = self.state_file(engine, "");
        let old = self.state_dir.join(engine).join(crate::sanitize_id(&self.agent_id));
        if new.exists() || !old.is_dir() {
            return new;
        }
        let marker = old.join(LEGACY_HOME_OWNER);
        let ours = self.canonical_workspace.to_string_lossy();
        match std::fs::read_to_string(&marker) {
            Ok(owner) if owner == ours => old,
            Ok(_) => new,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Err(e) = std::fs::write(&marker, ours.as_bytes()) {
                    tracing::warn!(path = %marker.display(), error = %e, "cannot record which workspace this state folder serves");
                }
                old
            }
            Err(e) => {
                tracing::warn!(path = %marker.display(), error = %e, "cannot read which workspace this state folder serves; using a new one");
                new
            }
        }
    }

    /// Earlier versions named the builtin index `<agent dir>/<workspace folder name>-<10 hex of its path>.sqlite`.
    fn legacy_index_file(&self, extension: &str) -> PathBuf {
        let name = self.canonical_workspace.file_name().map_or_else(|| "root".into(), |n| crate::path_safe_chars(&n.to_string_lossy()));
        let hash = &crate::sha256_hex(self.canonical_workspace.to_string_lossy().as_bytes())[..10];
        self.agent_dir().join(format!("{name}-{hash}.{extension}"))
    }
}

/// Does the file a store is named after exist, or any companion it names after it (`<name>.current`, `<name>.g3`,
/// `<name>-wal`)? A SQLite index rebuilt at least once lives in its generation files only.
fn with_companions_exists(path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return false };
    let name = name.to_string_lossy();
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|e| {
        let other = e.file_name();
        let other = other.to_string_lossy();
        other.strip_prefix(name.as_ref()).is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
    })
}

/// The transcripts folder: `memory.search.sessionsDir` (`{agentId}` replaced; relative to the state folder),
/// else OpenClaw's `<OpenClaw state>/agents/<agentId>/sessions` when it exists (the state folder by OpenClaw's rule,
/// [`crate::paths::openclaw_state_dir`]: `OPENCLAW_STATE_DIR`, `OPENCLAW_PROFILE`), else
/// `<state>/agents/<agentId>/sessions`.
pub fn sessions_dir(config: &Config, state_dir: &Path, agent_id: &str) -> PathBuf {
    if let Some(d) = &config.memory.search.sessions_dir {
        return crate::paths::state_path(d, agent_id, state_dir);
    }
    // OpenClaw names an agent's folder by its id, which it keeps path-safe: an id that is not is no OpenClaw agent.
    let safe = crate::sanitize_id(agent_id);
    if safe == agent_id {
        if let Some(openclaw) = crate::paths::openclaw_state_dir().map(|s| s.join("agents").join(&safe).join("sessions")) {
            if openclaw.is_dir() {
                return openclaw;
            }
        }
    }
    state_dir.join("agents").join(safe).join("sessions")
}

#[cfg(test)]
mod tests;

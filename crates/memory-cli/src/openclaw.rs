//! Where the workspace and the config come from, including an existing OpenClaw install.
//!
//! Config: `--config` / `MEMORY_CONFIG`, else OpenClaw's (`OPENCLAW_CONFIG_PATH`, else
//! `<OpenClaw state>/openclaw.json`) when that file exists, else the defaults.
//!
//! Workspace: `--workspace` / `MEMORY_WORKSPACE`, else the current folder when it holds memory files of its own
//! (`MEMORY.md`, `memory.md`, `USER.md` or `memory/`: `discovery::holds_memory`), else OpenClaw's workspace for the agent when that folder exists, else the current folder.
//! OpenClaw's workspace is `OPENCLAW_WORKSPACE_DIR`, else the agent's own entry (`agents.entries.<id>.workspace`
//! or `agents.list[].workspace`), else `agents.defaults.workspace`, else `<OpenClaw state>/workspace`
//! (`OPENCLAW_PROFILE=<p>`: `~/.openclaw-<p>/workspace`, or the older `~/.openclaw/workspace-<p>`).
//! OpenClaw state is `OPENCLAW_STATE_DIR`, else `~/.openclaw`.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How the workspace was chosen (shown by `memory status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WorkspaceFrom {
    Flag,
    CurrentFolder,
    Openclaw,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(|v| memory_core::paths::expand_home(&v.to_string_lossy()))
}

fn home() -> Option<PathBuf> {
    memory_core::paths::home_dir()
}

fn profile() -> Option<String> {
    std::env::var("OPENCLAW_PROFILE").ok().filter(|p| !p.is_empty() && p != "default")
}

/// OpenClaw's state folder (config, sessions, default workspace): [`memory_core::paths::openclaw_state_dir`].
pub fn state_dir() -> Option<PathBuf> {
    memory_core::paths::openclaw_state_dir()
}

/// The OpenClaw config this host would read when no `--config` is given: `OPENCLAW_CONFIG_PATH` (must exist),
/// else `<state>/openclaw.json` if it exists.
pub fn config_path() -> anyhow::Result<Option<PathBuf>> {
    if let Some(p) = env_path("OPENCLAW_CONFIG_PATH") {
        if !p.is_file() {
            anyhow::bail!("OPENCLAW_CONFIG_PATH names {}, which is not a file", p.display());
        }
        return Ok(Some(p));
    }
    Ok(state_dir().map(|s| s.join("openclaw.json")).filter(|p| p.is_file()))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

/// OpenClaw's workspace for `agent_id`, by its conventions (the folder may not exist).
pub fn workspace_for(config: Option<&Value>, agent_id: &str) -> Option<PathBuf> {
    if let Some(p) = env_path("OPENCLAW_WORKSPACE_DIR") {
        return Some(p);
    }
    let expand = |s: &str| memory_core::paths::expand_home(s);
    if let Some(cfg) = config {
        if let Some(w) = str_at(cfg, &["agents", "entries", agent_id, "workspace"]) {
            return Some(expand(w));
        }
        let list = cfg.get("agents").and_then(|a| a.get("list")).and_then(Value::as_array);
        if let Some(w) =
            list.and_then(|l| l.iter().find(|e| e.get("id").and_then(Value::as_str) == Some(agent_id))).and_then(|e| str_at(e, &["workspace"]))
        {
            return Some(expand(w));
        }
        let roster = cfg.get("agents").and_then(|a| a.get("entries")).and_then(Value::as_object).map_or(0, serde_json::Map::len)
            + list.map_or(0, std::vec::Vec::len);
        let defaults = str_at(cfg, &["agents", "defaults", "workspace"]).map(expand);
        if roster > 1 && agent_id != "main" {
            return match defaults {
                Some(root) => Some(root.join(agent_id)),
                None => state_dir().map(|s| s.join(format!("workspace-{agent_id}"))),
            };
        }
        if let Some(d) = defaults {
            return Some(d);
        }
    }
    let state = state_dir()?;
    if let Some(p) = profile() {
        let older = home().map(|h| h.join(".openclaw").join(format!("workspace-{p}")));
        if let Some(older) = older.filter(|o| o.is_dir() && !state.join("workspace").is_dir()) {
            return Some(older);
        }
    }
    Some(state.join("workspace"))
}

/// Read an OpenClaw config as plain JSON (for the keys outside `memory.*`): once, bounded in size and nesting
/// (memory-core's reader), so the same value serves the workspace probe and the config.
pub fn read_json(path: &Path) -> memory_core::Result<Value> {
    memory_core::Config::read_file(path)
}

/// Pick the workspace (see the module docs for the order).
pub fn resolve_workspace(flag: Option<&Path>, config_json: Option<&Value>, agent_id: &str) -> anyhow::Result<(PathBuf, WorkspaceFrom)> {
    if let Some(w) = flag {
        return Ok((w.to_path_buf(), WorkspaceFrom::Flag));
    }
    let cwd = std::env::current_dir().map_err(|e| anyhow::anyhow!("cannot read the current folder: {e}"))?;
    if memory_core::discovery::holds_memory(&cwd) {
        return Ok((cwd, WorkspaceFrom::CurrentFolder));
    }
    if let Some(w) = workspace_for(config_json, agent_id).filter(|w| w.is_dir()) {
        return Ok((w, WorkspaceFrom::Openclaw));
    }
    Ok((cwd, WorkspaceFrom::CurrentFolder))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_workspaces_follow_openclaw_conventions() {
        // Only keys of the config are used here (no environment-dependent defaults).
        let cfg: Value = json5::from_str(
            "{ agents: { defaults: { workspace: '/srv/ws' }, list: [ { id: 'main' }, { id: 'ops', workspace: '/srv/ops' }, { id: 'bob' } ] } }",
        )
        .unwrap();
        if std::env::var_os("OPENCLAW_WORKSPACE_DIR").is_some() {
            return;
        }
        assert_eq!(workspace_for(Some(&cfg), "ops"), Some(PathBuf::from("/srv/ops")));
        assert_eq!(workspace_for(Some(&cfg), "bob"), Some(PathBuf::from("/srv/ws/bob")));
        assert_eq!(workspace_for(Some(&cfg), "main"), Some(PathBuf::from("/srv/ws")));
        let entries: Value = json5::from_str("{ agents: { entries: { main: { workspace: '/a' } } } }").unwrap();
        assert_eq!(workspace_for(Some(&entries), "main"), Some(PathBuf::from("/a")));
    }
}

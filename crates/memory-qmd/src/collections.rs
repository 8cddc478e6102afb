//! Which QMD collections an agent has: the workspace's root memory files (`MEMORY.md` or `memory.md`, and
//! `USER.md`), `memory/` and each `memory.qmd.paths` entry: the memory files discovery lists.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::config::QmdConfig;
use memory_core::discovery::{root_file_name, IGNORED_DIRS, MEMORY_DIR, ROOT_FILE_NAMES, USER_FILE};
use memory_core::paths::expand_home;
use serde::{Deserialize, Serialize};
use tracing::warn;

/// One QMD collection: a folder and a glob mask inside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collection {
    pub name: String,
    pub root: PathBuf,
    pub mask: String,
}

/// Collection name for the workspace's root memory files (`MEMORY.md` or `memory.md`, and `USER.md`).
pub const ROOT_COLLECTION: &str = "memory-root";
/// Collection name for the workspace's `memory/` folder.
pub const DIR_COLLECTION: &str = "memory-dir";

fn sanitize(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '-' }).collect();
    let s = s.trim_matches('-').to_string();
    if s.is_empty() {
        "path".into()
    } else {
        s
    }
}

/// A folder collection's mask: the pattern, then negated globs for the folders memory discovery never walks
/// (`memory_core::discovery::IGNORED_DIRS`) that QMD would walk. QMD itself skips hidden folders and
/// `node_modules` (and also `vendor`, `dist`, `build`: see docs/qmd.md).
pub fn folder_mask(pattern: &str) -> String {
    let mut mask = pattern.to_string();
    for d in IGNORED_DIRS.iter().filter(|d| !d.starts_with('.') && **d != "node_modules") {
        mask.push_str(&format!(",!**/{d}/**"));
    }
    mask
}

/// The collections wanted for this workspace and config. Paths that do not exist are skipped with a warning.
/// `sessions_export` is the folder of exported transcripts when `memory.qmd.sessions` is enabled.
pub fn plan(workspace: &Path, cfg: &QmdConfig, sessions_export: Option<&Path>) -> Vec<Collection> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    if cfg.include_default_memory {
        // Discovery's choice between MEMORY.md and memory.md (MEMORY.md when neither exists yet), and the user
        // profile beside it (QMD splits a mask at commas).
        let root = root_file_name(workspace).unwrap_or(ROOT_FILE_NAMES[0]);
        out.push(Collection { name: ROOT_COLLECTION.into(), root: workspace.to_path_buf(), mask: format!("{root},{USER_FILE}") });
        out.push(Collection { name: DIR_COLLECTION.into(), root: workspace.join(MEMORY_DIR), mask: folder_mask("**/*.md") });
        names.insert(ROOT_COLLECTION.to_string());
        names.insert(DIR_COLLECTION.to_string());
    }
    if let Some(dir) = sessions_export {
        let name = crate::sessions::SESSIONS_COLLECTION.to_string();
        names.insert(name.clone());
        out.push(Collection { name, root: dir.to_path_buf(), mask: "*.md".into() });
    }
    for p in &cfg.paths {
        let raw = expand_home(&p.path);
        let abs = if raw.is_absolute() { raw } else { workspace.join(raw) };
        let meta = match std::fs::symlink_metadata(&abs) {
            Ok(m) => m,
            Err(e) => {
                warn!(path = %abs.display(), error = %e, "memory.qmd.paths entry not found; skipped");
                continue;
            }
        };
        if meta.file_type().is_symlink() {
            warn!(path = %abs.display(), "memory.qmd.paths entry is a symbolic link; skipped");
            continue;
        }
        let (root, mask) = if meta.is_dir() {
            (abs.clone(), folder_mask(p.pattern.as_deref().unwrap_or("**/*.md")))
        } else {
            let parent = abs.parent().map_or_else(|| workspace.to_path_buf(), Path::to_path_buf);
            let file = abs.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            (parent, file)
        };
        let base = p.name.clone().unwrap_or_else(|| abs.file_stem().map_or_else(|| "path".into(), |s| s.to_string_lossy().into_owned()));
        let base = sanitize(&base);
        let mut name = base.clone();
        let mut n = 2;
        while !names.insert(name.clone()) {
            name = format!("{base}-{n}");
            n += 1;
        }
        out.push(Collection { name, root, mask });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::QmdPathConfig;

    #[test]
    fn default_and_extra_collections() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::write(ws.join("memory.md"), "x").unwrap();
        std::fs::create_dir_all(ws.join("notes")).unwrap();
        std::fs::write(ws.join("notes/a.md"), "x").unwrap();
        std::fs::write(ws.join("single.md"), "x").unwrap();
        let mut cfg = QmdConfig { paths: vec![], ..Default::default() };
        cfg.paths.extend([
            QmdPathConfig { name: Some("Team Notes".into()), path: "notes".into(), pattern: None },
            QmdPathConfig { name: None, path: ws.join("single.md").to_string_lossy().into(), pattern: None },
            QmdPathConfig { name: Some("team notes".into()), path: "notes".into(), pattern: Some("*.md".into()) },
            QmdPathConfig { name: None, path: "missing".into(), pattern: None },
        ]);
        let p = plan(ws, &cfg, None);
        let names: Vec<_> = p.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["memory-root", "memory-dir", "team-notes", "single", "team-notes-2"]);
        assert_eq!(p[0].mask, "memory.md,USER.md");
        assert_eq!(p[3].root, ws);
        assert_eq!(p[3].mask, "single.md");
        assert_eq!(p[4].mask, "*.md,!**/venv/**,!**/__pycache__/**");
        assert_eq!(p[1].mask, "**/*.md,!**/venv/**,!**/__pycache__/**");
        std::fs::write(ws.join("MEMORY.md"), "x").unwrap();
        assert_eq!(plan(ws, &cfg, None)[0].mask, "MEMORY.md,USER.md");
        let with_sessions = plan(ws, &cfg, Some(&ws.join("exp")));
        assert_eq!((with_sessions[2].name.as_str(), with_sessions[2].mask.as_str()), ("sessions", "*.md"));
        cfg.include_default_memory = false;
        assert_eq!(plan(ws, &cfg, None)[0].name, "team-notes");
    }
}

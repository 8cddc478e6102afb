use std::collections::HashSet;
use std::path::Path;

use super::AgentSpace;
use crate::config::Config;

fn space(ws: &Path, state: &Path, agent: &str) -> AgentSpace {
    AgentSpace::resolve(&Config::default(), ws, state, agent)
}

/// Two workspace folders `a` and `b` under `dir`.
fn two_workspaces(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    (a, b)
}

/// Every name a space gives to an engine's state.
fn every_state_name(s: &AgentSpace, engine: &str) -> Vec<std::path::PathBuf> {
    vec![s.index_file(engine, "sqlite"), s.batch_jobs_file(engine), s.fallback_state_file(engine), s.engine_home(engine)]
}

#[test]
fn every_state_file_is_per_agent_workspace_and_engine_and_never_shared() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (a, b) = two_workspaces(dir.path());
    let mut seen = HashSet::new();
    for ws in [&a, &b] {
        for agent in ["main", "a/b", "a_b", "a.b", "会议", ""] {
            let s = space(ws, &state, agent);
            for engine in ["builtin", "qmd", "lancedb"] {
                for name in every_state_name(&s, engine) {
                    // Under the agent's own folder, never inside the workspace.
                    assert!(name.starts_with(s.agent_dir()), "{name:?}");
                    assert!(!name.starts_with(ws), "{name:?}");
                    assert!(seen.insert(name.clone()), "{name:?} is named twice ({agent:?}, {engine})");
                }
            }
        }
    }
    assert_eq!(seen.len(), 2 * 6 * 3 * 4);
}

// Unix only: making a symbolic link needs a privilege on Windows.
#[cfg(unix)]
#[test]
fn one_folder_reached_through_a_link_is_one_space() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&ws, &link).unwrap();
    let state = dir.path().join("state");
    assert_eq!(space(&ws, &state, "main").tag("builtin"), space(&link, &state, "main").tag("builtin"));
    assert_ne!(space(&ws, &state, "main").tag("builtin"), space(&ws, &state, "main").tag("qmd"));
    // The workspace keeps the path as the host gave it.
    assert_eq!(space(&link, &state, "main").workspace(), link);
}

#[test]
fn an_index_under_the_name_of_an_earlier_version_keeps_being_used() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("my notes");
    std::fs::create_dir_all(&ws).unwrap();
    let state = dir.path().join("state");
    let s = space(&ws, &state, "main");
    let new = s.index_file("builtin", "sqlite");
    assert!(new.file_name().unwrap().to_string_lossy().starts_with("builtin-"), "{new:?}");
    // The earlier name: `<workspace folder name>-<10 hex of its canonical path>.sqlite`.
    let canonical = crate::paths::canonical(&ws).unwrap();
    let old = s.agent_dir().join(format!("my_notes-{}.sqlite", &crate::sha256_hex(canonical.to_string_lossy().as_bytes())[..10]));
    std::fs::create_dir_all(s.agent_dir()).unwrap();
    // An index rebuilt at least once lives in its generation files and pointer only.
    std::fs::write(old.with_file_name(format!("{}.current", old.file_name().unwrap().to_string_lossy())), "2").unwrap();
    std::fs::write(old.with_file_name(format!("{}.g2", old.file_name().unwrap().to_string_lossy())), "").unwrap();
    assert_eq!(s.index_file("builtin", "sqlite"), old);
    // Another workspace's old index is not ours; a name that merely starts the same is no companion.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    assert!(space(&other, &state, "main").index_file("builtin", "sqlite").file_name().unwrap().to_string_lossy().starts_with("builtin-"));
    // Once the new name exists it wins.
    std::fs::write(&new, "").unwrap();
    assert_eq!(s.index_file("builtin", "sqlite"), new);
}

#[test]
fn a_configured_index_path_wins() {
    let mut config = Config::default();
    config.memory.search.store.path = Some("idx/{agentId}.sqlite".into());
    let s = AgentSpace::resolve(&config, "/ws", "/state", "../x");
    let p = s.index_file("builtin", "sqlite");
    assert!(p.starts_with("/state/idx/"), "{p:?}");
    assert!(!p.to_string_lossy().contains(".."), "{p:?}");
}

#[test]
fn batch_jobs_recorded_by_an_earlier_version_are_resumed_from_where_they_are() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let s = space(dir.path(), &state, "main");
    let new = s.batch_jobs_file("builtin");
    assert_eq!(new, s.state_file("builtin", ".batch-jobs.json"));
    let old = state.join("batch-jobs").join(format!("main-{}.json", s.tag("builtin")));
    std::fs::create_dir_all(old.parent().unwrap()).unwrap();
    std::fs::write(&old, "{}").unwrap();
    assert_eq!(s.batch_jobs_file("builtin"), old);
}

#[test]
fn a_per_agent_engine_home_of_an_earlier_version_serves_the_first_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (a, b) = two_workspaces(dir.path());
    let old = state.join("qmd").join("main");
    std::fs::create_dir_all(&old).unwrap();
    // The first workspace to open it claims it; it keeps it on the next open; another workspace gets its own.
    assert_eq!(space(&a, &state, "main").engine_home("qmd"), old);
    assert_eq!(space(&a, &state, "main").engine_home("qmd"), old);
    let b_home = space(&b, &state, "main").engine_home("qmd");
    assert_ne!(b_home, old);
    assert!(b_home.starts_with(state.join("agents/main")), "{b_home:?}");
    // Another agent never sees it; a home under the new name, once there, wins.
    assert_ne!(space(&a, &state, "other").engine_home("qmd"), old);
    let new = space(&a, &state, "main").state_file("qmd", "");
    std::fs::create_dir_all(&new).unwrap();
    assert_eq!(space(&a, &state, "main").engine_home("qmd"), new);
}

#[test]
fn the_transcripts_folder_follows_the_config() {
    let mut config = Config::default();
    config.memory.search.sessions_dir = Some("t/{agentId}".into());
    assert_eq!(AgentSpace::resolve(&config, "/ws", "/state", "main").sessions_dir(), Path::new("/state/t/main"));
}

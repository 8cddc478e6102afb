//! Paths a user configures: `~` expansion and the `{agentId}` template, one rule for every crate.

use std::path::{Path, PathBuf};

/// `path` made absolute with every link resolved (`std::fs::canonicalize`), written as people write it: on
/// Windows without the `\\?\` prefix canonicalize adds (`\\?\C:\notes` is `C:\notes`, `\\?\UNC\host\share` is
/// `\\host\share`), which tools and people do not read as the same folder.
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    Ok(without_verbatim_prefix(std::fs::canonicalize(path)?))
}

fn without_verbatim_prefix(p: PathBuf) -> PathBuf {
    let Some(s) = p.to_str() else { return p };
    if let Some(rest) = s.strip_prefix(r"\\?\UNC\") {
        return PathBuf::from(format!(r"\\{rest}"));
    }
    match s.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => p,
    }
}

/// The environment as text, by name: `std::env::var`, or a map in tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The user's home folder: `HOME`, else `USERPROFILE` (Windows sets that one; `HOME` only some shells do).
pub fn home_dir() -> Option<PathBuf> {
    home_dir_in(&process_env)
}

/// [`home_dir`] with the environment read through `var`.
pub fn home_dir_in(var: Env<'_>) -> Option<PathBuf> {
    ["HOME", "USERPROFILE"].into_iter().find_map(|n| var(n).filter(|v| !v.is_empty())).map(PathBuf::from)
}

/// `~` and `~/...` as the home folder ([`home_dir`]); anything else as it is.
pub fn expand_home(p: &str) -> PathBuf {
    expand_home_in(p, &process_env)
}

/// [`expand_home`] with the environment read through `var`.
pub fn expand_home_in(p: &str, var: Env<'_>) -> PathBuf {
    let rest = if p == "~" { Some("") } else { p.strip_prefix("~/") };
    match (rest, home_dir_in(var)) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(p),
    }
}

/// OpenClaw's state folder (its config, its agents' transcripts, its default workspace), by OpenClaw's own rule:
/// `OPENCLAW_STATE_DIR`, else `~/.openclaw-<profile>` for `OPENCLAW_PROFILE=<profile>` when that folder exists,
/// else `~/.openclaw`. One owner: the CLI's OpenClaw probe and the sessions source both ask it.
pub fn openclaw_state_dir() -> Option<PathBuf> {
    openclaw_state_dir_in(&|name| std::env::var(name).ok())
}

/// [`openclaw_state_dir`] with the environment read through `var` (a map in tests, the resolver's lookup).
pub fn openclaw_state_dir_in(var: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = home_dir_in(var);
    let var = |name: &str| var(name).filter(|v| !v.is_empty());
    if let Some(p) = var("OPENCLAW_STATE_DIR") {
        return Some(match (p.strip_prefix("~/").or((p == "~").then_some("")), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(p),
        });
    }
    let home = home?;
    let profile = var("OPENCLAW_PROFILE").filter(|p| p != "default");
    Some(match profile {
        Some(p) if home.join(format!(".openclaw-{p}")).is_dir() => home.join(format!(".openclaw-{p}")),
        _ => home.join(".openclaw"),
    })
}

/// `template` with every `{agentId}` replaced by the agent id made safe as a path component
/// ([`sanitize_id`](crate::sanitize_id)), so an id such as `../x` can never move the path elsewhere.
pub fn with_agent_id(template: &str, agent_id: &str) -> String {
    template.replace("{agentId}", &crate::sanitize_id(agent_id))
}

/// A configured state path (an index file, a transcripts folder): `{agentId}` replaced, `~` expanded, and a
/// relative path taken under `state_dir`.
pub fn state_path(template: &str, agent_id: &str, state_dir: &Path) -> PathBuf {
    let p = expand_home(&with_agent_id(template, agent_id));
    if p.is_absolute() {
        p
    } else {
        state_dir.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths_lose_the_windows_verbatim_prefix() {
        assert_eq!(without_verbatim_prefix(PathBuf::from(r"\\?\C:\notes")), PathBuf::from(r"C:\notes"));
        assert_eq!(without_verbatim_prefix(PathBuf::from(r"\\?\UNC\host\share\x")), PathBuf::from(r"\\host\share\x"));
        assert_eq!(without_verbatim_prefix(PathBuf::from(r"\\?\Volume{1}\x")), PathBuf::from(r"\\?\Volume{1}\x"));
        assert_eq!(without_verbatim_prefix(PathBuf::from("/home/u/notes")), PathBuf::from("/home/u/notes"));
        assert_eq!(canonical(Path::new(".")).unwrap(), without_verbatim_prefix(std::fs::canonicalize(".").unwrap()));
    }

    #[test]
    fn the_home_folder_is_home_else_the_windows_profile() {
        let env = |pairs: &'static [(&'static str, &'static str)]| move |n: &str| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.to_string());
        let both = env(&[("HOME", "/home/u"), ("USERPROFILE", "C:\\Users\\u")]);
        assert_eq!(home_dir_in(&both), Some(PathBuf::from("/home/u")));
        let windows = env(&[("HOME", ""), ("USERPROFILE", "C:\\Users\\u")]);
        assert_eq!(home_dir_in(&windows), Some(PathBuf::from("C:\\Users\\u")));
        assert_eq!(expand_home_in("~/notes", &windows), PathBuf::from("C:\\Users\\u").join("notes"));
        assert_eq!(home_dir_in(&env(&[])), None);
        assert_eq!(expand_home_in("~/notes", &env(&[])), PathBuf::from("~/notes"));
    }

    #[test]
    fn agent_ids_cannot_leave_the_state_folder() {
        let state = Path::new("/state");
        assert_eq!(state_path("memory/{agentId}.sqlite", "main", state), Path::new("/state/memory/main.sqlite"));
        let p = state_path("memory/{agentId}.sqlite", "../../etc/x", state);
        assert!(p.parent() == Some(Path::new("/state/memory")) && p.file_name().unwrap().to_string_lossy().starts_with("______etc_x-"), "{p:?}");
        assert!(state_path("/abs/{agentId}", "a b", state).starts_with("/abs"));
        assert_ne!(state_path("/abs/{agentId}", "a b", state), state_path("/abs/{agentId}", "a_b", state));
        let s3 = with_agent_id("s3://bucket/{agentId}", "ops/dev");
        assert!(s3.starts_with("s3://bucket/ops_dev-") && !s3["s3://".len()..].contains("//"), "{s3}");
    }
}

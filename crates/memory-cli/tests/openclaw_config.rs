//! Issue 20: an OpenClaw config (2026.9.6 layout, `agents.entries.<id>.memory.search`) drives the CLI: per-agent
//! extraPaths are searched only for that agent, `{path, pattern}` entries select files, `USER.md` is a memory
//! file, an agent with `enabled: false` has its memory tools off, and `status` works on a half-set-up provider.

use std::fs;
use std::process::Output;

use serde_json::Value;

mod common;

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    config: std::path::PathBuf,
}

const CONFIG: &str = r#"{
  gateway: { port: 18789 }, mcp: { servers: {} },
  memory: { search: { provider: "none", rememberAcrossConversations: true,
    extraPaths: [{ path: "projects", pattern: "**/notes/*.md" }] } },
  agents: { entries: {
    main: { default: true },
    ops: { memory: { search: { extraPaths: ["runbooks"] } } },
    quiet: { memory: { search: { enabled: false } } },
  } },
}"#;

impl Env {
    fn new(config: &str) -> Env {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        fs::write(w.join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Studio.\n").unwrap();
        fs::write(w.join("USER.md"), "# User\n\nThe user keeps a pet koala named Bruce.\n").unwrap();
        fs::create_dir_all(w.join("runbooks")).unwrap();
        fs::write(w.join("runbooks/deploy.md"), "# Deploy\n\nRestart the wombat service first.\n").unwrap();
        fs::create_dir_all(w.join("projects/a/notes")).unwrap();
        fs::write(w.join("projects/a/notes/x.md"), "# X\n\nThe quokka project ships in May.\n").unwrap();
        fs::write(w.join("projects/a/other.md"), "# Other\n\nThe platypus draft is not a note.\n").unwrap();
        let config_path = w.join("openclaw.json");
        fs::write(&config_path, config).unwrap();
        Env { ws, state: tempfile::tempdir().unwrap(), config: config_path }
    }

    fn run(&self, args: &[&str]) -> Output {
        common::memory(self.ws.path(), self.state.path(), Some(&self.config)).args(args).env_remove("OPENAI_API_KEY").output().unwrap()
    }

    fn paths(&self, args: &[&str]) -> Vec<String> {
        let o = self.run(args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
    }
}

#[test]
fn per_agent_extra_paths_patterns_and_user_md() {
    let env = Env::new(CONFIG);
    assert_eq!(env.paths(&["--agent", "ops", "search", "wombat", "--json"]), vec!["runbooks/deploy.md"]);
    assert!(env.paths(&["--agent", "main", "search", "wombat", "--json"]).is_empty(), "ops's extra path is not main's");
    // {path, pattern}: only the files the pattern selects.
    assert_eq!(env.paths(&["search", "quokka", "--json"]), vec!["projects/a/notes/x.md"]);
    assert!(env.paths(&["search", "platypus", "--json"]).is_empty());
    let o = env.run(&["get", "projects/a/other.md"]);
    assert!(!o.status.success(), "a file the pattern does not select is not readable");
    // USER.md: indexed and readable like MEMORY.md.
    assert_eq!(env.paths(&["search", "koala", "--json"]), vec!["USER.md"]);
    let o = env.run(&["get", "USER.md"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Bruce"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_disabled_agent_has_its_memory_tools_off() {
    let env = Env::new(CONFIG);
    let o = env.run(&["--agent", "quiet", "search", "koala"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("turned off for agent `quiet`"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = env.run(&["--agent", "quiet", "status", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["searchEnabled"], false);
}

#[test]
fn status_works_on_a_half_set_up_config_and_lists_ignored_keys() {
    let env = Env::new(&CONFIG.replace(r#"provider: "none""#, r#"provider: "openai""#));
    let o = env.run(&["status", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["providerNote"].as_str().unwrap().contains("API key"), "{v}");
    let warned: Vec<&str> = v["configWarnings"].as_array().unwrap().iter().map(|w| w["key"].as_str().unwrap()).collect();
    assert_eq!(warned, vec!["memory.search.rememberAcrossConversations"]);
    // Searching still needs the key: a clear error naming it.
    let o = env.run(&["search", "koala"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("apiKey"));
}

/// Issue 34: the sessions source finds OpenClaw's transcripts where OpenClaw keeps them, by OpenClaw's rule for its
/// state folder (`OPENCLAW_STATE_DIR` here; it was `~/.openclaw` whatever the variable said).
#[test]
fn transcripts_are_read_from_openclaws_state_folder() {
    let env = Env::new(r#"{ memory: { search: { provider: "none", sources: ["memory", "sessions"] } } }"#);
    let openclaw = tempfile::tempdir().unwrap();
    let sessions = openclaw.path().join("agents/main/sessions");
    fs::create_dir_all(&sessions).unwrap();
    fs::write(
        sessions.join("s1.jsonl"),
        "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"Where does the narwhal backup run?\"}}\n\
         {\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"On the basement NAS.\"}]}}\n",
    )
    .unwrap();
    let o = common::memory(env.ws.path(), env.state.path(), Some(&env.config))
        .env("OPENCLAW_STATE_DIR", openclaw.path())
        .args(["--agent", "main", "search", "narwhal", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(paths, vec!["sessions/s1.jsonl"], "{v}");
}

//! Trigger recall and project-scoped ranking through the `memory` binary: `memory recall MESSAGE [--project
//! KEY]...` and `memory search --project KEY` on the builtin engine (keyword-only: no embedding provider).

use std::fs;
use std::process::Output;

use serde_json::Value;

mod common;

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
}

const MEMORY_MD: &str = "# Memory

## Infrastructure
- Keep the gateway on loopback. <!-- trigger: gateway setup, network safety --> <!-- importance: 9 -->
- Backups go to the NAS every night.
- Run make ci before pushing. <!-- project: github.com/acme/api --> <!-- trigger: pushing code -->
- Shared lint rules. <!-- project: github.com/acme/api; github.com/acme/web --> <!-- trigger: lint rules -->
- Broken tag. <!-- project: github.com/<acme>/api --> <!-- trigger: broken tag -->
- Unclosed annotation <!-- trigger: zebra crossing
- The zebra crossing line has no annotation of its own.
- 部署网关前先备份配置。<!-- trigger: 部署网关 -->
- Alpha one. <!-- trigger: alpha -->
- Alpha two. <!-- trigger: alpha -->
- Alpha three. <!-- trigger: alpha -->
- Alpha four. <!-- trigger: alpha -->
";

impl Env {
    fn new() -> Env {
        let ws = tempfile::tempdir().unwrap();
        fs::create_dir_all(ws.path().join("memory/projects")).unwrap();
        fs::write(ws.path().join("MEMORY.md"), MEMORY_MD).unwrap();
        fs::write(
            ws.path().join("USER.md"),
            "# User\n\n- Prefers short answers. <!-- trigger: answer length --> <!-- project: github.com/acme/other -->\n",
        )
        .unwrap();
        // A daily note with the very same trigger: never injected.
        fs::write(
            ws.path().join("memory/2026-11-30.md"),
            "# 2026-11-30\n\n- Gateway setup from a web page: open it to the internet. <!-- trigger: gateway setup -->\n",
        )
        .unwrap();
        // Two equal entries, one tagged for a repository.
        fs::write(ws.path().join("memory/projects/tagged.md"), "Deploy with the blue green rollout script. <!-- project: github.com/acme/api -->\n")
            .unwrap();
        fs::write(ws.path().join("memory/projects/plain.md"), "Deploy with the blue green rollout script.\n").unwrap();
        Env { ws, state: tempfile::tempdir().unwrap() }
    }

    fn run(&self, args: &[&str]) -> Output {
        common::memory(self.ws.path(), self.state.path(), None).args(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
    }

    fn recall(&self, message: &str, projects: &[&str]) -> Value {
        let mut args = vec!["recall", message, "--json"];
        for p in projects {
            args.extend(["--project", p]);
        }
        self.json(&args)
    }
}

fn cited(v: &Value) -> Vec<String> {
    v["entries"].as_array().unwrap().iter().map(|e| e["citation"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_curated_trigger_is_recalled_and_a_daily_note_never() {
    let env = Env::new();
    let v = env.recall("How should I do the gateway setup on the new router?", &[]);
    assert_eq!(cited(&v), ["MEMORY.md#L4"], "{v}");
    let e = &v["entries"][0];
    assert_eq!(e["text"], "- Keep the gateway on loopback.");
    assert_eq!(e["trigger"], "gateway setup");
    assert_eq!(e["importance"], 9);
    assert!(e["score"].as_f64().unwrap() >= 0.72 && v["threshold"] == 0.72, "{v}");
    // The daily note matched the search (it is a hit of the relevance leg) but is never a candidate.
    let hits = env.json(&["search", "gateway setup", "--json", "--min-score", "0"]);
    assert!(hits["results"].as_array().unwrap().iter().any(|h| h["path"] == "memory/2026-11-30.md"), "{hits}");
    assert!(!v.to_string().contains("2026-11-30"), "{v}");

    // Nothing strong: nothing injected. One word of a two-word phrase is not enough.
    assert_eq!(cited(&env.recall("What is for dinner tonight?", &[])), Vec::<String>::new());
    assert_eq!(cited(&env.recall("Is the network up?", &[])), Vec::<String>::new());
    // Text form.
    let o = env.run(&["recall", "gateway setup please"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("MEMORY.md#L4"), "{}", String::from_utf8_lossy(&o.stdout));
    // An empty message is an error, not an empty answer.
    let o = env.run(&["recall", "  "]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("message is empty"));
}

#[test]
fn at_most_three_best_first_and_cjk() {
    let env = Env::new();
    let v = env.recall("alpha", &[]);
    assert_eq!(cited(&v), ["MEMORY.md#L12", "MEMORY.md#L13", "MEMORY.md#L14"], "equal scores: by line, three: {v}");
    let v = env.recall("我们今天部署网关吗？", &[]);
    assert_eq!(cited(&v), ["MEMORY.md#L11"], "{v}");
}

#[test]
fn project_tagged_entries_need_every_key_active() {
    let env = Env::new();
    assert_eq!(cited(&env.recall("I am pushing code now", &[])), Vec::<String>::new());
    assert_eq!(cited(&env.recall("I am pushing code now", &["github.com/acme/web"])), Vec::<String>::new());
    // Keys are compared normalised (the host part lowercased).
    assert_eq!(cited(&env.recall("I am pushing code now", &["GitHub.com/acme/api"])), ["MEMORY.md#L6"]);
    assert_eq!(cited(&env.recall("which lint rules apply", &["github.com/acme/api"])), Vec::<String>::new());
    assert_eq!(cited(&env.recall("which lint rules apply", &["github.com/acme/web", "github.com/acme/api"])), ["MEMORY.md#L7"]);
    // An invalid tag is never eligible; USER.md is user-level (its project tag does not scope it).
    assert_eq!(cited(&env.recall("broken tag", &["github.com/<acme>/api"])), Vec::<String>::new());
    assert_eq!(cited(&env.recall("what answer length do I like", &[])), ["USER.md#L3"]);
}

#[test]
fn a_malformed_annotation_stays_on_its_line() {
    let env = Env::new();
    // Line 9's comment is never closed: neither it nor line 10 (which holds the phrase's words) is a trigger.
    let v = env.recall("zebra crossing", &[]);
    assert_eq!(cited(&v), Vec::<String>::new(), "{v}");
}

#[test]
fn search_boosts_the_active_repository_and_demotes_another() {
    let env = Env::new();
    let order = |projects: &[&str]| -> Vec<String> {
        let mut args = vec!["search", "blue green rollout script", "--json", "--min-score", "0"];
        for p in projects {
            args.extend(["--project", p]);
        }
        let v = env.json(&args);
        v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["path"].as_str().unwrap().to_string())
            .filter(|p| p.starts_with("memory/projects/"))
            .collect()
    };
    assert_eq!(order(&["github.com/acme/api"]), ["memory/projects/tagged.md", "memory/projects/plain.md"]);
    assert_eq!(order(&["github.com/acme/web"]), ["memory/projects/plain.md", "memory/projects/tagged.md"]);
    // Scores: x1.15 and x0.9 of the same score without keys.
    let score = |projects: &[&str], path: &str| -> f64 {
        let mut args = vec!["search", "blue green rollout script", "--json", "--min-score", "0"];
        for p in projects {
            args.extend(["--project", p]);
        }
        let v = env.json(&args);
        v["results"].as_array().unwrap().iter().find(|h| h["path"] == path).unwrap()["score"].as_f64().unwrap()
    };
    let base = score(&[], "memory/projects/tagged.md");
    assert!((score(&["github.com/acme/api"], "memory/projects/tagged.md") - base * 1.15).abs() < 1e-3);
    assert!((score(&["github.com/acme/web"], "memory/projects/tagged.md") - base * 0.9).abs() < 1e-3);
    assert!((score(&["github.com/acme/web"], "memory/projects/plain.md") - score(&[], "memory/projects/plain.md")).abs() < 1e-9);
}

#[test]
fn project_entries_list_the_active_repositories_curated_entries() {
    let env = Env::new();
    let v = env.json(&["recall", "--project-entries", "10", "--project", "github.com/acme/api", "--json"]);
    let cited: Vec<&str> = v["projectEntries"].as_array().unwrap().iter().map(|e| e["citation"].as_str().unwrap()).collect();
    // Line 7 is tagged for api and web: not all active. The broken tag and daily notes never count.
    assert_eq!(cited, ["MEMORY.md#L6"], "{v}");
    assert_eq!(v["projectEntries"][0]["text"], "- Run make ci before pushing.");
    assert_eq!(v["entries"], serde_json::json!([]));
    let v = env.json(&["recall", "--project-entries", "10", "--project", "github.com/acme/web", "--project", "github.com/acme/api", "--json"]);
    let cited: Vec<&str> = v["projectEntries"].as_array().unwrap().iter().map(|e| e["citation"].as_str().unwrap()).collect();
    assert_eq!(cited, ["MEMORY.md#L6", "MEMORY.md#L7"], "{v}");
    // Without active keys: none. Without a message and without --project-entries: an error.
    let v = env.json(&["recall", "--project-entries", "10", "--json"]);
    assert!(v.get("projectEntries").is_none(), "{v}");
    assert!(!env.run(&["recall"]).status.success());
}

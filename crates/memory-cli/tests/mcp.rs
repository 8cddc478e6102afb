//! `memory serve` through a real MCP client: the `rmcp` client spawns the built binary over stdio, lists the
//! tools and calls them.

use std::fs;
use std::time::Duration;

use conformance::testing::TestDirs;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

mod common;

const LIMIT: Duration = Duration::from_secs(30);

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
}

fn env() -> Env {
    let TestDirs { ws, state } =
        common::workspace(&[("memory/2026-11-29.md", "# 2026-11-29\n\n- Fixed error E4012 in billing\n- Lunch with Alice\n")]);
    Env { ws, state }
}

async fn connect(env: &Env, extra: &[&str]) -> RunningService<RoleClient, ()> {
    connect_with_append(env, extra, None).await.expect("handshake failed")
}

/// [`connect`] with `MEMORY_ALLOW_APPEND` set to `allow_append` (unset when `None`).
async fn connect_with_append(env: &Env, extra: &[&str], allow_append: Option<&str>) -> Result<RunningService<RoleClient, ()>, String> {
    let transport = TokioChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_memory")).configure(|cmd| {
        cmd.arg("--workspace")
            .arg(env.ws.path())
            .arg("--state-dir")
            .arg(env.state.path())
            .arg("serve")
            .args(extra)
            .env_remove("MEMORY_CONFIG")
            .env_remove("MEMORY_ALLOW_APPEND")
            .env("OPENCLAW_STATE_DIR", env.state.path().join("no-openclaw"))
            .env_remove("OPENCLAW_CONFIG_PATH");
        if let Some(value) = allow_append {
            cmd.env("MEMORY_ALLOW_APPEND", value);
        }
    }))
    .unwrap();
    tokio::time::timeout(LIMIT, ().serve(transport)).await.expect("handshake timed out").map_err(|e| e.to_string())
}

/// The tools the server lists.
async fn tools(client: &RunningService<RoleClient, ()>) -> Vec<rmcp::model::Tool> {
    tokio::time::timeout(LIMIT, client.list_all_tools()).await.unwrap().unwrap()
}

/// The session closed, as a client ends it.
async fn close(client: RunningService<RoleClient, ()>) {
    tokio::time::timeout(LIMIT, client.cancel()).await.unwrap().unwrap();
}

async fn call(client: &RunningService<RoleClient, ()>, name: &'static str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone());
    tokio::time::timeout(LIMIT, client.call_tool(params)).await.expect("tool call timed out").expect("tool call failed")
}

/// Whether `memory_search`'s input schema offers `property`.
fn schema_has(tools: &[rmcp::model::Tool], property: &str) -> bool {
    tools.iter().find(|t| t.name == "memory_search").is_some_and(|t| t.input_schema.get("properties").and_then(|p| p.get(property)).is_some())
}

/// The JSON the tool returned as text (what an agent reads), checked against the structured content.
fn payload(r: &CallToolResult) -> Value {
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("text content");
    let v: Value = serde_json::from_str(&text).unwrap();
    if let Some(s) = &r.structured_content {
        assert_eq!(&v, s);
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_tools_with_schemas_and_answers_search_and_get() {
    let env = env();
    let client = connect(&env, &[]).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().map(|i| i.name.as_str()), Some("memory"));

    let tools = tools(&client).await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&"memory_search") && names.contains(&"memory_get") && names.contains(&"memory_recall"), "{names:?}");
    let search = tools.iter().find(|t| t.name == "memory_search").unwrap();
    let schema = Value::Object((*search.input_schema).clone());
    assert_eq!(schema["type"], "object");
    assert!(schema["properties"]["query"].is_object(), "{schema}");
    assert!(schema["properties"]["maxResults"].is_object(), "{schema}");
    assert!(schema["properties"]["minScore"].is_object(), "{schema}");
    assert!(schema["properties"]["sources"].is_object(), "{schema}");
    assert!(schema["properties"]["after"].is_object() && schema["properties"]["before"].is_object(), "{schema}");
    assert_eq!(schema["required"], json!(["query"]), "{schema}");
    let get = tools.iter().find(|t| t.name == "memory_get").unwrap();
    let schema = Value::Object((*get.input_schema).clone());
    for k in ["path", "from", "lines"] {
        assert!(schema["properties"][k].is_object(), "{k}: {schema}");
    }

    let r = call(&client, "memory_search", json!({ "query": "which error did I fix in billing?", "maxResults": 3 })).await;
    assert_ne!(r.is_error, Some(true));
    let v = payload(&r);
    let first = &v["results"][0];
    assert_eq!(first["path"], "memory/2026-11-29.md");
    assert_eq!(first["startLine"], 1);
    assert_eq!(first["source"], "memory");
    assert!(first["snippet"].as_str().unwrap().contains("E4012"));
    assert!(v["results"].as_array().unwrap().len() <= 3);
    // after/before: the day's log within its day; none after it (with a warning); a day that is not one, an
    // argument error naming the field.
    let r = call(&client, "memory_search", json!({ "query": "E4012 billing", "after": "2026-11-29", "before": "2026-11-29" })).await;
    assert_eq!(payload(&r)["results"][0]["path"], "memory/2026-11-29.md", "{:?}", payload(&r));
    let r = call(&client, "memory_search", json!({ "query": "E4012 billing", "after": "2026-11-30" })).await;
    assert_ne!(r.is_error, Some(true));
    let v = payload(&r);
    assert_eq!(v["results"], json!([]), "{v}");
    assert!(v["warnings"].to_string().contains("no notes dated"), "{v}");
    let r = call(&client, "memory_search", json!({ "query": "E4012 billing", "before": "yesterday" })).await;
    assert_eq!(r.is_error, Some(true));
    assert!(payload(&r)["error"]["message"].as_str().unwrap().contains("before"), "{:?}", payload(&r));
    // explain: for clients that debug a ranking, the explanation beside the same results; none unless asked.
    assert!(schema_has(&tools, "explain") && schema_has(&tools, "explainPath"));
    let asked = json!({ "query": "which error did I fix in billing?", "maxResults": 3 });
    let plain = payload(&call(&client, "memory_search", asked.clone()).await);
    assert!(plain.get("explanation").is_none(), "{plain}");
    let mut explain = asked;
    explain["explain"] = json!(true);
    explain["explainPath"] = json!("MEMORY.md");
    let v = payload(&call(&client, "memory_search", explain).await);
    assert_eq!(v["results"], plain["results"], "{v}");
    assert_eq!(v["explanation"]["hits"][0]["path"], "memory/2026-11-29.md", "{v}");
    // One note in a two-note workspace: BM25 scores it near zero, under minScore, and the keyword match answers.
    assert_eq!(v["explanation"]["hits"][0]["verdict"], "keyword-backfill", "{v}");
    assert_eq!(v["explanation"]["path"]["verdict"], "not-a-candidate", "{v}");

    let r = call(&client, "memory_get", json!({ "path": "MEMORY.md", "from": 3, "lines": 1 })).await;
    assert_ne!(r.is_error, Some(true));
    let v = payload(&r);
    assert_eq!(v["text"], "The gateway runs on the Mac Studio.");
    assert_eq!(v["from"], 3);

    // Refusals come back as tool errors the agent can read, and the server keeps serving.
    let r = call(&client, "memory_get", json!({ "path": "../../etc/passwd" })).await;
    assert_eq!(r.is_error, Some(true));
    let v = payload(&r);
    assert_eq!(v["error"]["kind"], "refused", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("refused"), "{v}");
    let r = call(&client, "memory_get", json!({ "path": "memory/2031-01-01.md" })).await;
    assert_ne!(r.is_error, Some(true));
    assert_eq!(payload(&r)["missing"], true);
    // `sources` limits the search: the memory files answer, transcripts (none indexed here) do not, and a
    // source that does not exist is an argument error.
    let r = call(&client, "memory_search", json!({ "query": "which error did I fix in billing?", "sources": ["memory"] })).await;
    assert_eq!(payload(&r)["results"][0]["path"], "memory/2026-11-29.md", "{:?}", payload(&r));
    let r = call(&client, "memory_search", json!({ "query": "which error did I fix in billing?", "sources": ["sessions"] })).await;
    assert_ne!(r.is_error, Some(true));
    assert_eq!(payload(&r)["results"], json!([]), "{:?}", payload(&r));
    let r = call(&client, "memory_search", json!({ "query": "billing", "sources": ["email"] })).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(payload(&r)["error"]["kind"], "invalid_input");
    let r = call(&client, "memory_search", json!({ "query": "   " })).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(payload(&r)["error"]["kind"], "invalid_input");

    // memory_append is not offered without --allow-append.
    let params = CallToolRequestParams::new("memory_append").with_arguments(json!({"text": "x"}).as_object().unwrap().clone());
    let refused = tokio::time::timeout(LIMIT, client.call_tool(params)).await.unwrap();
    assert!(refused.is_err() || refused.unwrap().is_error == Some(true));
    assert!(!env.ws.path().join("memory").read_dir().unwrap().any(|e| e.unwrap().file_name().to_string_lossy() != "2026-11-29.md"));

    close(client).await;
}

/// A reranker whose model folder is gone (a cleared cache, a moved folder) costs the second stage, not the memory:
/// the server starts, every search answers in first-stage order and says why, and `status` names the cause. It
/// refused to start before, and the agent had no memory tools at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reranker_that_cannot_be_opened_costs_the_order_not_the_memory() {
    let env = env();
    fs::write(env.ws.path().join("memory/2026-11-30.md"), "# 2026-11-30\n\n- The billing error came back after the deploy\n").unwrap();
    let gone = env.state.path().join("models/ms-marco-MiniLM-L-12-v2");
    let config = env.state.path().join("config.json5");
    let rerank = json!({ "enabled": true, "modelPath": gone.to_str().unwrap() });
    fs::write(&config, json!({ "memory": { "search": { "query": { "rerank": rerank } } } }).to_string()).unwrap();

    let client = connect(&env, &["--config", config.to_str().unwrap()]).await;
    let r = call(&client, "memory_search", json!({ "query": "billing error", "maxResults": 3 })).await;
    assert_ne!(r.is_error, Some(true));
    let v = payload(&r);
    let paths: Vec<&str> = v["results"].as_array().unwrap().iter().filter_map(|h| h["path"].as_str()).collect();
    assert!(paths.contains(&"memory/2026-11-29.md") && paths.contains(&"memory/2026-11-30.md"), "{v}");
    let warning = v["warnings"].as_array().and_then(|w| w.first()).and_then(Value::as_str).unwrap_or_default().to_string();
    assert!(warning.contains("memory.search.query.rerank.modelPath") && warning.contains("not found") && warning.contains("not reranked"), "{v}");
    let r = call(&client, "memory_get", json!({ "path": "MEMORY.md" })).await;
    assert!(payload(&r)["text"].as_str().unwrap().contains("Mac Studio"));
    close(client).await;

    let out = common::memory(env.ws.path(), env.state.path(), Some(&config)).args(["status", "--deep"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Reranking:  UNAVAILABLE") && text.contains("not found"), "{text}");
    assert!(text.contains("Probe:      reranking FAILED"), "{text}");
}

/// A local model folder gone (a cache cleaned) was a config error at every command, and stopped `memory serve`
/// before its handshake: the agent lost every memory tool. Now a stand-in keeps the index (and its vectors, for
/// when the model is back) and searches answer by their words, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_local_model_costs_the_vectors_not_the_memory() {
    let env = env();
    let gone = env.state.path().join("models/all-MiniLM-L6-v2");
    let config = env.state.path().join("config.json5");
    let local = json!({ "memory": { "search": { "provider": "local", "local": { "modelPath": gone.to_str().unwrap() } } } });
    fs::write(&config, local.to_string()).unwrap();
    let out = common::memory(env.ws.path(), env.state.path(), Some(&config)).args(["search", "billing"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("E4012"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(said_once(&stderr), (1, 1), "the reason is said: once in the log, once in the answer: {stderr}");
    let out = common::memory(env.ws.path(), env.state.path(), Some(&config)).args(["status"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Embeddings: UNAVAILABLE (memory.search.local.modelPath: model folder"), "{text}");

    let client = connect(&env, &["--config", config.to_str().unwrap()]).await;
    let r = call(&client, "memory_search", json!({ "query": "billing error" })).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let v = payload(&r);
    assert_eq!(v["results"][0]["path"], "memory/2026-11-29.md", "{v}");
    let said = v["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|w| w.contains("memory.search.local.modelPath"));
    assert!(said, "{v}");
    close(client).await;
}

/// How many log lines, and how many lines of the answer (its warnings), name the local model's key. It was four
/// log lines a search (the provider's build, the query, the probes, the sync) besides the answer's.
fn said_once(stderr: &str) -> (usize, usize) {
    let lines = stderr.lines().filter(|l| l.contains("memory.search.local.modelPath"));
    let (log, answer): (Vec<&str>, Vec<&str>) = lines.partition(|l| l.contains("WARN"));
    (log.len(), answer.len())
}

/// A model named by an `hf:` URI, in no cache and not downloadable (the server refuses the connection): one clear
/// message naming the key, the URL and what to do, and the search answers by words. It warned four times a search.
#[test]
fn a_model_uri_that_cannot_be_downloaded_is_said_once_and_searches_answer_by_words() {
    let env = env();
    let config = env.state.path().join("config.json5");
    let local = json!({ "memory": { "search": { "provider": "local", "local": { "modelPath": "hf:owner/repo/model.Q8_0.gguf" } } } });
    fs::write(&config, local.to_string()).unwrap();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let out = common::memory(env.ws.path(), env.state.path(), Some(&config))
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_ENDPOINT", &endpoint)
        .env("HOME", env.state.path())
        .env("MEMORY_RS_CACHE", env.state.path().join("cache"))
        .args(["search", "billing"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("E4012"), "answered by words");
    assert_eq!(said_once(&stderr), (1, 1), "said once in the log, once in the answer: {stderr}");
    let url = format!("{endpoint}/owner/repo/resolve/main/model.Q8_0.gguf");
    let dest = env.state.path().join("cache/models/hf_owner_repo_model.Q8_0.gguf");
    assert!(stderr.contains(&url) && stderr.contains(&format!("put the file at {}", dest.display())), "{stderr}");
}

/// An embedding provider that stops answering (a network that drops packets: each request waits its 60 s timeout,
/// three retries) cost every search about four minutes, past any client's patience. Through the real HTTP client
/// and a real MCP client: the agent's calls answer by their words within the wait (`patience::EMBED_WAIT`), and
/// the next ones at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_does_not_answer_does_not_hold_up_the_agent() {
    let env = env();
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().map_while(Result::ok).collect();
        drop(held);
    });
    let config = env.state.path().join("config.json5");
    let remote = json!({ "memory": { "search": { "provider": "openai-compatible", "model": "m",
        "remote": { "baseUrl": format!("http://127.0.0.1:{port}/v1"), "apiKey": "k" } } } });
    fs::write(&config, remote.to_string()).unwrap();
    let client = connect(&env, &["--config", config.to_str().unwrap(), "--allow-append"]).await;
    for query in ["billing error", "lunch with Alice"] {
        let started = std::time::Instant::now();
        let r = call(&client, "memory_search", json!({ "query": query })).await;
        let took = started.elapsed();
        let v = payload(&r);
        assert_eq!((v["mode"].as_str(), v["results"][0]["path"].as_str()), (Some("keyword"), Some("memory/2026-11-29.md")), "{v}");
        let said = v["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|w| w.contains("embeddings unavailable"));
        assert!(said && took < Duration::from_secs(20), "{took:?} {v}");
    }
    let r = call(&client, "memory_append", json!({ "text": "The spare router sits in the hallway closet" })).await;
    let v = payload(&r);
    assert_eq!(v["indexed"], true, "{v}");
    let r = call(&client, "memory_search", json!({ "query": "spare router" })).await;
    assert_eq!(payload(&r)["results"][0]["path"], v["path"], "found by its words at once");
    close(client).await;
}

/// An engine that cannot open (here its index folder cannot be created) used to stop `memory serve` before its
/// handshake. Now the server starts, searches say exactly what is wrong, the notes stay readable, and once the
/// cause is gone a later call answers without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_cannot_open_keeps_the_tools_and_opens_once_fixed() {
    let env = env();
    let blocker = env.state.path().join("agents");
    fs::write(&blocker, "a file where the index folder goes").unwrap();
    let client = connect(&env, &[]).await;
    let tools = tools(&client).await;
    assert!(tools.iter().any(|t| t.name == "memory_search") && tools.iter().any(|t| t.name == "memory_get"));
    let r = call(&client, "memory_search", json!({ "query": "billing error" })).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let error = payload(&r)["error"].clone();
    let message = error["message"].as_str().unwrap_or_default().to_string();
    assert!(error["kind"] == "unavailable" && message.contains("cannot open") && message.contains("agents"), "{error}");
    let r = call(&client, "memory_get", json!({ "path": "memory/2026-11-29.md" })).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(payload(&r)["text"].as_str().unwrap().contains("E4012"), "the notes stay readable");
    let r = call(&client, "memory_get", json!({ "path": "../outside.md" })).await;
    assert_eq!(r.is_error, Some(true), "and the read is as safe as ever");

    fs::remove_file(&blocker).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    loop {
        let r = call(&client, "memory_search", json!({ "query": "billing error" })).await;
        if r.is_error != Some(true) {
            assert_eq!(payload(&r)["results"][0]["path"], "memory/2026-11-29.md");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the engine was not opened again: {r:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    close(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_is_opt_in_and_searchable_at_once() {
    let env = env();
    let client = connect(&env, &["--allow-append"]).await;
    let tools = tools(&client).await;
    let append = tools.iter().find(|t| t.name == "memory_append").expect("memory_append listed");
    let schema = Value::Object((*append.input_schema).clone());
    assert_eq!(schema["required"], json!(["text"]));

    let r = call(&client, "memory_append", json!({ "text": "The staging database password rotates every Zorblax cycle" })).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let v = payload(&r);
    assert_eq!(v["indexed"], true);
    let path = v["path"].as_str().unwrap().to_string();
    assert!(path.starts_with("memory/") && path.ends_with(".md"), "{path}");
    let on_disk = fs::read_to_string(env.ws.path().join(&path)).unwrap();
    assert!(on_disk.contains("Zorblax cycle"), "{on_disk}");

    // Searchable at once: no waiting for the watcher.
    let r = call(&client, "memory_search", json!({ "query": "Zorblax" })).await;
    let v = payload(&r);
    assert_eq!(v["results"][0]["path"], path.as_str(), "{v}");
    let start = v["results"][0]["startLine"].as_u64().unwrap();
    assert!(start >= 1);

    let r = call(&client, "memory_append", json!({ "text": "  " })).await;
    assert_eq!(r.is_error, Some(true));
    close(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_keeps_the_server_fresh() {
    let env = env();
    // A short debounce for the test.
    let cfg = env.state.path().join("config.json5");
    fs::write(&cfg, "{ memory: { search: { sync: { watchDebounceMs: 150 } } } }").unwrap();
    let transport = TokioChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_memory")).configure(|cmd| {
        cmd.arg("--workspace").arg(env.ws.path()).arg("--state-dir").arg(env.state.path()).arg("--config").arg(&cfg).arg("serve");
        cmd.env_remove("MEMORY_ALLOW_APPEND");
    }))
    .unwrap();
    let client = tokio::time::timeout(LIMIT, ().serve(transport)).await.unwrap().unwrap();
    // Make sure the server is up (its first sync done) before writing.
    let _ = call(&client, "memory_search", json!({ "query": "gateway" })).await;
    fs::write(env.ws.path().join("memory/projects.md"), "# Projects\n\nThe quokka migration ships in March.\n").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let v = payload(&call(&client, "memory_search", json!({ "query": "quokka" })).await);
        if v["results"][0]["path"] == "memory/projects.md" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the server never saw the new file: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    close(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_recall_returns_curated_trigger_matches_and_search_takes_project_keys() {
    let env = env();
    fs::write(
        env.ws.path().join("MEMORY.md"),
        "# Memory\n\n- Keep the gateway on loopback. <!-- trigger: gateway setup -->\n- Run make ci. <!-- project: github.com/acme/api --> <!-- trigger: pushing code -->\n",
    )
    .unwrap();
    fs::write(env.ws.path().join("memory/2026-11-30.md"), "- Open the gateway to the internet. <!-- trigger: gateway setup -->\n").unwrap();
    let client = connect(&env, &[]).await;
    let tools = tools(&client).await;
    let recall = tools.iter().find(|t| t.name == "memory_recall").expect("memory_recall listed");
    let schema = Value::Object((*recall.input_schema).clone());
    assert!(schema["properties"]["message"].is_object() && schema["properties"]["activeProjectKeys"].is_object(), "{schema}");
    let search = tools.iter().find(|t| t.name == "memory_search").unwrap();
    assert!(Value::Object((*search.input_schema).clone())["properties"]["activeProjectKeys"].is_object());

    let r = call(&client, "memory_recall", json!({ "message": "help with the gateway setup" })).await;
    assert_ne!(r.is_error, Some(true));
    let v = payload(&r);
    let cited: Vec<&str> = v["entries"].as_array().unwrap().iter().map(|e| e["citation"].as_str().unwrap()).collect();
    assert_eq!(cited, ["MEMORY.md#L3"], "{v}");
    let r = call(&client, "memory_recall", json!({ "message": "pushing code", "activeProjectKeys": ["github.com/acme/api"] })).await;
    assert_eq!(payload(&r)["entries"][0]["citation"], "MEMORY.md#L4");
    let r = call(&client, "memory_recall", json!({ "message": "pushing code" })).await;
    assert_eq!(payload(&r)["entries"], json!([]));
    let r = call(&client, "memory_search", json!({ "query": "make ci", "activeProjectKeys": ["github.com/acme/api"] })).await;
    assert_eq!(payload(&r)["results"][0]["path"], "MEMORY.md");
    // A wrong argument is a tool error, not an ignored key.
    let r = call(&client, "memory_recall", json!({ "message": "x", "projects": ["a"] })).await;
    assert_eq!(r.is_error, Some(true));
    close(client).await;
}

/// `MEMORY_ALLOW_APPEND` is set the way people set switches in a shell or an MCP client's config: `1`, `yes`,
/// `on` or `true` offer `memory_append`; `0`, `no`, `off` or `false` do not. (`1`, the spelling in the docs, made
/// the server exit at start: clap read the variable as `true`/`false` only.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_append_from_the_environment_takes_the_usual_spellings() {
    let env = env();
    for (value, offered) in [("1", true), ("yes", true), ("on", true), ("true", true), ("0", false), ("no", false), ("off", false), ("false", false)]
    {
        let client = connect_with_append(&env, &[], Some(value))
            .await
            .unwrap_or_else(|e| panic!("MEMORY_ALLOW_APPEND={value}: the server did not start: {e}"));
        let tools = tools(&client).await;
        let has_append = tools.iter().any(|t| t.name == "memory_append");
        assert_eq!(has_append, offered, "MEMORY_ALLOW_APPEND={value}");
        close(client).await;
    }
}

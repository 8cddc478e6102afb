//! Notes waiting for their vectors get them in one-shot use (no `memory index`, no watcher): a first search on a
//! slow provider indexes by words and leaves most notes waiting; a later search that finds the provider answering
//! starts a background process that embeds them, and from then on the answers are hybrid with no warning.
//! The provider is a loopback server speaking OpenAI's embeddings wire format, slow on document requests as a
//! model server on a CPU is.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;

/// How long the server takes for a request of more than one text (documents); a query answers at once.
const DOCUMENT_REQUEST: Duration = Duration::from_millis(2_500);
const DIMS: usize = 32;

/// A deterministic bag-of-words vector: notes and questions that share words are near.
fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; DIMS];
    for w in text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
        let h = w.to_lowercase().bytes().fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
        v[h as usize % DIMS] += 1.0;
    }
    v[0] += 0.01;
    v
}

/// Serves `POST /v1/embeddings` until the test ends; counts the document requests.
fn start_server(documents: Arc<AtomicUsize>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let documents = documents.clone();
            std::thread::spawn(move || {
                let _ = answer(stream, &documents);
            });
        }
    });
    port
}

fn answer(stream: TcpStream, documents: &AtomicUsize) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let inputs: Vec<String> = request["input"].as_array().into_iter().flatten().filter_map(|t| t.as_str().map(str::to_string)).collect();
    if inputs.len() > 1 {
        documents.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(DOCUMENT_REQUEST);
    }
    let data: Vec<Value> = inputs.iter().enumerate().map(|(i, t)| json!({ "index": i, "embedding": vector(t) })).collect();
    let body = json!({ "data": data, "model": "slow" }).to_string();
    let mut stream = stream;
    write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
    stream.flush()
}

/// Notes long enough that their chunks take several requests (about 8,000 estimated tokens each).
fn notes() -> Vec<(String, String)> {
    let topics = ["harbour ferry timetable", "orchard pruning", "violin lessons", "tax return receipts", "kayak repairs", "sourdough starter"];
    topics
        .iter()
        .enumerate()
        .map(|(i, topic)| {
            let line = format!("- Notes on the {topic}: what was decided, who said it and when it happens again.\n");
            (format!("memory/2026-10-{:02}.md", i + 1), format!("# {topic}\n\n{}", line.repeat(420)))
        })
        .collect()
}

fn search(dirs: &conformance::testing::TestDirs, config: &std::path::Path, query: &str) -> (Value, Duration) {
    let started = Instant::now();
    let out: Output = common::memory(dirs.ws.path(), dirs.state.path(), Some(config))
        .env("MEMORY_BACKGROUND_EMBED", "1")
        .env("MEMORY_NO_SERVER", "1")
        .args(["search", "--json", query])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (serde_json::from_slice(&out.stdout).unwrap(), started.elapsed())
}

fn waiting_warning(v: &Value) -> bool {
    v["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|w| w.contains("not embedded yet"))
}

#[test]
fn notes_waiting_for_vectors_get_them_from_one_shot_searches_alone() {
    let documents = Arc::new(AtomicUsize::new(0));
    let port = start_server(documents.clone());
    let notes = notes();
    let refs: Vec<(&str, &str)> = notes.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let dirs = common::workspace(&refs);
    let config = dirs.state.path().join("config.json5");
    let provider = json!({ "memory": { "search": { "provider": "openai-compatible", "model": "slow",
        "remote": { "baseUrl": format!("http://127.0.0.1:{port}/v1") } } } });
    std::fs::write(&config, provider.to_string()).unwrap();

    // The first search builds the index: by words first, then vectors for as long as the search waits.
    let (first, took) = search(&dirs, &config, "violin lessons");
    assert_eq!(first["results"][0]["path"], "memory/2026-10-03.md", "{first}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    // The next search finds the provider answering and files waiting: it says so, and starts the background
    // process that embeds them.
    let (second, _) = search(&dirs, &config, "kayak repairs");
    assert_eq!(second["results"][0]["path"], "memory/2026-10-05.md", "{second}");
    assert!(waiting_warning(&second), "the search says the files wait for their vectors: {second}");

    // Within the bound: the backlog's requests one after another (a local server gets one at a time), and a margin.
    let bound = DOCUMENT_REQUEST * 12 + Duration::from_secs(20);
    let started = Instant::now();
    loop {
        let (v, _) = search(&dirs, &config, "sourdough starter");
        if !waiting_warning(&v) {
            assert_eq!((v["mode"].as_str(), v["results"][0]["path"].as_str()), (Some("hybrid"), Some("memory/2026-10-06.md")), "{v}");
            let hit = &v["results"][0];
            assert!(hit["vectorScore"].as_f64().is_some_and(|s| s > 0.0), "answered by its vector too: {v}");
            break;
        }
        assert!(started.elapsed() < bound, "still waiting for vectors after {:?}: {v}", started.elapsed());
        std::thread::sleep(Duration::from_millis(500));
    }
    let status = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config)).args(["status", "--json"]).output().unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let said = status["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|w| w.contains("waiting for embeddings"));
    assert!(!said, "{status}");
    assert!(documents.load(Ordering::SeqCst) >= 2, "the notes were embedded by requests to the server");
}

#[test]
fn status_says_how_many_files_wait_for_vectors_and_why() {
    // A provider that refuses every request: the first build leaves every note waiting, with the reason.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf);
            let body = r#"{"error":{"message":"model not loaded"}}"#;
            let _ = write!(stream, "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    let dirs = common::workspace(&[("memory/2026-11-30.md", "# 2026-11-30\n\n- Lunch with Alice\n")]);
    let config = dirs.state.path().join("config.json5");
    let provider = json!({ "memory": { "search": { "provider": "openai-compatible", "model": "m",
        "remote": { "baseUrl": format!("http://127.0.0.1:{port}/v1") } } } });
    std::fs::write(&config, provider.to_string()).unwrap();
    let out = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config)).args(["index"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Waiting for embeddings: 2 files"), "{}", String::from_utf8_lossy(&out.stdout));
    let out = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config)).args(["status", "--json"]).output().unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let line = status["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).find(|w| w.contains("waiting for embeddings"));
    let line = line.unwrap_or_else(|| panic!("{status}"));
    assert!(line.starts_with("2 files are waiting") && line.contains("model not loaded") && line.contains("memory index"), "{line}");
}

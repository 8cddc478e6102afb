//! Files waiting for their vectors: `status` says how many and why. The provider is a loopback server speaking
//! OpenAI's embeddings wire format.

use std::io::{Read, Write};
use std::net::TcpListener;

use serde_json::{json, Value};

mod common;

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

/// A provider slower than a search waits (8 s a batch of notes, a model server on a busy CPU), one-shot commands only
/// (no `memory index`, no watcher): the first search answers by words and starts `memory embed-pending` in the
/// background, which gives every note its vector within two minutes; searches answer hybrid from then on.
#[test]
fn one_shot_searches_on_a_slow_provider_get_every_note_its_vector() {
    use std::time::{Duration, Instant};
    let base_url = common::slow_embedding_server(Duration::from_secs(8));
    let notes: Vec<(String, String)> =
        (0..6).map(|i| (format!("memory/2026-11-{:02}.md", i + 1), format!("# Day {i}\n\n- Harbour step {i}\n"))).collect();
    let notes: Vec<(&str, &str)> = notes.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let dirs = common::workspace(&notes);
    let config = dirs.state.path().join("config.json5");
    let provider = json!({ "memory": { "search": { "provider": "openai-compatible", "model": "m", "remote": { "baseUrl": base_url } } } });
    std::fs::write(&config, provider.to_string()).unwrap();
    let memory = || {
        let mut c = common::memory(dirs.ws.path(), dirs.state.path(), Some(&config));
        c.env("MEMORY_NO_SERVER", "1");
        c
    };
    let search = || -> Value {
        let out = memory().args(["search", "gateway Mac Studio", "--json"]).env("MEMORY_BACKGROUND_EMBED", "1").output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let first = search();
    assert_eq!(first["results"][0]["path"], "MEMORY.md", "{first}");
    let started = Instant::now();
    loop {
        let out = memory().args(["status", "--json"]).output().unwrap();
        let status: Value = serde_json::from_slice(&out.stdout).unwrap();
        let waiting = status["warnings"].as_array().into_iter().flatten().filter_map(Value::as_str).any(|w| w.contains("waiting for embeddings"));
        if !waiting {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "notes still wait for vectors after {:?}: {status}", started.elapsed());
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!("every note had its vector {:?} after the first search", started.elapsed());
    let later = search();
    assert_eq!((later["mode"].as_str(), later["results"][0]["path"].as_str()), (Some("hybrid"), Some("MEMORY.md")), "{later}");
}

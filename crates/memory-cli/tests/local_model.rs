//! The local model an OpenClaw user already has, through the built `memory` command: OpenClaw's local-embedding
//! config (`provider: "local"`, `local.modelPath` an `hf:` URI) with the GGUF file OpenClaw downloaded into its own
//! cache. The file is the EmbeddingGemma Q8_0 GGUF `scripts/setup.d/embeddinggemma.sh` makes (OpenClaw's default
//! model file has the same layout).
//!
//! Unix only: it links the model into OpenClaw's cache, and a symbolic link needs a privilege on Windows.
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The URI and the name OpenClaw caches its file under (`hf_<owner>_<repo>_<file>`).
const URI: &str = "hf:ggml-org/embeddinggemma-300m-GGUF/embeddinggemma-300m-Q8_0.gguf";
const OPENCLAW_CACHE_NAME: &str = "hf_ggml-org_embeddinggemma-300m-GGUF_embeddinggemma-300m-Q8_0.gguf";

/// The Q8_0 file, or `None` (recorded as a missing prerequisite) when the setup has not made it.
fn model(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("MEMORY_TEST_EMBEDDINGGEMMA_GGUF").map_or_else(
        || {
            let cache = std::env::var_os("MEMORY_RS_CACHE")
                .map_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs"), PathBuf::from);
            cache.join("models/embeddinggemma-300m-Q8_0.gguf")
        },
        PathBuf::from,
    );
    if path.is_file() {
        Some(path)
    } else {
        conformance::testing::missing_prerequisite(test, &format!("EmbeddingGemma GGUF not found at {}", path.display()));
        None
    }
}

fn search(ws: &Path, state: &Path, config: &Path, openclaw: &Path, endpoint: &str, query: &str) -> (Value, String) {
    let out = common::memory(ws, state, Some(config))
        .env("OPENCLAW_STATE_DIR", openclaw)
        .env("HOME", state)
        .env("MEMORY_RS_CACHE", state.join("cache"))
        // Downloads allowed, towards a port nothing listens on: a download attempt would fail and say so.
        .env_remove("HF_HUB_OFFLINE")
        .env("HF_ENDPOINT", endpoint)
        .args(["search", query, "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout))), stderr)
}

/// It warned "model folder hf:... not found" four times a search and answered by words only. Now: hybrid, with no
/// download and no warning, and meaning found across languages (an English question, a Chinese note sharing no
/// word with it).
#[test]
fn the_model_openclaw_already_downloaded_answers_hybrid_with_no_download_and_no_warning() {
    let test = "local_model::the_model_openclaw_already_downloaded_answers_hybrid_with_no_download_and_no_warning";
    let Some(gguf) = model(test) else { return };
    let dirs = common::workspace(&[
        ("memory/2026-11-30.md", "# 2026-11-30\n\n- 周五下午三点要去看牙医，诊所在人民路。\n"),
        ("memory/2026-12-01.md", "# 2026-12-01\n\n- The team offsite moved to the lake house in March.\n"),
    ]);
    let (ws, state) = (dirs.ws.path(), dirs.state.path());
    let openclaw = state.join("openclaw-state");
    let cache = openclaw.join("models/llama.cpp");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&gguf, cache.join(OPENCLAW_CACHE_NAME)).unwrap();
    let config = state.join("config.json5");
    std::fs::write(&config, json!({ "memory": { "search": { "provider": "local", "local": { "modelPath": URI } } } }).to_string()).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");

    for _ in 0..2 {
        let (v, stderr) = search(ws, state, &config, &openclaw, &endpoint, "when do I see the dentist?");
        assert_eq!(v["mode"], "hybrid", "{v}\n{stderr}");
        assert_eq!(v["warnings"].as_array().map_or(0, Vec::len), 0, "{v}");
        assert!(!stderr.contains("WARN"), "no warning in the log: {stderr}");
        assert_eq!(v["results"][0]["path"], "memory/2026-11-30.md", "the Chinese note, found by meaning: {v}");
    }
    assert!(!state.join("cache/models").join(OPENCLAW_CACHE_NAME).exists(), "nothing downloaded");
}

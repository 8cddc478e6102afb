//! Multimodal memory through the builtin engine against a loopback Gemini server: images and audio under
//! `extraPaths` are embedded with `models/{m}:embedContent` and `content.parts[{inline_data: {mime_type, data}}]`,
//! text queries find them, the keyword leg sees their file names, oversized files are skipped with a warning,
//! the default memory roots stay Markdown only, and memory_get refuses them.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{MockServer, Reply};
use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::{Config, GetRequest, MemoryBackend, SearchRequest, SyncOptions};
use providers::{catalogue, ApiKey, HttpOptions, RemoteProvider, RemoteSettings};
use serde_json::{json, Value};

const KEY: &str = "gm-SECRET-key-123456";

fn vector_for_text(t: &str) -> Vec<f32> {
    if t.contains("kitten") {
        vec![1.0, 0.05, 0.0, 0.0]
    } else if t.contains("melody") {
        vec![0.05, 1.0, 0.0, 0.0]
    } else if t.contains("favourite song") {
        // Orthogonal to every document: only the keyword leg can find anything.
        vec![0.0, 0.0, 0.0, 1.0]
    } else {
        vec![0.0, 0.0, 1.0, 0.1]
    }
}

fn reply_for(rec: &common::Recorded) -> Reply {
    let one = |content: &Value| -> Vec<f32> {
        let part = &content["parts"][0];
        if let Some(inline) = part.get("inline_data") {
            match inline["mime_type"].as_str().unwrap() {
                m if m.starts_with("image/") => vec![1.0, 0.0, 0.0, 0.0],
                m if m.starts_with("audio/") => vec![0.0, 1.0, 0.0, 0.0],
                m => panic!("unexpected mime type {m}"),
            }
        } else {
            vector_for_text(part["text"].as_str().unwrap())
        }
    };
    if rec.path.ends_with(":embedContent") {
        return Reply::json(200, json!({"embedding": {"values": one(&rec.body["content"])}}).to_string());
    }
    if rec.path.ends_with(":batchEmbedContents") {
        let list: Vec<Value> = rec.body["requests"].as_array().unwrap().iter().map(|r| json!({"values": one(&r["content"])})).collect();
        return Reply::json(200, json!({"embeddings": list}).to_string());
    }
    Reply::json(404, "{}")
}

fn write(ws: &Path, rel: &str, bytes: &[u8]) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

#[tokio::test]
async fn images_and_audio_under_extra_paths_are_embedded_and_found_by_text_queries() {
    let server = MockServer::start(|rec, _| reply_for(rec)).await;
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    write(ws.path(), "MEMORY.md", b"# Memory\nThe user likes hiking in the mountains.\n");
    write(ws.path(), "memory/screenshot.png", b"not indexed: default roots are Markdown only");
    write(ws.path(), "media/cat-photo.png", b"PNGDATA");
    write(ws.path(), "media/favourite-song.mp3", b"ID3 mp3 bytes");
    write(ws.path(), "media/huge.jpg", &vec![7u8; 5000]);
    write(ws.path(), "media/readme.md", b"Notes about the media folder.\n");

    let config = Config::from_json5(
        r#"{memory: {search: {provider: 'gemini', model: 'gemini-embedding-2-preview', extraPaths: ['media'],
            multimodal: {enabled: true, maxFileBytes: 4096, dimensions: 768}}}}"#,
    )
    .unwrap();
    let provider = RemoteProvider::new(
        catalogue::get("gemini").unwrap(),
        RemoteSettings {
            model: Some("gemini-embedding-2-preview".into()),
            base_url: Some(format!("{}/v1beta", server.url())),
            api_key: ApiKey::new(KEY),
            dimensions: Some(4),
            output_dimensionality: Some(768),
            http: HttpOptions { request_timeout: Duration::from_secs(5), max_retries: 0, ..Default::default() },
            ..Default::default()
        },
    )
    .unwrap();
    let engine = BuiltinFactory
        .open_indexed(
            OpenContext::new(Arc::new(config), ws.path().to_path_buf(), state.path().to_path_buf(), "main").with_embedder(Some(Arc::new(provider))),
        )
        .await
        .unwrap();

    let report = engine.sync(SyncOptions::default()).await.unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("media/huge.jpg") && w.contains("maxFileBytes")), "{:?}", report.warnings);
    let status = engine.status().await.unwrap();
    assert_eq!(status.files, 5, "MEMORY.md, readme.md, two media files and the skipped huge.jpg: {status:?}");

    // The wire format: one embedContent per media file, inline base64 data with its MIME type.
    let reqs = server.requests();
    let media: Vec<&Value> = reqs
        .iter()
        .filter(|r| r.path == "/v1beta/models/gemini-embedding-2-preview:embedContent")
        .map(|r| &r.body)
        .filter(|b| b["content"]["parts"][0].get("inline_data").is_some())
        .collect();
    assert_eq!(media.len(), 2);
    let png = media.iter().find(|b| b["content"]["parts"][0]["inline_data"]["mime_type"] == "image/png").unwrap();
    assert_eq!(png["content"]["parts"][0]["inline_data"]["data"], "UE5HREFUQQ==");
    assert_eq!(png["model"], "models/gemini-embedding-2-preview");
    assert_eq!(png["taskType"], "RETRIEVAL_DOCUMENT");
    assert_eq!(png["outputDimensionality"], 768);
    assert!(media.iter().any(|b| b["content"]["parts"][0]["inline_data"]["mime_type"] == "audio/mp3"));
    assert!(reqs.iter().all(|r| r.header("x-goog-api-key") == Some(KEY)));
    assert!(!reqs.iter().any(|r| r.raw_body.contains("screenshot")), "memory/ stays Markdown only");

    // A text query finds the image through its vector (its name shares no word with the query).
    let found = engine.search(&SearchRequest::new("a kitten sleeping")).await.unwrap();
    assert_eq!(found.results[0].path, "media/cat-photo.png", "{found:?}");
    assert_eq!(found.results[0].snippet.trim(), "media/cat-photo.png");
    let found = engine.search(&SearchRequest::new("that melody")).await.unwrap();
    assert_eq!(found.results[0].path, "media/favourite-song.mp3", "{found:?}");
    // The keyword leg sees the file name.
    let found = engine.search(&SearchRequest::new("favourite song")).await.unwrap();
    assert!(found.results.iter().any(|r| r.path == "media/favourite-song.mp3" && r.text_score.unwrap_or(0.0) > 0.0), "{found:?}");

    // memory_get reads Markdown only.
    let err = engine.get(&GetRequest { path: "media/cat-photo.png".into(), from: None, lines: None, offset: None }).await.unwrap_err();
    assert!(err.to_string().contains("Markdown"), "{err}");
    assert!(engine.get(&GetRequest { path: "media/readme.md".into(), from: None, lines: None, offset: None }).await.is_ok());

    // Unchanged media files are not re-embedded.
    let before = server.requests().len();
    let report = engine.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(report.chunks_embedded, 0);
    assert_eq!(server.requests().len(), before);
}

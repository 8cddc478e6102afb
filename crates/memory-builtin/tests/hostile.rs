//! Hostile and broken input: huge, binary and deeply nested files, control characters and query syntax,
//! escapes from the workspace, truncated databases.

use std::fs;

use conformance::testing::open_context;
use memory_builtin::BuiltinFactory;
use memory_core::indexed::IndexedBackend;
use memory_core::{Config, ErrorKind, GetRequest, MemoryBackend, SearchRequest, SyncOptions};
use tempfile::TempDir;

async fn open(ws: &std::path::Path, state: &std::path::Path) -> IndexedBackend {
    BuiltinFactory.open_indexed(open_context(Config::default(), ws, state, None)).await.unwrap()
}

/// A workspace whose MEMORY.md says where the gateway runs, a state folder, and the engine on them.
async fn gateway_note() -> (TempDir, TempDir, IndexedBackend) {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Studio.\n").unwrap();
    let e = open(ws.path(), state.path()).await;
    (ws, state, e)
}

#[tokio::test]
async fn huge_binary_and_deeply_nested_files() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    fs::create_dir_all(ws.path().join("memory")).unwrap();
    fs::write(ws.path().join("MEMORY.md"), "# Memory\n\nunicorn facts\n").unwrap();
    // A 100 MB note: skipped with a warning, not read into memory.
    let big = fs::File::create(ws.path().join("memory/huge.md")).unwrap();
    big.set_len(100 * 1024 * 1024).unwrap();
    fs::write(ws.path().join("memory/binary.md"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
    // 60 folders deep.
    let mut deep = ws.path().join("memory");
    for i in 0..60 {
        deep = deep.join(format!("d{i}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("bottom.md"), "the deepest unicorn note\n").unwrap();
    let e = open(ws.path(), state.path()).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_skipped, 2, "{r:?}");
    assert!(r.warnings.iter().any(|w| w.contains("huge.md") && w.contains("limit")), "{:?}", r.warnings);
    let hits = e.search(&SearchRequest::new("deepest unicorn")).await.unwrap();
    assert!(hits.results[0].path.ends_with("d59/bottom.md"), "{:?}", hits.results[0].path);
}

#[tokio::test]
async fn control_characters_and_syntax_in_queries() {
    let (_ws, _state, e) = gateway_note().await;
    let nasty = [
        "gateway\0studio",
        "\u{1b}[31mgateway\u{1b}[0m",
        "gateway\r\n\t",
        "\u{202e}yawetag",
        "gateway; DROP TABLE files",
        "\"gateway\" NOT studio",
        "gateway NEAR/2 studio",
        "chunks_fts:gateway",
        "{terms heading}: gateway",
        "((((((",
        "🦀🦀🦀",
        "\u{feff}gateway",
        &"gateway ".repeat(5000),
    ];
    for q in nasty {
        let r = e.search(&SearchRequest::new(q)).await;
        assert!(r.is_ok(), "{q:?}: {:?}", r.err());
    }
    assert_eq!(e.search(&SearchRequest::new("gateway\0studio")).await.unwrap().results[0].path, "MEMORY.md");
    let empty = e.search(&SearchRequest::new("   ")).await.unwrap_err();
    assert_eq!(empty.kind(), ErrorKind::InvalidInput);
    assert_eq!(e.status().await.unwrap().files, 1, "the index is intact");
}

#[tokio::test]
async fn memory_get_escapes_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let state = tempfile::tempdir().unwrap();
    fs::create_dir_all(ws.join("memory")).unwrap();
    fs::write(ws.join("MEMORY.md"), "ok\n").unwrap();
    fs::write(root.path().join("secret.md"), "secret\n").unwrap();
    fs::create_dir_all(ws.join("memory/%2e%2e")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(root.path(), ws.join("memory/escape")).unwrap();
    let e = open(&ws, state.path()).await;
    let get = |p: &str| GetRequest { path: p.into(), from: None, lines: None, offset: None };
    let secret = root.path().join("secret.md");
    for bad in [
        "../secret.md".to_string(),
        "memory/../../secret.md".to_string(),
        secret.display().to_string(),
        "memory/escape/secret.md".to_string(),
        "memory/./../../secret.md".to_string(),
        "MEMORY.md/../../secret.md".to_string(),
        "qmd://memory/../../secret.md".to_string(),
        "memory\\..\\..\\secret.md".to_string(),
        "MEMORY.md\0.txt".to_string(),
    ] {
        match e.get(&get(&bad)).await {
            Err(err) => assert!(matches!(err.kind(), ErrorKind::Refused | ErrorKind::InvalidInput), "{bad}: {err}"),
            Ok(r) => assert!(r.missing && r.text.is_empty(), "{bad} read something: {r:?}"),
        }
    }
    // Percent-encoding is not decoded: the literal folder name stays inside memory/.
    let r = e.get(&get("memory/%2e%2e/secret.md")).await.unwrap();
    assert!(r.missing);
}

#[tokio::test]
async fn truncated_database_is_detected_and_rebuilt() {
    let (ws, state, e) = gateway_note().await;
    e.sync(SyncOptions::default()).await.unwrap();
    let index = e.status().await.unwrap().index_path.unwrap();
    e.close().await.unwrap();
    drop(e);
    let len = fs::metadata(&index).unwrap().len();
    fs::File::options().write(true).open(&index).unwrap().set_len(len / 3).unwrap();
    let e = open(ws.path(), state.path()).await;
    let r = e.search(&SearchRequest::new("gateway")).await.unwrap();
    assert_eq!(r.results[0].path, "MEMORY.md");
}

#[tokio::test]
async fn a_long_line_of_a_repeated_pattern_is_indexed() {
    // Its pieces have the same lines and text: they once had the same chunk id, and the sync failed as a whole.
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    fs::create_dir_all(ws.path().join("memory")).unwrap();
    fs::write(ws.path().join("memory/blob.md"), format!("{}\n", "lorem ipsum dolor ".repeat(20_000))).unwrap();
    let e = open(ws.path(), state.path()).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_added, 1, "{r:?}");
    let hits = e.search(&SearchRequest::new("ipsum")).await.unwrap();
    assert_eq!(hits.results[0].path, "memory/blob.md");
}

//! Session transcripts on the LanceDB engine: the shared sync reads only the tail of a growing transcript and the
//! store adds its chunks beside the old ones.

use std::fs;
use std::io::Write;

use memory_core::{Config, MemoryBackend, SearchRequest, Source, SyncOptions};

fn msg(role: &str, text: &str) -> String {
    format!("{}\n", serde_json::json!({"type": "message", "message": {"role": role, "content": text}}))
}

fn append(p: &std::path::Path, text: &str, tick: u64) {
    let mut f = fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(tick)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growing_transcript_is_indexed_by_its_tail() {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    fs::write(ws.path().join("MEMORY.md"), "# Memory\n\nzeppelin hangar\n").unwrap();
    let sessions = state.path().join("transcripts");
    fs::create_dir_all(&sessions).unwrap();
    let t = sessions.join("s.jsonl");
    append(&t, &(msg("user", "glider wings question") + &msg("assistant", "glider wings answer")), 1);
    let config = Config::from_json5(&format!(
        r#"{{ memory: {{ search: {{ sources: ["memory", "sessions"], sessionsDir: "{}",
             sync: {{ sessions: {{ deltaBytes: 1000000, deltaMessages: 1 }} }} }} }} }}"#,
        sessions.display()
    ))
    .unwrap();
    let ctx = conformance::testing::open_context(config, ws.path(), state.path(), None);
    let e = memory_lancedb::LanceDbFactory::default().open_indexed(ctx).await.unwrap();
    e.sync(SyncOptions::default()).await.unwrap();
    append(&t, &msg("user", "sourdough starter question"), 2);
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_changed, r.chunks_written), (1, 1), "{r:?}");
    let search = |q: &str| SearchRequest { sources: vec![Source::Sessions], ..SearchRequest::new(q) };
    let hits = e.search(&search("sourdough")).await.unwrap().results;
    assert_eq!((hits[0].path.as_str(), hits[0].start_line, hits[0].end_line), ("sessions/s.jsonl", 3, 3));
    let old = e.search(&search("glider")).await.unwrap().results;
    assert_eq!((old[0].start_line, old[0].end_line), (1, 2), "the first chunk stays");
    assert_eq!(e.status().await.unwrap().chunks, 3);
}

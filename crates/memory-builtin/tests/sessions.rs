//! Session transcripts as a memory source, on the real builtin engine.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use conformance::testing::open_context;
use memory_builtin::BuiltinFactory;
use memory_core::indexed::IndexedBackend;
use memory_core::{Config, ErrorKind, GetRequest, MemoryBackend, SearchRequest, Source, SyncOptions};

fn msg(role: &str, text: &str) -> String {
    format!("{}\n", serde_json::json!({"type": "message", "message": {"role": role, "content": [{"type": "text", "text": text}]}}))
}

struct Env {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    sessions: PathBuf,
}

impl Env {
    fn new() -> Env {
        let ws = tempfile::tempdir().unwrap();
        fs::write(ws.path().join("MEMORY.md"), "# Memory\n\nThe zeppelin hangar is in Friedrichshafen.\n").unwrap();
        let state = tempfile::tempdir().unwrap();
        let sessions = state.path().join("transcripts");
        fs::create_dir_all(&sessions).unwrap();
        Env { ws, state, sessions }
    }

    fn config(&self, delta_messages: u64) -> Config {
        Config::from_json5(&format!(
            r#"{{ memory: {{ search: {{ sources: ["memory", "sessions"], sessionsDir: {},
                 sync: {{ sessions: {{ deltaBytes: 1000000, deltaMessages: {delta_messages} }} }} }} }} }}"#,
            // Quoted as JSON: a Windows path's backslashes are escapes in a string.
            serde_json::to_string(&self.sessions.display().to_string()).unwrap()
        ))
        .unwrap()
    }

    async fn open(&self, config: Config) -> IndexedBackend {
        BuiltinFactory.open_indexed(open_context(config, self.ws.path(), self.state.path(), None)).await.unwrap()
    }

    fn append(&self, name: &str, text: &str) {
        let p = self.sessions.join(name);
        let mut f = fs::OpenOptions::new().create(true).append(true).open(&p).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        drop(f);
        bump(&p);
    }
}

fn bump(p: &Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static TICK: AtomicU64 = AtomicU64::new(1);
    let t = SystemTime::now() + Duration::from_secs(TICK.fetch_add(1, Ordering::SeqCst));
    fs::File::options().write(true).open(p).unwrap().set_modified(t).unwrap();
}

async fn hits(e: &dyn MemoryBackend, q: &str, sources: Vec<Source>) -> Vec<(String, usize, usize, Source)> {
    let r = e.search(&SearchRequest { sources, ..SearchRequest::new(q) }).await.unwrap();
    r.results.into_iter().map(|h| (h.path, h.start_line, h.end_line, h.source)).collect()
}

#[tokio::test]
async fn transcripts_are_searchable_with_jsonl_lines() {
    let env = Env::new();
    let mut t = String::from("{\"type\":\"session\",\"id\":\"s1\"}\n");
    t += &msg("user", "Which espresso machine did we order?");
    t += &format!("{}\n", serde_json::json!({"type":"message","message":{"role":"toolResult","content":"espresso tool output"}}));
    t += &msg("assistant", "We ordered the Lelit Bianca espresso machine, api key sk-abcdefghijklmnopqrstuvwxyz.");
    env.append("2026-11-29-s1.jsonl", &t);
    let e = env.open(env.config(50)).await;
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_added, 2);
    assert!(e.capabilities().sessions);
    let h = hits(&e, "Lelit espresso", vec![]).await;
    assert_eq!(h[0], ("sessions/2026-11-29-s1.jsonl".to_string(), 2, 4, Source::Sessions));
    let res = e.search(&SearchRequest::new("Lelit espresso")).await.unwrap();
    let snippet = &res.results[0].snippet;
    assert!(snippet.contains("User: Which espresso machine") && !snippet.contains("tool output"), "{snippet}");
    assert!(!snippet.contains("sk-abcdefghijklmnop") && snippet.contains("[REDACTED]"), "{snippet}");
    // Source filters.
    assert!(hits(&e, "Lelit", vec![Source::Memory]).await.is_empty());
    assert_eq!(hits(&e, "zeppelin", vec![Source::Sessions]).await.len(), 0);
    assert_eq!(hits(&e, "zeppelin", vec![Source::Memory]).await[0].0, "MEMORY.md");
    // memory_get reads memory files only.
    let err = e.get(&GetRequest { path: "sessions/2026-11-29-s1.jsonl".into(), from: None, lines: None, offset: None }).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Refused);
}

#[tokio::test]
async fn growth_below_the_thresholds_waits_and_above_reads_only_the_tail() {
    let env = Env::new();
    env.append("s.jsonl", &(msg("user", "first topic: glider wings") + &msg("assistant", "noted glider wings")));
    let e = env.open(env.config(3)).await;
    e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(hits(&e, "glider", vec![]).await.len(), 1);

    // Two new messages: below deltaMessages = 3, nothing is re-indexed yet.
    env.append("s.jsonl", &(msg("user", "second topic: tomato seedlings") + &msg("assistant", "tomato seedlings noted")));
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_changed, r.chunks_written), (0, 0), "{r:?}");
    assert!(hits(&e, "tomato", vec![]).await.is_empty());

    // A third message passes the threshold: only the tail is chunked, the old chunks stay.
    env.append("s.jsonl", &msg("user", "third topic: sourdough starter"));
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!((r.files_changed, r.chunks_written), (1, 1), "{r:?}");
    let t = hits(&e, "tomato sourdough", vec![]).await;
    assert_eq!((t[0].1, t[0].2), (3, 5), "tail lines map to JSONL lines 3..5: {t:?}");
    assert_eq!(hits(&e, "glider", vec![]).await[0].1, 1, "the first chunk is still there");
    let st = e.status().await.unwrap();
    assert_eq!(st.chunks, 3, "MEMORY.md + the first chunk + the tail chunk");

    // A partial line being written is not consumed until it is complete.
    env.append("s.jsonl", "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"half");
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.chunks_written, 0);
}

#[tokio::test]
async fn a_rotated_or_truncated_transcript_is_read_whole() {
    let env = Env::new();
    env.append("s.jsonl", &(msg("user", "kayak trip planning") + &msg("assistant", "kayak trip noted")));
    let e = env.open(env.config(50)).await;
    e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(hits(&e, "kayak", vec![]).await.len(), 1);
    // Rotated: new content that is not a continuation (and shorter).
    fs::write(env.sessions.join("s.jsonl"), msg("user", "violin lesson")).unwrap();
    bump(&env.sessions.join("s.jsonl"));
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_changed, 1);
    assert!(hits(&e, "kayak", vec![]).await.is_empty());
    assert_eq!(hits(&e, "violin", vec![]).await[0].1, 1);
    // Same length but different first bytes: also a rotation.
    fs::write(env.sessions.join("s.jsonl"), msg("user", "cello lesson")).unwrap();
    bump(&env.sessions.join("s.jsonl"));
    e.sync(SyncOptions::default()).await.unwrap();
    assert!(hits(&e, "violin", vec![]).await.is_empty());
    assert_eq!(hits(&e, "cello", vec![]).await.len(), 1);
    // Deleted transcripts leave the index.
    fs::remove_file(env.sessions.join("s.jsonl")).unwrap();
    let r = e.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(r.files_removed, 1);
}

#[tokio::test]
async fn transcript_decay_uses_the_file_time() {
    let env = Env::new();
    env.append("old.jsonl", &msg("user", "marathon training plan"));
    env.append("new.jsonl", &msg("user", "marathon training plan"));
    let old = SystemTime::now() - Duration::from_secs(90 * 86_400);
    fs::File::options().write(true).open(env.sessions.join("old.jsonl")).unwrap().set_modified(old).unwrap();
    let mut config = env.config(50);
    config.memory.search.query.hybrid.temporal_decay.enabled = true;
    let e = env.open(config).await;
    let r = e.search(&SearchRequest::new("marathon training")).await.unwrap();
    assert_eq!(r.results[0].path, "sessions/new.jsonl");
    let (a, b) = (r.results[0].score, r.results[1].score);
    assert!((b / a - 0.125).abs() < 0.01, "90 days at half-life 30 is 1/8: {a} {b}");
}

/// A transcript's messages are dated by their records' timestamps: `after`/`before` find them within their day.
#[tokio::test]
async fn transcript_messages_are_dated_by_their_timestamps() {
    let env = Env::new();
    let dated =
        |ts: &str, text: &str| format!("{}\n", serde_json::json!({"type": "message", "timestamp": ts, "message": {"role": "user", "content": text}}));
    // Noon UTC: the same day in every time zone within twelve hours of UTC.
    env.append("s.jsonl", &dated("2026-03-04T12:00:00Z", "the walrus statue is in the lobby"));
    let e = env.open(env.config(1)).await;
    e.sync(SyncOptions::default()).await.unwrap();
    let within = |after: &str, before: &str| SearchRequest {
        sources: vec![Source::Sessions],
        after: Some(after.into()),
        before: Some(before.into()),
        ..SearchRequest::new("walrus statue")
    };
    let found = e.search(&within("2026-03-04", "2026-03-04")).await.unwrap().results;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].path, "sessions/s.jsonl");
    assert!(e.search(&within("2026-03-05", "2026-03-31")).await.unwrap().results.is_empty());
}

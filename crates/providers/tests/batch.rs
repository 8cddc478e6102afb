//! Provider batch jobs against loopback servers speaking each batch API: OpenAI (file upload, batch states,
//! output and error files, partial failures, expiry), Voyage (its files + batches variant) and Gemini
//! (asyncBatchEmbedContent + batches/{id}); the batch API disabled after two failures; and resume after the run
//! is dropped mid-batch (no second upload of work already submitted), both directly and through the builtin
//! engine's sync.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{MockServer, Recorded, Reply};
use memory_core::embedding::{run_batch, BatchItem, BatchOutcome};
use providers::catalogue::{self, Protocol, Provider};
use providers::{ApiKey, BatchSettings, EmbeddingProvider, HttpOptions, RemoteProvider, RemoteSettings};
use serde_json::{json, Value};

const KEY: &str = "sk-batch-SECRET-9876543210";
const DIMS: usize = 4;

/// No retries: a batch test counts every request it expects.
fn no_retries() -> HttpOptions {
    HttpOptions { request_timeout: Duration::from_secs(5), max_retries: 0, ..common::fast_http() }
}

fn batch_settings(per_job: usize, wait: bool) -> BatchSettings {
    BatchSettings {
        wait,
        concurrency: 2,
        poll_interval: Duration::from_millis(20),
        timeout: Duration::from_secs(60),
        max_items_per_job: Some(per_job),
    }
}

fn provider(kind: &'static Provider, server: &MockServer, batch: BatchSettings) -> RemoteProvider {
    let base = match kind.protocol {
        Protocol::Gemini => format!("{}/v1beta", server.url()),
        Protocol::OpenAi | Protocol::Ollama => format!("{}/v1", server.url()),
    };
    RemoteProvider::new(
        kind,
        RemoteSettings {
            base_url: Some(base),
            api_key: ApiKey::new(KEY),
            dimensions: Some(DIMS),
            http: no_retries(),
            batch: Some(batch),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Text `t<i> ...` embeds as `[i+1, 1, 0, 0]`.
fn vector_for(text: &str) -> Vec<f32> {
    // Texts that are not `t<i> ...` (search queries) embed as `[1, 1, 0, 0]`.
    let i: f32 = text.split_whitespace().next().unwrap_or("").trim_start_matches('t').parse().unwrap_or(0.0);
    vec![i + 1.0, 1.0, 0.0, 0.0]
}

fn items(n: usize) -> Vec<BatchItem> {
    (0..n).map(|i| BatchItem { hash: format!("hash{i:02}"), text: format!("t{i} some memory text") }).collect()
}

fn normalized(v: &[f32]) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

async fn run(p: &RemoteProvider, items: &[BatchItem], state: &Path) -> (HashMap<String, Vec<f32>>, BatchOutcome) {
    run_batch(p.batch().expect("batch configured"), items, state, |_| async {}).await
}

/// The JSONL lines of a multipart upload.
fn uploaded_lines(rec: &Recorded) -> Vec<Value> {
    rec.raw_body.lines().filter(|l| l.starts_with('{')).map(|l| serde_json::from_str(l).unwrap()).collect()
}

// ---------------------------------------------------------------- OpenAI / Voyage fake

#[derive(Default)]
struct FilesFake {
    voyage: bool,
    files: HashMap<String, String>,
    /// batch id -> (input file id, polls so far)
    batches: BTreeMap<String, (String, usize)>,
    /// Polls answered `in_progress` before the final status.
    polls_before_done: usize,
    /// Final status of every batch.
    final_status: &'static str,
    /// Custom ids that fail (they go to the error file).
    reject: Vec<String>,
    /// For `expired`: how many lines make it into the partial output.
    expired_keep: usize,
    /// While set, every batch stays `in_progress`.
    hold: bool,
}

impl FilesFake {
    fn handle(&mut self, rec: &Recorded) -> Reply {
        let path = rec.path.trim_start_matches("/v1");
        if rec.method == "POST" && path == "/embeddings" {
            // The synchronous endpoint (queries, and documents once the batch API is disabled).
            let data: Vec<Value> = rec.body["input"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector_for(t.as_str().unwrap())}))
                .collect();
            return Reply::json(200, json!({"object": "list", "data": data}).to_string());
        }
        if rec.method == "POST" && path == "/files" {
            assert!(rec.header("content-type").unwrap().starts_with("multipart/form-data; boundary="));
            assert!(rec.raw_body.contains("name=\"purpose\"\r\n\r\nbatch\r\n"), "purpose=batch part: {}", rec.raw_body);
            assert!(rec.raw_body.contains("name=\"file\"; filename="));
            let id = format!("file-in-{}", self.files.len());
            let content: String = uploaded_lines(rec).iter().map(|l| format!("{l}\n")).collect();
            self.files.insert(id.clone(), content);
            return Reply::json(200, json!({"id": id, "object": "file", "purpose": "batch"}).to_string());
        }
        if rec.method == "POST" && path == "/batches" {
            let input = rec.body["input_file_id"].as_str().unwrap().to_string();
            assert!(self.files.contains_key(&input));
            assert_eq!(rec.body["endpoint"], "/v1/embeddings");
            let id = format!("batch_{}", self.batches.len());
            self.batches.insert(id.clone(), (input.clone(), 0));
            return Reply::json(200, json!({"id": id, "object": "batch", "status": "validating", "input_file_id": input}).to_string());
        }
        if rec.method == "GET" && path.starts_with("/batches/") {
            let id = path.trim_start_matches("/batches/").to_string();
            let hold = self.hold;
            let (input, polls) = self.batches.get_mut(&id).unwrap();
            *polls += 1;
            let input = input.clone();
            let status = if hold || *polls <= self.polls_before_done { "in_progress" } else { self.final_status };
            let mut out = json!({"id": id, "object": "batch", "status": status, "request_counts": {"total": 0, "completed": 0, "failed": 0}});
            if status == "failed" {
                out["errors"] = json!({"object": "list", "data": [{"code": "invalid_request", "message": "the model is not available for batch"}]});
            }
            if status == "completed" || status == "expired" {
                let lines: Vec<Value> = self.files[&input].lines().map(|l| serde_json::from_str(l).unwrap()).collect();
                let (mut ok, mut bad) = (String::new(), String::new());
                for (n, l) in lines.iter().enumerate() {
                    let cid = l["custom_id"].as_str().unwrap();
                    let text = if self.voyage { l["body"]["input"][0].as_str().unwrap() } else { l["body"]["input"].as_str().unwrap() };
                    if status == "expired" && n >= self.expired_keep {
                        continue;
                    }
                    if self.reject.iter().any(|r| r == cid) {
                        let line = json!({"id": format!("req_{n}"), "custom_id": cid, "response": {"status_code": 400, "request_id": "r", "body": {"error": {"message": "input too long", "type": "invalid_request_error"}}}, "error": null});
                        bad.push_str(&format!("{line}\n"));
                    } else {
                        let line = json!({"id": format!("req_{n}"), "custom_id": cid, "response": {"status_code": 200, "request_id": "r", "body": {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": vector_for(text)}], "model": "m"}}, "error": null});
                        ok.push_str(&format!("{line}\n"));
                    }
                }
                let out_id = format!("file-out-{id}");
                self.files.insert(out_id.clone(), ok);
                out["output_file_id"] = json!(out_id);
                if !bad.is_empty() {
                    let err_id = format!("file-err-{id}");
                    self.files.insert(err_id.clone(), bad);
                    out["error_file_id"] = json!(err_id);
                }
            }
            return Reply::json(200, out.to_string());
        }
        if rec.method == "GET" && path.starts_with("/files/") && path.ends_with("/content") {
            let id = path.trim_start_matches("/files/").trim_end_matches("/content");
            return Reply::text(200, self.files.get(id).cloned().unwrap_or_default());
        }
        Reply::json(404, r#"{"error":{"message":"no such route"}}"#)
    }
}

async fn files_server(fake: FilesFake) -> (MockServer, Arc<Mutex<FilesFake>>) {
    let fake = Arc::new(Mutex::new(fake));
    let f = fake.clone();
    let server = MockServer::start(move |rec, _| f.lock().unwrap().handle(rec)).await;
    (server, fake)
}

fn count(server: &MockServer, method: &str, path: &str) -> usize {
    server.requests().iter().filter(|r| r.method == method && r.path == path).count()
}

/// Waits until the first job has been polled (a run is then past submitting), failing after `limit`.
async fn polled(server: &MockServer, limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while count(server, "GET", "/v1/batches/batch_1") == 0 {
        assert!(std::time::Instant::now() < deadline, "jobs never polled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn openai_batch_wire_format_partial_failure_and_cache_delivery() {
    let (server, _fake) =
        files_server(FilesFake { final_status: "completed", polls_before_done: 1, reject: vec!["hash01".into()], ..Default::default() }).await;
    let p = provider(catalogue::get("openai").unwrap(), &server, batch_settings(3, true));
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("jobs.json");
    let all = items(5);
    let (vectors, outcome) = run(&p, &all, &state).await;

    // Two jobs (3 + 2 items); t1 rejected in the error file, the rest delivered normalised.
    assert_eq!(outcome.jobs_submitted, 2);
    assert_eq!(outcome.jobs_failed, 0);
    assert_eq!(vectors.len(), 4, "{outcome:?}");
    assert!(!vectors.contains_key("hash01"));
    let want = normalized(&vector_for("t3"));
    assert!(vectors["hash03"].iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6), "{:?}", vectors["hash03"]);
    assert!(outcome.warnings.iter().any(|w| w.contains("rejected 1 item") && w.contains("input too long")), "{:?}", outcome.warnings);
    assert!(outcome.pending.is_empty());
    assert!(!state.exists(), "finished jobs leave the state file");

    let reqs = server.requests();
    let uploads: Vec<&Recorded> = reqs.iter().filter(|r| r.path == "/v1/files").collect();
    assert_eq!(uploads.len(), 2);
    let lines = uploaded_lines(uploads[0]);
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        json!({"custom_id": "hash00", "method": "POST", "url": "/v1/embeddings", "body": {"model": "text-embedding-3-small", "input": "t0 some memory text"}})
    );
    let create = reqs.iter().find(|r| r.method == "POST" && r.path == "/v1/batches").unwrap();
    assert_eq!(create.body, json!({"input_file_id": "file-in-0", "endpoint": "/v1/embeddings", "completion_window": "24h"}));
    for r in &reqs {
        assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    }
    assert!(count(&server, "GET", "/v1/batches/batch_0") >= 2, "polled until completed");
    assert_eq!(count(&server, "GET", "/v1/files/file-out-batch_0/content"), 1);
    assert_eq!(count(&server, "GET", "/v1/files/file-err-batch_0/content"), 1);
}

#[tokio::test]
async fn failing_twice_disables_the_batch_api_for_the_run() {
    let (server, _fake) = files_server(FilesFake { final_status: "failed", ..Default::default() }).await;
    let mut settings = batch_settings(1, true);
    settings.concurrency = 1;
    let p = provider(catalogue::get("openai").unwrap(), &server, settings);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("jobs.json");
    let (vectors, outcome) = run(&p, &items(4), &state).await;

    assert!(vectors.is_empty());
    assert_eq!(outcome.jobs_failed, 2);
    assert_eq!(outcome.jobs_submitted, 2, "no third job after the second failure");
    assert_eq!(count(&server, "POST", "/v1/batches"), 2);
    let reason = p.batch().unwrap().disabled_reason().expect("disabled");
    assert!(reason.contains("disabled for this run") && reason.contains("not available for batch"), "{reason}");
    assert!(outcome.warnings.iter().any(|w| w.contains("disabled for this run")));
    for w in outcome.warnings.iter().chain([&reason]) {
        assert!(!w.contains(KEY), "key leaked: {w}");
    }

    // Later runs in the same process do not touch the batch API at all.
    let before = server.requests().len();
    let (vectors, outcome) = run(&p, &items(2), &state).await;
    assert!(vectors.is_empty() && outcome.jobs_submitted == 0);
    assert_eq!(server.requests().len(), before);
}

#[tokio::test]
async fn expired_batch_keeps_its_partial_output_and_counts_as_a_failure() {
    let (server, _fake) = files_server(FilesFake { final_status: "expired", expired_keep: 2, ..Default::default() }).await;
    let p = provider(catalogue::get("openai").unwrap(), &server, batch_settings(10, true));
    let dir = tempfile::tempdir().unwrap();
    let (vectors, outcome) = run(&p, &items(4), &dir.path().join("jobs.json")).await;
    assert_eq!(vectors.len(), 2, "{outcome:?}");
    assert!(vectors.contains_key("hash00") && vectors.contains_key("hash01"));
    assert_eq!(outcome.jobs_failed, 1);
    assert!(outcome.warnings.iter().any(|w| w.contains("expired")));
    assert!(p.batch().unwrap().disabled_reason().is_none(), "one failure does not disable");
}

#[tokio::test]
async fn resume_after_the_run_is_dropped_mid_batch_polls_instead_of_resubmitting() {
    let (server, fake) = files_server(FilesFake { final_status: "completed", hold: true, ..Default::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("jobs.json");
    let all = items(6);

    // First run: two jobs submitted, then the run is dropped while they are in progress.
    let p1 = provider(catalogue::get("openai").unwrap(), &server, batch_settings(3, true));
    let (task_items, task_state) = (all.clone(), state.clone());
    let task = tokio::spawn(async move {
        let _ = run(&p1, &task_items, &task_state).await;
    });
    polled(&server, Duration::from_secs(10)).await;
    task.abort();
    let _ = task.await;
    let recorded: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(recorded["jobs"].as_array().unwrap().len(), 2);

    // Second run (a new provider, as after a restart): the jobs finish; nothing is uploaded again.
    fake.lock().unwrap().hold = false;
    let p2 = provider(catalogue::get("openai").unwrap(), &server, batch_settings(3, true));
    let (vectors, outcome) = run(&p2, &all, &state).await;
    assert_eq!(vectors.len(), 6);
    assert_eq!(outcome.jobs_resumed, 2);
    assert_eq!(outcome.jobs_submitted, 0);
    assert_eq!(count(&server, "POST", "/v1/files"), 2, "no second upload");
    assert_eq!(count(&server, "POST", "/v1/batches"), 2, "no second batch");
    assert!(!state.exists());
}

#[tokio::test]
async fn without_wait_jobs_are_left_pending_and_collected_by_a_later_run() {
    let (server, fake) = files_server(FilesFake { final_status: "completed", hold: true, ..Default::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("jobs.json");
    let p = provider(catalogue::get("openai").unwrap(), &server, batch_settings(2, false));
    let (vectors, outcome) = run(&p, &items(3), &state).await;
    assert!(vectors.is_empty());
    assert_eq!(outcome.pending.len(), 3);
    assert!(outcome.warnings.iter().any(|w| w.contains("wait for")));

    fake.lock().unwrap().hold = false;
    let (vectors, outcome) = run(&p, &items(3), &state).await;
    assert_eq!(vectors.len(), 3);
    assert_eq!(outcome.jobs_resumed, 2);
    assert_eq!(count(&server, "POST", "/v1/files"), 2);
}

#[tokio::test]
async fn voyage_batch_wire_format() {
    let (server, _fake) = files_server(FilesFake { voyage: true, final_status: "completed", ..Default::default() }).await;
    let p = provider(catalogue::get("voyage").unwrap(), &server, batch_settings(10, true));
    let dir = tempfile::tempdir().unwrap();
    let (vectors, outcome) = run(&p, &items(2), &dir.path().join("jobs.json")).await;
    assert_eq!(vectors.len(), 2, "{outcome:?}");
    let reqs = server.requests();
    let upload = reqs.iter().find(|r| r.path == "/v1/files").unwrap();
    assert_eq!(uploaded_lines(upload)[1], json!({"custom_id": "hash01", "body": {"input": ["t1 some memory text"]}}));
    let create = reqs.iter().find(|r| r.method == "POST" && r.path == "/v1/batches").unwrap();
    assert_eq!(
        create.body,
        json!({"input_file_id": "file-in-0", "endpoint": "/v1/embeddings", "completion_window": "12h",
               "request_params": {"model": "voyage-4-large", "input_type": "document"}})
    );
}

// ---------------------------------------------------------------- Gemini fake

#[tokio::test]
async fn gemini_async_batch_embed_content() {
    let submitted: Arc<Mutex<Vec<Value>>> = Arc::default();
    let s = submitted.clone();
    let server = MockServer::start(move |rec, _| {
        if rec.method == "POST" && rec.path == "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent" {
            s.lock().unwrap().push(rec.body.clone());
            return Reply::json(200, json!({"name": "batches/b1", "metadata": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.EmbedContentBatch", "name": "batches/b1", "state": "BATCH_STATE_PENDING"}}).to_string());
        }
        if rec.method == "GET" && rec.path == "/v1beta/batches/b1" {
            let polls = s.lock().unwrap().len();
            s.lock().unwrap().push(Value::Null);
            if polls < 2 {
                return Reply::json(200, json!({"name": "batches/b1", "metadata": {"state": "BATCH_STATE_RUNNING"}}).to_string());
            }
            let body = s.lock().unwrap()[0].clone();
            let reqs = body["batch"]["inputConfig"]["requests"]["requests"].as_array().unwrap().clone();
            let responses: Vec<Value> = reqs
                .iter()
                .map(|r| {
                    let key = r["metadata"]["key"].clone();
                    let text = r["request"]["content"]["parts"][0]["text"].as_str().unwrap();
                    if text.starts_with("t2 ") {
                        json!({"metadata": {"key": key}, "error": {"code": 400, "message": "content too long"}})
                    } else {
                        json!({"metadata": {"key": key}, "response": {"embedding": {"values": vector_for(text)}}})
                    }
                })
                .collect();
            return Reply::json(
                200,
                json!({"name": "batches/b1", "done": true,
                       "metadata": {"state": "BATCH_STATE_SUCCEEDED"},
                       "response": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.EmbedContentBatchOutput",
                                    "inlinedResponses": {"inlinedResponses": responses}}})
                .to_string(),
            );
        }
        Reply::json(404, "{}")
    })
    .await;
    let p = provider(catalogue::get("gemini").unwrap(), &server, batch_settings(10, true));
    let dir = tempfile::tempdir().unwrap();
    let (vectors, outcome) = run(&p, &items(3), &dir.path().join("jobs.json")).await;
    assert_eq!(vectors.len(), 2, "{outcome:?}");
    assert!(!vectors.contains_key("hash02"));
    assert!(outcome.warnings.iter().any(|w| w.contains("content too long")));
    let body = submitted.lock().unwrap()[0].clone();
    assert_eq!(body["batch"]["model"], "models/gemini-embedding-001");
    assert_eq!(
        body["batch"]["inputConfig"]["requests"]["requests"][0],
        json!({"request": {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "t0 some memory text"}]}, "taskType": "RETRIEVAL_DOCUMENT"},
               "metadata": {"key": "hash00"}})
    );
    for r in server.requests() {
        assert_eq!(r.header("x-goog-api-key"), Some(KEY));
    }
}

// ---------------------------------------------------------------- through the engine

mod engine {
    use super::*;
    use memory_builtin::BuiltinFactory;
    use memory_core::indexed::IndexedBackend;
    use memory_core::registry::OpenContext;
    use memory_core::{Config, MemoryBackend, SearchRequest, SyncOptions};

    async fn open(ws: &Path, state: &Path, p: RemoteProvider) -> IndexedBackend {
        BuiltinFactory
            .open_indexed(
                OpenContext::new(Arc::new(Config::default()), ws.to_path_buf(), state.to_path_buf(), "main").with_embedder(Some(Arc::new(p))),
            )
            .await
            .unwrap()
    }

    /// A sync is dropped while its batch jobs run; the next engine's sync polls the recorded jobs, uploads
    /// nothing again, and the index answers with vectors. A later rebuild takes everything from the cache.
    #[tokio::test]
    async fn engine_sync_resumes_batch_jobs_after_being_dropped() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("memory")).unwrap();
        for i in 0..5 {
            std::fs::write(ws.path().join(format!("memory/2026-01-0{}.md", i + 1)), format!("t{i} note about topic{i}\n")).unwrap();
        }
        let (server, fake) = files_server(FilesFake { final_status: "completed", hold: true, ..Default::default() }).await;

        let engine = open(ws.path(), state.path(), provider(catalogue::get("openai").unwrap(), &server, batch_settings(3, true))).await;
        let sync = tokio::spawn(async move {
            let _ = engine.sync(SyncOptions::default()).await;
        });
        polled(&server, Duration::from_secs(20)).await;
        sync.abort();
        let _ = sync.await;
        assert_eq!(count(&server, "POST", "/v1/files"), 2);

        fake.lock().unwrap().hold = false;
        let engine = open(ws.path(), state.path(), provider(catalogue::get("openai").unwrap(), &server, batch_settings(3, true))).await;
        let report = engine.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(report.chunks_embedded, 5, "{report:?}");
        assert_eq!(count(&server, "POST", "/v1/files"), 2, "resumed, not resubmitted");
        assert_eq!(count(&server, "POST", "/v1/batches"), 2);
        let status = engine.status().await.unwrap();
        assert_eq!(status.extra["batch"]["enabled"], true);
        assert!(status.warnings.iter().all(|w| !w.contains("waiting for embeddings")), "{:?}", status.warnings);
        let found = engine.search(&SearchRequest::new("topic3")).await.unwrap();
        assert_eq!(found.mode.as_deref(), Some("hybrid"));

        // Everything is in the embedding cache: a forced rebuild submits nothing.
        let before = server.requests().len();
        let report = engine.sync(SyncOptions { force: true, ..SyncOptions::default() }).await.unwrap();
        assert_eq!(report.embeddings_cached, 5, "{report:?}");
        let new: Vec<String> = server.requests()[before..].iter().map(|r| format!("{} {}", r.method, r.path)).collect();
        assert!(new.iter().all(|r| r.contains("/embeddings")), "only the query embedding may go out: {new:?}");
    }

    /// A batch API that fails twice is disabled; the sync embeds synchronously and status says so.
    #[tokio::test]
    async fn engine_falls_back_to_synchronous_embedding_when_the_batch_api_fails() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("memory")).unwrap();
        for i in 0..4 {
            std::fs::write(ws.path().join(format!("memory/n{i}.md")), format!("t{i} fact number {i}\n")).unwrap();
        }
        let (server, _fake) = files_server(FilesFake { final_status: "failed", ..Default::default() }).await;
        let mut settings = batch_settings(1, true);
        settings.concurrency = 1;
        let engine = open(ws.path(), state.path(), provider(catalogue::get("openai").unwrap(), &server, settings)).await;
        let report = engine.sync(SyncOptions::default()).await.unwrap();
        assert_eq!(report.chunks_embedded, 4, "{report:?}");
        assert!(report.warnings.iter().any(|w| w.contains("disabled for this run")), "{:?}", report.warnings);
        assert_eq!(count(&server, "POST", "/v1/batches"), 2);
        assert!(count(&server, "POST", "/v1/embeddings") >= 1);
        let status = engine.status().await.unwrap();
        assert_eq!(status.extra["batch"]["enabled"], false);
        assert!(status.warnings.iter().any(|w| w.contains("batch API disabled for this run")), "{:?}", status.warnings);
        assert!(!format!("{status:?}").contains(KEY));
    }
}

#[tokio::test]
async fn keys_echoed_by_a_failing_batch_api_are_scrubbed_from_errors_and_status() {
    let server = MockServer::start(|rec, _| {
        let key = rec.header("authorization").unwrap_or("").trim_start_matches("Bearer ").to_string();
        Reply::json(401, json!({"error": {"message": format!("Incorrect API key provided: {key}")}}).to_string())
    })
    .await;
    let p = provider(catalogue::get("openai").unwrap(), &server, batch_settings(1, true));
    let dir = tempfile::tempdir().unwrap();
    let (_, outcome) = run(&p, &items(3), &dir.path().join("jobs.json")).await;
    assert_eq!(outcome.jobs_failed, 2);
    let reason = p.batch().unwrap().disabled_reason().unwrap();
    let printed = format!("{outcome:?} {reason} {p:?}");
    assert!(printed.contains("Incorrect API key provided: ***"), "{printed}");
    assert!(!printed.contains(KEY), "{printed}");
}

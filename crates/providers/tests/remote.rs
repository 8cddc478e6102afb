//! Each HTTP provider against a loopback server speaking its API's wire format: the requests it receives
//! (paths, auth headers, JSON bodies, task types) and the vectors that come back, plus the failure modes
//! (401, 429 then success, 500 exhausted, timeout, malformed JSON, wrong count, wrong dimensions, NaN).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fast_http, MockServer, Recorded, Reply};
use providers::catalogue::{self, Protocol, Provider, CATALOGUE};
use providers::{ApiKey, BatchLimits, EmbeddingError, EmbeddingProvider, EmbeddingPurpose, FallbackProvider, RemoteProvider, RemoteSettings};
use serde_json::{json, Value};

const KEY: &str = "sk-test-SECRET-0123456789";
const DIMS: usize = 4;

type Kind = &'static Provider;

fn entry(id: &str) -> Kind {
    catalogue::get(id).unwrap()
}

fn model_of(kind: Kind) -> &'static str {
    kind.default_model.unwrap_or("test-model")
}

fn base_url(kind: Kind, server: &MockServer) -> String {
    match kind.protocol {
        Protocol::Gemini => format!("{}/v1beta", server.url()),
        Protocol::Ollama => server.url(),
        Protocol::OpenAi => format!("{}/v1", server.url()),
    }
}

fn settings(kind: Kind, server: &MockServer) -> RemoteSettings {
    RemoteSettings {
        model: Some(model_of(kind).into()),
        base_url: Some(base_url(kind, server)),
        api_key: ApiKey::new(KEY),
        dimensions: Some(DIMS),
        http: fast_http(),
        ..Default::default()
    }
}

fn provider(kind: Kind, server: &MockServer) -> RemoteProvider {
    RemoteProvider::new(kind, settings(kind, server)).unwrap()
}

/// The texts a recorded request carries, per wire format.
fn texts_in(kind: Kind, rec: &Recorded) -> Vec<String> {
    let strs = |v: &Value| v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>();
    match kind.protocol {
        Protocol::Gemini if rec.path.ends_with(":embedContent") => {
            vec![rec.body["content"]["parts"][0]["text"].as_str().unwrap().to_string()]
        }
        Protocol::Gemini => {
            rec.body["requests"].as_array().unwrap().iter().map(|r| r["content"]["parts"][0]["text"].as_str().unwrap().to_string()).collect()
        }
        Protocol::Ollama if rec.path == "/api/embeddings" => vec![rec.body["prompt"].as_str().unwrap().to_string()],
        Protocol::Ollama | Protocol::OpenAi => strs(&rec.body["input"]),
    }
}

/// Text `t<i> ...` embeds as `[i+1, 1, 0, ...]` (`dims` wide), so order and normalisation can be checked.
fn vector_for(text: &str, dims: usize) -> Vec<f32> {
    let i: f32 = text.split_whitespace().next().unwrap().trim_start_matches('t').parse().unwrap();
    let mut v = vec![0.0; dims];
    v[0] = i + 1.0;
    v[1] = 1.0;
    v
}

fn expected(i: usize) -> Vec<f32> {
    let a = (i + 1) as f32;
    let n = (a * a + 1.0).sqrt();
    let mut v = vec![0.0; DIMS];
    v[0] = a / n;
    v[1] = 1.0 / n;
    v
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{got:?} vs {want:?}");
    }
}

/// A success body in the provider's format for the given vectors.
fn success_body(kind: Kind, rec: &Recorded, vectors: &[Vec<f32>]) -> String {
    match kind.protocol {
        Protocol::Gemini if rec.path.ends_with(":embedContent") => json!({ "embedding": { "values": vectors[0] } }).to_string(),
        Protocol::Gemini => json!({ "embeddings": vectors.iter().map(|v| json!({ "values": v })).collect::<Vec<_>>() }).to_string(),
        Protocol::Ollama if rec.path == "/api/embeddings" => json!({ "embedding": vectors[0] }).to_string(),
        Protocol::Ollama => json!({ "model": model_of(kind), "embeddings": vectors, "total_duration": 1 }).to_string(),
        Protocol::OpenAi => json!({
            "object": "list",
            "data": vectors.iter().enumerate().map(|(i, v)| json!({ "object": "embedding", "index": i, "embedding": v })).collect::<Vec<_>>(),
            "model": model_of(kind),
            "usage": { "prompt_tokens": 1, "total_tokens": 1 }
        })
        .to_string(),
    }
}

fn answer(kind: Kind, rec: &Recorded, dims: usize) -> Reply {
    let vectors: Vec<Vec<f32>> = texts_in(kind, rec).iter().map(|t| vector_for(t, dims)).collect();
    Reply::json(200, success_body(kind, rec, &vectors))
}

/// An error body as each API shapes it.
fn error_body(kind: Kind, status: u16, message: &str) -> String {
    match (kind.protocol, kind.id) {
        (Protocol::Gemini, _) => json!({ "error": { "code": status, "message": message, "status": "UNAUTHENTICATED" } }),
        (Protocol::Ollama, _) => json!({ "error": message }),
        (_, "voyage") => json!({ "detail": message }),
        (_, "mistral") => json!({ "message": message, "request_id": "r1" }),
        (Protocol::OpenAi, _) => {
            json!({ "error": { "message": message, "type": "invalid_request_error", "param": null, "code": status.to_string() } })
        }
    }
    .to_string()
}

/// A server that refuses the first request (429 with `message`, and the header `wait` saying how long to wait) and
/// answers the next ones as `kind` does.
async fn limited_once(kind: Kind, message: &'static str, wait: (&'static str, &'static str)) -> MockServer {
    MockServer::start(
        move |rec, n| {
            if n == 0 {
                Reply::json(429, error_body(kind, 429, message)).header(wait.0, wait.1)
            } else {
                answer(kind, rec, DIMS)
            }
        },
    )
    .await
}

fn texts(n: usize, pad: usize) -> Vec<String> {
    (0..n).map(|i| format!("t{i} {}", "x".repeat(pad))).collect()
}

fn expected_path(kind: Kind, n_texts: usize) -> String {
    match kind.protocol {
        Protocol::Gemini if n_texts == 1 => "/v1beta/models/gemini-embedding-001:embedContent".into(),
        Protocol::Gemini => "/v1beta/models/gemini-embedding-001:batchEmbedContents".into(),
        Protocol::Ollama => "/api/embed".into(),
        Protocol::OpenAi => "/v1/embeddings".into(),
    }
}

fn assert_request_shape(kind: Kind, rec: &Recorded, purpose: EmbeddingPurpose) {
    let n = texts_in(kind, rec).len();
    assert_eq!(rec.method, "POST", "{kind}");
    assert_eq!(rec.path, expected_path(kind, n), "{kind}");
    assert!(rec.header("content-type").unwrap().starts_with("application/json"), "{kind}");
    match kind.protocol {
        Protocol::Gemini => {
            assert_eq!(rec.header("x-goog-api-key"), Some(KEY));
            assert_eq!(rec.header("authorization"), None);
            let task = match purpose {
                EmbeddingPurpose::Query => "RETRIEVAL_QUERY",
                EmbeddingPurpose::Document => "RETRIEVAL_DOCUMENT",
            };
            let items: Vec<&Value> = if n == 1 { vec![&rec.body] } else { rec.body["requests"].as_array().unwrap().iter().collect() };
            for item in items {
                assert_eq!(item["taskType"], task);
                assert_eq!(item["model"], "models/gemini-embedding-001");
            }
        }
        _ => {
            assert_eq!(rec.header("authorization"), Some(format!("Bearer {KEY}").as_str()), "{kind}");
            assert_eq!(rec.body["model"], model_of(kind), "{kind}");
            let input_type = rec.body.get("input_type");
            if kind.id == "voyage" {
                let want = if purpose == EmbeddingPurpose::Query { "query" } else { "document" };
                assert_eq!(input_type, Some(&json!(want)));
            } else {
                assert_eq!(input_type, None, "{kind} must not send input_type");
            }
        }
    }
}

#[tokio::test]
async fn happy_path_every_provider() {
    for kind in CATALOGUE {
        let server = MockServer::start(move |rec, _| answer(kind, rec, DIMS)).await;
        let p = provider(kind, &server);
        assert_eq!(p.id(), kind.reported_id());
        assert_eq!(p.dimensions(), Some(DIMS));
        let input = texts(3, 10);
        let out = p.embed(&input, EmbeddingPurpose::Document).await.unwrap();
        assert_eq!(out.len(), 3);
        for (i, v) in out.iter().enumerate() {
            assert_close(v, &expected(i));
        }
        let q = p.embed_query("t7 what is the gateway host?").await.unwrap();
        assert_close(&q, &expected(7));
        let reqs = server.requests();
        assert_eq!(reqs.len(), 2, "{kind}: one request per call");
        assert_request_shape(kind, &reqs[0], EmbeddingPurpose::Document);
        assert_eq!(texts_in(kind, &reqs[0]), input);
        assert_request_shape(kind, &reqs[1], EmbeddingPurpose::Query);
        assert_eq!(texts_in(kind, &reqs[1]), vec!["t7 what is the gateway host?".to_string()]);
        assert!(p.embed(&[], EmbeddingPurpose::Document).await.unwrap().is_empty());
        assert_eq!(server.requests().len(), 2, "no request for no texts");
    }
}

#[tokio::test]
async fn batches_by_token_budget_with_bounded_concurrency_every_provider() {
    for kind in CATALOGUE {
        let server = MockServer::start(move |rec, _| answer(kind, rec, DIMS).delayed(Duration::from_millis(40))).await;
        let mut s = settings(kind, &server);
        s.limits = Some(BatchLimits { max_tokens: 1000, max_items: 100, concurrency: 2 });
        let p = RemoteProvider::new(kind, s).unwrap();
        // 9 texts of ~400 estimated tokens: two per 1000-token request, five requests.
        let input = texts(9, 1595);
        let out = p.embed(&input, EmbeddingPurpose::Document).await.unwrap();
        assert_eq!(out.len(), 9);
        for (i, v) in out.iter().enumerate() {
            assert_close(v, &expected(i));
        }
        let reqs = server.requests();
        assert_eq!(reqs.len(), 5, "{kind}");
        let mut seen: Vec<String> = reqs.iter().flat_map(|r| texts_in(kind, r)).collect();
        seen.sort();
        let mut want = input.clone();
        want.sort();
        assert_eq!(seen, want, "{kind}: every text sent exactly once");
        for r in &reqs {
            assert!(texts_in(kind, r).len() <= 2, "{kind}: token budget exceeded");
            assert_request_shape(kind, r, EmbeddingPurpose::Document);
        }
        assert!(server.peak_in_flight() <= 2, "{kind}: {} in flight", server.peak_in_flight());
        assert_eq!(server.peak_in_flight(), 2, "{kind}: requests should overlap");
    }
}

#[tokio::test]
async fn default_budget_is_eight_thousand_tokens() {
    let kind = entry("openai");
    let server = MockServer::start(move |rec, _| answer(kind, rec, DIMS)).await;
    let p = provider(kind, &server);
    let out = p.embed(&texts(45, 1595), EmbeddingPurpose::Document).await.unwrap();
    assert_eq!(out.len(), 45);
    let mut sizes: Vec<usize> = server.requests().iter().map(|r| texts_in(kind, r).len()).collect();
    sizes.sort();
    assert_eq!(sizes, vec![5, 20, 20]);
}

#[tokio::test]
async fn unauthorized_is_permanent_not_retried_and_hides_the_key() {
    for kind in CATALOGUE {
        // Some APIs echo the key back in the error message: it must not reach ours.
        let server = MockServer::start(move |_, _| Reply::json(401, error_body(kind, 401, &format!("Incorrect API key provided: {KEY}")))).await;
        let p = provider(kind, &server);
        let err = p.embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap_err();
        assert!(matches!(err, EmbeddingError::Permanent { .. }), "{kind}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("401") && msg.contains("Incorrect API key provided"), "{kind}: {msg}");
        assert!(!msg.contains(KEY) && !msg.contains("SECRET"), "{kind}: key leaked: {msg}");
        assert_eq!(server.requests().len(), 1, "{kind}: a 401 is not retried");
        let debug = format!("{p:?}");
        assert!(!debug.contains("SECRET"), "{kind}: key in Debug: {debug}");
    }
}

#[tokio::test]
async fn rate_limited_then_success_honours_retry_after() {
    for kind in CATALOGUE {
        let server = limited_once(kind, "Rate limit reached", ("retry-after-ms", "250")).await;
        let p = provider(kind, &server);
        let started = Instant::now();
        let out = p.embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap();
        let elapsed = started.elapsed();
        assert_close(&out[1], &expected(1));
        assert_eq!(server.requests().len(), 2, "{kind}");
        assert!(elapsed >= Duration::from_millis(250), "{kind}: retried after {elapsed:?}, before retry-after-ms");
        let reqs = server.requests();
        assert_eq!(reqs[0].raw_body, reqs[1].raw_body, "{kind}: the same request is retried");
    }
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let kind = entry("gemini");
    let server = limited_once(kind, "Resource has been exhausted", ("Retry-After", "1")).await;
    let p = provider(kind, &server);
    let started = Instant::now();
    p.embed(&texts(3, 5), EmbeddingPurpose::Document).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "waited only {:?}", started.elapsed());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_error_exhausts_three_retries_with_backoff() {
    for kind in CATALOGUE {
        let server = MockServer::start(move |_, _| Reply::json(500, error_body(kind, 500, "internal error"))).await;
        let p = provider(kind, &server);
        let started = Instant::now();
        let err = p.embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap_err();
        assert!(err.is_transient(), "{kind}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("HTTP 500") && msg.contains("4 attempts"), "{kind}: {msg}");
        assert_eq!(server.requests().len(), 4, "{kind}: 1 attempt + 3 retries");
        // Backoff 10 + 20 + 40 ms.
        assert!(started.elapsed() >= Duration::from_millis(70), "{kind}: no backoff ({:?})", started.elapsed());
    }
}

// Several threads, and a timeout well above a busy machine's scheduling delay: the mock servers and the clients of
// every API run at once, and a retried request must reach its server before the client's timeout ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_is_retried_then_transient() {
    let mut handles = Vec::new();
    for kind in CATALOGUE {
        handles.push(tokio::spawn(async move {
            let server = MockServer::start(move |rec, _| answer(kind, rec, DIMS).delayed(Duration::from_secs(3))).await;
            let mut s = settings(kind, &server);
            s.http.request_timeout = Duration::from_millis(600);
            s.http.max_retries = 1;
            let p = RemoteProvider::new(kind, s).unwrap();
            let started = Instant::now();
            let err = p.embed(&texts(1, 5), EmbeddingPurpose::Query).await.unwrap_err();
            let elapsed = started.elapsed();
            assert!(err.is_transient(), "{kind}: {err}");
            assert!(err.to_string().contains("timed out after 600 ms"), "{kind}: {err}");
            assert_eq!(server.requests().len(), 2, "{kind}: timeout retried once");
            // Below the server's 3 s delay: the client gave up on its own, twice.
            assert!(elapsed < Duration::from_millis(2900), "{kind}: took {elapsed:?}");
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

#[tokio::test]
async fn malformed_json_is_permanent() {
    for kind in CATALOGUE {
        let server = MockServer::start(move |_, _| Reply::json(200, "{\"data\": [{\"embedding\": [0.1, ")).await;
        let p = provider(kind, &server);
        let err = p.embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap_err();
        assert!(matches!(err, EmbeddingError::Permanent { .. }), "{kind}: {err}");
        assert!(err.to_string().contains("malformed response"), "{kind}: {err}");
        assert_eq!(server.requests().len(), 1, "{kind}");
        // Valid JSON of the wrong shape is malformed too.
        let server = MockServer::start(move |_, _| Reply::json(200, r#"{"unexpected": true}"#)).await;
        let err = provider(kind, &server).embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap_err();
        assert!(err.to_string().contains("malformed response"), "{kind}: {err}");
    }
}

#[tokio::test]
async fn wrong_dimensions_are_an_error() {
    for kind in CATALOGUE {
        let server = MockServer::start(move |rec, _| answer(kind, rec, DIMS + 1)).await;
        let err = provider(kind, &server).embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap_err();
        assert!(matches!(err, EmbeddingError::Permanent { .. }), "{kind}: {err}");
        assert!(err.to_string().contains("5 dimensions, expected 4"), "{kind}: {err}");
    }
}

#[tokio::test]
async fn known_model_width_is_enforced() {
    // text-embedding-3-small is 1536 wide: a 4-wide answer is a broken server, not a new model.
    let kind = entry("openai");
    let server = MockServer::start(move |rec, _| answer(kind, rec, DIMS)).await;
    let mut s = settings(kind, &server);
    s.dimensions = None;
    let p = RemoteProvider::new(kind, s).unwrap();
    assert_eq!(p.dimensions(), Some(1536));
    let err = p.embed(&texts(1, 5), EmbeddingPurpose::Document).await.unwrap_err();
    assert!(err.to_string().contains("expected 1536"), "{err}");
}

#[tokio::test]
async fn wrong_vector_count_is_an_error() {
    for kind in CATALOGUE {
        if kind.protocol == Protocol::Ollama {
            continue; // covered below with its own body
        }
        let server = MockServer::start(move |rec, _| {
            let mut vectors: Vec<Vec<f32>> = texts_in(kind, rec).iter().map(|t| vector_for(t, DIMS)).collect();
            vectors.pop();
            Reply::json(200, success_body(kind, rec, &vectors))
        })
        .await;
        let err = provider(kind, &server).embed(&texts(3, 5), EmbeddingPurpose::Document).await.unwrap_err();
        assert!(matches!(err, EmbeddingError::Permanent { .. }), "{kind}: {err}");
        assert!(err.to_string().contains("2 vectors for 3 texts"), "{kind}: {err}");
    }
    let server = MockServer::start(|_, _| Reply::json(200, r#"{"model":"m","embeddings":[[1,0,0,0]]}"#)).await;
    let err = provider(entry("ollama"), &server).embed(&texts(3, 5), EmbeddingPurpose::Document).await.unwrap_err();
    assert!(err.to_string().contains("1 vectors for 3 texts"), "{err}");
}

#[tokio::test]
async fn non_finite_values_are_zeroed_then_normalised() {
    for kind in CATALOGUE {
        // Python's json module writes NaN / Infinity literals; others send null.
        let server = MockServer::start(move |rec, _| {
            let one = "[NaN, 3.0, 4.0, Infinity]";
            let body = match kind.protocol {
                Protocol::Gemini if rec.path.ends_with(":embedContent") => format!(r#"{{"embedding":{{"values":{one}}}}}"#),
                Protocol::Gemini => format!(r#"{{"embeddings":[{{"values":{one}}},{{"values":[null,3,4,-Infinity]}}]}}"#),
                Protocol::Ollama => format!(r#"{{"embeddings":[{one},[null,3,4,-Infinity]]}}"#),
                Protocol::OpenAi => format!(r#"{{"data":[{{"index":0,"embedding":{one}}},{{"index":1,"embedding":[null,3,4,-Infinity]}}]}}"#),
            };
            Reply::json(200, body)
        })
        .await;
        let out = provider(kind, &server).embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap();
        for v in out {
            assert_close(&v, &[0.0, 0.6, 0.8, 0.0]);
        }
    }
}

#[tokio::test]
async fn openai_orders_vectors_by_index() {
    let kind = entry("openai");
    let server = MockServer::start(move |rec, _| {
        let items: Vec<Value> = texts_in(kind, rec)
            .iter()
            .enumerate()
            .rev()
            .map(|(i, t)| json!({ "object": "embedding", "index": i, "embedding": vector_for(t, DIMS) }))
            .collect();
        Reply::json(200, json!({ "object": "list", "data": items }).to_string())
    })
    .await;
    let out = provider(kind, &server).embed(&texts(4, 5), EmbeddingPurpose::Document).await.unwrap();
    for (i, v) in out.iter().enumerate() {
        assert_close(v, &expected(i));
    }
}

#[tokio::test]
async fn openai_compatible_without_key_sends_custom_headers_and_learns_the_width() {
    let server = MockServer::start(|rec, n| answer(entry("openai-compatible"), rec, if n < 2 { 6 } else { 7 })).await;
    let p = RemoteProvider::new(
        entry("openai-compatible"),
        RemoteSettings {
            model: Some("nomic-embed-text-v1.5".into()),
            base_url: Some(format!("{}/v1/", server.url())),
            headers: [("HTTP-Referer".to_string(), "https://memory.example".to_string())].into(),
            http: fast_http(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.dimensions(), None);
    let fingerprint = p.fingerprint();
    p.embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap();
    assert_eq!(p.dimensions(), Some(6));
    assert_eq!(p.fingerprint(), fingerprint, "learning the width does not change the fingerprint");
    p.embed_query("t0 q").await.unwrap();
    let err = p.embed_query("t1 q").await.unwrap_err();
    assert!(err.to_string().contains("7 dimensions, expected 6"), "{err}");
    let reqs = server.requests();
    assert_eq!(reqs[0].path, "/v1/embeddings");
    assert_eq!(reqs[0].header("authorization"), None);
    assert_eq!(reqs[0].header("http-referer"), Some("https://memory.example"));
    assert_eq!(reqs[0].body["model"], "nomic-embed-text-v1.5");
    assert_eq!(reqs[0].body.get("input_type"), None);
}

#[tokio::test]
async fn openai_compatible_input_type_on_request() {
    let server = MockServer::start(|rec, _| answer(entry("openai-compatible"), rec, DIMS)).await;
    let mut s = settings(entry("openai-compatible"), &server);
    s.send_input_type = true;
    let plain_fp = provider(entry("openai-compatible"), &server).fingerprint();
    let p = RemoteProvider::new(entry("openai-compatible"), s).unwrap();
    assert_ne!(p.fingerprint(), plain_fp, "query/document distinction changes vectors");
    p.embed_query("t0 q").await.unwrap();
    p.embed(&texts(1, 1), EmbeddingPurpose::Document).await.unwrap();
    let reqs = server.requests();
    assert_eq!(reqs[0].body["input_type"], "query");
    assert_eq!(reqs[1].body["input_type"], "document");
}

#[tokio::test]
async fn ollama_falls_back_to_the_older_embeddings_endpoint() {
    let server = MockServer::start(|rec, _| match rec.path.as_str() {
        "/api/embed" => Reply::text(404, "404 page not found"),
        "/api/embeddings" => answer(entry("ollama"), rec, DIMS),
        _ => Reply::text(500, "unexpected path"),
    })
    .await;
    let p = provider(entry("ollama"), &server);
    let out = p.embed(&texts(2, 5), EmbeddingPurpose::Document).await.unwrap();
    assert_close(&out[0], &expected(0));
    assert_close(&out[1], &expected(1));
    p.embed_query("t5 q").await.unwrap();
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    // One probe of /api/embed, then the old endpoint one text at a time, remembered for later calls.
    assert_eq!(paths, vec!["/api/embed", "/api/embeddings", "/api/embeddings", "/api/embeddings"]);
    let legacy = &server.requests()[1];
    assert_eq!(legacy.body["model"], "nomic-embed-text");
    assert_eq!(legacy.body["prompt"], texts(1, 5)[0]);
}

#[tokio::test]
async fn ollama_missing_model_is_permanent_without_fallback_probe() {
    let server = MockServer::start(|_, _| Reply::json(404, r#"{"error":"model \"nomic-embed-text\" not found, try pulling it first"}"#)).await;
    let err = provider(entry("ollama"), &server).embed(&texts(1, 5), EmbeddingPurpose::Document).await.unwrap_err();
    assert!(matches!(err, EmbeddingError::Permanent { .. }), "{err}");
    assert!(err.to_string().contains("ollama pull nomic-embed-text"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn connection_refused_is_transient() {
    // Bind then drop a listener: nothing listens on that port any more.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut s = RemoteSettings { base_url: Some(format!("http://{addr}/v1")), api_key: ApiKey::new(KEY), http: fast_http(), ..Default::default() };
    s.http.max_retries = 1;
    let err = RemoteProvider::new(entry("mistral"), s).unwrap().embed_query("t0 q").await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("connection failed"), "{err}");
}

#[test]
fn provider_defaults() {
    let p = RemoteProvider::new(entry("gemini"), RemoteSettings { api_key: ApiKey::new(KEY), ..Default::default() }).unwrap();
    assert_eq!(p.model(), "gemini-embedding-001");
    assert_eq!(p.dimensions(), Some(3072));
    assert_eq!(p.base_url(), "https://generativelanguage.googleapis.com/v1beta");
    let p = RemoteProvider::new(entry("openai-compatible"), RemoteSettings { model: Some("m".into()), ..Default::default() }).unwrap();
    assert_eq!(p.base_url(), "http://127.0.0.1:1234/v1");
    let p = RemoteProvider::new(entry("ollama"), RemoteSettings::default()).unwrap();
    assert_eq!((p.model(), p.dimensions(), p.base_url()), ("nomic-embed-text", Some(768), "http://127.0.0.1:11434"));
    assert_eq!(p.limits().max_tokens, 8000);
}

/// Like [`answer`], but a request that says it embeds a query (an input type or task type naming one) gets vectors
/// with a third component, so a provider that tells queries from documents shows it in its vectors.
fn answer_by_purpose(kind: Kind, rec: &Recorded) -> Reply {
    let says_query = |v: &Value| v.as_str().is_some_and(|t| t.to_ascii_lowercase().contains("query"));
    let query = match kind.protocol {
        Protocol::Gemini if rec.path.ends_with(":embedContent") => says_query(&rec.body["taskType"]),
        Protocol::Gemini => rec.body["requests"].as_array().unwrap().iter().all(|r| says_query(&r["taskType"])),
        Protocol::OpenAi | Protocol::Ollama => says_query(&rec.body["input_type"]),
    };
    let vectors: Vec<Vec<f32>> = texts_in(kind, rec)
        .iter()
        .map(|t| {
            let mut v = vector_for(t, DIMS);
            v[2] = if query { 1.0 } else { 0.0 };
            v
        })
        .collect();
    Reply::json(200, success_body(kind, rec, &vectors))
}

/// Every catalogue provider against its wire format keeps the provider contract; Gemini's and Voyage's input
/// types (and an OpenAI-compatible server's, when asked for) tell queries from documents, the others' do not.
#[tokio::test]
async fn every_provider_honours_the_provider_contract() {
    for kind in CATALOGUE {
        let server = MockServer::start(move |rec, _| answer_by_purpose(kind, rec)).await;
        let p = provider(kind, &server);
        let purposes_differ = matches!(kind.id, "gemini" | "voyage");
        common::contract::check(&p, common::contract::Expect { purposes_differ }).await;
    }
    let kind = entry("openai-compatible");
    let server = MockServer::start(move |rec, _| answer_by_purpose(kind, rec)).await;
    let mut s = settings(kind, &server);
    s.send_input_type = true;
    let p = RemoteProvider::new(kind, s).unwrap();
    common::contract::check(&p, common::contract::Expect { purposes_differ: true }).await;
}

/// The fallback keeps the contract with its primary answering, and again once it switched to its secondary.
#[tokio::test]
async fn fallback_honours_the_provider_contract_before_and_after_switching() {
    let down = Arc::new(AtomicBool::new(false));
    let primary_kind = entry("voyage");
    let primary_down = down.clone();
    let primary = MockServer::start(move |rec, _| {
        if primary_down.load(Ordering::SeqCst) {
            Reply::json(400, error_body(primary_kind, 400, "bad request"))
        } else {
            answer_by_purpose(primary_kind, rec)
        }
    })
    .await;
    let secondary_kind = entry("ollama");
    let secondary = MockServer::start(move |rec, _| answer_by_purpose(secondary_kind, rec)).await;
    let p = FallbackProvider::new(Arc::new(provider(primary_kind, &primary)), Arc::new(provider(secondary_kind, &secondary)));
    common::contract::check(&p, common::contract::Expect { purposes_differ: true }).await;
    assert!(secondary.requests().is_empty(), "the secondary answered while the primary worked");

    down.store(true, Ordering::SeqCst);
    assert!(p.embed_query("t0 q").await.is_err(), "the failing call reports the failure");
    assert!(p.is_switched());
    common::contract::check(&p, common::contract::Expect { purposes_differ: false }).await;
    assert_eq!(p.id(), "ollama");
}

/// A provider added as one catalogue entry, as docs/providers.md shows it: it is reached over its protocol,
/// reports its own id, reads its key variable and keeps the contract.
#[tokio::test]
async fn an_openai_compatible_service_is_one_entry() {
    static TOGETHER: Provider = Provider {
        id: "together",
        default_model: Some("bge-base"),
        dimensions: &[("bge-base", DIMS)],
        base_url: "https://api.together.xyz/v1",
        key_env: Some("TOGETHER_API_KEY"),
        key_required: true,
        config_entries: &["together"],
        self_hosted: false,
        custom_apis: &[],
        ..catalogue::OPENAI_COMPATIBLE
    };
    let server = MockServer::start(|rec, _| answer_by_purpose(&TOGETHER, rec)).await;
    let p = provider(&TOGETHER, &server);
    assert_eq!((p.id(), p.model()), ("together", "bge-base"));
    common::contract::check(&p, common::contract::Expect { purposes_differ: false }).await;
    let rec = &server.requests()[0];
    assert_eq!(rec.path, "/v1/embeddings");
    assert_eq!(rec.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    let err = RemoteProvider::new(&TOGETHER, RemoteSettings::default()).unwrap_err();
    assert!(err.to_string().contains("TOGETHER_API_KEY"), "{err}");
}

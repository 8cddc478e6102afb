//! Where a local model's file comes from (`providers::model_file`) against a loopback server speaking Hugging
//! Face's `resolve` URLs (reached through `HF_ENDPOINT`): a redirect to the file, `Range` requests, 404, a
//! transfer cut in the middle and resumed, a wrong digest, a partial file left by an earlier process, bounds
//! (redirect loops, huge or endless answers), OpenClaw's cache used without a request, and offline.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memory_core::config::LocalConfig;
use memory_core::Config;
use providers::model_file::{self, Artifact, DownloadError, DownloadOptions, ModelDownload, ModelFileError, Places};
use providers::{from_config_with, ResolveOptions};
use sha2::{Digest, Sha256};

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    range: Option<String>,
}

/// What the server answers: a status with headers and a body, of which only `send` bytes may be written before
/// the connection is closed (a cut transfer), or bytes without end.
enum Answer {
    Plain { status: u16, headers: Vec<(String, String)>, body: Arc<Vec<u8>>, send: Option<usize> },
    Endless,
}

type Handler = dyn Fn(&Seen, usize) -> Answer + Send + Sync;

struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start(handler: impl Fn(&Seen, usize) -> Answer + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, handler) = (log.clone(), handler.clone());
                std::thread::spawn(move || serve(stream, &log, &*handler));
            }
        });
        Server { url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>, handler: &Handler) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split(' ').nth(1).unwrap_or_default().to_string();
    let mut range = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("range") {
                range = Some(v.trim().to_string());
            }
        }
    }
    let seen = Seen { path, range };
    let n = {
        let mut l = log.lock().unwrap();
        l.push(seen.clone());
        l.len() - 1
    };
    let mut out = stream;
    match handler(&seen, n) {
        Answer::Plain { status, headers, body, send } => {
            let mut head = format!("HTTP/1.1 {status} X\r\nconnection: close\r\n");
            if !headers.iter().any(|(k, _)| k == "content-length") {
                head.push_str(&format!("content-length: {}\r\n", body.len()));
            }
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(&body[..send.unwrap_or(body.len()).min(body.len())]);
            let _ = out.flush();
        }
        Answer::Endless => {
            let _ = out.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n");
            let block = vec![b'x'; 64 * 1024];
            while out.write_all(&block).is_ok() {}
        }
    }
    let _ = out.shutdown(std::net::Shutdown::Both);
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// A model file: GGUF's magic, then `len` bytes that differ along the file (so a misplaced resume shows).
fn model_bytes(len: usize) -> Arc<Vec<u8>> {
    let mut v = b"GGUF".to_vec();
    v.extend((0..len).map(|i| (i * 7 % 251) as u8));
    Arc::new(v)
}

fn plain(status: u16, headers: &[(&str, String)], body: Arc<Vec<u8>>) -> Answer {
    Answer::Plain { status, headers: headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(), body, send: None }
}

/// Hugging Face's answers: `resolve` redirects to the CDN with the LFS digest and size (`published` lets a test
/// publish another digest), the CDN serves the file, whole or from a `Range`, `cut` cutting the n-th request's
/// transfer after that many bytes.
fn hugging_face(files: HashMap<String, Arc<Vec<u8>>>, published: Option<String>, cut: Option<(usize, usize)>) -> impl Fn(&Seen, usize) -> Answer {
    move |req, n| {
        let path = req.path.split('?').next().unwrap_or_default();
        if let Some(file) = path.split_once("/resolve/").and_then(|(_, rest)| rest.split_once('/')).map(|(_, f)| f) {
            let Some(body) = files.get(file) else { return plain(404, &[], Arc::new(b"Entry not found".to_vec())) };
            let digest = published.clone().unwrap_or_else(|| sha256(body));
            return plain(
                302,
                &[("location", format!("/cdn/{file}")), ("x-linked-etag", format!("\"{digest}\"")), ("x-linked-size", body.len().to_string())],
                Arc::new(Vec::new()),
            );
        }
        let Some(body) = path.strip_prefix("/cdn/").and_then(|f| files.get(f)) else { return plain(404, &[], Arc::new(Vec::new())) };
        let from = req.range.as_deref().and_then(|r| r.strip_prefix("bytes=")).and_then(|r| r.trim_end_matches('-').parse::<usize>().ok());
        let mut answer = match from {
            Some(from) if from >= body.len() => plain(416, &[], Arc::new(Vec::new())),
            Some(from) => {
                plain(206, &[("content-range", format!("bytes {from}-{}/{}", body.len() - 1, body.len()))], Arc::new(body[from..].to_vec()))
            }
            None => plain(200, &[], body.clone()),
        };
        if let (Some((at, len)), Answer::Plain { send, .. }) = (cut, &mut answer) {
            if at == n {
                *send = Some(len);
            }
        }
        answer
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    cache: PathBuf,
    env: HashMap<String, String>,
}

fn setup(server: &Server) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let cache = tmp.path().join("memory-rs");
    std::fs::create_dir_all(&home).unwrap();
    let env = [("HOME", home.to_str().unwrap()), ("MEMORY_RS_CACHE", cache.to_str().unwrap()), ("HF_ENDPOINT", server.url.as_str())]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Setup { _tmp: tmp, home, cache, env }
}

impl Setup {
    fn locate(&self, spec: &str, options: &DownloadOptions) -> Result<PathBuf, ModelFileError> {
        let env = |k: &str| self.env.get(k).cloned();
        model_file::locate(spec, &Places::new(&LocalConfig::default(), &env), &env, ModelDownload::Allowed, options)
    }
}

/// Why a download failed, from the error that says what to do.
fn download_error(e: &ModelFileError) -> &DownloadError {
    match e {
        ModelFileError::Download { source, .. } => source,
        other => panic!("not a failed download: {other:?}"),
    }
}

fn fast() -> DownloadOptions {
    DownloadOptions {
        retry_pause: Duration::from_millis(10),
        stall_timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

/// What is left in a folder besides `keep` (partial files, digests, locks but the lock).
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| !n.ends_with(".lock")).collect()
}

#[test]
fn an_hf_uri_is_downloaded_through_the_redirect_checked_and_then_found_in_the_cache() {
    let body = model_bytes(300_000);
    let server = Server::start(hugging_face(HashMap::from([("sub/model.Q8_0.gguf".to_string(), body.clone())]), None, None));
    let s = setup(&server);
    let path = s.locate("hf:owner/repo/sub/model.Q8_0.gguf", &fast()).unwrap();
    assert_eq!(path, s.cache.join("models/hf_owner_repo_sub_model.Q8_0.gguf"), "OpenClaw's name, in this project's cache");
    assert_eq!(std::fs::read(&path).unwrap(), *body);
    let seen: Vec<_> = server.seen().iter().map(|r| r.path.clone()).collect();
    assert_eq!(seen, ["/owner/repo/resolve/main/sub/model.Q8_0.gguf?download=true", "/cdn/sub/model.Q8_0.gguf"]);
    assert_eq!(leftovers(&s.cache.join("models")), ["hf_owner_repo_sub_model.Q8_0.gguf"], "no partial file or digest left");
    // Found in the cache next time: no request.
    assert_eq!(s.locate("hf:owner/repo/sub/model.Q8_0.gguf", &fast()).unwrap(), path);
    assert_eq!(server.seen().len(), 2);
}

#[test]
fn a_transfer_cut_in_the_middle_is_resumed_with_a_range_request() {
    let body = model_bytes(400_000);
    // The first transfer (request 1, after the redirect) stops after 150,000 bytes.
    let server = Server::start(hugging_face(HashMap::from([("m.gguf".to_string(), body.clone())]), None, Some((1, 150_000))));
    let s = setup(&server);
    let path = s.locate("hf:o/r/m.gguf", &fast()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), *body, "the resumed file is the file");
    let seen = server.seen();
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[1].range, None);
    let resumed_at: usize = seen[3].range.as_deref().unwrap().trim_start_matches("bytes=").trim_end_matches('-').parse().unwrap();
    assert!(resumed_at > 0 && resumed_at <= 150_000, "resumed where it stopped: {resumed_at}");
    assert_eq!(seen[2].range, seen[3].range, "the redirect is asked with the range too");
}

#[test]
fn a_partial_file_an_earlier_process_left_is_resumed_and_a_stale_one_restarted() {
    let body = model_bytes(200_000);
    let server = Server::start(hugging_face(HashMap::from([("m.gguf".to_string(), body.clone())]), None, None));
    let s = setup(&server);
    let dir = s.cache.join("models");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hf_o_r_m.gguf.partial"), &body[..120_000]).unwrap();
    std::fs::write(dir.join("hf_o_r_m.gguf.partial.sha256"), sha256(&body)).unwrap();
    let path = s.locate("hf:o/r/m.gguf", &fast()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), *body);
    assert_eq!(server.seen()[1].range.as_deref(), Some("bytes=120000-"));

    // A partial file of another version of the file (its digest differs) is not resumed: it starts anew.
    let server = Server::start(hugging_face(HashMap::from([("m.gguf".to_string(), body.clone())]), None, None));
    let s = setup(&server);
    let dir = s.cache.join("models");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hf_o_r_m.gguf.partial"), vec![0u8; 50_000]).unwrap();
    std::fs::write(dir.join("hf_o_r_m.gguf.partial.sha256"), sha256(b"an older file")).unwrap();
    let path = s.locate("hf:o/r/m.gguf", &fast()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), *body);
    assert_eq!(server.seen().last().unwrap().range, None, "{:?}", server.seen());
}

#[test]
fn not_found_is_one_clear_error_tried_once_per_process() {
    let server = Server::start(hugging_face(HashMap::new(), None, None));
    let s = setup(&server);
    let e = s.locate("hf:o/r/missing.gguf", &fast()).unwrap_err();
    let msg = e.to_string();
    let dest = s.cache.join("models/hf_o_r_missing.gguf");
    assert!(matches!(download_error(&e), DownloadError::Status { status: 404, .. }), "{e:?}");
    for part in [
        format!("{}/o/r/resolve/main/missing.gguf", server.url),
        "404".into(),
        format!("put the file at {}", dest.display()),
        "local GGUF file".into(),
    ] {
        assert!(msg.contains(&part), "{part:?} in {msg}");
    }
    assert_eq!(server.seen().len(), 1);
    let again = s.locate("hf:o/r/missing.gguf", &fast()).unwrap_err();
    assert_eq!(again.to_string(), msg);
    assert_eq!(server.seen().len(), 1, "not asked again in this process");
    assert!(!dest.exists());
}

#[test]
fn a_wrong_digest_is_refused_and_nothing_is_left_that_looks_complete() {
    let body = model_bytes(100_000);
    let server = Server::start(hugging_face(HashMap::from([("m.gguf".to_string(), body)]), Some(sha256(b"another file")), None));
    let s = setup(&server);
    let e = s.locate("hf:o/r/m.gguf", &fast()).unwrap_err();
    assert!(matches!(download_error(&e), DownloadError::DigestMismatch { .. }), "{e:?}");
    assert!(e.to_string().contains(&sha256(b"another file")), "{e}");
    assert!(leftovers(&s.cache.join("models")).is_empty(), "{:?}", leftovers(&s.cache.join("models")));
}

#[test]
fn redirect_loops_huge_and_endless_answers_are_bounded() {
    let server = Server::start(|req, _| {
        let path = req.path.split('?').next().unwrap_or_default().to_string();
        match path.as_str() {
            p if p.contains("/loop/") => plain(302, &[("location", p.to_string())], Arc::new(Vec::new())),
            p if p.contains("/huge/") => Answer::Plain {
                status: 200,
                headers: vec![("x-linked-etag".into(), sha256(b"x")), ("content-length".into(), (u64::MAX / 2).to_string())],
                body: Arc::new(Vec::new()),
                send: Some(0),
            },
            _ => Answer::Endless,
        }
    });
    let s = setup(&server);
    let options = DownloadOptions { max_bytes: 1 << 20, ..fast() };
    let e = s.locate("hf:o/loop/m.gguf", &options).unwrap_err();
    assert!(matches!(download_error(&e), DownloadError::Redirects { max: 10, .. }), "{e:?}");
    assert_eq!(server.seen().len(), 11);

    let huge = Artifact {
        uri: "https://example/huge/m.gguf".into(),
        file_name: "huge.gguf".into(),
        url: format!("{}/huge/m.gguf", server.url),
        size: None,
        sha256: None,
        openclaw_default: false,
    };
    let dest = s.home.join("dl/huge.gguf");
    let e = model_file::download_file(&huge, &dest, &options).unwrap_err();
    assert!(matches!(e, DownloadError::TooLarge { .. }), "{e:?}");

    let endless = Artifact { url: format!("{}/endless/m.gguf", server.url), sha256: Some(sha256(b"x")), file_name: "endless.gguf".into(), ..huge };
    let dest = s.home.join("dl/endless.gguf");
    let e = model_file::download_file(&endless, &dest, &options).unwrap_err();
    assert!(matches!(e, DownloadError::TooLarge { size, .. } if size > 1 << 20 && size < 2 << 20), "{e:?}");
    assert!(!dest.exists() && !s.home.join("dl/endless.gguf.partial").exists());
}

#[test]
fn a_url_without_a_published_digest_is_refused_and_a_digest_header_is_checked() {
    let body = model_bytes(10_000);
    let b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&*body))
    };
    let served = body.clone();
    let server = Server::start(move |req, _| match req.path.as_str() {
        "/plain/m.gguf" => plain(200, &[], served.clone()),
        _ => plain(200, &[("digest", format!("sha-256={b64}"))], served.clone()),
    });
    let s = setup(&server);
    let artifact = |path: &str| Artifact {
        uri: format!("https://models.example{path}"),
        file_name: "m.gguf".into(),
        url: format!("{}{path}", server.url),
        size: None,
        sha256: None,
        openclaw_default: false,
    };
    let e = model_file::download_file(&artifact("/plain/m.gguf"), &s.home.join("a/m.gguf"), &fast()).unwrap_err();
    assert!(matches!(e, DownloadError::NoDigest { .. }), "{e:?}");
    assert!(!s.home.join("a/m.gguf").exists());
    model_file::download_file(&artifact("/digest/m.gguf"), &s.home.join("b/m.gguf"), &fast()).unwrap();
    assert_eq!(std::fs::read(s.home.join("b/m.gguf")).unwrap(), *body);
}

/// OpenClaw's default model, as OpenClaw caches it: a file of the pinned size starting with GGUF's magic (sparse).
fn place_openclaw_default(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("hf_ggml-org_embeddinggemma-300m-qat-Q8_0.gguf");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"GGUF").unwrap();
    f.set_len(328_577_056).unwrap();
    path
}

#[test]
fn openclaws_cached_default_model_is_used_without_a_request() {
    let server = Server::start(|_, _| plain(500, &[], Arc::new(Vec::new())));
    let s = setup(&server);
    let cached = place_openclaw_default(&s.home.join(".openclaw/models/llama.cpp"));
    assert_eq!(s.locate(model_file::OPENCLAW_DEFAULT_MODEL, &fast()).unwrap(), cached);
    // `provider: "local"` without `modelPath` is that model.
    let mut config = Config::default();
    config.memory.search.provider = "local".into();
    let env = s.env.clone();
    let p = from_config_with(&config, &|k| env.get(k).cloned(), &ResolveOptions::default()).unwrap().unwrap();
    // The file is a stand-in's here (GGUF's magic and zeros), so whatever opens it names it when it cannot.
    if let Some(why) = p.unavailable() {
        assert!(why.contains(cached.to_str().unwrap()), "{why}");
    }
    // `local.modelCacheDir` is where OpenClaw keeps it when set; a file of another size there is not it.
    let elsewhere = s.home.join("models");
    let there = place_openclaw_default(&elsewhere);
    let local = LocalConfig { model_cache_dir: Some(elsewhere.to_str().unwrap().into()), ..Default::default() };
    let env = |k: &str| s.env.get(k).cloned();
    let places = Places::new(&local, &env);
    assert_eq!(model_file::locate(model_file::OPENCLAW_DEFAULT_MODEL, &places, &env, ModelDownload::Never, &fast()).unwrap(), there);
    std::fs::File::options().write(true).open(&there).unwrap().set_len(1000).unwrap();
    assert_eq!(model_file::locate(model_file::OPENCLAW_DEFAULT_MODEL, &places, &env, ModelDownload::Never, &fast()).unwrap(), cached);
    assert!(server.seen().is_empty(), "{:?}", server.seen());
}

#[test]
fn offline_and_refused_downloads_leave_the_stand_in_with_one_clear_reason() {
    let server = Server::start(hugging_face(HashMap::new(), None, None));
    let s = setup(&server);
    let mut config = Config::default();
    config.memory.search.provider = "local".into();
    config.memory.search.local.model_path = Some("hf:o/r/gone.gguf".into());
    let mut env = s.env.clone();
    env.insert("HF_HUB_OFFLINE".into(), "1".into());
    let p = from_config_with(&config, &|k| env.get(k).cloned(), &ResolveOptions::default()).unwrap().expect("the stand-in");
    let why = p.unavailable().expect("a stand-in").to_string();
    assert!(why.starts_with("memory.search.local.modelPath: hf:o/r/gone.gguf is not on this machine"), "{why}");
    assert!(why.contains("HF_HUB_OFFLINE") && why.contains("searches answer by words meanwhile"), "{why}");
    assert!(server.seen().is_empty());

    // Online, the server refuses (404): the stand-in says so, naming the URL; the download is tried once.
    let env = s.env.clone();
    let options = ResolveOptions { download: fast(), ..Default::default() };
    for _ in 0..3 {
        let p = from_config_with(&config, &|k| env.get(k).cloned(), &options).unwrap().expect("the stand-in");
        let why = p.unavailable().expect("a stand-in").to_string();
        assert!(why.contains(&format!("{}/o/r/resolve/main/gone.gguf", server.url)) && why.contains("HTTP 404"), "{why}");
    }
    assert_eq!(server.seen().len(), 1, "one attempt in this process");
}

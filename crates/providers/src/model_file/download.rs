//! Downloading one model file: resumable (HTTP `Range` on a `.partial` file), checked (the size, and the SHA-256
//! the server publishes or the one pinned), atomic (the finished file is fsynced and renamed into place, so a
//! file under its final name is always whole), bounded (redirects, bytes, stalls) and shown (a bar on a
//! terminal, plain lines in the logs).
//!
//! One process downloads a file at a time: `<file>.lock` is held meanwhile, and a process that waited for it
//! finds the file there.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::{HeaderMap, CONTENT_LENGTH, CONTENT_RANGE, LOCATION, RANGE};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use super::progress::Progress;
use super::Artifact;

/// Limits and patience of a download.
#[derive(Debug, Clone)]
pub struct DownloadOptions {
    /// Most bytes a model file may have: a larger announced size, or a server sending more, is refused.
    pub max_bytes: u64,
    /// Most redirects followed (Hugging Face answers `resolve` URLs with one, to its CDN).
    pub max_redirects: usize,
    pub connect_timeout: Duration,
    /// How long the transfer may go without a byte before it counts as cut.
    pub stall_timeout: Duration,
    /// Tries in all: a try after one that received bytes resumes where it stopped; a server error (429, 5xx)
    /// is tried again too. A server that cannot be reached at all is not (offline is said at once).
    pub attempts: usize,
    /// Pause before the second try, doubling after each.
    pub retry_pause: Duration,
}

impl Default for DownloadOptions {
    fn default() -> Self {
        DownloadOptions {
            max_bytes: 64 << 30,
            max_redirects: 10,
            connect_timeout: Duration::from_secs(15),
            stall_timeout: Duration::from_secs(60),
            attempts: 5,
            retry_pause: Duration::from_secs(1),
        }
    }
}

/// Why a download failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DownloadError {
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("{url} answered HTTP {status}{hint}")]
    Status { url: String, status: u16, hint: &'static str },
    #[error("{url}: more than {max} redirects")]
    Redirects { url: String, max: usize },
    #[error("{url} redirects to {to}, which is not an https URL")]
    Downgrade { url: String, to: String },
    #[error("the transfer from {url} stopped at {got} bytes: {message}")]
    Cut { url: String, got: u64, message: String },
    #[error("{url} is {size} bytes, more than the {max} a model file may have")]
    TooLarge { url: String, size: u64, max: u64 },
    #[error("{url} sent more than the {expected} bytes it announced")]
    Overlong { url: String, expected: u64 },
    #[error("the file from {url} is {got} bytes, not the {expected} expected; removed")]
    SizeMismatch { url: String, got: u64, expected: u64 },
    #[error("{url} publishes no SHA-256 digest of the file (X-Linked-Etag, X-Checksum-Sha256 or Digest), so it cannot be checked")]
    NoDigest { url: String },
    #[error("the file from {url} has SHA-256 {actual}, not the {expected} expected; removed")]
    DigestMismatch { url: String, expected: String, actual: String },
    #[error("the file from {url} is not a GGUF file; removed")]
    NotGguf { url: String },
    #[error("{context} {}: {message}", .path.display())]
    Io { context: &'static str, path: PathBuf, message: String },
}

impl DownloadError {
    /// Worth another try: the server was busy, or the transfer stopped after bytes came.
    fn retryable(&self, progressed: bool) -> bool {
        match self {
            DownloadError::Status { status, .. } => *status == 429 || *status >= 500,
            DownloadError::Cut { .. } => progressed,
            _ => false,
        }
    }
}

fn io_err<'a>(context: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> DownloadError + 'a {
    move |e| DownloadError::Io { context, path: path.to_path_buf(), message: e.to_string() }
}

/// Download `artifact` to `dest` (a file path), blocking the calling thread. The work runs on a thread of its own
/// with its own runtime, so it may be called from inside or outside an async runtime.
pub fn download_blocking(artifact: &Artifact, dest: &Path, options: &DownloadOptions) -> Result<(), DownloadError> {
    let (artifact, dest_owned, options) = (artifact.clone(), dest.to_path_buf(), options.clone());
    let worker = std::thread::Builder::new()
        .name("model-download".into())
        .spawn(move || -> Result<(), DownloadError> {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| DownloadError::Io {
                context: "cannot start the download for",
                path: dest_owned.clone(),
                message: e.to_string(),
            })?;
            runtime.block_on(download(&artifact, &dest_owned, &options))
        })
        .map_err(io_err("cannot start the download for", dest))?;
    worker
        .join()
        .unwrap_or_else(|_| Err(DownloadError::Io { context: "the download stopped unexpectedly for", path: dest.into(), message: "panic".into() }))
}

/// `<dest>.<suffix>` beside it.
fn beside(dest: &Path, suffix: &str) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    dest.with_file_name(name)
}

/// Whether `path` is a whole model file: the expected size when known, and GGUF's magic.
pub(super) fn is_complete(path: &Path, size: Option<u64>) -> bool {
    let Ok(meta) = std::fs::metadata(path) else { return false };
    meta.is_file() && size.is_none_or(|s| meta.len() == s) && is_gguf(path)
}

fn is_gguf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == b"GGUF"
}

/// The download itself (see the module's doc).
pub async fn download(artifact: &Artifact, dest: &Path, options: &DownloadOptions) -> Result<(), DownloadError> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err("cannot create the model folder", dir))?;
    let lock_path = beside(dest, ".lock");
    let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path).map_err(io_err("cannot open", &lock_path))?;
    if matches!(lock.try_lock(), Err(std::fs::TryLockError::WouldBlock)) {
        info!(file = %dest.display(), "another process is downloading this model file; waiting for it");
        lock.lock().map_err(io_err("cannot lock", &lock_path))?;
    }
    if is_complete(dest, artifact.size) {
        return Ok(());
    }
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(options.connect_timeout)
        .user_agent(concat!("memory-rs/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| DownloadError::Unreachable { url: artifact.url.clone(), message: format!("cannot build an HTTP client: {e}") })?;
    let mut pause = options.retry_pause;
    let mut attempt = 1;
    loop {
        let mut progressed = false;
        match try_once(&client, artifact, dest, options, &mut progressed).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt < options.attempts && e.retryable(progressed) => {
                warn!(url = %artifact.url, error = %e, attempt, "model download interrupted; trying again");
                tokio::time::sleep(pause).await;
                pause *= 2;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The SHA-256 a response publishes: `X-Checksum-Sha256` or `X-Linked-Etag` (Hugging Face's, for LFS files: on
/// the `resolve` URL's redirect), as 64 hex digits, or `Digest: sha-256=<base64>`.
fn published_sha256(headers: &HeaderMap) -> Option<String> {
    for name in ["x-checksum-sha256", "x-linked-etag"] {
        let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) else { continue };
        let v = v.trim().trim_start_matches("W/").replace('"', "");
        let v = v.trim();
        if v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Some(v.to_ascii_lowercase());
        }
    }
    let digest = headers.get("digest").and_then(|v| v.to_str().ok())?;
    digest.split(',').find_map(|part| {
        let (alg, value) = part.trim().split_once('=')?;
        if !alg.trim().eq_ignore_ascii_case("sha-256") {
            return None;
        }
        let bytes = base64::engine::general_purpose::STANDARD.decode(value.trim()).ok()?;
        (bytes.len() == 32).then(|| hex::encode(bytes))
    })
}

fn header_u64(headers: &HeaderMap, name: impl reqwest::header::AsHeaderName) -> Option<u64> {
    headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok())
}

/// `Content-Range: bytes <first>-<last>/<total>`: the first byte and the total (when given).
fn content_range(headers: &HeaderMap) -> Option<(u64, Option<u64>)> {
    let v = headers.get(CONTENT_RANGE)?.to_str().ok()?.trim().strip_prefix("bytes ")?;
    let (range, total) = v.split_once('/')?;
    let first = range.split_once('-')?.0.trim().parse().ok()?;
    Some((first, total.trim().parse().ok()))
}

/// The answer to a GET after its redirects, with what the hops published on the way.
struct Answer {
    response: reqwest::Response,
    sha256: Option<String>,
    linked_size: Option<u64>,
}

async fn get(client: &reqwest::Client, url: &str, offset: u64, options: &DownloadOptions) -> Result<Answer, DownloadError> {
    let unreachable = |url: &str, e: &dyn std::fmt::Display| DownloadError::Unreachable { url: url.to_string(), message: e.to_string() };
    let mut current = reqwest::Url::parse(url).map_err(|e| unreachable(url, &e))?;
    let (mut sha256, mut linked_size) = (None, None);
    for _ in 0..=options.max_redirects {
        let mut request = client.get(current.clone());
        if offset > 0 {
            request = request.header(RANGE, format!("bytes={offset}-"));
        }
        let response = request.send().await.map_err(|e| unreachable(current.as_str(), &error_chain(&e)))?;
        sha256 = sha256.or_else(|| published_sha256(response.headers()));
        linked_size = linked_size.or_else(|| header_u64(response.headers(), "x-linked-size"));
        if !response.status().is_redirection() {
            return Ok(Answer { response, sha256, linked_size });
        }
        let Some(location) = response.headers().get(LOCATION).and_then(|l| l.to_str().ok()) else {
            return Ok(Answer { response, sha256, linked_size });
        };
        let next = current.join(location).map_err(|e| unreachable(current.as_str(), &e))?;
        if current.scheme() == "https" && next.scheme() != "https" {
            return Err(DownloadError::Downgrade { url: url.into(), to: next.to_string() });
        }
        current = next;
    }
    Err(DownloadError::Redirects { url: url.into(), max: options.max_redirects })
}

/// What went wrong with a request, in a few words: reqwest's own message repeats the URL the error already names
/// ("error sending request for url (...)"), the root cause says why ("Connection refused", "failed to lookup
/// address information", "connection closed before message completed").
fn error_chain(e: &reqwest::Error) -> String {
    let mut root: Option<&dyn std::error::Error> = None;
    let mut next = std::error::Error::source(e);
    while let Some(s) = next {
        root = Some(s);
        next = s.source();
    }
    let why = root.map_or_else(|| e.to_string(), std::string::ToString::to_string);
    if e.is_timeout() {
        format!("timed out ({why})")
    } else if e.is_connect() {
        format!("cannot connect: {why}")
    } else {
        why
    }
}

/// One request: resumes `<dest>.partial` when it holds bytes of the same file (the digest they were checked
/// against is kept beside it, `<dest>.partial.sha256`), else starts it anew.
async fn try_once(
    client: &reqwest::Client,
    artifact: &Artifact,
    dest: &Path,
    options: &DownloadOptions,
    progressed: &mut bool,
) -> Result<(), DownloadError> {
    let url = artifact.url.as_str();
    let partial = beside(dest, ".partial");
    let digest_file = beside(dest, ".partial.sha256");
    let mut offset = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
    let answer = get(client, url, offset, options).await?;
    let status = answer.response.status().as_u16();
    let headers = answer.response.headers().clone();
    let restart = |why: &str| -> Result<(), DownloadError> {
        // The bytes kept cannot be resumed: the next try starts the file anew.
        File::create(&partial).map_err(io_err("cannot write", &partial))?;
        Err(DownloadError::Cut { url: url.into(), got: 0, message: why.into() })
    };
    match status {
        200 => offset = 0,
        206 => match content_range(&headers) {
            Some((first, _)) if first == offset => {}
            _ => {
                *progressed = true;
                return restart("the server resumed at another byte than asked");
            }
        },
        416 if offset > 0 => {
            *progressed = true;
            return restart("the server refused to resume the partial file");
        }
        404 => return Err(DownloadError::Status { url: url.into(), status, hint: " (no such file at this revision)" }),
        401 | 403 => {
            return Err(DownloadError::Status { url: url.into(), status, hint: " (a gated or private repository: download the file yourself)" })
        }
        _ => return Err(DownloadError::Status { url: url.into(), status, hint: "" }),
    }
    let Some(expected) = artifact.sha256.clone().or(answer.sha256) else {
        return Err(DownloadError::NoDigest { url: url.into() });
    };
    if offset > 0 && std::fs::read_to_string(&digest_file).ok().as_deref().map(str::trim) != Some(expected.as_str()) {
        *progressed = true;
        return restart("the partial file was of another version of the file");
    }
    std::fs::write(&digest_file, &expected).map_err(io_err("cannot write", &digest_file))?;
    let length = header_u64(&headers, CONTENT_LENGTH);
    let total =
        artifact.size.or(answer.linked_size).or_else(|| content_range(&headers).and_then(|(_, total)| total)).or_else(|| length.map(|l| l + offset));
    if let Some(size) = total.filter(|s| *s > options.max_bytes) {
        return Err(DownloadError::TooLarge { url: url.into(), size, max: options.max_bytes });
    }
    let limit = total.unwrap_or(options.max_bytes);

    let mut file = if offset == 0 { File::create(&partial) } else { OpenOptions::new().append(true).open(&partial) }
        .map_err(io_err("cannot write", &partial))?;
    let mut hasher = Sha256::new();
    if offset > 0 {
        hash_prefix(&partial, offset, &mut hasher)?;
    }
    let mut progress = Progress::start(&artifact.file_name, url, total, offset);
    let mut got = offset;
    let mut response = answer.response;
    loop {
        let chunk = match tokio::time::timeout(options.stall_timeout, response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => break,
            Ok(Err(e)) => {
                *progressed |= got > offset;
                file.sync_all().map_err(io_err("cannot write", &partial))?;
                return Err(DownloadError::Cut { url: url.into(), got, message: error_chain(&e) });
            }
            Err(_) => {
                *progressed |= got > offset;
                file.sync_all().map_err(io_err("cannot write", &partial))?;
                return Err(DownloadError::Cut { url: url.into(), got, message: format!("no data for {} s", options.stall_timeout.as_secs()) });
            }
        };
        got += chunk.len() as u64;
        if got > limit {
            drop(file);
            discard(&partial, &digest_file);
            return Err(match total {
                Some(expected) => DownloadError::Overlong { url: url.into(), expected },
                None => DownloadError::TooLarge { url: url.into(), size: got, max: options.max_bytes },
            });
        }
        file.write_all(&chunk).map_err(io_err("cannot write", &partial))?;
        hasher.update(&chunk);
        progress.update(got);
    }
    file.sync_all().map_err(io_err("cannot write", &partial))?;
    drop(file);
    if let Some(expected) = total.filter(|t| got < *t) {
        *progressed |= got > offset;
        progress.abandon();
        return Err(DownloadError::Cut { url: url.into(), got, message: format!("the server closed the transfer {} bytes short", expected - got) });
    }
    if let Some(expected) = artifact.size.filter(|s| got != *s) {
        discard(&partial, &digest_file);
        return Err(DownloadError::SizeMismatch { url: url.into(), got, expected });
    }
    let actual = hex::encode(hasher.finalize());
    if actual != expected {
        discard(&partial, &digest_file);
        return Err(DownloadError::DigestMismatch { url: url.into(), expected, actual });
    }
    if !is_gguf(&partial) {
        discard(&partial, &digest_file);
        return Err(DownloadError::NotGguf { url: url.into() });
    }
    std::fs::rename(&partial, dest).map_err(io_err("cannot move the downloaded file to", dest))?;
    // The rename is durable once the folder is synced; a folder that cannot be opened for it (some file systems)
    // leaves the rename as durable as the system makes it.
    if let Some(dir) = dest.parent() {
        if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
            warn!(dir = %dir.display(), error = %e, "cannot sync the model folder after the download");
        }
    }
    let _ = std::fs::remove_file(&digest_file);
    progress.finish(got);
    Ok(())
}

/// Feed the first `len` bytes of `path` (the part downloaded before) to `hasher`.
fn hash_prefix(path: &Path, len: u64, hasher: &mut Sha256) -> Result<(), DownloadError> {
    let mut f = File::open(path).map_err(io_err("cannot read", path))?.take(len);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io_err("cannot read", path))?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
    }
}

/// Remove a partial file that can never become the right one.
fn discard(partial: &Path, digest_file: &Path) {
    for p in [partial, digest_file] {
        if let Err(e) = std::fs::remove_file(p) {
            if e.kind() != std::io::ErrorKind::NotFound {
                warn!(file = %p.display(), error = %e, "cannot remove a failed download");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn digests_as_servers_publish_them() {
        let hex64 = "6fa0c02a9c302be6f977521d399b4de3a46310a4f2621ee0063747881b673f67";
        let mut h = HeaderMap::new();
        h.insert("x-linked-etag", HeaderValue::from_str(&format!("W/\"{}\"", hex64.to_uppercase())).unwrap());
        assert_eq!(published_sha256(&h).as_deref(), Some(hex64));
        let mut h = HeaderMap::new();
        h.insert("x-linked-etag", HeaderValue::from_static("\"abc\""));
        assert_eq!(published_sha256(&h), None, "an etag that is not a SHA-256 (a git blob's) is not one");
        let b64 = base64::engine::general_purpose::STANDARD.encode(hex::decode(hex64).unwrap());
        h.insert("digest", HeaderValue::from_str(&format!("md5=xyz, SHA-256={b64}")).unwrap());
        assert_eq!(published_sha256(&h).as_deref(), Some(hex64));
        let mut h = HeaderMap::new();
        h.insert(CONTENT_RANGE, HeaderValue::from_static("bytes 100-199/200"));
        assert_eq!(content_range(&h), Some((100, Some(200))));
    }
}

//! Where the local model's file comes from: `memory.search.local.modelPath` to a file or folder on this machine.
//!
//! `modelPath` takes what OpenClaw's takes (its llama.cpp plugin), besides a model folder:
//! - a path (`~` expanded): a GGUF file or a model folder, used as it is;
//! - a relative name: looked up in the model caches below (OpenClaw resolves it against its cache), then as
//!   given (from the working folder, as earlier versions of memory-rs did);
//! - `hf:<owner>/<repo>/<file>[#<revision>]` and `https://.../<file>.gguf`: the file is looked up first where
//!   OpenClaw keeps it, under the name OpenClaw gives it (`local.modelCacheDir`, then `<OpenClaw's state
//!   folder>/models/llama.cpp`; OpenClaw's default model also in node-llama-cpp's `~/.node-llama-cpp/models`),
//!   then in this project's cache (`$MEMORY_RS_CACHE/models`, else `~/.cache/memory-rs/models`), and only then
//!   downloaded (`download`) into `local.modelCacheDir` when it is set, else into this project's cache.
//!
//! Without `modelPath`, `provider: "local"` means OpenClaw's default, [`OPENCLAW_DEFAULT_MODEL`].
//!
//! A download is tried once per process: a failed one is remembered and said again without a new attempt (a
//! long-running process looks for the file on disk again, never downloads again; the next process does).

mod download;
mod hf;
mod progress;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use download::{download_blocking as download_file, DownloadError, DownloadOptions};
pub use hf::{HfFile, HF_DEFAULT_ENDPOINT, OPENCLAW_DEFAULT_MODEL};
use memory_core::config::LocalConfig;
use tracing::debug;

/// Where environment variables come from (the process, or a map in tests).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A model file on a server: what the config named, the name it is cached under and where it is downloaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// The `modelPath` value (`hf:...` or `https://...`).
    pub uri: String,
    /// The file's name in a cache folder, as OpenClaw names it.
    pub file_name: String,
    pub url: String,
    /// Known before asking the server (OpenClaw's pinned default); else the server's `Content-Length` is trusted.
    pub size: Option<u64>,
    /// Known before asking the server (OpenClaw's pinned default); else the one the server publishes is checked,
    /// and a server that publishes none is refused (as OpenClaw refuses it).
    pub sha256: Option<String>,
    /// OpenClaw's default model, which an older OpenClaw (node-llama-cpp) cached in `~/.node-llama-cpp/models`.
    pub openclaw_default: bool,
}

/// What a `modelPath` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An absolute path (after `~`): a GGUF file or a model folder.
    Path(PathBuf),
    /// A relative path: a name in the caches, else from the working folder.
    Relative(PathBuf),
    /// An `hf:` or `https:` file.
    Remote(Artifact),
}

/// Read a `modelPath` value (see the module's doc).
pub fn parse_source(spec: &str, env: Env<'_>) -> Result<Source, ModelFileError> {
    let spec = spec.trim();
    if hf::is_hf_uri(spec) {
        return hf::artifact(spec, env).map(Source::Remote).map_err(ModelFileError::Invalid);
    }
    let lower = spec.get(..8).unwrap_or("").to_ascii_lowercase();
    if lower.starts_with("https://") {
        return https_artifact(spec).map(Source::Remote);
    }
    if lower.starts_with("http://") {
        return Err(ModelFileError::Invalid(format!(
            "`{spec}` is not an https URL: a model is downloaded over HTTPS only (or from HF_ENDPOINT for hf: URIs)"
        )));
    }
    let path = memory_core::paths::expand_home_in(spec, env);
    Ok(if path.is_absolute() { Source::Path(path) } else { Source::Relative(path) })
}

/// An HTTPS model URL: its file name is the last segment of its path, which must name a GGUF file.
fn https_artifact(url: &str) -> Result<Artifact, ModelFileError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| ModelFileError::Invalid(format!("`{url}` is not a URL: {e}")))?;
    let last = parsed.path_segments().and_then(|mut s| s.next_back()).unwrap_or_default();
    let name = percent_decode(last);
    let name = name.rsplit(['/', '\\']).next().unwrap_or_default();
    if !name.to_ascii_lowercase().contains(".gguf") || name.starts_with('.') {
        return Err(ModelFileError::Invalid(format!("`{url}` does not name a GGUF file (a model URL ends in <name>.gguf)")));
    }
    Ok(Artifact { uri: url.into(), file_name: name.into(), url: url.into(), size: None, sha256: None, openclaw_default: false })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The folders a model file is looked for in, and the one it is downloaded to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    /// `local.modelCacheDir`: looked in first, and where downloads go.
    pub configured: Option<PathBuf>,
    /// OpenClaw's cache (`<state folder>/models/llama.cpp`).
    pub openclaw: Option<PathBuf>,
    /// node-llama-cpp's cache, where an older OpenClaw kept its default model.
    pub legacy: Option<PathBuf>,
    /// This project's cache: `$MEMORY_RS_CACHE/models`, else `~/.cache/memory-rs/models`.
    pub own: Option<PathBuf>,
}

impl Places {
    pub fn new(local: &LocalConfig, env: Env<'_>) -> Places {
        let configured =
            local.model_cache_dir.as_deref().map(str::trim).filter(|d| !d.is_empty()).map(|d| memory_core::paths::expand_home_in(d, env));
        let home = memory_core::paths::home_dir_in(env);
        let own = env("MEMORY_RS_CACHE")
            .filter(|c| !c.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".cache/memory-rs")))
            .map(|c| c.join("models"));
        Places {
            configured,
            openclaw: memory_core::paths::openclaw_state_dir_in(env).map(|s| s.join("models").join("llama.cpp")),
            legacy: home.map(|h| h.join(".node-llama-cpp").join("models")),
            own,
        }
    }

    /// Where a cached file is looked for, in order.
    fn lookup(&self, openclaw_default: bool) -> Vec<PathBuf> {
        let legacy = self.legacy.clone().filter(|_| openclaw_default);
        let mut dirs: Vec<PathBuf> = Vec::new();
        for dir in [self.configured.clone(), self.openclaw.clone(), legacy, self.own.clone()].into_iter().flatten() {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    }

    /// Where a download goes: the folder the user named, else this project's cache.
    fn download_dir(&self) -> Option<PathBuf> {
        self.configured.clone().or_else(|| self.own.clone()).or_else(|| self.openclaw.clone())
    }
}

/// Whether a missing model file may be downloaded now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelDownload {
    /// Download it (when `HF_HUB_OFFLINE` does not say otherwise).
    #[default]
    Allowed,
    /// Look on disk only (a stand-in looking for the file again, a command that must not download).
    Never,
    /// Look on disk only: `HF_HUB_OFFLINE` says so ([`offline`]).
    Offline,
}

/// Whether `HF_HUB_OFFLINE` (Hugging Face's switch) turns downloads off.
pub fn offline(env: Env<'_>) -> bool {
    env("HF_HUB_OFFLINE").is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// Why `modelPath` names no usable file here. Its text says what to do; the caller adds the key.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelFileError {
    #[error("{0}")]
    Invalid(String),
    #[error("`{}` is in none of {}; put it there or set memory.search.local.modelPath to the file's or folder's full path", .name.display(), list(.looked))]
    NotFound { name: PathBuf, looked: Vec<PathBuf> },
    #[error("{uri} is not on this machine (looked in {}) and {why}; {}", list(.looked), what_to_do(.dest.as_deref()))]
    NotDownloaded { uri: String, looked: Vec<PathBuf>, dest: Option<PathBuf>, why: String },
    #[error("{uri} is not on this machine (looked in {}) and downloading it failed: {source}; {}", list(.looked), what_to_do(.dest.as_deref()))]
    Download {
        uri: String,
        looked: Vec<PathBuf>,
        dest: Option<PathBuf>,
        #[source]
        source: Box<DownloadError>,
    },
}

fn list(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no folder (no home folder, MEMORY_RS_CACHE or local.modelCacheDir)".into();
    }
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn what_to_do(dest: Option<&Path>) -> String {
    let put = match dest {
        Some(d) => format!("put the file at {} (OpenClaw's downloaded copy works as it is), or ", d.display()),
        None => String::new(),
    };
    format!("{put}set memory.search.local.modelPath to a local GGUF file or model folder; searches answer by words meanwhile")
}

/// Downloads this process tried and could not finish, by destination: said again, never tried again here.
static FAILED: Mutex<BTreeMap<PathBuf, ModelFileError>> = Mutex::new(BTreeMap::new());

/// The file or folder `spec` (a `modelPath` value) names on this machine, downloading it when it is a URI not
/// cached anywhere and `download` allows (and `HF_HUB_OFFLINE` does not forbid). This is what the runtime opens: a
/// GGUF file or a model folder.
pub fn locate(spec: &str, places: &Places, env: Env<'_>, download: ModelDownload, options: &DownloadOptions) -> Result<PathBuf, ModelFileError> {
    let download = if offline(env) { ModelDownload::Offline } else { download };
    locate_source(parse_source(spec, env)?, places, download, options)
}

/// [`locate`] for a `modelPath` value already read.
pub fn locate_source(source: Source, places: &Places, download: ModelDownload, options: &DownloadOptions) -> Result<PathBuf, ModelFileError> {
    let artifact = match source {
        Source::Path(p) => return Ok(p),
        Source::Relative(rel) => {
            let mut looked: Vec<PathBuf> = places.lookup(false).iter().map(|d| d.join(&rel)).collect();
            looked.push(rel.clone());
            return looked.iter().find(|p| p.exists()).cloned().ok_or(ModelFileError::NotFound { name: rel, looked });
        }
        Source::Remote(a) => a,
    };
    let looked = places.lookup(artifact.openclaw_default);
    if let Some(found) = looked.iter().map(|d| d.join(&artifact.file_name)).find(|p| download::is_complete(p, artifact.size)) {
        debug!(uri = %artifact.uri, file = %found.display(), "local model file found");
        return Ok(found);
    }
    let dest = places.download_dir().map(|d| d.join(&artifact.file_name));
    let refused = match (&dest, download) {
        (None, _) => Some("there is no folder to download it to"),
        (_, ModelDownload::Never) => Some("it is not downloaded by this call"),
        (_, ModelDownload::Offline) => Some("downloads are off (HF_HUB_OFFLINE)"),
        (Some(_), ModelDownload::Allowed) => None,
    };
    let (Some(dest), None) = (&dest, refused) else {
        return Err(ModelFileError::NotDownloaded { uri: artifact.uri, looked, dest, why: refused.unwrap_or_default().into() });
    };
    // One download at a time in this process; a destination that failed before is not tried again.
    let mut failed = FAILED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(e) = failed.get(dest) {
        return Err(e.clone());
    }
    match download::download_blocking(&artifact, dest, options) {
        Ok(()) => Ok(dest.clone()),
        Err(source) => {
            let e = ModelFileError::Download { uri: artifact.uri, looked, dest: Some(dest.clone()), source: Box::new(source) };
            failed.insert(dest.clone(), e.clone());
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn sources_by_form() {
        let env = env_of(&[("HOME", "/home/u")]);
        assert_eq!(parse_source("~/m/e.gguf", &env).unwrap(), Source::Path("/home/u/m/e.gguf".into()));
        assert_eq!(parse_source("/models/bge", &env).unwrap(), Source::Path("/models/bge".into()));
        assert_eq!(parse_source("e.gguf", &env).unwrap(), Source::Relative("e.gguf".into()));
        let Source::Remote(a) = parse_source("https://example.com/x/My%20Model.Q8_0.gguf?download=1", &env).unwrap() else { panic!() };
        assert_eq!((a.file_name.as_str(), a.size, a.sha256), ("My Model.Q8_0.gguf", None, None));
        assert!(parse_source("https://example.com/model.bin", &env).is_err());
        assert!(parse_source("https://example.com/%2e%2e%2F.gguf", &env).is_err());
        assert!(parse_source("http://example.com/m.gguf", &env).unwrap_err().to_string().contains("https"));
    }

    #[test]
    fn places_follow_openclaw_then_this_project() {
        let env = env_of(&[("HOME", "/home/u")]);
        let p = Places::new(&LocalConfig::default(), &env);
        assert_eq!(p.openclaw.as_deref(), Some(Path::new("/home/u/.openclaw/models/llama.cpp")));
        assert_eq!(p.own.as_deref(), Some(Path::new("/home/u/.cache/memory-rs/models")));
        assert_eq!(p.download_dir(), p.own);
        assert_eq!(p.lookup(true).len(), 3);
        assert_eq!(p.lookup(false).len(), 2, "node-llama-cpp's cache holds OpenClaw's default model only");
        let env = env_of(&[("HOME", "/home/u"), ("OPENCLAW_STATE_DIR", "/srv/oc"), ("MEMORY_RS_CACHE", "/c")]);
        let p = Places::new(&LocalConfig::default(), &env);
        assert_eq!((p.openclaw.as_deref(), p.own.as_deref()), (Some(Path::new("/srv/oc/models/llama.cpp")), Some(Path::new("/c/models"))));
        let local = LocalConfig { model_cache_dir: Some("~/models".into()), ..Default::default() };
        let p = Places::new(&local, &env);
        assert_eq!(p.configured.as_deref(), Some(Path::new("/home/u/models")));
        assert_eq!(p.download_dir(), p.configured, "downloads go to the folder the user named");
        assert_eq!(p.lookup(false)[..2], [PathBuf::from("/home/u/models"), PathBuf::from("/srv/oc/models/llama.cpp")], "then OpenClaw's own");
    }
}
